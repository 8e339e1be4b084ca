//! `lumen run FILE.safetensors`: the main job. Builds the MLP or ViT the file holds,
//! compiles it, prepares it on a runtime, runs its input batch, and checks the outputs against
//! the file's labels (accuracy) and reference logits (max abs error); prints the plan figures,
//! the phase table and the achieved FLOP/s. `lumen run MODEL.onnx --inputs FILE.safetensors
//! [--expect FILE.safetensors]` does the same for an ONNX model: the inputs and reference
//! outputs are read by graph input and output name, and every output is checked.
//!
//! By default the program run is the search's choice among the fusion candidates on the
//! chosen runtime whose outputs agree with the reference candidate's (the unfused one, within
//! the search's default tolerance): the cost model's pick, unless another candidate measured
//! faster with confidence in interleaved rounds (`lumen_runtime::search`). Unless `--trials`,
//! `--search-time-ms` or `--max-candidates` asks for a search, the search must pay for itself
//! within this run (at most 25% of it, or `--search-share`; `lumen_runtime::search::payoff`): a
//! run too short for that runs the cost model's pick, measured once (decision `too_short`). The
//! search hands the selected candidate over prepared, so it is prepared once. With
//! `--tuning-cache FILE` (or `LUMEN_TUNING_CACHE`) a choice recorded for this program,
//! runtime and machine is taken without a search, and a search's choice is recorded;
//! problems with the file are `warning:` lines on stderr and a fresh search. `--fuse` /
//! `--no-fuse` choose the program directly (no search), whatever other flags say, and
//! `--no-search` alone runs the cost model's pick. The report's `search` line and the JSON's
//! `chosen_by` (`search`, `tuning_cache`, `cost_model`, `--fuse`, `--no-fuse`) say which of
//! these it was.
//!
//! The program is compiled for the runtime's target (`Runtime::target`: on the CPU no cuBLASLt
//! workspace) and, on the CPU, with resident weights unless `--no-resident-weights` or the
//! resident slab passes the memory limit (`--memory-budget`, else half of `MemAvailable`); the
//! report gives the upload bytes per execute, the threads (`--threads N`, default every core)
//! and the achieved FLOP/s from the median execute against the runtime's derived peak.
//!
//! The report is printed in full first; then, when a check failed (NaN or infinity in the
//! outputs, a max abs error over `--tolerance`, an accuracy other than the file's reference),
//! `run` returns an error, so the command prints one `error: check failed: ...` line and exits
//! non-zero, like a test runner after its report.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use lumen::model::{self, CheckStatus, Model, OutputCheck};
use lumen_compiler::fusion::{self, FusionConfig};
use lumen_compiler::{CompileOptions, CompiledProgram, Target};
use lumen_runtime::phases::{Phase, PhaseReport, PhaseTimes, format_flops};
use lumen_runtime::search::{self, Progress, RunPlan, SearchOptions, SearchReport};
use lumen_runtime::tuning::{self, CacheStatus, CacheUse};
use lumen_runtime::{NodeProfile, Peak, RUNTIME_NAMES, Tensors};
use serde_json::json;

use super::out;

