//! The elementwise kernels (add_bias, add, relu, gelu) as CUDA C, compiled by NVRTC once per
//! runtime at the first prepare, and their launches.
//!
//! Each kernel is a grid-stride loop over `unsigned long long` indices (so a tensor of more
//! than 2^31 elements works with a bounded grid), one element per thread per step, no shared
//! memory: they are bandwidth-bound, which is exactly the DRAM round trip a cuBLASLt epilogue
//! saves. Kernels read and write the slab through plain pointers without `__restrict__`, so the
//! K = 0 matmul can run add_bias and the activation in place on its output.
//!
//! The formulas match the CPU kernels ([`crate::kernels`]): relu keeps NaN (`x < 0 ? 0 : x`),
//! gelu is the tanh form with the same constants, evaluated in the same stable sigmoid form
//! (`x / (1 + exp(-2z))`; see [`crate::kernels::gelu_scalar`]). cuBLASLt's `GELU` and
//! `GELU_BIAS` epilogues are NVIDIA's own implementation, not this kernel: their accuracy on
//! the negative tail is whatever cuBLASLt gives.

use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys;
use cudarc::nvrtc::result as nvrtc;
use cudarc::nvrtc::sys as nvrtc_sys;

use super::device::Device;
use super::error::{CudaError, drv};
use crate::RuntimeError;

/// One kernel's CUDA C source and entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSource {
    /// Which LLIR op it implements.
    pub kernel: Kernel,
    /// The `extern "C"` entry point, e.g. `lumen_relu`.
    pub name: &'static str,
    /// The CUDA C source (one translation unit, no includes).
    pub source: &'static str,
}

/// The NVRTC kernels of the CUDA runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `out[i] = x[i] + bias[i mod n]` over `total = m * n` elements (row-major `[m, n] + [n]`).
    AddBias,
    /// `out[i] = a[i] + b[i]`.
    Add,
    /// `out[i] = x[i] < 0 ? 0 : x[i]` (NaN stays NaN).
    Relu,
    /// `out[i] = 0.5 x (1 + tanh(z))`, `z = sqrt(2/pi) (x + 0.044715 x^3)`, evaluated as
    /// `x / (1 + exp(-2z))` in the overflow-free form of [`crate::kernels::gelu_scalar`] (no
    /// cancellation on the negative tail; gelu(+inf) = +inf, gelu(-inf) = -0, NaN stays NaN).
    Gelu,
}

const ADD_BIAS: &str = r#"
extern "C" __global__ void lumen_add_bias(const float* x, const float* bias, float* out,
                                          unsigned long long total, unsigned long long n) {
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < total; i += stride) {
        out[i] = x[i] + bias[i % n];
    }
}
"#;

const ADD: &str = r#"
extern "C" __global__ void lumen_add(const float* a, const float* b, float* out,
                                     unsigned long long len) {
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < len; i += stride) {
        out[i] = a[i] + b[i];
    }
}
"#;

const RELU: &str = r#"
extern "C" __global__ void lumen_relu(const float* x, float* out, unsigned long long len) {
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < len; i += stride) {
        float v = x[i];
        out[i] = v < 0.0f ? 0.0f : v;
    }
}
"#;

// The stable form of the tanh GELU, as in crate::kernels::gelu_scalar: 0.5 x (1 + tanh z) is
// x * sigmoid(2z), evaluated with t = exp(-2|z|) in (0, 1] (never overflows) so the negative
// tail does not cancel; -inf (the only value below -FLT_MAX) maps to its limit -0, which the
// formula alone would make -inf * 0 = NaN. NaN fails every comparison and stays NaN.
const GELU: &str = r#"
extern "C" __global__ void lumen_gelu(const float* x, float* out, unsigned long long len) {
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < len; i += stride) {
        float v = x[i];
        float z = 0.7978846f * v * (1.0f + 0.044715f * v * v);
        float t = expf(-2.0f * fabsf(z));
        float g = z >= 0.0f ? v / (1.0f + t) : v * t / (1.0f + t);
        out[i] = v < -3.40282347e+38f ? -0.0f : g;
    }
}
"#;

const SOURCES: [KernelSource; 4] = [
    KernelSource { kernel: Kernel::AddBias, name: "lumen_add_bias", source: ADD_BIAS },
    KernelSource { kernel: Kernel::Add, name: "lumen_add", source: ADD },
    KernelSource { kernel: Kernel::Relu, name: "lumen_relu", source: RELU },
    KernelSource { kernel: Kernel::Gelu, name: "lumen_gelu", source: GELU },
];

