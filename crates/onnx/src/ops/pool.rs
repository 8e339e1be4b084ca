//! Poolings: `MaxPool` and `AveragePool` (kernel, strides, dilations, explicit or automatic
//! padding, `ceil_mode`, `count_include_pad`) as the DSL's window-and-reduce composites, and
//! `GlobalAveragePool` / `GlobalMaxPool` as reductions over the spatial axes; `LpPool` as an
//! average pool of `|x|^p`.

use lumen_compiler::Tensor;

use super::conv::{spatial_list, spatial_pads};
use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr_i, attr_ints, one};
use crate::proto::NodeProto;

/// The pooling operators, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("MaxPool", max_pool),
    ("AveragePool", average_pool),
    ("GlobalAveragePool", global_average_pool),
    ("GlobalMaxPool", global_max_pool),
    ("LpPool", lp_pool),
];

/// The pooled input and its parameters: `(x, kernel, strides, dilations, pads, ceil_mode)`.
type Pooling = (Tensor, Vec<usize>, Vec<usize>, Vec<usize>, Vec<(usize, usize)>, bool);

fn pooling(im: &mut Importer, n: &NodeProto) -> Result<Pooling, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    if !(3..=5).contains(&shape.len()) {
        return Err(im.unsupported(
            n,
            format!(
                "an input of shape {shape:?} (lumen pools [N, C, ...] with 1 to 3 spatial axes)"
            ),
        ));
    }
    let s = shape.len() - 2;
    if attr_ints(n, "kernel_shape").is_none() {
        return Err(im.malformed(n, "no kernel_shape"));
    }
    let kernel = spatial_list(im, n, "kernel_shape", s, 1, 1)?;
    let strides = spatial_list(im, n, "strides", s, 1, 1)?;
    let dilations = spatial_list(im, n, "dilations", s, 1, 1)?;
    let pads = spatial_pads(im, n, &shape[2..], &kernel, &strides, &dilations)?;
    for (i, (&(b, e), &k)) in pads.iter().zip(&kernel).enumerate() {
        let span = (k - 1) * dilations[i] + 1;
        if span > shape[2 + i] + b + e {
            return Err(im.malformed(
                n,
                format!(
                    "kernel_shape: a kernel spanning {span} along spatial axis {i} is larger than \
                     the padded input ({})",
                    shape[2 + i] + b + e
                ),
            ));
        }
        if b >= span || e >= span {
            return Err(im.malformed(
                n,
                format!("pads ({b}, {e}) along spatial axis {i} must be smaller than the kernel ({span})"),
            ));
        }
    }
    let ceil = attr_i(n, "ceil_mode", 0) != 0;
    Ok((x, kernel, strides, dilations, pads, ceil))
}

/// `MaxPool` (its `Indices` output is not imported).
fn max_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    if n.output.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(im.unsupported(n, "the Indices output (lumen returns the pooled values only)"));
    }
    let (x, kernel, strides, dilations, pads, ceil) = pooling(im, n)?;
    one(x.max_pool(&kernel, &strides, &dilations, &pads, ceil))
}

/// `AveragePool`: padding counted in the divisor when `count_include_pad`.
fn average_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, kernel, strides, dilations, pads, ceil) = pooling(im, n)?;
    let include = attr_i(n, "count_include_pad", 0) != 0;
    one(x.avg_pool(&kernel, &strides, &dilations, &pads, ceil, include))
}

/// `LpPool`: `(sum over the window of |x|^p)^(1/p)`, padding counted as zeros: the average
/// pool of `|x|^p` with the padding included, times the window's size. Not `ceil_mode` (its
/// clipped end windows would need their own count).
fn lp_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, kernel, strides, dilations, pads, ceil) = pooling(im, n)?;
    if ceil {
        return Err(im.unsupported(n, "ceil_mode = 1"));
    }
    let p = attr_i(n, "p", 2);
    if p < 1 {
        return Err(im.malformed(n, format!("p = {p} (at least 1)")));
    }
    let size = kernel.iter().product::<usize>() as f32;
    let powered = match p {
        1 => x.maximum(-&x),
        2 => &x * &x,
        _ => x.maximum(-&x).pow(p as f32),
    };
    let sum = powered.avg_pool(&kernel, &strides, &dilations, &pads, false, true) * size;
    one(match p {
        1 => sum,
        2 => sum.sqrt(),
        _ => sum.pow(1.0 / p as f32),
    })
}

/// The input as `[N, C, P]` (its spatial axes merged, a view when they are contiguous) and
/// the shape the pooled result takes, `[N, C, 1, ...]`.
fn merged(im: &mut Importer, n: &NodeProto) -> Result<(Tensor, Vec<usize>), OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    if shape.len() < 3 {
        return Err(im.malformed(n, format!("input of shape {shape:?} (expected [N, C, ...])")));
    }
    let p: usize = shape[2..].iter().product();
    let mut pooled = shape[..2].to_vec();
    pooled.resize(shape.len(), 1);
    Ok((x.reshape(vec![shape[0], shape[1], p]), pooled))
}

/// `GlobalAveragePool`: the mean over the spatial axes, kept with length 1.
fn global_average_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, pooled) = merged(im, n)?;
    one(x.mean(-1, false).reshape(pooled))
}

/// `GlobalMaxPool`: the maximum over the spatial axes, kept with length 1.
fn global_max_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, pooled) = merged(im, n)?;
    one(x.max(-1, false).reshape(pooled))
}
