//! The CPU matmul of two activations (attention's `Q · Kᵀ`, `P · V`), and of a weight when it
//! is not packed (`CpuOptions::unpacked_weights`, or a CPU without AVX2 + FMA): which GEMM, how
//! its output rows are blocked and shared among threads, the fused epilogue, and the GEMV path
//! for a few rows. A product whose right operand is a weight packed at prepare runs in
//! [`crate::packed`] instead, which reuses this module's [`Matrix`], [`Activation`] and
//! epilogue.
//!
//! - The GEMM is sarah-ek's `gemm` crate (the kernels behind faer): packed BLIS-style loops
//!   with AVX2/FMA and (feature `x86-v4`) AVX-512 micro-kernels chosen at run time, any row and
//!   column stride. Chosen by measurement over `matrixmultiply` 0.3 with and without its
//!   `threading` feature (`examples/gemm_choice.rs`; figures in the README's CPU runtime
//!   section). Each call packs both operands; no entry point takes a packed one (hence
//!   [`crate::packed`], which calls the crate's micro-kernels itself). A product here packs
//!   the right operand as few times as the epilogue allows (below).
//! - The epilogue (cuBLASLt's `CUBLASLT_EPILOGUE_RELU_BIAS` and friends: bias over rows, then
//!   ReLU or GELU) is applied to a block of output rows right after the GEMM writes it, while
//!   the block is in cache. Every GEMM call packs the weight again, so the blocks are small
//!   only when the weight is (at most [`SMALL_WEIGHT_ELEMS`] elements, where repacking costs
//!   little and the output block stays in L2); a larger weight gets one GEMM call over all the
//!   rows of a thread's part and the epilogue as one pass after it (at 2048^3 that pass costs
//!   about 1% of the GEMM, where eight 256-row calls cost about 20%).
//! - A product of at most [`GEMV_MAX_ROWS`] rows whose weight has unit column stride (lumen's
//!   `[in, out]` row-major weights) skips the GEMM and its packing: each output row is the sum
//!   over `p` of `a[i, p]` times row `p` of the weight (an axpy per weight row, the
//!   cache-friendly order for a row-major weight), compiled for the widest vector ISA present.
//! - A product of 2 to [`DOT_MAX_ROWS`] rows whose right operand has unit row stride (a
//!   transposed view, as `kᵀ` in attention scores) is a dot product per output element, both
//!   runs contiguous, on the calling thread.
//! - Threads: a product of at least [`PAR_MIN_FLOPS`] is split over output rows into
//!   contiguous parts, one per thread ([`Threads::for_parts`]), each running the single-thread
//!   procedure on its rows with part boundaries at multiples of the row block, so every GEMM
//!   call a part makes is one the single-thread run makes too (small weights: the same bits on
//!   any thread count) or differs only in its row count (large weights). The `gemm` crate's
//!   blocking depends on that row count when it is small: a last part of a few rows (m = 257
//!   to 320 at k = 4097, n = 33 on 2 threads; m = 257 or 513 at k = n = 513 on 3) gives
//!   results that differ from the single-thread run's in the last bits (relative 2e-5 to
//!   7e-4), found by a user's test; repeats at a fixed thread count stay bit-identical. A
//!   product too short for two row parts (a large weight and fewer than 512 rows) is split over
//!   columns by the `gemm` crate itself (`Parallelism::Rayon` on the team's rayon pool, from
//!   [`RAYON_MIN_FLOPS`]), which fixes its depth blocking before it splits.

use std::ops::Range;

use crate::isa::{lane_tree, widest_isa};
use crate::threads::{PAR_MIN_FLOPS, Threads};
use lumen_compiler::{Epilogue, UnaryOp};

/// The activation part of an epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// None: the product (plus bias) as is.
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh form, in its stable sigmoid form (see [`lumen_compiler::ops::gelu_f32`]).
    Gelu,
}

