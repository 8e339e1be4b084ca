//! The operator table: every ONNX operator lumen imports, by family, with the function that
//! turns one node into DSL calls. One table, so the importer, the error for an operator lumen
//! lacks, and the list users read ([`operators`]) cannot disagree.
//!
//! A family is one file: [`elementwise`], [`movement`] (with the scatters' handlers in
//! [`scatter`]), [`reduce`], [`norm`], [`linalg`], [`conv`], [`pool`], [`resize`],
//! [`recurrent`], [`attention`], [`loss`] (`TfIdfVectorizer`'s handler, a reduction row, in
//! [`tfidf`]; the integer bit operators', elementwise rows, in [`bitwise`]; `DeformConv`'s, a convolution row, in [`deform`]; the spatial attributes
//! convolutions and pools share in [`spatial`]). Each
//! exports its rows as `OPS`; a node whose inputs are all known at import time is folded before
//! its row is consulted ([`crate::fold`]), so the operators that only ever compute shapes
//! (`Shape`, `Size`, `ConstantOfShape`, ...) are listed in [`FOLDED_ONLY`] instead.

mod attention;
mod bitwise;
pub(crate) use bitwise::bit_op;
mod conv;
mod deform;
mod elementwise;
pub(crate) use elementwise::not_bool;
mod linalg;
mod loss;
mod ml;
mod movement;
mod norm;
mod pool;
mod recurrent;
mod reduce;
mod resize;
mod scatter;
mod spatial;
mod tfidf;

use lumen_compiler::Tensor;

use crate::error::OnnxError;
use crate::importer::{Handler, Importer};
use crate::proto::NodeProto;

/// A family of operators, as the user guide groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Arithmetic, activations, comparisons, `Where`, `Clip`, `Cast`.
    Elementwise,
    /// Views (`Reshape`, `Transpose`, `Slice`, ...) and the copies `Concat` and `Gather`.
    Movement,
    /// `Reduce*` and the softmax family.
    Reduction,
    /// `BatchNormalization`, `LayerNormalization`.
    Normalization,
    /// `MatMul`, `Gemm`.
    MatrixProduct,
    /// `Conv`, `ConvTranspose`.
    Convolution,
    /// `MaxPool`, `AveragePool`, `GlobalAveragePool`, `GlobalMaxPool`.
    Pooling,
    /// `Resize`, `Upsample`.
    Resampling,
    /// `LSTM`, `GRU`, `RNN`, unrolled over the sequence.
    Recurrent,
    /// `Attention`: matmuls, masks and a softmax per head.
    Attention,
    /// `NegativeLogLikelihoodLoss`, `SoftmaxCrossEntropyLoss`.
    Loss,
    /// The `ai.onnx.ml` operators of scikit-learn's pipelines.
    Ml,
    /// Operators evaluated at import time only (their inputs must be known then).
    ConstantFolding,
}

impl Family {
    /// The family's name in listings: `elementwise`, `movement`, `reduction`,
    /// `normalization`, `matrix product`, `constant folding`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Movement => "movement",
            Family::Reduction => "reduction",
            Family::Normalization => "normalization",
            Family::MatrixProduct => "matrix product",
            Family::Convolution => "convolution",
            Family::Pooling => "pooling",
            Family::Resampling => "resampling",
            Family::Recurrent => "recurrent",
            Family::Attention => "attention",
            Family::Loss => "loss",
            Family::Ml => "ai.onnx.ml",
            Family::ConstantFolding => "constant folding",
        }
    }
}

/// Operators imported only by folding: a node of one of these whose inputs are not all known
/// at import time is refused, saying so. `NonZero`, `Unique`, `NonMaxSuppression` and
/// `MelWeightMatrix` are among them because their output's shape depends on their input
/// values; those inputs may be graph inputs whose values are given (`crate::data_dependent`).
pub const FOLDED_ONLY: &[&str] = &[
    "Constant",
    "ConstantOfShape",
    "Shape",
    "Size",
    "NonZero",
    "Unique",
    "NonMaxSuppression",
    "MelWeightMatrix",
];

/// Every family's rows, in family order.
fn families() -> [(Family, &'static [(&'static str, Handler)]); 11] {
    [
        (Family::Elementwise, elementwise::OPS),
        (Family::Movement, movement::OPS),
        (Family::Reduction, reduce::OPS),
        (Family::Normalization, norm::OPS),
        (Family::MatrixProduct, linalg::OPS),
        (Family::Convolution, conv::OPS),
        (Family::Pooling, pool::OPS),
        (Family::Resampling, resize::OPS),
        (Family::Recurrent, recurrent::OPS),
        (Family::Attention, attention::OPS),
        (Family::Loss, loss::OPS),
    ]
}

/// The `ai.onnx.ml` domain's name.
pub const ML_DOMAIN: &str = "ai.onnx.ml";

/// Every ONNX operator lumen imports, with its family, sorted by name (the `ai.onnx.ml`
/// ones in [`Family::Ml`], `ZipMap` included: its non-tensor output is left out).
pub fn operators() -> Vec<(&'static str, Family)> {
    let mut all: Vec<(&'static str, Family)> = families()
        .into_iter()
        .flat_map(|(family, rows)| rows.iter().map(move |(op, _)| (*op, family)))
        .chain(FOLDED_ONLY.iter().map(|op| (*op, Family::ConstantFolding)))
        .chain(ml::OPS.iter().map(|(op, _)| (*op, Family::Ml)))
        .chain([("ZipMap", Family::Ml), ("If", Family::ConstantFolding)])
        .collect();
    all.sort();
    all
}

/// Imports node `n`, which the program computes (it was not folded): its output tensors.
///
/// # Errors
/// [`OnnxError::Unsupported`] for an operator the table lacks (or one only folded, whose inputs
/// are not known at import time), and every error of the operator's handler.
pub(crate) fn compute(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = n.op_type.as_str();
    let handler = if n.domain == ML_DOMAIN {
        ml::OPS.iter().find(|(name, _)| *name == op).map(|(_, handler)| *handler)
    } else {
        families()
            .into_iter()
            .flat_map(|(_, rows)| rows.iter())
            .find(|(name, _)| *name == op)
            .map(|(_, handler)| *handler)
    };
    match handler {
        Some(handler) => handler(im, n),
        None if FOLDED_ONLY.contains(&op) => Err(im.unsupported(
            n,
            "lumen evaluates this operator at import time only: its inputs must be known then \
             (initializers, constants, or shapes)",
        )),
        None => Err(im.unsupported(n, "lumen does not import this operator")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_is_listed_once() {
        let ops = operators();
        let mut names: Vec<&str> = ops.iter().map(|(op, _)| *op).collect();
        names.dedup();
        assert_eq!(names.len(), ops.len(), "an operator is in two families");
        assert!(ops.contains(&("MatMul", Family::MatrixProduct)));
        assert!(ops.contains(&("Shape", Family::ConstantFolding)));
    }
}
