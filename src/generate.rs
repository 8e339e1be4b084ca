//! Greedy text generation with a decoder compiled once: the Llama decode step
//! ([`lumen_compiler::decoder::llama_step`]) is compiled and prepared for a bound of `T`
//! positions, then runs every step of every generation, whatever the prompt length up to the
//! bound: no recompiling per token or per prompt.
//!
//! On the CPU the step is ONE program whose token axis is a symbol `seq <= chunk` and whose
//! KV cache is the runtime's state with `total <= T` live rows
//! ([`lumen_compiler::symbolic`]): prompt tokens run a chunk at a time at their own length
//! (the prefill; nothing padded) and each new token at length 1 (the decode); each step
//! appends its keys and values to the cache in place and attends over the live rows only; one
//! copy of the weights. A runtime that does not bind symbols (CUDA) gets two programs of fixed
//! sizes instead: the decode step of 1 token and a prefill step of `chunk` tokens, the last
//! chunk padded (its padding never kept), reading the cache as host tensors `cache.{l}.k` /
//! `cache.{l}.v` `[kv_heads, T, head_dim]` given to each execute; after each step the
//! generator writes the step's `present.{l}.k` / `.v` into the cache rows of its positions
//! (`kv_heads * head_dim` values per layer and token, O(1) per token), and the `mask` hides
//! the rows not yet written. The last prompt token's logits give the first new
//! token, and each new token but the last is fed back through the decode step. The new token is
//! the first position of the largest logit (transformers' greedy `generate` and
//! `torch.argmax` pick the same).

use std::time::Instant;

use lumen_compiler::decoder::{
    CHUNK_MASK, Chunk, LOGITS, LlamaConfig, MASK, POSITION, TOKEN, llama_step,
};
use lumen_compiler::{CompileError, CompileOptions, CompiledProgram, Target};
use lumen_runtime::{HostTensor, PreparedProgram, Runtime, RuntimeError, TensorError, Tensors};
use thiserror::Error;

use crate::model::LlamaModel;

/// Why a generation could not run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The prompt has no token.
    #[error("the prompt is empty: give at least one token id")]
    EmptyPrompt,
    /// A prompt token is not an id of the vocabulary.
    #[error("prompt token {index} is {id}, outside the vocabulary 0..{vocab}")]
    TokenOutOfRange {
        /// Its position in the prompt.
        index: usize,
        /// The id given.
        id: i64,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The prompt and the new tokens need more positions than the program was compiled for.
    #[error(
        "{prompt} prompt tokens + {new} new tokens = {} positions, past the bound of {bound} \
         this program was compiled for (compile with a larger bound: --max-seq)",
        prompt.checked_add(*new).map_or("over 2^64".to_string(), |n| n.to_string())
    )]
    PastBound {
        /// Prompt tokens.
        prompt: usize,
        /// New tokens asked for.
        new: usize,
        /// The bound T.
        bound: usize,
    },
    /// A step's logits hold a NaN: no greedy choice.
    #[error("the logits of position {position} hold NaN")]
    NanLogits {
        /// The step's position.
        position: usize,
    },
    /// An ONNX model lacks what a decoder step with a KV cache needs
    /// ([`crate::onnx_decoder`]): the message names the input or output.
    #[error("not a decoder step lumen can drive: {0}")]
    NotADecoder(String),
    /// An ONNX model could not be read or imported.
    #[error(transparent)]
    Onnx(#[from] lumen_onnx::OnnxError),
    /// The step program could not be built or compiled.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The runtime refused the program or a step failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl From<TensorError> for GenerateError {
    fn from(e: TensorError) -> Self {
        GenerateError::Runtime(RuntimeError::from(e))
    }
}

/// One generation's result and timings (seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The prompt's token ids.
    pub prompt: Vec<i64>,
    /// The new token ids, in order.
    pub tokens: Vec<i64>,
    /// The logits `[vocab]` that chose each new token (empty unless asked for).
    pub logits: Vec<Vec<f32>>,
    /// Seconds of the prompt's steps (the last gives the first new token).
    pub prefill_seconds: f64,
    /// Seconds of the steps feeding new tokens back (one per new token after the first).
    pub decode_seconds: f64,
}

impl Generation {
    /// Prompt tokens per second of the prefill.
    pub fn prefill_tokens_per_second(&self) -> f64 {
        rate(self.prompt.len(), self.prefill_seconds)
    }

    /// New tokens per second of the decode (the steps after the first new token).
    pub fn decode_tokens_per_second(&self) -> f64 {
        rate(self.tokens.len().saturating_sub(1), self.decode_seconds)
    }
}

fn rate(tokens: usize, seconds: f64) -> f64 {
    if tokens == 0 || seconds <= 0.0 { 0.0 } else { tokens as f64 / seconds }
}

