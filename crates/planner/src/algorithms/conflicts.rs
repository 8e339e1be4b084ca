//! The interference relation: which buffers conflict (neither precedes the other), in space
//! that follows the problem, not its square.
//!
//! Each buffer's uses have a *span*, the lowest and highest rank of its uses in the closure's
//! topological order. Overlapping spans always conflict: if `a` preceded `b`, every use of `a`
//! would rank below every use of `b`. Disjoint spans conflict only when the earlier buffer
//! does not reach the later one (parallel branches). So the relation is stored as the spans
//! (`O(n)`) plus the few *extra* pairs with disjoint spans that still conflict, found by a
//! sweep: sort buffers by their earliest use (`lo`); if `a` comes first, it certainly precedes
//! `b` once every use of `b` is ranked at or past `a`'s *frontier* (the rank from which on every
//! node is reached by all of `a`'s uses), so only `b` with `hi(a) < lo(b) < frontier(a)` are
//! tested. On a chain DAG (every interval file) there are none; on a layered program, the
//! pairs within a few layers. This is the interval-graph sweep of register allocators
//! (Poletto and Sarkar's linear scan), widened by the frontier so parallel branches still
//! conflict.
//!
//! An MLP of N layers has about N^2 / 2 conflicting pairs (every weight is written by the one
//! upload node), so the pairs themselves are never stored: placement asks [`super::Occupancy`]
//! for gaps, and the few callers that walk a buffer's neighbours enumerate them from a static
//! stabbing tree over the spans ([`Conflicts::neighbors_into`]).

use crate::{PlanError, Reachability, SlabBuffer};

/// Spans, extra pairs and an index for enumerating neighbours. Spans are kept twice: in ranks
/// (for ordering heuristics) and compressed to positions among the distinct span endpoints
/// (the timeline [`super::Occupancy`] indexes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Conflicts {
    /// Lowest and highest level ([`Reachability::level`]) of each buffer's uses: what the
    /// heuristics sort by, independent of how the DAG is listed.
    span: Vec<(u32, u32)>,
    /// Lowest and highest rank of each buffer's uses, as positions among the sorted distinct
    /// endpoints (`0..points`): the timeline of the overlap test and of [`super::Occupancy`].
    compressed: Vec<(u32, u32)>,
    /// Number of distinct span endpoints.
    points: usize,
    /// `true` when the closure is a total order: conflicts are exactly overlapping spans.
    intervals: bool,
    /// Conflicting pairs with disjoint spans, both directions: buffer `i`'s are
    /// `extra[extra_start[i]..extra_start[i + 1]]`, ascending.
    extra_start: Vec<usize>,
    extra: Vec<u32>,
    /// Buffers sorted by (compressed `lo`, index), and each one's `lo` in that order.
    by_lo: Vec<u32>,
    lo_sorted: Vec<u32>,
    /// Stabbing tree over the compressed timeline: node `v` (heap numbering, leaves at
    /// `size..2 * size`) lists the buffers with `v` among their span's canonical nodes, in
    /// `stab[stab_start[v]..stab_start[v + 1]]`.
    size: usize,
    stab_start: Vec<usize>,
    stab: Vec<u32>,
    /// Number of conflicting pairs (overlapping plus extra).
    pairs: usize,
    /// Each marked output's operand: the buffer whose bytes it may take.
    partner: Vec<Option<u32>>,
    /// Each such operand's output: the buffer that may take its bytes.
    taker: Vec<Option<u32>>,
}

