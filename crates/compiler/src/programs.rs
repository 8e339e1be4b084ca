//! Built-in programs of the CLI (`lumen compile linear-relu`, `lumen compile mlp`).

use crate::dsl::Graph;
use crate::error::CompileError;

/// `y = relu(x [m, k] x w [k, n] + b [n])`: inputs `x`, weights `w`, `b`, output `y` — the
/// program of SPEC section 3 (defaults 64, 256, 64 give the golden plan).
///
/// # Errors
/// [`CompileError::Program`] when a size is zero.
pub fn linear_relu(m: usize, k: usize, n: usize) -> Result<Graph, CompileError> {
    if m == 0 || k == 0 || n == 0 {
        return Err(CompileError::Program {
            program: "linear-relu",
            message: format!("sizes must be positive (m={m}, k={k}, n={n})"),
        });
    }
    let mut cx = Graph::new();
    let x = cx.input("x", [m, k]);
    let w = cx.weight("w", [k, n]);
    let b = cx.weight("b", [n]);
    (x.matmul(w) + b).relu().output("y");
    Ok(cx)
}

/// A multilayer perceptron over a batch: `layers = [d0, d1, ..., dL]` gives input `x`
/// [batch, d0], weights `w1` [d0, d1], `b1` [d1], ..., `wL`, `bL`, and output `y` [batch, dL];
/// relu after every layer but the last (logits). Weights are declared `w1, b1, w2, b2, ...`.
/// `mlp(&[64, 128, 64, 10], 32)` is the digits MLP of SPEC section 6.
///
/// # Errors
/// [`CompileError::Program`] with fewer than two layer sizes, a zero size or a zero batch.
pub fn mlp(layers: &[usize], batch: usize) -> Result<Graph, CompileError> {
    let bad = |message: String| CompileError::Program { program: "mlp", message };
    if layers.len() < 2 {
        return Err(bad(format!(
            "needs at least two layer sizes (input and output), got {}",
            layers.len()
        )));
    }
    if let Some(i) = layers.iter().position(|&d| d == 0) {
        return Err(bad(format!("layer size {i} is zero")));
    }
    if batch == 0 {
        return Err(bad("batch must be positive".to_string()));
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

/// Names of the built-in programs, as the CLI takes them.
pub const BUILTIN: &[&str] = &["linear-relu", "mlp"];

/// Sizes of the built-in programs; `Default` is the CLI's defaults (`linear-relu` 64, 256, 64;
/// `mlp` layers 64,128,64,10 with batch 32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinArgs {
    /// linear-relu: rows of x.
    pub m: usize,
    /// linear-relu: inner dimension.
    pub k: usize,
    /// linear-relu: columns of y.
    pub n: usize,
    /// mlp: layer sizes, input first.
    pub layers: Vec<usize>,
    /// mlp: rows of x.
    pub batch: usize,
}

impl Default for BuiltinArgs {
    fn default() -> Self {
        Self { m: 64, k: 256, n: 64, layers: vec![64, 128, 64, 10], batch: 32 }
    }
}

/// Builds the built-in program `name` ([`BUILTIN`]) with `args`.
///
/// # Errors
/// [`CompileError::UnknownProgram`] for an unknown name, [`CompileError::Program`] for bad
/// sizes.
pub fn builtin(name: &str, args: &BuiltinArgs) -> Result<Graph, CompileError> {
    match name {
        "linear-relu" => linear_relu(args.m, args.k, args.n),
        "mlp" => mlp(&args.layers, args.batch),
        _ => Err(CompileError::UnknownProgram {
            name: name.to_string(),
            expected: BUILTIN.join(", "),
        }),
    }
}

/// Parses a comma-separated layer list such as `64,128,64,10` (spaces allowed).
///
/// # Errors
/// [`CompileError::Program`] naming the item that is not a non-negative integer.
pub fn parse_layers(text: &str) -> Result<Vec<usize>, CompileError> {
    text.split(',')
        .map(|item| {
            let item = item.trim();
            item.parse::<usize>().map_err(|_| CompileError::Program {
                program: "mlp",
                message: format!("layer size {item:?} in --layers {text:?} is not a whole number"),
            })
        })
        .collect()
}
