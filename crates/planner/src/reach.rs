//! Reachability: the DAG's strict transitive closure among the nodes that matter (the
//! *projection*), compressed along a chain cover.
//!
//! Only nodes that some buffer uses take part in `precedes`, so [`crate::plan_slab`] builds the
//! closure among those nodes alone: paths still run through the whole DAG, but rows are kept
//! for projected nodes only, and a node that no buffer uses costs a few words however wide the
//! DAG is (100,000 unconnected nodes with 2 buffers: two rows, not `100,000^2` bits).
//!
//! A chain cover splits the projected nodes into chains `c_0, c_1, ...`, each totally ordered by
//! reachability. The projected ancestors of a node on chain `c` form a prefix of `c`, so the
//! closure is described by one number per node and chain: the last position on `c` that
//! reaches the node (Jagadish's compressed transitive closure, "A compression technique to
//! materialize transitive closure", ACM TODS 1990). Chains are built greedily in topological
//! order: a projected node joins a chain whose tail reaches it (the nearest such tail), else
//! starts a new one. Rows drop trailing zeros, so a node with no projected ancestor costs
//! nothing. A chain DAG (every MiniMalloc interval file) has one chain, so memory is `O(m)` for
//! `m` projected nodes; a layered tensor program about as many chains as its widest layer, so
//! `O(m * width)`. Should the table grow past plain bitsets (`m * m` bits), one bitset row over
//! the projected nodes is kept per projected node instead.
//!
//! Nodes outside the projection carry their row only while a successor still needs it (a
//! count of unvisited out-edges), so the build holds `O(n + m * m / 8)` bytes at worst for an
//! `n`-node DAG whose live rows stay narrow, as layered programs' do.

use fixedbitset::FixedBitSet;
use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::PlanError;

/// Marks a node outside the projection.
const NONE: u32 = u32::MAX;

/// The strict transitive closure of a DAG: `reaches(a, b)` iff there is a path of at least one
/// edge from `a` to `b` (a node never reaches itself).
///
/// Built over the whole DAG ([`Reachability::new`]) or projected onto the nodes that matter
/// ([`Reachability::among`], what [`crate::plan_slab`] uses: every node some buffer uses).
/// Queries between projected nodes are O(1) lookups; a query naming a node outside the
/// projection is still exact, answered by a search of the DAG (`O(n + e)`).
///
/// Memory for `n` nodes, `e` edges and `m` projected nodes with a chain cover of `k` chains
/// (`k = 1` when the projected nodes lie on one path): `8 * n` bytes of ranks, `4 * m * k`
/// bytes of closure and never more than about `m * m` bits, plus `8 * n + 4 * e` bytes of
/// adjacency when `m < n`.
#[derive(Debug, Clone)]
pub struct Reachability {
    /// Rank of each node (by node index) in a fixed topological order of the whole DAG.
    rank: Vec<u32>,
    /// Per node (by node index): its slot, the position among the projected nodes in the
    /// topological order, or `NONE` outside the projection.
    slot: Vec<u32>,
    /// Per slot: the node's index.
    node_at: Vec<u32>,
    /// Per slot: one past the highest rank of a projected node it does NOT reach (itself
    /// included). Every projected node of rank `>= frontier` is reached from it.
    frontier: Vec<u32>,
    /// Level of each node (by node index): the most projected nodes on a path into it, itself
    /// excluded. Depends only on the DAG's paths, never on how it is listed.
    level: Vec<u32>,
    closure: Closure,
    /// Successors of every node (node `v`'s are `succ[succ_start[v]..succ_start[v + 1]]`), for
    /// queries outside the projection; both empty when every node is projected.
    succ_start: Vec<usize>,
    succ: Vec<u32>,
}

#[derive(Debug, Clone)]
enum Closure {
    /// Chain-compressed, by slot. Slot `s`'s row is `table[start[s]..start[s + 1]]`, one entry
    /// per chain up to the last one holding an ancestor: `1 +` the last position on that chain
    /// reaching the node, or 0 when none does. Chains past the row's end hold no ancestor.
    Chains { chains: usize, chain_of: Vec<u32>, pos: Vec<u32>, start: Vec<usize>, table: Vec<u32> },
    /// One row per slot; bit `j` = reaches the projected node of slot `j`.
    Bits(Vec<FixedBitSet>),
}