impl Activation {
    /// Applies the activation to one value, with the op table's semantics.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => lumen_compiler::ops::relu_f32(x),
            Activation::Gelu => lumen_compiler::ops::gelu_f32(x),
        }
    }
}

/// Splits a cuBLASLt epilogue into (has a bias, activation).
pub fn epilogue_parts(epilogue: Epilogue) -> (bool, Activation) {
    let act = match epilogue.activation() {
        None => Activation::Identity,
        Some(UnaryOp::Gelu) => Activation::Gelu,
        Some(_) => Activation::Relu,
    };
    (epilogue.has_bias(), act)
}

/// Products of at most this many rows (with a unit-column-stride weight) take the GEMV path.
pub const GEMV_MAX_ROWS: usize = 4;

/// Products of 2 to this many rows whose right operand is read down its columns (a
/// transposed view of a row-major tensor: unit row stride, as `kᵀ` in attention scores) take
/// the dot-product path: each output is the dot product of a row of `a` and a contiguous row
/// of the tensor. The `gemm` crate reads such an operand strided: at 512x512 it took 340 to 410
/// microseconds for 2 to 8 rows, against 25 to 56 with a row-major one; this path 44 to 150
/// (one thread; it never splits). One row stays with the crate (24 microseconds).
pub const DOT_MAX_ROWS: usize = 8;

/// Weights of at most this many elements (256 KiB of f32) are packed once per block of
/// output rows, so the epilogue runs on each block while it is in cache; larger ones once per
/// thread's part.
pub const SMALL_WEIGHT_ELEMS: usize = 1 << 16;

/// Bytes of output per row block when the weight is small: an eighth of this machine's 2 MiB
/// L2, so the block is still there, beside the packed operands, when the epilogue reads it.
const BLOCK_BYTES: usize = 1 << 18;

/// Row blocks are at least this many rows (and parts start at multiples of it for large
/// weights), so a block's GEMM call amortizes its packing of the weight.
const MIN_BLOCK_ROWS: usize = 256;

/// GEMM work (FLOP) from which a product too short for a row split lets the `gemm` crate split
/// its columns on a rayon pool (below it, and from [`PAR_MIN_FLOPS`], such a product stays on
/// the calling thread): rayon's workers sleep between jobs, and waking them took about 50
/// microseconds on the 2-core VM the benchmarks ran on, against about 130 of work here.
pub const RAYON_MIN_FLOPS: usize = 1 << 24;

/// A matrix of `rows x cols` f32 read from a buffer at `offset` with row stride `rs` and
/// column stride `cs` (elements; 0 broadcasts). Constructed only through [`Matrix::new`],
/// which proves every element lies inside the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    buf: &'a [f32],
    offset: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Matrix<'a> {
    /// The matrix, or `None` when an element would fall outside `buf` (or its index
    /// overflows) or a stride does not fit `isize`.
    pub fn new(
        buf: &'a [f32],
        offset: usize,
        (rows, cols): (usize, usize),
        (rs, cs): (usize, usize),
    ) -> Option<Self> {
        isize::try_from(rs).ok()?;
        isize::try_from(cs).ok()?;
        if rows > 0 && cols > 0 {
            let last = offset
                .checked_add((rows - 1).checked_mul(rs)?)?
                .checked_add((cols - 1).checked_mul(cs)?)?;
            if last >= buf.len() {
                return None;
            }
        }
        Some(Self { buf, offset, rows, cols, rs, cs })
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Rows `r` of this matrix (`r` within `0..rows`).
    pub(crate) fn row_range(&self, r: Range<usize>) -> Self {
        Self { offset: self.offset + r.start * self.rs, rows: r.end - r.start, ..*self }
    }

    /// Elements between rows.
    pub(crate) fn row_stride(&self) -> usize {
        self.rs
    }

    /// Elements between columns.
    pub(crate) fn col_stride(&self) -> usize {
        self.cs
    }

    /// A pointer to element `(i, j)` (`i < rows`, `j < cols`; inside the buffer, as
    /// [`Matrix::new`] proved).
    pub(crate) fn ptr_at(&self, i: usize, j: usize) -> *const f32 {
        self.buf[self.offset + i * self.rs + j * self.cs..].as_ptr()
    }

    /// Column `j` (all rows) as one slice, when the rows are contiguous (`rs == 1`).
    pub(crate) fn col_slice(&self, j: usize) -> Option<&'a [f32]> {
        let start = self.offset + j * self.cs;
        (self.rs == 1).then(|| &self.buf[start..start + self.rows])
    }

    /// Columns `cols` of row `i` as one slice, when the columns are contiguous (`cs == 1`).
    pub(crate) fn row_slice(&self, i: usize, cols: Range<usize>) -> Option<&'a [f32]> {
        let start = self.offset + i * self.rs;
        (self.cs == 1).then(|| &self.buf[start + cols.start..start + cols.end])
    }

    /// Element `(i, j)` (`i < rows`, `j < cols`).
    pub(crate) fn at(&self, i: usize, j: usize) -> f32 {
        self.buf[self.offset + i * self.rs + j * self.cs]
    }
}

