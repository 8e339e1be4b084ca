//! The importer: an ONNX graph walked node by node into lumen's DSL.
//!
//! Initializers and `Constant` nodes are [`Const`] values; a node whose inputs are all known
//! at import time is folded (`Importer::fold`), so shape arithmetic and constant subgraphs
//! never reach the program. A constant a computed op reads becomes a weight (an f32 scalar becomes a DSL
//! constant). Every other node becomes DSL calls over the primitives and composites (a
//! `LayerNormalization` is `layer_norm`, a `Gemm` a matmul of transposed views plus a bias
//! add that fusion makes a BIAS epilogue). Names are made identifier-like (`/attn/MatMul` ->
//! `_attn_MatMul`) and unique.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use lumen_compiler::view::View;
use lumen_compiler::{DType, Graph, Tensor};
use lumen_compiler::{HostTensor, Tensors};
use prost::Message;

use crate::constant::{Const, Data, ReadError};
use crate::error::OnnxError;
use crate::proto::{AttributeProto, ModelProto, NodeProto, TensorProto, data_type};

/// The oldest default-domain opset lumen imports: 13, where Squeeze, Unsqueeze, ReduceSum
/// and Split take their axes as inputs, as every later opset does.
pub const MIN_OPSET: i64 = 13;

/// The newest default-domain opset lumen imports. Every operator lumen imports changed after
/// opset 21 only in its type lists (and Cast gained `round_mode`, Range `stash_type`, neither
/// with an effect on float32 and int64), per onnx 1.23's operator schemas.
pub const MAX_OPSET: i64 = 28;

/// The most elements a constant folded at import may hold (2^26: 256 MiB of f32).
pub const MAX_FOLDED_ELEMENTS: usize = 1 << 26;

/// Options of [`import`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportOptions {
    /// Shapes of graph inputs by ONNX name, for the dimensions the model leaves symbolic
    /// (`--shape input_ids=1,16`). A given shape replaces the model's for that input.
    pub shapes: BTreeMap<String, Vec<usize>>,
    /// Values of integer graph inputs by ONNX name, for nodes that need them at import time
    /// (a Reshape's shape, a Slice's starts, a reduction's axes fed as graph inputs): such a
    /// node reads the given value and the program is specialised to it
    /// ([`Imported::specialized`]). `lumen run` passes the `--inputs` tensors.
    pub values: Tensors,
}

/// One graph input of an imported model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedInput {
    /// The name in the ONNX graph (what a user feeds by).
    pub onnx_name: String,
    /// The program's input name (identifier-like).
    pub name: String,
    /// Its shape, symbolic dimensions resolved.
    pub shape: Vec<usize>,
    /// f32, or i64/i32 indices.
    pub dtype: DType,
    /// `Some(i64 or i32)` for the f32 twin of an integer graph input that float arithmetic
    /// reads (an attention mask cast to float): the program reads the same values as f32,
    /// converted on the host by [`Imported::bind_inputs`] (exact below 2^24 in magnitude).
    /// Its `onnx_name` is the integer input's; its `name` ends in `.f32`.
    pub cast_from: Option<DType>,
}

/// An imported model: the program, its weights and its signature.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The program (outputs marked).
    pub graph: Graph,
    /// Every weight by program name: the initializers computed ops read, and the constants
    /// folded at import that they read.
    pub weights: Tensors,
    /// The graph inputs in order.
    pub inputs: Vec<ImportedInput>,
    /// The graph outputs in order: (ONNX name, program name).
    pub outputs: Vec<(String, String)>,
    /// The model's default-domain opset.
    pub opset: i64,
    /// Nodes in the ONNX graph.
    pub nodes: usize,
    /// Nodes folded at import (all their inputs known).
    pub folded: usize,
    /// Who exported it (`pytorch 2.15.0`, `skl2onnx 1.20.0`), from the model's producer.
    pub producer: String,
    /// Integer graph inputs whose given values ([`ImportOptions::values`]) nodes read at
    /// import time: the program is only valid for those values.
    pub specialized: Vec<String>,
}

impl Imported {
    /// The program's inputs from tensors given by ONNX graph input name: each checked against
    /// the graph's dtype and shape, an f32 twin ([`ImportedInput::cast_from`]) converted from
    /// its integer input. Tensors that name no graph input are not read.
    ///
    /// # Errors
    /// [`OnnxError::Binding`] naming the input that is missing, of another dtype or of
    /// another shape.
    pub fn bind_inputs(&self, given: &Tensors) -> Result<Tensors, OnnxError> {
        let mut out = Tensors::new();
        for input in &self.inputs {
            let bad = |reason: String| OnnxError::Binding { name: input.onnx_name.clone(), reason };
            let Some(t) = given.get(&input.onnx_name) else {
                return Err(bad("no tensor is given for it".into()));
            };
            let declared = input.cast_from.unwrap_or(input.dtype);
            if t.dtype() != declared {
                return Err(bad(format!(
                    "the graph declares {declared}, the tensor is {}",
                    t.dtype()
                )));
            }
            if t.shape() != input.shape {
                return Err(bad(format!(
                    "the program was imported for shape {:?}, the tensor is {:?}",
                    input.shape,
                    t.shape()
                )));
            }
            let t = match input.cast_from {
                None => t.clone(),
                Some(_) => {
                    let values = t.index_values().unwrap_or_default();
                    HostTensor::new(t.shape().to_vec(), values.iter().map(|&v| v as f32).collect())
                        .map_err(|e| bad(e.to_string()))?
                }
            };
            out.insert(input.name.clone(), t);
        }
        Ok(out)
    }
}

/// A value flowing along an ONNX edge.
#[derive(Debug, Clone)]
enum Value {
    /// Computed by the program.
    Tensor(Tensor),
    /// Known at import time; shared, as a value is read by every node it feeds (an embedding
    /// table is megabytes).
    Const(Rc<Const>),
}

/// Makes ONNX names identifier-like and unique: characters outside ASCII letters, digits,
/// `_`, `.`, `-` become `_`; names lumen reserves (`t0`, `workspace`) or that are taken get a
/// suffix.
#[derive(Debug, Default)]
struct Names {
    used: std::collections::BTreeSet<String>,
}

impl Names {
    fn make(&mut self, onnx: &str) -> String {
        let mut base: String = onnx
            .chars()
            .map(
                |c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') { c } else { '_' },
            )
            .collect();
        if base.is_empty() {
            base.push_str("value");
        }
        if lumen_compiler::hlir::is_reserved_name(&base) {
            base.insert_str(0, "onnx_");
        }
        let mut name = base.clone();
        let mut k = 2;
        while !self.used.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }
}

struct Importer {
    cx: Graph,
    values: HashMap<String, Value>,
    /// The program's inputs so far (f32 twins are added while nodes are read).
    inputs: Vec<ImportedInput>,
    /// Integer values computed from a graph input by views only: (the input's index in
    /// `inputs`, the view nodes applied in order), so an f32 twin can replay them.
    int_views: HashMap<String, (usize, Vec<NodeProto>)>,
    /// f32 twins made so far, by ONNX value name.
    twins: HashMap<String, Tensor>,
    /// Computed values that hold only 0.0 and 1.0 (comparison results): a Cast to bool
    /// leaves them as they are.
    bools: std::collections::HashSet<String>,
    /// [`ImportOptions::values`].
    known: Tensors,
    /// Graph inputs read from `known`, in first-read order (a cell: shape readers borrow the
    /// importer shared).
    specialized: std::cell::RefCell<Vec<String>>,
    weights: Tensors,
    names: Names,
    opset: i64,
    folded: usize,
}

/// A DSL error's message without its ` (at file:line:column)` suffix.
fn without_location(message: &str) -> String {
    // `... (at src/x.rs:1:2)` or `... (input, at src/x.rs:1:2)`.
    match message.rfind(" (") {
        Some(at) if message.ends_with(')') && message[at..].contains(".rs:") => {
            message[..at].to_string()
        }
        _ => message.to_string(),
    }
}

/// The names of a model's graph inputs that no initializer gives (what a caller must feed),
/// in graph order, without importing it.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that do not decode, [`OnnxError::NoGraph`].
pub fn graph_input_names(bytes: &[u8]) -> Result<Vec<String>, OnnxError> {
    let model = crate::proto::ModelSignature::decode(bytes)
        .map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.ok_or(OnnxError::NoGraph)?;
    let given: std::collections::BTreeSet<&str> =
        graph.initializer.iter().map(|i| i.name.as_str()).collect();
    Ok(graph
        .input
        .iter()
        .filter(|i| !given.contains(i.name.as_str()))
        .map(|i| i.name.clone())
        .collect())
}