/// One compiled and prepared step program and its per-step inputs.
struct Step {
    // Tokens per execute: exactly (a fixed program) or at most (a symbolic one).
    chunk: usize,
    symbolic: bool,
    program: CompiledProgram,
    prepared: Box<dyn PreparedProgram>,
    // token, position and the masks; the caches are moved in for each execute.
    inputs: Tensors,
}

/// A Llama decoder compiled and prepared once (a decode step, and a prefill step of a chunk of
/// prompt tokens), with its KV cache: generates from any prompt whose length plus the new
/// tokens fits the bound.
pub struct Generator {
    config: LlamaConfig,
    decode: Step,
    // None: prompt tokens run one by one through the decode step.
    prefill: Option<Step>,
    // Every layer's cache, `cache.{l}.k` / `cache.{l}.v` [kv_heads, T, head_dim].
    caches: Tensors,
    compile_seconds: f64,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("decode", &self.decode.program.label)
            .field("prefill", &self.prefill.as_ref().map(|p| &p.program.label))
            .finish_non_exhaustive()
    }
}

impl Generator {
    /// Compiles `model`'s step for `runtime`'s target (fused; weights resident on the CPU) and
    /// prepares it: on the CPU one program of up to `prefill_chunk` tokens (at most the
    /// bound) per execute, a symbolic token axis; elsewhere the decode step of 1 token and,
    /// for `prefill_chunk` above 1, a prefill step of that many (weights uploaded once per
    /// program: two programs hold two copies).
    ///
    /// # Errors
    /// [`GenerateError::Compile`] when a program cannot be built or compiled,
    /// [`GenerateError::Runtime`] when the runtime refuses it.
    pub fn new(
        model: &LlamaModel,
        runtime: &dyn Runtime,
        prefill_chunk: usize,
    ) -> Result<Self, GenerateError> {
        let start = Instant::now();
        let config = model.config.clone();
        let target = runtime.target();
        let compile = |chunk: Chunk, name: &str| -> Result<CompiledProgram, GenerateError> {
            let options = CompileOptions {
                fuse: true,
                name: name.to_string(),
                in_place: true,
                resident_weights: target == Target::Cpu,
                ..target.options()
            };
            Ok(llama_step(&config, chunk)?.compile(&options)?)
        };
        let chunk = prefill_chunk.clamp(1, config.max_seq);
        // The CPU runtime binds symbolic dimensions; the CUDA runtime does not (yet). A chunk
        // of 1 is the decode step alone (a symbol bounded by 1 would only blur which length-1
        // axis it is).
        let symbolic = target == Target::Cpu && chunk > 1;
        let (decode, prefill) = if symbolic {
            (compile(Chunk::Symbolic(chunk), "llama-step")?, None)
        } else {
            let prefill =
                (chunk > 1).then(|| compile(Chunk::Fixed(chunk), "llama-prefill")).transpose()?;
            (compile(Chunk::Fixed(1), "llama-decode")?, prefill)
        };
        let compile_seconds = start.elapsed().as_secs_f64();
        let prepare = |program: CompiledProgram, chunk: usize| -> Result<Step, GenerateError> {
            let prepared = runtime.prepare(&program, &model.weights)?;
            Ok(Step { chunk, symbolic, program, prepared, inputs: Tensors::new() })
        };
        let decode = prepare(decode, if symbolic { chunk } else { 1 })?;
        let prefill = prefill.map(|p| prepare(p, chunk)).transpose()?;
        // A symbolic step keeps its cache in the runtime (states); the fixed ones read it from
        // here.
        let mut caches = Tensors::new();
        for l in (0..config.layers).filter(|_| !symbolic) {
            for value in [false, true] {
                let cache = HostTensor::zeros(config.cache_shape())?;
                caches.insert(LlamaConfig::cache_name(l, value), cache);
            }
        }
        Ok(Self { config, decode, prefill, caches, compile_seconds })
    }

    /// The configuration, with the bound (`max_seq`).
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The compiled decode step (its figures: launches, slab bytes).
    pub fn program(&self) -> &CompiledProgram {
        &self.decode.program
    }

    /// The compiled prefill step, if there is one.
    pub fn prefill_program(&self) -> Option<&CompiledProgram> {
        self.prefill.as_ref().map(|p| &p.program)
    }

    /// Prompt tokens per prefill step at most (1 when prompts run through a decode step of
    /// one token).
    pub fn prefill_chunk(&self) -> usize {
        self.prefill.as_ref().map_or(self.decode.chunk, |p| p.chunk)
    }