/// Every kernel's source, in [`Kernel`] order. A pure function: the NVRTC test compiles each
/// of them without a GPU.
pub fn kernel_sources() -> &'static [KernelSource] {
    &SOURCES
}

/// What NVRTC produces: PTX text (virtual architecture, JIT-compiled by the driver at module
/// load) or a CUBIN (real architecture, loaded as is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    /// `--gpu-architecture=compute_XY`, `nvrtcGetPTX`.
    Ptx,
    /// `--gpu-architecture=sm_XY`, `nvrtcGetCUBIN`.
    Cubin,
}

/// One compiled kernel image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledKernel {
    /// The kernel.
    pub kernel: Kernel,
    /// Its entry point.
    pub name: &'static str,
    /// PTX or CUBIN.
    pub kind: CodeKind,
    /// The image as NVRTC returned it (PTX: NUL-terminated text; CUBIN: ELF bytes).
    pub image: Vec<u8>,
}

impl CompiledKernel {
    /// The PTX text (without its terminating NUL), or `None` for a CUBIN.
    pub fn ptx(&self) -> Option<&str> {
        if self.kind != CodeKind::Ptx {
            return None;
        }
        let text = self.image.split(|&b| b == 0).next().unwrap_or(&[]);
        std::str::from_utf8(text).ok()
    }
}

/// Whether libnvrtc loads with every symbol lumen calls ([`super::device::NVRTC`]; a `dlopen`
/// and `dlsym` check that never panics).
pub fn nvrtc_present() -> bool {
    super::device::Libraries::probe().nvrtc.usable()
}

/// NVRTC's version, (major, minor).
///
/// # Errors
/// [`RuntimeError::NoCudaDevice`] when libnvrtc is missing or lacks a symbol;
/// [`CudaError::Nvrtc`] on failure.
pub fn nvrtc_version() -> Result<(i32, i32), RuntimeError> {
    require_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| CudaError::nvrtc("-", "nvrtcVersion", e, String::new()))?;
    Ok((major, minor))
}

fn require_nvrtc() -> Result<(), RuntimeError> {
    let nvrtc = &super::device::Libraries::probe().nvrtc;
    match super::device::NVRTC.problem(nvrtc) {
        None => Ok(()),
        Some(reason) => Err(RuntimeError::NoCudaDevice { reason }),
    }
}

/// Compiles every kernel to PTX for `arch` (`sm_90` or `compute_90`: the virtual architecture
/// `compute_90` is used either way).
///
/// # Errors
/// [`RuntimeError::NoCudaDevice`] when libnvrtc is missing or lacks a symbol; [`CudaError::Nvrtc`] with the
/// compile log when a source does not compile.
pub fn compile_ptx(arch: &str) -> Result<Vec<CompiledKernel>, RuntimeError> {
    compile_all(arch, CodeKind::Ptx)
}

/// Compiles every kernel to a CUBIN for the real architecture `arch` (`sm_90`): what the
/// runtime loads, so no PTX JIT runs and a newer NVRTC than the driver still works.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin(arch: &str) -> Result<Vec<CompiledKernel>, RuntimeError> {
    compile_all(arch, CodeKind::Cubin)
}

fn compile_all(arch: &str, kind: CodeKind) -> Result<Vec<CompiledKernel>, RuntimeError> {
    kernel_sources()
        .iter()
        .map(|k| {
            let image = compile_source(k.name, k.source, arch, kind)?;
            Ok(CompiledKernel { kernel: k.kernel, name: k.name, kind, image })
        })
        .collect()
}

/// Compiles one CUDA C translation unit `source` (named `{name}.cu` in NVRTC's log) for `arch`
/// (`sm_90` or `90`): PTX for the virtual architecture `compute_90`, or a CUBIN for the real
/// `sm_90`. Returns the image (PTX text with its terminating NUL, or ELF bytes).
///
/// # Errors
/// [`RuntimeError::NoCudaDevice`] when libnvrtc is missing or lacks a symbol; [`CudaError::Nvrtc`] carrying the
/// compile log when the source does not compile.
pub fn compile_source(
    name: &str,
    source: &str,
    arch: &str,
    kind: CodeKind,
) -> Result<Vec<u8>, RuntimeError> {
    require_nvrtc()?;
    let digits = arch.trim_start_matches("sm_").trim_start_matches("compute_");
    let target = match kind {
        CodeKind::Ptx => format!("compute_{digits}"),
        CodeKind::Cubin => format!("sm_{digits}"),
    };
    Ok(compile_one(name, source, &target, kind)?)
}

