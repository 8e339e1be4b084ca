//! lumen's models as DSL programs: the golden linear-relu, the MLP of the digits main job,
//! pre-LN transformer encoder blocks, and the vision transformer of the second main job.
//! Each is a short program over the DSL's primitives and composites that a reader can follow
//! next to the framework's forward pass it mirrors; [`crate::programs`] puts the first three
//! behind the CLI's `lumen compile|compare`, and the root crate's model loader builds the MLP
//! and the ViT from a file's tensors and metadata.
//!
//! Their sizes are checked here, before any DSL call, so a bad size is reported in the
//! program's own words (`linear-relu: x is [m, k] = [...]: too large`) rather than as a DSL
//! error pointing at a line of this file.

use crate::composite::multi_head_attention;
use crate::dsl::{Graph, Tensor};
use crate::error::{CompileError, ShapeText};

/// `linear-relu`'s default rows of x (the golden program of the README).
pub const DEFAULT_M: usize = 64;
/// `linear-relu`'s default inner dimension.
pub const DEFAULT_K: usize = 256;
/// `linear-relu`'s default columns of y.
pub const DEFAULT_N: usize = 64;
/// `mlp`'s default layer sizes, input first (the digits MLP of the main job).
pub const DEFAULT_LAYERS: &[usize] = &[64, 128, 64, 10];
/// `mlp`'s default batch rows.
pub const DEFAULT_BATCH: usize = 32;
/// `transformer`'s default batch (sequences).
pub const DEFAULT_TRANSFORMER_BATCH: usize = 2;
/// `transformer`'s default sequence length (tokens per sequence).
pub const DEFAULT_SEQ: usize = 16;
/// `transformer`'s default model width.
pub const DEFAULT_WIDTH: usize = 64;
/// `transformer`'s default attention heads.
pub const DEFAULT_HEADS: usize = 4;
/// `transformer`'s default FFN hidden width.
pub const DEFAULT_FFN: usize = 256;
/// `transformer`'s default encoder blocks.
pub const DEFAULT_BLOCKS: usize = 2;
/// The layer-norm epsilon of the `transformer` (PyTorch's default).
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// Bytes of one f32 element.
const F32_BYTES: usize = 4;

/// Refuses a tensor whose f32 byte size overflows `usize`: `{name} is [{dims}] = [...]: too
/// large`, with the dimension names (`m, k`) so the user sees which sizes to shrink.
fn check_bytes(
    program: &'static str,
    name: &str,
    dims: &str,
    shape: &[usize],
) -> Result<(), CompileError> {
    let bytes = shape.iter().try_fold(F32_BYTES, |acc, &d| acc.checked_mul(d));
    if bytes.is_none() {
        return Err(CompileError::Program {
            program,
            message: format!(
                "{name} is [{dims}] = {}: too large (its byte size overflows usize)",
                ShapeText(shape.to_vec())
            ),
        });
    }
    Ok(())
}

/// `y = relu(x [m, k] x w [k, n] + b [n])`: inputs `x`, weights `w`, `b`, output `y` — the
/// golden program (sizes 64, 256, 64 give the golden plan).
///
/// # Errors
/// [`CompileError::Program`] when a size is zero or a tensor's byte size (4 per f32 element)
/// overflows `usize`.
pub fn linear_relu(m: usize, k: usize, n: usize) -> Result<Graph, CompileError> {
    const PROGRAM: &str = "linear-relu";
    if m == 0 || k == 0 || n == 0 {
        return Err(CompileError::Program {
            program: PROGRAM,
            message: format!("sizes must be positive (m={m}, k={k}, n={n})"),
        });
    }
    check_bytes(PROGRAM, "x", "m, k", &[m, k])?;
    check_bytes(PROGRAM, "w", "k, n", &[k, n])?;
    // t0, t1 and y are [m, n] too.
    check_bytes(PROGRAM, "y", "m, n", &[m, n])?;
    let mut cx = Graph::new();
    let x = cx.input("x", [m, k]);
    let w = cx.weight("w", [k, n]);
    let b = cx.weight("b", [n]);
    (x.matmul(w) + b).relu().output("y");
    Ok(cx)
}

