//! Weights packed once at prepare, and the blocked product that reads them: lumen's own loops
//! around the `gemm` crate's register micro-kernels (`gemm-f32`'s public `microkernel`
//! module: AVX-512 tiles of 64 x 6, AVX2 + FMA tiles of 16 x 6).
//!
//! The `gemm` crate packs both operands on every call, and has no entry point that takes a
//! packed one, so a weight used on every execute was packed on every execute. Its
//! micro-kernels are public, though, and read the packed operand through a pointer and a stride: lumen packs
//! the weight into that layout once ([`PackedWeight::pack`], at prepare) and runs the BLIS
//! loops itself ([`matmul_packed`]), the structure of Goto and van de Geijn's "Anatomy of
//! High-Performance Matrix Multiplication" (2008) with the operands' roles swapped. The same
//! loops serve a batch of small products whose right operands are not weights (attention's
//! heads): each operand is packed at execute into one reused copy
//! ([`PackedWeight::pack_into`]), cheaper than a `gemm` crate call per product.
//!
//! - The micro-kernel computes a tile `dst[MR x NR] (+)= lhs[MR x kc] · rhs[kc x NR]` with
//!   `lhs` in SIMD registers along `MR` and `rhs` broadcast one scalar at a time, `dst`
//!   column-major. lumen's row-major `out = a · w` is, read column-major, `outᵀ = wᵀ · aᵀ`:
//!   the weight is the kernel's `lhs` (vectorised along the output's columns) and a group of
//!   `NR` rows of `a` its `rhs`.
//! - Packed layout: the weight's `n` columns cut into strips of `MR` columns (the last one
//!   narrower, zero-padded to a whole number of vectors); a strip is `k` rows of its padded
//!   width, contiguous. Any depth block `p0..p0 + kc` of a strip is then one contiguous range
//!   with stride `MR`, so the depth blocking is chosen per product, not baked into the pack.
//! - Loops, outermost first: panels of at most [`PANEL_ROWS`] rows of `a`; depth blocks of
//!   at most [`KC_MAX`] (contiguous rows of `a` are read in place; a strided `a` is copied per
//!   depth block into the panel as groups of `NR` rows, `NR` values per depth step); blocks of
//!   strips (at most [`B_BLOCK_BYTES`] of packed weight per depth block, to
//!   stay in L2); chunks of about [`EPILOGUE_BYTES`] of output rows; groups of `NR` rows;
//!   strips. After a chunk's last depth block its output is hot in L1, and the epilogue
//!   (bias, activation) runs on it there. Strips start on 64-byte boundaries.
//! - Threads: the rows of `a` are split into contiguous parts as in [`crate::gemm`]; a product
//!   with too few rows for that is split over strips instead. Each output element is summed by
//!   the same micro-kernel over the same depth blocks in the same order whichever tile or part
//!   holds it (the depth blocking depends on `k` alone; every tile width runs the same
//!   per-lane fused multiply-add sequence), so outputs are bit-identical across thread counts.

use std::ops::Range;

use crate::RuntimeError;
use crate::gemm::{Activation, Matrix, epilogue};
use crate::threads::{PAR_MIN_FLOPS, Threads};

/// Depth (`k`) per block at most: a row group's `NR x kc` copy of `a` (12 KiB at 512) stays in
/// L1 and a strip's `MR x kc` block (128 KiB with AVX-512) in L2.
pub const KC_MAX: usize = 512;

/// Bytes of packed weight per (block of strips, depth block) at most: what the row groups of
/// one depth block read again and again, kept within L2 beside the activation panel and the
/// output rows. Measured against 1 MiB (paired rounds, `examples/gemm_choice.rs` shapes):
/// 512 KiB took 0.83 to 0.97 of the time at 2048^3 on one and two threads, 0.94 to 1.02 at
/// 512x2048x512, on a machine with 2 MiB of L2 per core.
pub const B_BLOCK_BYTES: usize = 1 << 19;

/// The `gemm-f32` micro-kernel signature (`gemm_common::microkernel::MicroKernelFn<f32>`):
/// `(m, n, k, dst, lhs, rhs, dst_cs, dst_rs, lhs_cs, rhs_rs, rhs_cs, alpha, beta,
/// alpha_status, conj_dst, conj_lhs, conj_rhs, next_lhs)`; `alpha_status` 0 writes
/// `dst = beta·acc`, 1 writes `dst += beta·acc`.
pub(crate) type MicroKernel = unsafe fn(
    usize,
    usize,
    usize,
    *mut f32,
    *const f32,
    *const f32,
    isize,
    isize,
    isize,
    isize,
    isize,
    f32,
    f32,
    u8,
    bool,
    bool,
    bool,
    *const f32,
);

