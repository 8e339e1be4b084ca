//! Built-in programs of the CLI (`lumen compile linear-relu`, `lumen compile mlp`,
//! `lumen compile transformer`).
//!
//! Their sizes are checked here, before any DSL call, so a bad size is reported in the
//! program's own words (`linear-relu: x is [m, k] = [...]: too large`) rather than as a DSL
//! error pointing at a line of this file.

use std::num::IntErrorKind;

use crate::composite::multi_head_attention;
use crate::dsl::Graph;
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
        let mut w = |name: &str, shape: &[usize]| cx.weight(format!("blk{i}.{name}"), shape);
        let (ln1_g, ln1_b) = (w("ln1.g", &[width]), w("ln1.b", &[width]));
        let attn_weights = [
            w("q.w", &[width, width]),
            w("q.b", &[width]),
            w("k.w", &[width, width]),
            w("k.b", &[width]),
            w("v.w", &[width, width]),
            w("v.b", &[width]),
            w("o.w", &[width, width]),
            w("o.b", &[width]),
        ];
        let (ln2_g, ln2_b) = (w("ln2.g", &[width]), w("ln2.b", &[width]));
        let (ff1_w, ff1_b) = (w("ff1.w", &[width, ffn]), w("ff1.b", &[ffn]));
        let (ff2_w, ff2_b) = (w("ff2.w", &[ffn, width]), w("ff2.b", &[width]));

        let normed = x.layer_norm(&ln1_g, &ln1_b, LAYER_NORM_EPS);
        let [q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b] = &attn_weights;
        let attn =
            multi_head_attention(&normed, [q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b], heads, None)?
                .name(format!("blk{i}.attn"));
        let h = x + attn;
        let normed = h.layer_norm(&ln2_g, &ln2_b, LAYER_NORM_EPS);
        let hidden = normed.linear(&ff1_w, Some(&ff1_b)).gelu();
        let ffn_out = hidden.linear(&ff2_w, Some(&ff2_b)).name(format!("blk{i}.ffn"));
        x = h + ffn_out;
    }
    x.output("y");
    Ok(cx)
}

/// Names of the built-in programs, as the CLI takes them.
pub const BUILTIN: &[&str] = &["linear-relu", "mlp", "transformer"];

/// A size of a built-in program, named as its CLI flag; each applies to one program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeOption {
    /// `--m`: linear-relu's rows of x.
    M,
    /// `--k`: linear-relu's inner dimension.
    K,
    /// `--n`: linear-relu's columns of y.
    N,
    /// `--layers`: the mlp's layer sizes, or the transformer's block count.
    Layers,
    /// `--batch`: the mlp's batch rows, or the transformer's sequences.
    Batch,
    /// `--seq`: the transformer's sequence length.
    Seq,
    /// `--width`: the transformer's model width.
    Width,
    /// `--heads`: the transformer's attention heads.
    Heads,
    /// `--ffn`: the transformer's FFN hidden width.
    Ffn,
}

impl SizeOption {
    /// The CLI flag: `--m`, `--k`, `--n`, `--layers`, `--batch`, `--seq`, `--width`,
    /// `--heads`, `--ffn`.
    pub fn flag(self) -> &'static str {
        match self {
            SizeOption::M => "--m",
            SizeOption::K => "--k",
            SizeOption::N => "--n",
            SizeOption::Layers => "--layers",
            SizeOption::Batch => "--batch",
            SizeOption::Seq => "--seq",
            SizeOption::Width => "--width",
            SizeOption::Heads => "--heads",
            SizeOption::Ffn => "--ffn",
        }
    }

    /// The built-in programs ([`BUILTIN`]) the size belongs to.
    pub fn programs(self) -> &'static [&'static str] {
        match self {
            SizeOption::M | SizeOption::K | SizeOption::N => &["linear-relu"],
            SizeOption::Layers | SizeOption::Batch => &["mlp", "transformer"],
            SizeOption::Seq | SizeOption::Width | SizeOption::Heads | SizeOption::Ffn => {
                &["transformer"]
            }
        }
    }

    /// [`SizeOption::programs`] in words: `linear-relu`, `mlp and transformer`.
    pub fn programs_text(self) -> String {
        self.programs().join(" and ")
    }
}

/// Checks that `name` is a built-in program and that every size in `given` applies to it.
///
/// # Errors
/// [`CompileError::UnknownProgram`] for an unknown name, then [`CompileError::NotApplicable`]
/// for the first size of `given` that belongs to the other program.
pub fn check_applicable(name: &str, given: &[SizeOption]) -> Result<(), CompileError> {
    if !BUILTIN.contains(&name) {
        return Err(CompileError::UnknownProgram {
            name: name.to_string(),
            expected: BUILTIN.join(", "),
        });
    }
    match given.iter().find(|o| !o.programs().contains(&name)) {
        Some(&option) => Err(CompileError::NotApplicable { option, program: name.to_string() }),
        None => Ok(()),
    }
}

