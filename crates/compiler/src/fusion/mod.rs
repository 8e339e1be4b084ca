//! Fusion with egg: matmul + bias + activation -> one cuBLASLt call with an epilogue,
//! found by e-graph rewrites the way Luminal runs egg over its graph.
//!
//! Pipeline: the HLIR is loaded into an e-graph ([`egraph::load`]); the rewrite rules
//! ([`rules`]) run under a bounded runner ([`Limits`]: e-nodes, iterations, time), with an
//! e-class analysis of shapes that decides legality ([`analysis`]); each fusion policy extracts
//! a program with the launches-and-DRAM-bytes cost model ([`cost`]), which is converted back to
//! an HLIR, lowered and planned ([`mod@candidates`]); the cheapest candidate is what
//! [`crate::Graph::compile`] lowers with `fuse: true`.
//!
//! What "unfused" means: the `unfused` candidate, like `fuse: false`, is the program as
//! written. Every DSL call is its own op, so an identical matmul written twice is computed
//! twice. Every other candidate is extracted from the e-graph, where equal subterms are one
//! e-class (hash-consing) and are built once, so those candidates share them: the same matmul
//! is computed once even where no epilogue applies, and the `bias` or `fused` candidate can
//! save a launch, its DRAM bytes and its FLOPs that no epilogue accounts for. Compare the
//! figures, not only the epilogue names (common-subexpression elimination, as XLA's CSE pass;
//! Luminal gets it from the same e-graph).
//!
//! ```
//! use lumen_compiler::{CompileOptions, fusion, programs};
//!
//! let hlir = programs::linear_relu(64, 256, 64).unwrap().hlir();
//! let list = fusion::candidates(&hlir, &CompileOptions::default()).unwrap();
//! let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
//! assert_eq!(labels, ["unfused", "bias", "fused"]);
//! let pick = list.iter().find(|c| c.picked).unwrap();
//! assert_eq!(pick.label, "fused");
//! assert_eq!(pick.program.figures.launches, 1);
//! assert_eq!(pick.program.figures.slab_bytes, 1_196_288);
//! ```

pub mod analysis;
pub mod candidates;
pub mod cost;
pub mod egraph;
pub mod extract;
pub mod lang;
pub mod report;
pub mod rules;

use std::fmt;
use std::time::Duration;

use egg::{BackoffScheduler, Runner, StopReason};

pub use candidates::Candidate;
pub use cost::{CostModel, Fusions};
pub use rules::RuleSet;

use crate::error::CompileError;
use crate::hlir::Hlir;
use crate::options::CompileOptions;
use crate::program::CompiledProgram;

/// Bounds of the equality-saturation runner, so any rule set (cyclic ones included) stops,
/// and its e-graph grows at most linearly with the program.
///
/// The count limits scale with the program: each applies as the larger of its value and
/// [`GROWTH`] x the loaded program's e-nodes, and the time limit as the larger of its value and
/// [`TIME_PER_ENODE`] x those e-nodes, so a program of any size gets every rewrite of the
/// built-in rules and the same result on any machine. Why these numbers: the built-in rules
/// add at most one e-node per loaded e-node and rule (a commuted `add`/`mul`/`equal`, an
/// `lt_bias` over a matmul and an add, an `lt_*` over an activation), so the saturated e-graph
/// of any program holds at most about 3 x its loaded e-nodes (the 96-block transformer: 7,493
/// HLIR nodes, 10,181 e-nodes saturated; the 10,000-layer MLP: 80,000 from about 50,000) and a
/// rule matches at most that many times in an iteration; they saturate in at most 4
/// iterations whatever the size (a rule needs at most the previous rule's result: commute,
/// bias, activation, then a check). A rule set that does grow (associativity with
/// commutativity, exponential on a long sum) stops at [`Limits::node_limit`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Stop once the e-graph holds more e-nodes than this, or than [`GROWTH`] x the loaded
    /// program's e-nodes when that is larger (default 10,000).
    pub node_limit: usize,
    /// Stop after this many iterations (default 30; the built-in rules saturate in at most 4
    /// at any program size).
    pub iter_limit: usize,
    /// The matches a rule may find in one iteration before egg's backoff scheduler bans it
    /// for a few iterations (egg's default 1,000), or [`GROWTH`] x the loaded program's
    /// e-nodes when that is larger, so the built-in rules are never banned: a ban on a large
    /// program cost extra iterations, each a search over the whole e-graph (a 10,000-layer
    /// MLP took 11 iterations instead of 4), and on a larger one could reach the iteration
    /// limit before the bias rule ever ran.
    pub match_limit: usize,
    /// Stop after this much wall-clock time (default 1 s), or [`TIME_PER_ENODE`] x the loaded
    /// program's e-nodes when that is longer. Hitting it makes the result depend on the
    /// machine's speed; the other limits do not, and the built-in rules never come near it.
    pub time_limit: Duration,
}

/// How many times its loaded e-nodes a program's e-graph may grow to, and the matches per rule
/// and iteration allowed before a ban: [`Limits`] apply at least this many times the program.
pub const GROWTH: usize = 16;

