//! Typed failures of the CUDA runtime: every driver, cuBLASLt and NVRTC status that is not
//! success becomes one of these, with the call that returned it, so an execute never panics and
//! the message says which API refused what.

use cudarc::cublaslt::result::CublasError;
use cudarc::driver::result::DriverError;
use cudarc::nvrtc::result::NvrtcError;
use thiserror::Error;

/// Why a CUDA call or a CUDA preparation failed. Reaches callers as
/// [`crate::RuntimeError::Cuda`].
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum CudaError {
    /// A CUDA driver API call (`cuMemAlloc`, `cuLaunchKernel`, ...) returned an error status.
    #[error("{call} failed: {code} ({message})")]
    Driver {
        /// The driver function, e.g. `cuMemAlloc_v2`.
        call: &'static str,
        /// The `CUresult` name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
        code: String,
        /// The driver's description of the status.
        message: String,
    },
    /// A cuBLASLt call returned a status other than `CUBLAS_STATUS_SUCCESS`.
    #[error("{call} failed: {status}")]
    CublasLt {
        /// The cuBLASLt function, e.g. `cublasLtMatmul`.
        call: &'static str,
        /// The `cublasStatus_t` name.
        status: String,
    },
    /// NVRTC refused to create or compile a kernel's source; `log` is the compiler's log.
    #[error("NVRTC {call} failed for kernel `{kernel}`: {status}{}", log_suffix(log))]
    Nvrtc {
        /// The kernel's name (`lumen_relu`, ...).
        kernel: String,
        /// The NVRTC function, e.g. `nvrtcCompileProgram`.
        call: &'static str,
        /// The `nvrtcResult` name.
        status: String,
        /// The compile log (empty when NVRTC gave none).
        log: String,
    },
    /// cuBLASLt's heuristic returned no algorithm for a matmul shape within the planned
    /// workspace (`cublasLtMatmulAlgoGetHeuristic` with `returnAlgoCount = 0`).
    #[error(
        "cuBLASLt has no algorithm for lt_matmul m={m} k={k} n={n} epilogue {epilogue} with \
         {workspace} bytes of workspace: {reason}"
    )]
    NoAlgorithm {
        /// Rows of the row-major output.
        m: usize,
        /// Inner dimension.
        k: usize,
        /// Columns of the row-major output.
        n: usize,
        /// The epilogue asked for (`RELU_BIAS`, ...).
        epilogue: &'static str,
        /// The planned workspace, bytes.
        workspace: usize,
        /// What the heuristic said.
        reason: String,
    },
    /// The algorithm cuBLASLt chose needs more workspace than the plan gave the matmul.
    #[error(
        "cuBLASLt's algorithm for lt_matmul m={m} k={k} n={n} needs {needed} bytes of \
         workspace but the plan gives it {planned}"
    )]
    WorkspaceTooSmall {
        /// Rows of the output.
        m: usize,
        /// Inner dimension.
        k: usize,
        /// Columns of the output.
        n: usize,
        /// Bytes the algorithm needs.
        needed: usize,
        /// Bytes of the planned workspace buffer.
        planned: usize,
    },
    /// A pointer handed to cuBLASLt or a kernel is not aligned as they require (256 bytes:
    /// the slab's alignment, the strictest cuBLASLt asks of A, B, C, D, bias and workspace).
    #[error("{what} at device address {address:#x} is not {alignment}-byte aligned")]
    Misaligned {
        /// Which buffer, e.g. ``buffer `t0` of node 2 (add_bias)``.
        what: String,
        /// The device address.
        address: u64,
        /// The alignment required, bytes.
        alignment: u64,
    },
    /// A size does not fit the integer type the CUDA API takes (a grid dimension, a cuBLASLt
    /// leading dimension).
    #[error("{what} = {value} is too large for {api}")]
    TooLarge {
        /// What the size is.
        what: &'static str,
        /// The size.
        value: usize,
        /// The API and its limit.
        api: &'static str,
    },
}

fn log_suffix(log: &str) -> String {
    let log = log.trim();
    if log.is_empty() { String::new() } else { format!("; log: {}", log.replace('\n', " | ")) }
}

impl CudaError {
    /// Wraps a driver status with the name of the call that returned it.
    pub fn driver(call: &'static str, err: DriverError) -> Self {
        // cuGetErrorName/String only fail for statuses the driver does not know.
        let code = err
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("CUresult {}", err.0 as i64));
        let message = err
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown status".to_string());
        CudaError::Driver { call, code, message }
    }

    /// Wraps a cuBLASLt status with the name of the call that returned it.
    pub fn cublaslt(call: &'static str, err: CublasError) -> Self {
        CudaError::CublasLt { call, status: format!("{:?}", err.0) }
    }

    /// Wraps an NVRTC status for `kernel` with the call that returned it and the compile log.
    pub fn nvrtc(kernel: &str, call: &'static str, err: NvrtcError, log: String) -> Self {
        CudaError::Nvrtc { kernel: kernel.to_string(), call, status: format!("{:?}", err.0), log }
    }
}

/// `map_err` helper: `.map_err(drv("cuMemAlloc_v2"))`.
pub(crate) fn drv(call: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |e| CudaError::driver(call, e)
}

/// `map_err` helper: `.map_err(lt("cublasLtMatmul"))`.
pub(crate) fn lt(call: &'static str) -> impl FnOnce(CublasError) -> CudaError {
    move |e| CudaError::cublaslt(call, e)
}