/// Arguments of `lumen run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A safetensors model file (an MLP's `x` [B, in], `w1..wL` [in, out], `b1..bL` [out],
    /// optionally labels `y` [B] and reference `logits` [B, out]; or a ViT), or an ONNX model
    /// (a file ending in `.onnx`, with --inputs).
    file: PathBuf,
    /// ONNX: a safetensors file holding every graph input by its ONNX name (f32, or i64/i32
    /// token ids and masks); symbolic dimensions take these tensors' shapes.
    #[arg(long, value_name = "FILE")]
    inputs: Option<PathBuf>,
    /// ONNX: a safetensors file of reference outputs by graph output name (onnxruntime's, say),
    /// each checked within --tolerance.
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// ONNX: the shape of a graph input, for dimensions the model leaves symbolic
    /// (`--shape input_ids=1,16`; repeatable; default: the shape of the tensor given).
    #[arg(long, value_name = "NAME=DIMS", value_parser = super::program_args::parse_shape)]
    shape: Vec<(String, Vec<usize>)>,
    /// The runtime to execute on.
    #[arg(long, default_value = "cpu", value_parser = clap::builder::PossibleValuesParser::new(RUNTIME_NAMES))]
    runtime: String,
    /// Fuse matmul + bias + activation into cuBLASLt epilogues (no search).
    #[arg(long, overrides_with = "no_fuse")]
    fuse: bool,
    /// Lower every op to its own launch (no search).
    #[arg(long = "no-fuse", overrides_with = "fuse")]
    no_fuse: bool,
    /// Skip the search and run the cost model's pick among the fusion candidates.
    #[arg(long = "no-search")]
    no_search: bool,
    /// Turn off in-place reuse (on by default here: an elementwise op writes its output into
    /// an operand that dies there, so the slab holds one of the two), for Luminal's plan_slab
    /// lifetimes exactly.
    #[arg(long = "no-in-place")]
    no_in_place: bool,
    /// Search: the most timed rounds (every candidate executes once per round, interleaved;
    /// its median is kept; default 15). Fewer when they do not fit the search budget, or when
    /// no candidate can still be shown faster than the cost model's pick. Giving it asks for a
    /// search: the share rule (at most 25% of the run) no longer applies.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..),
          conflicts_with_all = ["no_search", "fuse", "no_fuse"])]
    trials: Option<u32>,
    /// Search: measure at most this many candidates, in candidate order (asks for a search:
    /// no share rule).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          conflicts_with_all = ["no_search", "fuse", "no_fuse"])]
    max_candidates: Option<u32>,
    /// Search: start no further candidate after this many milliseconds (the first is always
    /// measured; asks for a search: no share rule).
    #[arg(long, value_name = "MS", conflicts_with_all = ["no_search", "fuse", "no_fuse"])]
    search_time_ms: Option<u64>,
    /// Search: the largest share of the whole run, the search itself included, that a search
    /// under the share rule may take, a fraction strictly between 0 and 1 (default 0.25: a
    /// search that cannot pay for itself within a quarter of the run is skipped and the cost
    /// model's pick runs). A smaller share searches only longer runs. Not with --trials,
    /// --max-candidates or --search-time-ms (they ask for a search: no share rule), nor with
    /// --no-search, --fuse or --no-fuse.
    #[arg(long, allow_negative_numbers = true, value_name = "FRACTION", value_parser = parse_share,
          conflicts_with_all = ["no_search", "fuse", "no_fuse", "trials", "max_candidates",
                                "search_time_ms"])]
    search_share: Option<f64>,
    /// Search: skip candidates whose slab exceeds this many bytes.
    #[arg(long, value_name = "BYTES", conflicts_with_all = ["no_search", "fuse", "no_fuse"])]
    memory_budget: Option<usize>,
    /// Search: how far a candidate's outputs may be from the reference candidate's, as `ABS`
    /// or `ABS,REL` (|got - ref| <= ABS + REL x |ref|; default 1e-4,1e-4). cuBLASLt's GELU
    /// epilogues need about 3e-3.
    #[arg(long, allow_negative_numbers = true, value_name = "ABS[,REL]",
          conflicts_with_all = ["no_search", "fuse", "no_fuse"])]
    search_tolerance: Option<search::Tolerance>,
    /// Search: read the choice from this tuning cache when it holds one for this program,
    /// runtime and machine (the search is then skipped), and store it there after a search
    /// (default: $LUMEN_TUNING_CACHE; none when unset).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["no_search", "fuse", "no_fuse"])]
    tuning_cache: Option<PathBuf>,
    /// How many times to execute (the execute phase's time is their total; throughput uses
    /// their median).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// CPU runtime: worker threads for the GEMM, elementwise ops and reductions (a whole
    /// number from 1 to 1024; default: every core). The workers spin between kernels unless
    /// LUMEN_CPU_PASSIVE_WAIT=1 is set (for processes sharing the cores).
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    threads: Option<usize>,
    /// Let the plan reuse a weight's bytes after its last reader (Luminal's lifetimes), so
    /// such a weight is uploaded again on every execute. Default on the CPU: weights stay
    /// resident (uploaded once at prepare) unless the resident slab passes the memory limit.
    #[arg(long = "no-resident-weights")]
    no_resident_weights: bool,
    /// Slab placement algorithm (first-fit is Luminal's plan_slab; `best` the tightest lumen has).
    #[arg(long, value_name = "NAME", default_value = "first-fit", value_parser = super::plan_slab::algorithm_parser())]
    algorithm: lumen_planner::SlabAlgorithm,
    /// Largest max abs error against the file's logits that passes (f32 against
    /// scikit-learn's f64).
    #[arg(long, allow_negative_numbers = true, value_name = "ERR",
          default_value_t = model::DEFAULT_TOLERANCE, value_parser = parse_tolerance)]
    tolerance: f64,
    /// Time every LLIR node of each execute (CPU runtime) and print where the time goes:
    /// each op class's median time and share (`conv 3x3/2 depthwise`, `conv 1x1`,
    /// `lt_matmul`, ...) and the slowest nodes with their shapes; with --json a `profile`
    /// object listing every node. ONNX Runtime's `enable_profiling`, as a table.
    #[arg(long)]
    profile: bool,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    json: bool,
}

/// The most threads `--threads` takes: far more than any machine lumen runs on has cores, and
/// few enough that spawning them cannot exhaust the process.
pub(super) const MAX_THREADS: usize = 1024;

/// `--threads N`: a whole number from 1 to [`MAX_THREADS`].
pub(super) fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("0 threads cannot run anything: give at least 1 (or leave --threads out \
                       for every core)"
            .to_string()),
        Ok(n) if n > MAX_THREADS => Err(format!("at most {MAX_THREADS} threads")),
        Ok(n) => Ok(n),
        // All digits but too large for a usize: a whole number, just far too many.
        Err(_) if !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit()) => {
            Err(format!("at most {MAX_THREADS} threads"))
        }
        Err(_) => Err(format!("`{s}` is not a whole number of threads")),
    }
}

/// The runtime called `name` with `--threads`: the CPU runtime's worker threads, and the
/// warnings about them, already printed on stderr (more threads than cores). Only the CPU
/// runtime has threads of its own, so `--threads` with another runtime is a usage error.
pub(super) fn runtime_with_threads(
    name: &str,
    threads: Option<usize>,
) -> anyhow::Result<(Box<dyn lumen_runtime::Runtime>, Vec<String>)> {
    if threads.is_some() && name != "cpu" {
        return Err(super::usage::UsageError::new(format!(
            "--threads applies to the cpu runtime, not {name}"
        ))
        .into());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut warnings = Vec::new();
    if let Some(n) = threads.filter(|&n| n > cores) {
        // Honoured (a user may measure oversubscription on purpose), but said: more workers
        // than cores only wait for each other, and an execute can be many times slower.
        warnings.push(format!(
            "--threads {n} is more than the {cores} core(s) this process may use; the workers \
             will share them and an execute can be much slower"
        ));
    }
    warn(&warnings);
    Ok((lumen_runtime::runtime_with_threads(name, threads)?, warnings))
}

/// The slab a resident-weights plan may take, bytes, and where that limit comes from:
/// `--memory-budget` when given, else half of the memory the kernel says is available
/// (`MemAvailable` of `/proc/meminfo`), else no limit; the words name the limit for the report.
fn memory_limit(budget: Option<usize>) -> (Option<usize>, String) {
    if let Some(b) = budget {
        return (Some(b), format!("--memory-budget {b} B"));
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    match mem_available(&meminfo) {
        Some(bytes) => (Some(bytes / 2), format!("half of MemAvailable, {} B", bytes / 2)),
        None => (None, "none, /proc/meminfo gives no MemAvailable".to_string()),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, bytes (the file says kB, meaning KiB).
pub(super) fn mem_available(meminfo: &str) -> Option<usize> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let kib: usize = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// Whether a plan whose slab is `slab` bytes keeps its weights resident under `limit`.
fn resident_fits(slab: usize, limit: Option<usize>) -> bool {
    limit.is_none_or(|l| slab <= l)
}

/// A finite, non-negative error budget.
fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite, non-negative number")),
    }
}

/// `--search-share`: a fraction strictly between 0 and 1.
fn parse_share(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!("`{s}` is not a fraction strictly between 0 and 1 (0.25 is a quarter)")),
    }
}

