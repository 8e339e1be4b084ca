//! The CPU convolution ([`LlirOp::Conv`]): im2col and a GEMM per image and group, direct
//! kernels for small depths and for depthwise convolutions, and the epilogue on each block of
//! output while it is in cache.
//!
//! - Dense and grouped (on x86-64 with AVX2 + FMA or AVX-512F: `dense_packed`): lumen's own
//!   BLIS loops around the `gemm-f32` register micro-kernels ([`crate::packed`]'s, 64 x 6 tiles
//!   with AVX-512), oriented so that `out [OC/g, P] = w [OC/g, depth] x cols [depth, P]` (depth
//!   = input channels per group x kernel taps, P = output positions) needs no transpose and no
//!   repacking: the kernel's vectorised operand runs along the positions (a strip of `MR` = 64
//!   of them, stored contiguously along P into the NCHW output: `dst_rs` 1, `dst_cs` P) and its
//!   broadcast operand is `NR` = 6 rows of the weights, read in place (`rhs_rs` 1, `rhs_cs`
//!   depth). The patches of a block of positions are written by im2col straight into the
//!   layout the kernel reads (a `Panel` in the node's workspace: `depth` rows of the block's
//!   positions rounded up to whole vectors, 64-byte aligned; the im2col of Caffe and ONNX
//!   Runtime's MLAS, planned in the slab like cuBLASLt's workspace), each depth block of at
//!   most 512 rows just before it is multiplied, so it is still in L2. Each patch row is copied
//!   in runs along the innermost axis (16 values at a time, compiled for the widest vector
//!   unit), padding written as zeros. The `gemm` crate, which packed both operands on every
//!   call (the weights once per block of 64 to 1,024 positions), is left for CPUs without
//!   those kernels.
//! - Threads split the positions in whole strips (each packs and multiplies its own blocks) or,
//!   with fewer than 4 strips per thread (7x7 and 14x14 planes), the output channels in groups
//!   of 6 after every thread has packed a share of the rows. An output element is always the
//!   same kernel's fused multiply-adds over the same depth blocks, so the bits do not depend on
//!   the thread count.
//! - Small depths (at most 320: the stems, 3 input channels under a 3x3 to 7x7 kernel, and 3x3 over
//!   up to 32 channels per group), on AVX-512F, 1 or 2 spatial axes, output rows of at least 16:
//!   `direct`, no im2col and no workspace. Each output row is computed from the input rows it
//!   reads, each copied once (a ring of them per input channel, a thread's scratch) into a
//!   zero-padded row split into `stride` phases (stride 2 split as u64 pairs: a shift and two
//!   truncations, not scalar gathers), so every tap of 16 consecutive outputs is one unaligned
//!   load. A tile is 16 positions by 16 output channels in 16 named accumulators (so they stay in
//!   registers): per depth step one load and 16 fused multiply-adds by weights broadcast from
//!   memory (transposed per call to `[depth, 16]`, a 64-byte line per step), so OC = 16 fills a
//!   tile where the 64 x 6 kernel ran 6 + 6 + 4. Stored straight into the NCHW output (a row's last
//!   vector overlapping the one before), the epilogue on each output row while it is in L1; the
//!   next row's input lines are prefetched a few before each tile. Output rows split over the
//!   threads; an element is the same FMAs in the same order whichever thread or tile computes it.
//!   Measured (2026-12-05, 2-core AMD EPYC Zen 4, AVX-512F, shared machine; the binary before and
//!   after interleaved with ONNX Runtime 1.32.0, 3 rounds, medians, one thread), before / after /
//!   ORT ms: YOLOv8n's stem 3x3/2 3->16 at 640 4.00 / 1.57 / 1.18 to 1.54 (ORT noisy); YOLOv5's
//!   6x6/2 12.3 / 3.95 / 3.56 to 3.68; 3x3/2 16->32 at 320 5.89 / 2.86 / 2.67 to 2.77; ResNet-50's
//!   7x7/2 3->64 3.54 / 2.32 / 2.20; 3x3 16->16 at 160 1.77 / 1.27 / 1.16 to 1.18; with the limit
//!   at 320, 3x3 32->32 at 80 1.49 / 1.19 / 1.10 and 3x3/2 32->64 at 160 4.30 / 2.65 / 2.65
//!   (before: the 160 limit). YOLOv8n b1 640 whole: after/before 0.92 on 1 thread (184 -> 170 ms,
//!   ORT 141) and 0.92 on 2 (219 -> 206 ms; 2 threads slower than 1 on the contended machine). The
//!   planner's workspace (`ConvGeometry::workspace_bytes`) is unchanged and unused on this path
//!   (the im2col path still needs it without AVX-512F).
//! - Pointwise (1x1, stride 1, no padding): over a flat input whose channels start on 64-byte
//!   boundaries and hold whole vectors (the slab's activations at 56x56, 28x28, 80x80, ...) the
//!   input is the patch matrix, read in place; otherwise its rows are copied as one run each.
//! - Measured (2026-12-05, 2-core AMD EPYC Zen 4, AVX-512F, shared with other engineers'
//!   builds; the binary before and after interleaved with ONNX Runtime 1.32.0, 3 rounds,
//!   medians of per-round ratios): after/before 0.92 on ResNet-50, 0.92 to 0.98 on YOLOv8n and
//!   0.97 to 1.02 on MobileNetV2 at batch 1 on 1 and 2 threads; ResNet-50 1.27 times ORT's
//!   time on one thread (1.39 before), 1.37 on two (1.46). See docs/src/benchmarks.md.
//! - Depthwise (one input channel per group, MobileNet's 3x3): the channel copied once into a
//!   zero-padded plane in L1 (the zeros written once per thread; rows copied in inlined vector
//!   moves; at stride 2 split into even and odd phases with vector shuffles), then each output
//!   row the sum of its rows scaled by the taps, planes split over the threads. The common
//!   planes (2-D, 3x3 or 5x5, dilation 1, stride 1 or 2: `blocked_taps`) go in groups of 4
//!   output rows by 16 columns in registers, each input row's runs loaded once for the group,
//!   the bias added in the same pass; the others as before (`flat_taps`, `row_taps`), the
//!   same bits. Measured 2026-12-05 (2-core AMD EPYC Zen 4, AVX-512F, shared with other
//!   engineers' builds; before and after binaries and ONNX Runtime 1.32.0 interleaved, 5
//!   rounds, `execute_seconds_median`, readback of the output included): 3x3 on 144x56x56
//!   0.436 -> 0.230 ms on 1 thread (ORT 0.218; 1.11x), 3x3/2 0.444 -> 0.148 ms (ORT 0.098;
//!   1.49x); the same on 2 threads; MobileNetV2 batch 1 after/before 0.84 and 0.95 in two
//!   runs of 3 rounds on 1 thread (1.40-1.51x ORT; very noisy). What is
//!   left at stride 2 is mostly waiting on the input streamed from L3 (a software prefetch of
//!   the next plane measured 1.14-1.19x slower).
//! - Max pool ([`max_pool`], its own LLIR op with a depthwise geometry): per plane, each input
//!   row padded with `-inf` and folded across the window along the innermost axis, then the
//!   rows of those maxima folded along the outer axes, both vectorized, in the definition's
//!   order (the bits of a `max` reduction of the window). Rows are copied in inlined vector
//!   moves and split into phases at stride 2 with vector shuffles; folds of 2 to 5 taps are
//!   unrolled, 32 lanes (two vectors in flight) at a time. 3x3/2 on 64x112x112 0.516 -> 0.423
//!   ms on 1 thread (ORT 0.162), 5x5/1 on 128x20x20 0.117 -> 0.110 ms (ORT 0.045), the same
//!   ratios on 2 threads (same machine and method): still 2.4-2.7x ORT's time, not done.
//! - Epilogue ([`ConvEpilogue`], ONNX Runtime's `FusedConv`): `act(sum + bias[oc] +
//!   residual)` on each block of rows right after it is computed.
//!
//! Operands are read through their views with any strides (a channel slice of a
//! concatenation, a batch of a larger tensor): the kernel addresses `x` by its five strides.
//!
//! [`LlirOp::Conv`]: lumen_compiler::LlirOp::Conv

use std::ops::Range;

use lumen_compiler::conv::{ConvEpilogue, ConvGeometry, MAX_SPATIAL};
use lumen_compiler::ops::{gelu_f32, hardswish_f32, relu_f32, relu6_f32, sigmoid_f32, silu_f32};
use lumen_compiler::{ElemOp, UnaryOp, View};

use crate::RuntimeError;
use crate::isa::{widest, widest_isa};
use crate::kernels::Input;
use crate::packed::{B_BLOCK_BYTES, Micro, depth_blocks};
use crate::threads::{PAR_MIN_ELEMS, PAR_MIN_FLOPS, Threads};

const K: &str = "conv";

/// Applies `act` to every value of `vals`, dispatched once per call so the loop compiles for
/// each activation on its own (and vectorizes).
pub(crate) fn activate(act: Option<UnaryOp>, vals: &mut [f32]) {
    #[inline(always)]
    fn each(vals: &mut [f32], f: impl Fn(f32) -> f32) {
        for v in vals {
            *v = f(*v);
        }
    }
    // Each loop compiled for the widest vector unit: in the build's baseline the exp of
    // sigmoid/SiLU is a call to `fmaf` per step (4.5x the convolution on YOLOv8n).
    match act {
        None => {}
        Some(UnaryOp::Relu) => widest(|| each(vals, relu_f32)),
        Some(UnaryOp::Relu6) => widest(|| each(vals, relu6_f32)),
        Some(UnaryOp::Sigmoid) => widest(|| each(vals, sigmoid_f32)),
        Some(UnaryOp::Silu) => widest(|| each(vals, silu_f32)),
        Some(UnaryOp::HardSwish) => widest(|| each(vals, hardswish_f32)),
        Some(UnaryOp::Gelu) => widest(|| each(vals, gelu_f32)),
        Some(op) => each(vals, |x| ElemOp::Unary(op).eval_f32([x, 0.0, 0.0])),
    }
}

/// `x`'s five strides and offset, spatial axes padded to three (a missing axis has length 1).
#[derive(Debug, Clone, Copy)]
struct Strides {
    offset: usize,
    n: usize,
    c: usize,
    sp: [usize; MAX_SPATIAL],
}

impl Strides {
    fn of(view: &View, g: &ConvGeometry) -> Self {
        let mut sp = [0; MAX_SPATIAL];
        sp[g.axes()].copy_from_slice(&view.strides[2..2 + g.rank]);
        Self { offset: view.offset, n: view.strides[0], c: view.strides[1], sp }
    }

    /// Whether the spatial axes are one row-major run of `input` (so a channel's positions
    /// are `p * 1` apart): the pointwise path reads such an input in place.
    fn spatial_is_flat(&self, input: [usize; MAX_SPATIAL]) -> bool {
        let mut want = 1;
        for a in (0..MAX_SPATIAL).rev() {
            if input[a] > 1 && self.sp[a] != want {
                return false;
            }
            want *= input[a];
        }
        true
    }
}

/// The output positions `c` along one axis whose input position `c * stride + off - pad` lies
/// in `0..len`: `lo..hi` (possibly empty), out of `0..out`.
#[inline]
fn valid_range(out: usize, stride: usize, off: usize, pad: usize, len: usize) -> (usize, usize) {
    let lo = if pad > off { (pad - off).div_ceil(stride) } else { 0 };
    let hi = if len + pad > off { (len + pad - off).div_ceil(stride) } else { 0 };
    (lo.min(out), hi.min(out).max(lo.min(out)))
}

/// Fills one row of the patch matrix for output positions `p0..p0 + row.len()` (row-major
/// over the output's spatial axes): input channel base `xbase` (the element of position 0),
/// kernel tap `tap`, zeros where padded. Each output row's part is one copy along the
/// innermost axis (a `memcpy` at stride 1).
fn im2col_row(
    row: &mut [f32],
    p0: usize,
    x: &[f32],
    xbase: usize,
    st: &Strides,
    g: &ConvGeometry,
    tap: [usize; 3],
) {
    let [_, o1, o2] = g.output;
    let o2 = o2.max(1);
    let off = |a: usize| tap[a] * g.dilation[a];
    let (lo2, hi2) = valid_range(o2, g.stride[2], off(2), g.pad[2], g.input[2]);
    let p1 = p0 + row.len();
    let mut p = p0;
    while p < p1 {
        // Output row (a, b) of the innermost axis, columns c_lo..c_hi of it.
        let (rowp, c_lo) = (p / o2, p % o2);
        let c_hi = o2.min(c_lo + (p1 - p));
        let (a, b) = (rowp / o1.max(1), rowp % o1.max(1));
        let dst = &mut row[p - p0..p - p0 + (c_hi - c_lo)];
        p += c_hi - c_lo;
        let i0 = (a * g.stride[0] + off(0)).checked_sub(g.pad[0]).filter(|&i| i < g.input[0]);
        let i1 = (b * g.stride[1] + off(1)).checked_sub(g.pad[1]).filter(|&i| i < g.input[1]);
        let (Some(i0), Some(i1)) = (i0, i1) else {
            dst.fill(0.0);
            continue;
        };
        // The valid columns of this part: lo..hi (relative to c_lo).
        let (lo, hi) = (lo2.clamp(c_lo, c_hi), hi2.clamp(c_lo, c_hi));
        let (lo, hi) = (lo, hi.max(lo));
        dst[..lo - c_lo].fill(0.0);
        dst[hi - c_lo..].fill(0.0);
        if lo >= hi {
            continue;
        }
        let base = xbase + i0 * st.sp[0] + i1 * st.sp[1];
        let first = lo * g.stride[2] + off(2) - g.pad[2];
        let seg = &mut dst[lo - c_lo..hi - c_lo];
        if g.stride[2] == 1 && st.sp[2] == 1 {
            let start = base + first;
            seg.copy_from_slice(&x[start..start + (hi - lo)]);
        } else {
            let step = g.stride[2] * st.sp[2];
            let mut at = base + first * st.sp[2];
            for d in seg {
                *d = x[at];
                at += step;
            }
        }
    }
}

/// A raw pointer the threads of one GEMM share: each writes its own columns or rows.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
// SAFETY: every part writes a disjoint set of elements (see the callers), and the pointer
// outlives the parts (they run inside `Threads::run_parts`, which returns when all finish).
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