impl Conflicts {
    /// Builds the relation. `buffers` must be validated (non-empty uses inside the DAG).
    /// Memory: `O(n log n)` words for `n` buffers, plus the extra pairs.
    ///
    /// # Errors
    /// [`PlanError::OutOfMemory`] when the extra pairs (very wide parallel branches) cannot be
    /// allocated.
    pub(crate) fn new(reach: &Reachability, buffers: &[SlabBuffer]) -> Result<Self, PlanError> {
        let n = buffers.len();
        // Spans in half ranks: rank r is point 2r + 1, and an in-place operand's last use (its
        // op) is point 2r, just before the op writes its output there. The pair's spans then
        // part; the sweep below finds them (and any other buffer first used at that op) as
        // extra pairs, so they still conflict unless a placement takes the in-place offset.
        let mut partner: Vec<Option<u32>> = vec![None; n];
        let mut taker: Vec<Option<u32>> = vec![None; n];
        let mut span: Vec<(u64, u64)> = Vec::with_capacity(n);
        let mut levels = Vec::with_capacity(n);
        let mut reach_all: Vec<u64> = Vec::with_capacity(n);
        for buf in buffers {
            let ranks = buf.uses.iter().map(|&u| 2 * u64::from(reach.rank(u)) + 1);
            span.push((ranks.clone().min().unwrap_or(0), ranks.max().unwrap_or(0)));
            let level = buf.uses.iter().map(|&u| reach.level(u));
            levels.push((level.clone().min().unwrap_or(0), level.max().unwrap_or(0)));
            let front = buf.uses.iter().map(|&u| reach.frontier(u)).max().unwrap_or(u32::MAX);
            reach_all.push(2 * u64::from(front));
        }
        for (i, buf) in buffers.iter().enumerate() {
            if let Some(p) = buf.in_place_of.filter(|&p| p < n && p != i) {
                partner[i] = Some(p as u32);
                taker[p] = Some(i as u32);
                span[p].1 -= 1;
            }
        }
        let marked = partner.iter().any(Option::is_some);
        let intervals = reach.is_total_order() && !marked;

        let mut points: Vec<u64> = span.iter().flat_map(|&(lo, hi)| [lo, hi]).collect();
        points.sort_unstable();
        points.dedup();
        let at = |r: u64| points.partition_point(|&x| x < r) as u32;
        let compressed: Vec<(u32, u32)> = span.iter().map(|&(lo, hi)| (at(lo), at(hi))).collect();

        let mut by_lo: Vec<u32> = (0..n as u32).collect();
        by_lo.sort_unstable_by_key(|&i| (compressed[i as usize].0, i));
        let lo_sorted: Vec<u32> = by_lo.iter().map(|&i| compressed[i as usize].0).collect();

        // Overlapping pairs: for each buffer, the later-sorted ones starting at or before its end.
        let mut pairs = 0usize;
        for (p, &a) in by_lo.iter().enumerate() {
            let hi = compressed[a as usize].1;
            pairs += lo_sorted.partition_point(|&lo| lo <= hi) - p - 1;
        }

        // Extra pairs: disjoint spans inside the frontier window that the closure does not order.
        let mut degree = vec![0usize; n];
        let mut found: Vec<(u32, u32)> = Vec::new();
        if !intervals {
            let mut by_rank: Vec<u32> = (0..n as u32).collect();
            by_rank.sort_unstable_by_key(|&i| (span[i as usize].0, i));
            let rank_lo: Vec<u64> = by_rank.iter().map(|&i| span[i as usize].0).collect();
            for &a in &by_rank {
                let (_, hi) = span[a as usize];
                let front = reach_all[a as usize];
                let first = rank_lo.partition_point(|&lo| lo <= hi);
                let ua = &buffers[a as usize].uses;
                for &b in &by_rank[first..] {
                    if span[b as usize].0 >= front {
                        break;
                    }
                    if !reach.precedes(ua, &buffers[b as usize].uses) {
                        if found.len() == found.capacity() {
                            // Doubling, fallibly: the pairs are the one part that can grow
                            // quadratically (every branch of a very wide fan-out).
                            let more = found.capacity().max(1024);
                            let bytes = (found.capacity() + more).checked_mul(16);
                            crate::memory::ensure("conflicting pairs", bytes)?;
                            found.reserve(more);
                        }
                        found.push((a, b));
                        degree[a as usize] += 1;
                        degree[b as usize] += 1;
                    }
                }
            }
        }
        pairs += found.len();
        let mut extra_start = vec![0usize; n + 1];
        for i in 0..n {
            extra_start[i + 1] = extra_start[i] + degree[i];
        }
        let mut fill = extra_start.clone();
        let mut extra = vec![0u32; extra_start[n]];
        for &(a, b) in &found {
            extra[fill[a as usize]] = b;
            fill[a as usize] += 1;
            extra[fill[b as usize]] = a;
            fill[b as usize] += 1;
        }
        for i in 0..n {
            extra[extra_start[i]..extra_start[i + 1]].sort_unstable();
        }

        let size = points.len().max(1).next_power_of_two();
        let mut count = vec![0usize; 2 * size + 1];
        for &(lo, hi) in &compressed {
            canonical(size, lo, hi, |v| count[v + 1] += 1);
        }
        for v in 0..2 * size {
            count[v + 1] += count[v];
        }
        let stab_start = count.clone();
        let mut stab = vec![0u32; stab_start[2 * size]];
        for (i, &(lo, hi)) in compressed.iter().enumerate() {
            canonical(size, lo, hi, |v| {
                stab[count[v]] = i as u32;
                count[v] += 1;
            });
        }

        Ok(Self {
            span: levels,
            partner,
            taker,
            compressed,
            points: points.len(),
            intervals,
            extra_start,
            extra,
            by_lo,
            lo_sorted,
            size,
            stab_start,
            stab,
            pairs,
        })
    }

