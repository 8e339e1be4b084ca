//! End-to-end: `lumen run` on the digits MLP (SPEC section 6) and on generated models, and its
//! errors. Also the digits MLP with every layer fused by hand, through the library.

use std::path::{Path, PathBuf};
use std::process::Command;

use lumen::model::{self, MlpModel};
use lumen_compiler::{CompileOptions, DType, Epilogue, HlirOp, SourceLocation, compile_hlir};
use lumen_runtime::{CpuRuntime, Runtime};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, serialize};
use serde_json::Value;

mod common;

use common::{error_line_of, json_of, lumen_no_cuda_env as lumen, ok_env};

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_mlp.safetensors");

fn json(args: &[&str]) -> Value {
    json_of(lumen(args))
}

/// Stderr of a failing run: exactly one line starting `error: `, not a panic (trimmed).
fn error_line(args: &[&str]) -> String {
    let stderr = error_line_of(args, lumen(args));
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr.trim_end().to_string()
}

fn digits() -> MlpModel {
    model::load_mlp(Path::new(DIGITS)).expect("digits file")
}

/// scikit-learn's accuracy, from the file's metadata and from its own logits' argmax.
fn sklearn_accuracy(m: &MlpModel) -> f64 {
    let meta: f64 = m.metadata["sklearn_accuracy"].parse().unwrap();
    let (correct, from_logits) =
        model::accuracy(m.logits.as_ref().unwrap(), m.labels.as_ref().unwrap());
    assert_eq!(correct, 439);
    assert!((meta - from_logits).abs() < 1e-6, "{meta} vs {from_logits}");
    from_logits
}

#[test]
fn digits_file_holds_the_documented_tensors() {
    let m = digits();
    assert_eq!(m.widths(), vec![64, 128, 64, 10]);
    assert_eq!(m.batch(), 450);
    assert_eq!(m.labels.as_ref().unwrap().len(), 450);
    assert_eq!(m.logits.as_ref().unwrap().shape(), &[450, 10]);
    assert!(m.x.data().iter().all(|v| (0.0..=1.0).contains(v)), "pixels / 16 lie in [0, 1]");
    let mut per_class = [0usize; 10];
    for &y in m.labels.as_ref().unwrap() {
        per_class[usize::try_from(y).unwrap()] += 1;
    }
    // Stratified 25% of the class sizes [178, 182, 177, 183, 181, 182, 181, 179, 174, 180].
    assert_eq!(per_class, [45, 46, 44, 46, 45, 46, 45, 45, 43, 45]);
    assert_eq!(m.metadata["scikit_learn"], "1.9.1");
}

