//! Normalizations: `BatchNormalization` (inference, and opset 14's training mode), `LayerNormalization`, `RMSNormalization`,
//! `LpNormalization`, `InstanceNormalization`, `GroupNormalization`,
//! `MeanVarianceNormalization` and `LRN`, as compositions of reductions and maps.

use lumen_compiler::{PadMode, Tensor};

use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr_f, attr_i, attr_ints, axis, one};
use crate::proto::NodeProto;

/// The norm operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("BatchNormalization", batch_norm),
    ("LayerNormalization", layer_norm),
    ("RMSNormalization", rms_norm),
    ("LpNormalization", lp_norm),
    ("InstanceNormalization", instance_norm),
    ("GroupNormalization", group_norm),
    ("MeanVarianceNormalization", mean_variance_norm),
    ("LRN", lrn),
];

/// `BatchNormalization`: per-channel (axis 1) statistics, `(x - mean) / sqrt(var + eps) *
/// scale + bias`; with `training_mode = 1` (opset 14 on), the batch's own ([`batch_norm_training`]).
fn batch_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let mode = attr_i(n, "training_mode", 0);
    if !(0..=1).contains(&mode) {
        return Err(im.malformed(n, format!("attribute training_mode = {mode} (it is 0 or 1)")));
    }
    if attr_i(n, "training_mode", 0) != 0 && im.opset >= 14 {
        return batch_norm_training(im, n);
    }
    if attr_i(n, "training_mode", 0) != 0 || n.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(im.unsupported(
            n,
            "training mode before opset 14 (its saved statistics outputs; lumen computes \
             opset 14's training_mode = 1)",
        ));
    }
    if im.opset < 9 && attr_i(n, "spatial", 1) == 0 {
        return Err(im.unsupported(n, "spatial = 0 (statistics per element, not per channel)"));
    }
    let eps = attr_f(n, "epsilon", 1e-5);
    // Folded into the convolution before it when that one has constant weights.
    if let Some(folded) = super::conv::fold_batch_norm(im, n, eps)? {
        return one(folded);
    }
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    if rank < 2 {
        return Err(im.malformed(n, format!("input of rank {rank} (expected N, C, ...)")));
    }
    let mut per_channel = Vec::with_capacity(4);
    for i in 1..5 {
        let t = im.f32_tensor(n, i)?;
        let c = t.shape().unwrap_or_default().iter().product::<usize>();
        let mut shape = vec![c];
        shape.resize(rank - 1, 1);
        per_channel.push(t.reshape(shape));
    }
    let [scale, bias, mean, var] = [0, 1, 2, 3].map(|i| per_channel[i].clone());
    let inv = (var + eps).sqrt().recip() * scale;
    one((x - mean) * inv + bias)
}

/// `BatchNormalization` with `training_mode = 1` (opset 14 on), as ONNX's reference: the
/// batch's mean and (population) variance per channel, over every axis but 1, normalize `x`;
/// the optional outputs are the running statistics `mean * momentum + batch_mean * (1 -
/// momentum)` and likewise for the variance (`momentum` 0.9 by default).
fn batch_norm_training(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    if shape.len() < 2 {
        return Err(im.malformed(n, format!("input of shape {shape:?} (expected [N, C, ...])")));
    }
    let (eps, momentum) = (attr_f(n, "epsilon", 1e-5), attr_f(n, "momentum", 0.9));
    let c = shape[1];
    let mut per_channel = Vec::with_capacity(4);
    for i in 1..5 {
        let t = im.f32_tensor(n, i)?;
        if t.shape().unwrap_or_default() != [c] {
            return Err(im.malformed(
                n,
                format!("input {i} has shape {:?} (expected [{c}])", t.shape().unwrap_or_default()),
            ));
        }
        per_channel.push(t);
    }
    let [scale, bias, mean, var] = [0, 1, 2, 3].map(|i| per_channel[i].clone());
    // [C, everything else] rows, one per channel.
    let rows = x.transpose(0, 1).reshape(vec![c, shape.iter().product::<usize>() / c.max(1)]);
    let batch_mean = rows.mean(-1, false);
    let centered = &rows - batch_mean.reshape(vec![c, 1]);
    let batch_var = (&centered * &centered).mean(-1, false);
    let mut broadcast = vec![c];
    broadcast.resize(shape.len() - 1, 1);
    let inv = (&batch_var + eps).sqrt().recip() * &scale;
    let y = (&x - batch_mean.reshape(broadcast.clone())) * inv.reshape(broadcast.clone())
        + bias.reshape(broadcast);
    let running_mean = mean * momentum + batch_mean * (1.0 - momentum);
    let running_var = var * momentum + batch_var * (1.0 - momentum);
    Ok(vec![y, running_mean, running_var])
}

