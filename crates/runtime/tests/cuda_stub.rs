//! The CUDA runtime against stub libraries (feature `cuda`; needs a C compiler, `cc`).
//!
//! A libcuda that opens but lacks symbols (an old driver, a partial install) used to reach
//! cudarc's `Missing symbol cuInit` panic. Here stub libraries built with `cc` stand in for
//! libcuda, libcublasLt and libnvrtc: the probe must name the missing symbols, and opening the
//! runtime over them (in a child process, since the loader reads `LD_LIBRARY_PATH` at start)
//! must return `NoCudaDevice` with that reason, never panic. A driver stub with every symbol,
//! whose `cuInit` says "no device", shows the first real driver calls fail cleanly too.
#![cfg(feature = "cuda")]

use std::path::{Path, PathBuf};
use std::process::Command;

use lumen_runtime::RuntimeError;
use lumen_runtime::cuda::{CUBLASLT, CudaRuntime, DRIVER, NVRTC, Probe, RequiredLibrary};

/// Set in the child process: the directory its loader path starts with.
const CHILD_ENV: &str = "LUMEN_CUDA_STUB_CHILD";

/// A shared library at `dir/file` exporting `symbols` (each `int f(void)` returning `ret`),
/// plus one unrelated symbol so that an empty list still makes a library. `None` when there is
/// no C compiler.
fn stub(dir: &Path, file: &str, symbols: &[&str], ret: i32) -> Option<PathBuf> {
    let mut src = String::from("int lumen_stub_unrelated(void) { return 0; }\n");
    for s in symbols {
        src.push_str(&format!("int {s}(void) {{ return {ret}; }}\n"));
    }
    compile_c(dir, file, &src)
}

/// Builds `dir/file` from the C source `src`; `None` when there is no C compiler.
fn compile_c(dir: &Path, file: &str, src: &str) -> Option<PathBuf> {
    let c = dir.join(format!("{file}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(file);
    let status = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&out).arg(&c).status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc failed ({s}) on {}", c.display()),
        Err(e) => {
            println!("skipped: no C compiler to build stub libraries (cc: {e})");
            None
        }
    }
}

/// Stubs of the three libraries in a fresh directory, under the names cudarc tries first:
/// the driver with `driver` symbols (returning `CUDA_ERROR_NO_DEVICE`, 100), cuBLASLt and
/// NVRTC complete.
fn stub_dir(driver: &[&str]) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    stub(dir.path(), "libcuda.so", driver, 100)?;
    stub(dir.path(), "libcublasLt.so", CUBLASLT.symbols, 1)?;
    stub(dir.path(), "libnvrtc.so", NVRTC.symbols, 1)?;
    Some(dir)
}

fn path_of(dir: &Path, file: &str) -> Vec<String> {
    vec![dir.join(file).to_string_lossy().into_owned()]
}

#[test]
fn the_probe_names_the_symbols_a_library_lacks() {
    let Some(dir) = stub_dir(&[]) else { return };
    let probe = DRIVER.probe_files(&path_of(dir.path(), "libcuda.so"));
    let Probe::Found { missing, .. } = &probe else { panic!("{probe:?}") };
    assert_eq!(missing, DRIVER.symbols, "an empty stub lacks everything");
    assert!(probe.found() && !probe.usable());

    let old: Vec<&str> =
        DRIVER.symbols.iter().copied().filter(|s| *s != "cuEventElapsedTime_v2").collect();
    stub(dir.path(), "libcuda_old.so", &old, 100).unwrap();
    let probe = DRIVER.probe_files(&path_of(dir.path(), "libcuda_old.so"));
    assert_eq!(
        DRIVER.problem(&probe).unwrap(),
        format!(
            "{} lacks 1 of the 34 symbols lumen calls (cuEventElapsedTime_v2): the NVIDIA \
             driver is older than CUDA 13.0 needs (R580 or newer) or only partly installed",
            dir.path().join("libcuda_old.so").display()
        )
    );

    let probe = CUBLASLT.probe_files(&path_of(dir.path(), "libcublasLt.so"));
    assert!(probe.usable(), "{probe:?}");
    // The first file that opens is the one judged, as cudarc loads the first that opens.
    let files = [path_of(dir.path(), "absent.so"), path_of(dir.path(), "libnvrtc.so")].concat();
    assert_eq!(
        NVRTC.probe_files(&files),
        Probe::Found { file: files[1].clone(), missing: Vec::new() }
    );
    assert_eq!(NVRTC.probe_files(&path_of(dir.path(), "absent.so")), Probe::NotFound);
}

/// Runs `child_opens_the_runtime` in a child process whose loader path starts with `dir`, and
/// returns what it printed after `REASON: `.
fn reason_in_child(dir: &Path) -> String {
    let path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(rest) if !rest.is_empty() => format!("{}:{rest}", dir.display()),
        _ => dir.display().to_string(),
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_opens_the_runtime", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env("LD_LIBRARY_PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stdout
        .lines()
        .find_map(|l| l.split_once("REASON: ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no REASON line: {stdout}"))
        .to_string()
}

