//! End-to-end: `lumen run --runtime cuda`. Without a GPU (or without the `cuda` feature) it
//! prints exactly one line `error: no CUDA device: <what is missing>` and exits 1, never a
//! panic; with one, it runs the digits MLP and its logits match scikit-learn's.

#[cfg(feature = "cuda")]
use std::process::Command;

use serde_json::Value;

mod common;

use common::lumen_no_cuda_env as lumen;

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_mlp.safetensors");

/// `Some(reason)` when this build on this machine has no CUDA device to offer.
fn no_device_reason() -> Option<String> {
    match lumen_runtime::runtime_by_name("cuda") {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[test]
fn run_on_cuda_is_one_error_line_or_a_real_run() {
    for extra in [&[][..], &["--json"][..], &["--no-fuse"][..]] {
        let mut args = vec!["run", DIGITS, "--runtime", "cuda"];
        args.extend_from_slice(extra);
        let out = lumen(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        match no_device_reason() {
            Some(reason) => {
                println!("skipped the GPU run: {reason}");
                assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
                assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
                assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
                assert!(stderr.starts_with("error: no CUDA device: "), "{stderr}");
                assert!(!stderr.contains("panicked"), "{stderr}");
                assert_eq!(stderr.trim_end(), format!("error: {reason}"));
                if cfg!(feature = "cuda") {
                    assert!(!stderr.contains("without the `cuda` feature"), "{stderr}");
                } else {
                    assert_eq!(
                        stderr.trim_end(),
                        "error: no CUDA device: lumen was built without the `cuda` feature"
                    );
                }
            }
            None => {
                assert!(out.status.success(), "{args:?}: {stderr}");
                if extra == ["--json"] {
                    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
                    assert_eq!(v["runtime"], "cuda");
                    assert!(v["max_abs_err"].as_f64().is_some_and(|e| e <= 1e-3), "{v}");
                }
            }
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn without_a_driver_the_reason_names_the_missing_library() {
    use lumen_runtime::cuda::Libraries;
    let libs = Libraries::probe();
    if libs.cuda.found() {
        println!("skipped: libcuda is present on this machine");
        return;
    }
    let out = lumen(&["run", DIGITS, "--runtime", "cuda"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: no CUDA device: libcuda.so not found"), "{stderr}");
}

/// The new user's repro: empty stub libraries (a libcuda that opens but has no `cuInit`, as
/// with an old driver or a partial install) on the loader path. One error line, no panic.
#[cfg(feature = "cuda")]
#[test]
fn a_libcuda_lacking_symbols_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("e.c");
    std::fs::write(&c, "int d(void){return 0;}\n").unwrap();
    for name in ["libcuda.so", "libcuda.so.1", "libcublasLt.so", "libnvrtc.so"] {
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(dir.path().join(name))
            .arg(&c)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("cc failed: {s}"),
            Err(e) => {
                println!("skipped: no C compiler to build the stub libraries (cc: {e})");
                return;
            }
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["run", DIGITS, "--runtime", "cuda", "--no-search"])
        .env("LD_LIBRARY_PATH", dir.path())
        .env_remove("LUMINAL_CUDA_MEMORY_DEBUG")
        .env_remove("LUMINAL_CUDA_PROFILE_RECAPTURE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "error: no CUDA device: libcuda.so lacks 34 of the 34 symbols lumen calls (cuInit, \
         cuDriverGetVersion, cuGetErrorName, cuGetErrorString and 30 more): the NVIDIA driver is \
         older than CUDA 13.0 needs (R580 or newer) or only partly installed"
    );
}