/// A multilayer perceptron over a batch: `layers = [d0, d1, ..., dL]` gives input `x`
/// `[batch, d0]`, weights `w1` `[d0, d1]`, `b1` `[d1]`, ..., `wL`, `bL`, and output `y`
/// `[batch, dL]`; relu after every layer but the last (logits). Weights are declared
/// `w1, b1, w2, b2, ...`.
/// `mlp(&[64, 128, 64, 10], 32)` is the digits MLP of the main job.
///
/// # Errors
/// [`CompileError::Program`] with fewer than two layer sizes, a zero size (naming its position,
/// counting the input as layer 0), a zero batch, or a tensor whose byte size (4 per f32
/// element) overflows `usize`.
pub fn mlp(layers: &[usize], batch: usize) -> Result<Graph, CompileError> {
    const PROGRAM: &str = "mlp";
    let bad = |message: String| CompileError::Program { program: PROGRAM, message };
    if layers.len() < 2 {
        return Err(bad(format!(
            "needs at least two layer sizes (input and output), got {}",
            layers.len()
        )));
    }
    if let Some(i) = layers.iter().position(|&d| d == 0) {
        return Err(bad(format!(
            "layer {i} of {} has size 0 (layer 0 is the input; every size must be positive)",
            ShapeText(layers.to_vec())
        )));
    }
    if batch == 0 {
        return Err(bad("batch must be positive".to_string()));
    }
    check_bytes(PROGRAM, "x", "batch, d0", &[batch, layers[0]])?;
    for (i, pair) in layers.windows(2).enumerate() {
        let l = i + 1;
        check_bytes(PROGRAM, &format!("w{l}"), &format!("d{i}, d{l}"), pair)?;
        // The layer's matmul, bias add and activation outputs (y for the last).
        check_bytes(
            PROGRAM,
            &format!("layer {l}'s output"),
            &format!("batch, d{l}"),
            &[batch, pair[1]],
        )?;
    }

    let mut cx = Graph::new();
    let mut h = cx.input("x", [batch, layers[0]]);
    let last = layers.len() - 1;
    for (i, pair) in layers.windows(2).enumerate() {
        let (d_in, d_out) = (pair[0], pair[1]);
        let w = cx.weight(format!("w{}", i + 1), [d_in, d_out]);
        let b = cx.weight(format!("b{}", i + 1), [d_out]);
        h = h.matmul(w) + b;
        if i + 1 < last {
            h = h.relu();
        }
    }
    h.output("y");
    Ok(cx)
}

/// The sizes of the `transformer` built-in program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformerSizes {
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq: usize,
    /// Model width D (a multiple of `heads`).
    pub width: usize,
    /// Attention heads.
    pub heads: usize,
    /// FFN hidden width.
    pub ffn: usize,
    /// Encoder blocks.
    pub blocks: usize,
}

impl Default for TransformerSizes {
    fn default() -> Self {
        Self {
            batch: DEFAULT_TRANSFORMER_BATCH,
            seq: DEFAULT_SEQ,
            width: DEFAULT_WIDTH,
            heads: DEFAULT_HEADS,
            ffn: DEFAULT_FFN,
            blocks: DEFAULT_BLOCKS,
        }
    }
}

