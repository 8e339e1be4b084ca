//! The e-class analysis: every e-class's type (shape and dtype), and how a broadcast operand
//! lines up with the tensor it is added to. The fusion rules' legality conditions read it.
//! Types come from the HLIR's own shape rules ([`crate::hlir::Hlir::infer`]), applied to each
//! e-node's op: one rule per op, for validation and the e-graph alike.
//!
//! This is egg's `Analysis` used the way TVM and XLA check a bias before folding it into a
//! GEMM epilogue: cuBLASLt's BIAS epilogues add a vector of length N to every row of the
//! [M, N] output, so the bias must be `[N]` and index the LAST output axis. A `[M, 1]` row
//! bias, a scalar, or anything that only matches N by element count is refused.

use std::collections::BTreeMap;

use egg::{Analysis, DidMerge, EGraph, Id, Language};

use super::lang::FusionLang;
use crate::error::SourceLocation;
use crate::hlir::{HlirNode, Shape, TensorType, infer_type};

/// What the analysis knows about one e-class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassData {
    /// Shape in elements (row-major); `None` for an ill-shaped term (the rules never fire on
    /// it and extraction never picks it) and for the `outputs` root.
    pub shape: Option<Shape>,
    /// Element type, with the shape.
    pub dtype: Option<crate::dtype::DType>,
}

/// Types of the leaves (inputs and weights by name); the analysis derives every other
/// e-class's type from them.
#[derive(Debug, Clone, Default)]
pub struct ShapeAnalysis {
    leaves: BTreeMap<String, TensorType>,
}

impl ShapeAnalysis {
    /// An analysis whose leaf `name` has type `leaves[name]`. A leaf missing from the map is
    /// ill-shaped.
    pub fn new(leaves: BTreeMap<String, TensorType>) -> Self {
        Self { leaves }
    }

    /// The shape of leaf `name`, if known.
    pub fn leaf_shape(&self, name: &str) -> Option<&Shape> {
        self.leaves.get(name).map(|t| &t.shape)
    }
}

/// The type of e-node `enode` whose children have the types `children` (in order), by the
/// HLIR's shape rules; `None` when ill-typed.
pub fn enode_type(enode: &FusionLang, children: &[Option<TensorType>]) -> Option<TensorType> {
    let op = enode.to_op()?;
    let children: Option<Vec<&TensorType>> = children.iter().map(Option::as_ref).collect();
    let node = HlirNode { op, location: SourceLocation::caller(), name: None };
    infer_type(&node, &children?).ok()
}

/// How an operand `bias` broadcasts when added to `out` (numpy rules: shapes align on their
/// trailing axes, an axis of length 1 or a missing axis is repeated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BiasBroadcast {
    /// Same shape: an elementwise add, nothing is broadcast.
    Elementwise,
    /// `[N]` added to `[.., N]`: indexes the last axis, repeated over the rows. The only form
    /// cuBLASLt's BIAS epilogues compute.
    LastAxis,
    /// Indexes these axes of `out` (ascending) and repeats over the others, e.g. `[M, 1]` over
    /// `[M, N]` indexes axis 0: one value per row, not per column.
    Axes(Vec<usize>),
    /// One value for every element (`[]`, `[1]`, `[1, 1]` over a larger tensor).
    Scalar,
    /// The shapes do not broadcast (or `bias` has more axes than `out`).
    Incompatible,
}

/// Classifies `bias` against `out` (both shapes in elements); see [`BiasBroadcast`].
pub fn bias_broadcast(bias: &[usize], out: &[usize]) -> BiasBroadcast {
    if bias == out {
        return BiasBroadcast::Elementwise;
    }
    if bias.len() > out.len() {
        return BiasBroadcast::Incompatible;
    }
    // A rank-1 operand aligns with the last axis (numpy), whatever its length: this also
    // covers N = 1, where "indexes" and "repeats" coincide.
    if let ([n], Some(last)) = (bias, out.last())
        && n == last
    {
        return BiasBroadcast::LastAxis;
    }
    let pad = out.len() - bias.len();
    let mut indexed = Vec::new();
    for (axis, &len) in out.iter().enumerate() {
        let d = if axis < pad { 1 } else { bias.get(axis - pad).copied().unwrap_or(1) };
        if d == len && len != 1 {
            indexed.push(axis);
        } else if d != 1 {
            return BiasBroadcast::Incompatible;
        }
    }
    if indexed.is_empty() { BiasBroadcast::Scalar } else { BiasBroadcast::Axes(indexed) }
}

/// The legality condition of every BIAS fusion: `bias` has shape `[N]` and indexes the last
/// axis of the `[..., M, N]` matmul output `out`. Refuses a `[M, 1]` row bias even on a square
/// output, a `[1, N]` (rank 2, not cuBLASLt's vector), and a scalar unless N = 1. (The matmul
/// must also be one GEMM, a 2-D right operand: the HLIR's shape rule for a bias epilogue
/// checks that.)
pub fn bias_is_fusable(bias: &[usize], out: &[usize]) -> bool {
    out.len() >= 2 && bias.len() == 1 && bias_broadcast(bias, out) == BiasBroadcast::LastAxis
}

/// The `[..., M, N]` shape of `a [..., M, K] x w [..., K, N]` (batch axes broadcast), or
/// `None` when the operands are not at least rank 2 with equal inner dimensions.
pub fn matmul_shape(a: &[usize], w: &[usize]) -> Option<Shape> {
    let t = |s: &[usize]| Some(TensorType::f32(s.to_vec()));
    let node = FusionLang::Matmul([Id::from(0usize), Id::from(1usize)]);
    enode_type(&node, &[t(a), t(w)]).map(|t| t.shape)
}

/// The shape of `a + b` under NumPy broadcasting, or `None` when they do not broadcast.
pub fn add_shape(a: &[usize], b: &[usize]) -> Option<Shape> {
    crate::view::broadcast_shapes(a, b)
}

impl Analysis<FusionLang> for ShapeAnalysis {
    type Data = ClassData;

    fn make(egraph: &mut EGraph<FusionLang, Self>, enode: &FusionLang, _id: Id) -> ClassData {
        let t = match enode {
            FusionLang::Leaf(name) => egraph.analysis.leaves.get(name.as_str()).cloned(),
            FusionLang::Outputs(_) => None,
            _ => {
                let children: Vec<Option<TensorType>> = enode
                    .children()
                    .iter()
                    .map(|&c| {
                        let d = &egraph[c].data;
                        d.shape
                            .clone()
                            .zip(d.dtype)
                            .map(|(shape, dtype)| TensorType { shape, dtype })
                    })
                    .collect();
                enode_type(enode, &children)
            }
        };
        match t {
            Some(t) => ClassData { shape: Some(t.shape), dtype: Some(t.dtype) },
            None => ClassData::default(),
        }
    }

    fn merge(&mut self, to: &mut ClassData, from: ClassData) -> DidMerge {
        // Sound rules only merge equal values, which have equal shapes; a known shape wins
        // over an unknown one, and `to` is kept otherwise.
        match (&to.shape, from.shape) {
            (None, Some(shape)) => {
                to.shape = Some(shape);
                to.dtype = from.dtype;
                DidMerge(true, false)
            }
            (Some(_), None) => DidMerge(false, true),
            (a, b) => DidMerge(false, a.as_ref() != b.as_ref()),
        }
    }
}
