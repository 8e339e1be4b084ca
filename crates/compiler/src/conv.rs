//! Convolution: the op's parameters ([`ConvSpec`]), what its epilogue applies
//! ([`ConvEpilogue`]), its geometry once operand shapes are known ([`ConvGeometry`]: output
//! shape, FLOPs, the im2col workspace), and its f64 semantics ([`conv_f64`]), which the HLIR
//! interpreter and the LLIR reference both run, so every engine is checked against one
//! definition.
//!
//! Layout is ONNX's and PyTorch's: `x [N, C, *spatial]`, `w [OC, C / groups, *kernel]`, output
//! `[N, OC, *out]`, row-major f32, 1 to 3 spatial axes. Output channel `oc` belongs to group
//! `oc / (OC / groups)` and reads the input channels of that group. Along each spatial axis
//! `out = (in + pad_begin + pad_end - dilation (k - 1) - 1) / stride + 1` (floor); padded
//! positions read 0. The epilogue is ONNX Runtime's `FusedConv` (and cuDNN's
//! `ConvBiasActivation`): `y = act(conv(x, w) + bias[oc] + residual)`, in that order.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::ops::{ElemOp, UnaryOp, UnknownOp};

/// Most spatial axes a convolution has (Conv1d, Conv2d, Conv3d).
pub const MAX_SPATIAL: usize = 3;

/// A convolution's parameters as the DSL and the HLIR carry them, one entry per spatial axis
/// (all three lists have the rank of the spatial axes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ConvSpec {
    /// Elements between output positions along each axis (at least 1).
    pub strides: Vec<usize>,
    /// Elements between kernel taps along each axis (at least 1; 1 = adjacent).
    pub dilations: Vec<usize>,
    /// Zeros added before and after each axis.
    pub pads: Vec<(usize, usize)>,
    /// Channel groups (1: dense; the channel count: depthwise). Divides C and OC.
    pub groups: usize,
}

impl ConvSpec {
    /// Stride 1, dilation 1, no padding, one group, over `rank` spatial axes.
    pub fn unit(rank: usize) -> Self {
        Self {
            strides: vec![1; rank],
            dilations: vec![1; rank],
            pads: vec![(0, 0); rank],
            groups: 1,
        }
    }
}

impl fmt::Display for ConvSpec {
    /// `s=2,2 d=1,1 p=1,1,1,1 g=1` (pads as begin,end per axis).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let pads: Vec<usize> = self.pads.iter().flat_map(|&(b, e)| [b, e]).collect();
        write!(
            f,
            "s={} d={} p={} g={}",
            list(&self.strides),
            list(&self.dilations),
            list(&pads),
            self.groups
        )
    }
}

/// A max pool's parameters as the DSL and the HLIR carry them ([`crate::HlirOp::MaxPool`]),
/// one entry per spatial axis of `x [N, C, *spatial]`: the window, its step and the spacing of
/// its taps, and the padding (which never wins: it is skipped). `ceil_mode` is already in the
/// end pads (the DSL adds what it needs), so the output length along each axis is the
/// convolution's, `(in + pads - dilation (k - 1) - 1) / stride + 1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PoolSpec {
    /// Window length per axis (at least 1).
    pub kernel: Vec<usize>,
    /// Elements between output positions along each axis (at least 1).
    pub strides: Vec<usize>,
    /// Elements between window taps along each axis (at least 1).
    pub dilations: Vec<usize>,
    /// Positions added before and after each axis, skipped by the window.
    pub pads: Vec<(usize, usize)>,
}

impl fmt::Display for PoolSpec {
    /// `k=3,3 s=2,2 d=1,1 p=1,1,1,1` (pads as begin,end per axis).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let pads: Vec<usize> = self.pads.iter().flat_map(|&(b, e)| [b, e]).collect();
        write!(
            f,
            "k={} s={} d={} p={}",
            list(&self.kernel),
            list(&self.strides),
            list(&self.dilations),
            list(&pads)
        )
    }
}

/// What a convolution's epilogue applies to every output element, in this order: the bias of
/// its output channel, the residual operand's element (a skip connection's `add`), then the
/// activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Default)]
pub struct ConvEpilogue {
    /// `+ bias[oc]`: a third operand `[OC]`.
    pub bias: bool,
    /// `+ residual[n, oc, ...]`: an operand of the output's shape, after the bias.
    pub residual: bool,
    /// The activation last ([`UnaryOp::is_activation`]), if any.
    pub activation: Option<UnaryOp>,
}

