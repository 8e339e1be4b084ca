//! Differential tests over random tensor programs drawn from every op: unary and binary
//! elementwise ops with NumPy broadcasting, comparisons and select, reductions, movement
//! (permute, reshape, expand, slice, concat) folded into views or copied, batched and
//! transposed matmuls, gather, and the composites (softmax, log-softmax, layer norm, erf-GELU,
//! sigmoid). Each program runs on the CPU runtime, fused and unfused, planned and NaN-poisoned,
//! and is checked against the HLIR interpreter (lumen_compiler::interpret), which never sees a
//! view or a fused op; the LLIR reference interpreter must agree with it to f64 rounding.

use std::collections::BTreeMap;

use lumen_compiler::interpret::eval_hlir;
use lumen_compiler::{CompileOptions, DType, Graph};
use lumen_runtime::reference::execute_f64;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime, Tensors};
use proptest::prelude::*;

mod tensor_programs;

use tensor_programs::build;

fn close(got: f32, want: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.abs() > f64::from(f32::MAX) {
        return got.is_infinite() && (got > 0.0) == (want > 0.0);
    }
    (f64::from(got) - want).abs() <= 1e-4 + 1e-3 * want.abs()
}

fn check(seed: u64) -> Result<(), TestCaseError> {
    let case = build(seed);
    if let Some(e) = case.graph.recorded_error() {
        return Err(TestCaseError::fail(format!(
            "seed {seed}: the generator built a bad program: {e}"
        )));
    }
    let hlir = case.graph.hlir();
    let want = eval_hlir(&hlir, &case.leaves).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    for fuse in [false, true] {
        let options = CompileOptions { fuse, ..Default::default() };
        let program = case
            .graph
            .compile(&options)
            .map_err(|e| TestCaseError::fail(format!("seed {seed}: {e}")))?;
        let reference = execute_f64(&program.llir, &case.weights, &case.inputs).unwrap();
        let mut runs = Vec::new();
        for memory_debug in [false, true] {
            let rt = CpuRuntime::new(CpuOptions { memory_debug, ..Default::default() });
            let mut prepared = rt.prepare(&program, &case.weights).unwrap();
            runs.push(prepared.execute(&case.inputs).unwrap());
        }
        prop_assert_eq!(&runs[0], &runs[1], "seed {}: NaN poisoning changed outputs", seed);
        for (name, w) in &want {
            let got = &runs[0][name];
            prop_assert_eq!(got.shape(), w.shape.as_slice(), "seed {} {}", seed, name);
            for (i, (&g, &x)) in got.data().iter().zip(&w.data).enumerate() {
                prop_assert!(
                    close(g, x),
                    "seed {} fuse={} {}[{}]: cpu {} vs interpreter {}\n{}",
                    seed,
                    fuse,
                    name,
                    i,
                    g,
                    x,
                    lumen_compiler::dump::llir_text(&program)
                );
                let r = reference[name].data[i];
                prop_assert!(
                    (r - x).abs() <= 1e-9 * (1.0 + x.abs()) || (r.is_nan() && x.is_nan()),
                    "seed {} fuse={} {}[{}]: LLIR reference {} vs HLIR interpreter {}",
                    seed,
                    fuse,
                    name,
                    i,
                    r,
                    x
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_over_every_op_match_the_hlir_interpreter(seed in any::<u64>()) {
        check(seed)?;
    }
}

/// The generator reaches every op kind within a few seeds (so the property above covers them).
#[test]
fn the_generator_covers_every_op_kind() {
    let mut seen: Vec<&str> = (0..200u64).flat_map(|s| build(s).kinds).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "binary",
            "composite",
            "expand",
            "gather",
            "matmul",
            "permute",
            "reduce",
            "select",
            "slice_concat",
            "unary"
        ]
    );
    for seed in 0..24 {
        check(seed).unwrap();
    }
}

#[test]
fn a_gather_id_out_of_range_is_a_runtime_error_naming_the_tensor_and_the_id() {
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("token_ids", [3], DType::I64);
    table.gather(&ids).output("y");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let weights: Tensors = [(
        "table".to_string(),
        HostTensor::new([4, 2], (0..8).map(|v| v as f32).collect()).unwrap(),
    )]
    .into();
    let rt = CpuRuntime::new(CpuOptions::default());
    let mut prepared = rt.prepare(&program, &weights).unwrap();
    let ok: Tensors =
        [("token_ids".to_string(), HostTensor::from_i64([3], vec![3, 0, 3]).unwrap())].into();
    assert_eq!(prepared.execute(&ok).unwrap()["y"].data(), [6.0, 7.0, 0.0, 1.0, 6.0, 7.0]);
    for bad in [4i64, -1, i64::MAX] {
        let inputs: Tensors =
            [("token_ids".to_string(), HostTensor::from_i64([3], vec![0, bad, 1]).unwrap())].into();
        let err = prepared.execute(&inputs).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "gather: id {bad} at position 1 of `token_ids` is out of range for a table of 4 rows"
            )
        );
        // The f64 reference refuses it too.
        assert!(execute_f64(&program.llir, &weights, &inputs).is_err());
    }
    // f32 given where the program declares i64 ids: refused by dtype, before any kernel.
    let wrong: Tensors =
        [("token_ids".to_string(), HostTensor::new([3], vec![0.0; 3]).unwrap())].into();
    assert_eq!(
        prepared.execute(&wrong).unwrap_err().to_string(),
        "input `token_ids` has dtype f32, the program expects i64"
    );
    // i32 ids work the same way.
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("ids", [2], DType::I32);
    table.gather(&ids).output("y");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let mut prepared = rt.prepare(&program, &weights).unwrap();
    let inputs: Tensors =
        [("ids".to_string(), HostTensor::from_i32([2], vec![1, 2]).unwrap())].into();
    assert_eq!(prepared.execute(&inputs).unwrap()["y"].data(), [2.0, 3.0, 4.0, 5.0]);
}

