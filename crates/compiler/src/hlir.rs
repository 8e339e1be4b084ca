//! The HLIR: the DSL program as a petgraph DAG of tensor ops, before lowering.
//!
//! Nodes are [`HlirNode`]s (an [`HlirOp`], the user's source line and an optional tensor
//! name); an edge `a -> op` with weight `i` says `a` is operand `i` of `op`. This is Luminal's
//! high-level graph: ops know nothing of buffers, launches or the slab. A few primitives
//! ([`HlirOp`]) carry every program; softmax, layer norm and attention are DSL functions over
//! them ([`crate::composite`]). Elementwise ops broadcast their operands NumPy-style; movement
//! ops ([`MoveOp`]) become views when lowered, never copies unless a kernel needs one. Fusion
//! rewrites HLIR -> HLIR (matmul nodes with non-DEFAULT epilogues); lowering turns it into the
//! LLIR.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::conv::{ConvEpilogue, ConvGeometry, ConvSpec, PoolSpec};
use crate::dtype::{DType, Scalar};
use crate::error::{CompileError, ShapeText, SourceLocation};
use crate::llir::Epilogue;
pub use crate::names::{is_reserved_name, tensor_name_problem};
use crate::ops::{ElemOp, IntOp, ReduceOp, ScatterReduction};
use crate::view::{View, broadcast_shapes, window_count};

/// A tensor shape in elements, row-major.
pub type Shape = Vec<usize>;

/// Bytes per f32 element.
pub const F32_BYTES: usize = 4;

/// A movement op: a new view of the same elements, no data moves (see [`crate::view`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MoveOp {
    /// The elements in row-major order seen with another shape of equal element count.
    Reshape {
        /// The new shape.
        shape: Shape,
    },
    /// Axes reordered: axis `i` of the result is axis `perm[i]` of the operand.
    Permute {
        /// A permutation of `0..rank`.
        perm: Vec<usize>,
    },
    /// NumPy's `broadcast_to`: axes aligned on the right, axes of length 1 (or missing)
    /// repeated.
    Expand {
        /// The target shape.
        shape: Shape,
    },
    /// Elements `start..end` along `axis`.
    Slice {
        /// The axis.
        axis: usize,
        /// First element kept.
        start: usize,
        /// One past the last element kept.
        end: usize,
    },
    /// Sliding windows along `axis` ([`View::window`]): the axis becomes `[count, size]`,
    /// window `i` holding elements `i * step + j * dilation`. Pooling reduces over the window
    /// axes; a window of size 1 is a strided slice.
    Window {
        /// The axis.
        axis: usize,
        /// Elements per window (at least 1).
        size: usize,
        /// Elements between window starts (at least 1).
        step: usize,
        /// Elements between a window's elements (at least 1; 1 = adjacent).
        dilation: usize,
    },
}

impl MoveOp {
    /// `reshape`, `permute`, `expand`, `slice` or `window`.
    pub fn name(&self) -> &'static str {
        match self {
            MoveOp::Reshape { .. } => "reshape",
            MoveOp::Permute { .. } => "permute",
            MoveOp::Expand { .. } => "expand",
            MoveOp::Slice { .. } => "slice",
            MoveOp::Window { .. } => "window",
        }
    }

    /// `view` moved by this op: the view of the same buffer that the op's result is, or
    /// `None` when strides cannot express it (a reshape of a permuted view, say: lowering
    /// copies first) or the op does not fit the view (checked earlier by [`Hlir::infer`]).
    pub fn apply(&self, view: &View) -> Option<View> {
        let axis_ok = |axis: usize| axis < view.rank();
        match self {
            MoveOp::Reshape { shape } => view.reshape(shape),
            MoveOp::Permute { perm } => (perm.len() == view.rank()).then(|| view.permute(perm)),
            MoveOp::Expand { shape } => view.expand(shape),
            MoveOp::Slice { axis, start, end } => {
                (axis_ok(*axis) && start <= end && *end <= view.shape[*axis])
                    .then(|| view.slice(*axis, *start, *end))
            }
            MoveOp::Window { axis, size, step, dilation } => {
                (axis_ok(*axis) && *size >= 1 && *step >= 1 && *dilation >= 1)
                    .then(|| view.window(*axis, *size, *step, *dilation))
            }
        }
    }
}

fn join(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

impl fmt::Display for MoveOp {
    /// `reshape:2,3,4`, `permute:0,2,1`, `expand:64,64`, `slice:1:0:16`, `window:2:3:2:1`
    /// (axis, size, step, dilation) (the e-graph's and the
    /// HLIR text's form; [`MoveOp::from_str`] reads it back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoveOp::Reshape { shape } => write!(f, "reshape:{}", join(shape)),
            MoveOp::Permute { perm } => write!(f, "permute:{}", join(perm)),
            MoveOp::Expand { shape } => write!(f, "expand:{}", join(shape)),
            MoveOp::Slice { axis, start, end } => write!(f, "slice:{axis}:{start}:{end}"),
            MoveOp::Window { axis, size, step, dilation } => {
                write!(f, "window:{axis}:{size}:{step}:{dilation}")
            }
        }
    }
}

