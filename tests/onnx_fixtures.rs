//! The ONNX fixtures (data/onnx/, made by data/make_onnx_fixtures.py and
//! data/make_cnn_fixtures.py with skl2onnx, torch.onnx and transformers, expected outputs from
//! onnxruntime): each imports, compiles fused and unfused, runs on the CPU runtime with its
//! memory plan verified at prepare (no two live buffers share bytes) and every buffer poisoned
//! with NaN after its last use, and matches onnxruntime within 1e-4 x max(1, |reference|).

use std::path::{Path, PathBuf};

use lumen_compiler::CompileOptions;
use lumen_onnx::{ImportOptions, import};
use lumen_runtime::{CpuOptions, CpuRuntime, Runtime, Tensors};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/onnx").join(name)
}

fn read_tensors(path: &Path) -> Tensors {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    lumen::model::onnx::read_tensors(&bytes).unwrap()
}

fn check(name: &str) {
    let bytes = std::fs::read(data(&format!("{name}.onnx"))).unwrap();
    let given = read_tensors(&data(&format!("{name}.inputs.safetensors")));
    // Symbolic dimensions (skl2onnx's batch) take the given inputs' shapes.
    let shapes = given.iter().map(|(k, v)| (k.clone(), v.shape().to_vec())).collect();
    let imported = import(&bytes, &ImportOptions { shapes, ..Default::default() })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let expect = read_tensors(&data(&format!("{name}.expect.safetensors")));
    let inputs = imported.bind_inputs(&given).unwrap();
    for fuse in [false, true] {
        let options = CompileOptions { fuse, name: name.to_string(), ..Default::default() };
        let program = imported.graph.compile(&options).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Memory debug: the planner's independent verify at prepare, NaN after last use.
        let runtime = CpuRuntime::new(CpuOptions { memory_debug: true, ..CpuOptions::default() });
        let mut prepared = runtime
            .prepare(&program, &imported.weights)
            .unwrap_or_else(|e| panic!("{name} fuse={fuse}: {e}"));
        let out = prepared.execute(&inputs).unwrap();
        for (onnx_name, lumen_name) in &imported.outputs {
            let (got, want) = (&out[lumen_name], &expect[onnx_name]);
            assert_eq!(got.shape(), want.shape(), "{name} {onnx_name}");
            // Integer outputs (labels) agree exactly.
            if want.dtype() != lumen_compiler::DType::F32 {
                assert_eq!(got.dtype(), want.dtype(), "{name} {onnx_name}");
                assert_eq!(got.index_values(), want.index_values(), "{name} {onnx_name}");
                continue;
            }
            let err = got
                .data()
                .iter()
                .zip(want.data())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            println!(
                "{name} fuse={fuse} {onnx_name}: max |lumen - onnxruntime| = {err:.3e}, {} launches",
                program.figures.launches
            );
            // The bound: 1e-4 x max(1, |reference|) for every element.
            let worst = got
                .data()
                .iter()
                .zip(want.data())
                .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
                .fold(0.0f32, f32::max);
            assert!(worst <= 1e-4, "{name} {onnx_name}: {err:e} (relative {worst:e})");
        }
    }
}

#[test]
fn sklearn_mlp_matches_onnxruntime() {
    check("digits_mlp_sklearn");
}

#[test]
fn digits_vit_matches_onnxruntime() {
    check("digits_vit");
}

#[test]
fn bert_tiny_matches_onnxruntime() {
    check("bert_tiny");
}

/// An int64 attention mask read by Equal/Where and cast to float: the program reads an f32
/// twin of the mask, fed the same values.
#[test]
fn bert_int_mask_matches_onnxruntime() {
    check("bert_int_mask");
    let bytes = std::fs::read(data("bert_int_mask.onnx")).unwrap();
    let imported = import(&bytes, &ImportOptions::default()).unwrap();
    let twins: Vec<(&str, &str)> = imported
        .inputs
        .iter()
        .filter(|i| i.cast_from.is_some())
        .map(|i| (i.onnx_name.as_str(), i.name.as_str()))
        .collect();
    assert_eq!(twins, [("attention_mask", "attention_mask.f32")]);
}

/// The imported scikit-learn MLP's fused LLIR: two RELU_BIAS matmuls and a BIAS one (the
/// Gemm + Add + Relu chains), then the softmax as max, sub, exp, sum, div over broadcast views.
#[test]
fn sklearn_mlp_fused_llir_snapshot() {
    let bytes = std::fs::read(data("digits_mlp_sklearn.onnx")).unwrap();
    let shapes = [("X".to_string(), vec![450, 64])].into_iter().collect();
    let imported = import(&bytes, &ImportOptions { shapes, ..Default::default() }).unwrap();
    let options =
        CompileOptions { fuse: true, name: "digits_mlp_sklearn".into(), ..Default::default() };
    let program = imported.graph.compile(&options).unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        insta::assert_snapshot!(
            "onnx_sklearn_mlp_fused_llir",
            lumen_compiler::dump::llir_text(&program)
        );
    });
}

