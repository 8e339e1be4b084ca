//! The e-graph language over the HLIR (the two conversions, HLIR -> e-graph and one chosen
//! e-node per e-class -> HLIR, are in [`super::egraph`]).
//!
//! The language is Luminal's idea of running egg over the high-level graph, built from the op
//! table ([`crate::ops`]) rather than by hand: every HLIR primitive is an e-node carrying its
//! op as data (`Unary(UnaryOp, Id)`, `Binary(BinaryOp, [Id; 2])`, `Reduce(ReduceSpec, Id)`,
//! `Move(MoveOp, Id)`, ...), so patterns read `(relu (matmul ?a ?w))` and a new elementwise
//! op needs no edit here. Beside the plain `matmul` are the fused cuBLASLt forms (`lt_bias`,
//! `lt_relu`, `lt_relu_bias`, `lt_gelu`, `lt_gelu_bias`: one matmul launch with that
//! epilogue), leaves named after the program's inputs and weights, constants by value, and one
//! `outputs` root whose children are the program outputs in order. Putting every output under
//! one root keeps shared subterms shared: a matmul used by two outputs is one e-class,
//! extracted once.

use std::fmt;
use std::str::FromStr;

use egg::{Id, Symbol};

use crate::conv::{ConvEpilogue, ConvSpec};
use crate::dtype::Scalar;
use crate::hlir::{HlirOp, MoveOp};
use crate::llir::Epilogue;
use crate::ops::{BinaryOp, ElemOp, ReduceOp, UnaryOp, UnknownOp};

/// A reduction's e-node data: the op and the axis, written `sum:1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReduceSpec {
    /// Sum or max.
    pub op: ReduceOp,
    /// The reduced axis.
    pub axis: usize,
}

impl fmt::Display for ReduceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.op, self.axis)
    }
}

impl FromStr for ReduceSpec {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnknownOp(s.to_string());
        let (op, axis) = s.split_once(':').ok_or_else(bad)?;
        Ok(Self { op: op.parse()?, axis: axis.parse().map_err(|_| bad())? })
    }
}

/// A concat's e-node data: the axis, written `concat:1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConcatAxis(pub usize);

impl fmt::Display for ConcatAxis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "concat:{}", self.0)
    }
}

impl FromStr for ConcatAxis {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix("concat:")
            .and_then(|a| a.parse().ok())
            .map(ConcatAxis)
            .ok_or_else(|| UnknownOp(s.to_string()))
    }
}

/// A constant's e-node data, written `const:0.125` (so an input named `0.125` stays a leaf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstValue(pub Scalar);

impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "const:{}", self.0)
    }
}

impl FromStr for ConstValue {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix("const:")
            .and_then(|v| v.parse().ok())
            .map(ConstValue)
            .ok_or_else(|| UnknownOp(s.to_string()))
    }
}

/// The data of an e-node for an HLIR op the language has no form of its own for (a
/// convolution, a take, and any op added later): the op itself, written as its HLIR text
/// (`conv[s=1,1 d=1,1 p=0,0,0,0 g=1 none]`). Patterns never name such ops (the text does not
/// parse back), so rules that rewrite them are written in Rust ([`super::rules`]); every
/// other stage (types, costs, extraction, conversion back to the HLIR) handles them through
/// the HLIR op, with no code per op.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpData(pub HlirOp);

impl fmt::Display for OpData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text())
    }
}

impl FromStr for OpData {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Err(UnknownOp(s.to_string()))
    }
}

