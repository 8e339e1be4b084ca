//! NVRTC: compiling the generated kernels ([`super::codegen`]) into one module per prepare
//! that needs new ones, loading them, and launching them.
//!
//! The runtime keeps one kernel cache per device: at prepare, the kernels a program needs
//! that are not loaded yet are compiled together (one NVRTC call, one CUBIN for the device's
//! real architecture, so no PTX JIT runs) and loaded; a program preparing after it compiles
//! nothing. Every generated kernel takes its pointers, then its arguments by value as blobs of
//! 64-bit words ([`super::codegen::pack_views`]), and is launched with [`super::codegen::BLOCK`]
//! threads per block on the program's one stream. Kernels read and write the slab through
//! plain pointers without `__restrict__`, so an elementwise op may write over its operand in
//! place (each thread reads element i before writing element i).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys;
use cudarc::nvrtc::result as nvrtc;
use cudarc::nvrtc::sys as nvrtc_sys;

use super::codegen::{KernelSpec, all_specs, module_source};
use super::device::Device;
use super::error::{CudaError, drv};
use crate::RuntimeError;

/// The generated source of every kernel the runtime can launch, as one translation unit, and
/// the entry points in it ([`super::codegen::all_specs`]). A pure function: the NVRTC test
/// compiles it without a GPU.
pub fn kernel_sources() -> (String, Vec<String>) {
    let specs = all_specs();
    (module_source(&specs), specs.iter().map(KernelSpec::name).collect())
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

/// One compiled module image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledModule {
    /// Its entry points.
    pub names: Vec<String>,
    /// PTX or CUBIN.
    pub kind: CodeKind,
    /// The image as NVRTC returned it (PTX: NUL-terminated text; CUBIN: ELF bytes).
    pub image: Vec<u8>,
}

impl CompiledModule {
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

/// Compiles every generated kernel, as one module, to PTX for `arch` (`sm_90` or
/// `compute_90`: the virtual architecture `compute_90` is used either way).
///
/// # Errors
/// [`RuntimeError::NoCudaDevice`] when libnvrtc is missing or lacks a symbol;
/// [`CudaError::Nvrtc`] with the compile log when the source does not compile.
pub fn compile_ptx(arch: &str) -> Result<CompiledModule, RuntimeError> {
    compile_specs(&all_specs(), arch, CodeKind::Ptx)
}

/// Compiles every generated kernel, as one module, to a CUBIN for the real architecture
/// `arch` (`sm_90`): what the runtime loads, so no PTX JIT runs and a newer NVRTC than the
/// driver still works.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin(arch: &str) -> Result<CompiledModule, RuntimeError> {
    compile_specs(&all_specs(), arch, CodeKind::Cubin)
}

/// Compiles the kernels `specs` as one module for `arch`.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_specs(
    specs: &[KernelSpec],
    arch: &str,
    kind: CodeKind,
) -> Result<CompiledModule, RuntimeError> {
    let image = compile_source("lumen_kernels", &module_source(specs), arch, kind)?;
    Ok(CompiledModule { names: specs.iter().map(KernelSpec::name).collect(), kind, image })
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

/// One kernel launch, resolved to slab addresses at prepare: the function, its pointer
/// arguments, its by-value arguments (blobs of 64-bit words), and the grid.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedLaunch {
    pub(crate) function: sys::CUfunction,
    pub(crate) ptrs: Vec<sys::CUdeviceptr>,
    pub(crate) words: Vec<Vec<u64>>,
    pub(crate) grid: u32,
    pub(crate) block: u32,
}

/// Compile statistics of one [`KernelCache::ensure`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CompileStats {
    /// Kernels compiled now (0 when every one was loaded already).
    pub(crate) compiled: usize,
    /// Milliseconds NVRTC took.
    pub(crate) compile_ms: f64,
    /// Milliseconds the module load took.
    pub(crate) load_ms: f64,
}

/// The generated kernels loaded into the device's context, by spec; modules unloaded on drop.
#[derive(Debug)]
pub(crate) struct KernelCache {
    modules: RefCell<Vec<sys::CUmodule>>,
    functions: RefCell<BTreeMap<KernelSpec, sys::CUfunction>>,
    device: Arc<Device>,
}

impl KernelCache {
    pub(crate) fn new(device: &Arc<Device>) -> Self {
        Self {
            modules: RefCell::new(Vec::new()),
            functions: RefCell::new(BTreeMap::new()),
            device: device.clone(),
        }
    }

    /// Compiles (one NVRTC call, a CUBIN for the device) and loads the kernels of `specs` not
    /// loaded yet.
    pub(crate) fn ensure(&self, specs: &[KernelSpec]) -> Result<CompileStats, RuntimeError> {
        let mut missing: Vec<KernelSpec> =
            specs.iter().filter(|s| !self.functions.borrow().contains_key(s)).copied().collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(CompileStats::default());
        }
        let t = std::time::Instant::now();
        let image = compile_specs(&missing, &self.device.info().arch(), CodeKind::Cubin)?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = std::time::Instant::now();
        self.device.bind()?;
        // SAFETY: a CUBIN image straight from NVRTC, alive for the call.
        let module = unsafe { result::module::load_data(image.image.as_ptr().cast::<c_void>()) }
            .map_err(drv("cuModuleLoadData"))?;
        self.modules.borrow_mut().push(module);
        for spec in &missing {
            let name = CString::new(spec.name()).unwrap_or_default();
            // SAFETY: the module was just loaded and stays loaded while self lives.
            let f = unsafe { result::module::get_function(module, name) }
                .map_err(drv("cuModuleGetFunction"))?;
            self.functions.borrow_mut().insert(*spec, f);
        }
        Ok(CompileStats {
            compiled: missing.len(),
            compile_ms,
            load_ms: t.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The loaded function of `spec` ([`KernelCache::ensure`] first).
    pub(crate) fn function(&self, spec: &KernelSpec) -> Result<sys::CUfunction, CudaError> {
        self.functions.borrow().get(spec).copied().ok_or_else(|| CudaError::Driver {
            call: "cuModuleGetFunction",
            code: "CUDA_ERROR_NOT_FOUND".into(),
            message: format!("kernel {} is not loaded", spec.name()),
        })
    }

    /// Enqueues `launch` on `stream`.
    pub(crate) fn launch(
        &self,
        stream: sys::CUstream,
        launch: &ResolvedLaunch,
    ) -> Result<(), CudaError> {
        let mut ptrs = launch.ptrs.clone();
        let mut words = launch.words.clone();
        let mut params: Vec<*mut c_void> =
            ptrs.iter_mut().map(|p| (p as *mut sys::CUdeviceptr).cast::<c_void>()).collect();
        params.extend(words.iter_mut().map(|w| w.as_mut_ptr().cast::<c_void>()));
        // SAFETY: the function was generated with exactly these parameters (pointers, then
        // structs of 64-bit words whose layout pack_views mirrors); every pointer is a checked
        // range of the live slab or the error record. cuLaunchKernel copies the parameter
        // values before it returns.
        unsafe {
            result::launch_kernel(
                launch.function,
                (launch.grid, 1, 1),
                (launch.block, 1, 1),
                0,
                stream,
                &mut params,
            )
        }
        .map_err(drv("cuLaunchKernel"))
    }
}

impl Drop for KernelCache {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            for &m in self.modules.borrow().iter() {
                // SAFETY: loaded by cuModuleLoadData, unloaded once.
                let _ = unsafe { result::module::unload(m) };
            }
        }
    }
}