/// `1 launch`, `3 launches`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What chose the program that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// The search: the cost model's pick, or a candidate measured faster with confidence
    /// (the tuning cache's record of such a search when it holds one).
    Search,
    /// `--no-search` alone: the cost model's pick among the fusion candidates.
    CostModel,
    /// `--fuse` (true) or `--no-fuse` (false): the program asked for, whatever else was given.
    Asked(bool),
}

impl Choice {
    fn of(args: &Args) -> Choice {
        // clap's overrides_with leaves at most one of the two set: the last one given.
        if args.fuse || args.no_fuse {
            Choice::Asked(args.fuse)
        } else if args.no_search {
            Choice::CostModel
        } else {
            Choice::Search
        }
    }

    /// The JSON's `chosen_by`.
    fn word(self) -> &'static str {
        match self {
            Choice::Search => "search",
            Choice::CostModel => "cost_model",
            Choice::Asked(true) => "--fuse",
            Choice::Asked(false) => "--no-fuse",
        }
    }

    /// Why no search ran, for the `search` line (`None` when one did).
    fn why_not_searched(self) -> Option<&'static str> {
        match self {
            Choice::Search => None,
            Choice::CostModel => {
                Some("--no-search): the cost model's pick among the fusion candidates")
            }
            Choice::Asked(true) => Some("--fuse): the fused program, as asked"),
            Choice::Asked(false) => Some("--no-fuse): the unfused program, as asked"),
        }
    }
}

/// What one run measured.
struct Outcome {
    model: Model,
    program: CompiledProgram,
    runtime: &'static str,
    /// The target the program was compiled for (the runtime's).
    target: Target,
    /// Host threads an execute ran on.
    threads: usize,
    /// How the CPU runtime's workers wait between kernels; `None` without workers.
    worker_wait: Option<lumen_runtime::team::WorkerWait>,
    /// Warnings about the runtime (more threads than cores), printed when it was made.
    runtime_warnings: Vec<String>,
    /// Whether every weight stayed resident, and why (or why not), in words.
    resident: (bool, String),
    /// Host-to-slab bytes of the last execute: all, and the weights' part.
    upload_bytes: usize,
    weight_upload_bytes: usize,
    /// Host bytes of weights packed at prepare for the GEMM (CPU), besides the slab.
    packed_weight_bytes: usize,
    /// Input bytes read from the caller's tensors in place (CPU), not uploaded.
    input_in_place_bytes: usize,
    /// Every output of the first execute, by the program's output names.
    outputs: Tensors,
    repeat_identical: bool,
    report: PhaseReport,
    peak: Peak,
    load_seconds: f64,
    /// `None` when the program was chosen without a search (or by the tuning cache).
    search: Option<SearchReport>,
    /// The tuning cache's part, when one was used.
    cache: Option<CacheUse>,
    /// What chose the program.
    choice: Choice,
    /// Per-node times (`--profile` on a runtime that times its nodes).
    profile: Option<NodeProfile>,
}

/// Runs `lumen run`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let choice = Choice::of(&args);
    let fuse = match choice {
        Choice::Asked(fuse) => fuse,
        // The search explores every candidate; the cost model's pick is the default compile.
        Choice::Search | Choice::CostModel => CompileOptions::default().fuse,
    };
    let outcome = execute(&args, fuse, choice)?;
    let check = model::check_all_outputs(&outcome.model, &outcome.outputs, args.tolerance);
    if args.json {
        out::print_json(&to_json(&args, &outcome, &check))?;
    } else {
        out::print(&to_text(&args, &outcome, &check))?;
    }
    let mut failures: Vec<&str> = check.failures();
    // One prepared program must give the same bits every execute (the runtime's slab
    // discipline); a difference means state leaked between executes.
    if !outcome.repeat_identical {
        failures.push("outputs differ between executes of the same prepared program");
    }
    if !failures.is_empty() {
        anyhow::bail!("check failed: {}", failures.join("; "));
    }
    Ok(())
}

