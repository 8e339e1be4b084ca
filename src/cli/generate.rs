//! `lumen generate MODEL_DIR --prompt-ids 1,2,3 --max-new-tokens N`: greedy text generation
//! with a Llama-architecture decoder from a Hugging Face model directory (`config.json` and
//! `model.safetensors`, as transformers' `save_pretrained` writes `LlamaForCausalLM`).
//!
//! The decode step is compiled and prepared once for the bound (`--max-seq`, default the
//! config's `max_position_embeddings`) and runs every prompt token (the prefill) and every new
//! token (the decode); the report gives the new token ids, tokens per second of each phase,
//! the compile time, the slab and the KV cache bytes. `--repeat N` generates N times with the
//! same compiled program and reports the best time of each phase (the first run includes
//! warming caches).

use std::path::PathBuf;
use std::time::Instant;

use clap::builder::PossibleValuesParser;
use lumen::generate::{GenerateError, Generation, Generator};
use lumen::model::llama::read_config;
use lumen::model::load_llama;
use lumen::onnx_decoder::OnnxDecoder;
use lumen_runtime::RUNTIME_NAMES;
use serde_json::json;

use super::out::{print, print_json};
use super::run::{mem_available, parse_threads, runtime_with_threads};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A model directory: config.json and model.safetensors (or its shards with
    /// model.safetensors.index.json) of a LlamaForCausalLM, f32 (bf16/f16 widened at load);
    /// or a decoder step exported to ONNX with its KV cache (`MODEL.onnx`: inputs input_ids,
    /// attention_mask, position_ids and past_key_values.*; outputs logits and present.*).
    model_dir: PathBuf,
    /// The prompt's token ids, comma-separated (`1,2,3`).
    #[arg(
        long,
        value_name = "IDS",
        value_delimiter = ',',
        required = true,
        allow_hyphen_values = true
    )]
    prompt_ids: Vec<i64>,
    /// How many tokens to generate after the prompt (at least 1, as transformers requires).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    max_new_tokens: u32,
    /// The bound: positions (prompt plus new tokens) the program is compiled for; the KV cache
    /// holds this many rows per layer (default: the prompt plus the new tokens, at most the
    /// config's max_position_embeddings; a larger bound is accepted, the rotary angles
    /// computed for it, as transformers accepts longer sequences).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..))]
    max_seq: Option<u32>,
    /// Prompt tokens per prefill step, at most (and at most the bound). On the CPU one program
    /// whose token axis is a symbol `seq <= N` runs the prompt's chunks at their own lengths
    /// and the decode at 1; on CUDA a second program compiled for N tokens runs the prompt in
    /// padded chunks (1: the prompt goes through the decode step, one token at a time).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    prefill_chunk: u32,
    /// The runtime to execute on.
    #[arg(long, default_value = "cpu", value_parser = PossibleValuesParser::new(RUNTIME_NAMES))]
    runtime: String,
    /// CPU runtime: worker threads (default: every core).
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    threads: Option<usize>,
    /// Generate this many times with the one compiled program; the best time of each phase
    /// is reported.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Print one JSON object instead of the readable report.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if lumen::model::is_onnx(&args.model_dir) {
        return run_onnx(args);
    }
    let start = Instant::now();
    // The bound by default: what this generation needs, at most max_position_embeddings
    // (each step attends over all of it; a config's 131072 would cost every token that much).
    let bound = match args.max_seq {
        Some(t) => t as usize,
        None => {
            let limit = read_config(&args.model_dir, None)?.max_seq;
            args.prompt_ids.len().saturating_add(args.max_new_tokens as usize).clamp(1, limit)
        }
    };
    // The KV cache and the rotary tables grow with the bound: refuse one that cannot fit
    // before loading and compiling for it (that took minutes and gigabytes before failing).
    let config = read_config(&args.model_dir, Some(bound))?;
    let needed = config
        .cache_bytes()
        .saturating_add(bound.saturating_mul(config.head_dim).saturating_mul(8));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    if let Some(available) = mem_available(&meminfo)
        && needed > available
    {
        anyhow::bail!(
            "a bound of {bound} positions needs at least {needed} B (KV cache and rotary tables), \
             more than the {available} B of memory available (MemAvailable): give a smaller \
             --max-seq"
        );
    }
    let model = load_llama(&args.model_dir, Some(bound))?;
    let load_seconds = start.elapsed().as_secs_f64();
    let (runtime, warnings) = runtime_with_threads(&args.runtime, args.threads)?;
    let mut generator = Generator::new(&model, runtime.as_ref(), args.prefill_chunk as usize)?;
    let g = best_of(args.repeat, || {
        generator.generate(&args.prompt_ids, args.max_new_tokens as usize, false)
    })?;
    let c = generator.config();
    let figures = &generator.program().figures;
    // The step's FLOP as a function of `seq` and `total` (the symbolic program's; a fixed
    // decode step has its one number).
    let step_flops = generator.program().llir.flops_polynomial().map(|p| p.to_string());
    if args.json {
        return print_json(&flatten(json!({
            "model": args.model_dir.display().to_string(),
            "architecture": "LlamaForCausalLM",
            "runtime": runtime.name(),
            "threads": runtime.threads(),
            "bound": c.max_seq,
            "generation": generation_json(&g, args.repeat),
            "load_seconds": load_seconds,
            "compile_seconds": generator.compile_seconds(),
            "prepare_seconds": generator.prepare_seconds(),
            "launches_per_step": figures.launches,
            "step_flops": {"expr": step_flops, "at_bound": figures.flops},
            "prefill_chunk": generator.prefill_chunk(),
            "symbolic": generator.is_symbolic(),
            "slab_bytes": generator.slab_bytes(),
            "cache_bytes": c.cache_bytes(),
            "weight_bytes": model.weight_bytes,
            "warnings": warnings,
        })));
    }
    let mut text = String::new();
    text.push_str(&format!("lumen generate {}\n", args.model_dir.display()));
    text.push_str(&format!("  {}\n", model.describe()));
    let (programs, cache) = if generator.is_symbolic() {
        let chunk = generator.prefill_chunk();
        (format!("one step program of seq <= {chunk} tokens"), "in the slab, appended in place")
    } else {
        let chunk = generator.prefill_chunk();
        let programs = if chunk > 1 {
            format!("a decode step and a prefill step of {chunk} tokens")
        } else {
            "a decode step".to_string()
        };
        (programs, "host, read in place")
    };
    text.push_str(&format!(
        "  compiled once in {:.3} s (prepare {:.3} s) on {} ({} thread{}): {programs}, {} \
         launches per step, slabs {} B, KV cache {} B ({cache}), weights {} B\n",
        generator.compile_seconds(),
        generator.prepare_seconds(),
        runtime.name(),
        runtime.threads(),
        if runtime.threads() == 1 { "" } else { "s" },
        figures.launches,
        generator.slab_bytes(),
        c.cache_bytes(),
        model.weight_bytes,
    ));
    match &step_flops {
        Some(expr) => {
            text.push_str(&format!("  FLOP per step: {expr} ({} at the bound)\n", figures.flops))
        }
        None => text.push_str(&format!("  FLOP per decode step: {}\n", figures.flops)),
    }
    text.push_str(&tokens_text(&g, args.repeat));
    print(&text)?;
    Ok(())
}

