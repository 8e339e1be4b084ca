//! lt_matmul through cuBLASLt's lower-level API (cudarc's `cublaslt::result` and `sys`), so the
//! workspace is the buffer the planner placed in the slab rather than a library allocation.
//!
//! Layout: lumen's tensors are row-major; cuBLASLt's default order is column-major. A
//! row-major `[R, C]` matrix with leading dimension C *is* the column-major `[C, R]` matrix, so
//! row-major `Y[M,N] = X[M,K] · W[K,N]` is computed as the column-major product
//! `Yᵀ[N,M] = Wᵀ[N,K] · Xᵀ[K,M]`: cuBLASLt's (m, n, k) = (N, M, K), its A is W, its B is X,
//! both untransposed. D = Yᵀ has N rows, so the epilogue's bias (one value per row of D) is one
//! value per *column* of Y, which is exactly lumen's `bias[N]` broadcast over rows.
//!
//! Views ([`lt_problem`]): an operand matrix whose column stride is 1 is its row-major self
//! (leading dimension = its row stride); one whose row stride is 1 (a transposed view) is the
//! column-major matrix with leading dimension = its column stride, handed to cuBLASLt with
//! `CUBLASLT_MATMUL_DESC_TRANSA`/`TRANSB` = `CUBLAS_OP_T`, so no transpose kernel ever runs.
//! Batch axes are merged where every operand walks them with one stride
//! ([`super::codegen::collapse`]); the innermost merged run becomes cuBLASLt's strided batch
//! (`CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT`, `..._STRIDED_BATCH_OFFSET`; a broadcast batch axis
//! has offset 0), and any outer batch axes that no single stride expresses (attention's
//! `[batch, heads]` over a `[batch, seq, heads, dim]` buffer) are a loop of one cuBLASLt call
//! per outer index, each with its own pointers, all enqueued on the one stream. Operand
//! addresses inside a buffer (a view's offset) can be less than 256-byte aligned, so the
//! heuristic is told each operand's alignment (`CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES`).
//!
//! Per matmul problem (layouts, transposes, epilogue, workspace, compute type) the algorithm heuristic is
//! asked once at prepare and cached with the matrix layouts; each node gets its own matmul
//! descriptor because the bias pointer is a descriptor attribute. Compute type is
//! `CUBLAS_COMPUTE_32F` unless TF32 is asked for explicitly ([`ComputeMode::Tf32`]).

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;

use cudarc::cublaslt::result as lt_result;
use cudarc::cublaslt::sys as lt_sys;
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use lumen_compiler::{Epilogue, View};

use super::device::Device;
use super::error::{CudaError, lt};
use crate::RuntimeError;

