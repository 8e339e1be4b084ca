//! The importer's state while it walks a graph, and what every operator's import uses: the
//! values on the graph's edges ([`Value`]: a program tensor, or a constant known at import),
//! reading an input as a tensor or as integers known at import, attributes, the shape rules of
//! the movement ops (shared with constant folding) and the f32 twins of integer graph inputs.

use std::collections::HashMap;
use std::rc::Rc;

use lumen_compiler::view::View;
use lumen_compiler::{DType, Graph, HostTensor, Tensor, Tensors};

use crate::constant::{Const, Data, IntType, ReadError};
use crate::error::OnnxError;
use crate::proto::{AttributeProto, NodeProto, TensorProto};

/// The most elements a constant folded at import may hold (2^26: 256 MiB of f32).
pub const MAX_FOLDED_ELEMENTS: usize = 1 << 26;

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

/// A program buffer of positions an operator's kernel checks at run time (a `MaxUnpool`'s, a
/// `ScatterND`'s rows): the ONNX node that made it, so a run-time index error, which names the
/// buffer, can be traced to the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexBuffer {
    /// The buffer's name in the program (`{node}.positions`).
    pub buffer: String,
    /// The ONNX node's name (or its first output when it has none).
    pub node: String,
    /// Its op type.
    pub op: String,
    /// How the buffer's values relate to the node's input, when they are not the input's own
    /// (empty otherwise): what a bad input becomes, an id of exactly the axis' length (`a
    /// negative position of I shows as the output's size`).
    pub note: String,
}

