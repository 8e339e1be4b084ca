//! Shared helpers of the fusion tests: an f64 reference interpreter of the HLIR (every
//! epilogue), deterministic data, and LLIR queries.

#![allow(dead_code)]

use std::collections::BTreeMap;

use lumen_compiler::{CompiledProgram, Epilogue, Hlir, HlirOp, LlirOp, MoveOp, View};

/// Deterministic values in [-1, 1) for a leaf, from its name (so every candidate of a program,
/// which keeps the leaves, sees the same data).
pub fn data(name: &str, len: usize) -> Vec<f64> {
    let mut state: u64 = name
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn gelu(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

fn act(epilogue: Epilogue, x: f64) -> f64 {
    match epilogue {
        Epilogue::Relu | Epilogue::ReluBias => x.max(0.0),
        Epilogue::Gelu | Epilogue::GeluBias => gelu(x),
        Epilogue::Default | Epilogue::Bias => x,
    }
}

/// The elements of contiguous `data` (of `shape`) read through `view` of it, row-major.
fn read(data: &[f64], view: &View) -> Vec<f64> {
    let mut out = Vec::with_capacity(view.elements());
    lumen_compiler::view::walk(&view.shape, [view], |[o]| out.push(data[o]));
    out
}

/// Evaluates a valid HLIR in f64, op by op on whole row-major values (no views, no LLIR, no
/// op table except the elementwise ops' `eval_f64`): every output by name.
pub fn eval(hlir: &Hlir) -> BTreeMap<String, Vec<f64>> {
    let shapes = hlir.validate().expect("valid HLIR");
    let order = petgraph::algo::toposort(&hlir.graph, None).expect("acyclic");
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); hlir.graph.node_count()];
    let mut outs = BTreeMap::new();
    for n in order {
        let ops = hlir.operands(n);
        let shape = |i: usize| shapes[ops[i].index()].clone();
        let v = |i: usize| vals[ops[i].index()].clone();
        let out_shape = shapes[n.index()].clone();
        let value = match &hlir.graph[n].op {
            HlirOp::Input { name, shape, .. } | HlirOp::Weight { name, shape, .. } => {
                data(name, shape.iter().product())
            }
            HlirOp::Constant { value } => vec![f64::from(value.value())],
            HlirOp::Matmul { epilogue } => {
                let (sa, sb) = (shape(0), shape(1));
                let (ra, rb) = (sa.len(), sb.len());
                let (m, k, cols) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
                let batch = &out_shape[..out_shape.len() - 2];
                let mut fa: Vec<usize> = batch.to_vec();
                fa.extend([m, k]);
                let mut fb: Vec<usize> = batch.to_vec();
                fb.extend([k, cols]);
                let a = read(&v(0), &View::contiguous(&sa).expand(&fa).expect("a broadcasts"));
                let w = read(&v(1), &View::contiguous(&sb).expand(&fb).expect("b broadcasts"));
                let bias = if epilogue.has_bias() { v(2) } else { vec![0.0; cols] };
                let count: usize = batch.iter().product();
                let mut out = vec![0.0; count * m * cols];
                for t in 0..count {
                    for i in 0..m {
                        for j in 0..cols {
                            let dot: f64 = (0..k)
                                .map(|p| a[(t * m + i) * k + p] * w[(t * k + p) * cols + j])
                                .sum();
                            out[(t * m + i) * cols + j] = act(*epilogue, dot + bias[j]);
                        }
                    }
                }
                out
            }
            HlirOp::Map(op) => {
                let args: Vec<Vec<f64>> = (0..ops.len())
                    .map(|i| {
                        read(&v(i), &View::contiguous(&shape(i)).expand(&out_shape).expect("broadcasts"))
                    })
                    .collect();
                let len: usize = out_shape.iter().product();
                let arg = |k: usize, i: usize| args.get(k).map_or(0.0, |a| a[i]);
                (0..len).map(|i| op.eval_f64([arg(0, i), arg(1, i), arg(2, i)])).collect()
            }
            HlirOp::Reduce { op, axis } => {
                let s = shape(0);
                let x = v(0);
                let inner: usize = s[axis + 1..].iter().product();
                let outer: usize = s[..*axis].iter().product();
                let mut out = Vec::new();
                for o in 0..outer {
                    for r in 0..inner {
                        let vals = (0..s[*axis]).map(|e| x[(o * s[*axis] + e) * inner + r]);
                        out.push(vals.fold(op.identity_f64(), |acc, y| op.combine_f64(acc, y)));
                    }
                }
                out
            }
            HlirOp::Gather => {
                let (table, ids) = (v(0), v(1));
                let dim = shape(0)[1];
                ids.iter().flat_map(|&id| table[id as usize * dim..(id as usize + 1) * dim].to_vec()).collect()
            }
            HlirOp::Concat { axis } => {
                let mut out = vec![0.0; out_shape.iter().product()];
                let whole = View::contiguous(&out_shape);
                let mut start = 0;
                for i in 0..ops.len() {
                    let s = shape(i);
                    let dst = whole.slice(*axis, start, start + s[*axis]);
                    let x = v(i);
                    let mut e = 0;
                    lumen_compiler::view::walk(&dst.shape, [&dst], |[o]| {
                        out[o] = x[e];
                        e += 1;
                    });
                    start += s[*axis];
                }
                out
            }
            HlirOp::Move(m) => {
                let src = View::contiguous(&shape(0));
                let view = match m {
                    MoveOp::Reshape { shape } => View::contiguous(shape),
                    MoveOp::Permute { perm } => src.permute(perm),
                    MoveOp::Expand { shape } => src.expand(shape).expect("expands"),
                    MoveOp::Slice { axis, start, end } => src.slice(*axis, *start, *end),
                };
                read(&v(0), &view)
            }
            HlirOp::Output { name } => {
                outs.insert(name.clone(), v(0));
                Vec::new()
            }
        };
        vals[n.index()] = value;
    }
    outs
}

/// Asserts two evaluations agree on every output (same names, values within 1e-12).
pub fn assert_same_outputs(a: &BTreeMap<String, Vec<f64>>, b: &BTreeMap<String, Vec<f64>>) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, x) in a {
        let y = &b[name];
        assert_eq!(x.len(), y.len(), "{name}");
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            assert!((p - q).abs() <= 1e-12 * (1.0 + p.abs()), "{name}[{i}]: {p} vs {q}");
        }
    }
}

/// The ops of a compiled program, in LLIR order.
pub fn ops(p: &CompiledProgram) -> Vec<LlirOp> {
    p.llir.nodes.iter().map(|n| n.op).collect()
}

/// The epilogue of every lt_matmul, in LLIR order.
pub fn epilogues(p: &CompiledProgram) -> Vec<Epilogue> {
    p.llir
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            LlirOp::LtMatmul { epilogue, .. } => Some(epilogue),
            _ => None,
        })
        .collect()
}

/// The names of the buffers of a program, in request order.
pub fn buffer_ids(p: &CompiledProgram) -> Vec<&str> {
    p.llir.buffers.iter().map(|b| b.id.as_str()).collect()
}

/// The names of the buffers node `i` reads.
pub fn reads(p: &CompiledProgram, i: usize) -> Vec<&str> {
    p.llir.nodes[i].read_buffers().map(|b| p.llir.buffers[b].id.as_str()).collect()
}