impl FromStr for MoveOp {
    type Err = crate::ops::UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || crate::ops::UnknownOp(s.to_string());
        let (name, rest) = s.split_once(':').ok_or_else(bad)?;
        let list = |sep: char| -> Result<Vec<usize>, crate::ops::UnknownOp> {
            if rest.is_empty() {
                return Ok(Vec::new());
            }
            rest.split(sep).map(|x| x.parse().map_err(|_| bad())).collect()
        };
        match name {
            "reshape" => Ok(MoveOp::Reshape { shape: list(',')? }),
            "permute" => Ok(MoveOp::Permute { perm: list(',')? }),
            "expand" => Ok(MoveOp::Expand { shape: list(',')? }),
            "slice" => match list(':')?.as_slice() {
                &[axis, start, end] => Ok(MoveOp::Slice { axis, start, end }),
                _ => Err(bad()),
            },
            "window" => match list(':')?.as_slice() {
                &[axis, size, step, dilation] => Ok(MoveOp::Window { axis, size, step, dilation }),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

/// One HLIR operation. Computed tensors are row-major f32; inputs and weights may be integer
/// indices (i32, i64) for [`HlirOp::Gather`] and [`HlirOp::Take`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HlirOp {
    /// A program input (uploaded on every execute); no operands.
    Input {
        /// The user's name, unique in the program.
        name: String,
        /// Shape in elements.
        shape: Shape,
        /// Element type: f32, or i32/i64 indices.
        dtype: DType,
    },
    /// A weight (uploaded at prepare, see [`crate::BufferRole::Weight`]); no operands.
    Weight {
        /// The user's name, unique in the program.
        name: String,
        /// Shape in elements.
        shape: Shape,
        /// Element type: f32, or i32/i64 indices.
        dtype: DType,
    },
    /// An f32 scalar constant, shape `[]`; no operands. The program carries its value; it is
    /// uploaded at prepare like a weight.
    Constant {
        /// The value.
        value: Scalar,
    },
    /// An elementwise op over `op.arity()` f32 operands broadcast NumPy-style to one shape.
    Map(ElemOp),
    /// An exact integer elementwise op ([`IntOp`]: bitwise logic, shifts) over `op.arity()`
    /// operands of one integer type (i32 or i64) broadcast NumPy-style to one shape; the
    /// result has that type.
    IntMap(IntOp),
    /// A reduction over `axis` of one f32 operand; the axis is removed from the shape.
    Reduce {
        /// Sum or max.
        op: ReduceOp,
        /// The reduced axis.
        axis: usize,
    },
    /// `a [..., M, K] x b [..., K, N] -> [..., M, N]` (batch axes broadcast NumPy-style), then
    /// the epilogue. Operands `[a, b]`, or `[a, b, bias]` with `bias` of shape `[N]` when
    /// [`Epilogue::has_bias`] (cuBLASLt's `BIAS` epilogues; `b` must then be 2-D, so the
    /// product is one GEMM).
    Matmul {
        /// The fused epilogue; DEFAULT straight from the DSL.
        epilogue: Epilogue,
    },
    /// Embedding lookup: `table [V, D]` (f32) and `ids [...]` (i32 or i64) ->
    /// `[..., D]`, row `ids[i]` of the table for every id. An id outside `0..V` is a runtime
    /// error naming the tensor and the index.
    Gather,
    /// A convolution ([`crate::conv`]): operands `x [N, C, *in]` and `w [OC, C / groups,
    /// *kernel]`, then `bias [OC]` when the epilogue has one, then `residual` of the output's
    /// shape when it has one; output `[N, OC, *out]` = `act(conv(x, w) + bias + residual)`.
    Conv {
        /// Strides, dilations, pads and groups.
        spec: ConvSpec,
        /// What is applied to each output element after the sum.
        epilogue: ConvEpilogue,
    },
    /// A max pool ([`crate::conv`]): one operand `x [N, C, *in]` (1 to 3 spatial axes);
    /// output `[N, C, *out]`, each element the max of its window ([`PoolSpec`]: NaN wins, padded
    /// positions never do), [`crate::conv::max_pool_f64`]'s definition.
    MaxPool(PoolSpec),
    /// Elements picked along `axis` by a list of indices: operands `x` (f32) and `indices`
    /// (i32 or i64, 1-D of length L); the output is `x` with `axis` of length L, position `j`
    /// holding `x`'s slice `indices[j]`, or `fill` where `indices[j]` is negative. How
    /// padding (constant, edge, reflect), nearest-neighbour resizing, flips and a gather with
    /// constant indices are written: one copy whatever the pattern. An index at or past the
    /// axis' length is a runtime error naming the indices tensor.
    Take {
        /// The axis picked along.
        axis: usize,
        /// The value where an index is negative.
        fill: Scalar,
    },
    /// Each element converted to `to` (f32, i32 or i64): floats to integers truncate toward
    /// zero and saturate (NaN is 0), integers to floats round to nearest; the same type copies.
    /// How integer results (an argmax, a label) leave the program, and how a view of an
    /// integer tensor is made contiguous.
    Cast {
        /// The element type of the result.
        to: DType,
    },
    /// The index (i64) of the largest (`max`) or smallest element along `axis`, which the
    /// output drops: the first on ties, or the last when `last`; NaN counts as the largest
    /// and the smallest (the first NaN wins, as NumPy's `argmax`).
    Arg {
        /// Largest (argmax) or smallest (argmin).
        max: bool,
        /// The searched axis.
        axis: usize,
        /// The last of equal elements rather than the first.
        last: bool,
    },
    /// The `k` largest (or smallest) elements' positions along `axis` of one f32 operand, as
    /// i64 indices in order (largest first, or smallest first; equal elements by position;
    /// NaN counts as the largest): the operand's shape with `axis` of length `k`. ONNX's
    /// `TopK`; its values are a [`HlirOp::GatherElements`] of these.
    TopK {
        /// The searched axis.
        axis: usize,
        /// How many (at most the axis' length).
        k: usize,
        /// Largest first (true) or smallest first.
        largest: bool,
    },
    /// Elements of `data` (f32) picked along `axis` by an index tensor of the same rank
    /// (i32/i64; negative counts from the end): `out[i] = data[i with axis replaced by
    /// indices[i]]`, the indices' shape. ONNX's `GatherElements`, PyTorch's `gather`; an
    /// index outside the axis is a runtime error naming the indices.
    GatherElements {
        /// The axis picked along.
        axis: usize,
    },
    /// A copy of `data` with elements along `axis` replaced by (or combined with) updates:
    /// operands `data` (f32, i32 or i64, any rank), `indices` (i32/i64, `data`'s rank, no
    /// longer than `data` on any axis but `axis`) and `updates` (`data`'s dtype, the indices'
    /// shape); the output has `data`'s shape and dtype. For every position `i` of `updates`
    /// in row-major order, `out[i with axis replaced by indices[i]] = updates[i]`, or combined
    /// with what is there by `reduction` ([`ScatterReduction`], in the data's type). A
    /// negative index counts from the axis' end; an index still outside the axis is a runtime
    /// error naming the indices tensor and the index. With no reduction and two updates on one
    /// element, the last in row-major order wins (what ONNX Runtime does on the CPU; the CUDA
    /// runtime keeps an unspecified one). ONNX's `ScatterElements`, PyTorch's `scatter` /
    /// `scatter_reduce`. The output is a fresh buffer, never `data`'s bytes.
    ScatterElements {
        /// The axis the indices address.
        axis: usize,
        /// How an update combines with the element it lands on.
        reduction: ScatterReduction,
    },
    /// A state ([`crate::Graph::state`], operand 0: `[R, ...]` f32) with its last `r` rows
    /// along axis 0 replaced by `update` (operand 1: `[r, ...]`, `r <= R`), written in place:
    /// the state's buffer keeps the rows before for the next execute. With a symbolic `R`
    /// (the rows live after this step) and `r` (the step's rows), the write lands at rows
    /// `R - r .. R`: a KV cache's append. The result is the state after the write.
    AppendRows,
    /// The operands (at least one; equal shapes but along `axis`) joined along `axis`.
    Concat {
        /// The joined axis.
        axis: usize,
    },
    /// A view of its operand ([`MoveOp`]).
    Move(MoveOp),
    /// Marks its one operand as a program output named `name` (read back after the last launch).
    Output {
        /// The user's name, unique in the program.
        name: String,
    },
}

impl HlirOp {
    /// Short name used in messages and dumps: `input`, `weight`, `constant`, the elementwise
    /// op's name (`add`, `exp`, ...), `sum`/`max`, `matmul`, `gather`, `concat`, `reshape`,
    /// `permute`, `expand`, `slice`, `output`.
    pub fn name(&self) -> &'static str {
        match self {
            HlirOp::Input { .. } => "input",
            HlirOp::Weight { .. } => "weight",
            HlirOp::Constant { .. } => "constant",
            HlirOp::Map(op) => op.name(),
            HlirOp::IntMap(op) => op.name(),
            HlirOp::Reduce { op, .. } => op.name(),
            HlirOp::Matmul { .. } => "matmul",
            HlirOp::Gather => "gather",
            HlirOp::Conv { .. } => "conv",
            HlirOp::MaxPool(_) => "max_pool",
            HlirOp::Take { .. } => "take",
            HlirOp::Cast { .. } => "cast",
            HlirOp::Arg { max: true, .. } => "argmax",
            HlirOp::Arg { max: false, .. } => "argmin",
            HlirOp::TopK { .. } => "topk",
            HlirOp::GatherElements { .. } => "gather_elements",
            HlirOp::ScatterElements { .. } => "scatter_elements",
            HlirOp::AppendRows => "append_rows",
            HlirOp::Concat { .. } => "concat",
            HlirOp::Move(m) => m.name(),
            HlirOp::Output { .. } => "output",
        }
    }

    /// Whether the node is an input, a weight or a constant (a leaf the upload node writes).
    pub fn is_leaf(&self) -> bool {
        matches!(self, HlirOp::Input { .. } | HlirOp::Weight { .. } | HlirOp::Constant { .. })
    }

    /// Whether the node is an input or a weight: the program's signature.
    pub fn is_signature(&self) -> bool {
        matches!(self, HlirOp::Input { .. } | HlirOp::Weight { .. })
    }

    /// Whether the node computes a tensor (becomes a kernel launch when lowered). Movement
    /// ops do not: they are views.
    pub fn is_compute(&self) -> bool {
        matches!(
            self,
            HlirOp::Map(_)
                | HlirOp::IntMap(_)
                | HlirOp::Reduce { .. }
                | HlirOp::Matmul { .. }
                | HlirOp::Gather
                | HlirOp::Conv { .. }
                | HlirOp::MaxPool(_)
                | HlirOp::Take { .. }
                | HlirOp::Cast { .. }
                | HlirOp::Arg { .. }
                | HlirOp::TopK { .. }
                | HlirOp::GatherElements { .. }
                | HlirOp::ScatterElements { .. }
                | HlirOp::AppendRows
                | HlirOp::Concat { .. }
        )
    }

    /// Operands the op takes (`concat`: at least this many).
    pub fn arity(&self) -> usize {
        match self {
            HlirOp::Input { .. } | HlirOp::Weight { .. } | HlirOp::Constant { .. } => 0,
            HlirOp::Map(op) => op.arity(),
            HlirOp::IntMap(op) => op.arity(),
            HlirOp::Matmul { epilogue } if epilogue.has_bias() => 3,
            HlirOp::ScatterElements { .. } => 3,
            HlirOp::Matmul { .. }
            | HlirOp::Gather
            | HlirOp::Take { .. }
            | HlirOp::AppendRows
            | HlirOp::GatherElements { .. } => 2,
            HlirOp::Conv { epilogue, .. } => epilogue.operands(),
            HlirOp::Reduce { .. }
            | HlirOp::MaxPool(_)
            | HlirOp::Cast { .. }
            | HlirOp::Arg { .. }
            | HlirOp::TopK { .. }
            | HlirOp::Concat { .. }
            | HlirOp::Move(_)
            | HlirOp::Output { .. } => 1,
        }
    }

    /// Whether the op takes any number of operands of at least [`HlirOp::arity`].
    pub fn is_variadic(&self) -> bool {
        matches!(self, HlirOp::Concat { .. })
    }

    /// The node's text in HLIR dumps and structural labels: the name with its parameters
    /// (`matmul[RELU_BIAS]`, `sum:1`, `reshape:2,3`, `input x`, `input ids i64`,
    /// `constant 0.5`, `conv[s=1,1 d=1,1 p=1,1,1,1 g=1 bias+relu]`, `take:2:0.0`).
    pub fn text(&self) -> String {
        let typed = |kind: &str, name: &str, dtype: &DType| match dtype {
            DType::F32 => format!("{kind} {name}"),
            other => format!("{kind} {name} {other}"),
        };
        match self {
            HlirOp::Input { name, dtype, .. } => typed("input", name, dtype),
            HlirOp::Weight { name, dtype, .. } => typed("weight", name, dtype),
            HlirOp::Constant { value } => format!("constant {value}"),
            HlirOp::Matmul { epilogue } => format!("matmul[{}]", epilogue.name()),
            HlirOp::Reduce { op, axis } => format!("{op}:{axis}"),
            HlirOp::Conv { spec, epilogue } => format!("conv[{spec} {epilogue}]"),
            HlirOp::MaxPool(spec) => format!("max_pool[{spec}]"),
            HlirOp::Take { axis, fill } => format!("take:{axis}:{fill}"),
            HlirOp::Cast { to } => format!("cast:{to}"),
            HlirOp::TopK { axis, k, largest } => {
                format!("topk:{axis}:{k}:{}", if *largest { "largest" } else { "smallest" })
            }
            HlirOp::GatherElements { axis } => format!("gather_elements:{axis}"),
            HlirOp::ScatterElements { axis, reduction } => {
                format!("scatter_elements:{axis}:{reduction}")
            }
            HlirOp::Arg { max, axis, last } => {
                format!(
                    "arg{}:{axis}{}",
                    if *max { "max" } else { "min" },
                    if *last { ":last" } else { "" }
                )
            }
            HlirOp::Concat { axis } => format!("concat:{axis}"),
            HlirOp::Move(m) => m.to_string(),
            HlirOp::Output { name } => format!("output {name}"),
            op => op.name().to_string(),
        }
    }
}

/// A tensor's type: its shape in elements and its element type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Shape in elements, row-major.
    pub shape: Shape,
    /// Element type.
    pub dtype: DType,
}

