//! End-to-end: `lumen run`, `compile` and `compare` on ONNX models exported by real tools
//! (data/onnx/, made by data/make_onnx_fixtures.py; expected outputs from onnxruntime): each
//! fixture reproduces onnxruntime within 1e-4, its fused candidate is found (RELU_BIAS for
//! scikit-learn's MLP), its plan verifies, its dumps are byte-identical run to run; bad input
//! is one error line.

use std::path::PathBuf;

use serde_json::Value;

mod common;

use common::{entries, error_line_no_panic, json_of, lumen_no_cuda_env as lumen};

fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/onnx").join(name).display().to_string()
}

/// `lumen run NAME.onnx --inputs ... --expect ... --json` plus `extra`.
fn run_fixture(name: &str, extra: &[&str]) -> Value {
    let (model, inputs, expect) = (
        data(&format!("{name}.onnx")),
        data(&format!("{name}.inputs.safetensors")),
        data(&format!("{name}.expect.safetensors")),
    );
    let mut args = vec!["run", &model, "--inputs", &inputs, "--expect", &expect, "--json"];
    args.extend_from_slice(extra);
    json_of(lumen(&args))
}

#[test]
fn every_fixture_matches_onnxruntime_fused_and_unfused() {
    for (name, outputs) in [
        ("digits_mlp_sklearn", vec!["probabilities"]),
        ("digits_vit", vec!["logits"]),
        ("bert_tiny", vec!["hidden", "pooled"]),
        ("bert_int_mask", vec!["hidden", "mean"]),
    ] {
        for mode in ["--no-search", "--no-fuse"] {
            let v = run_fixture(name, &[mode, "--runs", "2"]);
            assert_eq!(v["passed"], true, "{name} {mode}: {v}");
            assert_eq!(v["architecture"], "onnx");
            assert_eq!(v["repeat_identical"], true);
            let err = v["max_abs_err"].as_f64().unwrap();
            assert!(err <= 1e-4, "{name} {mode}: {err}");
            let listed: Vec<&str> = v["config"]["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["name"].as_str().unwrap())
                .collect();
            assert_eq!(listed, outputs, "{name}");
            for o in v["config"]["outputs"].as_array().unwrap() {
                assert!(o["max_abs_err"].as_f64().unwrap() <= 1e-4, "{name}: {o}");
            }
            assert_eq!(v["checks"]["max_abs_err"]["status"], "passed");
            assert_eq!(v["checks"]["accuracy"]["status"], "skipped");
        }
    }
}

#[test]
fn the_fixtures_describe_their_exporters() {
    let v = run_fixture("bert_tiny", &["--no-search", "--runs", "1"]);
    let c = &v["config"];
    assert_eq!(c["opset"], 17);
    assert!(c["producer"].as_str().unwrap().starts_with("pytorch"), "{c}");
    let inputs: Vec<(&str, &str)> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap(), i["dtype"].as_str().unwrap()))
        .collect();
    assert_eq!(inputs, [("input_ids", "i64"), ("attention_mask", "f32")]);
    assert!(c["folded"].as_u64().unwrap() > 0, "shape arithmetic is folded at import: {c}");
}

/// The search runs on ONNX programs like on the built-ins; every candidate agrees.
#[test]
fn the_search_measures_every_candidate() {
    let v = run_fixture("digits_mlp_sklearn", &["--trials", "1", "--runs", "1"]);
    assert_eq!(v["passed"], true, "{v}");
    let labels: Vec<&str> =
        v["candidates"].as_array().unwrap().iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
}

#[test]
fn sklearn_gemm_add_relu_becomes_relu_bias() {
    let model = data("digits_mlp_sklearn.onnx");
    let out = lumen(&["compile", &model, "--shape", "X=450,64"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("epilogue=RELU_BIAS").count(), 2, "{text}");
    assert_eq!(text.matches("epilogue=BIAS").count(), 1, "{text}");
    assert!(text.contains("verified     yes"), "{text}");
    let v = json_of(lumen(&["compare", &model, "--shape", "X=450,64", "--json"]));
    let fused = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "fused")
        .expect("a fused candidate");
    assert_eq!(fused["epilogues"], serde_json::json!(["RELU_BIAS", "RELU_BIAS", "BIAS"]));
}

#[test]
fn compile_verifies_and_dumps_are_byte_identical() {
    let model = data("bert_tiny.onnx");
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for d in &dirs {
        let dir = d.path().display().to_string();
        let v = json_of(lumen(&["compile", &model, "--dump-dir", &dir, "--json"]));
        assert_eq!(v["verified"], true, "{v}");
    }
    let names = entries(dirs[0].path());
    assert_eq!(names, entries(dirs[1].path()));
    assert!(names.iter().any(|n| n == "bert_tiny-fused.llir.txt"), "{names:?}");
    for n in &names {
        let a = std::fs::read(dirs[0].path().join(n)).unwrap();
        let b = std::fs::read(dirs[1].path().join(n)).unwrap();
        assert!(a == b, "{n} differs between two compiles");
    }
}

