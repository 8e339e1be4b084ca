//! Reachability: the DAG's strict transitive closure, compressed along a chain cover.
//!
//! A path cover splits the nodes into chains `c_0, c_1, ...` (each a path of the DAG, in
//! topological order). Because a chain is totally ordered, the nodes of chain `c` that a node
//! `u` reaches form a suffix of it, so the closure is fully described by one number per node
//! and chain: the earliest position on `c` that `u` reaches (Jagadish's compressed transitive
//! closure, "A compression technique to materialize transitive closure", TODS 1990). A chain
//! DAG (every MiniMalloc interval file) has one chain: memory is `O(n)`. A layered tensor
//! program of width `w` has about `w` chains: `O(n * w)`. When the cover has so many chains
//! that the table would outgrow plain bitsets (more than `n / 32`), one bitset row per node is
//! kept instead, so memory is never worse than `n * n` bits.

use fixedbitset::FixedBitSet;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::PlanError;

/// The strict transitive closure of a DAG: `reaches(a, b)` iff there is a path of at least one
/// edge from `a` to `b` (a node never reaches itself).
///
/// Memory is `4 * n * k` bytes for `n` nodes and a path cover of `k` chains (`k = 1` for a
/// chain DAG), capped at `n * n` bits. Queries are O(1).
#[derive(Debug, Clone)]
pub struct Reachability {
    /// Rank of each node (by node index) in a fixed topological order.
    rank: Vec<u32>,
    /// Per node (by node index): one past the highest rank of a node it does NOT reach (itself
    /// included). Every node of rank `>= frontier[u]` is reached from `u`.
    frontier: Vec<u32>,
    closure: Closure,
}

#[derive(Debug, Clone)]
enum Closure {
    /// Chain-compressed: `earliest[u * chains + c]` is the first position on chain `c` that `u`
    /// reaches (`chain_len[c]` when none).
    Chains { chains: usize, chain_of: Vec<u32>, pos: Vec<u32>, earliest: Vec<u32> },
    /// One row per node, indexed by node index; bit `j` = reaches the node of rank `j`.
    Bits(Vec<FixedBitSet>),
}

