//! Lowering HLIR -> LLIR, with views and canonical node numbering.
//!
//! - One `upload` node (id 0) writes every input and weight, in declaration order, then every
//!   constant, in order of value.
//! - Movement ops (reshape, permute, expand, slice) become no node at all: each folds into
//!   the [`View`] its consumers read their operand through (tinygrad folds movement into a
//!   `VIEW` before kernels; Luminal's `ShapeTracker` rides on the edge). Broadcasting by an
//!   elementwise op is an expand of the smaller operand (stride 0). Only a reshape the
//!   strides cannot express becomes a `contiguous` copy (Luminal inserts `Contiguous` the
//!   same way), followed by the reshape as a view.
//! - Each live compute op becomes one node: `lt_matmul` (cuBLASLt matmul with the HLIR node's
//!   epilogue and a workspace buffer; a product whose right operand is the same matrix for
//!   every batch and whose left rows fold into one axis is ONE GEMM, `m` = all rows, so a
//!   linear layer over `[B, S, D]` stays one launch with its epilogue; otherwise a batched
//!   product over the batch axes, each operand read through its view, transposed or
//!   broadcast as it is), a `map` named after its elementwise op (`add`, `relu`, `exp`, ...),
//!   a reduction (`sum`, `max`), `gather`, `concat`.
//! - An output is the buffer of the op that computes it, renamed, when the output reads that
//!   whole buffer in order (a reshape of it included); otherwise (a view such as a transpose,
//!   a slice, a second output of one tensor) a `contiguous` copy writes the output buffer.
//! - One `readback` node (the last) reads every output, in buffer order.
//!
//! Buffers, in planner request order: the uploaded buffers in upload order, then for each
//! compute node in LLIR order its workspace (if a matmul given workspace bytes), then its output. The workspace is
//! named `workspace` when the program has exactly one matmul, else `workspace0`, `workspace1`,
//! ... in LLIR order; intermediates are `t0`, `t1`, ... in LLIR order unless the user named the
//! tensor ([`crate::Tensor::name`]); inputs, weights and outputs keep the user's names; a
//! constant is `const(VALUE)`. Uses: producer, consumers, and readback for an output (so an
//! output that also feeds another op keeps its bytes until readback).
//!
//! Ops that reach no output are removed before planning (dead code elimination), so they never
//! take slab bytes; so are constants nothing live reads.
//!
//! Canonical order: compute nodes are numbered by Kahn's topological sort, taking among the
//! ready nodes the one with the smallest *structural colour*. Colours come from colour
//! refinement (1-dimensional Weisfeiler-Lehman) over the live HLIR: a node's initial colour is
//! its op, parameters and (for inputs, weights, outputs and named tensors) its name; each
//! round recolours a node by its colour, its operands' colours in operand order and its
//! consumers' colours with operand index. The colours depend only on the graph's structure,
//! never on node indices, so the same program declared in another op order numbers its nodes
//! identically. Declaration order is kept as a last tie-break for safety only. The refinement
//! runs in O((n + m) log n) for n live nodes and m operands: it re-examines only the classes
//! next to a class that split (the private `refine` module says how, and the bound).

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use crate::conv::ConvGeometry;
use crate::dtype::DType;
use crate::error::{CompileError, ShapeText};
use crate::hlir::{Hlir, HlirOp, Shape, TensorType, checked_bytes_of, element_count};
use crate::llir::{BufferId, BufferRole, Llir, LlirBuffer, LlirNode, LlirOp, NodeId, Operand};
use crate::ops::{ElemOp, UnaryOp};
use crate::view::{View, broadcast_shapes};

/// How a live HLIR node is lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Dead, or a view / an output that needs no node of its own.
    None,
    /// Written by the upload node.
    Leaf,
    /// Its own kernel: a compute op, a reshape that needs a copy, or an output copy.
    Node,
}

