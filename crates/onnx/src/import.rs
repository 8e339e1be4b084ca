//! The importer's entry point: an ONNX graph walked node by node into lumen's DSL.
//!
//! Initializers and `Constant` nodes are [`Const`] values; a node whose inputs are all known
//! at import time is folded (`crate::fold`), so shape arithmetic and constant subgraphs
//! never reach the program; every other node is imported by its row of the operator table
//! ([`crate::ops`]). A constant a computed op reads becomes a weight (an f32 scalar becomes a DSL
//! constant). Every other node becomes DSL calls over the primitives and composites (a
//! `LayerNormalization` is `layer_norm`, a `Gemm` a matmul of transposed views plus a bias
//! add that fusion makes a BIAS epilogue). Names are made identifier-like (`/attn/MatMul` ->
//! `_attn_MatMul`) and unique.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use lumen_compiler::{DType, Graph, HostTensor, Tensor, Tensors};
use prost::Message;

use crate::constant::{Const, IntType};
use crate::error::OnnxError;
pub use crate::importer::{ImportedInput, IndexBuffer, MAX_FOLDED_ELEMENTS};
use crate::importer::{Importer, Names, Value, attr_i, node_name, read_tensor, without_location};
use crate::proto::{ModelProto, NodeProto, data_type};

/// The oldest default-domain opset of which lumen imports every form: 7 (ONNX 1.2, the oldest
/// torch.onnx and skl2onnx still write; older models import operator by operator, see
/// [`OLDEST_OPSET`]). Where an operator's form changed since (Squeeze, Unsqueeze, Split
/// and the reductions' axes as attributes, Softmax's flatten-to-2-D rule, Clip's bounds and
/// Pad's pads as attributes, Slice's attributes before 10, Upsample, Resize-10's inputs and
/// rounding, BatchNormalization's `spatial`), each operator reads the form of the model's
/// opset.
pub const MIN_OPSET: i64 = 7;

/// The oldest default-domain opset a model may have: from 1 to 6, a model imports when every
/// node's operator had its opset-7 form at the model's opset ([`crate::legacy`]).
pub const OLDEST_OPSET: i64 = 1;

/// The newest default-domain opset lumen imports. Every operator lumen imports changed after
/// opset 21 only in its type lists (and Cast gained `round_mode`, Range `stash_type`, neither
/// with an effect on float32 and int64), per onnx 1.23's operator schemas.
pub const MAX_OPSET: i64 = 28;

/// Options of [`import`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportOptions {
    /// Shapes of graph inputs by ONNX name, for the dimensions the model leaves symbolic
    /// (`--shape input_ids=1,16`). A given shape replaces the model's for that input.
    pub shapes: BTreeMap<String, Vec<usize>>,
    /// Values of graph inputs by ONNX name, for nodes that need them at import time (a
    /// Reshape's shape, a Slice's starts, a reduction's axes, Resize's scales,
    /// OneHot's depth, recurrent weights fed as graph inputs): such a node reads the given
    /// value and the program is specialised to it
    /// ([`Imported::specialized`]). `lumen run` passes the `--inputs` tensors.
    pub values: Tensors,
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
    /// The model's default-domain opset (0 for a model importing only `ai.onnx.ml`).
    pub opset: i64,
    /// Nodes in the ONNX graph.
    pub nodes: usize,
    /// Nodes folded at import (all their inputs known).
    pub folded: usize,
    /// Who exported it (`pytorch 2.15.0`, `skl2onnx 1.20.0`), from the model's producer.
    pub producer: String,
    /// Graph inputs whose given values ([`ImportOptions::values`]) nodes read at import time:
    /// the program is only valid for those values.
    pub specialized: Vec<String>,
    /// Graph outputs left out of the program, with why: (ONNX name, reason). Only outputs
    /// that are not tensors (a ZipMap's sequence of maps) are; the others are imported.
    pub skipped: Vec<(String, String)>,
    /// The program buffers of positions that kernels check at run time, each with the ONNX
    /// node that made it, in import order: a run-time index error names such a buffer
    /// ([`Imported::index_buffer`]).
    pub index_buffers: Vec<IndexBuffer>,
}

impl Imported {
    /// The ONNX node behind program buffer `name`, when it is one of [`Imported::index_buffers`]
    /// (what a run-time index error's buffer name is looked up by).
    pub fn index_buffer(&self, name: &str) -> Option<&IndexBuffer> {
        self.index_buffers.iter().find(|b| b.buffer == name)
    }

    /// The element type of the program's output `name` (f32, or i64/i32 for an integer output
    /// such as a label), `None` for a name that is not an output.
    pub fn output_dtype(&self, name: &str) -> Option<DType> {
        let hlir = self.graph.hlir();
        let types = hlir.infer().ok()?;
        hlir.outputs()
            .into_iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, node)| types.get(node.index()).map(|t| t.dtype))
    }

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

