//! Which bytes the placed buffers occupy, over time: the gap queries of every greedy placement,
//! answered without listing a buffer's conflicting neighbours.
//!
//! A placed buffer is a rectangle, its compressed span `[lo, hi]` (time) by its byte range. A
//! placed span meets a query span `[l, r]` in one of two disjoint ways: it starts inside it
//! (`l <= lo <= r`), or it starts before and reaches it (`lo < l <= hi`). Two segment trees over
//! the timeline keep a union of byte ranges per node, one for each way:
//!
//! - `starts`: a rectangle is added at every node on the path from leaf `lo` to the root; a
//!   query reads the canonical nodes of `[l, r]` (a 1-D range search on `lo`);
//! - `covers`: a rectangle is added at the canonical nodes of `[lo, hi]`; a query reads the
//!   nodes on the path from leaf `l` to the root (stabbing at `l`).
//!
//! Each rectangle is found once (twice when `lo = l`), so a query walks about as many runs as
//! the conflicting placed buffers below its answer (merged where they touch), from `O(log n)`
//! unions, plus `O(log^2 n)` for the lookups; memory is `O(n log n)` for `n` buffers whatever
//! the number of conflicting pairs (an MLP of N layers has
//! N^2 / 2: every weight shares the upload node). These are the range and stabbing trees of
//! computational geometry (de Berg et al., "Computational Geometry", ch. 10). On a DAG,
//! conflicting buffers whose spans are disjoint (parallel branches, [`Conflicts::extra`]) come
//! from their own short lists.
//!
//! First fit sweeps the unions from a common cursor, always the one whose next run starts
//! lowest, each to its first gap that holds the buffer, until no union blocks the cursor; best fit merges them all and picks the smallest gap.
//! Both give the offsets a scan of the sorted neighbour ranges gives.

use std::cmp::Reverse;
use std::collections::btree_map::Range;
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::Bound;

use super::conflicts::{Conflicts, canonical};

/// A union of disjoint byte ranges `[start, end)`, start -> end, with no two touching.
#[derive(Debug, Clone, Default)]
struct Runs(BTreeMap<usize, usize>);

impl Runs {
    /// Adds `[start, end)`, merging every run it meets or touches.
    fn add(&mut self, mut start: usize, mut end: usize) {
        // The run starting at or before `start` may reach it.
        if let Some((&s, &e)) = self.0.range(..=start).next_back()
            && e >= start
        {
            if e >= end {
                return;
            }
            start = s;
        }
        while let Some((&s, &e)) = self.0.range(start..=end).next() {
            self.0.remove(&s);
            end = end.max(e);
        }
        self.0.insert(start, end);
    }
}

/// A position in one union during a first-fit sweep: the next run not yet passed.
struct Cursor<'a> {
    runs: &'a Runs,
    it: Range<'a, usize, usize>,
    head: Option<(usize, usize)>,
}

impl Cursor<'_> {
    /// The next run ending past `y`: the following one, or a seek when that one ends below.
    fn advance(&mut self, y: usize) -> Option<(usize, usize)> {
        match self.it.next() {
            Some((&s, &e)) if e > y => Some((s, e)),
            Some(_) => {
                let from = match self.runs.0.range(..=y).next_back() {
                    Some((&s, &e)) if e > y => {
                        self.it = self.runs.0.range((Bound::Excluded(s), Bound::Unbounded));
                        return Some((s, e));
                    }
                    _ => y,
                };
                self.it = self.runs.0.range((Bound::Excluded(from), Bound::Unbounded));
                self.it.next().map(|(&s, &e)| (s, e))
            }
            None => None,
        }
    }
}