/// Programs a first-time user found broken, each against the HLIR interpreter: a concat
/// whose output is taken over through a reshape or a size-1 transpose, products over an empty
/// batch, and a long sum.
#[test]
fn edge_cases_match_the_interpreter() {
    let ramp = |shape: &[usize]| -> (HostTensor, Vec<f64>) {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.25 - 1.0).collect();
        let wide = data.iter().map(|&v| f64::from(v)).collect();
        (HostTensor::new(shape.to_vec(), data).unwrap(), wide)
    };
    // Each program with its leaves' names and shapes.
    type Program = (Graph, Vec<(&'static str, Vec<usize>)>);
    let programs: Vec<Program> = vec![
        {
            let mut cx = Graph::new();
            let x = cx.input("x", [2, 3]);
            cx.concat(&[&x, &x], 0).reshape([12]).output("a");
            (cx, vec![("x", vec![2, 3])])
        },
        {
            let mut cx = Graph::new();
            let x = cx.input("x", [1, 3, 2, 1]);
            let c = cx.concat(&[&x, &x], 3);
            c.transpose(0, 1).output("o1");
            c.output("o2");
            (cx, vec![("x", vec![1, 3, 2, 1])])
        },
        {
            let mut cx = Graph::new();
            let a = cx.input("a", [0, 3, 2]);
            let b = cx.input("b", [0, 2, 4]);
            a.matmul(&b).output("o");
            a.matmul(a.transpose(-1, -2)).output("p");
            (cx, vec![("a", vec![0, 3, 2]), ("b", vec![0, 2, 4])])
        },
        {
            let mut cx = Graph::new();
            let x = cx.input("x", [3, 40_000]);
            x.mean(-1, false).output("m");
            x.sum(0, true).output("s");
            (cx, vec![("x", vec![3, 40_000])])
        },
    ];
    for (graph, leaves) in programs {
        let mut inputs = Tensors::new();
        let mut wide = BTreeMap::new();
        for (name, shape) in leaves {
            let (t, w) = ramp(&shape);
            inputs.insert(name.to_string(), t);
            wide.insert(name.to_string(), w);
        }
        let want = eval_hlir(&graph.hlir(), &wide).unwrap();
        for fuse in [false, true] {
            let program = graph.compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
            let rt = CpuRuntime::new(CpuOptions { memory_debug: true, ..Default::default() });
            let out = rt.prepare(&program, &Tensors::new()).unwrap().execute(&inputs).unwrap();
            for (name, w) in &want {
                assert_eq!(out[name].shape(), w.shape.as_slice(), "{name}");
                for (g, x) in out[name].data().iter().zip(&w.data) {
                    // Sums of 40,000 elements: f64 accumulation leaves only f32 rounding.
                    assert!(
                        (f64::from(*g) - x).abs() <= 1e-6 * (1.0 + x.abs()),
                        "{name}: {g} vs {x}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_gather_error_names_the_position_in_the_ids_as_declared() {
    let mut cx = Graph::new();
    let table = cx.weight("table", [4, 2]);
    let ids = cx.input_typed("ids", [2, 3], DType::I64);
    table.gather(ids.transpose(0, 1)).output("y");
    let program = cx.compile(&CompileOptions::default()).unwrap();
    let weights: Tensors =
        [("table".to_string(), HostTensor::new([4, 2], vec![0.0; 8]).unwrap())].into();
    let inputs: Tensors =
        [("ids".to_string(), HostTensor::from_i64([2, 3], vec![0, 9, 1, 2, 3, 0]).unwrap())].into();
    let mut prepared = CpuRuntime::default().prepare(&program, &weights).unwrap();
    let err = prepared.execute(&inputs).unwrap_err().to_string();
    assert_eq!(err, "gather: id 9 at position 1 of `ids` is out of range for a table of 4 rows");
    let err = execute_f64(&program.llir, &weights, &inputs).unwrap_err().to_string();
    assert_eq!(err, "gather: id 9 at position 1 of `ids` is out of range for a table of 4 rows");
}
