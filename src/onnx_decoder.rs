//! Greedy generation with a decoder step exported to ONNX with its KV cache as graph inputs
//! and outputs (`past_key_values.{i}.key` / `.value` in, `present.{i}.key` / `.value` out, as
//! `torch.onnx.export` of a transformers model with a cache writes them), compiled once.
//!
//! lumen's ONNX importer gives the model's symbolic dimensions fixed lengths, so the loop runs
//! programs of fixed shapes compiled for the bound `T` (positions: prompt plus new tokens): a
//! decode step of 1 token and, for a prompt of several, a prefill step of `chunk` tokens (the
//! last chunk padded), both reading a cache of `T - 1` slots per cache input: slot `j` holds
//! position `j`'s keys (or values). The slots not yet written are hidden by the model's own
//! `attention_mask` (0 there), which the exported attention turns into an additive mask of the
//! float's lowest value: their weights after the softmax are exactly 0, so a padded step gives
//! the logits of the unpadded one (to rounding). After each step the generator copies the
//! step's own rows of every `present` output (its last `chunk` rows) into the cache slots of
//! their positions, `heads x head_dim` values per cache tensor and token; the cache tensors are
//! handed to each execute and back (the CPU runtime reads them in place). This is ONNX
//! Runtime GenAI's "past and present share a buffer" layout, with the copy of the new rows on
//! the host. Its cost: every step attends over all `T - 1 + chunk` keys, and writes its whole
//! `present` outputs.
//!
//! What the model must declare: `input_ids` `[1, q]` (int64 or int32), `attention_mask`
//! `[1, past + q]` (a padded cache needs it), `position_ids` `[1, q]` (without it the model
//! would number positions after the padded cache), and for each cache tensor an input of rank
//! 4 `[1, heads, past, head_dim]` whose name contains `past` and whose third dimension is
//! symbolic; each is paired with the output named alike with `present` for `past_key_values`
//! or `past`, else with the outputs after the logits, in order. The output `logits` `[1, q,
//! vocab]` (or the first output) gives the next token: the first position of its largest value.

use std::time::Instant;

use lumen_compiler::{CompileOptions, CompiledProgram, DType, Target};
use lumen_onnx::signature::{DeclaredDim, DeclaredInput, declared_inputs};
use lumen_onnx::{ImportOptions, Imported, import};
use lumen_runtime::{HostTensor, PreparedProgram, Runtime, Tensors};

use crate::generate::{GenerateError, Generation, Limits, greedy};

/// A cache input and the output that returns it with the step's rows appended.
#[derive(Debug, Clone)]
struct CacheIo {
    past: String,
    present: String,
    heads: usize,
    head_dim: usize,
}

/// The decoder's signature, from its declared inputs and its outputs.
#[derive(Debug, Clone)]
struct Layout {
    ids: (String, DType),
    mask: (String, DType),
    positions: (String, DType),
    caches: Vec<CacheIo>,
    logits: String,
}

/// One imported, compiled and prepared step of `chunk` tokens.
struct OnnxStep {
    chunk: usize,
    imported: Imported,
    program: CompiledProgram,
    prepared: Box<dyn PreparedProgram>,
    // Every program input by program name; the caches are moved in for each execute.
    inputs: Tensors,
}

/// A decoder step exported to ONNX, imported for a bound of `T` positions, compiled and
/// prepared once (see the module docs), with its KV cache on the host.
pub struct OnnxDecoder {
    layout: Layout,
    bound: usize,
    vocab: usize,
    decode: OnnxStep,
    prefill: Option<OnnxStep>,
    // Per cache input, `[1, heads, T - 1, head_dim]`.
    caches: Vec<HostTensor>,
    compile_seconds: f64,
}

impl std::fmt::Debug for OnnxDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxDecoder")
            .field("bound", &self.bound)
            .field("caches", &self.layout.caches.len())
            .field("prefill_chunk", &self.prefill_chunk())
            .finish_non_exhaustive()
    }
}

fn not_a_decoder(why: impl Into<String>) -> GenerateError {
    GenerateError::NotADecoder(why.into())
}

