//! Programs and data shared by the CUDA tests (`tests/cuda.rs`) and the CPU check of their
//! goldens (`tests/cuda_golden.rs`).
#![allow(dead_code)]

pub mod integers;
pub mod scatter;
pub mod selection;
pub mod spatial;

use lumen_compiler::{
    CompileOptions, CompiledProgram, DType, Epilogue, Graph, HlirOp, SourceLocation,
};
use lumen_runtime::{HostTensor, Tensors};

/// Rows of the tall product.
pub const TALL_M: usize = 655_360;
/// The tall product's relu output sum: every element is a half-integer (exact in f32) and the
/// sum is taken in f64, so the golden is exact. Derivation: rows repeat with period 7 (row r
/// sums to 34, 32, 52.5, 32, 34, 57.5, 33 for r mod 7 = 0..6); 655,360 = 7 x 93,622 + 6.
pub const TALL_RELU_SUM: f64 = 25_746_292.0;

/// `y = relu(x [m,k] · w [k,n] + b [n])` unfused (lowered op by op: lt_matmul, add with the
/// bias broadcast over the rows, relu).
pub fn linear_relu_unfused(m: usize, k: usize, n: usize, name: &str) -> CompiledProgram {
    let mut cx = Graph::new();
    let x = cx.input("x", [m, k]);
    let w = cx.weight("w", [k, n]);
    let b = cx.weight("b", [n]);
    (x.matmul(w) + b).relu().output("y");
    let options = CompileOptions { name: name.to_string(), fuse: false, ..Default::default() };
    cx.compile(&options).expect("compile linear-relu")
}

/// `y = x [m,k] · w [k,n]` with a fused cuBLASLt `epilogue` (bias `b [n]` when it has one):
/// one lt_matmul node.
pub fn linear_fused(
    m: usize,
    k: usize,
    n: usize,
    epilogue: Epilogue,
    name: &str,
) -> CompiledProgram {
    let mut hlir = lumen_compiler::Hlir::default();
    let loc = SourceLocation::caller();
    let x = hlir.add_op(
        HlirOp::Input { name: "x".into(), shape: vec![m, k], dtype: DType::F32 },
        &[],
        loc,
    );
    let w = hlir.add_op(
        HlirOp::Weight { name: "w".into(), shape: vec![k, n], dtype: DType::F32 },
        &[],
        loc,
    );
    let mut ops = vec![x, w];
    if epilogue.has_bias() {
        ops.push(hlir.add_op(
            HlirOp::Weight { name: "b".into(), shape: vec![n], dtype: DType::F32 },
            &[],
            loc,
        ));
    }
    let y = hlir.add_op(HlirOp::Matmul { epilogue }, &ops, loc);
    hlir.add_op(HlirOp::Output { name: "y".into() }, &[y], loc);
    let options = CompileOptions { name: name.to_string(), fuse: true, ..Default::default() };
    lumen_compiler::compile_hlir(&hlir, name, &options).expect("compile_hlir")
}

/// The tall product's tensors: A[i,k] = ((i + 3k) mod 7) - 3, B[k,j] = ((k + j) mod 5) - 2,
/// b[j] = j - 4.5, for A [m, 10], B [10, 10], b [10]. Returns (weights w, b; inputs x).
pub fn tall_tensors(m: usize) -> (Tensors, Tensors) {
    let (k, n) = (10, 10);
    let a: Vec<f32> =
        (0..m * k).map(|idx| (((idx / k) + 3 * (idx % k)) % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|idx| (((idx / n) + (idx % n)) % 5) as f32 - 2.0).collect();
    let bias: Vec<f32> = (0..n).map(|j| j as f32 - 4.5).collect();
    let weights: Tensors = [
        ("w".to_string(), HostTensor::new([k, n], b).expect("w")),
        ("b".to_string(), HostTensor::new([n], bias).expect("b")),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors =
        [("x".to_string(), HostTensor::new([m, k], a).expect("x"))].into_iter().collect();
    (weights, inputs)
}

/// Sum of a tensor's elements in f64.
pub fn sum_f64(t: &HostTensor) -> f64 {
    t.data().iter().map(|&v| f64::from(v)).sum()
}
