//! The interference graph: for every buffer, the buffers it conflicts with (neither precedes the
//! other), built once so placement never asks the closure again.
//!
//! Found with a sweep over a topological order instead of testing all `n^2` pairs. Sort buffers
//! by their earliest use (`lo`, the lowest rank of a use). If `a` comes first, only `a` can
//! precede `b`, and it certainly does once every use of `b` is ranked at or past `a`'s
//! *frontier* (the rank from which on every node is reached by all of `a`'s uses). So the only
//! pairs to test are `b` with `lo(a) <= lo(b) < frontier(a)`: on a chain DAG (every interval
//! file) exactly the pairs that overlap, with no test at all; on a layered program, the pairs
//! within a few layers. This is the interval-graph sweep of register allocators (Poletto and
//! Sarkar's linear scan), widened by the frontier so parallel branches still conflict.

use petgraph::graph::NodeIndex;

use crate::{Reachability, SlabBuffer};

/// Neighbour lists in compressed form: the conflicts of buffer `i` are
/// `adj[start[i]..start[i + 1]]`, ascending request indices.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conflicts {
    start: Vec<usize>,
    adj: Vec<u32>,
    /// Lowest and highest rank of each buffer's uses in the closure's topological order.
    span: Vec<(u32, u32)>,
    /// `true` when the closure is a total order: conflicts are exactly overlapping spans.
    intervals: bool,
}

impl Conflicts {
    /// Builds the graph. `buffers` must be validated (non-empty uses inside the DAG).
    pub(crate) fn new(reach: &Reachability, buffers: &[SlabBuffer]) -> Self {
        let n = buffers.len();
        let intervals = reach.is_total_order();
        let mut span = Vec::with_capacity(n);
        let mut reach_all = Vec::with_capacity(n);
        for buf in buffers {
            let ranks = buf.uses.iter().map(|&u| reach.rank(u));
            let lo = ranks.clone().min().unwrap_or(0);
            let hi = ranks.max().unwrap_or(0);
            span.push((lo, hi));
            reach_all.push(buf.uses.iter().map(|&u| reach.frontier(u)).max().unwrap_or(u32::MAX));
        }
        let mut by_lo: Vec<u32> = (0..n as u32).collect();
        by_lo.sort_unstable_by_key(|&i| (span[i as usize].0, i));

        let mut degree = vec![0usize; n];
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (p, &a) in by_lo.iter().enumerate() {
            let ua: &[NodeIndex] = &buffers[a as usize].uses;
            let front = reach_all[a as usize];
            for &b in &by_lo[p + 1..] {
                if span[b as usize].0 >= front {
                    break;
                }
                // b starts no earlier than a, so b cannot precede a; only a -> b is possible.
                if intervals || !reach.precedes(ua, &buffers[b as usize].uses) {
                    pairs.push((a, b));
                    degree[a as usize] += 1;
                    degree[b as usize] += 1;
                }
            }
        }
        let mut start = vec![0usize; n + 1];
        for i in 0..n {
            start[i + 1] = start[i] + degree[i];
        }
        let mut fill = start.clone();
        let mut adj = vec![0u32; start[n]];
        for &(a, b) in &pairs {
            adj[fill[a as usize]] = b;
            fill[a as usize] += 1;
            adj[fill[b as usize]] = a;
            fill[b as usize] += 1;
        }
        for i in 0..n {
            adj[start[i]..start[i + 1]].sort_unstable();
        }
        Self { start, adj, span, intervals }
    }

    /// The buffers `i` conflicts with, ascending (empty for an out-of-range `i`).
    pub(crate) fn neighbors(&self, i: usize) -> &[u32] {
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => self.adj.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Number of conflicting pairs.
    pub(crate) fn pair_count(&self) -> usize {
        self.adj.len() / 2
    }

    /// Lowest and highest topological rank of buffer `i`'s uses: a timeline position used for
    /// ordering heuristics and, when [`Conflicts::is_intervals`], the exact lifetime.
    pub(crate) fn span(&self, i: usize) -> (u32, u32) {
        self.span.get(i).copied().unwrap_or((0, 0))
    }

    /// `true` when buffers conflict exactly when their spans overlap (the DAG's closure is a
    /// total order, as for every MiniMalloc interval file).
    pub(crate) fn is_intervals(&self) -> bool {
        self.intervals
    }
}
