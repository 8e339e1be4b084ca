//! Random DAGs and requests shared by the planner's property tests (`algorithms.rs`,
//! `props.rs`).

#![allow(dead_code)]

use lumen_planner::{Dag, SlabBuffer, SlabOptions};
use petgraph::graph::NodeIndex;
use proptest::prelude::*;

/// A random DAG and requests, in a form that can be rebuilt under another node numbering.
#[derive(Debug, Clone)]
pub struct Case {
    pub nodes: usize,
    /// Edges as (from, to) node ids; acyclic by construction.
    pub edges: Vec<(usize, usize)>,
    /// (bytes, uses) per request.
    pub buffers: Vec<(usize, Vec<usize>)>,
    pub alignment: usize,
}

impl Case {
    /// The DAG with node `i` of the case as node `i`.
    pub fn build(&self) -> (Dag, Vec<SlabBuffer>) {
        self.build_relabelled(&self.identity(), false)
    }

    /// The DAG with node `i` of the case inserted as node `relabel[i]`, edges in the given order.
    pub fn build_relabelled(
        &self,
        relabel: &[usize],
        reverse_edges: bool,
    ) -> (Dag, Vec<SlabBuffer>) {
        let mut dag: Dag = Dag::new();
        let ids: Vec<NodeIndex> = (0..self.nodes).map(|_| dag.add_node(())).collect();
        let map = |i: usize| ids[relabel[i]];
        let mut edges = self.edges.clone();
        if reverse_edges {
            edges.reverse();
        }
        for (a, b) in edges {
            dag.add_edge(map(a), map(b), ());
        }
        let bufs = self
            .buffers
            .iter()
            .enumerate()
            .map(|(k, (bytes, uses))| {
                SlabBuffer::new(format!("b{k}"), *bytes, uses.iter().map(|&u| map(u)))
            })
            .collect();
        (dag, bufs)
    }

    pub fn identity(&self) -> Vec<usize> {
        (0..self.nodes).collect()
    }

    pub fn options(&self) -> SlabOptions {
        SlabOptions { alignment: self.alignment, ..SlabOptions::default() }
    }
}

/// `nodes` in 1..=max_nodes, a hidden topological order (a shuffle, so ids are not sorted),
/// each forward pair of that order an edge with probability drawn from `density`; up to
/// `max_buffers` requests of `bytes` used by 1 to 3 nodes; alignment 1, 64 or 256.
pub fn random_case(
    max_nodes: usize,
    max_buffers: usize,
    density: impl Strategy<Value = f64>,
    bytes: impl Strategy<Value = usize> + Clone,
) -> impl Strategy<Value = Case> {
    (1..=max_nodes, density).prop_flat_map(move |(n, density)| {
        let order = Just((0..n).collect::<Vec<usize>>()).prop_shuffle();
        let flags = prop::collection::vec(prop::bool::weighted(density), n * (n - 1) / 2);
        let bufs = prop::collection::vec(
            (bytes.clone(), prop::collection::vec(0..n, 1..=3)),
            0..=max_buffers,
        );
        let align = prop_oneof![Just(1usize), Just(64), Just(256)];
        (Just(n), order, flags, bufs, align).prop_map(|(n, order, flags, buffers, alignment)| {
            let mut edges = Vec::new();
            let mut k = 0;
            for a in 0..n {
                for b in a + 1..n {
                    if flags[k] {
                        edges.push((order[a], order[b]));
                    }
                    k += 1;
                }
            }
            Case { nodes: n, edges, buffers, alignment }
        })
    })
}

/// A layered program: `layers` layers of `width` ops, each op reading the op in its own column
/// and a random op of the previous layer (branches run in parallel and join), one output buffer
/// per op (4 KiB to 512 KiB) used by the op and its readers. The same stream as the
/// `algorithms` bench's layered DAG suite for the same `seed` (nonzero).
pub fn layered_program(layers: usize, width: usize, seed: u64) -> (Dag, Vec<SlabBuffer>) {
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut dag: Dag = Dag::new();
    let mut grid: Vec<Vec<NodeIndex>> = Vec::new();
    let mut readers: Vec<Vec<NodeIndex>> = Vec::new();
    for l in 0..layers {
        let row: Vec<NodeIndex> = (0..width).map(|_| dag.add_node(())).collect();
        readers.extend((0..width).map(|_| Vec::new()));
        if let Some(prev) = grid.last() {
            for (k, &v) in row.iter().enumerate() {
                let picks = [k, (next() as usize) % width];
                for p in picks {
                    dag.update_edge(prev[p], v, ());
                    readers[(l - 1) * width + p].push(v);
                }
            }
        }
        grid.push(row);
    }
    let buffers = grid
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, &v)| {
            let mut uses = vec![v];
            uses.extend(&readers[i]);
            SlabBuffer::new(format!("t{i}"), 4096usize << (next() % 8), uses)
        })
        .collect();
    (dag, buffers)
}