#[test]
fn symbolic_dimensions_need_a_shape() {
    let model = data("digits_mlp_sklearn.onnx");
    assert_eq!(
        error_line_no_panic(&["compile", &model]),
        "error: cannot import {model}: symbolic dimensions left open: X[0] = ?; set them with \
         --shape NAME=D0,D1,... (e.g. --shape X=1,64)\n"
            .replace("{model}", &model)
    );
    let out = lumen(&["compile", &model, "--shape", "X=1,64"]);
    assert!(out.status.success());
    let line = error_line_no_panic(&["compile", &model, "--shape", "X=1,32"]);
    assert!(line.contains("dimension 1 is 64 in the model, the shape given says 32"), "{line}");
}

#[test]
fn bad_files_are_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"\x08\x07 this is not protobuf \xff\xff").unwrap();
    let g = garbage.display().to_string();
    let line = error_line_no_panic(&["compile", &g]);
    assert!(line.contains("not an ONNX model"), "{line}");
    let line = error_line_no_panic(&["compile", "/no/such/model.onnx"]);
    assert!(line.starts_with("error: cannot read /no/such/model.onnx"), "{line}");

    let model = data("bert_tiny.onnx");
    let inputs = data("bert_tiny.inputs.safetensors");
    // No --inputs: the first graph input is named.
    let line = error_line_no_panic(&["run", &model]);
    assert!(line.contains("`input_ids`"), "{line}");
    assert!(line.contains("--inputs"), "{line}");
    // The other fixture's inputs: a tensor that is no graph input of this model.
    let wrong = data("digits_vit.inputs.safetensors");
    let line = error_line_no_panic(&["run", &model, "--inputs", &wrong]);
    assert!(line.contains("tensor `x`, which the model does not have"), "{line}");
    assert!(line.contains("input_ids, attention_mask"), "{line}");
    // Expected outputs of another model.
    let expect = data("digits_vit.expect.safetensors");
    let line = error_line_no_panic(&["run", &model, "--inputs", &inputs, "--expect", &expect]);
    assert!(line.contains("the expect file has a tensor `logits`"), "{line}");
    // A reference that is off fails the check after the report.
    let out = lumen(&[
        "run",
        &model,
        "--inputs",
        &inputs,
        "--expect",
        &data("bert_tiny.expect.safetensors"),
        "--tolerance",
        "0",
        "--no-search",
        "--runs",
        "1",
    ]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: check failed: max abs error"), "{stderr}");
}

