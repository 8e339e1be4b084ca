//! CPU kernels over f32 slices: the matmul with its fused epilogue, add_bias, add, relu, gelu.
//!
//! The matmul is `matrixmultiply::sgemm` (bluss's packed BLIS-style GEMM: small, well kept,
//! pure Rust with AVX/FMA/AVX-512 micro-kernels). The epilogue is cuBLASLt's idea
//! (`CUBLASLT_EPILOGUE_RELU_BIAS` and friends): bias and activation are applied to each block
//! of output rows right after the GEMM writes it, while it is still in cache, instead of in
//! separate passes over DRAM. Every kernel checks its slice lengths and returns
//! [`RuntimeError::Kernel`] rather than panicking.

use lumen_compiler::Epilogue;

use crate::RuntimeError;

/// The activation part of an epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// None: the product (plus bias) as is.
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh form, in its stable sigmoid form (see [`gelu_scalar`]).
    Gelu,
}

/// Splits a cuBLASLt epilogue into (has a bias, activation).
pub fn epilogue_parts(epilogue: Epilogue) -> (bool, Activation) {
    match epilogue {
        Epilogue::Default => (false, Activation::Identity),
        Epilogue::Bias => (true, Activation::Identity),
        Epilogue::Relu => (false, Activation::Relu),
        Epilogue::ReluBias => (true, Activation::Relu),
        Epilogue::Gelu => (false, Activation::Gelu),
        Epilogue::GeluBias => (true, Activation::Gelu),
    }
}

/// `sqrt(2 / pi)`, the GELU tanh form's constant.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// GELU, tanh form (Hendrycks & Gimpel; what PyTorch's `approximate="tanh"` computes):
/// `0.5 x (1 + tanh(z))` with `z = sqrt(2/pi) (x + 0.044715 x^3)`, evaluated in the
/// algebraically identical form `x / (1 + exp(-2z))` (`0.5 (1 + tanh z)` is the logistic
/// sigmoid of `2z`).
///
/// The textbook form cancels on the negative tail: for `x < -4`, `1 + tanh(z)` is 1 minus a
/// number within a few ulps of 1, so gelu(-5) came out as -2.98e-7 instead of -2.29e-7 and
/// every `x <= -6` as -0 instead of about -8e-11. Here the sigmoid is evaluated with
/// `t = exp(-2|z|)` in `(0, 1]`, which never overflows: `x / (1 + t)` for `z >= 0` and
/// `x t / (1 + t)` for `z < 0`, each a product of well-conditioned factors, so the relative
/// error stays within a few ulps of f32 times `|2z|` (the rounding of `z` itself) down to the
/// subnormal range. Limits: gelu(+inf) = +inf, gelu(-inf) = -0 (the limit is 0, approached from
/// below; the formula alone would give `-inf * 0 = NaN`); NaN in, NaN out.
///
/// The CPU runtime's elementwise kernel and its fused GELU epilogue both call this; the CUDA
/// runtime's elementwise kernel uses the same form, while cuBLASLt's `GELU` epilogue is
/// NVIDIA's own implementation.
#[inline]
pub fn gelu_scalar(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        return -0.0;
    }
    let z = SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x);
    let t = (-2.0 * z.abs()).exp();
    if z >= 0.0 { x / (1.0 + t) } else { x * t / (1.0 + t) }
}

#[inline]
fn relu_scalar(x: f32) -> f32 {
    // `max` would turn NaN into 0 and hide a poisoned read; keep NaN visible.
    if x < 0.0 { 0.0 } else { x }
}

/// Output rows per GEMM call of a matmul with an epilogue: the block the epilogue then
/// touches while it is still in cache. About 1 MiB of output (a core's L2) and at least 256
/// rows, because every GEMM call packs all of `b` again: with fewer rows that repacking costs
/// more than the epilogue's pass over memory saves (measured by `benches/execute.rs`).
fn epilogue_rows(n: usize) -> usize {
    const BLOCK_BYTES: usize = 1 << 20;
    const MIN_ROWS: usize = 256;
    (BLOCK_BYTES / (4 * n.max(1))).max(MIN_ROWS)
}

