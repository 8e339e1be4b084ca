//! Helpers shared by the root end-to-end tests: run the built `lumen` binary and read what it
//! printed. Each test binary uses a subset, hence the `dead_code` allowances.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The repository root (the root package's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `lumen args` with `LLIR_DUMP_DIR` unset and the CPU workers' passive wait policy
/// (`LUMEN_CPU_PASSIVE_WAIT=1`): the tests run several `lumen` processes at once on a few
/// cores, the case that policy is for, and some decisions they check (whether a search pays for
/// itself) rest on measured times that another process's spinning worker could stretch.
fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lumen"));
    cmd.args(args).env_remove("LLIR_DUMP_DIR").env("LUMEN_CPU_PASSIVE_WAIT", "1");
    cmd
}

/// `lumen args` with only `env` of the variables that steer a search or its output set:
/// `LLIR_DUMP_DIR`, `LUMINAL_LOG_LLIR`, `LUMEN_TUNING_CACHE` and the CUDA debug switches are
/// unset first, so the caller's shell cannot change a result.
pub fn lumen_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = command(args);
    cmd.env_remove("LUMINAL_LOG_LLIR")
        .env_remove("LUMEN_TUNING_CACHE")
        .env_remove("LUMINAL_CUDA_MEMORY_DEBUG")
        .env_remove("LUMINAL_CUDA_PROFILE_RECAPTURE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run lumen")
}

/// [`lumen_env`], which must succeed (its stderr in the panic message otherwise).
pub fn ok_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = lumen_env(args, env);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// `lumen args`, with `LLIR_DUMP_DIR` unset.
pub fn lumen(args: &[&str]) -> Output {
    command(args).output().expect("run lumen")
}

/// `lumen args`, with `LLIR_DUMP_DIR` and the CUDA runtime's debug switches
/// (`LUMINAL_CUDA_MEMORY_DEBUG`, `LUMINAL_CUDA_PROFILE_RECAPTURE`) unset.
pub fn lumen_no_cuda_env(args: &[&str]) -> Output {
    command(args)
        .env_remove("LUMINAL_CUDA_MEMORY_DEBUG")
        .env_remove("LUMINAL_CUDA_PROFILE_RECAPTURE")
        .output()
        .expect("run lumen")
}

/// `lumen args` from the repository root with its stdout sent to `stdout` (a file such as
/// `/dev/full`), stderr captured, `LLIR_DUMP_DIR` unset.
pub fn lumen_with_stdout(args: &[&str], stdout: impl Into<Stdio>) -> Output {
    command(args).current_dir(root()).stdout(stdout).output().expect("run lumen")
}

/// `lumen args` from the repository root with its stdout a pipe whose read end is closed
/// before the command can write (a reader such as `head` that has gone away); stderr captured.
/// The output should exceed the pipe's buffer (64 KiB on Linux), so that the write fails even
/// if it starts before the read end is closed.
pub fn lumen_with_closed_stdout(args: &[&str]) -> Output {
    let mut child = command(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lumen");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for lumen")
}

/// `lumen plan-slab args`, run from the repository root (the environment left as it is).
pub fn plan_slab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lumen"))
        .arg("plan-slab")
        .args(args)
        .current_dir(root())
        .output()
        .expect("the lumen binary runs")
}

/// Stdout of `lumen args`, which must succeed.
pub fn stdout(args: &[&str]) -> String {
    let out = lumen(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The one JSON object a successful run printed on stdout.
pub fn json_of(out: Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

/// The one JSON object `lumen args` printed on stdout; the run must succeed.
pub fn json(args: &[&str]) -> Value {
    json_of(lumen(args))
}

/// Stderr of `out`, a failing run of `args`: exactly one line starting `error: ` (returned as
/// printed, newline included).
pub fn error_line_of(args: &[&str], out: Output) -> String {
    assert!(!out.status.success(), "{args:?} should fail");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

/// Stderr of `lumen args`, which must fail: exactly one line starting `error: `.
pub fn error_line(args: &[&str]) -> String {
    error_line_of(args, lumen(args))
}

/// As [`error_line`], and the line is not a panic.
pub fn error_line_no_panic(args: &[&str]) -> String {
    let stderr = error_line(args);
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// The names in `dir`, sorted (hidden and temporary files included): what a dump test
/// compares before and after a command.
pub fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}
