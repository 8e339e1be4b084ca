//! Winograd convolution F(2x2, 3x3) for the CPU runtime's dense 3x3 convolutions (stride 1,
//! dilation 1, one group, 2-D): Lavin and Gray, "Fast Algorithms for Convolutional Neural
//! Networks" (CVPR 2016), on the `gemm-f32` register micro-kernels [`crate::conv`]'s dense
//! path drives ([`crate::packed`]'s `Micro`).
//!
//! Each 2x2 block of outputs (a *tile*) of an output channel is `Y = Aᵀ [Σ_c U_c ⊙ V_c] A`,
//! where `U_c = G g_c Gᵀ` is the 4x4 transform of the 3x3 kernel of input channel `c` and
//! `V_c = Bᵀ d_c B` the transform of the 4x4 input patch `d_c` the tile reads. Summing over the
//! channels first turns the 16 entries of the 4x4 transforms into 16 independent products
//! `M_k [OC, tiles] = U_k [OC, IC] · V_k [IC, tiles]` (`k` = 0..16): 16 multiplies per 4
//! outputs per channel pair instead of 36, 2.25 times fewer FLOP than the direct convolution.
//!
//! - Weights: `U` is computed once at prepare (in f64, rounded once;
//!   [`WinogradWeights::transform`], called by `cpu.rs` next to the matmuls' packed weights) and
//!   stored as 16 row-major `[OC, IC]` matrices: a group of `NR` = 6 output channels is the
//!   micro-kernel's broadcast operand read in place (`rhs_rs` 1, `rhs_cs` IC), as the dense
//!   path reads its weights.
//! - Tiles of an image, numbered row-major over the `ceil(OH/2) x ceil(OW/2)` tile grid, are
//!   taken in blocks of at most `tb` tiles (`tb` chosen so the block's `V` and `M`, `16 ·
//!   (IC + OC) · tb` floats, stay within about 1 MiB of L2; at least 64, at most 512, a
//!   multiple of 16). Per block: the input transform writes `V` as 16 `[IC, tb]` matrices
//!   (rows 64-byte aligned; the micro-kernel's vectorised operand, a strip of 64 tiles), the 16
//!   products write `M` as 16 `[OC, tb]` matrices, and the output transform reads them back,
//!   writes each tile's 2x2 outputs into the NCHW output and runs the epilogue (bias, residual,
//!   activation, [`ConvEpilogue`]) on each finished row piece while it is in L1.
//! - Transforms run along a tile row's run of tiles, vectorised across tiles (compiled for
//!   the widest vector unit): the input rows a run reads are copied with zeros for the padding
//!   (any pads, odd sizes: a partial tile reads zeros and its outputs past the edge are never
//!   stored), split into even and odd columns, combined vertically (`Bᵀ d`) and then
//!   horizontally (`· B`) with unit-stride loads only.
//! - Threads: the blocks of an image are split over the threads (their count rounded up to a
//!   multiple of the thread count so the parts are even); with fewer than two blocks per
//!   thread (14x14 and smaller planes) every thread transforms a share of the input channels
//!   of all the image's tiles into one shared `V`, then the output channels are split in groups
//!   of 6. A tile's outputs are always the same operations in the same order (the transforms
//!   are per tile; the micro-kernel runs the same per-lane fused multiply-adds over the same
//!   depth blocks whichever strip or lane holds the tile), so the bits do not depend on the
//!   thread count or the blocking.
//! - Accuracy: the transforms' coefficients are 0, ±1 and ±1/2, so F(2x2, 3x3) rounds about
//!   as the direct sum does (the tests see at most a few 1e-6 relative to the largest
//!   output); F(4x4, 3x3)'s larger coefficients were left out.
//! - Which convolutions ([`eligible`]): at least [`MIN_CHANNELS`] input and output channels
//!   and an output of at least [`MIN_OUTPUT`] x [`MIN_OUTPUT`]. Winograd was faster than the
//!   dense path on every such shape measured (one thread, same binary, `LUMEN_CPU_NO_WINOGRAD`
//!   on and off interleaved, best of 3, noisy machine): 16->16 16x16 0.019 ms against 0.031,
//!   64->64 20x20 0.25 against 0.36, 32->32 80x80 1.0 against 1.6, 128->128 28x28 1.7 against
//!   10.7 (a loaded round; about 2.4 unloaded), 256->256 14x14 2.0 against 11.5 (loaded). The
//!   7x7 planes (ResNet's 512-channel stage) and fewer than 16 channels were not measured and
//!   are left on the dense path.
//! - Measured (2026-12-05, 2-core AMD EPYC Zen 4 with AVX-512F shared with other engineers'
//!   builds; the binary before and after interleaved with ONNX Runtime 1.32.0, medians of
//!   per-round ratios, 5 rounds for ops, 3 for networks): 64->64 56x56 after/before 0.69 on one
//!   thread (1.71 ms, ORT 2.08) and 0.51 on two (0.88 ms, ORT 1.04); 16->16 160x160 0.69 (1.21
//!   ms, ORT 1.19) and 0.59 (0.57 ms, ORT 0.69); ResNet-50 b1 0.73 and 0.92 (after/ORT 1.12 and
//!   1.18, before 1.24 and 1.30); YOLOv8n 640 b1 0.81 and 0.80 (after/ORT 1.03 and 1.05, before
//!   1.28 and 1.31). `CpuOptions::no_winograd` (`LUMEN_CPU_NO_WINOGRAD=1`)
//!   turns it off for side-by-side measurements.
//! - Dispatch: `cpu.rs` transforms the weights of every eligible convolution whose weight is a
//!   weight buffer at prepare and calls [`conv`] instead of `crate::conv::conv` for it; a
//!   convolution called through `crate::conv::conv` directly keeps the dense path (so
//!   `conv.rs` is unchanged).

