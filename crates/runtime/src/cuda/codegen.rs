//! CUDA C for every NVRTC kernel of the CUDA runtime, generated from the op table
//! ([`ElemOp::cuda_fn`], [`ReduceOp::cuda_identity`], [`ReduceOp::cuda_combine`],
//! [`ReduceOp::cuda_accumulator`]): a new elementwise op or reduction needs no CUDA file.
//!
//! Kernels read every operand through its view (shape, strides, offset; a broadcast axis has
//! stride 0) with 64-bit index math and write their output row-major. The views are kernel
//! *arguments*, not constants baked into the source: one kernel per (op, rank) rather than one
//! per distinct view, so a program's kernels compile once per runtime whatever its shapes, and
//! the NVRTC test can compile the whole finite set. Each view travels by value in a small
//! struct `lumen_views<R, N>` of 64-bit words ([`pack_views`]): `len`, `shape[R]`,
//! `offset[N]`, `strides[N][R]`. Before packing, the host merges axes that every view walks
//! contiguously and drops length-1 axes ([`collapse`]), so a whole-buffer op is rank 1 and a
//! broadcast bias add rank 2, whatever the tensor's rank; views of more than [`MAX_RANK`]
//! axes after that are refused at prepare.
//!
//! The kernel families ([`KernelSpec`]):
//! - `map`: `out[i] = op(in0 at i, in1 at i, in2 at i)`, a grid-stride loop, one per
//!   (elementwise op, rank);
//! - `copy`: `out view at i = in view at i`, both strided (concat writes each operand into its
//!   slice of the output with one copy), one per rank;
//! - `reduce`: sum or max of a view's last axis (the host moves the reduced axis last), in two
//!   forms: `row`, one block per output row and a shared-memory tree over the row (for a
//!   contiguous axis, or few rows), and `strided`, one thread per output element walking the
//!   axis (many rows, a strided axis). A sum accumulates in the op table's accumulator type
//!   (`double` for sum: the CPU sums in f64 too), each thread over elements `t, t + 256, ...`,
//!   then the tree; not bit-identical to the CPU's sequential order, within tolerance. Max
//!   propagates NaN like the CPU (the table's combine step); between -0 and +0 the kept one may
//!   differ from the CPU's "earlier element".
//! - `gather` / `gather_report`: an embedding lookup; an id outside `0..vocab` is never read
//!   through: its output row is NaN and the smallest such row index goes into a device error
//!   record (`atomicMin`); the report kernel then stores that row's id and its element offset in
//!   the ids buffer, which the host reads after the execute's one synchronize and returns as
//!   [`crate::RuntimeError::IndexOutOfRange`], exactly as the CPU reports the first bad id.
//! - `conv`: a direct N-D convolution, one thread per output element (a grid-stride loop over
//!   `[N, OC, *out]`), looping over the input channels of its group and every kernel tap (taps
//!   that land in the padding are skipped), accumulating in `float` with `fmaf` in the order
//!   channel, tap axis 0, 1, 2; then the epilogue in the same thread: `+ bias[oc]`, `+
//!   residual`, the activation (the op table's device function). Every operand is read through
//!   its strides (x and the residual by five: n, c and three spatial; w by five: oc, c/g and
//!   three kernel axes; the bias by one), and the geometry and those strides are a by-value
//!   argument ([`ConvArgs`]), so one kernel per epilogue serves every geometry. The CPU's
//!   im2col workspace is not used.
//! - `max_pool`: a max pool, one thread per output element like `conv` (the same
//!   [`ConvArgs`], its weight and epilogue words unused), folding the window's taps in the
//!   order axis 0, 1, 2 with the CPU's step (`v > acc || v != v`: the first of equal values
//!   stays, a NaN stays), padded taps skipped, a NaN written as the canonical `0x7fc00000`:
//!   the CPU's bits, `-0` against `+0` included.
//! - `take`: `out[.., j, ..] = x[.., idx[j], ..]` (or the fill for a negative index), one
//!   thread per output element, x through its view (the picked axis' stride applied to the
//!   index, [`TakeArgs`]), i32 or i64 indices through their 1-D view. Threads `j < picks` also
//!   check index `j`: one at or past the axis' extent goes into the error record like a
//!   gather's (`atomicMin` of `j`, the element is NaN and never read), and the `gather_report`
//!   kernel at rank 1 stores the index and its element offset for the host.
//! - `cast`: `out[i] = convert(in view at i)`, one per (from, to, rank) over f32, i32 and i64
//!   (an i64 is two 32-bit slab words, low then high: read and written as one `long long`),
//!   the output contiguous in `to`'s elements. The conversions are the prelude's
//!   `lumen_cast_*` functions, written out to follow [`lumen_compiler::DType::cast_f64`]'s
//!   rule on every input rather than left to C's undefined out-of-range conversions: float to
//!   integer truncates toward zero, saturates at the type's range and maps NaN to 0; i32 to
//!   f32 rounds to nearest; i64 to f32 rounds to the nearest double and then to the nearest
//!   float, as the CPU's f64 path does; i64 to i32 saturates; the same type copies each
//!   element's bits (a NaN's payload included): the typed copy that makes an integer view
//!   contiguous.
//! - `arg`: argmax or argmin of a view's last axis (the host moves the searched axis last,
//!   as for `reduce`), one thread per output element walking the axis, written as an i64:
//!   the first of equal elements (the last with `last`), the first NaN wins outright
//!   ([`lumen_compiler::ops::arg_index`]), 0 for an empty axis.
//! - `topk`: the positions of the `k` largest (or smallest) elements of a view's axis (the
//!   host moves it last, as for `reduce`), one thread per output row, written as i64 in
//!   [`lumen_compiler::ops::top_k`]'s order: a selection without memory, `k` passes over the
//!   row, pass `j` keeping the first element (in the order) that comes after pass `j - 1`'s.
//!   The order is the prelude's `lumen_topk_before`: a NaN before every number (largest) or
//!   after every number (smallest), numbers by value (`-0 == +0`), equal ones and NaNs by
//!   position. `O(k · extent)` per row; any `k` up to the axis' length.
//! - `gather_elements`: `out[i] = data[i with axis replaced by indices[i]]`, one thread per
//!   output element, data and the i32 or i64 indices through their views over the output's
//!   shape (data's with the picked axis' stride 0: the kernel adds the index times it); a
//!   negative index counts from the axis' end. An index outside `-extent..extent` is never
//!   read through: its element is NaN and `atomicMin` puts the output position into the
//!   error record like a gather's; the `gather_report` kernel over the indices' view then
//!   stores the index and its element offset.
//! - `scatter_elements`: the second of a scatter's launches (the first copies the data into
//!   the output with the same-type `cast` kernel, the typed copy), one thread per update:
//!   updates, indices and the output through three views over the updates' shape (the
//!   output's with the addressed axis' stride 0: the kernel adds the index times it); a
//!   negative index counts from the axis' end, one still outside the axis is never written
//!   through and goes into the error record like a gather_elements' (reported by
//!   `gather_report` over the indices' view). One kernel per (data type: f32, i32, i64; index
//!   type; rank), the reduction a by-value argument ([`ScatterReduction::code`]). With no
//!   reduction the update is a plain store: of several updates on one element an unspecified
//!   one wins (the CPU keeps the last in row-major order). A reduction is an `atomicCAS` loop
//!   on the element's 32 or 64 bits applying the op table's step
//!   ([`ScatterReduction::cuda_combine`], in the prelude's `lumen_scatter_*` functions, added
//!   to a module only with a scatter kernel), so several updates on one element all land, in
//!   an unspecified order: exact for max, min and integer sums and products (wrapping), within
//!   rounding of the CPU's row-major order for float sums and products.

use std::fmt::Write as _;

use lumen_compiler::conv::{ConvEpilogue, ConvGeometry, MAX_SPATIAL};
use lumen_compiler::{DType, ElemOp, IntOp, ReduceOp, ScatterReduction, UnaryOp, View};

/// Most axes a kernel view has after [`collapse`].
pub const MAX_RANK: usize = 6;

/// Threads per block of every kernel (a power of two: the reduction tree halves it).
pub const BLOCK: u32 = 256;

/// Most blocks of a grid-stride launch: enough to fill any current GPU.
pub const MAX_GRID: u64 = 65_535;

/// The two reduction forms (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceForm {
    /// One block per output row, a shared-memory tree.
    Row,
    /// One thread per output element, a loop along the (strided) axis.
    Strided,
}

impl ReduceForm {
    /// `row` or `strided`.
    pub fn name(self) -> &'static str {
        match self {
            ReduceForm::Row => "row",
            ReduceForm::Strided => "strided",
        }
    }
}

