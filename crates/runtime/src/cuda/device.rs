//! The device: presence checks before the first driver call, the context, the slab allocation
//! and pinned host staging.
//!
//! cudarc with `dynamic-loading` opens libcuda, libcublasLt and libnvrtc on first use and
//! *panics* when one is missing. So [`Device::open`] first asks cudarc's `is_culib_present()`
//! for each library (a plain `dlopen` that reports instead of panicking), then initializes the
//! driver and counts devices, and turns every failure into
//! [`RuntimeError::NoCudaDevice`] saying what is missing. Nothing touches a library before its
//! presence check passed.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::safe::CudaContext;
use cudarc::driver::sys;

use super::error::{CudaError, drv};
use crate::RuntimeError;

/// The alignment, bytes, checked on every device pointer handed to cuBLASLt or a kernel: the
/// slab's alignment (cuBLASLt asks 16 bytes of A, B, C, D and bias for vectorized paths and
/// prefers 256; the planner gives 256 to every offset).
pub const DEVICE_ALIGNMENT: u64 = 256;

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

/// Whether each library the CUDA runtime loads can be opened, checked without panicking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Libraries {
    /// libcuda (the driver).
    pub cuda: bool,
    /// libcublasLt.
    pub cublaslt: bool,
    /// libnvrtc.
    pub nvrtc: bool,
}

impl Libraries {
    /// `dlopen`s each library under the names cudarc tries (`libcuda.so`, `libcuda.so.1`,
    /// `libcublasLt.so.13`, `libnvrtc.so.13`, ... and the `.12`/`.11` names) and closes it.
    pub fn probe() -> Self {
        // SAFETY: these only dlopen and dlclose; no symbol is called.
        unsafe {
            Self {
                cuda: sys::is_culib_present(),
                cublaslt: cudarc::cublaslt::sys::is_culib_present(),
                nvrtc: cudarc::nvrtc::sys::is_culib_present(),
            }
        }
    }

    /// The first missing library as the `NoCudaDevice` reason, or `None` when all are there.
    pub fn missing(&self) -> Option<String> {
        if !self.cuda {
            return Some(
                "libcuda.so not found: no NVIDIA driver is installed or it is not on the loader \
                 path"
                    .to_string(),
            );
        }
        let hint = "install it (CUDA toolkit, or pip nvidia-cublas / nvidia-cuda-nvrtc) and add \
                    its directory to LD_LIBRARY_PATH";
        if !self.cublaslt {
            return Some(format!("libcublasLt not found: {hint}"));
        }
        if !self.nvrtc {
            return Some(format!("libnvrtc not found: {hint}"));
        }
        None
    }
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
    /// Opens device `ordinal`: checks that libcuda, libcublasLt and libnvrtc can be loaded,
    /// initializes the driver (`cuInit`), checks the device count, retains the primary context
    /// and reads the device's facts.
    ///
    /// # Errors
    /// [`RuntimeError::NoCudaDevice`] naming what is missing: a library, a driver that fails to
    /// initialize (`CUDA_ERROR_NO_DEVICE`, `CUDA_ERROR_INSUFFICIENT_DRIVER`, ...), zero devices
    /// or fewer than `ordinal + 1`. [`RuntimeError::Cuda`] when a later driver call fails.
    pub fn open(ordinal: usize) -> Result<Arc<Self>, RuntimeError> {
        if let Some(reason) = Libraries::probe().missing() {
            return Err(no_device(reason));
        }
        result::init().map_err(|e| no_device(driver_reason("cuInit", e)))?;
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
        let mut driver_version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(drv("cuDriverGetVersion"))?;
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
        // Errors cannot be returned from drop; a failed free leaks device memory only.
        if self.device.bind().is_ok() {
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
        let all = Libraries { cuda: true, cublaslt: true, nvrtc: true };
        assert_eq!(all.missing(), None);
        let reason = Libraries { cuda: false, ..all }.missing().unwrap();
        assert!(reason.starts_with("libcuda.so not found"), "{reason}");
        let reason = Libraries { nvrtc: false, ..all }.missing().unwrap();
        assert!(reason.starts_with("libnvrtc not found"), "{reason}");
    }
}
