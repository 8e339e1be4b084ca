//! Built-in programs of the CLI (`lumen compile linear-relu`, `lumen compile mlp`,
//! `lumen compile transformer`): their names, their size flags and the checks that a size
//! belongs to the program. The programs themselves are in [`crate::models`].
//!
//! Their sizes are checked before any DSL call, so a bad size is reported in the program's own
//! words (`linear-relu: x is [m, k] = [...]: too large`) rather than as a DSL error pointing at
//! a line of lumen.

use std::num::IntErrorKind;

use crate::dsl::Graph;
use crate::error::{CompileError, ShapeText};
pub use crate::models::{
    DEFAULT_BATCH, DEFAULT_BLOCKS, DEFAULT_FFN, DEFAULT_HEADS, DEFAULT_K, DEFAULT_LAYERS,
    DEFAULT_M, DEFAULT_N, DEFAULT_SEQ, DEFAULT_TRANSFORMER_BATCH, DEFAULT_WIDTH, LAYER_NORM_EPS,
    TransformerSizes, linear_relu, mlp, transformer,
};

pub use crate::sizes::{BUILTIN, SizeOption};

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