/// A stack of pre-LN transformer encoder blocks (Vaswani et al. 2017 with the layer norms
/// moved first, as GPT-2 and ViT place them) over an input `x [batch, seq, width]`, output
/// `y [batch, seq, width]`. Block `i` (weights prefixed `blk{i}.`) computes
///
/// ```text
/// h = x + attention(layer_norm(x; ln1.g, ln1.b))      # q, k, v, o: w [D, D], b [D]
/// x = h + ff2(gelu(ff1(layer_norm(h; ln2.g, ln2.b))))  # ff1: [D, F], ff2: [F, D]
/// ```
///
/// with multi-head self-attention ([`multi_head_attention`]: separate Q, K, V projections,
/// heads split and merged by views, softmax of `q k^T / sqrt(D / heads)`) and the tanh-form
/// GELU, so fusion makes the Q/K/V/O and FFN projections BIAS and GELU_BIAS epilogues.
/// Layer norms use eps = 1e-5. Named tensors keep their names in dumps: `blk{i}.attn` (the
/// attention output) and `blk{i}.ffn` (the FFN output).
///
/// # Errors
/// [`CompileError::Program`] when a size is zero, the width is not a multiple of the heads,
/// or a tensor's byte size overflows `usize`.
pub fn transformer(sizes: TransformerSizes) -> Result<Graph, CompileError> {
    const PROGRAM: &str = "transformer";
    let bad = |message: String| CompileError::Program { program: PROGRAM, message };
    let TransformerSizes { batch, seq, width, heads, ffn, blocks } = sizes;
    for (name, v) in [
        ("batch", batch),
        ("seq", seq),
        ("width", width),
        ("heads", heads),
        ("ffn", ffn),
        ("layers", blocks),
    ] {
        if v == 0 {
            return Err(bad(format!("{name} must be positive")));
        }
    }
    if width % heads != 0 {
        return Err(bad(format!("width {width} is not a multiple of {heads} heads")));
    }
    check_bytes(PROGRAM, "x", "batch, seq, width", &[batch, seq, width])?;
    check_bytes(PROGRAM, "the FFN hidden", "batch, seq, ffn", &[batch, seq, ffn])?;
    check_bytes(
        PROGRAM,
        "the attention scores",
        "batch, heads, seq, seq",
        &[batch, heads, seq, seq],
    )?;
    check_bytes(PROGRAM, "ff1.w", "width, ffn", &[width, ffn])?;

    let mut cx = Graph::new();
    let mut x = cx.input("x", [batch, seq, width]);
    for i in 0..blocks {
        let weights = BlockWeights::declare(&mut cx, i, width, ffn);
        x = encoder_block(&x, &weights, heads, LAYER_NORM_EPS, Gelu::Tanh)?;
    }
    x.output("y");
    Ok(cx)
}

/// Which GELU an encoder block's FFN applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gelu {
    /// The tanh form (cuBLASLt's GELU, fused into the first FFN matmul as GELU_BIAS).
    Tanh,
    /// The exact erf form (PyTorch's default `nn.GELU()`), never fused.
    Erf,
}

/// The weights of encoder block `i`, declared as `blk{i}.ln1.g` `[D]`, `blk{i}.ln1.b`,
/// `blk{i}.{q,k,v,o}.w` `[D, D]` and `.b` `[D]`, `blk{i}.ln2.g`, `blk{i}.ln2.b`,
/// `blk{i}.ff1.w` `[D, F]`, `.b` `[F]`, `blk{i}.ff2.w` `[F, D]`, `.b` `[D]`, in that order.
#[derive(Debug, Clone)]
pub struct BlockWeights {
    /// `blk{i}`: the prefix of the weights' names and of the block's named tensors.
    prefix: String,
    /// ln1 gain and bias, q/k/v/o weights and biases, ln2 gain and bias, ff1, ff2.
    tensors: Vec<Tensor>,
}

impl BlockWeights {
    /// The names and shapes of block `i`'s weights for width `width` and FFN width `ffn`, in
    /// declaration order (what a model file must hold).
    pub fn shapes(i: usize, width: usize, ffn: usize) -> Vec<(String, Vec<usize>)> {
        let (d, f) = (width, ffn);
        let shapes: [(&str, Vec<usize>); 16] = [
            ("ln1.g", vec![d]),
            ("ln1.b", vec![d]),
            ("q.w", vec![d, d]),
            ("q.b", vec![d]),
            ("k.w", vec![d, d]),
            ("k.b", vec![d]),
            ("v.w", vec![d, d]),
            ("v.b", vec![d]),
            ("o.w", vec![d, d]),
            ("o.b", vec![d]),
            ("ln2.g", vec![d]),
            ("ln2.b", vec![d]),
            ("ff1.w", vec![d, f]),
            ("ff1.b", vec![f]),
            ("ff2.w", vec![f, d]),
            ("ff2.b", vec![d]),
        ];
        shapes.into_iter().map(|(n, s)| (format!("blk{i}.{n}"), s)).collect()
    }

    /// Declares block `i`'s weights in `cx` ([`BlockWeights::shapes`]).
    pub fn declare(cx: &mut Graph, i: usize, width: usize, ffn: usize) -> Self {
        let tensors =
            Self::shapes(i, width, ffn).into_iter().map(|(n, s)| cx.weight(n, s)).collect();
        Self { prefix: format!("blk{i}"), tensors }
    }
}