/// A value flowing along an ONNX edge.
#[derive(Debug, Clone)]
pub(crate) enum Value {
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
pub(crate) struct Names {
    used: std::collections::BTreeSet<String>,
}

impl Names {
    pub(crate) fn make(&mut self, onnx: &str) -> String {
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

pub(crate) struct Importer {
    pub(crate) cx: Graph,
    pub(crate) values: HashMap<String, Value>,
    /// The program's inputs so far (f32 twins are added while nodes are read).
    pub(crate) inputs: Vec<ImportedInput>,
    /// Integer values computed from a graph input by views only: (the input's index in
    /// `inputs`, the view nodes applied in order), so an f32 twin can replay them.
    pub(crate) int_views: HashMap<String, (usize, Vec<NodeProto>)>,
    /// f32 twins made so far, by ONNX value name.
    pub(crate) twins: HashMap<String, Tensor>,
    /// Computed values that hold only 0.0 and 1.0 (comparison results): a Cast to bool
    /// leaves them as they are.
    pub(crate) bools: std::collections::HashSet<String>,
    /// [`ImportOptions::values`].
    pub(crate) known: Tensors,
    /// Graph inputs read from `known`, in first-read order (a cell: shape readers borrow the
    /// importer shared).
    pub(crate) specialized: std::cell::RefCell<Vec<String>>,
    pub(crate) weights: Tensors,
    pub(crate) names: Names,
    pub(crate) opset: i64,
    pub(crate) folded: usize,
    /// How many nodes (and graph outputs) read each value: a convolution whose output only a
    /// `BatchNormalization` reads can take the normalization into its weights.
    pub(crate) readers: HashMap<String, usize>,
    /// The node that computed each program value (and which of its outputs it is): how a
    /// value needed at import time is evaluated from the given graph inputs it derives from.
    pub(crate) producers: HashMap<String, (NodeProto, usize)>,
    /// Constants a computed node read, as the program tensors made of them (once per name).
    pub(crate) materialized: HashMap<String, Tensor>,
    /// Convolutions with constant weights, by output value name: what a following
    /// `BatchNormalization` needs to fold itself in ([`ConvRecord`]).
    pub(crate) convs: HashMap<String, ConvRecord>,
    /// `HardSigmoid` outputs with PyTorch's constants, by output name: their input's name
    /// (`x * HardSigmoid(x)` is hard swish).
    pub(crate) hard_sigmoids: HashMap<String, String>,
    /// Values that are not tensors (a ZipMap's output), by name: why a graph output naming
    /// one is left out.
    pub(crate) skipped: HashMap<String, String>,
    /// The position buffers named so far, in import order ([`IndexBuffer`]).
    pub(crate) index_buffers: Vec<IndexBuffer>,
}

/// A convolution imported with constant weights: its input, weights, bias and parameters.
#[derive(Debug, Clone)]
pub(crate) struct ConvRecord {
    /// The input tensor.
    pub(crate) x: Tensor,
    /// The kernels `[OC, C / groups, *k]`.
    pub(crate) w: Rc<Const>,
    /// The bias `[OC]`, if any.
    pub(crate) b: Option<Rc<Const>>,
    /// Strides, dilations, pads and groups.
    pub(crate) spec: lumen_compiler::ConvSpec,
}

/// One sliced axis of a `Slice` ([`Importer::slice_ranges`]): `count` elements from `start`,
/// `step` apart (a negative step walks backwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SliceAxis {
    /// The axis.
    pub(crate) axis: usize,
    /// The first element taken.
    pub(crate) start: usize,
    /// Elements taken.
    pub(crate) count: usize,
    /// Elements between two taken (never 0).
    pub(crate) step: i64,
}

impl SliceAxis {
    /// The taken elements' positions along the axis, in order.
    pub(crate) fn indices(self) -> impl Iterator<Item = usize> {
        (0..self.count).map(move |k| (self.start as i64 + k as i64 * self.step) as usize)
    }
}

/// How one node of an operator becomes program tensors (one per output): a row of the
/// operator table ([`crate::ops`]).
pub(crate) type Handler = fn(&mut Importer, &NodeProto) -> Result<Vec<Tensor>, OnnxError>;

/// One output tensor, as a [`Handler`] returns it.
pub(crate) fn one(t: Tensor) -> Result<Vec<Tensor>, OnnxError> {
    Ok(vec![t])
}

/// A DSL error's message without its ` (at file:line:column)` suffix.
pub(crate) fn without_location(message: &str) -> String {
    // `... (at src/x.rs:1:2)` or `... (input, at src/x.rs:1:2)`.
    match message.rfind(" (") {
        Some(at) if message.ends_with(')') && message[at..].contains(".rs:") => {
            message[..at].to_string()
        }
        _ => message.to_string(),
    }
}
pub(crate) fn read_tensor(t: &TensorProto, name: &str) -> Result<Const, OnnxError> {
    Const::from_proto(t).map_err(|e| match e {
        ReadError::DType(dtype) => OnnxError::DType { name: name.to_string(), dtype },
        ReadError::External => OnnxError::ExternalData { name: name.to_string() },
        ReadError::Length => {
            OnnxError::TensorLength { name: name.to_string(), dims: t.dims.clone() }
        }
    })
}

pub(crate) fn node_name(n: &NodeProto) -> String {
    if n.name.is_empty() { n.output.first().cloned().unwrap_or_default() } else { n.name.clone() }
}

pub(crate) fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

pub(crate) fn attr_i(n: &NodeProto, name: &str, default: i64) -> i64 {
    attr(n, name).map_or(default, |a| a.i)
}

pub(crate) fn attr_f(n: &NodeProto, name: &str, default: f32) -> f32 {
    attr(n, name).map_or(default, |a| a.f)
}

pub(crate) fn attr_s(n: &NodeProto, name: &str) -> Option<String> {
    attr(n, name).map(|a| String::from_utf8_lossy(&a.s).into_owned())
}

pub(crate) fn attr_floats(n: &NodeProto, name: &str) -> Option<Vec<f32>> {
    attr(n, name).map(|a| a.floats.clone())
}

pub(crate) fn attr_ints(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(n, name).map(|a| a.ints.clone())
}

/// `axis` (negative from the last) of a rank-`rank` tensor.
pub(crate) fn axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

impl Importer {
    pub(crate) fn unsupported(&self, n: &NodeProto, reason: impl Into<String>) -> OnnxError {
        let op = if n.domain.is_empty() || n.domain == "ai.onnx" {
            n.op_type.clone()
        } else {
            format!("{}.{}", n.domain, n.op_type)
        };
        OnnxError::Unsupported { op, node: node_name(n), opset: self.opset, reason: reason.into() }
    }

