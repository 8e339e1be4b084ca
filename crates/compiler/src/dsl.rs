//! The Rust DSL: a [`Graph`] of tensors built with infallible calls, like Luminal's `Graph`.
//!
//! ```
//! use lumen_compiler::{CompileOptions, Graph};
//!
//! let mut cx = Graph::new();
//! let x = cx.input("x", [64, 256]); // f32, row-major
//! let w = cx.weight("w", [256, 64]);
//! let b = cx.weight("b", [64]);
//! let _y = (x.matmul(w) + b).relu().output("y");
//! let program = cx.compile(&CompileOptions::default()).unwrap();
//! assert_eq!(program.figures.slab_bytes, 1_196_288);
//! ```
//!
//! The primitives are the methods here; softmax, layer norm, attention and the other
//! composites are DSL functions over them ([`crate::composite`]). Every call records the
//! caller's source line (`#[track_caller]`) and infers the new tensor's shape at once, so
//! composites can read shapes ([`Tensor::shape`]); an error (shapes that do not broadcast,
//! an axis out of range) is recorded, never panicked, and reported by [`Graph::compile`] with
//! the user's line. Axes may be negative, counting from the last (`-1` is the last axis).
//!
//! Binary ops broadcast NumPy-style (`[64, 64] + [64]`, `[2, 1, 5] * [3, 1]`) and take f32
//! scalars on either side through the operators: `x * 0.125`, `x + 1e-5`, `1.0 - x`, `-x`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::rc::Rc;

use petgraph::graph::NodeIndex;

use crate::dtype::{DType, Scalar};
use crate::error::{CompileError, SourceLocation};
use crate::hlir::{Hlir, HlirNode, HlirOp, MoveOp, TensorName, TensorType, infer_type};
use crate::llir::Epilogue;
use crate::names::tensor_name_problem;
use crate::ops::{BinaryOp, ElemOp, IntOp, ReduceOp, ScatterReduction, UnaryOp};
use crate::symbols::{Dim, Symbol, SymbolDecl, SymbolId};

#[derive(Debug, Default)]
struct Inner {
    hlir: Hlir,
    /// Each node's type, inferred when it was added; `None` after an error.
    types: Vec<Option<TensorType>>,
    /// Errors the DSL calls recorded, in call order (the first is reported).
    errors: Vec<CompileError>,
    /// The constant node of each value, so `x * 0.5 + y * 0.5` has one `0.5`.
    constants: BTreeMap<Scalar, NodeIndex>,
}

impl Inner {
    /// Adds a node and infers its type from its operands'. `poisoned` (a bad argument already
    /// recorded) leaves the type unknown without a second error.
    fn push(
        &mut self,
        op: HlirOp,
        operands: &[NodeIndex],
        location: SourceLocation,
        poisoned: bool,
    ) -> NodeIndex {
        let types: Option<Vec<&TensorType>> =
            operands.iter().map(|a| self.types.get(a.index()).and_then(Option::as_ref)).collect();
        let inferred = match types {
            Some(types) if !poisoned => {
                let node = HlirNode { op: op.clone(), location, name: None };
                match infer_type(&node, &types) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        self.errors.push(e);
                        None
                    }
                }
            }
            _ => None,
        };
        let node = self.hlir.add_op(op, operands, location);
        self.types.push(inferred);
        node
    }
}

type Shared = Rc<RefCell<Inner>>;

/// A tensor program under construction. Cheap to clone (a shared handle); single-threaded.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    inner: Shared,
}

/// A handle to a tensor of a [`Graph`]: an HLIR node. Cheap to clone; the ops build new nodes.
#[derive(Debug, Clone)]
pub struct Tensor {
    graph: Shared,
    node: NodeIndex,
}