/// One pre-LN transformer encoder block over `x [B, S, D]` (GPT-2's and ViT's layout):
///
/// ```text
/// h   = x + o(attention(q, k, v of layer_norm(x; ln1)))   # multi-head, softmax(q k^T / sqrt(D/H)) v
/// out = h + ff2(gelu(ff1(layer_norm(h; ln2))))
/// ```
///
/// The attention output and the FFN output are named `blk{i}.attn` and `blk{i}.ffn` so they
/// keep those names in dumps.
///
/// # Errors
/// [`CompileError::Program`] when `x` is not 3-D or D is not a multiple of `heads`.
pub fn encoder_block(
    x: &Tensor,
    weights: &BlockWeights,
    heads: usize,
    eps: f32,
    gelu: Gelu,
) -> Result<Tensor, CompileError> {
    let [
        ln1_g,
        ln1_b,
        q_w,
        q_b,
        k_w,
        k_b,
        v_w,
        v_b,
        o_w,
        o_b,
        ln2_g,
        ln2_b,
        ff1_w,
        ff1_b,
        ff2_w,
        ff2_b,
    ] = weights.tensors.as_slice()
    else {
        return Err(CompileError::Program {
            program: "encoder block",
            message: format!("expected 16 weights, got {}", weights.tensors.len()),
        });
    };
    let block = &weights.prefix;
    let normed = x.layer_norm(ln1_g, ln1_b, eps);
    let attn =
        multi_head_attention(&normed, [q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b], heads, None)?
            .name(format!("{block}.attn"));
    let h = x + attn;
    let hidden = h.layer_norm(ln2_g, ln2_b, eps).linear(ff1_w, Some(ff1_b));
    let hidden = match gelu {
        Gelu::Tanh => hidden.gelu(),
        Gelu::Erf => hidden.gelu_erf(),
    };
    let ffn_out = hidden.linear(ff2_w, Some(ff2_b)).name(format!("{block}.ffn"));
    Ok(h + ffn_out)
}

/// A vision transformer's hyper-parameters (ViT, Dosovitskiy et al. 2021, small): images of
/// `image` = `[height, width]` pixels, one channel, cut into `patch` x `patch` patches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VitConfig {
    /// Image height and width in pixels, both multiples of `patch`.
    pub image: [usize; 2],
    /// Patch side in pixels.
    pub patch: usize,
    /// Model width D, a multiple of `heads`.
    pub width: usize,
    /// Attention heads.
    pub heads: usize,
    /// Encoder blocks.
    pub blocks: usize,
    /// FFN hidden width.
    pub ffn: usize,
    /// Output classes.
    pub classes: usize,
    /// Layer-norm epsilon.
    pub eps: f32,
    /// The FFN's GELU.
    pub gelu: Gelu,
}

impl VitConfig {
    /// Tokens per image: `(height / patch) * (width / patch)`.
    pub fn tokens(&self) -> usize {
        let p = self.patch.max(1);
        (self.image[0] / p) * (self.image[1] / p)
    }

    /// Checks that the sizes are positive and divide: the patch divides both image sides,
    /// the heads divide the width.
    ///
    /// # Errors
    /// [`CompileError::Program`] (program `vit`) naming the size: `patch 3 does not divide
    /// the 8x8 image`, `width 30 is not a multiple of 4 heads`, `heads must be positive`.
    pub fn validate(&self) -> Result<(), CompileError> {
        let bad = |message: String| CompileError::Program { program: "vit", message };
        let [h, w] = self.image;
        for (name, v) in [
            ("image height", h),
            ("image width", w),
            ("patch", self.patch),
            ("width", self.width),
            ("heads", self.heads),
            ("blocks", self.blocks),
            ("ffn", self.ffn),
            ("classes", self.classes),
        ] {
            if v == 0 {
                return Err(bad(format!("{name} must be positive")));
            }
        }
        if h % self.patch != 0 || w % self.patch != 0 {
            return Err(bad(format!("patch {} does not divide the {h}x{w} image", self.patch)));
        }
        if !self.width.is_multiple_of(self.heads) {
            return Err(bad(format!(
                "width {} is not a multiple of {} heads",
                self.width, self.heads
            )));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(bad(format!("eps {} must be a positive number", self.eps)));
        }
        Ok(())
    }

