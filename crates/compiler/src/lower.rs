//! Lowering HLIR -> LLIR (SPEC section 3), with canonical node numbering.
//!
//! - One `upload` node (id 0) writes every input and weight, in declaration order.
//! - Each live compute op becomes one node: `lt_matmul` (cuBLASLt matmul with the HLIR node's
//!   epilogue and a workspace buffer), `add_bias` (an add with a `[N]` operand on an `[M, N]`
//!   tensor), `add` (equal shapes), `relu`, `gelu`.
//! - One `readback` node (the last) reads every output, in buffer order.
//!
//! Buffers, in planner request order: the uploaded buffers in declaration order, then for each
//! compute node in LLIR order its workspace (if a matmul), then its output. The workspace is
//! named `workspace` when the program has exactly one matmul, else `workspace0`, `workspace1`,
//! ... in LLIR order; intermediates are `t0`, `t1`, ... in LLIR order; inputs, weights and
//! outputs keep the user's names. Uses: producer, consumers, and readback for an output (so an
//! output that also feeds another op keeps its bytes until readback).
//!
//! Ops that reach no output are removed before planning (dead code elimination), so they never
//! take slab bytes.
//!
//! Canonical order: compute nodes are numbered by Kahn's topological sort, taking among the
//! ready nodes the one with the smallest *structural colour*. Colours come from colour
//! refinement (1-dimensional Weisfeiler-Lehman) over the live HLIR: a node's initial colour is
//! its op, parameters and (for inputs, weights and outputs) its name; each round recolours a
//! node by its colour, its operands' colours in operand order and its consumers' colours with
//! operand index. The colours depend only on the graph's structure, never on node indices, so
//! the same program declared in another op order numbers its nodes identically. After
//! refinement every live node has its own colour: outputs are named, leaves are named, and an
//! operand slot holds one node, so two nodes can only share a colour if they feed the same slot
//! of the same consumer. Declaration order is kept as a last tie-break for safety only.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;

use crate::error::{CompileError, ShapeText};
use crate::hlir::{Hlir, HlirOp, Shape, checked_bytes, element_count, is_bias_of};
use crate::llir::{BufferId, BufferRole, Llir, LlirBuffer, LlirNode, LlirOp, NodeId};

