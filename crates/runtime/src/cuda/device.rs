//! The device: presence checks before the first driver call, the context, the slab allocation
//! and pinned host staging.
//!
//! cudarc with `dynamic-loading` opens libcuda, libcublasLt and libnvrtc on first use and
//! *panics* when one is missing, and again on the first call of each function when the
//! library lacks that symbol (`Missing symbol cuInit`: an old driver, a partial install, a
//! stub). So [`Device::open`] first probes each library the way cudarc will load it (the
//! first of cudarc's candidate names that `dlopen`s) and looks up, with `dlsym`, every symbol
//! lumen reaches in it ([`DRIVER`], [`CUBLASLT`], [`NVRTC`]); only then does it initialize the
//! driver and count devices. Those first driver calls also run under
//! [`std::panic::catch_unwind`] ([`guarded`]), so a panic the probe did not foresee still
//! becomes [`RuntimeError::NoCudaDevice`] with the panic's message. Every failure says what
//! is missing.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Once, OnceLock};

use cudarc::driver::result;
use cudarc::driver::safe::CudaContext;
use cudarc::driver::sys;

use super::error::{CudaError, drv};
use crate::RuntimeError;

/// The alignment, bytes, checked on every device pointer handed to cuBLASLt or a kernel: the
/// slab's alignment (cuBLASLt asks 16 bytes of A, B, C, D and bias for vectorized paths and
/// prefers 256; the planner gives 256 to every offset).
pub const DEVICE_ALIGNMENT: u64 = 256;

/// The oldest driver the CUDA runtime opens, as `cuDriverGetVersion` reports it: 13000 (CUDA
/// 13.0, driver branch R580), what cudarc's `cuda-13000` bindings, cuBLASLt 13 and NVRTC 13
/// are built for.
pub const MIN_DRIVER_VERSION: i32 = 13000;

/// Facts about the device a runtime runs on, read once when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device ordinal (0 = the first GPU the driver lists).
    pub ordinal: usize,
    /// The marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor), e.g. (9, 0) for Hopper.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Peak SM clock in kHz, when the driver reports it.
    pub clock_khz: Option<u32>,
    /// Device memory, bytes.
    pub total_memory: usize,
    /// The driver's CUDA version as `cuDriverGetVersion` reports it (13000 = 13.0).
    pub driver_version: i32,
}

impl DeviceInfo {
    /// The architecture name NVRTC takes for real code, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// FP32 lanes (CUDA cores) per SM for the compute capability, from NVIDIA's CUDA C
    /// Programming Guide table "Arithmetic Instructions" (throughput of 32-bit FMA per SM per
    /// clock); `None` for an architecture the table here does not know.
    pub fn fp32_lanes_per_sm(&self) -> Option<u32> {
        match self.compute_capability {
            (6, 0) => Some(64),
            (6, _) => Some(128),
            (7, _) => Some(64),
            (8, 0) => Some(64),
            (8, _) => Some(128),
            (9, _) | (10, _) | (11, _) | (12, _) => Some(128),
            _ => None,
        }
    }

    /// The FP32 (non-tensor-core) peak in FLOP/s, `SMs x clock x lanes x 2` (an FMA is two
    /// FLOP), with its basis in words; `None` when the clock or the lane count is unknown. An
    /// H200 (132 SMs, 1.98 GHz, 128 lanes) gives 66.9 TFLOP/s.
    pub fn fp32_peak(&self) -> Option<(f64, String)> {
        let lanes = self.fp32_lanes_per_sm()?;
        let khz = self.clock_khz.filter(|&k| k > 0)?;
        let flops = f64::from(self.sm_count) * f64::from(khz) * 1e3 * f64::from(lanes) * 2.0;
        let basis = format!(
            "{}: {} SMs x {:.2} GHz x {lanes} FP32 lanes x 2 (FMA)",
            self.name,
            self.sm_count,
            f64::from(khz) / 1e6
        );
        Some((flops, basis))
    }
}

/// A library the CUDA runtime loads: the base names cudarc derives its candidate file names
/// from, and every symbol lumen reaches in it, directly or through cudarc's wrappers (context,
/// stream, event, memory, module and launch calls of the driver; the cuBLASLt matmul and its
/// descriptors; NVRTC compilation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequiredLibrary {
    /// How messages name it: `libcuda`, `libcublasLt`, `libnvrtc`.
    pub name: &'static str,
    /// cudarc's base names (`cuda`, `nvcuda`): [`cudarc::get_lib_name_candidates`] turns each
    /// into the file names it tries, in order.
    pub bases: &'static [&'static str],
    /// The symbols lumen needs from it.
    pub symbols: &'static [&'static str],
    /// What to do when it is missing or incomplete.
    pub hint: &'static str,
}

