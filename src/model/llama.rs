//! A Llama-architecture decoder from a Hugging Face model directory, as transformers'
//! `save_pretrained` writes `LlamaForCausalLM`: `config.json` (the hyper-parameters) and
//! `model.safetensors` (or shards listed by `model.safetensors.index.json`), weights named
//! `model.layers.{l}.self_attn.q_proj.weight` and so on. f32 weights are read as they are;
//! bf16 and f16 weights are widened to f32 (exactly) at load.
//!
//! Read from `config.json`: `vocab_size`, `hidden_size`, `intermediate_size`,
//! `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads` (default: the heads),
//! `head_dim` (default `hidden_size / num_attention_heads`), `max_position_embeddings` (the
//! default bound), `rope_theta` (default 10000; transformers 5 writes it as
//! `rope_parameters.rope_theta` beside `rope_type` `default`), `rms_norm_eps` (default 1e-6),
//! `tie_word_embeddings` (default false). Refused with the key named: another architecture,
//! another `model_type`, `hidden_act` other than `silu`, a `rope_scaling` or another
//! `rope_type`, a `quantization_config` or `sliding_window`, `attention_bias` or `mlp_bias` true.
//! The network is [`lumen_compiler::decoder::llama_step`].

use std::path::{Path, PathBuf};

use lumen_compiler::decoder::{LlamaConfig, ROPE_COS, ROPE_SIN};
use lumen_runtime::{HostTensor, Tensors};
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;

use super::ModelError;

/// A Llama decoder read from a model directory: its configuration (with the bound) and every
/// weight the step program reads, the rotary tables included.
#[derive(Debug, Clone)]
pub struct LlamaModel {
    /// The directory it was read from.
    pub dir: PathBuf,
    /// The hyper-parameters; `max_seq` is the bound asked for (by default the config's
    /// `max_position_embeddings`).
    pub config: LlamaConfig,
    /// Weights by the names [`LlamaConfig::weights`] lists, plus [`ROPE_COS`] and [`ROPE_SIN`].
    pub weights: Tensors,
    /// Bytes of the checkpoint's weights as f32 (the rotary tables not counted): what one
    /// decode step reads at least once.
    pub weight_bytes: usize,
}

impl LlamaModel {
    /// The model in words: `LlamaForCausalLM: 2 layers, hidden 64, 4 heads (2 kv, head 16),
    /// MLP 160, vocab 96, rope theta 5000, bound 48 positions`.
    pub fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "LlamaForCausalLM: {} layers, hidden {}, {} heads ({} kv, head {}), MLP {}, vocab {}, \
             rope theta {}, {}bound {} positions",
            c.layers,
            c.hidden,
            c.heads,
            c.kv_heads,
            c.head_dim,
            c.intermediate,
            c.vocab,
            c.rope_theta,
            if c.tied_embeddings { "tied embeddings, " } else { "" },
            c.max_seq
        )
    }
}

fn config_err(key: &str, problem: impl Into<String>) -> ModelError {
    ModelError::Config { key: key.to_string(), problem: problem.into() }
}

fn whole(json: &Value, key: &str, default: Option<usize>) -> Result<usize, ModelError> {
    match json.get(key) {
        None | Some(Value::Null) => default.ok_or_else(|| config_err(key, "is missing")),
        Some(v) => v
            .as_u64()
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| config_err(key, format!("is {v}, not a positive whole number"))),
    }
}

fn number(json: &Value, key: &str, default: f64) -> Result<f64, ModelError> {
    match json.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| config_err(key, format!("is {v}, not a number"))),
    }
}

fn flag(json: &Value, key: &str) -> Result<bool, ModelError> {
    match json.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(v) => v.as_bool().ok_or_else(|| config_err(key, format!("is {v}, not true/false"))),
    }
}