impl TensorType {
    /// An f32 tensor of `shape`.
    pub fn f32(shape: Shape) -> Self {
        Self { shape, dtype: DType::F32 }
    }
}

/// The name a user gave a computed tensor with [`crate::Tensor::name`], and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorName {
    /// The name (identifier-like, unique in the program).
    pub text: String,
    /// The user's source line of the `.name()` call.
    pub location: SourceLocation,
}

/// One HLIR node: the op, the user's source line that created it, and the name the user gave
/// the tensor with [`crate::Tensor::name`], which its buffer keeps in the LLIR and the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HlirNode {
    /// The operation.
    pub op: HlirOp,
    /// Where the user called the DSL (or where a rewrite made the node).
    pub location: SourceLocation,
    /// The user's name for the tensor, if any.
    pub name: Option<TensorName>,
}

/// The HLIR graph. Node index order is declaration order; the upload node writes inputs and
/// weights in this order (the program's signature), so rewrites must keep leaves in order.
#[derive(Debug, Clone, Default)]
pub struct Hlir {
    /// Nodes, and edges `operand -> op` weighted by the operand index.
    pub graph: DiGraph<HlirNode, usize>,
    /// Symbolic dimensions ([`crate::symbolic`]): declared symbols and the input axes they
    /// are. Empty for a program of fixed shapes.
    pub symbols: crate::symbols::Symbols,
    /// The inputs that are states ([`crate::Graph::state`]): persistent buffers the runtime
    /// owns, not given by the caller.
    pub states: BTreeSet<String>,
}