/// The element type of an index input: int64 or int32.
fn index_dtype(input: &DeclaredInput) -> Result<DType, GenerateError> {
    match input.elem_type {
        lumen_onnx::proto::data_type::INT64 => Ok(DType::I64),
        lumen_onnx::proto::data_type::INT32 => Ok(DType::I32),
        t => Err(not_a_decoder(format!(
            "input `{}` is {}, expected int64 or int32",
            input.name,
            lumen_onnx::proto::data_type::name(t)
        ))),
    }
}

/// Reads the decoder's layout from its declared inputs (the outputs are paired after import).
fn layout_of(declared: &[DeclaredInput]) -> Result<Layout, GenerateError> {
    let find = |name: &str, why: &str| {
        declared
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| not_a_decoder(format!("no input `{name}` ({why})")))
    };
    let ids = find("input_ids", "the token ids [1, q]")?;
    let mask = find("attention_mask", "it hides the cache slots not yet written")?;
    let positions = find(
        "position_ids",
        "without it the model numbers positions after the padded cache, not the prompt",
    )?;
    let known = [&ids.name, &mask.name, &positions.name];
    let mut caches = Vec::new();
    for input in declared.iter().filter(|i| !known.contains(&&i.name)) {
        let dims = input.dims.as_deref().unwrap_or(&[]);
        let (heads, head_dim) = match dims {
            [
                _,
                DeclaredDim::Fixed(h),
                DeclaredDim::Named(_) | DeclaredDim::Unknown,
                DeclaredDim::Fixed(d),
            ] if input.name.contains("past") => (*h, *d),
            [_, h, _, d] if input.name.contains("past") => {
                let why = if !matches!(h, DeclaredDim::Fixed(_)) {
                    "its heads axis (the second) is not a fixed number"
                } else if !matches!(d, DeclaredDim::Fixed(_)) {
                    "its head_dim axis (the fourth) is not a fixed number"
                } else {
                    "its past axis (the third) is a fixed number, not symbolic"
                };
                let shown: Vec<String> = dims.iter().map(ToString::to_string).collect();
                return Err(not_a_decoder(format!(
                    "cache input `{}` is declared [{}]: {why}",
                    input.name,
                    shown.join(", ")
                )));
            }
            _ => {
                return Err(not_a_decoder(format!(
                    "input `{}` is neither a token input nor a cache input (a name containing \
                     `past`, shape [batch, heads, past, head_dim] with past symbolic)",
                    input.name
                )));
            }
        };
        if input.elem_type != lumen_onnx::proto::data_type::FLOAT {
            return Err(not_a_decoder(format!("cache input `{}` is not float32", input.name)));
        }
        caches.push(CacheIo { past: input.name.clone(), present: String::new(), heads, head_dim });
    }
    if caches.is_empty() {
        return Err(not_a_decoder("no cache input (a name containing `past`)"));
    }
    Ok(Layout {
        ids: (ids.name.clone(), index_dtype(ids)?),
        mask: (mask.name.clone(), index_dtype(mask)?),
        positions: (positions.name.clone(), index_dtype(positions)?),
        caches,
        logits: String::new(),
    })
}

/// Pairs every cache input with its output, and finds the logits, among `outputs` (ONNX names,
/// graph order).
fn pair_outputs(layout: &mut Layout, outputs: &[String]) -> Result<(), GenerateError> {
    let logits = outputs
        .iter()
        .find(|o| *o == "logits")
        .or_else(|| outputs.first())
        .ok_or_else(|| not_a_decoder("the model has no output"))?
        .clone();
    let rest: Vec<&String> = outputs.iter().filter(|o| **o != logits).collect();
    let by_name = |past: &str| {
        let renamed = if past.contains("past_key_values") {
            past.replacen("past_key_values", "present", 1)
        } else {
            past.replacen("past", "present", 1)
        };
        rest.iter().find(|o| ***o == renamed).map(|o| o.to_string())
    };
    // By name only: outputs paired by their order would silently mix layers up if the export
    // ordered them otherwise.
    let mut presents = Vec::new();
    for c in &layout.caches {
        let Some(p) = by_name(&c.past) else {
            return Err(not_a_decoder(format!(
                "no output pairs with cache input `{}` (expected one named like it with `present` \
                 for `past_key_values` or `past`; outputs besides `{logits}`: {})",
                c.past,
                rest.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", ")
            )));
        };
        presents.push(p);
    }
    for (c, p) in layout.caches.iter_mut().zip(presents) {
        c.present = p;
    }
    layout.logits = logits;
    Ok(())
}

