//! `DeformConv` (opset 19 on) as a composite: each kernel tap of each output position reads the
//! input at its offset (run-time) position by bilinear interpolation with zeros outside, as
//! gathers of computed flat indices, optionally scaled by the mask; then one batched matmul
//! with the kernels per group. Its row is in the convolution family's table.

use lumen_compiler::{DType, Tensor};

use super::elementwise::floor;
use super::spatial::spatial_list;
use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Importer, attr_i, attr_ints, one};
use crate::proto::NodeProto;

/// `DeformConv`: `X [N, C, *S]`, kernels `W [OC, C / group, *K]`, `offset [N, offset_group *
/// prod(K) * r, *O]` (per offset group and tap, the displacement along each of the r spatial
/// axes, the first axis first), optional bias `B [OC]` and `mask [N, offset_group * prod(K),
/// *O]`. Tap `k` of output position `o` reads channel `c` at `o * stride - pad_begin + k *
/// dilation + offset`, bilinearly (taps outside the image count as zeros, as ONNX's reference
/// reads through GridSample with `align_corners`), times the mask; the output is the
/// convolution of those samples with `W`, plus `B`. Any number of spatial axes.
pub(super) fn deform_conv(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let w = im.f32_tensor(n, 1)?;
    let offset = im.f32_tensor(n, 2)?;
    let (xs, ws, os) = (
        x.shape().unwrap_or_default(),
        w.shape().unwrap_or_default(),
        offset.shape().unwrap_or_default(),
    );
    let r = xs.len().saturating_sub(2);
    if r == 0 || ws.len() != r + 2 || os.len() != r + 2 || os[0] != xs[0] {
        return Err(im.malformed(
            n,
            format!(
                "X {xs:?}, W {ws:?} and offset {os:?}: expected [N, C, *S], [OC, C / group, \
                 *K] and [N, offset_group * prod(K) * {r}, *O]"
            ),
        ));
    }
    let group = attr_i(n, "group", 1);
    let offset_group = attr_i(n, "offset_group", 1);
    let (batch, channels, oc) = (xs[0], xs[1], ws[0]);
    if group < 1 || offset_group < 1 {
        return Err(im.malformed(
            n,
            format!("group {group} and offset_group {offset_group} must be at least 1"),
        ));
    }
    let (group, offset_group) = (group as usize, offset_group as usize);
    if ws[1] * group != channels || oc % group != 0 || channels % offset_group != 0 {
        return Err(im.malformed(
            n,
            format!(
                "group {group}: X has {channels} channels, W is {ws:?} (C / group input \
                 channels, OC a multiple of group); offset_group {offset_group} must divide C"
            ),
        ));
    }
    let kernel = match attr_ints(n, "kernel_shape") {
        Some(_) => spatial_list(im, n, "kernel_shape", r, 1, 1)?,
        None => ws[2..].to_vec(),
    };
    if kernel != ws[2..] {
        return Err(im.malformed(n, format!("kernel_shape {kernel:?} but W is {ws:?}")));
    }
    let strides = spatial_list(im, n, "strides", r, 1, 1)?;
    let dilations = spatial_list(im, n, "dilations", r, 1, 1)?;
    let pads = match attr_ints(n, "pads") {
        None => vec![0i64; 2 * r],
        Some(p) if p.len() == 2 * r && p.iter().all(|&v| v >= 0) => p,
        Some(p) => {
            return Err(
                im.malformed(n, format!("pads = {p:?}: expected {} values of at least 0", 2 * r))
            );
        }
    };
    let taps: usize = kernel.iter().product();
    let out = os[2..].to_vec();
    for a in 0..r {
        let span = (kernel[a] - 1) * dilations[a] + 1;
        let padded = xs[2 + a] as i64 + pads[a] + pads[r + a];
        let want = (padded - span as i64).div_euclid(strides[a] as i64) + 1;
        if want != out[a] as i64 {
            return Err(im.malformed(
                n,
                format!(
                    "offset's spatial shape {out:?}: the kernel, pads, strides and dilations \
                     give {want} along spatial axis {a}"
                ),
            ));
        }
    }
    if os[1] != offset_group * taps * r {
        return Err(im.malformed(
            n,
            format!(
                "offset has {} channels; offset_group {offset_group} * {taps} taps * {r} axes = {}",
                os[1],
                offset_group * taps * r
            ),
        ));
    }
    let q: usize = out.iter().product();
    let p: usize = xs[2..].iter().product();
    if p * channels * batch >= 1 << 24 {
        return Err(im.unsupported(
            n,
            "an input of 2^24 elements or more (lumen computes the sample positions in f32)",
        ));
    }
    // [N, og, K, r, Q]: each axis's displacement, [N, og, K, Q].
    let offset = offset.reshape(vec![batch, offset_group, taps, r, q]);
    let mask = match n.input.get(4).filter(|s| !s.is_empty()) {
        Some(_) => {
            let m = im.f32_tensor(n, 4)?;
            let want = [&[batch, offset_group * taps][..], &out].concat();
            if m.shape().unwrap_or_default() != want {
                return Err(im.malformed(
                    n,
                    format!("mask is {:?}, expected {want:?}", m.shape().unwrap_or_default()),
                ));
            }
            Some(m.reshape(vec![batch, offset_group, taps, q]))
        }
        None => None,
    };
    // Per axis, the two bilinear taps: (clamped index, weight times inside).
    let mut axes: Vec<[(Tensor, Tensor); 2]> = Vec::with_capacity(r);
    for a in 0..r {
        // Where tap k of output position o starts along axis a, before the offset.
        let mut base = Vec::with_capacity(taps * q);
        for k in 0..taps {
            let ka = k / kernel[a + 1..].iter().product::<usize>() % kernel[a];
            for o in 0..q {
                let oa = o / out[a + 1..].iter().product::<usize>() % out[a];
                base.push((oa * strides[a]) as f32 - pads[a] as f32 + (ka * dilations[a]) as f32);
            }
        }
        let base = im.const_weight(n, &format!("positions{a}"), Const::f32(vec![taps, q], base))?;
        let pos = offset.slice(3, a, a + 1).reshape(vec![batch, offset_group, taps, q]) + base;
        let lo = floor(&pos);
        let t = &pos - &lo;
        let len = xs[2 + a] as f32;
        let tap = |i: Tensor, w: Tensor| {
            let inside = i.less_than(0.0).select(0.0, 1.0) * i.less_than(len).select(1.0, 0.0);
            (i.maximum(0.0).minimum(len - 1.0), w * inside)
        };
        axes.push([tap(lo.clone(), 1.0 - &t), tap(&lo + 1.0, t)]);
    }
    let per_group = channels / offset_group;
    let data = x.reshape(vec![batch, offset_group, per_group, p]);
    let mut sampled: Option<Tensor> = None;
    for combo in 0..1usize << r {
        let (mut flat, mut weight): (Option<Tensor>, Option<Tensor>) = (None, None);
        let mut stride = p;
        for (a, pair) in axes.iter().enumerate() {
            let (index, w) = &pair[(combo >> a) & 1];
            stride /= xs[2 + a];
            let term = index * stride as f32;
            flat = Some(match flat {
                None => term,
                Some(f) => f + term,
            });
            weight = Some(match weight {
                None => w.clone(),
                Some(v) => v * w,
            });
        }
        let (Some(flat), Some(mut weight)) = (flat, weight) else { continue };
        if let Some(m) = &mask {
            weight = weight * m;
        }
        let indices = flat
            .reshape(vec![batch, offset_group, 1, taps * q])
            .expand(vec![batch, offset_group, per_group, taps * q])
            .cast(DType::I64);
        let picked = data.gather_elements(3, &indices)
            * weight.reshape(vec![batch, offset_group, 1, taps * q]);
        sampled = Some(match sampled {
            None => picked,
            Some(s) => s + picked,
        });
    }
    let Some(sampled) = sampled else { return Err(im.malformed(n, "no taps")) };
    // [N, C, K, Q] -> [N, group, C / group * K, Q], times W as [group, OC / group, C / group * K].
    let depth = channels / group * taps;
    let columns = sampled.reshape(vec![batch, group, depth, q]);
    let kernels =
        w.reshape(vec![1, group, oc / group, depth]).expand(vec![batch, group, oc / group, depth]);
    let mut y = kernels.matmul(columns).reshape([&[batch, oc][..], &out].concat());
    if n.input.get(3).is_some_and(|s| !s.is_empty()) {
        let b = im.f32_tensor(n, 3)?;
        if b.shape().unwrap_or_default() != [oc] {
            return Err(im.malformed(
                n,
                format!("B is {:?}, expected [{oc}]", b.shape().unwrap_or_default()),
            ));
        }
        let mut shape = vec![oc];
        shape.resize(r + 1, 1);
        y = y + b.reshape(shape);
    }
    one(y)
}