impl Hlir {
    /// An empty HLIR.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `op` with `operands` (edge `operands[i] -> op` with weight `i`) and returns it.
    /// Operands must be nodes of this graph; arity is checked by [`Hlir::validate`].
    pub fn add_op(
        &mut self,
        op: HlirOp,
        operands: &[NodeIndex],
        location: SourceLocation,
    ) -> NodeIndex {
        let node = self.graph.add_node(HlirNode { op, location, name: None });
        for (i, &a) in operands.iter().enumerate() {
            self.graph.add_edge(a, node, i);
        }
        node
    }

    /// Node `n`'s operands in operand order (empty for a node that is not in the graph).
    pub fn operands(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut ops: Vec<(usize, NodeIndex)> = self
            .graph
            .edges_directed(n, Direction::Incoming)
            .map(|e| (*e.weight(), e.source()))
            .collect();
        ops.sort();
        ops.into_iter().map(|(_, a)| a).collect()
    }

    /// Nodes that use `n`, with the operand index, sorted by node index then operand index.
    pub fn consumers(&self, n: NodeIndex) -> Vec<(NodeIndex, usize)> {
        let mut users: Vec<(NodeIndex, usize)> = self
            .graph
            .edges_directed(n, Direction::Outgoing)
            .map(|e| (e.target(), *e.weight()))
            .collect();
        users.sort();
        users
    }

    /// The `(name, node)` of every output, in node order.
    pub fn outputs(&self) -> Vec<(String, NodeIndex)> {
        self.graph
            .node_indices()
            .filter_map(|n| match &self.graph[n].op {
                HlirOp::Output { name } => Some((name.clone(), n)),
                _ => None,
            })
            .collect()
    }

    /// Checks the HLIR and infers every node's shape (indexed by node index; an output has its
    /// operand's shape). See [`Hlir::infer`] for the errors.
    ///
    /// # Errors
    /// As [`Hlir::infer`].
    pub fn validate(&self) -> Result<Vec<Shape>, CompileError> {
        Ok(self.infer()?.into_iter().map(|t| t.shape).collect())
    }