/// Lowers a validated HLIR to the LLIR, with `workspace_bytes` of cuBLASLt workspace per matmul.
///
/// # Errors
/// Every error of [`Hlir::validate`] (shapes, names, arity, outputs, cycles).
pub fn lower(hlir: &Hlir, workspace_bytes: usize) -> Result<Llir, CompileError> {
    let shapes = hlir.validate()?;
    let g = &hlir.graph;
    let n_hlir = g.node_count();

    let live = live_nodes(hlir);
    let leaves: Vec<NodeIndex> = g.node_indices().filter(|&n| g[n].op.is_leaf()).collect();
    let order = canonical_order(hlir, &live);

    let mut output_name: Vec<Option<String>> = vec![None; n_hlir];
    for (name, out) in hlir.outputs() {
        if let Some(&src) = hlir.operands(out).first() {
            output_name[src.index()] = Some(name);
        }
    }

    let readback: NodeId = order.len() + 1;
    let mut buffers: Vec<LlirBuffer> = Vec::new();
    // Buffer and LLIR node of each HLIR tensor.
    let mut buffer_of: Vec<Option<BufferId>> = vec![None; n_hlir];
    let mut node_of: Vec<NodeId> = vec![0; n_hlir];

    let tensor_buffer = |id: String, shape: &Shape, role: BufferRole| -> LlirBuffer {
        LlirBuffer {
            id,
            dtype: "f32",
            shape: shape.clone(),
            // validate() checked every shape's bytes fit.
            bytes: checked_bytes(shape).unwrap_or(usize::MAX),
            role,
            uses: Vec::new(),
        }
    };

    for &leaf in &leaves {
        let (name, role) = match &g[leaf].op {
            HlirOp::Input { name, .. } => (name.clone(), BufferRole::Input),
            HlirOp::Weight { name, .. } => (name.clone(), BufferRole::Weight),
            _ => continue,
        };
        buffer_of[leaf.index()] = Some(buffers.len());
        buffers.push(tensor_buffer(name, &shapes[leaf.index()], role));
    }
    let upload = LlirNode {
        op: LlirOp::Upload,
        inputs: Vec::new(),
        reads: Vec::new(),
        writes: (0..buffers.len()).collect(),
        workspace: None,
    };
    let mut nodes = vec![upload];

    let matmuls = order.iter().filter(|&&n| matches!(g[n].op, HlirOp::Matmul { .. })).count();
    let mut next_ws = 0usize;
    let mut next_t = 0usize;
    for &n in &order {
        let id = nodes.len();
        node_of[n.index()] = id;
        let operands = hlir.operands(n);
        let operand_shapes: Vec<&Shape> = operands.iter().map(|a| &shapes[a.index()]).collect();
        let shape = &shapes[n.index()];
        let mut reads: Vec<BufferId> =
            operands.iter().filter_map(|a| buffer_of[a.index()]).collect();
        let op = match (&g[n].op, operand_shapes.as_slice()) {
            (HlirOp::Matmul { epilogue }, [a, b, ..]) => match (a.as_slice(), b.as_slice()) {
                ([m, k], [_, n]) => LlirOp::LtMatmul { m: *m, k: *k, n: *n, epilogue: *epilogue },
                // validate() checked both operands are rank 2.
                _ => continue,
            },
            // validate() checked every shape's bytes fit, so its elements do too.
            (HlirOp::Add, [a, b]) if a != b => {
                // The matrix first, the bias second, whichever side the user wrote it on.
                if is_bias_of(a, b) {
                    reads.reverse();
                }
                let (m, cols) = match shape.as_slice() {
                    [m, cols] => (*m, *cols),
                    _ => (1, elements(shape)),
                };
                LlirOp::AddBias { m, n: cols }
            }
            (HlirOp::Add, _) => LlirOp::Add { len: elements(shape) },
            (HlirOp::Relu, _) => LlirOp::Relu { len: elements(shape) },
            (HlirOp::Gelu, _) => LlirOp::Gelu { len: elements(shape) },
            _ => continue,
        };
        let workspace = if matches!(op, LlirOp::LtMatmul { .. }) {
            let name =
                if matmuls == 1 { "workspace".to_string() } else { format!("workspace{next_ws}") };
            next_ws += 1;
            buffers.push(LlirBuffer {
                id: name,
                dtype: "u8",
                shape: vec![workspace_bytes],
                bytes: workspace_bytes,
                role: BufferRole::Workspace,
                uses: Vec::new(),
            });
            Some(buffers.len() - 1)
        } else {
            None
        };
        let out = match &output_name[n.index()] {
            Some(name) => tensor_buffer(name.clone(), shape, BufferRole::Output),
            None => {
                next_t += 1;
                tensor_buffer(format!("t{}", next_t - 1), shape, BufferRole::Intermediate)
            }
        };
        buffer_of[n.index()] = Some(buffers.len());
        buffers.push(out);
        let mut inputs: Vec<NodeId> = operands.iter().map(|a| node_of[a.index()]).collect();
        inputs.sort_unstable();
        inputs.dedup();
        nodes.push(LlirNode { op, inputs, reads, writes: vec![buffers.len() - 1], workspace });
    }

    let mut out_nodes: Vec<(BufferId, NodeId)> = order
        .iter()
        .filter(|n| output_name[n.index()].is_some())
        .filter_map(|n| buffer_of[n.index()].map(|b| (b, node_of[n.index()])))
        .collect();
    out_nodes.sort_unstable();
    let mut rb_inputs: Vec<NodeId> = out_nodes.iter().map(|&(_, n)| n).collect();
    rb_inputs.sort_unstable();
    rb_inputs.dedup();
    nodes.push(LlirNode {
        op: LlirOp::Readback,
        inputs: rb_inputs,
        reads: out_nodes.iter().map(|&(b, _)| b).collect(),
        writes: Vec::new(),
        workspace: None,
    });
    debug_assert_eq!(nodes.len(), readback + 1);

    for (id, node) in nodes.iter().enumerate() {
        for &b in node.reads.iter().chain(&node.writes).chain(&node.workspace) {
            if let Some(buf) = buffers.get_mut(b) {
                buf.uses.push(id);
            }
        }
    }
    for buf in &mut buffers {
        buf.uses.sort_unstable();
        buf.uses.dedup();
    }
    Ok(Llir { nodes, buffers })
}

/// Elements of a validated shape (saturating: validate() has refused any that overflow).
fn elements(shape: &[usize]) -> usize {
    element_count(shape).unwrap_or(usize::MAX)
}

