//! `lumen compile PROGRAM`: compile a built-in program and print its canonical LLIR, its slab
//! plan and its figures (SPEC sections 3 and 7).

use std::path::PathBuf;

use anyhow::bail;
use lumen_compiler::programs::{self, BuiltinArgs};
use lumen_compiler::{CompileOptions, dump};

/// Arguments of `lumen compile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The built-in program: `linear-relu` or `mlp`.
    program: String,
    /// linear-relu: rows of x.
    #[arg(long, default_value_t = 64)]
    m: usize,
    /// linear-relu: inner dimension (columns of x, rows of w).
    #[arg(long, default_value_t = 256)]
    k: usize,
    /// linear-relu: columns of w and y.
    #[arg(long, default_value_t = 64)]
    n: usize,
    /// mlp: layer sizes, input first, comma-separated.
    #[arg(long, default_value = "64,128,64,10")]
    layers: String,
    /// mlp: batch rows.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Fuse matmul + bias + activation into cuBLASLt epilogues (not available yet).
    #[arg(long, overrides_with = "no_fuse")]
    fuse: bool,
    /// Lower every op to its own launch (the default for now).
    #[arg(long = "no-fuse", overrides_with = "fuse")]
    no_fuse: bool,
    /// cuBLASLt workspace per matmul, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    workspace_bytes: usize,
    /// Slab alignment in bytes.
    #[arg(long, default_value_t = 256)]
    alignment: usize,
    /// Write {label}.llir.txt, .llir.dot, .plan.txt, .plan.svg here (overrides LLIR_DUMP_DIR).
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    json: bool,
}

/// Runs `lumen compile`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.fuse && !args.no_fuse {
        bail!("fusion is not available yet; compile with --no-fuse");
    }
    let sizes = BuiltinArgs {
        m: args.m,
        k: args.k,
        n: args.n,
        layers: programs::parse_layers(&args.layers)?,
        batch: args.batch,
    };
    let graph = programs::builtin(&args.program, &sizes)?;
    let options = CompileOptions {
        fuse: false,
        workspace_bytes: args.workspace_bytes,
        alignment: args.alignment,
        name: args.program.clone(),
        dump_dir: args.dump_dir,
        ..CompileOptions::default()
    };
    let program = graph.compile(&options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&dump::compiled_json(&program))?);
    } else {
        print!("{}", dump::llir_text(&program));
        println!();
        print!("{}", dump::plan_text(&program));
    }
    Ok(())
}
