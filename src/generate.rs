//! Greedy text generation with a decoder compiled once: the Llama decode step
//! ([`lumen_compiler::decoder::llama_step`]) is compiled and prepared for a bound of `T`
//! positions, then runs every step of every generation, whatever the prompt length up to the
//! bound: no recompiling per token or per prompt.
//!
//! The KV cache is a set of host tensors, `cache.{l}.k` / `cache.{l}.v` `[kv_heads, T,
//! head_dim]` per layer, given to each execute as inputs: the CPU runtime reads f32 inputs
//! in place (no copy into the slab), and after each step the generator writes the step's
//! `present.{l}.k` / `.v` into the cache row of its position (`kv_heads * head_dim` values per
//! layer, O(1) per token). The `mask` input (0 for rows `0..position`, `-inf` beyond) keeps
//! the rows not yet written out of the softmax.
//!
//! Prompt tokens run one step each (the prefill); the step of the last prompt token gives the
//! first new token, and each new token but the last is fed back (the decode). The new token is
//! the first position of the largest logit (transformers' greedy `generate` and
//! `torch.argmax` pick the same).

use std::time::Instant;

use lumen_compiler::decoder::{LOGITS, LlamaConfig, MASK, POSITION, TOKEN, llama_step};
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
        prompt + new
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

/// A Llama decoder compiled and prepared once, with its KV cache: generates from any prompt
/// whose length plus the new tokens fits the bound.
pub struct Generator {
    config: LlamaConfig,
    program: CompiledProgram,
    prepared: Box<dyn PreparedProgram>,
    // token, position, mask and every layer's cache, updated between steps.
    inputs: Tensors,
    compile_seconds: f64,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator").field("program", &self.program.label).finish_non_exhaustive()
    }
}

impl Generator {
    /// Compiles `model`'s decode step for `runtime`'s target (fused; weights resident on the
    /// CPU) and prepares it (weights uploaded once).
    ///
    /// # Errors
    /// [`GenerateError::Compile`] when the program cannot be built or compiled,
    /// [`GenerateError::Runtime`] when the runtime refuses it.
    pub fn new(model: &LlamaModel, runtime: &dyn Runtime) -> Result<Self, GenerateError> {
        let start = Instant::now();
        let target = runtime.target();
        let options = CompileOptions {
            fuse: true,
            name: "llama-step".to_string(),
            in_place: true,
            resident_weights: target == Target::Cpu,
            ..target.options()
        };
        let program = llama_step(&model.config)?.compile(&options)?;
        let compile_seconds = start.elapsed().as_secs_f64();
        let prepared = runtime.prepare(&program, &model.weights)?;
        let config = model.config.clone();
        let mut inputs = Tensors::new();
        inputs.insert(TOKEN.to_string(), HostTensor::from_i32([1], vec![0])?);
        inputs.insert(POSITION.to_string(), HostTensor::from_i32([1], vec![0])?);
        inputs
            .insert(MASK.to_string(), HostTensor::new([config.max_seq], mask(0, config.max_seq))?);
        for l in 0..config.layers {
            for value in [false, true] {
                let cache = HostTensor::zeros(config.cache_shape())?;
                inputs.insert(LlamaConfig::cache_name(l, value), cache);
            }
        }
        Ok(Self { config, program, prepared, inputs, compile_seconds })
    }

    /// The configuration, with the bound (`max_seq`).
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The compiled step program (its figures: launches, slab bytes).
    pub fn program(&self) -> &CompiledProgram {
        &self.program
    }

    /// Seconds building and compiling the step program took (prepare not included: see
    /// [`Generator::prepare_seconds`]).
    pub fn compile_seconds(&self) -> f64 {
        self.compile_seconds
    }

    /// Seconds the runtime's prepare took (slab, weight upload and packing).
    pub fn prepare_seconds(&self) -> f64 {
        self.prepared.prepare_seconds()
    }

