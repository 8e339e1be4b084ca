//! Operators checked on small models built from the protobuf messages, run on the CPU runtime
//! against values worked out by hand (ONNX's definitions): the forms a bug once broke (a
//! Pow whose exponent adds leading axes, one tensor as two outputs) and the operators imported
//! beyond the first list (Split, LeakyRelu, BatchNormalization, ReduceL2, folded Mod and
//! Trilu).

use lumen_compiler::CompileOptions;
use lumen_onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto, data_type,
};
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{CpuRuntime, HostTensor, Runtime, Tensors};
use prost::Message;

fn value(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension { dim_value: Some(d), dim_param: None })
                        .collect(),
                }),
            }),
            ..Default::default()
        }),
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: op.to_lowercase(),
        op_type: op.into(),
        attribute: attrs,
        ..Default::default()
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i, r#type: 2, ..Default::default() }
}

fn float_attr(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f, r#type: 1, ..Default::default() }
}

fn floats(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: data_type::FLOAT,
        float_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

fn ints(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: data_type::INT64,
        int64_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

/// Imports the graph, runs it fused and unfused on `x`, returns the outputs by ONNX name.
fn run(
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    x: (&[usize], &[f32]),
    outputs: &[(&str, &[i64])],
) -> Vec<HostTensor> {
    let dims: Vec<i64> = x.0.iter().map(|&d| d as i64).collect();
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: nodes,
            name: "g".into(),
            initializer: initializers,
            input: vec![value("x", &dims)],
            output: outputs.iter().map(|(n, d)| value(n, d)).collect(),
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 18 }],
        ..Default::default()
    };
    let imported = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap();
    let given: Tensors =
        [("x".to_string(), HostTensor::new(x.0.to_vec(), x.1.to_vec()).unwrap())].into();
    let inputs = imported.bind_inputs(&given).unwrap();
    let mut results: Vec<Vec<HostTensor>> = Vec::new();
    for fuse in [false, true] {
        let options = CompileOptions { fuse, name: "ops".into(), ..Default::default() };
        let program = imported.graph.compile(&options).unwrap();
        let mut prepared = CpuRuntime::default().prepare(&program, &imported.weights).unwrap();
        let out = prepared.execute(&inputs).unwrap();
        results.push(imported.outputs.iter().map(|(_, l)| out[l].clone()).collect());
    }
    assert_eq!(results[0], results[1], "fused and unfused differ");
    results.remove(0)
}

fn close(got: &HostTensor, shape: &[usize], want: &[f32]) {
    assert_eq!(got.shape(), shape);
    for (i, (g, w)) in got.data().iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5, "element {i}: {g} vs {w} ({:?})", got.data());
    }
}

#[test]
fn pow_by_a_higher_rank_exponent_keeps_its_axes() {
    // x [2, 3] ^ e [1, 1, 1]: the output is [1, 2, 3], not x's shape.
    let x: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    let out = run(
        vec![node("Pow", &["x", "e"], &["y"], vec![])],
        vec![floats("e", &[1, 1, 1], &[2.0])],
        (&[2, 3], &x),
        &[("y", &[1, 2, 3])],
    );
    close(&out[0], &[1, 2, 3], &[1.0, 4.0, 9.0, 16.0, 25.0, 36.0]);
    // Any other exponent is an elementwise pow.
    let out = run(
        vec![node("Pow", &["x", "e"], &["y"], vec![])],
        vec![floats("e", &[3], &[0.0, 1.5, -2.0])],
        (&[2, 3], &x),
        &[("y", &[2, 3])],
    );
    close(&out[0], &[2, 3], &[1.0, 2f32.powf(1.5), 1.0 / 9.0, 1.0, 5f32.powf(1.5), 1.0 / 36.0]);
}

#[test]
fn one_tensor_as_two_outputs() {
    let out = run(
        vec![node("Relu", &["x"], &["h"], vec![]), node("Identity", &["h"], &["h2"], vec![])],
        vec![],
        (&[3], &[-1.0, 0.5, 2.0]),
        &[("h", &[3]), ("h2", &[3])],
    );
    close(&out[0], &[3], &[0.0, 0.5, 2.0]);
    close(&out[1], &[3], &[0.0, 0.5, 2.0]);
}

