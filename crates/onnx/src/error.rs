//! Typed errors of the ONNX importer: each names what is wrong (the operator, its node and the
//! opset; the tensor; the symbolic dimensions left open) in one line.

use lumen_compiler::CompileError;
use thiserror::Error;

/// Why an ONNX model could not be imported.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// The bytes are not a valid ONNX protobuf (garbage, truncated).
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// The model has no graph.
    #[error("the ONNX model has no graph")]
    NoGraph,
    /// The default-domain opset is outside what lumen imports.
    #[error("opset {version} is not supported (lumen imports opsets {min} to {max})")]
    Opset {
        /// The model's `ai.onnx` opset version.
        version: i64,
        /// The oldest opset lumen imports (`import::OLDEST_OPSET`).
        min: i64,
        /// The newest (`import::MAX_OPSET`).
        max: i64,
    },
    /// An operator (or an attribute or input form of it) lumen does not import.
    #[error("unsupported operator {op} (node `{node}`, opset {opset}): {reason}")]
    Unsupported {
        /// The node's `op_type` (with its domain when not the default one).
        op: String,
        /// The node's name (or its first output when it has none).
        node: String,
        /// The model's opset.
        opset: i64,
        /// What exactly is not supported.
        reason: String,
    },
    /// A tensor of an element type lumen does not compute with (f16, int8, strings, ...).
    #[error(
        "tensor `{name}` has element type {dtype}: lumen imports float32 models (and int64/int32 indices)"
    )]
    DType {
        /// The initializer, input or constant.
        name: String,
        /// Its ONNX element type.
        dtype: String,
    },
    /// A graph input that is not a tensor (a sequence, a map, an optional) or declares no type.
    #[error(
        "graph input `{name}` {what}: lumen imports tensor inputs (an element type and a shape)"
    )]
    InputType {
        /// The graph input.
        name: String,
        /// `declares no type`, `is a sequence`, `is a map`, ...
        what: String,
    },
    /// A tensor whose data lives in an external file.
    #[error(
        "tensor `{name}` keeps its data in an external file; lumen reads self-contained .onnx files"
    )]
    ExternalData {
        /// The tensor.
        name: String,
    },
    /// Graph inputs whose shapes the model leaves symbolic and `--shape` did not set.
    #[error(
        "symbolic dimensions left open: {dims}; set them with --shape NAME=D0,D1,... (e.g. --shape {example})"
    )]
    Symbolic {
        /// Every open dimension, `input[axis] = name`, comma-separated.
        dims: String,
        /// A `--shape` argument for the first such input.
        example: String,
    },
    /// A tensor whose data holds another number of elements than its dims say.
    #[error("tensor `{name}` holds another number of elements than its dims {dims:?} say")]
    TensorLength {
        /// The tensor's name.
        name: String,
        /// Its dims.
        dims: Vec<i64>,
    },
    /// A shape given for a graph input (`--shape`, or the shape of a tensor fed to it) that
    /// names no graph input, has another rank, or contradicts a static dimension.
    #[error("the shape given for input `{name}`: {reason}")]
    ShapeOption {
        /// The input named.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor given for a graph input that is missing or does not match the graph.
    #[error("graph input `{name}`: {reason}")]
    Binding {
        /// The input's ONNX name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A node reads a value no earlier node, input or initializer defines (or the graph has a
    /// cycle).
    #[error(
        "node `{node}` ({op}) reads `{value}`, which nothing in the graph defines (a missing input or a cycle)"
    )]
    Undefined {
        /// The node.
        node: String,
        /// Its op type.
        op: String,
        /// The value it reads.
        value: String,
    },
    /// A node whose attributes or inputs are malformed for its op.
    #[error("node `{node}` ({op}): {reason}")]
    Malformed {
        /// The node.
        node: String,
        /// Its op type.
        op: String,
        /// What is wrong.
        reason: String,
    },
    /// The model imports no opset of the default (`ai.onnx`) domain, nor of `ai.onnx.ml`.
    #[error("the model imports no opset of the default ai.onnx domain (opset_import)")]
    NoOpset,
    /// The graph declares no outputs.
    #[error("the ONNX graph has no outputs: nothing to compute")]
    NoOutputs,
    /// A graph output no imported node computes (an optional output lumen does not compute,
    /// such as Dropout's mask).
    #[error(
        "graph output `{name}` is computed by no node lumen imported (an optional output lumen \
         does not compute, such as Dropout's mask)"
    )]
    MissingOutput {
        /// The output's name.
        name: String,
    },
    /// The imported program did not compile (a shape the DSL refuses).
    #[error(transparent)]
    Compile(#[from] CompileError),
}
