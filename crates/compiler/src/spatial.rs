//! Spatial composites: padding, pooling, nearest upsampling by whole factors and transposed
//! convolution, written as DSL functions over the primitives (the convolution itself is one:
//! [`Tensor::conv`]).
//!
//! - Padding is a `concat` along each padded axis of the tensor and its fill: a broadcast
//!   constant, a broadcast edge slice, or the mirrored one-element slices (one copy per padded
//!   axis, ONNX `Pad`'s `constant`, `edge` and `reflect` modes).
//! - Max pooling over 1 to 3 spatial axes is one op, [`HlirOp::MaxPool`], which skips the
//!   padding rather than copying the input into a padded one. Average pooling (and a max pool
//!   over more axes) pads, views each spatial axis as sliding windows ([`Tensor::window`], no
//!   copy: Luminal pools the same way) and reduces over the window axes; an average divides by
//!   the count of the elements each window covers, itself a pooled sum of ones, so
//!   `count_include_pad` and `ceil_mode` need no special case.
//! - A transposed convolution is a convolution of the input spread out by zeros (the stride)
//!   with the kernels flipped and their channel axes swapped, as every framework defines it.
//!
//! Spatial axes are the trailing ones (`[N, C, *spatial]`); every list has one entry per
//! spatial axis. Bad parameters are recorded, as by every DSL call, and reported by `compile`.

use crate::conv::{ConvSpec, MAX_SPATIAL, PoolSpec};
use crate::dsl::Tensor;
use crate::error::{CompileError, SourceLocation};
use crate::hlir::HlirOp;

/// How [`Tensor::pad`] fills the elements it adds (ONNX `Pad`'s modes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// Every added element is this value.
    Constant(f32),
    /// The nearest element of the axis is repeated (`edge`).
    Edge,
    /// The axis is mirrored without repeating its end element (`reflect`: pads of at most
    /// length - 1).
    Reflect,
    /// The axis repeats periodically (`wrap`, opset 19: pads of at most its length).
    Wrap,
}

/// A transposed convolution's parameters (ONNX `ConvTranspose`, PyTorch's `ConvTranspose*d`),
/// one entry per spatial axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvTransposeSpec {
    /// Elements between the input's positions in the output (at least 1).
    pub strides: Vec<usize>,
    /// Elements between kernel taps (at least 1).
    pub dilations: Vec<usize>,
    /// Output elements cut before and after each axis.
    pub pads: Vec<(usize, usize)>,
    /// Elements added after each axis of the output (less than the stride or the dilation).
    pub output_padding: Vec<usize>,
    /// Channel groups.
    pub groups: usize,
}

/// One spatial axis of a pooling: the output length and the end padding `ceil_mode` adds
/// beyond the given pads, for an input of `len` with `pads`, a window spanning `span` and a
/// step of `stride`. The last window must start inside the input or its leading pad
/// (PyTorch's and ONNX Runtime's rule), so `ceil_mode` never adds a window of padding alone.
fn pooled_len(
    len: usize,
    (pb, pe): (usize, usize),
    span: usize,
    stride: usize,
    ceil: bool,
) -> (usize, usize) {
    let padded = len + pb + pe;
    if padded < span {
        return (0, 0);
    }
    let room = padded - span;
    let mut out = if ceil { room.div_ceil(stride) } else { room / stride } + 1;
    if ceil && (out - 1) * stride >= len + pb {
        out -= 1;
    }
    let extra = ((out - 1) * stride + span).saturating_sub(padded);
    (out, extra)
}

impl Tensor {
    /// Records a [`CompileError::BadArgument`] for this composite, at the caller's line.
    #[track_caller]
    fn bad_argument(&self, op: &'static str, reason: String) -> Tensor {
        self.graph().record(CompileError::BadArgument {
            op,
            reason,
            location: SourceLocation::caller(),
        });
        self.clone()
    }