/// One generated kernel. `rank` is the view rank after [`collapse`], `1..=MAX_RANK` (a
/// reduction's rank is that of its output rows, `1..MAX_RANK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelSpec {
    /// `lumen_map_{op}_r{rank}(float* out, const float* in0.., lumen_views<rank, arity>)`.
    Map {
        /// The elementwise op.
        op: ElemOp,
        /// View rank.
        rank: usize,
    },
    /// `lumen_int_map_{op}_{i32|i64}_r{rank}(T* out, const T* in0.., lumen_views<rank,
    /// arity>)`: an exact integer op ([`IntOp`]) on operands and output of one integer type
    /// `T` (`int`, `long long`), calling the op table's `lumen_int_{op}_{dtype}`.
    IntMap {
        /// The integer op.
        op: IntOp,
        /// The operands' and output's type: i32 or i64.
        dtype: DType,
        /// View rank.
        rank: usize,
    },
    /// `lumen_copy_r{rank}(float* out, const float* in, lumen_views<rank, 2>)`: view 0 is the
    /// input, view 1 the output.
    Copy {
        /// View rank.
        rank: usize,
    },
    /// `lumen_reduce_{op}_{form}_r{rank}(float* out, const float* in, lumen_views<rank, 1>
    /// rows, u64 extent, u64 stride)`.
    Reduce {
        /// Sum or max.
        op: ReduceOp,
        /// Block per row or thread per row.
        form: ReduceForm,
        /// Rank of the output rows' view.
        rank: usize,
    },
    /// `lumen_gather_{i32|i64}_r{rank}(float* out, const float* table, const void* ids, u64*
    /// err, lumen_views<rank, 1> ids_view, lumen_table table)`.
    Gather {
        /// i64 ids (else i32).
        wide: bool,
        /// Rank of the ids' view.
        rank: usize,
    },
    /// `lumen_gather_report_{i32|i64}_r{rank}(const void* ids, u64* err, lumen_views<rank, 1>)`.
    /// A take's report is this kernel at rank 1 over its indices' view.
    GatherReport {
        /// i64 ids (else i32).
        wide: bool,
        /// Rank of the ids' view.
        rank: usize,
    },
    /// `lumen_conv_{epilogue}(float* out, const float* x, const float* w[, const float* bias]
    /// [, const float* residual], lumen_conv g)`: one per epilogue (`{epilogue}` is its text
    /// with `_` for `+`: `none`, `bias_relu`, `bias_residual_silu`), every geometry.
    Conv {
        /// What the kernel applies after the sum (the activation must be one for which
        /// [`UnaryOp::is_activation`]).
        epilogue: ConvEpilogue,
    },
    /// `lumen_max_pool(float* out, const float* x, lumen_conv g)`: every geometry.
    MaxPool,
    /// `lumen_take_{i32|i64}_r{rank}(float* out, const float* x, const void* indices, u64* err,
    /// lumen_views<rank, 1> x_view, lumen_take t)`.
    Take {
        /// i64 indices (else i32).
        wide: bool,
        /// Rank of x's view over the output's shape (after [`collapse`]).
        rank: usize,
    },
    /// `lumen_cast_{from}_{to}_r{rank}(void* out, const void* in, lumen_views<rank, 1>)`: the
    /// input read through its view, converted, written contiguous.
    Cast {
        /// The input's element type (one of [`CAST_TYPES`]).
        from: DType,
        /// The output's element type (one of [`CAST_TYPES`]).
        to: DType,
        /// Rank of the input's view (after [`collapse`]).
        rank: usize,
    },
    /// `lumen_{argmax|argmin}[_last]_r{rank}(long long* out, const float* in,
    /// lumen_views<rank, 1> rows, u64 extent, u64 stride)`.
    Arg {
        /// Argmax (else argmin).
        max: bool,
        /// The last of equal elements (else the first).
        last: bool,
        /// Rank of the output rows' view.
        rank: usize,
    },
    /// `lumen_topk_{largest|smallest}_r{rank}(long long* out, const float* in,
    /// lumen_views<rank, 1> rows, lumen_topk t)`.
    TopK {
        /// The largest first (else the smallest first).
        largest: bool,
        /// Rank of the output rows' view.
        rank: usize,
    },
    /// `lumen_gather_elements_{i32|i64}_r{rank}(float* out, const float* data, const void*
    /// indices, u64* err, lumen_views<rank, 2> v, unsigned long long extent, unsigned long long
    /// stride)`: view 0 is data's (the picked axis' stride 0), view 1 the indices'.
    GatherElements {
        /// i64 indices (else i32).
        wide: bool,
        /// Rank of the views over the output's shape (after [`collapse`]).
        rank: usize,
    },
    /// `lumen_scatter_elements_{f32|i32|i64}_{i32|i64}_r{rank}(T* out, const T* updates, const
    /// void* indices, u64* err, lumen_views<rank, 3> v, unsigned long long extent, unsigned
    /// long long stride, unsigned long long reduction)`: view 0 is the updates', view 1 the
    /// indices', view 2 the output's (the addressed axis' stride 0); `reduction` is
    /// [`ScatterReduction::code`].
    ScatterElements {
        /// The data's (and updates' and output's) element type (one of [`CAST_TYPES`]).
        dtype: DType,
        /// i64 indices (else i32).
        wide: bool,
        /// Rank of the views over the updates' shape (after [`collapse`]).
        rank: usize,
    },
}

/// The element types an integer map kernel computes on ([`IntOp::takes`]), in kernel order.
pub const INT_TYPES: [DType; 2] = [DType::I32, DType::I64];

/// The element types a cast kernel converts between, in kernel order.
pub const CAST_TYPES: [DType; 3] = [DType::F32, DType::I32, DType::I64];

