//! Numeric tests of the CPU runtime against hand-computed values and the naive f64 reference:
//! linear-relu at many shapes (M = 1, N = 1, K = 0), every epilogue, the fusion legality cases,
//! a matmul output with two consumers.

mod common;

use common::*;
use lumen_compiler::{Epilogue, Graph};
use lumen_runtime::{CpuOptions, Tensors};

fn linear_relu_graph(m: usize, k: usize, n: usize) -> Graph {
    let mut cx = Graph::new();
    let x = cx.input("x", [m, k]);
    let w = cx.weight("w", [k, n]);
    let b = cx.weight("b", [n]);
    (x.matmul(w) + b).relu().output("y");
    cx
}

fn linear_fused(m: usize, k: usize, n: usize, epilogue: Epilogue) -> HlirBuilder {
    let mut h = HlirBuilder::default();
    let x = h.input("x", &[m, k]);
    let w = h.weight("w", &[k, n]);
    let bias = epilogue.has_bias().then(|| h.weight("b", &[n]));
    let y = h.matmul(x, w, bias, epilogue);
    h.output(y, "y");
    h
}

/// Runs in every mode; asserts the modes agree bit for bit and returns the output.
fn run_all_modes(
    program: &lumen_compiler::CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
) -> Tensors {
    let mut first: Option<Tensors> = None;
    for (mode, options) in modes() {
        let out = run(program, options, weights, inputs);
        if let Some(f) = &first {
            assert_eq!(bits(&out), bits(f), "{} in mode {mode}", program.label);
        } else {
            first = Some(out);
        }
    }
    first.expect("at least one mode")
}

#[test]
fn linear_relu_shapes_match_f64_reference() {
    let shapes = [
        (1, 1, 1),
        (1, 7, 5),
        (5, 7, 1),
        (1, 300, 1),
        (3, 0, 4),
        (64, 256, 64),
        (33, 65, 17),
        (130, 9, 300),
    ];
    for (i, &(m, k, n)) in shapes.iter().enumerate() {
        let unfused = compile(&linear_relu_graph(m, k, n), "linear-relu");
        let fused = compile_fused(&linear_fused(m, k, n, Epilogue::ReluBias).hlir, "linear-relu");
        let weights = weights_for(&unfused, 100 + i as u64);
        let inputs = inputs_for(&unfused, 200 + i as u64);
        let out_u = run_all_modes(&unfused, &weights, &inputs);
        let out_f = run_all_modes(&fused, &weights, &inputs);
        // f32 accumulation of k products of values in [-1, 1): error grows like k * eps.
        let tol = 1e-6 * (k as f64 + 1.0);
        let eu = max_err_vs_reference(&unfused, &weights, &inputs, &out_u);
        let ef = max_err_vs_reference(&fused, &weights, &inputs, &out_f);
        assert!(eu <= tol, "unfused {m}x{k}x{n}: {eu}");
        assert!(ef <= tol, "fused {m}x{k}x{n}: {ef}");
        // Same kernel, same summation order: fusion changes where bias and relu run, not the sums.
        assert_eq!(bits(&out_u), bits(&out_f), "fused vs unfused {m}x{k}x{n}");
    }
}

#[test]
fn k_zero_gives_relu_of_bias() {
    // [2,0] x [0,3] + b with b = [1, -2, 3], then relu: [[1,0,3],[1,0,3]].
    let want = [1.0, 0.0, 3.0, 1.0, 0.0, 3.0];
    let weights: Tensors = [
        ("w".to_string(), tensor(&[0, 3], &[])),
        ("b".to_string(), tensor(&[3], &[1.0, -2.0, 3.0])),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors = [("x".to_string(), tensor(&[2, 0], &[]))].into_iter().collect();
    let unfused = compile(&linear_relu_graph(2, 0, 3), "k0");
    let fused = compile_fused(&linear_fused(2, 0, 3, Epilogue::ReluBias).hlir, "k0");
    for program in [&unfused, &fused] {
        let out = run_all_modes(program, &weights, &inputs);
        assert_eq!(out["y"].shape(), &[2, 3]);
        assert_eq!(out["y"].data(), &want, "{}", program.label);
    }
}

#[test]
fn every_epilogue_matches_reference() {
    let (m, k, n) = (9, 13, 11);
    for (i, epilogue) in Epilogue::ALL.into_iter().enumerate() {
        let program = compile_fused(&linear_fused(m, k, n, epilogue).hlir, epilogue.name());
        let weights = weights_for(&program, 300 + i as u64);
        let inputs = inputs_for(&program, 400 + i as u64);
        let out = run_all_modes(&program, &weights, &inputs);
        let err = max_err_vs_reference(&program, &weights, &inputs, &out);
        assert!(err <= 2e-6, "{}: {err}", epilogue.name());
    }
}

#[test]
fn gelu_bias_fused_equals_unfused_values() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 6]);
    let w = cx.weight("w", [6, 5]);
    let b = cx.weight("b", [5]);
    (x.matmul(w) + b).gelu().output("y");
    let unfused = compile(&cx, "gelu");
    let fused = compile_fused(&linear_fused(4, 6, 5, Epilogue::GeluBias).hlir, "gelu");
    let weights = weights_for(&unfused, 7);
    let inputs = inputs_for(&unfused, 8);
    let a = run_all_modes(&unfused, &weights, &inputs);
    let b = run_all_modes(&fused, &weights, &inputs);
    assert_eq!(bits(&a), bits(&b));
}