/// Lowers a validated HLIR to the LLIR, with `workspace_bytes` of cuBLASLt workspace per matmul
/// (0: no workspace buffer, as the CPU target compiles).
///
/// # Errors
/// Every error of [`Hlir::infer`] (shapes, names, arity, outputs, cycles);
/// [`CompileError::Unsupported`] for a reshape of an integer tensor's view that would need a
/// copy.
pub fn lower(hlir: &Hlir, workspace_bytes: usize) -> Result<Llir, CompileError> {
    let types = hlir.infer()?;
    // The symbolic axes of every node; the buffer of a node (or of an output) carries them.
    let mut axes = crate::symbolic::propagate(hlir, &types)?;
    let g = &hlir.graph;
    let n_hlir = g.node_count();
    let live = live_nodes(hlir);
    // An append no output reads would be dropped as dead code, its write with it.
    if let Some(n) = g.node_indices().find(|&n| g[n].op == HlirOp::AppendRows && !live[n.index()]) {
        let state = match hlir.operands(n).first().map(|&s| &g[s].op) {
            Some(HlirOp::Input { name, .. }) => name.clone(),
            _ => String::new(),
        };
        return Err(CompileError::Unsupported {
            what: format!(
                "append_rows to state `{state}` reaches no output, so its write would be dropped as dead \
                 code: read the state it returns"
            ),
            location: g[n].location,
        });
    }
    // A state nothing appends to stays zero forever: a mistake, not a program.
    let appended = |n| g.neighbors(n).any(|u| g[u].op == HlirOp::AppendRows);
    if let Some((n, name)) = g.node_indices().find_map(|n| match &g[n].op {
        HlirOp::Input { name, .. } if hlir.states.contains(name) && !appended(n) => Some((n, name)),
        _ => None,
    }) {
        return Err(CompileError::Unsupported {
            what: format!(
                "state `{name}` is declared but no output reads an append_rows to it: append to it \
                 and read the result, or remove the declaration"
            ),
            location: g[n].location,
        });
    }
    let topo = petgraph::algo::toposort(g, None).map_err(|_| CompileError::Cyclic)?;

    // Where every live node's value lives: a node with a buffer of its own, and the view of
    // that buffer which is the value.
    let mut src: Vec<Option<(NodeIndex, View)>> = vec![None; n_hlir];
    let mut kind = vec![Kind::None; n_hlir];
    for &n in topo.iter().filter(|n| live[n.index()]) {
        let t = &types[n.index()];
        let own = (n, View::contiguous(&t.shape));
        let operand = hlir.operands(n).first().and_then(|a| src[a.index()].clone());
        match (&g[n].op, operand) {
            (op, _) if op.is_leaf() => {
                kind[n.index()] = Kind::Leaf;
                src[n.index()] = Some(own);
            }
            (op, _) if op.is_compute() => {
                kind[n.index()] = Kind::Node;
                src[n.index()] = Some(own);
            }
            (HlirOp::Move(m), Some((base, view))) => {
                let moved = m.apply(&view);
                src[n.index()] = match moved {
                    Some(v) => Some((base, v)),
                    None => {
                        kind[n.index()] = Kind::Node;
                        Some(own)
                    }
                };
            }
            // Outputs are decided below, by name.
            _ => {}
        }
    }

    // An output takes over its producer's buffer when it reads all of it in order; the first
    // output by name wins a buffer two outputs would share. Otherwise it is a copy.
    let mut outputs = hlir.outputs();
    outputs.sort();
    let mut output_name: Vec<Option<(String, Shape)>> = vec![None; n_hlir];
    for (name, out) in &outputs {
        let Some((base, view)) = hlir.operands(*out).first().and_then(|a| src[a.index()].clone())
        else {
            continue;
        };
        let shape = types[out.index()].shape.clone();
        let whole = view.offset == 0
            && view.is_contiguous()
            && Some(view.elements()) == element_count(&types[base.index()].shape);
        // A state's bytes stay the state's: an output of one is a copy.
        let state = matches!(g[base].op, HlirOp::AppendRows);
        if kind[base.index()] == Kind::Node
            && whole
            && !state
            && output_name[base.index()].is_none()
        {
            output_name[base.index()] = Some((name.clone(), shape));
            axes[base.index()] = axes[out.index()].clone();
            src[out.index()] = Some((base, view));
        } else {
            kind[out.index()] = Kind::Node;
            output_name[out.index()] = Some((name.clone(), shape.clone()));
            src[out.index()] = Some((*out, View::contiguous(&shape)));
        }
    }

    // The nodes each kernel waits for: the owners of its operands' buffers.
    let deps: Vec<Vec<NodeIndex>> = g
        .node_indices()
        .map(|n| {
            if kind[n.index()] != Kind::Node {
                return Vec::new();
            }
            hlir.operands(n)
                .iter()
                .filter_map(|a| src[a.index()].as_ref().map(|(base, _)| *base))
                .filter(|b| kind[b.index()] == Kind::Node)
                .collect()
        })
        .collect();
    let is_node: Vec<bool> = kind.iter().map(|k| *k == Kind::Node).collect();
    let order = canonical_order(hlir, &live, &is_node, &deps);

    let readback: NodeId = order.len() + 1;
    let mut buffers: Vec<LlirBuffer> = Vec::new();
    // Buffer and LLIR node of each HLIR node that owns a buffer.
    let mut buffer_of: Vec<Option<BufferId>> = vec![None; n_hlir];
    let mut node_of: Vec<NodeId> = vec![0; n_hlir];

    let tensor_buffer = |id: String, t: &TensorType, role: BufferRole| -> LlirBuffer {
        LlirBuffer {
            id,
            dtype: t.dtype,
            shape: t.shape.clone(),
            // infer() checked every shape's bytes fit.
            bytes: checked_bytes_of(&t.shape, t.dtype).unwrap_or(usize::MAX),
            role,
            uses: Vec::new(),
            in_place_of: None,
            axes: vec![None; t.shape.len()],
        }
    };

    // The signature in declaration order, then constants by value: the same order whatever
    // order a rewrite rebuilt them in.
    let mut leaves: Vec<NodeIndex> =
        g.node_indices().filter(|n| kind[n.index()] == Kind::Leaf).collect();
    leaves.sort_by_key(|&n| match &g[n].op {
        HlirOp::Constant { value } => (1, Some(*value), n),
        _ => (0, None, n),
    });
    for n in leaves {
        let t = &types[n.index()];
        let (name, role) = match &g[n].op {
            HlirOp::Input { name, .. } if hlir.states.contains(name) => {
                check_state_use(hlir, n, name)?;
                (name.clone(), BufferRole::State)
            }
            HlirOp::Input { name, .. } => (name.clone(), BufferRole::Input),
            HlirOp::Weight { name, .. } => (name.clone(), BufferRole::Weight),
            HlirOp::Constant { value } => (format!("const({value})"), BufferRole::Constant(*value)),
            _ => continue,
        };
        buffer_of[n.index()] = Some(buffers.len());
        let mut buf = tensor_buffer(name, t, role);
        buf.axes = axes[n.index()].clone();
        buffers.push(buf);
    }
    let upload = LlirNode {
        op: LlirOp::Upload,
        inputs: Vec::new(),
        reads: Vec::new(),
        // A state is not uploaded: the runtime owns it (zero at prepare).
        writes: (0..buffers.len()).filter(|&b| buffers[b].role != BufferRole::State).collect(),
        workspace: None,
    };
    let mut nodes = vec![upload];

    // Nodes that get a workspace buffer: matmuls given workspace bytes, convolutions that need
    // an im2col matrix. One alone names its buffer `workspace`.
    let with_workspace = order
        .iter()
        .filter(|&&n| match &g[n].op {
            HlirOp::Matmul { .. } => workspace_bytes > 0,
            HlirOp::Conv { spec, .. } => {
                let shape = |i: usize| {
                    hlir.operands(n)
                        .get(i)
                        .map(|a| types[a.index()].shape.clone())
                        .unwrap_or_default()
                };
                ConvGeometry::new(spec, &shape(0), &shape(1)).is_ok_and(|g| g.workspace_bytes() > 0)
            }
            _ => false,
        })
        .count();
    let mut next_ws = 0usize;
    let mut next_t = 0usize;
    for &n in &order {
        let id = nodes.len();
        node_of[n.index()] = id;
        let malformed =
            |message: String| CompileError::Malformed { message, location: g[n].location };
        let operands = hlir.operands(n);
        let mut reads: Vec<Operand> = Vec::with_capacity(operands.len());
        let mut inputs: Vec<NodeId> = Vec::with_capacity(operands.len());
        for a in &operands {
            let (base, view) = src[a.index()]
                .clone()
                .ok_or_else(|| malformed(format!("operand %{} has no value", a.index())))?;
            let buffer = buffer_of[base.index()]
                .ok_or_else(|| malformed(format!("operand %{} has no buffer", a.index())))?;
            reads.push(Operand { buffer, view });
            inputs.push(node_of[base.index()]);
        }
        let t = &types[n.index()];
        let len = element_count(&t.shape).unwrap_or(usize::MAX);
        let op = match &g[n].op {
            op @ (HlirOp::Map(_) | HlirOp::IntMap(_)) => {
                for r in &mut reads {
                    r.view = r.view.expand(&t.shape).ok_or_else(|| {
                        malformed(format!(
                            "{} does not broadcast to {}",
                            ShapeText(r.view.shape.clone()),
                            ShapeText(t.shape.clone())
                        ))
                    })?;
                }
                match op {
                    HlirOp::IntMap(op) => LlirOp::IntMap { op: *op, len },
                    HlirOp::Map(op) => LlirOp::Map { op: *op, len },
                    other => return Err(malformed(format!("{} is not elementwise", other.name()))),
                }
            }
            HlirOp::Reduce { op, axis } => {
                let extent =
                    reads.first().and_then(|r| r.view.shape.get(*axis)).copied().unwrap_or(0);
                LlirOp::Reduce { op: *op, axis: *axis, len, extent }
            }
            HlirOp::Matmul { epilogue } => {
                let [a, b, ..] = reads.as_mut_slice() else {
                    return Err(malformed("matmul lacks operands".into()));
                };
                let (batch, m, k, cols, va, vb) = matmul_views(&a.view, &b.view)
                    .ok_or_else(|| malformed("matmul operands do not broadcast".into()))?;
                a.view = va;
                b.view = vb;
                LlirOp::LtMatmul { batch, m, k, n: cols, epilogue: *epilogue }
            }
            HlirOp::Gather => {
                let (vocab, dim) = match reads.first().map(|r| r.view.shape.as_slice()) {
                    Some(&[v, d]) => (v, d),
                    _ => return Err(malformed("gather's table is not 2-D".into())),
                };
                let rows = reads.get(1).map_or(0, |r| r.view.elements());
                LlirOp::Gather { rows, dim, vocab }
            }
            HlirOp::Conv { spec, epilogue } => {
                let shape =
                    |i: usize| reads.get(i).map(|r| r.view.shape.clone()).unwrap_or_default();
                let geometry = ConvGeometry::new(spec, &shape(0), &shape(1)).map_err(malformed)?;
                LlirOp::Conv { geometry, epilogue: *epilogue }
            }
            HlirOp::MaxPool(spec) => {
                let shape = reads.first().map(|r| r.view.shape.clone()).unwrap_or_default();
                LlirOp::MaxPool { geometry: ConvGeometry::pool(spec, &shape).map_err(malformed)? }
            }
            HlirOp::Take { axis, fill } => {
                let extent =
                    reads.first().and_then(|r| r.view.shape.get(*axis)).copied().unwrap_or(0);
                LlirOp::Take { axis: *axis, len, extent, fill: *fill }
            }
            HlirOp::Concat { axis } => LlirOp::Concat { axis: *axis, len },
            HlirOp::AppendRows => {
                // Reads the update only; writes the state's own buffer (below).
                reads.remove(0);
                LlirOp::AppendRows { len: reads.first().map_or(0, |r| r.view.elements()) }
            }
            HlirOp::Cast { to } => LlirOp::Cast { to: *to, len },
            HlirOp::TopK { axis, k, largest } => {
                let extent =
                    reads.first().and_then(|r| r.view.shape.get(*axis)).copied().unwrap_or(0);
                LlirOp::TopK { axis: *axis, k: *k, largest: *largest, len, extent }
            }
            HlirOp::GatherElements { axis } => {
                let extent =
                    reads.first().and_then(|r| r.view.shape.get(*axis)).copied().unwrap_or(0);
                LlirOp::GatherElements { axis: *axis, len, extent }
            }
            HlirOp::ScatterElements { axis, reduction } => {
                let extent =
                    reads.first().and_then(|r| r.view.shape.get(*axis)).copied().unwrap_or(0);
                let updates = reads.get(2).map_or(0, |r| r.view.elements());
                LlirOp::ScatterElements { axis: *axis, reduction: *reduction, len, extent, updates }
            }
            HlirOp::Arg { max, axis, last } => {
                let extent =
                    reads.first().and_then(|r| r.view.shape.get(*axis)).copied().unwrap_or(0);
                LlirOp::Arg { max: *max, axis: *axis, last: *last, len, extent }
            }
            // A reshape the strides cannot express, or an output read through a view: a
            // `contiguous` map for f32, a cast to the same type (a typed copy) for integers.
            HlirOp::Move(_) | HlirOp::Output { .. } if t.dtype == DType::F32 => {
                LlirOp::Map { op: ElemOp::Unary(UnaryOp::Contiguous), len }
            }
            HlirOp::Move(_) | HlirOp::Output { .. } => LlirOp::Cast { to: t.dtype, len },
            op => return Err(malformed(format!("{} cannot be lowered", op.name()))),
        };
        // A matmul given no workspace bytes (the CPU target) gets no workspace buffer: a
        // zero-byte buffer would still reserve one alignment unit of the slab. A convolution
        // gets its im2col patches (none when depthwise), whatever the target.
        let ws_bytes = match op {
            LlirOp::LtMatmul { .. } => workspace_bytes,
            LlirOp::Conv { geometry, .. } => geometry.workspace_bytes(),
            _ => 0,
        };
        let workspace = if ws_bytes > 0 {
            let name = if with_workspace == 1 {
                "workspace".to_string()
            } else {
                format!("workspace{next_ws}")
            };
            next_ws += 1;
            buffers.push(LlirBuffer {
                id: name,
                dtype: DType::U8,
                shape: vec![ws_bytes],
                bytes: ws_bytes,
                role: BufferRole::Workspace,
                uses: Vec::new(),
                in_place_of: None,
                axes: vec![None],
            });
            Some(buffers.len() - 1)
        } else {
            None
        };
        if let (LlirOp::AppendRows { .. }, Some(&state)) = (&op, operands.first()) {
            let buffer = buffer_of[state.index()]
                .ok_or_else(|| malformed("append_rows: the state has no buffer".into()))?;
            buffer_of[n.index()] = Some(buffer);
            inputs.sort_unstable();
            inputs.dedup();
            nodes.push(LlirNode { op, inputs, reads, writes: vec![buffer], workspace: None });
            continue;
        }
        let out = match (&output_name[n.index()], &g[n].name) {
            (Some((name, shape)), _) => tensor_buffer(
                name.clone(),
                &TensorType { shape: shape.clone(), dtype: t.dtype },
                BufferRole::Output,
            ),
            (None, Some(name)) => tensor_buffer(name.text.clone(), t, BufferRole::Intermediate),
            (None, None) => {
                next_t += 1;
                tensor_buffer(format!("t{}", next_t - 1), t, BufferRole::Intermediate)
            }
        };
        buffer_of[n.index()] = Some(buffers.len());
        let mut out = out;
        out.axes = axes[n.index()].clone();
        buffers.push(out);
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
        reads: out_nodes.iter().map(|&(b, _)| Operand::whole(b, &buffers[b].shape)).collect(),
        writes: Vec::new(),
        workspace: None,
    });
    debug_assert_eq!(nodes.len(), readback + 1);

    for (id, node) in nodes.iter().enumerate() {
        for b in node.buffers() {
            if let Some(buf) = buffers.get_mut(b) {
                buf.uses.push(id);
            }
        }
    }
    for buf in &mut buffers {
        // A state keeps its bytes for the next execute: no other buffer may share them.
        if buf.role == BufferRole::State {
            buf.uses.extend([0, readback]);
        }
        buf.uses.sort_unstable();
        buf.uses.dedup();
    }
    Ok(Llir { nodes, buffers, symbols: hlir.symbols.decls.clone() })
}