/// The driver (libcuda). `cuEventElapsedTime_v2` is the CUDA 12.8+ name cudarc's CUDA 13
/// bindings call, so a driver older than that fails here, by name, instead of mid-run.
pub const DRIVER: RequiredLibrary = RequiredLibrary {
    name: "libcuda",
    bases: &["cuda", "nvcuda"],
    symbols: &[
        "cuInit",
        "cuDriverGetVersion",
        "cuGetErrorName",
        "cuGetErrorString",
        "cuDeviceGet",
        "cuDeviceGetCount",
        "cuDeviceGetAttribute",
        "cuDeviceGetName",
        "cuDeviceTotalMem_v2",
        "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease_v2",
        "cuCtxGetCurrent",
        "cuCtxSetCurrent",
        "cuCtxSynchronize",
        "cuMemAlloc_v2",
        "cuMemFree_v2",
        "cuMemsetD8_v2",
        "cuMemsetD8Async",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemcpyHtoD_v2",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuStreamCreate",
        "cuStreamSynchronize",
        "cuStreamDestroy_v2",
        "cuEventCreate",
        "cuEventRecord",
        "cuEventElapsedTime_v2",
        "cuEventDestroy_v2",
        "cuModuleLoadData",
        "cuModuleGetFunction",
        "cuModuleUnload",
        "cuLaunchKernel",
    ],
    hint: "the NVIDIA driver is older than CUDA 13.0 needs (R580 or newer) or only partly \
           installed",
};

/// cuBLASLt: the matmul, its descriptors and layouts, and the heuristic.
pub const CUBLASLT: RequiredLibrary = RequiredLibrary {
    name: "libcublasLt",
    bases: &["cublasLt"],
    symbols: &[
        "cublasLtCreate",
        "cublasLtDestroy",
        "cublasLtMatrixLayoutCreate",
        "cublasLtMatrixLayoutDestroy",
        "cublasLtMatmulDescCreate",
        "cublasLtMatmulDescSetAttribute",
        "cublasLtMatmulDescDestroy",
        "cublasLtMatmulPreferenceCreate",
        "cublasLtMatmulPreferenceSetAttribute",
        "cublasLtMatmulPreferenceDestroy",
        "cublasLtMatmulAlgoGetHeuristic",
        "cublasLtMatmul",
    ],
    hint: "install it (CUDA toolkit, or pip nvidia-cublas) and add its directory to \
           LD_LIBRARY_PATH",
};

/// NVRTC: compiling the elementwise kernels to PTX or CUBIN.
pub const NVRTC: RequiredLibrary = RequiredLibrary {
    name: "libnvrtc",
    bases: &["nvrtc"],
    symbols: &[
        "nvrtcVersion",
        "nvrtcCreateProgram",
        "nvrtcCompileProgram",
        "nvrtcDestroyProgram",
        "nvrtcGetPTX",
        "nvrtcGetPTXSize",
        "nvrtcGetCUBIN",
        "nvrtcGetCUBINSize",
        "nvrtcGetProgramLog",
        "nvrtcGetProgramLogSize",
    ],
    hint: "install it (CUDA toolkit, or pip nvidia-cuda-nvrtc) and add its directory to \
           LD_LIBRARY_PATH",
};

/// What probing one library found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// None of the candidate file names could be opened.
    NotFound,
    /// No candidate opened, but one exists and the loader refused it (not a shared library, the
    /// wrong architecture, a dependency missing): its name and the loader's message
    /// (`dlerror`), which say more than "not found".
    Unloadable {
        /// The candidate name the loader found but could not load, e.g. `libcuda.so`.
        file: String,
        /// The loader's message, e.g. `/opt/x/libcuda.so: invalid ELF header`.
        error: String,
    },
    /// `file` opened (the first candidate that does: the one cudarc will load); `missing` lists
    /// the required symbols it lacks, in [`RequiredLibrary::symbols`] order (empty: usable).
    Found {
        /// The candidate name that opened, e.g. `libcuda.so`.
        file: String,
        /// Required symbols `dlsym` did not find.
        missing: Vec<&'static str>,
    },
}