fn execute(args: &Args, fuse: bool, choice: Choice) -> anyhow::Result<Outcome> {
    let searching = choice == Choice::Search;
    let start = Instant::now();
    let model = load(args)?;
    let load_seconds = start.elapsed().as_secs_f64();
    // The runtime first: `--runtime cuda` without a device fails before any work.
    let (runtime, runtime_warnings) = runtime_with_threads(&args.runtime, args.threads)?;
    let target = runtime.target();

    let mut times = PhaseTimes::new();
    // The stem labels dump files; any file name must still make a valid program name.
    let name = args
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .map(|s| lumen_compiler::compile::sanitize_program_name(&s))
        .unwrap_or_else(|| "model".to_string());
    // Compiled for the runtime that runs it (the CPU reserves no cuBLASLt workspace). On
    // the CPU weights stay resident unless asked otherwise or the slab passes the limit.
    let want_resident = target == Target::Cpu && !args.no_resident_weights;
    let (limit, limit_words) = memory_limit(args.memory_budget);
    let options = CompileOptions {
        fuse,
        name,
        algorithm: args.algorithm,
        in_place: !args.no_in_place,
        resident_weights: want_resident,
        ..target.options()
    };
    let not_resident = CompileOptions { resident_weights: false, ..options.clone() };
    let mut resident = if want_resident {
        (
            true,
            format!(
                "resident: every weight is uploaded once, at prepare (slab within the limit: {limit_words})"
            ),
        )
    } else if target == Target::Cpu {
        (false, "not resident (--no-resident-weights): weights the plan reuses are uploaded every execute".to_string())
    } else {
        (false, format!("not resident: the {} runtime keeps Luminal's lifetimes", runtime.name()))
    };
    let too_large = |slab: usize| {
        (
            false,
            format!(
                "not resident: the resident plan's slab, {slab} B, passes the limit ({limit_words}); weights the plan reuses are uploaded every execute"
            ),
        )
    };
    let weights = model.weights();
    let inputs: Tensors = model.inputs();
    let mut search_report = None;
    let mut cache = None;
    let mut prepared = None;
    let program = if searching {
        // graph_compile: the e-graph's candidates, each lowered and planned; search: each
        // prepared and timed on the runtime that runs the winner.
        let exploration = times.time(Phase::GraphCompile, || -> anyhow::Result<_> {
            let graph = model.graph()?;
            if let Some(err) = graph.recorded_error() {
                return Err(err.into());
            }
            let hlir = graph.hlir();
            let config = FusionConfig::default();
            let e = fusion::explore(&hlir, &options.name, &options, &config)?;
            // Resident only when the cost model's pick fits; else every candidate is planned
            // again with Luminal's lifetimes.
            let slab = e.picked().map_or(0, |c| c.program.figures.slab_bytes);
            if options.resident_weights && !resident_fits(slab, limit) {
                resident = too_large(slab);
                return Ok(fusion::explore(&hlir, &options.name, &not_resident, &config)?);
            }
            Ok(e)
        })?;
        // The share rule: without an explicit budget the search must pay for itself within
        // this run (its --runs executes, after what loading and compiling took).
        let explicit =
            args.trials.is_some() || args.search_time_ms.is_some() || args.max_candidates.is_some();
        let plan = RunPlan { executes: u64::from(args.runs), spent: start.elapsed() };
        let search_options = SearchOptions {
            trials: args.trials.map_or(search::DEFAULT_TRIALS, |t| t as usize),
            run: (!explicit).then_some(plan),
            max_candidates: args.max_candidates.map(|n| n as usize),
            time_limit: args.search_time_ms.map(Duration::from_millis),
            memory_budget: args.memory_budget,
            tolerance: args.search_tolerance.unwrap_or_default(),
            share: args.search_share.unwrap_or(search::SEARCH_SHARE),
            ..SearchOptions::from_env()
        };
        let (tuned, kept) = tuning::tuned_search_prepared(
            runtime.as_ref(),
            &exploration.candidates,
            &weights,
            &inputs,
            &search_options,
            Progress::Auto,
            tuning_cache_path(args.tuning_cache.as_deref()).as_deref(),
        )
        .map_err(|e| at_node(&model, e.into()))?;
        warn(&tuned.warnings);
        // The selected candidate, prepared by the search, is the run's: its prepare is the
        // prepare phase, not the search's.
        let kept_ms = match (&kept, tuned.report.as_ref().and_then(|r| r.kept_prepare_ms)) {
            (Some(_), Some(ms)) => Some(ms),
            _ => None,
        };
        times.record_seconds(Phase::Search, (tuned.search_ms() - kept_ms.unwrap_or(0.0)) / 1e3);
        if let (Some(p), Some(ms)) = (kept, kept_ms) {
            times.record_seconds(Phase::Prepare, ms / 1e3);
            prepared = Some(p);
        }
        let winner = exploration
            .candidates
            .into_iter()
            .nth(tuned.selected)
            .context("the search selected no candidate")?;
        search_report = tuned.report;
        cache = tuned.cache;
        winner.program
    } else {
        times.time(Phase::GraphCompile, || -> anyhow::Result<CompiledProgram> {
            let graph = model.graph()?;
            let program = graph.compile(&options)?;
            let slab = program.figures.slab_bytes;
            if options.resident_weights && !resident_fits(slab, limit) {
                resident = too_large(slab);
                return Ok(graph.compile(&not_resident)?);
            }
            Ok(program)
        })?
    };
    let mut prepared = match prepared {
        Some(p) => p,
        None => times.time(Phase::Prepare, || runtime.prepare(&program, &weights))?,
    };
    if args.profile && !prepared.time_nodes(true) {
        warn(&[format!(
            "--profile: the {} runtime does not time its nodes yet; no profile",
            runtime.name()
        )]);
    }
    let mut node_samples = Vec::new();
    let mut first: Option<Tensors> = None;
    let mut repeat_identical = true;
    for _ in 0..args.runs {
        let t = Instant::now();
        let out = prepared.execute(&inputs).map_err(|e| at_node(&model, e.into()))?;
        times.record(Phase::Execute, t.elapsed());
        if let Some(p) = prepared.last_profile().filter(|p| !p.node_ms.is_empty()) {
            node_samples.push(p.node_ms.clone());
        }
        match &first {
            None => first = Some(out),
            Some(f) => repeat_identical &= bit_identical(f, &out),
        }
    }
    let outputs = first.context("the program was not executed")?;
    let profile = NodeProfile::from_samples(&program, &node_samples);
    let upload_bytes = prepared.last_profile().map_or(0, |p| p.upload_bytes);
    let input_bytes: usize = inputs.values().map(|t| t.bytes()).sum();
    let peak = runtime.peak();
    let report = times.report(program.figures.flops, &peak);
    Ok(Outcome {
        model,
        program,
        runtime: runtime.name(),
        target,
        threads: runtime.threads(),
        worker_wait: runtime.worker_wait(),
        runtime_warnings,
        resident,
        upload_bytes,
        weight_upload_bytes: upload_bytes
            .saturating_sub(input_bytes.saturating_sub(prepared.input_bytes_read_in_place())),
        packed_weight_bytes: prepared.packed_weight_bytes(),
        input_in_place_bytes: prepared.input_bytes_read_in_place(),
        outputs,
        repeat_identical,
        report,
        peak,
        load_seconds,
        search: search_report,
        cache,
        choice,
        profile,
    })
}