impl KernelSpec {
    /// The kernel family: `map`, `int_map`, `copy`, `reduce`, `gather`, `gather_report`, `conv`,
    /// `max_pool`, `take`,
    /// `cast`, `arg`, `topk`, `gather_elements`, `scatter_elements`.
    pub fn family(&self) -> &'static str {
        match self {
            KernelSpec::Map { .. } => "map",
            KernelSpec::IntMap { .. } => "int_map",
            KernelSpec::Copy { .. } => "copy",
            KernelSpec::Reduce { .. } => "reduce",
            KernelSpec::Gather { .. } => "gather",
            KernelSpec::GatherReport { .. } => "gather_report",
            KernelSpec::Conv { .. } => "conv",
            KernelSpec::MaxPool => "max_pool",
            KernelSpec::Take { .. } => "take",
            KernelSpec::Cast { .. } => "cast",
            KernelSpec::Arg { .. } => "arg",
            KernelSpec::TopK { .. } => "topk",
            KernelSpec::GatherElements { .. } => "gather_elements",
            KernelSpec::ScatterElements { .. } => "scatter_elements",
        }
    }

    /// The `extern "C"` entry point.
    pub fn name(&self) -> String {
        let id = |wide: bool| if wide { "i64" } else { "i32" };
        match *self {
            KernelSpec::Map { op, rank } => format!("lumen_map_{}_r{rank}", op.name()),
            KernelSpec::IntMap { op, dtype, rank } => {
                format!("lumen_int_map_{}_{dtype}_r{rank}", op.name())
            }
            KernelSpec::Copy { rank } => format!("lumen_copy_r{rank}"),
            KernelSpec::Reduce { op, form, rank } => {
                format!("lumen_reduce_{}_{}_r{rank}", op.name(), form.name())
            }
            KernelSpec::Gather { wide, rank } => format!("lumen_gather_{}_r{rank}", id(wide)),
            KernelSpec::GatherReport { wide, rank } => {
                format!("lumen_gather_report_{}_r{rank}", id(wide))
            }
            KernelSpec::Conv { epilogue } => {
                format!("lumen_conv_{}", epilogue.to_string().replace('+', "_"))
            }
            KernelSpec::MaxPool => "lumen_max_pool".to_string(),
            KernelSpec::Take { wide, rank } => format!("lumen_take_{}_r{rank}", id(wide)),
            KernelSpec::Cast { from, to, rank } => format!("lumen_cast_{from}_{to}_r{rank}"),
            KernelSpec::Arg { max, last, rank } => format!(
                "lumen_arg{}{}_r{rank}",
                if max { "max" } else { "min" },
                if last { "_last" } else { "" }
            ),
            KernelSpec::TopK { largest, rank } => {
                format!("lumen_topk_{}_r{rank}", if largest { "largest" } else { "smallest" })
            }
            KernelSpec::GatherElements { wide, rank } => {
                format!("lumen_gather_elements_{}_r{rank}", id(wide))
            }
            KernelSpec::ScatterElements { dtype, wide, rank } => {
                format!("lumen_scatter_elements_{dtype}_{}_r{rank}", id(wide))
            }
        }
    }

    /// The kernel's source, without the shared prelude ([`module_source`] adds it and each
    /// op's device function once).
    fn body(&self) -> String {
        let name = self.name();
        match *self {
            KernelSpec::Map { op, rank } => {
                let n = op.arity();
                let ins: String = (0..n).map(|k| format!(", const float* in{k}")).collect();
                let args: Vec<String> = (0..3)
                    .map(|k| if k < n { format!("in{k}[off[{k}]]") } else { "0.0f".into() })
                    .collect();
                format!(
                    "extern \"C\" __global__ void {name}(float* out{ins}, lumen_views<{rank}, {n}> v) {{\n\
                     \x20   LUMEN_GRID_STRIDE(i, v.len) {{\n\
                     \x20       unsigned long long off[{n}];\n\
                     \x20       lumen_offsets(v, i, off);\n\
                     \x20       out[i] = lumen_op_{op}({a});\n\
                     \x20   }}\n}}\n",
                    op = op.name(),
                    a = args.join(", ")
                )
            }
            KernelSpec::IntMap { op, dtype, rank } => {
                let (n, t) = (op.arity(), c_type(dtype));
                let ins: String = (0..n).map(|k| format!(", const {t}* in{k}")).collect();
                let args: Vec<String> = (0..2)
                    .map(|k| if k < n { format!("in{k}[off[{k}]]") } else { "0".into() })
                    .collect();
                format!(
                    "extern \"C\" __global__ void {name}({t}* out{ins}, lumen_views<{rank}, {n}> v) {{\n\
                     \x20   LUMEN_GRID_STRIDE(i, v.len) {{\n\
                     \x20       unsigned long long off[{n}];\n\
                     \x20       lumen_offsets(v, i, off);\n\
                     \x20       out[i] = lumen_int_{op}_{dtype}({a});\n\
                     \x20   }}\n}}\n",
                    op = op.name(),
                    a = args.join(", ")
                )
            }
            KernelSpec::Copy { rank } => format!(
                "extern \"C\" __global__ void {name}(float* out, const float* in, lumen_views<{rank}, 2> v) {{\n\
                 \x20   LUMEN_GRID_STRIDE(i, v.len) {{\n\
                 \x20       unsigned long long off[2];\n\
                 \x20       lumen_offsets(v, i, off);\n\
                 \x20       out[off[1]] = in[off[0]];\n\
                 \x20   }}\n}}\n"
            ),
            KernelSpec::Reduce { op, form, rank } => {
                let acc = op.cuda_accumulator();
                let (ident, combine) = (op.cuda_identity(), op.cuda_combine());
                match form {
                    ReduceForm::Row => format!(
                        "extern \"C\" __global__ void {name}(float* out, const float* in, lumen_views<{rank}, 1> rows,\n\
                         \x20   unsigned long long extent, unsigned long long stride) {{\n\
                         \x20   __shared__ {acc} part[{BLOCK}];\n\
                         \x20   for (unsigned long long r = blockIdx.x; r < rows.len; r += gridDim.x) {{\n\
                         \x20       unsigned long long off[1];\n\
                         \x20       lumen_offsets(rows, r, off);\n\
                         \x20       {acc} acc = {ident};\n\
                         \x20       for (unsigned long long j = threadIdx.x; j < extent; j += blockDim.x) {{\n\
                         \x20           {acc} x = in[off[0] + j * stride];\n\
                         \x20           acc = {combine};\n\
                         \x20       }}\n\
                         \x20       part[threadIdx.x] = acc;\n\
                         \x20       __syncthreads();\n\
                         \x20       for (unsigned int h = blockDim.x / 2; h > 0; h >>= 1) {{\n\
                         \x20           if (threadIdx.x < h) {{\n\
                         \x20               {acc} acc = part[threadIdx.x];\n\
                         \x20               {acc} x = part[threadIdx.x + h];\n\
                         \x20               part[threadIdx.x] = {combine};\n\
                         \x20           }}\n\
                         \x20           __syncthreads();\n\
                         \x20       }}\n\
                         \x20       if (threadIdx.x == 0) out[r] = (float)part[0];\n\
                         \x20       __syncthreads();\n\
                         \x20   }}\n}}\n"
                    ),
                    ReduceForm::Strided => format!(
                        "extern \"C\" __global__ void {name}(float* out, const float* in, lumen_views<{rank}, 1> rows,\n\
                         \x20   unsigned long long extent, unsigned long long stride) {{\n\
                         \x20   LUMEN_GRID_STRIDE(r, rows.len) {{\n\
                         \x20       unsigned long long off[1];\n\
                         \x20       lumen_offsets(rows, r, off);\n\
                         \x20       {acc} acc = {ident};\n\
                         \x20       for (unsigned long long j = 0; j < extent; ++j) {{\n\
                         \x20           {acc} x = in[off[0] + j * stride];\n\
                         \x20           acc = {combine};\n\
                         \x20       }}\n\
                         \x20       out[r] = (float)acc;\n\
                         \x20   }}\n}}\n"
                    ),
                }
            }
            KernelSpec::Gather { wide, rank } => {
                let id_type = if wide { "long long" } else { "int" };
                format!(
                    "extern \"C\" __global__ void {name}(float* out, const float* table, const void* ids,\n\
                     \x20   unsigned long long* err, lumen_views<{rank}, 1> v, lumen_table t) {{\n\
                     \x20   LUMEN_GRID_STRIDE(i, v.len * t.dim) {{\n\
                     \x20       unsigned long long row = i / t.dim, col = i - row * t.dim;\n\
                     \x20       unsigned long long off[1];\n\
                     \x20       lumen_offsets(v, row, off);\n\
                     \x20       long long id = (long long)((const {id_type}*)ids)[off[0]];\n\
                     \x20       if (id < 0 || (unsigned long long)id >= t.vocab) {{\n\
                     \x20           if (col == 0) atomicMin(err, row);\n\
                     \x20           out[i] = __int_as_float(0x7fc00000);\n\
                     \x20       }} else {{\n\
                     \x20           out[i] = table[t.offset + (unsigned long long)id * t.row_stride + col * t.col_stride];\n\
                     \x20       }}\n\
                     \x20   }}\n}}\n"
                )
            }
            KernelSpec::GatherReport { wide, rank } => {
                let id_type = if wide { "long long" } else { "int" };
                format!(
                    "extern \"C\" __global__ void {name}(const void* ids, unsigned long long* err,\n\
                     \x20   lumen_views<{rank}, 1> v) {{\n\
                     \x20   if (blockIdx.x != 0 || threadIdx.x != 0 || err[0] >= v.len) return;\n\
                     \x20   unsigned long long off[1];\n\
                     \x20   lumen_offsets(v, err[0], off);\n\
                     \x20   err[1] = (unsigned long long)(long long)((const {id_type}*)ids)[off[0]];\n\
                     \x20   err[2] = off[0];\n}}\n"
                )
            }
            KernelSpec::Conv { epilogue } => conv_body(&name, epilogue),
            KernelSpec::MaxPool => max_pool_body(&name),
            KernelSpec::Take { wide, rank } => {
                let id_type = if wide { "long long" } else { "int" };
                format!(
                    "extern \"C\" __global__ void {name}(float* out, const float* x, const void* indices,\n\
                     \x20   unsigned long long* err, lumen_views<{rank}, 1> v, lumen_take t) {{\n\
                     \x20   const {id_type}* idx = (const {id_type}*)indices;\n\
                     \x20   unsigned long long n = v.len > t.picks ? v.len : t.picks;\n\
                     \x20   LUMEN_GRID_STRIDE(i, n) {{\n\
                     \x20       if (i < t.picks) {{\n\
                     \x20           long long id = (long long)idx[t.idx_offset + i * t.idx_stride];\n\
                     \x20           if (id >= 0 && (unsigned long long)id >= t.extent) atomicMin(err, i);\n\
                     \x20       }}\n\
                     \x20       if (i < v.len) {{\n\
                     \x20           unsigned long long j = (i / t.inner) % t.picks;\n\
                     \x20           long long id = (long long)idx[t.idx_offset + j * t.idx_stride];\n\
                     \x20           float y;\n\
                     \x20           if (id < 0) {{\n\
                     \x20               y = __int_as_float((int)(unsigned int)t.fill);\n\
                     \x20           }} else if ((unsigned long long)id >= t.extent) {{\n\
                     \x20               y = __int_as_float(0x7fc00000);\n\
                     \x20           }} else {{\n\
                     \x20               unsigned long long off[1];\n\
                     \x20               lumen_offsets(v, i, off);\n\
                     \x20               y = x[off[0] + (unsigned long long)id * t.stride];\n\
                     \x20           }}\n\
                     \x20           out[i] = y;\n\
                     \x20       }}\n\
                     \x20   }}\n}}\n"
                )
            }
            KernelSpec::Cast { from, to, rank } => {
                // The same type copies the element's bits; otherwise the prelude's conversion.
                let (src, dst, convert) = if from == to {
                    let bits =
                        if from == DType::I64 { "unsigned long long" } else { "unsigned int" };
                    (bits, bits, String::new())
                } else {
                    (c_type(from), c_type(to), format!("lumen_cast_{from}_{to}"))
                };
                format!(
                    "extern \"C\" __global__ void {name}(void* out, const void* in, lumen_views<{rank}, 1> v) {{\n\
                     \x20   const {src}* x = (const {src}*)in;\n\
                     \x20   {dst}* y = ({dst}*)out;\n\
                     \x20   LUMEN_GRID_STRIDE(i, v.len) {{\n\
                     \x20       unsigned long long off[1];\n\
                     \x20       lumen_offsets(v, i, off);\n\
                     \x20       y[i] = {convert}(x[off[0]]);\n\
                     \x20   }}\n}}\n"
                )
            }
            KernelSpec::Arg { max, last, rank } => {
                // Strictly better, or equal and `last` (NaN compares false either way).
                let cmp = match (max, last) {
                    (true, false) => ">",
                    (true, true) => ">=",
                    (false, false) => "<",
                    (false, true) => "<=",
                };
                format!(
                    "extern \"C\" __global__ void {name}(long long* out, const float* in, lumen_views<{rank}, 1> rows,\n\
                     \x20   unsigned long long extent, unsigned long long stride) {{\n\
                     \x20   LUMEN_GRID_STRIDE(r, rows.len) {{\n\
                     \x20       unsigned long long off[1];\n\
                     \x20       lumen_offsets(rows, r, off);\n\
                     \x20       unsigned long long at = 0;\n\
                     \x20       if (extent > 0) {{\n\
                     \x20           float best = in[off[0]];\n\
                     \x20           for (unsigned long long j = 1; j < extent && best == best; ++j) {{\n\
                     \x20               const float x = in[off[0] + j * stride];\n\
                     \x20               if (x != x || x {cmp} best) {{\n\
                     \x20                   best = x;\n\
                     \x20                   at = j;\n\
                     \x20               }}\n\
                     \x20           }}\n\
                     \x20       }}\n\
                     \x20       out[r] = (long long)at;\n\
                     \x20   }}\n}}\n"
                )
            }
            KernelSpec::TopK { largest, rank } => {
                let largest = if largest { "true" } else { "false" };
                format!(
                    "extern \"C\" __global__ void {name}(long long* out, const float* in, lumen_views<{rank}, 1> rows,\n\
                     \x20   lumen_topk t) {{\n\
                     \x20   LUMEN_GRID_STRIDE(r, rows.len) {{\n\
                     \x20       unsigned long long off[1];\n\
                     \x20       lumen_offsets(rows, r, off);\n\
                     \x20       const unsigned long long outer = r / t.inner, pos = r - outer * t.inner;\n\
                     \x20       float prev = 0.0f;\n\
                     \x20       unsigned long long prev_at = 0;\n\
                     \x20       for (unsigned long long j = 0; j < t.k; ++j) {{\n\
                     \x20           float best = 0.0f;\n\
                     \x20           unsigned long long at = t.extent;\n\
                     \x20           for (unsigned long long e = 0; e < t.extent; ++e) {{\n\
                     \x20               const float x = in[off[0] + e * t.stride];\n\
                     \x20               if (j > 0 && !lumen_topk_before(prev, prev_at, x, e, {largest})) continue;\n\
                     \x20               if (at == t.extent || lumen_topk_before(x, e, best, at, {largest})) {{\n\
                     \x20                   best = x;\n\
                     \x20                   at = e;\n\
                     \x20               }}\n\
                     \x20           }}\n\
                     \x20           out[(outer * t.k + j) * t.inner + pos] = (long long)at;\n\
                     \x20           prev = best;\n\
                     \x20           prev_at = at;\n\
                     \x20       }}\n\
                     \x20   }}\n}}\n"
                )
            }
            KernelSpec::GatherElements { wide, rank } => {
                let id_type = if wide { "long long" } else { "int" };
                format!(
                    "extern \"C\" __global__ void {name}(float* out, const float* data, const void* indices,\n\
                     \x20   unsigned long long* err, lumen_views<{rank}, 2> v, unsigned long long extent,\n\
                     \x20   unsigned long long stride) {{\n\
                     \x20   const {id_type}* idx = (const {id_type}*)indices;\n\
                     \x20   LUMEN_GRID_STRIDE(i, v.len) {{\n\
                     \x20       unsigned long long off[2];\n\
                     \x20       lumen_offsets(v, i, off);\n\
                     \x20       long long id = (long long)idx[off[1]];\n\
                     \x20       if (id < 0) id += (long long)extent;\n\
                     \x20       if (id < 0 || (unsigned long long)id >= extent) {{\n\
                     \x20           atomicMin(err, i);\n\
                     \x20           out[i] = __int_as_float(0x7fc00000);\n\
                     \x20       }} else {{\n\
                     \x20           out[i] = data[off[0] + (unsigned long long)id * stride];\n\
                     \x20       }}\n\
                     \x20   }}\n}}\n"
                )
            }
            KernelSpec::ScatterElements { dtype, wide, rank } => {
                let id_type = if wide { "long long" } else { "int" };
                let t = c_type(dtype);
                format!(
                    "extern \"C\" __global__ void {name}({t}* out, const {t}* updates, const void* indices,\n\
                     \x20   unsigned long long* err, lumen_views<{rank}, 3> v, unsigned long long extent,\n\
                     \x20   unsigned long long stride, unsigned long long reduction) {{\n\
                     \x20   const {id_type}* idx = (const {id_type}*)indices;\n\
                     \x20   LUMEN_GRID_STRIDE(i, v.len) {{\n\
                     \x20       unsigned long long off[3];\n\
                     \x20       lumen_offsets(v, i, off);\n\
                     \x20       long long id = (long long)idx[off[1]];\n\
                     \x20       if (id < 0) id += (long long)extent;\n\
                     \x20       if (id < 0 || (unsigned long long)id >= extent) {{\n\
                     \x20           atomicMin(err, i);\n\
                     \x20       }} else {{\n\
                     \x20           lumen_scatter_{dtype}(out + off[2] + (unsigned long long)id * stride,\n\
                     \x20               updates[off[0]], reduction);\n\
                     \x20       }}\n\
                     \x20   }}\n}}\n"
                )
            }
        }
    }

    /// The element-wise op whose device function the kernel calls, if any.
    fn elem_op(&self) -> Option<ElemOp> {
        match *self {
            KernelSpec::Map { op, .. } => Some(op),
            KernelSpec::Conv { epilogue } => epilogue.activation.map(ElemOp::Unary),
            _ => None,
        }
    }
}

