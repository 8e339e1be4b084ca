//! A decoder LLM of the Llama architecture (Touvron et al. 2023, as Hugging Face transformers'
//! `LlamaForCausalLM` computes it) as one DSL program: a **step** of tokens in, their logits
//! out, with a KV cache of a fixed bound `T` (positions `0..T`). The program is compiled once
//! for the bound and runs every step of a generation whatever the prompt length: the tokens'
//! positions are an input (they pick the rotary angles by a gather) and an additive mask hides
//! what a token may not see (0 to keep, `-inf` to drop). Two forms ([`Chunk`]):
//!
//! - **Symbolic** (`Chunk::Symbolic(N)`, [`crate::symbolic`]): the token axis is the symbol
//!   `seq <= N` and the cache's live rows the symbol `total <= T`. The cache is the runtime's
//!   state ([`crate::Graph::state`], `cache.{l}.k` / `.v` `[total, kv_heads, head_dim]`): the
//!   step appends its keys and values at rows `total - seq .. total` in place
//!   ([`crate::Tensor::append_rows`]; O(1) per token, nothing moved) and attends over the
//!   `total` live rows only, under a causal `mask` `[seq, total]`. One program runs a prompt's
//!   chunks at their own lengths and every decode step at 1.
//! - **Fixed** (`Chunk::Fixed(n)`, for a runtime that binds no symbols): `n` tokens, the cache
//!   the caller's inputs `[kv_heads, T, head_dim]` (all `T` rows attended, `mask` `[n, T]`
//!   hiding those not written yet). The chunk's own keys and values are not in the cache when
//!   the step runs: their scores are computed beside the cache's (`chunk_mask` `[n, n]`) and
//!   share one softmax split in two parts (a common max, the two sums of exponentials added),
//!   so the step never copies the cache; the caller writes the outputs `present.{l}.k` / `.v`
//!   into the cache rows of the chunk's positions (`lumen::generate` does).
//!
//! The layers, as transformers writes them: `h = x + o_proj(attn(rope(q_proj(rms(x))),
//! rope(k_proj(rms(x))), v_proj(rms(x))))`, `x' = h + down_proj(silu(gate_proj(rms(h))) *
//! up_proj(rms(h)))`, logits `lm_head(rms(x_L))`. Rotary embedding in transformers' half-split
//! form: `q * cos + rotate_half(q) * sin` with `rotate_half([a, b]) = [-b, a]` over the two
//! halves of the head, `cos`/`sin` rows `[T, head_dim]` = `cos`/`sin` of `pos * inv_freq`
//! repeated twice, `inv_freq[i] = theta^(-2i / head_dim)`. Grouped-query attention: kv head
//! `j` serves query heads `j*g .. j*g+g` (`g = heads / kv_heads`), computed as a batch of
//! `kv_heads` matmuls of `g` query rows each, so no key or value is repeated.

use crate::dsl::{Graph, Tensor};
use crate::dtype::DType;
use crate::error::CompileError;
use crate::symbols::Dim;
use crate::tensor::TensorError;

/// The hyper-parameters of a Llama-architecture decoder (the fields of transformers'
/// `LlamaConfig` the forward pass reads), and the bound the step program is compiled for.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// Vocabulary size V: rows of the embedding and of the LM head.
    pub vocab: usize,
    /// Model width D.
    pub hidden: usize,
    /// Hidden width of the SwiGLU MLP.
    pub intermediate: usize,
    /// Decoder layers.
    pub layers: usize,
    /// Query heads H.
    pub heads: usize,
    /// Key/value heads (dividing `heads`; equal to it without grouped-query attention).
    pub kv_heads: usize,
    /// Width of one head (transformers' `head_dim`, default `hidden / heads`).
    pub head_dim: usize,
    /// Rotary base θ (`rope_theta`).
    pub rope_theta: f64,
    /// RMSNorm epsilon (`rms_norm_eps`).
    pub eps: f32,
    /// Whether the LM head is the embedding (`tie_word_embeddings`): no `lm_head.weight`.
    pub tied_embeddings: bool,
    /// The bound T: positions `0..T` a generation may fill (prompt and new tokens together).
    pub max_seq: usize,
}