/// Generates `repeat` times; the last generation's tokens with the best time of each phase.
fn best_of(
    repeat: u32,
    mut generate: impl FnMut() -> Result<Generation, GenerateError>,
) -> Result<Generation, GenerateError> {
    let mut g = generate()?;
    for _ in 1..repeat {
        let next = generate()?;
        let (prefill, decode) = (g.prefill_seconds, g.decode_seconds);
        g = next;
        g.prefill_seconds = g.prefill_seconds.min(prefill);
        g.decode_seconds = g.decode_seconds.min(decode);
    }
    Ok(g)
}

/// The `--json` fields of one generation (with the best phase times of `repeat`), spliced
/// into the report where the `"generation"` key stands.
fn generation_json(g: &Generation, repeat: u32) -> serde_json::Value {
    json!({
        "prompt_tokens": g.prompt.len(),
        "new_tokens": g.tokens.len(),
        "tokens": g.tokens,
        "prefill_seconds": g.prefill_seconds,
        "decode_seconds": g.decode_seconds,
        "prefill_tokens_per_s": g.prefill_tokens_per_second(),
        "decode_tokens_per_s": g.decode_tokens_per_second(),
        "repeat": repeat,
    })
}

/// `doc` with its `"generation"` object's fields in its place, so the report stays flat.
fn flatten(doc: serde_json::Value) -> serde_json::Value {
    let serde_json::Value::Object(map) = doc else { return doc };
    let mut out = serde_json::Map::new();
    for (k, v) in map {
        match (k.as_str(), v) {
            ("generation", serde_json::Value::Object(inner)) => out.extend(inner),
            (_, v) => {
                out.insert(k, v);
            }
        }
    }
    serde_json::Value::Object(out)
}

