//! Independent check of a plan, from any algorithm or from a file.
//!
//! It shares no code with placement: instead of asking, for each request, which earlier requests
//! it conflicts with (first fit's question), it sweeps the plan's byte ranges in offset order and
//! asks, for each range, whether it shares bytes with an open range of a conflicting buffer,
//! from facts of the closure alone:
//!
//! - buffers whose rank spans (lowest and highest topological rank of their uses) overlap
//!   always conflict; the open ranges are kept as Fenwick trees over their span endpoints, so
//!   each new range counts the open ones whose span meets its own in `O(log n)`;
//! - buffers with disjoint spans conflict only when the earlier does not reach the later, which
//!   the closure settles for any later buffer starting at or past the earlier one's frontier
//!   (the rank from which every node is reached from all its uses); so only open ranges inside
//!   that window are tested with the closure's `precedes`, found through ordered sets (and a
//!   Fenwick count) over their spans and frontiers. On interval problems the window is empty.
//!
//! A valid plan costs `O(n log n)` plus the window tests; a rejected one `O(n)` more to name
//! the lowest pair. The closure test of every byte-sharing pair, which this replaces, was
//! `O(n^2)` for a plan that reuses bytes well and stays as the tests' oracle.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use petgraph::graph::DiGraph;

use crate::lower_bound::{antichain_of, interval_peak, interval_spans};
use crate::order::BufferOrder;
use crate::{
    PlanError, Reachability, SlabBuffer, SlabOptions, SlabPlan, VerifyError, reserved_bytes,
};

/// Checks `plan` against `buffers` and `options`, in this order: the input is valid (as for
/// [`crate::plan_slab`]); there is one offset and one reserved size per buffer; each reserved
/// size is `round_up(max(bytes, 1), alignment)`; every offset is a multiple of the alignment;
/// every end (`offset + reserved`, bytes) is within the capacity; `slab_bytes` and `naive_bytes`
/// match the offsets; no two buffers that conflict (neither precedes the other) share a byte.
///
/// Last, the reported `lower_bound` must equal the exact one ([`crate::lower_bound()`]).
///
/// Cost: `O(n log n)` on interval problems (the used nodes lie on one path); on other DAGs the
/// same plus a closure test of each byte-sharing pair inside a frontier window, and the lower
/// bound's `n^2`-bit order.
///
/// # Errors
/// The first [`VerifyError`] found, naming the offending buffer or pair: [`VerifyError::Plan`]
/// for invalid input, [`VerifyError::Length`], [`VerifyError::ReservedLength`], [`VerifyError::Reserved`],
/// [`VerifyError::Misaligned`], [`VerifyError::OutOfBounds`], [`VerifyError::Totals`],
/// [`VerifyError::Overlap`] (the pair with the lowest request indices among those found first in
/// offset order), [`VerifyError::LowerBound`].
pub fn verify<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    plan: &SlabPlan,
    options: &SlabOptions,
) -> Result<(), VerifyError> {
    check(dag, buffers, plan, options, Sweep::Auto)
}

/// Which overlap test and lower bound [`check`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sweep {
    /// The span sweep, and the peak-load lower bound when the closure among the used nodes is
    /// a total order.
    Auto,
    /// The reference: the closure test of every byte-sharing pair and the min-flow lower
    /// bound; the tests compare the two.
    #[cfg_attr(not(test), allow(dead_code))]
    General,
}