/// `dst [m, n] (row stride dst_rs) = lhs [m, k] (row stride lhs_rs, unit column stride) x rhs
/// [k, n] (row stride rhs_rs, unit column stride)` on the calling thread.
///
/// # Safety
/// Every element addressed must lie inside its allocation, and `dst`'s elements must not be
/// read or written by anyone else during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_block(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    dst_rs: usize,
    lhs: *const f32,
    lhs_rs: usize,
    rhs: *const f32,
    rhs_rs: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let s = |v: usize| v as isize;
    if k == 0 {
        for i in 0..m {
            // SAFETY: row i of dst, inside its allocation by the caller's contract.
            unsafe { std::slice::from_raw_parts_mut(dst.add(i * dst_rs), n) }.fill(0.0);
        }
        return;
    }
    // SAFETY: the caller's contract; read_dst = false, so dst is only written.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            s(dst_rs),
            false,
            lhs,
            1,
            s(lhs_rs),
            rhs,
            1,
            s(rhs_rs),
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// What the epilogue reads for one image: the bias and the residual with its view.
struct Epilogue<'a> {
    epilogue: ConvEpilogue,
    bias: Option<Input<'a>>,
    residual: Option<Input<'a>>,
}

impl Epilogue<'_> {
    /// Applies the epilogue to output channel `oc` of image `n`, positions `p0..p0 +
    /// row.len()` (the sum already in `row`).
    fn row(&self, g: &ConvGeometry, n: usize, oc: usize, p0: usize, row: &mut [f32]) {
        if let Some((b, v)) = self.bias {
            let bias = b[v.offset + oc * v.strides[0]];
            row.iter_mut().for_each(|x| *x += bias);
        }
        if let Some((r, v)) = self.residual {
            let flat = (n * g.c_out + oc) * g.output_positions() + p0;
            if v.is_contiguous() {
                let start = v.offset + flat;
                let len = row.len();
                for (x, &y) in row.iter_mut().zip(&r[start..start + len]) {
                    *x += y;
                }
            } else {
                for (j, x) in row.iter_mut().enumerate() {
                    *x += r[v.index(flat + j)];
                }
            }
        }
        activate(self.epilogue.activation, row);
    }
}

/// The convolution of `geometry` with `epilogue` (see the module docs): `x`, `w`, and the
/// `bias` and `residual` operands the epilogue names, each a slab slice and its view; `out`
/// the `[N, OC, *out]` output (row-major, overwritten); `work` the workspace (at least
/// [`ConvGeometry::workspace_bytes`] / 4 elements).
///
/// # Errors
/// [`RuntimeError::Kernel`] when a view does not have the geometry's shape or leaves its
/// buffer, an operand the epilogue needs is missing, or `out` or `work` is too small.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    g: &ConvGeometry,
    epilogue: ConvEpilogue,
    (x, xv): Input<'_>,
    (w, wv): Input<'_>,
    bias: Option<Input<'_>>,
    residual: Option<Input<'_>>,
    out: &mut [f32],
    work: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    let bad = |what: String| RuntimeError::kernel(K, what);
    let (xs, ws) = (g.input_shape(), g.weight_shape());
    let fits = |v: &View, len: usize, shape: &[usize]| {
        v.shape == shape && v.strides.len() == shape.len() && v.extent().is_some_and(|e| e <= len)
    };
    if !fits(xv, x.len(), &xs) || !fits(wv, w.len(), &ws) {
        return Err(bad(format!(
            "views {:?} and {:?} do not fit {}",
            xv.shape,
            wv.shape,
            g.text()
        )));
    }
    if epilogue.bias != bias.is_some() || epilogue.residual != residual.is_some() {
        return Err(bad(format!("operands do not match the epilogue {epilogue}")));
    }
    if let Some((b, v)) = bias
        && !fits(v, b.len(), &[g.c_out])
    {
        return Err(bad(format!("bias view {:?}, expected [{}]", v.shape, g.c_out)));
    }
    let out_shape = g.output_shape();
    if let Some((r, v)) = residual
        && !fits(v, r.len(), &out_shape)
    {
        return Err(bad(format!("residual view {:?}, expected {out_shape:?}", v.shape)));
    }
    let p = g.output_positions();
    if out.len() != g.batch * g.c_out * p {
        return Err(bad(format!(
            "out has {} elements, expected {}",
            out.len(),
            g.batch * g.c_out * p
        )));
    }
    let epi = Epilogue { epilogue, bias, residual };
    let st = Strides::of(xv, g);
    // The weights as a row-major [OC, depth] matrix (lumen's weights always are; a view that
    // is not gets copied).
    let owned: Vec<f32>;
    let w_rows: &[f32] = if wv.is_contiguous() {
        &w[wv.offset..wv.offset + wv.elements()]
    } else {
        let mut v = Vec::with_capacity(wv.elements());
        wv.for_each_offset(|o| v.push(w[o]));
        owned = v;
        &owned
    };
    if g.is_depthwise() {
        depthwise(g, &epi, x, &st, w_rows, out, threads);
        return Ok(());
    }
    if direct_fits(g) {
        direct(g, &epi, x, &st, w_rows, out, threads);
        return Ok(());
    }
    if let Some(micro) = Micro::detect()
        && g.depth() > 0
    {
        return dense_packed(g, &epi, x, &st, w_rows, out, work, threads, micro);
    }
    let depth = g.depth();
    let groups = g.groups.max(1);
    let (cg, ocg) = (g.c_in / groups, g.c_out / groups);
    let in_place = g.is_pointwise() && st.spatial_is_flat(g.input);
    if !in_place && work.len() < depth * p {
        return Err(bad(format!("workspace of {} elements, expected {}", work.len(), depth * p)));
    }
    let taps = g.taps();
    let block = column_block(depth, p);
    for n in 0..g.batch {
        for grp in 0..groups {
            let xbase = |ci: usize| st.offset + n * st.n + (grp * cg + ci) * st.c;
            let lhs = &w_rows[grp * ocg * depth..(grp + 1) * ocg * depth];
            let out_g =
                &mut out[(n * g.c_out + grp * ocg) * p..(n * g.c_out + (grp + 1) * ocg) * p];
            let blocks = p.div_ceil(block);
            let flops = 2usize.saturating_mul(ocg).saturating_mul(p).saturating_mul(depth);
            let parallel = flops >= PAR_MIN_FLOPS && threads.count() > 1;
            if blocks >= threads.count() || !parallel {
                // Column blocks, each patched into its own part of the workspace, multiplied and
                // finished while in cache; the threads share the blocks.
                let parts = if parallel { threads.parts(blocks, 1) } else { vec![0..blocks] };
                let dst = SharedMut(out_g.as_mut_ptr());
                let ws = SharedMut(work.as_mut_ptr());
                let x_at = |ci: usize| xbase(ci);
                let _ = threads.run_parts::<()>(parts.len(), |i| {
                    let (dst, ws) = (dst, ws);
                    for b in parts[i].clone() {
                        let (c0, c1) = (b * block, ((b + 1) * block).min(p));
                        let width = c1 - c0;
                        // SAFETY: block b owns columns c0..c1 of out_g and the workspace's
                        // elements depth*c0..depth*c1 (within depth*p, checked above); x, w
                        // and the epilogue's operands are only read.
                        unsafe {
                            let (rhs, rs) = if in_place {
                                (x.as_ptr().add(x_at(0) + c0), st.c)
                            } else {
                                let cols = std::slice::from_raw_parts_mut(
                                    ws.0.add(depth * c0),
                                    depth * width,
                                );
                                for (r, row) in cols.chunks_exact_mut(width.max(1)).enumerate() {
                                    let (ci, t) = (r / taps, r % taps);
                                    let tap = lumen_compiler::conv::unravel3(t, g.kernel);
                                    im2col_row(row, c0, x, x_at(ci), &st, g, tap);
                                }
                                (cols.as_ptr(), width)
                            };
                            gemm_block(
                                (ocg, width, depth),
                                dst.0.add(c0),
                                p,
                                lhs.as_ptr(),
                                depth,
                                rhs,
                                rs,
                            );
                            for oc in 0..ocg {
                                let row =
                                    std::slice::from_raw_parts_mut(dst.0.add(oc * p + c0), width);
                                epi.row(g, n, grp * ocg + oc, c0, row);
                            }
                        }
                    }
                    Ok(())
                });
                continue;
            }
            // Few positions (late layers): patch every column, then split the output channels.
            let (rhs, rhs_rs): (&[f32], usize) = if in_place {
                (&x[xbase(0)..], st.c)
            } else {
                let cols = &mut work[..depth * p];
                let _ = threads.for_parts::<()>(cols, (depth, p), 1, true, |rows, part| {
                    for (r, row) in rows.zip(part.chunks_exact_mut(p.max(1))) {
                        let (ci, t) = (r / taps, r % taps);
                        let tap = lumen_compiler::conv::unravel3(t, g.kernel);
                        im2col_row(row, 0, x, xbase(ci), &st, g, tap);
                    }
                    Ok(())
                });
                (&work[..depth * p], p)
            };
            gemm_epilogue(g, &epi, n, grp * ocg, (lhs, depth), (rhs, rhs_rs), out_g, threads);
        }
    }
    Ok(())
}

/// A block of output positions whose patches [`dense_packed`] lays out together in the
/// workspace: positions `p0..p0 + cols` (`p0` a multiple of the micro-kernel's `MR`), stored
/// as `depth` rows of `width` f32 (`cols` rounded up to whole vectors, the padding lanes zero)
/// from element `p0 · depth` of the 64-byte-aligned workspace, row `r` holding the patch
/// values of input channel `r / taps`, tap `r % taps` (the im2col matrix's columns
/// `p0..p0 + cols`). Strip `s` of the panel (its positions `p0 + s · MR ..`, at most `MR`) is
/// then the micro-kernel's vectorised operand read in place: column `s · MR` of each row, row
/// stride `width`, every row starting on a whole vector. Panels that tile `0..P` in order
/// cover at most `depth · (P rounded up to 16)` elements ([`ConvGeometry::workspace_bytes`]
/// plans that, plus 64 bytes to align the base), each its own range.
#[derive(Debug, Clone, Copy)]
struct Panel {
    /// First output position (a multiple of `MR`).
    p0: usize,
    /// Output positions.
    cols: usize,
    /// Stored f32 per row: `cols` rounded up to the vector length.
    width: usize,
}

impl Panel {
    fn new(positions: Range<usize>, lanes: usize) -> Self {
        let cols = positions.len();
        Self { p0: positions.start, cols, width: cols.next_multiple_of(lanes) }
    }
}

/// Patch rows `rows` of `panel` ([`Panel`]) written from `x` (its channel 0 of this image and
/// group at `xbase0`), by [`pack_rows_widest`].
///
/// # Safety
/// `ws` is the aligned workspace of the image and group, and rows `rows` of `panel` in it are
/// writable and the caller's alone during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_panel(
    panel: Panel,
    depth: usize,
    rows: Range<usize>,
    ws: *mut f32,
    x: &[f32],
    xbase0: usize,
    st: &Strides,
    g: &ConvGeometry,
) {
    // SAFETY: rows `rows` of the panel, `width` elements each from p0 · depth + r · width:
    // the caller's by the contract.
    let region = unsafe {
        std::slice::from_raw_parts_mut(
            ws.add(panel.p0 * depth + rows.start * panel.width),
            rows.len() * panel.width,
        )
    };
    let at = (rows.start, panel.width, panel.cols, panel.p0);
    pack_rows_widest(region, at, x, xbase0, st, g);
}

/// Patch rows `r0..` of a [`Panel`] (`rows`: those rows, `width` f32 each) written from `x`
/// (its channel 0 of this image and group at `xbase0`): for each row, each output row's piece
/// a run along the innermost axis (copied 16 values at a time, or gathered at the stride),
/// zeros where the window reads padding and in the padding lanes `cols..width`. Compiled for
/// the widest vector unit ([`pack_rows_widest`]); the values are copies, so the bits do not
/// depend on it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pack_rows(
    rows: &mut [f32],
    (r0, width, cols, p0): (usize, usize, usize, usize),
    x: &[f32],
    xbase0: usize,
    st: &Strides,
    g: &ConvGeometry,
) {
    let taps = g.taps();
    let [_, o1, o2] = g.output;
    let (o1, o2) = (o1.max(1), o2.max(1));
    let p1 = p0 + cols;
    // Pointwise over a flat input: row r is channel r's positions p0..p1, one run.
    let flat = g.is_pointwise() && st.spatial_is_flat(g.input);
    for (i, row) in rows.chunks_exact_mut(width).enumerate() {
        let r = r0 + i;
        if flat {
            let start = xbase0 + r * st.c + p0;
            copy_run(&mut row[..cols], &x[start..start + cols]);
            row[cols..].fill(0.0);
            continue;
        }
        let (ci, t) = (r / taps, r % taps);
        let tap = lumen_compiler::conv::unravel3(t, g.kernel);
        let xbase = xbase0 + ci * st.c;
        let off = |a: usize| tap[a] * g.dilation[a];
        let (lo2, hi2) = valid_range(o2, g.stride[2], off(2), g.pad[2], g.input[2]);
        let step = g.stride[2] * st.sp[2];
        let (mut rowp, mut c) = (p0 / o2, p0 % o2);
        let mut p = p0;
        while p < p1 {
            let c_hi = o2.min(c + (p1 - p));
            let dst = &mut row[p - p0..p - p0 + (c_hi - c)];
            let (a, b) = (rowp / o1, rowp % o1);
            let i0 = (a * g.stride[0] + off(0)).checked_sub(g.pad[0]).filter(|&i| i < g.input[0]);
            let i1 = (b * g.stride[1] + off(1)).checked_sub(g.pad[1]).filter(|&i| i < g.input[1]);
            p += c_hi - c;
            let (lo, hi) = (lo2.clamp(c, c_hi), hi2.clamp(c, c_hi).max(lo2.clamp(c, c_hi)));
            match (i0, i1) {
                (Some(i0), Some(i1)) if lo < hi => {
                    dst[..lo - c].fill(0.0);
                    dst[hi - c..].fill(0.0);
                    let base = xbase + i0 * st.sp[0] + i1 * st.sp[1];
                    let start = base + (lo * g.stride[2] + off(2) - g.pad[2]) * st.sp[2];
                    let seg = &mut dst[lo - c..hi - c];
                    let n = seg.len();
                    if step == 1 {
                        copy_run(seg, &x[start..start + n]);
                    } else {
                        let src = &x[start..start + (n - 1) * step + 1];
                        for (j, d) in seg.iter_mut().enumerate() {
                            *d = src[j * step];
                        }
                    }
                }
                _ => dst.fill(0.0),
            }
            c = c_hi;
            if c == o2 {
                c = 0;
                rowp += 1;
            }
        }
        row[cols..].fill(0.0);
    }
}

/// `dst = src` (equal lengths), 16 values at a time with the last 16 overlapping (inlined
/// vector moves, not a `memcpy` call per output row); shorter runs one value at a time.
#[inline(always)]
fn copy_run(dst: &mut [f32], src: &[f32]) {
    const V: usize = 16;
    let n = dst.len();
    if n < V {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s;
        }
        return;
    }
    let mut i = 0;
    while i + V <= n {
        let s: &[f32; V] = src[i..i + V].try_into().expect("16 values");
        dst[i..i + V].copy_from_slice(s);
        i += V;
    }
    if i < n {
        let s: &[f32; V] = src[n - V..n].try_into().expect("16 values");
        dst[n - V..n].copy_from_slice(s);
    }
}