/// Convolution networks from torch.onnx, each at an old and a new opset: ResNet (BatchNorm
/// folded by the exporter at 11, kept at 17 and folded by lumen), MobileNet (depthwise, ReLU6
/// as Clip, hard swish as x * HardSigmoid(x) at 11 and HardSwish at 17, squeeze-excite), a
/// YOLO-style detector (SiLU, Split, SPPF max pools, nearest Resize, Concat) and an
/// encoder-decoder (ConvTranspose, bilinear Resize in both corner modes, reflect Pad, a
/// ceil-mode AveragePool, dilation).
#[test]
fn convolution_networks_match_onnxruntime() {
    for name in [
        "resnet_tiny_op11",
        "resnet_tiny_op17",
        "mobilenet_tiny_op11",
        "mobilenet_tiny_op17",
        "yolo_tiny_op17",
        "segment_tiny_op13",
    ] {
        check(name);
    }
}

/// Every BatchNormalization of the opset-17 ResNet folds into the convolution before it, and
/// every residual add and ReLU into a convolution's epilogue: the fused program has one launch
/// per convolution, plus the stem's max pool, the average pool and the classifier.
#[test]
fn resnet_fuses_batch_norms_and_residual_blocks() {
    let bytes = std::fs::read(data("resnet_tiny_op17.onnx")).unwrap();
    let imported = import(&bytes, &ImportOptions::default()).unwrap();
    let program = imported.graph.compile(&CompileOptions::default()).unwrap();
    let text = lumen_compiler::dump::llir_text(&program);
    let convs = text.lines().filter(|l| l.contains(" conv n=")).count();
    let residual = text.lines().filter(|l| l.contains("epilogue=bias+residual+relu")).count();
    assert_eq!((convs, residual), (11, 4), "{text}");
    assert!(!text.contains(" add len="), "an add was left unfused:\n{text}");
}

/// A Hugging Face BertModel exported with int64 input ids, attention mask and token types,
/// mean-pooled over the mask as sentence-transformers does.
#[test]
fn hugging_face_bert_matches_onnxruntime() {
    check("bert_hf_op17");
}

/// scikit-learn pipelines converted by skl2onnx: a LogisticRegression as `ai.onnx.ml`
/// LinearClassifier (softmax scores and an int64 label, checked exactly) with zipmap off and
/// with the default options (whose ZipMap output, a sequence of maps, is left out with a
/// reason), and a Scaler / Normalizer / LinearRegressor pipeline.
#[test]
fn scikit_learn_pipelines_match_onnxruntime() {
    for name in ["sklearn_logreg_nozipmap", "sklearn_logreg_default", "sklearn_pipeline"] {
        check(name);
    }
    let bytes = std::fs::read(data("sklearn_logreg_default.onnx")).unwrap();
    let shapes = [("X".to_string(), vec![50, 64])].into_iter().collect();
    let imported = import(&bytes, &ImportOptions { shapes, ..Default::default() }).unwrap();
    assert_eq!(imported.outputs, [("output_label".to_string(), "output_label".to_string())]);
    assert_eq!(imported.skipped.len(), 1);
    assert!(imported.skipped[0].1.contains("zipmap=False"), "{:?}", imported.skipped);
    assert_eq!(imported.output_dtype("output_label"), Some(lumen_compiler::DType::I64));
}

/// An audio model from torch.onnx at opset 17: a Conv1d front end, a batch-first LSTM and a
/// bidirectional GRU (`linear_before_reset`, initial states made by an Expand of zeros), then a
/// Linear; the recurrent layers are unrolled over the 100 frames.
#[test]
fn recurrent_audio_model_matches_onnxruntime() {
    check("audio_lstm_op17");
}

/// One decoder step of a transformers LlamaForCausalLM exported by torch.onnx with its KV cache
/// as graph inputs and outputs (past keys/values of 5 positions in, 3 new tokens, the cache of
/// 8 out): rotary tables by Sin and Cos, RMSNorm, grouped-query heads, the causal mask built
/// from Range and LessOrEqual. The step-by-step ONNX route of text generation.
#[test]
fn llama_decoder_step_with_kv_cache_matches_onnxruntime() {
    check("llama_step_op17");
}