fn two_by_two(a: [f32; 4], bias: &[usize], bias_data: &[f32]) -> (Tensors, Tensors) {
    let weights: Tensors = [
        ("b_mat".to_string(), tensor(&[2, 2], &[1.0, 0.0, 0.0, 1.0])),
        ("bias".to_string(), tensor(bias, bias_data)),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors = [("a".to_string(), tensor(&[2, 2], &a))].into_iter().collect();
    (weights, inputs)
}

#[test]
fn fusion_legality_bias_axis() {
    // A = [[1,2],[3,4]], B = I. A per-row bias (10 on row 0, 20 on row 1) is a full [2,2]
    // add, never a BIAS epilogue: [[11,12],[23,24]].
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 2]);
    let b = cx.weight("b_mat", [2, 2]);
    let r = cx.weight("bias", [2, 2]);
    (a.matmul(b) + r).output("y");
    let program = compile(&cx, "row-bias");
    let (weights, inputs) = two_by_two([1.0, 2.0, 3.0, 4.0], &[2, 2], &[10.0, 10.0, 20.0, 20.0]);
    let out = run_all_modes(&program, &weights, &inputs);
    assert_eq!(out["y"].data(), &[11.0, 12.0, 23.0, 24.0]);

    // The bias [10, 20] indexes the last axis (one value per column): [[11,22],[13,24]],
    // unfused (an add reading the bias through a [2, 2] view with strides [0, 1]) and fused
    // (BIAS epilogue) alike.
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 2]);
    let b = cx.weight("b_mat", [2, 2]);
    let c = cx.weight("bias", [2]);
    (a.matmul(b) + c).output("y");
    let unfused = compile(&cx, "col-bias");
    let mut h = HlirBuilder::default();
    let a = h.input("a", &[2, 2]);
    let b = h.weight("b_mat", &[2, 2]);
    let c = h.weight("bias", &[2]);
    let y = h.matmul(a, b, Some(c), Epilogue::Bias);
    h.output(y, "y");
    let fused = compile_fused(&h.hlir, "col-bias");
    let (weights, inputs) = two_by_two([1.0, 2.0, 3.0, 4.0], &[2], &[10.0, 20.0]);
    for program in [&unfused, &fused] {
        let out = run_all_modes(program, &weights, &inputs);
        assert_eq!(out["y"].data(), &[11.0, 22.0, 13.0, 24.0], "{}", program.label);
    }
}

#[test]
fn fusion_legality_add_after_relu() {
    // add(relu(A B), b) with A = [[1,-2],[-3,4]], B = I, b = [5,5]: [[6,5],[5,9]]. Not
    // relu(A B + b) = [[6,3],[2,9]]: the program fuses only as far as RELU, then adds the
    // broadcast bias.
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 2]);
    let b = cx.weight("b_mat", [2, 2]);
    let c = cx.weight("bias", [2]);
    (a.matmul(b).relu() + c).output("y");
    let unfused = compile(&cx, "add-after-relu");
    let mut h = HlirBuilder::default();
    let a = h.input("a", &[2, 2]);
    let b = h.weight("b_mat", &[2, 2]);
    let c = h.weight("bias", &[2]);
    let t = h.matmul(a, b, None, Epilogue::Relu);
    let y = h.add_op(t, c);
    h.output(y, "y");
    let fused = compile_fused(&h.hlir, "add-after-relu");
    let (weights, inputs) = two_by_two([1.0, -2.0, -3.0, 4.0], &[2], &[5.0, 5.0]);
    for program in [&unfused, &fused] {
        let out = run_all_modes(program, &weights, &inputs);
        assert_eq!(out["y"].data(), &[6.0, 5.0, 5.0, 9.0], "{}", program.label);
    }
}