/// The micro-kernel family this CPU runs: vector width, the largest tile, and the kernels
/// (also driven by the convolution's own loops, [`crate::conv`]).
#[derive(Clone, Copy)]
pub(crate) struct Micro {
    /// f32 lanes per vector (16 with AVX-512, 8 with AVX2).
    pub(crate) lanes: usize,
    /// Vectors per tile column at most (`MR = mr_vectors · lanes`).
    pub(crate) mr_vectors: usize,
    /// Rows of `a` per tile at most (`NR`).
    pub(crate) nr: usize,
    /// The kernel for a tile of `v` vectors by `r` rows (`1 <= v <= mr_vectors`,
    /// `1 <= r <= nr`).
    pub(crate) kernel: fn(usize, usize) -> MicroKernel,
    name: &'static str,
}

impl std::fmt::Debug for Micro {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Micro {
    /// `MR`: f32 lanes of the widest tile (64 with AVX-512, 16 with AVX2).
    pub(crate) fn mr(&self) -> usize {
        self.lanes * self.mr_vectors
    }

    /// The widest family this CPU supports, or `None` (no AVX2 + FMA, or not x86-64).
    pub(crate) fn detect() -> Option<Self> {
        Self::families().into_iter().next()
    }

    /// Every family this CPU supports, widest first (AVX-512F, then AVX2 + FMA).
    pub(crate) fn families() -> Vec<Self> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use gemm_f32::microkernel as uk;
            if std::arch::is_x86_feature_detected!("avx512f") {
                out.push(Self {
                    lanes: 16,
                    mr_vectors: uk::avx512f::f32::MR_DIV_N,
                    nr: uk::avx512f::f32::NR,
                    kernel: |v, r| uk::avx512f::f32::UKR[v - 1][r - 1],
                    name: "avx512f 64x6",
                });
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                out.push(Self {
                    lanes: 8,
                    mr_vectors: uk::fma::f32::MR_DIV_N,
                    nr: uk::fma::f32::NR,
                    kernel: |v, r| uk::fma::f32::UKR[v - 1][r - 1],
                    name: "avx2+fma 16x6",
                });
            }
        }
        out
    }

    /// One tile through kernel `(vectors, rows)`: for each of `rows` columns `j` and `m`
    /// positions `i`, `dst[i + j·dst_cs]` (+)= `sum_t lhs[i + t·lhs_cs] · rhs[j·rhs_rs +
    /// t·rhs_cs]` over `k` depth steps, the sum added to `dst` when `accumulate` (a later depth
    /// block), written over it otherwise. `lhs` is read in whole vectors: `vectors · lanes`
    /// lanes per step. gemm-f32's call with `alpha = beta = 1`, no conjugation and `lhs` as
    /// the prefetch hint, as the packed GEMM, the convolution and Winograd all make it.
    ///
    /// # Safety
    /// `1 <= vectors <= mr_vectors`, `1 <= rows <= nr`, `m <= vectors · lanes`; every address
    /// named above inside its allocation (`lhs` for `vectors · lanes` lanes per step), `dst`
    /// not aliasing `lhs` or `rhs`; this family detected on this CPU ([`Micro::detect`]).
    #[inline(always)]
    pub(crate) unsafe fn tile(
        &self,
        vectors: usize,
        (m, rows, k): (usize, usize, usize),
        (dst, dst_cs): (*mut f32, isize),
        (lhs, lhs_cs): (*const f32, isize),
        (rhs, rhs_rs, rhs_cs): (*const f32, isize, isize),
        accumulate: bool,
    ) {
        // SAFETY: the caller's contract above is the kernel's.
        unsafe {
            (self.kernel)(vectors, rows)(
                m,
                rows,
                k,
                dst,
                lhs,
                rhs,
                dst_cs,
                1,
                lhs_cs,
                rhs_rs,
                rhs_cs,
                1.0,
                1.0,
                u8::from(accumulate),
                false,
                false,
                false,
                lhs,
            );
        }
    }
}