impl ConvEpilogue {
    /// Operands the convolution reads: 2 (x, w), plus the bias, plus the residual.
    pub fn operands(self) -> usize {
        2 + usize::from(self.bias) + usize::from(self.residual)
    }

    /// Whether the epilogue does anything.
    pub fn is_empty(self) -> bool {
        !self.bias && !self.residual && self.activation.is_none()
    }

    /// FLOP per output element: 1 for the bias, 1 for the residual, the activation's own.
    pub fn flops_per_element(self) -> u64 {
        u64::from(self.bias)
            + u64::from(self.residual)
            + self.activation.map_or(0, |a| ElemOp::Unary(a).flops_per_element())
    }

    /// Applies the epilogue to `acc`, the convolution's sum, in f64.
    pub fn apply_f64(self, acc: f64, bias: f64, residual: f64) -> f64 {
        let y =
            acc + if self.bias { bias } else { 0.0 } + if self.residual { residual } else { 0.0 };
        match self.activation {
            Some(a) => ElemOp::Unary(a).eval_f64([y, 0.0, 0.0]),
            None => y,
        }
    }
}

impl fmt::Display for ConvEpilogue {
    /// `none`, or the parts joined by `+`: `bias+residual+relu`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.bias {
            parts.push("bias".into());
        }
        if self.residual {
            parts.push("residual".into());
        }
        if let Some(a) = self.activation {
            parts.push(a.to_string());
        }
        if parts.is_empty() { f.write_str("none") } else { f.write_str(&parts.join("+")) }
    }
}

impl FromStr for ConvEpilogue {
    type Err = UnknownOp;

    /// The [`fmt::Display`] form back.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut e = ConvEpilogue::default();
        if s == "none" {
            return Ok(e);
        }
        for part in s.split('+') {
            match part {
                "bias" => e.bias = true,
                "residual" => e.residual = true,
                act => {
                    let op: UnaryOp = act.parse()?;
                    if !op.is_activation() || e.activation.is_some() {
                        return Err(UnknownOp(s.to_string()));
                    }
                    e.activation = Some(op);
                }
            }
        }
        Ok(e)
    }
}

/// A convolution with its operand shapes resolved: everything a kernel needs, in a fixed-size
/// `Copy` form. The spatial axes are right-aligned in the three slots (a 2-D convolution's
/// height and width are slots 1 and 2, [`ConvGeometry::axes`]); the unused leading slots have
/// length 1, stride 1, dilation 1 and no padding, so every convolution runs the 3-D loops with
/// its innermost axis innermost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ConvGeometry {
    /// Images (N).
    pub batch: usize,
    /// Input channels (C).
    pub c_in: usize,
    /// Output channels (OC).
    pub c_out: usize,
    /// Channel groups.
    pub groups: usize,
    /// Spatial axes the tensors have (1 to [`MAX_SPATIAL`]).
    pub rank: usize,
    /// Input length per spatial axis.
    pub input: [usize; MAX_SPATIAL],
    /// Kernel length per spatial axis.
    pub kernel: [usize; MAX_SPATIAL],
    /// Output length per spatial axis.
    pub output: [usize; MAX_SPATIAL],
    /// Stride per spatial axis.
    pub stride: [usize; MAX_SPATIAL],
    /// Dilation per spatial axis.
    pub dilation: [usize; MAX_SPATIAL],
    /// Zeros before each spatial axis (those after follow from the output length).
    pub pad: [usize; MAX_SPATIAL],
}

