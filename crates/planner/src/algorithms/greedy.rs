//! Greedy placement of buffers in a given order: each buffer goes into a gap between the already
//! placed buffers it conflicts with. The order and the gap rule make the classic heuristics:
//! request order + first fit is Luminal's `plan_slab`; size-descending + best fit is TFLite's
//! arena planner and XLA's `GlobalDecreasingSizeBestFitHeap`; lifetime-descending + best fit is
//! XLA's temporal sort.

use super::Conflicts;

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
    placed: Vec<bool>,
    busy: Vec<(usize, usize)>,
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
        self.placed.clear();
        self.placed.resize(reserved.len(), false);
        let mut slab = 0usize;
        for &i in order {
            let i = i as usize;
            let size = reserved[i];
            self.busy.clear();
            for &j in conflicts.neighbors(i) {
                if self.placed[j as usize] {
                    let o = offsets[j as usize];
                    self.busy.push((o, o + reserved[j as usize]));
                }
            }
            self.busy.sort_unstable();
            let offset = match fit {
                Fit::First => first_gap(&self.busy, size),
                Fit::Best => best_gap(&self.busy, size),
            };
            let end = offset + size;
            if end > limit {
                return Err(i);
            }
            offsets[i] = offset;
            self.placed[i] = true;
            slab = slab.max(end);
        }
        Ok(slab)
    }
}

/// Lowest offset where `size` bytes fit between the sorted `busy` ranges.
pub(crate) fn first_gap(busy: &[(usize, usize)], size: usize) -> usize {
    let mut candidate = 0usize;
    for &(start, end) in busy {
        if candidate + size <= start {
            break;
        }
        candidate = candidate.max(end);
    }
    candidate
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