    /// Bytes of the runtime's slab.
    pub fn slab_bytes(&self) -> usize {
        self.prepared.slab_bytes()
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
        let (vocab, bound) = (self.config.vocab, self.config.max_seq);
        if prompt.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        if let Some((index, &id)) =
            prompt.iter().enumerate().find(|(_, id)| !(0..vocab as i64).contains(id))
        {
            return Err(GenerateError::TokenOutOfRange { index, id, vocab });
        }
        if prompt.len() + max_new > bound {
            return Err(GenerateError::PastBound { prompt: prompt.len(), new: max_new, bound });
        }
        for (name, t) in self.inputs.iter_mut() {
            if name.starts_with("cache.") {
                t.data_mut().fill(0.0);
            }
        }
        let mut out = Generation {
            prompt: prompt.to_vec(),
            tokens: Vec::with_capacity(max_new),
            logits: Vec::new(),
            prefill_seconds: 0.0,
            decode_seconds: 0.0,
        };
        let steps = if max_new == 0 { prompt.len() } else { prompt.len() + max_new - 1 };
        let mut start = Instant::now();
        for position in 0..steps {
            let token = if position < prompt.len() {
                prompt[position]
            } else {
                out.tokens[position - prompt.len()]
            };
            let logits = self.step(token, position)?;
            if position + 1 >= prompt.len() && out.tokens.len() < max_new {
                out.tokens.push(argmax(&logits).ok_or(GenerateError::NanLogits { position })?);
                if keep_logits {
                    out.logits.push(logits);
                }
            }
            if position + 1 == prompt.len() {
                out.prefill_seconds = start.elapsed().as_secs_f64();
                start = Instant::now();
            }
        }
        if steps > prompt.len() {
            out.decode_seconds = start.elapsed().as_secs_f64();
        }
        Ok(out)
    }

    /// Runs the step of `token` at `position`: its logits `[vocab]`; its keys and values
    /// written into the cache row `position`.
    fn step(&mut self, token: i64, position: usize) -> Result<Vec<f32>, GenerateError> {
        let c = &self.config;
        // Ids below the vocabulary and positions below the bound fit an i32 (checked sizes).
        self.inputs[TOKEN] = HostTensor::from_i32([1], vec![token as i32])?;
        self.inputs[POSITION] = HostTensor::from_i32([1], vec![position as i32])?;
        if position > 0 {
            // Row position-1 was written by the previous step: attend to it from now on.
            self.inputs[MASK].data_mut()[position - 1] = 0.0;
        } else {
            self.inputs[MASK].data_mut().copy_from_slice(&mask(0, c.max_seq));
        }
        let mut outputs = self.prepared.execute(&self.inputs)?;
        let (t, hd) = (c.max_seq, c.head_dim);
        for l in 0..c.layers {
            for value in [false, true] {
                let present = &outputs[&LlamaConfig::present_name(l, value)];
                let cache = self.inputs[&LlamaConfig::cache_name(l, value)].data_mut();
                for (h, row) in present.data().chunks_exact(hd).enumerate() {
                    let at = (h * t + position) * hd;
                    cache[at..at + hd].copy_from_slice(row);
                }
            }
        }
        let logits = outputs.swap_remove(LOGITS).map(HostTensor::into_data).unwrap_or_default();
        Ok(logits)
    }
}

/// The additive mask of a step at `position`: 0 for rows `0..position`, `-inf` for the rest.
fn mask(position: usize, bound: usize) -> Vec<f32> {
    (0..bound).map(|j| if j < position { 0.0 } else { f32::NEG_INFINITY }).collect()
}

/// The first position of the largest value; `None` when any value is NaN or there is none.
fn argmax(values: &[f32]) -> Option<i64> {
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
        assert_eq!(mask(2, 4), vec![0.0, 0.0, f32::NEG_INFINITY, f32::NEG_INFINITY]);
    }
}