impl ConvGeometry {
    /// The geometry of `spec` over `x` of shape `[N, C, *spatial]` and `w` of shape
    /// `[OC, C / groups, *kernel]`.
    ///
    /// # Errors
    /// A message naming what is wrong: ranks (1 to 3 spatial axes, `x` and `w` alike), a
    /// spec whose lists do not have the spatial rank, a stride or dilation of 0, groups of 0
    /// or not dividing C and OC, `w`'s channels not C / groups, or a kernel (dilated) larger
    /// than the padded input (no output position).
    pub fn new(spec: &ConvSpec, x: &[usize], w: &[usize]) -> Result<Self, String> {
        let rank = x.len().saturating_sub(2);
        if !(1..=MAX_SPATIAL).contains(&rank) {
            return Err(format!(
                "input of shape {x:?} has {} spatial axes (expected [N, C, ...] with 1 to 3)",
                x.len().saturating_sub(2)
            ));
        }
        if w.len() != x.len() {
            return Err(format!(
                "weight of shape {w:?} does not have the input's rank {}",
                x.len()
            ));
        }
        if spec.strides.len() != rank || spec.dilations.len() != rank || spec.pads.len() != rank {
            return Err(format!(
                "strides {:?}, dilations {:?} and pads {:?} must each have {rank} entries",
                spec.strides, spec.dilations, spec.pads
            ));
        }
        if let Some(s) = spec.strides.iter().chain(&spec.dilations).find(|&&s| s == 0) {
            return Err(format!(
                "strides {:?} and dilations {:?} must be at least 1 (got {s})",
                spec.strides, spec.dilations
            ));
        }
        let (n, c, oc, cg) = (x[0], x[1], w[0], w[1]);
        let g = spec.groups;
        if g == 0 || c % g != 0 || oc % g != 0 {
            return Err(format!(
                "group = {g} must divide the input channels ({c}) and the output channels ({oc})"
            ));
        }
        if cg * g != c {
            return Err(format!(
                "weight of shape {w:?} has {cg} input channels per group; the input's {c} \
                 channels in {g} groups need {}",
                c / g
            ));
        }
        let mut geo = ConvGeometry {
            batch: n,
            c_in: c,
            c_out: oc,
            groups: g,
            rank,
            input: [1; MAX_SPATIAL],
            kernel: [1; MAX_SPATIAL],
            output: [1; MAX_SPATIAL],
            stride: [1; MAX_SPATIAL],
            dilation: [1; MAX_SPATIAL],
            pad: [0; MAX_SPATIAL],
        };
        let first = MAX_SPATIAL - rank;
        for a in 0..rank {
            let (len, k) = (x[2 + a], w[2 + a]);
            let (s, d, (pb, pe)) = (spec.strides[a], spec.dilations[a], spec.pads[a]);
            let span = k.checked_sub(1).and_then(|k1| k1.checked_mul(d)).map(|v| v + 1);
            let padded = len.checked_add(pb).and_then(|v| v.checked_add(pe));
            let (Some(span), Some(padded)) = (span, padded) else {
                return Err(format!("axis {a}: sizes overflow"));
            };
            if k == 0 || span > padded {
                return Err(format!(
                    "kernel of {k} (dilation {d}, spanning {span}) is larger than the padded \
                     input along spatial axis {a} ({len} + pads {pb} and {pe} = {padded})"
                ));
            }
            let slot = first + a;
            geo.input[slot] = len;
            geo.kernel[slot] = k;
            geo.output[slot] = (padded - span) / s + 1;
            geo.stride[slot] = s;
            geo.dilation[slot] = d;
            geo.pad[slot] = pb;
        }
        Ok(geo)
    }

    /// The geometry of a max pool ([`PoolSpec`]) over `x [N, C, *spatial]`: a depthwise
    /// convolution's (`groups = OC = C`, a kernel `[C, 1, *kernel]`), each output channel
    /// reading its own input channel.
    ///
    /// # Errors
    /// As [`ConvGeometry::new`]: ranks, list lengths, a kernel, stride or dilation of 0, a
    /// window larger than the padded input.
    pub fn pool(spec: &PoolSpec, x: &[usize]) -> Result<Self, String> {
        let rank = x.len().saturating_sub(2);
        if spec.kernel.len() != rank {
            return Err(format!(
                "kernel {:?} must have one entry per spatial axis of the input {x:?}",
                spec.kernel
            ));
        }
        let conv = ConvSpec {
            strides: spec.strides.clone(),
            dilations: spec.dilations.clone(),
            pads: spec.pads.clone(),
            groups: 1,
        };
        // One channel through `new` (its checks), then every channel its own group.
        let mut one = x.to_vec();
        one[1] = 1;
        let mut w = vec![1, 1];
        w.extend(&spec.kernel);
        let mut g = ConvGeometry::new(&conv, &one, &w)?;
        (g.c_in, g.c_out, g.groups) = (x[1], x[1], x[1].max(1));
        Ok(g)
    }

