//! Composites: softmax, normalisations, erf-GELU, sigmoid, linear layers and attention,
//! written as DSL functions over the primitives (Luminal's `hl_ops`, tinygrad's `tensor.py`).
//!
//! They add no IR and no kernel: each call emits primitive HLIR nodes, which the f64
//! reference interpreter checks for free and fusion sees like any other program. Every
//! function records the caller's line for the ops it emits. Shapes are row-major f32; `axis`
//! may be negative (from the last).

use std::borrow::Borrow;

use crate::dsl::Tensor;
use crate::error::{CompileError, ShapeText, SourceLocation};

impl Tensor {
    /// The length of `axis` (negative from the last), or 1 when the shape is unknown (an
    /// error upstream, already recorded) or the axis is out of range (recorded by the
    /// reduction that follows).
    fn axis_len(&self, axis: isize) -> usize {
        let Some(shape) = self.shape() else { return 1 };
        let rank = shape.len() as isize;
        let a = if axis < 0 { axis + rank } else { axis };
        usize::try_from(a).ok().and_then(|a| shape.get(a).copied()).unwrap_or(1)
    }

    /// Records an [`CompileError::AxisOutOfRange`] in the composite's own name when `axis`
    /// is not an axis of the tensor, so the user reads `softmax: axis 2 ...`, not the name of
    /// a primitive inside it.
    #[track_caller]
    fn check_axis(&self, op: &'static str, axis: isize) {
        self.axis_at(op, axis, 0, SourceLocation::caller());
    }

    /// Records a [`CompileError::ShapeMismatch`] in the composite's name when a per-feature
    /// parameter (a norm's gamma or beta) does not broadcast to the last axis `[D]`.
    #[track_caller]
    fn check_feature(&self, op: &'static str, what: &str, param: &Tensor) {
        let (Some(shape), Some(p)) = (self.shape(), param.shape()) else { return };
        let d = shape.last().copied().unwrap_or(1);
        if crate::view::broadcast_shapes(&p, &[d]).as_deref() != Some(&[d][..]) {
            self.graph().record(CompileError::ShapeMismatch {
                op,
                lhs: ShapeText(shape),
                rhs: ShapeText(p),
                reason: format!("{what} must be [{d}] (one value per feature of the last axis)"),
                location: SourceLocation::caller(),
            });
        }
    }

    /// The mean over `axis`: `sum(axis) * (1 / n)`; `keepdim` keeps the axis with length 1.
    #[track_caller]
    pub fn mean(&self, axis: isize, keepdim: bool) -> Tensor {
        self.check_axis("mean", axis);
        let n = self.axis_len(axis);
        self.sum(axis, keepdim) * (1.0 / n as f32)
    }

    /// Softmax over `axis`, max-subtracted so no `exp` overflows:
    /// `exp(x - max) / sum(exp(x - max))`.
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Tensor {
        self.check_axis("softmax", axis);
        let shifted = self - self.max(axis, true);
        let e = shifted.exp();
        let total = e.sum(axis, true);
        e / total
    }

    /// Log-softmax over `axis`: `(x - max) - log(sum(exp(x - max)))`.
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Tensor {
        self.check_axis("log_softmax", axis);
        let shifted = self - self.max(axis, true);
        let total = shifted.exp().sum(axis, true).log();
        shifted - total
    }

    /// Layer normalisation over the last axis (Ba et al. 2016; PyTorch's `layer_norm` with
    /// the biased variance): `(x - mean) / sqrt(var + eps) * gamma + beta`, `gamma` and
    /// `beta` of shape `[D]` for a last axis of length D.
    #[track_caller]
    pub fn layer_norm(
        &self,
        gamma: impl Borrow<Tensor>,
        beta: impl Borrow<Tensor>,
        eps: f32,
    ) -> Tensor {
        self.check_feature("layer_norm", "gamma", gamma.borrow());
        self.check_feature("layer_norm", "beta", beta.borrow());
        let centered = self - self.mean(-1, true);
        let var = (&centered * &centered).mean(-1, true);
        let inv = (var + eps).sqrt().recip();
        centered * inv * gamma.borrow() + beta.borrow()
    }

    /// RMS normalisation over the last axis (Zhang & Sennrich 2019):
    /// `x / sqrt(mean(x^2) + eps) * gamma`, `gamma` of shape `[D]`.
    #[track_caller]
    pub fn rms_norm(&self, gamma: impl Borrow<Tensor>, eps: f32) -> Tensor {
        self.check_feature("rms_norm", "gamma", gamma.borrow());
        let inv = ((self * self).mean(-1, true) + eps).sqrt().recip();
        self * inv * gamma.borrow()
    }