/// What every kernel shares: the view struct, the index math, the grid-stride loop.
const PRELUDE: &str = r#"// Generated by lumen (crates/runtime/src/cuda/codegen.rs) from the op table.
template <int R, int N> struct lumen_views {
    unsigned long long len;
    unsigned long long shape[R];
    unsigned long long offset[N];
    unsigned long long strides[N][R];
};
struct lumen_table {
    unsigned long long offset, row_stride, col_stride, vocab, dim;
};
// A convolution's geometry and operand strides (ConvArgs): spatial axes padded to three.
struct lumen_conv {
    unsigned long long len, c_out, cg, ocg;
    unsigned long long output[3], input[3], kernel[3], stride[3], dilation[3], pad[3];
    unsigned long long x[6], w[6], bias[2], residual[6];
};
// A take's sizes, its picked axis' stride in x, its indices' view and fill (TakeArgs).
struct lumen_take {
    unsigned long long picks, inner, stride, extent, idx_offset, idx_stride, fill;
};
// A top-k's rows: its length k, the axis' length and stride, the output elements per index
// (the product of the axes after the axis) (TopKArgs).
struct lumen_topk {
    unsigned long long k, extent, stride, inner;
};
// Whether element a (at position ia of its row) comes before b (at ib) in a top-k's order
// (ops::top_k): a NaN before every number when largest, after every number otherwise;
// numbers by value (-0 == +0); equal numbers, and NaNs, by position.
__device__ __forceinline__ bool lumen_topk_before(float a, unsigned long long ia, float b,
                                                  unsigned long long ib, bool largest) {
    const bool na = a != a, nb = b != b;
    if (na != nb) return largest ? na : nb;
    if (!na && a != b) return largest ? a > b : a < b;
    return ia < ib;
}
// The element offset of row-major index i in each of the N views (64-bit throughout).
template <int R, int N>
__device__ __forceinline__ void lumen_offsets(const lumen_views<R, N>& v, unsigned long long i,
                                              unsigned long long (&off)[N]) {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = v.offset[k];
#pragma unroll
    for (int d = R - 1; d >= 0; --d) {
        unsigned long long q = i / v.shape[d];
        unsigned long long x = i - q * v.shape[d];
        i = q;
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += x * v.strides[k][d];
    }
}
#define LUMEN_GRID_STRIDE(i, n)                                                              \
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;     \
         i < (n); i += (unsigned long long)blockDim.x * gridDim.x)
// The cast kernels' conversions, DType::cast_f64's rule on every input (no C conversion out
// of range): float to integer truncates toward zero, saturates, NaN is 0; i64 to f32 rounds
// to the nearest double, then to the nearest float (the CPU's path through f64).
__device__ __forceinline__ int lumen_cast_f32_i32(float v) {
    if (v != v) return 0;
    if (v >= 2147483648.0f) return 2147483647;
    if (v < -2147483648.0f) return -2147483647 - 1;
    return (int)v;
}
__device__ __forceinline__ long long lumen_cast_f32_i64(float v) {
    if (v != v) return 0;
    if (v >= 9223372036854775808.0f) return 9223372036854775807LL;
    if (v < -9223372036854775808.0f) return -9223372036854775807LL - 1;
    return (long long)v;
}
__device__ __forceinline__ float lumen_cast_i32_f32(int v) { return __int2float_rn(v); }
__device__ __forceinline__ long long lumen_cast_i32_i64(int v) { return (long long)v; }
__device__ __forceinline__ float lumen_cast_i64_f32(long long v) {
    return __double2float_rn(__ll2double_rn(v));
}
__device__ __forceinline__ int lumen_cast_i64_i32(long long v) {
    return v > 2147483647LL ? 2147483647 : v < -2147483648LL ? -2147483647 - 1 : (int)v;
}
"#;