#[test]
fn digits_json_matches_scikit_learn() {
    let want = sklearn_accuracy(&digits());
    let v = json(&["run", DIGITS, "--no-fuse", "--json", "--runs", "3"]);
    // JSON carries the f64 to within an ulp; `correct` is exact.
    assert!((v["accuracy"].as_f64().unwrap() - want).abs() < 1e-15);
    assert_eq!(v["correct"], 439);
    assert_eq!(v["samples"], 450);
    assert_eq!(v["sklearn_accuracy"].as_f64().unwrap(), 0.975556);
    let err = v["max_abs_err"].as_f64().unwrap();
    assert!(err <= 1e-4, "max abs error {err}");
    assert_eq!(v["within_tolerance"], true);
    assert_eq!(v["runtime"], "cpu");
    assert_eq!(v["label"], "digits_mlp-unfused");
    assert_eq!(v["fused"], false);
    assert_eq!(v["widths"], serde_json::json!([64, 128, 64, 10]));
    assert_eq!(v["repeat_identical"], true);
    assert_eq!(v["runs"], 3);
    // upload, 3 x (matmul, bias add), 2 relu, readback.
    assert_eq!(v["nodes"], 10);
    assert_eq!(v["launches"], 8);
    assert_eq!(
        v["flops"],
        2 * 450 * (64 * 128 + 128 * 64 + 64 * 10) + 2 * 450 * (128 + 64) + 450 * 10
    );
    let (slab, naive, lb) = (
        v["slab_bytes"].as_u64().unwrap(),
        v["naive_bytes"].as_u64().unwrap(),
        v["lower_bound"].as_u64().unwrap(),
    );
    assert!(lb <= slab && slab < naive, "{lb} <= {slab} < {naive}");
    let phases = v["phases"].as_object().unwrap();
    assert_eq!(
        phases.keys().collect::<Vec<_>>(),
        ["graph_compile", "search", "prepare", "execute"]
    );
    assert_eq!(phases["execute"]["runs"], 3);
    assert_eq!(phases["graph_compile"]["runs"], 1);
    let shares: f64 = phases.values().map(|p| p["share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9);
    assert!(v["gflops"].as_f64().unwrap() > 0.0);
    assert!(v["fraction_of_peak"].as_f64().unwrap() > 0.0);
}

#[test]
fn digits_fused_matches_scikit_learn() {
    let v = json(&["run", DIGITS, "--fuse", "--json", "--runs", "2"]);
    assert_eq!(v["label"], "digits_mlp-fused");
    assert_eq!(v["fused"], true);
    assert_eq!(v["correct"], 439);
    assert!((v["accuracy"].as_f64().unwrap() - sklearn_accuracy(&digits())).abs() < 1e-15);
    let err = v["max_abs_err"].as_f64().unwrap();
    assert!(err <= 1e-4, "max abs error {err}");
    assert_eq!(v["repeat_identical"], true);
}

#[test]
fn digits_text_says_what_it_measured() {
    let out = lumen(&["run", DIGITS]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}: {text}"))
    };
    assert!(line("model ").ends_with("MLP 64 -> 128 -> 64 -> 10 (relu between layers), batch 450"));
    assert_eq!(line("accuracy "), "accuracy   97.56% (439/450) against y (scikit-learn: 97.56%)");
    assert!(line("max error ").ends_with("against the file's logits (within 1e-4)"));
    assert!(line("plan ").contains(" B (no reuse), lower bound "));
    assert!(line("repeats ").starts_with("repeats    10 executes, outputs bit-identical"));
    for phase in ["graph_compile ", "search ", "prepare ", "execute "] {
        line(phase);
    }
    // The unit follows the figure (a loaded debug build may reach MFLOP/s only).
    assert!(line("execute: ").contains("FLOP/s achieved"));
    assert!(line("execute: ").contains(" FLOP in a median "));
    assert!(line("peak ").contains("GFLOP/s = "));
}

#[test]
fn the_search_line_and_chosen_by_say_what_chose_the_program() {
    // (flags, search line, chosen_by, label): --fuse / --no-fuse win over --no-search, in
    // either order; --fuse --no-fuse is the last one given.
    let cases: [(&[&str], &str, &str, &str); 6] = [
        (
            &["--no-search", "--no-fuse"],
            "search     not run (--no-fuse): the unfused program, as asked",
            "--no-fuse",
            "digits_mlp-unfused",
        ),
        (
            &["--no-fuse", "--no-search"],
            "search     not run (--no-fuse): the unfused program, as asked",
            "--no-fuse",
            "digits_mlp-unfused",
        ),
        (
            &["--no-search", "--fuse"],
            "search     not run (--fuse): the fused program, as asked",
            "--fuse",
            "digits_mlp-fused",
        ),
        (
            &["--fuse", "--no-fuse"],
            "search     not run (--no-fuse): the unfused program, as asked",
            "--no-fuse",
            "digits_mlp-unfused",
        ),
        (
            &["--no-fuse", "--fuse"],
            "search     not run (--fuse): the fused program, as asked",
            "--fuse",
            "digits_mlp-fused",
        ),
        (
            &["--no-search"],
            "search     not run (--no-search): the cost model's pick among the fusion candidates",
            "cost_model",
            "digits_mlp-fused",
        ),
    ];
    for (flags, search_line, chosen_by, label) in cases {
        let mut args = vec!["run", DIGITS, "--runs", "1"];
        args.extend_from_slice(flags);
        let out = lumen(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text.lines().find(|l| l.starts_with("search     ")).unwrap();
        assert_eq!(line, search_line, "{flags:?}");
        assert!(text.contains(&format!("program    {label} on cpu")), "{flags:?}: {text}");

        args.push("--json");
        let v = json(&args);
        assert_eq!(v["chosen_by"], chosen_by, "{flags:?}");
        assert_eq!(v["label"], label, "{flags:?}");
        assert_eq!(v["fused"], label.ends_with("-fused"), "{flags:?}");
        assert_eq!(v["searched"], false, "{flags:?}");
        assert_eq!(v["candidates"], Value::Null, "{flags:?}");
    }
    let v = json(&["run", DIGITS, "--runs", "1", "--trials", "1", "--json"]);
    assert_eq!(v["chosen_by"], "search");
    assert_eq!(v["searched"], true);
    let selected: Vec<&Value> =
        v["candidates"].as_array().unwrap().iter().filter(|c| c["selected"] == true).collect();
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0]["program_label"], v["label"]);
}

#[test]
fn profile_and_memory_debug_lines() {
    let out = Command::new(env!("CARGO_BIN_EXE_lumen"))
        .args(["run", DIGITS, "--no-fuse", "--runs", "2", "--json"])
        .env("LUMINAL_CUDA_PROFILE_RECAPTURE", "1")
        .env("LUMINAL_CUDA_MEMORY_DEBUG", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let profiles: Vec<&str> =
        stderr.lines().filter(|l| l.starts_with("CPU_EXEC_PROFILE ")).collect();
    assert_eq!(profiles.len(), 2, "{stderr}");
    assert!(profiles[0].contains(" launches=8 "), "{}", profiles[0]);
    let plans: Vec<&str> = stderr.lines().filter(|l| l.starts_with("CPU_MEMORY_PLAN ")).collect();
    assert_eq!(plans.len(), 1, "{stderr}");
    // x, 3 x (w, b), 3 x (matmul out, bias add out), 2 relu outs: compiled for the CPU, the
    // matmuls have no cuBLASLt workspace.
    assert!(plans[0].contains(" buffers=15 "), "{}", plans[0]);
    assert_eq!(stderr.lines().filter(|l| l.starts_with("CPU_MEMORY_BUFFER ")).count(), 15);
    // NaN poisoning changes nothing.
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["correct"], 439);
    assert!(v["max_abs_err"].as_f64().unwrap() <= 1e-4);
}