fn check_len(
    kernel: &'static str,
    what: &str,
    got: usize,
    want: Option<usize>,
) -> Result<(), RuntimeError> {
    match want {
        Some(w) if w == got => Ok(()),
        Some(w) => {
            Err(RuntimeError::kernel(kernel, format!("{what} has {got} elements, expected {w}")))
        }
        None => Err(RuntimeError::kernel(kernel, format!("{what} size overflows"))),
    }
}

/// `out[m, n] = act(a[m, k] · b[k, n] + bias[n])`, row-major f32, bias broadcast over rows
/// when given. With `k = 0` the product is all zeros (so `out = act(bias)`).
///
/// FLOP: `2·m·n·k` plus the epilogue's elementwise work.
///
/// # Errors
/// [`RuntimeError::Kernel`] when a slice's length does not match `m`, `k`, `n`.
pub fn lt_matmul(
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    (m, k, n): (usize, usize, usize),
    act: Activation,
) -> Result<(), RuntimeError> {
    const K: &str = "lt_matmul";
    check_len(K, "a", a.len(), m.checked_mul(k))?;
    check_len(K, "b", b.len(), k.checked_mul(n))?;
    check_len(K, "out", out.len(), m.checked_mul(n))?;
    if let Some(bias) = bias {
        check_len(K, "bias", bias.len(), Some(n))?;
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (Ok(rsa), Ok(rsc)) = (isize::try_from(k), isize::try_from(n)) else {
        return Err(RuntimeError::kernel(K, "stride overflows isize"));
    };
    if k == 0 {
        // No product to accumulate: never hand a zero-depth GEMM to the library.
        out.fill(0.0);
        apply_epilogue(out, bias, n, act);
        return Ok(());
    }
    let rows =
        if bias.is_none() && act == Activation::Identity { m } else { epilogue_rows(n).min(m) };
    for (a_blk, out_blk) in a.chunks(rows * k).zip(out.chunks_mut(rows * n)) {
        let mb = out_blk.len() / n;
        // SAFETY: `a_blk` holds `mb·k` elements (a whole number of k-long rows: `a` has
        // `m·k` and is chunked by `rows·k`), `b` holds `k·n`, `out_blk` holds `mb·n`; with
        // row strides k and n and column stride 1, sgemm reads exactly a_blk[..mb·k] and
        // b[..k·n] and writes exactly out_blk[..mb·n]. `out_blk` is a unique borrow, so it
        // cannot alias `a` or `b`. beta = 0 overwrites (even NaN) rather than scaling.
        unsafe {
            matrixmultiply::sgemm(
                mb,
                k,
                n,
                1.0,
                a_blk.as_ptr(),
                rsa,
                1,
                b.as_ptr(),
                rsc,
                1,
                0.0,
                out_blk.as_mut_ptr(),
                rsc,
                1,
            );
        }
        apply_epilogue(out_blk, bias, n, act);
    }
    Ok(())
}

/// Bias (over the rows of an `[_, n]` block) and activation, one pass.
fn apply_epilogue(out: &mut [f32], bias: Option<&[f32]>, n: usize, act: Activation) {
    match (bias, act) {
        (None, Activation::Identity) => {}
        (None, Activation::Relu) => out.iter_mut().for_each(|v| *v = relu_scalar(*v)),
        (None, Activation::Gelu) => out.iter_mut().for_each(|v| *v = gelu_scalar(*v)),
        (Some(bias), act) => {
            for row in out.chunks_exact_mut(n) {
                for (v, &bv) in row.iter_mut().zip(bias) {
                    let x = *v + bv;
                    *v = match act {
                        Activation::Identity => x,
                        Activation::Relu => relu_scalar(x),
                        Activation::Gelu => gelu_scalar(x),
                    };
                }
            }
        }
    }
}

/// `out[i, j] = x[i, j] + bias[j]` over an `[m, n]` row-major tensor.
///
/// # Errors
/// [`RuntimeError::Kernel`] when a slice's length does not match `m`, `n`.
pub fn add_bias(
    x: &[f32],
    bias: &[f32],
    out: &mut [f32],
    m: usize,
    n: usize,
) -> Result<(), RuntimeError> {
    const K: &str = "add_bias";
    check_len(K, "x", x.len(), m.checked_mul(n))?;
    check_len(K, "bias", bias.len(), Some(n))?;
    check_len(K, "out", out.len(), m.checked_mul(n))?;
    if n == 0 {
        return Ok(());
    }
    for (orow, xrow) in out.chunks_exact_mut(n).zip(x.chunks_exact(n)) {
        for ((o, &xv), &bv) in orow.iter_mut().zip(xrow).zip(bias) {
            *o = xv + bv;
        }
    }
    Ok(())
}

/// Elementwise `out = a + b` of two same-length tensors.
///
/// # Errors
/// [`RuntimeError::Kernel`] when the lengths differ.
pub fn add(a: &[f32], b: &[f32], out: &mut [f32]) -> Result<(), RuntimeError> {
    check_len("add", "b", b.len(), Some(a.len()))?;
    check_len("add", "out", out.len(), Some(a.len()))?;
    for ((o, &av), &bv) in out.iter_mut().zip(a).zip(b) {
        *o = av + bv;
    }
    Ok(())
}

/// Elementwise `out = max(x, 0)` (NaN stays NaN).
///
/// # Errors
/// [`RuntimeError::Kernel`] when the lengths differ.
pub fn relu(x: &[f32], out: &mut [f32]) -> Result<(), RuntimeError> {
    check_len("relu", "out", out.len(), Some(x.len()))?;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = relu_scalar(v);
    }
    Ok(())
}

