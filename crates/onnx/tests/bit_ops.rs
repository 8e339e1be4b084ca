//! The integer bit operators (BitShift, BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot) on
//! int32 and int64 graph inputs and constants, each on a small hand-written graph run on the
//! CPU runtime (fused and unfused) against values worked out by hand, at values past 2^24 where
//! f32 arithmetic would round; and the errors naming the node, the operator and the attribute
//! or input.

use lumen_compiler::DType;
use lumen_onnx::proto::{AttributeProto, NodeProto, TensorProto, data_type};
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{HostTensor, Tensors};

mod common;
use common::*;

/// Runs the opset-28 graph fused and unfused on the CPU: its outputs, or the first error.
fn try_run(
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<Input>,
    outputs: &[&str],
) -> Result<Vec<HostTensor>, String> {
    let bytes = model_of(28, nodes, initializers, &inputs, outputs);
    let imported = import(&bytes, &ImportOptions::default()).map_err(|e| e.to_string())?;
    let given: Tensors = inputs.into_iter().map(|i| (i.name.to_string(), i.value)).collect();
    let bound = imported.bind_inputs(&given).map_err(|e| e.to_string())?;
    run_fused_and_unfused(&imported, &bound, "bits")
}

fn values(t: &HostTensor, dtype: DType) -> Vec<i64> {
    assert_eq!(t.dtype(), dtype);
    t.index_values().expect("an integer tensor")
}

#[test]
fn bit_shift_by_hand() {
    let shift = |direction: &str, out: &str| {
        node("BitShift", &["x", "s"], &[out], vec![string_attr("direction", direction)])
    };
    let (left, right) = (shift("LEFT", "l"), shift("RIGHT", "r"));
    // int32: in range, past the sign bit, negative and too-large shifts, negative values.
    let x = [16, 1 << 30, 1, -8, -8, -1, i32::MIN, 123_456_789];
    let s = [1, 1, 31, 32, -1, 100, 1, 3];
    let out = try_run(
        vec![left, right],
        vec![],
        vec![i32_in("x", &[8], &x), i32_in("s", &[8], &s)],
        &["l", "r"],
    )
    .unwrap();
    let min = i64::from(i32::MIN);
    assert_eq!(values(&out[0], DType::I32), [32, min, min, 0, 0, 0, 0, 987_654_312]);
    assert_eq!(values(&out[1], DType::I32), [8, 1 << 29, 0, -1, -1, -1, min / 2, 15_432_098]);
    // int64 by an int64 constant broadcast over the rows: 32 is inside the width.
    let shifted = node("BitShift", &["y", "k"], &["l"], vec![string_attr("direction", "LEFT")]);
    let y = [3, -1, 1 << 40, 5, 7, i64::MAX];
    let k = ints("k", &[3], &[32, 63, 24]);
    let out = try_run(vec![shifted], vec![k], vec![i64_in("y", &[2, 3], &y)], &["l"]).unwrap();
    assert_eq!(out[0].shape(), [2, 3]);
    assert_eq!(values(&out[0], DType::I64), [3 << 32, i64::MIN, 0, 5 << 32, i64::MIN, -(1 << 24)]);
}

#[test]
fn bitwise_by_hand() {
    let a = [-356_387_803, 2_135_392_491, 0b1100, -1];
    let b = [-356_387_803, 1, 0b1010, i32::MAX];
    let nodes = vec![
        node("BitwiseAnd", &["a", "b"], &["and"], vec![]),
        node("BitwiseOr", &["a", "b"], &["or"], vec![]),
        node("BitwiseXor", &["a", "b"], &["xor"], vec![]),
        node("BitwiseNot", &["a"], &["not"], vec![]),
    ];
    let inputs = vec![i32_in("a", &[2, 2], &a), i32_in("b", &[2, 2], &b)];
    let out = try_run(nodes, vec![], inputs, &["and", "or", "xor", "not"]).unwrap();
    let max = i64::from(i32::MAX);
    assert_eq!(values(&out[0], DType::I32), [-356_387_803, 1, 0b1000, max]);
    assert_eq!(values(&out[1], DType::I32), [-356_387_803, 2_135_392_491, 0b1110, -1]);
    assert_eq!(values(&out[2], DType::I32), [0, 2_135_392_490, 0b0110, i64::from(i32::MIN)]);
    assert_eq!(values(&out[3], DType::I32), [356_387_802, -2_135_392_492, -13, 0]);
}

#[test]
fn bad_bit_operators_are_named() {
    let up = node("BitShift", &["x", "x"], &["y"], vec![string_attr("direction", "UP")]);
    let err = try_run(vec![up], vec![], vec![i32_in("x", &[2], &[1, 2])], &["y"]).unwrap_err();
    assert!(err.contains("`bitshift`") && err.contains("BitShift"), "{err}");
    assert!(err.contains("direction is \"UP\""), "{err}");
    let none = node("BitShift", &["x", "x"], &["y"], vec![]);
    let err = try_run(vec![none], vec![], vec![i32_in("x", &[2], &[1, 2])], &["y"]).unwrap_err();
    assert!(err.contains("attribute direction (LEFT or RIGHT) is missing"), "{err}");
    let float = node("BitwiseAnd", &["x", "f"], &["y"], vec![]);
    let inputs = vec![i32_in("x", &[2], &[1, 2]), f32_in("f", &[2], &[1.0, 2.0])];
    let err = try_run(vec![float], vec![], inputs, &["y"]).unwrap_err();
    assert!(err.contains("BitwiseAnd") && err.contains("input 1 (`f`) is f32"), "{err}");
    let mixed = node("BitwiseOr", &["x", "z"], &["y"], vec![]);
    let inputs = vec![i32_in("x", &[2], &[1, 2]), i64_in("z", &[2], &[1, 2])];
    let err = try_run(vec![mixed], vec![], inputs, &["y"]).unwrap_err();
    assert!(err.contains("input 1 (`z`) is i64"), "{err}");
}