#[test]
fn digits_with_every_layer_fused_by_hand() {
    // Until the e-graph fusion lands, build the fused program directly: RELU_BIAS on the
    // hidden layers, BIAS on the last. Same answers as scikit-learn.
    let m = digits();
    let widths = m.widths();
    let mut hlir = lumen_compiler::Hlir::new();
    let here = SourceLocation::caller();
    let mut h = hlir.add_op(
        HlirOp::Input { name: "x".into(), shape: vec![m.batch(), widths[0]], dtype: DType::F32 },
        &[],
        here,
    );
    for (i, pair) in widths.windows(2).enumerate() {
        let w = hlir.add_op(
            HlirOp::Weight { name: format!("w{}", i + 1), shape: pair.to_vec(), dtype: DType::F32 },
            &[],
            here,
        );
        let b = hlir.add_op(
            HlirOp::Weight { name: format!("b{}", i + 1), shape: vec![pair[1]], dtype: DType::F32 },
            &[],
            here,
        );
        let epilogue = if i + 2 < widths.len() { Epilogue::ReluBias } else { Epilogue::Bias };
        h = hlir.add_op(HlirOp::Matmul { epilogue }, &[h, w, b], here);
    }
    hlir.add_op(HlirOp::Output { name: "y".into() }, &[h], here);
    let options = CompileOptions { fuse: true, ..CompileOptions::default() };
    let program = compile_hlir(&hlir, "digits", &options).unwrap();
    assert_eq!(program.figures.launches, 3);
    let mut prepared = CpuRuntime::default().prepare(&program, &m.weights()).unwrap();
    let out = prepared.execute(&m.inputs()).unwrap();
    let logits = &out["y"];
    let (correct, acc) = model::accuracy(logits, m.labels.as_ref().unwrap());
    assert_eq!(correct, 439);
    assert_eq!(acc, sklearn_accuracy(&m));
    let err = model::max_abs_err(logits, m.logits.as_ref().unwrap()).unwrap();
    assert!(err <= 1e-4, "{err}");
}