use std::cell::RefCell;
use std::ops::Range;

use lumen_compiler::View;
use lumen_compiler::conv::{ConvEpilogue, ConvGeometry};

use crate::RuntimeError;
use crate::conv::activate;
use crate::isa::widest_isa;
use crate::kernels::Input;
use crate::packed::{Micro, depth_blocks};
use crate::threads::{PAR_MIN_FLOPS, Threads};

const K: &str = "winograd";

/// Entries of a transformed 4x4 tile (`α² = (m + r - 1)²` with `m` = 2, `r` = 3).
const NK: usize = 16;

/// Input and output channels a convolution needs at least to go through Winograd: below it
/// the products' depth (IC) is too short for the micro-kernel to amortize its tile loads and
/// stores, and the transforms (per channel and tile) weigh against the 2.25x fewer FLOP.
pub const MIN_CHANNELS: usize = 16;

/// Output height and width a convolution needs at least to go through Winograd: a smaller
/// plane has few tiles (a 7x7 plane, 16 tiles, computes 64 outputs for 49) and streams the
/// whole `16 · OC · IC` transformed weight once per image for little work.
pub const MIN_OUTPUT: usize = 8;

/// Bytes of one block's `V` and `M` at most (the L2 budget of the tile blocking).
const BLOCK_BYTES: usize = 1 << 20;

/// Whether [`conv`] computes convolution `g` (and is faster there than the dense path, see
/// [`MIN_CHANNELS`] and [`MIN_OUTPUT`]): 2-D, 3x3 kernel, stride 1, dilation 1, one group, on
/// a CPU with the AVX-512F or AVX2 + FMA micro-kernels.
pub fn eligible(g: &ConvGeometry) -> bool {
    g.rank == 2
        && g.groups == 1
        && g.kernel == [1, 3, 3]
        && g.stride == [1, 1, 1]
        && g.dilation == [1, 1, 1]
        && g.c_in >= MIN_CHANNELS
        && g.c_out >= MIN_CHANNELS
        && g.output[1] >= MIN_OUTPUT
        && g.output[2] >= MIN_OUTPUT
        && Micro::detect().is_some()
}

/// The transformed weights `U = G g Gᵀ` of one 3x3 convolution: 16 row-major `[OC, IC]` f32
/// matrices, `u[(k · OC + oc) · IC + ic]` being entry `k` (row-major in the 4x4 transform) of
/// output channel `oc`, input channel `ic`. `G` = `[[1, 0, 0], [½, ½, ½], [½, -½, ½], [0, 0,
/// 1]]` (Lavin and Gray's F(2x2, 3x3)). Computed in f64 and rounded once.
#[derive(Debug, Clone, PartialEq)]
pub struct WinogradWeights {
    c_out: usize,
    c_in: usize,
    u: Vec<f32>,
}

impl WinogradWeights {
    /// The transform of `w`, the `[OC, IC, 3, 3]` weights of `g` in row-major order.
    ///
    /// # Errors
    /// [`RuntimeError::Kernel`] when `g` is not a 3x3 convolution of one group or `w` does not
    /// hold `OC · IC · 9` values.
    pub fn transform(g: &ConvGeometry, w: &[f32]) -> Result<Self, RuntimeError> {
        let (oc, ic) = (g.c_out, g.c_in);
        if g.kernel != [1, 3, 3] || g.groups != 1 || w.len() != oc * ic * 9 {
            return Err(RuntimeError::kernel(
                K,
                format!("weights of {} values for {}", w.len(), g.text()),
            ));
        }
        let gm: [[f64; 3]; 4] =
            [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];
        let mut u = vec![0.0f32; NK * oc * ic];
        for o in 0..oc {
            for c in 0..ic {
                let k = &w[(o * ic + c) * 9..(o * ic + c + 1) * 9];
                // G g: 4x3.
                let mut gg = [[0.0f64; 3]; 4];
                for (i, row) in gg.iter_mut().enumerate() {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = (0..3).map(|t| gm[i][t] * f64::from(k[t * 3 + j])).sum();
                    }
                }
                // (G g) Gᵀ: 4x4.
                for i in 0..4 {
                    for j in 0..4 {
                        let v: f64 = (0..3).map(|t| gg[i][t] * gm[j][t]).sum();
                        u[((i * 4 + j) * oc + o) * ic + c] = v as f32;
                    }
                }
            }
        }
        Ok(Self { c_out: oc, c_in: ic, u })
    }

    /// Host bytes the transformed weights take (`16 · OC · IC · 4`).
    pub fn bytes(&self) -> usize {
        self.u.len() * 4
    }
}

