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

use std::fmt::Write as _;

use lumen_compiler::{ElemOp, ReduceOp, View};

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
    GatherReport {
        /// i64 ids (else i32).
        wide: bool,
        /// Rank of the ids' view.
        rank: usize,
    },
}

impl KernelSpec {
    /// The kernel family: `map`, `copy`, `reduce`, `gather`, `gather_report`.
    pub fn family(&self) -> &'static str {
        match self {
            KernelSpec::Map { .. } => "map",
            KernelSpec::Copy { .. } => "copy",
            KernelSpec::Reduce { .. } => "reduce",
            KernelSpec::Gather { .. } => "gather",
            KernelSpec::GatherReport { .. } => "gather_report",
        }
    }

    /// The `extern "C"` entry point.
    pub fn name(&self) -> String {
        let id = |wide: bool| if wide { "i64" } else { "i32" };
        match *self {
            KernelSpec::Map { op, rank } => format!("lumen_map_{}_r{rank}", op.name()),
            KernelSpec::Copy { rank } => format!("lumen_copy_r{rank}"),
            KernelSpec::Reduce { op, form, rank } => {
                format!("lumen_reduce_{}_{}_r{rank}", op.name(), form.name())
            }
            KernelSpec::Gather { wide, rank } => format!("lumen_gather_{}_r{rank}", id(wide)),
            KernelSpec::GatherReport { wide, rank } => {
                format!("lumen_gather_report_{}_r{rank}", id(wide))
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
        }
    }

    /// The element-wise op whose device function the kernel calls, if any.
    fn elem_op(&self) -> Option<ElemOp> {
        match *self {
            KernelSpec::Map { op, .. } => Some(op),
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
"#;

/// Every kernel the runtime can launch, in a fixed order: each elementwise op at each rank,
/// the copies, each reduction in both forms at each row rank, the gathers and their reports.
pub fn all_specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for op in ElemOp::ALL {
        specs.extend((1..=MAX_RANK).map(|rank| KernelSpec::Map { op, rank }));
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
    specs
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
        // 19 ops x 6 ranks, 6 copies, 2 reductions x 2 forms x 5 ranks, 2 x 2 x 6 gathers.
        assert_eq!(specs.len(), ElemOp::ALL.len() * MAX_RANK + MAX_RANK + 20 + 24);
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
}