impl Reachability {
    /// Builds the closure: a topological order, a greedy path cover (each node extends the
    /// chain of a predecessor that is still a chain's tail), then one reverse-topological pass
    /// that takes, per chain, the minimum over successors.
    ///
    /// # Errors
    /// [`PlanError::Cyclic`] when the graph has a cycle or a self-loop.
    pub fn new<N, E>(dag: &DiGraph<N, E>) -> Result<Self, PlanError> {
        let n = dag.node_count();
        let order = petgraph::algo::toposort(dag, None).map_err(|_| PlanError::Cyclic)?;
        let mut rank = vec![0u32; n];
        for (r, v) in order.iter().enumerate() {
            rank[v.index()] = r as u32;
        }

        // Greedy path cover in topological order. Among predecessors that end a chain, take
        // the one of highest rank: it keeps chains tight along the critical path.
        const NONE: u32 = u32::MAX;
        let mut chain_of = vec![NONE; n];
        let mut pos = vec![0u32; n];
        let mut tail: Vec<u32> = Vec::new();
        for &v in &order {
            let mut pick: Option<(u32, u32)> = None;
            for edge in dag.edges_directed(v, petgraph::Direction::Incoming) {
                let p = edge.source().index();
                let c = chain_of[p];
                if c != NONE
                    && tail[c as usize] == p as u32
                    && pick.is_none_or(|(r, _)| rank[p] > r)
                {
                    pick = Some((rank[p], c));
                }
            }
            let c = match pick {
                Some((_, c)) => c,
                None => {
                    tail.push(NONE);
                    (tail.len() - 1) as u32
                }
            };
            let t = tail[c as usize];
            pos[v.index()] = if t == NONE { 0 } else { pos[t as usize] + 1 };
            chain_of[v.index()] = c;
            tail[c as usize] = v.index() as u32;
        }
        let chains = tail.len();
        let chain_len: Vec<u32> =
            tail.iter().map(|&t| if t == NONE { 0 } else { pos[t as usize] + 1 }).collect();
        // Ranks of each chain's nodes, by position (increasing: chains follow the order).
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); chains];
        for &v in &order {
            if let Some(m) = members.get_mut(chain_of[v.index()] as usize) {
                m.push(rank[v.index()]);
            }
        }

        // Chain table costs 32 * k bits per node, a bitset row n bits.
        let closure = if n > 0 && chains.saturating_mul(32) > n {
            let mut rows = vec![FixedBitSet::new(); n];
            for &node in order.iter().rev() {
                let mut row = FixedBitSet::with_capacity(n);
                for edge in dag.edges(node) {
                    let succ = edge.target().index();
                    row.insert(rank[succ] as usize);
                    row.union_with(&rows[succ]);
                }
                rows[node.index()] = row;
            }
            Closure::Bits(rows)
        } else {
            let mut earliest = vec![0u32; n * chains];
            for &node in order.iter().rev() {
                let u = node.index();
                let (row, rest) = split_row(&mut earliest, u, chains);
                row.copy_from_slice(&chain_len);
                for edge in dag.edges(node) {
                    let s = edge.target().index();
                    let cs = chain_of[s] as usize;
                    if let Some(slot) = row.get_mut(cs) {
                        *slot = (*slot).min(pos[s]);
                    }
                    if let Some(srow) = rest.get(s * chains..(s + 1) * chains) {
                        for (a, &b) in row.iter_mut().zip(srow) {
                            *a = (*a).min(b);
                        }
                    }
                }
            }
            Closure::Chains { chains, chain_of, pos, earliest }
        };

        // Frontier: one past the highest rank a node does not reach (itself included).
        let mut frontier = vec![0u32; n];
        match &closure {
            Closure::Chains { chains, earliest, .. } => {
                for u in 0..n {
                    let row = &earliest[u * chains..(u + 1) * chains];
                    let mut f = rank[u] + 1;
                    for (c, &e) in row.iter().enumerate() {
                        // Positions before `e` on chain c are not reached; the last has the highest rank.
                        if e > 0
                            && let Some(&r) = members[c].get(e as usize - 1)
                        {
                            f = f.max(r + 1);
                        }
                    }
                    frontier[u] = f;
                }
            }
            Closure::Bits(rows) => {
                for u in 0..n {
                    let row = &rows[u];
                    let mut f = rank[u] + 1;
                    // Highest zero bit of the row (rank order).
                    let top = (n - 1) as u32;
                    let mut r = top as i64;
                    while r > rank[u] as i64 {
                        if !row.contains(r as usize) {
                            f = f.max(r as u32 + 1);
                            break;
                        }
                        r -= 1;
                    }
                    frontier[u] = f;
                }
            }
        }

        Ok(Self { rank, frontier, closure })
    }

    /// Number of nodes in the DAG the closure was built from.
    pub fn node_count(&self) -> usize {
        self.rank.len()
    }

    /// `true` iff a path of one or more edges leads from `a` to `b`. Out-of-range nodes reach nothing.
    pub fn reaches(&self, a: NodeIndex, b: NodeIndex) -> bool {
        let (a, b) = (a.index(), b.index());
        if a >= self.rank.len() || b >= self.rank.len() {
            return false;
        }
        match &self.closure {
            Closure::Chains { chains, chain_of, pos, earliest } => {
                let c = chain_of[b] as usize;
                earliest[a * chains + c] <= pos[b]
            }
            Closure::Bits(rows) => rows[a].contains(self.rank[b] as usize),
        }
    }

    /// `true` iff every use in `a` reaches every use in `b` (SPEC section 2's `precedes`).
    /// Strict: a buffer never precedes one that shares a use with it.
    pub fn precedes(&self, a: &[NodeIndex], b: &[NodeIndex]) -> bool {
        a.iter().all(|&x| b.iter().all(|&y| self.reaches(x, y)))
    }

    /// `true` iff the two use sets may not share bytes: neither precedes the other.
    pub fn conflicts(&self, a: &[NodeIndex], b: &[NodeIndex]) -> bool {
        !self.precedes(a, b) && !self.precedes(b, a)
    }

    /// The nodes `node` reaches, as a bitset over node indices; `None` for an out-of-range node.
    /// The closure is stored compressed, so this materializes the row: `O(n)` per call.
    pub fn row(&self, node: NodeIndex) -> Option<FixedBitSet> {
        let n = self.rank.len();
        if node.index() >= n {
            return None;
        }
        let mut out = FixedBitSet::with_capacity(n);
        match &self.closure {
            Closure::Chains { chains, chain_of, pos, earliest } => {
                let row = &earliest[node.index() * chains..(node.index() + 1) * chains];
                for v in 0..n {
                    if row[chain_of[v] as usize] <= pos[v] {
                        out.insert(v);
                    }
                }
            }
            Closure::Bits(rows) => {
                for v in 0..n {
                    if rows[node.index()].contains(self.rank[v] as usize) {
                        out.insert(v);
                    }
                }
            }
        }
        Some(out)
    }

    /// Rank of `node` in the closure's fixed topological order (0 for an out-of-range node).
    pub(crate) fn rank(&self, node: NodeIndex) -> u32 {
        self.rank.get(node.index()).copied().unwrap_or(0)
    }

    /// One past the highest rank `node` does not reach: every node of rank `>=` this is
    /// reached from `node`. Equals `rank + 1` on a chain DAG.
    pub(crate) fn frontier(&self, node: NodeIndex) -> u32 {
        self.frontier.get(node.index()).copied().unwrap_or(u32::MAX)
    }

    /// `true` when the closure is a total order (the DAG has a Hamiltonian path, as every
    /// interval file's chain DAG does): buffers then conflict exactly when their rank
    /// intervals overlap.
    pub(crate) fn is_total_order(&self) -> bool {
        match &self.closure {
            Closure::Chains { chains, .. } => *chains <= 1,
            Closure::Bits(_) => false,
        }
    }
}

/// Splits the flat table into node `u`'s row and the rest (as a view where other rows keep
/// their absolute offsets: row `u` reads as empty there).
fn split_row(table: &mut [u32], u: usize, chains: usize) -> (&mut [u32], RowsExcept<'_>) {
    let (head, tail) = table.split_at_mut(u * chains);
    let (row, after) = tail.split_at_mut(chains);
    (row, RowsExcept { head, after, skip_end: (u + 1) * chains })
}

/// Read access to a flat table with one row mutably borrowed elsewhere.
struct RowsExcept<'a> {
    head: &'a [u32],
    after: &'a [u32],
    skip_end: usize,
}

impl RowsExcept<'_> {
    fn get(&self, range: std::ops::Range<usize>) -> Option<&[u32]> {
        if range.end <= self.head.len() {
            self.head.get(range)
        } else if range.start >= self.skip_end {
            self.after.get(range.start - self.skip_end..range.end - self.skip_end)
        } else {
            None
        }
    }
}