    /// GELU in its exact form, `0.5 x (1 + erf(x / sqrt 2))` (PyTorch's default
    /// `nn.GELU()`). Up to about 4.7e-4 from the tanh form [`Tensor::gelu`], so it is never
    /// fused into cuBLASLt's GELU epilogue.
    #[track_caller]
    pub fn gelu_erf(&self) -> Tensor {
        let half = self * 0.5;
        half * ((self * std::f32::consts::FRAC_1_SQRT_2).erf() + 1.0)
    }

    /// Elementwise `min(self, rhs)`: `-maximum(-self, -rhs)`, so NaN if either is NaN.
    #[track_caller]
    pub fn minimum(&self, rhs: impl crate::dsl::IntoOperand) -> Tensor {
        let rhs = rhs.into_operand(self);
        -((-self).maximum(-rhs))
    }

    /// A linear layer `x [..., K] x w [K, N] (+ b [N])`: one GEMM over every leading axis,
    /// whose bias the fusion can make a BIAS epilogue.
    #[track_caller]
    pub fn linear(&self, w: impl Borrow<Tensor>, b: Option<&Tensor>) -> Tensor {
        let y = self.matmul(w.borrow());
        match b {
            Some(b) => y + b,
            None => y,
        }
    }
}

/// Scaled dot-product attention (Vaswani et al. 2017):
/// `softmax(q k^T / sqrt(d) + mask) v` for `q [..., Sq, d]`, `k [..., Sk, d]`,
/// `v [..., Sk, dv]` and an optional additive `mask` broadcastable to `[..., Sq, Sk]`
/// (0 to keep, a large negative number to drop). `k` is read transposed through its view;
/// no transpose kernel runs. Returns `[..., Sq, dv]`.
#[track_caller]
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
) -> Tensor {
    let d = q.axis_len(-1).max(1);
    let scores = q.matmul(k.transpose(-1, -2)) * (1.0 / (d as f32).sqrt());
    let scores = match mask {
        Some(mask) => scores + mask,
        None => scores,
    };
    scores.softmax(-1).matmul(v)
}

/// Multi-head self-attention over `x [B, S, D]` with `heads` heads of width `D / heads`:
/// separate Q, K and V projections (`w [D, D]`, `b [D]`, each a BIAS epilogue when fused),
/// heads split by reshape and permute (views), [`scaled_dot_product_attention`] per head
/// (batched matmuls over `[B, heads]`), heads merged (one copy) and the output projection.
/// `weights` are `[wq, bq, wk, bk, wv, bv, wo, bo]`.
///
/// # Errors
/// [`CompileError::Program`] when `D` is not a multiple of `heads` or `x` is not 3-D (the
/// DSL calls themselves never fail).
#[track_caller]
pub fn multi_head_attention(
    x: &Tensor,
    weights: [&Tensor; 8],
    heads: usize,
    mask: Option<&Tensor>,
) -> Result<Tensor, CompileError> {
    let location = SourceLocation::caller();
    let bad = |message: String| CompileError::Program { program: "attention", message };
    let Some(&[b, s, d]) = x.shape().as_deref() else {
        let got =
            x.shape().map_or_else(|| "an unknown shape".to_string(), |s| ShapeText(s).to_string());
        return Err(bad(format!("x must be [B, S, D], got {got} (at {location})")));
    };
    if heads == 0 || d % heads != 0 {
        return Err(bad(format!("width {d} is not a multiple of {heads} heads (at {location})")));
    }
    #[track_caller]
    fn split(t: Tensor, shape: [usize; 4]) -> Tensor {
        t.reshape(shape).permute(&[0, 2, 1, 3])
    }
    let heads_shape = [b, s, heads, d / heads];
    let [wq, bq, wk, bk, wv, bv, wo, bo] = weights;
    let q = split(x.linear(wq, Some(bq)), heads_shape);
    let k = split(x.linear(wk, Some(bk)), heads_shape);
    let v = split(x.linear(wv, Some(bv)), heads_shape);
    let ctx = scaled_dot_product_attention(&q, &k, &v, mask);
    let merged = ctx.permute(&[0, 2, 1, 3]).reshape([b, s, d]);
    Ok(merged.linear(wo, Some(bo)))
}
