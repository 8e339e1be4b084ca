//! Convolutions: `Conv` (1 to 3 spatial axes, groups, strides, dilations, explicit or
//! automatic padding, bias) as lumen's convolution op, `ConvTranspose` as the DSL's
//! transposed convolution, and the attribute rules both share with the poolings
//! ([`spatial_pads`]). A `BatchNormalization` that alone reads a convolution with constant
//! weights is folded into its kernels and bias here ([`fold_batch_norm`]): one convolution
//! instead of a convolution and four elementwise ops, as every inference engine does.
//! `DeformConv`'s handler is in [`super::deform`].

use std::rc::Rc;

use lumen_compiler::{ConvSpec, ConvTransposeSpec, Tensor};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{ConvRecord, Handler, Importer, attr_i, attr_ints, attr_s, one};
use crate::proto::NodeProto;

use super::spatial::{spatial_list, spatial_pads};

/// The convolution operators, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("Conv", conv),
    ("ConvTranspose", conv_transpose),
    ("Col2Im", col2im),
    ("DeformConv", super::deform::deform_conv),
];

/// The input's spatial lengths (`[N, C, *spatial]`, 1 to 3 spatial axes).
fn spatial_of(im: &Importer, n: &NodeProto, x: &Tensor) -> Result<Vec<usize>, OnnxError> {
    let shape = x.shape().unwrap_or_default();
    if !(3..=5).contains(&shape.len()) {
        return Err(im.unsupported(
            n,
            format!(
                "an input of shape {shape:?} (lumen convolves [N, C, ...] with 1 to 3 spatial axes)"
            ),
        ));
    }
    Ok(shape[2..].to_vec())
}

/// `Conv`: `x [N, C, *in]`, `w [OC, C / group, *k]`, optional `b [OC]`.
fn conv(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let input = spatial_of(im, n, &x)?;
    let s = input.len();
    let w_shape = im.input(n, 1).map(|v| im.shape_of(&v)).unwrap_or_default();
    if w_shape.len() != s + 2 {
        return Err(im.malformed(n, format!("weight of shape {w_shape:?} for {s} spatial axes")));
    }
    let kernel = spatial_list(im, n, "kernel_shape", s, 1, 1)?;
    if attr_ints(n, "kernel_shape").is_some() && kernel != w_shape[2..] {
        return Err(
            im.malformed(n, format!("kernel_shape = {kernel:?} but the weight is {w_shape:?}"))
        );
    }
    let kernel = w_shape[2..].to_vec();
    let strides = spatial_list(im, n, "strides", s, 1, 1)?;
    let dilations = spatial_list(im, n, "dilations", s, 1, 1)?;
    let groups = attr_i(n, "group", 1);
    if groups < 1 {
        return Err(im.malformed(n, format!("group = {groups}: must be at least 1")));
    }
    let pads = spatial_pads(im, n, &input, &kernel, &strides, &dilations)?;
    let spec = ConvSpec { strides, dilations, pads, groups: groups as usize };
    let (wc, bc) = (im.const_input(n, 1), im.const_input(n, 2));
    let has_bias = im.input(n, 2).is_some();
    let w = im.f32_tensor(n, 1)?;
    let b = if has_bias { Some(im.f32_tensor(n, 2)?) } else { None };
    if let (Some(wc), Some(out)) = (wc, n.output.first())
        && (!has_bias || bc.is_some())
    {
        let record = ConvRecord { x: x.clone(), w: wc, b: bc, spec: spec.clone() };
        im.convs.insert(out.clone(), record);
    }
    one(x.conv(&w, b.as_ref(), &spec))
}

