//! `lumen compare PROGRAM`: the fusion candidates of a built-in program (or an ONNX model) side by side (SPEC
//! sections 3 and 5): nodes, launches, buffers, slab_bytes, naive_bytes, lower_bound,
//! dram_bytes, the cost model's score and pick, and what fusion changes against the unfused
//! program. `--profile` adds what the search measures: each candidate's median
//! time on a runtime with seeded random inputs and weights, the search's choice (the cost
//! model's pick unless another is faster with confidence), and the break-even;
//! `--tuning-cache FILE` takes a recorded choice instead, as `lumen run` does.
//!
//! `--capacity` refuses every candidate whose slab the planner cannot place within it: the
//! refused ones are listed after the table and the summary says which side is missing. When
//! none fits, the report (text or JSON) still lists every candidate as refused, and then the
//! command fails with one `error: no candidate fits ...` line.

use std::fmt::Write as _;
use std::path::PathBuf;

use lumen_compiler::fusion::{self, Exploration, FusionConfig, report};
use lumen_compiler::{BufferRole, CompileError, CompileOptions, Target, dump};
use lumen_planner::PlanError;
use lumen_planner::svg::group;
use lumen_runtime::RUNTIME_NAMES;
use lumen_runtime::search::{self, Progress, SearchOptions, SearchReport, random_tensors};
use lumen_runtime::tuning::{self, Tuned};

use super::program_args::{ProgramArgs, TargetArgs};
use super::{errors, out};

/// Arguments of `lumen compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    program: ProgramArgs,
    #[command(flatten)]
    target: TargetArgs,
    /// Largest slab in bytes; a candidate whose plan does not fit is listed as refused.
    #[arg(long, value_name = "BYTES")]
    capacity: Option<usize>,
    /// Write every candidate's dumps ({program}-{candidate}.llir.txt, ...) here (overrides
    /// LLIR_DUMP_DIR).
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Slab placement algorithm (first-fit is Luminal's plan_slab; `best` the tightest lumen has).
    #[arg(long, value_name = "NAME", default_value = "first-fit", value_parser = super::plan_slab::algorithm_parser())]
    algorithm: lumen_planner::SlabAlgorithm,
    /// In-place reuse: an elementwise op may write its output into an operand that dies there
    /// (the planner places the pair at one offset). The report adds each candidate's slab
    /// without it, so the saving shows.
    #[arg(long)]
    in_place: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also search the candidates as `lumen run` does (prepare, one warm-up round, up to
    /// --trials interleaved timed rounds; medians; the cost model's pick unless another is
    /// faster with confidence) with random inputs and weights of a fixed seed.
    #[arg(long)]
    profile: bool,
    /// With --profile: the most timed rounds (every candidate executes once per round).
    #[arg(long, default_value_t = search::DEFAULT_TRIALS as u32, requires = "profile",
          value_parser = clap::value_parser!(u32).range(1..))]
    trials: u32,
    /// With --profile: the runtime to measure on.
    #[arg(long, default_value = "cpu", requires = "profile",
          value_parser = clap::builder::PossibleValuesParser::new(RUNTIME_NAMES))]
    runtime: String,
    /// With --profile: the CPU runtime's worker threads (a whole number from 1 to 1024;
    /// default: every core).
    #[arg(long, value_name = "N", requires = "profile", value_parser = super::run::parse_threads)]
    threads: Option<usize>,
    /// With --profile: how far a candidate's outputs may be from the reference candidate's,
    /// `ABS` or `ABS,REL` (|got - ref| <= ABS + REL x |ref|; default 1e-4,1e-4).
    #[arg(long, allow_negative_numbers = true, value_name = "ABS[,REL]", requires = "profile")]
    search_tolerance: Option<lumen_runtime::search::Tolerance>,
    /// With --profile: read the choice from this tuning cache when it holds one (the
    /// measurement is then skipped), and store it there after a search (default:
    /// $LUMEN_TUNING_CACHE with --profile; none when unset).
    #[arg(long, value_name = "FILE", requires = "profile")]
    tuning_cache: Option<PathBuf>,
}

/// The target `compare` compiles for without `--target`: the measuring runtime's with
/// `--profile` (the CPU's reserves no workspace), else CUDA's, the default of every golden plan.
fn default_target(args: &Args) -> Target {
    if args.profile { Target::for_runtime(&args.runtime) } else { Target::default() }
}

/// Seeds of the random weights and inputs of `--profile` (splitmix64), fixed so two runs
/// measure the same data.
const WEIGHT_SEED: u64 = 0x5EED_0001;
const INPUT_SEED: u64 = 0x5EED_0002;

