//! Compile time (validation, lowering with canonical order, planning) of the built-in programs
//! and of deep MLPs, to watch how canonical numbering and first fit scale with program size.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lumen_compiler::{CompileOptions, programs};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let options = CompileOptions::default();
    let mut group = c.benchmark_group("compile");
    let linear = programs::linear_relu(64, 256, 64).unwrap();
    group
        .bench_function("linear-relu", |b| b.iter(|| black_box(linear.compile(&options).unwrap())));
    for layers in [3usize, 16, 64, 128] {
        let sizes: Vec<usize> = std::iter::repeat_n(64, layers + 1).collect();
        let g = programs::mlp(&sizes, 32).unwrap();
        group.bench_with_input(BenchmarkId::new("mlp-layers", layers), &g, |b, g| {
            b.iter(|| black_box(g.compile(&options).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