/// An NVRTC program, destroyed on drop.
struct Program {
    raw: nvrtc_sys::nvrtcProgram,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once.
        let _ = unsafe { nvrtc::destroy_program(self.raw) };
    }
}

fn compile_one(
    name: &str,
    source: &str,
    target: &str,
    kind: CodeKind,
) -> Result<Vec<u8>, CudaError> {
    let fail = |call, e, log| CudaError::nvrtc(name, call, e, log);
    let nul = |what: &str| CudaError::Nvrtc {
        kernel: name.to_string(),
        call: "nvrtcCreateProgram",
        status: format!("the {what} contains a NUL byte"),
        log: String::new(),
    };
    let src = CString::new(source).map_err(|_| nul("source"))?;
    let file = CString::new(format!("{name}.cu")).map_err(|_| nul("name"))?;
    let raw = nvrtc::create_program(&src, Some(&file))
        .map_err(|e| fail("nvrtcCreateProgram", e, String::new()))?;
    let prog = Program { raw };
    let options = [format!("--gpu-architecture={target}"), "--std=c++14".to_string()];
    // SAFETY: `prog` is live; the options are NUL-free.
    if let Err(e) = unsafe { nvrtc::compile_program(prog.raw, &options) } {
        return Err(fail("nvrtcCompileProgram", e, program_log(prog.raw)));
    }
    match kind {
        // SAFETY: compiled successfully above.
        CodeKind::Ptx => Ok(unsafe { nvrtc::get_ptx(prog.raw) }
            .map_err(|e| fail("nvrtcGetPTX", e, String::new()))?
            .into_iter()
            .map(|c| c as u8)
            .collect()),
        CodeKind::Cubin => {
            let mut size = 0usize;
            // SAFETY: compiled successfully; writes the size, then that many bytes.
            unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog.raw, &mut size) }
                .result()
                .map_err(|e| fail("nvrtcGetCUBINSize", e, String::new()))?;
            // NVRTC answers size 0 with success for a virtual architecture (`compute_90`):
            // an empty image would only fail later, in cuModuleLoadData, without the reason.
            if size == 0 {
                return Err(CudaError::Nvrtc {
                    kernel: name.to_string(),
                    call: "nvrtcGetCUBINSize",
                    status: format!("no CUBIN for `{target}` (a virtual architecture?)"),
                    log: String::new(),
                });
            }
            let mut bytes = vec![0u8; size];
            unsafe { nvrtc_sys::nvrtcGetCUBIN(prog.raw, bytes.as_mut_ptr().cast::<c_char>()) }
                .result()
                .map_err(|e| fail("nvrtcGetCUBIN", e, String::new()))?;
            Ok(bytes)
        }
    }
}

