//! Subcommands of the `lumen` CLI, one file each.

mod compare;
mod compile;
pub mod errors;
mod generate;
pub mod out;
mod plan_slab;
mod program_args;
mod run;
pub mod usage;

use clap::{Parser, Subcommand};

/// lumen: a small Luminal-style tensor compiler (DSL -> HLIR -> LLIR -> one slab -> runtime).
#[derive(Debug, Parser)]
#[command(name = "lumen", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan buffers into one slab from a JSON problem or a MiniMalloc CSV.
    PlanSlab(plan_slab::Args),
    /// Compile a built-in program or an ONNX model; print its canonical LLIR, slab plan and
    /// figures.
    Compile(compile::Args),
    /// Compare the fusion candidates of a built-in program or an ONNX model: memory, launches,
    /// DRAM traffic.
    Compare(compare::Args),
    /// Run a model (a safetensors MLP or ViT, or an ONNX model with --inputs); check its
    /// outputs; report plan and phases.
    Run(run::Args),
    /// Generate text greedily with a Llama decoder from a Hugging Face model directory,
    /// compiled once with a KV cache; report tokens/s of prefill and decode.
    Generate(generate::Args),
}

/// Runs the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::PlanSlab(args) => plan_slab::run(args),
        Command::Compile(args) => compile::run(args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Generate(args) => generate::run(args),
    }
}