/// Imports an ONNX model (opset 13 to 28, float32, static shapes or shapes set by
/// `options.shapes`) into a lumen program.
///
/// # Errors
/// [`OnnxError`]: bytes that do not decode, no graph, an opset outside [`MIN_OPSET`]..=[`MAX_OPSET`], a tensor of
/// an unsupported element type or with external data, symbolic dimensions left open, an
/// unsupported operator (naming op type, node and opset) or form of one, a node reading an
/// undefined value (or a cycle), a constant graph output, and the DSL's shape errors.
pub fn import(bytes: &[u8], options: &ImportOptions) -> Result<Imported, OnnxError> {
    let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.ok_or(OnnxError::NoGraph)?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(0, |o| o.version);
    if opset == 0 {
        return Err(OnnxError::NoOpset);
    }
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(OnnxError::Opset { version: opset, min: MIN_OPSET, max: MAX_OPSET });
    }
    let mut im = Importer {
        cx: Graph::new(),
        values: HashMap::new(),
        weights: Tensors::new(),
        names: Names::default(),
        opset,
        folded: 0,
        inputs: Vec::new(),
        int_views: HashMap::new(),
        twins: HashMap::new(),
        bools: std::collections::HashSet::new(),
        known: options.values.clone(),
        specialized: std::cell::RefCell::default(),
    };
    for init in &graph.initializer {
        let c = read_tensor(init, &init.name)?;
        im.values.insert(init.name.clone(), Value::Const(Rc::new(c)));
    }
    for name in options.shapes.keys() {
        if !graph.input.iter().any(|i| &i.name == name) {
            return Err(OnnxError::ShapeOption {
                name: name.clone(),
                reason: "the graph has no input of that name".into(),
            });
        }
    }
    // A symbolic dimension (`batch`, `sequence`) set through one input's given shape sets it
    // for every input that names it.
    let mut params: BTreeMap<&str, usize> = BTreeMap::new();
    for input in &graph.input {
        let (Some(given), Some(shape)) = (
            options.shapes.get(&input.name),
            input
                .r#type
                .as_ref()
                .and_then(|t| t.tensor_type.as_ref())
                .and_then(|t| t.shape.as_ref()),
        ) else {
            continue;
        };
        for (d, &g) in shape.dim.iter().zip(given) {
            if let Some(p) = d.dim_param.as_deref().filter(|p| !p.is_empty()) {
                params.entry(p).or_insert(g);
            }
        }
    }
    let mut inputs = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut example = String::new();
    for input in &graph.input {
        if im.values.contains_key(&input.name) {
            continue; // an initializer listed as an input (IR < 4): its value is known
        }
        let tensor = input.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
        let Some(tensor) = tensor else {
            return Err(OnnxError::DType {
                name: input.name.clone(),
                dtype: "a non-tensor type".into(),
            });
        };
        let dtype = match tensor.elem_type {
            data_type::FLOAT => DType::F32,
            data_type::INT64 => DType::I64,
            data_type::INT32 => DType::I32,
            other => {
                return Err(OnnxError::DType {
                    name: input.name.clone(),
                    dtype: data_type::name(other),
                });
            }
        };
        let dims = tensor.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]);
        if tensor.shape.is_none() && !options.shapes.contains_key(&input.name) {
            // Not a scalar: an input whose rank the model does not say.
            open.push(format!("{} (no shape declared)", input.name));
            if example.is_empty() {
                example = format!("{}=D0,D1,...", input.name);
            }
            continue;
        }
        let shape = match options.shapes.get(&input.name) {
            Some(given) => {
                if given.len() != dims.len() {
                    return Err(OnnxError::ShapeOption {
                        name: input.name.clone(),
                        reason: format!(
                            "the model's input has rank {}, the shape given has {} dimensions",
                            dims.len(),
                            given.len()
                        ),
                    });
                }
                for (axis, (d, &g)) in dims.iter().zip(given).enumerate() {
                    if let Some(v) = d.dim_value.filter(|&v| v >= 0 && v as usize != g) {
                        return Err(OnnxError::ShapeOption {
                            name: input.name.clone(),
                            reason: format!(
                                "dimension {axis} is {v} in the model, the shape given says {g}"
                            ),
                        });
                    }
                }
                given.clone()
            }
            None => {
                let mut shape = Vec::with_capacity(dims.len());
                for (axis, d) in dims.iter().enumerate() {
                    let param = d.dim_param.as_deref().and_then(|p| params.get(p));
                    match (d.dim_value, param) {
                        (Some(v), _) if v >= 0 => shape.push(v as usize),
                        (_, Some(&v)) => shape.push(v),
                        _ => {
                            let what = d
                                .dim_param
                                .clone()
                                .filter(|p| !p.is_empty())
                                .unwrap_or_else(|| "?".into());
                            open.push(format!("{}[{axis}] = {what}", input.name));
                            shape.push(1);
                        }
                    }
                }
                if open.iter().any(|o| o.starts_with(&format!("{}[", input.name)))
                    && example.is_empty()
                {
                    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
                    example = format!("{}={}", input.name, dims.join(","));
                }
                shape
            }
        };
        let name = im.names.make(&input.name);
        let t = im.cx.input_typed(name.clone(), shape.clone(), dtype);
        if let Some(e) = im.cx.recorded_error() {
            return Err(OnnxError::ShapeOption {
                name: input.name.clone(),
                reason: without_location(&e.to_string()),
            });
        }
        im.values.insert(input.name.clone(), Value::Tensor(t));
        if dtype.is_index() {
            im.int_views.insert(input.name.clone(), (inputs.len(), Vec::new()));
        }
        inputs.push(ImportedInput {
            onnx_name: input.name.clone(),
            name,
            shape,
            dtype,
            cast_from: None,
        });
    }
    im.inputs = inputs;
    if !open.is_empty() {
        return Err(OnnxError::Symbolic { dims: open.join(", "), example });
    }

    // Nodes in graph order (ONNX requires a topological one); a node whose inputs are not all
    // defined yet waits for a later pass, so an unsorted graph still imports.
    let mut pending: Vec<&NodeProto> = graph.node.iter().collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut waiting = Vec::new();
        for node in pending {
            let ready = node.input.iter().all(|i| i.is_empty() || im.values.contains_key(i));
            if !ready {
                waiting.push(node);
                continue;
            }
            // A DSL error names lumen's source line; the user needs the ONNX node instead.
            let in_node = |e: lumen_compiler::CompileError| OnnxError::Malformed {
                node: node_name(node),
                op: node.op_type.clone(),
                reason: without_location(&e.to_string()),
            };
            let outs = im.node(node).map_err(|e| match e {
                OnnxError::Compile(c) => in_node(c),
                other => other,
            })?;
            if let Some(e) = im.cx.recorded_error() {
                return Err(in_node(e));
            }
            for (name, v) in node.output.iter().zip(outs) {
                if name.is_empty() {
                    continue;
                }
                if im.values.insert(name.clone(), v).is_some() {
                    return Err(OnnxError::Malformed {
                        node: node_name(node),
                        op: node.op_type.clone(),
                        reason: format!(
                            "it defines `{name}`, which an input, initializer or earlier node \
                             already defines (ONNX graphs are single-assignment)"
                        ),
                    });
                }
            }
        }
        if waiting.len() == before {
            let node = waiting[0];
            let value = node.input.iter().find(|i| !i.is_empty() && !im.values.contains_key(*i));
            return Err(OnnxError::Undefined {
                node: node_name(node),
                op: node.op_type.clone(),
                value: value.cloned().unwrap_or_default(),
            });
        }
        pending = waiting;
    }

    if graph.output.is_empty() {
        return Err(OnnxError::NoOutputs);
    }
    let mut outputs = Vec::new();
    // Leaves (inputs, weights) as the graph stands before any output is marked.
    let hlir = im.cx.hlir();
    let mut marked = std::collections::HashSet::new();
    for out in &graph.output {
        let value = im
            .values
            .get(&out.name)
            .cloned()
            .ok_or_else(|| OnnxError::MissingOutput { name: out.name.clone() })?;
        let (t, copy) = match value {
            // A float output known at import time is a weight the program copies out.
            Value::Const(c) if c.is_float() => {
                let here = NodeProto { name: "graph outputs".into(), ..Default::default() };
                let w = im.materialize(&here, format!("{}.value", out.name), Value::Const(c))?;
                (w, true)
            }
            Value::Const(_) => return Err(OnnxError::ConstantOutput { name: out.name.clone() }),
            Value::Tensor(t) => {
                let leaf = hlir.graph.node_weight(t.node()).is_some_and(|n| n.op.is_leaf());
                (t, leaf)
            }
        };
        // An output must be computed: an input passed straight through is copied, and so is
        // a tensor that is already another output (`return h, h`).
        let t = if copy || !marked.insert(t.node()) { t.contiguous() } else { t };
        let name = im.names.make(&out.name);
        t.output(name.clone());
        outputs.push((out.name.clone(), name));
    }
    if let Some(err) = im.cx.recorded_error() {
        return Err(err.into());
    }
    let producer = format!("{} {}", model.producer_name, model.producer_version).trim().to_string();
    Ok(Imported {
        graph: im.cx,
        weights: im.weights,
        inputs: im.inputs,
        outputs,
        opset,
        nodes: graph.node.len(),
        folded: im.folded,
        producer,
        specialized: im.specialized.into_inner(),
    })
}