/// Elementwise GELU, tanh form ([`gelu_scalar`]).
///
/// # Errors
/// [`RuntimeError::Kernel`] when the lengths differ.
pub fn gelu(x: &[f32], out: &mut [f32]) -> Result<(), RuntimeError> {
    check_len("gelu", "out", out.len(), Some(x.len()))?;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = gelu_scalar(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
            }
        }
        c
    }

    #[test]
    fn k_zero_gives_act_of_bias() {
        let mut out = vec![f32::NAN; 6];
        lt_matmul(&[], &[], Some(&[1.0, -2.0, 3.0]), &mut out, (2, 0, 3), Activation::Relu)
            .unwrap();
        assert_eq!(out, vec![1.0, 0.0, 3.0, 1.0, 0.0, 3.0]);
    }

    #[test]
    fn bias_epilogue_row_bias() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let eye = [1.0, 0.0, 0.0, 1.0];
        let mut out = [0.0; 4];
        lt_matmul(&a, &eye, Some(&[10.0, 20.0]), &mut out, (2, 2, 2), Activation::Identity)
            .unwrap();
        assert_eq!(out, [11.0, 22.0, 13.0, 24.0]);
    }

    #[test]
    fn blocks_cover_every_row() {
        // n = 1 makes the epilogue block 262144 rows: m spans two blocks with a remainder.
        let (m, k, n) = (300_000, 3, 1);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let b = [0.5, -1.0, 2.0];
        let mut out = vec![f32::NAN; m];
        lt_matmul(&a, &b, Some(&[0.25]), &mut out, (m, k, n), Activation::Relu).unwrap();
        let want = naive(&a, &b, m, k, n);
        for (o, w) in out.iter().zip(&want) {
            assert_eq!(*o as f64, (w + 0.25).max(0.0));
        }
    }

    /// GELU (tanh form) at exactly representable points, from mpmath at 60 digits:
    /// `x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))`.
    const GELU_EXACT: [(f32, f64); 14] = [
        (6.0, 5.999_999_999_915_603_5),
        (3.0, 2.996_362_607_918_227),
        (1.0, 0.841_191_990_608_276_7),
        (0.5, 0.345_714_009_825_143_9),
        (-0.5, -0.154_285_990_174_856_08),
        (-1.0, -0.158_808_009_391_723_3),
        (-3.0, -3.637_392_081_773_018_8e-3),
        (-4.0, -7.024_594_819_237_269e-5),
        (-5.0, -2.291_796_196_629_506e-7),
        (-6.0, -8.439_646_700_762_297e-11),
        (-8.0, -3.107_782_937_501_111_2e-21),
        (-10.0, -1.204_092_348_209_806e-37),
        (-10.5, -7.424_900_556_079_04e-43),
        (-13.0, -1.051_151_776_763_253_3e-76),
    ];

    #[test]
    fn gelu_is_accurate_on_the_negative_tail() {
        assert_eq!(gelu_scalar(0.0), 0.0);
        for (x, exact) in GELU_EXACT {
            let got = f64::from(gelu_scalar(x));
            if exact.abs() >= f64::from(f32::MIN_POSITIVE) {
                // The f32 constants and f32 rounding of z (|2z| <= 88 here) bound the error.
                let rel = (got - exact).abs() / exact.abs();
                assert!(rel < 2e-5, "gelu({x}) = {got:e}, exact {exact:e}, rel {rel:e}");
            } else if exact.abs() >= 1e-45 {
                // Subnormal results keep their sign and magnitude to within a few ulps of 2^-149.
                assert!(got < 0.0 && (got - exact).abs() < 1e-44, "gelu({x}) = {got:e}");
            } else {
                // Below f32's range: a negative zero, never a positive value or NaN.
                assert!(got == 0.0 && got.is_sign_negative(), "gelu({x}) = {got:e}");
            }
        }
    }

    proptest::proptest! {
        /// Against the f64 reference wherever the value is a normal f32 (down to x = -10.1).
        /// The error is f32's rounding of z magnified by |2z| (up to 88 here): a dense sweep
        /// of [-10.1, 10] measured at most 1.15e-5, at x = -10.04.
        #[test]
        fn gelu_relative_error_is_bounded(x in -10.1f32..10.0) {
            let got = f64::from(gelu_scalar(x));
            let want = crate::reference::gelu_f64(f64::from(x));
            if want.abs() >= f64::from(f32::MIN_POSITIVE) {
                let rel = (got - want).abs() / want.abs();
                proptest::prop_assert!(rel < 2e-5, "gelu({}) = {:e}, want {:e}", x, got, want);
            } else {
                proptest::prop_assert!(got <= 0.0 && (got - want).abs() < f64::from(f32::MIN_POSITIVE));
            }
        }
    }

    #[test]
    fn gelu_at_the_infinities() {
        assert_eq!(gelu_scalar(f32::INFINITY), f32::INFINITY);
        let neg = gelu_scalar(f32::NEG_INFINITY);
        assert!(neg == 0.0 && neg.is_sign_negative(), "gelu(-inf) = {neg}");
        // Finite inputs whose cube overflows f32 take the same limits.
        assert_eq!(gelu_scalar(f32::MAX), f32::MAX);
        let low = gelu_scalar(f32::MIN);
        assert!(low == 0.0 && low.is_sign_negative(), "gelu(MIN) = {low}");
        assert!(gelu_scalar(f32::NAN).is_nan());
        // The fused epilogue applies the same scalar: 1 * 1 + (-6) = -5.
        let mut out = [0.0f32; 3];
        lt_matmul(&[1.0; 3], &[1.0], Some(&[-6.0]), &mut out, (3, 1, 1), Activation::Gelu).unwrap();
        let exact = GELU_EXACT[8].1;
        assert_eq!(GELU_EXACT[8].0, -5.0);
        for v in out {
            let rel = (f64::from(v) - exact).abs() / exact.abs();
            assert!(rel < 2e-5, "epilogue gelu(-5) = {v:e}");
        }
    }

    #[test]
    fn relu_keeps_nan() {
        let mut out = [0.0; 3];
        relu(&[-1.0, f32::NAN, 2.0], &mut out).unwrap();
        assert_eq!(out[0], 0.0);
        assert!(out[1].is_nan());
        assert_eq!(out[2], 2.0);
    }

    #[test]
    fn length_errors() {
        let mut out = [0.0; 4];
        let err = lt_matmul(&[0.0; 3], &[0.0; 4], None, &mut out, (2, 2, 2), Activation::Identity)
            .unwrap_err();
        assert_eq!(err.to_string(), "kernel lt_matmul: a has 3 elements, expected 4");
        let err = lt_matmul(&[], &[], None, &mut [], (usize::MAX, 2, 0), Activation::Identity)
            .unwrap_err();
        assert_eq!(err.to_string(), "kernel lt_matmul: a size overflows");
        assert!(add_bias(&[0.0; 4], &[0.0; 3], &mut out, 2, 2).is_err());
        assert!(add(&[0.0; 4], &[0.0; 3], &mut out).is_err());
        assert!(relu(&[0.0; 3], &mut out).is_err());
        assert!(gelu(&[0.0; 3], &mut out).is_err());
    }
}