/// The names of a model's graph inputs that no initializer gives (what a caller must feed),
/// in graph order, without importing it.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that do not decode, [`OnnxError::NoGraph`].
pub fn graph_input_names(bytes: &[u8]) -> Result<Vec<String>, OnnxError> {
    Ok(crate::signature::declared_inputs(bytes)?.into_iter().map(|i| i.name).collect())
}

/// Imports an ONNX model (opset 7 to 28, float32, static shapes or shapes set by
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
    // A model of the ai.onnx.ml domain alone (a scikit-learn converter's) has no default-domain
    // opset: its opset is 0 and a default-domain node in it is refused.
    let ml_only = model.opset_import.iter().any(|o| o.domain == crate::ops::ML_DOMAIN);
    if opset == 0 && !ml_only {
        return Err(OnnxError::NoOpset);
    }
    if opset != 0 && !(OLDEST_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(OnnxError::Opset { version: opset, min: OLDEST_OPSET, max: MAX_OPSET });
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
        readers: HashMap::new(),
        producers: HashMap::new(),
        materialized: HashMap::new(),
        convs: HashMap::new(),
        hard_sigmoids: HashMap::new(),
        skipped: HashMap::new(),
        index_buffers: Vec::new(),
    };
    for node in &graph.node {
        for i in node.input.iter().filter(|i| !i.is_empty()) {
            *im.readers.entry(i.clone()).or_default() += 1;
        }
    }
    for out in &graph.output {
        *im.readers.entry(out.name.clone()).or_default() += 1;
    }
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
            let what = match &input.r#type {
                None => "declares no type".to_string(),
                Some(t) => format!("is {}", t.kind()),
            };
            return Err(OnnxError::InputType { name: input.name.clone(), what });
        };
        let dtype = match tensor.elem_type {
            data_type::FLOAT => DType::F32,
            data_type::INT64 => DType::I64,
            data_type::INT32 => DType::I32,
            // lumen's booleans are f32 0.0 and 1.0 (what comparisons make): a bool input is
            // fed as such (the CLI reads a safetensors BOOL tensor so).
            data_type::BOOL => DType::F32,
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
            // No shape declared (not even a rank): the given shape, whatever its rank.
            Some(given) if tensor.shape.is_none() => given.clone(),
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
        if tensor.elem_type == data_type::BOOL {
            im.bools.insert(input.name.clone());
        }
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

    im.run_nodes(&graph.node)?;

    if graph.output.is_empty() {
        return Err(OnnxError::NoOutputs);
    }
    let mut outputs = Vec::new();
    // Leaves (inputs, weights) as the graph stands before any output is marked.
    let hlir = im.cx.hlir();
    let mut marked = std::collections::HashSet::new();
    let mut skipped = Vec::new();
    for out in &graph.output {
        if let Some(reason) = im.skipped.get(&out.name) {
            skipped.push((out.name.clone(), reason.clone()));
            continue;
        }
        let value = im
            .values
            .get(&out.name)
            .cloned()
            .ok_or_else(|| OnnxError::MissingOutput { name: out.name.clone() })?;
        let (t, copy) = match value {
            // An output known at import time is a weight the program copies out.
            Value::Const(c) => {
                let here = NodeProto { name: "graph outputs".into(), ..Default::default() };
                let int32 = !c.is_float() && c.int == IntType::I32;
                let int = !c.is_float();
                let w = im.materialize(&here, format!("{}.value", out.name), Value::Const(c))?;
                // Import-time integers are i64 weights; an int32 value (or an output the graph
                // declares int32) is cast.
                let declared = out.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
                if int32 || (int && declared.is_some_and(|t| t.elem_type == data_type::INT32)) {
                    (w.cast(DType::I32), false)
                } else {
                    (w, true)
                }
            }
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
    if outputs.is_empty()
        && let Some((name, reason)) = skipped.first()
    {
        return Err(OnnxError::Unsupported {
            op: "ai.onnx.ml.ZipMap".into(),
            node: name.clone(),
            opset,
            reason: format!("every graph output is left out: {reason}"),
        });
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
        skipped,
        index_buffers: im.index_buffers,
    })
}

impl Importer {
    /// An `If` whose condition is known at import time: the chosen branch's nodes imported in
    /// place (they read outer values by name), its outputs the node's. The other branch is
    /// never read.
    ///
    /// # Errors
    /// [`OnnxError::Unsupported`] for a condition computed at run time; a missing branch or
    /// output; every error of the branch's nodes.
    pub(crate) fn if_branch(&mut self, n: &NodeProto) -> Result<Vec<Value>, OnnxError> {
        // The condition must be known at import time: a constant (shape arithmetic folds to
        // one), or a graph input whose value is given (the program is then specialised to it,
        // as for a Reshape's shape).
        let cond = match self.input(n, 0) {
            Some(Value::Const(c)) => c.to_f32().first().is_some_and(|&v| v != 0.0),
            Some(Value::Tensor(_)) => match self.ints(n, 0) {
                Ok(Some(v)) => v.first().is_some_and(|&v| v != 0),
                _ => {
                    return Err(self.unsupported(
                        n,
                        "the condition must be known at import time (a constant, shape \
                         arithmetic, or a graph input whose value `lumen run --inputs` gives)",
                    ));
                }
            },
            None => return Err(self.malformed(n, "no condition")),
        };
        let which = if cond { "then_branch" } else { "else_branch" };
        let Some(branch) = crate::importer::attr(n, which).and_then(|a| a.g.clone()) else {
            return Err(self.malformed(n, format!("no {which}")));
        };
        for init in &branch.initializer {
            let c = read_tensor(init, &init.name)?;
            self.values.insert(init.name.clone(), Value::Const(Rc::new(c)));
        }
        self.run_nodes(&branch.node)?;
        if branch.output.len() != n.output.len() {
            return Err(self.malformed(
                n,
                format!("{which} has {} outputs, the node {}", branch.output.len(), n.output.len()),
            ));
        }
        // The node's outputs are the branch's: evaluated at import through the same producers.
        for (inner, outer) in branch.output.iter().zip(&n.output) {
            if let Some(p) = self.producers.get(&inner.name).cloned() {
                self.producers.insert(outer.clone(), p);
            }
        }
        branch
            .output
            .iter()
            .map(|o| {
                self.values.get(&o.name).cloned().ok_or_else(|| {
                    self.malformed(n, format!("{which} does not define its output `{}`", o.name))
                })
            })
            .collect()
    }

    /// Imports `nodes` (a graph's or a branch's) in graph order (ONNX requires a topological
    /// one; a node whose inputs are not all defined yet waits for a later pass, so an
    /// unsorted graph still imports), defining their outputs.
    ///
    /// # Errors
    /// The first node's error (a DSL error named after the ONNX node), a value defined twice,
    /// or [`OnnxError::Undefined`] when some input is never defined.
    pub(crate) fn run_nodes(&mut self, nodes: &[NodeProto]) -> Result<(), OnnxError> {
        // Nodes in graph order (ONNX requires a topological one); a node whose inputs are not all
        // defined yet waits for a later pass, so an unsorted graph still imports.
        let mut pending: Vec<&NodeProto> = nodes.iter().collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut waiting = Vec::new();
            for node in pending {
                let ready = node.input.iter().all(|i| i.is_empty() || self.values.contains_key(i));
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
                let outs = self.node(node).map_err(|e| match e {
                    OnnxError::Compile(c) => in_node(c),
                    other => other,
                })?;
                if let Some(e) = self.cx.recorded_error() {
                    return Err(in_node(e));
                }
                for (name, v) in node.output.iter().zip(outs) {
                    if name.is_empty() {
                        continue;
                    }
                    if self.values.insert(name.clone(), v).is_some() {
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
                let value =
                    node.input.iter().find(|i| !i.is_empty() && !self.values.contains_key(*i));
                return Err(OnnxError::Undefined {
                    node: node_name(node),
                    op: node.op_type.clone(),
                    value: value.cloned().unwrap_or_default(),
                });
            }
            pending = waiting;
        }
        Ok(())
    }
    /// Imports one node: its output values.
    pub(crate) fn node(&mut self, n: &NodeProto) -> Result<Vec<Value>, OnnxError> {
        if !(n.domain.is_empty() || n.domain == "ai.onnx" || n.domain == crate::ops::ML_DOMAIN) {
            return Err(self.unsupported(n, "not in the default ONNX domain nor ai.onnx.ml"));
        }
        if n.domain == crate::ops::ML_DOMAIN && n.op_type == "ZipMap" {
            // A sequence of maps is no tensor: its outputs stay undefined, and a graph
            // output that names one is left out of the program (see `Imported::skipped`).
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                self.skipped.insert(
                    o.clone(),
                    "a ZipMap's sequence of maps is not a tensor (convert with skl2onnx's \
                     option zipmap=False to get the probabilities as one)"
                        .to_string(),
                );
            }
            return Ok(Vec::new());
        }
        if self.opset == 0 && n.domain != crate::ops::ML_DOMAIN {
            return Err(self.unsupported(
                n,
                "the model imports no opset of the default ai.onnx domain (opset_import)",
            ));
        }
        let default_domain = n.domain.is_empty() || n.domain == "ai.onnx";
        if default_domain && self.opset < MIN_OPSET {
            let since = crate::legacy::same_form_since(&n.op_type);
            if since > self.opset {
                return Err(self.unsupported(
                    n,
                    format!(
                        "at opset {} this operator has an older form than lumen reads (its form \
                         from opset {since} on); export the model at opset {MIN_OPSET} or newer",
                        self.opset
                    ),
                ));
            }
        }
        if n.op_type == "If" && default_domain {
            return self.if_branch(n);
        }
        if n.op_type == "Dropout" {
            // Inference: training_mode absent or known false (a constant, or a graph input
            // whose given value is false). Training mode with a ratio known to be 0 drops
            // nothing and scales by 1: the same identity. Any other ratio is random.
            let known_zero = |i: usize| {
                self.needed_input(n, i).is_some_and(|c| c.to_f32().iter().all(|&v| v == 0.0))
            };
            match self.input(n, 2) {
                None => {}
                Some(_) if known_zero(2) => {}
                Some(_) if self.input(n, 1).is_some() && known_zero(1) => {}
                Some(_) => {
                    return Err(self.unsupported(
                        n,
                        "training mode with a ratio other than a known 0 (random; lumen runs \
                         inference)",
                    ));
                }
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
        // An operator whose output's shape depends on its input values (NonZero, Unique,
        // NonMaxSuppression, MelWeightMatrix) is evaluated here, from constants or from graph
        // inputs whose values are given (the program specialised to them).
        if crate::data_dependent::DATA_DEPENDENT.contains(&n.op_type.as_str())
            && n.domain.is_empty()
        {
            let mut known = Vec::with_capacity(n.input.len());
            for (i, name) in n.input.iter().enumerate() {
                if name.is_empty() {
                    known.push(None);
                    continue;
                }
                match self.known_value(name) {
                    Some(c) => known.push(Some(c)),
                    None => {
                        return Err(self.unsupported(
                            n,
                            format!(
                                "input {i} (`{name}`) must be known at import time: the \
                                 output's shape depends on its values (an initializer or \
                                 constant, or a graph input whose value is given, as `lumen run \
                                 --inputs` does)"
                            ),
                        ));
                    }
                }
            }
            let refs: Vec<Option<&Const>> = known.iter().map(Option::as_ref).collect();
            if let Some(folded) = self.fold_data_dependent(n, &refs)? {
                self.folded += 1;
                return Ok(folded.into_iter().map(|c| Value::Const(Rc::new(c))).collect());
            }
        }
        let all_const = inputs.iter().all(|v| matches!(v, None | Some(Value::Const(_))));
        if (all_const || matches!(n.op_type.as_str(), "Shape" | "Size"))
            && let Some(folded) = self.fold(n, &inputs)?
        {
            self.folded += 1;
            return Ok(folded.into_iter().map(|c| Value::Const(Rc::new(c))).collect());
        }
        // The integer type of the input that decides an arithmetic op's result type, read
        // before the op (which may read it as floats).
        let int_type = same_type_input(n).and_then(|i| match self.input(n, i) {
            Some(Value::Tensor(t)) => t.dtype().filter(|d| d.is_index()),
            Some(Value::Const(c)) if !c.is_float() => Some(c.int.dtype()),
            _ => None,
        });
        let mut out = crate::ops::compute(self, n)?;
        for (k, o) in n.output.iter().enumerate() {
            self.producers.insert(o.clone(), (n.clone(), k));
        }
        // ONNX keeps integers integers: arithmetic lumen computed in f32 (exact below 2^24)
        // is cast back, truncating as integer division does.
        if let Some(int) = int_type {
            out = out
                .into_iter()
                .map(|t| if t.dtype() == Some(DType::F32) { t.cast(int) } else { t })
                .collect();
        }
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
}

/// The input whose element type an operator's output has (ONNX's type constraint `T` shared by
/// the inputs and the output), for the operators whose integer form lumen computes in f32:
/// arithmetic, `Where` (its branches), the variadic and the reducing ones. `None` for the
/// others (comparisons make booleans, movement keeps its operand's type by itself).
fn same_type_input(n: &NodeProto) -> Option<usize> {
    match n.op_type.as_str() {
        "Add" | "Sub" | "Mul" | "Div" | "Neg" | "Abs" | "Max" | "Min" | "Sum" | "Mean" | "Clip"
        | "Relu" | "Sign" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceMean"
        | "ReduceSumSquare" | "ReduceL1" | "GatherElements" | "TopK" | "CumSum" | "Pow" | "Pad"
        | "Mod" | "Trilu" | "Tile" | "ReduceProd" => Some(0),
        "Where" => Some(1),
        _ => None,
    }
}