impl Reachability {
    /// Builds the closure among every node of `dag`: a topological order, then one pass in that
    /// order that computes each node's row from its predecessors' (per chain, the maximum) and
    /// puts the node on a chain.
    ///
    /// # Errors
    /// [`PlanError::Cyclic`] when the graph has a cycle or a self-loop;
    /// [`PlanError::OutOfMemory`] when the closure cannot be allocated.
    pub fn new<N, E>(dag: &DiGraph<N, E>) -> Result<Self, PlanError> {
        let order = topological_order(dag)?;
        let mut keep = FixedBitSet::with_capacity(dag.node_count());
        keep.insert_range(..);
        Self::project(dag, &order, &keep)
    }

    /// Builds the closure projected onto `nodes` (typically every node some buffer uses):
    /// paths through every node of `dag` count, but rows are kept for `nodes` only, so time and
    /// memory follow the projection, not the DAG's width. Nodes not in `dag` are skipped.
    ///
    /// # Errors
    /// [`PlanError::Cyclic`] when the graph has a cycle or a self-loop anywhere, projected or
    /// not; [`PlanError::OutOfMemory`] when the closure cannot be allocated.
    pub fn among<N, E>(
        dag: &DiGraph<N, E>,
        nodes: impl IntoIterator<Item = NodeIndex>,
    ) -> Result<Self, PlanError> {
        let order = topological_order(dag)?;
        let n = dag.node_count();
        let mut keep = FixedBitSet::with_capacity(n);
        for v in nodes.into_iter().filter(|v| v.index() < n) {
            keep.insert(v.index());
        }
        Self::project(dag, &order, &keep)
    }

    /// The closure of `dag` projected onto the node indices in `keep`, given a topological
    /// order of every node (from [`topological_order`]).
    ///
    /// # Errors
    /// [`PlanError::OutOfMemory`] when the closure needs bitsets that cannot be allocated.
    pub(crate) fn project<N, E>(
        dag: &DiGraph<N, E>,
        order: &[NodeIndex],
        keep: &FixedBitSet,
    ) -> Result<Self, PlanError> {
        let n = dag.node_count();
        let mut rank = vec![0u32; n];
        let mut slot = vec![NONE; n];
        let mut node_at = Vec::new();
        for (r, v) in order.iter().enumerate() {
            rank[v.index()] = r as u32;
            if keep.contains(v.index()) {
                slot[v.index()] = node_at.len() as u32;
                node_at.push(v.index() as u32);
            }
        }
        let m = node_at.len();
        let closure = match chain_table(dag, order, &slot, m) {
            Some(table) => table,
            None => {
                crate::memory::ensure("closure bitsets", crate::memory::bitset_bytes(m, m))?;
                bit_rows(dag, order, &slot, m)
            }
        };
        let frontier = frontiers(&closure, &rank, &node_at);
        let (succ_start, succ) =
            if node_at.len() < n { adjacency(dag) } else { Default::default() };
        let mut level = vec![0u32; n];
        for &v in order {
            let here = level[v.index()] + u32::from(slot[v.index()] != NONE);
            for w in dag.neighbors_directed(v, Direction::Outgoing) {
                level[w.index()] = level[w.index()].max(here);
            }
        }
        Ok(Self { rank, slot, node_at, frontier, level, closure, succ_start, succ })
    }

    /// Number of nodes in the DAG the closure was built from.
    pub fn node_count(&self) -> usize {
        self.rank.len()
    }

    /// Number of projected nodes: [`Reachability::node_count`] for [`Reachability::new`].
    pub fn projected_count(&self) -> usize {
        self.node_at.len()
    }

