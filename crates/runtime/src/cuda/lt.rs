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
//! Per matmul shape (m, k, n, epilogue, workspace, compute type) the algorithm heuristic is
//! asked once at prepare and cached with the matrix layouts; each node gets its own matmul
//! descriptor because the bias pointer is a descriptor attribute. Compute type is
//! `CUBLAS_COMPUTE_32F` unless TF32 is asked for explicitly ([`ComputeMode::Tf32`]).

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;

use cudarc::cublaslt::result as lt_result;
use cudarc::cublaslt::sys as lt_sys;
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use lumen_compiler::Epilogue;

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

fn matmul_desc(
    mode: ComputeMode,
    epilogue: Epilogue,
    bias: Option<CUdeviceptr>,
) -> Result<Desc, CudaError> {
    use lt_sys::cublasLtMatmulDescAttributes_t as A;
    let raw = lt_result::create_matmul_desc(mode.cublas(), lt_sys::cudaDataType::CUDA_R_32F)
        .map_err(lt("cublasLtMatmulDescCreate"))?;
    let desc = Desc(raw);
    // CUBLAS_OP_N of cublas_api.h (cudarc's cuBLASLt bindings do not carry the enum); the
    // default, set anyway so the layout mapping above never depends on a default.
    let no_trans: i32 = 0;
    // SAFETY: TRANSA/TRANSB are cublasOperation_t (a C int enum), EPILOGUE is cublasLtEpilogue_t, BIAS_POINTER
    // is a device pointer (`const void*`, 8 bytes like CUdeviceptr).
    unsafe {
        set_desc(&desc, A::CUBLASLT_MATMUL_DESC_TRANSA, &no_trans)?;
        set_desc(&desc, A::CUBLASLT_MATMUL_DESC_TRANSB, &no_trans)?;
        set_desc(&desc, A::CUBLASLT_MATMUL_DESC_EPILOGUE, &cublaslt_epilogue(epilogue))?;
        if let Some(bias) = bias {
            let ptr = bias as usize as *const c_void;
            set_desc(&desc, A::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr)?;
        }
    }
    Ok(desc)
}

/// The cache key of the heuristic: everything the algorithm choice depends on (pointers are
/// all 256-byte aligned, so alignment does not vary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ShapeKey {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) epilogue: Epilogue,
    pub(crate) workspace: usize,
    pub(crate) mode: ComputeMode,
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
/// the cache, and its slab pointers.
pub(crate) struct LtCall {
    desc: Desc,
    pub(crate) shape: usize,
    pub(crate) a: CUdeviceptr,
    pub(crate) b: CUdeviceptr,
    pub(crate) d: CUdeviceptr,
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
#[derive(Debug, Clone, Copy)]
pub(crate) struct LtOperands {
    /// X `[m,k]`.
    pub(crate) x: CUdeviceptr,
    /// W `[k,n]`.
    pub(crate) w: CUdeviceptr,
    /// bias `[n]`, when the epilogue has one.
    pub(crate) bias: Option<CUdeviceptr>,
    /// Y `[m,n]`.
    pub(crate) y: CUdeviceptr,
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
        let desc = matmul_desc(key.mode, key.epilogue, ops.bias)?;
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
        self.calls.push(LtCall {
            desc,
            shape,
            a: ops.w,
            b: ops.x,
            d: ops.y,
            workspace: ops.workspace.0,
            workspace_bytes: ops.workspace.1,
        });
        Ok(self.calls.len() - 1)
    }