/// [`verify`], with the overlap test and lower bound chosen by `sweep`.
pub(crate) fn check<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    plan: &SlabPlan,
    options: &SlabOptions,
    sweep: Sweep,
) -> Result<(), VerifyError> {
    let (reach, _) = crate::slab::validate(dag, buffers, options.alignment)?;
    let n = buffers.len();
    if plan.offsets.len() != n {
        return Err(VerifyError::Length { offsets: plan.offsets.len(), buffers: n });
    }
    if plan.reserved.len() != n {
        return Err(VerifyError::ReservedLength { reserved: plan.reserved.len(), buffers: n });
    }

    let mut ends = Vec::with_capacity(n);
    for ((buf, &offset), &reserved) in buffers.iter().zip(&plan.offsets).zip(&plan.reserved) {
        let expected = reserved_bytes(buf.bytes, options.alignment)?;
        if reserved != expected {
            return Err(VerifyError::Reserved { id: buf.id.clone(), reserved, expected });
        }
        if offset % options.alignment != 0 {
            return Err(VerifyError::Misaligned {
                id: buf.id.clone(),
                offset,
                alignment: options.alignment,
            });
        }
        let end =
            offset.checked_add(reserved).ok_or(PlanError::TotalOverflow { total: "slab_bytes" })?;
        if let Some(limit) = options.capacity.filter(|&cap| end > cap) {
            return Err(VerifyError::OutOfBounds { id: buf.id.clone(), end, limit });
        }
        ends.push(end);
    }

    let slab = ends.iter().copied().max().unwrap_or(0);
    if plan.slab_bytes != slab {
        return Err(VerifyError::Totals {
            field: "slab_bytes",
            reported: plan.slab_bytes,
            actual: slab,
        });
    }
    let naive = crate::slab::naive_total(&plan.reserved)?;
    if plan.naive_bytes != naive {
        return Err(VerifyError::Totals {
            field: "naive_bytes",
            reported: plan.naive_bytes,
            actual: naive,
        });
    }

    let clash = match sweep {
        Sweep::Auto => first_clash(&reach, buffers, &plan.offsets, &ends),
        Sweep::General => first_overlap(&reach, buffers, &plan.offsets, &ends),
    };
    let spans =
        (sweep == Sweep::Auto && reach.is_total_order()).then(|| interval_spans(&reach, buffers));
    if let Some((a, b)) = clash {
        return Err(VerifyError::Overlap {
            a: buffers[a].id.clone(),
            a_start: plan.offsets[a],
            a_end: ends[a],
            b: buffers[b].id.clone(),
            b_start: plan.offsets[b],
            b_end: ends[b],
        });
    }

    let exact = match &spans {
        Some(spans) => interval_peak(spans, &plan.reserved)?,
        None => antichain_of(&BufferOrder::new(&reach, buffers)?, &plan.reserved)?.weight,
    };
    if plan.lower_bound != exact {
        return Err(VerifyError::LowerBound { reported: plan.lower_bound, exact });
    }
    Ok(())
}

/// The offending pair `(a, b)`, `a < b` request indices, of two buffers that share bytes and
/// conflict, or `None`. Byte ranges `offsets[i]..ends[i]` are swept by `(start, index)`; the
/// pair reported is the lowest among those of the first range, in that order, that meets an
/// earlier conflicting range still open at its start.
fn first_overlap(
    reach: &Reachability,
    buffers: &[SlabBuffer],
    offsets: &[usize],
    ends: &[usize],
) -> Option<(usize, usize)> {
    // Sweep byte ranges by start; `open` holds the ranges that still cover the current start.
    let mut by_start: Vec<usize> = (0..buffers.len()).collect();
    by_start.sort_by_key(|&i| (offsets[i], i));
    let mut open: Vec<usize> = Vec::new();
    for &i in &by_start {
        let start = offsets[i];
        open.retain(|&j| ends[j] > start);
        let mut clash: Option<(usize, usize)> = None;
        for &j in &open {
            // A marked in-place pair at one offset is the one legal overlap of conflicting
            // buffers.
            let in_place = (buffers[i].in_place_of == Some(j) || buffers[j].in_place_of == Some(i))
                && offsets[i] == offsets[j];
            if !in_place && reach.conflicts(&buffers[i].uses, &buffers[j].uses) {
                let pair = (i.min(j), i.max(j));
                clash = Some(clash.map_or(pair, |c| c.min(pair)));
            }
        }
        if clash.is_some() {
            return clash;
        }
        open.push(i);
    }
    None
}