/// The hyper-parameters of a `config.json` (see the module docs), with the bound `max_seq`
/// (default: `max_position_embeddings`).
///
/// # Errors
/// [`ModelError::Config`] naming the key that is missing, malformed or unsupported, and the
/// sizes [`LlamaConfig::check`] refuses (as [`ModelError::Compile`]).
pub fn parse_config(json: &Value, max_seq: Option<usize>) -> Result<LlamaConfig, ModelError> {
    if !json.is_object() {
        return Err(config_err("(top level)", "is not a JSON object"));
    }
    if let Some(archs) = json.get("architectures").and_then(Value::as_array) {
        let names: Vec<&str> = archs.iter().filter_map(Value::as_str).collect();
        if !names.contains(&"LlamaForCausalLM") {
            return Err(config_err(
                "architectures",
                format!("is {names:?}; lumen generate reads LlamaForCausalLM"),
            ));
        }
    }
    if let Some(kind) = json.get("model_type").and_then(Value::as_str)
        && kind != "llama"
    {
        return Err(config_err(
            "model_type",
            format!("is {kind:?}; lumen generate reads \"llama\""),
        ));
    }
    for key in ["quantization_config", "sliding_window"] {
        if json.get(key).is_some_and(|v| !v.is_null()) {
            return Err(config_err(
                key,
                "is set; lumen generate computes plain f32 Llama layers only",
            ));
        }
    }
    if let Some(act) = json.get("hidden_act").and_then(Value::as_str) {
        if act != "silu" {
            return Err(config_err(
                "hidden_act",
                format!("is {act:?}; only \"silu\" is supported"),
            ));
        }
    }
    if json.get("rope_scaling").is_some_and(|v| !v.is_null()) {
        return Err(config_err(
            "rope_scaling",
            "is set; only plain rotary embeddings are supported",
        ));
    }
    // transformers 5 writes θ inside `rope_parameters` with a `rope_type`; 4.x at the top.
    let mut rope_theta = number(json, "rope_theta", 10000.0)?;
    if let Some(rope) = json.get("rope_parameters").filter(|v| !v.is_null()) {
        match rope.get("rope_type").and_then(Value::as_str) {
            None | Some("default") => {}
            Some(other) => {
                return Err(config_err(
                    "rope_parameters.rope_type",
                    format!("is {other:?}; only \"default\" rotary embeddings are supported"),
                ));
            }
        }
        if let Some(theta) = rope.get("rope_theta").filter(|v| !v.is_null()) {
            rope_theta = theta.as_f64().ok_or_else(|| {
                config_err("rope_parameters.rope_theta", format!("is {theta}, not a number"))
            })?;
        }
    }
    for key in ["attention_bias", "mlp_bias"] {
        if flag(json, key)? {
            return Err(config_err(key, "is true; projections with biases are not supported"));
        }
    }
    let hidden = whole(json, "hidden_size", None)?;
    let heads = whole(json, "num_attention_heads", None)?;
    let config = LlamaConfig {
        vocab: whole(json, "vocab_size", None)?,
        hidden,
        intermediate: whole(json, "intermediate_size", None)?,
        layers: whole(json, "num_hidden_layers", None)?,
        heads,
        kv_heads: whole(json, "num_key_value_heads", Some(heads))?,
        head_dim: whole(json, "head_dim", Some(hidden / heads))?,
        rope_theta,
        eps: number(json, "rms_norm_eps", 1e-6)? as f32,
        tied_embeddings: flag(json, "tie_word_embeddings")?,
        max_seq: match max_seq {
            Some(t) => t,
            None => whole(json, "max_position_embeddings", None)?,
        },
    };
    config.check()?;
    Ok(config)
}

/// A tensor of a checkpoint widened to f32: f32 as it is, bf16 and f16 exactly.
fn widen(st: &SafeTensors<'_>, name: &str) -> Result<Option<HostTensor>, ModelError> {
    let Ok(view) = st.tensor(name) else { return Ok(None) };
    let (shape, data) = (view.shape().to_vec(), view.data());
    let values: Vec<f32> = match view.dtype() {
        Dtype::F32 => {
            data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        Dtype::BF16 => {
            data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
        }
        Dtype::F16 => {
            data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
        }
        other => {
            return Err(ModelError::Dtype {
                name: name.to_string(),
                got: format!("{other:?}"),
                expected: "F32, BF16 or F16",
            });
        }
    };
    Ok(Some(HostTensor::new(shape, values)?))
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path)
        .map_err(|e| ModelError::Io { path: path.display().to_string(), reason: e.to_string() })
}

/// The checkpoint's files: `model.safetensors`, or the shards `model.safetensors.index.json`
/// lists (each once, in the order first named).
fn checkpoint_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if !index.is_file() {
        return Err(ModelError::Io {
            path: single.display().to_string(),
            reason: "not found (nor model.safetensors.index.json)".to_string(),
        });
    }
    let json: Value = serde_json::from_slice(&read(&index)?).map_err(|e| ModelError::Json {
        path: index.display().to_string(),
        reason: e.to_string(),
    })?;
    let map = json
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| ModelError::Format(format!("{}: no weight_map object", index.display())))?;
    let mut files: Vec<PathBuf> = Vec::new();
    for shard in map.values().filter_map(Value::as_str) {
        let path = dir.join(shard);
        if !files.contains(&path) {
            files.push(path);
        }
    }
    Ok(files)
}

/// The hyper-parameters of `dir/config.json` with the bound `max_seq` (default: the config's
/// `max_position_embeddings`), weights not read.
///
/// # Errors
/// [`ModelError::Io`], [`ModelError::Json`], and those of [`parse_config`].
pub fn read_config(dir: &Path, max_seq: Option<usize>) -> Result<LlamaConfig, ModelError> {
    let config_path = dir.join("config.json");
    let json: Value = serde_json::from_slice(&read(&config_path)?).map_err(|e| {
        ModelError::Json { path: config_path.display().to_string(), reason: e.to_string() }
    })?;
    parse_config(&json, max_seq)
}