/// One strip of packed weight: output columns `cols`, `vectors` vectors wide (the columns
/// padded with zeros to `vectors · lanes`), stored `k x width` row-major from `offset`.
#[derive(Debug, Clone)]
struct Strip {
    cols: Range<usize>,
    vectors: usize,
    offset: usize,
}

/// A `[k, n]` weight packed for [`matmul_packed`]: strips of `MR` output columns, each `k`
/// rows of its zero-padded width, row-major f32 (see the module docs). Made once at prepare;
/// `k · (n rounded up to a vector)` f32 of host memory besides the weight's own copy in the
/// slab.
#[derive(Debug)]
pub struct PackedWeight {
    k: usize,
    n: usize,
    micro: Micro,
    strips: Vec<Strip>,
    data: Vec<f32>,
}

impl PackedWeight {
    /// Packs `w` (`[k, n]`, any strides), or `Ok(None)` when this CPU has no micro-kernel
    /// family lumen uses (no AVX2 + FMA, or not x86-64: the runtime then calls the `gemm`
    /// crate as before) or the weight is empty.
    ///
    /// # Errors
    /// [`RuntimeError::Alloc`] when the packed copy cannot be allocated.
    pub fn pack(w: Matrix<'_>) -> Result<Option<Self>, RuntimeError> {
        let Some(micro) = Micro::detect() else { return Ok(None) };
        Self::pack_for(w, micro)
    }

    fn pack_for(w: Matrix<'_>, micro: Micro) -> Result<Option<Self>, RuntimeError> {
        let (k, n) = w.shape();
        if k == 0 || n == 0 {
            return Ok(None);
        }
        let mr = micro.mr();
        let mut strips: Vec<Strip> = Vec::with_capacity(n.div_ceil(mr));
        let mut len = 0usize;
        for c0 in (0..n).step_by(mr) {
            let cols = c0..(c0 + mr).min(n);
            let vectors = cols.len().div_ceil(micro.lanes);
            strips.push(Strip { cols, vectors, offset: len });
            let bytes_error = || RuntimeError::Alloc { bytes: usize::MAX };
            len = k
                .checked_mul(vectors * micro.lanes)
                .and_then(|s| len.checked_add(s))
                .ok_or_else(bytes_error)?;
        }
        // Strips start on 64-byte boundaries (the kernel loads whole cache lines of them;
        // a strip straddling lines costs two loads per vector): pad the allocation by a
        // line and start at its first aligned element. The vector never grows, so it stays.
        let pad = 64 / 4;
        let mut data = Vec::new();
        data.try_reserve_exact(len + pad)
            .map_err(|_| RuntimeError::Alloc { bytes: (len + pad).saturating_mul(4) })?;
        data.resize(len + pad, 0.0);
        let base = data.as_ptr().align_offset(64).min(pad);
        for s in &mut strips {
            s.offset += base;
        }
        let mut packed = Self { k, n, micro, strips, data };
        packed.fill(w);
        Ok(Some(packed))
    }

    /// Writes `w`'s values into the strips (`w` of this weight's shape); padding columns stay
    /// as they were (zero).
    fn fill(&mut self, w: Matrix<'_>) {
        let k = self.k;
        for s in &self.strips {
            let width = s.vectors * self.micro.lanes;
            let block = &mut self.data[s.offset..s.offset + k * width];
            for (p, row) in block.chunks_exact_mut(width).enumerate() {
                for (slot, j) in row.iter_mut().zip(s.cols.clone()) {
                    *slot = w.at(p, j);
                }
            }
        }
    }

    /// [`PackedWeight::pack`] into `slot`, reusing its allocation when it already holds a
    /// weight of `w`'s shape: a batch of products with one right operand each (attention's
    /// heads) packs every operand into one copy, allocated once.
    ///
    /// # Errors
    /// As [`PackedWeight::pack`].
    pub fn pack_into<'s>(
        w: Matrix<'_>,
        slot: &'s mut Option<Self>,
    ) -> Result<Option<&'s Self>, RuntimeError> {
        match slot {
            Some(p) if p.shape() == w.shape() => p.fill(w),
            _ => *slot = Self::pack(w)?,
        }
        Ok(slot.as_ref())
    }

    /// `(k, n)`: the weight's shape.
    pub fn shape(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// Bytes of the packed copy.
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }
}

/// f32 lanes of the micro-kernels [`matmul_packed`] runs on this CPU (16 with AVX-512F, 8
/// with AVX2 + FMA), or `None` when it has none (the `gemm` crate is called instead). A packed
/// strip is a whole number of vectors wide, so a product with fewer output columns than this
/// computes padding.
pub fn vector_lanes() -> Option<usize> {
    Micro::detect().map(|m| m.lanes)
}

