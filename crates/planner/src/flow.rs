//! Dinic's maximum flow with an iterative blocking-flow search (no recursion, so deep networks
//! cannot overflow the stack). Used by [`crate::lower_bound`].

use fixedbitset::FixedBitSet;

/// A capacity that never saturates in practice: callers keep every finite capacity sum below it.
pub(crate) const INF: usize = usize::MAX;

const UNSEEN: u32 = u32::MAX;

/// A directed flow network. Edge `2k` is the `k`-th added edge and `2k + 1` its residual twin.
#[derive(Debug, Default)]
pub(crate) struct FlowNetwork {
    nodes: usize,
    to: Vec<usize>,
    cap: Vec<usize>,
    /// CSR adjacency, built lazily by [`FlowNetwork::max_flow`].
    start: Vec<usize>,
    adj: Vec<usize>,
}

impl FlowNetwork {
    pub(crate) fn new(nodes: usize) -> Self {
        Self { nodes, ..Self::default() }
    }

    /// Adds `u -> v` with capacity `cap`. Out-of-range endpoints are ignored.
    pub(crate) fn add_edge(&mut self, u: usize, v: usize, cap: usize) {
        if u >= self.nodes || v >= self.nodes {
            return;
        }
        self.to.push(v);
        self.cap.push(cap);
        self.to.push(u);
        self.cap.push(0);
    }

    fn tail(&self, e: usize) -> usize {
        self.to[e ^ 1]
    }

    fn build_adjacency(&mut self) {
        let mut start = vec![0usize; self.nodes + 1];
        for e in 0..self.to.len() {
            start[self.tail(e) + 1] += 1;
        }
        for v in 0..self.nodes {
            start[v + 1] += start[v];
        }
        let mut fill = start.clone();
        let mut adj = vec![0usize; self.to.len()];
        for e in 0..self.to.len() {
            let u = self.tail(e);
            adj[fill[u]] = e;
            fill[u] += 1;
        }
        self.start = start;
        self.adj = adj;
    }

    /// Pushes the maximum flow from `s` to `t` and returns its value. The residual capacities stay
    /// in the network for [`FlowNetwork::residual_reachable`].
    pub(crate) fn max_flow(&mut self, s: usize, t: usize) -> usize {
        if s >= self.nodes || t >= self.nodes || s == t {
            return 0;
        }
        self.build_adjacency();
        let mut total = 0usize;
        let mut level = vec![UNSEEN; self.nodes];
        let mut queue = Vec::with_capacity(self.nodes);
        let mut it = vec![0usize; self.nodes];
        let mut path: Vec<usize> = Vec::new();
        loop {
            // Level graph by BFS over edges with residual capacity.
            level.fill(UNSEEN);
            queue.clear();
            level[s] = 0;
            queue.push(s);
            let mut head = 0;
            while let Some(&u) = queue.get(head) {
                head += 1;
                for &e in &self.adj[self.start[u]..self.start[u + 1]] {
                    let v = self.to[e];
                    if self.cap[e] > 0 && level[v] == UNSEEN {
                        level[v] = level[u] + 1;
                        queue.push(v);
                    }
                }
            }
            if level[t] == UNSEEN {
                return total;
            }
            it.copy_from_slice(&self.start[..self.nodes]);
            // Blocking flow: advance along level edges, retreat from dead ends, augment at t.
            path.clear();
            let mut u = s;
            loop {
                if u == t {
                    let mut bottleneck = INF;
                    for &e in &path {
                        bottleneck = bottleneck.min(self.cap[e]);
                    }
                    let mut cut_at = None;
                    for (k, &e) in path.iter().enumerate() {
                        self.cap[e] -= bottleneck;
                        self.cap[e ^ 1] = self.cap[e ^ 1].saturating_add(bottleneck);
                        if self.cap[e] == 0 && cut_at.is_none() {
                            cut_at = Some(k);
                        }
                    }
                    total = total.saturating_add(bottleneck);
                    // Resume from the tail of the first saturated edge.
                    let k = cut_at.unwrap_or(0);
                    u = path.get(k).map_or(s, |&e| self.tail(e));
                    path.truncate(k);
                    continue;
                }
                let end = self.start[u + 1];
                let mut next = None;
                while it[u] < end {
                    let e = self.adj[it[u]];
                    let v = self.to[e];
                    if self.cap[e] > 0 && level[v] != UNSEEN && level[v] == level[u] + 1 {
                        next = Some((e, v));
                        break;
                    }
                    it[u] += 1;
                }
                match next {
                    Some((e, v)) => {
                        path.push(e);
                        u = v;
                    }
                    None => {
                        // Dead end: drop u from this phase and retreat one edge.
                        level[u] = UNSEEN;
                        match path.pop() {
                            Some(e) => {
                                u = self.tail(e);
                                it[u] += 1;
                            }
                            None => break,
                        }
                    }
                }
            }
        }
    }

    /// Nodes reachable from `s` through edges with residual capacity (the source side of a
    /// minimum cut after [`FlowNetwork::max_flow`]).
    pub(crate) fn residual_reachable(&self, s: usize) -> FixedBitSet {
        let mut seen = FixedBitSet::with_capacity(self.nodes);
        if s >= self.nodes || self.start.len() != self.nodes + 1 {
            if s < self.nodes {
                seen.insert(s);
            }
            return seen;
        }
        let mut stack = vec![s];
        seen.insert(s);
        while let Some(u) = stack.pop() {
            for &e in &self.adj[self.start[u]..self.start[u + 1]] {
                let v = self.to[e];
                if self.cap[e] > 0 && !seen.contains(v) {
                    seen.insert(v);
                    stack.push(v);
                }
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_network() {
        // CLRS figure 26.1: max flow 23.
        let mut g = FlowNetwork::new(6);
        for (u, v, c) in [
            (0, 1, 16),
            (0, 2, 13),
            (1, 3, 12),
            (2, 1, 4),
            (2, 4, 14),
            (3, 2, 9),
            (3, 5, 20),
            (4, 3, 7),
            (4, 5, 4),
        ] {
            g.add_edge(u, v, c);
        }
        assert_eq!(g.max_flow(0, 5), 23);
        let side = g.residual_reachable(0);
        // The minimum cut {s, v1, v2, v4} | {v3, t} has capacity 12 + 7 + 4 = 23.
        assert_eq!(side.ones().collect::<Vec<_>>(), vec![0, 1, 2, 4]);
    }

    #[test]
    fn infinite_middle_edges() {
        let mut g = FlowNetwork::new(4);
        g.add_edge(0, 1, 5);
        g.add_edge(1, 2, INF);
        g.add_edge(2, 3, 7);
        assert_eq!(g.max_flow(0, 3), 5);
        assert_eq!(g.max_flow(0, 3), 0);
    }

    #[test]
    fn degenerate_inputs() {
        let mut g = FlowNetwork::new(2);
        g.add_edge(0, 9, 1);
        assert_eq!(g.max_flow(0, 0), 0);
        assert_eq!(g.max_flow(0, 1), 0);
        assert_eq!(g.max_flow(0, 5), 0);
    }
}