    /// `true` iff a path of one or more edges leads from `a` to `b`. Out-of-range nodes reach
    /// nothing. O(1) between projected nodes; a search of the DAG otherwise.
    pub fn reaches(&self, a: NodeIndex, b: NodeIndex) -> bool {
        let (a, b) = (a.index(), b.index());
        match (self.slot.get(a), self.slot.get(b)) {
            (Some(&sa), Some(&sb)) if sa != NONE && sb != NONE => {
                self.slot_reaches(sa as usize, sb as usize)
            }
            (Some(_), Some(_)) => self.search(a, Some(b)).contains(b),
            _ => false,
        }
    }

    /// `true` iff every use in `a` reaches every use in `b` (plan_slab's `precedes`).
    /// Strict: a buffer never precedes one that shares a use with it.
    pub fn precedes(&self, a: &[NodeIndex], b: &[NodeIndex]) -> bool {
        a.iter().all(|&x| b.iter().all(|&y| self.reaches(x, y)))
    }

    /// `true` iff the two use sets may not share bytes: neither precedes the other.
    pub fn conflicts(&self, a: &[NodeIndex], b: &[NodeIndex]) -> bool {
        !self.precedes(a, b) && !self.precedes(b, a)
    }

    /// The nodes `node` reaches, as a bitset over node indices; `None` for an out-of-range node.
    /// The closure is stored compressed, so this materializes the row: `O(n)` per call, plus a
    /// search of the DAG when not every node is projected.
    pub fn row(&self, node: NodeIndex) -> Option<FixedBitSet> {
        let n = self.rank.len();
        let u = node.index();
        let &su = self.slot.get(u)?;
        let mut out = if self.node_at.len() < n {
            self.search(u, None)
        } else {
            FixedBitSet::with_capacity(n)
        };
        if su != NONE {
            for (sv, &v) in self.node_at.iter().enumerate() {
                out.set(v as usize, self.slot_reaches(su as usize, sv));
            }
        }
        Some(out)
    }

    /// Rank of `node` in the closure's fixed topological order of the whole DAG (0 for an
    /// out-of-range node).
    pub(crate) fn rank(&self, node: NodeIndex) -> u32 {
        self.rank.get(node.index()).copied().unwrap_or(0)
    }

    /// One past the highest rank of a projected node that `node` does not reach: every
    /// projected node of rank `>=` this is reached from `node`. Equals `rank + 1` when the
    /// projected nodes lie on one path; `u32::MAX` (nothing is known to be reached) for a node
    /// outside the projection.
    pub(crate) fn frontier(&self, node: NodeIndex) -> u32 {
        match self.slot.get(node.index()) {
            Some(&s) if s != NONE => self.frontier.get(s as usize).copied().unwrap_or(u32::MAX),
            _ => u32::MAX,
        }
    }

    /// Level of `node`: the most projected nodes on any path into it (itself excluded; 0 for an
    /// out-of-range node). A node reaching another has a lower level, so levels order buffers
    /// like ranks do (if `a` precedes `b`, every use of `a` has a lower level than every use of
    /// `b`), but unlike ranks they depend only on the DAG, not on how its nodes and edges are
    /// listed (the longest-path layering of Sugiyama et al., 1981).
    pub(crate) fn level(&self, node: NodeIndex) -> u32 {
        self.level.get(node.index()).copied().unwrap_or(0)
    }

    /// `true` when the closure restricted to the projected nodes is a total order (they lie on
    /// one path, as every interval file's time points do): buffers whose uses are all projected
    /// then conflict exactly when their rank intervals overlap.
    pub(crate) fn is_total_order(&self) -> bool {
        match &self.closure {
            Closure::Chains { chains, .. } => *chains <= 1,
            Closure::Bits(_) => false,
        }
    }

    /// Closure lookup between two slots.
    fn slot_reaches(&self, sa: usize, sb: usize) -> bool {
        match &self.closure {
            Closure::Chains { chain_of, pos, start, table, .. } => {
                let (Some(&c), Some(&p)) = (chain_of.get(sa), pos.get(sa)) else { return false };
                chain_row(start, table, sb).get(c as usize).is_some_and(|&last| last > p)
            }
            Closure::Bits(rows) => rows.get(sa).is_some_and(|row| row.contains(sb)),
        }
    }

