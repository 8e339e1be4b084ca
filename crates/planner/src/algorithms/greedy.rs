//! Greedy placement of buffers in a given order: each buffer goes into a gap between the already
//! placed buffers it conflicts with. The order and the gap rule make the classic heuristics:
//! request order + first fit is Luminal's `plan_slab`; size-descending + best fit is TFLite's
//! arena planner and XLA's `GlobalDecreasingSizeBestFitHeap`; lifetime-descending + best fit is
//! XLA's temporal sort.

use super::conflicts::Conflicts;
use super::occupancy::Occupancy;

/// Which gap a buffer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The lowest gap it fits in.
    First,
    /// The smallest gap it fits in (lowest on ties); above everything when no gap between
    /// placed buffers is large enough.
    Best,
}

/// Reusable scratch for [`Greedy::place`], so repeated decodes (local search) do not allocate.
#[derive(Debug, Default)]
pub(crate) struct Greedy {
    occupancy: Occupancy,
}

impl Greedy {
    /// Places `order` (buffer indices; each once) into `offsets` (indexed by buffer). Stops at
    /// the first buffer whose end would pass `limit` and returns it as `Err(buffer)`; returns
    /// the slab (highest end) otherwise. Offsets cannot overflow when the sum of `reserved`
    /// fits in `usize` (every end is at most the sum of the sizes placed so far).
    pub(crate) fn place(
        &mut self,
        conflicts: &Conflicts,
        reserved: &[usize],
        order: &[u32],
        fit: Fit,
        limit: usize,
        offsets: &mut [usize],
    ) -> Result<usize, usize> {
        self.occupancy.reset(conflicts);
        let mut slab = 0usize;
        for &i in order {
            let i = i as usize;
            // An output marked in place takes its operand's bytes whenever nothing else is
            // there (the bytes are dead after the op anyway); otherwise the gap rule.
            let offset = match (self.occupancy.in_place(conflicts, reserved, i), fit) {
                (Some(y), _) => y,
                (None, Fit::First) => self.occupancy.first_fit(conflicts, reserved, i),
                (None, Fit::Best) => self.occupancy.best_fit(conflicts, reserved, i),
            };
            let end = offset + reserved[i];
            if end > limit {
                return Err(i);
            }
            offsets[i] = offset;
            self.occupancy.insert(conflicts, i, offset, reserved[i]);
            slab = slab.max(end);
        }
        Ok(slab)
    }
}

/// Reusable scratch for [`Lowest::place`].
#[derive(Debug, Default)]
pub(crate) struct Lowest {
    placed: Vec<bool>,
    /// Per buffer: a lower bound on the start of its lowest gap (exact unless `stale`).
    low: Vec<usize>,
    stale: Vec<bool>,
    occupancy: Occupancy,
    neighbors: Vec<u32>,
}

