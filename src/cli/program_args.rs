//! The built-in program and its sizes, shared by `lumen compile` and `lumen compare`.

use lumen_compiler::Graph;
use lumen_compiler::programs::{self, BuiltinArgs};

/// Which built-in program to build, with its sizes (`--m --k --n` for linear-relu,
/// `--layers --batch` for the mlp).
#[derive(Debug, Clone, clap::Args)]
pub struct ProgramArgs {
    /// The built-in program: `linear-relu` or `mlp`.
    pub program: String,
    /// linear-relu: rows of x.
    #[arg(long, default_value_t = 64)]
    pub m: usize,
    /// linear-relu: inner dimension (columns of x, rows of w).
    #[arg(long, default_value_t = 256)]
    pub k: usize,
    /// linear-relu: columns of w and y.
    #[arg(long, default_value_t = 64)]
    pub n: usize,
    /// mlp: layer sizes, input first, comma-separated.
    #[arg(long, default_value = "64,128,64,10")]
    pub layers: String,
    /// mlp: batch rows.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
}

impl ProgramArgs {
    /// Builds the program.
    ///
    /// # Errors
    /// An unknown program name, a malformed `--layers` list, or sizes the program refuses.
    pub fn graph(&self) -> anyhow::Result<Graph> {
        let sizes = BuiltinArgs {
            m: self.m,
            k: self.k,
            n: self.n,
            layers: programs::parse_layers(&self.layers)?,
            batch: self.batch,
        };
        let graph = programs::builtin(&self.program, &sizes)?;
        if let Some(err) = graph.recorded_error() {
            return Err(err.into());
        }
        Ok(graph)
    }
}