/// `out = act(a · b + bias)`: `a` is `[m, k]`, `b` `[k, n]`, `bias` `[n]` broadcast over rows
/// (contiguous), `out` `[m, n]` row-major contiguous and overwritten (NaN in it is never read).
/// With `k = 0` the product is zeros, so `out = act(bias)`. See the module docs for the
/// blocking, the GEMV path and the threads.
///
/// # Panics
/// Never on valid [`Matrix`] values; the sizes (`a` is `m x k`, `b` is `k x n`, `out` holds
/// `m·n`, `bias` `n`) are the caller's contract, checked by [`crate::kernels`], and are
/// asserted here in debug builds only.
pub fn matmul_epilogue(
    a: Matrix<'_>,
    b: Matrix<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    act: Activation,
    threads: &Threads,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert!(b.rows == k && out.len() == m * n && bias.is_none_or(|b| b.len() == n));
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        epilogue(out, bias, n, act);
        return;
    }
    if m <= GEMV_MAX_ROWS && b.cs == 1 {
        gemv(a, b, out);
        epilogue(out, bias, n, act);
        return;
    }
    if (2..=DOT_MAX_ROWS).contains(&m) && b.rs == 1 && b.cs != 1 && a.cs == 1 {
        dots(a, b, out);
        epilogue(out, bias, n, act);
        return;
    }
    let block = if k.saturating_mul(n) <= SMALL_WEIGHT_ELEMS {
        (BLOCK_BYTES / (4 * n)).max(MIN_BLOCK_ROWS).min(m)
    } else {
        m
    };
    let align = if block < m { block } else { MIN_BLOCK_ROWS };
    let flops = m.saturating_mul(n).saturating_mul(k).saturating_mul(2);
    let parallel = flops >= PAR_MIN_FLOPS;
    if parallel
        && threads.count() > 1
        && threads.parts(m, align).len() < 2
        && flops >= RAYON_MIN_FLOPS
    {
        // Too few rows for a row split (a large weight, fewer than two row blocks): the `gemm`
        // crate splits the output's columns over the team instead, with the depth blocking it
        // uses on one thread (it derives `kc` before splitting), then the epilogue.
        let team = gemm::Parallelism::Rayon(threads.count());
        threads.install(|| sgemm(a, b, out, team));
        epilogue(out, bias, n, act);
        return;
    }
    let _ = threads.for_parts::<()>(out, (m, n), align, parallel, |rows, part| {
        let a = a.row_range(rows);
        for (i, out_blk) in part.chunks_mut(block * n).enumerate() {
            let start = i * block;
            let blk = a.row_range(start..start + out_blk.len() / n);
            sgemm(blk, b, out_blk, gemm::Parallelism::None);
            epilogue(out_blk, bias, n, act);
        }
        Ok(())
    });
}