/// The compute type of every matmul.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ComputeMode {
    /// `CUBLAS_COMPUTE_32F`: full FP32 products and sums (the default; matches the CPU to
    /// about 1e-6 relative).
    #[default]
    Fp32,
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`: tensor cores with 10-bit mantissa inputs; several
    /// times faster on Ampere and later, about 1e-3 relative error. Only when asked for.
    Tf32,
}

impl ComputeMode {
    /// `fp32` or `tf32`.
    pub fn name(self) -> &'static str {
        match self {
            ComputeMode::Fp32 => "fp32",
            ComputeMode::Tf32 => "tf32",
        }
    }

    fn cublas(self) -> lt_sys::cublasComputeType_t {
        match self {
            ComputeMode::Fp32 => lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ComputeMode::Tf32 => lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        }
    }
}

/// The cuBLASLt epilogue for a lumen epilogue (`CUBLASLT_EPILOGUE_*`).
pub fn cublaslt_epilogue(epilogue: Epilogue) -> lt_sys::cublasLtEpilogue_t {
    use lt_sys::cublasLtEpilogue_t as E;
    match epilogue {
        Epilogue::Default => E::CUBLASLT_EPILOGUE_DEFAULT,
        Epilogue::Bias => E::CUBLASLT_EPILOGUE_BIAS,
        Epilogue::Relu => E::CUBLASLT_EPILOGUE_RELU,
        Epilogue::ReluBias => E::CUBLASLT_EPILOGUE_RELU_BIAS,
        Epilogue::Gelu => E::CUBLASLT_EPILOGUE_GELU,
        Epilogue::GeluBias => E::CUBLASLT_EPILOGUE_GELU_BIAS,
    }
}

/// The column-major problem cuBLASLt sees for row-major `[m,k] x [k,n]`: (rows, cols, ld) of
/// its A (= W), B (= X) and D (= Y), and its (m, n, k). Leading dimensions are at least 1 (the
/// API refuses 0 even for empty matrices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnMajor {
    /// A = W viewed column-major: (n, k, max(n,1)).
    pub a: (u64, u64, i64),
    /// B = X viewed column-major: (k, m, max(k,1)).
    pub b: (u64, u64, i64),
    /// D = Y viewed column-major: (n, m, max(n,1)).
    pub d: (u64, u64, i64),
    /// cuBLASLt's (m, n, k) = lumen's (n, m, k).
    pub mnk: (u64, u64, u64),
}

/// The column-major mapping of row-major `[m,k] x [k,n]` (see the module docs).
///
/// # Errors
/// [`CudaError::TooLarge`] when a leading dimension exceeds `i64`.
pub fn column_major(m: usize, k: usize, n: usize) -> Result<ColumnMajor, CudaError> {
    let ld = |v: usize| {
        i64::try_from(v.max(1)).map_err(|_| CudaError::TooLarge {
            what: "leading dimension",
            value: v,
            api: "cublasLtMatrixLayoutCreate (int64)",
        })
    };
    let (m64, k64, n64) = (m as u64, k as u64, n as u64);
    Ok(ColumnMajor {
        a: (n64, k64, ld(n)?),
        b: (k64, m64, ld(k)?),
        d: (n64, m64, ld(n)?),
        mnk: (n64, m64, k64),
    })
}

/// One cuBLASLt matrix layout: column-major `rows x cols` with leading dimension `ld`,
/// `batch` matrices `batch_stride` elements apart (`batch` = 1: stride 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatrixLayout {
    /// Rows (column-major).
    pub rows: u64,
    /// Columns.
    pub cols: u64,
    /// Leading dimension, elements (at least `max(rows, 1)`).
    pub ld: i64,
    /// `CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT`.
    pub batch: i32,
    /// `CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET`, elements (0 broadcasts).
    pub batch_stride: i64,
}

/// The column-major problem cuBLASLt solves for one lt_matmul node (see the module docs): its
/// A (= W), B (= X) and D (= Y) layouts, whether A and B are transposed, and its (m, n, k) =
/// lumen's (n, m, k).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LtProblem {
    /// A = W.
    pub a: MatrixLayout,
    /// B = X.
    pub b: MatrixLayout,
    /// D = Y (and C, never read: beta = 0).
    pub d: MatrixLayout,
    /// `CUBLASLT_MATMUL_DESC_TRANSA` = `CUBLAS_OP_T` (W's view is transposed).
    pub trans_a: bool,
    /// `CUBLASLT_MATMUL_DESC_TRANSB` = `CUBLAS_OP_T` (X's view is transposed).
    pub trans_b: bool,
    /// cuBLASLt's (m, n, k).
    pub mnk: (u64, u64, u64),
}

/// A node's cuBLASLt problem and its calls: one per outer batch index, each the element offsets
/// `[w, x, y]` of its first matrices inside their buffers (the views' offsets included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LtCalls {
    /// The problem every call solves.
    pub problem: LtProblem,
    /// `[w, x, y]` element offsets per call, in row-major order of the outer batch axes.
    pub offsets: Vec<[usize; 3]>,
}

/// The layout of one operand matrix `rows x cols` (lumen's row-major sense) with strides
/// `(rs, cs)`: `(layout rows, cols, ld, transposed)` in cuBLASLt's column-major sense, or
/// `None` when neither stride is 1 (or the other stride is too small to be a leading dimension).
fn operand_layout(
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
) -> Option<(u64, u64, usize, bool)> {
    // A length-1 axis' stride is never used: treat it as whatever fits.
    let row_major = (cs == 1 || cols <= 1) && (rows <= 1 || rs >= cols.max(1));
    if row_major {
        let ld = if rows <= 1 { cols.max(1) } else { rs };
        return Some((cols as u64, rows as u64, ld, false));
    }
    let col_major = (rs == 1 || rows <= 1) && (cols <= 1 || cs >= rows.max(1));
    if col_major {
        let ld = if cols <= 1 { rows.max(1) } else { cs };
        return Some((rows as u64, cols as u64, ld, true));
    }
    None
}

/// The cuBLASLt problem of `Y [batch..., m, n] = X [batch..., m, k] · W [batch..., k, n]` read
/// through the views `x` and `w` (each of rank `nb + 2` with the same batch axes), `Y` written
/// contiguous (see the module docs).
///
/// # Errors
/// A reason (for [`crate::RuntimeError::Unsupported`]) when an operand's matrix has no unit
/// stride, the views disagree with (batch, m, k, n), or a size exceeds cuBLASLt's integers.
pub fn lt_problem(
    x: &View,
    w: &View,
    (batch, m, k, n): (usize, usize, usize, usize),
) -> Result<LtCalls, String> {
    let rank = x.rank();
    let Some(nb) = rank.checked_sub(2) else { return Err("an operand is not a matrix".into()) };
    if w.rank() != rank
        || x.shape[nb..] != [m, k]
        || w.shape[nb..] != [k, n]
        || x.shape[..nb] != w.shape[..nb]
        || x.shape[..nb].iter().product::<usize>() != batch
    {
        return Err("operand views do not match m, k, n and the batch".into());
    }
    let unit =
        || "an operand matrix with no unit stride (neither row-major nor transposed)".to_string();
    let (xr, xc, xld, trans_b) =
        operand_layout(m, k, x.strides[nb], x.strides[nb + 1]).ok_or_else(unit)?;
    let (wr, wc, wld, trans_a) =
        operand_layout(k, n, w.strides[nb], w.strides[nb + 1]).ok_or_else(unit)?;
    // Batch axes: x, w and the contiguous output, merged where one stride walks each.
    let batch_shape = &x.shape[..nb];
    let mn = m.checked_mul(n).ok_or_else(|| "size overflows".to_string())?;
    let y = View {
        shape: batch_shape.to_vec(),
        strides: lumen_compiler::view::row_major_strides(batch_shape)
            .iter()
            .map(|s| s * mn)
            .collect(),
        offset: 0,
    };
    let xb =
        View { shape: batch_shape.to_vec(), strides: x.strides[..nb].to_vec(), offset: x.offset };
    let wb =
        View { shape: batch_shape.to_vec(), strides: w.strides[..nb].to_vec(), offset: w.offset };
    let (cshape, cviews) = super::codegen::collapse(batch_shape, &[&wb, &xb, &y]);
    let last = cshape.len() - 1;
    let count = cshape[last];
    let big = |v: usize, what: &str| i64::try_from(v).map_err(|_| format!("{what} exceeds int64"));
    let count32 = i32::try_from(count).map_err(|_| "batch count exceeds int32".to_string())?;
    let stride = |k: usize| if count > 1 { cviews[k].strides[last] } else { 0 };
    let layout = |rows: u64, cols: u64, ld: usize, s: usize| -> Result<MatrixLayout, String> {
        Ok(MatrixLayout {
            rows,
            cols,
            ld: big(ld, "leading dimension")?,
            batch: count32,
            batch_stride: big(s, "batch stride")?,
        })
    };
    let problem = LtProblem {
        a: layout(wr, wc, wld, stride(0))?,
        b: layout(xr, xc, xld, stride(1))?,
        d: layout(n as u64, m as u64, n.max(1), stride(2))?,
        trans_a,
        trans_b,
        mnk: (n as u64, m as u64, k as u64),
    };
    // One call per index of the outer axes (all but the last merged one).
    let outer_shape = &cshape[..last];
    let outer: Vec<View> = cviews
        .iter()
        .map(|v| View {
            shape: outer_shape.to_vec(),
            strides: v.strides[..last].to_vec(),
            offset: v.offset,
        })
        .collect();
    let mut offsets = Vec::new();
    lumen_compiler::view::walk(outer_shape, [&outer[0], &outer[1], &outer[2]], |o| offsets.push(o));
    Ok(LtCalls { problem, offsets })
}

/// A cuBLASLt handle, destroyed on drop.
#[derive(Debug)]
pub(crate) struct LtHandle {
    raw: lt_sys::cublasLtHandle_t,
    device: Arc<Device>,
}

impl LtHandle {
    pub(crate) fn new(device: &Arc<Device>) -> Result<Self, RuntimeError> {
        device.bind()?;
        let raw = lt_result::create_handle().map_err(lt("cublasLtCreate"))?;
        Ok(Self { raw, device: device.clone() })
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: created by cublasLtCreate, destroyed once.
            let _ = unsafe { lt_result::destroy_handle(self.raw) };
        }
    }
}

struct Layout(lt_sys::cublasLtMatrixLayout_t);

impl Layout {
    fn new((rows, cols, ld): (u64, u64, i64)) -> Result<Self, CudaError> {
        let raw = lt_result::create_matrix_layout(lt_sys::cudaDataType::CUDA_R_32F, rows, cols, ld)
            .map_err(lt("cublasLtMatrixLayoutCreate"))?;
        Ok(Self(raw))
    }

    /// A layout with its strided batch (`BATCH_COUNT` int32, `STRIDED_BATCH_OFFSET` int64), set
    /// even for a batch of 1 so nothing depends on a default.
    fn batched(m: &MatrixLayout) -> Result<Self, CudaError> {
        use lt_sys::cublasLtMatrixLayoutAttribute_t as L;
        let layout = Self::new((m.rows, m.cols, m.ld))?;
        // SAFETY: BATCH_COUNT is an int32_t attribute, STRIDED_BATCH_OFFSET an int64_t one;
        // cuBLASLt copies the bytes before returning.
        unsafe {
            lt_result::set_matrix_layout_attribute(
                layout.0,
                L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                (&m.batch as *const i32).cast::<c_void>(),
                size_of::<i32>(),
            )
            .map_err(lt("cublasLtMatrixLayoutSetAttribute"))?;
            lt_result::set_matrix_layout_attribute(
                layout.0,
                L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                (&m.batch_stride as *const i64).cast::<c_void>(),
                size_of::<i64>(),
            )
            .map_err(lt("cublasLtMatrixLayoutSetAttribute"))?;
        }
        Ok(layout)
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created above, destroyed once.
        let _ = unsafe { lt_result::destroy_matrix_layout(self.0) };
    }
}

struct Desc(lt_sys::cublasLtMatmulDesc_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatmulDescCreate, destroyed once.
        let _ = unsafe { lt_result::destroy_matmul_desc(self.0) };
    }
}

struct Pref(lt_sys::cublasLtMatmulPreference_t);

impl Pref {
    /// A preference that caps the algorithm's workspace at `bytes` (the planned workspace) and
    /// states the operands' alignment in bytes (A, B, C, D; each a power of two up to 256).
    fn with_workspace_and_alignment(bytes: u64, align: [u32; 4]) -> Result<Self, CudaError> {
        use lt_sys::cublasLtMatmulPreferenceAttributes_t as P;
        let pref = Self::with_max_workspace(bytes)?;
        let attrs = [
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
        ];
        for (attr, bytes) in attrs.into_iter().zip(align) {
            // SAFETY: the MIN_ALIGNMENT attributes are uint32_t.
            unsafe {
                lt_result::set_matmul_pref_attribute(
                    pref.0,
                    attr,
                    (&bytes as *const u32).cast::<c_void>(),
                    size_of::<u32>(),
                )
            }
            .map_err(lt("cublasLtMatmulPreferenceSetAttribute"))?;
        }
        Ok(pref)
    }

    /// A preference that caps the algorithm's workspace at `bytes` (the planned workspace).
    fn with_max_workspace(bytes: u64) -> Result<Self, CudaError> {
        let pref =
            Pref(lt_result::create_matmul_pref().map_err(lt("cublasLtMatmulPreferenceCreate"))?);
        // SAFETY: MAX_WORKSPACE_BYTES is a uint64_t attribute.
        unsafe {
            lt_result::set_matmul_pref_attribute(
                pref.0,
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast::<c_void>(),
                size_of::<u64>(),
            )
        }
        .map_err(lt("cublasLtMatmulPreferenceSetAttribute"))?;
        Ok(pref)
    }
}

impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtMatmulPreferenceCreate, destroyed once.
        let _ = unsafe { lt_result::destroy_matmul_pref(self.0) };
    }
}

/// Sets one descriptor attribute from a plain value.
///
/// # Safety
/// `T` must be the attribute's C type.
unsafe fn set_desc<T>(
    desc: &Desc,
    attr: lt_sys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> Result<(), CudaError> {
    // SAFETY: the caller guarantees T matches; cuBLASLt copies `size_of::<T>()` bytes.
    unsafe {
        lt_result::set_matmul_desc_attribute(
            desc.0,
            attr,
            (value as *const T).cast::<c_void>(),
            size_of::<T>(),
        )
    }
    .map_err(lt("cublasLtMatmulDescSetAttribute"))
}

/// `CUBLAS_OP_N` and `CUBLAS_OP_T` of cublas_api.h (cudarc's cuBLASLt bindings do not carry
/// the enum).
fn cublas_op(transposed: bool) -> i32 {
    i32::from(transposed)
}

fn matmul_desc(
    mode: ComputeMode,
    epilogue: Epilogue,
    bias: Option<CUdeviceptr>,
    (trans_a, trans_b): (bool, bool),
) -> Result<Desc, CudaError> {
    use lt_sys::cublasLtMatmulDescAttributes_t as A;
    let raw = lt_result::create_matmul_desc(mode.cublas(), lt_sys::cudaDataType::CUDA_R_32F)
        .map_err(lt("cublasLtMatmulDescCreate"))?;
    let desc = Desc(raw);
    // Set even when N (the default), so the layout mapping never depends on a default.
    let (op_a, op_b) = (cublas_op(trans_a), cublas_op(trans_b));
    // SAFETY: TRANSA/TRANSB are cublasOperation_t (a C int enum), EPILOGUE is cublasLtEpilogue_t, BIAS_POINTER
    // is a device pointer (`const void*`, 8 bytes like CUdeviceptr).
    unsafe {
        set_desc(&desc, A::CUBLASLT_MATMUL_DESC_TRANSA, &op_a)?;
        set_desc(&desc, A::CUBLASLT_MATMUL_DESC_TRANSB, &op_b)?;
        set_desc(&desc, A::CUBLASLT_MATMUL_DESC_EPILOGUE, &cublaslt_epilogue(epilogue))?;
        if let Some(bias) = bias {
            let ptr = bias as usize as *const c_void;
            set_desc(&desc, A::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr)?;
            // One bias for every matrix of a strided batch (int64_t; 0 is the default, set
            // so nothing depends on it).
            set_desc(&desc, A::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &0i64)?;
        }
    }
    Ok(desc)
}

/// The cache key of the heuristic: everything the algorithm choice depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ShapeKey {
    pub(crate) problem: LtProblem,
    pub(crate) epilogue: Epilogue,
    pub(crate) workspace: usize,
    pub(crate) mode: ComputeMode,
    /// Alignment in bytes of every call's A, B, C, D pointers (powers of two up to 256).
    pub(crate) align: [u32; 4],
}

impl ShapeKey {
    /// lumen's (m, k, n), for messages.
    fn mkn(&self) -> (usize, usize, usize) {
        let (cm, cn, ck) = self.problem.mnk;
        (cn as usize, ck as usize, cm as usize)
    }
}

/// The largest power of two up to 256 dividing `bytes` (256 for 0): a pointer's alignment
/// inside the 256-byte-aligned slab.
pub fn alignment(bytes: u64) -> u32 {
    if bytes == 0 { 256 } else { 1u32 << bytes.trailing_zeros().min(8) }
}

/// The layouts and the algorithm chosen for one shape.
pub(crate) struct LtShape {
    a: Layout,
    b: Layout,
    d: Layout,
    algo: lt_sys::cublasLtMatmulAlgo_t,
    /// Workspace bytes the algorithm needs (at most the planned workspace).
    pub(crate) workspace_needed: usize,
}

impl std::fmt::Debug for LtShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LtShape").field("workspace_needed", &self.workspace_needed).finish()
    }
}

/// One lt_matmul node ready to enqueue: its descriptor (bias pointer set), its shape's index in
/// the cache, and the slab pointers (A, B, D) of each of its calls.
pub(crate) struct LtCall {
    desc: Desc,
    pub(crate) shape: usize,
    pub(crate) ptrs: Vec<[CUdeviceptr; 3]>,
    pub(crate) workspace: CUdeviceptr,
    pub(crate) workspace_bytes: usize,
}

impl std::fmt::Debug for LtCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LtCall")
            .field("shape", &self.shape)
            .field("workspace_bytes", &self.workspace_bytes)
            .finish()
    }
}

/// The operands of one lt_matmul, as slab addresses.
#[derive(Debug, Clone)]
pub(crate) struct LtOperands {
    /// `[w, x, y]` addresses of each call's first matrices (A, B, D).
    pub(crate) calls: Vec<[CUdeviceptr; 3]>,
    /// bias `[n]`, when the epilogue has one.
    pub(crate) bias: Option<CUdeviceptr>,
    /// The planned workspace and its size in bytes.
    pub(crate) workspace: (CUdeviceptr, usize),
}

/// The matmuls of one prepared program: handle, shape cache, calls.
#[derive(Debug)]
pub(crate) struct LtPlan {
    // Calls and shapes hold descriptors of this handle's library; declared first so they drop
    // before it.
    calls: Vec<LtCall>,
    shapes: Vec<LtShape>,
    keys: Vec<ShapeKey>,
    handle: LtHandle,
    /// Heuristic queries made (distinct shapes).
    pub(crate) heuristic_queries: usize,
}

impl LtPlan {
    pub(crate) fn new(device: &Arc<Device>) -> Result<Self, RuntimeError> {
        Ok(Self {
            calls: Vec::new(),
            shapes: Vec::new(),
            keys: Vec::new(),
            handle: LtHandle::new(device)?,
            heuristic_queries: 0,
        })
    }

    /// Adds one matmul node; asks the heuristic only for a shape not seen before. Returns the
    /// call's index for [`LtPlan::enqueue`].
    pub(crate) fn add(&mut self, key: ShapeKey, ops: LtOperands) -> Result<usize, CudaError> {
        let call = self.call(key, ops)?;
        self.calls.push(call);
        Ok(self.calls.len() - 1)
    }

    /// Makes call `index` (from [`LtPlan::add`]) solve `key` on `ops` instead: a program
    /// with symbolic dimensions binding new sizes. Asks the heuristic only for a shape not seen
    /// before (a bound program sees at most one shape per value of its symbols).
    pub(crate) fn replace(
        &mut self,
        index: usize,
        key: ShapeKey,
        ops: LtOperands,
    ) -> Result<(), CudaError> {
        let call = self.call(key, ops)?;
        match self.calls.get_mut(index) {
            Some(slot) => {
                *slot = call;
                Ok(())
            }
            None => Err(CudaError::CublasLt {
                call: "cublasLtMatmul",
                status: format!("no prepared call {index} to replace"),
            }),
        }
    }

    /// The call solving `key` on `ops`, its shape (layouts and algorithm) cached by key.
    fn call(&mut self, key: ShapeKey, ops: LtOperands) -> Result<LtCall, CudaError> {
        let trans = (key.problem.trans_a, key.problem.trans_b);
        let desc = matmul_desc(key.mode, key.epilogue, ops.bias, trans)?;
        let shape = match self.keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                let s = self.heuristic(&key, &desc)?;
                self.heuristic_queries += 1;
                self.shapes.push(s);
                self.keys.push(key);
                self.shapes.len() - 1
            }
        };
        Ok(LtCall {
            desc,
            shape,
            ptrs: ops.calls,
            workspace: ops.workspace.0,
            workspace_bytes: ops.workspace.1,
        })
    }

    fn heuristic(&self, key: &ShapeKey, desc: &Desc) -> Result<LtShape, CudaError> {
        const ASK: usize = 8;
        let p = &key.problem;
        let (a, b, d) = (Layout::batched(&p.a)?, Layout::batched(&p.b)?, Layout::batched(&p.d)?);
        let pref = Pref::with_workspace_and_alignment(key.workspace as u64, key.align)?;
        let (m, k, n) = key.mkn();
        // SAFETY: all-zero is a valid bit pattern for this plain C struct of ints and floats.
        let mut results: [lt_sys::cublasLtMatmulHeuristicResult_t; ASK] =
            unsafe { std::mem::zeroed() };
        let mut returned: i32 = 0;
        // SAFETY: every descriptor is live; `results` has room for ASK entries. C = D (beta is
        // 0, so C is never read, but the layout must be valid).
        unsafe {
            lt_sys::cublasLtMatmulAlgoGetHeuristic(
                self.handle.raw,
                desc.0,
                a.0,
                b.0,
                d.0,
                d.0,
                pref.0,
                ASK as i32,
                results.as_mut_ptr(),
                &mut returned,
            )
        }
        .result()
        .map_err(|e| CudaError::NoAlgorithm {
            m,
            k,
            n,
            epilogue: key.epilogue.name(),
            workspace: key.workspace,
            reason: format!("cublasLtMatmulAlgoGetHeuristic returned {:?}", e.0),
        })?;
        let returned = usize::try_from(returned).unwrap_or(0).min(ASK);
        let usable = results[..returned]
            .iter()
            .filter(|r| r.state == lt_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
        let mut smallest_too_big: Option<usize> = None;
        for r in usable {
            if r.workspaceSize <= key.workspace {
                return Ok(LtShape { a, b, d, algo: r.algo, workspace_needed: r.workspaceSize });
            }
            smallest_too_big =
                Some(smallest_too_big.map_or(r.workspaceSize, |s| s.min(r.workspaceSize)));
        }
        if let Some(needed) = smallest_too_big {
            return Err(CudaError::WorkspaceTooSmall { m, k, n, needed, planned: key.workspace });
        }
        Err(CudaError::NoAlgorithm {
            m,
            k,
            n,
            epilogue: key.epilogue.name(),
            workspace: key.workspace,
            reason: format!("the heuristic returned {returned} usable algorithm(s)"),
        })
    }

    /// The most workspace any chosen algorithm needs, bytes (for the prepare profile).
    pub(crate) fn max_workspace_needed(&self) -> usize {
        self.shapes.iter().map(|s| s.workspace_needed).max().unwrap_or(0)
    }

    /// Enqueues call `call` on `stream`: `D = epilogue(1 · A·B + 0 · C)` with the cached
    /// algorithm and the planned workspace.
    pub(crate) fn enqueue(&self, call: usize, stream: CUstream) -> Result<(), CudaError> {
        let (Some(c), alpha, beta) = (self.calls.get(call), 1.0f32, 0.0f32) else {
            return Err(CudaError::CublasLt {
                call: "cublasLtMatmul",
                status: format!("no prepared call {call}"),
            });
        };
        let Some(s) = self.shapes.get(c.shape) else {
            return Err(CudaError::CublasLt {
                call: "cublasLtMatmul",
                status: format!("no cached shape {}", c.shape),
            });
        };
        let ptr = |p: CUdeviceptr| p as usize as *const c_void;
        for &[a, b, d] in &c.ptrs {
            // SAFETY: descriptors are live; A, B, D (every batch of them), bias and workspace
            // lie in checked ranges of the live slab, with the alignment the heuristic was told;
            // alpha/beta are host scalars (the default pointer mode) read before the call
            // returns.
            unsafe {
                lt_result::matmul(
                    self.handle.raw,
                    c.desc.0,
                    (&alpha as *const f32).cast::<c_void>(),
                    (&beta as *const f32).cast::<c_void>(),
                    ptr(a),
                    s.a.0,
                    ptr(b),
                    s.b.0,
                    ptr(d),
                    s.d.0,
                    d as usize as *mut c_void,
                    s.d.0,
                    &s.algo,
                    c.workspace as usize as *mut c_void,
                    c.workspace_bytes,
                    stream as lt_sys::cudaStream_t,
                )
            }
            .map_err(lt("cublasLtMatmul"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_major_maps_to_transposed_column_major() {
        // Y[64,64] = X[64,256] · W[256,64]: cuBLASLt sees Yᵀ[64,64] = Wᵀ[64,256] · Xᵀ[256,64].
        let cm = column_major(64, 256, 64).unwrap();
        assert_eq!(cm.mnk, (64, 64, 256));
        assert_eq!(cm.a, (64, 256, 64));
        assert_eq!(cm.b, (256, 64, 256));
        assert_eq!(cm.d, (64, 64, 64));
        // Tall and thin: M = 655360 rows of 10; D has N = 10 rows, so bias[10] is per row of D.
        let cm = column_major(655_360, 10, 10).unwrap();
        assert_eq!(cm.mnk, (10, 655_360, 10));
        assert_eq!(cm.d, (10, 655_360, 10));
        // K = 0 keeps leading dimensions positive.
        let cm = column_major(3, 0, 4).unwrap();
        assert_eq!(cm.b, (0, 3, 1));
        assert_eq!(cm.a, (4, 0, 4));
    }

    #[test]
    fn views_map_to_layouts_transposes_and_batches() {
        let c = |shape: &[usize]| View::contiguous(shape);
        // Plain: the module docs' mapping, one call.
        let p = lt_problem(&c(&[4, 3]), &c(&[3, 5]), (1, 4, 3, 5)).unwrap();
        assert_eq!((p.problem.trans_a, p.problem.trans_b), (false, false));
        assert_eq!((p.problem.a.rows, p.problem.a.cols, p.problem.a.ld), (5, 3, 5));
        assert_eq!((p.problem.b.rows, p.problem.b.cols, p.problem.b.ld), (3, 4, 3));
        assert_eq!(p.problem.mnk, (5, 4, 3));
        assert_eq!(p.offsets, [[0, 0, 0]]);
        // Both transposed: X = Aᵀ of a [3, 4] buffer, W = Bᵀ of a [5, 3] buffer.
        let x = c(&[3, 4]).permute(&[1, 0]);
        let w = c(&[5, 3]).permute(&[1, 0]);
        let p = lt_problem(&x, &w, (1, 4, 3, 5)).unwrap();
        assert_eq!((p.problem.trans_a, p.problem.trans_b), (true, true));
        assert_eq!((p.problem.a.rows, p.problem.a.cols, p.problem.a.ld), (3, 5, 3));
        assert_eq!((p.problem.b.rows, p.problem.b.cols, p.problem.b.ld), (4, 3, 4));
        // A row slice keeps its row stride as the leading dimension and its offset.
        let x = c(&[6, 8]).slice(1, 2, 5).slice(0, 1, 5);
        let p = lt_problem(&x, &c(&[3, 2]), (1, 4, 3, 2)).unwrap();
        assert_eq!((p.problem.b.ld, p.offsets[0][1]), (8, 10));
        // A broadcast batch: one strided batch of 3 with W's stride 0.
        let w = c(&[3, 5]).expand(&[3, 3, 5]).unwrap();
        let p = lt_problem(&c(&[3, 4, 3]), &w, (3, 4, 3, 5)).unwrap();
        assert_eq!((p.problem.a.batch, p.problem.a.batch_stride), (3, 0));
        assert_eq!((p.problem.b.batch_stride, p.problem.d.batch_stride), (12, 20));
        // Two batch axes no single stride walks: a loop over the outer one.
        let q = c(&[2, 7, 3, 4]).permute(&[0, 2, 1, 3]);
        let k = c(&[2, 7, 3, 4]).permute(&[0, 2, 3, 1]);
        let p = lt_problem(&q, &k, (6, 7, 4, 7)).unwrap();
        assert_eq!(p.offsets, [[0, 0, 0], [84, 84, 147]]);
        assert_eq!((p.problem.b.batch, p.problem.b.batch_stride), (3, 4));
        // Neither stride 1: refused with the reason.
        let bad = View { shape: vec![4, 3], strides: vec![6, 2], offset: 0 };
        let err = lt_problem(&bad, &c(&[3, 5]), (1, 4, 3, 5)).unwrap_err();
        assert!(err.contains("no unit stride"), "{err}");
        assert!(lt_problem(&c(&[4, 3]), &c(&[3, 5]), (2, 4, 3, 5)).is_err());
    }

    #[test]
    fn epilogues_map_to_cublaslt() {
        use lt_sys::cublasLtEpilogue_t as E;
        let all = [
            (Epilogue::Default, E::CUBLASLT_EPILOGUE_DEFAULT, 1),
            (Epilogue::Bias, E::CUBLASLT_EPILOGUE_BIAS, 4),
            (Epilogue::Relu, E::CUBLASLT_EPILOGUE_RELU, 2),
            (Epilogue::ReluBias, E::CUBLASLT_EPILOGUE_RELU_BIAS, 6),
            (Epilogue::Gelu, E::CUBLASLT_EPILOGUE_GELU, 32),
            (Epilogue::GeluBias, E::CUBLASLT_EPILOGUE_GELU_BIAS, 36),
        ];
        for (ours, theirs, value) in all {
            assert_eq!(cublaslt_epilogue(ours), theirs);
            // The values of cublasLt.h: the ABI the library reads.
            assert_eq!(theirs as u32, value, "{}", ours.name());
        }
        assert_eq!(ComputeMode::default(), ComputeMode::Fp32);
        assert_eq!(ComputeMode::Fp32.cublas() as u32, 68);
        assert_eq!(ComputeMode::Tf32.cublas() as u32, 77);
    }

    /// Reads one attribute of `T` back through a cuBLASLt `*GetAttribute` function.
    fn read_back<T: Copy, H: Copy, A>(
        get: unsafe fn(H, A, *mut c_void, usize, *mut usize) -> lt_sys::cublasStatus_t,
        handle: H,
        attr: A,
        zero: T,
    ) -> T {
        let mut value = zero;
        let mut written = 0usize;
        // SAFETY: `value` has room for `size_of::<T>()` bytes; the caller names T as the
        // attribute's C type.
        let status = unsafe {
            get(handle, attr, (&mut value as *mut T).cast::<c_void>(), size_of::<T>(), &mut written)
        };
        assert_eq!(status, lt_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
        assert_eq!(written, size_of::<T>(), "attribute size");
        value
    }

    /// Whether libcublasLt is loadable with lumen's symbols plus `extra` (the ones only a test
    /// calls, so a partial library skips instead of panicking inside cudarc's lazy loader);
    /// prints `skipped: why` when not. Under `LUMEN_REQUIRE_CUDA=1` (scripts/gpu-check.sh) a
    /// skip is a failure.
    fn cublaslt_or_skip(extra: &[&'static str]) -> bool {
        use super::super::device::{CUBLASLT, RequiredLibrary};
        let symbols: Vec<&'static str> =
            CUBLASLT.symbols.iter().copied().chain(extra.iter().copied()).collect();
        let lib = RequiredLibrary { symbols: symbols.leak(), ..CUBLASLT };
        let Some(why) = lib.problem(&lib.probe()) else { return true };
        if std::env::var_os("LUMEN_REQUIRE_CUDA").is_some_and(|v| v == "1") {
            panic!("LUMEN_REQUIRE_CUDA=1 but the test would skip: {why}");
        }
        eprintln!("skipped: {why}");
        false
    }

    /// Host-only half of the cuBLASLt path against the real library, no GPU needed: every
    /// descriptor, layout and preference lumen builds is accepted, and reading each attribute
    /// back gives what was set, at the size cuBLASLt's header gives it. Catches a wrong
    /// attribute type or size, an enum value this library version refuses, and an empty-matrix
    /// layout it rejects, before any GPU time is spent. Skips, saying why, without libcublasLt.
    #[test]
    fn descriptors_layouts_and_preferences_against_the_real_library() {
        use lt_sys::cublasLtMatmulDescAttributes_t as D;
        use lt_sys::cublasLtMatrixLayoutAttribute_t as L;
        if !cublaslt_or_skip(&[
            "cublasLtGetVersion",
            "cublasLtMatmulDescGetAttribute",
            "cublasLtMatrixLayoutGetAttribute",
            "cublasLtMatmulPreferenceGetAttribute",
        ]) {
            return;
        }
        // SAFETY: a plain query of the loaded library.
        let version = unsafe { lt_sys::cublasLtGetVersion() };
        eprintln!("cuBLASLt {version} (host-only descriptor checks)");
        let desc_get = |desc: &Desc, attr: D, zero: u64| -> u64 {
            read_back(lt_sys::cublasLtMatmulDescGetAttribute as _, desc.0, attr, zero)
        };
        for mode in [ComputeMode::Fp32, ComputeMode::Tf32] {
            for epilogue in Epilogue::ALL {
                // A made-up, 256-aligned device address: the descriptor stores it, never reads it.
                let bias = epilogue.has_bias().then_some(0x7f00_0000_0100u64);
                let desc = matmul_desc(mode, epilogue, bias, (false, false)).unwrap();
                let get32 = |attr: D| -> u32 {
                    read_back(lt_sys::cublasLtMatmulDescGetAttribute as _, desc.0, attr, 0u32)
                };
                assert_eq!(get32(D::CUBLASLT_MATMUL_DESC_COMPUTE_TYPE), mode.cublas() as u32);
                assert_eq!(
                    get32(D::CUBLASLT_MATMUL_DESC_SCALE_TYPE),
                    lt_sys::cudaDataType::CUDA_R_32F as u32
                );
                assert_eq!(get32(D::CUBLASLT_MATMUL_DESC_TRANSA), 0);
                assert_eq!(get32(D::CUBLASLT_MATMUL_DESC_TRANSB), 0);
                assert_eq!(
                    get32(D::CUBLASLT_MATMUL_DESC_EPILOGUE),
                    cublaslt_epilogue(epilogue) as u32,
                    "{} {}",
                    mode.name(),
                    epilogue.name()
                );
                let stored = desc_get(&desc, D::CUBLASLT_MATMUL_DESC_BIAS_POINTER, 0);
                assert_eq!(stored, bias.unwrap_or(0), "{}", epilogue.name());
            }
        }
        // Layouts of the shapes the GPU tests run, K = 0 and single rows/columns included.
        for (m, k, n) in [(1, 1, 1), (1, 64, 1), (3, 0, 4), (655_360, 10, 10), (4096, 4096, 4096)] {
            let cm = column_major(m, k, n).unwrap();
            for (rows, cols, ld) in [cm.a, cm.b, cm.d] {
                let layout = Layout::new((rows, cols, ld)).unwrap();
                let get64 = |attr: L| -> u64 {
                    read_back(lt_sys::cublasLtMatrixLayoutGetAttribute as _, layout.0, attr, 0u64)
                };
                assert_eq!(get64(L::CUBLASLT_MATRIX_LAYOUT_ROWS), rows, "{m}x{k}x{n}");
                assert_eq!(get64(L::CUBLASLT_MATRIX_LAYOUT_COLS), cols, "{m}x{k}x{n}");
                assert_eq!(get64(L::CUBLASLT_MATRIX_LAYOUT_LD) as i64, ld, "{m}x{k}x{n}");
                let order: i32 = read_back(
                    lt_sys::cublasLtMatrixLayoutGetAttribute as _,
                    layout.0,
                    L::CUBLASLT_MATRIX_LAYOUT_ORDER,
                    -1i32,
                );
                assert_eq!(order, lt_sys::cublasLtOrder_t::CUBLASLT_ORDER_COL as i32);
            }
        }
        // The workspace cap the heuristic is asked with.
        let max_ws: u64 = 4 << 20;
        let pref = Pref::with_max_workspace(max_ws).unwrap();
        let stored: u64 = read_back(
            lt_sys::cublasLtMatmulPreferenceGetAttribute as _,
            pref.0,
            lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            0u64,
        );
        assert_eq!(stored, max_ws);
    }

    /// The problems the CUDA runtime builds for transposed, batched, broadcast-batch and
    /// looped-batch products (from real programs' views), each with every epilogue and both
    /// compute types: descriptors with TRANSA/TRANSB, layouts with BATCH_COUNT and
    /// STRIDED_BATCH_OFFSET, preferences with the operands' alignments, created against the
    /// real library host-only and read back. Skips, saying why, without libcublasLt.
    #[test]
    fn descriptors_layouts_batched_and_transposed_against_the_real_library() {
        use lt_sys::cublasLtMatmulDescAttributes_t as D;
        use lt_sys::cublasLtMatmulPreferenceAttributes_t as P;
        use lt_sys::cublasLtMatrixLayoutAttribute_t as L;
        use lumen_compiler::{CompileOptions, Graph};
        if !cublaslt_or_skip(&[
            "cublasLtMatmulDescGetAttribute",
            "cublasLtMatrixLayoutGetAttribute",
            "cublasLtMatrixLayoutSetAttribute",
            "cublasLtMatmulPreferenceGetAttribute",
        ]) {
            return;
        }
        // Programs whose products are transposed, batched, broadcast and looped.
        let mut cx = Graph::new();
        let a = cx.input("a", [5, 3]);
        let b = cx.weight("b", [4, 3]);
        a.matmul(b.transpose(0, 1)).output("abt");
        a.transpose(0, 1).matmul(&a).output("ata");
        let x = cx.input("x", [2, 3, 4, 5]);
        let y = cx.input("y", [1, 3, 4, 5]);
        x.matmul(y.transpose(-1, -2)).output("bcast");
        let q = cx.input("q", [2, 7, 3, 4]).permute(&[0, 2, 1, 3]);
        let k = cx.input("k", [2, 7, 3, 4]).permute(&[0, 2, 1, 3]);
        q.matmul(k.transpose(-1, -2)).output("scores");
        // One matrix broadcast over a batch of transposed ones: a stride-0 strided batch.
        let z = cx.input("z", [3, 5, 4]);
        let v = cx.weight("v", [1, 2, 5]);
        v.matmul(&z).output("bcast0");
        let mut programs = vec![cx.compile(&CompileOptions::default()).unwrap()];
        let t = lumen_compiler::programs::transformer(Default::default()).unwrap();
        programs.push(t.compile(&CompileOptions::default()).unwrap());
        let mut problems: Vec<LtProblem> = Vec::new();
        for p in &programs {
            for l in super::super::support::launches(p).unwrap() {
                if let super::super::Launch::Matmul(c) = l
                    && !problems.contains(&c.problem)
                {
                    problems.push(c.problem);
                }
            }
        }
        assert!(problems.iter().any(|p| p.trans_a) && problems.iter().any(|p| p.trans_b));
        assert!(
            problems
                .iter()
                .any(|p| p.a.batch > 1 && (p.a.batch_stride == 0 || p.b.batch_stride == 0)),
            "{problems:?}"
        );
        assert!(problems.iter().any(|p| p.b.batch > 1 && p.b.batch_stride > 0));
        let (mut descs, mut layouts, mut prefs) = (0, 0, 0);
        for p in &problems {
            for mode in [ComputeMode::Fp32, ComputeMode::Tf32] {
                for epilogue in Epilogue::ALL {
                    let bias = epilogue.has_bias().then_some(0x7f00_0000_0104u64);
                    let desc = matmul_desc(mode, epilogue, bias, (p.trans_a, p.trans_b)).unwrap();
                    let get32 = |attr: D| -> i32 {
                        read_back(lt_sys::cublasLtMatmulDescGetAttribute as _, desc.0, attr, 0i32)
                    };
                    assert_eq!(get32(D::CUBLASLT_MATMUL_DESC_TRANSA), i32::from(p.trans_a));
                    assert_eq!(get32(D::CUBLASLT_MATMUL_DESC_TRANSB), i32::from(p.trans_b));
                    assert_eq!(
                        get32(D::CUBLASLT_MATMUL_DESC_EPILOGUE),
                        cublaslt_epilogue(epilogue) as i32
                    );
                    if bias.is_some() {
                        let stride: i64 = read_back(
                            lt_sys::cublasLtMatmulDescGetAttribute as _,
                            desc.0,
                            D::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                            -1i64,
                        );
                        assert_eq!(stride, 0);
                    }
                    descs += 1;
                }
            }
            for m in [p.a, p.b, p.d] {
                let layout = Layout::batched(&m).unwrap();
                let get = |attr: L, zero: u64| -> u64 {
                    read_back(lt_sys::cublasLtMatrixLayoutGetAttribute as _, layout.0, attr, zero)
                };
                assert_eq!(get(L::CUBLASLT_MATRIX_LAYOUT_ROWS, 0), m.rows);
                assert_eq!(get(L::CUBLASLT_MATRIX_LAYOUT_COLS, 0), m.cols);
                assert_eq!(get(L::CUBLASLT_MATRIX_LAYOUT_LD, 0) as i64, m.ld);
                let count: i32 = read_back(
                    lt_sys::cublasLtMatrixLayoutGetAttribute as _,
                    layout.0,
                    L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                    0i32,
                );
                assert_eq!(count, m.batch);
                let stride: i64 = read_back(
                    lt_sys::cublasLtMatrixLayoutGetAttribute as _,
                    layout.0,
                    L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    -1i64,
                );
                assert_eq!(stride, m.batch_stride);
                layouts += 1;
            }
        }
        for align in [[256, 256, 256, 256], [4, 16, 256, 256], [8, 4, 4, 4]] {
            let pref = Pref::with_workspace_and_alignment(1 << 20, align).unwrap();
            for (attr, want) in [
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ]
            .into_iter()
            .zip(align)
            {
                let got: u32 = read_back(
                    lt_sys::cublasLtMatmulPreferenceGetAttribute as _,
                    pref.0,
                    attr,
                    0u32,
                );
                assert_eq!(got, want);
            }
            prefs += 1;
        }
        assert_eq!(alignment(0), 256);
        assert_eq!(alignment(0x7f00_0000_0104), 4);
        assert_eq!(alignment(4096 + 64), 64);
        println!(
            "cuBLASLt checked {descs} matmul descriptors, {layouts} batched layouts and {prefs} \
             aligned preferences host-only ({} distinct problems: transposed, batched, \
             broadcast and looped batches)",
            problems.len()
        );
    }
}