/// `LayerNormalization` over the axes from `axis` on (with Mean and InvStdDev outputs when asked).
fn layer_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let Some(a) = axis(attr_i(n, "axis", -1), rank) else {
        return Err(im.malformed(n, format!("axis out of range for rank {rank}")));
    };
    let eps = attr_f(n, "epsilon", 1e-5);
    let gamma = im.f32_tensor(n, 1)?;
    let beta = match im.input(n, 2) {
        Some(_) => Some(im.f32_tensor(n, 2)?),
        None => None,
    };
    let stats = n.output.iter().skip(1).any(|o| !o.is_empty());
    if a + 1 == rank && !stats && gamma.rank() == Some(1) {
        let beta = beta.unwrap_or_else(|| im.cx.constant(0.0));
        return one(x.layer_norm(&gamma, &beta, eps));
    }
    // Normalised over axes a.. : rows of the flattened [outer, inner] view, then
    // scale and bias broadcast in the input's shape. Mean and InvStdDev keep the
    // normalised axes as 1s.
    let outer: usize = shape[..a].iter().product();
    let inner: usize = shape[a..].iter().product();
    let flat = x.reshape(vec![outer, inner]);
    let mean = flat.mean(-1, true);
    let centered = &flat - &mean;
    let var = (&centered * &centered).mean(-1, true);
    let inv = (var + eps).sqrt().recip();
    let mut y = (centered * &inv).reshape(shape.clone()) * &gamma;
    if let Some(b) = beta {
        y = y + b;
    }
    if !stats {
        return one(y);
    }
    let mut kept = shape[..a].to_vec();
    kept.resize(rank, 1);
    Ok(vec![y, mean.reshape(kept.clone()), inv.reshape(kept)])
}

/// `x` reduced by `f` over `axes` (sorted), the axes kept with length 1.
fn over(x: &Tensor, axes: &[usize], f: impl Fn(&Tensor, isize) -> Tensor) -> Tensor {
    axes.iter().rev().fold(x.clone(), |t, &a| f(&t, a as isize))
}

/// `RMSNormalization`: `x / sqrt(mean(x^2) + epsilon) * scale` over the axes from `axis` (default
/// -1) on, `scale` broadcast to them.
fn rms_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    let a = axis(attr_i(n, "axis", -1), rank)
        .ok_or_else(|| im.malformed(n, format!("axis out of range for rank {rank}")))?;
    let eps = attr_f(n, "epsilon", 1e-5);
    let scale = im.f32_tensor(n, 1)?;
    let axes: Vec<usize> = (a..rank).collect();
    let ms = over(&(&x * &x), &axes, |t, d| t.mean(d, true));
    one(x * (ms + eps).sqrt().recip() * scale)
}

/// `LpNormalization`: `x` divided by its L1 (`p = 1`) or L2 (`p = 2`, the default) norm along
/// `axis` (default -1); a zero vector stays zero.
fn lp_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    let a = axis(attr_i(n, "axis", -1), rank)
        .ok_or_else(|| im.malformed(n, format!("axis out of range for rank {rank}")))?
        as isize;
    let norm = match attr_i(n, "p", 2) {
        1 => x.maximum(-&x).sum(a, true),
        2 => (&x * &x).sum(a, true).sqrt(),
        p => return Err(im.unsupported(n, format!("p = {p} (1 or 2)"))),
    };
    // A zero norm divides by 1 (the vector stays 0), as ONNX's reference does.
    let safe = norm.equal(0.0).select(1.0, &norm);
    one(x / safe)
}

/// `(x - mean) / sqrt(var + eps)` over `axes` (sorted), the statistics kept with length 1.
fn standardize(x: &Tensor, axes: &[usize], eps: f32) -> Tensor {
    let mean = over(x, axes, |t, d| t.mean(d, true));
    let centered = x - &mean;
    let var = over(&(&centered * &centered), axes, |t, d| t.mean(d, true));
    centered * (var + eps).sqrt().recip()
}