/// `out = a · b` through the `gemm` crate (`out` row-major `[m, n]`), on the calling thread
/// with `Parallelism::None`, on the current rayon pool with `Parallelism::Rayon`.
fn sgemm(a: Matrix<'_>, b: Matrix<'_>, out: &mut [f32], parallelism: gemm::Parallelism) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 || k == 0 || out.len() != m * n || b.rows != k {
        return;
    }
    // `Matrix::new` proved the strides fit isize; n fits because out holds m·n elements.
    let s = |x: usize| x as isize;
    // SAFETY: `Matrix::new` proved every element `offset + i·rs + p·cs` of `a` (i < m, p < k)
    // and of `b` (p < k, j < n) lies inside its buffer; `out` is a unique borrow of exactly
    // m·n elements written with row stride n and column stride 1, so it cannot alias `a` or
    // `b`. With read_dst = false the library overwrites `out` (dst = beta·a·b) and never
    // reads it.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            s(n),
            false,
            a.buf.as_ptr().add(a.offset),
            s(a.cs),
            s(a.rs),
            b.buf.as_ptr().add(b.offset),
            s(b.cs),
            s(b.rs),
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `c = a · b` for contiguous row-major `a [m, k]`, `b [k, n]` and `c [m, n]` through the same
/// library call the runtime makes and nothing else (none of lumen's blocking, epilogue or
/// threads): the "bare GEMM" lumen is benchmarked against (`benches/execute.rs`,
/// `examples/bare_gemm.rs`, `examples/gemm_choice.rs`). With `threads` above 1 the library
/// splits the product itself on the current rayon pool (`Parallelism::Rayon(threads)`); call
/// it inside a pool of that size.
///
/// # Errors
/// [`crate::RuntimeError::Kernel`] when a slice does not hold `m * k`, `k * n` or `m * n`
/// elements.
pub fn bare_sgemm(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    threads: usize,
) -> Result<(), crate::RuntimeError> {
    let shape_error = || crate::RuntimeError::Kernel {
        kernel: "bare_sgemm",
        reason: format!("slices of {}, {}, {} elements for {m}x{k}x{n}", a.len(), b.len(), c.len()),
    };
    let (Some(mk), Some(kn), Some(mn)) = (m.checked_mul(k), k.checked_mul(n), m.checked_mul(n))
    else {
        return Err(shape_error());
    };
    if a.len() != mk || b.len() != kn || c.len() != mn {
        return Err(shape_error());
    }
    let a = Matrix::new(a, 0, (m, k), (k, 1)).ok_or_else(shape_error)?;
    let b = Matrix::new(b, 0, (k, n), (n, 1)).ok_or_else(shape_error)?;
    let parallelism = match threads {
        0 | 1 => gemm::Parallelism::None,
        t => gemm::Parallelism::Rayon(t),
    };
    sgemm(a, b, c, parallelism);
    Ok(())
}

widest_isa! {
    /// `out[i, j] = a[i, :] · b[:, j]` for an `a` of unit column stride and a `b` of unit row
    /// stride, each a dot product of two contiguous runs of `k` values.
    fn dots(a: Matrix<'_>, b: Matrix<'_>, out: &mut [f32]) => dots_body
}

/// Lanes of [`dots_body`]'s accumulators (one AVX-512 vector).
const DOT_LANES: usize = 16;

/// Rows of `a` per pass of [`dots_body`] over a column of `b` (each column chunk loaded once
/// for all of them; up to four independent chains of additions).
const DOT_ROWS: usize = 4;