/// Checks that state `name` (node `n`) is read only as the state an append writes: one
/// consumer, an [`HlirOp::AppendRows`] taking it as operand 0 (so no read of the state before
/// the write, and one write per execute).
///
/// # Errors
/// [`CompileError::Unsupported`] at the state's declaration otherwise.
fn check_state_use(hlir: &Hlir, n: NodeIndex, name: &str) -> Result<(), CompileError> {
    let users = hlir.consumers(n);
    let appended = users.len() == 1
        && users.iter().all(|&(c, i)| i == 0 && hlir.graph[c].op == HlirOp::AppendRows);
    if appended || users.is_empty() {
        return Ok(());
    }
    Err(CompileError::Unsupported {
        what: format!(
            "state `{name}` is read other than by one append_rows: read the state that \
             append_rows returns (the rows after this step's write)"
        ),
        location: hlir.graph[n].location,
    })
}

/// The LLIR form of `a [..., M, K] x b [..., K, N]` read through `va` and `vb`: `(batch, m,
/// k, n, a view, b view)`. Batch axes are broadcast to one shape (stride 0 where an operand
/// repeats). When `b` is the same matrix for every batch and `a`'s rows fold into one axis,
/// the product is one GEMM with `m` = every row of `a` (rank-2 views). Otherwise batch axes
/// of length 1 are dropped and adjacent ones merged where both operands allow, and the views
/// are `[batch axes..., m, k]` and `[batch axes..., k, n]`. `None` when the batch axes do not
/// broadcast (validation refuses that first).
pub fn matmul_views(va: &View, vb: &View) -> Option<(usize, usize, usize, usize, View, View)> {
    let (ra, rb) = (va.rank(), vb.rank());
    if ra < 2 || rb < 2 {
        return None;
    }
    let (m, k, n) = (va.shape[ra - 2], va.shape[ra - 1], vb.shape[rb - 1]);
    let batch = broadcast_shapes(&va.shape[..ra - 2], &vb.shape[..rb - 2])?;
    let nb = batch.len();
    let full = |tail: [usize; 2]| -> Vec<usize> { batch.iter().copied().chain(tail).collect() };
    let a = va.expand(&full([m, k]))?;
    let b = vb.expand(&full([k, n]))?;
    let count: usize = batch.iter().product();
    if count == 0 {
        // No products at all: one empty batch axis, whatever the operands' strides.
        let empty = |tail: [usize; 2]| View {
            shape: [0].into_iter().chain(tail).collect(),
            strides: vec![0; 3],
            offset: 0,
        };
        return Some((0, m, k, n, empty([m, k]), empty([k, n])));
    }
    let matrix = |v: &View| View {
        shape: v.shape[nb..].to_vec(),
        strides: v.strides[nb..].to_vec(),
        offset: v.offset,
    };
    let b_repeats = count <= 1 || batch.iter().zip(&b.strides).all(|(&d, &s)| d == 1 || s == 0);
    if b_repeats && let Some(folded) = a.reshape(&[count * m, k]) {
        return Some((1, count * m, k, n, folded, matrix(&b)));
    }
    // Keep batch axes longer than 1, merging neighbours whose strides chain in both.
    let mut axes: Vec<(usize, usize, usize)> = Vec::new(); // (length, a stride, b stride)
    for i in (0..nb).filter(|&i| batch[i] > 1) {
        let (d, sa, sb) = (batch[i], a.strides[i], b.strides[i]);
        match axes.last_mut() {
            Some(last) if last.1 == sa * d && last.2 == sb * d => {
                last.0 *= d;
                last.1 = sa;
                last.2 = sb;
            }
            _ => axes.push((d, sa, sb)),
        }
    }
    let with_batch = |v: &View, pick: fn(&(usize, usize, usize)) -> usize| View {
        shape: axes.iter().map(|x| x.0).chain(v.shape[nb..].iter().copied()).collect(),
        strides: axes.iter().map(pick).chain(v.strides[nb..].iter().copied()).collect(),
        offset: v.offset,
    };
    Some((count, m, k, n, with_batch(&a, |x| x.1), with_batch(&b, |x| x.2)))
}