/// The report's lines for the prompt, the new tokens and the two phases' speeds.
fn tokens_text(g: &Generation, repeat: u32) -> String {
    let ids = |t: &[i64]| t.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
    let best_of = if repeat > 1 { format!(", best of {repeat}") } else { String::new() };
    format!(
        "  prompt ({} tokens): {}\n  new ({} tokens): {}\n  prefill {} tokens in {:.3} ms ({:.1} \
         tokens/s); decode {} tokens in {:.3} ms ({:.1} tokens/s){best_of}\n",
        g.prompt.len(),
        ids(&g.prompt),
        g.tokens.len(),
        ids(&g.tokens),
        g.prompt.len(),
        g.prefill_seconds * 1e3,
        g.prefill_tokens_per_second(),
        g.tokens.len().saturating_sub(1),
        g.decode_seconds * 1e3,
        g.decode_tokens_per_second(),
    )
}

/// `lumen generate MODEL.onnx`: a decoder step exported with its KV cache
/// ([`lumen::onnx_decoder`]).
fn run_onnx(args: Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let bound = match args.max_seq {
        Some(t) => t as usize,
        None => args.prompt_ids.len().saturating_add(args.max_new_tokens as usize).max(2),
    };
    let path = &args.model_dir;
    let bytes =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let (runtime, warnings) = runtime_with_threads(&args.runtime, args.threads)?;
    let mut decoder =
        OnnxDecoder::new(&bytes, runtime.as_ref(), bound, args.prefill_chunk as usize)?;
    let load_seconds = start.elapsed().as_secs_f64();
    let g = best_of(args.repeat, || {
        decoder.generate(&args.prompt_ids, args.max_new_tokens as usize, false)
    })?;
    let figures = &decoder.program().figures;
    if args.json {
        return print_json(&flatten(json!({
            "model": path.display().to_string(),
            "architecture": "onnx decoder step",
            "runtime": runtime.name(),
            "threads": runtime.threads(),
            "bound": decoder.bound(),
            "generation": generation_json(&g, args.repeat),
            "load_seconds": load_seconds,
            "compile_seconds": decoder.compile_seconds(),
            "prepare_seconds": decoder.prepare_seconds(),
            "launches_per_step": figures.launches,
            "step_flops": {"expr": null, "at_bound": figures.flops},
            "prefill_chunk": decoder.prefill_chunk(),
            "symbolic": false,
            "slab_bytes": decoder.slab_bytes(),
            "cache_bytes": decoder.cache_bytes(),
            "warnings": warnings,
        })));
    }
    let chunk = decoder.prefill_chunk();
    let programs = if chunk > 1 {
        format!("a decode step and a prefill step of {chunk} tokens")
    } else {
        "a decode step".to_string()
    };
    let mut text = format!("lumen generate {}\n", path.display());
    text.push_str(&format!(
        "  ONNX decoder step, vocab {}, bound {} positions (imported and compiled once in {:.3} s, \
         prepare {:.3} s) on {} ({} thread{}): {programs}, {} launches per decode step, slabs {} \
         B, KV cache {} B (host, {} slots, new rows copied in)\n",
        decoder.vocab(),
        decoder.bound(),
        decoder.compile_seconds(),
        decoder.prepare_seconds(),
        runtime.name(),
        runtime.threads(),
        if runtime.threads() == 1 { "" } else { "s" },
        figures.launches,
        decoder.slab_bytes(),
        decoder.cache_bytes(),
        decoder.bound() - 1,
    ));
    text.push_str(&format!("  FLOP per decode step: {}\n", figures.flops));
    text.push_str(&tokens_text(&g, args.repeat));
    print(&text)?;
    Ok(())
}