/// Writes a safetensors file of (name, dtype, shape, little-endian bytes).
fn write_model(dir: &Path, name: &str, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> PathBuf {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let bytes = serialize(views, None).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_tensor(
    name: &'static str,
    shape: &[usize],
    seed: u32,
) -> (&'static str, Dtype, Vec<usize>, Vec<u8>) {
    let n: usize = shape.iter().product();
    let data: Vec<f32> =
        (0..n as u32).map(|i| (((i * 37 + seed * 11) % 17) as f32 - 8.0) / 8.0).collect();
    (name, Dtype::F32, shape.to_vec(), f32s(&data))
}

#[test]
fn any_layer_count_and_a_single_output_column() {
    // Two layers 3 -> 5 -> 1: a binary classifier, predicted class = logit > 0.
    let dir = tempfile::tempdir().unwrap();
    let (b, w1, b1, w2, b2) = (6, [3, 5], [5], [5, 1], [1]);
    let mut tensors = vec![
        f32_tensor("x", &[b, 3], 1),
        f32_tensor("w1", &w1, 2),
        f32_tensor("b1", &b1, 3),
        f32_tensor("w2", &w2, 4),
        f32_tensor("b2", &b2, 5),
    ];
    let path = write_model(dir.path(), "tiny.safetensors", &tensors);
    let m = model::load_mlp(&path).unwrap();
    assert_eq!(m.widths(), vec![3, 5, 1]);
    // Reference logits by hand, in f64.
    let get = |name: &str| m.weights()[name].data().to_vec();
    let (w1v, b1v, w2v, b2v) = (get("w1"), get("b1"), get("w2"), get("b2"));
    let mut logits = Vec::new();
    for r in 0..b {
        let xr = &m.x.data()[r * 3..r * 3 + 3];
        let h: Vec<f64> = (0..5)
            .map(|j| {
                let s: f64 = (0..3).map(|p| f64::from(xr[p]) * f64::from(w1v[p * 5 + j])).sum();
                (s + f64::from(b1v[j])).max(0.0)
            })
            .collect();
        let o: f64 = (0..5).map(|j| h[j] * f64::from(w2v[j])).sum::<f64>() + f64::from(b2v[0]);
        logits.push(o as f32);
    }
    let labels: Vec<i64> = logits.iter().map(|&l| i64::from(l > 0.0)).collect();
    let mut flipped = labels.clone();
    flipped[0] = 1 - flipped[0];
    tensors.push(("logits", Dtype::F32, vec![b, 1], f32s(&logits)));
    tensors.push((
        "y",
        Dtype::I32,
        vec![b],
        flipped.iter().flat_map(|&y| (y as i32).to_le_bytes()).collect(),
    ));
    let path = write_model(dir.path(), "tiny.safetensors", &tensors);
    let v = json(&["run", path.to_str().unwrap(), "--json", "--runs", "1"]);
    assert_eq!(v["widths"], serde_json::json!([3, 5, 1]));
    assert_eq!(v["correct"], b as u64 - 1);
    assert!((v["accuracy"].as_f64().unwrap() - 5.0 / 6.0).abs() < 1e-12);
    assert!(v["max_abs_err"].as_f64().unwrap() < 1e-6);
    assert_eq!(v["sklearn_accuracy"], Value::Null);

    // Without labels and logits: still runs, reports nulls.
    let path = write_model(dir.path(), "bare.safetensors", &tensors[..5]);
    let v = json(&["run", path.to_str().unwrap(), "--json", "--runs", "1"]);
    assert_eq!(v["accuracy"], Value::Null);
    assert_eq!(v["max_abs_err"], Value::Null);
    let out = lumen(&["run", path.to_str().unwrap(), "--runs", "1"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("accuracy   n/a (the file has no labels y)"), "{text}");
}

#[test]
fn bad_files_are_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]| {
        write_model(dir.path(), name, tensors).to_str().unwrap().to_string()
    };
    let x = f32_tensor("x", &[2, 3], 1);
    let w1 = f32_tensor("w1", &[3, 4], 2);
    let b1 = f32_tensor("b1", &[4], 3);
    let w3 = f32_tensor("w3", &[4, 2], 4);
    let b3 = f32_tensor("b3", &[2], 5);

    let gap = p("gap.safetensors", &[x.clone(), w1.clone(), b1.clone(), w3.clone(), b3.clone()]);
    assert!(
        error_line(&["run", &gap])
            .ends_with("layers must be w1..wL with b1..bL: w3 is present but w2 is missing")
    );

    let nobias = p("nobias.safetensors", &[x.clone(), w1.clone()]);
    assert!(error_line(&["run", &nobias]).ends_with("w1 has no bias b1"));

    let f64_w = ("w1", Dtype::F64, vec![3, 4], vec![0u8; 96]);
    let dtype = p("dtype.safetensors", &[x.clone(), f64_w, b1.clone()]);
    assert!(error_line(&["run", &dtype]).ends_with("tensor `w1` has dtype F64, expected F32"));

    let w2 = f32_tensor("w2", &[5, 2], 6);
    let b2 = f32_tensor("b2", &[2], 7);
    let width = p("width.safetensors", &[x.clone(), w1.clone(), b1.clone(), w2, b2.clone()]);
    assert!(
        error_line(&["run", &width])
            .ends_with("tensor `w2` has shape [5, 2], expected [4, out] with out >= 1")
    );

    // w1 defines the input width: an x of another width is x's mismatch.
    let wide_x = f32_tensor("x", &[16, 5], 1);
    let w1_4x8 = f32_tensor("w1", &[4, 8], 2);
    let b1_8 = f32_tensor("b1", &[8], 3);
    let input = p("input.safetensors", &[wide_x, w1_4x8, b1_8]);
    assert_eq!(
        error_line(&["run", &input]),
        format!(
            "error: cannot load a model from {input}: tensor `x` has shape [16, 5], expected \
             [16, 4] (w1 is [4, 8])"
        )
    );
    // A w1 that is no matrix is still w1's error.
    let flat_w1 = p("flat.safetensors", &[x.clone(), f32_tensor("w1", &[12], 2), b1.clone()]);
    assert!(
        error_line(&["run", &flat_w1])
            .ends_with("tensor `w1` has shape [12], expected [3, out] with out >= 1")
    );

    let bad_y = ("y", Dtype::F32, vec![2], f32s(&[0.0, 1.0]));
    let labels = p("labels.safetensors", &[x.clone(), w1.clone(), b1.clone(), bad_y]);
    assert!(
        error_line(&["run", &labels]).ends_with("tensor `y` has dtype F32, expected I64 or I32")
    );

    let logits = p(
        "logits.safetensors",
        &[x.clone(), w1.clone(), b1.clone(), f32_tensor("logits", &[2, 3], 8)],
    );
    assert!(
        error_line(&["run", &logits])
            .ends_with("tensor `logits` has shape [2, 3], expected [2, 4]")
    );

    let nox = p("nox.safetensors", &[w1.clone(), b1.clone()]);
    assert!(
        error_line(&["run", &nox])
            .ends_with("the file has no tensor `x` (the input batch [B, in])")
    );

    let nolayers = p("nolayers.safetensors", std::slice::from_ref(&x));
    assert!(
        error_line(&["run", &nolayers])
            .ends_with("the file has no tensor `w1` (the first layer's weight)")
    );

    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"not a model").unwrap();
    assert!(error_line(&["run", garbage.to_str().unwrap()]).contains("not a safetensors file"));

    let missing = error_line(&["run", "/nonexistent/model.safetensors"]);
    assert!(missing.starts_with(
        "error: cannot load a model from /nonexistent/model.safetensors: cannot read"
    ));
}