    /// Checks the HLIR and infers every node's type (shape and dtype), indexed by node index.
    ///
    /// # Errors
    /// [`CompileError::Cyclic`]; [`CompileError::Arity`] or [`CompileError::Malformed`] for a
    /// broken node; [`CompileError::BadName`] for an empty, repeated or reserved name, or one
    /// that is not identifier-like ([`tensor_name_problem`]), at the DSL call that named it;
    /// [`CompileError::ShapeMismatch`] / [`CompileError::Rank`] for operands the op cannot
    /// combine (shapes that do not broadcast, inner dimensions that differ);
    /// [`CompileError::AxisOutOfRange`], [`CompileError::ReshapeCount`],
    /// [`CompileError::BadPermutation`], [`CompileError::SliceRange`] for a bad movement or
    /// reduction; [`CompileError::DType`] for an operand of the wrong element type;
    /// [`CompileError::ShapeOverflow`] for a tensor whose bytes overflow `usize`;
    /// [`CompileError::OutputOfLeaf`], [`CompileError::OutputTwice`],
    /// [`CompileError::NoOutputs`]. With several errors, the first in node order is reported.
    pub fn infer(&self) -> Result<Vec<TensorType>, CompileError> {
        let order =
            petgraph::algo::toposort(&self.graph, None).map_err(|_| CompileError::Cyclic)?;
        self.check_structure()?;
        let mut types: Vec<Option<TensorType>> = vec![None; self.graph.node_count()];
        // Errors are collected per node so the first in declaration order wins, whatever
        // order the toposort visits nodes in.
        let mut first_err: Option<(NodeIndex, CompileError)> = None;
        for n in order {
            let operands = self.operands(n);
            let operand_types: Option<Vec<&TensorType>> =
                operands.iter().map(|a| types[a.index()].as_ref()).collect();
            // An operand that failed already reported its own error.
            let Some(operand_types) = operand_types else { continue };
            match infer_type(&self.graph[n], &operand_types) {
                Ok(t) => types[n.index()] = Some(t),
                Err(e) => {
                    if first_err.as_ref().is_none_or(|(m, _)| n < *m) {
                        first_err = Some((n, e));
                    }
                }
            }
        }
        if let Some((_, e)) = first_err {
            return Err(e);
        }
        Ok(types.into_iter().map(|t| t.unwrap_or_else(|| TensorType::f32(Vec::new()))).collect())
    }

    /// Arity, operand indices, names and outputs.
    fn check_structure(&self) -> Result<(), CompileError> {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let mut output_of: Vec<Option<&str>> = vec![None; self.graph.node_count()];
        let mut any_output = false;
        for n in self.graph.node_indices() {
            let node = &self.graph[n];
            let mut idx: Vec<usize> =
                self.graph.edges_directed(n, Direction::Incoming).map(|e| *e.weight()).collect();
            idx.sort_unstable();
            let arity = node.op.arity();
            let arity_ok =
                if node.op.is_variadic() { idx.len() >= arity } else { idx.len() == arity };
            if !arity_ok {
                return Err(CompileError::Arity {
                    op: node.op.name(),
                    expected: arity,
                    got: idx.len(),
                    location: node.location,
                });
            }
            if idx.iter().enumerate().any(|(i, &w)| i != w) {
                return Err(CompileError::Malformed {
                    message: format!(
                        "{} has operand indices {idx:?}, not 0..{}",
                        node.op.name(),
                        idx.len()
                    ),
                    location: node.location,
                });
            }
            let named = match &node.op {
                HlirOp::Input { name, .. } => Some(("input", name)),
                HlirOp::Weight { name, .. } => Some(("weight", name)),
                HlirOp::Output { name } => Some(("output", name)),
                _ => None,
            };
            let tensor_name = node.name.as_ref().map(|n| ("tensor", &n.text, n.location));
            let named = named.map(|(kind, name)| (kind, name, node.location));
            for (kind, name, location) in named.into_iter().chain(tensor_name) {
                let problem = if name.is_empty() {
                    Some("empty".to_string())
                } else if let Some(problem) = tensor_name_problem(name) {
                    Some(problem)
                } else if is_reserved_name(name) {
                    Some(
                        "reserved for compiler buffers (t0, t1, ..., workspace, workspace0, ...)"
                            .to_string(),
                    )
                } else if !names.insert(name.as_str()) {
                    Some("already used".to_string())
                } else {
                    None
                };
                if let Some(problem) = problem {
                    return Err(CompileError::BadName {
                        kind,
                        name: name.clone(),
                        problem,
                        location,
                    });
                }
            }
            if let HlirOp::Output { name } = &node.op {
                any_output = true;
                if self.graph.edges_directed(n, Direction::Outgoing).next().is_some() {
                    return Err(CompileError::Malformed {
                        message: format!("output {name:?} has consumers"),
                        location: node.location,
                    });
                }
                let Some(&src) = self.operands(n).first() else { continue };
                match &self.graph[src].op {
                    HlirOp::Input { name: leaf, .. } | HlirOp::Weight { name: leaf, .. } => {
                        return Err(CompileError::OutputOfLeaf {
                            name: name.clone(),
                            leaf: leaf.clone(),
                            location: node.location,
                        });
                    }
                    HlirOp::Constant { value } => {
                        return Err(CompileError::OutputOfLeaf {
                            name: name.clone(),
                            leaf: format!("constant {value}"),
                            location: node.location,
                        });
                    }
                    _ => {}
                }
                if let Some(first) = output_of[src.index()] {
                    return Err(CompileError::OutputTwice {
                        first: first.to_string(),
                        name: name.clone(),
                        location: node.location,
                    });
                }
                output_of[src.index()] = Some(name.as_str());
            }
        }
        if !any_output {
            return Err(CompileError::NoOutputs);
        }
        Ok(())
    }
}

