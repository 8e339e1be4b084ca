//! `lumen compile PROGRAM`: compile a built-in program (or an ONNX model) and print its canonical LLIR, its slab
//! plan (checked by the planner's independent verifier) and its figures.

use std::path::PathBuf;

use lumen_compiler::{CompileOptions, Target, dump};

use super::out;
use super::program_args::{ProgramArgs, TargetArgs};

/// Arguments of `lumen compile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    program: ProgramArgs,
    /// Fuse matmul + bias + activation into cuBLASLt epilogues with the e-graph (the default).
    #[arg(long, overrides_with = "no_fuse")]
    fuse: bool,
    /// Lower every op to its own launch.
    #[arg(long = "no-fuse", overrides_with = "fuse")]
    no_fuse: bool,
    #[command(flatten)]
    target: TargetArgs,
    /// Write {label}.llir.txt, .llir.dot, .plan.txt, .plan.svg here (overrides LLIR_DUMP_DIR).
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Slab placement algorithm (first-fit is Luminal's plan_slab; `best` the tightest lumen has).
    #[arg(long, value_name = "NAME", default_value = "first-fit", value_parser = super::plan_slab::algorithm_parser())]
    algorithm: lumen_planner::SlabAlgorithm,
    /// Keep every weight's bytes to itself until readback, so the runtime uploads weights once
    /// at prepare (a larger slab when the plan would have reused them; default: Luminal's
    /// lifetimes, weights live from upload to their last reader).
    #[arg(long)]
    resident_weights: bool,
    /// In-place reuse: an elementwise op may write its output into an operand that dies
    /// there, at the operand's offset (default: Luminal's plan_slab, where a node's inputs and
    /// outputs never alias). Marked buffers print `in_place_of=` in the LLIR and `in place of`
    /// in the plan.
    #[arg(long)]
    in_place: bool,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    json: bool,
}

/// Runs `lumen compile`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let graph = args.program.graph()?;
    let options = CompileOptions {
        fuse: !args.no_fuse,
        algorithm: args.algorithm,
        name: args.program.label(),
        dump_dir: args.dump_dir,
        resident_weights: args.resident_weights,
        in_place: args.in_place,
        ..args.target.options(Target::default())
    };
    let program = graph.compile(&options)?;
    // The planner's independent checker: no two buffers whose lifetimes conflict (parallel
    // branches included) share a byte; a failure is a planner bug, reported as an error. It
    // only reads the program, so it runs beside the text's formatting.
    let slab = lumen_planner::SlabOptions {
        alignment: program.options.alignment,
        capacity: program.options.capacity,
        algorithm: program.options.algorithm,
        ..Default::default()
    };
    let verify = || {
        lumen_planner::verify(&program.dag, &program.llir.slab_buffers(), &program.plan, &slab)
            .map_err(|e| anyhow::anyhow!("the plan fails verification: {e}"))
    };
    let format = || {
        (!args.json).then(|| {
            format!(
                "{}\n{}verified     yes (lumen_planner::verify: no two buffers whose lifetimes \
                 conflict share a byte)\n",
                dump::llir_text(&program),
                dump::plan_text(&program)
            )
        })
    };
    let (verified, text) = std::thread::scope(|s| {
        let text = s.spawn(format);
        let verified = verify();
        (verified, text.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    verified?;
    if args.json {
        let mut json = dump::compiled_json(&program);
        json["verified"] = serde_json::Value::Bool(true);
        json["target"] = serde_json::Value::from(args.target.target(Target::default()).name());
        out::print_json(&json)
    } else {
        Ok(out::print(&text.unwrap_or_default())?)
    }
}