    /// Records that the program buffer holding node `n`'s input `i` is read as positions a
    /// kernel checks at run time, when that input is a graph input (its buffer is the input's):
    /// a run-time index error naming the buffer then names the node ([`IndexBuffer`]). A
    /// computed index tensor is named with [`Importer::name_indices`] instead.
    pub(crate) fn note_index_input(&mut self, n: &NodeProto, i: usize) {
        let Some(onnx) = n.input.get(i) else { return };
        let input = self.inputs.iter().find(|x| &x.onnx_name == onnx && x.cast_from.is_none());
        if let Some(buffer) = input.map(|x| x.name.clone())
            && !self.index_buffers.iter().any(|b| b.buffer == buffer)
        {
            let (node, op) = (node_name(n), n.op_type.clone());
            self.index_buffers.push(IndexBuffer { buffer, node, op, note: String::new() });
        }
    }

    /// Names `ids`, a tensor node `n` computed as positions a kernel checks at run time
    /// (`{node}.ids`), and records it ([`IndexBuffer`]) with `note` (what a bad input becomes).
    pub(crate) fn name_indices(&mut self, n: &NodeProto, ids: Tensor, note: &str) -> Tensor {
        let name = self.names.make(&format!("{}.ids", node_name(n)));
        self.index_buffers.push(IndexBuffer {
            buffer: name.clone(),
            node: node_name(n),
            op: n.op_type.clone(),
            note: note.to_string(),
        });
        ids.name(name)
    }

    pub(crate) fn malformed(&self, n: &NodeProto, reason: impl Into<String>) -> OnnxError {
        OnnxError::Malformed { node: node_name(n), op: n.op_type.clone(), reason: reason.into() }
    }

    /// An error unless a constant of `shape` is small enough to fold: at most
    /// [`MAX_FOLDED_ELEMENTS`] elements (a corrupt or hostile shape must not exhaust memory).
    pub(crate) fn foldable(&self, n: &NodeProto, shape: &[usize]) -> Result<(), OnnxError> {
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
    pub(crate) fn input(&self, n: &NodeProto, i: usize) -> Option<Value> {
        let name = n.input.get(i).filter(|s| !s.is_empty())?;
        self.values.get(name).cloned()
    }

    /// The ONNX element type of input `i` of `n` where lumen knows it for sure (`float`, `bool`,
    /// `int64`, `int32`, `int8`, `uint8`), `None` where it does not: a computed f32 tensor
    /// holds floats or booleans (lumen's are f32 0/1), and an int64 constant may be a boolean
    /// folded without its type. For refusing an input a model may not give an operator.
    pub(crate) fn known_type(&self, n: &NodeProto, i: usize) -> Option<&'static str> {
        let name = n.input.get(i).filter(|s| !s.is_empty())?;
        match self.values.get(name)? {
            Value::Const(c) if c.is_float() => Some("float"),
            Value::Const(c) if c.int == IntType::I64 => None,
            Value::Const(c) => Some(c.int.name()),
            Value::Tensor(_) if self.bools.contains(name) => Some("bool"),
            Value::Tensor(t) => match t.dtype()? {
                DType::I64 => Some("int64"),
                DType::I32 => Some("int32"),
                // A graph input declared float (a bool one is in `bools`).
                DType::F32 if self.inputs.iter().any(|g| &g.onnx_name == name) => Some("float"),
                _ => None,
            },
        }
    }

