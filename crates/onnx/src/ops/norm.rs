//! Normalizations: `BatchNormalization` (inference) and `LayerNormalization`.

use lumen_compiler::Tensor;

use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr_f, attr_i, axis, one};
use crate::proto::NodeProto;

/// The norm operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] =
    &[("BatchNormalization", batch_norm), ("LayerNormalization", layer_norm)];

/// `BatchNormalization` (inference): per-channel statistics.
fn batch_norm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    // Inference: per-channel (axis 1) statistics, `(x - mean) / sqrt(var + eps)
    // * scale + bias`.
    if attr_i(n, "training_mode", 0) != 0 || n.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(im.unsupported(n, "training mode (lumen runs inference)"));
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