impl Graph {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares an f32 input of `shape` (elements, row-major), uploaded on every execute.
    /// Inputs and weights are uploaded in declaration order: the program's signature.
    #[track_caller]
    pub fn input(&mut self, name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Tensor {
        self.input_typed(name, shape, DType::F32)
    }

    /// Declares an input of `shape` and element type `dtype`: f32, or i32/i64 indices for
    /// [`Tensor::gather`] (token ids).
    #[track_caller]
    pub fn input_typed(
        &mut self,
        name: impl Into<String>,
        shape: impl Into<Vec<usize>>,
        dtype: DType,
    ) -> Tensor {
        let op = HlirOp::Input { name: name.into(), shape: shape.into(), dtype };
        self.leaf(op, SourceLocation::caller())
    }

    /// Declares a symbolic dimension `name` that each execute binds to a value in
    /// `1..=bound` ([`crate::symbolic`]): the program is compiled, fused and planned once at
    /// the bound. Use it in [`Graph::input_dims`]; every symbol must appear in some input
    /// (the inputs' shapes bind it). A bound of 0 or a name used twice is recorded as an error.
    #[track_caller]
    pub fn symbol(&mut self, name: impl Into<String>, bound: usize) -> Symbol {
        let location = SourceLocation::caller();
        let name = name.into();
        let mut inner = self.inner.borrow_mut();
        let decls = &mut inner.hlir.symbols.decls;
        let problem = if bound == 0 {
            Some("given a bound of 0 (a symbol's bound is at least 1)".to_string())
        } else if decls.iter().any(|d| d.name == name) {
            Some("already used".to_string())
        } else {
            tensor_name_problem(&name)
        };
        let id = SymbolId(decls.len());
        decls.push(SymbolDecl { name: name.clone(), bound: bound.max(1) });
        inner.hlir.symbols.locations.push(location);
        if let Some(problem) = problem {
            inner.errors.push(CompileError::BadName { kind: "symbol", name, problem, location });
        }
        Symbol { id, bound: bound.max(1) }
    }

    /// Declares an input of element type `dtype` whose axes are fixed lengths or symbols
    /// ([`Graph::symbol`]), e.g. `[seq.into(), Dim::Fixed(512)]`: the program sees the bound
    /// shape; each execute gives the input at its live shape, which binds the symbols.
    #[track_caller]
    pub fn input_dims(
        &mut self,
        name: impl Into<String>,
        dims: impl IntoIterator<Item = Dim>,
        dtype: DType,
    ) -> Tensor {
        let name = name.into();
        let dims: Vec<Dim> = dims.into_iter().collect();
        let shape: Vec<usize> = dims.iter().map(|d| d.bound()).collect();
        let axes: Vec<Option<SymbolId>> = dims.iter().map(|d| d.symbol()).collect();
        if axes.iter().any(Option::is_some) {
            self.inner.borrow_mut().hlir.symbols.inputs.insert(name.clone(), axes);
        }
        let op = HlirOp::Input { name, shape, dtype };
        self.leaf(op, SourceLocation::caller())
    }

    /// Declares a state: an f32 tensor the runtime owns and keeps from one execute to the next
    /// ([`crate::BufferRole::State`]: zero at prepare, never given by the caller), of `dims`
    /// (fixed lengths or symbols, as [`Graph::input_dims`]; the first axis holds its rows, and
    /// with a symbol there the live rows are a prefix of the planned bytes). Written only by
    /// [`Tensor::append_rows`]; a KV cache is one, `[positions, kv_heads, head_dim]`.
    #[track_caller]
    pub fn state(
        &mut self,
        name: impl Into<String>,
        dims: impl IntoIterator<Item = Dim>,
    ) -> Tensor {
        let name = name.into();
        self.inner.borrow_mut().hlir.states.insert(name.clone());
        let location = SourceLocation::caller();
        let dims: Vec<Dim> = dims.into_iter().collect();
        let shape: Vec<usize> = dims.iter().map(|d| d.bound()).collect();
        let axes: Vec<Option<SymbolId>> = dims.iter().map(|d| d.symbol()).collect();
        if axes.iter().any(Option::is_some) {
            self.inner.borrow_mut().hlir.symbols.inputs.insert(name.clone(), axes);
        }
        self.leaf(HlirOp::Input { name, shape, dtype: DType::F32 }, location)
    }

    /// Declares an f32 weight of `shape` (elements, row-major), uploaded at prepare; again on
    /// every execute when the plan lets a later buffer reuse its bytes (see
    /// [`crate::CompileOptions::resident_weights`]).
    #[track_caller]
    pub fn weight(&mut self, name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Tensor {
        self.weight_typed(name, shape, DType::F32)
    }

    /// Declares a weight of `shape` and element type `dtype` (f32, or i32/i64 indices).
    #[track_caller]
    pub fn weight_typed(
        &mut self,
        name: impl Into<String>,
        shape: impl Into<Vec<usize>>,
        dtype: DType,
    ) -> Tensor {
        let op = HlirOp::Weight { name: name.into(), shape: shape.into(), dtype };
        self.leaf(op, SourceLocation::caller())
    }

    /// The f32 scalar `value` (shape `[]`), broadcast by whatever op uses it. One node per
    /// distinct value (by bits): the program carries it and the runtime uploads it at prepare.
    #[track_caller]
    pub fn constant(&self, value: f32) -> Tensor {
        let location = SourceLocation::caller();
        let scalar = Scalar::new(value);
        let mut inner = self.inner.borrow_mut();
        let node = match inner.constants.get(&scalar) {
            Some(&node) => node,
            None => {
                let node = inner.push(HlirOp::Constant { value: scalar }, &[], location, false);
                inner.constants.insert(scalar, node);
                node
            }
        };
        Tensor { graph: Rc::clone(&self.inner), node }
    }

    /// `tensors` joined along `axis` (equal shapes on every other axis); a copy into one new
    /// tensor. At least one tensor.
    #[track_caller]
    pub fn concat<T: std::borrow::Borrow<Tensor>>(&self, tensors: &[T], axis: isize) -> Tensor {
        let location = SourceLocation::caller();
        let Some(first) = tensors.first() else {
            let mut inner = self.inner.borrow_mut();
            inner.errors.push(CompileError::Arity { op: "concat", expected: 1, got: 0, location });
            let node = inner.push(HlirOp::Concat { axis: 0 }, &[], location, true);
            return Tensor { graph: Rc::clone(&self.inner), node };
        };
        let first: &Tensor = std::borrow::Borrow::borrow(first);
        let (axis, poisoned) = first.axis_at("concat", axis, 0, location);
        let others: Vec<&Tensor> = tensors[1..].iter().map(std::borrow::Borrow::borrow).collect();
        first.op_at(HlirOp::Concat { axis }, &others, location, poisoned)
    }

    fn leaf(&mut self, op: HlirOp, location: SourceLocation) -> Tensor {
        let node = self.inner.borrow_mut().push(op, &[], location, false);
        Tensor { graph: Rc::clone(&self.inner), node }
    }

    /// A snapshot of the program's HLIR (later DSL calls do not change it).
    pub fn hlir(&self) -> Hlir {
        self.inner.borrow().hlir.clone()
    }

    /// Records `err` for [`Graph::compile`] to report (composites checking their own
    /// arguments).
    pub(crate) fn record(&self, err: CompileError) {
        self.inner.borrow_mut().errors.push(err);
    }

    /// The first error a DSL call recorded (shapes that do not combine, an axis out of range,
    /// a tensor of another graph), if any; [`Graph::compile`] reports it. Names are checked
    /// at compile time by [`Hlir::validate`].
    pub fn recorded_error(&self) -> Option<CompileError> {
        self.inner.borrow().errors.first().cloned()
    }
}

/// A right-hand operand of a binary op: a tensor, or an f32 scalar made a constant of the
/// tensor's graph.
pub trait IntoOperand {
    /// The operand as a tensor of `graph`.
    fn into_operand(self, graph: &Tensor) -> Tensor;
}

impl IntoOperand for Tensor {
    fn into_operand(self, _: &Tensor) -> Tensor {
        self
    }
}

impl IntoOperand for &Tensor {
    fn into_operand(self, _: &Tensor) -> Tensor {
        self.clone()
    }
}

impl IntoOperand for f32 {
    #[track_caller]
    fn into_operand(self, like: &Tensor) -> Tensor {
        like.graph().constant(self)
    }
}

impl Tensor {
    /// The tensor's HLIR node.
    pub fn node(&self) -> NodeIndex {
        self.node
    }

    /// The graph the tensor belongs to.
    pub fn graph(&self) -> Graph {
        Graph { inner: Rc::clone(&self.graph) }
    }

    /// The tensor's shape in elements, or `None` when an error upstream left it unknown.
    pub fn shape(&self) -> Option<Vec<usize>> {
        self.graph.borrow().types.get(self.node.index())?.as_ref().map(|t| t.shape.clone())
    }

    /// The tensor's element type, or `None` when an error upstream left it unknown.
    pub fn dtype(&self) -> Option<DType> {
        self.graph.borrow().types.get(self.node.index())?.as_ref().map(|t| t.dtype)
    }

    /// Axes, or `None` when unknown.
    pub fn rank(&self) -> Option<usize> {
        self.shape().map(|s| s.len())
    }

    fn op_at(
        &self,
        op: HlirOp,
        others: &[&Tensor],
        location: SourceLocation,
        poisoned: bool,
    ) -> Tensor {
        let mut inner = self.graph.borrow_mut();
        let mut operands = vec![self.node];
        let mut foreign = false;
        for t in others {
            if Rc::ptr_eq(&t.graph, &self.graph) {
                operands.push(t.node);
            } else {
                // Keep the call infallible: compile reports it (from either graph: the result
                // lands in this one, the user may compile the other), and the node's missing
                // operand makes the HLIR invalid rather than silently different.
                let err = CompileError::ForeignTensor { op: op.name(), location };
                t.graph.borrow_mut().errors.push(err.clone());
                inner.errors.push(err);
                foreign = true;
            }
        }
        let node = inner.push(op, &operands, location, poisoned || foreign);
        Tensor { graph: Rc::clone(&self.graph), node }
    }

    #[track_caller]
    pub(crate) fn op(&self, op: HlirOp, others: &[&Tensor]) -> Tensor {
        self.op_at(op, others, SourceLocation::caller(), false)
    }

    /// `axis` (negative counts from the last) as an index into a tensor of `rank + extra`
    /// axes, and whether it was bad (then recorded as [`CompileError::AxisOutOfRange`]).
    pub(crate) fn axis_at(
        &self,
        op: &'static str,
        axis: isize,
        extra: usize,
        location: SourceLocation,
    ) -> (usize, bool) {
        let Some(rank) = self.rank() else { return (0, true) };
        let rank = rank + extra;
        let resolved =
            if axis < 0 { rank.checked_sub(axis.unsigned_abs()) } else { Some(axis as usize) };
        match resolved {
            Some(a) if a < rank => (a, false),
            _ => {
                self.graph.borrow_mut().errors.push(CompileError::AxisOutOfRange {
                    op,
                    axis,
                    rank,
                    location,
                });
                (0, true)
            }
        }
    }

    #[track_caller]
    fn unary(&self, op: UnaryOp) -> Tensor {
        self.op(HlirOp::Map(ElemOp::Unary(op)), &[])
    }

    #[track_caller]
    fn binary(&self, op: BinaryOp, rhs: impl IntoOperand) -> Tensor {
        let location = SourceLocation::caller();
        let rhs = rhs.into_operand(self);
        self.op_at(HlirOp::Map(ElemOp::Binary(op)), &[&rhs], location, false)
    }

    /// `self [..., M, K] x rhs [..., K, N] -> [..., M, N]` (cuBLASLt matmul, epilogue
    /// DEFAULT). Batch axes broadcast NumPy-style, so a 2-D weight multiplies every matrix of
    /// a 3-D activation as one GEMM. A transposed operand (`k.transpose(-1, -2)`) is read
    /// through its view, never copied. A shape mismatch is reported by `compile`.
    #[track_caller]
    pub fn matmul(&self, rhs: impl std::borrow::Borrow<Tensor>) -> Tensor {
        let rhs: &Tensor = std::borrow::Borrow::borrow(&rhs);
        self.op(HlirOp::Matmul { epilogue: Epilogue::Default }, &[rhs])
    }

    /// Elementwise `-x`.
    #[track_caller]
    pub fn neg(&self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }

    /// Elementwise `e^x`.
    #[track_caller]
    pub fn exp(&self) -> Tensor {
        self.unary(UnaryOp::Exp)
    }

    /// Elementwise natural log.
    #[track_caller]
    pub fn log(&self) -> Tensor {
        self.unary(UnaryOp::Log)
    }

    /// Elementwise square root.
    #[track_caller]
    pub fn sqrt(&self) -> Tensor {
        self.unary(UnaryOp::Sqrt)
    }

    /// Elementwise `1 / x`.
    #[track_caller]
    pub fn recip(&self) -> Tensor {
        self.unary(UnaryOp::Recip)
    }

    /// Elementwise hyperbolic tangent.
    #[track_caller]
    pub fn tanh(&self) -> Tensor {
        self.unary(UnaryOp::Tanh)
    }

    /// Elementwise error function.
    #[track_caller]
    pub fn erf(&self) -> Tensor {
        self.unary(UnaryOp::Erf)
    }

    /// Elementwise sine of radians (rotary position embeddings' tables).
    #[track_caller]
    pub fn sin(&self) -> Tensor {
        self.unary(UnaryOp::Sin)
    }

    /// Elementwise cosine of radians.
    #[track_caller]
    pub fn cos(&self) -> Tensor {
        self.unary(UnaryOp::Cos)
    }

    /// Any unary row of the op table, elementwise (`x.apply(UnaryOp::Atan)`): the ops without a
    /// method of their own (`tan`, `asin`, `acos`, `atan` and the hyperbolic functions). Each
    /// row's NaN, +-0 and infinity contract is on [`UnaryOp`].
    #[track_caller]
    pub fn apply(&self, op: UnaryOp) -> Tensor {
        self.unary(op)
    }

    /// Any row of the integer op table ([`IntOp`]: bitwise and, or, xor, not, shifts),
    /// elementwise and exact at every value: `x.int_op(IntOp::BitAnd, &[&y])`,
    /// `x.int_op(IntOp::BitNot, &[])`. The operands are of one integer type (i32 or i64),
    /// broadcast NumPy-style; the result has that type. A float operand, mixed types or a
    /// wrong number of operands is reported by `compile`.
    #[track_caller]
    pub fn int_op(&self, op: IntOp, others: &[&Tensor]) -> Tensor {
        self.op(HlirOp::IntMap(op), others)
    }

    /// Elementwise `max(x, 0)` (NaN stays NaN).
    #[track_caller]
    pub fn relu(&self) -> Tensor {
        self.unary(UnaryOp::Relu)
    }

    /// Elementwise GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
    /// (cuBLASLt's GELU epilogue; see [`Tensor::gelu_erf`] for the exact form).
    #[track_caller]
    pub fn gelu(&self) -> Tensor {
        self.unary(UnaryOp::Gelu)
    }

    /// Elementwise logistic sigmoid `1 / (1 + e^-x)` (0 at -inf, 1 at +inf; see
    /// [`crate::ops::sigmoid_f32`]).
    #[track_caller]
    pub fn sigmoid(&self) -> Tensor {
        self.unary(UnaryOp::Sigmoid)
    }

    /// Elementwise SiLU (swish) `x * sigmoid(x)` (YOLO's activation; -0 at -inf).
    #[track_caller]
    pub fn silu(&self) -> Tensor {
        self.unary(UnaryOp::Silu)
    }

    /// Elementwise hard swish `x * min(max(x + 3, 0), 6) / 6` (MobileNetV3's activation).
    #[track_caller]
    pub fn hardswish(&self) -> Tensor {
        self.unary(UnaryOp::HardSwish)
    }

    /// Elementwise ReLU6 `min(max(x, 0), 6)` (MobileNetV2's activation; NaN stays NaN).
    #[track_caller]
    pub fn relu6(&self) -> Tensor {
        self.unary(UnaryOp::Relu6)
    }

    /// A row-major copy of the tensor (a no-op for the values; a view becomes a buffer of its
    /// own). Lowering inserts one where a kernel cannot read a view; call it to force one.
    #[track_caller]
    pub fn contiguous(&self) -> Tensor {
        match self.dtype() {
            // An integer tensor's typed copy.
            Some(dtype @ (DType::I32 | DType::I64)) => self.cast(dtype),
            _ => self.unary(UnaryOp::Contiguous),
        }
    }

    /// Elementwise NumPy `maximum(self, rhs)` (NaN if either is NaN), broadcasting.
    #[track_caller]
    pub fn maximum(&self, rhs: impl IntoOperand) -> Tensor {
        self.binary(BinaryOp::Maximum, rhs)
    }

    /// Elementwise `self < rhs` as 1.0 or 0.0, broadcasting.
    #[track_caller]
    pub fn less_than(&self, rhs: impl IntoOperand) -> Tensor {
        self.binary(BinaryOp::LessThan, rhs)
    }

    /// Elementwise `self == rhs` as 1.0 or 0.0, broadcasting.
    #[track_caller]
    pub fn equal(&self, rhs: impl IntoOperand) -> Tensor {
        self.binary(BinaryOp::Equal, rhs)
    }

    /// Elementwise `self` to the power `rhs` (C's `powf`: NaN for a negative base with a
    /// non-integer exponent), broadcasting.
    #[track_caller]
    pub fn pow(&self, rhs: impl IntoOperand) -> Tensor {
        self.binary(BinaryOp::Pow, rhs)
    }

    /// Elementwise `self != 0 ? a : b` (this tensor is the condition), broadcasting all three.
    #[track_caller]
    pub fn select(&self, a: impl IntoOperand, b: impl IntoOperand) -> Tensor {
        let location = SourceLocation::caller();
        let (a, b) = (a.into_operand(self), b.into_operand(self));
        self.op_at(HlirOp::Map(ElemOp::Select), &[&a, &b], location, false)
    }

    #[track_caller]
    fn reduce(&self, op: ReduceOp, axis: isize, keepdim: bool) -> Tensor {
        let location = SourceLocation::caller();
        let (axis, poisoned) = self.axis_at(op.name(), axis, 0, location);
        let out = self.op_at(HlirOp::Reduce { op, axis }, &[], location, poisoned);
        if !keepdim || poisoned {
            return out;
        }
        match self.shape() {
            Some(mut shape) => {
                shape[axis] = 1;
                out.op_at(HlirOp::Move(MoveOp::Reshape { shape }), &[], location, false)
            }
            None => out,
        }
    }

    /// The sum over `axis`; `keepdim` keeps the axis with length 1 (for broadcasting back).
    #[track_caller]
    pub fn sum(&self, axis: isize, keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Sum, axis, keepdim)
    }

    /// The maximum over `axis` (NaN if any element is); `keepdim` keeps the axis with length 1.
    #[track_caller]
    pub fn max(&self, axis: isize, keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Max, axis, keepdim)
    }