/// The wall-clock time a program may saturate for, per loaded e-node, when that is more than
/// [`Limits::time_limit`]: 100 us, about 20 times what the built-in rules take per e-node in a
/// release build (about 5 us on a 10,000-layer MLP), so an unoptimized build stays under it too.
pub const TIME_PER_ENODE: Duration = Duration::from_micros(100);

impl Default for Limits {
    fn default() -> Self {
        Self {
            node_limit: 10_000,
            iter_limit: 30,
            match_limit: 1_000,
            time_limit: Duration::from_secs(1),
        }
    }
}

impl Limits {
    /// The limits as they apply to a program of `loaded` e-nodes: `(node limit, match limit,
    /// time limit)` (see [`Limits`]).
    pub fn applied(&self, loaded: usize) -> (usize, usize, Duration) {
        let scaled = loaded.saturating_mul(GROWTH);
        let time = TIME_PER_ENODE.saturating_mul(u32::try_from(loaded).unwrap_or(u32::MAX));
        (self.node_limit.max(scaled), self.match_limit.max(scaled), self.time_limit.max(time))
    }
}

/// Everything fusion can be configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FusionConfig {
    /// Which rules run.
    pub rules: RuleSet,
    /// The runner's bounds.
    pub limits: Limits,
    /// The cost model of extraction and of the pick.
    pub cost: CostModel,
}

/// Why the runner stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// No rule adds anything: every program the rules can reach is in the e-graph.
    Saturated,
    /// [`Limits::iter_limit`] reached.
    IterationLimit(usize),
    /// [`Limits::node_limit`] (as applied) reached.
    NodeLimit(usize),
    /// [`Limits::time_limit`] reached.
    TimeLimit(Duration),
    /// Anything else egg reports.
    Other(String),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Saturated => f.write_str("saturated"),
            Stop::IterationLimit(n) => write!(f, "iteration limit {n}"),
            Stop::NodeLimit(n) => write!(f, "node limit {n}"),
            Stop::TimeLimit(d) => write!(f, "time limit {:.3} s", d.as_secs_f64()),
            Stop::Other(s) => f.write_str(s),
        }
    }
}

/// What the runner did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saturation {
    /// Iterations run.
    pub iterations: usize,
    /// E-nodes in the e-graph at the end.
    pub egraph_nodes: usize,
    /// E-classes in the e-graph at the end.
    pub egraph_classes: usize,
    /// Why it stopped.
    pub stop: Stop,
    /// Wall-clock time of the run (machine-dependent: never in deterministic output).
    pub time: Duration,
}

/// Runs `rules` over `loaded` within `limits` (as [`Limits::applied`] scales them to the
/// program) and returns the rewritten e-graph with what the runner did. Never loops forever:
/// every rule set stops at a limit. O(n) per iteration for n e-nodes, and the built-in rules
/// take at most 4 iterations at any size.
pub fn saturate(
    loaded: egraph::Loaded,
    rules: &[rules::FusionRewrite],
    limits: &Limits,
) -> (egraph::Loaded, Saturation) {
    let egraph::Loaded { egraph, root, outputs, class_of, written } = loaded;
    let (node_limit, match_limit, time_limit) = limits.applied(egraph.total_number_of_nodes());
    let started = std::time::Instant::now();
    let runner = Runner::default()
        .with_egraph(egraph)
        .with_scheduler(BackoffScheduler::default().with_initial_match_limit(match_limit))
        .with_node_limit(node_limit)
        .with_iter_limit(limits.iter_limit)
        .with_time_limit(time_limit)
        .run(rules);
    let stop = match &runner.stop_reason {
        Some(StopReason::Saturated) => Stop::Saturated,
        Some(StopReason::IterationLimit(n)) => Stop::IterationLimit(*n),
        Some(StopReason::NodeLimit(n)) => Stop::NodeLimit(*n),
        Some(StopReason::TimeLimit(s)) => Stop::TimeLimit(Duration::from_secs_f64(s.max(0.0))),
        Some(StopReason::Other(s)) => Stop::Other(s.clone()),
        None => Stop::Other("not run".to_string()),
    };
    let saturation = Saturation {
        iterations: runner.iterations.len(),
        egraph_nodes: runner.egraph.total_number_of_nodes(),
        egraph_classes: runner.egraph.number_of_classes(),
        stop,
        time: started.elapsed(),
    };
    let root = runner.egraph.find(root);
    (egraph::Loaded { egraph: runner.egraph, root, outputs, class_of, written }, saturation)
}

/// The candidates of one program, the cost model's pick, and how the e-graph got there.
#[derive(Debug, Clone)]
pub struct Exploration {
    /// The program name (labels are `{name}-{candidate}`).
    pub name: String,
    /// The distinct candidates, in [`candidates::POLICIES`] order; at least one, except from
    /// [`explore_all`] when the planner refused them all.
    pub candidates: Vec<Candidate>,
    /// Index of the cost model's pick in `candidates`.
    pub pick: usize,
    /// Candidates the planner refused (e.g. over the capacity), with the error.
    pub refused: candidates::Refusals,
    /// What the runner did.
    pub saturation: Saturation,
}

