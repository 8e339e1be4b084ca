//! Builders the ONNX test files share: value infos, nodes, attributes, integer initializers,
//! and graph inputs with their values (each test binary uses some of them).
#![allow(dead_code)]

use lumen_onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto, data_type,
};
use lumen_runtime::HostTensor;
use prost::Message;

pub fn value(name: &str, elem_type: i32, dims: &[usize]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension { dim_value: Some(d as i64), dim_param: None })
                        .collect(),
                }),
            }),
            ..Default::default()
        }),
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: op.to_lowercase(),
        op_type: op.into(),
        attribute: attrs,
        ..Default::default()
    }
}

pub fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i, r#type: 2, ..Default::default() }
}

pub fn string_attr(name: &str, s: &str) -> AttributeProto {
    AttributeProto { name: name.into(), s: s.as_bytes().to_vec(), r#type: 3, ..Default::default() }
}

pub fn ints(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: data_type::INT64,
        int64_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

/// A graph input: its name, ONNX element type and value.
pub struct Input {
    pub name: &'static str,
    pub elem_type: i32,
    pub value: HostTensor,
}

pub fn f32_in(name: &'static str, shape: &[usize], data: &[f32]) -> Input {
    Input {
        name,
        elem_type: data_type::FLOAT,
        value: HostTensor::new(shape, data.to_vec()).unwrap(),
    }
}

pub fn i64_in(name: &'static str, shape: &[usize], data: &[i64]) -> Input {
    let value = HostTensor::from_i64(shape, data.to_vec()).unwrap();
    Input { name, elem_type: data_type::INT64, value }
}

pub fn i32_in(name: &'static str, shape: &[usize], data: &[i32]) -> Input {
    let value = HostTensor::from_i32(shape, data.to_vec()).unwrap();
    Input { name, elem_type: data_type::INT32, value }
}

/// The encoded model of one graph `g` at `opset` (default domain): `nodes`, `initializers`,
/// `inputs` declared with their values' shapes, f32 `outputs` of unknown shape.
pub fn model_of(
    opset: i64,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: &[Input],
    outputs: &[&str],
) -> Vec<u8> {
    let m = ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            node: nodes,
            name: "g".into(),
            initializer: initializers,
            input: inputs.iter().map(|i| value(i.name, i.elem_type, i.value.shape())).collect(),
            output: outputs.iter().map(|n| value(n, data_type::FLOAT, &[])).collect(),
        }),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
        ..Default::default()
    };
    m.encode_to_vec()
}

/// Compiles `imported` fused and unfused (programs named `name`), runs both on the CPU with
/// the inputs `bound`, checks they agree, and returns the outputs in the graph's order, or the
/// first error as text.
pub fn run_fused_and_unfused(
    imported: &lumen_onnx::Imported,
    bound: &lumen_runtime::Tensors,
    name: &str,
) -> Result<Vec<HostTensor>, String> {
    use lumen_runtime::Runtime;
    let mut results: Vec<Vec<HostTensor>> = Vec::new();
    for fuse in [false, true] {
        let options =
            lumen_compiler::CompileOptions { fuse, name: name.into(), ..Default::default() };
        let program = imported.graph.compile(&options).map_err(|e| e.to_string())?;
        let mut prepared = lumen_runtime::CpuRuntime::default()
            .prepare(&program, &imported.weights)
            .map_err(|e| e.to_string())?;
        let out = prepared.execute(bound).map_err(|e| e.to_string())?;
        results.push(imported.outputs.iter().map(|(_, l)| out[l].clone()).collect());
    }
    assert_eq!(results[0], results[1], "fused and unfused differ");
    Ok(results.remove(0))
}