    /// The same elements in row-major order with `shape` (equal element count): a view when
    /// the strides allow it, else lowering copies first.
    #[track_caller]
    pub fn reshape(&self, shape: impl Into<Vec<usize>>) -> Tensor {
        self.op(HlirOp::Move(MoveOp::Reshape { shape: shape.into() }), &[])
    }

    /// Axes reordered: axis `i` of the result is axis `perm[i]` (negative counts from the
    /// last). A view.
    #[track_caller]
    pub fn permute(&self, perm: &[isize]) -> Tensor {
        let location = SourceLocation::caller();
        let rank = self.rank();
        let resolved: Option<Vec<usize>> = rank.and_then(|r| {
            perm.iter()
                .map(|&p| {
                    let a = if p < 0 { r.checked_sub(p.unsigned_abs()) } else { Some(p as usize) };
                    a.filter(|&a| a < r)
                })
                .collect()
        });
        match (rank, resolved) {
            (Some(_), Some(perm)) => {
                self.op_at(HlirOp::Move(MoveOp::Permute { perm }), &[], location, false)
            }
            (rank, _) => {
                if let Some(rank) = rank {
                    self.graph.borrow_mut().errors.push(CompileError::BadPermutation {
                        perm: perm.to_vec(),
                        rank,
                        location,
                    });
                }
                let perm = Vec::new();
                self.op_at(HlirOp::Move(MoveOp::Permute { perm }), &[], location, true)
            }
        }
    }