/// The scatter kernels' device functions, per data type of [`CAST_TYPES`]:
/// `lumen_scatter_combine_{t}(a, b, r)`, the op table's step of reduction code `r`
/// ([`ScatterReduction::cuda_combine`]) of the element there `a` and the update `b`, and
/// `lumen_scatter_{t}(p, v, r)`, which stores `v` at `p` (code 0) or combines it in with an
/// `atomicCAS` loop on the element's bits, so concurrent updates of one element all land.
fn scatter_prelude() -> String {
    let mut src = String::from(
        "// ScatterElements: the combine step of each reduction (ScatterReduction's table), and\n\
         // the store: plain for none, an atomicCAS loop on the element's bits otherwise.\n",
    );
    for dtype in CAST_TYPES {
        let t = c_type(dtype);
        let bits = if dtype == DType::I64 { "unsigned long long" } else { "unsigned int" };
        let (to_bits, from_bits) = match dtype {
            DType::F32 => ("__float_as_uint", "__uint_as_float"),
            _ => ("", ""),
        };
        let _ = writeln!(
            src,
            "__device__ __forceinline__ {t} lumen_scatter_combine_{dtype}({t} a, {t} b, unsigned long long r) {{\n    switch (r) {{"
        );
        for r in ScatterReduction::ALL.into_iter().filter(|&r| r != ScatterReduction::None) {
            let _ =
                writeln!(src, "    case {}: return ({t})({});", r.code(), r.cuda_combine(dtype));
        }
        let _ = writeln!(
            src,
            "    }}\n    return b;\n}}\n\
             __device__ __forceinline__ void lumen_scatter_{dtype}({t}* p, {t} v, unsigned long long r) {{\n\
             \x20   if (r == 0) {{\n\
             \x20       *p = v;\n\
             \x20       return;\n\
             \x20   }}\n\
             \x20   {bits}* q = ({bits}*)p;\n\
             \x20   {bits} old = *q, seen;\n\
             \x20   do {{\n\
             \x20       seen = old;\n\
             \x20       const {t} next = lumen_scatter_combine_{dtype}(({t}){from_bits}(seen), v, r);\n\
             \x20       old = atomicCAS(q, seen, ({bits}){to_bits}(next));\n\
             \x20   }} while (old != seen);\n\
             }}"
        );
    }
    src
}

/// The CUDA C type of an element of `dtype`.
fn c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 => "unsigned char",
    }
}

/// Every kernel the runtime can launch, in a fixed order: each elementwise op at each rank,
/// each integer op on i32 and i64 at each rank, the copies, each reduction in both forms at each row rank, the gathers and their reports,
/// a convolution per epilogue ([`conv_epilogues`]), the max pool, the takes (i32 and i64 at each rank), a
/// cast per pair of [`CAST_TYPES`] at each rank, argmax and argmin (first and last of equals)
/// at each row rank, top-k (largest and smallest) at each row rank, gather_elements (i32 and
/// i64 indices) at each rank, scatter_elements (each of [`CAST_TYPES`], i32 and i64 indices)
/// at each rank.
pub fn all_specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for op in ElemOp::ALL {
        specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::Map { op, rank }));
    }
    for op in IntOp::ALL {
        for dtype in INT_TYPES {
            specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::IntMap { op, dtype, rank }));
        }
    }
    specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::Copy { rank }));
    for op in ReduceOp::ALL {
        for form in [ReduceForm::Row, ReduceForm::Strided] {
            specs.extend((1..MAX_RANK).map(|rank| KernelSpec::Reduce { op, form, rank }));
        }
    }
    for wide in [false, true] {
        specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::Gather { wide, rank }));
        specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::GatherReport { wide, rank }));
    }
    specs.extend(conv_epilogues().into_iter().map(|epilogue| KernelSpec::Conv { epilogue }));
    specs.push(KernelSpec::MaxPool);
    for wide in [false, true] {
        specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::Take { wide, rank }));
    }
    for from in CAST_TYPES {
        for to in CAST_TYPES {
            specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::Cast { from, to, rank }));
        }
    }
    for max in [true, false] {
        for last in [false, true] {
            specs.extend((1..MAX_RANK).map(|rank| KernelSpec::Arg { max, last, rank }));
        }
    }
    for largest in [true, false] {
        specs.extend((1..MAX_RANK).map(|rank| KernelSpec::TopK { largest, rank }));
    }
    for wide in [false, true] {
        specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::GatherElements { wide, rank }));
    }
    for dtype in CAST_TYPES {
        for wide in [false, true] {
            specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::ScatterElements {
                dtype,
                wide,
                rank,
            }));
        }
    }
    specs
}

/// Every convolution epilogue a kernel exists for: with and without a bias, with and without a
/// residual, no activation or each op for which [`UnaryOp::is_activation`] (in the op table's
/// order).
pub fn conv_epilogues() -> Vec<ConvEpilogue> {
    let acts: Vec<Option<UnaryOp>> = std::iter::once(None)
        .chain(UnaryOp::ALL.into_iter().filter(|a| a.is_activation()).map(Some))
        .collect();
    let mut out = Vec::new();
    for bias in [false, true] {
        for residual in [false, true] {
            out.extend(acts.iter().map(|&activation| ConvEpilogue { bias, residual, activation }));
        }
    }
    out
}

/// The CUDA C of the convolution kernel `name` with `epilogue` (see the module docs).
fn conv_body(name: &str, epilogue: ConvEpilogue) -> String {
    let mut params = String::from("float* out, const float* x, const float* w");
    let mut tail = String::from("        float y = acc;\n");
    if epilogue.bias {
        params.push_str(", const float* bias");
        tail.push_str("        y += bias[g.bias[0] + oc * g.bias[1]];\n");
    }
    if epilogue.residual {
        params.push_str(", const float* residual");
        tail.push_str(
            "        y += residual[g.residual[0] + n * g.residual[1] + oc * g.residual[2]\n\
             \x20           + o0 * g.residual[3] + o1 * g.residual[4] + o2 * g.residual[5]];\n",
        );
    }
    if let Some(act) = epilogue.activation {
        let _ =
            writeln!(tail, "        y = lumen_op_{}(y, 0.0f, 0.0f);", ElemOp::Unary(act).name());
    }
    tail.push_str("        out[i] = y;\n");
    format!(
        "extern \"C\" __global__ void {name}({params}, lumen_conv g) {{\n\
         \x20   LUMEN_GRID_STRIDE(i, g.len) {{\n\
         \x20       unsigned long long r = i;\n\
         \x20       const unsigned long long o2 = r % g.output[2]; r /= g.output[2];\n\
         \x20       const unsigned long long o1 = r % g.output[1]; r /= g.output[1];\n\
         \x20       const unsigned long long o0 = r % g.output[0]; r /= g.output[0];\n\
         \x20       const unsigned long long oc = r % g.c_out, n = r / g.c_out;\n\
         \x20       const unsigned long long c0 = oc / g.ocg * g.cg;\n\
         \x20       float acc = 0.0f;\n\
         \x20       for (unsigned long long ci = 0; ci < g.cg; ++ci) {{\n\
         \x20           const unsigned long long xc = g.x[0] + n * g.x[1] + (c0 + ci) * g.x[2];\n\
         \x20           const unsigned long long wc = g.w[0] + oc * g.w[1] + ci * g.w[2];\n\
         \x20           for (unsigned long long k0 = 0; k0 < g.kernel[0]; ++k0) {{\n\
         \x20               const unsigned long long p0 = o0 * g.stride[0] + k0 * g.dilation[0];\n\
         \x20               if (p0 < g.pad[0] || p0 - g.pad[0] >= g.input[0]) continue;\n\
         \x20               for (unsigned long long k1 = 0; k1 < g.kernel[1]; ++k1) {{\n\
         \x20                   const unsigned long long p1 = o1 * g.stride[1] + k1 * g.dilation[1];\n\
         \x20                   if (p1 < g.pad[1] || p1 - g.pad[1] >= g.input[1]) continue;\n\
         \x20                   for (unsigned long long k2 = 0; k2 < g.kernel[2]; ++k2) {{\n\
         \x20                       const unsigned long long p2 = o2 * g.stride[2] + k2 * g.dilation[2];\n\
         \x20                       if (p2 < g.pad[2] || p2 - g.pad[2] >= g.input[2]) continue;\n\
         \x20                       const float xv = x[xc + (p0 - g.pad[0]) * g.x[3]\n\
         \x20                           + (p1 - g.pad[1]) * g.x[4] + (p2 - g.pad[2]) * g.x[5]];\n\
         \x20                       const float wv = w[wc + k0 * g.w[3] + k1 * g.w[4] + k2 * g.w[5]];\n\
         \x20                       acc = fmaf(xv, wv, acc);\n\
         \x20                   }}\n\
         \x20               }}\n\
         \x20           }}\n\
         \x20       }}\n\
         {tail}\
         \x20   }}\n}}\n"
    )
}

/// The CUDA C of the max pool kernel `name` (see the module docs): the convolution's loops
/// over one channel, `max` for `fmaf`.
fn max_pool_body(name: &str) -> String {
    format!(
        "extern \"C\" __global__ void {name}(float* out, const float* x, lumen_conv g) {{\n\
         \x20   LUMEN_GRID_STRIDE(i, g.len) {{\n\
         \x20       unsigned long long r = i;\n\
         \x20       const unsigned long long o2 = r % g.output[2]; r /= g.output[2];\n\
         \x20       const unsigned long long o1 = r % g.output[1]; r /= g.output[1];\n\
         \x20       const unsigned long long o0 = r % g.output[0]; r /= g.output[0];\n\
         \x20       const unsigned long long c = r % g.c_out, n = r / g.c_out;\n\
         \x20       const unsigned long long xc = g.x[0] + n * g.x[1] + c * g.x[2];\n\
         \x20       float acc = __int_as_float(0xff800000);\n\
         \x20       for (unsigned long long k0 = 0; k0 < g.kernel[0]; ++k0) {{\n\
         \x20           const unsigned long long p0 = o0 * g.stride[0] + k0 * g.dilation[0];\n\
         \x20           if (p0 < g.pad[0] || p0 - g.pad[0] >= g.input[0]) continue;\n\
         \x20           for (unsigned long long k1 = 0; k1 < g.kernel[1]; ++k1) {{\n\
         \x20               const unsigned long long p1 = o1 * g.stride[1] + k1 * g.dilation[1];\n\
         \x20               if (p1 < g.pad[1] || p1 - g.pad[1] >= g.input[1]) continue;\n\
         \x20               for (unsigned long long k2 = 0; k2 < g.kernel[2]; ++k2) {{\n\
         \x20                   const unsigned long long p2 = o2 * g.stride[2] + k2 * g.dilation[2];\n\
         \x20                   if (p2 < g.pad[2] || p2 - g.pad[2] >= g.input[2]) continue;\n\
         \x20                   const float v = x[xc + (p0 - g.pad[0]) * g.x[3]\n\
         \x20                       + (p1 - g.pad[1]) * g.x[4] + (p2 - g.pad[2]) * g.x[5]];\n\
         \x20                   if (v > acc || v != v) acc = v;\n\
         \x20               }}\n\
         \x20           }}\n\
         \x20       }}\n\
         \x20       out[i] = acc != acc ? __int_as_float(0x7fc00000) : acc;\n\
         \x20   }}\n}}\n"
    )
}