fn read_tensor(t: &TensorProto, name: &str) -> Result<Const, OnnxError> {
    Const::from_proto(t).map_err(|e| match e {
        ReadError::DType(dtype) => OnnxError::DType { name: name.to_string(), dtype },
        ReadError::External => OnnxError::ExternalData { name: name.to_string() },
        ReadError::Length => {
            OnnxError::TensorLength { name: name.to_string(), dims: t.dims.clone() }
        }
    })
}

fn node_name(n: &NodeProto) -> String {
    if n.name.is_empty() { n.output.first().cloned().unwrap_or_default() } else { n.name.clone() }
}

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

fn attr_i(n: &NodeProto, name: &str, default: i64) -> i64 {
    attr(n, name).map_or(default, |a| a.i)
}

fn attr_f(n: &NodeProto, name: &str, default: f32) -> f32 {
    attr(n, name).map_or(default, |a| a.f)
}

fn attr_ints(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(n, name).map(|a| a.ints.clone())
}

/// `axis` (negative from the last) of a rank-`rank` tensor.
fn axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

impl Importer {
    fn unsupported(&self, n: &NodeProto, reason: impl Into<String>) -> OnnxError {
        let op = if n.domain.is_empty() || n.domain == "ai.onnx" {
            n.op_type.clone()
        } else {
            format!("{}.{}", n.domain, n.op_type)
        };
        OnnxError::Unsupported { op, node: node_name(n), opset: self.opset, reason: reason.into() }
    }

    fn malformed(&self, n: &NodeProto, reason: impl Into<String>) -> OnnxError {
        OnnxError::Malformed { node: node_name(n), op: n.op_type.clone(), reason: reason.into() }
    }

