//! The CPU runtime's worker threads: a fixed team that splits one kernel's output into
//! contiguous parts, one per thread.
//!
//! A kernel with enough work (see [`PAR_MIN_ELEMS`] and [`PAR_MIN_FLOPS`]) hands
//! [`Threads::for_parts`] its output as `rows` rows of `row_len` elements; the rows are cut
//! into at most [`Threads::count`] contiguous ranges (boundaries at multiples of a kernel-chosen
//! `align`) and run on a rayon pool of `count` workers: the kernel hops onto one worker, which
//! offers the other ranges to the pool, runs the last one and then takes back any range no
//! other worker has started (rayon's work stealing). So on a machine whose other cores are busy
//! a split kernel costs one hop, not a wait for a worker the OS has not scheduled (handing the
//! ranges from the calling thread, outside the pool, waited for one: two threads ran the
//! digits MLP at half the speed of one while other processes held the second core). Every
//! output element is written by exactly one part, computed from the same inputs
//! in the same order whichever part holds it, so for a fixed thread count an output is
//! bit-identical run to run (no reduction is split over its reduced axis, no atomics).
//! Whether it is also bit-identical across thread counts is up to each kernel (see
//! [`crate::gemm`]); the elementwise maps and reductions are, because an element's value
//! never depends on which part computes it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::RuntimeError;

/// Elements (a map's outputs, a reduction's inputs) below which an elementwise map or
/// reduction stays on the calling thread: 1 Mi f32 (4 MiB) is hundreds of microseconds of
/// memory traffic, well above what a split costs (waking the pool's workers took about 50
/// microseconds per kernel on the 2-core VM the benchmarks ran on; at 32 Ki the digits MLP's
/// unfused maps, 57.6 Ki elements, ran slower on two threads than on one).
pub const PAR_MIN_ELEMS: usize = 1 << 20;

/// GEMM work (FLOP, `2·m·n·k`) below which a product stays on the calling thread: about
/// 130 microseconds at 130 GFLOP/s. Measured (`examples/gemm_choice.rs`): 450x64x128 (7.4
/// MFLOP) ran at half its one-thread speed when split over two threads (the wake-up of the
/// pool, about 50 microseconds, against 55 of work), 4096x64x128 (67 MFLOP) 1.5 times faster.
pub const PAR_MIN_FLOPS: usize = 1 << 24;

/// A team of worker threads (see the module docs). Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct Threads {
    count: usize,
    // `count` workers; None when count is 1 (everything runs on the calling thread).
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
        Self { count: 1, pool: None }
    }

    /// A team of `requested` threads (`None` = every core `std::thread::available_parallelism`
    /// reports, 1 if it reports nothing): a pool of that many workers (none for 1), shared by
    /// every team of that size in the process and kept until it exits.
    ///
    /// # Errors
    /// [`RuntimeError::Threads`] for `Some(0)` or when the pool's threads cannot be spawned.
    pub fn new(requested: Option<usize>) -> Result<Self, RuntimeError> {
        let count = match requested {
            Some(0) => return Err(RuntimeError::Threads("a team needs at least 1 thread".into())),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if count == 1 {
            return Ok(Self::single());
        }
        // One pool per team size for the whole process (like rayon's global pool): preparing
        // a program (the search prepares every candidate) spawns no threads after the first.
        static POOLS: Mutex<BTreeMap<usize, Arc<rayon::ThreadPool>>> = Mutex::new(BTreeMap::new());
        let mut pools = POOLS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(pool) = pools.get(&count) {
            return Ok(Self { count, pool: Some(Arc::clone(pool)) });
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(count)
            .thread_name(|i| format!("lumen-cpu-{i}"))
            .build()
            .map_err(|e| RuntimeError::Threads(e.to_string()))?;
        let pool = Arc::new(pool);
        pools.insert(count, Arc::clone(&pool));
        Ok(Self { count, pool: Some(pool) })
    }

    /// Threads in the team, the caller included (at least 1).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Runs `f` on one of the pool's workers (on the calling thread for a team of 1), so that
    /// rayon work `f` starts (the `gemm` crate's `Parallelism::Rayon`) runs on this team.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
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
        let pool = match &self.pool {
            Some(pool) if parallel => pool,
            _ => return f(0..rows, out),
        };
        let parts = self.parts(rows, align);
        if parts.len() <= 1 {
            return f(0..rows, out);
        }
        // Cut `out` into the parts' slices.
        let mut slices = Vec::with_capacity(parts.len());
        let mut rest = out;
        for r in &parts {
            let (head, tail) = rest.split_at_mut((r.end - r.start) * row_len);
            slices.push((r.clone(), head));
            rest = tail;
        }
        let mut results: Vec<Option<Result<(), E>>> = (0..parts.len()).map(|_| None).collect();
        let (last_result, first_results) = results.split_last_mut().expect("two or more parts");
        let (last, first) = slices.split_last_mut().expect("two or more parts");
        let f = &f;
        // On a worker, the scope's wait runs (or takes back) the parts no other worker took.
        pool.install(|| {
            rayon::in_place_scope(|s| {
                for ((r, slice), result) in first.iter_mut().zip(first_results.iter_mut()) {
                    let r = r.clone();
                    s.spawn(move |_| *result = Some(f(r, slice)));
                }
                *last_result = Some(f(last.0.clone(), last.1));
            })
        });
        results.into_iter().flatten().collect()
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