/// A raw pointer the threads of one convolution share: each writes its own elements.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: every part writes a disjoint set of elements (see the callers), and the pointer
// outlives the parts (they run inside `Threads::run_parts`, which returns when all finish).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

thread_local! {
    /// A thread's own `V`, `M` and row buffers, kept between calls (grown, never shrunk).
    static PRIVATE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The calling thread's buffer for a `V` all threads share (the few-tiles split).
    static SHARED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` f32 of `cell`'s buffer starting on a 64-byte boundary.
fn with_buffer<R>(
    cell: &'static std::thread::LocalKey<RefCell<Vec<f32>>>,
    len: usize,
    f: impl FnOnce(&mut [f32]) -> R,
) -> R {
    cell.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < len + 16 {
            b.clear();
            b.resize(len + 16, 0.0);
        }
        let skip = b.as_ptr().align_offset(64).min(16);
        f(&mut b[skip..skip + len])
    })
}

/// What the epilogue reads: the bias and the residual with its view (as `crate::conv`'s).
struct Epilogue<'a> {
    epilogue: ConvEpilogue,
    bias: Option<Input<'a>>,
    residual: Option<Input<'a>>,
}

impl Epilogue<'_> {
    /// `act(row + bias[oc] + residual)` on output channel `oc` of image `n`, positions
    /// `p0..p0 + row.len()` of a plane of `p` positions (the sum already in `row`): the same
    /// operations in the same order as the dense path's.
    fn row(&self, (c_out, p): (usize, usize), n: usize, oc: usize, p0: usize, row: &mut [f32]) {
        if let Some((b, v)) = self.bias {
            let bias = b[v.offset + oc * v.strides[0]];
            row.iter_mut().for_each(|x| *x += bias);
        }
        if let Some((r, v)) = self.residual {
            let flat = (n * c_out + oc) * p + p0;
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

/// One convolution's sizes and operands, shared by the blocks.
struct Plan<'a> {
    x: &'a [f32],
    /// `x`'s offset and its strides along N, C, H and W.
    xs: (usize, usize, usize, usize, usize),
    u: &'a WinogradWeights,
    epi: Epilogue<'a>,
    micro: Micro,
    ic: usize,
    oc: usize,
    /// Input and output height and width, pads before each.
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    pt: usize,
    pl: usize,
    /// Tile columns per tile row.
    tw: usize,
}

impl Plan<'_> {
    /// The runs of tiles `tiles` covers, one per tile row: `(ty, tx0, len, col)`, `col` the
    /// run's first column in the block.
    fn runs(&self, tiles: Range<usize>) -> impl Iterator<Item = (usize, usize, usize, usize)> {
        let tw = self.tw;
        let mut t = tiles.start;
        std::iter::from_fn(move || {
            if t >= tiles.end {
                return None;
            }
            let (ty, tx) = (t / tw, t % tw);
            let len = (tw - tx).min(tiles.end - t);
            let run = (ty, tx, len, t - tiles.start);
            t += len;
            Some(run)
        })
    }

    /// Writes `V` for image `n`'s tiles `tiles`, input channels `ics`: entry `k` of tile
    /// `tiles.start + j`, channel `c` at `v[(k · IC + c) · wb + j]`, in chunks of [`CHUNK`]
    /// tiles; a run's last chunk also writes up to `CHUNK - 1` columns past the run (the next
    /// run's, written after it, or the row's slack: `wb >= tiles.len() + CHUNK - 1`).
    fn input(&self, n: usize, tiles: Range<usize>, ics: Range<usize>, v: Shared, wb: usize) {
        let (off, sn, sc, sh, sw) = self.xs;
        let maxlen = self.tw.min(tiles.len()).next_multiple_of(CHUNK);
        let mut raw = vec![0.0f32; 4 * (2 * maxlen + 2)];
        let mut split = vec![0.0f32; 8 * (maxlen + 1)];
        for c in ics {
            let base = off + n * sn + c * sc;
            for (ty, tx, len, col) in self.runs(tiles.clone()) {
                let width = 2 * len.next_multiple_of(CHUNK) + 2;
                let rows = &mut raw[..4 * width];
                // The 4 input rows the run reads, columns 2·tx - pl .., zeros where padded
                // (and past the run, to whole chunks).
                let c0 = (2 * tx) as isize - self.pl as isize;
                for (r, row) in rows.chunks_exact_mut(width).enumerate() {
                    let iy = (2 * ty + r) as isize - self.pt as isize;
                    if iy < 0 || iy >= self.ih as isize {
                        row.fill(0.0);
                        continue;
                    }
                    let used = 2 * len + 2;
                    let lo = (-c0).clamp(0, used as isize) as usize;
                    let hi = (self.iw as isize - c0).clamp(lo as isize, used as isize) as usize;
                    row[..lo].fill(0.0);
                    row[hi..].fill(0.0);
                    let start = base + iy as usize * sh;
                    let first = (c0 + lo as isize) as usize;
                    if sw == 1 {
                        row[lo..hi]
                            .copy_from_slice(&self.x[start + first..start + first + hi - lo]);
                    } else {
                        for (j, d) in row[lo..hi].iter_mut().enumerate() {
                            *d = self.x[start + (first + j) * sw];
                        }
                    }
                }
                // Entry k of channel c from column col of the block, len rounded up to CHUNK.
                // SAFETY: inside v (the caller's `16 · IC · wb`, wb >= tiles.len() + CHUNK -
                // 1, so the run's chunks stay in the row), disjoint rows, this call's alone.
                let dst: [&mut [f32]; NK] = std::array::from_fn(|k| unsafe {
                    std::slice::from_raw_parts_mut(
                        v.0.add((k * self.ic + c) * wb + col),
                        len.next_multiple_of(CHUNK),
                    )
                });
                input_run_widest(rows, width, len, &mut split, dst);
            }
        }
    }

    /// `M_k = U_k [ocs, IC] · V_k [IC, cols]` for every `k`: `m[(k · ocs.len() + o) · wb + j]`
    /// for output channel `ocs.start + o`, column `j`; `v` as [`Plan::input`] writes it.
    ///
    /// # Safety
    /// `v` holds `16 · IC · wb` f32 from a 64-byte boundary (`wb` a multiple of 16, `cols <=
    /// wb`); `m` holds `16 · ocs.len() · wb` f32, the caller's alone.
    unsafe fn multiply(
        &self,
        v: *const f32,
        wb: usize,
        cols: usize,
        ocs: Range<usize>,
        m: *mut f32,
    ) {
        let micro = &self.micro;
        let (mr, nr, lanes) = (micro.mr(), micro.nr, micro.lanes);
        let (ic, oc) = (self.ic, self.oc);
        let ocp = ocs.len();
        let blocks = depth_blocks(ic);
        for k in 0..NK {
            for (d, kr) in blocks.iter().enumerate() {
                for j0 in ocs.clone().step_by(nr) {
                    let rows = nr.min(ocs.end - j0);
                    let rhs = self.u.u[(k * oc + j0) * ic + kr.start..].as_ptr();
                    for s0 in (0..cols).step_by(mr) {
                        let w = mr.min(cols - s0);
                        // SAFETY: the kernel reads kr.len() steps of `w` lanes rounded up to
                        // whole vectors from column s0 of V_k's rows kr (64-byte aligned, inside
                        // v: the caller's contract), `rows` weights per step from U_k's rows
                        // j0.. (inside u), and writes `w` columns of `rows` rows of M_k from
                        // (j0 - ocs.start, s0): the caller's. kernel(v, r) exists for 1 <= v
                        // <= mr_vectors, 1 <= r <= nr, and `micro` was detected on this CPU.
                        unsafe {
                            let lhs = v.add((k * ic + kr.start) * wb + s0);
                            micro.tile(
                                w.div_ceil(lanes),
                                (w, rows, kr.len()),
                                (m.add((k * ocp + j0 - ocs.start) * wb + s0), wb as isize),
                                (lhs, wb as isize),
                                (rhs, 1, ic as isize),
                                d > 0,
                            );
                        }
                    }
                }
            }
        }
    }

    /// The output transform of image `n`'s tiles `tiles` for output channels `ocs` from `m`
    /// (as [`Plan::multiply`] writes it), into `out` (the `[N, OC, OH, OW]` output), then the
    /// epilogue on each finished row piece.
    ///
    /// # Safety
    /// `m` holds `16 · ocs.len() · wb` f32 (`wb` at least the tiles rounded up to [`CHUNK`]);
    /// the tiles' outputs of channels `ocs` in `out` are the caller's alone.
    unsafe fn output(
        &self,
        n: usize,
        tiles: Range<usize>,
        ocs: Range<usize>,
        m: *const f32,
        wb: usize,
        out: Shared,
    ) {
        let (oh, ow) = (self.oh, self.ow);
        let ocp = ocs.len();
        let cols = tiles.len().next_multiple_of(CHUNK);
        // The tiles' top and bottom output rows, two values per tile, in block order.
        let mut y = vec![0.0f32; 4 * cols];
        let (top, bottom) = y.split_at_mut(2 * cols);
        for (o, oc) in ocs.enumerate() {
            // SAFETY: entry k of channel o, `cols` <= wb columns: inside m.
            let src: [&[f32]; NK] = std::array::from_fn(|k| unsafe {
                std::slice::from_raw_parts(m.add((k * ocp + o) * wb), cols)
            });
            output_run_widest(src, top, bottom);
            let plane = (n * self.oc + oc) * oh * ow;
            for (ty, tx, len, col) in self.runs(tiles.clone()) {
                let x0 = 2 * tx;
                let width = (2 * len).min(ow - x0);
                for (y, from) in [(2 * ty, &*top), (2 * ty + 1, &*bottom)] {
                    if y >= oh {
                        continue;
                    }
                    // SAFETY: row y, columns x0..x0 + width of this channel: the tiles'
                    // outputs, the caller's alone.
                    let row = unsafe {
                        std::slice::from_raw_parts_mut(out.0.add(plane + y * ow + x0), width)
                    };
                    row.copy_from_slice(&from[2 * col..2 * col + width]);
                    self.epi.row((self.oc, oh * ow), n, oc, y * ow + x0, row);
                }
            }
        }
    }
}