impl OnnxDecoder {
    /// Imports the decoder step in `bytes` (an ONNX model) for a bound of `bound` positions,
    /// compiles it for `runtime`'s target (fused; weights resident on the CPU) and prepares
    /// it: a decode step of 1 token and, for `prefill_chunk` above 1, a prefill step of
    /// `min(prefill_chunk, bound)` tokens.
    ///
    /// # Errors
    /// [`GenerateError::NotADecoder`] for a model without the inputs and outputs the module
    /// docs list (naming what is missing), [`GenerateError::Onnx`] for an import error,
    /// [`GenerateError::Compile`] and [`GenerateError::Runtime`].
    pub fn new(
        bytes: &[u8],
        runtime: &dyn Runtime,
        bound: usize,
        prefill_chunk: usize,
    ) -> Result<Self, GenerateError> {
        if bound < 2 {
            return Err(not_a_decoder(format!(
                "a bound of {bound} position leaves no cache (give at least 2)"
            )));
        }
        let start = Instant::now();
        let mut layout = layout_of(&declared_inputs(bytes)?)?;
        let chunk = prefill_chunk.clamp(1, bound);
        let target = runtime.target();
        let mut build = |q: usize,
                         name: &str|
         -> Result<(Imported, CompiledProgram), GenerateError> {
            let past = bound - 1;
            let mut shapes = std::collections::BTreeMap::new();
            shapes.insert(layout.ids.0.clone(), vec![1, q]);
            shapes.insert(layout.mask.0.clone(), vec![1, past + q]);
            shapes.insert(layout.positions.0.clone(), vec![1, q]);
            for c in &layout.caches {
                shapes.insert(c.past.clone(), vec![1, c.heads, past, c.head_dim]);
            }
            let imported = import(bytes, &ImportOptions { shapes, values: Tensors::new() })?;
            let outputs: Vec<String> = imported.outputs.iter().map(|(o, _)| o.clone()).collect();
            pair_outputs(&mut layout, &outputs)?;
            let options = CompileOptions {
                fuse: true,
                name: name.to_string(),
                in_place: true,
                resident_weights: target == Target::Cpu,
                ..target.options()
            };
            let program = imported.graph.compile(&options)?;
            Ok((imported, program))
        };
        let decode = build(1, "onnx-decode")?;
        let prefill = (chunk > 1).then(|| build(chunk, "onnx-prefill")).transpose()?;
        let compile_seconds = start.elapsed().as_secs_f64();
        let prepare = |(imported, program): (Imported, CompiledProgram), chunk: usize| {
            let prepared = runtime.prepare(&program, &imported.weights)?;
            Ok::<_, GenerateError>(OnnxStep {
                chunk,
                imported,
                program,
                prepared,
                inputs: Tensors::new(),
            })
        };
        // A model that returns the last position's logits only (`logits_to_keep = 1`) would
        // give a padded chunk's padding: its prompt runs one token at a time instead.
        let last_only = |(imported, _): &(Imported, CompiledProgram)| {
            output_shape(imported, &layout.logits).is_some_and(|s| s.len() == 3 && s[1] == 1)
        };
        let prefill = prefill.filter(|p| !last_only(p));
        let decode = prepare(decode, 1)?;
        let prefill = prefill.map(|p| prepare(p, chunk)).transpose()?;
        let vocab = output_shape(&decode.imported, &layout.logits)
            .and_then(|s| s.last().copied())
            .filter(|&v| v > 0)
            .ok_or_else(|| {
                not_a_decoder(format!("output `{}` has no vocabulary axis", layout.logits))
            })?;
        let caches = layout
            .caches
            .iter()
            .map(|c| HostTensor::zeros([1, c.heads, bound - 1, c.head_dim]))
            .collect::<Result<_, _>>()?;
        Ok(Self { layout, bound, vocab, decode, prefill, caches, compile_seconds })
    }