/// A `Constant` node holding `values` of ONNX type `elem` (int32, int64 or uint8).
fn constant(name: &str, elem: i32, values: &[i64]) -> NodeProto {
    let mut t = TensorProto {
        dims: vec![values.len() as i64],
        data_type: elem,
        name: name.into(),
        ..Default::default()
    };
    match elem {
        data_type::INT64 => t.int64_data = values.to_vec(),
        data_type::UINT8 => t.raw_data = values.iter().map(|&v| v as u8).collect(),
        _ => t.int32_data = values.iter().map(|&v| v as i32).collect(),
    }
    let mut n = node("Constant", &[], &[name], vec![]);
    n.name = format!("const_{name}");
    n.attribute.push(AttributeProto {
        name: "value".into(),
        t: Some(t),
        r#type: 4,
        ..Default::default()
    });
    n
}

#[test]
fn folded_bit_operators_keep_their_onnx_type() {
    // Expected values from onnxruntime 1.32 (scripts/ort_regression_values.py,
    // folded_int32_bits). Constants only: folded at import, in 32 bits, the result int32
    // (they were computed in 64 bits as int64: 1 << 31 was 2^31, not -2^31).
    let min = i64::from(i32::MIN);
    let consts = || {
        vec![
            constant("a", data_type::INT32, &[1, 3, -1, 1 << 30]),
            constant("b", data_type::INT32, &[31, 31, 32, 2]),
        ]
    };
    for (direction, want) in [("LEFT", [min, min, 0, 0]), ("RIGHT", [0, 0, -1, 1 << 28])] {
        let mut nodes = consts();
        nodes.push(node(
            "BitShift",
            &["a", "b"],
            &["y"],
            vec![string_attr("direction", direction)],
        ));
        let out = try_run(nodes, vec![], vec![], &["y"]).unwrap();
        assert_eq!(values(&out[0], DType::I32), want, "{direction}");
    }
    // A folded int32 result read by a run-time int32 operator (was refused: "input 1 (`x`) is
    // i32"), and by a folded BitwiseNot first.
    let nodes = vec![
        constant("p", data_type::INT32, &[12, 10, -1, min]),
        constant("q", data_type::INT32, &[6, 3, 255, 1 << 30]),
        node("BitwiseAnd", &["p", "q"], &["e"], vec![]),
        node("BitwiseNot", &["e"], &["n"], vec![]),
        node("BitwiseOr", &["n", "x"], &["y"], vec![]),
    ];
    let out =
        try_run(nodes, vec![], vec![i32_in("x", &[4], &[1, 1, 256, 0])], &["e", "n", "y"]).unwrap();
    assert_eq!(values(&out[0], DType::I32), [4, 2, 255, 0]);
    assert_eq!(values(&out[1], DType::I32), [-5, -3, -256, -1]);
    assert_eq!(values(&out[2], DType::I32), [-5, -3, -256, -1]);
    // uint8 in 8 bits: BitwiseNot is 255 - x, shifts drop the bits past 8 (the result read
    // through a Cast to float, lumen having no uint8 tensors).
    let cast = |i: &str, o: &str| node("Cast", &[i], &[o], vec![int_attr("to", 1)]);
    let shift =
        |d: &str, o: &str| node("BitShift", &["u", "s"], &[o], vec![string_attr("direction", d)]);
    let nodes = vec![
        constant("u", data_type::UINT8, &[0, 1, 200, 255]),
        constant("s", data_type::UINT8, &[1, 7, 1, 9]),
        node("BitwiseNot", &["u"], &["n"], vec![]),
        shift("LEFT", "l"),
        shift("RIGHT", "r"),
        cast("n", "nf"),
        cast("l", "lf"),
        cast("r", "rf"),
    ];
    let out = try_run(nodes, vec![], vec![], &["nf", "lf", "rf"]).unwrap();
    assert_eq!(out[0].data(), [255.0, 254.0, 55.0, 0.0]);
    assert_eq!(out[1].data(), [0.0, 128.0, 144.0, 0.0]);
    assert_eq!(out[2].data(), [0.0, 0.0, 100.0, 0.0]);
    // A folded Cast to int32 wraps, and stays int32.
    let nodes = vec![
        constant("w", data_type::INT64, &[(1 << 31) + 5, -(1 << 31) - 1, 7]),
        node("Cast", &["w"], &["y"], vec![int_attr("to", i64::from(data_type::INT32))]),
    ];
    let out = try_run(nodes, vec![], vec![], &["y"]).unwrap();
    assert_eq!(values(&out[0], DType::I32), [-2147483643, 2147483647, 7]);
    // Constants of two types are refused, naming the input and both types.
    let nodes = vec![
        constant("a", data_type::INT32, &[1]),
        constant("c", data_type::INT64, &[1]),
        node("BitwiseAnd", &["a", "c"], &["y"], vec![]),
    ];
    assert_eq!(
        try_run(nodes, vec![], vec![], &["y"]).unwrap_err(),
        "unsupported operator BitwiseAnd (node `bitwiseand`, opset 28): input 1 (`c`) is int64 \
         beside int32; BitwiseAnd takes integers of one type"
    );
}
