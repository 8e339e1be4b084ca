//! `lumen compare PROGRAM`: the fusion candidates of a built-in program side by side (SPEC
//! sections 3 and 5): nodes, launches, buffers, slab_bytes, naive_bytes, lower_bound,
//! dram_bytes, the cost model's score and pick, and what fusion changes against the unfused
//! program.

use std::path::PathBuf;

use lumen_compiler::fusion::{self, FusionConfig, report};
use lumen_compiler::{CompileOptions, dump};

use super::program_args::ProgramArgs;

/// Arguments of `lumen compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    program: ProgramArgs,
    /// cuBLASLt workspace per matmul, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    workspace_bytes: usize,
    /// Slab alignment in bytes.
    #[arg(long, default_value_t = 256)]
    alignment: usize,
    /// Largest slab in bytes; a candidate whose plan does not fit is listed as refused.
    #[arg(long, value_name = "BYTES")]
    capacity: Option<usize>,
    /// Write every candidate's dumps ({program}-{candidate}.llir.txt, ...) here (overrides
    /// LLIR_DUMP_DIR).
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `lumen compare`.
///
/// # Errors
/// A bad program or size, an option the planner refuses for every candidate (e.g. alignment
/// 0, a capacity nothing fits in), or a dump that cannot be written.
pub fn run(args: Args) -> anyhow::Result<()> {
    let graph = args.program.graph()?;
    let name = args.program.program.clone();
    let options = CompileOptions {
        fuse: true,
        workspace_bytes: args.workspace_bytes,
        alignment: args.alignment,
        capacity: args.capacity,
        name: name.clone(),
        dump_dir: args.dump_dir,
        ..CompileOptions::default()
    };
    let exploration = fusion::explore(&graph.hlir(), &name, &options, &FusionConfig::default())?;
    if let Some(dir) = options.resolved_dump_dir() {
        for c in &exploration.candidates {
            dump::write_dumps(&dir, &c.program)?;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report::compare_json(&exploration))?);
    } else {
        print!("{}", report::compare_text(&exploration));
    }
    Ok(())
}