    /// The slots of the three-element arrays that hold the convolution's own spatial axes, in
    /// order: the last `rank` (`1..3` for a 2-D convolution).
    pub fn axes(&self) -> std::ops::Range<usize> {
        MAX_SPATIAL - self.rank.min(MAX_SPATIAL)..MAX_SPATIAL
    }

    /// The input shape `[N, C, *in]`.
    pub fn input_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.c_in];
        s.extend(&self.input[self.axes()]);
        s
    }

    /// The weight shape `[OC, C / groups, *kernel]`.
    pub fn weight_shape(&self) -> Vec<usize> {
        let mut s = vec![self.c_out, self.c_in / self.groups.max(1)];
        s.extend(&self.kernel[self.axes()]);
        s
    }

    /// The output shape `[N, OC, *out]`.
    pub fn output_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.c_out];
        s.extend(&self.output[self.axes()]);
        s
    }

    /// Input positions per image and channel (product of the spatial input lengths).
    pub fn input_positions(&self) -> usize {
        self.input.iter().product()
    }

    /// Output positions per image and channel (P, the product of the output lengths).
    pub fn output_positions(&self) -> usize {
        self.output.iter().product()
    }

    /// Kernel taps per channel (the product of the kernel lengths).
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// The depth of each output's dot product: input channels per group times taps (the K of
    /// the im2col GEMM).
    pub fn depth(&self) -> usize {
        self.c_in / self.groups.max(1) * self.taps()
    }

    /// Whether the convolution is pointwise (every kernel length, stride and dilation 1, no
    /// padding): each group is then a plain product `w [OC/g, C/g] x x [C/g, P]`, no im2col.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1; MAX_SPATIAL]
            && self.stride == [1; MAX_SPATIAL]
            && self.pad == [0; MAX_SPATIAL]
            && self.output == self.input
    }

    /// Whether the convolution is depthwise: one input channel per group (groups = C), so
    /// each output channel reads one input channel (MobileNet's 3x3 convolutions).
    pub fn is_depthwise(&self) -> bool {
        self.groups > 1 && self.groups == self.c_in
    }

    /// Bytes of im2col workspace the CPU kernel needs: the patches of one image and group,
    /// `depth` rows of the `P` output positions rounded up to 16 (f32; the runtime packs them
    /// in strips of the micro-kernel's width, the last one padded to whole vectors), plus 64
    /// bytes to start them on a cache line; 0 for a depthwise convolution, which reads the
    /// input directly. A pointwise convolution packs its input too.
    pub fn workspace_bytes(&self) -> usize {
        if self.is_depthwise() {
            return 0;
        }
        self.depth()
            .saturating_mul(self.output_positions().next_multiple_of(16))
            .saturating_add(16)
            .saturating_mul(4)
    }

    /// Multiply-add FLOPs (2 per tap and input channel of every output element) plus the
    /// epilogue's, saturating.
    pub fn flops(&self, epilogue: ConvEpilogue) -> u64 {
        let wide = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
        let outputs = wide(self.batch)
            .saturating_mul(wide(self.c_out))
            .saturating_mul(wide(self.output_positions()));
        outputs
            .saturating_mul(2)
            .saturating_mul(wide(self.depth()))
            .saturating_add(outputs.saturating_mul(epilogue.flops_per_element()))
    }

    /// The input position (row-major index into one channel's spatial volume) that output
    /// position `out` (per axis) reads at kernel tap `tap` (per axis), or `None` for a padded
    /// position.
    #[inline]
    pub fn source(&self, out: [usize; MAX_SPATIAL], tap: [usize; MAX_SPATIAL]) -> Option<usize> {
        let mut index = 0usize;
        for a in 0..MAX_SPATIAL {
            let pos =
                (out[a] * self.stride[a] + tap[a] * self.dilation[a]).checked_sub(self.pad[a])?;
            if pos >= self.input[a] {
                return None;
            }
            index = index * self.input[a] + pos;
        }
        Some(index)
    }

    /// The parameters as dumps print them: `n=2 c=3 oc=8 g=1 in=32x32 k=3x3 out=16x16 s=2x2
    /// d=1x1 p=1x1` (spatial lists over the convolution's own axes; `p` the leading pads).
    pub fn text(&self) -> String {
        let list = |v: &[usize; MAX_SPATIAL]| {
            v[self.axes()].iter().map(usize::to_string).collect::<Vec<_>>().join("x")
        };
        format!(
            "n={} c={} oc={} g={} in={} k={} out={} s={} d={} p={}",
            self.batch,
            self.c_in,
            self.c_out,
            self.groups,
            list(&self.input),
            list(&self.kernel),
            list(&self.output),
            list(&self.stride),
            list(&self.dilation),
            list(&self.pad)
        )
    }
}