/// Placed rectangles over one [`Conflicts`]'s timeline. Reusable: [`Occupancy::clear`] forgets
/// the placements but keeps the allocation.
#[derive(Debug, Default)]
pub(crate) struct Occupancy {
    /// Leaves of the segment tree (a power of two at least the timeline's length).
    size: usize,
    /// Per node: placed rectangles whose `lo` lies in the node's range.
    starts: Vec<Runs>,
    /// Per node: placed rectangles with the node among their span's canonical nodes.
    covers: Vec<Runs>,
    /// Nodes with a non-empty union (each once), for [`Occupancy::clear`].
    touched: Vec<usize>,
    is_touched: Vec<bool>,
    /// Offset of every placed buffer (by request index), `None` while unplaced.
    placed: Vec<Option<usize>>,
    /// Scratch: the query's unions (node, `true` for `starts`) and ranges.
    nodes: Vec<(usize, bool)>,
    ranges: Vec<(usize, usize)>,
}

impl Occupancy {
    /// Forgets every placement and sizes the tree for `conflicts`' timeline.
    pub(crate) fn reset(&mut self, conflicts: &Conflicts) {
        let size = conflicts.points().max(1).next_power_of_two();
        if size != self.size || self.starts.len() != 2 * size {
            self.size = size;
            self.starts = vec![Runs::default(); 2 * size];
            self.covers = vec![Runs::default(); 2 * size];
            self.is_touched = vec![false; 2 * size];
            self.touched.clear();
        } else {
            self.clear();
        }
        self.placed.clear();
        self.placed.resize(conflicts.len(), None);
    }

    /// Empties every union (the caller resets `placed`).
    fn clear(&mut self) {
        for &v in &self.touched {
            self.starts[v].0.clear();
            self.covers[v].0.clear();
            self.is_touched[v] = false;
        }
        self.touched.clear();
    }

    /// Records buffer `i` at `[offset, offset + size)` bytes.
    pub(crate) fn insert(&mut self, conflicts: &Conflicts, i: usize, offset: usize, size: usize) {
        let (lo, hi) = conflicts.compressed(i);
        let end = offset + size;
        let mut v = self.size + lo as usize;
        while v >= 1 {
            self.starts[v].add(offset, end);
            self.touch(v);
            v /= 2;
        }
        let mut nodes = std::mem::take(&mut self.nodes);
        nodes.clear();
        canonical(self.size, lo, hi, |v| nodes.push((v, false)));
        for &(v, _) in &nodes {
            self.covers[v].add(offset, end);
            self.touch(v);
        }
        self.nodes = nodes;
        if let Some(p) = self.placed.get_mut(i) {
            *p = Some(offset);
        }
    }

    fn touch(&mut self, v: usize) {
        if !self.is_touched[v] {
            self.is_touched[v] = true;
            self.touched.push(v);
        }
    }

    /// The union read for query node `(v, starts)`.
    fn runs(&self, (v, starts): (usize, bool)) -> &Runs {
        if starts { &self.starts[v] } else { &self.covers[v] }
    }

    /// Sets up a query for buffer `i`: its unions in `nodes`, its placed extra conflicts in
    /// `ranges`; returns its size.
    fn gather(&mut self, conflicts: &Conflicts, reserved: &[usize], i: usize) -> usize {
        let (lo, hi) = conflicts.compressed(i);
        self.query_nodes(lo, hi);
        self.extra_ranges(conflicts, reserved, i);
        reserved[i]
    }