/// The depth blocks of a product of depth `k`: as few as [`KC_MAX`] allows, as even as
/// possible. Depends on `k` alone, so every part and thread count sums in the same order.
pub(crate) fn depth_blocks(k: usize) -> Vec<Range<usize>> {
    let count = k.div_ceil(KC_MAX).max(1);
    (0..count).map(|b| k * b / count..k * (b + 1) / count).collect()
}

/// `out = act(a · w + bias)`: `a` is `[m, k]` (any strides), `w` the packed `[k, n]` weight,
/// `bias` `[n]` broadcast over rows, `out` `[m, n]` row-major contiguous and overwritten. See
/// the module docs for the blocking and the threads.
///
/// # Errors
/// [`RuntimeError::Kernel`] when `a`'s depth is not `w`'s, `out` does not hold `m · n` or the
/// bias not `n`; [`RuntimeError::Alloc`] when a thread's `NR x kc` copy of a strided `a`
/// cannot be allocated.
pub fn matmul_packed(
    a: Matrix<'_>,
    w: &PackedWeight,
    bias: Option<&[f32]>,
    out: &mut [f32],
    act: Activation,
    threads: &Threads,
) -> Result<(), RuntimeError> {
    let (m, k) = a.shape();
    let n = w.n;
    let kernel_error = |reason: String| RuntimeError::Kernel { kernel: "matmul_packed", reason };
    if k != w.k || Some(out.len()) != m.checked_mul(n) || bias.is_some_and(|b| b.len() != n) {
        return Err(kernel_error(format!(
            "a [{m}, {k}], packed weight [{}, {n}], out of {}, bias of {:?}",
            w.k,
            out.len(),
            bias.map(<[f32]>::len)
        )));
    }
    if m == 0 {
        return Ok(());
    }
    let nr = w.micro.nr;
    let all = 0..w.strips.len();
    let parallel = m.saturating_mul(n).saturating_mul(k).saturating_mul(2) >= PAR_MIN_FLOPS
        && threads.count() > 1;
    let out_ptr = OutPtr(out.as_mut_ptr());
    if !parallel || (m < threads.count() * MIN_PART_ROWS && w.strips.len() < 2) {
        // SAFETY: `out` is a unique borrow of `m · n` elements, and this is the only writer.
        return unsafe { product(a, w, all, bias, out_ptr, act) };
    }
    if m >= threads.count() * MIN_PART_ROWS {
        return threads.for_parts(out, (m, n), nr, true, |rows, part| {
            // SAFETY: `part` is this thread's unique borrow of rows `rows` of `out`, which
            // `product` on `a`'s rows `rows` fills (its row `i` is the part's row `i`).
            unsafe {
                product(a.row_range(rows), w, all.clone(), bias, OutPtr(part.as_mut_ptr()), act)
            }
        });
    }
    // Too few rows for a part per thread: strips (column ranges) per thread instead.
    let parts = threads.parts(w.strips.len(), 1);
    threads.run_parts(parts.len(), |p| {
        // SAFETY: parts are disjoint strip ranges, so each thread writes its own columns of
        // `out` (`m · n` elements, borrowed uniquely by this call).
        unsafe { product(a, w, parts[p].clone(), bias, out_ptr, act) }
    })
}

/// Rows per thread below which a product is split over column strips instead of rows.
const MIN_PART_ROWS: usize = 48;

/// The output's first element, shared by the threads that write disjoint parts of it.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);