    /// Axes `a` and `b` swapped (negative counts from the last): `k.transpose(-1, -2)`. A view.
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        let location = SourceLocation::caller();
        let (a, bad_a) = self.axis_at("transpose", a, 0, location);
        let (b, bad_b) = if bad_a { (0, true) } else { self.axis_at("transpose", b, 0, location) };
        let rank = self.rank().unwrap_or(0);
        let mut perm: Vec<usize> = (0..rank).collect();
        if !(bad_a || bad_b) {
            perm.swap(a, b);
        }
        self.op_at(HlirOp::Move(MoveOp::Permute { perm }), &[], location, bad_a || bad_b)
    }

    /// NumPy's `broadcast_to(shape)`: axes aligned on the right; an axis of length 1 (or a
    /// missing leading axis) repeats. A view with stride 0 on the repeated axes.
    #[track_caller]
    pub fn expand(&self, shape: impl Into<Vec<usize>>) -> Tensor {
        self.op(HlirOp::Move(MoveOp::Expand { shape: shape.into() }), &[])
    }

    /// NumPy's name for [`Tensor::expand`].
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Vec<usize>>) -> Tensor {
        self.expand(shape)
    }

    /// Elements `start..end` of `axis` (negative counts from the last). A view.
    #[track_caller]
    pub fn slice(&self, axis: isize, start: usize, end: usize) -> Tensor {
        let location = SourceLocation::caller();
        let (axis, poisoned) = self.axis_at("slice", axis, 0, location);
        self.op_at(HlirOp::Move(MoveOp::Slice { axis, start, end }), &[], location, poisoned)
    }

    /// Sliding windows along `axis` (negative counts from the last): the axis of length `len`
    /// becomes two, `[count, size]`, window `i` holding elements `i * step + j * dilation`
    /// (`count = (len - (size - 1) * dilation - 1) / step + 1`). A view: overlapping windows
    /// share elements, nothing is copied. Pooling is a window per spatial axis and a reduction
    /// over the window axes ([`Tensor::max_pool`]).
    #[track_caller]
    pub fn window(&self, axis: isize, size: usize, step: usize, dilation: usize) -> Tensor {
        let location = SourceLocation::caller();
        let (axis, poisoned) = self.axis_at("window", axis, 0, location);
        let op = HlirOp::Move(MoveOp::Window { axis, size, step, dilation });
        self.op_at(op, &[], location, poisoned)
    }

    /// A new axis of length 1 at `axis` (of the result; negative counts from the last). A view.
    #[track_caller]
    pub fn unsqueeze(&self, axis: isize) -> Tensor {
        let location = SourceLocation::caller();
        let (axis, poisoned) = self.axis_at("unsqueeze", axis, 1, location);
        let mut shape = self.shape().unwrap_or_default();
        if !poisoned {
            shape.insert(axis, 1);
        }
        self.op_at(HlirOp::Move(MoveOp::Reshape { shape }), &[], location, poisoned)
    }

    /// A convolution ([`crate::conv`], ONNX's `Conv`): `self` is `x [N, C, *spatial]` (1 to 3
    /// spatial axes), `w` the kernels `[OC, C / groups, *kernel]`, `bias` an optional `[OC]`;
    /// the result `[N, OC, *out]` with `out = (in + pads - dilation (k - 1) - 1) / stride + 1`
    /// along each axis. One op with its own kernel (im2col and a GEMM on the CPU), which
    /// fusion can give an activation and a residual add ([`crate::ConvEpilogue`]). Groups that
    /// do not divide the channels, or a kernel larger than the padded input, are reported by
    /// `compile`.
    #[track_caller]
    pub fn conv(
        &self,
        w: impl std::borrow::Borrow<Tensor>,
        bias: Option<&Tensor>,
        spec: &crate::conv::ConvSpec,
    ) -> Tensor {
        let w: &Tensor = std::borrow::Borrow::borrow(&w);
        let epilogue = crate::conv::ConvEpilogue { bias: bias.is_some(), ..Default::default() };
        let mut operands = vec![w];
        operands.extend(bias);
        self.op(HlirOp::Conv { spec: spec.clone(), epilogue }, &operands)
    }

    /// Elements picked along `axis` (negative counts from the last) by `indices`, a 1-D
    /// i32/i64 tensor of length L: the result is `self` with that axis of length L, position
    /// `j` holding slice `indices[j]`, or `fill` where the index is negative ([`HlirOp::Take`]).
    /// An index at or past the axis' length is a runtime error.
    #[track_caller]
    pub fn take(
        &self,
        axis: isize,
        indices: impl std::borrow::Borrow<Tensor>,
        fill: f32,
    ) -> Tensor {
        let location = SourceLocation::caller();
        let indices: &Tensor = std::borrow::Borrow::borrow(&indices);
        let (axis, poisoned) = self.axis_at("take", axis, 0, location);
        let op = HlirOp::Take { axis, fill: Scalar::new(fill) };
        self.op_at(op, &[indices], location, poisoned)
    }

    /// Each element converted to `dtype` (f32, i32 or i64; [`HlirOp::Cast`]): floats to
    /// integers truncate toward zero and saturate (NaN is 0), integers to floats round to
    /// nearest. A program's integer results (a label) leave it this way.
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Tensor {
        self.op(HlirOp::Cast { to: dtype }, &[])
    }

    /// The i64 index of the largest element along `axis` (negative from the last), which is
    /// removed (`keepdim` keeps it with length 1): the first of equal elements, or the last
    /// when `last`; NaN counts as the largest ([`HlirOp::Arg`]).
    #[track_caller]
    pub fn argmax(&self, axis: isize, keepdim: bool, last: bool) -> Tensor {
        self.arg(true, axis, keepdim, last)
    }

    /// [`Tensor::argmax`] for the smallest element.
    #[track_caller]
    pub fn argmin(&self, axis: isize, keepdim: bool, last: bool) -> Tensor {
        self.arg(false, axis, keepdim, last)
    }

    #[track_caller]
    fn arg(&self, max: bool, axis: isize, keepdim: bool, last: bool) -> Tensor {
        let location = SourceLocation::caller();
        let name = if max { "argmax" } else { "argmin" };
        let (axis, poisoned) = self.axis_at(name, axis, 0, location);
        let out = self.op_at(HlirOp::Arg { max, axis, last }, &[], location, poisoned);
        match (keepdim && !poisoned, self.shape()) {
            (true, Some(mut shape)) => {
                shape[axis] = 1;
                out.op_at(HlirOp::Move(MoveOp::Reshape { shape }), &[], location, false)
            }
            _ => out,
        }
    }

    /// The i64 positions of the `k` largest (`largest`) or smallest elements along `axis`
    /// (negative from the last), in order: largest first (or smallest first), equal ones by
    /// position ([`HlirOp::TopK`]). Their values: `x.gather_elements(axis, &indices)`.
    #[track_caller]
    pub fn top_k(&self, axis: isize, k: usize, largest: bool) -> Tensor {
        let location = SourceLocation::caller();
        let (axis, poisoned) = self.axis_at("topk", axis, 0, location);
        self.op_at(HlirOp::TopK { axis, k, largest }, &[], location, poisoned)
    }

    /// Elements picked along `axis` (negative from the last) by `indices`, an i32/i64 tensor
    /// of the same rank: `out[i] = self[i with axis replaced by indices[i]]`, a negative index
    /// counting from the axis' end ([`HlirOp::GatherElements`], PyTorch's `gather`).
    #[track_caller]
    pub fn gather_elements(
        &self,
        axis: isize,
        indices: impl std::borrow::Borrow<Tensor>,
    ) -> Tensor {
        let location = SourceLocation::caller();
        let indices: &Tensor = std::borrow::Borrow::borrow(&indices);
        let (axis, poisoned) = self.axis_at("gather_elements", axis, 0, location);
        self.op_at(HlirOp::GatherElements { axis }, &[indices], location, poisoned)
    }

    /// A copy of `self` (the data: f32, i32 or i64, any shape, row-major) with elements along
    /// `axis` (negative counts from the last) replaced by `updates`, or combined with them by
    /// `reduction` ([`HlirOp::ScatterElements`], ONNX's `ScatterElements`, PyTorch's
    /// `scatter`/`scatter_reduce`).
    ///
    /// Shapes: `indices` is i32/i64 of the data's rank and no longer than the data on any axis
    /// but `axis`; `updates` has the indices' shape and the data's dtype; the result has the
    /// data's shape and dtype. For every position `i` of `updates`, in row-major order,
    /// `out[i with axis replaced by indices[i]] = updates[i]` (or `reduction` of the element
    /// there and `updates[i]`, in the data's type: f32 rounding at each step, integers
    /// wrapping). A negative index counts from the axis' end. With
    /// [`ScatterReduction::None`] and two updates on one element, the last in row-major order
    /// wins, as on ONNX Runtime's CPU (the CUDA runtime keeps an unspecified one of them).
    ///
    /// Errors: a bad axis, dtype or shape is a [`CompileError`] at compile time; an index
    /// outside `-len..len` of the axis is a runtime error naming the indices tensor and the
    /// index (nothing is written out of bounds).
    #[track_caller]
    pub fn scatter_elements(
        &self,
        axis: isize,
        indices: impl std::borrow::Borrow<Tensor>,
        updates: impl std::borrow::Borrow<Tensor>,
        reduction: ScatterReduction,
    ) -> Tensor {
        let location = SourceLocation::caller();
        let indices: &Tensor = std::borrow::Borrow::borrow(&indices);
        let updates: &Tensor = std::borrow::Borrow::borrow(&updates);
        let (axis, poisoned) = self.axis_at("scatter_elements", axis, 0, location);
        let op = HlirOp::ScatterElements { axis, reduction };
        self.op_at(op, &[indices, updates], location, poisoned)
    }

    /// Embedding lookup: `self` is a table `[V, D]`, `ids` an i32/i64 tensor of any shape;
    /// the result `[ids..., D]` holds row `ids[i]` for every id. An id outside `0..V` is a
    /// runtime error naming the ids tensor and the id.
    #[track_caller]
    pub fn gather(&self, ids: impl std::borrow::Borrow<Tensor>) -> Tensor {
        let ids: &Tensor = std::borrow::Borrow::borrow(&ids);
        self.op(HlirOp::Gather, &[ids])
    }

    /// This state ([`Graph::state`], `[R, ...]` f32) with its last `r` rows along axis 0
    /// replaced by `update` (`[r, ...]`, `r <= R`), written in place into the state's
    /// persistent buffer ([`HlirOp::AppendRows`]); returns the state after the write. With a
    /// symbolic `R` (the rows live after this step) and `r` (this step's rows), it appends at
    /// rows `R - r .. R`: a KV cache that never moves its earlier rows. A state is read only
    /// through what this returns, and appended to once per program.
    #[track_caller]
    pub fn append_rows(&self, update: impl std::borrow::Borrow<Tensor>) -> Tensor {
        let update: &Tensor = std::borrow::Borrow::borrow(&update);
        self.op(HlirOp::AppendRows, &[update])
    }

    /// Marks this tensor as the program output `name` (read back after the last launch) and
    /// returns it, so it can still feed other ops.
    #[track_caller]
    pub fn output(&self, name: impl Into<String>) -> Tensor {
        self.op(HlirOp::Output { name: name.into() }, &[]);
        self.clone()
    }

    /// Names the tensor: its buffer keeps `name` in the LLIR, the plan and the dumps instead
    /// of a `t{i}`, so a dump diff after a small program change stays small. The name must be
    /// identifier-like and unique among the program's names (checked by `compile`, at this
    /// call's line). Only a computed tensor has a buffer to name: naming an input, a weight,
    /// a constant or a view (reshape, permute, expand, slice) is an error. An output's name
    /// wins over a tensor name on the same buffer, and when fusion folds the tensor into an
    /// epilogue the fused op's buffer takes the name of the op on top.
    #[track_caller]
    pub fn name(&self, name: impl Into<String>) -> Tensor {
        let location = SourceLocation::caller();
        let text = name.into();
        let mut inner = self.graph.borrow_mut();
        let Some(node) = inner.hlir.graph.node_weight_mut(self.node) else { return self.clone() };
        let what = match &node.op {
            op if op.is_leaf() => Some(format!("{} is not a computed tensor", op.text())),
            HlirOp::Move(m) => Some(format!(
                "a {} is a view, which has no buffer of its own (name the tensor it views, or \
                 call .contiguous() first)",
                m.name()
            )),
            _ => None,
        };
        match what {
            None => node.name = Some(TensorName { text, location }),
            Some(problem) => inner.errors.push(CompileError::BadName {
                kind: "tensor",
                name: text,
                problem,
                location,
            }),
        }
        drop(inner);
        self.clone()
    }
}