/// Words of the `lumen_conv` argument ([`ConvArgs::words`]).
pub const CONV_WORDS: usize = 42;

/// The `lumen_conv` argument of a convolution kernel: the geometry and every operand's
/// strides, as [`CONV_WORDS`] 64-bit words in the struct's declaration order. Spatial axes
/// are padded to three, right-aligned ([`ConvGeometry`]'s form: a missing leading axis has
/// length 1 and stride 0).
/// Sizes are element counts, strides and offsets in elements of the operand's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConvArgs {
    /// Output elements, `N · OC · P`.
    pub len: u64,
    /// Output channels (OC).
    pub c_out: u64,
    /// Input channels per group (C / groups).
    pub cg: u64,
    /// Output channels per group (OC / groups).
    pub ocg: u64,
    /// Output length per spatial axis.
    pub output: [u64; MAX_SPATIAL],
    /// Input length per spatial axis.
    pub input: [u64; MAX_SPATIAL],
    /// Kernel length per spatial axis.
    pub kernel: [u64; MAX_SPATIAL],
    /// Stride per spatial axis.
    pub stride: [u64; MAX_SPATIAL],
    /// Dilation per spatial axis.
    pub dilation: [u64; MAX_SPATIAL],
    /// Leading zeros per spatial axis.
    pub pad: [u64; MAX_SPATIAL],
    /// `x [N, C, *in]`: offset, then the strides of n, c and the three spatial axes.
    pub x: [u64; 6],
    /// `w [OC, C/g, *k]`: offset, then the strides of oc, the group's channel and the three
    /// kernel axes.
    pub w: [u64; 6],
    /// `bias [OC]`: offset and stride (zeros without a bias).
    pub bias: [u64; 2],
    /// `residual [N, OC, *out]`: offset, then the strides of n, oc and the three spatial axes
    /// (zeros without a residual).
    pub residual: [u64; 6],
}

impl ConvArgs {
    /// The argument of a convolution of geometry `g` reading `x`, `w`, and the `bias` and
    /// `residual` its epilogue has, through their views (each of the shape the geometry says:
    /// the caller checks).
    pub fn new(
        g: &ConvGeometry,
        x: &View,
        w: &View,
        bias: Option<&View>,
        residual: Option<&View>,
    ) -> Self {
        let wide = |v: usize| v as u64;
        let three = |a: [usize; MAX_SPATIAL]| a.map(wide);
        // Offset, the two leading strides, the spatial strides in the geometry's slots (its
        // axes right-aligned; 0 in the unused leading slots).
        let first = MAX_SPATIAL - g.rank.min(MAX_SPATIAL);
        let five = |v: &View| {
            let s = |d: usize| v.strides.get(d).copied().map_or(0, wide);
            let sp = |a: usize| if a >= first { s(2 + a - first) } else { 0 };
            [wide(v.offset), s(0), s(1), sp(0), sp(1), sp(2)]
        };
        let groups = g.groups.max(1);
        ConvArgs {
            len: wide(g.batch)
                .saturating_mul(wide(g.c_out))
                .saturating_mul(wide(g.output_positions())),
            c_out: wide(g.c_out),
            cg: wide(g.c_in / groups),
            ocg: wide(g.c_out / groups),
            output: three(g.output),
            input: three(g.input),
            kernel: three(g.kernel),
            stride: three(g.stride),
            dilation: three(g.dilation),
            pad: three(g.pad),
            x: five(x),
            w: five(w),
            bias: bias
                .map_or([0; 2], |b| [wide(b.offset), b.strides.first().copied().map_or(0, wide)]),
            residual: residual.map_or([0; 6], five),
        }
    }

    /// The [`CONV_WORDS`] words, in the `lumen_conv` struct's order.
    pub fn words(&self) -> Vec<u64> {
        let mut w = vec![self.len, self.c_out, self.cg, self.ocg];
        for a in [self.output, self.input, self.kernel, self.stride, self.dilation, self.pad] {
            w.extend(a);
        }
        w.extend(self.x);
        w.extend(self.w);
        w.extend(self.bias);
        w.extend(self.residual);
        w
    }

    /// The argument back from its words; `None` unless there are exactly [`CONV_WORDS`].
    pub fn from_words(words: &[u64]) -> Option<Self> {
        if words.len() != CONV_WORDS {
            return None;
        }
        let three = |at: usize| [words[at], words[at + 1], words[at + 2]];
        let six = |at: usize| {
            [words[at], words[at + 1], words[at + 2], words[at + 3], words[at + 4], words[at + 5]]
        };
        Some(ConvArgs {
            len: words[0],
            c_out: words[1],
            cg: words[2],
            ocg: words[3],
            output: three(4),
            input: three(7),
            kernel: three(10),
            stride: three(13),
            dilation: three(16),
            pad: three(19),
            x: six(22),
            w: six(28),
            bias: [words[34], words[35]],
            residual: six(36),
        })
    }
}

/// Words of the `lumen_take` argument ([`TakeArgs::words`]).
pub const TAKE_WORDS: usize = 7;

/// The `lumen_take` argument of a take kernel, [`TAKE_WORDS`] 64-bit words in the struct's
/// order: element counts, strides and offsets in elements of the operand's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TakeArgs {
    /// Indices (the output's length along the picked axis).
    pub picks: u64,
    /// Output elements per index (the product of the axes after the picked one).
    pub inner: u64,
    /// x's stride along the picked axis.
    pub stride: u64,
    /// x's length along the picked axis: an index at or past it is an error.
    pub extent: u64,
    /// The indices' view: element offset in its buffer (an i64 element is two words).
    pub idx_offset: u64,
    /// The indices' view: stride.
    pub idx_stride: u64,
    /// The value of a negative index, as f32 bits.
    pub fill: u64,
}

impl TakeArgs {
    /// The [`TAKE_WORDS`] words, in the `lumen_take` struct's order.
    pub fn words(&self) -> Vec<u64> {
        vec![
            self.picks,
            self.inner,
            self.stride,
            self.extent,
            self.idx_offset,
            self.idx_stride,
            self.fill,
        ]
    }

    /// The argument back from its words; `None` unless there are exactly [`TAKE_WORDS`].
    pub fn from_words(words: &[u64]) -> Option<Self> {
        let [picks, inner, stride, extent, idx_offset, idx_stride, fill] = *words else {
            return None;
        };
        Some(TakeArgs { picks, inner, stride, extent, idx_offset, idx_stride, fill })
    }
}

/// Words of the `lumen_topk` argument ([`TopKArgs::words`]).
pub const TOPK_WORDS: usize = 4;

/// The `lumen_topk` argument of a top-k kernel, [`TOPK_WORDS`] 64-bit words in the struct's
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopKArgs {
    /// Positions per row (at most `extent`).
    pub k: u64,
    /// The searched axis' length.
    pub extent: u64,
    /// The searched axis' stride in the input, in elements.
    pub stride: u64,
    /// Output elements per position: the product of the axes after the searched one, so
    /// that row `r`'s position `j` is output element `(r / inner · k + j) · inner + r % inner`.
    pub inner: u64,
}

impl TopKArgs {
    /// The [`TOPK_WORDS`] words, in the `lumen_topk` struct's order.
    pub fn words(&self) -> Vec<u64> {
        vec![self.k, self.extent, self.stride, self.inner]
    }

    /// The argument back from its words; `None` unless there are exactly [`TOPK_WORDS`].
    pub fn from_words(words: &[u64]) -> Option<Self> {
        let [k, extent, stride, inner] = *words else { return None };
        Some(TopKArgs { k, extent, stride, inner })
    }
}

/// One translation unit holding `specs` (deduplicated, in order): the prelude, each
/// elementwise op's device function once, then the kernels. No includes.
pub fn module_source(specs: &[KernelSpec]) -> String {
    let mut src = String::from(PRELUDE);
    let mut ops: Vec<ElemOp> = specs.iter().filter_map(KernelSpec::elem_op).collect();
    ops.sort_unstable();
    ops.dedup();
    for op in ops {
        src.push_str(&op.cuda_fn());
    }
    let mut int_ops: Vec<(IntOp, DType)> = specs
        .iter()
        .filter_map(|s| match *s {
            KernelSpec::IntMap { op, dtype, .. } => Some((op, dtype)),
            _ => None,
        })
        .collect();
    int_ops.sort_unstable();
    int_ops.dedup();
    for (op, dtype) in int_ops {
        src.push_str(&op.cuda_fn(dtype));
    }
    if specs.iter().any(|s| matches!(s, KernelSpec::ScatterElements { .. })) {
        src.push_str(&scatter_prelude());
    }
    let mut seen = std::collections::BTreeSet::new();
    for spec in specs {
        if seen.insert(*spec) {
            let _ = writeln!(src);
            src.push_str(&spec.body());
        }
    }
    src
}

