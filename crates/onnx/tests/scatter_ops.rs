//! The scatters and GatherND, each on a small hand-written graph run on the CPU runtime (fused
//! and unfused) against values worked out by hand: ScatterElements (axis, negative and
//! duplicate indices, every reduction, integer data, the opset a reduction needs) and Scatter;
//! ScatterND (element and slice tuples, indices known at import or computed, a reduction,
//! integer data, a tuple outside the data refused at import or at run time); GatherND
//! (batch_dims 0 and 1, integer data, constant indices); TensorScatter (linear and circular,
//! write indices given at run time, known at import or absent; a 4-D cache).

use lumen_compiler::DType;
use lumen_onnx::proto::{NodeProto, TensorProto};
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{HostTensor, Tensors};

mod common;
use common::*;

/// Imports the graph (default opset `opset`), runs it fused and unfused on the CPU, returns
/// the outputs, or the first error (import, compile or execute) as text.
fn try_run(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> Result<Vec<HostTensor>, String> {
    let bytes = model_of(opset, nodes, initializers, &inputs, outputs);
    let imported = import(&bytes, &ImportOptions::default()).map_err(|e| e.to_string())?;
    let given: Tensors = inputs.into_iter().map(|i| (i.name.to_string(), i.value)).collect();
    let bound = imported.bind_inputs(&given).map_err(|e| e.to_string())?;
    let outputs = run_fused_and_unfused(&imported, &bound, "scatter")?;
    Ok(outputs)
}

fn run(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> Vec<HostTensor> {
    try_run(opset, nodes, initializers, inputs, outputs).unwrap()
}

fn floats(got: &HostTensor, shape: &[usize], want: &[f32]) {
    assert_eq!(got.shape(), shape);
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(got.data(), want);
}

fn exact(got: &HostTensor, shape: &[usize], dtype: DType, want: &[i64]) {
    assert_eq!(got.shape(), shape);
    assert_eq!(got.dtype(), dtype);
    assert_eq!(got.index_values().unwrap(), want);
}

const D23: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

#[test]
fn scatter_elements_axes_duplicates_and_every_reduction() {
    // d [[1, 2, 3], [4, 5, 6]] along axis 1 at [[2, -3], [1, 1]] with [[10, 20], [30, 40]]:
    // row 0 gets 10 at 2 and 20 at 0; row 1 gets 30 then 40 at 1.
    let want: [(&str, [f32; 6]); 5] = [
        ("none", [20.0, 2.0, 10.0, 4.0, 40.0, 6.0]),
        ("add", [21.0, 2.0, 13.0, 4.0, 75.0, 6.0]),
        ("mul", [20.0, 2.0, 30.0, 4.0, 6000.0, 6.0]),
        ("max", [20.0, 2.0, 10.0, 4.0, 40.0, 6.0]),
        ("min", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    ];
    for (r, w) in want {
        let out = run(
            18,
            vec![node(
                "ScatterElements",
                &["d", "i", "u"],
                &["y"],
                vec![int_attr("axis", 1), string_attr("reduction", r)],
            )],
            vec![],
            vec![
                f32_in("d", &[2, 3], &D23),
                i64_in("i", &[2, 2], &[2, -3, 1, 1]),
                f32_in("u", &[2, 2], &[10.0, 20.0, 30.0, 40.0]),
            ],
            &["y"],
        );
        floats(&out[0], &[2, 3], &w);
    }
    // Axis 0 (the default), i64 data and i32 indices: column 0 gets 7 at row 1, column 2 gets
    // 8 at row 0 (-2); int64 keeps its type.
    let out = run(
        18,
        vec![node("ScatterElements", &["d", "i", "u"], &["y"], vec![])],
        vec![],
        vec![
            i64_in("d", &[2, 3], &[1, 2, 3, 4, 5, 6]),
            i32_in("i", &[1, 3], &[1, 0, -2]),
            i64_in("u", &[1, 3], &[7, 2, 8]),
        ],
        &["y"],
    );
    exact(&out[0], &[2, 3], DType::I64, &[1, 2, 8, 7, 5, 6]);
    // Scatter (opset 10): the same op without reduction; indices from an initializer.
    let out = run(
        10,
        vec![node("Scatter", &["d", "i", "u"], &["y"], vec![int_attr("axis", -1)])],
        vec![ints("i", &[1, 2], &[0, 2])],
        vec![f32_in("d", &[2, 3], &D23), f32_in("u", &[1, 2], &[-1.0, -2.0])],
        &["y"],
    );
    floats(&out[0], &[2, 3], &[-1.0, 2.0, -2.0, 4.0, 5.0, 6.0]);
}

#[test]
fn scatter_elements_reductions_need_their_opset_and_bad_indices_fail_at_run_time() {
    let graph = |r: &str| {
        vec![node("ScatterElements", &["d", "i", "u"], &["y"], vec![string_attr("reduction", r)])]
    };
    let inputs = |i: i64| {
        vec![
            f32_in("d", &[3], &[1.0, 2.0, 3.0]),
            i64_in("i", &[1], &[i]),
            f32_in("u", &[1], &[5.0]),
        ]
    };
    let err = try_run(16, graph("max"), vec![], inputs(0), &["y"]).unwrap_err();
    assert!(err.contains("reduction = \"max\" needs opset 18 (the model's is 16)"), "{err}");
    let err = try_run(13, graph("add"), vec![], inputs(0), &["y"]).unwrap_err();
    assert!(err.contains("needs opset 16"), "{err}");
    let err = try_run(18, graph("sum"), vec![], inputs(0), &["y"]).unwrap_err();
    assert!(err.contains("reduction = \"sum\""), "{err}");
    let out = run(16, graph("mul"), vec![], inputs(-1), &["y"]);
    floats(&out[0], &[3], &[1.0, 2.0, 15.0]);
    let err = try_run(18, graph("none"), vec![], inputs(3), &["y"]).unwrap_err();
    assert_eq!(
        err,
        "scatter_elements: id 3 at position 0 of `i` is out of range for an axis of length 3"
    );
}

#[test]
fn scatter_nd_elements_slices_reductions_and_bad_tuples() {
    // Element tuples (k = rank) computed at run time: [0, 1] and [-1, -1] (= [1, 2]).
    let out = run(
        18,
        vec![node("ScatterND", &["d", "i", "u"], &["y"], vec![])],
        vec![],
        vec![
            f32_in("d", &[2, 3], &D23),
            i64_in("i", &[2, 2], &[0, 1, -1, -1]),
            f32_in("u", &[2], &[-5.0, -6.0]),
        ],
        &["y"],
    );
    floats(&out[0], &[2, 3], &[1.0, -5.0, 3.0, 4.0, 5.0, -6.0]);
    // Slices (k = 1 of rank 2), indices known at import: row 2 and row 0 replaced.
    let out = run(
        18,
        vec![node("ScatterND", &["d", "i", "u"], &["y"], vec![])],
        vec![ints("i", &[2, 1], &[2, 0])],
        vec![f32_in("d", &[3, 2], &D23), f32_in("u", &[2, 2], &[7.0, 8.0, 9.0, 10.0])],
        &["y"],
    );
    floats(&out[0], &[3, 2], &[9.0, 10.0, 3.0, 4.0, 7.0, 8.0]);
    // A reduction with duplicate tuples, i64 data, indices [2, 1, 1] (positions [2, 1]):
    // row 1 gets +[1, 1] and +[2, 2].
    let out = run(
        18,
        vec![node("ScatterND", &["d", "i", "u"], &["y"], vec![string_attr("reduction", "add")])],
        vec![],
        vec![
            i64_in("d", &[2, 2], &[1, 2, 3, 4]),
            i64_in("i", &[2, 1, 1], &[1, -1]),
            i64_in("u", &[2, 1, 2], &[1, 1, 2, 2]),
        ],
        &["y"],
    );
    exact(&out[0], &[2, 2], DType::I64, &[1, 2, 6, 7]);
    // A component outside its axis: refused at import when known, an error at run time when
    // computed (the tuple's row is one past the last, 6 of the [6, 1] view).
    let graph = || vec![node("ScatterND", &["d", "i", "u"], &["y"], vec![])];
    let err = try_run(
        18,
        graph(),
        vec![ints("i", &[1, 2], &[0, 3])],
        vec![f32_in("d", &[2, 3], &D23), f32_in("u", &[1], &[0.0])],
        &["y"],
    )
    .unwrap_err();
    assert!(err.contains("index 3 of tuple 0 is outside axis 1 of length 3"), "{err}");
    let err = try_run(
        18,
        graph(),
        vec![],
        vec![
            f32_in("d", &[2, 3], &D23),
            i64_in("i", &[2, 2], &[0, 0, 2, 0]),
            f32_in("u", &[2], &[0.0, 0.0]),
        ],
        &["y"],
    )
    .unwrap_err();
    assert_eq!(
        err,
        "scatter_elements: id 6 at position 1 of `scatternd.rows` is out of range for an axis \
         of length 6"
    );
}

#[test]
fn gather_nd_with_batch_dims_integers_and_constant_indices() {
    let d: Vec<f32> = (0..8).map(|v| v as f32).collect();
    // ONNX's example 4: tuples [0, 1] and [1, 0] of [2, 2, 2], positions [2, 1].
    let out = run(
        13,
        vec![node("GatherND", &["d", "i"], &["y"], vec![])],
        vec![],
        vec![f32_in("d", &[2, 2, 2], &d), i64_in("i", &[2, 1, 2], &[0, 1, 1, -2])],
        &["y"],
    );
    floats(&out[0], &[2, 1, 2], &[2.0, 3.0, 4.0, 5.0]);
    // batch_dims 1: batch 0 takes row 1, batch 1 row 0 (-2).
    let out = run(
        13,
        vec![node("GatherND", &["d", "i"], &["y"], vec![int_attr("batch_dims", 1)])],
        vec![],
        vec![f32_in("d", &[2, 2, 2], &d), i64_in("i", &[2, 1], &[1, -2])],
        &["y"],
    );
    floats(&out[0], &[2, 2], &[2.0, 3.0, 4.0, 5.0]);
    // batch_dims 1 with element tuples of two components and two positions per batch entry:
    // batch 0 takes [1, 1] = 3 and [0, 1] = 1; batch 1 takes [1, 0] = 6 and [0, 0] = 4.
    let out = run(
        13,
        vec![node("GatherND", &["d", "i"], &["y"], vec![int_attr("batch_dims", 1)])],
        vec![],
        vec![f32_in("d", &[2, 2, 2], &d), i64_in("i", &[2, 2, 2], &[1, 1, 0, 1, 1, 0, 0, 0])],
        &["y"],
    );
    floats(&out[0], &[2, 2], &[3.0, 1.0, 6.0, 4.0]);
    // i32 data keeps its type; constant indices are positions computed at import.
    let out = run(
        13,
        vec![node("GatherND", &["d", "i"], &["y"], vec![])],
        vec![ints("i", &[2, 2], &[0, 0, 1, 1])],
        vec![i32_in("d", &[2, 2], &[10, 11, 12, 13])],
        &["y"],
    );
    exact(&out[0], &[2], DType::I32, &[10, 13]);
}

#[test]
fn tensor_scatter_linear_circular_and_without_write_indices() {
    // past [2, 4, 2] (axis -2 = 1, max length 4), update [2, 2, 2].
    let past: Vec<f32> = (0..16).map(|v| v as f32).collect();
    let update: Vec<f32> = (0..8).map(|v| -1.0 - v as f32).collect();
    let node_of = |mode: &str, with_indices: bool| {
        let inputs: &[&str] = if with_indices { &["p", "u", "w"] } else { &["p", "u"] };
        vec![node("TensorScatter", inputs, &["y"], vec![string_attr("mode", mode)])]
    };
    let given = |w: Option<[i64; 2]>| {
        let mut v = vec![f32_in("p", &[2, 4, 2], &past), f32_in("u", &[2, 2, 2], &update)];
        if let Some(w) = w {
            v.push(i64_in("w", &[2], &w));
        }
        v
    };
    // Circular, write indices at run time [1, 3]: batch 0 rows 1, 2; batch 1 rows 3, 0.
    let circular = [
        0.0, 1.0, -1.0, -2.0, -3.0, -4.0, 6.0, 7.0, //
        -7.0, -8.0, 10.0, 11.0, 12.0, 13.0, -5.0, -6.0,
    ];
    let out = run(24, node_of("circular", true), vec![], given(Some([1, 3])), &["y"]);
    floats(&out[0], &[2, 4, 2], &circular);
    // The same known at import.
    let out =
        run(24, node_of("circular", true), vec![ints("w", &[2], &[1, 3])], given(None), &["y"]);
    floats(&out[0], &[2, 4, 2], &circular);
    // Linear at [2, 0]; then no write indices (both from 0).
    let linear = [
        0.0, 1.0, 2.0, 3.0, -1.0, -2.0, -3.0, -4.0, //
        -5.0, -6.0, -7.0, -8.0, 12.0, 13.0, 14.0, 15.0,
    ];
    let out = run(24, node_of("linear", true), vec![], given(Some([2, 0])), &["y"]);
    floats(&out[0], &[2, 4, 2], &linear);
    let out = run(24, node_of("linear", false), vec![], given(None), &["y"]);
    let mut from0 = past.clone();
    from0[..4].copy_from_slice(&update[..4]);
    from0[8..12].copy_from_slice(&update[4..]);
    floats(&out[0], &[2, 4, 2], &from0);
    // Linear past the end: refused at import when known, an error at run time otherwise.
    let err =
        try_run(24, node_of("linear", true), vec![ints("w", &[2], &[3, 0])], given(None), &["y"])
            .unwrap_err();
    assert!(err.contains("write index 3 + 1 is outside axis 1 of length 4"), "{err}");
    let err =
        try_run(24, node_of("linear", true), vec![], given(Some([3, 0])), &["y"]).unwrap_err();
    assert_eq!(
        err,
        "scatter_elements: id 4 at position 1 of `tensorscatter.positions` is out of range for \
         an axis of length 4"
    );
    // A 4-D cache [1, 2, 3, 1] along axis 2, write index 2, circular: rows 2 and 0.
    let out = run(
        24,
        vec![node(
            "TensorScatter",
            &["p", "u", "w"],
            &["y"],
            vec![string_attr("mode", "circular"), int_attr("axis", 2)],
        )],
        vec![],
        vec![
            f32_in("p", &[1, 2, 3, 1], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
            f32_in("u", &[1, 2, 2, 1], &[10.0, 11.0, 12.0, 13.0]),
            i64_in("w", &[1], &[2]),
        ],
        &["y"],
    );
    floats(&out[0], &[1, 2, 3, 1], &[11.0, 1.0, 10.0, 13.0, 4.0, 12.0]);
}