    /// Every weight's name and shape, in declaration order: `embed.w` `[P*P, D]`, `embed.b`
    /// `[D]`, `pos` `[T, D]`, each block's ([`BlockWeights::shapes`]), `norm.g`, `norm.b`
    /// `[D]`, `head.w` `[D, C]`, `head.b` `[C]`. What a ViT model file must hold.
    pub fn weights(&self) -> Vec<(String, Vec<usize>)> {
        let (d, pp) = (self.width, self.patch * self.patch);
        let mut out = vec![
            ("embed.w".to_string(), vec![pp, d]),
            ("embed.b".to_string(), vec![d]),
            ("pos".to_string(), vec![self.tokens(), d]),
        ];
        for i in 0..self.blocks {
            out.extend(BlockWeights::shapes(i, d, self.ffn));
        }
        out.extend([
            ("norm.g".to_string(), vec![d]),
            ("norm.b".to_string(), vec![d]),
            ("head.w".to_string(), vec![d, self.classes]),
            ("head.b".to_string(), vec![self.classes]),
        ]);
        out
    }
}

/// The vision transformer of `config` over a batch of `batch` flattened images: input `x`
/// `[batch, height * width]`, output `y` (the logits) `[batch, classes]`. Next to PyTorch's
/// forward pass (data/make_digits_vit.py, `ViT.forward`):
///
/// ```text
/// patches = x.reshape(B, H/P, P, W/P, P).permute(0, 1, 3, 2, 4).reshape(B, T, P*P)
/// tokens  = patches @ embed.w + embed.b + pos            # [B, T, D]
/// tokens  = encoder_block(tokens) for each block          # pre-LN, erf or tanh GELU
/// logits  = layer_norm(tokens; norm).mean(over T) @ head.w + head.b
/// ```
///
/// The patches are views of `x` and one copy (the reshape merges the permuted axes); the
/// embedding, the attention projections, the FFN and the head are one GEMM each over every
/// token of the batch, with their biases as BIAS epilogues.
///
/// # Errors
/// [`VitConfig::validate`]'s errors; [`CompileError::Program`] for a zero batch or a tensor
/// whose byte size overflows `usize`.
pub fn vit(config: &VitConfig, batch: usize) -> Result<Graph, CompileError> {
    const PROGRAM: &str = "vit";
    config.validate()?;
    if batch == 0 {
        return Err(CompileError::Program {
            program: PROGRAM,
            message: "batch must be positive".into(),
        });
    }
    let VitConfig { image: [h, w], patch: p, width: d, heads, blocks, ffn, classes, eps, gelu } =
        *config;
    let tokens = config.tokens();
    check_bytes(PROGRAM, "x", "batch, height * width", &[batch, h, w])?;
    check_bytes(PROGRAM, "the tokens", "batch, tokens, width", &[batch, tokens, d])?;
    check_bytes(PROGRAM, "the FFN hidden", "batch, tokens, ffn", &[batch, tokens, ffn])?;
    check_bytes(
        PROGRAM,
        "the attention scores",
        "batch, heads, tokens, tokens",
        &[batch, heads, tokens, tokens],
    )?;

    let mut cx = Graph::new();
    let x = cx.input("x", [batch, h * w]);
    let embed_w = cx.weight("embed.w", [p * p, d]);
    let embed_b = cx.weight("embed.b", [d]);
    let pos = cx.weight("pos", [tokens, d]);
    let patches = x.reshape([batch, h / p, p, w / p, p]).permute(&[0, 1, 3, 2, 4]).reshape([
        batch,
        tokens,
        p * p,
    ]);
    let mut x = patches.linear(&embed_w, Some(&embed_b)) + &pos;
    for i in 0..blocks {
        let weights = BlockWeights::declare(&mut cx, i, d, ffn);
        x = encoder_block(&x, &weights, heads, eps, gelu)?;
    }
    let norm_g = cx.weight("norm.g", [d]);
    let norm_b = cx.weight("norm.b", [d]);
    let head_w = cx.weight("head.w", [d, classes]);
    let head_b = cx.weight("head.b", [classes]);
    let pooled = x.layer_norm(&norm_g, &norm_b, eps).mean(1, false).name("pooled");
    pooled.linear(&head_w, Some(&head_b)).output("y");
    Ok(cx)
}