/// Merges the axes of `shape` that every view walks contiguously (axis `d` into `d + 1` when
/// `stride[d] == stride[d + 1] * shape[d + 1]` in each view, a broadcast pair `0 == 0 * _`
/// included) and drops length-1 axes, keeping row-major order: the returned shape and views
/// visit, index for index, the same element offsets as the originals ([`View::index`]). A
/// scalar or all-ones shape becomes `[1]` with stride 0. The views must all have `shape`.
pub fn collapse(shape: &[usize], views: &[&View]) -> (Vec<usize>, Vec<View>) {
    // (length, stride per view) of the kept axes, outermost first.
    let mut axes: Vec<(usize, Vec<usize>)> = Vec::new();
    for (d, &len) in shape.iter().enumerate() {
        if len == 1 {
            continue;
        }
        let strides: Vec<usize> = views.iter().map(|v| v.strides[d]).collect();
        if let Some((plen, pstrides)) = axes.last_mut() {
            let chains = pstrides.iter().zip(&strides).all(|(&ps, &s)| ps == s * len);
            if chains && len != 0 && *plen != 0 {
                *plen *= len;
                *pstrides = strides;
                continue;
            }
        }
        axes.push((len, strides));
    }
    if axes.is_empty() {
        axes.push((1, vec![0; views.len()]));
    }
    let out_shape: Vec<usize> = axes.iter().map(|(l, _)| *l).collect();
    let out_views = views
        .iter()
        .enumerate()
        .map(|(k, v)| View {
            shape: out_shape.clone(),
            strides: axes.iter().map(|(_, s)| s[k]).collect(),
            offset: v.offset,
        })
        .collect();
    (out_shape, out_views)
}

/// The `lumen_views<R, N>` argument for views of one `shape` (rank R >= 1, as [`collapse`]
/// returns): the 64-bit words `len, shape[R], offset[N], strides[N][R]` in the struct's
/// declaration order (an array of `unsigned long long` has no padding).
pub fn pack_views(shape: &[usize], views: &[View]) -> Vec<u64> {
    let len = shape.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64));
    let mut words = Vec::with_capacity(1 + shape.len() + views.len() * (1 + shape.len()));
    words.push(len);
    words.extend(shape.iter().map(|&d| d as u64));
    words.extend(views.iter().map(|v| v.offset as u64));
    for v in views {
        words.extend(v.strides.iter().map(|&s| s as u64));
    }
    words
}

/// The host mirror of the kernels' `lumen_offsets` on packed words: the element offset of
/// row-major index `i` in each of the `n` views. What the unit tests check against
/// [`View::index`].
pub fn offsets_of_packed(words: &[u64], rank: usize, n: usize, mut i: u64) -> Vec<u64> {
    let shape = &words[1..1 + rank];
    let mut off: Vec<u64> = words[1 + rank..1 + rank + n].to_vec();
    let strides = &words[1 + rank + n..];
    for d in (0..rank).rev() {
        let q = i / shape[d];
        let x = i - q * shape[d];
        i = q;
        for (k, o) in off.iter_mut().enumerate() {
            *o += x * strides[k * rank + d];
        }
    }
    off
}