/// Name of the input holding the step's token ids, i32 `[chunk]`.
pub const TOKEN: &str = "token";
/// Name of the input holding the step's positions, i32 `[chunk]` (`0..T`).
pub const POSITION: &str = "position";
/// Name of the additive attention mask, f32: symbolic steps `[seq, total]`, 0 where the row
/// is at or before the token's position, `-inf` after; fixed steps `[chunk, T]` over the cache
/// input, 0 for the rows written so far, `-inf` for the rest.
pub const MASK: &str = "mask";
/// Name of a fixed step's additive causal mask among the chunk's tokens, f32 `[chunk, chunk]`:
/// 0 where the column's token is at or before the row's, `-inf` after.
pub const CHUNK_MASK: &str = "chunk_mask";
/// Name of the logits output, f32 `[chunk, V]`.
pub const LOGITS: &str = "logits";
/// Name of the rotary cosine table, a weight f32 `[T, head_dim]` (made by
/// [`LlamaConfig::rotary_tables`], not read from a checkpoint).
pub const ROPE_COS: &str = "rope.cos";
/// Name of the rotary sine table, f32 `[T, head_dim]`.
pub const ROPE_SIN: &str = "rope.sin";

impl LlamaConfig {
    /// Query heads served by one key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// Shape of one layer's key (or value) cache input of a fixed step: `[kv_heads, T,
    /// head_dim]`, f32 (a symbolic step's state is `[T, kv_heads, head_dim]`, the same bytes).
    pub fn cache_shape(&self) -> [usize; 3] {
        [self.kv_heads, self.max_seq, self.head_dim]
    }

    /// Bytes of the whole KV cache: keys and values of every layer (4 bytes per f32).
    pub fn cache_bytes(&self) -> usize {
        2 * self.layers * self.cache_shape().iter().product::<usize>() * 4
    }

    /// Name of layer `l`'s key cache input (`cache.{l}.k`) or value cache (`cache.{l}.v`).
    pub fn cache_name(l: usize, value: bool) -> String {
        format!("cache.{l}.{}", if value { "v" } else { "k" })
    }

    /// Name of layer `l`'s output holding the step's keys (`present.{l}.k`, f32
    /// `[kv_heads, chunk, head_dim]`, after the rotary embedding) or values (`present.{l}.v`).
    pub fn present_name(l: usize, value: bool) -> String {
        format!("present.{l}.{}", if value { "v" } else { "k" })
    }