/// Splits a row-major index over the axes of lengths `dims` into its per-axis parts.
#[inline]
pub fn unravel3(mut i: usize, dims: [usize; MAX_SPATIAL]) -> [usize; MAX_SPATIAL] {
    let mut out = [0; MAX_SPATIAL];
    for a in (0..MAX_SPATIAL).rev() {
        out[a] = i % dims[a].max(1);
        i /= dims[a].max(1);
    }
    out
}

/// The convolution in f64, by the definition (a sum over every input channel of the group and
/// every kernel tap, padded positions skipped): the oracle of every engine. Operands are read
/// by row-major index in their logical shapes (`x [N, C, *in]`, `w [OC, C/g, *k]`, `bias
/// [OC]`, `residual [N, OC, *out]`), so a caller reads through whatever layout it holds.
/// Returns `[N, OC, *out]` row-major.
pub fn conv_f64(
    g: &ConvGeometry,
    epilogue: ConvEpilogue,
    x: impl Fn(usize) -> f64,
    w: impl Fn(usize) -> f64,
    bias: impl Fn(usize) -> f64,
    residual: impl Fn(usize) -> f64,
) -> Vec<f64> {
    let (p_in, p_out, taps) = (g.input_positions(), g.output_positions(), g.taps());
    let cg = g.c_in / g.groups.max(1);
    let ocg = g.c_out / g.groups.max(1);
    let mut out = Vec::with_capacity(g.batch * g.c_out * p_out);
    for n in 0..g.batch {
        for oc in 0..g.c_out {
            let group = oc / ocg.max(1);
            for p in 0..p_out {
                let pos = unravel3(p, g.output);
                let mut acc = 0.0f64;
                for ci in 0..cg {
                    let c = group * cg + ci;
                    for t in 0..taps {
                        if let Some(src) = g.source(pos, unravel3(t, g.kernel)) {
                            acc += x((n * g.c_in + c) * p_in + src) * w((oc * cg + ci) * taps + t);
                        }
                    }
                }
                let o = (n * g.c_out + oc) * p_out + p;
                out.push(epilogue.apply_f64(acc, bias(oc), residual(o)));
            }
        }
    }
    out
}

