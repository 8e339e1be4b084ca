//! Shared helpers of the fusion tests: an f64 reference interpreter of the HLIR (every
//! epilogue), deterministic data, and LLIR queries.

#![allow(dead_code)]

use std::collections::BTreeMap;

use lumen_compiler::{CompiledProgram, Epilogue, Hlir, HlirOp, LlirOp};

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

/// Evaluates a valid HLIR in f64: every output by name.
pub fn eval(hlir: &Hlir) -> BTreeMap<String, Vec<f64>> {
    let shapes = hlir.validate().expect("valid HLIR");
    let order = petgraph::algo::toposort(&hlir.graph, None).expect("acyclic");
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); hlir.graph.node_count()];
    let mut outs = BTreeMap::new();
    for n in order {
        let ops = hlir.operands(n);
        let shape = |i: usize| shapes[ops[i].index()].clone();
        let v = |i: usize| vals[ops[i].index()].clone();
        let value = match &hlir.graph[n].op {
            HlirOp::Input { name, shape } | HlirOp::Weight { name, shape } => {
                data(name, shape.iter().product())
            }
            HlirOp::Matmul { epilogue } => {
                let (a, w) = (v(0), v(1));
                let (m, k, cols) = (shape(0)[0], shape(0)[1], shape(1)[1]);
                let bias = if epilogue.has_bias() { v(2) } else { vec![0.0; cols] };
                let mut out = vec![0.0; m * cols];
                for i in 0..m {
                    for j in 0..cols {
                        let dot: f64 = (0..k).map(|p| a[i * k + p] * w[p * cols + j]).sum();
                        out[i * cols + j] = act(*epilogue, dot + bias[j]);
                    }
                }
                out
            }
            HlirOp::Add => {
                let (a, b) = (v(0), v(1));
                if a.len() == b.len() {
                    a.iter().zip(&b).map(|(x, y)| x + y).collect()
                } else {
                    let (mat, bias) = if a.len() > b.len() { (a, b) } else { (b, a) };
                    let cols = bias.len();
                    mat.iter().enumerate().map(|(i, x)| x + bias[i % cols]).collect()
                }
            }
            HlirOp::Relu => v(0).into_iter().map(|x| x.max(0.0)).collect(),
            HlirOp::Gelu => v(0).into_iter().map(gelu).collect(),
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
    p.llir.nodes[i].reads.iter().map(|&b| p.llir.buffers[b].id.as_str()).collect()
}
