//! Execute throughput of linear-relu `y = relu(x [M,K] · w [K,N] + b [N])` on the CPU runtime,
//! unfused (lt_matmul, add of the broadcast bias, relu: three launches and two intermediates)
//! and fused (one lt_matmul with the RELU_BIAS epilogue), on one thread, beside a bare call of
//! the `gemm` crate (the CPU runtime's GEMM) of the same shape on one thread (the ceiling: no
//! bias, no relu, no slab, no upload or readback).
//!
//! Throughput is reported in elements/s where one element is one FLOP of the GEMM
//! (2·M·N·K), so criterion's "Gelem/s" reads as GFLOP/s of useful matmul work.
//!
//! `cargo bench -p lumen-runtime --bench execute`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lumen_compiler::{
    CompileOptions, CompiledProgram, DType, Epilogue, Graph, Hlir, HlirOp, SourceLocation,
    compile_hlir,
};
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, Tensors};

fn unfused(m: usize, k: usize, n: usize) -> CompiledProgram {
    let mut cx = Graph::new();
    let x = cx.input("x", [m, k]);
    let w = cx.weight("w", [k, n]);
    let b = cx.weight("b", [n]);
    (x.matmul(w) + b).relu().output("y");
    cx.compile(&CompileOptions {
        name: "linear-relu".into(),
        fuse: false,
        ..CompileOptions::default()
    })
    .expect("compile")
}

/// The fused program, built as the fusion pass would leave it.
fn fused(m: usize, k: usize, n: usize) -> CompiledProgram {
    let mut h = Hlir::new();
    let at = SourceLocation::caller();
    let x =
        h.add_op(HlirOp::Input { name: "x".into(), shape: vec![m, k], dtype: DType::F32 }, &[], at);
    let w = h.add_op(
        HlirOp::Weight { name: "w".into(), shape: vec![k, n], dtype: DType::F32 },
        &[],
        at,
    );
    let b =
        h.add_op(HlirOp::Weight { name: "b".into(), shape: vec![n], dtype: DType::F32 }, &[], at);
    let y = h.add_op(HlirOp::Matmul { epilogue: Epilogue::ReluBias }, &[x, w, b], at);
    h.add_op(HlirOp::Output { name: "y".into() }, &[y], at);
    let options = CompileOptions { fuse: true, ..CompileOptions::default() };
    compile_hlir(&h, "linear-relu", &options).expect("compile")
}

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

fn bench_shape(c: &mut Criterion, (m, k, n): (usize, usize, usize)) {
    let flop = 2 * (m * n * k) as u64;
    let mut group = c.benchmark_group(format!("linear_relu_{m}x{k}x{n}"));
    group.throughput(Throughput::Elements(flop));
    if flop > 100_000_000 {
        group.sample_size(20);
    }
    let weights: Tensors = [
        ("w".to_string(), HostTensor::new([k, n], data(k * n, 1)).expect("w")),
        ("b".to_string(), HostTensor::new([n], data(n, 2)).expect("b")),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors = [("x".to_string(), HostTensor::new([m, k], data(m * k, 3)).expect("x"))]
        .into_iter()
        .collect();
    for (name, program) in [("unfused", unfused(m, k, n)), ("fused", fused(m, k, n))] {
        let runtime = CpuRuntime::new(CpuOptions { threads: Some(1), ..CpuOptions::default() });
        let mut prepared = runtime.prepare(&program, &weights).expect("prepare");
        group.bench_function(name, |bench| {
            bench.iter(|| black_box(prepared.execute(black_box(&inputs)).expect("execute")))
        });
    }
    let (a, b) = (data(m * k, 3), data(k * n, 1));
    let mut out = vec![0.0f32; m * n];
    group.bench_function("gemm", |bench| {
        bench.iter(|| {
            lumen_runtime::gemm::bare_sgemm((m, k, n), &a, &b, &mut out, 1).expect("gemm");
            black_box(&out);
        })
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    // The shapes of issue 19: batch 1, 450 and 4096 of the digits MLP's first layer, and two
    // square-ish linear layers.
    for shape in
        [(1, 64, 128), (450, 64, 128), (4096, 64, 128), (512, 2048, 512), (2048, 2048, 2048)]
    {
        bench_shape(c, shape);
    }
}

criterion_group!(execute, benches);
criterion_main!(execute);