/// The tuning cache to use: `--tuning-cache`, else `$LUMEN_TUNING_CACHE` when set and not
/// empty, else none.
pub(super) fn tuning_cache_path(flag: Option<&std::path::Path>) -> Option<PathBuf> {
    flag.map(std::path::Path::to_path_buf).or_else(|| {
        std::env::var_os(lumen_runtime::env::TUNING_CACHE)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Prints each warning as one `warning: ...` line on stderr (a closed stderr is ignored).
pub(super) fn warn(warnings: &[String]) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    for w in warnings {
        let _ = writeln!(err, "warning: {w}");
    }
}

/// Reads the model: a safetensors model file, or an ONNX model with its --inputs and
/// --expect files. The ONNX flags with a safetensors model are a usage error.
fn load(args: &Args) -> anyhow::Result<Model> {
    let name = args.file.to_string_lossy();
    if !args.file.exists() && lumen_compiler::programs::BUILTIN.contains(&name.as_ref()) {
        // A built-in program's name where a model file was expected.
        return Err(super::usage::UsageError::new(format!(
            "`{name}` is a built-in program, not a model file: `lumen run` runs a model file \
             (.safetensors or .onnx); `lumen compare {name} --profile` runs the built-in \
             program on this machine"
        ))
        .into());
    }
    let context = || format!("cannot load a model from {}", args.file.display());
    if !model::is_onnx(&args.file) {
        let flag = [
            (args.inputs.is_some(), "--inputs"),
            (args.expect.is_some(), "--expect"),
            (!args.shape.is_empty(), "--shape"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag));
        if let Some(flag) = flag {
            return Err(super::usage::UsageError::new(format!(
                "{flag} applies to ONNX models (a file ending in .onnx), not {}",
                args.file.display()
            ))
            .into());
        }
        return model::load(&args.file).with_context(context);
    }
    let files = model::OnnxFiles {
        inputs: args.inputs.as_deref(),
        expect: args.expect.as_deref(),
        shapes: super::program_args::shape_map(&args.shape)?,
    };
    // An error about a tensor file given beside the model (a reference of another dtype, a
    // tensor naming no input or output) names that file: the model itself loaded.
    let loaded = model::load_onnx(&args.file, &files).map_err(|e| match e {
        model::ModelError::ExpectDtype { .. }
        | model::ModelError::Unexpected { .. }
        | model::ModelError::InFile { .. } => anyhow::Error::from(e),
        e => anyhow::Error::from(e).context(context()),
    })?;
    Ok(Model::Onnx(loaded))
}

/// A run-time error traced to the ONNX node behind it: an index out of range in a position
/// buffer the importer named after its node ([`lumen_onnx::Imported::index_buffers`]) becomes
/// `node `u` (MaxUnpool): <the runtime's message>`, with the buffer's note when the id is
/// exactly the axis' length (what a bad input becomes), whichever candidate met it first (the
/// positions are data: every candidate fails on them alike). Any other error is returned as
/// it is.
fn at_node(model: &Model, err: anyhow::Error) -> anyhow::Error {
    let Model::Onnx(onnx) = model else { return err };
    for cause in err.chain() {
        if let Some(e @ lumen_runtime::RuntimeError::IndexOutOfRange { tensor, index, rows, .. }) =
            cause.downcast_ref::<lumen_runtime::RuntimeError>()
            && let Some(b) = onnx.imported.index_buffer(tensor)
        {
            // The note explains an id of exactly the axis' length, what a bad input becomes.
            let note = if b.note.is_empty() || usize::try_from(*index) != Ok(*rows) {
                String::new()
            } else {
                format!(" ({})", b.note)
            };
            return anyhow::anyhow!("node `{}` ({}): {e}{note}", b.node, b.op);
        }
    }
    err
}

/// Marked buffers whose plan put them at their operand's offset (in-place reuse taken).
fn in_place_taken(program: &CompiledProgram) -> usize {
    let offsets = &program.plan.offsets;
    program
        .llir
        .buffers
        .iter()
        .enumerate()
        .filter(|(i, b)| b.in_place_of.is_some_and(|a| offsets.get(a) == offsets.get(*i)))
        .count()
}

/// The `in place` line: off, or how many outputs took their operand's bytes.
fn in_place_text(args: &Args, program: &CompiledProgram) -> String {
    if args.no_in_place {
        return "off (--no-in-place): Luminal's plan_slab lifetimes".to_string();
    }
    match in_place_taken(program) {
        0 => "on: no output took its operand's bytes (none could, or it would not shrink the slab)"
            .to_string(),
        n => format!("on: {n} elementwise outputs written over their dying operands"),
    }
}

fn bit_identical(a: &Tensors, b: &Tensors) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((ka, ta), (kb, tb))| {
            ka == kb
                && ta.shape() == tb.shape()
                && ta.data().iter().zip(tb.data()).all(|(x, y)| x.to_bits() == y.to_bits())
        })
}

/// `finite outputs`, `max abs error`, `accuracy`: a check's name in the text report.
fn check_words(name: &str) -> &str {
    match name {
        "finite" => "finite outputs",
        "max_abs_err" => "max abs error",
        other => other,
    }
}

/// The verdict line: `passed: finite outputs, max abs error, accuracy` or `FAILED: <why>`,
/// then what was skipped and why.
fn check_line(check: &OutputCheck) -> String {
    let names = |status: CheckStatus| -> Vec<&str> {
        check.checks.iter().filter(|c| c.status == status).map(|c| check_words(c.name)).collect()
    };
    let mut line = if check.passed() {
        format!("passed: {}", names(CheckStatus::Passed).join(", "))
    } else {
        format!("FAILED: {}", check.failures().join("; "))
    };
    let skipped: Vec<String> = check
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Skipped)
        .map(|c| format!("{} ({})", check_words(c.name), c.detail))
        .collect();
    if !skipped.is_empty() {
        line.push_str(&format!("; skipped: {}", skipped.join(", ")));
    }
    line
}

