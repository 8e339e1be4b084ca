//! Bad ONNX input is a typed error naming what is wrong, never a panic: garbage and truncated
//! bytes, external data, unsupported element types and operators, symbolic dimensions left
//! open, shapes that contradict the model, missing inputs and cycles. The models are built
//! here from the protobuf messages, so each test shows the exact graph it feeds.

use lumen_onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, TypeProtoTensor,
    ValueInfoProto, data_type,
};
use lumen_onnx::{ImportOptions, OnnxError, import};
use prost::Message;

fn value(name: &str, elem_type: i32, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match d {
            Some(v) => Dimension { dim_value: Some(*v), dim_param: None },
            None => Dimension { dim_value: None, dim_param: Some("batch".into()) },
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor { elem_type, shape: Some(TensorShapeProto { dim }) }),
            ..Default::default()
        }),
    }
}

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.into(),
        op_type: op.into(),
        ..Default::default()
    }
}

fn weight(name: &str, dims: &[i64], data: Vec<f32>) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: data_type::FLOAT,
        float_data: data,
        name: name.into(),
        ..Default::default()
    }
}

/// `y = relu(x @ w)`, x `[2, 3]`, w `[3, 4]`: a well-formed model the tests break one way each.
fn model(opset: i64) -> ModelProto {
    ModelProto {
        ir_version: 8,
        producer_name: "lumen tests".into(),
        graph: Some(GraphProto {
            node: vec![
                node("MatMul", "mm", &["x", "w"], &["h"]),
                node("Relu", "act", &["h"], &["y"]),
            ],
            name: "g".into(),
            initializer: vec![weight("w", &[3, 4], (0..12).map(|i| i as f32 * 0.1).collect())],
            input: vec![value("x", data_type::FLOAT, &[Some(2), Some(3)])],
            output: vec![value("y", data_type::FLOAT, &[Some(2), Some(4)])],
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
        ..Default::default()
    }
}

fn err(m: &ModelProto) -> OnnxError {
    import(&m.encode_to_vec(), &ImportOptions::default()).expect_err("the import must fail")
}

#[test]
fn the_well_formed_model_imports() {
    let im = import(&model(17).encode_to_vec(), &ImportOptions::default()).unwrap();
    assert_eq!(im.inputs.len(), 1);
    assert_eq!(im.inputs[0].shape, vec![2, 3]);
    assert_eq!(im.outputs, vec![("y".to_string(), "y".to_string())]);
    assert_eq!((im.opset, im.nodes), (17, 2));
}

#[test]
fn garbage_and_truncated_bytes() {
    let e = import(b"certainly not a protobuf \xff\xff\xff", &ImportOptions::default());
    assert!(matches!(e, Err(OnnxError::Decode(_))), "{e:?}");
    let bytes = model(17).encode_to_vec();
    for cut in [1, bytes.len() / 3, bytes.len() - 1] {
        let e = import(&bytes[..cut], &ImportOptions::default()).unwrap_err();
        assert!(
            matches!(e, OnnxError::Decode(_) | OnnxError::NoGraph | OnnxError::Opset { .. }),
            "cut at {cut}: {e:?}"
        );
    }
    assert!(matches!(import(&[], &ImportOptions::default()), Err(OnnxError::NoGraph)));
}

/// Opsets 7 to 28 import (issue 26 widened the range from 13: each operator reads the form
/// of its opset); opsets 1 to 6 import when every node's operator had its opset-7 form then
/// (MatMul since 1, Relu since 6, when it lost `consumed_inputs`), else the node is named;
/// newer ones are refused by number.
#[test]
fn opsets_outside_1_to_28_and_older_forms() {
    let e = err(&model(29));
    assert_eq!(e.to_string(), "opset 29 is not supported (lumen imports opsets 1 to 28)");
    for v in [6, 7, 11, 12, 28] {
        let im = import(&model(v).encode_to_vec(), &ImportOptions::default())
            .unwrap_or_else(|e| panic!("opset {v}: {e}"));
        assert_eq!(im.opset, v);
    }
    for v in [1, 5] {
        let e = err(&model(v)).to_string();
        assert!(e.contains("`act`") && e.contains("Relu"), "{e}");
        assert!(
            e.contains(&format!(
                "at opset {v} this operator has an older form than lumen reads (its form from \
                 opset 6 on); export the model at opset 7 or newer"
            )),
            "{e}"
        );
    }
}

#[test]
fn external_data_is_refused() {
    let mut m = model(17);
    let w = &mut m.graph.as_mut().unwrap().initializer[0];
    w.float_data.clear();
    w.data_location = 1;
    w.external_data =
        vec![StringStringEntryProto { key: "location".into(), value: "weights.bin".into() }];
    let e = err(&m);
    assert!(matches!(&e, OnnxError::ExternalData { name } if name == "w"), "{e:?}");
}

#[test]
fn f16_int8_and_double_inputs_are_refused() {
    for (dtype, word) in [(data_type::FLOAT16, "float16"), (data_type::INT8, "int8")] {
        let mut m = model(17);
        m.graph.as_mut().unwrap().input[0] = value("x", dtype, &[Some(2), Some(3)]);
        let e = err(&m);
        assert!(matches!(&e, OnnxError::DType { name, .. } if name == "x"), "{e:?}");
        assert!(e.to_string().contains(word), "{e}");
    }
    let mut m = model(17);
    let w = &mut m.graph.as_mut().unwrap().initializer[0];
    w.data_type = data_type::FLOAT16;
    w.float_data.clear();
    w.raw_data = vec![0; 24];
    let e = err(&m);
    assert!(matches!(&e, OnnxError::DType { name, .. } if name == "w"), "{e:?}");
}

#[test]
fn an_unsupported_operator_names_op_node_and_opset() {
    let mut m = model(13);
    m.graph.as_mut().unwrap().node[1] = node("QLinearMatMul", "quantized", &["h"], &["y"]);
    assert_eq!(
        err(&m).to_string().split(':').next().unwrap(),
        "unsupported operator QLinearMatMul (node `quantized`, opset 13)"
    );
    // An operator lumen imports, with an attribute value it does not support.
    let mut m = model(17);
    let mut softmax = node("Softmax", "sm", &["h"], &["y"]);
    softmax.attribute.push(AttributeProto {
        name: "axis".into(),
        i: 7,
        r#type: 2,
        ..Default::default()
    });
    m.graph.as_mut().unwrap().node[1] = softmax;
    assert_eq!(
        err(&m).to_string(),
        "node `sm` (Softmax): softmax: axis 7 is out of range for rank 2"
    );
}

#[test]
fn symbolic_dimensions_must_be_set() {
    let mut m = model(17);
    m.graph.as_mut().unwrap().input[0] = value("x", data_type::FLOAT, &[None, Some(3)]);
    let e = err(&m);
    assert_eq!(
        e.to_string(),
        "symbolic dimensions left open: x[0] = batch; set them with --shape NAME=D0,D1,... \
         (e.g. --shape x=1,3)"
    );
    let shapes = [("x".to_string(), vec![5, 3])].into_iter().collect();
    let im = import(&m.encode_to_vec(), &ImportOptions { shapes, ..Default::default() }).unwrap();
    assert_eq!(im.inputs[0].shape, vec![5, 3]);
}

#[test]
fn a_shape_must_name_an_input_and_agree_with_the_model() {
    let bytes = model(17).encode_to_vec();
    let with = |name: &str, dims: Vec<usize>| {
        let shapes = [(name.to_string(), dims)].into_iter().collect();
        import(&bytes, &ImportOptions { shapes, ..Default::default() }).unwrap_err().to_string()
    };
    assert_eq!(
        with("z", vec![2, 3]),
        "the shape given for input `z`: the graph has no input of that name"
    );
    assert_eq!(
        with("x", vec![6]),
        "the shape given for input `x`: the model's input has rank 2, the shape given has 1 \
         dimensions"
    );
    assert_eq!(
        with("x", vec![2, 5]),
        "the shape given for input `x`: dimension 1 is 3 in the model, the shape given says 5"
    );
}

#[test]
fn missing_values_and_cycles() {
    let mut m = model(17);
    m.graph.as_mut().unwrap().node[0].input[0] = "nowhere".into();
    let e = err(&m);
    assert_eq!(
        e.to_string(),
        "node `mm` (MatMul) reads `nowhere`, which nothing in the graph defines (a missing \
         input or a cycle)"
    );
    // h = relu(y), y = h @ w: each waits for the other.
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.node = vec![node("Relu", "a", &["y"], &["h"]), node("MatMul", "b", &["h", "w"], &["y"])];
    assert!(matches!(err(&m), OnnxError::Undefined { .. }));
}

#[test]
fn malformed_weights_and_shapes_are_errors() {
    // 12 values declared [3, 5].
    let mut m = model(17);
    m.graph.as_mut().unwrap().initializer[0].dims = vec![3, 5];
    assert_eq!(
        err(&m).to_string(),
        "tensor `w` holds another number of elements than its dims [3, 5] say"
    );
    // MatMul of [2, 3] by [4, 4]: the DSL's shape error, not a panic.
    let mut m = model(17);
    m.graph.as_mut().unwrap().initializer[0] = weight("w", &[4, 4], vec![0.0; 16]);
    assert_eq!(
        err(&m).to_string(),
        "node `mm` (MatMul): matmul: shapes [2, 3] and [4, 4] do not match: inner dimensions 3 \
         and 4 differ ([..., M, K] x [..., K, N])"
    );
}

#[test]
fn a_constant_integer_graph_output_is_copied_out() {
    // Shape(x) is known at import time: nothing computes it, so the program copies the
    // folded value out of an i64 weight (integer outputs are allowed since issue 26; before,
    // this was refused as a constant output).
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.node.push(node("Shape", "shape", &["x"], &["s"]));
    g.output.push(value("s", data_type::INT64, &[Some(2)]));
    let im = import(&m.encode_to_vec(), &ImportOptions::default()).unwrap();
    assert_eq!(im.output_dtype("s"), Some(lumen_compiler::DType::I64));
    assert_eq!(im.weights["s.value"].index_values(), Some(vec![2, 3]));
}

fn ints(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![values.len() as i64],
        data_type: data_type::INT64,
        int64_data: values.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

/// A hostile shape in a folded constant is an error, not an allocation that aborts.
#[test]
fn huge_folded_constants_are_refused() {
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(ints("big", &[1 << 40, 1 << 20]));
    g.node.push(node("ConstantOfShape", "fill", &["big"], &["filled"]));
    g.node.push(node("Add", "use", &["y", "filled"], &["z"]));
    g.output[0] = value("z", data_type::FLOAT, &[Some(2), Some(4)]);
    let e = err(&m).to_string();
    assert!(e.starts_with("node `fill` (ConstantOfShape): a constant of shape"), "{e}");
    // Range with a huge count, and an input shape whose byte size overflows.
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.initializer.extend([ints("s", &[0]), ints("l", &[i64::MAX]), ints("d", &[1])]);
    g.node.push(node("Range", "r", &["s", "l", "d"], &["ramp"]));
    g.node.push(node("Cast", "c", &["ramp"], &["rampf"]));
    assert!(err(&m).to_string().contains("lumen folds at import"));
    let shapes = [("x".to_string(), vec![1usize << 62, 3])].into_iter().collect();
    let mut m = model(17);
    m.graph.as_mut().unwrap().input[0] = value("x", data_type::FLOAT, &[None, Some(3)]);
    let e = import(&m.encode_to_vec(), &ImportOptions { shapes, ..Default::default() })
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "the shape given for input `x`: x: shape [4611686018427387904, 3] is too large"
        ),
        "{e}"
    );
    assert!(!e.contains(".rs:"), "{e}");
}

/// Constants whose shapes differ outside the concat axis are an error, not an index panic.
#[test]
fn mismatched_constant_concat_is_an_error() {
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(weight("a", &[2, 2], vec![0.0; 4]));
    g.initializer.push(weight("b", &[3], vec![0.0; 3]));
    let mut cat = node("Concat", "cat", &["a", "b"], &["ab"]);
    cat.attribute.push(AttributeProto {
        name: "axis".into(),
        i: 1,
        r#type: 2,
        ..Default::default()
    });
    g.node.push(cat);
    g.node.push(node("Add", "use", &["y", "ab"], &["z"]));
    g.output[0] = value("z", data_type::FLOAT, &[Some(2), Some(4)]);
    let e = err(&m).to_string();
    assert!(e.starts_with("node `cat` (Concat): the inputs' shapes differ"), "{e}");
}

#[test]
fn invalid_graphs_found_by_a_fresh_user() {
    // A value defined twice.
    let mut m = model(17);
    m.graph.as_mut().unwrap().node.push(node("Neg", "again", &["h"], &["y"]));
    assert!(err(&m).to_string().starts_with("node `again` (Neg): it defines `y`"));
    // An input without a declared shape is not a scalar.
    let mut m = model(17);
    m.graph.as_mut().unwrap().input[0]
        .r#type
        .as_mut()
        .unwrap()
        .tensor_type
        .as_mut()
        .unwrap()
        .shape = None;
    assert!(err(&m).to_string().contains("x (no shape declared)"));
    // Given a shape (`lumen run` gives its tensors'), it takes it at any rank, not rank 0.
    for (given, ok) in
        [(vec![2, 3], true), (vec![1, 2, 3], true), (vec![], false), (vec![3, 2], false)]
    {
        let options = ImportOptions {
            shapes: [("x".to_string(), given.clone())].into_iter().collect(),
            ..Default::default()
        };
        match import(&m.encode_to_vec(), &options) {
            Ok(im) => {
                assert!(ok, "{given:?}");
                assert_eq!(im.inputs[0].shape, given);
            }
            // x @ w needs [_, 3]: the matmul refuses the others, naming the node.
            Err(e) => assert!(!ok && e.to_string().starts_with("node `mm` (MatMul)"), "{e}"),
        }
    }
    // Dropout in training mode.
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(TensorProto {
        dims: vec![],
        data_type: data_type::BOOL,
        int32_data: vec![1],
        name: "train".into(),
        ..Default::default()
    });
    g.node[1] = node("Dropout", "drop", &["h", "", "train"], &["y"]);
    assert_eq!(
        err(&m).to_string(),
        "unsupported operator Dropout (node `drop`, opset 17): training mode with a ratio other \
         than a known 0 (random; lumen runs inference)"
    );
    // No default-domain opset, no outputs.
    let mut m = model(17);
    m.opset_import[0].domain = "com.example".into();
    assert!(matches!(err(&m), OnnxError::NoOpset));
    let mut m = model(17);
    m.graph.as_mut().unwrap().output.clear();
    assert!(matches!(err(&m), OnnxError::NoOutputs));
}

/// A symbolic dimension set through one input's shape is set for every input naming it.
#[test]
fn symbolic_dimensions_are_shared_by_name() {
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    g.input[0] = value("x", data_type::FLOAT, &[None, Some(3)]);
    g.input.push(value("x2", data_type::FLOAT, &[None, Some(4)]));
    g.node.push(node("Add", "plus", &["y", "x2"], &["z"]));
    g.output[0] = value("z", data_type::FLOAT, &[None, Some(4)]);
    let shapes = [("x".to_string(), vec![6, 3])].into_iter().collect();
    let im = import(&m.encode_to_vec(), &ImportOptions { shapes, ..Default::default() }).unwrap();
    let got: Vec<&[usize]> = im.inputs.iter().map(|i| i.shape.as_slice()).collect();
    assert_eq!(got, [&[6, 3][..], &[6, 4][..]]);
}

/// An attribute holding integers.
fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { name: name.into(), ints: v.to_vec(), r#type: 7, ..Default::default() }
}

/// A one-node model over `x [1, 4, 5, 5]` with a weight `w` of `w_dims` (ones).
fn spatial_model(n: NodeProto, w_dims: &[i64]) -> ModelProto {
    let mut m = model(17);
    let g = m.graph.as_mut().unwrap();
    let count = w_dims.iter().product::<i64>().max(0) as usize;
    g.initializer = vec![weight("w", w_dims, vec![1.0; count])];
    g.input = vec![value("x", data_type::FLOAT, &[Some(1), Some(4), Some(5), Some(5)])];
    g.node = vec![n];
    g.output = vec![value("y", data_type::FLOAT, &[None])];
    m
}

/// Bad parameters of the convolution family's operators are one error naming the node, the
/// operator and what is wrong (issue 26): groups that do not divide the channels, a kernel
/// larger than the padded input, negative pads, an unsupported resize mode, an unknown
/// auto_pad, pooling pads as large as the kernel.
#[test]
fn bad_spatial_parameters_name_node_op_and_attribute() {
    let line = |m: &ModelProto| err(m).to_string();
    let mut conv = node("Conv", "c1", &["x", "w"], &["y"]);
    conv.attribute.push(AttributeProto {
        name: "group".into(),
        i: 3,
        r#type: 2,
        ..Default::default()
    });
    let e = line(&spatial_model(conv, &[6, 1, 3, 3]));
    assert!(e.contains("`c1`") && e.contains("Conv") && e.contains("group = 3 must divide"), "{e}");

    let e = line(&spatial_model(node("Conv", "c2", &["x", "w"], &["y"]), &[2, 4, 7, 7]));
    assert!(e.contains("`c2`") && e.contains("larger than the padded input"), "{e}");

    let mut conv = node("Conv", "c3", &["x", "w"], &["y"]);
    conv.attribute.push(ints_attr("pads", &[-1, 0, 0, 0]));
    let e = line(&spatial_model(conv, &[2, 4, 3, 3]));
    assert!(
        e.contains("`c3`") && e.contains("pads = [-1, 0, 0, 0]") && e.contains("negative"),
        "{e}"
    );

    let mut conv = node("Conv", "c4", &["x", "w"], &["y"]);
    conv.attribute.push(AttributeProto {
        name: "auto_pad".into(),
        s: b"SIDEWAYS".to_vec(),
        r#type: 3,
        ..Default::default()
    });
    let e = line(&spatial_model(conv, &[2, 4, 3, 3]));
    assert!(e.contains("`c4`") && e.contains("auto_pad = \"SIDEWAYS\""), "{e}");

    let mut pool = node("MaxPool", "p1", &["x"], &["y"]);
    pool.attribute.push(ints_attr("kernel_shape", &[2, 2]));
    pool.attribute.push(ints_attr("pads", &[2, 0, 0, 0]));
    let e = line(&spatial_model(pool, &[1]));
    assert!(
        e.contains("`p1`") && e.contains("MaxPool") && e.contains("smaller than the kernel"),
        "{e}"
    );

    let mut resize = node("Resize", "r1", &["x", "", "w"], &["y"]);
    resize.attribute.push(AttributeProto {
        name: "mode".into(),
        s: b"spline".to_vec(),
        r#type: 3,
        ..Default::default()
    });
    let e = line(&spatial_model(resize, &[4]));
    assert!(e.contains("`r1`") && e.contains("Resize") && e.contains("mode = \"spline\""), "{e}");

    let mut pad = node("Pad", "pad1", &["x", "w"], &["y"]);
    pad.attribute.push(AttributeProto {
        name: "mode".into(),
        s: b"reflect".to_vec(),
        r#type: 3,
        ..Default::default()
    });
    let mut m = spatial_model(pad, &[8]);
    m.graph.as_mut().unwrap().initializer = vec![TensorProto {
        dims: vec![8],
        data_type: data_type::INT64,
        int64_data: vec![0, 0, 6, 0, 0, 0, 0, 0],
        name: "w".into(),
        ..Default::default()
    }];
    let e = line(&m);
    assert!(e.contains("`pad1`") && e.contains("Reflect padding of (6, 0)"), "{e}");
}

/// A graph input that is not a tensor, or declares no type at all, is named with what it is.
#[test]
fn a_graph_input_that_is_not_a_tensor_says_what_it_is() {
    use lumen_onnx::proto::OtherType;
    let cases = [
        (None, "declares no type"),
        (
            Some(TypeProto { sequence_type: Some(OtherType {}), ..Default::default() }),
            "is a sequence",
        ),
        (Some(TypeProto { map_type: Some(OtherType {}), ..Default::default() }), "is a map"),
        (
            Some(TypeProto { optional_type: Some(OtherType {}), ..Default::default() }),
            "is an optional",
        ),
        (Some(TypeProto::default()), "is of a type lumen does not know"),
    ];
    for (ty, what) in cases {
        let mut m = model(17);
        m.graph.as_mut().unwrap().input[0].r#type = ty;
        let e = err(&m);
        assert!(matches!(&e, OnnxError::InputType { name, .. } if name == "x"), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "graph input `x` {what}: lumen imports tensor inputs (an element type and a shape)"
            )
        );
    }
}