/// [`first_overlap`]'s pair, found from spans and frontiers: buffers `i` and `j` conflict when
/// their closed rank spans overlap, or, spans disjoint with `a` the earlier, when `b` starts
/// before `a`'s frontier and `a` does not precede it by the closure. The same sweep and pair.
///
/// An open span `[lo_j, hi_j]` meets `[lo_i, hi_i]` iff `lo_j <= hi_i` and not `hi_j < lo_i`;
/// the spans with `hi_j < lo_i` all have `lo_j <= hi_i`, so the open ones meeting it number
/// `#(lo_j <= hi_i) - #(hi_j < lo_i)`, two prefix sums. The earlier open buffers whose window
/// holds `lo_i` number `#(hi_j < lo_i) - #(front_j <= lo_i)` (a frontier is past its span).
/// Ranges close (leave every structure) through a heap of ends once the sweep passes them.
fn first_clash(
    reach: &Reachability,
    buffers: &[SlabBuffer],
    offsets: &[usize],
    ends: &[usize],
) -> Option<(usize, usize)> {
    let n = buffers.len();
    // Half ranks (see `interval_spans`): an in-place pair's spans part at its op.
    let spans = interval_spans(reach, buffers);
    let fronts: Vec<u64> = buffers
        .iter()
        .map(|b| 2 * u64::from(b.uses.iter().map(|&u| reach.frontier(u)).max().unwrap_or(u32::MAX)))
        .collect();
    // A marked pair shares bytes legally at one offset only (the output inside the operand is
    // checked with the input); anywhere else it is a conflict like any other.
    let marked = |a: usize, b: usize| buffers.get(a).is_some_and(|x| x.in_place_of == Some(b));
    let allowed =
        |a: usize, b: usize| (marked(a, b) || marked(b, a)) && offsets.get(a) == offsets.get(b);
    // Ranks compressed to their position among the distinct endpoints and frontiers.
    let mut ranks: Vec<u64> =
        spans.iter().zip(&fronts).flat_map(|(&(lo, hi), &f)| [lo, hi, f]).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let at = |r: u64| ranks.partition_point(|&x| x < r);

    let mut by_start: Vec<usize> = (0..n).collect();
    by_start.sort_by_key(|&i| (offsets.get(i).copied().unwrap_or(0), i));
    let mut open_lo = Fenwick::new(ranks.len());
    let mut open_hi = Fenwick::new(ranks.len());
    let mut open_front = Fenwick::new(ranks.len());
    let mut by_lo: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut by_hi: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut closing: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for &i in &by_start {
        let start = offsets.get(i).copied().unwrap_or(0);
        while let Some(&Reverse((end, j))) = closing.peek() {
            if end > start {
                break;
            }
            closing.pop();
            let (lo, hi) = spans[j];
            open_lo.remove(at(lo));
            open_hi.remove(at(hi));
            open_front.remove(at(fronts[j]));
            by_lo.remove(&(lo, j));
            by_hi.remove(&(hi, j));
        }
        let (lo, hi) = spans[i];
        let meeting = open_lo.count_below(at(hi) + 1).saturating_sub(open_hi.count_below(at(lo)));
        // Later open buffers inside this one's window, then earlier ones whose window holds it.
        let later = || {
            by_lo.range((hi.saturating_add(1), 0)..(fronts[i], 0)).any(|&(_, j)| {
                !allowed(i, j) && !reach.precedes(&buffers[i].uses, &buffers[j].uses)
            })
        };
        let earlier = || {
            // Exactly this many are in the window: stop once they are all tested.
            let mut left = open_hi.count_below(at(lo)) - open_front.count_below(at(lo) + 1);
            for &(_, j) in by_hi.range(..(lo, 0)).rev() {
                if left == 0 {
                    break;
                }
                if fronts[j] > lo {
                    left -= 1;
                    if !allowed(i, j) && !reach.precedes(&buffers[j].uses, &buffers[i].uses) {
                        return true;
                    }
                }
            }
            false
        };
        if meeting > 0 || later() || earlier() {
            // Rare (once per rejected plan): keep the lowest pair among the open ranges, as
            // the reference sweep does.
            return by_lo
                .iter()
                .map(|&(_, j)| j)
                .filter(|&j| !allowed(i, j) && reach.conflicts(&buffers[i].uses, &buffers[j].uses))
                .map(|j| (i.min(j), i.max(j)))
                .min();
        }
        open_lo.add(at(lo));
        open_hi.add(at(hi));
        open_front.add(at(fronts[i]));
        by_lo.insert((lo, i));
        by_hi.insert((hi, i));
        closing.push(Reverse((ends.get(i).copied().unwrap_or(0), i)));
    }
    None
}

/// Counts of open intervals per compressed endpoint, with prefix sums in `O(log n)` (Fenwick,
/// "A new data structure for cumulative frequency tables", 1994).
struct Fenwick(Vec<usize>);

impl Fenwick {
    fn new(len: usize) -> Self {
        Self(vec![0; len + 1])
    }

    fn add(&mut self, key: usize) {
        let mut k = key + 1;
        while let Some(c) = self.0.get_mut(k) {
            *c += 1;
            k += k & k.wrapping_neg();
        }
    }

    /// Undoes one earlier [`Fenwick::add`] of `key`.
    fn remove(&mut self, key: usize) {
        let mut k = key + 1;
        while let Some(c) = self.0.get_mut(k) {
            *c = c.saturating_sub(1);
            k += k & k.wrapping_neg();
        }
    }

    /// How many added keys are `< key`.
    fn count_below(&self, key: usize) -> usize {
        let mut k = key.min(self.0.len().saturating_sub(1));
        let mut sum = 0;
        while k > 0 {
            sum += self.0[k];
            k &= k - 1;
        }
        sum
    }
}