    /// The bound `T`: positions the programs were compiled for.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The vocabulary size (the logits' last axis).
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Cache tensors (one per cache input) and the bytes they hold on the host.
    pub fn cache_bytes(&self) -> usize {
        self.caches.iter().map(|c| c.data().len() * 4).sum()
    }

    /// The compiled decode step (its figures: launches, slab bytes, FLOP).
    pub fn program(&self) -> &CompiledProgram {
        &self.decode.program
    }

    /// Prompt tokens per prefill step at most (1: the prompt runs through the decode step).
    pub fn prefill_chunk(&self) -> usize {
        self.prefill.as_ref().map_or(1, |p| p.chunk)
    }

    /// Seconds importing and compiling the programs took.
    pub fn compile_seconds(&self) -> f64 {
        self.compile_seconds
    }

    /// Seconds the runtime's prepares took.
    pub fn prepare_seconds(&self) -> f64 {
        self.decode.prepared.prepare_seconds()
            + self.prefill.as_ref().map_or(0.0, |p| p.prepared.prepare_seconds())
    }

    /// Bytes of the runtime's slabs (both programs').
    pub fn slab_bytes(&self) -> usize {
        self.decode.prepared.slab_bytes()
            + self.prefill.as_ref().map_or(0, |p| p.prepared.slab_bytes())
    }

    /// Greedily generates `max_new` tokens after `prompt`, keeping each step's logits when
    /// `keep_logits`; the cache is cleared first.
    ///
    /// # Errors
    /// [`GenerateError::EmptyPrompt`], [`GenerateError::TokenOutOfRange`],
    /// [`GenerateError::PastBound`] (checked before any step), [`GenerateError::NanLogits`],
    /// and the runtime's errors.
    pub fn generate(
        &mut self,
        prompt: &[i64],
        max_new: usize,
        keep_logits: bool,
    ) -> Result<Generation, GenerateError> {
        let limits = Limits { vocab: self.vocab, bound: self.bound, chunk: self.prefill_chunk() };
        for c in &mut self.caches {
            c.data_mut().fill(0.0);
        }
        greedy(prompt, max_new, keep_logits, limits, |tokens, start| self.run(tokens, start))
    }

