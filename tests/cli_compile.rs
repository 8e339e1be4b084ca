//! End-to-end: the built `lumen` binary's `compile` subcommand.

use std::process::{Command, Output};

use serde_json::Value;

fn lumen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(args)
        .env_remove("LLIR_DUMP_DIR")
        .output()
        .expect("run lumen")
}

fn json(args: &[&str]) -> Value {
    let out = lumen(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

/// Stderr of a failing run: exactly one line starting `error: `.
fn error_line(args: &[&str]) -> String {
    let out = lumen(args);
    assert!(!out.status.success(), "{args:?} should fail");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn linear_relu_no_fuse_json_is_the_golden_table() {
    let v = json(&["compile", "linear-relu", "--no-fuse", "--json"]);
    let nodes = v["nodes"].as_array().unwrap();
    let op_of = |id: &Value| nodes[id.as_u64().unwrap() as usize]["op"].as_str().unwrap();
    let ops: Vec<&str> = nodes.iter().map(|n| n["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["upload", "lt_matmul", "add_bias", "relu", "readback"]);
    assert_eq!(nodes[1]["epilogue"], "DEFAULT");
    let table: [(&str, u64, &[&str], u64); 7] = [
        ("x", 65_536, &["upload", "lt_matmul"], 0),
        ("w", 65_536, &["upload", "lt_matmul"], 65_536),
        ("b", 256, &["upload", "add_bias"], 131_072),
        ("workspace", 1_048_576, &["lt_matmul"], 131_328),
        ("t0", 16_384, &["lt_matmul", "add_bias"], 1_179_904),
        ("t1", 16_384, &["add_bias", "relu"], 0),
        ("y", 16_384, &["relu", "readback"], 16_384),
    ];
    let buffers = v["buffers"].as_array().unwrap();
    assert_eq!(buffers.len(), table.len());
    for (b, (id, bytes, uses, offset)) in buffers.iter().zip(table) {
        assert_eq!(b["id"], id);
        assert_eq!(b["bytes"], bytes, "{id}");
        assert_eq!(b["offset"], offset, "{id}");
        let names: Vec<&str> = b["uses"].as_array().unwrap().iter().map(op_of).collect();
        assert_eq!(names, uses, "{id}");
    }
    assert_eq!(v["slab_bytes"], 1_196_288);
    assert_eq!(v["naive_bytes"], 1_229_056);
    assert_eq!(v["lower_bound"], 1_196_288);
    assert_eq!(v["launches"], 3);
    assert_eq!(v["dram_bytes"], 213_248);
}

#[test]
fn text_output_has_llir_plan_and_figures() {
    let out = lumen(&["compile", "mlp", "--no-fuse", "--layers", "64,128,64,10", "--batch", "32"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# lumen LLIR: mlp-unfused\n"), "{text}");
    assert!(text.contains("\n# lumen plan: mlp-unfused\n"), "{text}");
    assert!(text.contains("\nlaunches     8\n"), "{text}");
    assert!(text.contains("\nslab_bytes   1142272\n"), "{text}");
}

#[test]
fn sizes_and_workspace_flags_reach_the_plan() {
    let v = json(&[
        "compile",
        "linear-relu",
        "--m",
        "8",
        "--k",
        "16",
        "--n",
        "4",
        "--json",
        "--workspace-bytes",
        "0",
    ]);
    let buffers = v["buffers"].as_array().unwrap();
    assert_eq!(buffers[0]["bytes"], 8 * 16 * 4);
    assert_eq!(buffers[3]["id"], "workspace");
    assert_eq!(buffers[3]["bytes"], 0);
    assert_eq!(buffers[3]["reserved"], 256);
}

#[test]
fn dump_dir_and_env_write_files() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("flag");
    let out = lumen(&["compile", "linear-relu", "--no-fuse", "--dump-dir", flag.to_str().unwrap()]);
    assert!(out.status.success());
    let txt = std::fs::read_to_string(flag.join("linear-relu-unfused.llir.txt")).unwrap();
    assert!(txt.contains("node 1 lt_matmul m=64 k=256 n=64 epilogue=DEFAULT"), "{txt}");
    assert!(flag.join("linear-relu-unfused.plan.txt").exists());
    assert!(flag.join("linear-relu-unfused.llir.dot").exists());
    assert!(flag.join("linear-relu-unfused.plan.svg").exists());

    let env_dir = dir.path().join("env");
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["compile", "mlp", "--no-fuse", "--json"])
        .env("LLIR_DUMP_DIR", &env_dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let plan = std::fs::read_to_string(env_dir.join("mlp-unfused.plan.txt")).unwrap();
    assert!(plan.contains("slab_bytes   1142272"), "{plan}");
}

#[test]
fn bad_input_is_one_error_line() {
    let e = error_line(&["compile", "resnet"]);
    assert!(e.contains("unknown program \"resnet\""), "{e}");
    let e = error_line(&["compile", "mlp", "--layers", "64,x,10"]);
    assert!(e.contains("layer size \"x\""), "{e}");
    let e = error_line(&["compile", "mlp", "--layers", "64"]);
    assert!(e.contains("at least two layer sizes"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--m", "0"]);
    assert!(e.contains("sizes must be positive"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--alignment", "0"]);
    assert!(e.contains("slab alignment must be positive"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--m", "4611686018427387904"]);
    assert!(e.contains("too large"), "{e}");
}

#[test]
fn algorithm_flag_reaches_the_planner_and_bad_names_are_one_line() {
    // 4096x64x4096 unfused: first fit is 137,379,840 B against a lower bound of 134,234,112 B;
    // `best` must never be worse than first fit, and both must keep the same lower bound.
    let args = ["compile", "linear-relu", "--m", "4096", "--k", "64", "--n", "4096", "--no-fuse"];
    let ff = json(&[&args[..], &["--json"]].concat());
    let best = json(&[&args[..], &["--algorithm", "best", "--json"]].concat());
    assert_eq!(ff["slab_bytes"], 137_379_840u64);
    assert_eq!(ff["lower_bound"], best["lower_bound"]);
    assert!(best["slab_bytes"].as_u64() <= ff["slab_bytes"].as_u64());
    let err = error_line(&["compile", "linear-relu", "--algorithm", "nope"]);
    assert!(err.contains("first-fit") && err.contains("best"), "{err}");
}

/// An alignment that would split f32 elements is refused by the compiler, before any plan.
#[test]
fn alignment_must_be_a_power_of_two_of_at_least_4() {
    let e = error_line(&["compile", "linear-relu", "--alignment", "3", "--no-fuse"]);
    assert_eq!(
        e.trim_end(),
        "error: slab alignment 3 bytes does not suit f32 buffers: it must be a power of two of \
         at least 4 (4, 8, 16, ..., 256 for cuBLASLt)"
    );
    for a in ["2", "12"] {
        let e = error_line(&["compile", "linear-relu", "--alignment", a]);
        assert!(e.contains(&format!("slab alignment {a} bytes does not suit f32")), "{e}");
    }
    let v = json(&["compile", "linear-relu", "--alignment", "4", "--no-fuse", "--json"]);
    assert_eq!(v["buffers"][2]["id"], "b");
    assert_eq!(v["buffers"][2]["reserved"], 256);
    assert_eq!(v["buffers"][1]["offset"], 65_536);
}

/// The messages a new user met: positions and limits in words, no lumen source lines.
#[test]
fn size_messages_say_what_is_wrong() {
    let e = error_line(&["compile", "mlp", "--layers", "5,0,3"]);
    assert_eq!(
        e.trim_end(),
        "error: mlp: layer 1 of [5, 0, 3] has size 0 (layer 0 is the input; every size must be \
         positive)"
    );
    let e = error_line(&["compile", "mlp", "--layers", "99999999999999999999,3"]);
    assert!(e.contains("is too large (at most 18446744073709551615)"), "{e}");
    let e = error_line(&["compile", "linear-relu", "--m", "18446744073709551615"]);
    assert_eq!(
        e.trim_end(),
        "error: linear-relu: x is [m, k] = [18446744073709551615, 256]: too large (its byte size \
         overflows usize)"
    );
    assert!(!e.contains(".rs:"), "{e}");
}

/// A size of the other program is an error, not silently ignored; defaults still apply and
/// `--help` still shows them.
#[test]
fn sizes_of_the_other_program_are_refused() {
    let e = error_line(&["compile", "linear-relu", "--layers", "5,3"]);
    assert_eq!(e.trim_end(), "error: --layers applies to mlp, not linear-relu");
    // About the flag, even when its text would not parse.
    let e = error_line(&["compile", "linear-relu", "--layers", "x"]);
    assert_eq!(e.trim_end(), "error: --layers applies to mlp, not linear-relu");
    let e = error_line(&["compile", "mlp", "--m", "5"]);
    assert_eq!(e.trim_end(), "error: --m applies to linear-relu, not mlp");
    let e = error_line(&["compare", "linear-relu", "--batch", "5"]);
    assert_eq!(e.trim_end(), "error: --batch applies to mlp, not linear-relu");
    let e = error_line(&["compile", "resnet", "--m", "5"]);
    assert!(e.contains("unknown program \"resnet\""), "{e}");

    let v = json(&["compile", "mlp", "--batch", "2", "--json"]);
    assert_eq!(v["buffers"][0]["id"], "x");
    assert_eq!(v["buffers"][0]["bytes"], 2 * 64 * 4);

    let out = lumen(&["compile", "--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    for default in ["[default: 64]", "[default: 256]", "[default: 64,128,64,10]", "[default: 32]"] {
        assert!(help.contains(default), "{default} missing from:\n{help}");
    }
}