widest_isa! {
    /// [`pack_rows`] compiled for AVX-512F, else AVX2 + FMA, else the baseline.
    fn pack_rows_widest(
        rows: &mut [f32],
        at: (usize, usize, usize, usize),
        x: &[f32],
        xbase0: usize,
        st: &Strides,
        g: &ConvGeometry
    ) => pack_rows
}

/// `out [ocs, panel's positions] = w [ocs, depth] x patches`, then the epilogue, for output
/// channels `ocs` of the group and the packed `panel` ([`Panel`]). Blocks of strips whose
/// depth block stays in L2 ([`B_BLOCK_BYTES`]), then depth blocks ([`depth_blocks`], from
/// `depth` alone), then groups of `NR` output channels, then the block's strips: one
/// micro-kernel call each, the strip its vectorised operand (`MR` positions, `lhs_cs` the
/// patches' row stride), the `NR` weight rows its broadcast operand read in place (`rhs_rs` 1,
/// `rhs_cs` `depth`), the tile stored along the positions (`dst_rs` 1, `dst_cs` `P`). After a
/// group's last depth block its rows are in L1, and the epilogue runs on them there.
///
/// # Safety
/// `base` points at the panel's patches (row 0, position `p0`; row stride `lhs_cs`): its
/// packed copy in the workspace or, for a pointwise convolution, the input itself; every row
/// start 64-byte aligned, and each row readable for the panel's positions rounded up to whole
/// vectors; not written during the call (but for `pack`'s rows, each before it is read).
/// `out` points at the group's `[OC/g, P]` output, of which rows `ocs` at the panel's
/// positions are the caller's alone; `w` is the group's `[OC/g, depth]` weights, row-major.
#[allow(clippy::too_many_arguments)]
unsafe fn multiply_panel(
    micro: &Micro,
    (p, depth): (usize, usize),
    panel: Panel,
    ocs: Range<usize>,
    (base, lhs_cs): (*const f32, usize),
    w: &[f32],
    out: *mut f32,
    epi_row: &(dyn Fn(usize, usize, &mut [f32]) + Sync),
    pack: Option<&dyn Fn(Range<usize>)>,
) {
    let (mr, nr) = (micro.mr(), micro.nr);
    let blocks = depth_blocks(depth);
    let per_block = strips_per_block(depth, mr) * mr;
    let last = blocks.len() - 1;
    debug_assert!(pack.is_none() || panel.cols <= per_block, "one block when packing here");
    for c0 in (0..panel.cols).step_by(per_block) {
        let c1 = (c0 + per_block).min(panel.cols);
        for (d, kr) in blocks.iter().enumerate() {
            let kc = kr.len();
            if let Some(pack) = pack {
                pack(kr.clone());
            }
            for j0 in ocs.clone().step_by(nr) {
                let rows = nr.min(ocs.end - j0);
                let rhs = w[j0 * depth + kr.start..].as_ptr();
                for s0 in (c0..c1).step_by(mr) {
                    let m = mr.min(c1 - s0);
                    // SAFETY: the kernel reads kc steps of m rounded up to whole vectors
                    // (64-byte aligned, inside the patches: the caller's contract) from
                    // column s0 of rows kr of the patches, `rows` weights per step from w's rows j0..
                    // (kc values from column kr.start of each, inside w), and writes m
                    // positions of `rows` output rows from (j0, p0 + s0): the caller's.
                    // kernel(v, r) exists for 1 <= v <= mr_vectors, 1 <= r <= nr, and
                    // `micro` was detected on this CPU.
                    unsafe {
                        let lhs = base.add(kr.start * lhs_cs + s0);
                        micro.tile(
                            m.div_ceil(micro.lanes),
                            (m, rows, kc),
                            (out.add(j0 * p + panel.p0 + s0), p as isize),
                            (lhs, lhs_cs as isize),
                            (rhs, 1, depth as isize),
                            d > 0,
                        );
                    }
                }
                if d == last {
                    for j in j0..j0 + rows {
                        // SAFETY: row j at positions p0 + c0..p0 + c1, the caller's; no
                        // other reference to it is alive.
                        let row = unsafe {
                            std::slice::from_raw_parts_mut(out.add(j * p + panel.p0 + c0), c1 - c0)
                        };
                        epi_row(j, panel.p0 + c0, row);
                    }
                }
            }
        }
    }
}

/// Strips per thread at least for [`dense_packed`] to split the positions; with fewer (late
/// layers: 7x7 and 14x14 planes) the output channels are split instead, every position packed
/// first (a thread with a strip more than another would take up to twice as long).
const MIN_STRIPS_PER_THREAD: usize = 4;

/// The dense and grouped convolution on lumen's own loops around the `gemm-f32`
/// micro-kernels (see the module docs): per image and group, the patches of a block of
/// positions packed into a [`Panel`] of the workspace, multiplied by the weights read in place
/// ([`multiply_panel`]). Threads split the positions (each packs and multiplies its own, a
/// block that stays in L2 at a time) or, with few positions, the output channels. Every output
/// element is the same kernel's fused multiply-adds over the same depth blocks whatever the
/// split, so the bits do not depend on the thread count.
#[allow(clippy::too_many_arguments)]
fn dense_packed(
    g: &ConvGeometry,
    epi: &Epilogue<'_>,
    x: &[f32],
    st: &Strides,
    w_rows: &[f32],
    out: &mut [f32],
    work: &mut [f32],
    threads: &Threads,
    micro: Micro,
) -> Result<(), RuntimeError> {
    let depth = g.depth();
    let p = g.output_positions();
    let groups = g.groups.max(1);
    let (cg, ocg) = (g.c_in / groups, g.c_out / groups);
    let (mr, lanes) = (micro.mr(), micro.lanes);
    let need = depth * p.next_multiple_of(lanes);
    let skip = work.as_ptr().align_offset(64).min(16);
    if work.len() < skip + need {
        return Err(RuntimeError::kernel(
            K,
            format!("workspace of {} elements, expected {}", work.len(), skip + need),
        ));
    }
    if p == 0 || ocg == 0 {
        return Ok(());
    }
    let ws = SharedMut(work[skip..].as_mut_ptr());
    // A pointwise convolution over a flat input whose channels start on 64-byte boundaries and
    // hold whole vectors is read in place: its channels are the patch rows.
    let in_place = g.is_pointwise()
        && st.spatial_is_flat(g.input)
        && p % lanes == 0
        && st.c % 16 == 0
        && (st.n % 16 == 0 || g.batch == 1)
        && x.as_ptr().wrapping_add(st.offset).align_offset(64) == 0;
    let nstrips = p.div_ceil(mr);
    let flops = 2usize.saturating_mul(ocg).saturating_mul(p).saturating_mul(depth);
    let parallel = flops >= PAR_MIN_FLOPS && threads.count() > 1;
    let per_block = strips_per_block(depth, mr);
    for n in 0..g.batch {
        for grp in 0..groups {
            let xbase0 = st.offset + n * st.n + grp * cg * st.c;
            let w = &w_rows[grp * ocg * depth..(grp + 1) * ocg * depth];
            let dst = SharedMut(out[(n * g.c_out + grp * ocg) * p..].as_mut_ptr());
            let epi_row = |j: usize, p0: usize, row: &mut [f32]| {
                epi.row(g, n, grp * ocg + j, p0, row);
            };
            let pack = |panel: Panel, rows: Range<usize>| {
                let ws = ws;
                // SAFETY: every caller below owns those rows of that panel.
                unsafe { pack_panel(panel, depth, rows, ws.0, x, xbase0, st, g) };
            };
            let multiply = |panel: Panel, ocs: Range<usize>, packing: bool| {
                let (ws, dst) = (ws, dst);
                let pack_rows = |rows: Range<usize>| pack(panel, rows);
                let (pack_rows, lhs): (Option<&dyn Fn(Range<usize>)>, _) = match in_place {
                    // SAFETY: position p0 of input channel 0, inside x (checked above).
                    true => (None, (unsafe { x.as_ptr().add(xbase0 + panel.p0) }, st.c)),
                    false => (
                        packing.then_some(&pack_rows as &dyn Fn(Range<usize>)),
                        // SAFETY: the panel's first element, inside the workspace.
                        (unsafe { ws.0.add(panel.p0 * depth) } as *const f32, panel.width),
                    ),
                };
                // SAFETY: the panel is packed before (or, with `packing`, each depth block
                // just before it is read); every caller below owns those output rows at the
                // panel's positions (and, with `packing`, the panel).
                unsafe {
                    multiply_panel(
                        &micro,
                        (p, depth),
                        panel,
                        ocs,
                        lhs,
                        w,
                        dst.0,
                        &epi_row,
                        pack_rows,
                    )
                };
            };
            if !parallel || nstrips >= MIN_STRIPS_PER_THREAD * threads.count() {
                // Each thread its strips (or all of them on the calling thread), a block at a
                // time, each depth block of it packed just before it is multiplied, so its
                // patches are still in L2 when the kernels read them.
                let parts = if parallel { threads.parts(nstrips, 1) } else { vec![0..nstrips] };
                let _ = threads.run_parts::<()>(parts.len(), |i| {
                    for s0 in parts[i].clone().step_by(per_block) {
                        let s1 = (s0 + per_block).min(parts[i].end);
                        let panel = Panel::new(s0 * mr..(s1 * mr).min(p), lanes);
                        multiply(panel, 0..ocg, true);
                    }
                    Ok(())
                });
            } else {
                // Few strips: one panel of every position (rows packed by all the threads),
                // then the output channels split in whole groups of NR.
                let panel = Panel::new(0..p, lanes);
                if !in_place {
                    let rows = threads.parts(depth, 1);
                    let _ = threads.run_parts::<()>(rows.len(), |i| {
                        pack(panel, rows[i].clone());
                        Ok(())
                    });
                }
                let ocs = threads.parts(ocg, micro.nr);
                let _ = threads.run_parts::<()>(ocs.len(), |i| {
                    multiply(panel, ocs[i].clone(), false);
                    Ok(())
                });
            }
        }
    }
    Ok(())
}

/// Depth (input channels per group x taps) at most for [`direct`]: the stems (27 to 147) and
/// 3x3 convolutions of up to 32 input channels per group (288). 320 against 160 measured 0.79
/// of the time on 3x3 32->32 at 80 and 0.62 on 3x3/2 32->64 at 160 (1 thread, 5 rounds).
const DIRECT_MAX_DEPTH: usize = 320;

/// Output positions per vector of [`direct`] (one AVX-512 register of f32).
const DIRECT_LANES: usize = 16;

/// Output channels per tile of [`direct`] at most: 16 accumulators of [`DIRECT_LANES`].
const DIRECT_OCS: usize = 16;

/// Whether [`direct`] runs `g`: AVX-512F, 1 or 2 spatial axes, a depth of at most
/// [`DIRECT_MAX_DEPTH`], output rows of at least one vector, not pointwise (which reads its
/// input in place).
fn direct_fits(g: &ConvGeometry) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        g.rank <= 2
            && g.input[0] == 1
            && g.kernel[0] == 1
            && g.output[0] == 1
            && g.output[2] >= DIRECT_LANES
            && (1..=DIRECT_MAX_DEPTH).contains(&g.depth())
            && g.c_out > 0
            && !g.is_pointwise()
            && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        false
    }
}

/// The layout of [`direct`]'s row cache: input row `ih` (in padded coordinates, `0..` from
/// the first padding row) of channel `ci` lives in slot `ci * slots + ih % slots`, `stride`
/// phases of `len` f32 each (phase `f` element `i` = padded column `i * stride + f`, zero
/// where that is padding).
#[derive(Debug, Clone, Copy)]
struct RowCache {
    /// Slots per input channel: the input rows one output row spans.
    slots: usize,
    /// f32 per phase: the output row plus the kernel's span past it, in phase steps.
    len: usize,
    /// Phases (the stride along the innermost axis).
    stride: usize,
}

impl RowCache {
    fn new(g: &ConvGeometry) -> Self {
        let span = |a: usize| (g.kernel[a] - 1) * g.dilation[a];
        let stride = g.stride[2];
        Self { slots: span(1) + 1, len: g.output[2] + span(2) / stride, stride }
    }

    fn slot_len(&self) -> usize {
        self.stride * self.len
    }
}

/// Direct convolution for small depths (the stems' 3 input channels, 3x3 over 16), on
/// AVX-512F, no im2col: each output row is computed from its input rows, each copied once
/// into a zero-padded row split into `stride` phases (a thread's scratch, [`RowCache`]), so
/// every tap of 16 consecutive outputs is one unaligned vector load from it. A tile is 16
/// output positions (one vector) by up to 16 output channels (16 accumulators): per depth
/// step (input channel, tap) one load and 16 fused multiply-adds by weights broadcast from
/// their rows in place, the sum over the depth in order. Stored straight into the NCHW
/// output; a row's last vector overlaps the one before (the same bits for the same element);
/// the epilogue runs on each output row while it is in L1. Output rows split over the
/// threads; every element is the same fused multiply-adds in the same order whichever thread
/// or tile computes it, so the bits do not depend on the thread count.
#[allow(clippy::too_many_arguments)]
fn direct(
    g: &ConvGeometry,
    epi: &Epilogue<'_>,
    x: &[f32],
    st: &Strides,
    w_rows: &[f32],
    out: &mut [f32],
    threads: &Threads,
) {
    let depth = g.depth();
    let p = g.output_positions();
    let groups = g.groups.max(1);
    let (cg, ocg) = (g.c_in / groups, g.c_out / groups);
    let oh = g.output[1];
    let flops = 2usize.saturating_mul(ocg).saturating_mul(p).saturating_mul(depth);
    let parallel = flops >= PAR_MIN_FLOPS && threads.count() > 1;
    let cache = RowCache::new(g);
    // Each group's weights in tiles of 16 channels, each transposed to [depth, 16] (zeros
    // past the group's channels): a depth step's 16 weights are one 64-byte line.
    let tiles = ocg.div_ceil(DIRECT_OCS);
    let mut wt = vec![0.0f32; groups * tiles * DIRECT_OCS * depth];
    for grp in 0..groups {
        for j in 0..ocg {
            let (tile, lane) = (j / DIRECT_OCS, j % DIRECT_OCS);
            let at = (grp * tiles + tile) * DIRECT_OCS * depth + lane;
            for (r, &v) in w_rows[(grp * ocg + j) * depth..][..depth].iter().enumerate() {
                wt[at + r * DIRECT_OCS] = v;
            }
        }
    }
    for n in 0..g.batch {
        for grp in 0..groups {
            let xbase0 = st.offset + n * st.n + grp * cg * st.c;
            let wt = &wt[grp * tiles * DIRECT_OCS * depth..][..tiles * DIRECT_OCS * depth];
            let dst = SharedMut(out[(n * g.c_out + grp * ocg) * p..].as_mut_ptr());
            let parts = if parallel { threads.parts(oh, 1) } else { vec![0..oh] };
            let _ = threads.run_parts::<()>(parts.len(), |i| {
                let dst = dst;
                let mut rows = vec![0.0f32; cg * cache.slots * cache.slot_len()];
                let epi_row = |j: usize, p0: usize, row: &mut [f32]| {
                    epi.row(g, n, grp * ocg + j, p0, row);
                };
                // SAFETY: AVX-512F was checked by `direct_fits`; the part's output rows
                // parts[i] of channels 0..ocg of this image and group are its own.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    direct_rows_avx512(
                        g,
                        cache,
                        parts[i].clone(),
                        (x, xbase0, st),
                        wt,
                        &mut rows,
                        dst.0,
                        &epi_row,
                    )
                };
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("direct_fits is false off x86-64 {rows:?} {epi_row:p}");
                Ok(())
            });
        }
    }
}

