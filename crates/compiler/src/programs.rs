//! Built-in programs of the CLI (`lumen compile linear-relu`, `lumen compile mlp`).
//!
//! Their sizes are checked here, before any DSL call, so a bad size is reported in the
//! program's own words (`linear-relu: x is [m, k] = [...]: too large`) rather than as a DSL
//! error pointing at a line of this file.

use std::num::IntErrorKind;

use crate::dsl::Graph;
use crate::error::{CompileError, ShapeText};

/// `linear-relu`'s default rows of x (the golden program of SPEC section 3).
pub const DEFAULT_M: usize = 64;
/// `linear-relu`'s default inner dimension.
pub const DEFAULT_K: usize = 256;
/// `linear-relu`'s default columns of y.
pub const DEFAULT_N: usize = 64;
/// `mlp`'s default layer sizes, input first (the digits MLP of SPEC section 6).
pub const DEFAULT_LAYERS: &[usize] = &[64, 128, 64, 10];
/// `mlp`'s default batch rows.
pub const DEFAULT_BATCH: usize = 32;

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
/// program of SPEC section 3 (sizes 64, 256, 64 give the golden plan).
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
/// `mlp(&[64, 128, 64, 10], 32)` is the digits MLP of SPEC section 6.
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

/// Names of the built-in programs, as the CLI takes them.
pub const BUILTIN: &[&str] = &["linear-relu", "mlp"];

/// A size of a built-in program, named as its CLI flag; each applies to one program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeOption {
    /// `--m`: linear-relu's rows of x.
    M,
    /// `--k`: linear-relu's inner dimension.
    K,
    /// `--n`: linear-relu's columns of y.
    N,
    /// `--layers`: the mlp's layer sizes.
    Layers,
    /// `--batch`: the mlp's batch rows.
    Batch,
}

impl SizeOption {
    /// The CLI flag: `--m`, `--k`, `--n`, `--layers`, `--batch`.
    pub fn flag(self) -> &'static str {
        match self {
            SizeOption::M => "--m",
            SizeOption::K => "--k",
            SizeOption::N => "--n",
            SizeOption::Layers => "--layers",
            SizeOption::Batch => "--batch",
        }
    }

    /// The built-in program ([`BUILTIN`]) the size belongs to.
    pub fn program(self) -> &'static str {
        match self {
            SizeOption::M | SizeOption::K | SizeOption::N => "linear-relu",
            SizeOption::Layers | SizeOption::Batch => "mlp",
        }
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
    match given.iter().find(|o| o.program() != name) {
        Some(&option) => Err(CompileError::NotApplicable { option, program: name.to_string() }),
        None => Ok(()),
    }
}

/// Sizes of the built-in programs, each named as its CLI flag; `None` takes the program's
/// default ([`DEFAULT_M`], [`DEFAULT_K`], [`DEFAULT_N`], [`DEFAULT_LAYERS`],
/// [`DEFAULT_BATCH`]). `Default` gives every default. A size given to the program it does not
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
    /// mlp: rows of x.
    pub batch: Option<usize>,
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
    if name == "mlp" {
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