impl Lowest {
    /// Bottom-left greedy: repeatedly places, of all unplaced buffers, the one whose lowest gap
    /// (first fit among its placed neighbours) starts lowest, ties by size descending then
    /// request index
    /// (Baker, Coffman and Rivest's bottom-left rule for strip packing, 1980; on intervals it
    /// builds MiniMalloc's gravity-packed canonical form bottom-up). Writes `offsets` (by
    /// buffer) and the placement `order`, which first fit in that order decodes to the same
    /// plan; returns the slab in bytes.
    ///
    /// Lowest gaps only rise as buffers are placed, so they are kept lazily in a heap: placing
    /// `j` over `[o, e)` raises every neighbour whose lowest gap meets that range to `e` and
    /// marks it stale; a stale buffer reaching the top of the heap is recomputed and pushed
    /// again if it rose. About two decodes' work: each buffer scans its neighbours when placed
    /// and when recomputed, which is rarely more than once.
    pub(crate) fn place(
        &mut self,
        conflicts: &Conflicts,
        reserved: &[usize],
        offsets: &mut [usize],
        order: &mut Vec<u32>,
    ) -> usize {
        use std::cmp::Reverse;
        let n = reserved.len();
        self.placed.clear();
        self.placed.resize(n, false);
        self.low.clear();
        self.low.resize(n, 0);
        self.stale.clear();
        self.stale.resize(n, false);
        self.occupancy.reset(conflicts);
        order.clear();
        let mut heap: std::collections::BinaryHeap<Reverse<(usize, Reverse<usize>, usize)>> =
            (0..n).map(|i| Reverse((0, Reverse(reserved[i]), i))).collect();
        let mut slab = 0usize;
        while let Some(Reverse((at, k, i))) = heap.pop() {
            if self.placed[i] || at != self.low[i] {
                continue;
            }
            if self.stale[i] {
                self.stale[i] = false;
                let gap = self.occupancy.first_fit(conflicts, reserved, i);
                if gap > at {
                    self.low[i] = gap;
                    heap.push(Reverse((gap, k, i)));
                    continue;
                }
            }
            let end = at + reserved[i];
            offsets[i] = at;
            self.placed[i] = true;
            self.occupancy.insert(conflicts, i, at, reserved[i]);
            order.push(i as u32);
            slab = slab.max(end);
            conflicts.neighbors_into(i, &mut self.neighbors);
            for &j in &self.neighbors {
                let j = j as usize;
                // Its lowest gap met [at, end): no gap for it starts below `end` now.
                if !self.placed[j] && self.low[j] < end && at < self.low[j] + reserved[j] {
                    self.low[j] = end;
                    self.stale[j] = true;
                    heap.push(Reverse((end, Reverse(reserved[j]), j)));
                }
            }
        }
        slab
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{Reachability, SlabBuffer};

    /// Lowest offset where `size` bytes fit between the sorted `busy` ranges.
    fn first_gap(busy: &[(usize, usize)], size: usize) -> usize {
        let mut candidate = 0usize;
        for &(start, end) in busy {
            if candidate + size <= start {
                break;
            }
            candidate = candidate.max(end);
        }
        candidate
    }

    /// A DAG over `n` nodes (node ids taken modulo `n`, edges only from lower to higher index)
    /// and buffers on it.
    fn problem(
        n: usize,
        edges: &[(usize, usize)],
        bufs: &[(usize, Vec<usize>)],
    ) -> (Reachability, Vec<SlabBuffer>) {
        let (dag, buffers) = crate::test_dag::dag_and_buffers(n, edges, bufs.iter().cloned());
        (Reachability::new(&dag).unwrap(), buffers)
    }

    proptest! {
        /// The lazy heap places exactly what the rule says, recomputed from scratch each step
        /// with the closure's own `conflicts`; first fit in its placement order decodes the
        /// same plan.
        #[test]
        fn bottom_left_is_the_rule_and_a_first_fit_decode(
            n in 1usize..14,
            edges in prop::collection::vec((0usize..14, 0usize..14), 0..30),
            bufs in prop::collection::vec(
                (prop_oneof![1usize..5, 1usize..40], prop::collection::vec(0usize..14, 1..=3)),
                0..24,
            ),
        ) {
            let (reach, buffers) = problem(n, &edges, &bufs);
            let reserved: Vec<usize> = bufs.iter().map(|b| b.0).collect();
            let conflicts = Conflicts::new(&reach, &buffers).unwrap();
            let m = buffers.len();
            let mut offsets = vec![0; m];
            let mut order = Vec::new();
            let slab = Lowest::default().place(&conflicts, &reserved, &mut offsets, &mut order);

            let mut want = vec![0usize; m];
            let mut placed: Vec<usize> = Vec::new();
            for _ in 0..m {
                let next = (0..m)
                    .filter(|i| !placed.contains(i))
                    .map(|i| {
                        let mut busy: Vec<(usize, usize)> = placed
                            .iter()
                            .filter(|&&j| reach.conflicts(&buffers[i].uses, &buffers[j].uses))
                            .map(|&j| (want[j], want[j] + reserved[j]))
                            .collect();
                        busy.sort_unstable();
                        (first_gap(&busy, reserved[i]), std::cmp::Reverse(reserved[i]), i)
                    })
                    .min();
                let Some((gap, _, i)) = next else { break };
                want[i] = gap;
                placed.push(i);
            }
            let order_usize: Vec<usize> = order.iter().map(|&i| i as usize).collect();
            prop_assert_eq!(&order_usize, &placed);
            prop_assert_eq!(&offsets, &want);
            let top = (0..m).map(|i| want[i] + reserved[i]).max().unwrap_or(0);
            prop_assert_eq!(slab, top);

            let mut decoded = vec![0; m];
            let first = Greedy::default().place(
                &conflicts, &reserved, &order, Fit::First, usize::MAX, &mut decoded,
            );
            prop_assert_eq!(first, Ok(slab));
            prop_assert_eq!(&decoded, &want);
        }
    }
}