/// Reads the Llama decoder in `dir` with the bound `max_seq` (default: the config's
/// `max_position_embeddings`): the configuration, every weight (shapes checked), and the
/// rotary tables for the bound.
///
/// # Errors
/// [`ModelError::Io`] for a missing file, [`ModelError::Format`] for malformed JSON or
/// safetensors, [`ModelError::Config`] for a key refused, [`ModelError::Missing`] /
/// [`ModelError::Shape`] / [`ModelError::Dtype`] for a weight absent or not as the config says.
pub fn load_llama(dir: &Path, max_seq: Option<usize>) -> Result<LlamaModel, ModelError> {
    let config = read_config(dir, max_seq)?;
    let files = checkpoint_files(dir)?;
    let blobs: Vec<Vec<u8>> = files.iter().map(|f| read(f)).collect::<Result<_, _>>()?;
    let mut stores = Vec::with_capacity(blobs.len());
    for (blob, file) in blobs.iter().zip(&files) {
        stores.push(
            SafeTensors::deserialize(blob)
                .map_err(|e| ModelError::Format(format!("{}: {e}", file.display())))?,
        );
    }
    let mut weights = Tensors::new();
    let mut weight_bytes = 0;
    for (name, shape) in config.weights() {
        let mut found = None;
        for st in &stores {
            if let Some(t) = widen(st, &name)? {
                found = Some(t);
                break;
            }
        }
        let t = found.ok_or_else(|| ModelError::Missing {
            name: name.clone(),
            what: "a weight config.json implies",
        })?;
        if t.shape() != shape.as_slice() {
            return Err(super::shape_err(&name, t.shape(), format!("{shape:?} by config.json")));
        }
        weight_bytes += t.bytes();
        weights.insert(name, t);
    }
    let (cos, sin) = config.rotary_tables()?;
    let table = [config.max_seq, config.head_dim];
    weights.insert(ROPE_COS.to_string(), HostTensor::new(table, cos)?);
    weights.insert(ROPE_SIN.to_string(), HostTensor::new(table, sin)?);
    Ok(LlamaModel { dir: dir.to_path_buf(), config, weights, weight_bytes })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn base() -> Value {
        json!({
            "architectures": ["LlamaForCausalLM"], "vocab_size": 32, "hidden_size": 16,
            "intermediate_size": 40, "num_hidden_layers": 1, "num_attention_heads": 4,
            "num_key_value_heads": 2, "max_position_embeddings": 8, "hidden_act": "silu",
            "rope_theta": 500.0, "rms_norm_eps": 1e-5, "rope_scaling": null
        })
    }

    #[test]
    fn config_keys_and_defaults() {
        let c = parse_config(&base(), None).unwrap();
        assert_eq!((c.vocab, c.hidden, c.heads, c.kv_heads, c.head_dim), (32, 16, 4, 2, 4));
        assert_eq!((c.max_seq, c.rope_theta, c.tied_embeddings), (8, 500.0, false));
        assert_eq!(parse_config(&base(), Some(3)).unwrap().max_seq, 3);
        let mut j = base();
        j["rope_parameters"] = json!({"rope_theta": 5000.0, "rope_type": "default"});
        assert_eq!(parse_config(&j, None).unwrap().rope_theta, 5000.0);
        let mut j = base();
        j.as_object_mut().unwrap().remove("num_key_value_heads");
        assert_eq!(parse_config(&j, None).unwrap().kv_heads, 4);
    }

    #[test]
    fn refused_keys_are_named() {
        let cases = [
            ("hidden_act", json!("gelu"), "config.json: `hidden_act` is \"gelu\""),
            ("rope_scaling", json!({"type": "linear"}), "`rope_scaling` is set"),
            ("attention_bias", json!(true), "`attention_bias` is true"),
            ("num_key_value_heads", json!(3), "not a multiple of num_key_value_heads 3"),
            ("vocab_size", json!(-1), "`vocab_size` is -1, not a positive whole number"),
            ("architectures", json!(["GPT2LMHeadModel"]), "reads LlamaForCausalLM"),
            ("rope_parameters", json!({"rope_type": "yarn"}), "`rope_parameters.rope_type` is"),
            ("model_type", json!("gpt2"), "`model_type` is \"gpt2\""),
            ("sliding_window", json!(4096), "`sliding_window` is set"),
            ("quantization_config", json!({"bits": 4}), "`quantization_config` is set"),
        ];
        for (key, value, want) in cases {
            let mut j = base();
            j[key] = value;
            let err = parse_config(&j, None).unwrap_err().to_string();
            assert!(err.contains(want), "{key}: {err}");
        }
    }
}
