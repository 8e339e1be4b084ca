//! The `ai.onnx.ml` operators scikit-learn's converted pipelines use (skl2onnx): the linear
//! models `LinearClassifier` and `LinearRegressor`, the transforms `Scaler` and `Normalizer`,
//! and `ArrayFeatureExtractor`. Each is DSL calls over the primitives: a classifier is a
//! matmul plus its intercepts, its post transform, and an argmax mapped to the class labels
//! (an i64 output). `ZipMap`, whose output is a sequence of maps and not a tensor, is handled
//! by the importer: a graph output that names one is left out, saying why.

use lumen_compiler::{DType, Tensor};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{
    Handler, Importer, attr, attr_f, attr_floats, attr_i, attr_ints, attr_s, one,
};
use crate::proto::NodeProto;

/// The `ai.onnx.ml` operators, by `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("LinearClassifier", linear_classifier),
    ("LinearRegressor", linear_regressor),
    ("Scaler", scaler),
    ("Binarizer", binarizer),
    ("Normalizer", normalizer),
    ("ArrayFeatureExtractor", array_feature_extractor),
];

/// `x [N, F] x coefficients^T [F, C] + intercepts [C]`, with `C` rows of `coefficients` (row
/// major, one per class or target).
fn linear_scores(im: &mut Importer, n: &NodeProto, rows: usize) -> Result<Tensor, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let x = if shape.len() == 1 { x.reshape(vec![1, shape[0]]) } else { x };
    let features = x.shape().unwrap_or_default().last().copied().unwrap_or(0);
    let coefficients = attr_floats(n, "coefficients").unwrap_or_default();
    if rows == 0 || coefficients.len() != rows * features {
        return Err(im.malformed(
            n,
            format!(
                "coefficients has {} values, expected {rows} rows of {features} features",
                coefficients.len()
            ),
        ));
    }
    let w = im.const_weight(n, "coefficients", Const::f32(vec![rows, features], coefficients))?;
    let mut y = x.matmul(w.transpose(0, 1));
    if let Some(b) = attr_floats(n, "intercepts").filter(|b| !b.is_empty()) {
        if b.len() != rows {
            return Err(
                im.malformed(n, format!("intercepts has {} values, expected {rows}", b.len()))
            );
        }
        y = y + im.const_weight(n, "intercepts", Const::f32(vec![rows], b))?;
    }
    Ok(y)
}

/// `post_transform` applied to scores `[N, C]`: NONE, SOFTMAX, LOGISTIC.
fn post_transform(im: &Importer, n: &NodeProto, y: Tensor) -> Result<Tensor, OnnxError> {
    match attr_s(n, "post_transform").unwrap_or_else(|| "NONE".into()).as_str() {
        "NONE" => Ok(y),
        "SOFTMAX" => Ok(y.softmax(-1)),
        "LOGISTIC" => Ok(y.sigmoid()),
        other => {
            Err(im.unsupported(n, format!("post_transform = {other:?} (NONE, SOFTMAX, LOGISTIC)")))
        }
    }
}

/// `LinearClassifier`: outputs the label (i64, the class of the highest score, from
/// `classlabels_ints`) and the scores after `post_transform`. Multiclass only: one
/// coefficient row per class.
fn linear_classifier(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    if attr(n, "classlabels_strings").is_some_and(|a| !a.strings.is_empty()) {
        return Err(im.unsupported(n, "string class labels (lumen computes numbers)"));
    }
    let labels = attr_ints(n, "classlabels_ints").unwrap_or_default();
    let classes = labels.len();
    if classes < 2 || attr_floats(n, "coefficients").unwrap_or_default().len() % classes != 0 {
        return Err(im.unsupported(
            n,
            format!("{classes} class labels (lumen imports multiclass models, one coefficient row per class)"),
        ));
    }
    let scores = linear_scores(im, n, classes)?;
    let scores = post_transform(im, n, scores)?;
    let best = scores.argmax(-1, false, false);
    let identity = labels.iter().enumerate().all(|(i, &l)| l == i as i64);
    let label = if identity {
        best
    } else {
        // The labels as a [C, 1] table read by the winning index.
        let table: Vec<f32> = labels.iter().map(|&l| l as f32).collect();
        if labels.iter().any(|&l| l.unsigned_abs() > 1 << 24) {
            return Err(im.unsupported(n, "class labels beyond 2^24"));
        }
        let table = im.const_weight(n, "labels", Const::f32(vec![classes, 1], table))?;
        let rows = best.shape().unwrap_or_default();
        table.gather(&best).reshape(rows).cast(DType::I64)
    };
    Ok(vec![label, scores])
}

/// `LinearRegressor`: `targets` outputs per row, `post_transform` NONE.
fn linear_regressor(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let targets = attr_i(n, "targets", 1).max(1) as usize;
    let y = linear_scores(im, n, targets)?;
    one(post_transform(im, n, y)?)
}

/// `Binarizer`: 1 where `x > threshold` (0 by default), else 0.
fn binarizer(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let threshold = attr_f(n, "threshold", 0.0);
    one(x.graph().constant(threshold).less_than(&x))
}

/// `Scaler`: `(x - offset) * scale`, one value for every feature or one for all.
fn scaler(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let mut y = x;
    if let Some(offset) = attr_floats(n, "offset").filter(|v| !v.is_empty()) {
        let len = offset.len();
        y = y - im.const_weight(n, "offset", Const::f32(vec![len], offset))?;
    }
    if let Some(scale) = attr_floats(n, "scale").filter(|v| !v.is_empty()) {
        let len = scale.len();
        y = y * im.const_weight(n, "scale", Const::f32(vec![len], scale))?;
    }
    one(y)
}

/// `Normalizer`: each row divided by its `MAX` (largest value), `L1` (sum of magnitudes) or
/// `L2` (Euclidean) norm.
fn normalizer(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let norm = match attr_s(n, "norm").unwrap_or_else(|| "MAX".into()).as_str() {
        "MAX" => x.max(-1, true),
        "L1" => x.maximum(-&x).sum(-1, true),
        "L2" => (&x * &x).sum(-1, true).sqrt(),
        other => return Err(im.unsupported(n, format!("norm = {other:?} (MAX, L1, L2)"))),
    };
    one(x / norm)
}

/// `ArrayFeatureExtractor`: the elements of the last axis at the given indices.
fn array_feature_extractor(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let idx = im.tensor(n, 1)?;
    let len = idx.shape().unwrap_or_default().iter().product::<usize>();
    let flat = idx.reshape(vec![len]);
    let flat = if flat.dtype().is_some_and(DType::is_index) { flat } else { flat.cast(DType::I64) };
    one(x.take(-1, &flat, 0.0))
}