#[inline(always)]
fn dots_body(a: Matrix<'_>, b: Matrix<'_>, out: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let full = k - k % DOT_LANES;
    for j in 0..n {
        let Some(col) = b.col_slice(j) else { return };
        for i0 in (0..m).step_by(DOT_ROWS) {
            let rows = DOT_ROWS.min(m - i0);
            let mut x: [&[f32]; DOT_ROWS] = [&[]; DOT_ROWS];
            for (r, slot) in x.iter_mut().enumerate().take(rows) {
                let Some(row) = a.row_slice(i0 + r, 0..k) else { return };
                *slot = row;
            }
            // Lane `l` of row `r` sums that row's products at `p ≡ l (mod DOT_LANES)` in order
            // of `p` (vectorizes without reassociating); then the lanes in a fixed tree and the
            // tail in order: the same bits with every instruction set.
            let mut acc = [[0.0f32; DOT_LANES]; DOT_ROWS];
            for c in (0..full).step_by(DOT_LANES) {
                let y = &col[c..c + DOT_LANES];
                for r in 0..rows {
                    let xr = &x[r][c..c + DOT_LANES];
                    for l in 0..DOT_LANES {
                        acc[r][l] += xr[l] * y[l];
                    }
                }
            }
            for (r, lanes) in acc.iter().enumerate().take(rows) {
                let mut sum = lane_tree(*lanes, |a, b| a + b);
                for p in full..k {
                    sum += x[r][p] * col[p];
                }
                out[(i0 + r) * n + j] = sum;
            }
        }
    }
}

widest_isa! {
    /// `out[i, :] = sum_p a[i, p] · b[p, :]` for a `b` of unit column stride, `p` ascending.
    fn gemv(a: Matrix<'_>, b: Matrix<'_>, out: &mut [f32]) => gemv_body
}

#[inline(always)]
fn gemv_body(a: Matrix<'_>, b: Matrix<'_>, out: &mut [f32]) {
    let n = b.cols;
    let w = |p: usize| &b.buf[b.offset + p * b.rs..b.offset + p * b.rs + n];
    for (i, row) in out.chunks_exact_mut(n).enumerate() {
        row.fill(0.0);
        // Four weight rows per pass over the output row (one load and store of it instead of
        // four); the additions stay in order of `p`, so the bits are those of one row a pass.
        let mut p = 0;
        while p + 4 <= a.cols {
            let (x0, x1, x2, x3) = (a.at(i, p), a.at(i, p + 1), a.at(i, p + 2), a.at(i, p + 3));
            let (w0, w1, w2, w3) = (w(p), w(p + 1), w(p + 2), w(p + 3));
            for ((((o, &v0), &v1), &v2), &v3) in row.iter_mut().zip(w0).zip(w1).zip(w2).zip(w3) {
                *o = (((*o + x0 * v0) + x1 * v1) + x2 * v2) + x3 * v3;
            }
            p += 4;
        }
        for p in p..a.cols {
            let x = a.at(i, p);
            for (o, &wv) in row.iter_mut().zip(w(p)) {
                *o += x * wv;
            }
        }
    }
}

widest_isa! {
    /// Bias (over the rows of an `[_, n]` block) and activation, one pass over `out`.
    pub(crate) fn epilogue(out: &mut [f32], bias: Option<&[f32]>, n: usize, act: Activation) => epilogue_body
}