/// Folds a `BatchNormalization` of `x` into the convolution that computed `x`, when that
/// convolution's weights are constants and nothing else reads its output: kernels scaled by
/// `scale / sqrt(var + eps)` per output channel, bias `(b - mean) * that + B`. `None` when it
/// cannot fold (the caller then normalizes elementwise).
pub(crate) fn fold_batch_norm(
    im: &mut Importer,
    n: &NodeProto,
    eps: f32,
) -> Result<Option<Tensor>, OnnxError> {
    let Some(input) = n.input.first() else { return Ok(None) };
    if im.readers.get(input).copied().unwrap_or(0) != 1 {
        return Ok(None);
    }
    let Some(record) = im.convs.get(input).cloned() else { return Ok(None) };
    let params: Option<Vec<Rc<Const>>> = (1..5).map(|i| im.const_input(n, i)).collect();
    let Some(params) = params else { return Ok(None) };
    let oc = record.w.shape.first().copied().unwrap_or(0);
    if params.iter().any(|p| p.len() != oc) {
        return Ok(None);
    }
    let [scale, bias, mean, var] =
        [0, 1, 2, 3].map(|i| params[i].to_f32().iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    let factor: Vec<f64> = (0..oc).map(|c| scale[c] / (var[c] + f64::from(eps)).sqrt()).collect();
    let per = record.w.len() / oc.max(1);
    let w: Vec<f32> = record
        .w
        .to_f32()
        .iter()
        .enumerate()
        .map(|(i, &v)| (f64::from(v) * factor[i / per.max(1)]) as f32)
        .collect();
    let b0 = record.b.as_ref().map(|b| b.to_f32()).unwrap_or_else(|| vec![0.0; oc]);
    let b: Vec<f32> =
        (0..oc).map(|c| ((f64::from(b0[c]) - mean[c]) * factor[c] + bias[c]) as f32).collect();
    let w = im.const_weight(n, "folded_weight", Const::f32(record.w.shape.clone(), w))?;
    let b = im.const_weight(n, "folded_bias", Const::f32(vec![oc], b))?;
    Ok(Some(record.x.conv(&w, Some(&b), &record.spec)))
}

/// `ConvTranspose`: `x [N, C, *in]`, `w [C, OC / group, *k]`, optional `b [OC]`; the output
/// size from `pads`, or from `output_shape` / `auto_pad` (the padding split as ONNX says).
fn conv_transpose(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let input = spatial_of(im, n, &x)?;
    let s = input.len();
    let w = im.f32_tensor(n, 1)?;
    let w_shape = w.shape().unwrap_or_default();
    if w_shape.len() != s + 2 {
        return Err(im.malformed(n, format!("weight of shape {w_shape:?} for {s} spatial axes")));
    }
    let kernel = w_shape[2..].to_vec();
    let strides = spatial_list(im, n, "strides", s, 1, 1)?;
    let dilations = spatial_list(im, n, "dilations", s, 1, 1)?;
    let output_padding = spatial_list(im, n, "output_padding", s, 0, 0)?;
    let groups = attr_i(n, "group", 1);
    if groups < 1 {
        return Err(im.malformed(n, format!("group = {groups}: must be at least 1")));
    }
    let auto = attr_s(n, "auto_pad").unwrap_or_default();
    let target: Option<Vec<usize>> = match attr_ints(n, "output_shape") {
        Some(v) => {
            // The spatial lengths (a full [N, C, ...] shape is accepted too).
            let v: Vec<usize> = v.iter().map(|&d| d.max(0) as usize).collect();
            Some(if v.len() == s + 2 { v[2..].to_vec() } else { v })
        }
        None if auto == "SAME_UPPER" || auto == "SAME_LOWER" => {
            Some(input.iter().zip(&strides).map(|(&i, &st)| i * st).collect())
        }
        None => None,
    };
    let mut output_padding = output_padding;
    let pads = match target {
        Some(t) if t.len() == s => {
            let mut pads = Vec::with_capacity(s);
            for i in 0..s {
                let full = strides[i] * (input[i] - 1)
                    + output_padding[i]
                    + (kernel[i] - 1) * dilations[i]
                    + 1;
                // A target past the full output adds positions at the end, as output_padding
                // does (no tap reaches them: zeros plus the bias), while that stays below the
                // stride.
                let surplus = t[i].saturating_sub(full);
                if surplus > 0 && output_padding[i] + surplus >= strides[i].max(dilations[i]) {
                    return Err(im.unsupported(
                        n,
                        format!("output_shape = {t:?}: larger than the full output along axis {i} ({full}) by a stride or more"),
                    ));
                }
                output_padding[i] += surplus;
                let total = (full + surplus) - t[i];
                pads.push(if auto == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                });
            }
            pads
        }
        Some(t) => {
            return Err(im.malformed(n, format!("output_shape = {t:?} for {s} spatial axes")));
        }
        None => spatial_pads(im, n, &input, &kernel, &strides, &dilations)?,
    };
    let b = if im.input(n, 2).is_some() { Some(im.f32_tensor(n, 2)?) } else { None };
    let spec =
        ConvTransposeSpec { strides, dilations, pads, output_padding, groups: groups as usize };
    one(x.conv_transpose(&w, b.as_ref(), &spec))
}