/// Tiles per step of the transforms: one vector of 16 lanes (two with AVX2), a fixed size
/// so the loops compile to whole vectors with no scalar remainder.
const CHUNK: usize = 16;

/// `V = Bᵀ d B` of a run of `len` tiles (the body of [`input_run_widest`]), in chunks of
/// [`CHUNK`] tiles (the last one computing past the run): `rows` the 4 input rows the run
/// reads, `width` (`2 · len` rounded up to chunks, `+ 2`) columns each, zeros where padded;
/// `dst[k]` entry `k` of each tile. `Bᵀ` = `[[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0,
/// 1, 0, -1]]`: each row's even and odd columns split apart, the rows combined (`Bᵀ d`),
/// then the columns (`· B`).
/// Each `dst[k]` holds `len` rounded up to [`CHUNK`] f32.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lane j of 16 arrays at once
fn input_run(rows: &[f32], width: usize, len: usize, split: &mut [f32], mut dst: [&mut [f32]; NK]) {
    let n = len.next_multiple_of(CHUNK);
    // Each row's even and odd columns apart (tile j reads columns j and j + 1 of both).
    let h = n + 1;
    let (even, odd) = split[..8 * h].split_at_mut(4 * h);
    for r in 0..4 {
        let pairs = &rows[r * width..r * width + 2 * h].as_chunks::<2>().0[..h];
        let (e, o) = (&mut even[r * h..(r + 1) * h], &mut odd[r * h..(r + 1) * h]);
        for j in 0..h {
            e[j] = pairs[j][0];
            o[j] = pairs[j][1];
        }
    }
    let (e0, e1, e2, e3) = (&even[..h], &even[h..2 * h], &even[2 * h..3 * h], &even[3 * h..]);
    let (o0, o1, o2, o3) = (&odd[..h], &odd[h..2 * h], &odd[2 * h..3 * h], &odd[3 * h..]);
    for j0 in (0..n).step_by(CHUNK) {
        let mut out = [[0.0f32; CHUNK]; NK];
        let at = |v: &[f32]| -> [f32; CHUNK + 1] {
            v[j0..j0 + CHUNK + 1].try_into().expect("a chunk and one")
        };
        let (e0, e1, e2, e3) = (at(e0), at(e1), at(e2), at(e3));
        let (o0, o1, o2, o3) = (at(o0), at(o1), at(o2), at(o3));
        for j in 0..CHUNK {
            let (p, q) = (j, j + 1);
            // Bᵀ d, columns 0..4 of the tile: (even p, odd p, even q, odd q).
            let col = |a: f32, b: f32, c: f32, d: f32| [a - c, b + c, c - b, b - d];
            let c0 = col(e0[p], e1[p], e2[p], e3[p]);
            let c1 = col(o0[p], o1[p], o2[p], o3[p]);
            let c2 = col(e0[q], e1[q], e2[q], e3[q]);
            let c3 = col(o0[q], o1[q], o2[q], o3[q]);
            // (Bᵀ d) B: row i of Bᵀ d into entries 4i..4i + 4.
            for i in 0..4 {
                out[4 * i][j] = c0[i] - c2[i];
                out[4 * i + 1][j] = c1[i] + c2[i];
                out[4 * i + 2][j] = c2[i] - c1[i];
                out[4 * i + 3][j] = c1[i] - c3[i];
            }
        }
        for (d, vals) in dst.iter_mut().zip(&out) {
            d[j0..j0 + CHUNK].copy_from_slice(vals);
        }
    }
}