/// A per-channel `[C]` parameter shaped to broadcast against `[N, C, ...]` of rank `rank`.
fn per_channel(t: Tensor, rank: usize) -> Tensor {
    let c = t.shape().unwrap_or_default().iter().product::<usize>();
    let mut shape = vec![c];
    shape.resize(rank - 1, 1);
    t.reshape(shape)
}

/// `InstanceNormalization`: each `(n, c)` standardized over the spatial axes, then
/// `scale[c]`, `B[c]`.
fn instance_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    if rank < 3 {
        return Err(im.malformed(n, format!("input of rank {rank} (expected N, C, D1, ...)")));
    }
    let eps = attr_f(n, "epsilon", 1e-5);
    let (scale, bias) = (im.f32_tensor(n, 1)?, im.f32_tensor(n, 2)?);
    let axes: Vec<usize> = (2..rank).collect();
    one(standardize(&x, &axes, eps) * per_channel(scale, rank) + per_channel(bias, rank))
}

/// `GroupNormalization`: the channels in `num_groups` groups, each `(n, group)` standardized
/// over its channels and the spatial axes, then `scale` and `bias`: per channel (`[C]`,
/// opset 21) or per group (`[num_groups]`, opset 18).
fn group_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    if rank < 3 {
        return Err(im.malformed(n, format!("input of rank {rank} (expected N, C, D1, ...)")));
    }
    let eps = attr_f(n, "epsilon", 1e-5);
    let groups = usize::try_from(attr_i(n, "num_groups", 0)).unwrap_or(0);
    let c = shape[1];
    if groups == 0 || c % groups != 0 {
        return Err(im.malformed(n, format!("num_groups = {groups} does not divide C = {c}")));
    }
    let (scale, bias) = (im.f32_tensor(n, 1)?, im.f32_tensor(n, 2)?);
    let spatial: usize = shape[2..].iter().product();
    let grouped = x.reshape(vec![shape[0], groups, c / groups * spatial]);
    let y = standardize(&grouped, &[2], eps);
    let len = scale.shape().unwrap_or_default().iter().product::<usize>();
    one(if len == c {
        y.reshape(shape) * per_channel(scale, rank) + per_channel(bias, rank)
    } else if len == groups {
        let (scale, bias) = (scale.reshape(vec![groups, 1]), bias.reshape(vec![groups, 1]));
        (y * scale + bias).reshape(shape)
    } else {
        return Err(im.malformed(n, format!("scale of {len} values for C = {c}, {groups} groups")));
    })
}

/// `MeanVarianceNormalization`: `(x - mean) / (sqrt(var) + 1e-9)` over `axes` (default
/// `[0, 2, 3]`), as ONNX's function body computes it.
fn mean_variance_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    let mut axes: Vec<usize> = attr_ints(n, "axes")
        .unwrap_or_else(|| vec![0, 2, 3])
        .iter()
        .map(|&a| axis(a, rank).ok_or_else(|| im.malformed(n, format!("axis {a} out of range"))))
        .collect::<Result<_, _>>()?;
    axes.sort_unstable();
    axes.dedup();
    let mean = over(&x, &axes, |t, d| t.mean(d, true));
    let mean_sq = over(&(&x * &x), &axes, |t, d| t.mean(d, true));
    let std = (mean_sq - &mean * &mean).sqrt();
    one((&x - &mean) / (std + 1e-9))
}

/// `LRN`: `x / (bias + alpha / size * sum of x^2 over the size nearest channels)^beta`, the
/// channel window from `c - (size - 1) / 2` to `c + ceil((size - 1) / 2)`, zeros past the ends.
fn lrn(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    if rank < 3 {
        return Err(im.malformed(n, format!("input of rank {rank} (expected N, C, D1, ...)")));
    }
    let size = usize::try_from(attr_i(n, "size", 0)).unwrap_or(0);
    if size == 0 {
        return Err(im.malformed(n, "size must be positive"));
    }
    let (alpha, beta, bias) =
        (attr_f(n, "alpha", 1e-4), attr_f(n, "beta", 0.75), attr_f(n, "bias", 1.0));
    let mut pads = vec![(0usize, 0usize); rank];
    pads[1] = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let squares = (&x * &x).pad(&pads, PadMode::Constant(0.0));
    let sums = squares.window(1, size, 1, 1).sum(2, false);
    one(x / (sums * (alpha / size as f32) + bias).pow(beta))
}