#[test]
fn matmul_output_with_two_consumers() {
    // t = x w feeds both relu(t) and t + b; both are outputs, and t must stay live (unpoisoned,
    // unshared) until its second consumer has run.
    let mut cx = Graph::new();
    let x = cx.input("x", [3, 4]);
    let w = cx.weight("w", [4, 5]);
    let b = cx.weight("b", [5]);
    let t = x.matmul(w);
    t.relu().output("r");
    (t + b).output("s");
    let program = compile(&cx, "two-consumers");
    let x_data: Vec<f32> = (0..12).map(|i| i as f32 - 6.0).collect();
    let w_data: Vec<f32> = (0..20).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
    let b_data = [0.5, -0.5, 1.0, -1.0, 2.0];
    let weights: Tensors =
        [("w".to_string(), tensor(&[4, 5], &w_data)), ("b".to_string(), tensor(&[5], &b_data))]
            .into_iter()
            .collect();
    let inputs: Tensors = [("x".to_string(), tensor(&[3, 4], &x_data))].into_iter().collect();
    let out = run_all_modes(&program, &weights, &inputs);
    let mut t_want = [0.0f32; 15];
    for i in 0..3 {
        for j in 0..5 {
            t_want[i * 5 + j] = (0..4).map(|p| x_data[i * 4 + p] * w_data[p * 5 + j]).sum();
        }
    }
    let r_want: Vec<f32> = t_want.iter().map(|v| v.max(0.0)).collect();
    let s_want: Vec<f32> = t_want.iter().enumerate().map(|(i, v)| v + b_data[i % 5]).collect();
    assert_eq!(out["r"].data(), r_want.as_slice());
    assert_eq!(out["s"].data(), s_want.as_slice());
    assert_eq!(max_err_vs_reference(&program, &weights, &inputs, &out), 0.0);
}

#[test]
fn golden_linear_relu_runs_in_its_slab() {
    let program = compile(&linear_relu_graph(64, 256, 64), "linear-relu");
    assert_eq!(program.plan.slab_bytes, 1_196_288);
    let weights = weights_for(&program, 1);
    let inputs = inputs_for(&program, 2);
    let prepared = lumen_runtime::CpuRuntime::new(CpuOptions::default())
        .prepare_cpu(&program, &weights)
        .expect("prepare");
    use lumen_runtime::PreparedProgram as _;
    assert_eq!(prepared.slab_bytes(), 1_196_288);
    // t1 reuses x's bytes, but no buffer reuses w or b: both stay resident after prepare.
    assert_eq!(prepared.reuploaded_weights(), 0);
    let out = run_all_modes(&program, &weights, &inputs);
    let err = max_err_vs_reference(&program, &weights, &inputs, &out);
    assert!(err <= 1e-6 * 257.0, "{err}");
}

/// Compares runtime outputs with the f64 reference elementwise: NaN where the reference has
/// NaN, the same infinity, zeros of the same sign, and otherwise a relative error within `rel`
/// wherever the reference is a normal f32 (subnormal results only within 1e-44 absolute).
fn assert_relative(
    program: &lumen_compiler::CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
    got: &Tensors,
    rel: f64,
) {
    let want = lumen_runtime::reference::execute_f64(&program.llir, weights, inputs).unwrap();
    for (name, w) in &want {
        for (i, (&g, &r)) in got[name].data().iter().zip(&w.data).enumerate() {
            let g = f64::from(g);
            let what = format!("{} {name}[{i}]: got {g:e}, reference {r:e}", program.label);
            if r.is_nan() || r.is_infinite() {
                assert!(g.is_nan() == r.is_nan() && (r.is_nan() || g == r), "{what}");
            } else if r.abs() >= f64::from(f32::MIN_POSITIVE) {
                assert!((g - r).abs() <= rel * r.abs(), "{what}");
            } else if r != 0.0 {
                assert!((g - r).abs() < 1e-44, "{what}");
            } else {
                assert!(g == 0.0 && g.is_sign_negative() == r.is_sign_negative(), "{what}");
            }
        }
    }
}