#[test]
fn split_leaky_relu_and_reduce_l2() {
    let x = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0];
    let out = run(
        vec![
            node("Split", &["x", "sizes"], &["a", "b"], vec![int_attr("axis", 1)]),
            node("LeakyRelu", &["a"], &["la"], vec![float_attr("alpha", 0.1)]),
            node("ReduceL2", &["b", "axes"], &["nb"], vec![int_attr("keepdims", 0)]),
        ],
        vec![ints("sizes", &[2], &[1, 2]), ints("axes", &[1], &[1])],
        (&[2, 3], &x),
        &[("la", &[2, 1]), ("nb", &[2])],
    );
    close(&out[0], &[2, 1], &[-0.2, 1.0]);
    close(&out[1], &[2], &[1.0, (4.0f32 + 9.0).sqrt()]);
}

#[test]
fn batch_normalization_per_channel() {
    // x [1, 2, 2]: channel c scaled by scale[c] / sqrt(var[c] + eps) around mean[c].
    let x = [1.0, 3.0, 10.0, 20.0];
    let out = run(
        vec![node(
            "BatchNormalization",
            &["x", "scale", "bias", "mean", "var"],
            &["y"],
            vec![float_attr("epsilon", 0.0)],
        )],
        vec![
            floats("scale", &[2], &[2.0, 1.0]),
            floats("bias", &[2], &[0.5, -1.0]),
            floats("mean", &[2], &[2.0, 15.0]),
            floats("var", &[2], &[4.0, 25.0]),
        ],
        (&[1, 2, 2], &x),
        &[("y", &[1, 2, 2])],
    );
    close(&out[0], &[1, 2, 2], &[-0.5, 1.5, -2.0, 0.0]);
}

#[test]
fn mod_and_trilu_fold_at_import() {
    // A causal mask built from constants: triu(ones(3, 3), 1) * (7 mod 4) added to x.
    let out = run(
        vec![
            node(
                "ConstantOfShape",
                &["shape"],
                &["ones"],
                vec![AttributeProto {
                    name: "value".into(),
                    t: Some(floats("", &[1], &[1.0])),
                    r#type: 4,
                    ..Default::default()
                }],
            ),
            node("Trilu", &["ones", "k"], &["upper"], vec![]),
            node("Mod", &["seven", "four"], &["three"], vec![int_attr("fmod", 1)]),
            node("Mul", &["upper", "three"], &["mask"], vec![]),
            node("Add", &["x", "mask"], &["y"], vec![]),
        ],
        vec![
            ints("shape", &[2], &[3, 3]),
            ints("k", &[], &[1]),
            floats("seven", &[], &[7.0]),
            floats("four", &[], &[4.0]),
        ],
        (&[3, 3], &[0.0; 9]),
        &[("y", &[3, 3])],
    );
    close(&out[0], &[3, 3], &[0.0, 3.0, 3.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0]);
}

/// An `If` whose condition folds at import (here `Shape(x)[0] == 2`, as exporters branch on
/// shapes): the chosen branch's nodes are imported in place and read the outer `x`; the other
/// branch (with an operator lumen does not import) is never read. CumSum is a product with a
/// triangular matrix: inclusive, exclusive and reverse.
#[test]
fn if_with_a_folded_condition_and_cumsum() {
    let branch = |op: &str| GraphProto {
        node: vec![node(op, &["x"], &["b"], vec![])],
        name: op.into(),
        output: vec![value("b", &[2, 3])],
        ..Default::default()
    };
    let graph_attr = |name: &str, g: GraphProto| AttributeProto {
        name: name.into(),
        g: Some(g),
        r#type: 5,
        ..Default::default()
    };
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "zero"], &["n"], vec![]),
        node("Equal", &["n", "two"], &["c"], vec![]),
        node(
            "If",
            &["c"],
            &["y"],
            vec![
                graph_attr("then_branch", branch("Relu")),
                graph_attr("else_branch", branch("QLinearMatMul")),
            ],
        ),
        node("CumSum", &["x", "one"], &["cs"], vec![]),
        node(
            "CumSum",
            &["x", "one"],
            &["cs_ex_rev"],
            vec![int_attr("exclusive", 1), int_attr("reverse", 1)],
        ),
    ];
    let inits = vec![ints("zero", &[], &[0]), ints("two", &[], &[2]), ints("one", &[], &[1])];
    let x = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0];
    let out = run(
        nodes,
        inits,
        (&[2, 3], &x),
        &[("y", &[2, 3]), ("cs", &[2, 3]), ("cs_ex_rev", &[2, 3])],
    );
    assert_eq!(out[0].data(), [1.0, 0.0, 3.0, 0.0, 5.0, 0.0]);
    assert_eq!(out[1].data(), [1.0, -1.0, 2.0, -4.0, 1.0, -5.0]);
    assert_eq!(out[2].data(), [1.0, 3.0, 0.0, -1.0, -6.0, 0.0]);
}