/// Blocks of a grid-stride launch over `len` elements (at least 1, at most [`MAX_GRID`]).
pub fn grid_for(len: u64) -> u32 {
    len.div_ceil(u64::from(BLOCK)).clamp(1, MAX_GRID) as u32
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A random view of `shape` over a buffer: a permuted, sliced, broadcast contiguous view.
    fn view_strategy() -> impl Strategy<Value = (Vec<usize>, View, View)> {
        (proptest::collection::vec(1usize..4, 0..7), any::<u64>()).prop_map(|(shape, seed)| {
            let rank = shape.len();
            let base = View::contiguous(&shape);
            let mut perm: Vec<usize> = (0..rank).collect();
            if rank > 1 {
                perm.swap(seed as usize % rank, (seed as usize / 7) % rank);
            }
            let mut a = base.permute(&perm);
            if rank > 0 && a.shape[0] > 1 && seed % 3 == 0 {
                a = a.slice(0, 1, a.shape[0]);
            }
            let shape = a.shape.clone();
            // A second operand broadcast along a seed-chosen axis.
            let mut b = View::contiguous(&shape);
            if rank > 0 {
                let d = (seed as usize / 11) % rank;
                let mut small = shape.clone();
                small[d] = 1;
                b = View::contiguous(&small).expand(&shape).expect("broadcast");
                b.offset = (seed % 5) as usize;
            }
            (shape, a, b)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The device index math (mirrored on the packed words) gives View::index for every
        /// index of every view, after collapsing.
        #[test]
        fn packed_index_math_matches_view_index((shape, a, b) in view_strategy()) {
            let (cshape, cviews) = collapse(&shape, &[&a, &b]);
            prop_assert!(cshape.len() <= shape.len().max(1));
            let words = pack_views(&cshape, &cviews);
            let n = a.elements();
            prop_assert_eq!(words[0], n as u64);
            for i in 0..n {
                let got = offsets_of_packed(&words, cshape.len(), 2, i as u64);
                prop_assert_eq!(got, vec![a.index(i) as u64, b.index(i) as u64], "{:?} {:?}", a, b);
            }
        }
    }

    #[test]
    fn collapse_merges_contiguous_runs_and_keeps_broadcasts() {
        let x = View::contiguous(&[2, 3, 4]);
        let (s, v) = collapse(&[2, 3, 4], &[&x]);
        assert_eq!((s, v[0].strides.clone()), (vec![24], vec![1]));
        let bias = View::contiguous(&[4]).expand(&[2, 3, 4]).unwrap();
        let (s, v) = collapse(&[2, 3, 4], &[&x, &bias]);
        assert_eq!(s, [6, 4]);
        assert_eq!((v[0].strides.clone(), v[1].strides.clone()), (vec![4, 1], vec![0, 1]));
        let (s, v) = collapse(&[], &[&View::contiguous(&[])]);
        assert_eq!((s, v[0].strides.clone()), (vec![1], vec![0]));
        let t = View::contiguous(&[3, 4]).permute(&[1, 0]);
        let (s, _) = collapse(&[4, 3], &[&t]);
        assert_eq!(s, [4, 3]);
    }

    #[test]
    fn packing_follows_the_struct_layout() {
        let a = View { shape: vec![2, 3], strides: vec![3, 1], offset: 7 };
        let b = View { shape: vec![2, 3], strides: vec![0, 1], offset: 2 };
        assert_eq!(pack_views(&[2, 3], &[a, b]), [6, 2, 3, 7, 2, 3, 1, 0, 1]);
        assert_eq!(grid_for(0), 1);
        assert_eq!(grid_for(257), 2);
        assert_eq!(grid_for(u64::MAX), MAX_GRID as u32);
    }

    #[test]
    fn every_spec_has_a_unique_entry_point_in_the_module() {
        let specs = all_specs();
        // Ops x 6 ranks, 6 copies, 2 reductions x 2 forms x 5 ranks, 2 x 2 x 6 gathers, 2 x 2
        // x (1 + 7 activations) convolutions, 1 max pool, 2 x 6 takes, 3 x 3 x 6 casts, 2 x 2
        // x 5 args, 2 x 5 top-ks, 2 x 6 gather_elements, 3 x 2 x 6 scatter_elements, integer
        // ops x 2 types x 6 ranks.
        let convs = conv_epilogues().len();
        assert_eq!(convs, 32);
        assert_eq!(
            specs.len(),
            ElemOp::ALL.len() * MAX_RANK
                + MAX_RANK
                + 20
                + 24
                + convs
                + 1
                + 12
                + 54
                + 20
                + 10
                + 12
                + 36
                + IntOp::ALL.len() * 2 * MAX_RANK
        );
        let src = module_source(&specs);
        let mut names: Vec<String> = specs.iter().map(KernelSpec::name).collect();
        for name in &names {
            assert_eq!(src.matches(&format!("void {name}(")).count(), 1, "{name}");
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), specs.len());
        for op in ElemOp::ALL {
            assert_eq!(src.matches(&format!("float lumen_op_{}(", op.name())).count(), 1);
        }
        for (open, close) in [('{', '}'), ('(', ')'), ('[', ']')] {
            assert_eq!(src.matches(open).count(), src.matches(close).count(), "{open}{close}");
        }
        // A module of one kernel carries only its own op's device function.
        let one = module_source(&[KernelSpec::Map { op: ElemOp::ALL[0], rank: 2 }]);
        assert!(!one.contains("lumen_op_add("), "{one}");
    }

    #[test]
    fn a_conv_kernel_has_its_epilogue_operands_and_activation_only() {
        let e = ConvEpilogue { bias: false, residual: true, activation: Some(UnaryOp::Silu) };
        let spec = KernelSpec::Conv { epilogue: e };
        assert_eq!(spec.name(), "lumen_conv_residual_silu");
        let src = module_source(&[spec]);
        assert!(src.contains("lumen_conv_residual_silu(float* out, const float* x, const float* w, const float* residual, lumen_conv g)"), "{src}");
        assert!(src.contains("float lumen_op_silu(") && !src.contains("bias[g.bias"), "{src}");
        assert!(src.contains("acc = fmaf(xv, wv, acc);"), "{src}");
        let none = KernelSpec::Conv { epilogue: ConvEpilogue::default() };
        assert_eq!(none.name(), "lumen_conv_none");
        assert!(!module_source(&[none]).contains("lumen_op_"), "no device function");
        // Every epilogue's kernel is in the full list once.
        let convs = all_specs().into_iter().filter(|s| s.family() == "conv").count();
        assert_eq!(convs, conv_epilogues().len());
    }

    #[test]
    fn cast_kernels_convert_by_the_prelude_and_copy_the_same_type_bit_for_bit() {
        let spec = KernelSpec::Cast { from: DType::F32, to: DType::I64, rank: 2 };
        assert_eq!((spec.name(), spec.family()), ("lumen_cast_f32_i64_r2".to_string(), "cast"));
        let src = module_source(&[spec]);
        assert!(src.contains("const float* x = (const float*)in;"), "{src}");
        assert!(src.contains("long long* y = (long long*)out;"), "{src}");
        assert!(src.contains("y[i] = lumen_cast_f32_i64(x[off[0]]);"), "{src}");
        // Every conversion a kernel calls is in the prelude once; no elementwise op is.
        for from in CAST_TYPES {
            for to in CAST_TYPES.into_iter().filter(|&t| t != from) {
                let f = format!(" lumen_cast_{from}_{to}({} v)", c_type(from));
                assert_eq!(src.matches(&f).count(), 1, "{f}");
            }
        }
        assert!(!src.contains("lumen_op_"), "{src}");
        // The same type: the element's words, as unsigned integers (a NaN's payload kept).
        let copy = module_source(&[KernelSpec::Cast { from: DType::I64, to: DType::I64, rank: 1 }]);
        assert!(copy.contains("unsigned long long* y = (unsigned long long*)out;"), "{copy}");
        assert!(copy.contains("y[i] = (x[off[0]]);"), "{copy}");
        let f = module_source(&[KernelSpec::Cast { from: DType::F32, to: DType::F32, rank: 1 }]);
        assert!(f.contains("const unsigned int* x = (const unsigned int*)in;"), "{f}");
    }

    #[test]
    fn arg_kernels_compare_by_max_min_and_last() {
        for (max, last, name, cmp) in [
            (true, false, "lumen_argmax_r3", "x > best"),
            (true, true, "lumen_argmax_last_r3", "x >= best"),
            (false, false, "lumen_argmin_r3", "x < best"),
            (false, true, "lumen_argmin_last_r3", "x <= best"),
        ] {
            let spec = KernelSpec::Arg { max, last, rank: 3 };
            assert_eq!((spec.name().as_str(), spec.family()), (name, "arg"));
            let src = module_source(&[spec]);
            assert!(src.contains(&format!("if (x != x || {cmp}) {{")), "{src}");
            assert!(src.contains("j < extent && best == best"), "{src}");
            assert!(src.contains("out[r] = (long long)at;"), "{src}");
        }
        let args = all_specs().into_iter().filter(|s| s.family() == "arg").count();
        assert_eq!(args, 4 * (MAX_RANK - 1));
    }

    #[test]
    fn topk_kernels_select_by_the_prelude_order_and_write_i64_positions() {
        for (largest, name, flag) in
            [(true, "lumen_topk_largest_r2", "true"), (false, "lumen_topk_smallest_r2", "false")]
        {
            let spec = KernelSpec::TopK { largest, rank: 2 };
            assert_eq!((spec.name().as_str(), spec.family()), (name, "topk"));
            let src = module_source(&[spec]);
            assert!(src.contains(&format!("lumen_topk_before(x, e, best, at, {flag})")), "{src}");
            assert!(src.contains(&format!("!lumen_topk_before(prev, prev_at, x, e, {flag})")));
            assert!(src.contains("out[(outer * t.k + j) * t.inner + pos] = (long long)at;"));
            assert_eq!(src.matches("bool lumen_topk_before(").count(), 1, "{src}");
        }
        let topks = all_specs().into_iter().filter(|s| s.family() == "topk").count();
        assert_eq!(topks, 2 * (MAX_RANK - 1));
        let t = TopKArgs { k: 1, extent: 2, stride: 3, inner: 4 };
        assert_eq!(t.words().len(), TOPK_WORDS);
        assert_eq!(TopKArgs::from_words(&t.words()), Some(t));
        assert_eq!(TopKArgs::from_words(&[1]), None);
    }

    #[test]
    fn gather_elements_kernels_wrap_negative_indices_and_record_bad_ones() {
        let spec = KernelSpec::GatherElements { wide: true, rank: 3 };
        assert_eq!(
            (spec.name().as_str(), spec.family()),
            ("lumen_gather_elements_i64_r3", "gather_elements")
        );
        let src = module_source(&[spec]);
        assert!(src.contains("const long long* idx = (const long long*)indices;"), "{src}");
        assert!(src.contains("lumen_views<3, 2> v"), "{src}");
        assert!(src.contains("if (id < 0) id += (long long)extent;"), "{src}");
        assert!(src.contains("atomicMin(err, i);"), "{src}");
        let narrow = module_source(&[KernelSpec::GatherElements { wide: false, rank: 1 }]);
        assert!(narrow.contains("const int* idx = (const int*)indices;"), "{narrow}");
        let n = all_specs().into_iter().filter(|s| s.family() == "gather_elements").count();
        assert_eq!(n, 2 * MAX_RANK);
    }

    #[test]
    fn scatter_kernels_store_or_combine_through_the_prelude_and_record_bad_indices() {
        let spec = KernelSpec::ScatterElements { dtype: DType::I64, wide: false, rank: 2 };
        assert_eq!(
            (spec.name().as_str(), spec.family()),
            ("lumen_scatter_elements_i64_i32_r2", "scatter_elements")
        );
        let src = module_source(&[spec]);
        assert!(src.contains("void lumen_scatter_elements_i64_i32_r2(long long* out, const long long* updates, const void* indices,"), "{src}");
        assert!(src.contains("const int* idx = (const int*)indices;"), "{src}");
        assert!(src.contains("lumen_views<2, 3> v"), "{src}");
        assert!(src.contains("if (id < 0) id += (long long)extent;"), "{src}");
        assert!(src.contains("atomicMin(err, i);"), "{src}");
        assert!(src.contains("lumen_scatter_i64(out + off[2] + (unsigned long long)id * stride,"));
        // Every type's store and combine step, once; the combine of each reduction by its code.
        for t in ["f32", "i32", "i64"] {
            assert_eq!(src.matches(&format!(" lumen_scatter_combine_{t}(")).count(), 2, "{t}");
            assert_eq!(src.matches(&format!("void lumen_scatter_{t}(")).count(), 1, "{t}");
        }
        assert!(src.contains(
            "case 1: return (long long)((unsigned long long)a + (unsigned long long)b);"
        ));
        assert!(src.contains("case 3: return (float)((a != a || b != b) ? __int_as_float(0x7fc00000) : (b > a ? b : a));"));
        assert!(src.contains("case 4: return (int)(b < a ? b : a);"), "{src}");
        assert!(src.contains("old = atomicCAS(q, seen, (unsigned int)__float_as_uint(next));"));
        for r in ScatterReduction::ALL {
            assert_eq!(ScatterReduction::from_code(r.code()), Some(r));
        }
        // A module without a scatter carries none of it.
        let other = module_source(&[KernelSpec::GatherElements { wide: true, rank: 1 }]);
        assert!(!other.contains("lumen_scatter_"), "{other}");
        let n = all_specs().into_iter().filter(|s| s.family() == "scatter_elements").count();
        assert_eq!(n, CAST_TYPES.len() * 2 * MAX_RANK);
    }

    #[test]
    fn conv_and_take_arguments_round_trip_their_words() {
        let g = ConvGeometry::new(
            &lumen_compiler::ConvSpec {
                strides: vec![2],
                dilations: vec![3],
                pads: vec![(2, 1)],
                groups: 2,
            },
            &[2, 4, 9],
            &[6, 2, 2],
        )
        .unwrap();
        let x = View::contiguous(&[2, 4, 9]);
        let w = View::contiguous(&[6, 2, 2]);
        let bias = View { shape: vec![6], strides: vec![2], offset: 1 };
        let a = ConvArgs::new(&g, &x, &w, Some(&bias), None);
        let words = a.words();
        assert_eq!(words.len(), CONV_WORDS);
        assert_eq!(ConvArgs::from_words(&words), Some(a));
        assert_eq!(ConvArgs::from_words(&words[1..]), None);
        // (9 + 3 - 4) / 2 + 1 = 5 outputs in the last slot; slots 0 and 1 of length 1, stride 0.
        assert_eq!((a.len, a.cg, a.ocg, a.output), (2 * 6 * 5, 2, 3, [1, 1, 5]));
        assert_eq!((a.x, a.w, a.bias), ([0, 36, 9, 0, 0, 1], [0, 4, 2, 0, 0, 1], [1, 2]));
        let t = TakeArgs {
            picks: 3,
            inner: 4,
            stride: 5,
            extent: 6,
            idx_offset: 7,
            idx_stride: 8,
            fill: 9,
        };
        assert_eq!(t.words().len(), TAKE_WORDS);
        assert_eq!(TakeArgs::from_words(&t.words()), Some(t));
        assert_eq!(TakeArgs::from_words(&[1, 2]), None);
    }
}