/// The type of `node` given its operands' types (already checked for arity).
pub(crate) fn infer_type(
    node: &HlirNode,
    operands: &[&TensorType],
) -> Result<TensorType, CompileError> {
    let location = node.location;
    let op = node.op.name();
    let mismatch = |lhs: &[usize], rhs: &[usize], reason: String| CompileError::ShapeMismatch {
        op,
        lhs: ShapeText(lhs.to_vec()),
        rhs: ShapeText(rhs.to_vec()),
        reason,
        location,
    };
    let f32_only = |i: usize, t: &TensorType| -> Result<(), CompileError> {
        if t.dtype == DType::F32 {
            Ok(())
        } else {
            Err(CompileError::DType { op, operand: i, expected: "f32", got: t.dtype, location })
        }
    };
    let axis_error = |axis: usize, rank: usize| CompileError::AxisOutOfRange {
        op,
        axis: isize::try_from(axis).unwrap_or(isize::MAX),
        rank,
        location,
    };
    let t = match (&node.op, operands) {
        (HlirOp::Input { shape, dtype, .. } | HlirOp::Weight { shape, dtype, .. }, []) => {
            if *dtype == DType::U8 {
                return Err(CompileError::DType {
                    op,
                    operand: 0,
                    expected: "f32, i32 or i64",
                    got: *dtype,
                    location,
                });
            }
            TensorType { shape: shape.clone(), dtype: *dtype }
        }
        (HlirOp::Constant { .. }, []) => TensorType::f32(Vec::new()),
        (HlirOp::Map(_), ops) => {
            let mut shape: Shape = Vec::new();
            for (i, t) in ops.iter().enumerate() {
                f32_only(i, t)?;
                shape = if i == 0 {
                    t.shape.clone()
                } else {
                    broadcast_shapes(&shape, &t.shape).ok_or_else(|| {
                        mismatch(&shape, &t.shape, broadcast_reason(&shape, &t.shape))
                    })?
                };
            }
            TensorType::f32(shape)
        }
        (HlirOp::IntMap(_), ops) => {
            let dtype = ops.first().map_or(DType::I64, |t| t.dtype);
            let mut shape: Shape = Vec::new();
            for (i, t) in ops.iter().enumerate() {
                if !IntOp::takes(t.dtype) || t.dtype != dtype {
                    let expected = if i == 0 { "i32 or i64" } else { "operand 0's type" };
                    return Err(CompileError::DType {
                        op,
                        operand: i,
                        expected,
                        got: t.dtype,
                        location,
                    });
                }
                shape = if i == 0 {
                    t.shape.clone()
                } else {
                    broadcast_shapes(&shape, &t.shape).ok_or_else(|| {
                        mismatch(&shape, &t.shape, broadcast_reason(&shape, &t.shape))
                    })?
                };
            }
            TensorType { shape, dtype }
        }
        (HlirOp::Reduce { axis, .. }, [x]) => {
            f32_only(0, x)?;
            if *axis >= x.shape.len() {
                return Err(axis_error(*axis, x.shape.len()));
            }
            let mut shape = x.shape.clone();
            shape.remove(*axis);
            TensorType::f32(shape)
        }
        (HlirOp::Matmul { epilogue }, [a, b, rest @ ..]) => {
            for (i, t) in [a, b].into_iter().enumerate() {
                f32_only(i, t)?;
                if t.shape.len() < 2 {
                    return Err(CompileError::Rank {
                        op,
                        shape: ShapeText(t.shape.clone()),
                        rank: t.shape.len(),
                        expected: 2,
                        location,
                    });
                }
            }
            let (ra, rb) = (a.shape.len(), b.shape.len());
            let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
            let (k2, n) = (b.shape[rb - 2], b.shape[rb - 1]);
            if k != k2 {
                return Err(mismatch(
                    &a.shape,
                    &b.shape,
                    format!("inner dimensions {k} and {k2} differ ([..., M, K] x [..., K, N])"),
                ));
            }
            let Some(mut out) = broadcast_shapes(&a.shape[..ra - 2], &b.shape[..rb - 2]) else {
                return Err(mismatch(
                    &a.shape,
                    &b.shape,
                    format!(
                        "batch dimensions {} and {} do not broadcast",
                        ShapeText(a.shape[..ra - 2].to_vec()),
                        ShapeText(b.shape[..rb - 2].to_vec())
                    ),
                ));
            };
            out.extend([m, n]);
            if let (true, [bias]) = (epilogue.has_bias(), rest) {
                f32_only(2, bias)?;
                if bias.shape.as_slice() != [n] {
                    return Err(CompileError::ShapeMismatch {
                        op: "matmul bias",
                        lhs: ShapeText(out),
                        rhs: ShapeText(bias.shape.clone()),
                        reason: format!(
                            "the {} epilogue needs a bias of shape [{n}]",
                            epilogue.name()
                        ),
                        location,
                    });
                }
                if rb != 2 {
                    return Err(CompileError::ShapeMismatch {
                        op: "matmul bias",
                        lhs: ShapeText(a.shape.clone()),
                        rhs: ShapeText(b.shape.clone()),
                        reason: format!(
                            "the {} epilogue needs a 2-D right operand (one GEMM)",
                            epilogue.name()
                        ),
                        location,
                    });
                }
            }
            TensorType::f32(out)
        }
        (HlirOp::Gather, [table, ids]) => {
            f32_only(0, table)?;
            if table.shape.len() != 2 {
                return Err(CompileError::Rank {
                    op,
                    shape: ShapeText(table.shape.clone()),
                    rank: table.shape.len(),
                    expected: 2,
                    location,
                });
            }
            if !ids.dtype.is_index() {
                return Err(CompileError::DType {
                    op,
                    operand: 1,
                    expected: "i32 or i64",
                    got: ids.dtype,
                    location,
                });
            }
            let mut shape = ids.shape.clone();
            shape.push(table.shape[1]);
            TensorType::f32(shape)
        }
        (HlirOp::MaxPool(spec), [x]) => {
            f32_only(0, x)?;
            let bad = |reason: String| CompileError::BadArgument { op, reason, location };
            TensorType::f32(ConvGeometry::pool(spec, &x.shape).map_err(bad)?.output_shape())
        }
        (HlirOp::Conv { spec, epilogue }, [x, w, rest @ ..]) => {
            for (i, t) in [x, w].into_iter().chain(rest.iter()).enumerate() {
                f32_only(i, t)?;
            }
            let bad = |reason: String| CompileError::BadArgument { op, reason, location };
            let geo = ConvGeometry::new(spec, &x.shape, &w.shape).map_err(bad)?;
            let out = geo.output_shape();
            if let Some(a) = epilogue.activation.filter(|a| !a.is_activation()) {
                return Err(bad(format!(
                    "{a} is not an activation a convolution's epilogue applies"
                )));
            }
            let mut extra = rest.iter();
            if epilogue.bias
                && let Some(b) = extra.next()
                && b.shape != [geo.c_out]
            {
                return Err(mismatch(
                    &out,
                    &b.shape,
                    format!("the bias must be [{}], one value per output channel", geo.c_out),
                ));
            }
            if epilogue.residual
                && let Some(r) = extra.next()
                && r.shape != out
            {
                return Err(mismatch(
                    &out,
                    &r.shape,
                    "the residual must have the output's shape".into(),
                ));
            }
            TensorType::f32(out)
        }
        (HlirOp::Take { axis, .. }, [x, indices]) => {
            f32_only(0, x)?;
            if !indices.dtype.is_index() {
                return Err(CompileError::DType {
                    op,
                    operand: 1,
                    expected: "i32 or i64",
                    got: indices.dtype,
                    location,
                });
            }
            if indices.shape.len() != 1 {
                return Err(CompileError::Rank {
                    op,
                    shape: ShapeText(indices.shape.clone()),
                    rank: indices.shape.len(),
                    expected: 1,
                    location,
                });
            }
            if *axis >= x.shape.len() {
                return Err(axis_error(*axis, x.shape.len()));
            }
            let mut shape = x.shape.clone();
            shape[*axis] = indices.shape[0];
            TensorType::f32(shape)
        }
        (HlirOp::Cast { to }, [x]) => {
            if !matches!(to, DType::F32 | DType::I32 | DType::I64) || x.dtype == DType::U8 {
                return Err(CompileError::DType {
                    op,
                    operand: 0,
                    expected: "f32, i32 or i64 (to and from)",
                    got: if x.dtype == DType::U8 { x.dtype } else { *to },
                    location,
                });
            }
            TensorType { shape: x.shape.clone(), dtype: *to }
        }
        (HlirOp::Arg { axis, .. }, [x]) => {
            f32_only(0, x)?;
            if *axis >= x.shape.len() {
                return Err(axis_error(*axis, x.shape.len()));
            }
            let mut shape = x.shape.clone();
            shape.remove(*axis);
            TensorType { shape, dtype: DType::I64 }
        }
        (HlirOp::TopK { axis, k, .. }, [x]) => {
            f32_only(0, x)?;
            if *axis >= x.shape.len() {
                return Err(axis_error(*axis, x.shape.len()));
            }
            if *k > x.shape[*axis] {
                return Err(CompileError::BadArgument {
                    op,
                    reason: format!(
                        "k = {k} is more than axis {axis}'s {} elements",
                        x.shape[*axis]
                    ),
                    location,
                });
            }
            let mut shape = x.shape.clone();
            shape[*axis] = *k;
            TensorType { shape, dtype: DType::I64 }
        }
        (HlirOp::GatherElements { axis }, [data, indices]) => {
            f32_only(0, data)?;
            if !indices.dtype.is_index() {
                return Err(CompileError::DType {
                    op,
                    operand: 1,
                    expected: "i32 or i64",
                    got: indices.dtype,
                    location,
                });
            }
            let rank = data.shape.len();
            if *axis >= rank {
                return Err(axis_error(*axis, rank));
            }
            let fits = indices.shape.len() == rank
                && indices
                    .shape
                    .iter()
                    .zip(&data.shape)
                    .enumerate()
                    .all(|(a, (i, d))| a == *axis || i <= d);
            if !fits {
                return Err(mismatch(
                    &data.shape,
                    &indices.shape,
                    format!("the indices must have the data's rank and no longer axes but {axis}"),
                ));
            }
            TensorType::f32(indices.shape.clone())
        }
        (HlirOp::ScatterElements { axis, .. }, [data, indices, updates]) => {
            if !matches!(data.dtype, DType::F32 | DType::I32 | DType::I64) {
                return Err(CompileError::DType {
                    op,
                    operand: 0,
                    expected: "f32, i32 or i64",
                    got: data.dtype,
                    location,
                });
            }
            if !indices.dtype.is_index() {
                return Err(CompileError::DType {
                    op,
                    operand: 1,
                    expected: "i32 or i64",
                    got: indices.dtype,
                    location,
                });
            }
            if updates.dtype != data.dtype {
                return Err(CompileError::DType {
                    op,
                    operand: 2,
                    expected: data.dtype.name(),
                    got: updates.dtype,
                    location,
                });
            }
            let rank = data.shape.len();
            if *axis >= rank {
                return Err(axis_error(*axis, rank));
            }
            let fits = indices.shape.len() == rank
                && indices
                    .shape
                    .iter()
                    .zip(&data.shape)
                    .enumerate()
                    .all(|(a, (i, d))| a == *axis || i <= d);
            if !fits {
                return Err(mismatch(
                    &data.shape,
                    &indices.shape,
                    format!("the indices must have the data's rank and no longer axes but {axis}"),
                ));
            }
            if updates.shape != indices.shape {
                return Err(mismatch(
                    &indices.shape,
                    &updates.shape,
                    "the updates must have the indices' shape".into(),
                ));
            }
            (*data).clone()
        }
        (HlirOp::AppendRows, [state, update]) => {
            f32_only(0, state)?;
            f32_only(1, update)?;
            let fits = !state.shape.is_empty()
                && update.shape.len() == state.shape.len()
                && update.shape[0] <= state.shape[0]
                && update.shape[1..] == state.shape[1..];
            if !fits {
                return Err(mismatch(
                    &state.shape,
                    &update.shape,
                    "the update must be rows of the state: its shape but a shorter axis 0".into(),
                ));
            }
            (*state).clone()
        }
        (HlirOp::Concat { axis }, [first, rest @ ..]) => {
            f32_only(0, first)?;
            let rank = first.shape.len();
            if *axis >= rank {
                return Err(axis_error(*axis, rank));
            }
            let mut shape = first.shape.clone();
            for (i, t) in rest.iter().enumerate() {
                f32_only(i + 1, t)?;
                let same = t.shape.len() == rank
                    && t.shape
                        .iter()
                        .zip(&first.shape)
                        .enumerate()
                        .all(|(d, (x, y))| d == *axis || x == y);
                if !same {
                    return Err(mismatch(
                        &first.shape,
                        &t.shape,
                        format!("concat along axis {axis} needs equal lengths on every other axis"),
                    ));
                }
                shape[*axis] = shape[*axis].saturating_add(t.shape[*axis]);
            }
            TensorType::f32(shape)
        }
        (HlirOp::Move(m), [x]) => {
            let rank = x.shape.len();
            let shape = match m {
                MoveOp::Reshape { shape } => {
                    if element_count(shape) != element_count(&x.shape) {
                        return Err(CompileError::ReshapeCount {
                            from: ShapeText(x.shape.clone()),
                            to: ShapeText(shape.clone()),
                            location,
                        });
                    }
                    shape.clone()
                }
                MoveOp::Permute { perm } => {
                    let mut seen = vec![false; rank];
                    let ok = perm.len() == rank
                        && perm.iter().all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
                    if !ok {
                        return Err(CompileError::BadPermutation {
                            perm: perm
                                .iter()
                                .map(|&p| isize::try_from(p).unwrap_or(isize::MAX))
                                .collect(),
                            rank,
                            location,
                        });
                    }
                    perm.iter().map(|&p| x.shape[p]).collect()
                }
                MoveOp::Expand { shape } => {
                    if let Some(reason) = expand_problem(&x.shape, shape) {
                        return Err(mismatch(&x.shape, shape, reason));
                    }
                    shape.clone()
                }
                MoveOp::Slice { axis, start, end } => {
                    if *axis >= rank {
                        return Err(axis_error(*axis, rank));
                    }
                    let len = x.shape[*axis];
                    if start > end || *end > len {
                        return Err(CompileError::SliceRange {
                            axis: *axis,
                            start: *start,
                            end: *end,
                            len,
                            location,
                        });
                    }
                    let mut shape = x.shape.clone();
                    shape[*axis] = end - start;
                    shape
                }
                MoveOp::Window { axis, size, step, dilation } => {
                    if *axis >= rank {
                        return Err(axis_error(*axis, rank));
                    }
                    if *size == 0 || *step == 0 || *dilation == 0 {
                        return Err(CompileError::BadArgument {
                            op,
                            reason: format!(
                                "size {size}, step {step} and dilation {dilation} must each be \
                                 at least 1"
                            ),
                            location,
                        });
                    }
                    let count = window_count(x.shape[*axis], *size, *step, *dilation);
                    let mut shape = x.shape.clone();
                    shape.splice(*axis..=*axis, [count, *size]);
                    shape
                }
            };
            TensorType { shape, dtype: x.dtype }
        }
        // f32, or integers (an argmax, a label), read back as they are.
        (HlirOp::Output { .. }, [x]) => (*x).clone(),
        (op, ops) => {
            return Err(CompileError::Arity {
                op: op.name(),
                expected: op.arity(),
                got: ops.len(),
                location,
            });
        }
    };
    if checked_bytes_of(&t.shape, t.dtype).is_none() {
        let name = match &node.op {
            HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } => name.clone(),
            op => op.name().to_string(),
        };
        return Err(CompileError::ShapeOverflow {
            name,
            op: node.op.name(),
            shape: ShapeText(t.shape),
            location,
        });
    }
    Ok(t)
}