#[test]
fn onnx_flags_are_usage_errors_elsewhere() {
    let digits = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/digits_mlp.safetensors");
    let d = digits.display().to_string();
    let inputs = data("bert_tiny.inputs.safetensors");
    let out = lumen(&["run", &d, "--inputs", &inputs]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--inputs applies to ONNX models"), "{stderr}");
    let out = lumen(&["compile", "mlp", "--shape", "x=1,2"]);
    assert_eq!(out.status.code(), Some(2));
    let out = lumen(&["compile", &data("bert_tiny.onnx"), "--batch", "4"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--batch applies to the built-in programs"), "{stderr}");
    let out = lumen(&["compile", &data("bert_tiny.onnx"), "--shape", "input_ids"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_failed_import_writes_no_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    error_line_no_panic(&["compile", &data("digits_mlp_sklearn.onnx"), "--dump-dir", &d]);
    assert!(entries(dir.path()).is_empty());
}

/// `compare --profile` feeds seeded random floats and zero token ids (a row every table has).
#[test]
fn compare_profiles_a_model_with_token_ids() {
    let v = json_of(lumen(&["compare", &data("bert_int_mask.onnx"), "--profile", "--json"]));
    assert_eq!(v["measured"]["runtime"], "cpu", "{v}");
    assert!(v["measured"]["fastest"].as_str().is_some(), "{v}");
}

/// A bad position found at run time names the ONNX node and op, not an internal buffer, with
/// or without the search (whose "no candidate ran: unfused: ..." it replaces: the positions are
/// data, every candidate fails on them). The model is data/make_onnx_error_fixtures.py's.
#[test]
fn a_run_time_index_error_names_the_onnx_node() {
    let (model, inputs) = (data("unpool_index.onnx"), data("unpool_index.inputs.safetensors"));
    let want = "error: node `y` (MaxUnpool): scatter_elements: id 16 at position 1 of \
                `y.positions` is out of range for an axis of length 16 (a negative position of \
                I shows as the output's size)\n";
    for extra in [&[][..], &["--no-search"], &["--json"], &["--no-fuse", "--runs", "1"]] {
        let mut args = vec!["run", &model, "--inputs", &inputs];
        args.extend_from_slice(extra);
        assert_eq!(error_line_no_panic(&args), want, "{extra:?}");
    }
}

/// Graph inputs declared with no shape take the given tensors' ([2, 3] here), not rank 0.
#[test]
fn inputs_without_a_declared_shape_take_the_given_shape() {
    let v = run_fixture("shapeless_add", &["--no-search", "--runs", "1"]);
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["max_abs_err"].as_f64(), Some(0.0), "{v}");
}

/// A reference of another dtype than the output's is blamed on the --expect file, not on
/// loading the model.
#[test]
fn an_expect_file_of_another_dtype_names_the_file_and_both_types() {
    let (model, inputs) = (data("unpool_index.onnx"), data("unpool_index.inputs.safetensors"));
    let expect = data("unpool_index.i64.safetensors");
    let line = error_line_no_panic(&["run", &model, "--inputs", &inputs, "--expect", &expect]);
    assert_eq!(
        line,
        format!(
            "error: the --expect file {expect} holds output `y` as i64; the model computes it \
             as f32\n"
        )
    );
}

/// onnxruntime's reference of an integer output may be narrower than the i64 lumen computes
/// (a uint8 label): compared by value. A bool reference of that output is refused naming the
/// file's type (it was called f32, the type lumen reads bools as).
#[test]
fn integer_references_of_any_width_compare_by_value() {
    use safetensors::{Dtype, tensor::TensorView};
    let name = "sklearn_logreg_nozipmap";
    let (model, inputs) =
        (data(&format!("{name}.onnx")), data(&format!("{name}.inputs.safetensors")));
    let bytes = std::fs::read(data(&format!("{name}.expect.safetensors"))).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let label = st.tensor("label").unwrap();
    assert_eq!(label.dtype(), Dtype::I64);
    let narrow: Vec<u8> = label
        .data()
        .chunks_exact(8)
        .map(|c| u8::try_from(i64::from_le_bytes(c.try_into().unwrap())).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for (dtype, file) in [(Dtype::U8, "u8.safetensors"), (Dtype::BOOL, "bool.safetensors")] {
        let values: Vec<u8> = if dtype == Dtype::BOOL {
            narrow.iter().map(|&v| u8::from(v != 0)).collect()
        } else {
            narrow.clone()
        };
        let view = TensorView::new(dtype, label.shape().to_vec(), &values).unwrap();
        let path = dir.path().join(file);
        safetensors::serialize_to_file([("label", view)], None, &path).unwrap();
        let expect = path.display().to_string();
        let args =
            ["run", &model, "--inputs", &inputs, "--expect", &expect, "--no-search", "--runs", "1"];
        if dtype == Dtype::U8 {
            let mut with_json = args.to_vec();
            with_json.push("--json");
            let v = json_of(lumen(&with_json));
            assert_eq!(v["passed"], true, "{v}");
            assert_eq!(v["max_abs_err"].as_f64(), Some(0.0), "{v}");
        } else {
            assert_eq!(
                error_line_no_panic(&args),
                format!(
                    "error: the --expect file {expect} holds output `label` as bool; the model \
                     computes it as i64\n"
                )
            );
        }
    }
}

/// `--profile` times every LLIR node: the JSON lists each node once, in LLIR order, with the
/// class its time is summed under; the classes hold every node; the text prints the table.
#[test]
fn profile_times_every_node() {
    let v = run_fixture("mobilenet_tiny_op17", &["--profile", "--runs", "3", "--no-search"]);
    assert_eq!(v["passed"], true);
    let p = &v["profile"];
    assert_eq!(p["executes"], 3);
    let nodes = p["nodes"].as_array().expect("profile.nodes");
    assert_eq!(nodes.len() as u64, v["nodes"].as_u64().unwrap());
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["node"], i);
        assert!(n["ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{n}");
    }
    let classes = p["classes"].as_array().expect("profile.classes");
    let counted: u64 = classes.iter().map(|c| c["nodes"].as_u64().unwrap()).sum();
    assert_eq!(counted, nodes.len() as u64);
    let names: Vec<&str> = classes.iter().map(|c| c["class"].as_str().unwrap()).collect();
    assert!(names.iter().any(|c| c.starts_with("conv ") && c.ends_with(" depthwise")), "{names:?}");
    // Without --profile: null, and nothing is timed.
    assert_eq!(
        run_fixture("mobilenet_tiny_op17", &["--runs", "1", "--no-search"])["profile"],
        Value::Null
    );
    let (model, inputs) =
        (data("mobilenet_tiny_op17.onnx"), data("mobilenet_tiny_op17.inputs.safetensors"));
    let out = lumen(&["run", &model, "--inputs", &inputs, "--profile", "--runs", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("\nprofile    ") && text.contains("slowest "), "{text}");
}