fn program_log(prog: nvrtc_sys::nvrtcProgram) -> String {
    // SAFETY: `prog` is live.
    match unsafe { nvrtc::get_program_log(prog) } {
        Ok(chars) => {
            let bytes: Vec<u8> =
                chars.into_iter().map(|c| c as u8).take_while(|&b| b != 0).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(_) => String::new(),
    }
}

/// The kernels loaded into the device's context: one module per kernel, unloaded on drop.
#[derive(Debug)]
pub(crate) struct LoadedKernels {
    modules: Vec<sys::CUmodule>,
    functions: Vec<(Kernel, sys::CUfunction)>,
    device: Arc<Device>,
    /// Milliseconds NVRTC took and milliseconds the module loads took.
    pub(crate) compile_ms: f64,
    pub(crate) load_ms: f64,
}

impl LoadedKernels {
    /// Compiles every kernel for the device's architecture (CUBIN) and loads it.
    pub(crate) fn new(device: &Arc<Device>) -> Result<Self, RuntimeError> {
        let t = std::time::Instant::now();
        let images = compile_cubin(&device.info().arch())?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = std::time::Instant::now();
        device.bind()?;
        let mut loaded = Self {
            modules: Vec::new(),
            functions: Vec::new(),
            device: device.clone(),
            compile_ms,
            load_ms: 0.0,
        };
        for img in images {
            // SAFETY: a CUBIN image straight from NVRTC, alive for the call.
            let module = unsafe { result::module::load_data(img.image.as_ptr().cast::<c_void>()) }
                .map_err(drv("cuModuleLoadData"))?;
            loaded.modules.push(module);
            let name = CString::new(img.name).unwrap_or_default();
            // SAFETY: the module was just loaded.
            let f = unsafe { result::module::get_function(module, name) }
                .map_err(drv("cuModuleGetFunction"))?;
            loaded.functions.push((img.kernel, f));
        }
        loaded.load_ms = t.elapsed().as_secs_f64() * 1e3;
        Ok(loaded)
    }

    fn function(&self, kernel: Kernel) -> Result<sys::CUfunction, CudaError> {
        self.functions.iter().find(|(k, _)| *k == kernel).map(|&(_, f)| f).ok_or(
            CudaError::Driver {
                call: "cuModuleGetFunction",
                code: "CUDA_ERROR_NOT_FOUND".into(),
                message: format!("kernel {kernel:?} is not loaded"),
            },
        )
    }

    /// Enqueues `kernel` over `len` elements on `stream` with pointer arguments `ptrs` (in the
    /// kernel's order) and, for add_bias, the bias length `n`. Nothing is launched for
    /// `len = 0` (a zero grid is a launch error).
    pub(crate) fn launch(
        &self,
        stream: sys::CUstream,
        kernel: Kernel,
        ptrs: &[sys::CUdeviceptr],
        len: usize,
        n: usize,
    ) -> Result<bool, CudaError> {
        const BLOCK: u32 = 256;
        // Enough blocks to fill any current GPU; the grid-stride loop covers the rest.
        const MAX_GRID: u64 = 65_535;
        if len == 0 {
            return Ok(false);
        }
        let f = self.function(kernel)?;
        let len64 = len as u64;
        let grid = len64.div_ceil(u64::from(BLOCK)).min(MAX_GRID) as u32;
        let mut ptr_args: Vec<sys::CUdeviceptr> = ptrs.to_vec();
        let mut len_arg = len64;
        let mut n_arg = n as u64;
        let mut params: Vec<*mut c_void> =
            ptr_args.iter_mut().map(|p| (p as *mut sys::CUdeviceptr).cast::<c_void>()).collect();
        params.push((&mut len_arg as *mut u64).cast::<c_void>());
        if kernel == Kernel::AddBias {
            params.push((&mut n_arg as *mut u64).cast::<c_void>());
        }
        // SAFETY: `f` is a loaded kernel whose parameters are exactly these (pointers, then
        // one or two u64); every pointer is a checked range of the live slab. The parameter
        // values are copied by cuLaunchKernel before it returns.
        unsafe { result::launch_kernel(f, (grid, 1, 1), (BLOCK, 1, 1), 0, stream, &mut params) }
            .map_err(drv("cuLaunchKernel"))?;
        Ok(true)
    }
}

impl Drop for LoadedKernels {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            for &m in &self.modules {
                // SAFETY: loaded by cuModuleLoadData, unloaded once.
                let _ = unsafe { result::module::unload(m) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_source_is_the_stable_form() {
        // The textbook 0.5 x (1 + tanhf(z)) cancels for x < -4 (see crate::kernels::gelu_scalar);
        // the kernel must use the overflow-free sigmoid form and map -inf to -0.
        assert!(!GELU.contains("tanhf"), "{GELU}");
        assert!(GELU.contains("float t = expf(-2.0f * fabsf(z));"), "{GELU}");
        assert!(GELU.contains("z >= 0.0f ? v / (1.0f + t) : v * t / (1.0f + t)"), "{GELU}");
        assert!(GELU.contains("v < -3.40282347e+38f ? -0.0f : g"), "{GELU}");
        // The literal is f32::MAX as written in C, so only -inf is below it.
        assert_eq!("3.40282347e+38".parse::<f32>(), Ok(f32::MAX));
    }

    #[test]
    fn sources_name_their_entry_points() {
        let names: Vec<&str> = kernel_sources().iter().map(|k| k.name).collect();
        assert_eq!(names, ["lumen_add_bias", "lumen_add", "lumen_relu", "lumen_gelu"]);
        for k in kernel_sources() {
            assert!(
                k.source.contains(&format!("extern \"C\" __global__ void {}(", k.name)),
                "{}",
                k.name
            );
            // Balanced braces and parentheses: a cheap guard that runs without NVRTC.
            for (open, close) in [('{', '}'), ('(', ')')] {
                let opens = k.source.matches(open).count();
                assert_eq!(opens, k.source.matches(close).count(), "{} {open}{close}", k.name);
            }
        }
    }
}