    /// The nodes reached from `from` by a depth-first search over the stored adjacency. With a
    /// `target`, stops once it is found and skips nodes ranked past it (they cannot lead to it).
    fn search(&self, from: usize, target: Option<usize>) -> FixedBitSet {
        let n = self.rank.len();
        let limit = target.and_then(|t| self.rank.get(t).copied()).unwrap_or(u32::MAX);
        let mut seen = FixedBitSet::with_capacity(n);
        let mut stack = vec![from];
        while let Some(v) = stack.pop() {
            let (Some(&lo), Some(&hi)) = (self.succ_start.get(v), self.succ_start.get(v + 1))
            else {
                continue;
            };
            for &w in self.succ.get(lo..hi).unwrap_or(&[]) {
                let w = w as usize;
                if self.rank.get(w).is_some_and(|&r| r <= limit) && !seen.put(w) {
                    if Some(w) == target {
                        return seen;
                    }
                    stack.push(w);
                }
            }
        }
        seen
    }
}

/// A topological order of every node of `dag`.
///
/// # Errors
/// [`PlanError::Cyclic`] when the graph has a cycle or a self-loop.
pub(crate) fn topological_order<N, E>(dag: &DiGraph<N, E>) -> Result<Vec<NodeIndex>, PlanError> {
    petgraph::algo::toposort(dag, None).map_err(|_| PlanError::Cyclic)
}

/// Slot `s`'s row of a chain table (empty when out of range).
fn chain_row<'a>(start: &[usize], table: &'a [u32], s: usize) -> &'a [u32] {
    match (start.get(s), start.get(s + 1)) {
        (Some(&a), Some(&b)) => table.get(a..b).unwrap_or(&[]),
        _ => &[],
    }
}

/// Raises `row` to the entrywise maximum of itself and `other`, growing it as needed.
fn merge_max(row: &mut Vec<u32>, other: &[u32]) {
    if row.len() < other.len() {
        row.resize(other.len(), 0);
    }
    for (a, &b) in row.iter_mut().zip(other) {
        *a = (*a).max(b);
    }
}

/// The chain-compressed closure over the `m` projected nodes (`slot` per node), or `None` when
/// it would outgrow bitsets.
fn chain_table<N, E>(
    dag: &DiGraph<N, E>,
    order: &[NodeIndex],
    slot: &[u32],
    m: usize,
) -> Option<Closure> {
    let n = dag.node_count();
    // Past this many entries (4 bytes each), one bit per projected pair is smaller.
    let limit = (m / 32).saturating_mul(m).max(4 * m);
    let mut chain_of = vec![0u32; m];
    let mut pos = vec![0u32; m];
    // Slot of each chain's last node.
    let mut tail: Vec<u32> = Vec::new();
    let mut start = Vec::with_capacity(m + 1);
    start.push(0usize);
    let mut table: Vec<u32> = Vec::new();
    // Rows of nodes outside the projection, dropped once every out-edge has been followed.
    let mut passing: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut edges_left = vec![0u32; n];
    let mut row: Vec<u32> = Vec::new();
    for &v in order {
        row.clear();
        for edge in dag.edges_directed(v, Direction::Incoming) {
            let p = edge.source().index();
            match slot[p] {
                NONE => {
                    merge_max(&mut row, &passing[p]);
                    if edges_left[p] > 0 {
                        edges_left[p] -= 1;
                        if edges_left[p] == 0 {
                            passing[p] = Vec::new();
                        }
                    }
                }
                sp => {
                    let sp = sp as usize;
                    merge_max(&mut row, chain_row(&start, &table, sp));
                    let c = chain_of[sp] as usize;
                    if row.len() <= c {
                        row.resize(c + 1, 0);
                    }
                    row[c] = row[c].max(pos[sp] + 1);
                }
            }
        }
        let vi = v.index();
        if slot[vi] == NONE {
            let out = dag.edges(v).count();
            if out > 0 && !row.is_empty() {
                passing[vi] = row.clone();
                edges_left[vi] = out as u32;
            }
            continue;
        }
        let sv = slot[vi] as usize;
        // Join the chain whose tail reaches v and sits nearest to it in the order.
        let mut pick: Option<(u32, usize)> = None;
        for (c, &last) in row.iter().enumerate() {
            let t = tail[c];
            if last == pos[t as usize] + 1 && pick.is_none_or(|(s, _)| t > s) {
                pick = Some((t, c));
            }
        }
        match pick {
            Some((t, c)) => {
                pos[sv] = pos[t as usize] + 1;
                chain_of[sv] = c as u32;
                tail[c] = sv as u32;
            }
            None => {
                pos[sv] = 0;
                chain_of[sv] = tail.len() as u32;
                tail.push(sv as u32);
            }
        }
        table.extend_from_slice(&row);
        start.push(table.len());
        if table.len() > limit {
            return None;
        }
    }
    Some(Closure::Chains { chains: tail.len(), chain_of, pos, start, table })
}

