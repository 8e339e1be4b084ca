//! The `precedes` relation between buffers, materialized once as one bitset per buffer, so
//! placement algorithms and the lower bound ask `precedes(i, j)` with one bit test instead of
//! `|uses_i| * |uses_j|` closure lookups.

use fixedbitset::FixedBitSet;

use crate::{PlanError, Reachability, SlabBuffer};

/// The strict partial order `precedes` on buffer requests: `i` precedes `j` iff
/// every use of `i` reaches every use of `j` through the DAG's transitive closure. Two buffers
/// may share bytes only if one precedes the other; otherwise they *conflict*.
///
/// Queries take request indices. Internally buffers are numbered by a *linear extension*: sorted
/// by the topological rank of their first use, then of their last use (if `i` precedes `j`, the
/// last use of `i` ranks below the first use of `j`, so `i` comes first).
///
/// Building uses the closure's rank band: `j` can only follow `i` when `j`'s first use ranks
/// above `i`'s last, and surely follows `i` once `j`'s first use ranks at or above the point
/// from which every node is reached from all of `i`'s uses (the topological frontier). Only the
/// buffers between those two ranks are tested one by one; the rest are set a word at a time. On
/// a chain DAG (interval lifetimes) the band is empty. Memory is `n * n` bits for `n` buffers
/// (12.5 MB at 10,000).
#[derive(Debug, Clone)]
pub struct BufferOrder {
    /// Request index -> position in the linear extension.
    pos: Vec<usize>,
    /// Position -> request index.
    at: Vec<usize>,
    /// `succ[p]` holds the positions that the buffer at position `p` precedes (all after `p`).
    succ: Vec<FixedBitSet>,
}

impl BufferOrder {
    /// Materializes `precedes` for `buffers` over the closure `reach`.
    ///
    /// A buffer with no uses, or with a use outside the closure, is treated as conflicting with
    /// every other buffer, the safe side for placement (callers validate first; see
    /// [`crate::plan_slab`]).
    ///
    /// # Errors
    /// [`PlanError::OutOfMemory`] when the `n * n` bits cannot be allocated.
    pub fn new(reach: &Reachability, buffers: &[SlabBuffer]) -> Result<Self, PlanError> {
        let n = buffers.len();
        crate::memory::ensure("buffer order", crate::memory::bitset_bytes(n, n))?;
        let nodes = reach.node_count();
        // (first rank, last rank, frontier) of each buffer with usable uses.
        let span: Vec<Option<(u32, u32, u32)>> = buffers
            .iter()
            .map(|b| {
                if b.uses.is_empty() || b.uses.iter().any(|u| u.index() >= nodes) {
                    return None;
                }
                let ranks = b.uses.iter().map(|&u| reach.rank(u));
                let first = ranks.clone().min().unwrap_or(0);
                let last = ranks.max().unwrap_or(0);
                let frontier = b.uses.iter().map(|&u| reach.frontier(u)).max().unwrap_or(u32::MAX);
                Some((first, last, frontier))
            })
            .collect();
        let mut at: Vec<usize> = (0..n).collect();
        // Buffers without a span go last and are never related.
        at.sort_by_key(|&i| match span[i] {
            Some((first, last, _)) => (0u8, first, last, i),
            None => (1u8, 0, 0, i),
        });
        let mut pos = vec![0usize; n];
        for (p, &i) in at.iter().enumerate() {
            pos[i] = p;
        }
        let related = span.iter().filter(|s| s.is_some()).count();
        let firsts: Vec<u32> =
            at[..related].iter().map(|&i| span[i].map_or(u32::MAX, |s| s.0)).collect();

        let mut succ = vec![FixedBitSet::with_capacity(n); n];
        for (p, row) in succ.iter_mut().enumerate().take(related) {
            let a = at[p];
            let Some((_, last, frontier)) = span[a] else { continue };
            let lo = firsts.partition_point(|&f| f <= last);
            let hi = firsts.partition_point(|&f| f < frontier).max(lo);
            for q in lo..hi {
                if reach.precedes(&buffers[a].uses, &buffers[at[q]].uses) {
                    row.insert(q);
                }
            }
            row.insert_range(hi..related);
        }
        // An in-place pair may share bytes, so for the lower bound the operand counts as
        // preceding its marked output (a relaxation, so the bound stays true). Marks are
        // checked before this runs: every other use of the operand reaches the op and the op
        // reaches every other use of the output, so the order stays transitive.
        for (i, b) in buffers.iter().enumerate() {
            if let Some(p) = b.in_place_of.filter(|&p| p < n && p != i)
                && pos[p].max(pos[i]) < related
            {
                // Normally the operand comes first; when both are used at the op alone they
                // have the same predecessors and successors, and either direction is sound.
                let (a, z) = (pos[p].min(pos[i]), pos[p].max(pos[i]));
                succ[a].insert(z);
            }
        }
        Ok(Self { pos, at, succ })
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// `true` when there are no buffers.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// `true` iff buffer `i` precedes buffer `j` (strict; out-of-range indices precede nothing).
    pub fn precedes(&self, i: usize, j: usize) -> bool {
        match (self.pos.get(i), self.pos.get(j)) {
            (Some(&p), Some(&q)) => self.succ[p].contains(q),
            _ => false,
        }
    }

    /// `true` iff neither of `i`, `j` precedes the other: they may not share bytes. A buffer
    /// conflicts with itself.
    pub fn conflicts(&self, i: usize, j: usize) -> bool {
        !self.precedes(i, j) && !self.precedes(j, i)
    }

    /// The buffers that `i` precedes, as request indices in linear-extension order (empty for an
    /// out-of-range `i`).
    pub fn successors(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.pos
            .get(i)
            .and_then(|&p| self.succ.get(p))
            .into_iter()
            .flat_map(|row| row.ones().map(|q| self.at[q]))
    }

    /// Request indices in linear-extension order: every buffer comes after all it follows.
    pub fn linear_extension(&self) -> &[usize] {
        &self.at
    }

    /// Successor sets by position in [`BufferOrder::linear_extension`]: bit `q` of row `p` is set
    /// iff the buffer at position `p` precedes the one at position `q` (always `q > p`).
    pub(crate) fn position_rows(&self) -> &[FixedBitSet] {
        &self.succ
    }
}
