//! The e-class analysis: every e-class's shape, and how a broadcast operand lines up with the
//! tensor it is added to. The fusion rules' legality conditions read it.
//!
//! This is egg's `Analysis` used the way TVM and XLA check a bias before folding it into a
//! GEMM epilogue: cuBLASLt's BIAS epilogues add a vector of length N to every row of the
//! [M, N] output, so the bias must be `[N]` and index the LAST output axis. A `[M, 1]` row
//! bias, a scalar, or anything that only matches N by element count is refused.

use std::collections::BTreeMap;

use egg::{Analysis, DidMerge, Id};

use super::lang::{FusionEGraph, FusionLang};
use crate::hlir::Shape;

/// What the analysis knows about one e-class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassData {
    /// Shape in elements (row-major f32); `None` for an ill-shaped term (the rules never fire
    /// on it and extraction never picks it) and for the `outputs` root.
    pub shape: Option<Shape>,
}

/// Shapes of the leaves (inputs and weights by name); the analysis derives every other
/// e-class's shape from them.
#[derive(Debug, Clone, Default)]
pub struct ShapeAnalysis {
    leaves: BTreeMap<String, Shape>,
}

impl ShapeAnalysis {
    /// An analysis whose leaf `name` has shape `leaves[name]` (elements). A leaf missing from
    /// the map is ill-shaped.
    pub fn new(leaves: BTreeMap<String, Shape>) -> Self {
        Self { leaves }
    }

    /// The shape of leaf `name`, if known.
    pub fn leaf_shape(&self, name: &str) -> Option<&Shape> {
        self.leaves.get(name)
    }
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
/// axis of the `[M, N]` matmul output `out`. Refuses a `[M, 1]` row bias even on a square
/// output, a `[1, N]` (rank 2, not cuBLASLt's vector), and a scalar unless N = 1.
pub fn bias_is_fusable(bias: &[usize], out: &[usize]) -> bool {
    out.len() == 2 && bias.len() == 1 && bias_broadcast(bias, out) == BiasBroadcast::LastAxis
}

/// The `[M, N]` shape of `a [M, K] x w [K, N]`, or `None` when the operands are not rank 2
/// with equal inner dimensions.
pub fn matmul_shape(a: &[usize], w: &[usize]) -> Option<Shape> {
    match (a, w) {
        ([m, k], [k2, n]) if k == k2 => Some(vec![*m, *n]),
        _ => None,
    }
}

/// The shape of `a + b` under broadcasting, or `None` when they do not broadcast.
pub fn add_shape(a: &[usize], b: &[usize]) -> Option<Shape> {
    if bias_broadcast(b, a) != BiasBroadcast::Incompatible {
        Some(a.to_vec())
    } else if bias_broadcast(a, b) != BiasBroadcast::Incompatible {
        Some(b.to_vec())
    } else {
        None
    }
}

fn shape_of(egraph: &FusionEGraph, id: Id) -> Option<&Shape> {
    egraph[id].data.shape.as_ref()
}

impl Analysis<FusionLang> for ShapeAnalysis {
    type Data = ClassData;

    fn make(egraph: &mut FusionEGraph, enode: &FusionLang, _id: Id) -> ClassData {
        let s = |id: &Id| shape_of(egraph, *id);
        let shape = match enode {
            FusionLang::Leaf(name) => egraph.analysis.leaf_shape(name.as_str()).cloned(),
            FusionLang::Matmul([a, w])
            | FusionLang::LtRelu([a, w])
            | FusionLang::LtGelu([a, w]) => s(a).zip(s(w)).and_then(|(a, w)| matmul_shape(a, w)),
            FusionLang::LtBias([a, w, b])
            | FusionLang::LtReluBias([a, w, b])
            | FusionLang::LtGeluBias([a, w, b]) => {
                let out = s(a).zip(s(w)).and_then(|(a, w)| matmul_shape(a, w));
                match (out, s(b)) {
                    (Some(out), Some(b)) if bias_is_fusable(b, &out) => Some(out),
                    _ => None,
                }
            }
            FusionLang::Add([a, b]) => s(a).zip(s(b)).and_then(|(a, b)| add_shape(a, b)),
            FusionLang::Relu(a) | FusionLang::Gelu(a) => s(a).cloned(),
            FusionLang::Outputs(_) => None,
        };
        ClassData { shape }
    }

    fn merge(&mut self, to: &mut ClassData, from: ClassData) -> DidMerge {
        // Sound rules only merge equal values, which have equal shapes; a known shape wins
        // over an unknown one, and `to` is kept otherwise.
        match (&to.shape, from.shape) {
            (None, Some(shape)) => {
                to.shape = Some(shape);
                DidMerge(true, false)
            }
            (Some(_), None) => DidMerge(false, true),
            (a, b) => DidMerge(false, a.as_ref() != b.as_ref()),
        }
    }
}