/// One bitset row over the `m` projected nodes per projected node, by OR-ing successor rows in
/// reverse topological order; a row of a node outside the projection is dropped once every
/// predecessor has read it.
fn bit_rows<N, E>(dag: &DiGraph<N, E>, order: &[NodeIndex], slot: &[u32], m: usize) -> Closure {
    let n = dag.node_count();
    let mut rows = vec![FixedBitSet::new(); m];
    let mut passing = vec![FixedBitSet::new(); n];
    let mut edges_left = vec![0u32; n];
    for &v in order.iter().rev() {
        let mut row = FixedBitSet::new();
        for edge in dag.edges(v) {
            let s = edge.target().index();
            match slot[s] {
                NONE => {
                    row.union_with(&passing[s]);
                    if edges_left[s] > 0 {
                        edges_left[s] -= 1;
                        if edges_left[s] == 0 {
                            passing[s] = FixedBitSet::new();
                        }
                    }
                }
                ss => {
                    row.grow(m);
                    row.insert(ss as usize);
                    row.union_with(&rows[ss as usize]);
                }
            }
        }
        let vi = v.index();
        match slot[vi] {
            NONE => {
                let into = dag.edges_directed(v, Direction::Incoming).count();
                if into > 0 && !row.is_clear() {
                    passing[vi] = row;
                    edges_left[vi] = into as u32;
                }
            }
            sv => {
                row.grow(m);
                rows[sv as usize] = row;
            }
        }
    }
    Closure::Bits(rows)
}

/// Highest bit index `j` with `lo < j < len` that `row` lacks (bits past its length count as
/// lacking), scanning a word at a time from the top.
fn highest_zero_above(row: &FixedBitSet, lo: usize, len: usize) -> Option<usize> {
    let top = len.checked_sub(1).filter(|&t| t > lo)?;
    if top >= row.len() {
        return Some(top);
    }
    let bits = usize::BITS as usize;
    let blocks = row.as_slice();
    let mut b = top / bits;
    loop {
        let mut word = !blocks.get(b).copied().unwrap_or(0);
        if b == top / bits && top % bits + 1 < bits {
            word &= (1usize << (top % bits + 1)) - 1;
        }
        if word != 0 {
            let j = b * bits + (bits - 1 - word.leading_zeros() as usize);
            return (j > lo).then_some(j);
        }
        if b == 0 || b * bits <= lo {
            return None;
        }
        b -= 1;
    }
}