#[test]
fn runtime_flag() {
    // With the `cuda` feature the reason is the missing driver or device (tests/cli_cuda.rs).
    #[cfg(not(feature = "cuda"))]
    assert_eq!(
        error_line(&["run", DIGITS, "--runtime", "cuda"]),
        "error: no CUDA device: lumen was built without the `cuda` feature"
    );
    let out = lumen(&["run", DIGITS, "--runtime", "tpu"]);
    assert_eq!(out.status.code(), Some(2), "usage error");
    let v = json(&["run", DIGITS, "--runtime", "cpu", "--no-fuse", "--json", "--runs", "1"]);
    assert_eq!(v["runtime"], "cpu");
}

/// The digits file with `edit` applied to its f32 tensors (name -> values) and its metadata,
/// written to `dir/name`.
fn edited_digits(
    dir: &Path,
    name: &str,
    edit: impl FnOnce(
        &mut std::collections::BTreeMap<String, Vec<f32>>,
        &mut std::collections::HashMap<String, String>,
    ),
) -> String {
    let bytes = std::fs::read(DIGITS).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut meta = safetensors::SafeTensors::read_metadata(&bytes)
        .unwrap()
        .1
        .metadata()
        .clone()
        .unwrap_or_default();
    let mut floats = std::collections::BTreeMap::new();
    let mut others = Vec::new();
    for (n, v) in st.tensors() {
        if v.dtype() == Dtype::F32 {
            let data: Vec<f32> = v
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            floats.insert(n.clone(), (v.shape().to_vec(), data));
        } else {
            others.push((n.clone(), v.dtype(), v.shape().to_vec(), v.data().to_vec()));
        }
    }
    let mut values: std::collections::BTreeMap<String, Vec<f32>> =
        floats.iter().map(|(n, (_, d))| (n.clone(), d.clone())).collect();
    edit(&mut values, &mut meta);
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = floats
        .iter()
        .map(|(n, (shape, _))| (n.clone(), Dtype::F32, shape.clone(), f32s(&values[n])))
        .collect();
    tensors.extend(others);
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, serialize(views, Some(meta)).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// A run whose check fails: the whole report on stdout, then exactly one `error: check
/// failed: ...` line on stderr and exit status 1.
fn failed_check(args: &[&str]) -> (String, String) {
    let out = lumen(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = error_line(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    assert!(stderr.starts_with("error: check failed: "), "{stderr}");
    (stdout, stderr)
}

#[test]
fn logits_off_by_one_fail_the_run_after_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let off = edited_digits(dir.path(), "off.safetensors", |t, _| {
        t.get_mut("logits").unwrap().iter_mut().for_each(|v| *v += 1.0);
    });
    let (text, err) = failed_check(&["run", &off, "--runs", "1", "--no-search"]);
    assert!(text.contains("max error  1.000e0 against the file's logits (EXCEEDS 1e-4)"), "{text}");
    assert!(
        text.contains("\ncheck      FAILED: max abs error 1.000e0 over the budget of 1e-4\n"),
        "{text}"
    );
    // The whole report came first: the phase table and the peak line too.
    assert!(text.lines().any(|l| l.starts_with("peak ")), "{text}");
    assert_eq!(err, "error: check failed: max abs error 1.000e0 over the budget of 1e-4");

    let (json_text, err) = failed_check(&["run", &off, "--runs", "1", "--no-search", "--json"]);
    let v: Value = serde_json::from_str(&json_text).expect("the JSON report is printed in full");
    assert_eq!(v["within_tolerance"], false);
    assert_eq!(v["passed"], false);
    assert_eq!(v["checks"]["max_abs_err"]["status"], "failed");
    assert_eq!(v["checks"]["accuracy"]["status"], "passed");
    assert_eq!(v["checks"]["finite"]["status"], "passed");
    assert!((v["max_abs_err"].as_f64().unwrap() - 1.0).abs() < 1e-5);
    assert!(err.contains("max abs error"), "{err}");

    // A wider budget passes the same file.
    let v = json(&["run", &off, "--runs", "1", "--no-search", "--json", "--tolerance", "1.5"]);
    assert_eq!((v["passed"].clone(), v["tolerance"].as_f64()), (Value::Bool(true), Some(1.5)));
    assert!(lumen(&["run", &off, "--tolerance", "-1"]).status.code() == Some(2));
}

#[test]
fn tolerances_and_byte_counts_read_as_the_tables_print_them() {
    // The digits logits differ from scikit-learn's by 7.6e-6: over a budget of 0.
    let (text, err) =
        failed_check(&["run", DIGITS, "--runs", "1", "--no-search", "--tolerance", "0"]);
    assert!(
        text.contains("\nmax error  7.629e-6 against the file's logits (EXCEEDS 0)\n"),
        "{text}"
    );
    assert_eq!(err, "error: check failed: max abs error 7.629e-6 over the budget of 0");
    let out = lumen(&["run", DIGITS, "--runs", "1", "--no-search", "--tolerance", "0.5"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" against the file's logits (within 0.5)\n"), "{text}");
    let v = json(&["run", DIGITS, "--runs", "1", "--no-search", "--tolerance", "1.5e-5", "--json"]);
    assert_eq!(v["checks"]["max_abs_err"]["detail"], "max abs error 7.629e-6 within 1.5e-5");

    // Nothing fits the budget: no report on stdout, the budget error with grouped digits.
    let args = ["run", DIGITS, "--memory-budget", "0", "--json"];
    let out = lumen(&args);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        error_line_of(&args, out),
        "error: every candidate's slab exceeds the memory budget of 0 bytes (smallest: 414,720 \
         bytes)\n"
    );
}

#[test]
fn nan_inputs_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let nan = edited_digits(dir.path(), "nan.safetensors", |t, _| {
        t.get_mut("x").unwrap()[0] = f32::NAN;
    });
    let (text, err) = failed_check(&["run", &nan, "--runs", "1", "--no-search", "--json"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["max_abs_err"], Value::Null);
    assert_eq!(v["within_tolerance"], false);
    assert_eq!(v["nan_outputs"], 10, "one input row of NaN gives one row of NaN logits");
    assert_eq!(v["checks"]["finite"]["status"], "failed");
    assert!(
        err.starts_with(
            "error: check failed: non-finite outputs: 10 NaN and 0 infinite of 4500 logits; max abs \
             error is NaN"
        ),
        "{err}"
    );
    // Searched, the NaN row is NaN in every candidate alike: they agree (NaN with NaN), the
    // search picks one, and the run fails on its check as without a search.
    let (text, err) = failed_check(&["run", &nan, "--runs", "1", "--trials", "1", "--json"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    let list = v["candidates"].as_array().unwrap();
    assert!(list.iter().all(|c| c["status"] == "measured" && c["max_abs_diff"] == 0.0), "{text}");
    assert!(err.starts_with("error: check failed: non-finite outputs: 10 NaN"), "{err}");
}

#[test]
fn accuracy_other_than_scikit_learns_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let claim = edited_digits(dir.path(), "claim.safetensors", |_, meta| {
        meta.insert("sklearn_accuracy".into(), "0.9".into());
    });
    let (text, err) = failed_check(&["run", &claim, "--runs", "1", "--no-search"]);
    assert!(
        text.contains("accuracy   97.56% (439/450) against y (scikit-learn: 90.00%)"),
        "{text}"
    );
    assert_eq!(
        err,
        "error: check failed: accuracy 97.56% (439/450) differs from the reference \
         (scikit-learn: 90.00%)"
    );
}

#[test]
fn labels_outside_the_classes_are_a_warning() {
    // Labels 99 and -1 can never be predicted by 10 logits: said in the text and the JSON.
    // Without metadata or logits there is no reference accuracy, so the run passes.
    let dir = tempfile::tempdir().unwrap();
    let mut tensors = vec![
        f32_tensor("x", &[3, 4], 1),
        f32_tensor("w1", &[4, 10], 2),
        f32_tensor("b1", &[10], 3),
    ];
    tensors.push((
        "y",
        Dtype::I64,
        vec![3],
        [0i64, 99, -1].iter().flat_map(|y| y.to_le_bytes()).collect(),
    ));
    let path = write_model(dir.path(), "labels.safetensors", &tensors);
    let p = path.to_str().unwrap();
    let out = lumen(&["run", p, "--runs", "1", "--no-search"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "\nwarning    2 of 3 labels lie outside the classes 0..=9 the outputs can predict \
             (first: y[1] = 99); they always count as wrong\n"
        ),
        "{text}"
    );
    let v = json(&["run", p, "--runs", "1", "--no-search", "--json"]);
    assert_eq!(v["labels_out_of_range"], 2);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 1);
    assert_eq!(v["checks"]["accuracy"]["status"], "skipped");
    assert_eq!(v["passed"], true);
}

#[test]
fn one_layer_one_launch_and_the_wording_of_each_choice() {
    let dir = tempfile::tempdir().unwrap();
    let tensors =
        [f32_tensor("x", &[2, 4], 1), f32_tensor("w1", &[4, 1], 2), f32_tensor("b1", &[1], 3)];
    let path = write_model(dir.path(), "one.safetensors", &tensors);
    let p = path.to_str().unwrap();
    let text = |args: &[&str]| {
        let out = lumen(args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let t = text(&["run", p, "--runs", "1", "--fuse"]);
    assert!(t.contains(": MLP 4 -> 1 (one layer, no relu), batch 2\n"), "{t}");
    assert!(t.contains("program    one-fused on cpu: 3 nodes, 1 launch, "), "{t}");
    assert!(t.contains("search     not run (--fuse): the fused program, as asked\n"), "{t}");
    assert!(t.contains("repeats    1 execute, "), "{t}");
    assert!(t.contains("accuracy   n/a (the file has no labels y): check skipped\n"), "{t}");
    assert!(t.contains("max error  n/a (the file has no logits): check skipped\n"), "{t}");
    assert!(
        t.contains(
            "\ncheck      passed: finite outputs; skipped: max abs error (no reference logits in \
             the file), accuracy (no labels y in the file)\n"
        ),
        "{t}"
    );
    let t = text(&["run", p, "--runs", "1", "--no-fuse"]);
    assert!(t.contains("search     not run (--no-fuse): the unfused program, as asked\n"), "{t}");
    assert!(t.contains("one-unfused on cpu: 4 nodes, 2 launches, "), "{t}");
    let t = text(&["run", p, "--runs", "1", "--no-search"]);
    assert!(
        t.contains(
            "search     not run (--no-search): the cost model's pick among the fusion candidates\n"
        ),
        "{t}"
    );
}

/// `lumen run` reuses in place by default: the unfused digits MLP's activations share bytes
/// with the relu/bias outputs written over them, its slab drops to the lower bound, and every
/// output figure is the same as without (`--no-in-place`, Luminal's plan exactly).
#[test]
fn in_place_reuse_is_on_in_run_and_changes_no_output() {
    let with = json(&["run", "data/digits_mlp.safetensors", "--no-fuse", "--json", "--runs", "2"]);
    let without = json(&[
        "run",
        "data/digits_mlp.safetensors",
        "--no-fuse",
        "--no-in-place",
        "--json",
        "--runs",
        "2",
    ]);
    assert_eq!(
        (with["slab_bytes"].as_u64(), with["lower_bound"].as_u64()),
        (Some(414_720), Some(414_720))
    );
    assert_eq!(without["slab_bytes"].as_u64(), Some(645_120));
    for key in ["max_abs_err", "accuracy", "correct", "repeat_identical", "passed"] {
        assert_eq!(with[key], without[key], "{key}");
    }
}

/// Every core the machine offers, as `--threads`' default resolves it.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `run` compiles for the runtime it runs on: on the CPU no cuBLASLt workspace, weights
/// resident (the digits MLP's slab is the same either way, and `w1`, which the plan would
/// otherwise reuse, is no longer uploaded on every execute); the JSON says so.
#[test]
fn run_compiles_for_the_cpu_with_resident_weights() {
    let v = json(&["run", DIGITS, "--no-fuse", "--json", "--runs", "2"]);
    assert_eq!(v["target"], "cpu");
    assert_eq!(v["workspace_bytes"], 0);
    assert_eq!(v["resident_weights"], true);
    // Nothing is uploaded per execute: the input x [450, 64] is read in place (nothing
    // writes into it), and no weight's bytes are reused.
    assert_eq!(v["upload_bytes_per_execute"], 0);
    assert_eq!(v["input_bytes_read_in_place"], 450 * 64 * 4);
    assert_eq!(v["weight_upload_bytes_per_execute"], 0);
    let plain =
        json(&["run", DIGITS, "--no-fuse", "--no-resident-weights", "--json", "--runs", "2"]);
    assert_eq!(plain["resident_weights"], false);
    // w1 [64, 128] shares its bytes with a later buffer: uploaded again every execute.
    assert_eq!(plain["weight_upload_bytes_per_execute"], 64 * 128 * 4);
    assert_eq!(plain["upload_bytes_per_execute"], 64 * 128 * 4);
    assert_eq!(plain["slab_bytes"], v["slab_bytes"]);
    for key in ["max_abs_err", "correct", "repeat_identical", "passed"] {
        assert_eq!(plain[key], v[key], "{key}");
    }
    let text =
        String::from_utf8(lumen(&["run", DIGITS, "--no-fuse", "--runs", "1"]).stdout).unwrap();
    assert!(
        text.contains("\nuploads    0 B per execute: inputs 0 B, weights 0 B; 115200 B of inputs read in place, not copied\n"),
        "{text}"
    );
    assert!(text.contains("\nweights    resident: every weight is uploaded once, at prepare (slab within the limit: half of MemAvailable, "), "{text}");
}

/// `--threads N` reaches the runtime and the report (text and JSON, the tuning key's identity
/// too); the default is every core; 0, a non-number and `--threads` with CUDA are usage errors.
#[test]
fn threads_flag_is_reported_and_checked() {
    let v = json(&["run", DIGITS, "--threads", "1", "--no-search", "--json", "--runs", "2"]);
    assert_eq!(v["threads"], 1);
    let v = json(&["run", DIGITS, "--no-search", "--json", "--runs", "2"]);
    assert_eq!(v["threads"], cores());
    let text = String::from_utf8(
        lumen(&["run", DIGITS, "--threads", "1", "--no-search", "--runs", "1"]).stdout,
    )
    .unwrap();
    assert!(text.contains("\nthreads    1 (--threads)\n"), "{text}");
    for (value, why) in [
        (
            "0",
            "0 threads cannot run anything: give at least 1 (or leave --threads out for every core)",
        ),
        ("two", "`two` is not a whole number of threads"),
        ("-1", "`-1` is not a whole number of threads"),
        ("100000", "at most 1024 threads"),
    ] {
        let flag = format!("--threads={value}");
        let out = lumen(&["run", DIGITS, &flag]);
        assert_eq!(out.status.code(), Some(2), "{value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("error: invalid value '{value}' for '--threads <N>': {why}")),
            "{err}"
        );
    }
    let out = lumen(&["run", DIGITS, "--runtime", "cuda", "--threads", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --threads applies to the cpu runtime, not cuda\n"
    );
    // A number too large for any integer type is still "too many", not "not a number".
    let out = lumen(&["run", DIGITS, "--threads=99999999999999999999999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(": at most 1024 threads"));
    // More threads than cores: honoured, with one warning line.
    let over = (cores() + 1).to_string();
    let out = lumen(&["run", DIGITS, "--threads", &over, "--no-search", "--json", "--runs", "2"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "warning: --threads {over} is more than the {} core(s) this process may use; the \
             workers will share them and an execute can be much slower\n",
            cores()
        )
    );
    let v = json_of(out);
    assert_eq!(v["threads"], cores() + 1);
    assert_eq!(v["workers_spin"], false);
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with(&format!("--threads {over} is more than"))),
        "{v}"
    );
    // How the workers wait: the tests' passive policy, and spinning where the team fits.
    let run2 = ["run", DIGITS, "--threads", "2", "--no-search", "--runs", "1"];
    let text = String::from_utf8(lumen(&run2).stdout).unwrap();
    assert!(
        text.contains(
            "\nthreads    2 (--threads), workers sleep between kernels (LUMEN_CPU_PASSIVE_WAIT)\n"
        ),
        "{text}"
    );
    let text = String::from_utf8(ok_env(&run2, &[("LUMEN_CPU_PASSIVE_WAIT", "0")]).stdout).unwrap();
    let words = if cores() >= 2 { "spin" } else { "sleep" };
    assert!(
        text.contains(&format!("\nthreads    2 (--threads), workers {words} between kernels")),
        "{text}"
    );
    // One execute compares nothing with nothing, and says so.
    let text = String::from_utf8(
        lumen(&["run", DIGITS, "--threads", "1", "--no-search", "--runs", "1"]).stdout,
    )
    .unwrap();
    assert!(
        text.contains("\nrepeats    1 execute, outputs not compared (one execute); "),
        "{text}"
    );
}

/// The achieved figure uses the median execute (the mean, which includes the cold first
/// execute, is reported beside it), and the peak is derived from this machine, with its basis.
#[test]
fn achieved_flops_use_the_median_and_the_peak_says_how_it_was_derived() {
    let v = json(&["run", DIGITS, "--no-search", "--json", "--runs", "5", "--threads", "1"]);
    let median = v["execute_seconds_median"].as_f64().unwrap();
    let mean = v["execute_seconds_mean"].as_f64().unwrap();
    assert!(median > 0.0 && mean > 0.0, "{median} {mean}");
    let flops = v["flops"].as_f64().unwrap();
    let achieved = v["achieved_flops"].as_f64().unwrap();
    assert!((achieved - flops / median).abs() <= 1e-6 * achieved, "{achieved} vs {flops}/{median}");
    assert!((v["gflops"].as_f64().unwrap() - achieved / 1e9).abs() < 1e-9);
    let peak = v["peak_flops"].as_f64().unwrap();
    assert!((v["fraction_of_peak"].as_f64().unwrap() - achieved / peak).abs() < 1e-12);
    // One thread: one core's peak, its factors in words.
    let basis = v["peak_basis"].as_str().unwrap();
    assert!(basis.starts_with("1 core x "), "{basis}");
    assert!(basis.contains(" GHz (") && basis.contains(" f32 lanes ("), "{basis}");
    assert!(basis.ends_with(" FLOP/cycle per core"), "{basis}");
    let all = json(&["run", DIGITS, "--no-search", "--json", "--runs", "1"]);
    let ratio = all["peak_flops"].as_f64().unwrap() / peak;
    assert!((ratio - cores() as f64).abs() < 1e-9, "peak scales with the cores used: {ratio}");
}

/// A built-in program's name where a model file goes is a usage error that points at
/// `compare --profile`, not "cannot read transformer: No such file or directory".
#[test]
fn a_builtin_program_name_is_not_a_model_file() {
    let out = lumen(&["run", "transformer"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: `transformer` is a built-in program, not a model file: `lumen run` runs a model \
         file (.safetensors or .onnx); `lumen compare transformer --profile` runs the built-in \
         program on this machine\n"
    );
}
