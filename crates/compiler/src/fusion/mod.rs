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
pub mod config;
pub mod cost;
pub mod egraph;
pub mod extract;
pub mod lang;
pub mod report;
pub mod rules;
pub mod saturate;

pub use candidates::Candidate;
pub use config::{FusionConfig, GROWTH, Limits, TIME_PER_ENODE};
pub use cost::{CostModel, Fusions};
pub use rules::RuleSet;
pub use saturate::{Saturation, Stop, saturate};

use crate::error::CompileError;
use crate::hlir::Hlir;
use crate::options::CompileOptions;
use crate::program::CompiledProgram;

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