    /// Whether one program with a symbolic token axis runs the prefill and the decode (the
    /// CPU runtime), rather than two programs of fixed sizes.
    pub fn is_symbolic(&self) -> bool {
        self.decode.symbolic
    }

    /// Seconds building and compiling the step programs took (prepare not included: see
    /// [`Generator::prepare_seconds`]).
    pub fn compile_seconds(&self) -> f64 {
        self.compile_seconds
    }

    /// Seconds the runtime's prepares took (slabs, weight upload and packing).
    pub fn prepare_seconds(&self) -> f64 {
        self.decode.prepared.prepare_seconds()
            + self.prefill.as_ref().map_or(0.0, |p| p.prepared.prepare_seconds())
    }

    /// Bytes of the runtime's slabs (both programs').
    pub fn slab_bytes(&self) -> usize {
        self.decode.prepared.slab_bytes()
            + self.prefill.as_ref().map_or(0, |p| p.prepared.slab_bytes())
    }

    /// Greedily generates `max_new` tokens after `prompt` (ids), keeping each step's logits
    /// when `keep_logits`. The cache is cleared first, so generations are independent.
    ///
    /// # Errors
    /// [`GenerateError::EmptyPrompt`], [`GenerateError::TokenOutOfRange`],
    /// [`GenerateError::PastBound`] when `prompt.len() + max_new` exceeds the bound (checked
    /// before any step), [`GenerateError::NanLogits`], and a runtime's errors.
    pub fn generate(
        &mut self,
        prompt: &[i64],
        max_new: usize,
        keep_logits: bool,
    ) -> Result<Generation, GenerateError> {
        let limits = Limits {
            vocab: self.config.vocab,
            bound: self.config.max_seq,
            chunk: self.prefill_chunk(),
        };
        for t in self.caches.values_mut() {
            t.data_mut().fill(0.0);
        }
        greedy(prompt, max_new, keep_logits, limits, |tokens, start| self.run(tokens, start))
    }

    /// Runs `tokens` (at most the step's chunk) at positions `start..`: the prefill step
    /// when there is one and more than one token (padded to its chunk), else the decode step
    /// (a symbolic one at the tokens' own length). Returns the logits `[vocab]` of the last
    /// token; their keys and values are written into the cache rows of their positions.
    fn run(&mut self, tokens: &[i64], start: usize) -> Result<Vec<f32>, GenerateError> {
        let (t, vocab) = (self.config.max_seq, self.config.vocab);
        let step = match &mut self.prefill {
            Some(p) if tokens.len() > 1 => p,
            _ => &mut self.decode,
        };
        let m = tokens.len();
        if step.symbolic {
            return Self::run_symbolic(step, tokens, start, vocab);
        }
        let hd = self.config.head_dim;
        let n = step.chunk;
        // Ids below the vocabulary and positions below the bound fit an i32 (checked sizes);
        // padding rows (past `m`) read token 0 at the last position and are never kept.
        let ids: Vec<i32> = (0..n).map(|c| tokens.get(c).map_or(0, |&id| id as i32)).collect();
        let positions: Vec<i32> = (0..n).map(|c| (start + c).min(t - 1) as i32).collect();
        let visible = |on: bool| if on { 0.0 } else { f32::NEG_INFINITY };
        let mask: Vec<f32> = (0..n * t).map(|i| visible(i % t < start)).collect();
        let chunk_mask: Vec<f32> = (0..n * n).map(|i| visible(i % n <= i / n)).collect();
        step.inputs.insert(TOKEN.to_string(), HostTensor::from_i32([n], ids)?);
        step.inputs.insert(POSITION.to_string(), HostTensor::from_i32([n], positions)?);
        step.inputs.insert(MASK.to_string(), HostTensor::new([n, t], mask)?);
        step.inputs.insert(CHUNK_MASK.to_string(), HostTensor::new([n, n], chunk_mask)?);
        for (name, cache) in self.caches.drain(..) {
            step.inputs.insert(name, cache);
        }
        let result = step.prepared.execute(&step.inputs);
        // The caches go back whatever the result, so an error leaves the generator usable.
        for l in 0..self.config.layers {
            for value in [false, true] {
                let name = LlamaConfig::cache_name(l, value);
                if let Some(cache) = step.inputs.swap_remove(&name) {
                    self.caches.insert(name, cache);
                }
            }
        }
        let mut outputs = result?;
        for l in 0..self.config.layers {
            for value in [false, true] {
                let present = &outputs[&LlamaConfig::present_name(l, value)];
                let cache = self.caches[&LlamaConfig::cache_name(l, value)].data_mut();
                // present [kv_heads, n, hd] -> cache [kv_heads, t, hd], rows start..start+m.
                for (h, head) in present.data().chunks_exact(n * hd).enumerate() {
                    let at = (h * t + start) * hd;
                    cache[at..at + m * hd].copy_from_slice(&head[..m * hd]);
                }
            }
        }
        let logits = outputs.swap_remove(LOGITS).map(HostTensor::into_data).unwrap_or_default();
        Ok(logits[(m - 1) * vocab..m * vocab].to_vec())
    }