impl Exploration {
    /// The cost model's pick.
    pub fn picked(&self) -> Option<&Candidate> {
        self.candidates.get(self.pick)
    }

    /// The candidate labelled `label`, if it exists and is distinct.
    pub fn get(&self, label: &str) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.label == label)
    }
}

/// Loads `hlir` into an e-graph, saturates it with `config`'s rules and bounds, and enumerates
/// the candidates (see [`candidates::enumerate`]); `name` prefixes their labels.
///
/// # Errors
/// [`CompileError::ProgramName`] for a `name` (or `options.name`) that cannot label dump
/// files and [`CompileError::Alignment`], first ([`CompileOptions::validate`]); every error of
/// [`Hlir::validate`]; planner errors when no candidate plans (a program too large to plan
/// gets the same [`CompileError::Plan`] as without fusion); [`CompileError::Fusion`] for an
/// internal failure of a rule or of extraction.
pub fn explore(
    hlir: &Hlir,
    name: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<Exploration, CompileError> {
    let mut e = explore_all(hlir, name, options, config)?;
    if e.candidates.is_empty() {
        return Err(e.refused.drain(..).next().map(|(_, e)| e).unwrap_or(CompileError::NoOutputs));
    }
    Ok(e)
}

/// [`explore`], except that a program whose every candidate the planner refuses (e.g. over
/// `options.capacity`) is not an error: the exploration then has no candidates, `pick` 0, and
/// lists every candidate in `refused` with its own error. The e-graph is saturated and every
/// candidate lowered and planned once either way (`lumen compare` reports what was refused
/// without exploring again).
///
/// # Errors
/// As [`explore`], without the planner errors of refused candidates.
pub fn explore_all(
    hlir: &Hlir,
    name: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<Exploration, CompileError> {
    let (loaded, saturation) = saturated(hlir, name, options, config)?;
    let (candidates, refused) = candidates::enumerate_all(hlir, &loaded, name, options, config)?;
    let pick = candidates.iter().position(|c| c.picked).unwrap_or(0);
    Ok(Exploration { name: name.to_string(), candidates, pick, refused, saturation })
}

/// The checks [`explore`] makes first, then `hlir` loaded into an e-graph and saturated with
/// `config`'s rules and bounds.
fn saturated(
    hlir: &Hlir,
    name: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<(egraph::Loaded, Saturation), CompileError> {
    // Refused before saturating: every candidate would be refused the same way.
    crate::options::validate_program_name(name)?;
    options.validate()?;
    let loaded = egraph::load(hlir)?;
    let rules = rules::rules(&config.rules)?;
    Ok(saturate(loaded, &rules, &config.limits))
}

/// The candidates of `hlir` with the default rules, bounds and cost model, named
/// `options.name`: at least the unfused program, and where the program allows them the
/// bias-only and fully fused ones. Exactly one has `picked` set. This is what the search
/// profiles.
///
/// # Errors
/// As [`explore`].
pub fn candidates(hlir: &Hlir, options: &CompileOptions) -> Result<Vec<Candidate>, CompileError> {
    Ok(explore(hlir, &options.name, options, &FusionConfig::default())?.candidates)
}

/// Compiles `hlir` with fusion: the cost model's pick among the candidates, labelled
/// `{name}-fused`, with the dumps written when [`CompileOptions::resolved_dump_dir`] names a
/// directory.
///
/// # Errors
/// As [`explore`], and [`CompileError::Dump`] when a dump cannot be written.
pub fn compile_fused(
    hlir: &Hlir,
    name: &str,
    options: &CompileOptions,
) -> Result<CompiledProgram, CompileError> {
    let config = FusionConfig::default();
    let (loaded, _) = saturated(hlir, name, options, &config)?;
    // The pick of `explore`, without planning the candidates that lose to it.
    let program = candidates::cheapest(hlir, &loaded, &format!("{name}-fused"), options, &config);
    free_in_background(loaded);
    let program = program?;
    if let Some(dir) = options.resolved_dump_dir() {
        crate::dump::write_dumps(&dir, &program)?;
    }
    Ok(program)
}

/// E-graphs above this many e-nodes are freed on a background thread.
const BACKGROUND_FREE_ENODES: usize = 10_000;

/// Frees a saturated e-graph the compiler is done with: on a background thread when it is
/// large (the 10,000-layer MLP's 80,000 e-nodes take about 40 ms to free, time `compile` need
/// not wait for), here otherwise, or when no thread can be started (the closure, and the
/// e-graph with it, is then dropped on this thread).
fn free_in_background(loaded: egraph::Loaded) {
    if loaded.egraph.total_number_of_nodes() <= BACKGROUND_FREE_ENODES {
        return;
    }
    let _ = std::thread::Builder::new().name("lumen-free".into()).spawn(move || drop(loaded));
}