impl Probe {
    /// Whether a candidate file opened (complete or not).
    pub fn found(&self) -> bool {
        matches!(self, Probe::Found { .. })
    }

    /// Whether it opened and has every required symbol.
    pub fn usable(&self) -> bool {
        matches!(self, Probe::Found { missing, .. } if missing.is_empty())
    }
}

impl RequiredLibrary {
    /// The file names cudarc tries for this library, in its order (`libcuda.so`, ...,
    /// `libcuda.so.1`).
    pub fn candidates(&self) -> Vec<String> {
        self.bases.iter().flat_map(|b| cudarc::get_lib_name_candidates(b)).collect()
    }

    /// Probes the library under cudarc's candidate names ([`RequiredLibrary::probe_files`]).
    pub fn probe(&self) -> Probe {
        self.probe_files(&self.candidates())
    }

    /// Opens the first of `files` that `dlopen`s (names go through the loader path, paths are
    /// opened as given) and looks up every required symbol in it. Never panics and never calls
    /// into the library beyond its initializers. A library that opens stays loaded, so cudarc's
    /// own `dlopen` of the same name reuses it instead of mapping it again. When none opens,
    /// [`Probe::Unloadable`] names the first file the loader found but refused, else
    /// [`Probe::NotFound`].
    pub fn probe_files(&self, files: &[String]) -> Probe {
        let mut refused: Option<(String, String)> = None;
        for file in files {
            // SAFETY: dlopen runs the library's initializers, as cudarc's load of it would;
            // nothing else is called.
            let lib = match unsafe { libloading::Library::new(file) } {
                Ok(lib) => lib,
                Err(e) => {
                    // The loader says "No such file" for a name it did not find at all; any
                    // other message means a file by that name is there and was refused.
                    // libloading says "dlopen failed"; the loader's own words are its source.
                    let error = std::error::Error::source(&e)
                        .map_or_else(|| e.to_string(), ToString::to_string);
                    if refused.is_none() && !error.contains("No such file") {
                        refused = Some((file.clone(), error));
                    }
                    continue;
                }
            };
            let missing = self
                .symbols
                .iter()
                .copied()
                // SAFETY: the address is looked up, never called or read.
                .filter(|sym| unsafe { lib.get::<*const c_void>(sym.as_bytes()) }.is_err())
                .collect();
            std::mem::forget(lib);
            return Probe::Found { file: file.clone(), missing };
        }
        match refused {
            Some((file, error)) => Probe::Unloadable { file, error },
            None => Probe::NotFound,
        }
    }

    /// Why `probe` makes the library unusable, as a `NoCudaDevice` reason; `None` when usable.
    pub fn problem(&self, probe: &Probe) -> Option<String> {
        match probe {
            Probe::NotFound if self.name == DRIVER.name => Some(
                "libcuda.so not found: no NVIDIA driver is installed or it is not on the loader \
                 path"
                    .to_string(),
            ),
            Probe::NotFound => Some(format!("{} not found: {}", self.name, self.hint)),
            Probe::Unloadable { file, error } => Some(format!(
                "{file} is on the loader path but cannot be loaded ({}): {}",
                error.trim(),
                if self.name == DRIVER.name {
                    "reinstall the NVIDIA driver or fix LD_LIBRARY_PATH"
                } else {
                    self.hint
                }
            )),
            Probe::Found { missing, .. } if missing.is_empty() => None,
            Probe::Found { file, missing } => {
                const SHOWN: usize = 4;
                let mut names = missing.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
                if missing.len() > SHOWN {
                    names.push_str(&format!(" and {} more", missing.len() - SHOWN));
                }
                Some(format!(
                    "{file} lacks {} of the {} symbols lumen calls ({names}): {}",
                    missing.len(),
                    self.symbols.len(),
                    self.hint
                ))
            }
        }
    }
}

/// What probing the three libraries the CUDA runtime loads found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Libraries {
    /// libcuda (the driver).
    pub cuda: Probe,
    /// libcublasLt.
    pub cublaslt: Probe,
    /// libnvrtc.
    pub nvrtc: Probe,
}

impl Libraries {
    /// Probes [`DRIVER`], [`CUBLASLT`] and [`NVRTC`] under cudarc's names, once per process
    /// (the loader path is fixed when the process starts).
    pub fn probe() -> Self {
        static PROBED: OnceLock<Libraries> = OnceLock::new();
        PROBED
            .get_or_init(|| Self {
                cuda: DRIVER.probe(),
                cublaslt: CUBLASLT.probe(),
                nvrtc: NVRTC.probe(),
            })
            .clone()
    }