/// Why `a` and `b` do not broadcast: the first axis, counted from the last, whose lengths
/// differ with neither 1.
pub fn broadcast_reason(a: &[usize], b: &[usize]) -> String {
    let axis = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .position(|(&x, &y)| x != y && x != 1 && y != 1)
        .unwrap_or(0);
    let (x, y) = (a[a.len() - 1 - axis], b[b.len() - 1 - axis]);
    format!(
        "they do not broadcast: axis -{} has lengths {x} and {y} (NumPy rules: equal, or one of \
         them 1)",
        axis + 1
    )
}

/// Why `from` cannot be broadcast to `to` (NumPy's `broadcast_to`), if it cannot.
fn expand_problem(from: &[usize], to: &[usize]) -> Option<String> {
    if from.len() > to.len() {
        return Some(format!("cannot broadcast rank {} to rank {}", from.len(), to.len()));
    }
    let pad = to.len() - from.len();
    from.iter().enumerate().find(|&(i, &d)| d != 1 && d != to[i + pad]).map(|(i, &d)| {
        format!(
            "axis {} has length {d}, which can only stay {d} or be broadcast from 1 (target {})",
            i + pad,
            to[i + pad]
        )
    })
}

/// Elements of `shape` (the product of its dimensions), or `None` when it overflows `usize`.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Size in bytes of an f32 tensor of `shape`, or `None` when it overflows `usize`.
pub fn checked_bytes(shape: &[usize]) -> Option<usize> {
    checked_bytes_of(shape, DType::F32)
}