/// A max pool in f64, by the definition: each output the fold of `max` ([`ReduceOp::Max`]:
/// NaN wins, else the first of the largest values) over its window's taps in row-major order,
/// padded positions skipped (a window of padding alone is `-inf`). `x` is read by row-major
/// index in `[N, C, *in]`; returns `[N, C, *out]` row-major. The oracle of every engine, as
/// [`conv_f64`] is for convolutions.
///
/// [`ReduceOp::Max`]: crate::ReduceOp::Max
pub fn max_pool_f64(g: &ConvGeometry, x: impl Fn(usize) -> f64) -> Vec<f64> {
    let max = crate::ops::ReduceOp::Max;
    let (p_in, p_out, taps) = (g.input_positions(), g.output_positions(), g.taps());
    let mut out = Vec::with_capacity(g.batch * g.c_out * p_out);
    for plane in 0..g.batch * g.c_out {
        for p in 0..p_out {
            let pos = unravel3(p, g.output);
            let mut acc = max.identity_f64();
            for t in 0..taps {
                if let Some(src) = g.source(pos, unravel3(t, g.kernel)) {
                    acc = max.combine_f64(acc, x(plane * p_in + src));
                }
            }
            out.push(acc);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: usize, d: usize, p: usize, g: usize) -> ConvSpec {
        ConvSpec { strides: vec![s, s], dilations: vec![d, d], pads: vec![(p, p); 2], groups: g }
    }

    #[test]
    fn output_lengths_follow_onnx() {
        // 32x32, k 3, s 2, p 1: (32 + 2 - 3) / 2 + 1 = 16.
        let g = ConvGeometry::new(&spec(2, 1, 1, 1), &[2, 3, 32, 32], &[8, 3, 3, 3]).unwrap();
        assert_eq!(g.output_shape(), [2, 8, 16, 16]);
        assert_eq!(g.depth(), 27);
        assert_eq!(g.workspace_bytes(), (27 * 256 + 16) * 4);
        assert_eq!(g.text(), "n=2 c=3 oc=8 g=1 in=32x32 k=3x3 out=16x16 s=2x2 d=1x1 p=1x1");
        // Dilation 2 spans 5: (10 - 5) / 1 + 1 = 6.
        let g = ConvGeometry::new(&spec(1, 2, 0, 1), &[1, 1, 10, 10], &[1, 1, 3, 3]).unwrap();
        assert_eq!(g.output_shape(), [1, 1, 6, 6]);
        let pw = ConvGeometry::new(&spec(1, 1, 0, 2), &[1, 4, 5, 5], &[6, 2, 1, 1]).unwrap();
        assert!(pw.is_pointwise() && !pw.is_depthwise());
        assert_eq!(pw.workspace_bytes(), (2 * 32 + 16) * 4);
        let dw = ConvGeometry::new(&spec(1, 1, 1, 4), &[1, 4, 5, 5], &[4, 1, 3, 3]).unwrap();
        assert!(dw.is_depthwise() && dw.workspace_bytes() == 0);
        assert_eq!(dw.flops(ConvEpilogue::default()), 4 * 25 * 2 * 9);
    }

    #[test]
    fn bad_geometry_says_what() {
        let err = |s: &ConvSpec, x: &[usize], w: &[usize]| ConvGeometry::new(s, x, w).unwrap_err();
        assert!(err(&spec(1, 1, 0, 3), &[1, 4, 5, 5], &[6, 1, 3, 3]).contains("group = 3"));
        assert!(err(&spec(1, 1, 0, 1), &[1, 4, 2, 2], &[6, 4, 3, 3]).contains("larger than"));
        assert!(err(&spec(0, 1, 0, 1), &[1, 4, 5, 5], &[6, 4, 3, 3]).contains("at least 1"));
        assert!(err(&spec(1, 1, 0, 1), &[1, 4, 5, 5], &[6, 2, 3, 3]).contains("per group"));
        assert!(err(&spec(1, 1, 0, 1), &[4, 5], &[6, 4]).contains("spatial axes"));
    }

    #[test]
    fn conv_f64_by_hand() {
        // One 3x3 image, a 2x2 kernel of ones, pad 1 on each side, stride 2: outputs at padded
        // positions (0, 0), (0, 2), (2, 0), (2, 2) of the 5x5 padded image.
        let g = ConvGeometry::new(&spec(2, 1, 1, 1), &[1, 1, 3, 3], &[1, 1, 2, 2]).unwrap();
        assert_eq!(g.output_shape(), [1, 1, 2, 2]);
        let x: Vec<f64> = (1..=9).map(f64::from).collect();
        let e = ConvEpilogue { bias: true, residual: false, activation: None };
        let y = conv_f64(&g, e, |i| x[i], |_| 1.0, |_| 10.0, |_| 0.0);
        // [1], [2+3], [4+7], [5+6+8+9] plus the bias.
        assert_eq!(y, [11.0, 15.0, 21.0, 38.0]);
        let relu = ConvEpilogue { bias: false, residual: true, activation: Some(UnaryOp::Relu) };
        let y = conv_f64(&g, relu, |i| x[i], |_| -1.0, |_| 0.0, |i| [0.5, 100.0, 0.0, 0.0][i]);
        assert_eq!(y, [0.0, 95.0, 0.0, 0.0]);
    }

    #[test]
    fn epilogue_text_round_trips() {
        for e in [
            ConvEpilogue::default(),
            ConvEpilogue { bias: true, residual: true, activation: Some(UnaryOp::Relu) },
            ConvEpilogue { bias: false, residual: false, activation: Some(UnaryOp::Silu) },
        ] {
            assert_eq!(e.to_string().parse::<ConvEpilogue>(), Ok(e), "{e}");
        }
        assert!("bias+exp".parse::<ConvEpilogue>().is_err());
        assert_eq!(spec(2, 1, 1, 1).to_string(), "s=2,2 d=1,1 p=1,1,1,1 g=1");
    }
}