    /// An error unless a constant of `shape` is small enough to fold: at most
    /// [`MAX_FOLDED_ELEMENTS`] elements (a corrupt or hostile shape must not exhaust memory).
    fn foldable(&self, n: &NodeProto, shape: &[usize]) -> Result<(), OnnxError> {
        match shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
            Some(count) if count <= MAX_FOLDED_ELEMENTS => Ok(()),
            _ => Err(self.malformed(
                n,
                format!(
                    "a constant of shape {shape:?} is over the {MAX_FOLDED_ELEMENTS} elements \
                     lumen folds at import"
                ),
            )),
        }
    }

    /// Input `i` of `n`, `None` when absent (past the end or an empty name).
    fn input(&self, n: &NodeProto, i: usize) -> Option<Value> {
        let name = n.input.get(i).filter(|s| !s.is_empty())?;
        self.values.get(name).cloned()
    }

    /// Input `i` as a program tensor, materializing a constant as a weight (a one-element
    /// float as a DSL constant).
    fn tensor(&mut self, n: &NodeProto, i: usize) -> Result<Tensor, OnnxError> {
        let name = n.input.get(i).filter(|s| !s.is_empty()).cloned();
        let Some(name) = name else {
            return Err(self.malformed(n, format!("input {i} is missing")));
        };
        let value = self.values.get(&name).cloned().ok_or_else(|| OnnxError::Undefined {
            node: node_name(n),
            op: n.op_type.clone(),
            value: name.clone(),
        })?;
        self.materialize(n, name, value)
    }

    /// `value` (known as `name`) as a program tensor: a constant becomes a weight (a
    /// one-element float a DSL constant), once per name.
    fn materialize(
        &mut self,
        n: &NodeProto,
        name: String,
        value: Value,
    ) -> Result<Tensor, OnnxError> {
        let c = match value {
            Value::Tensor(t) => return Ok(t),
            Value::Const(c) => c,
        };
        let t = match &c.data {
            Data::F32(v) if v.len() == 1 => {
                let scalar = self.cx.constant(v[0]);
                if c.shape.is_empty() { scalar } else { scalar.reshape(c.shape.clone()) }
            }
            Data::F32(v) => {
                let lumen = self.names.make(&name);
                let host = HostTensor::new(c.shape.clone(), v.clone())
                    .map_err(|e| self.malformed(n, e.to_string()))?;
                self.weights.insert(lumen.clone(), host);
                self.cx.weight(lumen, c.shape.clone())
            }
            Data::I64(v) => {
                let lumen = self.names.make(&name);
                let host = HostTensor::from_i64(c.shape.clone(), v.clone())
                    .map_err(|e| self.malformed(n, e.to_string()))?;
                self.weights.insert(lumen.clone(), host);
                self.cx.weight_typed(lumen, c.shape.clone(), DType::I64)
            }
        };
        // Materialized once: later readers share the weight.
        self.values.insert(name, Value::Tensor(t.clone()));
        Ok(t)
    }

    /// Input `i` as integers known at import (a shape, axes, starts...), or `None` when absent.
    fn ints(&self, n: &NodeProto, i: usize) -> Result<Option<Vec<i64>>, OnnxError> {
        match self.input(n, i) {
            None => Ok(None),
            Some(Value::Const(c)) => Ok(Some(c.to_i64())),
            Some(Value::Tensor(_)) => {
                let name = &n.input[i];
                let given = self.known.get(name).and_then(HostTensor::index_values);
                match given {
                    Some(v) if self.inputs.iter().any(|g| &g.onnx_name == name) => {
                        let mut seen = self.specialized.borrow_mut();
                        if !seen.contains(name) {
                            seen.push(name.clone());
                        }
                        Ok(Some(v))
                    }
                    _ => Err(self.unsupported(
                        n,
                        format!(
                            "input {i} (`{name}`) must be known at import time: lumen compiles \
                             static shapes (an initializer or constant, or a graph input whose \
                             value is given, as `lumen run --inputs` does)"
                        ),
                    )),
                }
            }
        }
    }

    fn shape_of(&self, v: &Value) -> Vec<usize> {
        match v {
            Value::Tensor(t) => t.shape().unwrap_or_default(),
            Value::Const(c) => c.shape.clone(),
        }
    }

    /// Imports one node: its output values.
    fn node(&mut self, n: &NodeProto) -> Result<Vec<Value>, OnnxError> {
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Err(self.unsupported(n, "not in the default ONNX domain"));
        }
        if n.op_type == "Dropout" {
            // Inference only: training_mode absent or a constant false.
            match self.input(n, 2) {
                None => {}
                Some(Value::Const(c)) if c.to_i64().iter().all(|&v| v == 0) => {}
                Some(_) => return Err(self.unsupported(n, "training mode (lumen runs inference)")),
            }
        }
        let mut inputs: Vec<Option<Value>> = (0..n.input.len()).map(|i| self.input(n, i)).collect();
        // A shape fed as a graph input whose value is given (see ImportOptions::values).
        if n.op_type == "ConstantOfShape"
            && let Some(Value::Tensor(_)) = inputs.first().cloned().flatten()
            && let Some(dims) = self.ints(n, 0)?
        {
            inputs[0] = Some(Value::Const(Rc::new(Const::i64(vec![dims.len()], dims))));
        }
        let all_const = inputs.iter().all(|v| matches!(v, None | Some(Value::Const(_))));
        if (all_const || matches!(n.op_type.as_str(), "Shape" | "Size"))
            && let Some(folded) = self.fold(n, &inputs)?
        {
            self.folded += 1;
            return Ok(folded.into_iter().map(|c| Value::Const(Rc::new(c))).collect());
        }
        let out = self.compute(n)?;
        // Values known to hold only 0.0 and 1.0 (lumen's booleans).
        let boolean = match n.op_type.as_str() {
            "Equal" | "Less" | "Greater" | "Not" => true,
            "Cast" => attr_i(n, "to", 0) == i64::from(data_type::BOOL),
            "Identity" | "Dropout" => n.input.first().is_some_and(|i| self.bools.contains(i)),
            _ => false,
        };
        if let (true, Some(o)) = (boolean, n.output.first()) {
            self.bools.insert(o.clone());
        }
        // An integer value passed through unchanged keeps its f32 twin's recipe.
        if matches!(n.op_type.as_str(), "Identity" | "Dropout" | "Cast")
            && out.first().and_then(Tensor::dtype).is_some_and(DType::is_index)
            && let (Some(i), Some(o)) = (n.input.first(), n.output.first())
            && let Some(recipe) = self.int_views.get(i).cloned()
        {
            self.int_views.insert(o.clone(), recipe);
        }
        Ok(out.into_iter().map(Value::Tensor).collect())
    }

    /// Folds a node whose inputs are all known (and `Shape` of anything), or `None` when the
    /// op has no folding here (it is then computed by the program).
    fn fold(
        &self,
        n: &NodeProto,
        inputs: &[Option<Value>],
    ) -> Result<Option<Vec<Const>>, OnnxError> {
        let c = |i: usize| -> Option<&Const> {
            match inputs.get(i) {
                Some(Some(Value::Const(c))) => Some(c),
                _ => None,
            }
        };
        let need =
            |i: usize| c(i).ok_or_else(|| self.malformed(n, format!("input {i} is missing")));
        // The shape of input 0, known or computed (what Shape and Size read).
        let first_shape = || match inputs.first() {
            Some(Some(v)) => Ok(self.shape_of(v)),
            _ => Err(self.malformed(n, "no input")),
        };
        let bin = |ff: fn(f32, f32) -> f32,
                   fi: fn(i64, i64) -> i64|
         -> Result<Option<Vec<Const>>, OnnxError> {
            let (a, b) = (need(0)?, need(1)?);
            if let Some(shape) = lumen_compiler::view::broadcast_shapes(&a.shape, &b.shape) {
                self.foldable(n, &shape)?;
            }
            let out = a.zip(b, ff, fi).ok_or_else(|| {
                self.malformed(
                    n,
                    format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape),
                )
            })?;
            Ok(Some(vec![out]))
        };
        let un = |ff: fn(f32) -> f32| -> Result<Option<Vec<Const>>, OnnxError> {
            Ok(Some(vec![need(0)?.as_float().map(ff, |x| x)]))
        };
        match n.op_type.as_str() {
            "Constant" => {
                let value = if let Some(a) = attr(n, "value") {
                    let t =
                        a.t.as_ref().ok_or_else(|| self.malformed(n, "value is not a tensor"))?;
                    read_tensor(t, &node_name(n))?
                } else if let Some(a) = attr(n, "value_float") {
                    Const::f32(vec![], vec![a.f])
                } else if let Some(a) = attr(n, "value_floats") {
                    Const::f32(vec![a.floats.len()], a.floats.clone())
                } else if let Some(a) = attr(n, "value_int") {
                    Const::i64(vec![], vec![a.i])
                } else if let Some(a) = attr(n, "value_ints") {
                    Const::i64(vec![a.ints.len()], a.ints.clone())
                } else {
                    return Err(self.unsupported(n, "only tensor, float(s) and int(s) values"));
                };
                Ok(Some(vec![value]))
            }
            "Identity" | "Dropout" => Ok(Some(vec![need(0)?.clone()])),
            "Size" => {
                let count: usize = first_shape()?.iter().product();
                Ok(Some(vec![Const::i64(vec![], vec![count as i64])]))
            }
            // fmod = 1: the sign of the dividend (C's fmod); 0: of the divisor (Python's).
            "Mod" if attr_i(n, "fmod", 0) != 0 => {
                bin(|x, y| x % y, |x, y| x.checked_rem(y).unwrap_or(0))
            }
            "Mod" => bin(
                |x, y| x - y * (x / y).floor(),
                |x, y| {
                    x.checked_rem(y)
                        .map_or(0, |r| if r != 0 && (r < 0) != (y < 0) { r + y } else { r })
                },
            ),
            "ReduceProd" => {
                // Shape arithmetic (a Shape's elements multiplied): one axis at most.
                let x = need(0)?;
                if x.shape.len() > 1 {
                    return Ok(None);
                }
                let keep = attr_i(n, "keepdims", 1) != 0;
                let shape = if keep { vec![1; x.shape.len()] } else { Vec::new() };
                Ok(Some(vec![if x.is_float() {
                    Const::f32(shape, vec![x.to_f32().iter().product()])
                } else {
                    Const::i64(shape, vec![x.to_i64().iter().fold(1i64, |a, &b| a.wrapping_mul(b))])
                }]))
            }
            "Trilu" => {
                // A constant mask (torch.triu/tril of ones): keep j - i >= k (upper) or <= k.
                let x = need(0)?;
                let r = x.shape.len();
                if r < 2 {
                    return Err(self.malformed(n, "input of rank < 2"));
                }
                let k = match c(1) {
                    Some(k) => k.to_i64().first().copied().unwrap_or(0),
                    None => 0,
                };
                let upper = attr_i(n, "upper", 1) != 0;
                let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
                let keep = |e: usize| {
                    let (i, j) = ((e / cols % rows.max(1)) as i64, (e % cols.max(1)) as i64);
                    if upper { j - i >= k } else { j - i <= k }
                };
                Ok(Some(vec![match &x.data {
                    Data::F32(v) => Const::f32(
                        x.shape.clone(),
                        v.iter().enumerate().map(|(e, &a)| if keep(e) { a } else { 0.0 }).collect(),
                    ),
                    Data::I64(v) => Const::i64(
                        x.shape.clone(),
                        v.iter().enumerate().map(|(e, &a)| if keep(e) { a } else { 0 }).collect(),
                    ),
                }]))
            }
            "Shape" => {
                let shape: Vec<i64> = first_shape()?.iter().map(|&d| d as i64).collect();
                let r = shape.len() as i64;
                let clamp = |a: i64| (if a < 0 { a + r } else { a }).clamp(0, r) as usize;
                let (s, e) = (clamp(attr_i(n, "start", 0)), clamp(attr_i(n, "end", r)));
                let dims = if s < e { shape[s..e].to_vec() } else { Vec::new() };
                Ok(Some(vec![Const::i64(vec![dims.len()], dims)]))
            }
            "ConstantOfShape" => {
                let shape: Vec<usize> =
                    need(0)?.to_i64().iter().map(|&d| d.max(0) as usize).collect();
                self.foldable(n, &shape)?;
                let count: usize = shape.iter().product();
                let value = match attr(n, "value").and_then(|a| a.t.as_ref()) {
                    Some(t) => read_tensor(t, &node_name(n))?,
                    None => Const::f32(vec![1], vec![0.0]),
                };
                Ok(Some(vec![match value.data {
                    Data::F32(v) => {
                        Const::f32(shape, vec![v.first().copied().unwrap_or(0.0); count])
                    }
                    Data::I64(v) => Const::i64(shape, vec![v.first().copied().unwrap_or(0); count]),
                }]))
            }
            "Range" => {
                let (s, l, d) = (need(0)?, need(1)?, need(2)?);
                if s.is_float() || l.is_float() || d.is_float() {
                    let (s, l, d) = (s.to_f32()[0], l.to_f32()[0], d.to_f32()[0]);
                    if d == 0.0 {
                        return Err(self.malformed(n, "delta is 0"));
                    }
                    let count = ((l - s) / d).ceil().max(0.0) as usize;
                    self.foldable(n, &[count])?;
                    Ok(Some(vec![Const::f32(
                        vec![count],
                        (0..count).map(|i| s + i as f32 * d).collect(),
                    )]))
                } else {
                    let (s, l, d) = (s.to_i64()[0], l.to_i64()[0], d.to_i64()[0]);
                    if d == 0 {
                        return Err(self.malformed(n, "delta is 0"));
                    }
                    let count = (((l - s) as f64) / d as f64).ceil().max(0.0) as usize;
                    self.foldable(n, &[count])?;
                    Ok(Some(vec![Const::i64(
                        vec![count],
                        (0..count as i64).map(|i| s + i * d).collect(),
                    )]))
                }
            }
            "Cast" => {
                let to = attr_i(n, "to", i64::from(data_type::FLOAT)) as i32;
                let x = need(0)?;
                Ok(Some(vec![match to {
                    data_type::FLOAT | data_type::DOUBLE => x.as_float(),
                    data_type::INT64 | data_type::INT32 | data_type::INT8 | data_type::UINT8 => {
                        x.as_int()
                    }
                    data_type::BOOL => {
                        x.map(|v| f32::from(u8::from(v != 0.0)), |v| i64::from(v != 0)).as_int()
                    }
                    other => {
                        return Err(OnnxError::DType {
                            name: node_name(n),
                            dtype: data_type::name(other),
                        });
                    }
                }]))
            }
            "Add" => bin(|a, b| a + b, |a, b| a.wrapping_add(b)),
            "Sub" => bin(|a, b| a - b, |a, b| a.wrapping_sub(b)),
            "Mul" => bin(|a, b| a * b, |a, b| a.wrapping_mul(b)),
            "Div" => {
                if !need(0)?.is_float() && !need(1)?.is_float() && need(1)?.to_i64().contains(&0) {
                    return Err(self.malformed(n, "integer division by zero"));
                }
                bin(|a, b| a / b, |a, b| a.wrapping_div(b))
            }
            "Pow" => bin(f32::powf, |a, b| a.wrapping_pow(b.clamp(0, u32::MAX as i64) as u32)),
            "Equal" => bin(|a, b| f32::from(u8::from(a == b)), |a, b| i64::from(a == b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_int()).collect())),
            "Less" => bin(|a, b| f32::from(u8::from(a < b)), |a, b| i64::from(a < b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_int()).collect())),
            "Greater" => bin(|a, b| f32::from(u8::from(a > b)), |a, b| i64::from(a > b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_int()).collect())),
            "Max" | "Min" => {
                let max = n.op_type == "Max";
                let mut acc = need(0)?.clone();
                for i in 1..inputs.len() {
                    let b = need(i)?;
                    acc = if max {
                        acc.zip(b, f32::max, i64::max)
                    } else {
                        acc.zip(b, f32::min, i64::min)
                    }
                    .ok_or_else(|| self.malformed(n, "shapes do not broadcast"))?;
                }
                Ok(Some(vec![acc]))
            }
            "Neg" => Ok(Some(vec![need(0)?.map(|x| -x, |x| x.wrapping_neg())])),
            "Abs" => Ok(Some(vec![need(0)?.map(f32::abs, i64::wrapping_abs)])),
            "Sqrt" => un(f32::sqrt),
            "Reciprocal" => un(|x| 1.0 / x),
            "Exp" => un(f32::exp),
            "Log" => un(f32::ln),
            "Not" => Ok(Some(vec![need(0)?.as_int().map(|x| x, |x| i64::from(x == 0))])),
            "Where" => {
                let (cond, x, y) = (need(0)?, need(1)?, need(2)?);
                let shape = lumen_compiler::view::broadcast_shapes(&cond.shape, &x.shape)
                    .and_then(|s| lumen_compiler::view::broadcast_shapes(&s, &y.shape))
                    .ok_or_else(|| self.malformed(n, "shapes do not broadcast"))?;
                self.foldable(n, &shape)?;
                let through =
                    |c: &Const| View::contiguous(&c.shape).expand(&shape).map(|v| c.through(&v));
                let (cond, x, y) = (through(cond), through(x), through(y));
                let (Some(cond), Some(x), Some(y)) = (cond, x, y) else {
                    return Err(self.malformed(n, "shapes do not broadcast"));
                };
                let pick = cond.to_i64();
                Ok(Some(vec![if x.is_float() || y.is_float() {
                    let (xv, yv) = (x.to_f32(), y.to_f32());
                    Const::f32(
                        shape,
                        pick.iter()
                            .enumerate()
                            .map(|(i, &c)| if c != 0 { xv[i] } else { yv[i] })
                            .collect(),
                    )
                } else {
                    let (xv, yv) = (x.to_i64(), y.to_i64());
                    Const::i64(
                        shape,
                        pick.iter()
                            .enumerate()
                            .map(|(i, &c)| if c != 0 { xv[i] } else { yv[i] })
                            .collect(),
                    )
                }]))
            }
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Expand" | "Transpose" | "Slice"
            | "Concat" | "Gather" => {
                // The same shape rules as for computed tensors, on known values.
                let shapes: Vec<Vec<usize>> = inputs
                    .iter()
                    .map(|v| v.as_ref().map(|v| self.shape_of(v)).unwrap_or_default())
                    .collect();
                let x = need(0)?;
                let moved = match n.op_type.as_str() {
                    "Concat" => {
                        let rank = x.shape.len();
                        let a = axis(attr_i(n, "axis", 0), rank)
                            .ok_or_else(|| self.malformed(n, "axis out of range"))?;
                        let parts: Vec<Const> = (0..inputs.len())
                            .map(|i| need(i).cloned())
                            .collect::<Result<_, _>>()?;
                        Const::concat(&parts, a).ok_or_else(|| {
                            self.malformed(
                                n,
                                "the inputs' shapes differ outside the axis (or there are none)",
                            )
                        })?
                    }
                    "Gather" => {
                        let idx = need(1)?;
                        let rank = x.shape.len();
                        let a = axis(attr_i(n, "axis", 0), rank)
                            .ok_or_else(|| self.malformed(n, "axis out of range"))?;
                        let len = x.shape[a] as i64;
                        let mut parts = Vec::new();
                        for &i in &idx.to_i64() {
                            let i = if i < 0 { i + len } else { i };
                            if !(0..len).contains(&i) {
                                return Err(
                                    self.malformed(n, format!("index {i} outside 0..{len}"))
                                );
                            }
                            let v = View::contiguous(&x.shape).slice(a, i as usize, i as usize + 1);
                            parts.push(x.through(&v));
                        }
                        let mut shape = x.shape[..a].to_vec();
                        shape.extend(&idx.shape);
                        shape.extend(&x.shape[a + 1..]);
                        self.foldable(n, &shape)?;
                        match Const::concat(&parts, a) {
                            Some(c) => c.reshaped(shape),
                            None => match &x.data {
                                Data::F32(_) => Const::f32(shape, vec![]),
                                Data::I64(_) => Const::i64(shape, vec![]),
                            },
                        }
                    }
                    _ => {
                        let (view, out) = self.movement(n, &shapes)?;
                        self.foldable(n, &out)?;
                        match view {
                            Some(v) => x.through(&v),
                            None => x.clone().reshaped(out),
                        }
                    }
                };
                Ok(Some(vec![moved]))
            }
            _ => Ok(None),
        }
    }

    /// The view (or, for a reshape, `None` and the new shape) a movement op makes of input 0
    /// of shape `shapes[0]`: Reshape, Flatten, Squeeze, Unsqueeze, Expand, Transpose, Slice.
    fn movement(
        &self,
        n: &NodeProto,
        shapes: &[Vec<usize>],
    ) -> Result<(Option<View>, Vec<usize>), OnnxError> {
        let shape = shapes.first().cloned().unwrap_or_default();
        let rank = shape.len();
        let src = View::contiguous(&shape);
        let bad_axis =
            |a: i64, r: usize| self.malformed(n, format!("axis {a} is out of range for rank {r}"));
        match n.op_type.as_str() {
            "Reshape" => {
                let target = self.ints(n, 1)?.ok_or_else(|| self.malformed(n, "no shape input"))?;
                let allowzero = attr_i(n, "allowzero", 0) != 0;
                let count: usize = shape.iter().product();
                let mut out: Vec<usize> = Vec::with_capacity(target.len());
                let mut infer = None;
                for (i, &d) in target.iter().enumerate() {
                    match d {
                        0 if !allowzero => out.push(*shape.get(i).ok_or_else(|| {
                            self.malformed(n, "0 copies a dimension the input lacks")
                        })?),
                        -1 if infer.is_none() => {
                            infer = Some(i);
                            out.push(1);
                        }
                        d if d >= 0 => out.push(d as usize),
                        _ => return Err(self.malformed(n, format!("bad shape {target:?}"))),
                    }
                }
                if let Some(i) = infer {
                    let known: usize = out.iter().product();
                    if known == 0 || !count.is_multiple_of(known) {
                        return Err(
                            self.malformed(n, format!("cannot reshape {shape:?} to {target:?}"))
                        );
                    }
                    out[i] = count / known;
                }
                Ok((None, out))
            }
            "Flatten" => {
                let a = attr_i(n, "axis", 1);
                let a = if a < 0 { a + rank as i64 } else { a };
                if !(0..=rank as i64).contains(&a) {
                    return Err(bad_axis(a, rank));
                }
                let a = a as usize;
                Ok((None, vec![shape[..a].iter().product(), shape[a..].iter().product()]))
            }
            "Squeeze" => {
                let axes = match self.ints(n, 1)? {
                    Some(a) => Some(a),
                    None => attr_ints(n, "axes"),
                };
                let drop: Vec<usize> = match axes {
                    Some(axes) => axes
                        .iter()
                        .map(|&a| axis(a, rank).ok_or_else(|| bad_axis(a, rank)))
                        .collect::<Result<_, _>>()?,
                    None => (0..rank).filter(|&i| shape[i] == 1).collect(),
                };
                if let Some(&a) = drop.iter().find(|&&a| shape[a] != 1) {
                    return Err(
                        self.malformed(n, format!("axis {a} has length {}, not 1", shape[a]))
                    );
                }
                Ok((
                    None,
                    shape
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !drop.contains(i))
                        .map(|(_, &d)| d)
                        .collect(),
                ))
            }
            "Unsqueeze" => {
                let axes = match self.ints(n, 1)? {
                    Some(a) => a,
                    None => attr_ints(n, "axes").ok_or_else(|| self.malformed(n, "no axes"))?,
                };
                let out_rank = rank + axes.len();
                let mut ins: Vec<usize> = axes
                    .iter()
                    .map(|&a| axis(a, out_rank).ok_or_else(|| bad_axis(a, out_rank)))
                    .collect::<Result<_, _>>()?;
                ins.sort_unstable();
                let mut out = Vec::with_capacity(out_rank);
                let mut it = shape.iter();
                for i in 0..out_rank {
                    if ins.contains(&i) { out.push(1) } else { out.push(*it.next().unwrap_or(&1)) }
                }
                Ok((None, out))
            }
            "Expand" => {
                let target: Vec<usize> = self
                    .ints(n, 1)?
                    .ok_or_else(|| self.malformed(n, "no shape input"))?
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect();
                // ONNX's Expand broadcasts both ways: a 1 in the target keeps the input's length.
                let out =
                    lumen_compiler::view::broadcast_shapes(&shape, &target).ok_or_else(|| {
                        self.malformed(n, format!("{shape:?} does not broadcast with {target:?}"))
                    })?;
                let v = src.expand(&out).ok_or_else(|| self.malformed(n, "cannot expand"))?;
                Ok((Some(v), out))
            }
            "Transpose" => {
                let perm: Vec<usize> = match attr_ints(n, "perm") {
                    Some(p) => p
                        .iter()
                        .map(|&a| axis(a, rank).ok_or_else(|| bad_axis(a, rank)))
                        .collect::<Result<_, _>>()?,
                    None => (0..rank).rev().collect(),
                };
                let v = src.permute(&perm);
                let out = v.shape.clone();
                Ok((Some(v), out))
            }
            "Slice" => {
                let mut v = src;
                for (a, s, e) in self.slice_ranges(n, &shape)? {
                    v = v.slice(a, s, e);
                }
                let out = v.shape.clone();
                Ok((Some(v), out))
            }
            _ => Err(self.unsupported(n, "not a movement op")),
        }
    }

    /// A `Slice`'s (axis, start, end) per sliced axis of an input of `shape`, ONNX's clamping
    /// applied (negative from the end, out-of-range clamped, an empty range for end < start).
    fn slice_ranges(
        &self,
        n: &NodeProto,
        shape: &[usize],
    ) -> Result<Vec<(usize, usize, usize)>, OnnxError> {
        let rank = shape.len();
        let starts = self.ints(n, 1)?.ok_or_else(|| self.malformed(n, "no starts"))?;
        let ends = self.ints(n, 2)?.ok_or_else(|| self.malformed(n, "no ends"))?;
        let axes = self.ints(n, 3)?.unwrap_or_else(|| (0..starts.len() as i64).collect());
        let steps = self.ints(n, 4)?.unwrap_or_else(|| vec![1; starts.len()]);
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err(self.malformed(n, "starts, ends, axes and steps differ in length"));
        }
        let mut out = Vec::with_capacity(starts.len());
        for (((&s, &e), &a), &step) in starts.iter().zip(&ends).zip(&axes).zip(&steps) {
            if step != 1 {
                return Err(self.unsupported(n, format!("step {step} (only 1)")));
            }
            let a = axis(a, rank).ok_or_else(|| {
                self.malformed(n, format!("axis {a} is out of range for rank {rank}"))
            })?;
            let len = shape[a] as i64;
            let clamp = |x: i64| (if x < 0 { x + len } else { x }).clamp(0, len);
            let (s, e) = (clamp(s), clamp(e));
            out.push((a, s as usize, e.max(s) as usize));
        }
        Ok(out)
    }

    /// Imports a node the program computes: its output tensors.
    fn compute(&mut self, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
        let op = n.op_type.as_str();
        let one = |t: Tensor| Ok(vec![t]);
        match op {
            "Add" | "Sub" | "Mul" | "Div" => {
                let (a, b) = self.binary_operands(n)?;
                one(match op {
                    "Add" => a + b,
                    "Sub" => a - b,
                    "Mul" => a * b,
                    _ => a / b,
                })
            }
            "Pow" => {
                let x = self.f32_tensor(n, 0)?;
                let rank = x.rank().unwrap_or(0);
                // A one-element exponent of no higher rank than x: the output has x's shape.
                let e = match self.input(n, 1) {
                    Some(Value::Const(c)) if c.len() == 1 && c.shape.len() <= rank => {
                        Some(c.to_f32()[0])
                    }
                    _ => None,
                };
                // The exponents models use most as cheaper ops (within an ulp of powf; sqrt
                // gives NaN for -inf where powf gives +inf); any other elementwise pow.
                one(match e {
                    Some(1.0) => x,
                    Some(2.0) => &x * &x,
                    Some(3.0) => &x * &x * &x,
                    Some(0.5) => x.sqrt(),
                    Some(-1.0) => x.recip(),
                    _ => {
                        let y = self.f32_tensor(n, 1)?;
                        x.pow(&y)
                    }
                })
            }
            "Sqrt" => one(self.f32_tensor(n, 0)?.sqrt()),
            "Reciprocal" => one(self.f32_tensor(n, 0)?.recip()),
            "Exp" => one(self.f32_tensor(n, 0)?.exp()),
            "Log" => one(self.f32_tensor(n, 0)?.log()),
            "Tanh" => one(self.f32_tensor(n, 0)?.tanh()),
            "Erf" => one(self.f32_tensor(n, 0)?.erf()),
            "Relu" => one(self.f32_tensor(n, 0)?.relu()),
            "Sigmoid" => one(self.f32_tensor(n, 0)?.sigmoid()),
            "Neg" => one(-self.f32_tensor(n, 0)?),
            "Abs" => {
                let x = self.f32_tensor(n, 0)?;
                one(x.maximum(-&x))
            }
            "Identity" | "Dropout" => one(self.tensor(n, 0)?),
            "LeakyRelu" => {
                let x = self.f32_tensor(n, 0)?;
                let alpha = attr_f(n, "alpha", 0.01);
                one(x.less_than(0.0).select(&x * alpha, &x))
            }
            "Gelu" => {
                let x = self.f32_tensor(n, 0)?;
                let approximate = attr(n, "approximate").map(|a| a.s.clone()).unwrap_or_default();
                match approximate.as_slice() {
                    b"" | b"none" => one(x.gelu_erf()),
                    b"tanh" => one(x.gelu()),
                    other => Err(self.unsupported(
                        n,
                        format!("approximate = {:?}", String::from_utf8_lossy(other)),
                    )),
                }
            }
            "BatchNormalization" => {
                // Inference: per-channel (axis 1) statistics, `(x - mean) / sqrt(var + eps)
                // * scale + bias`.
                if attr_i(n, "training_mode", 0) != 0 || n.output.iter().skip(1).any(|o| !o.is_empty())
                {
                    return Err(self.unsupported(n, "training mode (lumen runs inference)"));
                }
                let x = self.f32_tensor(n, 0)?;
                let rank = x.rank().unwrap_or(0);
                if rank < 2 {
                    return Err(self.malformed(n, format!("input of rank {rank} (expected N, C, ...)")));
                }
                let eps = attr_f(n, "epsilon", 1e-5);
                let mut per_channel = Vec::with_capacity(4);
                for i in 1..5 {
                    let t = self.f32_tensor(n, i)?;
                    let c = t.shape().unwrap_or_default().iter().product::<usize>();
                    let mut shape = vec![c];
                    shape.resize(rank - 1, 1);
                    per_channel.push(t.reshape(shape));
                }
                let [scale, bias, mean, var] = [0, 1, 2, 3].map(|i| per_channel[i].clone());
                let inv = (var + eps).sqrt().recip() * scale;
                one((x - mean) * inv + bias)
            }
            "Split" => {
                let x = self.tensor(n, 0)?;
                let shape = x.shape().unwrap_or_default();
                let a = axis(attr_i(n, "axis", 0), shape.len())
                    .ok_or_else(|| self.malformed(n, "axis out of range"))?;
                let outs = n.output.len();
                let sizes: Vec<usize> = match self.ints(n, 1)? {
                    Some(v) => v.iter().map(|&d| d.max(0) as usize).collect(),
                    None => match attr_ints(n, "split") {
                        Some(v) if !v.is_empty() => v.iter().map(|&d| d.max(0) as usize).collect(),
                        _ => {
                            // Equal parts, the last smaller when the axis does not divide.
                            let parts = attr_i(n, "num_outputs", outs as i64).max(1) as usize;
                            let each = shape[a].div_ceil(parts);
                            (0..parts).map(|p| each.min(shape[a].saturating_sub(p * each))).collect()
                        }
                    },
                };
                if sizes.iter().sum::<usize>() != shape[a] || sizes.len() != outs {
                    return Err(self.malformed(
                        n,
                        format!("split sizes {sizes:?} do not cover axis {a} of {shape:?} in {outs} outputs"),
                    ));
                }
                let mut start = 0;
                let mut parts = Vec::with_capacity(outs);
                for len in sizes {
                    parts.push(x.slice(a as isize, start, start + len));
                    start += len;
                }
                Ok(parts)
            }
            "Softmax" | "LogSoftmax" => {
                let x = self.f32_tensor(n, 0)?;
                let a = attr_i(n, "axis", -1);
                one(if op == "Softmax" { x.softmax(a as isize) } else { x.log_softmax(a as isize) })
            }
            "LayerNormalization" => {
                let x = self.f32_tensor(n, 0)?;
                let shape = x.shape().unwrap_or_default();
                let rank = shape.len();
                let Some(a) = axis(attr_i(n, "axis", -1), rank) else {
                    return Err(self.malformed(n, format!("axis out of range for rank {rank}")));
                };
                let eps = attr_f(n, "epsilon", 1e-5);
                let gamma = self.f32_tensor(n, 1)?;
                let beta = match self.input(n, 2) {
                    Some(_) => Some(self.f32_tensor(n, 2)?),
                    None => None,
                };
                let stats = n.output.iter().skip(1).any(|o| !o.is_empty());
                if a + 1 == rank && !stats && gamma.rank() == Some(1) {
                    let beta = beta.unwrap_or_else(|| self.cx.constant(0.0));
                    return one(x.layer_norm(&gamma, &beta, eps));
                }
                // Normalised over axes a.. : rows of the flattened [outer, inner] view, then
                // scale and bias broadcast in the input's shape. Mean and InvStdDev keep the
                // normalised axes as 1s.
                let outer: usize = shape[..a].iter().product();
                let inner: usize = shape[a..].iter().product();
                let flat = x.reshape(vec![outer, inner]);
                let mean = flat.mean(-1, true);
                let centered = &flat - &mean;
                let var = (&centered * &centered).mean(-1, true);
                let inv = (var + eps).sqrt().recip();
                let mut y = (centered * &inv).reshape(shape.clone()) * &gamma;
                if let Some(b) = beta {
                    y = y + b;
                }
                if !stats {
                    return one(y);
                }
                let mut kept = shape[..a].to_vec();
                kept.resize(rank, 1);
                Ok(vec![y, mean.reshape(kept.clone()), inv.reshape(kept)])
            }
            "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceL1" | "ReduceL2"
            | "ReduceSumSquare" | "ReduceLogSumExp" => {
                let x = self.f32_tensor(n, 0)?;
                let rank = x.rank().unwrap_or(0);
                let axes = match self.ints(n, 1)? {
                    Some(a) => Some(a),
                    None => attr_ints(n, "axes"),
                };
                let keep = attr_i(n, "keepdims", 1) != 0;
                let mut axes: Vec<usize> = match axes {
                    Some(a) if !a.is_empty() => a
                        .iter()
                        .map(|&v| {
                            axis(v, rank)
                                .ok_or_else(|| self.malformed(n, format!("axis {v} out of range")))
                        })
                        .collect::<Result<_, _>>()?,
                    _ if attr_i(n, "noop_with_empty_axes", 0) != 0 => return one(x),
                    _ => (0..rank).collect(),
                };
                axes.sort_unstable();
                axes.dedup();
                // What is summed (or maximised) per element, reduced axis by axis, then mapped.
                let mut t = match op {
                    "ReduceMin" => -&x,
                    "ReduceL1" => x.maximum(-&x),
                    "ReduceL2" | "ReduceSumSquare" => &x * &x,
                    _ => x.clone(),
                };
                // log-sum-exp as max + log(sum(exp(x - max))), stable for large x.
                let shift = if op == "ReduceLogSumExp" {
                    let mut m = x.clone();
                    for &a in axes.iter().rev() {
                        m = m.max(a as isize, true);
                    }
                    t = (&x - &m).exp();
                    Some(m)
                } else {
                    None
                };
                for &a in axes.iter().rev() {
                    t = match op {
                        "ReduceMean" => t.mean(a as isize, keep),
                        "ReduceMax" | "ReduceMin" => t.max(a as isize, keep),
                        _ => t.sum(a as isize, keep),
                    };
                }
                one(match (op, shift) {
                    ("ReduceMin", _) => -t,
                    ("ReduceL2", _) => t.sqrt(),
                    ("ReduceLogSumExp", Some(m)) => {
                        let m = if keep { m } else { m.reshape(t.shape().unwrap_or_default()) };
                        t.log() + m
                    }
                    _ => t,
                })
            }
            "MatMul" => {
                let (a, b) = (self.f32_tensor(n, 0)?, self.f32_tensor(n, 1)?);
                let (ra, rb) = (a.rank().unwrap_or(0), b.rank().unwrap_or(0));
                let a2 = if ra == 1 { a.unsqueeze(0) } else { a };
                let b2 = if rb == 1 { b.unsqueeze(-1) } else { b };
                let mut y = a2.matmul(&b2);
                if rb == 1 {
                    let mut s = y.shape().unwrap_or_default();
                    s.pop();
                    y = y.reshape(s);
                }
                if ra == 1 {
                    let mut s = y.shape().unwrap_or_default();
                    let at = s.len().saturating_sub(if rb == 1 { 1 } else { 2 });
                    if at < s.len() {
                        s.remove(at);
                    }
                    y = y.reshape(s);
                }
                one(y)
            }
            "Gemm" => {
                let mut a = self.f32_tensor(n, 0)?;
                let mut b = self.f32_tensor(n, 1)?;
                if attr_i(n, "transA", 0) != 0 {
                    a = a.transpose(0, 1);
                }
                if attr_i(n, "transB", 0) != 0 {
                    b = b.transpose(0, 1);
                }
                let (alpha, beta) = (attr_f(n, "alpha", 1.0), attr_f(n, "beta", 1.0));
                let mut y = a.matmul(&b);
                if alpha != 1.0 {
                    y = y * alpha;
                }
                if self.input(n, 2).is_some() {
                    let c = self.f32_tensor(n, 2)?;
                    y = if beta == 1.0 { y + c } else { y + c * beta };
                }
                one(y)
            }
            "Transpose" | "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Expand" | "Slice" => {
                let x = self.tensor(n, 0)?;
                // A view of an integer input's view: an f32 twin can replay it.
                if let Some((root, steps)) = n.input.first().and_then(|i| self.int_views.get(i)) {
                    let mut steps = steps.clone();
                    steps.push(n.clone());
                    let root = *root;
                    if let Some(out) = n.output.first() {
                        self.int_views.insert(out.clone(), (root, steps));
                    }
                }
                one(self.view(n, x)?)
            }
            "Concat" => {
                let parts =
                    (0..n.input.len()).map(|i| self.tensor(n, i)).collect::<Result<Vec<_>, _>>()?;
                let a = attr_i(n, "axis", 0);
                one(self.cx.concat(&parts, a as isize))
            }
            "Gather" => self.gather(n),
            "Where" => {
                let cond = self.f32_tensor(n, 0)?;
                let (x, y) = (self.f32_tensor(n, 1)?, self.f32_tensor(n, 2)?);
                one(cond.select(&x, &y))
            }
            "Equal" => {
                let (a, b) = (self.f32_tensor(n, 0)?, self.f32_tensor(n, 1)?);
                one(a.equal(&b))
            }
            "Not" => {
                let x = self.f32_tensor(n, 0)?;
                one(x.equal(0.0))
            }
            "Less" => {
                let (a, b) = (self.f32_tensor(n, 0)?, self.f32_tensor(n, 1)?);
                one(a.less_than(&b))
            }
            "Greater" => {
                let (a, b) = (self.f32_tensor(n, 0)?, self.f32_tensor(n, 1)?);
                one(b.less_than(&a))
            }
            "Max" | "Min" => {
                let mut acc = self.f32_tensor(n, 0)?;
                for i in 1..n.input.len() {
                    let b = self.f32_tensor(n, i)?;
                    acc = if op == "Max" { acc.maximum(&b) } else { acc.minimum(&b) };
                }
                one(acc)
            }
            "Clip" => {
                let mut x = self.f32_tensor(n, 0)?;
                if self.input(n, 1).is_some() {
                    x = x.maximum(self.f32_tensor(n, 1)?);
                }
                if self.input(n, 2).is_some() {
                    x = x.minimum(self.f32_tensor(n, 2)?);
                }
                one(x)
            }
            "Cast" => {
                let to = attr_i(n, "to", i64::from(data_type::FLOAT)) as i32;
                let x = self.tensor(n, 0)?;
                match (to, x.dtype()) {
                    (data_type::FLOAT, Some(DType::F32)) => one(x),
                    (data_type::FLOAT, Some(DType::I64 | DType::I32)) => {
                        one(self.f32_tensor(n, 0)?)
                    }
                    (data_type::INT64, Some(DType::I64)) | (data_type::INT32, Some(DType::I32)) => {
                        one(x)
                    }
                    // Booleans are f32 0.0 and 1.0 in lumen: a comparison's result already is
                    // one; any other value is made one by `x != 0`.
                    (data_type::BOOL, Some(_)) => {
                        let x = self.f32_tensor(n, 0)?;
                        if n.input.first().is_some_and(|i| self.bools.contains(i)) {
                            one(x)
                        } else {
                            one(x.equal(0.0) * -1.0 + 1.0)
                        }
                    }
                    (to, Some(from)) => Err(self.unsupported(
                        n,
                        format!(
                            "a cast of a computed {from} tensor to {} (lumen casts only at import)",
                            data_type::name(to)
                        ),
                    )),
                    _ => one(x),
                }
            }
            "Range" => Err(self.unsupported(
                n,
                "start, limit and delta must be known at import time (lumen compiles static shapes)",
            )),
            _ => Err(self.unsupported(n, "lumen does not import this operator")),
        }
    }

    /// A movement node (`Transpose`, `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Expand`,
    /// `Slice`) applied to `x`: a view, no copy.
    fn view(&mut self, n: &NodeProto, x: Tensor) -> Result<Tensor, OnnxError> {
        let shapes = vec![x.shape().unwrap_or_default()];
        let (view, out) = self.movement(n, &shapes)?;
        Ok(match (n.op_type.as_str(), view) {
            ("Transpose", Some(_)) => {
                let perm: Vec<isize> = match attr_ints(n, "perm") {
                    Some(p) => p.iter().map(|&v| v as isize).collect(),
                    None => (0..shapes[0].len() as isize).rev().collect(),
                };
                x.permute(&perm)
            }
            ("Expand", Some(_)) => x.expand(out),
            ("Slice", Some(_)) => {
                let mut t = x;
                for (a, s, e) in self.slice_ranges(n, &shapes[0])? {
                    t = t.slice(a as isize, s, e);
                }
                t
            }
            _ => x.reshape(out),
        })
    }

    /// The f32 twin of integer value `name`, computed from an integer graph input by views
    /// only: a second program input fed the same values as f32 (made once per input), with the
    /// same views replayed. `None` when `name` is not such a value.
    fn twin(&mut self, name: &str) -> Result<Option<Tensor>, OnnxError> {
        if let Some(t) = self.twins.get(name) {
            return Ok(Some(t.clone()));
        }
        let Some((root, steps)) = self.int_views.get(name).cloned() else { return Ok(None) };
        let source = self.inputs[root].clone();
        let root_name = source.onnx_name.clone();
        let mut t = match self.twins.get(&root_name) {
            Some(t) => t.clone(),
            None => {
                let lumen = self.names.make(&format!("{}.f32", source.name));
                let t = self.cx.input_typed(lumen.clone(), source.shape.clone(), DType::F32);
                self.inputs.push(ImportedInput {
                    onnx_name: source.onnx_name.clone(),
                    name: lumen,
                    shape: source.shape.clone(),
                    dtype: DType::F32,
                    cast_from: Some(source.dtype),
                });
                self.twins.insert(root_name, t.clone());
                t
            }
        };
        for step in &steps {
            t = self.view(step, t)?;
        }
        self.twins.insert(name.to_string(), t.clone());
        Ok(Some(t))
    }

    /// The two f32 operands of a binary op. A constant operand shaped `[1, ..., 1, N]`
    /// (skl2onnx's intercepts are `[1, N]`) is read as `[N]` when the other operand has at
    /// least its rank: the broadcast is the same, and a `[N]` bias beside a matmul can become a
    /// BIAS epilogue.
    fn binary_operands(&mut self, n: &NodeProto) -> Result<(Tensor, Tensor), OnnxError> {
        let ranks: Vec<usize> =
            (0..2).map(|i| self.input(n, i).map_or(0, |v| self.shape_of(&v).len())).collect();
        let mut out = Vec::with_capacity(2);
        for i in 0..2 {
            if let (Some(Value::Const(c)), Some(name)) = (self.input(n, i), n.input.get(i)) {
                let lead = c.shape.iter().take_while(|&&d| d == 1).count();
                if c.is_float() && lead > 0 && lead < c.shape.len() && ranks[1 - i] >= c.shape.len()
                {
                    // The value keeps its own shape for other readers; this is its own weight.
                    let shape = c.shape[lead..].to_vec();
                    let squeezed = Value::Const(Rc::new(Const::clone(&c).reshaped(shape)));
                    let t = self.materialize(n, format!("{name}.squeezed"), squeezed)?;
                    out.push(t);
                    continue;
                }
            }
            out.push(self.f32_tensor(n, i)?);
        }
        let b = out.pop().ok_or_else(|| self.malformed(n, "no operands"))?;
        let a = out.pop().ok_or_else(|| self.malformed(n, "no operands"))?;
        Ok((a, b))
    }

    /// Input `i` as an f32 program tensor: an integer tensor here is an unsupported use.
    fn f32_tensor(&mut self, n: &NodeProto, i: usize) -> Result<Tensor, OnnxError> {
        if let Some(Value::Const(c)) = self.input(n, i)
            && !c.is_float()
        {
            // Integer constants in float arithmetic (e.g. a folded mask) read as floats.
            let name = n.input[i].clone();
            self.values.insert(name, Value::Const(Rc::new(c.as_float())));
        }
        let t = self.tensor(n, i)?;
        match t.dtype() {
            Some(DType::I64 | DType::I32) => {
                if let Some(twin) = self.twin(&n.input[i])? {
                    return Ok(twin);
                }
                Err(self.unsupported(
                    n,
                    format!(
                        "input {i} is an integer tensor computed at run time (float arithmetic \
                         reads integer graph inputs and their views; gather reads the rest)"
                    ),
                ))
            }
            _ => Ok(t),
        }
    }

    /// `Gather`: rows of a 2-D table by integer ids (an embedding), or constant indices along
    /// any axis of a computed tensor (slices).
    fn gather(&mut self, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
        let data_shape = self.input(n, 0).map(|v| self.shape_of(&v)).unwrap_or_default();
        let rank = data_shape.len();
        let a = axis(attr_i(n, "axis", 0), rank)
            .ok_or_else(|| self.malformed(n, "axis out of range"))?;
        match self.input(n, 1) {
            Some(Value::Const(idx)) => {
                let x = self.tensor(n, 0)?;
                let len = data_shape[a] as i64;
                let mut parts = Vec::new();
                for &i in &idx.to_i64() {
                    let i = if i < 0 { i + len } else { i };
                    if !(0..len).contains(&i) {
                        return Err(self.malformed(n, format!("index {i} outside 0..{len}")));
                    }
                    parts.push(x.slice(a as isize, i as usize, i as usize + 1));
                }
                let mut shape = data_shape[..a].to_vec();
                shape.extend(&idx.shape);
                shape.extend(&data_shape[a + 1..]);
                let joined = if parts.len() == 1 {
                    parts.remove(0)
                } else {
                    self.cx.concat(&parts, a as isize)
                };
                Ok(vec![joined.reshape(shape)])
            }
            Some(Value::Tensor(ids)) => {
                let table = self.f32_tensor(n, 0)?;
                if rank == 2 && a == 0 {
                    return Ok(vec![table.gather(&ids)]);
                }
                // Any axis: rows of the [len, rest] view with the gathered axis first, then
                // the output's axes put back in ONNX's order (before, indices, after).
                let before = data_shape[..a].to_vec();
                let after = data_shape[a + 1..].to_vec();
                let mut to_front: Vec<isize> = vec![a as isize];
                to_front.extend((0..rank as isize).filter(|&d| d != a as isize));
                let rest: usize = before.iter().chain(&after).product();
                let rows = table.permute(&to_front).reshape(vec![data_shape[a], rest]);
                let ids_shape = ids.shape().unwrap_or_default();
                let k = ids_shape.len();
                let mut grouped = ids_shape.clone();
                grouped.extend(&before);
                grouped.extend(&after);
                let g = rows.gather(&ids).reshape(grouped);
                let mut back: Vec<isize> = (k..k + a).map(|d| d as isize).collect();
                back.extend((0..k).map(|d| d as isize));
                back.extend((k + a..k + a + after.len()).map(|d| d as isize));
                Ok(vec![g.permute(&back)])
            }
            None => Err(self.malformed(n, "no indices")),
        }
    }
}
