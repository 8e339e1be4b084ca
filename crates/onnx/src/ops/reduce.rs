//! Reductions over axes (`ReduceSum`, `ReduceMean`, ...) and the softmax family; the n-gram
//! counts of `TfIdfVectorizer` (its handler in [`super::tfidf`]).

use lumen_compiler::Tensor;

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr_i, attr_ints, axis, one};
use crate::proto::NodeProto;

/// The reduce operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("ReduceMean", reduce),
    ("ReduceSum", reduce),
    ("ReduceMax", reduce),
    ("ReduceMin", reduce),
    ("ReduceL1", reduce),
    ("ReduceL2", reduce),
    ("ReduceSumSquare", reduce),
    ("ReduceLogSumExp", reduce),
    ("Softmax", softmax),
    ("ArgMax", arg),
    ("ArgMin", arg),
    ("CumSum", cumsum),
    ("CumProd", cumprod),
    ("TopK", top_k),
    ("LogSoftmax", softmax),
    ("ReduceLogSum", reduce),
    ("ReduceProd", reduce),
    ("Hardmax", hardmax),
    ("TfIdfVectorizer", super::tfidf::tfidf_vectorizer),
];

/// `ReduceMean`, `ReduceSum`, `ReduceMax`, `ReduceMin`, `ReduceL1`, `ReduceL2`,
/// `ReduceSumSquare`, `ReduceLogSumExp`, `ReduceLogSum`, `ReduceProd`: axis by axis.
fn reduce(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = n.op_type.as_str();
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    let axes = match im.ints(n, 1)? {
        Some(a) => Some(a),
        None => attr_ints(n, "axes"),
    };
    let keep = attr_i(n, "keepdims", 1) != 0;
    let mut axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&v| {
                axis(v, rank).ok_or_else(|| im.malformed(n, format!("axis {v} out of range")))
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
        // A product as exp(sum(log |x|)) (a zero's log is -inf, its exp 0), its sign from the
        // parity of the negative factors.
        "ReduceProd" => x.maximum(-&x).log(),
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
    if op == "ReduceProd" {
        let mut negatives = x.less_than(0.0);
        for &a in axes.iter().rev() {
            negatives = negatives.sum(a as isize, keep);
        }
        let half = &negatives * 0.5;
        let odd = (&half - super::elementwise::floor(&half)) * 2.0;
        return one(t.exp() * (odd * -2.0 + 1.0));
    }
    // Booleans (0.0 and 1.0): ReduceMax is `any`, ReduceMin `all`, so an empty set gives
    // false and true, not -inf and +inf.
    let boolean = n.input.first().is_some_and(|i| im.bools.contains(i));
    one(match (op, shift) {
        ("ReduceMax", _) if boolean => t.maximum(0.0),
        ("ReduceMin", _) if boolean => (-t).minimum(1.0),
        ("ReduceMin", _) => -t,
        ("ReduceLogSum", _) => t.log(),
        ("ReduceL2", _) => t.sqrt(),
        ("ReduceLogSumExp", Some(m)) => {
            let m = if keep { m } else { m.reshape(t.shape().unwrap_or_default()) };
            t.log() + m
        }
        _ => t,
    })
}

/// `Softmax`, `LogSoftmax` over one axis (the composites).
fn softmax(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = n.op_type.as_str();
    let x = im.f32_tensor(n, 0)?;
    let soft = |t: &Tensor, a: isize| if op == "Softmax" { t.softmax(a) } else { t.log_softmax(a) };
    if im.opset < 13 {
        // Before opset 13 the input is seen as 2-D, [outer, inner] split at `axis` (default
        // 1), and normalized over the inner part.
        let shape = x.shape().unwrap_or_default();
        let a = axis(attr_i(n, "axis", 1), shape.len().max(1))
            .ok_or_else(|| im.malformed(n, "axis out of range"))?;
        let (outer, inner): (usize, usize) =
            (shape[..a].iter().product(), shape[a..].iter().product());
        return one(soft(&x.reshape(vec![outer, inner]), -1).reshape(shape));
    }
    let a = attr_i(n, "axis", -1);
    one(soft(&x, a as isize))
}

/// `ArgMax`, `ArgMin`: the i64 index along `axis` (kept with length 1 unless `keepdims` is 0),
/// the last of equal elements with `select_last_index`.
fn arg(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    let a = axis(attr_i(n, "axis", 0), rank).ok_or_else(|| im.malformed(n, "axis out of range"))?;
    let keep = attr_i(n, "keepdims", 1) != 0;
    let last = attr_i(n, "select_last_index", 0) != 0;
    let a = a as isize;
    one(if n.op_type == "ArgMax" { x.argmax(a, keep, last) } else { x.argmin(a, keep, last) })
}

/// `CumSum` along the axis given as input 1 (`exclusive`, `reverse`): a product with a
/// triangular matrix of ones along that axis, one GEMM. An integer input is summed in f32
/// (exact below 2^24) and cast back.
fn cumsum(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let raw = im.tensor(n, 0)?;
    let dtype = raw.dtype();
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let a = im
        .ints(n, 1)?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| im.malformed(n, "no axis input"))?;
    let a = axis(a, rank).ok_or_else(|| im.malformed(n, format!("axis {a} out of range")))?;
    let (exclusive, reverse) = (attr_i(n, "exclusive", 0) != 0, attr_i(n, "reverse", 0) != 0);
    let len = shape[a];
    // y_j = sum_i x_i T[i][j].
    let keep = |i: usize, j: usize| match (exclusive, reverse) {
        (false, false) => i <= j,
        (true, false) => i < j,
        (false, true) => i >= j,
        (true, true) => i > j,
    };
    let t: Vec<f32> = (0..len * len).map(|e| f32::from(u8::from(keep(e / len, e % len)))).collect();
    let t = im.const_weight(n, "triangle", Const::f32(vec![len, len], t))?;
    let last = rank as isize - 1;
    let y = if rank == 1 {
        x.unsqueeze(0).matmul(&t).reshape(shape.clone())
    } else if a + 1 == rank {
        x.matmul(&t)
    } else {
        x.transpose(a as isize, last).matmul(&t).transpose(a as isize, last)
    };
    one(match dtype {
        Some(d @ (lumen_compiler::DType::I32 | lumen_compiler::DType::I64)) => y.cast(d),
        _ => y,
    })
}