    /// [`Generator::run`] through the symbolic step: `m` tokens bind `seq = m` and the mask
    /// `[m, start + m]` binds `total`; the step appends their keys and values to its states at
    /// rows `start .. start + m` and attends over those `start + m` rows.
    fn run_symbolic(
        step: &mut Step,
        tokens: &[i64],
        start: usize,
        vocab: usize,
    ) -> Result<Vec<f32>, GenerateError> {
        let (m, total) = (tokens.len(), start + tokens.len());
        // Ids below the vocabulary and positions below the bound fit an i32 (checked sizes).
        let ids: Vec<i32> = tokens.iter().map(|&id| id as i32).collect();
        let positions: Vec<i32> = (start..total).map(|p| p as i32).collect();
        // Token c sees the rows up to its own position, start + c.
        let mask: Vec<f32> = (0..m * total)
            .map(|i| if i % total <= start + i / total { 0.0 } else { f32::NEG_INFINITY })
            .collect();
        step.inputs.insert(TOKEN.to_string(), HostTensor::from_i32([m], ids)?);
        step.inputs.insert(POSITION.to_string(), HostTensor::from_i32([m], positions)?);
        step.inputs.insert(MASK.to_string(), HostTensor::new([m, total], mask)?);
        let mut outputs = step.prepared.execute(&step.inputs)?;
        let logits = outputs.swap_remove(LOGITS).map(HostTensor::into_data).unwrap_or_default();
        Ok(logits[(m - 1) * vocab..m * vocab].to_vec())
    }
}

/// What a greedy loop checks its request against: the vocabulary size, the bound of
/// positions, and the prompt tokens one step takes at most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub vocab: usize,
    pub bound: usize,
    pub chunk: usize,
}

/// The greedy loop of every generator: checks the request (before any step), runs the prompt in chunks of `limits.chunk` through `run(tokens, start)`
/// (the last token's logits back), picks each new token by [`argmax`] and feeds it back, timing
/// the prefill (the prompt's steps, which give the first new token) and the decode (the rest).
pub(crate) fn greedy(
    prompt: &[i64],
    max_new: usize,
    keep_logits: bool,
    limits: Limits,
    mut run: impl FnMut(&[i64], usize) -> Result<Vec<f32>, GenerateError>,
) -> Result<Generation, GenerateError> {
    let Limits { vocab, bound, chunk } = limits;
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if let Some((index, &id)) =
        prompt.iter().enumerate().find(|(_, id)| !(0..vocab as i64).contains(id))
    {
        return Err(GenerateError::TokenOutOfRange { index, id, vocab });
    }
    if prompt.len().checked_add(max_new).is_none_or(|n| n > bound) {
        return Err(GenerateError::PastBound { prompt: prompt.len(), new: max_new, bound });
    }
    let mut out = Generation {
        prompt: prompt.to_vec(),
        tokens: Vec::with_capacity(max_new),
        logits: Vec::new(),
        prefill_seconds: 0.0,
        decode_seconds: 0.0,
    };
    let keep = |out: &mut Generation, logits: Vec<f32>, position: usize| {
        if out.tokens.len() < max_new {
            out.tokens.push(argmax(&logits).ok_or(GenerateError::NanLogits { position })?);
            if keep_logits {
                out.logits.push(logits);
            }
        }
        Ok::<(), GenerateError>(())
    };
    let start = Instant::now();
    let mut logits = Vec::new();
    for (i, tokens) in prompt.chunks(chunk.max(1)).enumerate() {
        logits = run(tokens, i * chunk.max(1))?;
    }
    keep(&mut out, logits, prompt.len() - 1)?;
    out.prefill_seconds = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for position in prompt.len()..prompt.len() + max_new.saturating_sub(1) {
        let token = out.tokens[position - prompt.len()];
        let logits = run(&[token], position)?;
        keep(&mut out, logits, position)?;
    }
    out.decode_seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The first position of the largest value; `None` when any value is NaN or there is none.
pub(crate) fn argmax(values: &[f32]) -> Option<i64> {
    if values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    (!values.is_empty()).then_some(best as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_choice_is_the_first_largest() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), Some(1));
        assert_eq!(argmax(&[f32::NEG_INFINITY, -5.0]), Some(1));
        assert_eq!(argmax(&[1.0, f32::NAN]), None);
        assert_eq!(argmax(&[]), None);
    }
}