/// Runs `lumen compare`.
///
/// # Errors
/// A bad program or size, an option refused for every candidate (e.g. alignment 0), a dump
/// that cannot be written; a capacity nothing fits in, after the report that lists every
/// candidate as refused.
pub fn run(args: Args) -> anyhow::Result<()> {
    let graph = args.program.graph()?;
    let name = args.program.label();
    let options = CompileOptions {
        fuse: true,
        algorithm: args.algorithm,
        capacity: args.capacity,
        name: name.clone(),
        dump_dir: args.dump_dir.clone(),
        in_place: args.in_place,
        ..args.target.options(default_target(&args))
    };
    let hlir = graph.hlir();
    let config = FusionConfig::default();
    // One exploration: when nothing plans, its refusals are the report (and the error).
    let mut exploration = fusion::explore_all(&hlir, &name, &options, &config)?;
    if exploration.candidates.is_empty() && !refused_for_capacity(&exploration) {
        let first = exploration.refused.drain(..).next().map(|(_, err)| err);
        return Err(first.unwrap_or(CompileError::NoOutputs).into());
    }
    if let Some(dir) = options.resolved_dump_dir() {
        // One set: a candidate whose dumps cannot be written leaves none of the others behind.
        let programs: Vec<_> = exploration.candidates.iter().map(|c| &c.program).collect();
        dump::write_dumps_all(&dir, &programs)?;
    }
    // Nothing to measure when every candidate was refused: the report says so, then the error.
    let (measured, threads) = if args.profile && !exploration.candidates.is_empty() {
        let (tuned, threads) = profile(&args, &exploration)?;
        (Some(tuned), threads)
    } else {
        (None, 0)
    };
    let in_place = if args.in_place { in_place_savings(&exploration)? } else { Vec::new() };
    if args.json {
        let mut value = report::compare_json(&exploration);
        if let Some(obj) = value.as_object_mut() {
            // Which target's facts the candidates were compiled with, as `compile --json` says.
            obj.insert("target".into(), args.target.target(default_target(&args)).name().into());
            obj.insert("workspace_bytes".into(), options.workspace_bytes.into());
        }
        if args.in_place
            && let Some(obj) = value.as_object_mut()
        {
            let rows = in_place.iter().map(|r| {
                serde_json::json!({"candidate": r.label, "marks": r.marks,
                    "slab_bytes": r.with, "without_in_place": r.without,
                    "saved_bytes": r.without as i128 - r.with as i128})
            });
            obj.insert("in_place".into(), serde_json::Value::Array(rows.collect()));
        }
        if let Some(m) = &measured {
            match &m.report {
                Some(r) => add_measurements(&mut value, r),
                None => add_cached(&mut value, m, &exploration),
            }
            if let Some(obj) = value.as_object_mut() {
                obj.insert("threads".into(), serde_json::json!(threads));
                obj.insert(
                    "tuning_cache".into(),
                    m.cache.as_ref().map_or(serde_json::Value::Null, super::run::cache_json),
                );
                obj.insert(
                    "decision".into(),
                    super::run::decision_json(m.report.as_ref(), m.cache.as_ref()),
                );
            }
        }
        out::print_json(&value)?;
    } else {
        let mut text = report::compare_text(&exploration);
        if args.in_place {
            let _ = writeln!(
                text,
                "\nin-place reuse (an elementwise output takes its dying operand's bytes):"
            );
            for r in &in_place {
                // First fit takes the in-place offset greedily, so a plan can end higher.
                let effect = if r.with <= r.without {
                    format!("saves {} bytes", group(r.without - r.with))
                } else {
                    format!("costs {} bytes", group(r.with - r.without))
                };
                let _ = writeln!(
                    text,
                    "  {:<12} {} marks, slab {} bytes, without {} bytes, {effect}",
                    r.label,
                    r.marks,
                    group(r.with),
                    group(r.without),
                );
            }
        }
        if let Some(m) = &measured {
            if let Some(r) = &m.report {
                let _ = writeln!(
                    text,
                    "\nmeasured on {} ({} thread{}) with random inputs and weights (seeded), \
                     medians of interleaved rounds:\n{r}",
                    r.runtime,
                    threads,
                    if threads == 1 { "" } else { "s" }
                );
            } else {
                text.push('\n');
            }
            if let Some(line) = m.cache.as_ref().and_then(super::run::cache_line) {
                let _ = writeln!(text, "{line}");
            }
            if let Some(c) = exploration.candidates.get(m.selected) {
                let _ = writeln!(text, "search selects: {} ({})", c.label, c.program.label);
            }
        }
        out::print(&text)?;
    }
    if exploration.candidates.is_empty() {
        let n = exploration.refused.len();
        let first = exploration
            .refused
            .first()
            .map(|(label, err)| format!(" (first: {label}: {})", errors::message(err)));
        anyhow::bail!(
            "no candidate fits: the planner refused {} candidate{}{}",
            if n == 1 { "the only".to_string() } else { format!("all {n}") },
            if n == 1 { "" } else { "s" },
            first.unwrap_or_default()
        );
    }
    Ok(())
}

/// One candidate's slab with its in-place marks and without them, bytes.
struct InPlaceRow {
    label: String,
    marks: usize,
    with: usize,
    without: usize,
}