/// `CumProd` (opset 26): the running product along `axis` (input 1, known at import),
/// `exclusive` (shifted by one, starting at 1) and `reverse`. A log-depth scan (Hillis and
/// Steele): step `k` multiplies each element by the one `2^k` before it (1 past the start), so
/// an axis of length L takes ceil(log2 L) multiplies of the whole tensor.
fn cumprod(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let raw = im.tensor(n, 0)?;
    let dtype = raw.dtype();
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let a = im
        .ints(n, 1)?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| im.malformed(n, "no axis input"))?;
    let a = axis(a, rank).ok_or_else(|| im.malformed(n, format!("axis {a} out of range")))?;
    let (exclusive, reverse) = (attr_i(n, "exclusive", 0) != 0, attr_i(n, "reverse", 0) != 0);
    let len = shape[a];
    // `x` shifted `by` places along the axis (toward the end, or the start when reversed),
    // the vacated places 1.
    let shifted = |t: &Tensor, by: usize| -> Tensor {
        let mut pads = vec![(0usize, 0usize); rank - a];
        pads[0] = if reverse { (0, by) } else { (by, 0) };
        let padded = t.pad(&pads, lumen_compiler::PadMode::Constant(1.0));
        if reverse {
            padded.slice(a as isize, by, by + len)
        } else {
            padded.slice(a as isize, 0, len)
        }
    };
    let mut y = if exclusive && len > 0 { shifted(&x, 1) } else { x };
    let mut by = 1;
    while by < len {
        y = &y * shifted(&y, by);
        by *= 2;
    }
    one(match dtype {
        Some(d @ (lumen_compiler::DType::I32 | lumen_compiler::DType::I64)) => y.cast(d),
        _ => y,
    })
}

/// `TopK`: the `k` largest (or smallest) along `axis` (default -1), values and i64 indices,
/// sorted (the order is always the sorted one); `k` from input 1 (opset 10 on) or the `k`
/// attribute.
fn top_k(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    let a =
        axis(attr_i(n, "axis", -1), rank).ok_or_else(|| im.malformed(n, "axis out of range"))?;
    let k = if im.opset < 10 {
        attr_i(n, "k", -1)
    } else {
        im.ints(n, 1)?.and_then(|v| v.first().copied()).unwrap_or(-1)
    };
    let k = usize::try_from(k).map_err(|_| im.malformed(n, format!("k = {k}")))?;
    let largest = attr_i(n, "largest", 1) != 0;
    let indices = x.top_k(a as isize, k, largest);
    let values = x.gather_elements(a as isize, &indices);
    Ok(vec![values, indices])
}

/// `Hardmax`: 1 at the first largest element along `axis`, 0 elsewhere (opset 13 on; before,
/// along the flattened axes from `axis` on, as `Softmax`).
fn hardmax(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let (flat, a) = if im.opset < 13 {
        let a = axis(attr_i(n, "axis", 1), rank.max(1))
            .ok_or_else(|| im.malformed(n, "axis out of range"))?;
        let (outer, inner): (usize, usize) =
            (shape[..a].iter().product(), shape[a..].iter().product());
        (x.reshape(vec![outer, inner]), 1)
    } else {
        let a = axis(attr_i(n, "axis", -1), rank)
            .ok_or_else(|| im.malformed(n, "axis out of range"))?;
        (x.clone(), a)
    };
    let flat_shape = flat.shape().unwrap_or_default();
    let len = flat_shape[a];
    // The winner's position against a constant 0, 1, ..., len - 1 along the axis.
    let mut iota_shape = vec![1; flat_shape.len()];
    iota_shape[a] = len;
    let iota = Const::f32(iota_shape, (0..len).map(|i| i as f32).collect());
    let iota = im.const_weight(n, "positions", iota)?;
    let winner = flat.argmax(a as isize, true, false).cast(lumen_compiler::DType::F32);
    one(iota.equal(&winner).reshape(shape))
}