egg::define_language! {
    /// One e-node of the fusion e-graph. Computed tensors are row-major f32.
    ///
    /// - `matmul a w`: `a [..., M, K] x w [..., K, N]`, cuBLASLt epilogue DEFAULT.
    /// - `lt_bias a w b`: `a x w + b[N]` in one cuBLASLt call (epilogue BIAS).
    /// - `lt_relu a w`, `lt_gelu a w`: epilogues RELU and GELU, no bias.
    /// - `lt_relu_bias a w b`, `lt_gelu_bias a w b`: `act(a x w + b[N])` (RELU_BIAS, GELU_BIAS).
    /// - `gather table ids`; `select c a b`.
    /// - `outputs y0 y1 ...`: the root, the program outputs in output order (no value itself).
    /// - `Unary(op, x)` (`relu x`, `exp x`, ...) and `Binary(op, [a, b])` (`add a b`, ...):
    ///   elementwise ops by their table name, operands broadcast NumPy-style.
    /// - `Reduce(sum:1, x)`, `Move(reshape:2,3, x)`, `Concat(concat:0, [..])`: the other
    ///   primitives with their parameters.
    /// - `Const(const:0.5)`: a scalar constant; a leaf: an input or weight, by its (unique)
    ///   name.
    /// - `Op(op, [..])`: any other compute op ([`OpData`]: convolutions, takes).
    #[allow(missing_docs)]
    pub enum FusionLang {
        "matmul" = Matmul([Id; 2]),
        "lt_bias" = LtBias([Id; 3]),
        "lt_relu" = LtRelu([Id; 2]),
        "lt_relu_bias" = LtReluBias([Id; 3]),
        "lt_gelu" = LtGelu([Id; 2]),
        "lt_gelu_bias" = LtGeluBias([Id; 3]),
        "gather" = Gather([Id; 2]),
        "select" = Select([Id; 3]),
        "outputs" = Outputs(Box<[Id]>),
        Unary(UnaryOp, Id),
        Binary(BinaryOp, [Id; 2]),
        Reduce(ReduceSpec, Id),
        Move(MoveOp, Id),
        Concat(ConcatAxis, Box<[Id]>),
        Const(ConstValue),
        Op(OpData, Box<[Id]>),
        Leaf(Symbol),
    }
}

impl FusionLang {
    /// The cuBLASLt epilogue of a matmul e-node (`matmul` is DEFAULT), `None` for other ops.
    pub fn epilogue(&self) -> Option<Epilogue> {
        match self {
            FusionLang::Matmul(_) => Some(Epilogue::Default),
            FusionLang::LtBias(_) => Some(Epilogue::Bias),
            FusionLang::LtRelu(_) => Some(Epilogue::Relu),
            FusionLang::LtReluBias(_) => Some(Epilogue::ReluBias),
            FusionLang::LtGelu(_) => Some(Epilogue::Gelu),
            FusionLang::LtGeluBias(_) => Some(Epilogue::GeluBias),
            _ => None,
        }
    }

    /// The matmul e-node with `epilogue` over `a`, `w` and, for the bias epilogues, `bias`
    /// (ignored otherwise).
    pub fn matmul(epilogue: Epilogue, a: Id, w: Id, bias: Id) -> FusionLang {
        match epilogue {
            Epilogue::Default => FusionLang::Matmul([a, w]),
            Epilogue::Bias => FusionLang::LtBias([a, w, bias]),
            Epilogue::Relu => FusionLang::LtRelu([a, w]),
            Epilogue::ReluBias => FusionLang::LtReluBias([a, w, bias]),
            Epilogue::Gelu => FusionLang::LtGelu([a, w]),
            Epilogue::GeluBias => FusionLang::LtGeluBias([a, w, bias]),
        }
    }

    /// Whether the e-node is a fused matmul (any epilogue but DEFAULT) or a convolution with
    /// a fused residual or activation ([`FusionLang::conv_parts`]; its bias is the
    /// convolution's own operand, as ONNX's `Conv` has it, not a fusion).
    pub fn is_fused(&self) -> bool {
        self.epilogue().is_some_and(|e| e != Epilogue::Default)
            || self.conv_parts().is_some_and(|(_, e, _)| e.residual || e.activation.is_some())
    }

    /// The fused forms the e-node uses, as a fusion policy gates them
    /// ([`super::cost::Fusions`]): `(additive, activation)`, where additive is a matmul's BIAS
    /// epilogue or a convolution's residual add, and activation a matmul's RELU/GELU epilogue
    /// or a convolution's activation. `(false, false)` for every unfused e-node.
    pub fn fused_kinds(&self) -> (bool, bool) {
        if let Some(e) = self.epilogue() {
            return (e.has_bias(), e.activation().is_some());
        }
        match self.conv_parts() {
            Some((_, e, _)) => (e.residual, e.activation.is_some()),
            None => (false, false),
        }
    }