widest_isa! {
    /// [`input_run`] compiled for AVX-512F, else AVX2 + FMA, else the baseline.
    fn input_run_widest(
        rows: &[f32],
        width: usize,
        len: usize,
        split: &mut [f32],
        dst: [&mut [f32]; NK]
    ) => input_run
}

/// `Y = Aᵀ M A` of the tiles of a block (the body of [`output_run_widest`]), [`CHUNK`] at a
/// time: `src[k]` entry `k` of each tile (a whole number of chunks), `top` and `bottom` the
/// tiles' two output rows, two values per tile. `Aᵀ` = `[[1, 1, 1, 0], [0, 1, -1, -1]]`.
#[inline(always)]
fn output_run(src: [&[f32]; NK], top: &mut [f32], bottom: &mut [f32]) {
    let n = src[0].len();
    let [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15] =
        src.map(|m| &m[..n]);
    let top = &mut top.as_chunks_mut::<2>().0[..n];
    let bottom = &mut bottom.as_chunks_mut::<2>().0[..n];
    for j in 0..n {
        // Aᵀ M: two rows of 4.
        let a = [m0[j] + m4[j] + m8[j], m1[j] + m5[j] + m9[j], m2[j] + m6[j] + m10[j]];
        let a3 = m3[j] + m7[j] + m11[j];
        let b = [m4[j] - m8[j] - m12[j], m5[j] - m9[j] - m13[j], m6[j] - m10[j] - m14[j]];
        let b3 = m7[j] - m11[j] - m15[j];
        // (Aᵀ M) A.
        top[j] = [a[0] + a[1] + a[2], a[1] - a[2] - a3];
        bottom[j] = [b[0] + b[1] + b[2], b[1] - b[2] - b3];
    }
}

