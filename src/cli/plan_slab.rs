//! `lumen plan-slab FILE`: plan a JSON problem or a MiniMalloc CSV (SPEC section 2).

use std::path::PathBuf;

/// Arguments of `lumen plan-slab`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The problem: the planner's JSON form, or a MiniMalloc CSV (`.csv`).
    file: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `lumen plan-slab`.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("plan-slab is not built yet ({})", args.file.display())
}
