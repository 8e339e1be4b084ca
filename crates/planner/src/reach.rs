//! Reachability: the DAG's strict transitive closure, compressed along a chain cover.
//!
//! A chain cover splits the nodes into chains `c_0, c_1, ...`, each totally ordered by
//! reachability. The ancestors of a node on chain `c` form a prefix of `c`, so the closure is
//! described by one number per node and chain: the last position on `c` that reaches the node
//! (Jagadish's compressed transitive closure, "A compression technique to materialize
//! transitive closure", ACM TODS 1990). Chains are built greedily in topological order: a node
//! joins a chain whose tail reaches it (the nearest such tail), else starts a new one. A chain
//! DAG (every MiniMalloc interval file) has one chain, so memory is `O(n)`; a layered tensor
//! program about as many chains as its widest layer, so `O(n * width)`. Should the table grow
//! past the size of plain bitsets (`n * n` bits), one bitset row per node is kept instead.

use fixedbitset::FixedBitSet;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::PlanError;

/// The strict transitive closure of a DAG: `reaches(a, b)` iff there is a path of at least one
/// edge from `a` to `b` (a node never reaches itself).
///
/// Memory is at most `4 * n * k` bytes for `n` nodes and a chain cover of `k` chains (`k = 1`
/// for a chain DAG), and never more than about `n * n` bits. Queries are O(1).
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
    /// Chain-compressed. Node `v`'s row is `table[start[v]..start[v + 1]]`, one entry per chain
    /// that existed when `v` was visited: `1 +` the last position on that chain reaching `v`, or
    /// 0 when none does. Chains started later hold no ancestor of `v`.
    Chains { chains: usize, chain_of: Vec<u32>, pos: Vec<u32>, start: Vec<usize>, table: Vec<u32> },
    /// One row per node, indexed by node index; bit `j` = reaches the node of rank `j`.
    Bits(Vec<FixedBitSet>),
}

impl Reachability {
    /// Builds the closure: a topological order, then one pass in that order that computes
    /// each node's row from its predecessors' (per chain, the maximum) and puts the node on a
    /// chain.
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
        let closure = match chain_table(dag, &order, &rank) {
            Some(table) => table,
            None => bit_rows(dag, &order, &rank),
        };
        let frontier = frontiers(&closure, &order, &rank);
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
            Closure::Chains { chain_of, pos, start, table, .. } => {
                let c = chain_of[a] as usize;
                let row = &table[start[b]..start[b + 1]];
                row.get(c).is_some_and(|&last| last > pos[a])
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
            Closure::Chains { .. } => {
                for v in 0..n {
                    if self.reaches(node, NodeIndex::new(v)) {
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

/// The chain-compressed closure, or `None` when it would outgrow bitsets.
fn chain_table<N, E>(dag: &DiGraph<N, E>, order: &[NodeIndex], rank: &[u32]) -> Option<Closure> {
    const NONE: u32 = u32::MAX;
    let n = dag.node_count();
    // Past this many entries (4 bytes each), one bit per node pair is smaller.
    let limit = (n / 32).saturating_mul(n).max(4 * n);
    let mut chain_of = vec![NONE; n];
    let mut pos = vec![0u32; n];
    let mut tail: Vec<u32> = Vec::new();
    let mut start = vec![0usize; n + 1];
    let mut ends = vec![0usize; n];
    let mut table: Vec<u32> = Vec::new();
    let mut row: Vec<u32> = Vec::new();
    for &v in order {
        row.clear();
        row.resize(tail.len(), 0);
        for edge in dag.edges_directed(v, petgraph::Direction::Incoming) {
            let p = edge.source().index();
            let prow = &table[start[p]..ends[p]];
            for (a, &b) in row.iter_mut().zip(prow) {
                *a = (*a).max(b);
            }
            if let Some(slot) = row.get_mut(chain_of[p] as usize) {
                *slot = (*slot).max(pos[p] + 1);
            }
        }
        // Join the chain whose tail reaches v and sits nearest to it in the order.
        let mut pick: Option<(u32, usize)> = None;
        for (c, &last) in row.iter().enumerate() {
            let t = tail[c] as usize;
            if last == pos[t] + 1 && pick.is_none_or(|(r, _)| rank[t] > r) {
                pick = Some((rank[t], c));
            }
        }
        let vi = v.index();
        match pick {
            Some((_, c)) => {
                pos[vi] = pos[tail[c] as usize] + 1;
                chain_of[vi] = c as u32;
                tail[c] = vi as u32;
            }
            None => {
                pos[vi] = 0;
                chain_of[vi] = tail.len() as u32;
                tail.push(vi as u32);
            }
        }
        start[vi] = table.len();
        table.extend_from_slice(&row);
        ends[vi] = table.len();
        if table.len() > limit {
            return None;
        }
    }
    // Rows were written in topological order; lay them out by node index for `start[v + 1]`.
    let mut by_index = Vec::with_capacity(table.len());
    let mut starts = vec![0usize; n + 1];
    for v in 0..n {
        starts[v] = by_index.len();
        by_index.extend_from_slice(&table[start[v]..ends[v]]);
    }
    starts[n] = by_index.len();
    Some(Closure::Chains { chains: tail.len(), chain_of, pos, start: starts, table: by_index })
}

/// One bitset row per node (indexed by rank), by OR-ing successor rows in reverse order.
fn bit_rows<N, E>(dag: &DiGraph<N, E>, order: &[NodeIndex], rank: &[u32]) -> Closure {
    let n = dag.node_count();
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
}

/// Per node: one past the highest rank it does not reach (itself included).
fn frontiers(closure: &Closure, order: &[NodeIndex], rank: &[u32]) -> Vec<u32> {
    let n = order.len();
    let mut frontier = vec![0u32; n];
    match closure {
        Closure::Chains { chains, chain_of, pos, start, table } => {
            // Nodes of each chain by position; along a chain, rows only grow (later nodes have
            // more ancestors), so the first node u reaches is found by binary search.
            let mut members: Vec<Vec<u32>> = vec![Vec::new(); *chains];
            for &v in order {
                if let Some(m) = members.get_mut(chain_of[v.index()] as usize) {
                    m.push(v.index() as u32);
                }
            }
            for u in 0..n {
                let (cu, pu) = (chain_of[u] as usize, pos[u]);
                let mut f = rank[u] + 1;
                for m in &members {
                    let reached = |w: &u32| {
                        let w = *w as usize;
                        table[start[w]..start[w + 1]].get(cu).is_some_and(|&last| last > pu)
                    };
                    // Index of the first member u reaches; the one before it is not reached.
                    let first = m.partition_point(|w| !reached(w));
                    if first > 0 {
                        f = f.max(rank[m[first - 1] as usize] + 1);
                    }
                }
                frontier[u] = f;
            }
        }
        Closure::Bits(rows) => {
            for (u, row) in rows.iter().enumerate() {
                // Highest rank the row lacks, searched from the top.
                let mut f = rank[u] + 1;
                let mut r = n;
                while r > rank[u] as usize + 1 {
                    r -= 1;
                    if !row.contains(r) {
                        f = f.max(r as u32 + 1);
                        break;
                    }
                }
                frontier[u] = f;
            }
        }
    }
    frontier
}
