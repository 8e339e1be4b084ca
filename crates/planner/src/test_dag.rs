//! Test inputs shared by the planner's unit tests: a random DAG and buffers on it.

use petgraph::graph::NodeIndex;

use crate::{Dag, SlabBuffer};

/// A DAG over `n` nodes (node ids taken modulo `n`, an edge only from a lower to a higher index,
/// so it is acyclic) and one buffer `b{k}` per `(bytes, uses)`, its uses taken modulo `n`.
pub(crate) fn dag_and_buffers(
    n: usize,
    edges: &[(usize, usize)],
    bufs: impl IntoIterator<Item = (usize, Vec<usize>)>,
) -> (Dag, Vec<SlabBuffer>) {
    let mut dag: Dag = Dag::new();
    let ids: Vec<NodeIndex> = (0..n).map(|_| dag.add_node(())).collect();
    for &(a, b) in edges {
        let (a, b) = (a % n, b % n);
        if a < b {
            dag.add_edge(ids[a], ids[b], ());
        }
    }
    let buffers = bufs
        .into_iter()
        .enumerate()
        .map(|(k, (bytes, uses))| {
            SlabBuffer::new(format!("b{k}"), bytes, uses.iter().map(|&u| ids[u % n]))
        })
        .collect();
    (dag, buffers)
}