/// Each candidate planned again with its in-place marks removed (same algorithm and options),
/// next to its planned slab: what in-place reuse saved.
fn in_place_savings(e: &Exploration) -> anyhow::Result<Vec<InPlaceRow>> {
    e.candidates
        .iter()
        .map(|c| {
            let p = &c.program;
            let mut requests = p.llir.slab_buffers();
            let marks = requests.iter().filter(|b| b.in_place_of.is_some()).count();
            requests.iter_mut().for_each(|b| b.in_place_of = None);
            let slab = lumen_planner::SlabOptions {
                alignment: p.options.alignment,
                capacity: None,
                algorithm: p.options.algorithm,
                ..Default::default()
            };
            let without = lumen_planner::plan_slab(&p.dag, &requests, &slab)?;
            Ok(InPlaceRow {
                label: c.label.clone(),
                marks,
                with: p.plan.slab_bytes,
                without: without.slab_bytes,
            })
        })
        .collect()
}

/// Whether the planner refused a candidate of `e` for the capacity: then every refused
/// candidate is listed in the report. Other refusals (alignment 0, a size that overflows) are
/// the same for every candidate and no capacity changes them: the first is the error alone.
fn refused_for_capacity(e: &Exploration) -> bool {
    e.refused
        .iter()
        .any(|(_, err)| matches!(err, CompileError::Plan(PlanError::CapacityExceeded { .. })))
}

/// Searches the candidates on `--runtime` (no dumps: compare writes its own), through the
/// tuning cache when one is given; its warnings go to stderr.
fn profile(args: &Args, e: &fusion::Exploration) -> anyhow::Result<(Tuned, usize)> {
    let (runtime, _) = super::run::runtime_with_threads(&args.runtime, args.threads)?;
    let Some(first) = e.candidates.first() else {
        anyhow::bail!("no candidate to profile: every candidate was refused");
    };
    // Every candidate declares the same inputs and weights (fusion only rewrites compute).
    let weights = random_tensors(&first.program, BufferRole::Weight, WEIGHT_SEED)?;
    let inputs = random_tensors(&first.program, BufferRole::Input, INPUT_SEED)?;
    let options = SearchOptions {
        trials: args.trials as usize,
        dump_dir: None,
        tolerance: args.search_tolerance.unwrap_or_default(),
        ..SearchOptions::from_env()
    };
    let tuned = tuning::tuned_search(
        runtime.as_ref(),
        &e.candidates,
        &weights,
        &inputs,
        &options,
        Progress::Auto,
        super::run::tuning_cache_path(args.tuning_cache.as_deref()).as_deref(),
    )?;
    super::run::warn(&tuned.warnings);
    Ok((tuned, runtime.threads()))
}

/// On a tuning-cache hit: `selected` on each candidate of the compare JSON and `measured`
/// (`runtime`, `fastest` and `selected`: the recorded choice, `from_tuning_cache: true`);
/// nothing was timed, so no `median_ms`.
fn add_cached(value: &mut serde_json::Value, m: &Tuned, e: &Exploration) {
    if let Some(list) = value.get_mut("candidates").and_then(|c| c.as_array_mut()) {
        for (i, obj) in list.iter_mut().enumerate() {
            if let Some(obj) = obj.as_object_mut() {
                obj.insert("selected".into(), serde_json::json!(i == m.selected));
            }
        }
    }
    let label = e.candidates.get(m.selected).map(|c| c.label.clone());
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "measured".into(),
            serde_json::json!({"from_tuning_cache": true, "fastest": label, "selected": label}),
        );
    }
}

/// Adds `median_ms`, `trials_ms`, `selected`, `max_abs_diff` (from the reference candidate's
/// outputs) and `measured_status` (`measured`, `mismatch`, ...) with its `measured_detail` to
/// each candidate of the compare JSON, and `measured` (`runtime`, `trials`, `rounds`,
/// `fastest` and `selected` (both the selected candidate's label; `fastest` is the older
/// name), `reference`, `tolerance`, `search_ms`, `break_even`, `from_tuning_cache: false`) at
/// the top.
fn add_measurements(value: &mut serde_json::Value, m: &SearchReport) {
    if let Some(list) = value.get_mut("candidates").and_then(|c| c.as_array_mut()) {
        for (obj, c) in list.iter_mut().zip(&m.candidates) {
            if let Some(obj) = obj.as_object_mut() {
                obj.insert("median_ms".into(), serde_json::json!(c.median_ms));
                obj.insert("trials_ms".into(), serde_json::json!(c.trials_ms));
                obj.insert("selected".into(), serde_json::json!(c.index == m.selected));
                obj.insert("max_abs_diff".into(), serde_json::json!(c.max_abs_diff));
                obj.insert("measured_status".into(), serde_json::json!(c.status.word()));
                obj.insert(
                    "measured_detail".into(),
                    serde_json::json!(c.status.describe(c.slab_bytes)),
                );
            }
        }
    }
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "measured".into(),
            serde_json::json!({
                "runtime": m.runtime,
                "trials": m.trials,
                "rounds": m.rounds,
                "fastest": m.winner().map(|w| w.label.clone()),
                "selected": m.winner().map(|w| w.label.clone()),
                "from_tuning_cache": false,
                "reference": m.candidates.get(m.reference).map(|r| r.label.clone()),
                "tolerance": m.tolerance,
                "search_ms": m.search_ms,
                "break_even": m.break_even,
            }),
        );
    }
}