/// `Col2Im` (opset 18): the columns `[N, C * prod(block), L]` of an im2col summed back into
/// images `[N, C, *image_shape]` (`image_shape` and `block_shape` known at import; `strides`,
/// `dilations`, `pads`). For each block offset, its column is spread to the positions it came
/// from (a zero-padded dilation by the stride, shifted by the offset) and added; the padding
/// is cropped at the end.
fn col2im(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let image = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no image_shape"))?;
    let block = im.ints(n, 2)?.ok_or_else(|| im.malformed(n, "no block_shape"))?;
    let r = image.len();
    if r == 0 || block.len() != r || image.iter().chain(&block).any(|&v| v < 1) {
        return Err(im.malformed(n, format!("image_shape {image:?}, block_shape {block:?}")));
    }
    let (image, block): (Vec<usize>, Vec<usize>) =
        (image.iter().map(|&v| v as usize).collect(), block.iter().map(|&v| v as usize).collect());
    let strides = spatial_list(im, n, "strides", r, 1, 1)?;
    let dilations = spatial_list(im, n, "dilations", r, 1, 1)?;
    let pads = match attr_ints(n, "pads") {
        None => vec![(0, 0); r],
        Some(p) if p.len() == 2 * r && p.iter().all(|&v| v >= 0) => {
            (0..r).map(|i| (p[i] as usize, p[r + i] as usize)).collect()
        }
        Some(p) => return Err(im.malformed(n, format!("pads = {p:?}"))),
    };
    let padded: Vec<usize> = (0..r).map(|a| image[a] + pads[a].0 + pads[a].1).collect();
    let mut positions = Vec::with_capacity(r);
    for a in 0..r {
        let span = (block[a] - 1) * dilations[a] + 1;
        if span > padded[a] {
            return Err(
                im.malformed(n, format!("a block of {span} past the padded image's {}", padded[a]))
            );
        }
        positions.push((padded[a] - span) / strides[a] + 1);
    }
    let shape = x.shape().unwrap_or_default();
    let per_block: usize = block.iter().product();
    let l: usize = positions.iter().product();
    if shape.len() != 3 || shape[1] % per_block != 0 || shape[2] != l {
        return Err(im.malformed(n, format!("input {shape:?}: expected [N, C x {per_block}, {l}]")));
    }
    let (batch, channels) = (shape[0], shape[1] / per_block);
    let columns = x.reshape(vec![batch, channels, per_block, l]);
    let mut sum: Option<Tensor> = None;
    for k in 0..per_block {
        // The block offset along each axis (row-major over block_shape).
        let mut offset = vec![0usize; r];
        let mut rest = k;
        for a in (0..r).rev() {
            offset[a] = rest % block[a];
            rest /= block[a];
        }
        let mut lengths = vec![batch, channels];
        lengths.extend(&positions);
        let mut y = columns.slice(2, k, k + 1).reshape(lengths);
        // Each position l to l * stride: a unit axis after it padded to the stride, merged.
        let mut spread = vec![batch, channels];
        let mut dilate = Vec::with_capacity(2 * r);
        for a in 0..r {
            spread.extend([positions[a], 1]);
            dilate.extend([(0, 0), (0, strides[a] - 1)]);
        }
        y = y.reshape(spread).pad(&dilate, lumen_compiler::PadMode::Constant(0.0));
        let mut merged = vec![batch, channels];
        merged.extend((0..r).map(|a| positions[a] * strides[a]));
        y = y.reshape(merged);
        let mut place = Vec::with_capacity(r);
        for a in 0..r {
            let used = (positions[a] - 1) * strides[a] + 1;
            y = y.slice((2 + a) as isize, 0, used);
            let before = offset[a] * dilations[a];
            place.push((before, padded[a] - before - used));
        }
        y = y.pad(&place, lumen_compiler::PadMode::Constant(0.0));
        sum = Some(match sum {
            None => y,
            Some(s) => s + y,
        });
    }
    let mut y = sum.ok_or_else(|| im.malformed(n, "an empty block"))?;
    for a in 0..r {
        y = y.slice((2 + a) as isize, pads[a].0, pads[a].0 + image[a]);
    }
    one(y)
}