/// Nodes from which an output is reachable (outputs included), plus every input and weight:
/// the signature keeps unused inputs. Constants nothing live reads are dead.
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
        if g[n].op.is_signature() {
            live[n.index()] = true;
        }
    }
    live
}

/// The nodes of `is_node` (kernels) in canonical topological order (see the module docs),
/// `deps[n]` being the kernels node `n` waits for.
fn canonical_order(
    hlir: &Hlir,
    live: &[bool],
    is_node: &[bool],
    deps: &[Vec<NodeIndex>],
) -> Vec<NodeIndex> {
    let g = &hlir.graph;
    let color = crate::refine::structural_colors(hlir, live);
    let mut waiting: Vec<usize> = vec![0; g.node_count()];
    let mut users: Vec<Vec<NodeIndex>> = vec![Vec::new(); g.node_count()];
    let mut ready: BTreeSet<(u64, NodeIndex)> = BTreeSet::new();
    for n in g.node_indices().filter(|n| is_node[n.index()]) {
        let mut mine = deps[n.index()].clone();
        mine.sort_unstable();
        mine.dedup();
        waiting[n.index()] = mine.len();
        for d in mine {
            users[d.index()].push(n);
        }
        if waiting[n.index()] == 0 {
            ready.insert((color[n.index()], n));
        }
    }
    let mut order = Vec::new();
    while let Some((_, n)) = ready.pop_first() {
        order.push(n);
        for &c in &users[n.index()] {
            waiting[c.index()] -= 1;
            if waiting[c.index()] == 0 {
                ready.insert((color[c.index()], c));
            }
        }
    }
    order
}

/// Compute nodes of `hlir` in the canonical order lowering numbers them (see the module
/// docs), following operands directly: what fusion loads into its e-graph, so e-class ids
/// do not depend on declaration order.
pub(crate) fn compute_order(hlir: &Hlir, live: &[bool]) -> Vec<NodeIndex> {
    let g = &hlir.graph;
    let is_node: Vec<bool> =
        g.node_indices().map(|n| live[n.index()] && !g[n].op.is_leaf()).collect();
    let deps: Vec<Vec<NodeIndex>> = g
        .node_indices()
        .map(|n| hlir.operands(n).into_iter().filter(|a| is_node[a.index()]).collect())
        .collect();
    canonical_order(hlir, live, &is_node, &deps)
}
