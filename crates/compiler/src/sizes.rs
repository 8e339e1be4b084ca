//! The built-in programs' names and size flags (`lumen compile linear-relu --m 64`), at the
//! bottom of the crate so an error can name a flag without knowing the programs
//! ([`crate::programs`] builds them).

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