    /// Input `i` as a program tensor, materializing a constant as a weight (a one-element
    /// float as a DSL constant).
    pub(crate) fn tensor(&mut self, n: &NodeProto, i: usize) -> Result<Tensor, OnnxError> {
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
    pub(crate) fn materialize(
        &mut self,
        n: &NodeProto,
        name: String,
        value: Value,
    ) -> Result<Tensor, OnnxError> {
        let c = match value {
            Value::Tensor(t) => return Ok(t),
            Value::Const(c) => c,
        };
        if let Some(t) = self.materialized.get(&name) {
            return Ok(t.clone());
        }
        let t = self.weight_of(n, &name, &c)?;
        // Materialized once: later readers share the weight, and the value stays a constant
        // for the nodes that fold or need it at import.
        self.materialized.insert(name, t.clone());
        Ok(t)
    }

    /// Constant `c` as a program tensor named after `name` (made identifier-like and unique):
    /// a one-element float a DSL constant, anything else a weight holding its values.
    fn weight_of(&mut self, n: &NodeProto, name: &str, c: &Const) -> Result<Tensor, OnnxError> {
        Ok(match &c.data {
            Data::F32(v) if v.len() == 1 => {
                let scalar = self.cx.constant(v[0]);
                if c.shape.is_empty() { scalar } else { scalar.reshape(c.shape.clone()) }
            }
            Data::F32(v) => {
                let lumen = self.names.make(name);
                let host = HostTensor::new(c.shape.clone(), v.clone())
                    .map_err(|e| self.malformed(n, e.to_string()))?;
                self.weights.insert(lumen.clone(), host);
                self.cx.weight(lumen, c.shape.clone())
            }
            Data::I64(v) => {
                let lumen = self.names.make(name);
                let host = HostTensor::from_i64(c.shape.clone(), v.clone())
                    .map_err(|e| self.malformed(n, e.to_string()))?;
                self.weights.insert(lumen.clone(), host);
                self.cx.weight_typed(lumen, c.shape.clone(), DType::I64)
            }
        })
    }

    /// Input `i` as integers known at import (a shape, axes, starts...), or `None` when absent.
    pub(crate) fn ints(&self, n: &NodeProto, i: usize) -> Result<Option<Vec<i64>>, OnnxError> {
        match self.input(n, i) {
            None => Ok(None),
            Some(Value::Const(c)) => Ok(Some(c.to_i64())),
            Some(Value::Tensor(_)) => match self.given(n, i) {
                Some(c) => Ok(Some(c.to_i64())),
                None => Err(self.unsupported(
                    n,
                    format!(
                        "input {i} (`{}`) must be known at import time: lumen compiles static \
                         shapes (an initializer or constant, or a graph input whose value is \
                         given, as `lumen run --inputs` does)",
                        n.input[i]
                    ),
                )),
            },
        }
    }

    /// The value of input `i` of `n` evaluated from given graph inputs
    /// ([`ImportOptions::values`](crate::ImportOptions::values)): a graph input's given value,
    /// or a computed value whose producing nodes, back to constants and given inputs, the
    /// folder evaluates (a Range's bounds computed from a given size). The program is
    /// specialised to the graph inputs read, each recorded in `specialized`. Only for a value a
    /// node needs at import time (a shape, scales, a depth), never for data.
    fn given(&self, n: &NodeProto, i: usize) -> Option<Const> {
        self.evaluate(n.input.get(i)?, 32)
    }

    /// Value `name` known at import: a constant, or evaluated from given graph inputs as
    /// [`Importer::given`] says (a Loop's condition computed by its body).
    pub(crate) fn known_value(&self, name: &str) -> Option<Const> {
        self.evaluate(name, 32)
    }

    /// Value `name` evaluated as [`Importer::given`] says, through at most `depth` producers.
    fn evaluate(&self, name: &str, depth: usize) -> Option<Const> {
        match self.values.get(name)? {
            Value::Const(c) => return Some((**c).clone()),
            Value::Tensor(_) => {}
        }
        if self.inputs.iter().any(|g| g.onnx_name == name) {
            let tensor = self.known.get(name)?;
            let c = match tensor.index_values() {
                Some(v) if tensor.dtype() == DType::I32 => {
                    Const::ints(tensor.shape().to_vec(), v, IntType::I32)
                }
                Some(v) => Const::i64(tensor.shape().to_vec(), v),
                None => Const::f32(tensor.shape().to_vec(), tensor.data().to_vec()),
            };
            let mut seen = self.specialized.borrow_mut();
            if !seen.iter().any(|s| s == name) {
                seen.push(name.to_string());
            }
            return Some(c);
        }
        let (node, k) = self.producers.get(name)?;
        if depth == 0 {
            return None;
        }
        // Shape and Size read only shapes: their computed input stays as it is.
        let shapes_only = matches!(node.op_type.as_str(), "Shape" | "Size");
        let mut inputs = Vec::with_capacity(node.input.len());
        for input in &node.input {
            inputs.push(match input.as_str() {
                "" => None,
                _ if shapes_only => self.values.get(input).cloned(),
                _ => Some(Value::Const(Rc::new(self.evaluate(input, depth - 1)?))),
            });
        }
        self.fold(node, &inputs).ok().flatten()?.into_iter().nth(*k)
    }

    /// Input `i` when a node needs its value at import time (Resize's scales,
    /// OneHot's depth, recurrent weights): a constant, or a graph input whose value was given
    /// (the program specialised to it, see [`Importer::ints`]); else `None`.
    pub(crate) fn needed_input(&self, n: &NodeProto, i: usize) -> Option<Rc<Const>> {
        match self.input(n, i) {
            Some(Value::Const(c)) => Some(c),
            Some(Value::Tensor(_)) => self.given(n, i).map(Rc::new),
            None => None,
        }
    }

    /// Input `i` when it is known at import time, else `None`.
    pub(crate) fn const_input(&self, n: &NodeProto, i: usize) -> Option<Rc<Const>> {
        match self.input(n, i) {
            Some(Value::Const(c)) => Some(c),
            _ => None,
        }
    }

    /// A weight holding `value`, named after node `n` and `hint` (made unique): how an
    /// operator's import-time tables (resize taps, folded kernels) reach the program.
    pub(crate) fn const_weight(
        &mut self,
        n: &NodeProto,
        hint: &str,
        value: Const,
    ) -> Result<Tensor, OnnxError> {
        self.weight_of(n, &format!("{}.{hint}", node_name(n)), &value)
    }

    pub(crate) fn shape_of(&self, v: &Value) -> Vec<usize> {
        match v {
            Value::Tensor(t) => t.shape().unwrap_or_default(),
            Value::Const(c) => c.shape.clone(),
        }
    }
    /// The view (or, for a reshape, `None` and the new shape) a movement op makes of input 0
    /// of shape `shapes[0]`: Reshape, Flatten, Squeeze, Unsqueeze, Expand, Transpose, Slice.
    pub(crate) fn movement(
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
                // Positive steps are a view (offset, length, stride); a negative step is not.
                let mut v = src;
                let mut out = shape.clone();
                for r in self.slice_ranges(n, &shape)? {
                    out[r.axis] = r.count;
                    if r.step < 0 {
                        continue;
                    }
                    v.offset += r.start * v.strides[r.axis];
                    v.shape[r.axis] = r.count;
                    v.strides[r.axis] *= r.step as usize;
                }
                let forward = self.slice_ranges(n, &shape)?.iter().all(|r| r.step > 0);
                Ok((forward.then_some(v), out))
            }
            _ => Err(self.unsupported(n, "not a movement op")),
        }
    }

