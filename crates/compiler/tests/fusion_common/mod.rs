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

/// Evaluates a valid HLIR in f64 with the library's HLIR interpreter
/// ([`lumen_compiler::interpret::eval_hlir`]), every leaf filled by [`data`]: every output by
/// name.
pub fn eval(hlir: &Hlir) -> BTreeMap<String, Vec<f64>> {
    let types = hlir.infer().expect("valid HLIR");
    let leaves: BTreeMap<String, Vec<f64>> = hlir
        .graph
        .node_indices()
        .filter_map(|n| match &hlir.graph[n].op {
            HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } => {
                Some((name.clone(), data(name, types[n.index()].shape.iter().product())))
            }
            _ => None,
        })
        .collect();
    let outs = lumen_compiler::interpret::eval_hlir(hlir, &leaves).expect("evaluates");
    outs.into_iter().map(|(name, v)| (name, v.data)).collect()
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