/// Per slot: one past the highest rank of a projected node it does not reach (itself
/// included).
fn frontiers(closure: &Closure, rank: &[u32], node_at: &[u32]) -> Vec<u32> {
    let m = node_at.len();
    let rank_of = |s: usize| rank[node_at[s] as usize];
    let mut frontier = vec![0u32; m];
    match closure {
        Closure::Chains { chains, chain_of, pos, start, table } => {
            // Members of each chain by position (slots ascend along a chain).
            let mut members: Vec<Vec<u32>> = vec![Vec::new(); *chains];
            for (s, &c) in chain_of.iter().enumerate() {
                members[c as usize].push(s as u32);
            }
            // Chains by their tail's rank, highest first: a chain whose tail `u` does not reach
            // settles the answer, as no later chain holds a higher rank.
            let mut by_tail: Vec<&Vec<u32>> = members.iter().filter(|m| !m.is_empty()).collect();
            by_tail.sort_unstable_by_key(|m| std::cmp::Reverse(m[m.len() - 1]));
            for u in 0..m {
                let (cu, pu) = (chain_of[u] as usize, pos[u]);
                let reached = |w: &u32| {
                    chain_row(start, table, *w as usize).get(cu).is_some_and(|&last| last > pu)
                };
                let mut f = rank_of(u) + 1;
                for chain in &by_tail {
                    let tail = chain[chain.len() - 1];
                    if rank_of(tail as usize) < f {
                        break;
                    }
                    if !reached(&tail) {
                        f = rank_of(tail as usize) + 1;
                        break;
                    }
                    // Along a chain, rows only grow (later nodes have more ancestors), so the
                    // first member u reaches is found by binary search; the one before is not.
                    let first = chain.partition_point(|w| !reached(w));
                    if first > 0 {
                        f = f.max(rank_of(chain[first - 1] as usize) + 1);
                    }
                }
                frontier[u] = f;
            }
        }
        Closure::Bits(rows) => {
            for (u, row) in rows.iter().enumerate() {
                frontier[u] = match highest_zero_above(row, u, m) {
                    Some(j) => rank_of(j) + 1,
                    None => rank_of(u) + 1,
                };
            }
        }
    }
    frontier
}

