//! The built-in program and its sizes, shared by `lumen compile` and `lumen compare`.

use lumen_compiler::Graph;
use lumen_compiler::programs::{self, BuiltinArgs};

use super::usage::UsageError;

/// Which built-in program to build, with its sizes (`--m --k --n` for linear-relu,
/// `--layers --batch` for the mlp). A size left out takes the program's default (shown by
/// `--help`, applied in [`programs::builtin`]); a size of the other program is an error.
#[derive(Debug, Clone, clap::Args)]
pub struct ProgramArgs {
    /// The built-in program: `linear-relu` or `mlp`.
    pub program: String,
    /// linear-relu: rows of x.
    #[arg(long, value_name = "M", help = with_default("linear-relu: rows of x", programs::DEFAULT_M))]
    pub m: Option<usize>,
    /// linear-relu: inner dimension (columns of x, rows of w).
    #[arg(long, value_name = "K", help = with_default(
        "linear-relu: inner dimension (columns of x, rows of w)", programs::DEFAULT_K))]
    pub k: Option<usize>,
    /// linear-relu: columns of w and y.
    #[arg(long, value_name = "N", help = with_default("linear-relu: columns of w and y", programs::DEFAULT_N))]
    pub n: Option<usize>,
    /// mlp: layer sizes, input first, comma-separated.
    #[arg(long, value_name = "SIZES", help = with_default(
        "mlp: layer sizes, input first, comma-separated", layers_text(programs::DEFAULT_LAYERS)))]
    pub layers: Option<String>,
    /// mlp: batch rows.
    #[arg(long, value_name = "ROWS", help = with_default("mlp: batch rows", programs::DEFAULT_BATCH))]
    pub batch: Option<usize>,
}

/// `--help` text with the default clap would show for a `default_value`: the defaults live in
/// the compiler, which applies them, so that a size given to the wrong program can be told
/// from one left out.
fn with_default(help: &str, default: impl std::fmt::Display) -> String {
    format!("{help} [default: {default}]")
}

fn layers_text(layers: &[usize]) -> String {
    layers.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

impl ProgramArgs {
    /// Builds the program.
    ///
    /// # Errors
    /// A [`UsageError`] (status 2) for an unknown program name, a size of the other program
    /// (`--layers applies to mlp, not linear-relu`) or a malformed `--layers` list; the
    /// compiler's error (status 1) for sizes the program refuses (`--m 0`, `--layers 64`, a
    /// tensor too large).
    pub fn graph(&self) -> anyhow::Result<Graph> {
        // Only which flags were given matters here, so --layers' text is not parsed yet.
        let given = BuiltinArgs {
            m: self.m,
            k: self.k,
            n: self.n,
            layers: self.layers.as_ref().map(|_| Vec::new()),
            batch: self.batch,
        }
        .given();
        // Before parsing --layers: `linear-relu --layers x` is about the flag, not its text.
        programs::check_applicable(&self.program, &given).map_err(UsageError::new)?;
        let sizes = BuiltinArgs {
            m: self.m,
            k: self.k,
            n: self.n,
            layers: self
                .layers
                .as_deref()
                .map(programs::parse_layers)
                .transpose()
                .map_err(UsageError::new)?,
            batch: self.batch,
        };
        let graph = programs::builtin(&self.program, &sizes)?;
        if let Some(err) = graph.recorded_error() {
            return Err(err.into());
        }
        Ok(graph)
    }
}