    /// The tensor padded along its trailing `pads.len()` axes, `pads[i] = (before, after)`
    /// elements, filled as `mode` says ([`PadMode`]). One copy per padded axis.
    #[track_caller]
    pub fn pad(&self, pads: &[(usize, usize)], mode: PadMode) -> Tensor {
        let Some(shape) = self.shape() else { return self.clone() };
        if pads.len() > shape.len() {
            return self.bad_argument(
                "pad",
                format!("{} pads for a tensor of rank {}", pads.len(), shape.len()),
            );
        }
        let first = shape.len() - pads.len();
        let mut x = self.clone();
        for (i, &(before, after)) in pads.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            let axis = first + i;
            let shape = x.shape().unwrap_or_default();
            let len = shape[axis];
            let fits = match mode {
                PadMode::Constant(_) => true,
                PadMode::Edge => len > 0,
                PadMode::Reflect => before < len && after < len,
                PadMode::Wrap => before <= len && after <= len,
            };
            if !fits {
                return self.bad_argument(
                    "pad",
                    format!(
                        "{mode:?} padding of ({before}, {after}) along axis {axis} of length \
                         {len} (edge needs a non-empty axis, reflect pads shorter than it, wrap \
                         pads no longer)"
                    ),
                );
            }
            let a = axis as isize;
            let fill = |count: usize, at_end: bool| -> Vec<Tensor> {
                if count == 0 {
                    return Vec::new();
                }
                let mut part = shape.clone();
                part[axis] = count;
                match mode {
                    PadMode::Constant(v) => vec![x.graph().constant(v).expand(part)],
                    PadMode::Edge => {
                        let e = if at_end { len - 1 } else { 0 };
                        vec![x.slice(a, e, e + 1).expand(part)]
                    }
                    // Mirrored: before the axis, elements count..1; after it, len-2 down.
                    PadMode::Reflect => (0..count)
                        .map(|j| if at_end { len - 2 - j } else { count - j })
                        .map(|e| x.slice(a, e, e + 1))
                        .collect(),
                    // The other end: the last `count` elements before, the first after.
                    PadMode::Wrap if at_end => vec![x.slice(a, 0, count)],
                    PadMode::Wrap => vec![x.slice(a, len - count, len)],
                }
            };
            let mut parts = fill(before, false);
            parts.push(x.clone());
            parts.extend(fill(after, true));
            x = x.graph().concat(&parts, a);
        }
        x
    }

    /// Checks a pooling's lists against the tensor: one entry per spatial axis, kernel,
    /// strides and dilations at least 1, at most `rank - 2` spatial axes.
    #[track_caller]
    fn pool_lists_ok(
        &self,
        op: &'static str,
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[(usize, usize)],
    ) -> bool {
        let Some(rank) = self.rank() else { return false };
        let n = kernel.len();
        let problem = if n == 0 || n + 2 > rank {
            Some(format!("{n} spatial axes for a tensor of rank {rank} (expected [N, C, ...])"))
        } else if strides.len() != n || dilations.len() != n || pads.len() != n {
            Some(format!(
                "kernel {kernel:?}, strides {strides:?}, dilations {dilations:?} and pads \
                 {pads:?} must each have {n} entries"
            ))
        } else if kernel.iter().chain(strides).chain(dilations).any(|&v| v == 0) {
            Some(format!(
                "kernel {kernel:?}, strides {strides:?} and dilations {dilations:?} must be at \
                 least 1"
            ))
        } else {
            None
        };
        match problem {
            Some(reason) => {
                self.bad_argument(op, reason);
                false
            }
            None => true,
        }
    }

    /// Windows over the trailing spatial axes of a padded tensor, reduced by `max` or `sum`:
    /// the shared body of the poolings.
    #[track_caller]
    fn pool_reduce(
        &self,
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        max: bool,
    ) -> Tensor {
        let rank = self.rank().unwrap_or(0);
        let base = rank - kernel.len();
        let mut t = self.clone();
        for i in 0..kernel.len() {
            t = t.window((base + 2 * i) as isize, kernel[i], strides[i], dilations[i]);
        }
        for i in (0..kernel.len()).rev() {
            let axis = (base + 2 * i + 1) as isize;
            t = if max { t.max(axis, false) } else { t.sum(axis, false) };
        }
        t
    }

    /// The padding each spatial axis needs, the given pads plus what `ceil_mode` adds at the
    /// end, and whether any window reaches past the given pads.
    fn pool_pads(
        &self,
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[(usize, usize)],
        ceil_mode: bool,
    ) -> (Vec<(usize, usize)>, Vec<(usize, usize)>) {
        let shape = self.shape().unwrap_or_default();
        let base = shape.len() - kernel.len();
        let mut extra = Vec::with_capacity(kernel.len());
        for i in 0..kernel.len() {
            let span = (kernel[i] - 1) * dilations[i] + 1;
            let (_, more) = pooled_len(shape[base + i], pads[i], span, strides[i], ceil_mode);
            extra.push((0, more));
        }
        let total = pads.iter().zip(&extra).map(|(&(b, e), &(_, x))| (b, e + x)).collect();
        (total, extra)
    }

    /// Max pooling over the trailing `kernel.len()` axes (ONNX `MaxPool`, PyTorch's
    /// `MaxPool*d`): padded positions never win (-inf), `ceil_mode` rounds the output length
    /// up. NaN in a window gives NaN, as the `max` reduction does. One [`HlirOp::MaxPool`]
    /// over 1 to 3 spatial axes (the axes before them merged into `[1, C]` when there are more
    /// than two); more spatial axes pad with -inf and reduce windows, the same values.
    #[track_caller]
    pub fn max_pool(
        &self,
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[(usize, usize)],
        ceil_mode: bool,
    ) -> Tensor {
        if !self.pool_lists_ok("max_pool", kernel, strides, dilations, pads) {
            return self.clone();
        }
        let (total, _) = self.pool_pads(kernel, strides, dilations, pads, ceil_mode);
        if kernel.len() > MAX_SPATIAL {
            return self
                .pad(&total, PadMode::Constant(f32::NEG_INFINITY))
                .pool_reduce(kernel, strides, dilations, true);
        }
        let spec = PoolSpec {
            kernel: kernel.to_vec(),
            strides: strides.to_vec(),
            dilations: dilations.to_vec(),
            pads: total,
        };
        let shape = self.shape().unwrap_or_default();
        let base = shape.len() - kernel.len();
        if base == 2 {
            return self.op(HlirOp::MaxPool(spec), &[]);
        }
        // [A.., *spatial] as [1, prod(A), *spatial] and back.
        let mut merged = vec![1, shape[..base].iter().product()];
        merged.extend(&shape[base..]);
        let pooled = self.reshape(merged).op(HlirOp::MaxPool(spec), &[]);
        let mut back = shape[..base].to_vec();
        back.extend(pooled.shape().unwrap_or_default().iter().skip(2));
        pooled.reshape(back)
    }

    /// Average pooling over the trailing `kernel.len()` axes (ONNX `AveragePool`, PyTorch's
    /// `AvgPool*d`): each window's sum divided by the elements it covers, padding counted
    /// when `count_include_pad` (never the extra end positions `ceil_mode` adds).
    #[track_caller]
    pub fn avg_pool(
        &self,
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[(usize, usize)],
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Tensor {
        if !self.pool_lists_ok("avg_pool", kernel, strides, dilations, pads) {
            return self.clone();
        }
        let (total, extra) = self.pool_pads(kernel, strides, dilations, pads, ceil_mode);
        let sum =
            self.pad(&total, PadMode::Constant(0.0)).pool_reduce(kernel, strides, dilations, false);
        let padded = pads.iter().any(|&(b, e)| b + e > 0);
        let ragged = extra.iter().any(|&(_, e)| e > 0);
        if !ragged && (count_include_pad || !padded) {
            let taps: usize = kernel.iter().product();
            return sum * (1.0 / taps as f32);
        }
        // The count per window: the same pooling of ones over the spatial axes alone.
        let shape = self.shape().unwrap_or_default();
        let base = shape.len() - kernel.len();
        let mut ones_shape = vec![1; base];
        ones_shape.extend(&shape[base..]);
        let ones = self.graph().constant(1.0).expand(ones_shape);
        let covered = if count_include_pad {
            ones.pad(pads, PadMode::Constant(1.0)).pad(&extra, PadMode::Constant(0.0))
        } else {
            ones.pad(&total, PadMode::Constant(0.0))
        };
        sum / covered.pool_reduce(kernel, strides, dilations, false)
    }

    /// Nearest-neighbour upsampling of the trailing `factors.len()` axes by whole factors
    /// (`nn.Upsample(scale_factor=2)`, ONNX `Resize` in `nearest` mode with integer scales):
    /// every element repeated `factor` times along its axis. One copy.
    #[track_caller]
    pub fn upsample_nearest(&self, factors: &[usize]) -> Tensor {
        let Some(shape) = self.shape() else { return self.clone() };
        if factors.len() > shape.len() || factors.contains(&0) {
            return self.bad_argument(
                "upsample_nearest",
                format!("factors {factors:?} for a tensor of shape {shape:?} (each at least 1)"),
            );
        }
        let base = shape.len() - factors.len();
        // [.., L, 1, ..] expanded to [.., L, f, ..], then the pairs merged.
        let mut split = shape[..base].to_vec();
        let mut spread = split.clone();
        let mut merged = split.clone();
        for (i, &f) in factors.iter().enumerate() {
            let len = shape[base + i];
            split.extend([len, 1]);
            spread.extend([len, f]);
            merged.push(len * f);
        }
        self.reshape(split).expand(spread).reshape(merged)
    }

    /// A transposed convolution (ONNX `ConvTranspose`): `self` is `x [N, C, *in]`, `w` the
    /// kernels `[C, OC / groups, *kernel]`, `bias` an optional `[OC]`; the output along each
    /// axis is `stride (in - 1) + output_padding + dilation (k - 1) + 1 - pads`. Computed as
    /// the convolution of `x` spread out by `stride - 1` zeros between elements (and padded by
    /// `dilation (k - 1)` less the pads) with the kernels flipped and their channel axes
    /// swapped per group.
    #[track_caller]
    pub fn conv_transpose(
        &self,
        w: &Tensor,
        bias: Option<&Tensor>,
        spec: &ConvTransposeSpec,
    ) -> Tensor {
        let (Some(xs), Some(ws)) = (self.shape(), w.shape()) else { return self.clone() };
        let n = xs.len().saturating_sub(2);
        let g = spec.groups;
        let lists_ok = spec.strides.len() == n
            && spec.dilations.len() == n
            && spec.pads.len() == n
            && spec.output_padding.len() == n;
        let problem = if !(1..=3).contains(&n) || ws.len() != xs.len() {
            Some(format!(
                "input {xs:?} and weight {ws:?} (expected [N, C, ...] and [C, OC/g, ...])"
            ))
        } else if !lists_ok {
            Some(format!("every list must have {n} entries: {spec:?}"))
        } else if g == 0 || xs[1] % g != 0 || ws[0] != xs[1] {
            Some(format!(
                "group = {g} must divide the input channels ({}), which the weight's first axis \
                 ({}) must equal",
                xs[1], ws[0]
            ))
        } else if spec.strides.iter().chain(&spec.dilations).any(|&v| v == 0) {
            Some(format!(
                "strides {:?} and dilations {:?} must be at least 1",
                spec.strides, spec.dilations
            ))
        } else if (0..n).any(|i| spec.output_padding[i] >= spec.strides[i].max(spec.dilations[i])) {
            Some(format!(
                "output_padding {:?} must be smaller than the stride or the dilation",
                spec.output_padding
            ))
        } else {
            None
        };
        if let Some(reason) = problem {
            return self.bad_argument("conv_transpose", reason);
        }
        let (c, ocg) = (xs[1], ws[1]);
        let cg = c / g;
        // Kernels [C, OC/g, *k] -> [g, C/g, OC/g, *k] -> [g, OC/g, C/g, *k] -> [OC, C/g, *k],
        // then each kernel axis reversed.
        let mut grouped = vec![g, cg, ocg];
        grouped.extend(&ws[2..]);
        let mut perm: Vec<isize> = vec![0, 2, 1];
        perm.extend((3..3 + n as isize).collect::<Vec<_>>());
        let mut conv_w_shape = vec![g * ocg, cg];
        conv_w_shape.extend(&ws[2..]);
        let mut kernel = w.reshape(grouped).permute(&perm).reshape(conv_w_shape);
        for i in 0..n {
            let axis = (2 + i) as isize;
            let k = ws[2 + i];
            if k > 1 {
                let taps: Vec<Tensor> =
                    (0..k).rev().map(|t| kernel.slice(axis, t, t + 1)).collect();
                kernel = w.graph().concat(&taps, axis);
            }
        }
        // The input spread out: stride - 1 zeros after every element but the last.
        let mut spread = self.clone();
        for i in 0..n {
            let s = spec.strides[i];
            if s == 1 {
                continue;
            }
            let axis = 2 + i;
            let shape = spread.shape().unwrap_or_default();
            let len = shape[axis];
            let mut one = shape.clone();
            one.insert(axis + 1, 1);
            let mut zeros = one.clone();
            zeros[axis + 1] = s - 1;
            let cells = spread.reshape(one);
            let zero = spread.graph().constant(0.0).expand(zeros);
            let mut flat = shape.clone();
            flat[axis] = len * s;
            let joined = spread.graph().concat(&[cells, zero], (axis + 1) as isize).reshape(flat);
            spread = joined.slice(axis as isize, 0, (len - 1) * s + 1);
        }
        // Padding dilation (k - 1) on each side, less the pads, plus output_padding at the end;
        // a pad larger than that crops instead.
        let mut conv_pads = Vec::with_capacity(n);
        for i in 0..n {
            let full = spec.dilations[i] * (ws[2 + i] - 1);
            let (pb, pe) = spec.pads[i];
            let end = full + spec.output_padding[i];
            let axis = (2 + i) as isize;
            let len = spread.shape().unwrap_or_default()[2 + i];
            let (start, stop) = (pb.saturating_sub(full), len - pe.saturating_sub(end).min(len));
            if start > 0 || stop < len {
                spread = spread.slice(axis, start.min(stop), stop);
            }
            conv_pads.push((full.saturating_sub(pb), end.saturating_sub(pe)));
        }
        let conv = ConvSpec {
            strides: vec![1; n],
            dilations: spec.dilations.clone(),
            pads: conv_pads,
            groups: g,
        };
        spread.conv(kernel, bias, &conv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_lengths_follow_pytorch() {
        // 5 with k 2 s 2: floor 2, ceil 3 (one extra end element).
        assert_eq!(pooled_len(5, (0, 0), 2, 2, false), (2, 0));
        assert_eq!(pooled_len(5, (0, 0), 2, 2, true), (3, 1));
        // 6 with k 3 s 2 p 1: floor (8 - 3) / 2 + 1 = 3; ceil 4 would start at 6 >= 6 + 1? no:
        // (4 - 1) * 2 = 6 < 7, so 4, one extra element.
        assert_eq!(pooled_len(6, (1, 1), 3, 2, true), (4, 1));
        // A last window that would start in the end padding alone is dropped.
        assert_eq!(pooled_len(4, (0, 1), 2, 2, true), (2, 0));
    }
}