#[inline(always)]
fn epilogue_body(out: &mut [f32], bias: Option<&[f32]>, n: usize, act: Activation) {
    #[inline(always)]
    fn rows(out: &mut [f32], bias: Option<&[f32]>, n: usize, f: impl Fn(f32) -> f32) {
        match bias {
            None => out.iter_mut().for_each(|v| *v = f(*v)),
            Some(bias) => {
                for row in out.chunks_exact_mut(n) {
                    for (v, &bv) in row.iter_mut().zip(bias) {
                        *v = f(*v + bv);
                    }
                }
            }
        }
    }
    match (act, bias) {
        (Activation::Identity, None) => {}
        (Activation::Identity, _) => rows(out, bias, n, |x| x),
        (Activation::Relu, _) => rows(out, bias, n, lumen_compiler::ops::relu_f32),
        (Activation::Gelu, _) => rows(out, bias, n, lumen_compiler::ops::gelu_f32),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `len` deterministic values in [-1, 1), varied by `seed` (the packed tests use it too).
    pub(crate) fn data(len: usize, seed: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    /// The f64 product of row-major `a` [m, k] and `b` [k, n], plus bias, activated.
    fn naive(a: &[f32], b: &[f32], bias: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 =
                    (0..k).map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j])).sum();
                c[i * n + j] = (dot + f64::from(bias[j])).max(0.0);
            }
        }
        c
    }

    /// Each value's bits.
    pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Asserts `got` is within f32 rounding of the f64 `want` of a depth-`k` product
    /// (`1e-5 · √k` relative to `1 + |want|`), naming `label` and the index otherwise.
    pub(crate) fn assert_near(got: &[f32], want: &[f64], k: usize, label: &str) {
        for (idx, (g, w)) in got.iter().zip(want).enumerate() {
            let tol = 1e-5 * (k as f64).sqrt() * (1.0 + w.abs());
            assert!((f64::from(*g) - w).abs() <= tol, "{label} [{idx}]: {g} vs {w}");
        }
    }

    /// `relu(a · b + bias)` through `matmul_epilogue`, `a` row-major `[m, k]`, `b` row-major
    /// `[k, n]`, or with `b_transposed` a row-major `[n, k]` read as its transpose.
    fn run(
        (m, k, n): (usize, usize, usize),
        threads: &Threads,
        a: &[f32],
        b: &[f32],
        bias: &[f32],
        b_transposed: bool,
    ) -> Vec<f32> {
        let am = Matrix::new(a, 0, (m, k), (k, 1)).unwrap();
        let b_strides = if b_transposed { (1, k) } else { (n, 1) };
        let bm = Matrix::new(b, 0, (k, n), b_strides).unwrap();
        let mut out = vec![f32::NAN; m * n];
        matmul_epilogue(am, bm, Some(bias), &mut out, Activation::Relu, threads);
        out
    }

    /// The dot-product path (2 to DOT_MAX_ROWS rows, a right operand of unit row stride: a
    /// transposed view of a row-major `[n, k]` tensor): within f32 rounding of the f64
    /// product, bias and ReLU applied, the same bits on repeats and on 1 and 3 threads; one row
    /// and more than DOT_MAX_ROWS rows of the same view still go through the `gemm` crate.
    #[test]
    fn transposed_right_operands_take_the_dot_product_path() {
        let one = Threads::single();
        let three = Threads::new(Some(3)).unwrap();
        for &(m, k, n) in &[
            (2, 1, 1),
            (2, 17, 5),
            (3, 33, 7),
            (4, 16, 3),
            (5, 512, 19),
            (7, 47, 130),
            (8, 100, 64),
            (1, 70, 9),
            (9, 70, 9),
        ] {
            let (a, bt, bias) = (data(m * k, 1), data(n * k, 2), data(n, 3));
            // `b[p, j] = bt[j, p]`, as a row-major copy for the reference.
            let b: Vec<f32> = (0..k * n).map(|i| bt[(i % n) * k + i / n]).collect();
            let got = run((m, k, n), &one, &a, &bt, &bias, true);
            assert_near(&got, &naive(&a, &b, &bias, (m, k, n)), k, &format!("{m}x{k}x{n}"));
            let again = run((m, k, n), &one, &a, &bt, &bias, true);
            let par = run((m, k, n), &three, &a, &bt, &bias, true);
            assert_eq!(bits(&again), bits(&got), "{m}x{k}x{n}: repeat");
            assert_eq!(bits(&par), bits(&got), "{m}x{k}x{n}: 3 threads");
        }
    }

    /// The bare library call the benchmarks compare against: the product (no bias, no
    /// activation) within f32 rounding of the f64 reference, the same bits as the runtime's
    /// own single-thread call without an epilogue, and a typed error for slices that do not
    /// hold their shapes.
    #[test]
    fn bare_sgemm_is_the_plain_product() {
        let (m, k, n) = (37, 19, 23);
        let (a, b) = (data(m * k, 1), data(k * n, 2));
        let mut c = vec![f32::NAN; m * n];
        bare_sgemm((m, k, n), &a, &b, &mut c, 1).unwrap();
        let zero = vec![0.0f32; n];
        for i in 0..m {
            for j in 0..n {
                let want: f64 =
                    (0..k).map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j])).sum();
                let got = f64::from(c[i * n + j]);
                assert!((got - want).abs() <= 1e-5 * (1.0 + want.abs()), "{i},{j}");
            }
        }
        let am = Matrix::new(&a, 0, (m, k), (k, 1)).unwrap();
        let bm = Matrix::new(&b, 0, (k, n), (n, 1)).unwrap();
        let mut own = vec![f32::NAN; m * n];
        matmul_epilogue(am, bm, Some(&zero), &mut own, Activation::Identity, &Threads::single());
        assert_eq!(bits(&own), bits(&c));
        let mut short = vec![0.0f32; m * n - 1];
        assert!(bare_sgemm((m, k, n), &a, &b, &mut short, 1).is_err());
        assert!(bare_sgemm((usize::MAX, 2, 2), &a, &b, &mut c, 1).is_err());
    }

    /// Every path (GEMV rows, small-weight row blocks, large-weight single calls, k = 1,
    /// n = 1, sizes off every tile multiple) against the f64 reference, with 1 and 3 threads;
    /// the 3-thread output is bit-identical to the 1-thread one on these shapes (see the module
    /// docs for a large right operand whose last part has a few rows).
    #[test]
    fn every_path_matches_the_reference_on_any_thread_count() {
        let one = Threads::single();
        let three = Threads::new(Some(3)).unwrap();
        for &(m, k, n) in &[
            (1, 1, 1),
            (1, 64, 128),
            (2, 3, 5),
            (3, 17, 1),
            (4, 33, 31),
            (5, 1, 7),
            (7, 9, 130),
            (97, 13, 1),
            (450, 64, 128),
            (1100, 65, 33),
            (2600, 8, 100),
            // Split over threads (at least PAR_MIN_FLOPS): small weights in row blocks, and
            // large weights in one call per part.
            (5000, 33, 70),
            (300, 300, 300),
            (600, 129, 515),
            // Too few rows for a row split: the gemm crate's column split.
            (100, 300, 600),
        ] {
            let (a, b, bias) = (data(m * k, 1), data(k * n, 2), data(n, 3));
            let got = run((m, k, n), &one, &a, &b, &bias, false);
            assert_near(&got, &naive(&a, &b, &bias, (m, k, n)), k, &format!("{m}x{k}x{n}"));
            let again = run((m, k, n), &one, &a, &b, &bias, false);
            let par = run((m, k, n), &three, &a, &b, &bias, false);
            assert_eq!(bits(&again), bits(&got), "{m}x{k}x{n}: repeat");
            assert_eq!(bits(&par), bits(&got), "{m}x{k}x{n}: 3 threads vs 1");
        }
    }

    #[test]
    fn a_matrix_past_its_buffer_is_refused() {
        let buf = [0.0f32; 6];
        assert!(Matrix::new(&buf, 0, (2, 3), (3, 1)).is_some());
        assert!(Matrix::new(&buf, 1, (2, 3), (3, 1)).is_none());
        assert!(Matrix::new(&buf, 0, (3, 2), (1, 3)).is_some());
        assert!(Matrix::new(&buf, 0, (usize::MAX, 2), (usize::MAX, 1)).is_none());
        assert!(Matrix::new(&buf, 0, (0, 5), (100, 1)).is_some());
    }
}