    /// Lowest offset where buffer `i` (`size` bytes) meets no placed buffer it conflicts with.
    pub(crate) fn first_fit(
        &mut self,
        conflicts: &Conflicts,
        reserved: &[usize],
        i: usize,
    ) -> usize {
        let size = self.gather(conflicts, reserved, i);
        let extra = (!self.ranges.is_empty()).then(|| {
            let mut runs = Runs::default();
            self.ranges.iter().for_each(|&(s, e)| runs.add(s, e));
            runs
        });
        // Sweep the unions from a common cursor `y`: the union whose next run starts lowest
        // walks forward (moving `y` past every run of its own that blocks) to its first gap
        // holding `size`; done once no union's next run starts below `y + size`. Each union's
        // runs are walked once (one far behind `y` seeks instead of stepping).
        let mut cursors: Vec<Cursor<'_>> = Vec::with_capacity(self.nodes.len() + 1);
        for runs in self.nodes.iter().map(|&node| self.runs(node)).chain(extra.as_ref()) {
            let mut it = runs.0.range(..);
            if let Some((s, e)) = it.next().map(|(&s, &e)| (s, e)) {
                cursors.push(Cursor { runs, it, head: Some((s, e)) });
            }
        }
        let mut heap: BinaryHeap<Reverse<(usize, usize)>> =
            cursors.iter().enumerate().filter_map(|(k, c)| Some(Reverse((c.head?.0, k)))).collect();
        let mut y = 0usize;
        while let Some(Reverse((start, k))) = heap.pop() {
            if start >= y + size {
                break;
            }
            let c = &mut cursors[k];
            while let Some((s, e)) = c.head {
                if e <= y {
                    c.head = c.advance(y);
                } else if s >= y + size {
                    break;
                } else {
                    y = e;
                    c.head = c.advance(y);
                }
            }
            if let Some((s, _)) = c.head {
                heap.push(Reverse((s, k)));
            }
        }
        y
    }

    /// Where buffer `i` goes in place, if it may: the other side of its in-place pair (the
    /// operand a marked output may take, or the output marked to take this operand, whichever
    /// order they are placed in) is placed, the output is no larger than the operand, and no
    /// other placed buffer `i` conflicts with meets its bytes at that offset. The pair is
    /// skipped only at exactly one offset; anywhere else it blocks like any conflicting buffer.
    pub(crate) fn in_place(
        &mut self,
        conflicts: &Conflicts,
        reserved: &[usize],
        i: usize,
    ) -> Option<usize> {
        let (p, fits) = match (conflicts.partner(i), conflicts.taker(i)) {
            (Some(p), _) if self.placed.get(p).copied().flatten().is_some() => {
                (p, reserved[i] <= reserved[p])
            }
            (_, Some(t)) => (t, reserved[t] <= reserved[i]),
            _ => return None,
        };
        let y = (*self.placed.get(p)?)?;
        let size = reserved[i];
        if !fits {
            return None;
        }
        let (lo, hi) = conflicts.compressed(i);
        self.query_nodes(lo, hi);
        for k in 0..self.nodes.len() {
            let runs = &self.runs(self.nodes[k]).0;
            if runs.range(..y + size).next_back().is_some_and(|(_, &e)| e > y) {
                return None;
            }
        }
        let blocked = conflicts.extra(i).iter().any(|&j| {
            let j = j as usize;
            j != p
                && self
                    .placed
                    .get(j)
                    .copied()
                    .flatten()
                    .is_some_and(|o| o < y + size && o + reserved[j] > y)
        });
        (!blocked).then_some(y)
    }

    /// Start of the smallest gap between the placed buffers `i` conflicts with that holds it
    /// (lowest on ties), or the top of those buffers when no gap does: best fit.
    pub(crate) fn best_fit(
        &mut self,
        conflicts: &Conflicts,
        reserved: &[usize],
        i: usize,
    ) -> usize {
        let size = self.gather(conflicts, reserved, i);
        for &(v, starts) in &self.nodes {
            let runs = if starts { &self.starts[v] } else { &self.covers[v] };
            self.ranges.extend(runs.0.iter().map(|(&s, &e)| (s, e)));
        }
        self.ranges.sort_unstable();
        best_gap(&self.ranges, size)
    }

    /// Fills `nodes` with the unions a query of span `[lo, hi]` reads: `starts` at the canonical
    /// nodes of `[lo, hi]`, `covers` on the path from leaf `lo` to the root.
    fn query_nodes(&mut self, lo: u32, hi: u32) {
        self.nodes.clear();
        let nodes = &mut self.nodes;
        canonical(self.size, lo, hi, |v| nodes.push((v, true)));
        let mut v = self.size + lo as usize;
        while v >= 1 {
            nodes.push((v, false));
            v /= 2;
        }
    }