fn to_text(args: &Args, o: &Outcome, check: &OutputCheck) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let f = &o.program.figures;
    let plan = &o.program.plan;
    let _ = writeln!(
        s,
        "model      {}: {}, batch {}",
        args.file.display(),
        o.model.describe(),
        o.model.batch()
    );
    let _ = writeln!(
        s,
        "program    {} on {}: {}, {}, {} FLOP per execute",
        o.program.label,
        o.runtime,
        count(f.nodes, "node", "nodes"),
        count(f.launches, "launch", "launches"),
        f.flops
    );
    match (&o.search, &o.cache) {
        (Some(report), cache) => {
            let _ = writeln!(s, "\n{report}");
            if let Some(line) = cache.as_ref().and_then(cache_line) {
                let _ = writeln!(s, "{line}");
            }
            s.push('\n');
        }
        (None, Some(cache)) => {
            let _ = writeln!(s, "{}", cache_line(cache).unwrap_or_default());
        }
        (None, None) => {
            let why = o.choice.why_not_searched().unwrap_or("no report)");
            let _ = writeln!(s, "search     not run ({why}");
        }
    }
    match (o.model.labels(), check.accuracy) {
        (Some(labels), Some((correct, acc))) => {
            let _ =
                write!(s, "accuracy   {:.2}% ({correct}/{}) against y", acc * 100.0, labels.len());
            if let (Some((reference, _)), Some(who)) =
                (check.reference_accuracy, &check.reference_label)
            {
                let _ = write!(s, " ({who}: {:.2}%)", reference * 100.0);
            }
            s.push('\n');
        }
        _ if matches!(o.model, Model::Onnx(_)) => {}
        _ => s.push_str("accuracy   n/a (the file has no labels y): check skipped\n"),
    }
    for warning in &check.warnings {
        let _ = writeln!(s, "warning    {warning}");
    }
    let tol = check.tolerance;
    let against = o.model.reference_words();
    if check.per_output.is_empty() {
        let why = match &o.model {
            Model::Onnx(m) if m.expect.is_some() => "the --expect file holds none of the outputs",
            Model::Onnx(_) => "no --expect file",
            _ => "the file has no logits",
        };
        let _ = writeln!(s, "max error  n/a ({why}): check skipped");
    }
    for out in &check.per_output {
        // One line per reference output; the MLP's and the ViT's one is the file's logits.
        let on = match o.model {
            Model::Onnx(_) => format!("on {} ", out.name),
            _ => String::new(),
        };
        match (&out.shape, out.max_abs_err) {
            (Some(_), Some(err)) => {
                let verdict = if err <= tol { "within" } else { "EXCEEDS" };
                let _ = writeln!(
                    s,
                    "max error  {err:.3e} {on}against {against} ({verdict} {})",
                    model::tolerance_text(tol)
                );
            }
            (Some(shape), None) => {
                let _ = writeln!(
                    s,
                    "max error  n/a: outputs {shape:?} against {against} {:?}",
                    out.reference_shape
                );
            }
            (None, _) => {
                let _ = writeln!(s, "max error  n/a: the run returned no output `{}`", out.name);
            }
        }
    }
    let _ = writeln!(s, "check      {}", check_line(check));
    let _ = writeln!(
        s,
        "plan       slab {} B, naive {} B (no reuse), lower bound {} B: slab is {:.1}% of naive, {:.3}x the lower bound",
        plan.slab_bytes,
        plan.naive_bytes,
        plan.lower_bound,
        ratio(plan.slab_bytes, plan.naive_bytes) * 100.0,
        ratio(plan.slab_bytes, plan.lower_bound)
    );
    let _ = writeln!(s, "in place   {}", in_place_text(args, &o.program));
    let _ = writeln!(s, "weights    {}", o.resident.1);
    let _ = writeln!(
        s,
        "uploads    {} B per execute: inputs {} B, weights {} B{}",
        o.upload_bytes,
        o.upload_bytes - o.weight_upload_bytes,
        o.weight_upload_bytes,
        match o.input_in_place_bytes {
            0 => String::new(),
            b => format!("; {b} B of inputs read in place, not copied"),
        }
    );
    if o.packed_weight_bytes > 0 {
        let _ = writeln!(
            s,
            "packed     {} B of weights packed once at prepare for the GEMM (host memory besides the slab)",
            o.packed_weight_bytes
        );
    }
    let _ = writeln!(
        s,
        "repeats    {}, outputs {}; {} in {:.3} ms",
        count(args.runs as usize, "execute", "executes"),
        match (args.runs, o.repeat_identical) {
            (0 | 1, _) => "not compared (one execute)",
            (_, true) => "bit-identical",
            (_, false) => "DIFFER between executes",
        },
        match o.model {
            Model::Onnx(_) => "model read and imported",
            _ => "file read",
        },
        o.load_seconds * 1e3
    );
    let _ = writeln!(
        s,
        "threads    {} ({}){}",
        o.threads,
        match (o.runtime, args.threads) {
            ("cpu", Some(_)) => "--threads",
            ("cpu", None) => "every core; --threads N to change",
            _ => "the host thread that launches the device's work",
        },
        o.worker_wait.map_or(String::new(), |w| format!(", {}", w.describe()))
    );
    s.push('\n');
    let _ = writeln!(s, "{}", o.report);
    let _ = writeln!(s, "peak       {} = {}", format_flops(o.peak.flops), o.peak.basis);
    if let Some(p) = &o.profile {
        let _ = write!(s, "\n{}", p.text(PROFILE_TOP));
    }
    s
}

/// How many of the slowest nodes `--profile` lists in the text report (JSON lists all).
const PROFILE_TOP: usize = 15;

/// What the tuning cache did, in the text report: `tuning     stored this choice in FILE
/// (key K)`, `tuning     could not store this choice in FILE (see the warning)`, or, on a hit,
/// the `search` line that says the search was skipped and the recorded `choice` line.
pub(super) fn cache_line(cache: &CacheUse) -> Option<String> {
    let file = cache.file.display();
    let key = &cache.key;
    Some(match (&cache.status, &cache.entry) {
        (CacheStatus::Stored, _) => format!("tuning     stored this choice in {file} (key {key})"),
        (CacheStatus::NotStored, _) => {
            format!("tuning     could not store this choice in {file} (see the warning)")
        }
        (CacheStatus::Hit, Some(e)) => format!(
            "search     skipped: the tuning cache {file} holds this program's choice on this \
             machine (key {key}, read in {:.3} ms): {}, from {} in {:.3} ms\n\
             choice     {} (recorded)",
            cache.ms,
            e.selected,
            match (e.decision_kind.as_str(), e.run_executes) {
                ("too_short", Some(n)) => format!(
                    "a search skipped as too short for a run of {n} execute{} at a {}% share",
                    if n == 1 { "" } else { "s" },
                    search::payoff::share_percent(e.run_share.unwrap_or(search::SEARCH_SHARE))
                ),
                _ => format!(
                    "a search of {} round{}",
                    e.rounds,
                    if e.rounds == 1 { "" } else { "s" }
                ),
            },
            e.search_ms,
            e.decision
        ),
        (CacheStatus::Hit, None) => return None,
    })
}