/// Output rows `ohs` of one image and group for [`direct`], compiled for AVX-512F.
///
/// # Safety
/// The CPU has AVX-512F; `out` points at the group's `[OC/g, P]` output, rows `ohs` of every
/// channel the caller's alone; `rows` holds `C/g` channels of the cache's slots.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn direct_rows_avx512(
    g: &ConvGeometry,
    cache: RowCache,
    ohs: Range<usize>,
    (x, xbase0, st): (&[f32], usize, &Strides),
    wt: &[f32],
    rows: &mut [f32],
    out: *mut f32,
    epi_row: &dyn Fn(usize, usize, &mut [f32]),
) {
    let depth = g.depth();
    let taps = g.taps();
    let p = g.output_positions();
    let (ow, kh, kw) = (g.output[2], g.kernel[1], g.kernel[2]);
    let ocg = g.c_out / g.groups.max(1);
    let cg = depth / taps;
    let slot = cache.slot_len();
    let mut held = vec![usize::MAX; cg * cache.slots];
    let mut offs = vec![0usize; depth];
    let mut padded = vec![0.0f32; slot];
    let end = ohs.end;
    let mut lines: Vec<usize> = Vec::new();
    for o1 in ohs {
        // The input rows this output row reads, each copied once into its slot.
        for ci in 0..cg {
            for t1 in 0..kh {
                let ihp = o1 * g.stride[1] + t1 * g.dilation[1];
                let s = ci * cache.slots + ihp % cache.slots;
                if held[s] != ihp {
                    held[s] = ihp;
                    let dst = &mut rows[s * slot..(s + 1) * slot];
                    fill_slot(g, cache, ihp, (x, xbase0 + ci * st.c, st), &mut padded, dst);
                }
                for t2 in 0..kw {
                    let e = t2 * g.dilation[2];
                    let r = ci * taps + t1 * kw + t2;
                    offs[r] = s * slot + (e % cache.stride) * cache.len + e / cache.stride;
                }
            }
        }
        // The input rows the next output row reads first (not cached yet) fetched while this
        // one is computed, a few lines before each tile (a burst of them stalls): they come
        // from memory, and a row is too short for the hardware prefetcher to run ahead.
        lines.clear();
        if o1 + 1 < end {
            for ci in 0..cg {
                for t1 in 0..kh {
                    let ihp = (o1 + 1) * g.stride[1] + t1 * g.dilation[1];
                    let held_now = held[ci * cache.slots + ihp % cache.slots] == ihp;
                    if let Some(ih) = ihp.checked_sub(g.pad[1]).filter(|&i| i < g.input[1])
                        && !held_now
                    {
                        let base = xbase0 + ci * st.c + ih * st.sp[1];
                        let last = base + (g.input[2] - 1) * st.sp[2];
                        lines.extend((base..=last).step_by(16));
                        lines.push(last);
                    }
                }
            }
        }
        let per_tile = lines.len().div_ceil(ocg.div_ceil(DIRECT_OCS) * ow.div_ceil(DIRECT_LANES));
        let mut next_line = lines.iter();
        let row0 = o1 * ow;
        for oc0 in (0..ocg).step_by(DIRECT_OCS) {
            let nb = DIRECT_OCS.min(ocg - oc0);
            let wb = &wt[oc0 * depth..(oc0 + DIRECT_OCS) * depth];
            let mut c = 0;
            loop {
                for &at in next_line.by_ref().take(per_tile) {
                    prefetch(x, at);
                }
                let c0 = c.min(ow - DIRECT_LANES);
                // SAFETY: every offset plus c0 + 16 lies in its slot (len >= ow + the
                // kernel's span); rows oc0..oc0 + nb at positions row0 + c0.. are ours.
                unsafe { direct_tile(rows, &offs, c0, wb, (out.add(oc0 * p + row0 + c0), p, nb)) };
                c += DIRECT_LANES;
                if c >= ow {
                    break;
                }
            }
        }
        for j in 0..ocg {
            // SAFETY: channel j's output row o1, ours; no other reference to it is alive.
            let row = unsafe { std::slice::from_raw_parts_mut(out.add(j * p + row0), ow) };
            epi_row(j, row0, row);
        }
    }
}

/// Fills one slot of the [`RowCache`]: padded input row `ihp` of the channel at `xbase`
/// (zeros for a padding row), split into its phases. `padded` is scratch of a slot's length.
#[inline(always)]
fn fill_slot(
    g: &ConvGeometry,
    cache: RowCache,
    ihp: usize,
    (x, xbase, st): (&[f32], usize, &Strides),
    padded: &mut [f32],
    dst: &mut [f32],
) {
    let s = cache.stride;
    let Some(ih) = ihp.checked_sub(g.pad[1]).filter(|&i| i < g.input[1]) else {
        dst.fill(0.0);
        return;
    };
    // The padded row: columns 0..slot, input column q - pad where that is inside.
    let buf = if s == 1 { &mut *dst } else { &mut *padded };
    let (lo, hi) = (g.pad[2].min(buf.len()), (g.pad[2] + g.input[2]).min(buf.len()));
    buf[..lo].fill(0.0);
    buf[hi..].fill(0.0);
    let base = xbase + ih * st.sp[1];
    let seg = &mut buf[lo..hi];
    if st.sp[2] == 1 {
        copy_run(seg, &x[base..base + seg.len()]);
    } else {
        for (j, d) in seg.iter_mut().enumerate() {
            *d = x[base + j * st.sp[2]];
        }
    }
    if s == 1 {
        return;
    }
    // Phase f, element i = padded column i * s + f.
    let len = cache.len;
    if s == 2 {
        // Each pair (even, odd) read as one u64 (x86-64 is little-endian: the even one in
        // the low half), split by a shift and two truncations: vector moves, not 32 scalar
        // copies per 16 pairs.
        let (even, odd) = dst.split_at_mut(len);
        let mut i = 0;
        while i + 16 <= len {
            let src = &padded[2 * i..2 * i + 32];
            // SAFETY: 32 f32 of `padded` are 16 u64 (read unaligned).
            let pairs: [u64; 16] = unsafe { std::ptr::read_unaligned(src.as_ptr().cast()) };
            let e: &mut [f32; 16] = (&mut even[i..i + 16]).try_into().expect("16 values");
            let o: &mut [f32; 16] = (&mut odd[i..i + 16]).try_into().expect("16 values");
            for k in 0..16 {
                e[k] = f32::from_bits(pairs[k] as u32);
                o[k] = f32::from_bits((pairs[k] >> 32) as u32);
            }
            i += 16;
        }
        for i in i..len {
            even[i] = padded[2 * i];
            odd[i] = padded[2 * i + 1];
        }
        return;
    }
    for f in 0..s {
        for (i, d) in dst[f * len..(f + 1) * len].iter_mut().enumerate() {
            *d = padded[i * s + f];
        }
    }
}

/// Hints the CPU to fetch the cache line holding `x[at]` (nothing if `at` is out of `x`).
#[inline(always)]
fn prefetch(x: &[f32], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = x.get(at) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch has no effect on memory; the address is a valid element.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(v).cast::<i8>()) };
    }
}

/// One tile of [`direct`]: 16 output positions of the first `nb` of 16 output channels,
/// `out[j * p + l] = sum over r of rows[offs[r] + c0 + l] * wt[r * 16 + j]`, the fused
/// multiply-adds in order of `r` (`wt`: the tile's weights transposed, `[depth, 16]`, zero
/// for channels past the group's). Sixteen named accumulators, so they stay in registers.
///
/// # Safety
/// `offs[r] + c0 + 16 <= rows.len()` for every `r`; `out` addresses 16 writable values at
/// each of `nb` (at most 16) rows `p` apart.
#[inline(always)]
unsafe fn direct_tile(
    rows: &[f32],
    offs: &[usize],
    c0: usize,
    wt: &[f32],
    (out, p, nb): (*mut f32, usize, usize),
) {
    macro_rules! tile {
        ($($a:ident $j:literal)*) => {{
            $(let mut $a = [0.0f32; DIRECT_LANES];)*
            let base = rows.as_ptr();
            for (&o, wr) in offs.iter().zip(wt.chunks_exact(DIRECT_OCS)) {
                debug_assert!(o + c0 + DIRECT_LANES <= rows.len());
                // SAFETY: inside rows (the caller's contract).
                let v: [f32; DIRECT_LANES] = unsafe {
                    std::ptr::read_unaligned(base.add(o + c0).cast::<[f32; DIRECT_LANES]>())
                };
                let wr: &[f32; DIRECT_OCS] = wr.try_into().expect("16 weights");
                $(
                    for l in 0..DIRECT_LANES {
                        $a[l] = v[l].mul_add(wr[$j], $a[l]);
                    }
                )*
            }
            $(
                if $j < nb {
                    // SAFETY: the caller's contract.
                    unsafe {
                        std::ptr::write_unaligned(out.add($j * p).cast::<[f32; DIRECT_LANES]>(), $a)
                    };
                }
            )*
        }};
    }
    tile!(a0 0 a1 1 a2 2 a3 3 a4 4 a5 5 a6 6 a7 7 a8 8 a9 9 a10 10 a11 11 a12 12 a13 13 a14 14
        a15 15);
}

/// Strips (of `mr` positions) per block of [`dense_packed`] and [`multiply_panel`]: as many as
/// keep one depth block of the block's patches within [`B_BLOCK_BYTES`] (L2).
fn strips_per_block(depth: usize, mr: usize) -> usize {
    let kc_max = depth_blocks(depth).iter().map(|b| b.len()).max().unwrap_or(0);
    (B_BLOCK_BYTES / (4 * mr * kc_max).max(1)).max(1)
}

/// Output positions per column block of the dense path: enough that a GEMM call amortizes
/// packing the weights (at least 64), few enough that the block's patches (`depth` rows) stay
/// in the L2 cache (about 256 KiB) beside the output they produce; a multiple of 16 (the
/// micro-kernels' width).
fn column_block(depth: usize, p: usize) -> usize {
    let fit = (1usize << 16) / depth.max(1);
    (fit / 16 * 16).clamp(64, 1024).min(p.max(1))
}

/// `out_g [ocg, P] = lhs [ocg, depth] x rhs [depth, P]`, then the epilogue, split over the
/// threads by rows (output channels) when there are enough of them, else by columns.
#[allow(clippy::too_many_arguments)]
fn gemm_epilogue(
    g: &ConvGeometry,
    epi: &Epilogue<'_>,
    n: usize,
    oc0: usize,
    (lhs, depth): (&[f32], usize),
    (rhs, rhs_rs): (&[f32], usize),
    out_g: &mut [f32],
    threads: &Threads,
) {
    let p = g.output_positions();
    let ocg = out_g.len() / p.max(1);
    let flops = 2usize.saturating_mul(ocg).saturating_mul(p).saturating_mul(depth);
    let parallel = flops >= PAR_MIN_FLOPS && threads.count() > 1;
    // Enough channels for every thread: rows, each part a contiguous block of out_g.
    if !parallel || threads.parts(ocg, 4).len() >= threads.count() {
        let _ = threads.for_parts::<()>(out_g, (ocg, p), 4, parallel, |rows, part| {
            let lhs = &lhs[rows.start * depth..rows.end * depth];
            // SAFETY: the part's rows of lhs, all of rhs ([depth, P] at row stride rhs_rs,
            // inside rhs by construction), and this part's own output rows.
            unsafe {
                gemm_block(
                    (rows.len(), p, depth),
                    part.as_mut_ptr(),
                    p,
                    lhs.as_ptr(),
                    depth,
                    rhs.as_ptr(),
                    rhs_rs,
                );
            }
            for (i, row) in rows.zip(part.chunks_exact_mut(p.max(1))) {
                epi.row(g, n, oc0 + i, 0, row);
            }
            Ok(())
        });
        return;
    }
    // Few channels, many positions: columns, each part a block of every row.
    let cols = threads.parts(p, 16);
    let dst = SharedMut(out_g.as_mut_ptr());
    let _ = threads.run_parts::<()>(cols.len(), |i| {
        let c = &cols[i];
        let dst = dst;
        // SAFETY: columns c of every row of out_g are this part's alone; lhs and rhs are
        // only read, and every element addressed lies inside them.
        unsafe {
            gemm_block(
                (ocg, c.len(), depth),
                dst.0.add(c.start),
                p,
                lhs.as_ptr(),
                depth,
                rhs.as_ptr().add(c.start),
                rhs_rs,
            );
            for oc in 0..ocg {
                let row = std::slice::from_raw_parts_mut(dst.0.add(oc * p + c.start), c.len());
                epi.row(g, n, oc0 + oc, c.start, row);
            }
        }
        Ok(())
    });
}

