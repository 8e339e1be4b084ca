//! The CUDA runtime's goldens checked on the CPU runtime, so they hold on every machine (the
//! CUDA tests compare against the same numbers on a GPU).

mod cuda_shared;

use cuda_shared::*;
use lumen_compiler::Epilogue;
use lumen_runtime::{CpuOptions, CpuRuntime, Runtime};

#[test]
fn tall_product_relu_sum_is_exact_on_the_cpu() {
    let (weights, inputs) = tall_tensors(TALL_M);
    let unfused = linear_relu_unfused(TALL_M, 10, 10, "tall");
    let fused = linear_fused(TALL_M, 10, 10, Epilogue::ReluBias, "tall");
    for program in [&unfused, &fused] {
        let mut prepared =
            CpuRuntime::new(CpuOptions::default()).prepare(program, &weights).expect("prepare");
        let out = prepared.execute(&inputs).expect("execute");
        let y = &out["y"];
        assert_eq!(y.shape(), &[TALL_M, 10]);
        // Row 0: A = [-3, 0, 3, -1, 2, -2, 1, -3, 0, 3]; its relu row sums to 34.
        let row0: f64 = y.data()[..10].iter().map(|&v| f64::from(v)).sum();
        assert_eq!(row0, 34.0, "{}", program.label);
        assert_eq!(sum_f64(y), TALL_RELU_SUM, "{}", program.label);
    }
}

#[test]
fn tall_tensors_follow_the_formulas() {
    let (weights, inputs) = tall_tensors(8);
    let x = inputs["x"].data();
    assert_eq!(&x[..10], &[-3.0, 0.0, 3.0, -1.0, 2.0, -2.0, 1.0, -3.0, 0.0, 3.0]);
    assert_eq!(x[7 * 10 + 1], x[1], "rows repeat with period 7");
    assert_eq!(&weights["w"].data()[..6], &[-2.0, -1.0, 0.0, 1.0, 2.0, -2.0]);
    assert_eq!(weights["b"].data()[0], -4.5);
    assert_eq!(weights["b"].data()[9], 4.5);
}