/// Sizes of the built-in programs, each named as its CLI flag; `None` takes the program's
/// default ([`DEFAULT_M`], [`DEFAULT_K`], [`DEFAULT_N`], [`DEFAULT_LAYERS`],
/// [`DEFAULT_BATCH`], and [`TransformerSizes::default`] for the transformer). `Default` gives every default. A size given to the program it does not
/// belong to is an error, not ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuiltinArgs {
    /// linear-relu: rows of x.
    pub m: Option<usize>,
    /// linear-relu: inner dimension.
    pub k: Option<usize>,
    /// linear-relu: columns of y.
    pub n: Option<usize>,
    /// mlp: layer sizes, input first.
    pub layers: Option<Vec<usize>>,
    /// mlp: rows of x; transformer: sequences.
    pub batch: Option<usize>,
    /// transformer: tokens per sequence.
    pub seq: Option<usize>,
    /// transformer: model width.
    pub width: Option<usize>,
    /// transformer: attention heads.
    pub heads: Option<usize>,
    /// transformer: FFN hidden width.
    pub ffn: Option<usize>,
}

impl BuiltinArgs {
    /// The sizes that were given (not `None`), in flag order.
    pub fn given(&self) -> Vec<SizeOption> {
        [
            (SizeOption::M, self.m.is_some()),
            (SizeOption::K, self.k.is_some()),
            (SizeOption::N, self.n.is_some()),
            (SizeOption::Layers, self.layers.is_some()),
            (SizeOption::Batch, self.batch.is_some()),
            (SizeOption::Seq, self.seq.is_some()),
            (SizeOption::Width, self.width.is_some()),
            (SizeOption::Heads, self.heads.is_some()),
            (SizeOption::Ffn, self.ffn.is_some()),
        ]
        .into_iter()
        .filter_map(|(o, given)| given.then_some(o))
        .collect()
    }
}

/// Builds the built-in program `name` ([`BUILTIN`]) with `args`, defaults filling the sizes not
/// given.
///
/// # Errors
/// [`CompileError::UnknownProgram`] for an unknown name, [`CompileError::NotApplicable`] for a
/// size of the other program, [`CompileError::Program`] for bad sizes.
pub fn builtin(name: &str, args: &BuiltinArgs) -> Result<Graph, CompileError> {
    check_applicable(name, &args.given())?;
    if name == "transformer" {
        let d = TransformerSizes::default();
        let blocks = match args.layers.as_deref() {
            None => d.blocks,
            Some(&[n]) => n,
            Some(list) => {
                return Err(CompileError::Program {
                    program: "transformer",
                    message: format!(
                        "--layers is the number of encoder blocks for the transformer, one \
                         number, got {}",
                        ShapeText(list.to_vec())
                    ),
                });
            }
        };
        transformer(TransformerSizes {
            batch: args.batch.unwrap_or(d.batch),
            seq: args.seq.unwrap_or(d.seq),
            width: args.width.unwrap_or(d.width),
            heads: args.heads.unwrap_or(d.heads),
            ffn: args.ffn.unwrap_or(d.ffn),
            blocks,
        })
    } else if name == "mlp" {
        mlp(args.layers.as_deref().unwrap_or(DEFAULT_LAYERS), args.batch.unwrap_or(DEFAULT_BATCH))
    } else {
        linear_relu(
            args.m.unwrap_or(DEFAULT_M),
            args.k.unwrap_or(DEFAULT_K),
            args.n.unwrap_or(DEFAULT_N),
        )
    }
}

/// Parses a comma-separated layer list such as `64,128,64,10` (spaces allowed).
///
/// # Errors
/// [`CompileError::Program`] naming the entry that is empty, too large for `usize`, or not a
/// non-negative whole number.
pub fn parse_layers(text: &str) -> Result<Vec<usize>, CompileError> {
    let bad = |message: String| CompileError::Program { program: "mlp", message };
    text.split(',')
        .enumerate()
        .map(|(i, item)| {
            let item = item.trim();
            item.parse::<usize>().map_err(|e| match e.kind() {
                IntErrorKind::Empty => {
                    bad(format!("--layers {text:?} has an empty entry at position {i}"))
                }
                IntErrorKind::PosOverflow => bad(format!(
                    "layer size {item:?} in --layers {text:?} is too large (at most {})",
                    usize::MAX
                )),
                _ => bad(format!("layer size {item:?} in --layers {text:?} is not a whole number")),
            })
        })
        .collect()
}