    /// Runs `tokens` (at most a step's chunk) at positions `start..`: the prefill step for
    /// more than one token, else the decode step. Returns the last token's logits and copies
    /// the tokens' cache rows into slots `start..` (those below `T - 1`).
    fn run(&mut self, tokens: &[i64], start: usize) -> Result<Vec<f32>, GenerateError> {
        let step = match &mut self.prefill {
            Some(p) if tokens.len() > 1 => p,
            _ => &mut self.decode,
        };
        let (m, q, past) = (tokens.len(), step.chunk, self.bound - 1);
        let layout = &self.layout;
        // Padding tokens (past `m`) repeat the last real one at its position; their rows are
        // never kept, and no real token sees them (they come after it).
        let ids: Vec<i64> = (0..q).map(|c| tokens[c.min(m - 1)]).collect();
        let positions: Vec<i64> = (0..q).map(|c| (start + c.min(m - 1)) as i64).collect();
        let mask: Vec<i64> = (0..past + q)
            .map(|j| i64::from(if j < past { j < start } else { j - past < m }))
            .collect();
        let given = [
            (&layout.ids, [1, q], ids),
            (&layout.positions, [1, q], positions),
            (&layout.mask, [1, past + q], mask),
        ];
        for ((name, dtype), shape, values) in given {
            for input in step.imported.inputs.iter().filter(|i| &i.onnx_name == name) {
                let t = match (input.cast_from, dtype) {
                    (Some(_), _) => {
                        HostTensor::new(shape, values.iter().map(|&v| v as f32).collect())?
                    }
                    // Ids below the vocabulary, positions and mask bits fit an i32.
                    (None, DType::I32) => {
                        HostTensor::from_i32(shape, values.iter().map(|&v| v as i32).collect())?
                    }
                    (None, _) => HostTensor::from_i64(shape, values.clone())?,
                };
                step.inputs.insert(input.name.clone(), t);
            }
        }
        let names: Vec<Option<String>> = layout
            .caches
            .iter()
            .map(|c| {
                let input = step.imported.inputs.iter().find(|i| i.onnx_name == c.past);
                input.map(|i| i.name.clone())
            })
            .collect();
        let empty = HostTensor::new([0], Vec::new())?;
        for (name, cache) in names.iter().zip(self.caches.iter_mut()) {
            if let Some(name) = name {
                step.inputs.insert(name.clone(), std::mem::replace(cache, empty.clone()));
            }
        }
        let result = step.prepared.execute(&step.inputs);
        // The caches come back whatever the result, so an error leaves the decoder usable.
        for (name, cache) in names.iter().zip(self.caches.iter_mut()) {
            if let Some(t) = name.as_ref().and_then(|n| step.inputs.swap_remove(n)) {
                *cache = t;
            }
        }
        let mut outputs = result?;
        let program_name = |onnx: &str| {
            step.imported.outputs.iter().find(|(o, _)| o == onnx).map(|(_, p)| p.clone())
        };
        for (c, cache) in layout.caches.iter().zip(self.caches.iter_mut()) {
            let present =
                program_name(&c.present).and_then(|n| outputs.get(&n)).ok_or_else(|| {
                    not_a_decoder(format!("output `{}` did not come back", c.present))
                })?;
            let (rows, hd) = (past + q, c.head_dim);
            if present.shape() != [1, c.heads, rows, hd] {
                return Err(not_a_decoder(format!(
                    "output `{}` is {:?}, expected the cache with the step's rows appended, {:?}",
                    c.present,
                    present.shape(),
                    [1, c.heads, rows, hd]
                )));
            }
            // present [1, heads, past + q, hd]: rows past.. are the step's; slot start + r.
            let kept = m.min(past.saturating_sub(start));
            let cache = cache.data_mut();
            for (h, head) in present.data().chunks_exact(rows * hd).enumerate() {
                let from = past * hd;
                let at = (h * past + start) * hd;
                cache[at..at + kept * hd].copy_from_slice(&head[from..from + kept * hd]);
            }
        }
        let logits = program_name(&layout.logits)
            .and_then(|n| outputs.swap_remove(&n))
            .map(HostTensor::into_data)
            .unwrap_or_default();
        let vocab = self.vocab;
        if logits.len() != q * vocab {
            return Err(not_a_decoder(format!(
                "output `{}` holds {} values, expected [1, {q}, {vocab}]",
                layout.logits,
                logits.len()
            )));
        }
        Ok(logits[(m - 1) * vocab..m * vocab].to_vec())
    }
}

/// The shape of ONNX output `onnx` as the program `imported` computes it.
fn output_shape(imported: &Imported, onnx: &str) -> Option<Vec<usize>> {
    let (_, name) = imported.outputs.iter().find(|(o, _)| o == onnx)?;
    let hlir = imported.graph.hlir();
    let types = hlir.infer().ok()?;
    let (_, node) = hlir.outputs().into_iter().find(|(n, _)| n == name)?;
    types.get(node.index()).map(|t| t.shape.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(pasts: &[&str]) -> Layout {
        let caches = pasts
            .iter()
            .map(|p| CacheIo { past: p.to_string(), present: String::new(), heads: 2, head_dim: 8 })
            .collect();
        let index = |n: &str| (n.to_string(), DType::I64);
        Layout {
            ids: index("input_ids"),
            mask: index("attention_mask"),
            positions: index("position_ids"),
            caches,
            logits: String::new(),
        }
    }

    #[test]
    fn cache_outputs_pair_by_name_only() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut l = layout(&["past_key_values.0.key", "past_key_values.0.value"]);
        // Outputs in another order than the inputs: paired by name all the same.
        let outs = names(&["logits", "present.0.value", "present.0.key"]);
        pair_outputs(&mut l, &outs).unwrap();
        assert_eq!(l.logits, "logits");
        assert_eq!(l.caches[0].present, "present.0.key");
        assert_eq!(l.caches[1].present, "present.0.value");
        // Renamed outputs: refused, listing them, not guessed by order.
        let mut l = layout(&["past.0.key"]);
        let err = pair_outputs(&mut l, &names(&["logits", "cache_out_0"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "not a decoder step lumen can drive: no output pairs with cache input `past.0.key` \
             (expected one named like it with `present` for `past_key_values` or `past`; outputs \
             besides `logits`: `cache_out_0`)"
        );
    }
}