/// The child half of the tests below: opens the CUDA runtime and prints why it cannot.
#[test]
fn child_opens_the_runtime() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // Only meaningful in the child process the other tests start.
    }
    match CudaRuntime::new(Default::default()) {
        Err(RuntimeError::NoCudaDevice { reason }) => println!("REASON: {reason}"),
        Err(other) => panic!("expected NoCudaDevice, got {other}"),
        Ok(rt) => panic!("a stub opened as a device: {:?}", rt.device_info()),
    }
}

#[test]
fn a_libcuda_without_symbols_is_no_device_not_a_panic() {
    let Some(dir) = stub_dir(&[]) else { return };
    let reason = reason_in_child(dir.path());
    assert_eq!(
        reason,
        "libcuda.so lacks 34 of the 34 symbols lumen calls (cuInit, cuDriverGetVersion, \
         cuGetErrorName, cuGetErrorString and 30 more): the NVIDIA driver is older than CUDA \
         13.0 needs (R580 or newer) or only partly installed"
    );
}

#[test]
fn a_cublaslt_without_the_matmul_is_named() {
    let Some(dir) = stub_dir(DRIVER.symbols) else { return };
    let partial: Vec<&str> =
        CUBLASLT.symbols.iter().copied().filter(|s| *s != "cublasLtMatmul").collect();
    stub(dir.path(), "libcublasLt.so", &partial, 1).unwrap();
    let reason = reason_in_child(dir.path());
    assert!(
        reason
            .starts_with("libcublasLt.so lacks 1 of the 12 symbols lumen calls (cublasLtMatmul): "),
        "{reason}"
    );
}

#[test]
fn a_complete_driver_that_sees_no_device_fails_at_cu_init() {
    // Every symbol is there, so cudarc really calls the stub's cuInit, which returns
    // CUDA_ERROR_NO_DEVICE (100); cuGetErrorName fails too, so the code is shown as a number.
    let Some(dir) = stub_dir(DRIVER.symbols) else { return };
    let reason = reason_in_child(dir.path());
    assert_eq!(reason, "cuInit: CUresult 100 (unknown status)");
}

#[test]
fn a_driver_older_than_cuda_13_is_named_with_its_version() {
    // A CUDA 12.8 driver has every symbol lumen calls (cuEventElapsedTime_v2 came in 12.8) and
    // initializes, but cuBLASLt 13 and NVRTC 13's CUBINs need 13.0: refused by version.
    let Some(dir) = stub_dir(&[]) else { return };
    let mut src = String::new();
    for s in DRIVER.symbols.iter().filter(|s| **s != "cuDriverGetVersion") {
        src.push_str(&format!("int {s}(void) {{ return 0; }}\n"));
    }
    src.push_str("int cuDriverGetVersion(int *v) { *v = 12080; return 0; }\n");
    compile_c(dir.path(), "libcuda.so", &src).unwrap();
    let reason = reason_in_child(dir.path());
    assert_eq!(
        reason,
        "the driver supports CUDA 12.8, lumen's CUDA runtime needs 13.0 (R580 or newer)"
    );
}

#[test]
fn a_file_the_loader_refuses_is_named_with_the_loaders_message() {
    // Not a shared library at all: found, but dlopen refuses it. Said as such, not "not found".
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("libcuda.so");
    std::fs::write(&bogus, b"this is not an ELF file").unwrap();
    let probe = DRIVER.probe_files(&path_of(dir.path(), "libcuda.so"));
    let Probe::Unloadable { file, error } = &probe else { panic!("{probe:?}") };
    assert_eq!(file, &bogus.to_string_lossy());
    assert!(error.contains("libcuda.so"), "{error}");
    assert!(!probe.found() && !probe.usable());
    let reason = DRIVER.problem(&probe).unwrap();
    assert!(
        reason.starts_with(&format!("{} is on the loader path but cannot be loaded (", file)),
        "{reason}"
    );
    assert!(reason.ends_with("): reinstall the NVIDIA driver or fix LD_LIBRARY_PATH"), "{reason}");
    // Through the loader path in a child, as cudarc would load it: the same, never a panic.
    let Some(stubs) = stub_dir(DRIVER.symbols) else { return };
    std::fs::write(stubs.path().join("libcuda.so"), b"not ELF").unwrap();
    let reason = reason_in_child(stubs.path());
    assert!(
        reason.starts_with("libcuda.so is on the loader path but cannot be loaded ("),
        "{reason}"
    );
    // A name found nowhere is still "not found".
    assert_eq!(DRIVER.probe_files(&["libsurely-absent-lumen.so".to_string()]), Probe::NotFound);
}

#[test]
fn every_required_library_lists_its_symbols() {
    let libs: [&RequiredLibrary; 3] = [&DRIVER, &CUBLASLT, &NVRTC];
    let counts: Vec<usize> = libs.iter().map(|l| l.symbols.len()).collect();
    assert_eq!(counts, [34, 12, 10]);
}