/// Size in bytes of a tensor of `shape` and `dtype`, or `None` when it overflows `usize`.
pub fn checked_bytes_of(shape: &[usize], dtype: DType) -> Option<usize> {
    shape.iter().try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
}

impl fmt::Display for Hlir {
    /// One line per node in node order: `%3 = matmul[DEFAULT] %0, %1 : [64, 64]`; shapes are
    /// shown when the whole graph infers, and a named tensor shows its name (`%5 "scores" = ...`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let types = self.infer().ok();
        for n in self.graph.node_indices() {
            let node = &self.graph[n];
            match &node.name {
                Some(name) => write!(f, "%{} \"{}\" = {}", n.index(), name.text, node.op.text())?,
                None => write!(f, "%{} = {}", n.index(), node.op.text())?,
            }
            for (i, a) in self.operands(n).iter().enumerate() {
                write!(f, "{} %{}", if i == 0 { "" } else { "," }, a.index())?;
            }
            match (types.as_ref().and_then(|t| t.get(n.index())), &node.op) {
                (Some(t), _) => write!(f, " : {}", ShapeText(t.shape.clone()))?,
                (None, HlirOp::Input { shape, .. } | HlirOp::Weight { shape, .. }) => {
                    write!(f, " : {}", ShapeText(shape.clone()))?;
                }
                (None, _) => {}
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