// SAFETY: threads given the same `OutPtr` write disjoint elements (see `matmul_packed`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// The single-thread product of rows `a` with strips `strips` of `w`, into `out` (row-major
/// `[a's rows, n]`; only the strips' columns are written, bias and activation applied).
///
/// # Safety
/// `out` points at `a`'s rows `x n` writable f32 that no other thread reads or writes in the
/// strips' columns during the call.
unsafe fn product(
    a: Matrix<'_>,
    w: &PackedWeight,
    strips: Range<usize>,
    bias: Option<&[f32]>,
    out: OutPtr,
    act: Activation,
) -> Result<(), RuntimeError> {
    let (m, k) = a.shape();
    let (n, micro) = (w.n, w.micro);
    let nr = micro.nr;
    let depth = depth_blocks(k);
    let kc_max = depth.iter().map(|d| d.len()).max().unwrap_or(0);
    // Contiguous rows are read in place (the kernel broadcasts one value at a time, from any
    // row stride); strided ones are copied per depth block into a panel of row groups, `nr`
    // values per depth step, as the `gemm` crate packs its right-hand side. Copying long
    // contiguous rows too (from 256 values, as lumen did first) took 1.06 to 1.16 times as long
    // at 512x2048x512 on 1 and 2 threads (paired `lumen run`s), 0.94 to 1.03 at 2048^3.
    let in_place = a.col_stride() == 1;
    let panel_rows = PANEL_ROWS.div_ceil(nr) * nr;
    let mut panel = Vec::new();
    if !in_place {
        let len = panel_rows.min(m.div_ceil(nr) * nr) * kc_max;
        panel.try_reserve_exact(len).map_err(|_| RuntimeError::Alloc { bytes: len * 4 })?;
        panel.resize(len, 0.0f32);
    }
    // Blocks of strips whose packed depth block fits B_BLOCK_BYTES.
    let strip_bytes = micro.mr() * kc_max * 4;
    let per_block = (B_BLOCK_BYTES / strip_bytes.max(1)).max(1);
    let strips = &w.strips[strips];
    let last_depth = depth.len() - 1;
    for p0 in (0..m).step_by(panel_rows) {
        let panel_end = (p0 + panel_rows).min(m);
        for (d, p) in depth.iter().enumerate() {
            let kc = p.len();
            if !in_place {
                pack_panel(a, p0..panel_end, p.clone(), nr, &mut panel);
            }
            for block in strips.chunks(per_block) {
                let cols = block[0].cols.start..block[block.len() - 1].cols.end;
                // Row groups per epilogue pass: about EPILOGUE_BYTES of output, still in L1.
                let chunk = (EPILOGUE_BYTES / (4 * cols.len())).max(1).div_ceil(nr) * nr;
                for c0 in (p0..panel_end).step_by(chunk) {
                    let chunk_rows = c0..(c0 + chunk).min(panel_end);
                    for r0 in chunk_rows.clone().step_by(nr) {
                        let rows = nr.min(m - r0);
                        let (rhs_ptr, rhs_rs, rhs_cs) = if in_place {
                            (a.ptr_at(r0, p.start), 1isize, a.row_stride() as isize)
                        } else {
                            (panel[(r0 - p0) * kc..].as_ptr(), nr as isize, 1isize)
                        };
                        for s in block {
                            let width = s.vectors * micro.lanes;
                            let lhs = &w.data[s.offset + p.start * width..s.offset + p.end * width];
                            // SAFETY: the kernel reads `kc` depth steps of `width` lanes from
                            // `lhs` (exactly its length) and `rows` values per step from `rhs`
                            // (inside `a`, which `Matrix::new` proved, or inside the panel's
                            // group of `nr · kc` values from `(r0 - p0) · kc`), and writes
                            // `s.cols.len()` values of each of `rows` output rows (kernel
                            // columns, stride `n`) from column `s.cols.start` of row `r0`:
                            // inside `out` (the caller's contract). `kernel(v, r)` exists for
                            // `1 <= v <= mr_vectors`, `1 <= r <= nr`, and `micro` was
                            // detected on this CPU.
                            unsafe {
                                micro.tile(
                                    s.vectors,
                                    (s.cols.len(), rows, kc),
                                    (out.0.add(r0 * n + s.cols.start), n as isize),
                                    (lhs.as_ptr(), width as isize),
                                    (rhs_ptr, rhs_rs, rhs_cs),
                                    d > 0,
                                );
                            }
                        }
                    }
                    if d == last_depth {
                        let bias = bias.map(|b| &b[cols.clone()]);
                        // Whole rows are one contiguous pass; a column block one pass per row.
                        let (rows, len) = match cols.len() == n {
                            true => (c0..c0 + 1, chunk_rows.len() * n),
                            false => (chunk_rows, cols.len()),
                        };
                        for i in rows {
                            // SAFETY: `len` elements from row `i`, column `cols.start` lie
                            // inside `out` and belong to this call (the caller's contract); no
                            // other reference to them is alive.
                            let block = unsafe {
                                std::slice::from_raw_parts_mut(out.0.add(i * n + cols.start), len)
                            };
                            epilogue(block, bias, cols.len(), act);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Copies rows `rows` of `a`, depth block `depth`, into `panel` as row groups of `nr`: group
/// `g` (rows `rows.start + g·nr ..`) from `g · nr · kc`, depth step `q` of its row `i` at
/// `g · nr · kc + q · nr + i` (a short last group leaves its unused slots as they were).
fn pack_panel(
    a: Matrix<'_>,
    rows: Range<usize>,
    depth: Range<usize>,
    nr: usize,
    panel: &mut [f32],
) {
    let kc = depth.len();
    for (g, r0) in rows.clone().step_by(nr).enumerate() {
        let group = &mut panel[g * nr * kc..(g + 1) * nr * kc];
        for i in 0..nr.min(rows.end - r0) {
            for (q, slot) in group.iter_mut().skip(i).step_by(nr).enumerate() {
                *slot = a.at(r0 + i, depth.start + q);
            }
        }
    }
}

/// Rows of the activation per panel at most (rounded up to whole row groups): a panel of
/// 1,024 rows by a 512-deep block is 2 MiB (copied for a strided `a`, read in place for
/// contiguous rows), read from L2/L3 once per block of strips.
pub const PANEL_ROWS: usize = 1024;

/// Bytes of output rows per epilogue pass (a chunk of row groups): still in L1 when the
/// epilogue reads them right after their last depth block.
pub const EPILOGUE_BYTES: usize = 1 << 15;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::tests::{assert_near, bits, data};

    /// `act(a · w + bias)` in f64, `a` [m, k] and `w` [k, n] read through their strides.
    fn reference(a: Matrix<'_>, w: Matrix<'_>, bias: &[f32], act: Activation) -> Vec<f64> {
        let ((m, k), (_, n)) = (a.shape(), w.shape());
        let mut out = Vec::with_capacity(m * n);
        for i in 0..m {
            for (j, &bj) in bias.iter().enumerate().take(n) {
                let dot: f64 = (0..k).map(|p| f64::from(a.at(i, p)) * f64::from(w.at(p, j))).sum();
                let x = dot + f64::from(bj);
                out.push(match act {
                    Activation::Relu => x.max(0.0),
                    _ => x,
                });
            }
        }
        out
    }

    /// Shapes off every tile multiple (rows not a multiple of 6, columns not of 16 or 64),
    /// one and several depth blocks and row panels, a single row, activation rows read in
    /// place and copied into panels, strided and transposed operands: within f32
    /// rounding of the f64 reference, and bit-identical across 1, 2 and 3 threads (row split,
    /// strip split and single thread), across repeats and across kernel families (AVX-512 and
    /// AVX2 tiles run the same per-element fused multiply-adds).
    #[test]
    fn packed_products_match_the_reference_on_every_split() {
        let teams =
            [Threads::single(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        // Each shape's first output, checked against every family, split and repeat.
        let mut firsts: Vec<Option<Vec<u32>>> = vec![None; 12];
        for micro in Micro::families() {
            for (shape, &(m, k, n, a_transposed, w_transposed)) in [
                (1, 1, 1, false, false),
                (1, 64, 128, false, false),
                (5, 3, 17, false, false),
                (7, 9, 130, true, false),
                (13, 600, 70, false, true),
                (450, 64, 128, false, false),
                (97, 1100, 33, true, true),
                // Split over threads: rows, then (too few rows) strips.
                (300, 300, 300, false, false),
                (20, 700, 1500, false, false),
                (40, 1300, 200, false, true),
                // Rows past one panel (PANEL_ROWS): read in place, and copied into panels.
                (1100, 300, 20, false, false),
                (1100, 40, 20, true, false),
            ]
            .iter()
            .enumerate()
            {
                let (abuf, wbuf, bias) = (data(m * k, 1), data(k * n, 2), data(n, 3));
                let a = match a_transposed {
                    false => Matrix::new(&abuf, 0, (m, k), (k, 1)).unwrap(),
                    true => Matrix::new(&abuf, 0, (m, k), (1, m)).unwrap(),
                };
                let wm = match w_transposed {
                    false => Matrix::new(&wbuf, 0, (k, n), (n, 1)).unwrap(),
                    true => Matrix::new(&wbuf, 0, (k, n), (1, k)).unwrap(),
                };
                let packed = PackedWeight::pack_for(wm, micro).unwrap().unwrap();
                assert_eq!(packed.shape(), (k, n));
                let want = reference(a, wm, &bias, Activation::Relu);
                let first = &mut firsts[shape];
                for team in &teams {
                    for _repeat in 0..2 {
                        let mut out = vec![f32::NAN; m * n];
                        matmul_packed(a, &packed, Some(&bias), &mut out, Activation::Relu, team)
                            .unwrap();
                        assert_near(&out, &want, k, &format!("{micro:?} {m}x{k}x{n}"));
                        match first {
                            None => *first = Some(bits(&out)),
                            Some(f) => assert_eq!(f, &bits(&out), "{micro:?} {m}x{k}x{n}"),
                        }
                    }
                }
            }
        }
    }

    /// No bias and no activation: the plain product; and a depth of zero is refused at pack
    /// (the runtime keeps its unpacked path, which writes `act(bias)`).
    #[test]
    fn plain_product_and_refusals() {
        let (m, k, n) = (9, 20, 40);
        let (abuf, wbuf) = (data(m * k, 4), data(k * n, 5));
        let a = Matrix::new(&abuf, 0, (m, k), (k, 1)).unwrap();
        let wm = Matrix::new(&wbuf, 0, (k, n), (n, 1)).unwrap();
        let Some(packed) = PackedWeight::pack(wm).unwrap() else { return };
        let mut out = vec![f32::NAN; m * n];
        matmul_packed(a, &packed, None, &mut out, Activation::Identity, &Threads::single())
            .unwrap();
        let want = reference(a, wm, &vec![0.0; n], Activation::Identity);
        for (g, w) in out.iter().zip(&want) {
            assert!((f64::from(*g) - w).abs() <= 1e-4, "{g} vs {w}");
        }
        let mut short = vec![0.0f32; m * n - 1];
        let err =
            matmul_packed(a, &packed, None, &mut short, Activation::Identity, &Threads::single());
        assert!(matches!(err, Err(RuntimeError::Kernel { .. })));
        let bad_bias = vec![0.0f32; n + 1];
        let err = matmul_packed(
            a,
            &packed,
            Some(&bad_bias),
            &mut out,
            Activation::Relu,
            &Threads::single(),
        );
        assert!(matches!(err, Err(RuntimeError::Kernel { .. })));
        let empty: [f32; 0] = [];
        let zero_depth = Matrix::new(&empty, 0, (0, n), (n, 1)).unwrap();
        assert!(PackedWeight::pack(zero_depth).unwrap().is_none());
        assert_eq!(depth_blocks(1100), vec![0..366, 366..733, 733..1100]);
        assert_eq!(depth_blocks(512), vec![0..512]);
    }

    /// Packing into a slot gives what a fresh pack gives: refilled in place for a weight of
    /// the slot's shape (every value replaced, the padding still zero), packed anew for
    /// another shape.
    #[test]
    fn pack_into_reuses_the_slot_only_for_the_same_shape() {
        if Micro::detect().is_none() {
            return;
        }
        let (x, y, z) = (data(8 * 24, 1), data(8 * 24, 2), data(5 * 3, 3));
        let wx = Matrix::new(&x, 0, (8, 24), (24, 1)).unwrap();
        // A transposed view, as an attention head's key is read.
        let wy = Matrix::new(&y, 0, (8, 24), (1, 8)).unwrap();
        let wz = Matrix::new(&z, 0, (5, 3), (3, 1)).unwrap();
        let mut slot = None;
        let mut last: Option<((usize, usize), *const f32)> = None;
        for w in [wx, wy, wz, wx] {
            let fresh = PackedWeight::pack(w).unwrap().unwrap();
            let reused = PackedWeight::pack_into(w, &mut slot).unwrap().unwrap();
            assert_eq!(reused.shape(), w.shape());
            // Each strip's values, wherever the allocation's alignment put them.
            let strips = |p: &PackedWeight| -> Vec<u32> {
                let width = |s: &Strip| s.vectors * p.micro.lanes;
                let rows = |s: &Strip| &p.data[s.offset..s.offset + p.k * width(s)];
                bits(&p.strips.iter().flat_map(rows).copied().collect::<Vec<_>>())
            };
            assert_eq!(strips(reused), strips(&fresh));
            let ptr = reused.data.as_ptr();
            if let Some((shape, before)) = last.filter(|(shape, _)| *shape == w.shape()) {
                assert_eq!(ptr, before, "{shape:?}: refilled in place");
            }
            last = Some((w.shape(), ptr));
        }
    }
}
