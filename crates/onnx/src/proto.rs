//! The ONNX protobuf messages lumen reads (a subset of `onnx.proto`, IR version 3 and later),
//! decoded by prost. Field numbers are ONNX's; fields lumen never reads (documentation,
//! training info, functions, sparse tensors) are left out, and prost
//! skips them on the wire. No protoc is needed: the messages are declared here.

#![allow(missing_docs)]

/// `onnx.ModelProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(string, tag = "3")]
    pub producer_version: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

/// `onnx.OperatorSetIdProto`: an operator set and its version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `onnx.GraphProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

/// `onnx.NodeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, tag = "7")]
    pub domain: String,
}

/// `onnx.AttributeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// A subgraph (`If`'s branches).
    #[prost(message, optional, tag = "6")]
    pub g: Option<GraphProto>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

/// `onnx.TensorProto`: an initializer or a constant.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

/// `onnx.StringStringEntryProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `onnx.ValueInfoProto`: a graph input's or output's name and type.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `onnx.TypeProto`, its tensor case.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
    /// The other kinds, read only to name them in a refusal (their contents are skipped).
    #[prost(message, optional, tag = "4")]
    pub sequence_type: Option<OtherType>,
    #[prost(message, optional, tag = "5")]
    pub map_type: Option<OtherType>,
    #[prost(message, optional, tag = "8")]
    pub sparse_tensor_type: Option<OtherType>,
    #[prost(message, optional, tag = "9")]
    pub optional_type: Option<OtherType>,
}

impl TypeProto {
    /// What a type that is not a tensor is, in words: `a sequence`, `a map`, `a sparse
    /// tensor`, `an optional`, or `of a type lumen does not know`.
    pub fn kind(&self) -> &'static str {
        if self.tensor_type.is_some() {
            "a tensor"
        } else if self.sequence_type.is_some() {
            "a sequence"
        } else if self.map_type.is_some() {
            "a map"
        } else if self.sparse_tensor_type.is_some() {
            "a sparse tensor"
        } else if self.optional_type.is_some() {
            "an optional"
        } else {
            "of a type lumen does not know"
        }
    }
}

/// A `TypeProto` kind lumen does not import: its fields are skipped.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OtherType {}

/// `onnx.TypeProto.Tensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProtoTensor {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `onnx.TensorShapeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `onnx.TensorShapeProto.Dimension`: a number or a symbolic name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dimension {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}

/// `onnx.TensorProto.DataType` values lumen meets.
pub mod data_type {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;

    /// The type's name in messages: `float`, `int64`, `float16`, ...
    pub fn name(t: i32) -> String {
        match t {
            1 => "float".into(),
            2 => "uint8".into(),
            3 => "int8".into(),
            4 => "uint16".into(),
            5 => "int16".into(),
            6 => "int32".into(),
            7 => "int64".into(),
            8 => "string".into(),
            9 => "bool".into(),
            10 => "float16".into(),
            11 => "double".into(),
            12 => "uint32".into(),
            13 => "uint64".into(),
            16 => "bfloat16".into(),
            other => format!("data type {other}"),
        }
    }
}

/// `onnx.ModelProto` read for its signature only: the graph's inputs and its initializers'
/// names. prost skips every other field on the wire, so the weights' bytes are never copied.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelSignature {
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphSignature>,
}

/// `onnx.GraphProto` read for [`ModelSignature`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphSignature {
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorName>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
}

/// `onnx.TensorProto` read for its name only.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorName {
    #[prost(string, tag = "8")]
    pub name: String,
}