    /// Fills `ranges` with the byte ranges of the placed buffers that conflict with `i` though
    /// their spans are disjoint from its own, sorted.
    fn extra_ranges(&mut self, conflicts: &Conflicts, reserved: &[usize], i: usize) {
        self.ranges.clear();
        for &j in conflicts.extra(i) {
            let j = j as usize;
            if let Some(Some(o)) = self.placed.get(j) {
                self.ranges.push((*o, o + reserved[j]));
            }
        }
        self.ranges.sort_unstable();
    }
}

/// Start of the smallest gap between the sorted `busy` ranges that holds `size` bytes (the
/// lowest such on ties), or the top of the busy ranges when none does.
pub(crate) fn best_gap(busy: &[(usize, usize)], size: usize) -> usize {
    let mut best: Option<(usize, usize)> = None;
    let mut cursor = 0usize;
    for &(start, end) in busy {
        if start > cursor {
            let gap = start - cursor;
            if gap >= size && best.is_none_or(|(g, _)| gap < g) {
                best = Some((gap, cursor));
            }
        }
        cursor = cursor.max(end);
    }
    best.map_or(cursor, |(_, offset)| offset)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Reachability;

    proptest! {
        /// First and best fit answer what a scan of the placed conflicting ranges answers, for
        /// placements in any order at any offsets (overlapping ones too), on any DAG.
        #[test]
        fn fits_are_the_scan_of_placed_neighbours(
            n in 1usize..14,
            edges in prop::collection::vec((0usize..14, 0usize..14), 0..30),
            bufs in prop::collection::vec(
                (1usize..9, prop::collection::vec(0usize..14, 1..=3), 0usize..40),
                1..24,
            ),
        ) {
            let (dag, buffers) = crate::test_dag::dag_and_buffers(
                n,
                &edges,
                bufs.iter().map(|(_, u, _)| (4, u.clone())),
            );
            let reserved: Vec<usize> = bufs.iter().map(|b| b.0).collect();
            let reach = Reachability::new(&dag).unwrap();
            let conflicts = Conflicts::new(&reach, &buffers).unwrap();
            let mut occupancy = Occupancy::default();
            occupancy.reset(&conflicts);
            let mut placed: Vec<(usize, usize)> = Vec::new();
            for (i, &(_, _, offset)) in bufs.iter().enumerate() {
                let mut busy: Vec<(usize, usize)> = placed
                    .iter()
                    .filter(|&&(j, _)| reach.conflicts(&buffers[i].uses, &buffers[j].uses))
                    .map(|&(j, o)| (o, o + reserved[j]))
                    .collect();
                busy.sort_unstable();
                let mut first = 0usize;
                for &(start, end) in &busy {
                    if first + reserved[i] <= start {
                        break;
                    }
                    first = first.max(end);
                }
                prop_assert_eq!(occupancy.first_fit(&conflicts, &reserved, i), first);
                prop_assert_eq!(
                    occupancy.best_fit(&conflicts, &reserved, i),
                    best_gap(&busy, reserved[i])
                );
                occupancy.insert(&conflicts, i, offset, reserved[i]);
                placed.push((i, offset));
            }
        }
    }

    proptest! {
        /// The union merges exactly: a byte is covered iff some added range covers it.
        #[test]
        fn runs_are_the_union(adds in prop::collection::vec((0usize..60, 1usize..12), 0..30)) {
            let mut runs = Runs::default();
            let mut bytes = [false; 80];
            for &(s, len) in &adds {
                runs.add(s, s + len);
                bytes[s..s + len].iter_mut().for_each(|b| *b = true);
            }
            let mut covered = [false; 80];
            let mut last_end = None;
            for (&s, &e) in &runs.0 {
                prop_assert!(s < e);
                prop_assert!(last_end.is_none_or(|l| l < s), "runs touch or overlap");
                covered[s..e].iter_mut().for_each(|b| *b = true);
                last_end = Some(e);
            }
            prop_assert_eq!(covered, bytes);
        }
    }
}
