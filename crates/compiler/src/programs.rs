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