widest_isa! {
    /// [`output_run`] compiled for AVX-512F, else AVX2 + FMA, else the baseline.
    fn output_run_widest(
        src: [&[f32]; NK],
        top: &mut [f32],
        bottom: &mut [f32]
    ) => output_run
}

/// Blocks per thread at least for the threads to split an image's tile blocks; with fewer,
/// they share the input transform and split the output channels.
const MIN_BLOCKS_PER_THREAD: usize = 2;

/// The convolution of `g` (an [`eligible`] one) with `epilogue` by Winograd F(2x2, 3x3) (see
/// the module docs): `x` the `[N, IC, H, W]` input and its view, `u` the transformed weights,
/// the `bias` (`[OC]`) and `residual` (`[N, OC, OH, OW]`) operands the epilogue names, `out`
/// the `[N, OC, OH, OW]` output (row-major, overwritten).
///
/// # Errors
/// [`RuntimeError::Kernel`] when `g` is not a 3x3, stride 1, dilation 1, one-group 2-D
/// convolution, `u` was not transformed for its channels, a view does not have the
/// geometry's shape or leaves its buffer, an operand the epilogue needs is missing, `out` has
/// the wrong length, or this CPU has no micro-kernels.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    g: &ConvGeometry,
    epilogue: ConvEpilogue,
    (x, xv): Input<'_>,
    u: &WinogradWeights,
    bias: Option<Input<'_>>,
    residual: Option<Input<'_>>,
    out: &mut [f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    let bad = |what: String| RuntimeError::kernel(K, what);
    let fits = |v: &View, len: usize, shape: &[usize]| {
        v.shape == shape && v.strides.len() == shape.len() && v.extent().is_some_and(|e| e <= len)
    };
    let shape_ok = g.rank == 2
        && g.groups == 1
        && g.kernel == [1, 3, 3]
        && g.stride == [1, 1, 1]
        && g.dilation == [1, 1, 1];
    if !shape_ok || u.c_in != g.c_in || u.c_out != g.c_out {
        return Err(bad(format!(
            "weights for {}x{} channels, geometry {}",
            u.c_out,
            u.c_in,
            g.text()
        )));
    }
    if !fits(xv, x.len(), &g.input_shape()) {
        return Err(bad(format!("view {:?} does not fit {}", xv.shape, g.text())));
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
    let (oh, ow) = (g.output[1], g.output[2]);
    if out.len() != g.batch * g.c_out * oh * ow {
        return Err(bad(format!(
            "out has {} elements, expected {}",
            out.len(),
            g.batch * g.c_out * oh * ow
        )));
    }
    let Some(micro) = Micro::detect() else {
        return Err(bad("no AVX-512F or AVX2 + FMA micro-kernels on this CPU".into()));
    };
    if out.is_empty() {
        return Ok(());
    }
    let s = &xv.strides;
    let plan = Plan {
        x,
        xs: (xv.offset, s[0], s[1], s[2], s[3]),
        u,
        epi: Epilogue { epilogue, bias, residual },
        micro,
        ic: g.c_in,
        oc: g.c_out,
        ih: g.input[1],
        iw: g.input[2],
        oh,
        ow,
        pt: g.pad[1],
        pl: g.pad[2],
        tw: ow.div_ceil(2),
    };
    let (ic, oc, lanes) = (g.c_in, g.c_out, micro.lanes);
    let tiles = oh.div_ceil(2) * plan.tw;
    let flops = 2usize.saturating_mul(NK * ic).saturating_mul(oc).saturating_mul(tiles);
    let parallel = flops >= PAR_MIN_FLOPS && threads.count() > 1;
    let nt = if parallel { threads.count() } else { 1 };
    let tb_max = (BLOCK_BYTES / (4 * NK * (ic + oc)) / 16 * 16).clamp(64, 512);
    let dst = Shared(out.as_mut_ptr());
    if nt == 1 || tiles.div_ceil(tb_max) >= MIN_BLOCKS_PER_THREAD * nt {
        // Blocks of tiles, their count a multiple of the threads, as even as whole vectors
        // allow; each thread transforms, multiplies and finishes its own.
        let count = tiles.div_ceil(tb_max).next_multiple_of(nt);
        let tb = tiles.div_ceil(count).next_multiple_of(lanes);
        // V's and M's row stride: whole cache lines, with room for a run's last chunk.
        let wb = (tb + CHUNK - 1).next_multiple_of(16);
        let blocks = tiles.div_ceil(tb);
        let parts = threads.parts(blocks, 1);
        #[allow(clippy::single_range_in_vec_init)] // one part: every block
        let parts = if parallel { parts } else { vec![0..blocks] };
        for n in 0..g.batch {
            let _ = threads.run_parts::<()>(parts.len(), |i| {
                with_buffer(&PRIVATE, NK * (ic + oc) * wb, |buf| {
                    let (v, m) = buf.split_at_mut(NK * ic * wb);
                    let (v, m) = (Shared(v.as_mut_ptr()), m.as_mut_ptr());
                    for b in parts[i].clone() {
                        let t = b * tb..((b + 1) * tb).min(tiles);
                        plan.input(n, t.clone(), 0..ic, v, wb);
                        // SAFETY: v holds 16·IC·wb f32 from a 64-byte boundary (the buffer is
                        // aligned, wb a multiple of 16), m 16·OC·wb, this thread's own; block
                        // b's tiles are this part's alone.
                        unsafe {
                            plan.multiply(v.0, wb, t.len(), 0..oc, m);
                            plan.output(n, t, 0..oc, m, wb, dst);
                        }
                    }
                });
                Ok(())
            });
        }
        return Ok(());
    }
    // Few tiles: one shared V of all the image's tiles (the threads transform a share of the
    // input channels each), then the output channels split in whole groups of NR.
    let wb = (tiles + CHUNK - 1).next_multiple_of(16);
    let ics = threads.parts(ic, 1);
    let ocs = threads.parts(oc, micro.nr);
    with_buffer(&SHARED, NK * ic * wb, |v| {
        let v = Shared(v.as_mut_ptr());
        for n in 0..g.batch {
            let _ = threads.run_parts::<()>(ics.len(), |i| {
                plan.input(n, 0..tiles, ics[i].clone(), v, wb);
                Ok(())
            });
            let _ = threads.run_parts::<()>(ocs.len(), |i| {
                #[allow(clippy::redundant_locals)] // the whole `Shared`, not its raw pointer
                let v = v;
                let ocs = ocs[i].clone();
                with_buffer(&PRIVATE, NK * ocs.len() * wb, |m| {
                    // SAFETY: v holds 16·IC·wb f32 from a 64-byte boundary, written above and
                    // only read now; m is this thread's own; channels `ocs` are this part's.
                    unsafe {
                        plan.multiply(v.0, wb, tiles, ocs.clone(), m.as_mut_ptr());
                        plan.output(n, 0..tiles, ocs, m.as_ptr(), wb, dst);
                    }
                });
                Ok(())
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use lumen_compiler::UnaryOp;
    use lumen_compiler::conv::{ConvSpec, conv_f64};

    use super::*;

    /// Pseudo-random values in [-1, 1).
    fn values(seed: u32, n: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// `(batch, ic, oc, [h, w], pads [(top, bottom), (left, right)])`: output sizes 1, 2, 3,
    /// 7, 15, 56 and 80 along each axis, odd and even, pads 0, 1 and asymmetric, channels off
    /// every multiple of 6 and 16, a depth past one depth block (IC > 512), a batch of 2.
    type Case = (usize, usize, usize, [usize; 2], [(usize, usize); 2]);
    const CASES: &[Case] = &[
        (1, 3, 5, [3, 3], [(0, 0), (0, 0)]),
        (2, 7, 9, [2, 4], [(1, 1), (1, 1)]),
        (1, 17, 13, [3, 5], [(0, 1), (1, 0)]),
        (2, 16, 16, [7, 7], [(1, 1), (1, 1)]),
        (1, 20, 25, [15, 9], [(1, 1), (0, 0)]),
        (1, 70, 50, [15, 15], [(1, 1), (1, 1)]),
        (1, 24, 20, [56, 56], [(1, 1), (1, 1)]),
        (2, 13, 19, [17, 57], [(0, 0), (2, 1)]),
        (1, 17, 13, [80, 80], [(1, 1), (1, 1)]),
        (1, 520, 7, [5, 6], [(1, 1), (1, 1)]),
        (1, 33, 31, [1, 80], [(1, 1), (1, 0)]),
    ];

    fn geometry(&(n, ic, oc, [h, w], pads): &Case) -> ConvGeometry {
        let spec =
            ConvSpec { strides: vec![1, 1], dilations: vec![1, 1], pads: pads.to_vec(), groups: 1 };
        ConvGeometry::new(&spec, &[n, ic, h, w], &[oc, ic, 3, 3]).unwrap()
    }

    /// Winograd against the f64 definition over [`CASES`], each with no epilogue, bias + ReLU
    /// and bias + residual + SiLU, the input read through a view with padded channels and an
    /// offset; within 1e-4 · max(1, |ref|), bit-identical on 1, 2 and 3 threads.
    #[test]
    fn winograd_matches_the_definition_on_every_split() {
        if Micro::detect().is_none() {
            return;
        }
        let teams =
            [Threads::single(), Threads::new(Some(2)).unwrap(), Threads::new(Some(3)).unwrap()];
        let epilogues = [
            ConvEpilogue::default(),
            ConvEpilogue { bias: true, residual: false, activation: Some(UnaryOp::Relu) },
            ConvEpilogue { bias: true, residual: true, activation: Some(UnaryOp::Silu) },
        ];
        let mut worst = 0.0f64;
        for (i, case) in CASES.iter().enumerate() {
            let g = geometry(case);
            let (n, ic, oc) = (g.batch, g.c_in, g.c_out);
            let plane = g.input[1] * g.input[2];
            // Channels stored 3 apart past the plane, from element 5: a strided view.
            let (sc, off) = (plane + 3, 5);
            let xs = values(i as u32, off + n * ic * sc);
            let xv = View {
                shape: g.input_shape(),
                strides: vec![ic * sc, sc, g.input[2], 1],
                offset: off,
            };
            let w = values(100 + i as u32, oc * ic * 9);
            let bias = values(200 + i as u32, oc);
            let res = values(300 + i as u32, g.batch * oc * g.output_positions());
            let u = WinogradWeights::transform(&g, &w).unwrap();
            let bv = View::contiguous(&[oc]);
            let rv = View::contiguous(&g.output_shape());
            for epi in epilogues {
                let want = conv_f64(
                    &g,
                    epi,
                    |j| {
                        let (c, p) = (j / plane, j % plane);
                        f64::from(xs[off + c * sc + p])
                    },
                    |j| f64::from(w[j]),
                    |o| f64::from(bias[o]),
                    |o| f64::from(res[o]),
                );
                let mut first: Option<Vec<f32>> = None;
                for t in &teams {
                    let mut out = vec![f32::NAN; want.len()];
                    conv(
                        &g,
                        epi,
                        (&xs, &xv),
                        &u,
                        epi.bias.then_some((&bias[..], &bv)),
                        epi.residual.then_some((&res[..], &rv)),
                        &mut out,
                        t,
                    )
                    .unwrap();
                    for (j, (&got, &r)) in out.iter().zip(&want).enumerate() {
                        let err = (f64::from(got) - r).abs() / r.abs().max(1.0);
                        worst = worst.max(err);
                        assert!(err <= 1e-4, "{} {epi}: [{j}] {got} vs {r}", g.text());
                    }
                    match &first {
                        None => first = Some(out),
                        Some(f) => assert!(
                            f.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{} {epi}: bits differ on {} threads",
                            g.text(),
                            t.count()
                        ),
                    }
                }
            }
        }
        eprintln!("winograd: max error {worst:.3e} x max(1, |ref|)");
    }

    /// Winograd and the dense path ([`crate::conv::conv`]) agree within 1e-4 · max(1, |dense|)
    /// on the shapes it is routed to (ResNet's and YOLOv8n's 3x3s, scaled down).
    #[test]
    fn winograd_agrees_with_the_dense_path() {
        let threads = Threads::new(Some(2)).unwrap();
        for (i, case) in [
            (1, 64, 64, [28, 28], [(1, 1), (1, 1)]),
            (1, 16, 32, [40, 40], [(1, 1), (1, 1)]),
            (2, 32, 16, [9, 9], [(1, 1), (1, 1)]),
        ]
        .iter()
        .enumerate()
        {
            let g = geometry(case);
            assert!(eligible(&g) || Micro::detect().is_none(), "{}", g.text());
            let x = values(400 + i as u32, g.batch * g.c_in * g.input[1] * g.input[2]);
            let w = values(500 + i as u32, g.c_out * g.c_in * 9);
            let bias = values(600 + i as u32, g.c_out);
            let (xv, wv, bv) = (
                View::contiguous(&g.input_shape()),
                View::contiguous(&g.weight_shape()),
                View::contiguous(&[g.c_out]),
            );
            let epi = ConvEpilogue { bias: true, residual: false, activation: Some(UnaryOp::Silu) };
            let len = g.batch * g.c_out * g.output_positions();
            let mut dense = vec![0.0f32; len];
            let mut work = vec![0.0f32; g.workspace_bytes() / 4 + 16];
            crate::conv::conv(
                &g,
                epi,
                (&x, &xv),
                (&w, &wv),
                Some((&bias, &bv)),
                None,
                &mut dense,
                &mut work,
                &threads,
            )
            .unwrap();
            let Ok(u) = WinogradWeights::transform(&g, &w) else { panic!("transform") };
            let mut wino = vec![0.0f32; len];
            if Micro::detect().is_none() {
                continue;
            }
            conv(&g, epi, (&x, &xv), &u, Some((&bias, &bv)), None, &mut wino, &threads).unwrap();
            for (a, b) in wino.iter().zip(&dense) {
                assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{}: {a} vs {b}", g.text());
            }
        }
    }
}