/// Successor lists of every node in compressed form (`succ_start` has `n + 1` entries).
fn adjacency<N, E>(dag: &DiGraph<N, E>) -> (Vec<usize>, Vec<u32>) {
    let n = dag.node_count();
    let mut start = Vec::with_capacity(n + 1);
    let mut succ = Vec::with_capacity(dag.edge_count());
    for v in dag.node_indices() {
        start.push(succ.len());
        succ.extend(dag.edges(v).map(|e| e.target().index() as u32));
    }
    start.push(succ.len());
    (start, succ)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64: a fixed stream of DAGs.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }
    }

    /// `n` nodes in a shuffled hidden order, each forward pair an edge with `percent`% odds.
    fn random_dag(rng: &mut Rng, n: usize, percent: usize) -> DiGraph<(), ()> {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut dag = DiGraph::new();
        let ids: Vec<NodeIndex> = (0..n).map(|_| dag.add_node(())).collect();
        for a in 0..n {
            for b in a + 1..n {
                if rng.below(100) < percent {
                    dag.add_edge(ids[order[a]], ids[order[b]], ());
                }
            }
        }
        dag
    }

    fn dfs(dag: &DiGraph<(), ()>) -> Vec<Vec<bool>> {
        let n = dag.node_count();
        let mut out = vec![vec![false; n]; n];
        for (a, row) in out.iter_mut().enumerate() {
            let mut stack: Vec<NodeIndex> = dag.neighbors(NodeIndex::new(a)).collect();
            while let Some(v) = stack.pop() {
                if !row[v.index()] {
                    row[v.index()] = true;
                    stack.extend(dag.neighbors(v));
                }
            }
        }
        out
    }

    /// Both closure forms, over random projections, agree with a DFS on every pair, and every
    /// frontier is exactly one past the highest projected rank the node does not reach.
    #[test]
    fn projected_closure_and_frontier_match_dfs() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut chains, mut bits) = (0, 0);
        for round in 0..400 {
            let n = 1 + rng.below(48);
            let dag = random_dag(&mut rng, n, [2, 8, 25, 60][round % 4]);
            let truth = dfs(&dag);
            let percent = [100, 50, 10][round % 3];
            let keep: Vec<NodeIndex> =
                (0..n).filter(|_| rng.below(100) < percent).map(NodeIndex::new).collect();
            let reach = Reachability::among(&dag, keep.iter().copied()).unwrap();
            assert_eq!(reach.projected_count(), keep.len());
            match reach.closure {
                Closure::Chains { .. } => chains += 1,
                Closure::Bits(_) => bits += 1,
            }
            for (a, want) in truth.iter().enumerate() {
                let row = reach.row(NodeIndex::new(a)).unwrap();
                for (b, &expected) in want.iter().enumerate() {
                    let (na, nb) = (NodeIndex::new(a), NodeIndex::new(b));
                    assert_eq!(reach.reaches(na, nb), expected, "round {round}: {a} -> {b}");
                    assert_eq!(row.contains(b), expected, "round {round}: row {a} bit {b}");
                }
            }
            for &u in &keep {
                let mut f = reach.rank(u) + 1;
                for &w in &keep {
                    if w != u && !truth[u.index()][w.index()] {
                        f = f.max(reach.rank(w) + 1);
                    }
                }
                assert_eq!(reach.frontier(u), f, "round {round}: frontier of {}", u.index());
            }
        }
        assert!(chains > 50 && bits > 50, "{chains} chain tables, {bits} bitsets");
    }

    #[test]
    fn unused_nodes_cost_no_rows() {
        // 10,000 unconnected nodes, two of them used: the closure holds no entry at all.
        let mut dag: DiGraph<(), ()> = DiGraph::new();
        let ids: Vec<NodeIndex> = (0..10_000).map(|_| dag.add_node(())).collect();
        let reach = Reachability::among(&dag, [ids[0], ids[9_999]]).unwrap();
        match &reach.closure {
            Closure::Chains { chains, table, .. } => assert_eq!((*chains, table.len()), (2, 0)),
            Closure::Bits(_) => panic!("two unconnected nodes need no bitsets"),
        }
        assert!(!reach.reaches(ids[0], ids[9_999]));
        assert!(!reach.is_total_order());
        // A path through unused nodes still orders the used ones; a projected chain is total.
        let mut dag: DiGraph<(), ()> = DiGraph::new();
        let ids: Vec<NodeIndex> = (0..5).map(|_| dag.add_node(())).collect();
        for w in ids.windows(2) {
            dag.add_edge(w[0], w[1], ());
        }
        let side = dag.add_node(());
        dag.add_edge(ids[1], side, ());
        let reach = Reachability::among(&dag, [ids[0], ids[4]]).unwrap();
        assert!(reach.reaches(ids[0], ids[4]) && !reach.reaches(ids[4], ids[0]));
        assert!(reach.is_total_order());
        assert_eq!(reach.frontier(ids[0]), reach.rank(ids[0]) + 1);
        assert_eq!(reach.frontier(ids[2]), u32::MAX);
    }

    #[test]
    fn cycles_outside_the_projection_are_errors() {
        let mut dag: DiGraph<(), ()> = DiGraph::new();
        let a = dag.add_node(());
        let b = dag.add_node(());
        let c = dag.add_node(());
        dag.add_edge(b, c, ());
        dag.add_edge(c, b, ());
        assert_eq!(Reachability::among(&dag, [a]).unwrap_err(), PlanError::Cyclic);
        let mut dag: DiGraph<(), ()> = DiGraph::new();
        let a = dag.add_node(());
        let b = dag.add_node(());
        dag.add_edge(b, b, ());
        assert_eq!(Reachability::among(&dag, [a]).unwrap_err(), PlanError::Cyclic);
    }

    #[test]
    fn highest_zero_is_found_across_words() {
        let mut row = FixedBitSet::with_capacity(200);
        row.insert_range(..);
        assert_eq!(highest_zero_above(&row, 0, 200), None);
        row.set(70, false);
        assert_eq!(highest_zero_above(&row, 0, 200), Some(70));
        assert_eq!(highest_zero_above(&row, 70, 200), None);
        assert_eq!(highest_zero_above(&row, 0, 64), None);
        row.set(63, false);
        assert_eq!(highest_zero_above(&row, 0, 64), Some(63));
        assert_eq!(highest_zero_above(&row, 5, 300), Some(299));
        assert_eq!(highest_zero_above(&row, 5, 6), None);
    }
}
