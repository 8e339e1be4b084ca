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
    /// GELU, tanh form (see [`gelu_scalar`]).
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

/// GELU, tanh form (Hendrycks & Gimpel; what cuBLASLt's `GELU` epilogue and PyTorch's
/// `approximate="tanh"` compute): `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
#[inline]
pub fn gelu_scalar(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
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

    #[test]
    fn gelu_values() {
        assert_eq!(gelu_scalar(0.0), 0.0);
        assert!((gelu_scalar(1.0) - 0.841_192).abs() < 1e-6);
        assert!((gelu_scalar(-1.0) + 0.158_808).abs() < 1e-6);
        assert!((gelu_scalar(3.0) - 2.996_363).abs() < 1e-5);
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