    /// The checkpoint's weights the program reads, with their shapes, named as transformers
    /// saves them (`model.layers.{l}.self_attn.q_proj.weight`, ...). Linear weights are
    /// PyTorch's `[out, in]` (`y = x W^T`); the program reads them transposed through a view.
    pub fn weights(&self) -> Vec<(String, Vec<usize>)> {
        let (d, f) = (self.hidden, self.intermediate);
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let mut w = vec![("model.embed_tokens.weight".to_string(), vec![self.vocab, d])];
        for l in 0..self.layers {
            let p = format!("model.layers.{l}");
            w.push((format!("{p}.input_layernorm.weight"), vec![d]));
            w.push((format!("{p}.self_attn.q_proj.weight"), vec![q, d]));
            w.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, d]));
            w.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, d]));
            w.push((format!("{p}.self_attn.o_proj.weight"), vec![d, q]));
            w.push((format!("{p}.post_attention_layernorm.weight"), vec![d]));
            w.push((format!("{p}.mlp.gate_proj.weight"), vec![f, d]));
            w.push((format!("{p}.mlp.up_proj.weight"), vec![f, d]));
            w.push((format!("{p}.mlp.down_proj.weight"), vec![d, f]));
        }
        w.push(("model.norm.weight".to_string(), vec![d]));
        if !self.tied_embeddings {
            w.push(("lm_head.weight".to_string(), vec![self.vocab, d]));
        }
        w
    }

    /// The rotary tables `(cos, sin)`, each f32 `[T, head_dim]` row-major: row `p` is
    /// `cos`/`sin` of `p * inv_freq` over the first half of the head and again over the
    /// second, `inv_freq[i] = 1 / theta^(2i / head_dim)`. Computed in f64 and rounded once
    /// (transformers computes the angles in f32; the two differ by an ulp or so of the angle).
    ///
    /// # Errors
    /// [`TensorError::Alloc`] when the tables cannot be allocated (a bound of billions).
    pub fn rotary_tables(&self) -> Result<(Vec<f32>, Vec<f32>), TensorError> {
        let (t, hd) = (self.max_seq, self.head_dim);
        let half = hd / 2;
        let len = t.checked_mul(hd).ok_or(TensorError::Alloc { bytes: usize::MAX })?;
        let table = || -> Result<Vec<f32>, TensorError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len)
                .map_err(|_| TensorError::Alloc { bytes: len.saturating_mul(4) })?;
            v.resize(len, 0.0);
            Ok(v)
        };
        let (mut cos, mut sin) = (table()?, table()?);
        for p in 0..t {
            for i in 0..half {
                let inv_freq = 1.0 / self.rope_theta.powf((2 * i) as f64 / hd as f64);
                let angle = p as f64 * inv_freq;
                for j in [i, i + half] {
                    cos[p * hd + j] = angle.cos() as f32;
                    sin[p * hd + j] = angle.sin() as f32;
                }
            }
        }
        Ok((cos, sin))
    }

    /// Checks the sizes: all positive, `heads` a multiple of `kv_heads`, an even `head_dim`
    /// (the rotary embedding rotates halves), a positive finite θ and ε.
    ///
    /// # Errors
    /// [`CompileError::Program`] naming the first bad size.
    pub fn check(&self) -> Result<(), CompileError> {
        let bad = |message: String| CompileError::Program { program: "llama", message };
        let sizes = [
            ("vocab_size", self.vocab),
            ("hidden_size", self.hidden),
            ("intermediate_size", self.intermediate),
            ("num_hidden_layers", self.layers),
            ("num_attention_heads", self.heads),
            ("num_key_value_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("the bound (max positions)", self.max_seq),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(bad(format!("{name} is 0")));
        }
        if self.heads % self.kv_heads != 0 {
            return Err(bad(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.heads, self.kv_heads
            )));
        }
        if self.head_dim % 2 != 0 {
            return Err(bad(format!(
                "head_dim {} is odd: the rotary embedding rotates two halves",
                self.head_dim
            )));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return Err(bad(format!("rope_theta {} is not a positive number", self.rope_theta)));
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(bad(format!("rms_norm_eps {} is not a non-negative number", self.eps)));
        }
        Ok(())
    }
}

/// `x` `[n, heads, head_dim]` rotated by each token's angles `cos`, `sin` `[n, 1, head_dim]`:
/// `x * cos + [-x2, x1] * sin` with `x1`, `x2` the two halves of each row.
#[track_caller]
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor, head_dim: usize) -> Tensor {
    let half = head_dim / 2;
    let x1 = x.slice(-1, 0, half);
    let x2 = x.slice(-1, half, head_dim);
    let rotated = x.graph().concat(&[-x2, x1], -1);
    x * cos + rotated * sin
}