/// Depthwise convolution: each output plane (image, channel) from its one input channel.
/// The part of the channel the windows read is first copied into a zero-padded plane (a
/// thread's scratch, a few KiB: in L1), so every tap then runs over a whole output row with
/// no bounds to work out: each output row is the sum, tap by tap in order, of a row of the
/// padded plane scaled by the tap (vectorized along the innermost axis; a 3- or 5-wide kernel
/// row in one pass). With a stride `s` along the innermost axis, each padded row is stored as
/// `s` phases (the elements at `q ≡ r mod s` together), so every tap still reads a contiguous
/// run. A 2-D plane with output rows of at least 4 (MobileNet's 3x3s, any stride) goes instead
/// in blocks of up to 64 outputs held in registers across all its taps ([`flat_taps`]: one
/// pass per row, no per-row tail; the same bits); a 1-D or 3-D one row by row. The plane's loops are compiled for the widest vector unit
/// ([`depthwise_plane_widest`]).
fn depthwise(
    g: &ConvGeometry,
    epi: &Epilogue<'_>,
    x: &[f32],
    st: &Strides,
    w: &[f32],
    out: &mut [f32],
    threads: &Threads,
) {
    let p = g.output_positions();
    let taps = g.taps();
    let mult = g.c_out / g.c_in.max(1);
    let e = padded_extent(g);
    let planes = g.batch * g.c_out;
    let parallel = planes * p * taps >= PAR_MIN_ELEMS;
    // The bias is added by the plane's kernel (the same rounding as the epilogue's); the rest
    // of the epilogue, if any, runs after it.
    let rest = Epilogue { bias: None, ..*epi };
    let more = epi.residual.is_some() || epi.epilogue.activation.is_some();
    let _ = threads.for_parts::<()>(out, (planes, p), 1, parallel, |rows, part| {
        // Each phase row rounded up, so the phases of one row are equally long. Zeros: the
        // planes write only where the input goes, the same places in every plane.
        let mut padded = vec![0.0f32; e[0] * e[1] * phase_row(g, e[2])];
        for (plane, dst) in rows.zip(part.chunks_exact_mut(p.max(1))) {
            let (n, oc) = (plane / g.c_out, plane % g.c_out);
            let c = oc / mult.max(1);
            let xbase = st.offset + n * st.n + c * st.c;
            let wk = &w[oc * taps..(oc + 1) * taps];
            let bias = epi.bias.map(|(b, v)| b[v.offset + oc * v.strides[0]]);
            depthwise_plane_widest(g, x, xbase, st, wk, bias, &mut padded, dst);
            if more {
                rest.row(g, n, oc, 0, dst);
            }
        }
        Ok(())
    });
}

/// Along each axis, the elements the windows span (the padded plane's extent).
fn padded_extent(g: &ConvGeometry) -> [usize; MAX_SPATIAL] {
    std::array::from_fn(|a| {
        if g.output[a] == 0 {
            0
        } else {
            (g.output[a] - 1) * g.stride[a] + (g.kernel[a] - 1) * g.dilation[a] + 1
        }
    })
}

/// The stored length of a padded innermost row of `e2` elements: `stride` phases of
/// `ceil(e2 / stride)` each.
fn phase_row(g: &ConvGeometry, e2: usize) -> usize {
    let s = g.stride[2].max(1);
    e2.div_ceil(s) * s
}

widest_isa! {
    /// [`depthwise_plane`] compiled for AVX-512F, else AVX2 + FMA, else the baseline (as
    /// [`max_pool_plane_widest`]; the products and sums stay separate roundings, never fused,
    /// so the bits are the same on every instruction set).
    fn depthwise_plane_widest(
        g: &ConvGeometry,
        x: &[f32],
        xbase: usize,
        st: &Strides,
        wk: &[f32],
        bias: Option<f32>,
        padded: &mut [f32],
        dst: &mut [f32]
    ) => depthwise_plane
}

/// One plane of [`depthwise`]: the padded (and phase-split) copy of its input channel, then
/// every output row, into `dst` (`P` elements), plus `bias` if any (the epilogue's rounding).
/// `wk` holds the plane's taps; `padded` the padded plane, zero where the padding goes (as
/// [`depthwise`] allocates it: a contiguous input row is written only where it goes, so the
/// padding stays zero from plane to plane).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn depthwise_plane(
    g: &ConvGeometry,
    x: &[f32],
    xbase: usize,
    st: &Strides,
    wk: &[f32],
    bias: Option<f32>,
    padded: &mut [f32],
    dst: &mut [f32],
) {
    let [e0, e1, e2] = padded_extent(g);
    let s2 = g.stride[2].max(1);
    let stored = phase_row(g, e2);
    let phase_len = stored / s2;
    // Input index along axis `a` of padded position `q`, if inside the input.
    let src = |a: usize, q: usize| q.checked_sub(g.pad[a]).filter(|&i| i < g.input[a]);
    for q0 in 0..e0 {
        for q1 in 0..e1 {
            let row = &mut padded[(q0 * e1 + q1) * stored..(q0 * e1 + q1 + 1) * stored];
            let (Some(i0), Some(i1)) = (src(0, q0), src(1, q1)) else {
                // A row of padding: zero from the allocation on, never written.
                continue;
            };
            let base = xbase + i0 * st.sp[0] + i1 * st.sp[1];
            // The input's run along the innermost axis, between the zeros of the padding.
            let lo = g.pad[2].min(e2);
            let hi = (g.pad[2] + g.input[2]).min(e2).max(lo);
            if s2 == 1 && st.sp[2] == 1 {
                // The padding around the run stays zero (see above).
                copy_row(&mut row[lo..hi], &x[base..base + (hi - lo)]);
            } else if s2 == 2 && st.sp[2] == 1 {
                // Split into its even and odd positions straight from the input (vector
                // shuffles), the padding left as it is (zero).
                split_row(row, phase_len, lo, &x[base..base + (hi - lo)]);
            } else {
                row.fill(0.0);
                // Phase r holds q = r, r + s2, ...: its first q at or past lo, then steps of s2
                // (no division per element).
                for r in 0..s2 {
                    let first = lo + (r + s2 - lo % s2) % s2;
                    let (mut q, mut k) = (first, r * phase_len + first / s2);
                    while q < hi {
                        row[k] = x[base + (q - lo) * st.sp[2]];
                        q += s2;
                        k += 1;
                    }
                }
            }
        }
    }
    if let Some(b) = bias {
        // The rows' kernels add the bias last, as the epilogue would (the same bits).
        if !blocked_taps(g, wk, Some(b), padded, dst) {
            if flat_plane(g) {
                flat_taps(g, wk, padded, dst);
            } else {
                row_taps(g, wk, padded, dst);
            }
            for v in dst.iter_mut() {
                *v += b;
            }
        }
    } else if !blocked_taps(g, wk, None, padded, dst) {
        if flat_plane(g) {
            flat_taps(g, wk, padded, dst);
        } else {
            row_taps(g, wk, padded, dst);
        }
    }
}

/// `dst = src` (equal lengths) in inlined vector moves, 16 values at a time with the last 16
/// overlapping (not a `memcpy` call per row: most rows are under 1 KiB).
#[inline(always)]
fn copy_row(dst: &mut [f32], src: &[f32]) {
    let n = dst.len();
    let src = &src[..n];
    match n {
        16.. => {
            for i in (0..n - 16).step_by(16).chain([n - 16]) {
                let s: &[f32; 16] = src[i..i + 16].try_into().expect("16 values");
                dst[i..i + 16].copy_from_slice(s);
            }
        }
        8.. => {
            for i in [0, n - 8] {
                let s: &[f32; 8] = src[i..i + 8].try_into().expect("8 values");
                dst[i..i + 8].copy_from_slice(s);
            }
        }
        _ => {
            for (d, &v) in dst.iter_mut().zip(src) {
                *d = v;
            }
        }
    }
}

/// Writes the run `src` at positions `lo..lo + src.len()` of a padded row stored as its even
/// positions (`row[..phase_len]`) then its odd ones (`row[phase_len..]`): a pair `src[2m],
/// src[2m + 1]` goes to positions `lo + 2m` and `lo + 2m + 1`, one in each phase, 16 pairs at
/// a time (two loads, two shuffles, two stores). Nothing else in `row` is written.
#[inline(always)]
fn split_row(row: &mut [f32], phase_len: usize, lo: usize, src: &[f32]) {
    let (even, odd) = row.split_at_mut(phase_len);
    // Position q is phase q % 2, index q / 2: the first of a pair goes to `a` from `a0` on,
    // the second to `b` from `b0`.
    let (a, a0, b, b0) =
        if lo % 2 == 0 { (even, lo / 2, odd, lo / 2) } else { (odd, lo / 2, even, lo / 2 + 1) };
    let pairs = src.len() / 2;
    let a = &mut a[a0..a0 + pairs + src.len() % 2];
    let b = &mut b[b0..b0 + pairs];
    #[inline(always)]
    fn block<const V: usize>(a: &mut [f32], b: &mut [f32], src: &[f32], m: usize) {
        let (mut fa, mut fb) = ([0.0f32; V], [0.0f32; V]);
        let s = &src[2 * m..2 * m + 2 * V];
        for i in 0..V {
            fa[i] = s[2 * i];
            fb[i] = s[2 * i + 1];
        }
        a[m..m + V].copy_from_slice(&fa);
        b[m..m + V].copy_from_slice(&fb);
    }
    let src = &src[..2 * pairs + src.len() % 2];
    match pairs {
        // Blocks of 16 pairs, the last one overlapping the one before (the same values).
        16.. => {
            for m in (0..pairs - 16).step_by(16).chain([pairs - 16]) {
                block::<16>(a, b, src, m);
            }
        }
        8.. => {
            block::<8>(a, b, src, 0);
            block::<8>(a, b, src, pairs - 8);
        }
        _ => {
            for m in 0..pairs {
                a[m] = src[2 * m];
                b[m] = src[2 * m + 1];
            }
        }
    }
    if src.len() % 2 == 1 {
        a[pairs] = src[2 * pairs];
    }
}

/// Output rows [`blocked_taps`] computes in one pass (each loaded input row feeds all of the
/// group's rows it falls in).
const BLOCK_ROWS: usize = 4;

/// The common depthwise planes (2-D, a square 3x3 or 5x5 kernel, dilation 1, stride 1 or 2
/// along each axis; any padding) from the padded plane of [`depthwise_plane`], if `g` is one:
/// groups of [`BLOCK_ROWS`] output rows by blocks of 16 (8, 4) columns, held in registers
/// across all the taps, each input row's `K` runs loaded once per group and multiplied by
/// every tap of the group's rows that reads them; the row's last block overlaps the one
/// before, as in [`row_blocks`]. Each output is the same sum in the same order as
/// [`flat_taps`]'s (from zero, the taps row-major, a product then a sum each), then `+ bias`:
/// the same bits. Returns false (nothing written) for any other geometry.
#[inline(always)]
fn blocked_taps(
    g: &ConvGeometry,
    wk: &[f32],
    bias: Option<f32>,
    padded: &[f32],
    dst: &mut [f32],
) -> bool {
    let k = g.kernel[2];
    if !flat_plane(g)
        || g.kernel[1] != k
        || !(k == 3 || k == 5)
        || g.dilation[1] != 1
        || g.dilation[2] != 1
        || !(1..=2).contains(&g.stride[1])
        || !(1..=2).contains(&g.stride[2])
    {
        return false;
    }
    match (k, g.stride[1]) {
        (3, 1) => blocked_plane::<3, 1>(g, wk, bias, padded, dst),
        (3, _) => blocked_plane::<3, 2>(g, wk, bias, padded, dst),
        (5, 1) => blocked_plane::<5, 1>(g, wk, bias, padded, dst),
        _ => blocked_plane::<5, 2>(g, wk, bias, padded, dst),
    }
    true
}

/// [`blocked_taps`] for a `K` x `K` kernel at row stride `S1`.
#[inline(always)]
fn blocked_plane<const K: usize, const S1: usize>(
    g: &ConvGeometry,
    wk: &[f32],
    bias: Option<f32>,
    padded: &[f32],
    dst: &mut [f32],
) {
    let [_, _, e2] = padded_extent(g);
    let [_, o1, o2] = g.output;
    let s2 = g.stride[2].max(1);
    let stored = phase_row(g, e2);
    let phase_len = stored / s2;
    // Tap t2 of output column j reads padded position j * s2 + t2: phase t2 % s2, index
    // j + t2 / s2.
    let off: [usize; K] = std::array::from_fn(|t| (t % s2) * phase_len + t / s2);
    let w: [[f32; K]; K] = std::array::from_fn(|a| std::array::from_fn(|b| wk[a * K + b]));
    let rows = &mut dst[..o1 * o2];
    let mut b0 = 0;
    while b0 + BLOCK_ROWS <= o1 {
        blocked_rows::<K, S1, BLOCK_ROWS>(&w, &off, bias, padded, stored, rows, o2, b0);
        b0 += BLOCK_ROWS;
    }
    while b0 + 2 <= o1 {
        blocked_rows::<K, S1, 2>(&w, &off, bias, padded, stored, rows, o2, b0);
        b0 += 2;
    }
    if b0 < o1 {
        blocked_rows::<K, S1, 1>(&w, &off, bias, padded, stored, rows, o2, b0);
    }
}

/// Output rows `b0..b0 + R` of [`blocked_plane`], in column blocks of the widest of 16, 8 and
/// 4 the row holds (at least [`FLAT_MIN_ROW`]), the last block ending at the row's end.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn blocked_rows<const K: usize, const S1: usize, const R: usize>(
    w: &[[f32; K]; K],
    off: &[usize; K],
    bias: Option<f32>,
    padded: &[f32],
    stored: usize,
    dst: &mut [f32],
    o2: usize,
    b0: usize,
) {
    match o2 {
        16.. => blocked_cols::<K, S1, R, 16>(w, off, bias, padded, stored, dst, o2, b0),
        8.. => blocked_cols::<K, S1, R, 8>(w, off, bias, padded, stored, dst, o2, b0),
        _ => blocked_cols::<K, S1, R, FLAT_MIN_ROW>(w, off, bias, padded, stored, dst, o2, b0),
    }
}

