//! The CPU runtime's worker threads: a fixed team that splits one kernel's output into
//! contiguous parts, one per thread.
//!
//! A kernel with enough work (see [`PAR_MIN_ELEMS`] and [`PAR_MIN_FLOPS`]) hands
//! [`Threads::for_parts`] its output as `rows` rows of `row_len` elements; the rows are cut
//! into at most [`Threads::count`] contiguous ranges (boundaries at multiples of a kernel-chosen
//! `align`) and run on a [`Team`]: the calling thread and `count - 1` workers claim ranges from
//! one counter, so on a machine whose other cores are busy the caller runs the ranges no worker
//! has claimed instead of waiting for a worker the OS has not scheduled (an earlier version that
//! handed each range to a fixed thread ran the digits MLP on two threads at half the speed of
//! one while other processes held the second core). The workers spin between kernels rather
//! than sleep ([`crate::team`] says why, and for how long). The `gemm` crate's own threading
//! (an unpacked product with few rows, [`Threads::install`]) runs on a rayon pool of `count`
//! workers instead. Every output element is written by exactly one part, computed from the
//! same inputs in the same order whichever part holds it, so for a fixed thread count an
//! output is bit-identical run to run (no reduction is split over its reduced axis, no atomics).
//! Whether it is also bit-identical across thread counts is up to each kernel (see
//! [`crate::gemm`]); the elementwise maps and reductions are, because an element's value
//! never depends on which part computes it.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::RuntimeError;
use crate::team::Team;

/// Elements (a map's outputs, a reduction's inputs) below which an elementwise map or
/// reduction stays on the calling thread: 128 Ki f32 (512 KiB), tens of microseconds of memory
/// traffic, against a few microseconds for a split on the spinning [`Team`]. Measured (paired
/// rounds, 2 threads, against 1 Mi): the unfused digits MLP at batch 4096 (maps of 512 Ki,
/// 256 Ki and 40 Ki outputs) took 0.74 of the time; an unfused 512x2048x512 linear-relu 1.04
/// (noise). With a sleeping rayon pool (a wake-up took about 50 microseconds) 32 Ki had run
/// slower on two threads than on one.
pub const PAR_MIN_ELEMS: usize = 1 << 17;

/// Work (elements) per part at least when a map, a reduction or a copy is split: half of
/// [`PAR_MIN_ELEMS`], so a large team cuts a map into parts worth a hand-off, not one part per
/// thread whatever its size (1,024 threads cut a 128 Ki-element map of 1,024 rows into 1,024
/// parts).
pub const PAR_MIN_PART_ELEMS: usize = PAR_MIN_ELEMS / 2;

/// GEMM work (FLOP, `2·m·n·k`) below which a product stays on the calling thread: about
/// 15 microseconds at 130 GFLOP/s. Measured (paired rounds of `lumen run`, 2 threads, fused
/// digits MLP) against 16 Mi FLOP, the threshold while the workers were a sleeping rayon pool:
/// batch 450 (two 7.4 MFLOP layers, now split) took 0.84 of the time, batch 4096 (its last
/// layer, 5.2 MFLOP, now split) 0.87; 1 Mi FLOP was no better than 2 Mi (1.01 to 1.02, noise).
pub const PAR_MIN_FLOPS: usize = 1 << 21;

/// A team of worker threads (see the module docs). Cloning shares the team.
#[derive(Debug, Clone)]
pub struct Threads {
    count: usize,
    // `count - 1` spinning workers beside the caller; None when count is 1.
    team: Option<Arc<Team>>,
    // `count` rayon workers for the `gemm` crate's own threading; None when count is 1.
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl Default for Threads {
    /// The calling thread alone.
    fn default() -> Self {
        Self::single()
    }
}

impl Threads {
    /// The calling thread alone: no pool.
    pub fn single() -> Self {
        Self { count: 1, team: None, pool: None }
    }

    /// [`Threads::with_wait`] with spinning workers.
    ///
    /// # Errors
    /// As [`Threads::with_wait`].
    pub fn new(requested: Option<usize>) -> Result<Self, RuntimeError> {
        Self::with_wait(requested, true)
    }

    /// A team of `requested` threads (`None` = every core `std::thread::available_parallelism`
    /// reports, 1 if it reports nothing): `requested - 1` workers and a rayon pool of
    /// `requested` (neither for 1), kept until the process exits: the workers shared by every
    /// team of that size and wait policy, the pool by every team of that size. With `spin` the
    /// workers spin between kernels ([`crate::team`]); without, they sleep as soon as they find
    /// no work.
    ///
    /// # Errors
    /// [`RuntimeError::Threads`] for `Some(0)` or when a thread cannot be spawned.
    pub fn with_wait(requested: Option<usize>, spin: bool) -> Result<Self, RuntimeError> {
        let count = match requested {
            Some(0) => return Err(RuntimeError::Threads("a team needs at least 1 thread".into())),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if count == 1 {
            return Ok(Self::single());
        }
        // One team per size and wait policy, one rayon pool per size (the wait policy is the
        // team's alone), for the whole process (like rayon's global pool): preparing a program
        // (the search prepares every candidate) spawns no threads after the first.
        static TEAMS: Mutex<BTreeMap<(usize, bool), Arc<Team>>> = Mutex::new(BTreeMap::new());
        static POOLS: Mutex<BTreeMap<usize, Arc<rayon::ThreadPool>>> = Mutex::new(BTreeMap::new());
        let spawn_error = |e: &dyn std::fmt::Display| RuntimeError::Threads(e.to_string());
        let team = match TEAMS.lock().unwrap_or_else(|p| p.into_inner()).entry((count, spin)) {
            Entry::Occupied(e) => Arc::clone(e.get()),
            Entry::Vacant(e) => {
                let team = Team::new(count - 1, spin).map_err(|e| spawn_error(&e))?;
                Arc::clone(e.insert(Arc::new(team)))
            }
        };
        let pool = match POOLS.lock().unwrap_or_else(|p| p.into_inner()).entry(count) {
            Entry::Occupied(e) => Arc::clone(e.get()),
            Entry::Vacant(e) => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(count)
                    .thread_name(|i| format!("lumen-gemm-{i}"))
                    .build()
                    .map_err(|e| spawn_error(&e))?;
                Arc::clone(e.insert(Arc::new(pool)))
            }
        };
        Ok(Self { count, team: Some(team), pool: Some(pool) })
    }