/// Pre-activations over GELU's negative tail (where `0.5 x (1 + tanh z)` cancels), the
/// positive side, zeros and both infinities.
fn gelu_points() -> Vec<f32> {
    let mut v: Vec<f32> = (0..=64).map(|i| -12.0 + 0.25 * i as f32).collect();
    v.extend([f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-30, -1e-30, f32::MIN, f32::MAX]);
    v
}

#[test]
fn gelu_tail_is_relatively_accurate_in_kernel_and_epilogue() {
    let points = gelu_points();
    let n = points.len();
    // Elementwise gelu of an input.
    let mut cx = Graph::new();
    cx.input("x", [1, n]).gelu().output("y");
    let elementwise = compile(&cx, "gelu-tail");
    let inputs: Tensors = [("x".to_string(), tensor(&[1, n], &points))].into_iter().collect();
    let out = run_all_modes(&elementwise, &Tensors::new(), &inputs);
    assert_relative(&elementwise, &Tensors::new(), &inputs, &out, 2e-5);
    // x = -5 is the library user's example: -2.98e-7 from the cancelling form, -2.29e-7 exact.
    let at = |x: f32| points.iter().position(|&p| p == x).unwrap();
    assert!((f64::from(out["y"].data()[at(-5.0)]) + 2.291_796e-7).abs() < 1e-12);
    assert!(out["y"].data()[at(-6.0)] < 0.0, "gelu(-6) is a negative number, not -0");

    // The same points as the bias of a GELU_BIAS epilogue over a zero product: y = gelu(b).
    let fused = compile_fused(&linear_fused(1, 1, n, Epilogue::GeluBias).hlir, "gelu-tail");
    let weights: Tensors = [
        ("w".to_string(), tensor(&[1, n], &vec![0.0; n])),
        ("b".to_string(), tensor(&[n], &points)),
    ]
    .into_iter()
    .collect();
    let inputs: Tensors = [("x".to_string(), tensor(&[1, 1], &[1.0]))].into_iter().collect();
    let out_fused = run_all_modes(&fused, &weights, &inputs);
    assert_relative(&fused, &weights, &inputs, &out_fused, 2e-5);
    // Equal as values, not bits: the epilogue's `0 + (-0)` is +0, so its gelu(-0) is +0.
    assert_eq!(out_fused["y"].data(), out["y"].data(), "epilogue and kernel apply the same gelu");
}

#[test]
fn nan_in_nan_out_in_runtime_and_reference() {
    // relu and gelu propagate NaN in the runtime and in the reference alike (the oracle must
    // not turn a NaN the runtime produced into 0).
    for act in ["relu", "gelu"] {
        let mut cx = Graph::new();
        let x = cx.input("x", [1, 4]);
        if act == "relu" { x.relu() } else { x.gelu() }.output("y");
        let program = compile(&cx, act);
        let data = [f32::NAN, -1.0, 2.0, -f32::NAN];
        let inputs: Tensors = [("x".to_string(), tensor(&[1, 4], &data))].into_iter().collect();
        let out = run_all_modes(&program, &Tensors::new(), &inputs);
        let y = out["y"].data();
        assert!(y[0].is_nan() && y[3].is_nan() && !y[1].is_nan() && !y[2].is_nan(), "{y:?}");
        assert_relative(&program, &Tensors::new(), &inputs, &out, 2e-6);
    }
}

#[test]
fn outputs_come_back_in_buffer_order_whatever_the_declaration_order() {
    // Outputs are named; their order is the LLIR's buffer order (canonical), so declaring
    // them in another order changes nothing. Look them up by name.
    let build = |z_first: bool| {
        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        let w = cx.weight("w", [3, 2]);
        let t = x.matmul(w);
        let (r, g) = (t.relu(), t.gelu());
        if z_first {
            g.output("z");
            r.output("a");
        } else {
            r.output("a");
            g.output("z");
        }
        compile(&cx, "two-outputs")
    };
    let (p1, p2) = (build(true), build(false));
    let weights = weights_for(&p1, 5);
    let inputs = inputs_for(&p1, 6);
    let (o1, o2) = (
        run(&p1, CpuOptions::default(), &weights, &inputs),
        run(&p2, CpuOptions::default(), &weights, &inputs),
    );
    let order: Vec<&str> = p1
        .llir
        .buffers
        .iter()
        .filter(|b| b.role == lumen_compiler::BufferRole::Output)
        .map(|b| b.id.as_str())
        .collect();
    assert_eq!(o1.keys().map(String::as_str).collect::<Vec<_>>(), order);
    assert_eq!(bits(&o1), bits(&o2));
    assert_eq!(o1["z"], o2["z"]);
}