    /// A convolution e-node's spec, epilogue and children (x, w, then bias and residual as
    /// the epilogue names them); `None` for any other e-node.
    pub fn conv_parts(&self) -> Option<(&ConvSpec, ConvEpilogue, &[Id])> {
        match self {
            FusionLang::Op(OpData(HlirOp::Conv { spec, epilogue }), ids) => {
                Some((spec, *epilogue, ids))
            }
            _ => None,
        }
    }

    /// The convolution e-node of `spec` with `epilogue` over `children`.
    pub fn conv(spec: &ConvSpec, epilogue: ConvEpilogue, children: &[Id]) -> FusionLang {
        FusionLang::Op(OpData(HlirOp::Conv { spec: spec.clone(), epilogue }), children.into())
    }

    /// The e-node of HLIR compute or movement op `op` over `children` (operand order), or
    /// `None` when `op` is a leaf or an output, or the arity does not match.
    pub fn from_op(op: &HlirOp, children: &[Id]) -> Option<FusionLang> {
        Some(match (op, children) {
            (HlirOp::Matmul { epilogue }, &[a, w]) if !epilogue.has_bias() => {
                FusionLang::matmul(*epilogue, a, w, w)
            }
            (HlirOp::Matmul { epilogue }, &[a, w, b]) if epilogue.has_bias() => {
                FusionLang::matmul(*epilogue, a, w, b)
            }
            (HlirOp::Map(ElemOp::Unary(u)), &[a]) => FusionLang::Unary(*u, a),
            (HlirOp::Map(ElemOp::Binary(b)), &[x, y]) => FusionLang::Binary(*b, [x, y]),
            (HlirOp::Map(ElemOp::Select), &[c, a, b]) => FusionLang::Select([c, a, b]),
            (HlirOp::Reduce { op, axis }, &[a]) => {
                FusionLang::Reduce(ReduceSpec { op: *op, axis: *axis }, a)
            }
            (HlirOp::Move(m), &[a]) => FusionLang::Move(m.clone(), a),
            (HlirOp::Gather, &[t, i]) => FusionLang::Gather([t, i]),
            (HlirOp::Concat { axis }, ids) if !ids.is_empty() => {
                FusionLang::Concat(ConcatAxis(*axis), ids.into())
            }
            (HlirOp::Constant { value }, []) => FusionLang::Const(ConstValue(*value)),
            // Every other compute op: carried whole.
            (op, ids) if op.is_compute() && !op.is_variadic() && ids.len() == op.arity() => {
                FusionLang::Op(OpData(op.clone()), ids.into())
            }
            _ => return None,
        })
    }

    /// The HLIR op of a non-leaf, non-root e-node.
    pub fn to_op(&self) -> Option<HlirOp> {
        if let Some(epilogue) = self.epilogue() {
            return Some(HlirOp::Matmul { epilogue });
        }
        Some(match self {
            FusionLang::Unary(u, _) => HlirOp::Map(ElemOp::Unary(*u)),
            FusionLang::Binary(b, _) => HlirOp::Map(ElemOp::Binary(*b)),
            FusionLang::Select(_) => HlirOp::Map(ElemOp::Select),
            FusionLang::Reduce(spec, _) => HlirOp::Reduce { op: spec.op, axis: spec.axis },
            FusionLang::Move(m, _) => HlirOp::Move(m.clone()),
            FusionLang::Gather(_) => HlirOp::Gather,
            FusionLang::Concat(axis, _) => HlirOp::Concat { axis: axis.0 },
            FusionLang::Const(v) => HlirOp::Constant { value: v.0 },
            FusionLang::Op(data, _) => data.0.clone(),
            _ => return None,
        })
    }

    /// Whether the e-node launches a kernel when lowered (movement ops, leaves, constants and
    /// the root do not).
    pub fn is_kernel(&self) -> bool {
        !matches!(
            self,
            FusionLang::Move(..)
                | FusionLang::Const(_)
                | FusionLang::Leaf(_)
                | FusionLang::Outputs(_)
        )
    }
}
