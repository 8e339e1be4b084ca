//! End-to-end: the built `lumen` binary's `compare` subcommand, and `compile`'s fusion default.

use serde_json::Value;

mod common;

use common::{entries, error_line, json, lumen, stdout};

#[test]
fn compare_linear_relu_json_has_the_spec_differences() {
    let v = json(&["compare", "linear-relu", "--json"]);
    assert_eq!(v["program"], "linear-relu");
    let c = v["candidates"].as_array().unwrap();
    let labels: Vec<&str> = c.iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    let field = |i: usize, k: &str| c[i][k].as_u64().unwrap();
    assert_eq!([field(0, "launches"), field(1, "launches"), field(2, "launches")], [3, 2, 1]);
    assert_eq!([field(0, "buffers"), field(2, "buffers")], [7, 5]);
    assert_eq!([field(0, "nodes"), field(2, "nodes")], [5, 3]);
    assert_eq!([field(0, "slab_bytes"), field(2, "slab_bytes")], [1_196_288, 1_196_288]);
    assert_eq!([field(0, "naive_bytes"), field(2, "naive_bytes")], [1_229_056, 1_196_288]);
    assert_eq!([field(0, "lower_bound"), field(2, "lower_bound")], [1_196_288, 1_196_288]);
    assert_eq!([field(0, "dram_bytes"), field(2, "dram_bytes")], [213_248, 147_712]);
    assert_eq!(c[2]["epilogues"], serde_json::json!(["RELU_BIAS"]));
    assert_eq!(c[2]["picked"], true);
    assert_eq!(v["pick"], "fused");
    let d = &v["fused_vs_unfused"];
    assert_eq!(d["slab"], "equal");
    assert_eq!(d["slab_bytes_saved"], 0);
    assert_eq!(d["launches_saved"], 2);
    assert_eq!(d["dram_bytes_saved"], 65_536);
    assert_eq!(v["egraph"]["stop"], "saturated");
    // The target whose facts the candidates were compiled with, as compile --json says.
    assert_eq!(v["target"], "cuda");
    assert_eq!(v["workspace_bytes"], 1_048_576);
    let cpu = json(&["compare", "linear-relu", "--target", "cpu", "--json"]);
    assert_eq!(cpu["target"], "cpu");
    assert_eq!(cpu["workspace_bytes"], 0);
}

#[test]
fn compare_text_says_the_large_fused_slab_is_smaller() {
    let text = stdout(&["compare", "linear-relu", "--m", "4096", "--k", "64", "--n", "4096"]);
    assert!(text.starts_with("# lumen compare: linear-relu\n"), "{text}");
    assert!(
        text.contains("fused vs unfused: slab smaller by 67,108,864 bytes (70,270,976 vs 137,379,840), 2 launches saved"),
        "{text}"
    );
    assert!(text.contains("cost model picks: fused (linear-relu-fused)"), "{text}");
    let small = stdout(&["compare", "linear-relu"]);
    assert!(
        small.contains("slab equal (1,196,288 bytes), 2 launches saved, 65,536 DRAM bytes saved")
    );
}

#[test]
fn compare_mlp_takes_layers_and_batch() {
    let v = json(&["compare", "mlp", "--layers", "8,16,4", "--batch", "2", "--json"]);
    let fused = &v["candidates"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(fused["label"], "fused");
    assert_eq!(fused["epilogues"], serde_json::json!(["RELU_BIAS", "BIAS"]));
    assert_eq!(fused["launches"], 2);
}

#[test]
fn compare_dumps_every_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    stdout(&["compare", "linear-relu", "--dump-dir", d]);
    for label in ["unfused", "bias", "fused"] {
        for ext in ["llir.txt", "llir.dot", "plan.txt", "plan.svg"] {
            let f = dir.path().join(format!("linear-relu-{label}.{ext}"));
            assert!(f.exists(), "{}", f.display());
        }
    }
    // The fused candidate's dump is what `compile` dumps for the same program.
    let c = dir.path().join("compile");
    stdout(&["compile", "linear-relu", "--dump-dir", c.to_str().unwrap()]);
    let a = std::fs::read_to_string(dir.path().join("linear-relu-fused.llir.txt")).unwrap();
    let b = std::fs::read_to_string(c.join("linear-relu-fused.llir.txt")).unwrap();
    assert_eq!(a, b);
}