    /// Threads in the team, the caller included (at least 1).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Runs `f` on one of the rayon pool's workers (on the calling thread for a team of 1), so
    /// that rayon work `f` starts (the `gemm` crate's `Parallelism::Rayon`) runs on `count`
    /// threads; the team's spinning workers are sent to sleep first.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => {
                // The team's spinning workers would take cores from the pool's.
                if let Some(team) = &self.team {
                    team.park();
                }
                pool.install(f)
            }
            None => f(),
        }
    }

    /// The team's parts of `rows` rows when each part must start at a multiple of `align`
    /// rows (the last part takes the remainder): at most [`Self::count`] contiguous ranges
    /// covering `0..rows` in order, as even as `align` allows, none empty (none at all when
    /// `rows` is 0).
    pub fn parts(&self, rows: usize, align: usize) -> Vec<Range<usize>> {
        let align = align.max(1);
        let units = rows.div_ceil(align);
        let n = self.count.min(units).max(1);
        (0..n)
            .map(|p| ((units * p / n) * align).min(rows)..((units * (p + 1) / n) * align).min(rows))
            .filter(|r| !r.is_empty())
            .collect()
    }

    /// Runs `f(rows, out_part)` on each part of `out` (`rows` rows of `row_len` elements,
    /// row-major) from [`Self::parts`]: in parallel when `parallel` and the team has more than
    /// one thread and there is more than one part, else once on the calling thread over all
    /// rows. `f`'s result for a part must depend only on its row range (see the module docs).
    ///
    /// # Errors
    /// The first error any part returns, in part order.
    pub fn for_parts<E: Send>(
        &self,
        out: &mut [f32],
        (rows, row_len): (usize, usize),
        align: usize,
        parallel: bool,
        f: impl Fn(Range<usize>, &mut [f32]) -> Result<(), E> + Sync,
    ) -> Result<(), E> {
        if !parallel || self.team.is_none() {
            return f(0..rows, out);
        }
        let parts = self.parts(rows, align);
        if parts.len() <= 1 {
            return f(0..rows, out);
        }
        // Cut `out` into the parts' slices; each part takes its own.
        let mut slices = Vec::with_capacity(parts.len());
        let mut rest = out;
        for r in &parts {
            let (head, tail) = rest.split_at_mut((r.end - r.start) * row_len);
            slices.push(Mutex::new(Some((r.clone(), head))));
            rest = tail;
        }
        self.run_parts(parts.len(), |p| {
            let taken = slices[p].lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            let (r, slice) = taken.expect("each part runs once");
            f(r, slice)
        })
    }

    /// Runs `f(0) .. f(parts - 1)` on the team (on the calling thread alone for a team of 1),
    /// each exactly once, and returns when all have finished.
    ///
    /// # Errors
    /// The first error any part returns, in part order.
    pub fn run_parts<E: Send>(
        &self,
        parts: usize,
        f: impl Fn(usize) -> Result<(), E> + Sync,
    ) -> Result<(), E> {
        let Some(team) = self.team.as_ref().filter(|_| parts > 1) else {
            return (0..parts).try_for_each(f);
        };
        let results: Vec<Mutex<Option<Result<(), E>>>> =
            (0..parts).map(|_| Mutex::new(None)).collect();
        team.run(parts, &|p| {
            let r = f(p);
            *results[p].lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(r);
        });
        results
            .into_iter()
            .filter_map(|r| r.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_rows_in_order_at_the_alignment() {
        let t = Threads::new(Some(3)).unwrap();
        assert_eq!(t.parts(10, 1), vec![0..3, 3..6, 6..10]);
        assert_eq!(t.parts(10, 4), vec![0..4, 4..8, 8..10]);
        assert_eq!(t.parts(5, 4), vec![0..4, 4..5]);
        assert_eq!(t.parts(1, 1), vec![0..1]);
        assert!(t.parts(0, 1).is_empty());
        assert_eq!(Threads::single().parts(7, 2), vec![0..7]);
        assert!(Threads::new(Some(0)).is_err());
    }

    #[test]
    fn for_parts_writes_each_row_once() {
        let t = Threads::new(Some(2)).unwrap();
        let mut out = vec![0.0f32; 9 * 4];
        t.for_parts::<()>(&mut out, (9, 4), 2, true, |rows, part| {
            for (i, row) in rows.zip(part.chunks_exact_mut(4)) {
                row.iter_mut().for_each(|v| *v += i as f32);
            }
            Ok(())
        })
        .unwrap();
        let want: Vec<f32> = (0..9).flat_map(|i| [i as f32; 4]).collect();
        assert_eq!(out, want);
        let err = t.for_parts(&mut out, (9, 4), 1, true, |rows, _| Err(rows.start)).unwrap_err();
        assert_eq!(err, 0);
    }
}