    /// A `Slice`'s selection per sliced axis of an input of `shape` ([`SliceAxis`]), ONNX's
    /// clamping applied: negative starts and ends count from the end; with a positive step
    /// both are clamped to `0..=len`, with a negative one the start to `0..len` and the end to
    /// `-1..len`; the count is `ceil((end - start) / step)`, at least 0. Before opset 10 the
    /// starts, ends and axes are attributes and every step is 1.
    pub(crate) fn slice_ranges(
        &self,
        n: &NodeProto,
        shape: &[usize],
    ) -> Result<Vec<SliceAxis>, OnnxError> {
        let rank = shape.len();
        let (starts, ends, axes, steps) = if self.opset < 10 {
            let starts = attr_ints(n, "starts").ok_or_else(|| self.malformed(n, "no starts"))?;
            let ends = attr_ints(n, "ends").ok_or_else(|| self.malformed(n, "no ends"))?;
            let axes = attr_ints(n, "axes").unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = vec![1; starts.len()];
            (starts, ends, axes, steps)
        } else {
            let starts = self.ints(n, 1)?.ok_or_else(|| self.malformed(n, "no starts"))?;
            let ends = self.ints(n, 2)?.ok_or_else(|| self.malformed(n, "no ends"))?;
            let axes = self.ints(n, 3)?.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = self.ints(n, 4)?.unwrap_or_else(|| vec![1; starts.len()]);
            (starts, ends, axes, steps)
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err(self.malformed(n, "starts, ends, axes and steps differ in length"));
        }
        let mut out = Vec::with_capacity(starts.len());
        for (((&s, &e), &a), &step) in starts.iter().zip(&ends).zip(&axes).zip(&steps) {
            if step == 0 {
                return Err(self.malformed(n, "steps = 0"));
            }
            let a = axis(a, rank).ok_or_else(|| {
                self.malformed(n, format!("axis {a} is out of range for rank {rank}"))
            })?;
            let len = shape[a] as i64;
            let from_end = |x: i64| if x < 0 { x.saturating_add(len) } else { x };
            let (s, e) = if step > 0 {
                (from_end(s).clamp(0, len), from_end(e).clamp(0, len))
            } else {
                (from_end(s).clamp(0, len - 1), from_end(e).clamp(-1, len - 1))
            };
            let count = if (step > 0 && e > s) || (step < 0 && e < s) {
                ((e - s).abs() + step.abs() - 1) / step.abs()
            } else {
                0
            };
            out.push(SliceAxis { axis: a, start: s.max(0) as usize, count: count as usize, step });
        }
        Ok(out)
    }
    /// A movement node (`Transpose`, `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Expand`,
    /// `Slice`) applied to `x`: a view, no copy.
    pub(crate) fn view(&mut self, n: &NodeProto, x: Tensor) -> Result<Tensor, OnnxError> {
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
            ("Slice", _) => {
                let mut t = x;
                for r in self.slice_ranges(n, &shapes[0])? {
                    let a = r.axis as isize;
                    t = if r.step == 1 {
                        t.slice(a, r.start, r.start + r.count)
                    } else if r.step > 0 || r.count == 0 {
                        // Every step-th element: a window of one element per step, no copy.
                        let step = r.step.unsigned_abs() as usize;
                        let end =
                            if r.count == 0 { r.start } else { r.start + (r.count - 1) * step + 1 };
                        let mut shape = t.shape().unwrap_or_default();
                        shape[r.axis] = r.count;
                        t.slice(a, r.start, end).window(a, 1, step, 1).reshape(shape)
                    } else {
                        // A negative step reverses: a take of the elements in order.
                        let picks: Vec<i64> = r.indices().map(|i| i as i64).collect();
                        let idx =
                            self.const_weight(n, "indices", Const::i64(vec![picks.len()], picks))?;
                        t.take(a, &idx, 0.0)
                    };
                }
                t
            }
            _ => x.reshape(out),
        })
    }

    /// The f32 twin of integer value `name`, computed from an integer graph input by views
    /// only: a second program input fed the same values as f32 (made once per input), with the
    /// same views replayed. `None` when `name` is not such a value.
    pub(crate) fn twin(&mut self, name: &str) -> Result<Option<Tensor>, OnnxError> {
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
    pub(crate) fn binary_operands(&mut self, n: &NodeProto) -> Result<(Tensor, Tensor), OnnxError> {
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
    pub(crate) fn f32_tensor(&mut self, n: &NodeProto, i: usize) -> Result<Tensor, OnnxError> {
        if let Some(Value::Const(c)) = self.input(n, i)
            && !c.is_float()
        {
            // Integer constants in float arithmetic (e.g. a folded mask) read as floats: a
            // float twin under a key of its own (`\u{1}` is in no ONNX name an exporter
            // writes), so the other readers of the constant still see its integers.
            let twin = format!("{}\u{1}f32", n.input[i]);
            let value = match self.values.get(&twin) {
                Some(v) => v.clone(),
                None => Value::Const(Rc::new(c.as_float())),
            };
            return self.materialize(n, twin, value);
        }
        let t = self.tensor(n, i)?;
        match t.dtype() {
            Some(DType::I64 | DType::I32) => {
                // A graph input's f32 twin when it has one (converted on the host), else the
                // program converts (an argmax read as a float).
                if let Some(twin) = self.twin(&n.input[i])? {
                    return Ok(twin);
                }
                Ok(t.cast(DType::F32))
            }
            _ => Ok(t),
        }
    }
}