#[test]
fn compare_dumps_are_all_or_nothing_across_candidates() {
    let dir = tempfile::tempdir().unwrap();
    // The last candidate's last file cannot land: a directory is in its place.
    let blocked = dir.path().join("linear-relu-fused.plan.svg");
    std::fs::create_dir(&blocked).unwrap();
    let args = ["compare", "linear-relu", "--dump-dir", dir.path().to_str().unwrap()];
    let e = error_line(&args);
    assert_eq!(e, format!("error: cannot write dump {}: is a directory\n", blocked.display()));
    // Not the unfused and bias candidates' eight files, nor a temporary one: D as it was.
    assert_eq!(entries(dir.path()), ["linear-relu-fused.plan.svg"]);
    assert!(entries(&blocked).is_empty());
    // The same through LLIR_DUMP_DIR.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["compare", "linear-relu"])
        .env("LLIR_DUMP_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(entries(dir.path()), ["linear-relu-fused.plan.svg"]);

    // The directory gone, all twelve land.
    std::fs::remove_dir(&blocked).unwrap();
    stdout(&args);
    assert_eq!(entries(dir.path()).len(), 12);
}

#[test]
fn compare_lists_candidates_over_the_capacity_as_refused() {
    let args = ["compare", "linear-relu", "--m", "4096", "--k", "64", "--n", "4096"];
    let v = json(&[&args[..], &["--capacity", "100000000", "--json"]].concat());
    let labels: Vec<&str> =
        v["candidates"].as_array().unwrap().iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["fused"]);
    let refused: Vec<&str> =
        v["refused"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(refused, ["unfused", "bias"]);
    assert!(v["fused_vs_unfused"].is_null());
}

#[test]
fn compile_fuses_by_default_and_no_fuse_turns_it_off() {
    let fused = json(&["compile", "linear-relu", "--json"]);
    assert_eq!(fused["label"], "linear-relu-fused");
    let ops: Vec<&str> =
        fused["nodes"].as_array().unwrap().iter().map(|n| n["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["upload", "lt_matmul", "readback"]);
    assert_eq!(fused["nodes"][1]["epilogue"], "RELU_BIAS");
    let ids: Vec<&str> =
        fused["buffers"].as_array().unwrap().iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["x", "w", "b", "workspace", "y"]);
    assert_eq!(fused["slab_bytes"], 1_196_288);
    assert_eq!(fused["dram_bytes"], 147_712);
    assert_eq!(json(&["compile", "linear-relu", "--fuse", "--json"]), fused);
    let unfused = json(&["compile", "linear-relu", "--no-fuse", "--json"]);
    assert_eq!(unfused["label"], "linear-relu-unfused");
    assert_eq!(unfused["launches"], 3);
    // The last of --fuse / --no-fuse wins.
    assert_eq!(json(&["compile", "linear-relu", "--no-fuse", "--fuse", "--json"]), fused);
}

#[test]
fn compare_errors_are_one_line() {
    let e = error_line(&["compare", "resnet"]);
    assert!(e.contains("unknown program \"resnet\""), "{e}");
    let e = error_line(&["compare", "linear-relu", "--alignment", "0"]);
    assert!(e.contains("slab alignment must be positive"), "{e}");
    let e = error_line(&["compare", "linear-relu", "--capacity", "1000"]);
    // The planner's words and plain numbers, as SPEC.md gives them.
    assert!(e.contains("slab capacity 1000 exceeded"), "{e}");
    let e = error_line(&["compare", "mlp", "--layers", "3"]);
    assert!(e.contains("at least two layer sizes"), "{e}");
}

#[test]
fn when_only_the_fused_plan_fits_the_summary_names_the_refused_baseline() {
    let args = ["compare", "linear-relu", "--m", "4096", "--k", "64", "--n", "4096"];
    let text = stdout(&[&args[..], &["--capacity", "100000000"]].concat());
    assert!(!text.contains("holds no fused program"), "{text}");
    assert!(
        text.contains(
            "\nnothing to compare against: the unfused baseline was refused at capacity \
             100,000,000 bytes\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "\nunfused: refused by the planner: planning failed: slab capacity 100000000 \
             exceeded while placing request 5 (67108864 bytes)\n"
        ),
        "{text}"
    );
    let v = json(&[&args[..], &["--capacity", "100000000", "--json"]].concat());
    assert_eq!(
        v["summary"],
        "nothing to compare against: the unfused baseline was refused at capacity 100,000,000 bytes"
    );
}

#[test]
fn when_nothing_fits_every_candidate_is_listed_then_one_error_line() {
    let args = ["compare", "linear-relu", "--capacity", "1000"];
    let out = lumen(&args);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(": refused by the planner: "))
        .filter_map(|l| l.split(':').next())
        .collect();
    assert_eq!(refused, ["unfused", "bias", "fused"], "{text}");
    assert!(
        text.ends_with(
            "\nnothing to compare: every candidate was refused at capacity 1,000 bytes\n"
        ),
        "{text}"
    );
    let stderr = error_line(&args);
    assert_eq!(
        stderr.trim_end(),
        "error: no candidate fits: the planner refused all 3 candidates (first: unfused: planning \
         failed: slab capacity 1000 exceeded while placing request 0 (65536 bytes))"
    );

    // The JSON goes to stdout in full before the error.
    let out = lumen(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["candidates"], serde_json::json!([]));
    assert_eq!(v["pick"], Value::Null);
    let labels: Vec<&str> =
        v["refused"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    assert!(v["refused"][2]["error"].as_str().unwrap().contains("slab capacity 1000 exceeded"));
    // The refusals come from the one exploration: each candidate's own request and size.
    assert!(
        text.contains(
            "\nfused: refused by the planner: planning failed: slab capacity 1000 exceeded while \
             placing request 0 (65536 bytes)\n"
        ),
        "{text}"
    );
    // A refusal no capacity explains is the error alone, with no list of refusals.
    let alignment = ["compare", "linear-relu", "--capacity", "1000", "--alignment", "0"];
    let out = lumen(&alignment);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
    assert_eq!(
        error_line(&alignment).trim_end(),
        "error: planning failed: slab alignment must be positive"
    );
    // --profile has nothing to measure: the same report and error, no measurement.
    let out = lumen(&[&args[..], &["--profile"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stdout).unwrap().ends_with("at capacity 1,000 bytes\n"));
}