/// [`blocked_rows`] in blocks of `L` columns. The bounds are checked once, up front; the
/// loads and stores of the blocks go unchecked.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn blocked_cols<const K: usize, const S1: usize, const R: usize, const L: usize>(
    w: &[[f32; K]; K],
    off: &[usize; K],
    bias: Option<f32>,
    padded: &[f32],
    stored: usize,
    dst: &mut [f32],
    o2: usize,
    b0: usize,
) {
    // The input rows the group reads: output row b0 + r reads rows (b0 + r) * S1 + t1.
    let span = (R - 1) * S1 + K;
    let src = &padded[b0 * S1 * stored..(b0 * S1 + span) * stored];
    let out = &mut dst[b0 * o2..(b0 + R) * o2];
    let last = off.iter().max().copied().unwrap_or(0) + o2;
    assert!(o2 >= L && last <= stored, "blocked_cols: {o2} columns, {last} of {stored}");
    let (src, out) = (src.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    loop {
        let at = j.min(o2 - L);
        let mut acc = [[0.0f32; L]; R];
        for i in 0..span {
            for t2 in 0..K {
                // SAFETY: row i < span of `src`, elements at + off[t2] .. + L, at most
                // o2 + max(off) <= stored (asserted above).
                let v: [f32; L] = unsafe {
                    std::ptr::read_unaligned(src.add(i * stored + at + off[t2]).cast::<[f32; L]>())
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    // Row i is tap t1 = i - r * S1 of output row b0 + r, if in 0..K.
                    if i >= r * S1 && i - r * S1 < K {
                        let wv = w[i - r * S1][t2];
                        for (a, &x) in acc.iter_mut().zip(&v) {
                            *a = *a + wv * x;
                        }
                    }
                }
            }
        }
        for (r, mut acc) in acc.into_iter().enumerate() {
            if let Some(b) = bias {
                for a in &mut acc {
                    *a = *a + b;
                }
            }
            // SAFETY: row r < R of `out`, elements at..at + L <= o2.
            unsafe { std::ptr::write_unaligned(out.add(r * o2 + at).cast::<[f32; L]>(), acc) };
        }
        if at + L >= o2 {
            break;
        }
        j += L;
    }
}

/// The output rows of [`depthwise_plane`] from its padded plane, one kernel row at a time
/// ([`accumulate_row`]): any stride, dilation and rank.
#[inline(always)]
fn row_taps(g: &ConvGeometry, wk: &[f32], padded: &[f32], dst: &mut [f32]) {
    let [_, e1, e2] = padded_extent(g);
    let [o0, o1, o2] = g.output;
    let s2 = g.stride[2].max(1);
    let stored = phase_row(g, e2);
    let phase_len = stored / s2;
    let (k2, d2) = (g.kernel[2], g.dilation[2]);
    for a in 0..o0 {
        for b in 0..o1 {
            let row = &mut dst[(a * o1 + b) * o2..(a * o1 + b + 1) * o2];
            row.fill(0.0);
            for t0 in 0..g.kernel[0] {
                for t1 in 0..g.kernel[1] {
                    let q0 = a * g.stride[0] + t0 * g.dilation[0];
                    let q1 = b * g.stride[1] + t1 * g.dilation[1];
                    let plane_row = &padded[(q0 * e1 + q1) * stored..(q0 * e1 + q1 + 1) * stored];
                    let wt = &wk[(t0 * g.kernel[1] + t1) * k2..(t0 * g.kernel[1] + t1 + 1) * k2];
                    accumulate_row(row, plane_row, wt, d2, s2, phase_len);
                }
            }
        }
    }
}

/// The shortest output row [`flat_taps`] takes (its smallest block); shorter rows go row by
/// row.
const FLAT_MIN_ROW: usize = 4;

/// Whether [`flat_taps`] computes a plane: 2-D (one position along the first spatial axis)
/// with output rows of at least [`FLAT_MIN_ROW`] elements, any strides and dilations.
fn flat_plane(g: &ConvGeometry) -> bool {
    g.output[2] >= FLAT_MIN_ROW && g.output[0] == 1 && g.kernel[0] == 1 && g.output[1] > 0
}

/// The plane of [`depthwise_plane`] when [`flat_plane`] holds. Output `(b, j)` is the sum over
/// taps `(t1, t2)` of the padded element `(b * s1 + t1 * d1, j * s2 + t2 * d2)` scaled by the
/// tap; with the padded rows stored as `s2` phases ([`phase_row`]), tap `(t1, t2)` of output
/// row `b` reads a contiguous run at a fixed offset from the row's base `b * s1 * stored`. The
/// taps go in the row-by-row path's order (so the same bits); each output row goes in blocks
/// of `B` elements held in registers across all the taps (one pass, no read-modify-write of
/// the row per kernel row); the row's last block is aligned to its end and overlaps the one
/// before (the overlap is computed twice, with the same bits) instead of a scalar tail.
#[inline(always)]
fn flat_taps(g: &ConvGeometry, wk: &[f32], padded: &[f32], dst: &mut [f32]) {
    let [_, _, e2] = padded_extent(g);
    let [_, o1, o2] = g.output;
    let (k1, k2) = (g.kernel[1], g.kernel[2]);
    let (s1, s2) = (g.stride[1].max(1), g.stride[2].max(1));
    let (d1, d2) = (g.dilation[1], g.dilation[2]);
    let stored = phase_row(g, e2);
    let phase_len = stored / s2;
    let tap = |t1: usize, t2: usize| {
        let q = t2 * d2;
        (t1 * d1 * stored + (q % s2) * phase_len + q / s2, wk[t1 * k2 + t2])
    };
    let taps: Vec<(usize, f32)> =
        (0..k1).flat_map(|t1| (0..k2).map(move |t2| tap(t1, t2))).collect();
    for (b, row) in dst.chunks_exact_mut(o2).enumerate().take(o1) {
        let src = &padded[b * s1 * stored..];
        match o2 {
            64.. => row_blocks::<64>(row, src, &taps),
            32.. => row_blocks::<32>(row, src, &taps),
            16.. => row_blocks::<16>(row, src, &taps),
            8.. => row_blocks::<8>(row, src, &taps),
            _ => row_blocks::<FLAT_MIN_ROW>(row, src, &taps),
        }
    }
}

/// One output row of [`flat_taps`] (at least `B` long) in blocks of `B`, the last block ending
/// at the row's end.
#[inline(always)]
fn row_blocks<const B: usize>(row: &mut [f32], src: &[f32], taps: &[(usize, f32)]) {
    let n = row.len();
    let mut j = 0;
    loop {
        let at = j.min(n - B);
        let mut acc = [0.0f32; B];
        for &(off, wv) in taps {
            let s: &[f32; B] = src[at + off..at + off + B].try_into().expect("B elements");
            for (a, &v) in acc.iter_mut().zip(s) {
                *a = *a + wv * v;
            }
        }
        row[at..at + B].copy_from_slice(&acc);
        if at + B >= n {
            break;
        }
        j += B;
    }
}

/// `row[j] += Σ_t wt[t] · src[j · stride + t · dilation]`, the taps added in order (each a
/// product then a sum, as the per-tap loop would, so the bits do not depend on the path).
/// `src` is stored as `stride` phases of `phase_len` (element `q` at `(q % stride) *
/// phase_len + q / stride`), so each tap reads a contiguous run. 3 or 5 taps run in one pass;
/// anything else one pass per tap.
#[inline(always)]
fn accumulate_row(
    row: &mut [f32],
    src: &[f32],
    wt: &[f32],
    dilation: usize,
    stride: usize,
    phase_len: usize,
) {
    let n = row.len();
    if n == 0 {
        return;
    }
    // Tap t's run: element j is src[j * stride + t * dilation].
    let run = |t: usize| {
        let q = t * dilation;
        let at = (q % stride) * phase_len + q / stride;
        &src[at..at + n]
    };
    if wt.len() == 3 {
        let (a, b, c) = (run(0), run(1), run(2));
        for j in 0..n {
            row[j] = row[j] + wt[0] * a[j] + wt[1] * b[j] + wt[2] * c[j];
        }
        return;
    }
    if wt.len() == 5 {
        let (a, b, c, d, e) = (run(0), run(1), run(2), run(3), run(4));
        for j in 0..n {
            row[j] =
                row[j] + wt[0] * a[j] + wt[1] * b[j] + wt[2] * c[j] + wt[3] * d[j] + wt[4] * e[j];
        }
        return;
    }
    for (t, &wv) in wt.iter().enumerate() {
        for (r, &v) in row.iter_mut().zip(run(t)) {
            *r += wv * v;
        }
    }
}

/// `max(acc, v)` as [`ReduceOp::Max`] folds, NaN carried along: `v` when it is larger or NaN
/// (so the first of equal values stays, and a NaN, once in, stays); the NaN's payload is made
/// [`f32::NAN`] at the end ([`max_pool`]). A compare and a blend in vector registers.
///
/// [`ReduceOp::Max`]: lumen_compiler::ReduceOp::Max
#[inline(always)]
fn max_step(acc: f32, v: f32) -> f32 {
    if v > acc || v.is_nan() { v } else { acc }
}

/// [`max_step`] where no operand is NaN: `v` when it is larger, so the first of equal values
/// stays. One instruction (`maxps`'s own rule).
#[inline(always)]
fn max_step_no_nan(acc: f32, v: f32) -> f32 {
    if v > acc { v } else { acc }
}

/// Whether any of `vals` is NaN (a loop with no early exit, so it vectorizes).
#[inline(always)]
fn any_nan(vals: &[f32]) -> bool {
    let mut any = 0u32;
    for &v in vals {
        any |= u32::from(v.is_nan());
    }
    any != 0
}

/// Lanes [`fold_offsets`] keeps in registers (two AVX2 vectors, one AVX-512).
const POOL_LANES: usize = 16;

/// `dst[j] = fold of max_step over src[offsets[t] + j], t in order`, from `-inf`, and a NaN
/// result written as [`f32::NAN`]; without `NAN` the rows hold no NaN (the caller checked) and
/// the step is [`max_step_no_nan`]. Each block of [`POOL_LANES`] outputs is
/// folded in registers over every offset and stored once: a fold into memory
/// (`acc[j] = max_step(acc[j], v)`) became masked stores (`vmaskmovps`, microcoded on AMD),
/// most of the kernel's time.
#[inline(always)]
fn fold_offsets<const NAN: bool>(dst: &mut [f32], src: &[f32], offsets: &[usize]) {
    let n = dst.len();
    if n >= POOL_LANES {
        // 2 to 5 taps (3x3 and 5x5 windows, and their rows cut by padding): unrolled.
        macro_rules! unrolled {
            ($($t:literal)*) => {
                match offsets.len() {
                    $($t => {
                        let o: &[usize; $t] = offsets.try_into().expect("taps");
                        if n >= 2 * POOL_LANES {
                            fold_unrolled::<NAN, $t, { 2 * POOL_LANES }>(dst, src, o);
                        } else {
                            fold_unrolled::<NAN, $t, POOL_LANES>(dst, src, o);
                        }
                        return;
                    })*
                    _ => {}
                }
            };
        }
        unrolled!(2 3 4 5);
    }
    if n >= POOL_LANES {
        let mut j0 = 0;
        while j0 + POOL_LANES <= n {
            fold_block::<NAN, POOL_LANES>(dst, src, offsets, j0);
            j0 += POOL_LANES;
        }
        if j0 < n {
            // The last block once more, overlapping (the same values again where it does).
            fold_block::<NAN, POOL_LANES>(dst, src, offsets, n - POOL_LANES);
        }
    } else if n >= 8 {
        fold_block::<NAN, 8>(dst, src, offsets, 0);
        fold_block::<NAN, 8>(dst, src, offsets, n - 8);
    } else {
        for j in 0..n {
            let mut a = f32::NEG_INFINITY;
            for &o in offsets {
                a = fold_step::<NAN>(a, src[o + j]);
            }
            dst[j] = fold_finish::<NAN>(a);
        }
    }
}

/// [`fold_offsets`] over `N` taps (at least `W` outputs), in blocks of `W` lanes (two
/// vectors of maxima in flight at `W` = 32), the last block overlapping the one before (the
/// same values again); the taps unrolled, the loads unchecked after one bounds check. The same
/// steps in the same order: the same bits.
#[inline(always)]
fn fold_unrolled<const NAN: bool, const N: usize, const W: usize>(
    dst: &mut [f32],
    src: &[f32],
    offsets: &[usize; N],
) {
    let n = dst.len();
    let reach = offsets.iter().max().copied().unwrap_or(0) + n;
    assert!(n >= W && reach <= src.len(), "fold_unrolled: {n} outputs, {reach} of {}", src.len());
    let mut j = 0;
    loop {
        let at = j.min(n - W);
        let mut acc = [f32::NEG_INFINITY; W];
        for &o in offsets {
            // SAFETY: o + at + W <= max(offsets) + n <= src.len() (asserted above).
            let v: [f32; W] =
                unsafe { std::ptr::read_unaligned(src.as_ptr().add(o + at).cast::<[f32; W]>()) };
            for (a, &x) in acc.iter_mut().zip(&v) {
                *a = fold_step::<NAN>(*a, x);
            }
        }
        for (d, &a) in dst[at..at + W].iter_mut().zip(&acc) {
            *d = fold_finish::<NAN>(a);
        }
        if at + W >= n {
            break;
        }
        j += W;
    }
}

/// [`max_step`], or [`max_step_no_nan`] without `NAN`.
#[inline(always)]
fn fold_step<const NAN: bool>(a: f32, v: f32) -> f32 {
    if NAN { max_step(a, v) } else { max_step_no_nan(a, v) }
}

/// A fold's result as written: a NaN as [`f32::NAN`] (only `NAN` folds can hold one).
#[inline(always)]
fn fold_finish<const NAN: bool>(v: f32) -> f32 {
    if NAN && v.is_nan() { f32::NAN } else { v }
}

/// [`fold_offsets`] for outputs `j0..j0 + L`, folded in `L` registers lanes, stored once.
#[inline(always)]
fn fold_block<const NAN: bool, const L: usize>(
    dst: &mut [f32],
    src: &[f32],
    offsets: &[usize],
    j0: usize,
) {
    let mut acc = [f32::NEG_INFINITY; L];
    for &o in offsets {
        let row = &src[o + j0..o + j0 + L];
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = fold_step::<NAN>(*a, v);
        }
    }
    for (d, &a) in dst[j0..j0 + L].iter_mut().zip(&acc) {
        *d = fold_finish::<NAN>(a);
    }
}

/// A max pool ([`LlirOp::MaxPool`]): each output plane (image, channel) from its input
/// channel in two passes, both vectorized along the innermost axis. First every input row
/// (a run along the innermost axis) is copied into a row padded with `-inf` (a thread's
/// scratch, in L1) and folded across the window's taps along that axis: `h[j]`, the max of
/// the row's window `j` (computed at every position at unit stride, then every `stride`-th
/// kept). Then each output row is the fold of the `h` rows its window covers along the outer
/// axes, in order, padded rows skipped. The order is the definition's (taps of the innermost
/// axis first, then the outer ones row-major; [`lumen_compiler::conv::max_pool_f64`]), so the
/// first of equal values wins as in a `max` reduction of the window, and any NaN in a window
/// gives [`f32::NAN`]: the bits of the former lowering (the input padded by two `-inf`
/// concatenations, then `max` over each window axis of a `window` view). Planes are split over
/// the threads.
///
/// # Errors
/// [`RuntimeError::Kernel`] when `x`'s view is not `g`'s input shape or leaves its buffer, or
/// `out` has another size.
///
/// [`LlirOp::MaxPool`]: lumen_compiler::LlirOp::MaxPool
pub fn max_pool(
    g: &ConvGeometry,
    (x, xv): Input<'_>,
    out: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    const K: &str = "max_pool";
    let xs = g.input_shape();
    if xv.shape != xs || xv.strides.len() != xs.len() || xv.extent().is_none_or(|e| e > x.len()) {
        return Err(RuntimeError::kernel(
            K,
            format!("view {:?} does not fit {}", xv.shape, g.text()),
        ));
    }
    let p = g.output_positions();
    let planes = g.batch * g.c_out;
    if out.len() != planes * p {
        return Err(RuntimeError::kernel(
            K,
            format!("out has {} elements, expected {}", out.len(), planes * p),
        ));
    }
    if out.is_empty() {
        return Ok(());
    }
    let st = Strides::of(xv, g);
    let o2 = g.output[2];
    let (k2, s2, d2) = (g.kernel[2], g.stride[2], g.dilation[2]);
    // The padded row: the elements the windows along the innermost axis span.
    let e2 = (o2 - 1) * s2 + (k2 - 1) * d2 + 1;
    // Stride 2: the padded row (rounded up to pairs) split into its even and odd positions;
    // another stride: the window maxima at every start position 0..w2 of the padded row.
    let (rows2, full2) = if s2 == 2 {
        (e2.next_multiple_of(2), e2.next_multiple_of(2))
    } else {
        (e2, if s2 == 1 { 0 } else { (o2 - 1) * s2 + 1 })
    };
    let parallel = planes * p * g.taps() >= PAR_MIN_ELEMS;
    let _ = threads.for_parts::<()>(out, (planes, p), 1, parallel, |rows, part| {
        let mut scratch = PoolScratch {
            padded: vec![f32::NEG_INFINITY; rows2],
            full: vec![0.0f32; full2],
            h: vec![0.0f32; g.input[0] * g.input[1] * o2],
            offsets: Vec::with_capacity(g.taps()),
            nan_rows: vec![false; g.input[0] * g.input[1]],
        };
        for (plane, dst) in rows.zip(part.chunks_exact_mut(p)) {
            let (n, c) = (plane / g.c_out, plane % g.c_out);
            let xbase = st.offset + n * st.n + c * st.c;
            max_pool_plane_widest(g, x, xbase, &st, &mut scratch, dst);
        }
        Ok(())
    });
    Ok(())
}