/// Implements `$trait` (`a op b`) for every pairing of `Tensor`, `&Tensor` and `f32` with a
/// tensor on at least one side, as `$op` broadcasting. Concrete impls (not a generic `R`), so
/// a float literal (`x * 0.125`) is inferred to be f32.
macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr, $doc:literal) => {
        binary_operator!(@one $trait, $method, $op, $doc, Tensor, Tensor);
        binary_operator!(@one $trait, $method, $op, $doc, Tensor, &Tensor);
        binary_operator!(@one $trait, $method, $op, $doc, Tensor, f32);
        binary_operator!(@one $trait, $method, $op, $doc, &Tensor, Tensor);
        binary_operator!(@one $trait, $method, $op, $doc, &Tensor, &Tensor);
        binary_operator!(@one $trait, $method, $op, $doc, &Tensor, f32);

        #[doc = $doc]
        impl $trait<Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                let lhs = rhs.graph().constant(self);
                lhs.binary($op, rhs)
            }
        }

        #[doc = $doc]
        impl $trait<&Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                let lhs = rhs.graph().constant(self);
                lhs.binary($op, rhs)
            }
        }
    };
    (@one $trait:ident, $method:ident, $op:expr, $doc:literal, $lhs:ty, $rhs:ty) => {
        #[doc = $doc]
        impl $trait<$rhs> for $lhs {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $rhs) -> Tensor {
                self.binary($op, rhs)
            }
        }
    };
}

binary_operator!(
    Add,
    add,
    BinaryOp::Add,
    "`a + b`, broadcasting NumPy-style (a bias `[N]` over the rows of `[M, N]`)."
);
binary_operator!(Sub, sub, BinaryOp::Sub, "`a - b`, broadcasting NumPy-style.");
binary_operator!(Mul, mul, BinaryOp::Mul, "`a * b` elementwise, broadcasting NumPy-style.");
binary_operator!(Div, div, BinaryOp::Div, "`a / b` elementwise, broadcasting NumPy-style.");

/// `-x` elementwise.
impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
}

/// `-x` elementwise.
impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
}