    /// Appends the buffers `i` conflicts with to `out` (cleared first), ascending. Costs
    /// `O(log n + d log d)` for `d` neighbours; nothing for an out-of-range `i`.
    pub(crate) fn neighbors_into(&self, i: usize, out: &mut Vec<u32>) {
        out.clear();
        let Some(&(lo, hi)) = self.compressed.get(i) else { return };
        // Spans starting inside [lo, hi].
        let from = self.lo_sorted.partition_point(|&x| x < lo);
        let to = self.lo_sorted.partition_point(|&x| x <= hi);
        out.extend(self.by_lo[from..to].iter().copied().filter(|&j| j as usize != i));
        // Spans starting before `lo` that contain it: the stabbing tree's path to leaf `lo`.
        let mut v = self.size + lo as usize;
        while v >= 1 {
            let list = &self.stab[self.stab_start[v]..self.stab_start[v + 1]];
            out.extend(list.iter().copied().filter(|&j| self.compressed[j as usize].0 < lo));
            v /= 2;
        }
        out.extend_from_slice(self.extra(i));
        out.sort_unstable();
    }

    /// The buffers with a disjoint span that still conflict with `i` (parallel branches),
    /// ascending; empty on interval problems.
    pub(crate) fn extra(&self, i: usize) -> &[u32] {
        match (self.extra_start.get(i), self.extra_start.get(i + 1)) {
            (Some(&a), Some(&b)) => self.extra.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The operand whose bytes buffer `i` may take ([`crate::SlabBuffer::in_place_of`]).
    pub(crate) fn partner(&self, i: usize) -> Option<usize> {
        self.partner.get(i).copied().flatten().map(|p| p as usize)
    }

    /// The output that may take buffer `i`'s bytes (the other side of
    /// [`Conflicts::partner`]).
    pub(crate) fn taker(&self, i: usize) -> Option<usize> {
        self.taker.get(i).copied().flatten().map(|t| t as usize)
    }

    /// Number of conflicting pairs, counted without storing them.
    pub(crate) fn pair_count(&self) -> usize {
        self.pairs
    }

    /// Number of buffers.
    pub(crate) fn len(&self) -> usize {
        self.span.len()
    }

    /// Lowest and highest level of buffer `i`'s uses: a timeline position for ordering
    /// heuristics (the same however the DAG is listed) and, when [`Conflicts::is_intervals`],
    /// the exact lifetime.
    pub(crate) fn span(&self, i: usize) -> (u32, u32) {
        self.span.get(i).copied().unwrap_or((0, 0))
    }

    /// Buffer `i`'s span as positions among the distinct endpoints (`0..points()`).
    pub(crate) fn compressed(&self, i: usize) -> (u32, u32) {
        self.compressed.get(i).copied().unwrap_or((0, 0))
    }

    /// Number of distinct span endpoints: the length of the compressed timeline.
    pub(crate) fn points(&self) -> usize {
        self.points
    }

    /// `true` when buffers conflict exactly when their spans overlap (the DAG's closure is a
    /// total order, as for every MiniMalloc interval file).
    pub(crate) fn is_intervals(&self) -> bool {
        self.intervals
    }
}

/// Calls `visit` with the canonical nodes of the closed leaf range `[lo, hi]` in a segment tree
/// of `size` leaves (a power of two; heap numbering, leaves at `size..2 * size`): the
/// `O(log size)` disjoint nodes whose ranges tile it.
pub(crate) fn canonical(size: usize, lo: u32, hi: u32, mut visit: impl FnMut(usize)) {
    let (mut l, mut r) = (size + lo as usize, size + hi as usize + 1);
    while l < r {
        if l & 1 == 1 {
            visit(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            visit(r);
        }
        l /= 2;
        r /= 2;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Neighbours and the pair count are exactly the closure's `conflicts`.
        #[test]
        fn neighbours_are_the_closure(
            n in 1usize..14,
            edges in prop::collection::vec((0usize..14, 0usize..14), 0..30),
            uses in prop::collection::vec(prop::collection::vec(0usize..14, 1..=3), 0..24),
        ) {
            let (dag, buffers) =
                crate::test_dag::dag_and_buffers(n, &edges, uses.into_iter().map(|u| (4, u)));
            let reach = Reachability::new(&dag).unwrap();
            let conflicts = Conflicts::new(&reach, &buffers).unwrap();
            let mut pairs = 0;
            let mut got = Vec::new();
            for i in 0..buffers.len() {
                let want: Vec<u32> = (0..buffers.len())
                    .filter(|&j| j != i && reach.conflicts(&buffers[i].uses, &buffers[j].uses))
                    .map(|j| j as u32)
                    .collect();
                pairs += want.len();
                conflicts.neighbors_into(i, &mut got);
                prop_assert_eq!(&got, &want);
            }
            prop_assert_eq!(conflicts.pair_count(), pairs / 2);
        }
    }
}
