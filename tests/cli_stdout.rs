//! End-to-end: a report that cannot be written to stdout is an outcome, not a panic. A reader
//! that went away ends the command quietly with status 141 (128 + SIGPIPE, what a Unix tool
//! the signal killed reports); any other write error (ENOSPC on /dev/full) is one
//! `error: cannot write to stdout: ...` line and status 1.

mod common;

use common::{lumen_with_closed_stdout, lumen_with_stdout};

/// 300 widths: about 175 KB of LLIR and plan text, more than a pipe buffers.
fn long_mlp() -> String {
    vec!["8"; 300].join(",")
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_one_error_line_and_status_1() {
    let layers = long_mlp();
    let cases: [&[&str]; 8] = [
        &["compile", "linear-relu"],
        &["compile", "linear-relu", "--json"],
        &["compile", "mlp", "--layers", &layers],
        &["compare", "linear-relu"],
        &["compare", "linear-relu", "--json"],
        &["run", "data/digits_mlp.safetensors", "--json", "--runs", "1"],
        &["run", "data/digits_mlp.safetensors", "--no-search", "--runs", "1"],
        &["plan-slab", "examples/plans/seed_unfused.json"],
    ];
    for args in cases {
        let full = std::fs::File::create("/dev/full").expect("/dev/full opens for writing");
        let out = lumen_with_stdout(args, full);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr, "error: cannot write to stdout: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
    let full = std::fs::File::create("/dev/full").unwrap();
    let out = lumen_with_stdout(
        &["plan-slab", "--json", "--compare", "examples/plans/seed_unfused.json"],
        full,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: cannot write to stdout: "));
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_quietly_with_status_141() {
    let layers = long_mlp();
    let cases: [&[&str]; 2] = [
        &["compile", "mlp", "--layers", &layers],
        &["compile", "mlp", "--layers", &layers, "--json"],
    ];
    for args in cases {
        let out = lumen_with_closed_stdout(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("internal error"), "{stderr}");
        assert_eq!(stderr, "", "no message: the reader has what it wanted");
        assert_eq!(out.status.code(), Some(141), "{args:?}");
    }
}

#[test]
fn a_written_report_still_succeeds() {
    // The helper writes everything and flushes: the text ends as it did with print!.
    let out = lumen_with_stdout(&["compile", "linear-relu"], std::process::Stdio::piped());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# lumen LLIR: linear-relu-fused\n"), "{text}");
    assert!(text.contains("\n\n# lumen plan: linear-relu-fused\n"), "{text}");
    assert!(text.contains("\nflops        2105344\nverified     yes"), "{text}");
    assert!(text.ends_with(" share a byte)\n"), "{text}");
}