/// The step of `config` (see the module docs), of the form `chunk` says. Inputs [`TOKEN`] and
/// [`POSITION`] (i32 `[seq]`) and [`MASK`]; weights [`LlamaConfig::weights`] plus [`ROPE_COS`]
/// and [`ROPE_SIN`]; output [`LOGITS`] `[seq, V]`.
///
/// - [`Chunk::Symbolic`]`(N)`: `seq <= N` and `total <= T` symbols; `mask` f32 `[seq, total]`;
///   states `cache.{l}.k` / `cache.{l}.v` f32 `[total, kv_heads, head_dim]`, appended to.
/// - [`Chunk::Fixed`]`(n)`: `seq = n`; `mask` f32 `[n, T]` over the cache, [`CHUNK_MASK`] f32
///   `[n, n]`; inputs `cache.{l}.k` / `cache.{l}.v` f32 `[kv_heads, T, head_dim]`; outputs
///   `present.{l}.k` / `present.{l}.v` `[kv_heads, n, head_dim]` too. `Fixed(1)` is a decode
///   step; a larger `n` runs a prompt's tokens together (a prefill).
///
/// # Errors
/// [`CompileError::Program`] for sizes [`LlamaConfig::check`] refuses or a zero chunk.
pub fn llama_step(config: &LlamaConfig, chunk: Chunk) -> Result<Graph, CompileError> {
    config.check()?;
    let c = config;
    let mut cx = Graph::new();
    let s: Dim = match chunk {
        Chunk::Fixed(n) if n > 0 => Dim::Fixed(n),
        Chunk::Symbolic(n) if n > 0 => cx.symbol(SEQ, n).into(),
        _ => {
            return Err(CompileError::Program {
                program: "llama",
                message: "the chunk of tokens per step is 0".to_string(),
            });
        }
    };
    let (t, hd, kvh, g, n) = (c.max_seq, c.head_dim, c.kv_heads, c.group(), s.bound());
    let tokens = cx.input_dims(TOKEN, [s], DType::I32);
    let positions = cx.input_dims(POSITION, [s], DType::I32);
    // Where the keys and values of earlier positions come from.
    let cache = match chunk {
        Chunk::Symbolic(_) => {
            let total: Dim = cx.symbol(TOTAL, t).into();
            let mask = cx.input_dims(MASK, [s, total], DType::F32);
            let states = (0..c.layers)
                .map(|l| {
                    let dims = || [total, Dim::Fixed(kvh), Dim::Fixed(hd)];
                    let k = cx.state(LlamaConfig::cache_name(l, false), dims());
                    let v = cx.state(LlamaConfig::cache_name(l, true), dims());
                    [k, v]
                })
                .collect();
            Cache::State { mask, states }
        }
        Chunk::Fixed(_) => {
            let mask = cx.input_dims(MASK, [s, Dim::Fixed(t)], DType::F32);
            let chunk_mask = cx.input_dims(CHUNK_MASK, [s, s], DType::F32);
            let inputs = (0..c.layers)
                .map(|l| {
                    let k = cx.input(LlamaConfig::cache_name(l, false), c.cache_shape());
                    let v = cx.input(LlamaConfig::cache_name(l, true), c.cache_shape());
                    // [kv_heads, 1, T, hd]: one matrix per kv head, broadcast over its g
                    // query heads.
                    [k.reshape([kvh, 1, t, hd]), v.reshape([kvh, 1, t, hd])]
                })
                .collect();
            Cache::Inputs { mask, chunk_mask, inputs }
        }
    };
    let weights: Vec<Tensor> =
        c.weights().into_iter().map(|(name, shape)| cx.weight(name, shape)).collect();
    let mut weights = weights.into_iter();
    let mut next = || weights.next().expect("LlamaConfig::weights lists every weight in order");
    let embed = next();
    let cos_table = cx.weight(ROPE_COS, [t, hd]);
    let sin_table = cx.weight(ROPE_SIN, [t, hd]);
    // [n, 1, hd]: one row of angles per token, broadcast over its heads.
    let cos = cos_table.gather(&positions).reshape([n, 1, hd]);
    let sin = sin_table.gather(&positions).reshape([n, 1, hd]);
    // `y = x W^T` for a PyTorch `[out, in]` weight, the transpose a view.
    let linear = |x: &Tensor, w: &Tensor| x.matmul(w.transpose(0, 1));
    let scale = 1.0 / (hd as f32).sqrt();
    let mut x = embed.gather(&tokens);
    for l in 0..c.layers {
        let [norm1, wq, wk, wv, wo, norm2, wg, wu, wd] = std::array::from_fn(|_| next());
        let h = x.rms_norm(&norm1, c.eps);
        // Heads first: [kv_heads, g, n, hd], query heads grouped under their kv head.
        let q = rotate(&linear(&h, &wq).reshape([n, c.heads, hd]), &cos, &sin, hd);
        let q = q.permute(&[1, 0, 2]).reshape([kvh, g, n, hd]);
        // The step's keys and values, [n, kv_heads, hd].
        let k = rotate(&linear(&h, &wk).reshape([n, kvh, hd]), &cos, &sin, hd);
        let v = linear(&h, &wv).reshape([n, kvh, hd]);
        let ctx = match &cache {
            Cache::State { mask, states } => {
                // Appended in place at rows total - n .. total; then one softmax over the
                // `total` live rows [kvh, g, n, total].
                let [k_state, v_state] = &states[l];
                let keys = k_state.append_rows(&k).permute(&[1, 2, 0]).reshape([kvh, 1, hd, t]);
                let values = v_state.append_rows(&v).permute(&[1, 0, 2]).reshape([kvh, 1, t, hd]);
                let p = (q.matmul(&keys) * scale + mask).softmax(-1);
                p.matmul(&values)
            }
            Cache::Inputs { mask, chunk_mask, inputs } => {
                let [k_cache, v_cache] = &inputs[l];
                let k = k.permute(&[1, 0, 2]).output(LlamaConfig::present_name(l, false));
                let v = v.permute(&[1, 0, 2]).output(LlamaConfig::present_name(l, true));
                let (k, v) = (k.reshape([kvh, 1, n, hd]), v.reshape([kvh, 1, n, hd]));
                // Scores against the cache [kvh, g, n, T] and against the chunk's own keys
                // [kvh, g, n, n]; one softmax over both: a common max, the sums added.
                let cached = q.matmul(k_cache.transpose(-1, -2)) * scale + mask;
                let own = q.matmul(k.transpose(-1, -2)) * scale + chunk_mask;
                let top = cached.max(-1, true).maximum(own.max(-1, true));
                let (e_cached, e_own) = ((cached - &top).exp(), (own - &top).exp());
                let total = e_cached.sum(-1, true) + e_own.sum(-1, true);
                (e_cached.matmul(v_cache) + e_own.matmul(&v)) / total
            }
        };
        let ctx = ctx.reshape([c.heads, n, hd]).permute(&[1, 0, 2]).reshape([n, c.heads * hd]);
        x = x + linear(&ctx, &wo);
        let h = x.rms_norm(&norm2, c.eps);
        let mlp = linear(&h, &wg).silu() * linear(&h, &wu);
        x = x + linear(&mlp, &wd);
    }
    let norm = next();
    let head = if c.tied_embeddings { embed.clone() } else { next() };
    linear(&x.rms_norm(&norm, c.eps), &head).output(LOGITS);
    if let Some(e) = cx.recorded_error() {
        return Err(e);
    }
    Ok(cx)
}

/// The keys and values of earlier positions: a step's cache.
enum Cache {
    /// The runtime's states `cache.{l}.k` / `.v` `[total, kv_heads, head_dim]`, appended in
    /// place; `mask` `[seq, total]`.
    State { mask: Tensor, states: Vec<[Tensor; 2]> },
    /// The caller's inputs `[kv_heads, T, head_dim]` (as `[kv_heads, 1, T, head_dim]`), the
    /// step's own keys and values beside them; `mask` `[n, T]`, `chunk_mask` `[n, n]`.
    Inputs { mask: Tensor, chunk_mask: Tensor, inputs: Vec<[Tensor; 2]> },
}

/// How many tokens a step program takes ([`llama_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Exactly this many per execute (1: the decode step).
    Fixed(usize),
    /// Any number from 1 to this bound per execute: the symbol [`SEQ`] on the token axis.
    Symbolic(usize),
}

/// The symbol of a [`Chunk::Symbolic`] step's token axis.
pub const SEQ: &str = "seq";
/// The symbol of a [`Chunk::Symbolic`] step's live cache rows: the positions before the step
/// plus its tokens (at most the bound T).
pub const TOTAL: &str = "total";
