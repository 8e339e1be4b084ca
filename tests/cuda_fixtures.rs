//! The ONNX fixtures (data/onnx/, the models tests/onnx_fixtures.rs checks against
//! onnxruntime) through the CUDA runtime's launch plans, emulated on the host
//! (`lumen_runtime::cuda::emulate`, feature `cuda`): every fixture that imports has a CUDA
//! form for every node (nothing refused: casts and argmax included) fused and unfused, and
//! the emulated plans match the CPU runtime (integer outputs exactly, f32 outputs within
//! 1e-4 x max(1, |cpu|)). No GPU needed.
#![cfg(feature = "cuda")]

use std::path::{Path, PathBuf};

use lumen_compiler::{CompileOptions, DType, LlirOp};
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{CpuRuntime, Runtime, Tensors};

/// The fixtures tests/onnx_fixtures.rs checks: each must import. Other `.onnx` files found in
/// data/onnx/ are run too when they import (and named when they do not).
const FIXTURES: &[&str] = &[
    "digits_mlp_sklearn",
    "digits_vit",
    "bert_tiny",
    "bert_int_mask",
    "resnet_tiny_op11",
    "resnet_tiny_op17",
    "mobilenet_tiny_op11",
    "mobilenet_tiny_op17",
    "yolo_tiny_op17",
    "segment_tiny_op13",
    "bert_hf_op17",
    "sklearn_logreg_nozipmap",
    "sklearn_logreg_default",
    "sklearn_pipeline",
];

/// data/onnx/ of the checkout, or of `LUMEN_DATA_DIR` where scripts/gpu-check.sh put data/ on
/// a machine without the checkout.
fn dir() -> PathBuf {
    std::env::var_os("LUMEN_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data"))
        .join("onnx")
}

fn read_tensors(path: &Path) -> Tensors {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    lumen::model::onnx::read_tensors(&bytes).unwrap()
}

/// Every `.onnx` stem in data/onnx/, sorted.
fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("data/onnx")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let stem = path.file_stem()?.to_str()?.to_string();
            (path.extension()? == "onnx").then_some(stem)
        })
        .collect();
    names.sort();
    names
}

/// The largest `|emulated - cpu|` and `|emulated - cpu| / max(1, |cpu|)` over `name`'s f32
/// outputs; integer outputs must be identical (type, shape, values).
fn compare(what: &str, emulated: &Tensors, cpu: &Tensors) -> (f64, f64) {
    assert_eq!(emulated.keys().collect::<Vec<_>>(), cpu.keys().collect::<Vec<_>>(), "{what}");
    let (mut abs, mut rel) = (0.0f64, 0.0f64);
    for (name, want) in cpu {
        let got = &emulated[name];
        assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{what} {name}");
        if want.dtype() != DType::F32 {
            assert_eq!(got.index_values(), want.index_values(), "{what} {name}");
            continue;
        }
        for (i, (&g, &w)) in got.data().iter().zip(want.data()).enumerate() {
            if w.is_nan() {
                assert!(g.is_nan(), "{what} {name}[{i}]: {g} vs cpu NaN");
                continue;
            }
            let e = (f64::from(g) - f64::from(w)).abs();
            assert!(e.is_finite() || g == w, "{what} {name}[{i}]: {g} vs cpu {w}");
            if e.is_finite() {
                abs = abs.max(e);
                rel = rel.max(e / f64::from(w).abs().max(1.0));
            }
        }
    }
    (abs, rel)
}

#[test]
fn every_imported_onnx_fixture_runs_through_the_emulated_cuda_plans_like_the_cpu() {
    let names = fixture_names();
    for known in FIXTURES {
        assert!(names.iter().any(|n| n == known), "data/onnx/{known}.onnx is missing");
    }
    let mut ran = 0;
    for name in &names {
        let bytes = std::fs::read(dir().join(format!("{name}.onnx"))).unwrap();
        let given = read_tensors(&dir().join(format!("{name}.inputs.safetensors")));
        // Symbolic dimensions (skl2onnx's batch) take the given inputs' shapes.
        let shapes = given.iter().map(|(k, v)| (k.clone(), v.shape().to_vec())).collect();
        let imported = match import(&bytes, &ImportOptions { shapes, ..Default::default() }) {
            Ok(imported) => imported,
            Err(e) if !FIXTURES.contains(&name.as_str()) => {
                println!("{name}: not imported ({e}), not run");
                continue;
            }
            Err(e) => panic!("{name}: {e}"),
        };
        let inputs = imported.bind_inputs(&given).unwrap();
        for fuse in [false, true] {
            let options = CompileOptions { fuse, name: name.clone(), ..Default::default() };
            let program =
                imported.graph.compile(&options).unwrap_or_else(|e| panic!("{name}: {e}"));
            let t = std::time::Instant::now();
            let emulated =
                lumen_runtime::cuda::emulate::emulate(&program, &imported.weights, &inputs);
            let seconds = t.elapsed().as_secs_f64();
            let mut cpu = CpuRuntime::default().prepare(&program, &imported.weights).unwrap();
            // A fixture of bad input (data/make_onnx_error_fixtures.py: a position out of
            // range) must be refused by both, with the same message.
            let (emulated, cpu) = match (emulated, cpu.execute(&inputs)) {
                (Ok(e), Ok(c)) => (e, c),
                (Err(e), Err(c)) => {
                    assert_eq!(e.to_string(), c.to_string(), "{}", program.label);
                    println!("{}: refused by both at run time: {c}", program.label);
                    continue;
                }
                (e, c) => panic!("{}: emulated {e:?}, cpu {c:?}", program.label),
            };
            let (abs, rel) = compare(&program.label, &emulated, &cpu);
            let integers = cpu.values().filter(|t| t.dtype() != DType::F32).count();
            let count =
                |f: fn(&LlirOp) -> bool| program.llir.nodes.iter().filter(|n| f(&n.op)).count();
            println!(
                "{}: emulated cuda plans vs cpu: max |diff| {abs:.2e} (relative {rel:.2e}), \
                 {integers} integer outputs identical; {} nodes ({} cast, {} arg), {seconds:.1} s",
                program.label,
                program.llir.nodes.len(),
                count(|op| matches!(op, LlirOp::Cast { .. })),
                count(|op| matches!(op, LlirOp::Arg { .. })),
            );
            assert!(rel <= 1e-4, "{}: relative difference {rel:e}", program.label);
        }
        ran += 1;
    }
    assert!(ran >= FIXTURES.len(), "{ran} fixtures ran");
}