/// Nodes from which an output is reachable (outputs included), plus every leaf: the signature
/// keeps unused inputs.
pub(crate) fn live_nodes(hlir: &Hlir) -> Vec<bool> {
    let g = &hlir.graph;
    let mut live = vec![false; g.node_count()];
    let mut stack: Vec<NodeIndex> = hlir.outputs().into_iter().map(|(_, n)| n).collect();
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut live[n.index()], true) {
            continue;
        }
        stack.extend(hlir.operands(n));
    }
    for n in g.node_indices() {
        if g[n].op.is_leaf() {
            live[n.index()] = true;
        }
    }
    live
}

/// Initial colour label of a node: op, parameters, and the name of leaves and outputs.
fn label(op: &HlirOp) -> String {
    match op {
        HlirOp::Input { name, shape } => format!("input {name} {}", ShapeText(shape.clone())),
        HlirOp::Weight { name, shape } => format!("weight {name} {}", ShapeText(shape.clone())),
        HlirOp::Matmul { epilogue } => format!("matmul {}", epilogue.name()),
        HlirOp::Output { name } => format!("output {name}"),
        op => op.name().to_string(),
    }
}

type Signature = (usize, Vec<usize>, Vec<(usize, usize)>);

/// Structural colour of every live node (colour refinement); `usize::MAX` for dead nodes.
fn structural_colors(hlir: &Hlir, live: &[bool]) -> Vec<usize> {
    let g = &hlir.graph;
    let nodes: Vec<NodeIndex> = g.node_indices().filter(|n| live[n.index()]).collect();
    let operands: Vec<Vec<NodeIndex>> = g.node_indices().map(|n| hlir.operands(n)).collect();
    let consumers: Vec<Vec<(NodeIndex, usize)>> = g
        .node_indices()
        .map(|n| hlir.consumers(n).into_iter().filter(|(c, _)| live[c.index()]).collect())
        .collect();

    let labels: BTreeSet<String> = nodes.iter().map(|&n| label(&g[n].op)).collect();
    let rank: BTreeMap<String, usize> =
        labels.into_iter().enumerate().map(|(i, l)| (l, i)).collect();
    let mut color = vec![usize::MAX; g.node_count()];
    for &n in &nodes {
        color[n.index()] = rank.get(&label(&g[n].op)).copied().unwrap_or(usize::MAX);
    }
    let mut classes = rank.len();
    // Each round only splits classes, so at most one round per node changes anything.
    for _ in 0..nodes.len() {
        let sigs: Vec<(NodeIndex, Signature)> = nodes
            .iter()
            .map(|&n| {
                let ops = operands[n.index()].iter().map(|a| color[a.index()]).collect();
                let mut users: Vec<(usize, usize)> =
                    consumers[n.index()].iter().map(|&(c, i)| (color[c.index()], i)).collect();
                users.sort_unstable();
                (n, (color[n.index()], ops, users))
            })
            .collect();
        let distinct: BTreeSet<&Signature> = sigs.iter().map(|(_, s)| s).collect();
        let rank: BTreeMap<&Signature, usize> =
            distinct.into_iter().enumerate().map(|(i, s)| (s, i)).collect();
        let next: Vec<(NodeIndex, usize)> =
            sigs.iter().map(|(n, s)| (*n, rank.get(s).copied().unwrap_or(usize::MAX))).collect();
        let stable = rank.len() == classes;
        classes = rank.len();
        for (n, c) in next {
            color[n.index()] = c;
        }
        if stable {
            break;
        }
    }
    color
}

/// Live compute nodes in canonical topological order (see the module docs).
pub(crate) fn canonical_order(hlir: &Hlir, live: &[bool]) -> Vec<NodeIndex> {
    let g = &hlir.graph;
    let color = structural_colors(hlir, live);
    let is_node = |n: NodeIndex| live[n.index()] && g[n].op.is_compute();
    let mut waiting: Vec<usize> = vec![0; g.node_count()];
    let mut ready: BTreeSet<(usize, NodeIndex)> = BTreeSet::new();
    for n in g.node_indices().filter(|&n| is_node(n)) {
        waiting[n.index()] = hlir.operands(n).into_iter().filter(|&a| is_node(a)).count();
        if waiting[n.index()] == 0 {
            ready.insert((color[n.index()], n));
        }
    }
    let mut order = Vec::new();
    while let Some((_, n)) = ready.pop_first() {
        order.push(n);
        for (c, _) in hlir.consumers(n) {
            if is_node(c) {
                waiting[c.index()] -= 1;
                if waiting[c.index()] == 0 {
                    ready.insert((color[c.index()], c));
                }
            }
        }
    }
    order
}
