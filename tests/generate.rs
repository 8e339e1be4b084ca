//! Greedy generation with the tiny Llama of `data/make_tiny_llama.py` (trained with PyTorch,
//! saved by transformers' `save_pretrained`) against transformers' own `generate`: the same
//! new tokens and logits within 1e-4 x max(1, |reference|) for four prompts (1, 5, 12 and 16
//! tokens; the last with 32 new tokens fills the 48 positions of the bound), all from one
//! compiled decode step (and prefill step, in chunks of 1, 5 and 48 prompt tokens); one position past the bound is a clear error; the NaN-poisoned run (plan
//! verified, dead buffers NaN) gives the same bits.

use std::path::PathBuf;

use lumen::generate::{GenerateError, Generator};
use lumen::model::load_llama;
use lumen::onnx_decoder::OnnxDecoder;
use lumen_runtime::{CpuOptions, CpuRuntime, HostTensor, Runtime};
use safetensors::SafeTensors;

fn dir() -> PathBuf {
    std::env::var_os("LUMEN_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data"))
        .join("tiny_llama")
}

/// Prompt, new tokens and logits `[N, vocab]` of each reference prompt.
fn references() -> Vec<(Vec<i64>, Vec<i64>, HostTensor)> {
    let bytes = std::fs::read(dir().join("reference.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let ids = |name: &str| -> Vec<i64> {
        let t = st.tensor(name).unwrap();
        t.data().chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
    };
    (0..4)
        .map(|i| {
            let t = st.tensor(&format!("p{i}.logits")).unwrap();
            let values = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let logits = HostTensor::new(t.shape().to_vec(), values).unwrap();
            (ids(&format!("p{i}.prompt")), ids(&format!("p{i}.tokens")), logits)
        })
        .collect()
}

fn generator(options: CpuOptions, prefill_chunk: usize) -> Generator {
    let model = load_llama(&dir(), None).unwrap();
    let runtime = CpuRuntime::new(options);
    Generator::new(&model, &runtime as &dyn Runtime, prefill_chunk).unwrap()
}

#[test]
fn tokens_and_logits_match_transformers_generate() {
    // Prompts one token at a time, in chunks of 5 (prompt 12 and 16: full chunks and a padded
    // one) and in one padded chunk of the whole bound.
    for chunk in [1, 5, 48] {
        let mut g = generator(CpuOptions { threads: Some(2), ..CpuOptions::default() }, chunk);
        assert_eq!((g.config().max_seq, g.prefill_chunk()), (48, chunk));
        let mut worst = 0.0f32;
        for (prompt, want, logits) in references() {
            let got = g.generate(&prompt, want.len(), true).unwrap();
            assert_eq!(got.tokens, want, "prompt {prompt:?}, prefill chunk {chunk}");
            let vocab = g.config().vocab;
            for (step, row) in got.logits.iter().enumerate() {
                let reference = &logits.data()[step * vocab..(step + 1) * vocab];
                for (a, b) in row.iter().zip(reference) {
                    worst = worst.max((a - b).abs() / b.abs().max(1.0));
                }
            }
        }
        println!("prefill chunk {chunk}: max logit error against transformers {worst:.2e}");
        assert!(worst <= 1e-4, "prefill chunk {chunk}: max logit error {worst}");
    }
}

#[test]
fn one_position_past_the_bound_is_an_error() {
    let mut g = generator(CpuOptions { threads: Some(1), ..CpuOptions::default() }, 4);
    let err = g.generate(&[1; 16], 33, false).unwrap_err();
    assert!(matches!(err, GenerateError::PastBound { prompt: 16, new: 33, bound: 48 }), "{err}");
    assert_eq!(
        err.to_string(),
        "16 prompt tokens + 33 new tokens = 49 positions, past the bound of 48 this program was \
         compiled for (compile with a larger bound: --max-seq)"
    );
    assert!(matches!(g.generate(&[], 1, false), Err(GenerateError::EmptyPrompt)));
    let err = g.generate(&[3, 96], 1, false).unwrap_err().to_string();
    assert_eq!(err, "prompt token 1 is 96, outside the vocabulary 0..96");
    // The errors left the generator usable.
    assert_eq!(g.generate(&[5], 0, false).unwrap().tokens, Vec::<i64>::new());
}

#[test]
fn nan_poisoned_plan_gives_the_same_bits() {
    let (prompt, want, _) = references().swap_remove(1);
    let mut plain = generator(CpuOptions { threads: Some(1), ..CpuOptions::default() }, 4);
    let mut poisoned =
        generator(CpuOptions { threads: Some(1), memory_debug: true, ..CpuOptions::default() }, 4);
    let a = plain.generate(&prompt, want.len(), true).unwrap();
    let b = poisoned.generate(&prompt, want.len(), true).unwrap();
    assert_eq!(a.tokens, want);
    assert_eq!(a.tokens, b.tokens);
    let bits = |g: &lumen::generate::Generation| -> Vec<u32> {
        g.logits.iter().flatten().map(|v| v.to_bits()).collect()
    };
    assert_eq!(bits(&a), bits(&b));
}

/// `lumen generate` end to end: the reference tokens, the step's FLOP polynomial in `--json`
/// and the text, and bad input as one `error:` line.
#[test]
fn the_cli_generates_the_reference_tokens_and_reports_the_step_flops() {
    let (prompt, want, _) = references().swap_remove(1);
    let ids = prompt.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let lumen = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_lumen"));
        cmd.arg("generate").arg(dir()).args(["--threads", "1"]).args(extra);
        cmd.output().unwrap()
    };
    let n = want.len().to_string();
    let out = lumen(&["--prompt-ids", &ids, "--max-new-tokens", &n, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tokens: Vec<i64> =
        doc["tokens"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    assert_eq!(tokens, want);
    // Per (query, key) pair: 2 layers x 4 heads x (2 x 16 FLOP for QK^T and again for AV,
    // plus the mask and softmax). Per token: 2 FLOP per weight the matmuls read (92,160 of
    // them: 43,008 per layer and lm_head's 6,144) plus the norms, rotary tables and SiLU.
    let expr = "568*seq*total + 188468*seq";
    assert_eq!(doc["step_flops"]["expr"], expr);
    let bound = doc["bound"].as_u64().unwrap();
    assert_eq!(bound, (prompt.len() + want.len()) as u64);
    assert_eq!(doc["step_flops"]["at_bound"], 568 * bound * bound + 188468 * bound);
    let out = lumen(&["--prompt-ids", &ids, "--max-new-tokens", "2"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&format!("  FLOP per step: {expr} (")), "{text}");
    // A token outside the vocabulary: one error line, non-zero exit, nothing on stdout.
    let out = lumen(&["--prompt-ids", "3,96", "--max-new-tokens", "2"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: prompt token 1 is 96, outside the vocabulary 0..96\n"
    );
    // No new token asked for: refused before loading (it ran the whole prefill), as
    // transformers' generate refuses max_new_tokens=0.
    let out = lumen(&["--prompt-ids", &ids, "--max-new-tokens", "0"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: ") && err.contains("--max-new-tokens") && err.contains("0"),
        "{err}"
    );
}

/// The ONNX decoder step of `data/make_cnn_fixtures.py` (a random Llama: 2 layers, 4 heads on
/// 2 cache heads of 8, vocab 96), driven by `OnnxDecoder` with its padded cache, against ONNX
/// Runtime's plain loop with a growing cache (`data/make_onnx_decoder_reference.py`): the same
/// tokens and logits within 1e-4 x max(1, |reference|), whatever the prefill chunk and bound.
#[test]
fn an_onnx_decoder_step_generates_what_onnxruntime_does() {
    let data = dir().parent().unwrap().join("onnx");
    let bytes = std::fs::read(data.join("llama_step_op17.onnx")).unwrap();
    let refs = std::fs::read(data.join("llama_step_op17.generate.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&refs).unwrap();
    let ints = |name: &str| -> Vec<i64> {
        let t = st.tensor(name).unwrap();
        t.data().chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
    };
    let floats = |name: &str| -> Vec<f32> {
        let t = st.tensor(name).unwrap();
        t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    };
    let runtime = CpuRuntime::new(CpuOptions { threads: Some(2), ..CpuOptions::default() });
    for (bound, chunk) in [(25, 1), (25, 3), (40, 16)] {
        let mut decoder = OnnxDecoder::new(&bytes, &runtime, bound, chunk).unwrap();
        assert_eq!((decoder.vocab(), decoder.prefill_chunk()), (96, chunk));
        let mut worst = 0.0f32;
        for i in 0..3 {
            let (prompt, want) = (ints(&format!("p{i}.prompt")), ints(&format!("p{i}.tokens")));
            let got = decoder.generate(&prompt, want.len(), true).unwrap();
            assert_eq!(got.tokens, want, "prompt {prompt:?}, bound {bound}, chunk {chunk}");
            let reference = floats(&format!("p{i}.logits"));
            for (a, b) in got.logits.iter().flatten().zip(&reference) {
                worst = worst.max((a - b).abs() / b.abs().max(1.0));
            }
        }
        println!("bound {bound}, chunk {chunk}: max logit error against onnxruntime {worst:.2e}");
        assert!(worst <= 1e-4, "bound {bound}, chunk {chunk}: max logit error {worst}");
    }
    // Past the bound, a token outside the vocabulary: errors before any step.
    let mut decoder = OnnxDecoder::new(&bytes, &runtime, 8, 4).unwrap();
    let err = decoder.generate(&[1; 5], 4, false).unwrap_err();
    assert!(matches!(err, GenerateError::PastBound { prompt: 5, new: 4, bound: 8 }), "{err}");
    let err = decoder.generate(&[3, 96], 1, false).unwrap_err().to_string();
    assert_eq!(err, "prompt token 1 is 96, outside the vocabulary 0..96");
    // A model that is not a decoder step: named as such, with what it lacks.
    let bert = std::fs::read(data.join("bert_tiny.onnx")).unwrap();
    let err = OnnxDecoder::new(&bert, &runtime, 8, 1).unwrap_err().to_string();
    assert!(
        err.starts_with("not a decoder step lumen can drive: no input `position_ids`"),
        "{err}"
    );
}

/// `lumen generate MODEL.onnx`: the ONNX route from the command line, and a model that is not
/// a decoder as one error line.
#[test]
fn the_cli_generates_with_an_onnx_decoder_step() {
    let data = dir().parent().unwrap().join("onnx");
    let lumen = |model: &str, extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_lumen"));
        cmd.arg("generate").arg(data.join(model)).args(["--threads", "1"]).args(extra);
        cmd.output().unwrap()
    };
    let args = ["--prompt-ids", "5,61,33,2", "--max-new-tokens", "12", "--prefill-chunk", "2"];
    let out = lumen("llama_step_op17.onnx", &[&args[..], &["--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // onnxruntime's tokens (data/make_onnx_decoder_reference.py, p1).
    assert_eq!(doc["tokens"], serde_json::json!([27, 29, 60, 34, 37, 0, 48, 0, 48, 0, 48, 0]));
    assert_eq!((doc["bound"].as_u64(), doc["prefill_chunk"].as_u64()), (Some(16), Some(2)));
    let out = lumen("llama_step_op17.onnx", &args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("  new (12 tokens): 27 29 60 34 37 0 48 0 48 0 48 0\n"), "{text}");
    let out = lumen("bert_tiny.onnx", &args);
    assert!(!out.status.success() && out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: not a decoder step lumen can drive: no input `position_ids`"));
    assert_eq!(err.lines().count(), 1, "{err}");
}