/// The JSON's `tuning_cache`: `{"file", "key", "status" ("hit", "stored", "not_stored"),
/// "skipped_search", "ms", "entry"}` (the recorded entry on a hit, else null).
pub(super) fn cache_json(cache: &CacheUse) -> serde_json::Value {
    json!({
        "file": cache.file.display().to_string(),
        "key": cache.key,
        "status": cache.status,
        "skipped_search": cache.status == CacheStatus::Hit,
        "ms": cache.ms,
        "entry": cache.entry,
    })
}

/// The JSON's `decision`: the search's (`kind` `kept`, `measured_winner` or `too_short`
/// (the share rule skipped the search; `payoff` has its arithmetic), `text`, `test`,
/// `alpha`, `alpha_per_comparison`, `min_speedup`, `baseline`, `selected`, `comparisons`
/// with each challenger's `wins`, `losses`, `ties`, `median_speedup`, `p_value`), or the
/// tuning cache's record of it (`kind`, `text`, `recorded: true`).
pub(super) fn decision_json(
    report: Option<&SearchReport>,
    cache: Option<&CacheUse>,
) -> serde_json::Value {
    if let Some(r) = report {
        let d = &r.decision;
        let label = |i: usize| r.candidates.get(i).map(|c| c.label.clone());
        return json!({
            "kind": r.decision_kind(),
            "text": r.decision_text(),
            "test": "one-sided sign test",
            "recorded": false,
            "alpha": d.alpha,
            "alpha_per_comparison": d.alpha_per_comparison,
            "min_speedup": d.min_speedup,
            "baseline": label(d.baseline),
            "baseline_is_cost_model_pick": d.baseline_is_pick,
            "selected": label(d.selected),
            "winner": d.winning().map(|w| w.label.clone()),
            "p_value": d.winning().map(|w| w.p_value),
            "median_speedup": d.winning().map(|w| w.median_speedup),
            "comparisons": d.comparisons,
            "rounds": r.rounds,
            "planned_rounds": r.planned_rounds,
            "stopped": r.stopped,
            "payoff": r.payoff,
        });
    }
    match cache.and_then(|c| c.entry.as_ref()) {
        Some(e) => json!({"kind": e.decision_kind, "text": e.decision, "recorded": true,
                          "selected": e.selected, "rounds": e.rounds}),
        None => serde_json::Value::Null,
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn to_json(args: &Args, o: &Outcome, check: &OutputCheck) -> serde_json::Value {
    let f = &o.program.figures;
    let plan = &o.program.plan;
    let (correct, accuracy) = match check.accuracy {
        Some((c, a)) => (json!(c), json!(a)),
        None => (json!(null), json!(null)),
    };
    let max_abs_err = check.max_abs_err;
    let checks: serde_json::Map<String, serde_json::Value> = check
        .checks
        .iter()
        .map(|c| (c.name.to_string(), json!({"status": c.status.word(), "detail": c.detail})))
        .collect();
    let phases: serde_json::Map<String, serde_json::Value> = o
        .report
        .phases
        .iter()
        .map(|r| {
            (
                r.phase.name().to_string(),
                json!({"seconds": r.seconds, "runs": r.runs, "share": r.share}),
            )
        })
        .collect();
    let achieved = o.report.achieved.as_ref();
    let recorded = |key: &str| o.model.metadata().get(key).and_then(|v| v.parse::<f64>().ok());
    let (sklearn_accuracy, framework_accuracy) =
        (recorded("sklearn_accuracy"), recorded("framework_accuracy"));
    let widths = match &o.model {
        Model::Mlp(m) => json!(m.widths()),
        Model::Vit(_) | Model::Onnx(_) => serde_json::Value::Null,
    };
    let config = match &o.model {
        Model::Mlp(_) => serde_json::Value::Null,
        Model::Onnx(m) => {
            let im = &m.imported;
            let inputs: Vec<serde_json::Value> = im
                .inputs
                .iter()
                .map(|i| {
                    json!({"name": i.onnx_name, "program_name": i.name, "shape": i.shape,
                           "dtype": i.dtype.name(), "cast_from": i.cast_from.map(|d| d.name())})
                })
                .collect();
            let outputs: Vec<serde_json::Value> = im
                .outputs
                .iter()
                .map(|(onnx, lumen)| {
                    let err = check
                        .per_output
                        .iter()
                        .find(|e| &e.name == lumen)
                        .and_then(|e| e.max_abs_err);
                    json!({"name": onnx, "program_name": lumen,
                           "shape": o.outputs.get(lumen).map(|t| t.shape().to_vec()),
                           "max_abs_err": err})
                })
                .collect();
            json!({"opset": im.opset, "producer": im.producer, "nodes": im.nodes,
                   "folded": im.folded, "inputs": inputs, "outputs": outputs,
                   "specialized": im.specialized,
                   "skipped": im.skipped.iter().map(|(o, why)| json!({"name": o, "reason": why})).collect::<Vec<_>>()})
        }
        Model::Vit(m) => {
            let c = &m.config;
            json!({"image": c.image, "patch": c.patch, "width": c.width, "heads": c.heads,
                   "blocks": c.blocks, "ffn": c.ffn, "classes": c.classes, "eps": c.eps,
                   "gelu": format!("{:?}", c.gelu).to_lowercase()})
        }
    };
    let mut value = json!({
        "file": args.file.display().to_string(),
        "label": o.program.label,
        "runtime": o.runtime,
        "fused": !o.program.label.ends_with("-unfused"),
        "architecture": o.model.architecture(),
        "model": o.model.describe(),
        "widths": widths,
        "config": config,
        "batch": o.model.batch(),
        "accuracy": accuracy,
        "correct": correct,
        "samples": o.model.labels().map(<[i64]>::len),
        "sklearn_accuracy": sklearn_accuracy,
        "framework_accuracy": framework_accuracy,
        "framework": o.model.metadata().get("framework"),
        "max_abs_err": max_abs_err,
        "within_tolerance": max_abs_err.map(|e| e <= check.tolerance),
        "slab_bytes": plan.slab_bytes,
        "naive_bytes": plan.naive_bytes,
        "lower_bound": plan.lower_bound,
        "in_place": !args.no_in_place,
        "in_place_taken": in_place_taken(&o.program),
        "nodes": f.nodes,
        "launches": f.launches,
        "flops": f.flops,
        "dram_bytes": f.dram_bytes,
        "runs": args.runs,
        "repeat_identical": o.repeat_identical,
        "load_seconds": o.load_seconds,
        "phases": phases,
        "total_seconds": o.report.total_seconds,
        "execute_seconds_mean": achieved.map(|a| a.mean_seconds),
        "execute_seconds_median": achieved.map(|a| a.seconds),
        "achieved_flops": achieved.map(|a| a.flops_per_s),
        "gflops": achieved.map(|a| a.flops_per_s / 1e9),
        "peak_flops": o.peak.flops,
        "peak_basis": o.peak.basis,
        "fraction_of_peak": achieved.map(|a| a.fraction_of_peak),
    });
    // The runtime's keys in a fourth object, for the same reason.
    let runtime = json!({
        "target": o.target.name(),
        "threads": o.threads,
        "workers_spin": o.worker_wait == Some(lumen_runtime::team::WorkerWait::Spin),
        "workspace_bytes": o.program.options.workspace_bytes,
        "resident_weights": o.resident.0,
        "resident_weights_detail": o.resident.1,
        "upload_bytes_per_execute": o.upload_bytes,
        "weight_upload_bytes_per_execute": o.weight_upload_bytes,
        "packed_weight_bytes": o.packed_weight_bytes,
        "input_bytes_read_in_place": o.input_in_place_bytes,
        "profile": o.profile,
    });
    // The search's keys in a third object, for the same reason.
    let searched = json!({
        "searched": o.search.as_ref().is_some_and(|r| !r.too_short()),
        "chosen_by": if o.search.is_none() && o.cache.is_some() {
            "tuning_cache"
        } else {
            o.choice.word()
        },
        "tuning_cache": o.cache.as_ref().map(cache_json),
        "decision": decision_json(o.search.as_ref(), o.cache.as_ref()),
        "candidates": o.search.as_ref().map(candidates_json),
        "search_ms": o.search.as_ref().map(|r| r.search_ms),
        "search_kept_prepare_ms": o.search.as_ref().and_then(|r| r.kept_prepare_ms),
        "search_tolerance": o.search.as_ref().map(|r| r.tolerance),
        "break_even": o.search.as_ref().map(|r| r.break_even),
    });
    // The checks in a second object: one json! of every key passes the macro recursion limit.
    let verdict = json!({
        "tolerance": check.tolerance,
        "reference_accuracy": check.reference_accuracy.map(|(a, _)| a),
        "reference_accuracy_source": check.reference_accuracy.map(|(_, s)| s.describe()),
        "nan_outputs": check.nan,
        "inf_outputs": check.inf,
        "labels_out_of_range": check.labels_out_of_range.len(),
        "warnings": check.warnings.iter().chain(&o.runtime_warnings).collect::<Vec<_>>(),
        "checks": checks,
        "passed": check.passed(),
        "failures": check.failures(),
    });
    for part in [searched, verdict, runtime] {
        if let (Some(obj), serde_json::Value::Object(more)) = (value.as_object_mut(), part) {
            obj.extend(more);
        }
    }
    value
}

/// One object per candidate: `label`, `median_ms` (null when not measured), `slab_bytes`,
/// `launches`, `selected`, what the search did (`status`, `detail`, `trials_ms`, `prepare_ms`,
/// `cost_model_pick`), and how its outputs compare with the reference candidate's
/// (`max_abs_diff`, null when it did not run or its outputs do not pair up; `reference`).
pub(super) fn candidates_json(report: &SearchReport) -> serde_json::Value {
    report
        .candidates
        .iter()
        .map(|c| {
            json!({
                "label": c.label,
                "program_label": c.program_label,
                "median_ms": c.median_ms,
                "slab_bytes": c.slab_bytes,
                "launches": c.launches,
                "selected": c.index == report.selected,
                "cost_model_pick": c.cost_model_pick,
                "status": c.status.word(),
                "detail": c.status.describe(c.slab_bytes),
                "prepare_ms": c.prepare_ms,
                "warmup_runs": c.warmup_runs,
                "trials_ms": c.trials_ms,
                "max_abs_diff": c.max_abs_diff,
                "reference": c.index == report.reference,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_parse() {
        assert_eq!(parse_threads("1"), Ok(1));
        assert_eq!(parse_threads(" 16 "), Ok(16));
        assert_eq!(parse_threads("1024"), Ok(1024));
        assert!(parse_threads("0").unwrap_err().starts_with("0 threads cannot run anything"));
        assert_eq!(parse_threads("1025").unwrap_err(), "at most 1024 threads");
        assert_eq!(parse_threads("99999999999999999999999").unwrap_err(), "at most 1024 threads");
        assert_eq!(parse_threads("1.5").unwrap_err(), "`1.5` is not a whole number of threads");
    }

    #[test]
    fn memory_limit_rule() {
        let meminfo = "MemTotal:       16000000 kB\nMemFree:  1 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(mem_available(meminfo), Some(8_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots\n"), None);
        // --memory-budget wins over the machine's memory.
        assert_eq!(memory_limit(Some(1000)), (Some(1000), "--memory-budget 1000 B".to_string()));
        // Resident when the slab is within the limit (or there is none).
        assert!(resident_fits(1000, Some(1000)));
        assert!(!resident_fits(1001, Some(1000)));
        assert!(resident_fits(usize::MAX, None));
    }
}