    fn heuristic(&self, key: &ShapeKey, desc: &Desc) -> Result<LtShape, CudaError> {
        const ASK: usize = 8;
        let cm = column_major(key.m, key.k, key.n)?;
        let (a, b, d) = (Layout::new(cm.a)?, Layout::new(cm.b)?, Layout::new(cm.d)?);
        let pref = Pref::with_max_workspace(key.workspace as u64)?;
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
            m: key.m,
            k: key.k,
            n: key.n,
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
            return Err(CudaError::WorkspaceTooSmall {
                m: key.m,
                k: key.k,
                n: key.n,
                needed,
                planned: key.workspace,
            });
        }
        Err(CudaError::NoAlgorithm {
            m: key.m,
            k: key.k,
            n: key.n,
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
        // SAFETY: descriptors are live; A, B, D, bias and workspace are checked, 256-aligned
        // ranges of the live slab sized for this shape; alpha/beta are host scalars (the
        // default pointer mode) read before the call returns.
        unsafe {
            lt_result::matmul(
                self.handle.raw,
                c.desc.0,
                (&alpha as *const f32).cast::<c_void>(),
                (&beta as *const f32).cast::<c_void>(),
                ptr(c.a),
                s.a.0,
                ptr(c.b),
                s.b.0,
                ptr(c.d),
                s.d.0,
                c.d as usize as *mut c_void,
                s.d.0,
                &s.algo,
                c.workspace as usize as *mut c_void,
                c.workspace_bytes,
                stream as lt_sys::cudaStream_t,
            )
        }
        .map_err(lt("cublasLtMatmul"))
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

    /// Host-only half of the cuBLASLt path against the real library, no GPU needed: every
    /// descriptor, layout and preference lumen builds is accepted, and reading each attribute
    /// back gives what was set, at the size cuBLASLt's header gives it. Catches a wrong
    /// attribute type or size, an enum value this library version refuses, and an empty-matrix
    /// layout it rejects, before any GPU time is spent. Skips, saying why, without libcublasLt.
    #[test]
    fn descriptors_layouts_and_preferences_against_the_real_library() {
        use super::super::device::{CUBLASLT, RequiredLibrary};
        use lt_sys::cublasLtMatmulDescAttributes_t as D;
        use lt_sys::cublasLtMatrixLayoutAttribute_t as L;
        // lumen's symbols plus the ones only this test calls, so a partial library skips
        // here instead of panicking inside cudarc's lazy loader.
        let symbols: Vec<&'static str> = CUBLASLT
            .symbols
            .iter()
            .copied()
            .chain([
                "cublasLtGetVersion",
                "cublasLtMatmulDescGetAttribute",
                "cublasLtMatrixLayoutGetAttribute",
                "cublasLtMatmulPreferenceGetAttribute",
            ])
            .collect();
        let lib = RequiredLibrary { symbols: symbols.leak(), ..CUBLASLT };
        if let Some(why) = lib.problem(&lib.probe()) {
            // scripts/gpu-check.sh sets LUMEN_REQUIRE_CUDA=1: there a skip is a failure.
            if std::env::var_os("LUMEN_REQUIRE_CUDA").is_some_and(|v| v == "1") {
                panic!("LUMEN_REQUIRE_CUDA=1 but the test would skip: {why}");
            }
            eprintln!("skipped: {why}");
            return;
        }
        // SAFETY: a plain query of the loaded library.
        let version = unsafe { lt_sys::cublasLtGetVersion() };
        eprintln!("cuBLASLt {version} (host-only descriptor checks)");
        let desc_get = |desc: &Desc, attr: D, zero: u64| -> u64 {
            read_back(lt_sys::cublasLtMatmulDescGetAttribute as _, desc.0, attr, zero)
        };
        for mode in [ComputeMode::Fp32, ComputeMode::Tf32] {
            for epilogue in [
                Epilogue::Default,
                Epilogue::Bias,
                Epilogue::Relu,
                Epilogue::ReluBias,
                Epilogue::Gelu,
                Epilogue::GeluBias,
            ] {
                // A made-up, 256-aligned device address: the descriptor stores it, never reads it.
                let bias = epilogue.has_bias().then_some(0x7f00_0000_0100u64);
                let desc = matmul_desc(mode, epilogue, bias).unwrap();
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
}
