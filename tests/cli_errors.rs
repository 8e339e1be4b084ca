//! End-to-end: every failure of the `lumen` binary is one `error:` line, without repeats.

use std::process::Command;

mod common;

/// Stderr of a failing run, checked to be exactly one `error: ` line; returns the message.
fn error_line(args: &[&str], code: i32) -> String {
    let out = common::lumen(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let msg = stderr.strip_prefix("error: ").unwrap_or_else(|| panic!("{stderr}")).trim_end();
    assert!(!msg.contains("panicked") && !msg.contains("backtrace"), "{msg}");
    msg.to_string()
}

#[test]
fn a_cause_already_in_the_message_is_not_repeated() {
    let msg = error_line(&["compile", "linear-relu", "--alignment", "0"], 1);
    assert_eq!(msg.matches("slab alignment must be positive").count(), 1, "{msg}");
}

#[test]
fn usage_errors_are_one_line_with_exit_2() {
    let msg = error_line(&["compile"], 2);
    assert!(msg.contains("<PROGRAM>"), "{msg}");
    let msg = error_line(&["no-such-command"], 2);
    assert!(msg.contains("no-such-command"), "{msg}");
    let msg = error_line(&["plan-slab", "x.json", "--capacity", "-5"], 2);
    assert!(msg.contains("-5"), "{msg}");
}

/// Flag misuse found after parsing exits 2 like clap's own usage errors, message unchanged;
/// values the compiler or planner refuses stay status 1.
#[test]
fn flag_misuse_after_parsing_is_a_usage_error() {
    let usage = [
        (
            &["compile", "linear-relu", "--layers", "64"][..],
            "--layers applies to mlp and transformer, not linear-relu",
        ),
        (&["compile", "mlp", "--m", "4"], "--m applies to linear-relu, not mlp"),
        (
            &["compare", "linear-relu", "--batch", "5"],
            "--batch applies to mlp and transformer, not linear-relu",
        ),
        (
            &["compile", "resnet"],
            "unknown program \"resnet\" (expected one of: linear-relu, mlp, transformer)",
        ),
        (
            &["compare", "mlp", "--layers", "64,x,10"],
            "mlp: layer size \"x\" in --layers \"64,x,10\" is not a whole number",
        ),
        (
            &["plan-slab", "examples/plans/seed_unfused.json", "--time-budget", "5"],
            "--time-budget applies to the best algorithm only, and \
             examples/plans/seed_unfused.json is planned with first-fit (add --algorithm best)",
        ),
    ];
    for (args, message) in usage {
        assert_eq!(error_line(args, 2), message, "{args:?}");
    }
    let refused = [
        (&["compile", "mlp", "--layers", "64"][..], "at least two layer sizes"),
        (&["compile", "linear-relu", "--m", "0"], "sizes must be positive"),
        (&["compile", "linear-relu", "--alignment", "3"], "slab alignment 3 bytes"),
        (&["run", "no-such-file.safetensors"], "no-such-file.safetensors"),
    ];
    for (args, part) in refused {
        let msg = error_line(args, 1);
        assert!(msg.contains(part), "{args:?}: {msg}");
    }
}

#[test]
fn help_and_version_still_print_and_succeed() {
    for flag in ["--help", "--version"] {
        let out = Command::new(env!("CARGO_BIN_EXE_lumen")).arg(flag).output().unwrap();
        assert!(out.status.success(), "{flag}");
        assert!(!out.stdout.is_empty(), "{flag}");
    }
}