    /// The first problem, driver first, as the `NoCudaDevice` reason: a library not found or
    /// lacking symbols. `None` when all three are usable.
    pub fn missing(&self) -> Option<String> {
        DRIVER
            .problem(&self.cuda)
            .or_else(|| CUBLASLT.problem(&self.cublaslt))
            .or_else(|| NVRTC.problem(&self.nvrtc))
    }
}

thread_local! {
    // How many `guarded` calls this thread is inside: their panics are caught and reported.
    static GUARD_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f`, turning a panic into [`RuntimeError::NoCudaDevice`] naming `what` and carrying the
/// panic's message (cudarc panics when a library or symbol it loads lazily is missing). The
/// process's panic hook stays silent for a panic caught here, so a CLI still prints one line;
/// panics anywhere else reach the hook as before.
///
/// # Errors
/// `f`'s own error, or `NoCudaDevice` when it panicked.
pub fn guarded<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARD_DEPTH.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
    GUARD_DEPTH.with(|d| d.set(d.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARD_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    result.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Err(no_device(format!("{what} failed inside cudarc: {}", message.replace('\n', " "))))
    })
}

/// An open device: its primary context (retained through cudarc's [`CudaContext`], which
/// releases it on drop) and its facts.
#[derive(Debug)]
pub struct Device {
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
}

fn no_device(reason: impl Into<String>) -> RuntimeError {
    RuntimeError::NoCudaDevice { reason: reason.into() }
}

fn driver_reason(call: &str, err: result::DriverError) -> String {
    match CudaError::driver("", err) {
        CudaError::Driver { code, message, .. } => format!("{call}: {code} ({message})"),
        other => other.to_string(),
    }
}

impl Device {
    /// Opens device `ordinal`: checks that libcuda, libcublasLt and libnvrtc load with every
    /// symbol lumen calls, then, under [`guarded`], initializes the driver (`cuInit`), checks
    /// the device count, retains the primary context and reads the device's facts.
    ///
    /// # Errors
    /// [`RuntimeError::NoCudaDevice`] naming what is missing: a library, symbols a library
    /// lacks (an old driver, a partial install), a panic inside cudarc, a driver that fails to
    /// initialize (`CUDA_ERROR_NO_DEVICE`, `CUDA_ERROR_INSUFFICIENT_DRIVER`, ...), a driver
    /// older than [`MIN_DRIVER_VERSION`], zero devices or fewer than `ordinal + 1`. [`RuntimeError::Cuda`] when a later driver call fails.
    pub fn open(ordinal: usize) -> Result<Arc<Self>, RuntimeError> {
        if let Some(reason) = Libraries::probe().missing() {
            return Err(no_device(reason));
        }
        guarded("opening the CUDA device", || Self::open_checked(ordinal))
    }

    /// [`Device::open`] after the library checks passed.
    fn open_checked(ordinal: usize) -> Result<Arc<Self>, RuntimeError> {
        result::init().map_err(|e| no_device(driver_reason("cuInit", e)))?;
        let mut driver_version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(|e| no_device(driver_reason("cuDriverGetVersion", e)))?;
        // The symbol probe proves a CUDA 12.8 driver at least; cuBLASLt 13 and NVRTC 13's
        // CUBINs need 13.0, and would otherwise fail later without saying the driver is old.
        if driver_version < MIN_DRIVER_VERSION {
            return Err(no_device(format!(
                "the driver supports CUDA {}.{}, lumen's CUDA runtime needs {}.{} (R580 or newer)",
                driver_version / 1000,
                driver_version % 1000 / 10,
                MIN_DRIVER_VERSION / 1000,
                MIN_DRIVER_VERSION % 1000 / 10
            )));
        }
        let count = result::device::get_count()
            .map_err(|e| no_device(driver_reason("cuDeviceGetCount", e)))?;
        let count = usize::try_from(count).unwrap_or(0);
        if count == 0 {
            return Err(no_device("the driver is installed but sees no CUDA device"));
        }
        if ordinal >= count {
            return Err(no_device(format!(
                "device {ordinal} was asked for but the driver sees {count} device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(drv("cuDevicePrimaryCtxRetain"))?;
        let attr =
            |a: sys::CUdevice_attribute| ctx.attribute(a).map_err(drv("cuDeviceGetAttribute"));
        use sys::CUdevice_attribute as A;
        let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let sm_count =
            u32::try_from(attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?).unwrap_or(0);
        // Deprecated in recent drivers; a failure only loses the computed peak.
        let clock_khz = ctx
            .attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .ok()
            .and_then(|k| u32::try_from(k).ok());
        let name = ctx.name().map_err(drv("cuDeviceGetName"))?;
        let total_memory = ctx.total_mem().map_err(drv("cuDeviceTotalMem_v2"))?;
        let info = DeviceInfo {
            ordinal,
            name,
            compute_capability: (major, minor),
            sm_count,
            clock_khz,
            total_memory,
            driver_version,
        };
        Ok(Arc::new(Self { ctx, info }))
    }

    /// The device's facts.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The cudarc context (primary context of the device).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Makes the context current on the calling thread; every entry point calls it first,
    /// since a prepared program may execute on another thread than the one that prepared it.
    ///
    /// # Errors
    /// [`CudaError::Driver`] from `cuCtxSetCurrent`.
    pub fn bind(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))
    }
}

/// One device allocation (`cuMemAlloc`), freed on drop: the slab.
#[derive(Debug)]
pub(crate) struct DeviceAlloc {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    device: Arc<Device>,
}

impl DeviceAlloc {
    /// Allocates `bytes` (at least one alignment unit: `cuMemAlloc(0)` is an error) and fills
    /// every byte with `fill`.
    pub(crate) fn new(device: &Arc<Device>, bytes: usize, fill: u8) -> Result<Self, RuntimeError> {
        device.bind()?;
        let size = bytes.max(DEVICE_ALIGNMENT as usize);
        // SAFETY: plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(size) }.map_err(|e| match e.0 {
            sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => RuntimeError::Alloc { bytes },
            _ => CudaError::driver("cuMemAlloc_v2", e).into(),
        })?;
        let alloc = Self { ptr, bytes: size, device: device.clone() };
        // SAFETY: the range is the allocation just made.
        unsafe { result::memset_d8_sync(ptr, fill, size) }.map_err(drv("cuMemsetD8_v2"))?;
        check_aligned("the slab base", ptr)?;
        Ok(alloc)
    }

    /// The base address.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Bytes allocated.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; a failed free leaks device memory only. Work
        // still queued on the slab (a prepare that failed after its fill and weight copies, or
        // an execute abandoned mid-way) finishes before the bytes go back to the driver.
        if self.device.bind().is_ok() {
            let _ = self.device.context().synchronize();
            // SAFETY: allocated by cuMemAlloc in this context, freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Page-locked host memory (`cuMemHostAlloc`), the staging area readbacks are enqueued into so
/// that the copies are truly asynchronous and covered by the execute's single synchronize.
#[derive(Debug)]
pub(crate) struct PinnedHost {
    ptr: *mut c_void,
    elems: usize,
    device: Arc<Device>,
}

impl PinnedHost {
    /// `elems` f32 of pinned memory (none allocated for zero).
    pub(crate) fn new(device: &Arc<Device>, elems: usize) -> Result<Self, RuntimeError> {
        let bytes = elems.checked_mul(4).ok_or(RuntimeError::Alloc { bytes: usize::MAX })?;
        let ptr = if bytes == 0 {
            std::ptr::null_mut()
        } else {
            device.bind()?;
            // SAFETY: plain allocation; flags 0 = portable off, mapped off.
            unsafe { result::malloc_host(bytes, 0) }.map_err(|e| match e.0 {
                sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => RuntimeError::Alloc { bytes },
                _ => CudaError::driver("cuMemHostAlloc", e).into(),
            })?
        };
        Ok(Self { ptr, elems, device: device.clone() })
    }

    /// The staging area as f32s.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        if self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: cuMemHostAlloc returned `elems * 4` bytes, page-aligned, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<f32>(), self.elems) }
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        if !self.ptr.is_null() && self.device.bind().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            let _ = unsafe { result::free_host(self.ptr) };
        }
    }
}

/// Checks that `address` is [`DEVICE_ALIGNMENT`]-aligned.
///
/// # Errors
/// [`CudaError::Misaligned`] naming `what`.
pub fn check_aligned(what: &str, address: u64) -> Result<(), CudaError> {
    if address.is_multiple_of(DEVICE_ALIGNMENT) {
        Ok(())
    } else {
        Err(CudaError::Misaligned { what: what.to_string(), address, alignment: DEVICE_ALIGNMENT })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_check() {
        assert!(check_aligned("x", 0x7f00_0000_0100).is_ok());
        let err = check_aligned("buffer `t0`", 0x7f00_0000_0104).unwrap_err();
        assert_eq!(
            err.to_string(),
            "buffer `t0` at device address 0x7f0000000104 is not 256-byte aligned"
        );
    }

    #[test]
    fn h200_peak() {
        let info = DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            clock_khz: Some(1_980_000),
            total_memory: 150_000_000_000,
            driver_version: 13000,
        };
        assert_eq!(info.arch(), "sm_90");
        let (flops, basis) = info.fp32_peak().unwrap();
        assert!((flops - 66.908_16e12).abs() < 1e6, "{flops}");
        assert_eq!(basis, "NVIDIA H200: 132 SMs x 1.98 GHz x 128 FP32 lanes x 2 (FMA)");
        assert_eq!(DeviceInfo { clock_khz: None, ..info }.fp32_peak(), None);
    }

    #[test]
    fn missing_library_reasons() {
        let ok = |file: &str| Probe::Found { file: file.into(), missing: Vec::new() };
        let all = Libraries {
            cuda: ok("libcuda.so"),
            cublaslt: ok("libcublasLt.so"),
            nvrtc: ok("libnvrtc.so"),
        };
        assert_eq!(all.missing(), None);
        let reason = Libraries { cuda: Probe::NotFound, ..all.clone() }.missing().unwrap();
        assert!(reason.starts_with("libcuda.so not found"), "{reason}");
        let reason = Libraries { nvrtc: Probe::NotFound, ..all.clone() }.missing().unwrap();
        assert!(reason.starts_with("libnvrtc not found: install it"), "{reason}");
        let old =
            Probe::Found { file: "libcuda.so.1".into(), missing: vec!["cuEventElapsedTime_v2"] };
        assert!(old.found() && !old.usable());
        assert_eq!(
            Libraries { cuda: old, ..all.clone() }.missing().unwrap(),
            "libcuda.so.1 lacks 1 of the 34 symbols lumen calls (cuEventElapsedTime_v2): the \
             NVIDIA driver is older than CUDA 13.0 needs (R580 or newer) or only partly installed"
        );
        let stub = Probe::Found { file: "libcuda.so".into(), missing: DRIVER.symbols.to_vec() };
        let reason = DRIVER.problem(&stub).unwrap();
        assert!(
            reason.starts_with(
                "libcuda.so lacks 34 of the 34 symbols lumen calls (cuInit, cuDriverGetVersion, \
                 cuGetErrorName, cuGetErrorString and 30 more): "
            ),
            "{reason}"
        );
    }

    #[test]
    fn required_symbols_are_distinct_and_named_like_their_library() {
        for (lib, prefix) in [(DRIVER, "cu"), (CUBLASLT, "cublasLt"), (NVRTC, "nvrtc")] {
            let mut seen = std::collections::BTreeSet::new();
            for sym in lib.symbols {
                assert!(sym.starts_with(prefix), "{sym}");
                assert!(seen.insert(sym), "{sym} twice");
            }
            assert_eq!(
                lib.candidates().first().map(String::as_str),
                Some(&*format!("lib{}.so", lib.bases[0]))
            );
        }
        assert!(DRIVER.candidates().iter().any(|c| c == "libcuda.so.1"));
    }

    #[test]
    fn a_panic_inside_the_guard_becomes_no_cuda_device() {
        let err = guarded("opening the CUDA device", || -> Result<(), RuntimeError> {
            panic!("Missing symbol cuInit: undefined symbol")
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no CUDA device: opening the CUDA device failed inside cudarc: Missing symbol \
             cuInit: undefined symbol"
        );
        let formatted = guarded("x", || -> Result<(), RuntimeError> { panic!("code {}", 7) });
        assert!(formatted.unwrap_err().to_string().ends_with("failed inside cudarc: code 7"));
        // Errors and values pass through untouched.
        assert_eq!(guarded("x", || Ok(3)).unwrap(), 3);
        let err = guarded("x", || -> Result<(), _> { Err(no_device("plain")) }).unwrap_err();
        assert_eq!(err.to_string(), "no CUDA device: plain");
    }
}