/// A thread's scratch for [`max_pool`]: the `-inf`-padded input row, the window maxima at unit
/// stride (for a stride above 1), and the plane's rows of window maxima along the innermost
/// axis.
struct PoolScratch {
    padded: Vec<f32>,
    full: Vec<f32>,
    h: Vec<f32>,
    // Where each tap's row starts: in the padded row (pass 1), in `h` (pass 2).
    offsets: Vec<usize>,
    // Whether each row of `h` came from an input row holding a NaN.
    nan_rows: Vec<bool>,
}

widest_isa! {
    /// [`max_pool_plane`] compiled for AVX-512F, else AVX2 + FMA, else the baseline (a closure
    /// of the plane's loops passed to [`widest`] was too large to be inlined there and stayed
    /// 4 lanes wide).
    fn max_pool_plane_widest(
        g: &ConvGeometry,
        x: &[f32],
        xbase: usize,
        st: &Strides,
        scratch: &mut PoolScratch,
        dst: &mut [f32]
    ) => max_pool_plane
}

/// One plane (image, channel) of [`max_pool`]: its two passes, into `dst` (`P` elements).
#[inline(always)]
fn max_pool_plane(
    g: &ConvGeometry,
    x: &[f32],
    xbase: usize,
    st: &Strides,
    scratch: &mut PoolScratch,
    dst: &mut [f32],
) {
    let [i0, i1, i2] = g.input;
    let [o0, o1, o2] = g.output;
    let (k2, s2, d2, p2) = (g.kernel[2], g.stride[2], g.dilation[2], g.pad[2]);
    let PoolScratch { padded, full, h, offsets, nan_rows } = scratch;
    // Pass 1: along the innermost axis, every input row.
    let e2 = (o2 - 1) * s2 + (k2 - 1) * d2 + 1;
    let lo = p2.min(e2);
    let hi = (p2 + i2).min(e2).max(lo);
    let half = full.len() / 2;
    offsets.clear();
    if s2 == 2 {
        // Tap t of window j is padded[2j + q], q = t · dilation: phase q mod 2, index j + q / 2.
        offsets.extend((0..k2).map(|t| t * d2).map(|q| q % 2 * half + q / 2));
    } else {
        offsets.extend((0..k2).map(|t| t * d2));
    }
    for r in 0..i0 * i1 {
        let base = xbase + (r / i1) * st.sp[0] + (r % i1) * st.sp[1];
        let run = &mut padded[lo..hi];
        if st.sp[2] == 1 {
            // Inlined vector moves, not a `memcpy` call per row.
            copy_row(run, &x[base..base + (hi - lo)]);
        } else {
            for (j, v) in run.iter_mut().enumerate() {
                *v = x[base + j * st.sp[2]];
            }
        }
        // A row with a NaN takes the NaN-carrying step (rare: the other costs a third).
        let nan = any_nan(&padded[lo..hi]);
        nan_rows[r] = nan;
        let hr = &mut h[r * o2..(r + 1) * o2];
        if s2 == 2 {
            // Split into even and odd positions (vectorized shuffles), then fold unit-stride
            // runs of them straight into `h`.
            // (`split_row` from position 0: 16 pairs a shuffle; the zipped loop it replaces
            // stored one element at a time.)
            split_row(full, half, 0, &padded[..2 * half]);
            if nan {
                fold_offsets::<true>(hr, full, offsets);
            } else {
                fold_offsets::<false>(hr, full, offsets);
            }
            continue;
        }
        let wide: &mut [f32] = if s2 == 1 { hr } else { full };
        if nan {
            fold_offsets::<true>(wide, padded, offsets);
        } else {
            fold_offsets::<false>(wide, padded, offsets);
        }
        if s2 > 2 {
            let hr = &mut h[r * o2..(r + 1) * o2];
            for (v, &f) in hr.iter_mut().zip(full.iter().step_by(s2)) {
                *v = f;
            }
        }
    }
    // Pass 2: the outer axes, row by row of the output, the covered rows of `h` in order.
    let row_of = |a: usize, t: usize, o: usize| {
        (o * g.stride[a] + t * g.dilation[a]).checked_sub(g.pad[a]).filter(|&r| r < g.input[a])
    };
    for a in 0..o0 {
        for b in 0..o1 {
            offsets.clear();
            let mut nan = false;
            for t0 in 0..g.kernel[0] {
                let Some(r0) = row_of(0, t0, a) else { continue };
                for t1 in 0..g.kernel[1] {
                    let Some(r1) = row_of(1, t1, b) else { continue };
                    nan |= nan_rows[r0 * i1 + r1];
                    offsets.push((r0 * i1 + r1) * o2);
                }
            }
            let row = &mut dst[(a * o1 + b) * o2..(a * o1 + b + 1) * o2];
            if nan {
                fold_offsets::<true>(row, h, offsets);
            } else {
                fold_offsets::<false>(row, h, offsets);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use lumen_compiler::ConvSpec;

    use super::*;

    /// A ramp of pseudo-random values in [-0.5, 0.5).
    fn values(seed: u32, n: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// `relu(conv(x, w) + bias + residual)` in f64 from the definition: `x` `[N, C, *in]`
    /// row-major from element `x0`, `w` `[OC, C/g, *k]`, the result `[N, OC, *out]`.
    fn reference(
        g: &ConvGeometry,
        x: &[f32],
        x0: usize,
        w: &[f32],
        bias: &[f32],
        res: &[f32],
    ) -> Vec<f64> {
        let (p, taps) = (g.output_positions(), g.taps());
        let groups = g.groups.max(1);
        let (cg, ocg) = (g.c_in / groups, g.c_out / groups);
        let plane: usize = g.input.iter().product();
        let mut out = vec![0.0f64; g.batch * g.c_out * p];
        for n in 0..g.batch {
            for oc in 0..g.c_out {
                let grp = oc / ocg;
                for q in 0..p {
                    let o = lumen_compiler::conv::unravel3(q, g.output);
                    let mut acc = f64::from(bias[oc]);
                    for ci in 0..cg {
                        for t in 0..taps {
                            let k = lumen_compiler::conv::unravel3(t, g.kernel);
                            let mut at = 0;
                            let mut inside = true;
                            for a in 0..MAX_SPATIAL {
                                let i = (o[a] * g.stride[a] + k[a] * g.dilation[a])
                                    .checked_sub(g.pad[a]);
                                match i.filter(|&i| i < g.input[a]) {
                                    Some(i) => at = at * g.input[a] + i,
                                    None => inside = false,
                                }
                            }
                            if inside {
                                let xv = x[x0 + (n * g.c_in + grp * cg + ci) * plane + at];
                                let wv = w[(oc * cg + ci) * taps + t];
                                acc += f64::from(xv) * f64::from(wv);
                            }
                        }
                    }
                    let flat = (n * g.c_out + oc) * p + q;
                    out[flat] = (acc + f64::from(res[flat])).max(0.0);
                }
            }
        }
        out
    }

    /// The geometry of a test case: `x [batch, c, *input]`, `w [oc, c / groups, *kernel]`,
    /// the stride and dilation on every axis, `pads` per axis; with the two shapes.
    #[allow(clippy::too_many_arguments)]
    fn case_geometry(
        batch: usize,
        c: usize,
        oc: usize,
        groups: usize,
        input: &[usize],
        kernel: &[usize],
        (stride, dilation): (usize, usize),
        pads: &[(usize, usize)],
    ) -> (ConvGeometry, Vec<usize>, Vec<usize>) {
        let rank = input.len();
        let spec = ConvSpec {
            pads: pads.to_vec(),
            strides: vec![stride; rank],
            dilations: vec![dilation; rank],
            groups,
        };
        let mut xs = vec![batch, c];
        xs.extend(input);
        let mut wshape = vec![oc, c / groups];
        wshape.extend(kernel);
        let g = ConvGeometry::new(&spec, &xs, &wshape).unwrap();
        (g, xs, wshape)
    }

    /// `out` within `1e-5 · sqrt(depth) · (1 + |ref|)` of the f64 `want`, and bit-identical to
    /// the first team's output (`first`, set on the first call).
    fn same_on_every_team(
        g: &ConvGeometry,
        out: &[f32],
        want: &[f64],
        first: &mut Option<Vec<u32>>,
        label: &str,
    ) {
        for (i, (&got, &x)) in out.iter().zip(want).enumerate() {
            let tol = 1e-5 * (g.depth() as f64).sqrt() * (1.0 + x.abs());
            assert!(
                (f64::from(got) - x).abs() <= tol,
                "{label} ({}) [{i}]: {got} vs {x}",
                g.text()
            );
        }
        let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
        match first {
            None => *first = Some(bits),
            Some(f) => assert!(*f == bits, "{label}: threads"),
        }
    }

    /// lumen's own loops ([`dense_packed`]) against the definition over odd geometries: groups,
    /// strides, dilations, uneven pads, 1-D and 3-D, positions off every multiple of 64 (a
    /// last strip of 1 to 63), output channels off every multiple of 6, depths past one depth
    /// block (K > 512), a batch, pointwise read in place (aligned) and packed (not), every
    /// kernel family this CPU has; with bias, residual and ReLU fused; the workspace poisoned
    /// with NaN. Bit-identical on 1, 2 and 3 threads (the position and the channel split).
    #[test]
    fn dense_packed_matches_the_definition_on_every_split() {
        let teams =
            [Threads::single(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        // (batch, c, oc, groups, input, kernel, stride, dilation, pads)
        #[allow(clippy::type_complexity)]
        let cases: &[(
            usize,
            usize,
            usize,
            usize,
            &[usize],
            &[usize],
            usize,
            usize,
            &[(usize, usize)],
        )] = &[
            (1, 3, 7, 1, &[9, 11], &[3, 3], 1, 1, &[(1, 1), (1, 1)]),
            (2, 4, 10, 2, &[13, 10], &[3, 2], 2, 1, &[(1, 0), (2, 1)]),
            (1, 6, 9, 3, &[12, 12], &[3, 3], 1, 2, &[(2, 2), (1, 3)]),
            (1, 8, 13, 1, &[40], &[5], 3, 1, &[(2, 1)]),
            (1, 2, 5, 1, &[5, 6, 7], &[2, 3, 3], 1, 1, &[(0, 1), (1, 1), (1, 0)]),
            // Depth 600 (two depth blocks), 7x7 positions: few strips, the channel split.
            (1, 150, 20, 1, &[7, 7], &[2, 2], 1, 1, &[(1, 0), (0, 1)]),
            // Many strips (the position split), 64 + 36 positions per row pair.
            (1, 5, 17, 1, &[50, 50], &[3, 3], 1, 1, &[(1, 1), (1, 1)]),
            // Pointwise: 1040 channels (three depth blocks), 48 positions (whole vectors).
            (1, 1040, 8, 1, &[6, 8], &[1, 1], 1, 1, &[(0, 0), (0, 0)]),
            // Pointwise, 100 positions (a last strip of 36), two groups, two images.
            (2, 12, 14, 2, &[10, 10], &[1, 1], 1, 1, &[(0, 0), (0, 0)]),
            // Pointwise over 4096 positions: 64 strips, the position split.
            (1, 16, 6, 1, &[64, 64], &[1, 1], 1, 1, &[(0, 0), (0, 0)]),
        ];
        let mut checked = 0;
        for micro in Micro::families() {
            for (case, &(batch, c, oc, groups, input, kernel, s, d, pads)) in
                cases.iter().enumerate()
            {
                let (g, xs, wshape) =
                    case_geometry(batch, c, oc, groups, input, kernel, (s, d), pads);
                let xlen: usize = xs.iter().product();
                // x from an offset that puts its first element on a 64-byte boundary (read in
                // place when pointwise) and, for odd cases, 4 bytes past one (packed).
                let buf = values(case as u32, xlen + 32);
                let x0 = buf.as_ptr().align_offset(64).min(16) + case % 2;
                let mut xv = View::contiguous(&xs);
                xv.offset = x0;
                let w = values(100 + case as u32, g.c_out * g.depth());
                let wv = View::contiguous(&wshape);
                let bias = values(200 + case as u32, oc);
                let bv = View::contiguous(&[oc]);
                let out_shape = g.output_shape();
                let res = values(300 + case as u32, out_shape.iter().product());
                let rv = View::contiguous(&out_shape);
                let want = reference(&g, &buf, x0, &w, &bias, &res);
                let epi = Epilogue {
                    epilogue: ConvEpilogue {
                        bias: true,
                        residual: true,
                        activation: Some(UnaryOp::Relu),
                    },
                    bias: Some((&bias, &bv)),
                    residual: Some((&res, &rv)),
                };
                let st = Strides::of(&xv, &g);
                let mut first: Option<Vec<u32>> = None;
                for team in &teams {
                    let mut out = vec![f32::NAN; want.len()];
                    let mut work = vec![f32::NAN; g.workspace_bytes() / 4];
                    dense_packed(&g, &epi, &buf, &st, &w, &mut out, &mut work, team, micro)
                        .unwrap();
                    same_on_every_team(
                        &g,
                        &out,
                        &want,
                        &mut first,
                        &format!("{micro:?} case {case}"),
                    );
                    checked += 1;
                }
                // The public entry gives the same bits (it picks the widest family), unless it
                // takes the direct path (tested on its own below).
                if Micro::detect().is_some_and(|m| m.lanes == micro.lanes) && !direct_fits(&g) {
                    let mut out = vec![f32::NAN; want.len()];
                    let mut work = vec![f32::NAN; g.workspace_bytes() / 4];
                    conv(
                        &g,
                        epi.epilogue,
                        (&buf, &xv),
                        (&w, &wv),
                        epi.bias,
                        epi.residual,
                        &mut out,
                        &mut work,
                        &teams[1],
                    )
                    .unwrap();
                    let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                    assert!(first.as_ref() == Some(&bits), "case {case}: conv()");
                }
            }
        }
        // A CPU without AVX2 + FMA runs the `gemm` crate path, which the integration tests cover.
        assert!(checked > 0 || Micro::detect().is_none());
    }

    /// The direct path ([`direct`], AVX-512F) against the definition over odd geometries:
    /// output rows off every multiple of 16 (the overlapping last vector), output channels off
    /// every multiple of 6 and 16 (a partial tile), pads 0 to 3 (asymmetric), strides 1 to 3,
    /// dilation 2, groups, 1-D, a batch, an input view with strided rows and columns; bias,
    /// residual and ReLU fused; the workspace poisoned with NaN. Bit-identical on 1, 2 and 3
    /// threads.
    #[test]
    fn direct_matches_the_definition_on_every_split() {
        let teams =
            [Threads::single(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        // (batch, c, oc, groups, input, kernel, stride, dilation, pads, x column stride)
        #[allow(clippy::type_complexity)]
        let cases: &[(
            usize,
            usize,
            usize,
            usize,
            &[usize],
            &[usize],
            usize,
            usize,
            &[(usize, usize)],
            usize,
        )] = &[
            // YOLOv8n's stem, small: 3x3/2, pads 1, 16 channels.
            (1, 3, 16, 1, &[40, 38], &[3, 3], 2, 1, &[(1, 1), (1, 1)], 1),
            // YOLOv5's 6x6/2, pads 2; 7 channels (a partial tile).
            (1, 3, 7, 1, &[36, 45], &[6, 6], 2, 1, &[(2, 2), (2, 2)], 1),
            // ResNet's 7x7/2, pads 3, 33 channels (two whole tiles and one).
            (1, 3, 33, 1, &[40, 40], &[7, 7], 2, 1, &[(3, 3), (3, 3)], 1),
            // 3x3 stride 1 over 16 channels, 17 outputs per row, two images.
            (2, 16, 17, 1, &[9, 17], &[3, 3], 1, 1, &[(1, 1), (1, 1)], 1),
            // Stride 3, asymmetric pads 0..3, 13 channels.
            (1, 4, 13, 1, &[20, 61], &[3, 4], 3, 1, &[(0, 2), (3, 1)], 1),
            // Dilation 2, no padding, 2 groups of 5 channels.
            (1, 6, 10, 2, &[14, 40], &[3, 3], 1, 2, &[(0, 0), (0, 0)], 1),
            // Dilation 2 with stride 2, pads 2, 3 groups.
            (1, 9, 12, 3, &[21, 50], &[3, 3], 2, 2, &[(2, 1), (2, 2)], 1),
            // 1-D, stride 2, 20 channels.
            (1, 5, 20, 1, &[100], &[5], 2, 1, &[(2, 1)], 1),
            // x a view: every other column of a wider tensor, every row padded.
            (1, 3, 16, 1, &[11, 35], &[3, 3], 2, 1, &[(1, 1), (1, 1)], 2),
            // 3x3 over 32 channels (depth 288, YOLOv8n's), 35 channels.
            (1, 32, 35, 1, &[12, 33], &[3, 3], 1, 1, &[(1, 1), (1, 1)], 1),
            // Depth 320 at the limit (20 channels x 4x4), output rows of 16 exactly.
            (1, 20, 6, 1, &[19, 19], &[4, 4], 1, 1, &[(0, 0), (0, 0)], 1),
        ];
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        for (case, &(batch, c, oc, groups, input, kernel, s, d, pads, cs)) in
            cases.iter().enumerate()
        {
            let (g, xs, wshape) = case_geometry(batch, c, oc, groups, input, kernel, (s, d), pads);
            let rank = input.len();
            assert!(direct_fits(&g), "case {case} ({}) takes the direct path", g.text());
            // x as a view: its columns `cs` apart, each row 3 more past that, from element 5.
            let row = input[rank - 1] * cs + 3;
            let mut strides = vec![0; xs.len()];
            strides[xs.len() - 1] = cs;
            let mut step = row;
            for a in (0..xs.len() - 1).rev() {
                strides[a] = step;
                step *= xs[a];
            }
            let xv = View { shape: xs.clone(), strides, offset: 5 };
            let buf = values(case as u32, xv.extent().unwrap());
            // The same values contiguous, for the reference.
            let mut dense = Vec::new();
            xv.for_each_offset(|o| dense.push(buf[o]));
            let w = values(100 + case as u32, g.c_out * g.depth());
            let wv = View::contiguous(&wshape);
            let bias = values(200 + case as u32, oc);
            let bv = View::contiguous(&[oc]);
            let out_shape = g.output_shape();
            let res = values(300 + case as u32, out_shape.iter().product());
            let rv = View::contiguous(&out_shape);
            let want = reference(&g, &dense, 0, &w, &bias, &res);
            let epilogue =
                ConvEpilogue { bias: true, residual: true, activation: Some(UnaryOp::Relu) };
            let mut first: Option<Vec<u32>> = None;
            for team in &teams {
                let mut out = vec![f32::NAN; want.len()];
                let mut work = vec![f32::NAN; g.workspace_bytes() / 4];
                conv(
                    &g,
                    epilogue,
                    (&buf, &xv),
                    (&w, &wv),
                    Some((&bias, &bv)),
                    Some((&res, &rv)),
                    &mut out,
                    &mut work,
                    team,
                )
                .unwrap();
                same_on_every_team(&g, &out, &want, &mut first, &format!("case {case}"));
            }
        }
    }

    /// A workspace smaller than the geometry plans is refused, not overrun.
    #[test]
    fn dense_packed_refuses_a_short_workspace() {
        let Some(micro) = Micro::detect() else { return };
        let spec = ConvSpec {
            pads: vec![(1, 1); 2],
            strides: vec![1; 2],
            dilations: vec![1; 2],
            groups: 1,
        };
        let g = ConvGeometry::new(&spec, &[1, 3, 8, 8], &[4, 3, 3, 3]).unwrap();
        let (x, w) = (values(1, 192), values(2, 108));
        let xv = View::contiguous(&[1, 3, 8, 8]);
        let epi = Epilogue { epilogue: ConvEpilogue::default(), bias: None, residual: None };
        let mut out = vec![0.0; 256];
        let mut work = vec![0.0; 27 * 64 - 1];
        let st = Strides::of(&xv, &g);
        let err =
            dense_packed(&g, &epi, &x, &st, &w, &mut out, &mut work, &Threads::single(), micro);
        assert!(matches!(err, Err(RuntimeError::Kernel { .. })));
    }

    /// The flat path gives the row-by-row path's bits, over plane sizes on both sides of each
    /// block width (the overlapping last block), kernels 1 to 5 wide, any padding.
    #[test]
    fn flat_taps_match_the_row_path_bit_for_bit() {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for (h, w, k, pad, stride, dilation) in [
            (5, 8, 3, 1, 2, 1),
            (56, 56, 3, 1, 2, 1),
            (9, 40, 5, 2, 2, 1),
            (11, 30, 3, 2, 1, 2),
            (13, 41, 3, 1, 3, 2),
            (5, 4, 3, 1, 1, 1),
            (7, 7, 3, 1, 1, 1),
            (14, 14, 3, 1, 1, 1),
            (7, 16, 3, 1, 1, 1),
            (6, 18, 3, 0, 1, 1),
            (9, 17, 5, 2, 1, 1),
            (4, 31, 1, 0, 1, 1),
            (3, 33, 3, 1, 1, 1),
            (8, 56, 3, 1, 1, 1),
            (2, 64, 3, 1, 1, 1),
            (3, 70, 5, 2, 1, 1),
            (12, 130, 3, 1, 1, 1),
        ] {
            let spec = ConvSpec {
                pads: vec![(pad, pad); 2],
                strides: vec![stride; 2],
                dilations: vec![dilation; 2],
                groups: 1,
            };
            let g = ConvGeometry::new(&spec, &[1, 1, h, w], &[1, 1, k, k]).unwrap();
            assert!(flat_plane(&g), "{h}x{w} k{k} s{stride} d{dilation}");
            let [e0, e1, e2] = padded_extent(&g);
            let padded: Vec<f32> = (0..e0 * e1 * phase_row(&g, e2)).map(|_| next()).collect();
            let wk: Vec<f32> = (0..k * k).map(|_| next()).collect();
            let p = g.output_positions();
            let (mut flat, mut rows) = (vec![f32::NAN; p], vec![f32::NAN; p]);
            flat_taps(&g, &wk, &padded, &mut flat);
            row_taps(&g, &wk, &padded, &mut rows);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&flat), bits(&rows), "{h}x{w} k{k} pad {pad} s{stride} d{dilation}");
        }
    }
    /// The register-blocked path ([`blocked_taps`]) gives the flat path's bits (and, with a
    /// bias, the flat path's sums plus the bias), over widths on both sides of 4, 8 and 16
    /// (odd ones, the overlapping last block), heights that leave 0 to 3 rows after the groups
    /// of 4, 3x3 and 5x5, pads 0 to 2 (asymmetric too), strides 1 and 2 along either axis.
    #[test]
    fn blocked_taps_match_the_flat_path_bit_for_bit() {
        let mut seed = 11u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        let mut checked = 0;
        for k in [3, 5] {
            for (h, w) in [(4, 4), (5, 7), (7, 9), (9, 15), (6, 16), (11, 17), (13, 33), (8, 56)] {
                for pads in [[(0, 0), (0, 0)], [(1, 1), (1, 1)], [(2, 2), (2, 2)], [(1, 0), (0, 2)]]
                {
                    for strides in [[1, 1], [2, 2], [1, 2], [2, 1]] {
                        let spec = ConvSpec {
                            pads: pads.to_vec(),
                            strides: strides.to_vec(),
                            dilations: vec![1; 2],
                            groups: 1,
                        };
                        let Ok(g) = ConvGeometry::new(&spec, &[1, 1, h, w], &[1, 1, k, k]) else {
                            continue;
                        };
                        if !flat_plane(&g) {
                            continue;
                        }
                        let [e0, e1, e2] = padded_extent(&g);
                        let padded: Vec<f32> =
                            (0..e0 * e1 * phase_row(&g, e2)).map(|_| next()).collect();
                        let wk: Vec<f32> = (0..k * k).map(|_| next()).collect();
                        let bias = next();
                        let p = g.output_positions();
                        let (mut flat, mut blocked) = (vec![f32::NAN; p], vec![f32::NAN; p]);
                        flat_taps(&g, &wk, &padded, &mut flat);
                        assert!(blocked_taps(&g, &wk, None, &padded, &mut blocked));
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        let what = format!("{h}x{w} k{k} pads {pads:?} s{strides:?}");
                        assert_eq!(bits(&flat), bits(&blocked), "{what}");
                        assert!(blocked_taps(&g, &wk, Some(bias), &padded, &mut blocked));
                        for v in &mut flat {
                            *v += bias;
                        }
                        assert_eq!(bits(&flat), bits(&blocked), "{what}, bias");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 200, "{checked}");
    }

    /// A whole depthwise convolution through the planes' copies (the contiguous row copy, the
    /// even/odd split at stride 2, and the element-by-element copy of a strided view), against
    /// the definition in f64, bit-identical between a contiguous input and a strided view of
    /// the same values, and on 1, 2 and 3 threads; with a bias (fused into the kernel) and
    /// residual + ReLU after it. Odd widths, pads 0 to 2, strides 1 and 2, 3x3 and 5x5, and a
    /// dilated kernel (the general path).
    #[test]
    fn depthwise_planes_match_the_definition_and_every_layout() {
        let teams =
            [Threads::single(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        // (channels, h, w, k, pad, stride, dilation)
        for (case, &(c, h, w, k, pad, stride, dil)) in [
            (3, 9, 13, 3, 1, 1, 1),
            (5, 12, 17, 3, 1, 2, 1),
            (4, 11, 23, 3, 0, 2, 1),
            (3, 10, 19, 5, 2, 1, 1),
            (2, 15, 21, 5, 2, 2, 1),
            (3, 8, 7, 3, 2, 1, 1),
            (6, 14, 14, 3, 1, 2, 1),
            (2, 13, 37, 3, 2, 2, 2),
            (2, 20, 57, 3, 1, 2, 1),
        ]
        .iter()
        .enumerate()
        {
            let spec = ConvSpec {
                pads: vec![(pad, pad); 2],
                strides: vec![stride; 2],
                dilations: vec![dil; 2],
                groups: c,
            };
            let xs = [1, c, h, w];
            let g = ConvGeometry::new(&spec, &xs, &[c, 1, k, k]).unwrap();
            assert!(g.is_depthwise());
            let n = c * h * w;
            let x = values(400 + case as u32, n);
            // The same values at every other element: a view with innermost stride 2.
            let mut spread = vec![f32::NAN; 2 * n];
            for (i, &v) in x.iter().enumerate() {
                spread[2 * i] = v;
            }
            let mut sv = View::contiguous(&xs);
            for s in &mut sv.strides {
                *s *= 2;
            }
            let wts = values(500 + case as u32, c * k * k);
            let bias = values(600 + case as u32, c);
            let bv = View::contiguous(&[c]);
            let out_shape = g.output_shape();
            let res = values(700 + case as u32, out_shape.iter().product());
            let rv = View::contiguous(&out_shape);
            let want = reference(&g, &x, 0, &wts, &bias, &res);
            let epi = Epilogue {
                epilogue: ConvEpilogue {
                    bias: true,
                    residual: true,
                    activation: Some(UnaryOp::Relu),
                },
                bias: Some((&bias, &bv)),
                residual: Some((&res, &rv)),
            };
            let mut first: Option<Vec<u32>> = None;
            for (buf, view) in [(&x, View::contiguous(&xs)), (&spread, sv.clone())] {
                let st = Strides::of(&view, &g);
                for team in &teams {
                    let mut out = vec![f32::NAN; want.len()];
                    depthwise(&g, &epi, buf, &st, &wts, &mut out, team);
                    for (i, (&got, &x)) in out.iter().zip(&want).enumerate() {
                        let tol = 1e-5 * (1.0 + x.abs());
                        assert!(
                            (f64::from(got) - x).abs() <= tol,
                            "case {case} ({}) [{i}]: {got} vs {x}",
                            g.text()
                        );
                    }
                    let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                    match &first {
                        None => first = Some(bits),
                        Some(f) => assert!(f == &bits, "case {case}: layouts or threads"),
                    }
                }
            }
        }
    }
}
