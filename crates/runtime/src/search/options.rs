//! How a search runs: [`SearchOptions`] and their defaults, the [`RunPlan`] a caller gives
//! for the share rule ([`payoff`](super::payoff)), whether to draw a [`Progress`] bar, and
//! the [`SearchLimit`] that stops a candidate from being measured.

use std::path::PathBuf;
use std::time::Duration;

use lumen_compiler::CompileOptions;
use serde::Serialize;

use super::compare::{DEFAULT_TOLERANCE, Tolerance};
use crate::RuntimeEnv;

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// The most timed rounds; every candidate in the running is timed once per round and its
    /// median kept. At least 1 (default [`DEFAULT_TRIALS`] = 15). The budget may plan fewer
    /// ([`SearchOptions::budget`]) and early stopping may end them sooner.
    pub trials: usize,
    /// Untimed rounds after every candidate's first execute (default 0). The first execute,
    /// whose outputs are compared with the reference's, always runs and is the warm-up: it
    /// takes the first-touch page faults of the slab, cold caches and lazy kernel setup, and
    /// the candidates' first executes together run well past the first fraction of a
    /// millisecond in which a CPU ramps its clock.
    pub warmup: usize,
    /// The warm-up (from the first candidate's first execute) lasts at least this long in all
    /// (default 0), however many untimed rounds that takes (TVM's `min_repeat_ms`).
    pub warmup_time: Duration,
    /// The time the timed rounds are planned to take (default 1 s): the number of rounds is
    /// how many rounds of the last untimed round's measured duration (the first executes'
    /// without one) fit in it, from 1 to [`SearchOptions::trials`]
    /// ([`stats::planned_rounds`](super::stats::planned_rounds)).
    pub budget: Duration,
    /// End the timed rounds once no challenger can still be shown faster in the rounds left
    /// ([`stats::can_still_win`](super::stats::can_still_win)), after at least
    /// [`MIN_ROUNDS_BEFORE_STOP`] (default true).
    pub early_stop: bool,
    /// Family-wise significance level of the decision, in (0, 1) (default 0.01): the chance of
    /// replacing the cost model's pick when no candidate is really faster by the minimum.
    pub alpha: f64,
    /// The least median speedup over the cost model's pick a winner must show, a fraction in
    /// [0, 1) (default 0.03 = 3%), built into the test's null hypothesis.
    pub min_speedup: f64,
    /// Measure at most this many candidates, in list order (candidates skipped over the memory
    /// budget do not count). `None` = all. `Some(0)` is refused.
    pub max_candidates: Option<usize>,
    /// Start no further candidate and no further round once the search has run this long
    /// (wall clock). The first candidate that runs is always measured, and at least one timed
    /// round always runs, so a search always has a choice.
    pub time_limit: Option<Duration>,
    /// Largest slab, in bytes, a candidate may plan; a candidate whose `slab_bytes` exceeds it
    /// is skipped and reported as such, never prepared.
    pub memory_budget: Option<usize>,
    /// Print the selected candidate's LLIR on stderr (`LUMINAL_LOG_LLIR`).
    pub log_llir: bool,
    /// Write the selected candidate's dumps here (`LLIR_DUMP_DIR`).
    pub dump_dir: Option<PathBuf>,
    /// How far each candidate's outputs may be from the reference candidate's and still
    /// agree (default [`DEFAULT_TOLERANCE`]); both parts finite and non-negative.
    pub tolerance: Tolerance,
    /// The run the search must pay for itself within (default `None`: no such rule). With a
    /// plan, and neither [`SearchOptions::time_limit`] nor [`SearchOptions::max_candidates`]
    /// set (an explicit budget asks for a search), the search takes at most
    /// [`SearchOptions::share`] of the whole run: it measures the cost model's pick first,
    /// and prepares no challenger when a minimal useful search does not fit
    /// ([`payoff`](super::payoff)).
    pub run: Option<RunPlan>,
    /// The largest share of the whole run, search included, the search may take under
    /// [`SearchOptions::run`], a fraction in (0, 1) (default [`SEARCH_SHARE`] = 0.25).
    pub share: f64,
}

/// [`SearchOptions::trials`]' default: 15 rounds, enough for the sign test to show a real
/// speedup over the pick with two challengers (13 of 15 rounds faster gives p = 0.0037, under
/// 0.01 / 2), short enough for a fast program.
pub const DEFAULT_TRIALS: usize = 15;

/// Timed rounds run before early stopping may end the search: every median is of at least 3.
pub const MIN_ROUNDS_BEFORE_STOP: usize = 3;

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            trials: DEFAULT_TRIALS,
            warmup: 0,
            warmup_time: Duration::ZERO,
            budget: Duration::from_secs(1),
            early_stop: true,
            alpha: 0.01,
            min_speedup: 0.03,
            max_candidates: None,
            time_limit: None,
            memory_budget: None,
            log_llir: false,
            dump_dir: None,
            tolerance: DEFAULT_TOLERANCE,
            run: None,
            share: SEARCH_SHARE,
        }
    }
}

impl SearchOptions {
    /// The defaults, with [`SearchOptions::log_llir`] from `LUMINAL_LOG_LLIR` ([`RuntimeEnv`])
    /// and [`SearchOptions::dump_dir`] from `LLIR_DUMP_DIR` (read by the compiler's
    /// `CompileOptions::resolved_dump_dir`, the one place that reads it).
    pub fn from_env() -> Self {
        Self {
            log_llir: RuntimeEnv::from_env().log_llir,
            dump_dir: CompileOptions::default().resolved_dump_dir(),
            ..Self::default()
        }
    }
}

/// Whether to draw a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// A bar on stderr when stderr is a terminal ([`std::io::IsTerminal`]), nothing otherwise,
    /// so logs and pipes never receive control sequences.
    #[default]
    Auto,
    /// Never draw.
    Hidden,
}

/// Which limit of [`SearchOptions`] stopped a candidate from being measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchLimit {
    /// [`SearchOptions::max_candidates`] candidates were already measured.
    MaxCandidates(usize),
    /// [`SearchOptions::time_limit`] had passed.
    TimeLimit(Duration),
    /// The run is too short for a search to pay for itself ([`payoff`](super::payoff)): only
    /// the cost model's pick was measured.
    RunTooShort,
}

/// The largest share of the whole run (search included) the search may take, a fraction:
/// 0.25, so a search of a run that would otherwise take 9 ms may take 3 ms.
pub const SEARCH_SHARE: f64 = 0.25;

/// What the caller will do after the search, for the share rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPlan {
    /// Executes of the selected candidate the caller runs after the search (`lumen run`'s
    /// `--runs`).
    pub executes: u64,
    /// Wall time the caller already spent on the run before the search (reading the model,
    /// compiling the candidates).
    pub spent: Duration,
}
