//! Search: profile the e-graph's candidates on the runtime that will run them, and replace
//! the cost model's pick only by a candidate measured faster with confidence.
//!
//! This is Luminal's search phase, made stable. Each candidate of
//! [`lumen_compiler::fusion::candidates()`] is prepared (slab, kernels, weights) and executed
//! once; then every candidate still in the running is executed in *interleaved rounds*: one
//! execute of each candidate per round, the starting candidate rotating from round to round,
//! so that machine noise (another process, a clock change) hits all candidates of a round
//! alike. Each candidate's first execute (which touches its whole slab) is its warm-up;
//! [`SearchOptions::warmup`] untimed rounds may follow (none by default). The timed rounds are
//! budgeted against the measured execute time: as many as fit in [`SearchOptions::budget`] at
//! the last untimed round's duration (the first executes' when there is none), at least 1 and
//! at most [`SearchOptions::trials`] ([`stats::planned_rounds`]), so a fast program gets a
//! short search. Each candidate's figure is its median round. With
//! [`SearchOptions::run`] (the caller's run), the search must also pay for itself within that
//! run ([`payoff`]): it measures the cost model's pick alone first and prepares no challenger
//! when a minimal useful search exceeds [`SEARCH_SHARE`] of the whole run; the timed rounds then
//! get what is left of that share. [`search_prepared`] hands the selected candidate over
//! prepared, so the caller need not prepare it again.
//!
//! **The choice** ([`stats`]): the baseline is the cost model's pick (the candidate with the
//! fewest launch-equivalent DRAM bytes, [`Candidate::picked`]; when it was not measured, the
//! measured candidate the cost model rates cheapest). Another candidate replaces it only when
//! it is faster with statistical confidence: an exact one-sided sign test on the per-round
//! paired relative speedups against the null "median speedup <= 3%"
//! ([`SearchOptions::min_speedup`]) at alpha = 0.01 ([`SearchOptions::alpha`]), divided among
//! the challengers (Bonferroni). Among several winners the largest median speedup wins.
//! Otherwise the cost model's pick stands, so candidates a few percent apart under noise no
//! longer flip the choice from run to run. With [`SearchOptions::early_stop`] the rounds end
//! as soon as no challenger can reach significance in the rounds left
//! ([`stats::can_still_win`]; never before 3 rounds), which only ever keeps the pick.
//!
//! A faster candidate is only worth having if it computes the same thing. The first candidate
//! whose first execute succeeds with every output finite (the unfused program, unless it was
//! skipped, failed or produced a NaN or an infinity; the first that succeeds at all when none
//! is finite everywhere) is the reference: every other candidate's outputs of its first
//! execute, on the same inputs and weights, are compared with the reference's element by
//! element within [`SearchOptions::tolerance`] ([`compare_outputs`]). A candidate that
//! disagrees is marked [`CandidateStatus::Mismatch`], is not timed and can never be selected;
//! the rest are still measured. Each row reports its largest absolute difference from the
//! reference. The idea is XLA's GPU autotuner (every candidate algorithm's output buffer is
//! compared with the first one's before its time counts) and AutoTVM's `check_correctness`
//! measure option.
//!
//! Every candidate in the running is prepared at the same time (the rounds interleave them),
//! so the search holds the sum of their slabs; [`SearchOptions::memory_budget`] bounds each.
//!
//! The search costs time, so the report says when it pays: the break-even is the number of
//! executions whose savings against the unfused candidate repay the search time,
//! `search_ms / (unfused_ms - selected_ms)` ([`break_even`]). [`crate::tuning`] stores a
//! search's choice so that a rerun on the same machine skips it.
//!
//! Switches: `LUMINAL_LOG_LLIR=1` ([`crate::env::LOG_LLIR`]) prints the selected candidate's
//! canonical LLIR between `LLIR_BEST` and `LLIR_BEST_END` lines on stderr; `LLIR_DUMP_DIR`
//! dumps the selected candidate (the compiler's `write_dumps`). A progress bar (indicatif) is
//! drawn on stderr only when stderr is a terminal.

pub mod payoff;
pub mod stats;

use std::fmt;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lumen_compiler::fusion::Candidate;
use lumen_compiler::fusion::candidates::POLICIES;
use lumen_compiler::fusion::report::group;
use lumen_compiler::{BufferRole, CompileError, CompileOptions, CompiledProgram, DType, dump};
use serde::Serialize;
use thiserror::Error;

use crate::tensor::element_count;
use crate::{HostTensor, PreparedProgram, Runtime, RuntimeEnv, RuntimeError, Tensors};
pub use payoff::{Payoff, RunPlan, SEARCH_SHARE};

/// The label of the unfused candidate, the break-even's baseline.
pub fn unfused_label() -> &'static str {
    POLICIES[0].0
}

/// How far a candidate's output element may be from the reference's and still agree:
/// `|got - reference| <= abs + rel * |reference|` (numpy's `allclose` form, elementwise, in
/// f64 of the f32 values). Equal values agree (the same infinity included), as do two NaNs
/// (NaN propagated the same way); any other non-finite pair disagrees.
///
/// The default ([`DEFAULT_TOLERANCE`]) holds every relu and bias candidate of the CPU runtime
/// (they agree exactly) and of cuBLASLt's exact epilogues. cuBLASLt's GELU epilogues may
/// evaluate tanh with the hardware approximation (about 2e-3 from the exact form on outputs
/// of a few units, where the NVRTC kernel of the unfused candidate is exact): a GELU program
/// searched on CUDA needs a looser bound, such as `abs: 3e-3` (`--search-tolerance 3e-3` on
/// the CLI), or its fused candidates are reported as mismatches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Absolute part, in the outputs' units.
    pub abs: f64,
    /// Relative part, a fraction of `|reference|`.
    pub rel: f64,
}

/// The search's default [`Tolerance`]: 1e-4 absolute, the default budget `lumen run` checks
/// its logits against (`lumen::model::DEFAULT_TOLERANCE`), plus 1e-4 relative so outputs of a
/// few hundred or more do not fail on f32 rounding alone (a fused epilogue may round once
/// where separate kernels round twice, and a device library may pick another reduction order
/// per epilogue).
pub const DEFAULT_TOLERANCE: Tolerance = Tolerance { abs: 1e-4, rel: 1e-4 };

impl Default for Tolerance {
    fn default() -> Self {
        DEFAULT_TOLERANCE
    }
}

impl Tolerance {
    /// Whether `got` agrees with the reference value `want` (see [`Tolerance`]).
    ///
    /// ```
    /// use lumen_runtime::search::Tolerance;
    /// let t = Tolerance { abs: 1e-4, rel: 1e-4 };
    /// assert!(t.allows(1000.05, 1000.0)); // 0.05 <= 1e-4 + 0.1
    /// assert!(!t.allows(0.001, 0.0));
    /// assert!(t.allows(f32::NAN, f32::NAN) && !t.allows(f32::INFINITY, 1.0));
    /// ```
    pub fn allows(&self, got: f32, want: f32) -> bool {
        if got == want || (got.is_nan() && want.is_nan()) {
            return true;
        }
        if !got.is_finite() || !want.is_finite() {
            return false;
        }
        let (g, w) = (f64::from(got), f64::from(want));
        (g - w).abs() <= self.abs + self.rel * w.abs()
    }

    /// Whether both parts are finite and non-negative.
    pub fn is_valid(&self) -> bool {
        self.abs.is_finite() && self.abs >= 0.0 && self.rel.is_finite() && self.rel >= 0.0
    }
}

impl std::str::FromStr for Tolerance {
    type Err = String;

    /// `ABS` (relative part kept at [`DEFAULT_TOLERANCE`]'s) or `ABS,REL`, each a finite,
    /// non-negative number: the form of the CLI's `--search-tolerance`.
    ///
    /// ```
    /// use lumen_runtime::search::Tolerance;
    /// assert_eq!("3e-3".parse::<Tolerance>().unwrap(), Tolerance { abs: 3e-3, rel: 1e-4 });
    /// assert_eq!("0,0".parse::<Tolerance>().unwrap(), Tolerance { abs: 0.0, rel: 0.0 });
    /// assert!("-1".parse::<Tolerance>().is_err() && "1,2,3".parse::<Tolerance>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let part = |p: &str| match p.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(format!("`{s}` is not ABS or ABS,REL of finite, non-negative numbers")),
        };
        match s.split(',').collect::<Vec<_>>().as_slice() {
            [abs] => Ok(Tolerance { abs: part(abs)?, rel: DEFAULT_TOLERANCE.rel }),
            [abs, rel] => Ok(Tolerance { abs: part(abs)?, rel: part(rel)? }),
            _ => Err(format!("`{s}` is not ABS or ABS,REL of finite, non-negative numbers")),
        }
    }
}

impl fmt::Display for Tolerance {
    /// `1e-4 + 1e-4 x |reference|`, `0 + 0 x |reference|`, `0.003 + 1e-4 x |reference|`
    /// ([`tolerance_text`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} + {} x |reference|", tolerance_text(self.abs), tolerance_text(self.rel))
    }
}

/// A tolerance as a person writes it: `0`, `1e-4`, `0.5`, `2`, `1.5e-5`. Plain decimals from
/// 0.001 up to 10,000, the shortest exponent form outside that range; either way the text
/// parses back to the same f64 (Rust's shortest round-trip digits).
///
/// ```
/// use lumen_runtime::search::tolerance_text;
/// assert_eq!(tolerance_text(0.0), "0");
/// assert_eq!(tolerance_text(1e-4), "1e-4");
/// assert_eq!(tolerance_text(0.5), "0.5");
/// assert_eq!(tolerance_text(1.5e-5), "1.5e-5");
/// ```
pub fn tolerance_text(tolerance: f64) -> String {
    if tolerance == 0.0 {
        "0".to_string()
    } else if (1e-3..1e4).contains(&tolerance.abs()) {
        format!("{tolerance}")
    } else {
        format!("{tolerance:e}")
    }
}

/// Why a candidate's outputs do not agree with the reference's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Disagreement {
    /// The candidate returns other output names than the reference (each list sorted).
    Outputs {
        /// The candidate's output names.
        got: Vec<String>,
        /// The reference's output names.
        want: Vec<String>,
    },
    /// An output has another shape than the reference's.
    Shape {
        /// The output's name.
        output: String,
        /// The candidate's shape.
        got: Vec<usize>,
        /// The reference's shape.
        want: Vec<usize>,
    },
    /// An element is out of tolerance: the one with the largest absolute difference among
    /// those out of tolerance (NaN counts as the largest; the first on a tie, outputs in the
    /// candidate's order, elements row-major).
    Value {
        /// The output's name.
        output: String,
        /// The element's row-major index, one entry per axis.
        index: Vec<usize>,
        /// The candidate's value.
        got: f32,
        /// The reference's value.
        want: f32,
        /// `|got - want|` in f64 (NaN when one of them is NaN).
        abs_diff: f64,
    },
}

impl fmt::Display for Disagreement {
    /// `y[12, 4] is 1.2340e0, the reference 1.2030e0 (abs diff 3.100e-2)`, `output y has shape
    /// [4, 3], the reference [4, 2]`, `outputs [y, z], the reference [y]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disagreement::Outputs { got, want } => {
                write!(f, "outputs [{}], the reference [{}]", got.join(", "), want.join(", "))
            }
            Disagreement::Shape { output, got, want } => {
                write!(f, "output {output} has shape {got:?}, the reference {want:?}")
            }
            Disagreement::Value { output, index, got, want, abs_diff } => {
                let index: Vec<String> = index.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "{output}[{}] is {got:.4e}, the reference {want:.4e} (abs diff {abs_diff:.3e})",
                    index.join(", ")
                )
            }
        }
    }
}

/// How one candidate's outputs compare with the reference's ([`compare_outputs`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputComparison {
    /// The largest `|got - want|` over every element of every output (f64 of the f32 values;
    /// 0 for equal values and for two NaNs; NaN when one side is NaN and the other is not);
    /// `None` when the output names or shapes differ, so no element pairs up.
    pub max_abs_diff: Option<f64>,
    /// Why they disagree; `None` when every element is within the tolerance.
    pub disagreement: Option<Disagreement>,
}

/// Compares a candidate's `got` outputs with the reference's `want`, by name (candidates may
/// return their outputs in different orders: the order is each LLIR's canonical one), shape,
/// then element by element within `tolerance`.
///
/// ```
/// use lumen_runtime::search::{Tolerance, compare_outputs};
/// use lumen_runtime::{HostTensor, Tensors};
/// let t = |v: Vec<f32>| -> Tensors {
///     [("y".to_string(), HostTensor::new([2, 2], v).unwrap())].into_iter().collect()
/// };
/// let c = compare_outputs(&t(vec![1.0, 2.0, 3.0, 4.5]), &t(vec![1.0, 2.0, 3.0, 4.0]),
///                         Tolerance::default());
/// assert_eq!(c.max_abs_diff, Some(0.5));
/// assert_eq!(c.disagreement.unwrap().to_string(),
///            "y[1, 1] is 4.5000e0, the reference 4.0000e0 (abs diff 5.000e-1)");
/// ```
pub fn compare_outputs(got: &Tensors, want: &Tensors, tolerance: Tolerance) -> OutputComparison {
    let names = |t: &Tensors| -> Vec<String> {
        let mut v: Vec<String> = t.keys().cloned().collect();
        v.sort();
        v
    };
    let (got_names, want_names) = (names(got), names(want));
    if got_names != want_names {
        return OutputComparison {
            max_abs_diff: None,
            disagreement: Some(Disagreement::Outputs { got: got_names, want: want_names }),
        };
    }
    let mut max_abs_diff = 0.0f64;
    // (abs diff, output, flat index, got, want) of the worst element out of tolerance.
    let mut worst: Option<(f64, &str, usize, f32, f32)> = None;
    for (name, g) in got {
        let Some(w) = want.get(name) else { continue };
        if g.shape() != w.shape() || g.data().len() != w.data().len() {
            return OutputComparison {
                max_abs_diff: None,
                disagreement: Some(Disagreement::Shape {
                    output: name.clone(),
                    got: g.shape().to_vec(),
                    want: w.shape().to_vec(),
                }),
            };
        }
        for (i, (&a, &b)) in g.data().iter().zip(w.data()).enumerate() {
            let d = if a == b || (a.is_nan() && b.is_nan()) {
                0.0
            } else {
                (f64::from(a) - f64::from(b)).abs()
            };
            if d.is_nan() || d > max_abs_diff {
                // NaN sticks: f64::max would drop it.
                max_abs_diff = if max_abs_diff.is_nan() { max_abs_diff } else { d };
            }
            if !tolerance.allows(a, b)
                && worst.is_none_or(|(wd, ..)| !wd.is_nan() && (d.is_nan() || d > wd))
            {
                worst = Some((d, name.as_str(), i, a, b));
            }
        }
    }
    let disagreement = worst.map(|(abs_diff, output, flat, a, b)| Disagreement::Value {
        output: output.to_string(),
        index: unravel(flat, got.get(output).map_or(&[], HostTensor::shape)),
        got: a,
        want: b,
        abs_diff,
    });
    OutputComparison { max_abs_diff: Some(max_abs_diff), disagreement }
}

/// The row-major index, one entry per axis, of element `flat` of a tensor of `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &dim) in index.iter_mut().zip(shape).rev() {
        if dim > 0 {
            *slot = flat % dim;
            flat /= dim;
        }
    }
    index
}

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
    /// ([`stats::planned_rounds`]).
    pub budget: Duration,
    /// End the timed rounds once no challenger can still be shown faster in the rounds left
    /// ([`stats::can_still_win`]), after at least [`MIN_ROUNDS_BEFORE_STOP`] (default true).
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
    /// and prepares no challenger when a minimal useful search does not fit ([`payoff`]).
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
    /// The run is too short for a search to pay for itself ([`payoff`]): only the cost
    /// model's pick was measured.
    RunTooShort,
}

/// What the search did with one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CandidateStatus {
    /// Prepared, warmed up and timed.
    Measured,
    /// Its slab exceeds the memory budget (bytes); never prepared.
    OverBudget {
        /// The budget, in bytes.
        budget: usize,
    },
    /// A search limit was reached before its turn.
    Skipped {
        /// The limit.
        limit: SearchLimit,
    },
    /// The runtime refused to prepare or execute it (e.g. a plan a device library rejects).
    Failed {
        /// The runtime's error message.
        error: String,
    },
    /// Its first execute's outputs disagree with the reference candidate's: not timed, never
    /// selected.
    Mismatch {
        /// The reference candidate's label.
        reference: String,
        /// The tolerance it was compared with.
        tolerance: Tolerance,
        /// What disagrees.
        disagreement: Disagreement,
    },
}

impl CandidateStatus {
    /// A short word for tables: `measured`, `over budget`, `skipped`, `failed`, `mismatch`.
    pub fn word(&self) -> &'static str {
        match self {
            CandidateStatus::Measured => "measured",
            CandidateStatus::OverBudget { .. } => "over budget",
            CandidateStatus::Skipped { .. } => "skipped",
            CandidateStatus::Failed { .. } => "failed",
            CandidateStatus::Mismatch { .. } => "mismatch",
        }
    }

    /// One line of explanation: `measured`, `skipped: slab 1,196,288 bytes over the memory
    /// budget of 1,000,000 bytes`, `mismatch against unfused (tolerance 1e-4 + 1e-4 x
    /// |reference|): y[12, 4] is 1.2340e0, the reference 1.2030e0 (abs diff 3.100e-2)`, ...
    pub fn describe(&self, slab_bytes: usize) -> String {
        match self {
            CandidateStatus::Measured => "measured".to_string(),
            CandidateStatus::OverBudget { budget } => format!(
                "skipped: slab {} bytes over the memory budget of {} bytes",
                group(slab_bytes),
                group(*budget)
            ),
            CandidateStatus::Skipped { limit: SearchLimit::MaxCandidates(n) } => {
                format!("skipped: candidate limit of {n} reached")
            }
            CandidateStatus::Skipped { limit: SearchLimit::TimeLimit(d) } => {
                format!("skipped: time limit of {:.3} ms reached", d.as_secs_f64() * 1e3)
            }
            CandidateStatus::Skipped { limit: SearchLimit::RunTooShort } => {
                "skipped: the run is too short for a search to pay for itself".to_string()
            }
            CandidateStatus::Failed { error } => format!("failed: {error}"),
            CandidateStatus::Mismatch { reference, tolerance, disagreement } => {
                format!("mismatch against {reference} (tolerance {tolerance}): {disagreement}")
            }
        }
    }
}

/// One candidate's row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateTiming {
    /// Position in the candidate list (the `candidate=<i>` of `LLIR_BEST`).
    pub index: usize,
    /// The candidate's label: `unfused`, `bias`, `activation`, `fused`.
    pub label: String,
    /// The compiled program's label, `{name}-{label}`.
    pub program_label: String,
    /// Planned slab, bytes.
    pub slab_bytes: usize,
    /// Kernel launches per execute.
    pub launches: usize,
    /// FLOP per execute.
    pub flops: u64,
    /// Whether the cost model picks it (what `--no-search` runs).
    pub cost_model_pick: bool,
    /// The cost model's price of it (launch-equivalent DRAM bytes, [`Candidate::cost`]):
    /// the lowest measured one is the baseline when the pick itself was not measured.
    pub cost: u64,
    /// Milliseconds of `prepare` (slab allocation, kernel setup, weight upload); `None` when
    /// not prepared.
    pub prepare_ms: Option<f64>,
    /// Untimed executes run before the timed rounds (the first execute included).
    pub warmup_runs: usize,
    /// Its execute time in each timed round, ms, in round order (the rounds pair these
    /// between candidates); empty when not measured.
    pub trials_ms: Vec<f64>,
    /// Median of `trials_ms`, ms; `None` when not measured.
    pub median_ms: Option<f64>,
    /// Largest absolute difference between its first execute's outputs and the reference
    /// candidate's ([`OutputComparison::max_abs_diff`]; 0 for the reference itself); `None`
    /// when it never executed or its outputs do not pair up with the reference's.
    pub max_abs_diff: Option<f64>,
    /// What the search did with it.
    pub status: CandidateStatus,
}

/// How many executions repay the search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BreakEven {
    /// `search_ms / (unfused_ms - winner_ms)` executions (a positive real; the search has
    /// paid for itself after its ceiling).
    Executions(f64),
    /// The winner is the unfused candidate, or saves nothing per execute: the search never
    /// pays for itself.
    Never,
    /// The unfused candidate was not measured (over budget, skipped, failed): no baseline; or
    /// it was the only one measured (`--max-candidates 1`, a time limit, the others over
    /// budget, failed or mismatched): nothing was compared with it, so `Never` would claim a
    /// result the search did not reach.
    Unknown,
}

impl BreakEven {
    /// The executions as a whole count (the ceiling); `None` for `Never` and `Unknown`.
    pub fn executions(&self) -> Option<u64> {
        match *self {
            // Saturating float-to-int cast: a tiny saving gives u64::MAX, never a panic.
            BreakEven::Executions(x) => Some(x.ceil() as u64),
            _ => None,
        }
    }
}

impl fmt::Display for BreakEven {
    /// `1,234 executions`, `never`, `unknown`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.executions() {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                write!(f, "{} execution{}", group(n), if n == 1 { "" } else { "s" })
            }
            None if *self == BreakEven::Never => f.write_str("never"),
            None => f.write_str("unknown"),
        }
    }
}

/// The JSON form: the number of executions (a real), `"never"`, or `null` when unknown.
impl Serialize for BreakEven {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            BreakEven::Executions(x) => s.serialize_f64(x),
            BreakEven::Never => s.serialize_str("never"),
            BreakEven::Unknown => s.serialize_none(),
        }
    }
}

/// The break-even of a search: how many executions of the winner, each `unfused_ms -
/// winner_ms` faster than the unfused candidate, repay `search_ms` of searching. `Never` when
/// the winner is the unfused candidate or the difference is not positive; `Unknown` when the
/// unfused time is `None` (not measured). All times in milliseconds.
///
/// ```
/// use lumen_runtime::search::{BreakEven, break_even};
/// // 3 s of search, 0.5 ms unfused, 0.3 ms fused: 15,000 executions.
/// assert_eq!(break_even(3000.0, Some(0.5), 0.3, false).executions(), Some(15_000));
/// assert_eq!(break_even(3000.0, Some(0.5), 0.5, true), BreakEven::Never);
/// ```
pub fn break_even(
    search_ms: f64,
    unfused_ms: Option<f64>,
    winner_ms: f64,
    winner_is_unfused: bool,
) -> BreakEven {
    if winner_is_unfused {
        return BreakEven::Never;
    }
    let Some(unfused_ms) = unfused_ms else { return BreakEven::Unknown };
    let saved = unfused_ms - winner_ms;
    if !saved.is_finite() || saved <= 0.0 || !search_ms.is_finite() {
        return BreakEven::Never;
    }
    BreakEven::Executions(search_ms.max(0.0) / saved)
}

/// The median of `samples` (the mean of the two middle values for an even count); `None` for
/// no samples. NaNs sort last.
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => v.get(n / 2).copied(),
        _ => Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0),
    }
}

/// Why the timed rounds ended before the planned number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RoundsStop {
    /// Early stopping: no challenger could still be shown faster in the rounds left.
    Futile,
    /// [`SearchOptions::time_limit`] had passed.
    TimeLimit {
        /// The limit.
        limit: Duration,
    },
}

/// What a search measured and chose.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchReport {
    /// The runtime profiled on (`cpu`, `cuda`).
    pub runtime: String,
    /// The most timed rounds asked for ([`SearchOptions::trials`]).
    pub trials: usize,
    /// Timed rounds the budget planned ([`stats::planned_rounds`]).
    pub planned_rounds: usize,
    /// Timed rounds run: every measured candidate has this many `trials_ms`.
    pub rounds: usize,
    /// Why the rounds ended before `planned_rounds`, when they did.
    pub stopped: Option<RoundsStop>,
    /// Untimed rounds asked for after the first executes ([`SearchOptions::warmup`]).
    pub warmup: usize,
    /// Untimed rounds run.
    pub warmup_rounds: usize,
    /// Least warm-up time in all, ms.
    pub warmup_time_ms: f64,
    /// The timed rounds' time budget, ms: [`SearchOptions::budget`], or under the share rule
    /// what was left of the search's share when the rounds began (never more).
    pub budget_ms: f64,
    /// One row per candidate, in candidate order.
    pub candidates: Vec<CandidateTiming>,
    /// Index in `candidates` of the reference, whose outputs every other candidate's are
    /// compared with: the first candidate whose first execute succeeded with every output
    /// finite, or the first that succeeded when none did.
    pub reference: usize,
    /// The tolerance of that comparison.
    pub tolerance: Tolerance,
    /// Index of the selected candidate in `candidates`: the decision's ([`stats::Decision`]).
    pub selected: usize,
    /// How the selection was made: the baseline, the sign test of every challenger against
    /// it, and the winner if one passed.
    pub decision: stats::Decision,
    /// Wall time of the whole search, ms (every prepare, warm-up and round, and the logging).
    pub search_ms: f64,
    /// Executions that repay the search ([`break_even`]); [`BreakEven::Unknown`] when fewer
    /// than two candidates were measured.
    pub break_even: BreakEven,
    /// The share rule's arithmetic ([`payoff`]), when it applied; its `fits` false means the
    /// search was skipped as too short (only the cost model's pick was measured).
    pub payoff: Option<Payoff>,
    /// The selected candidate's prepare, ms, when the search handed its prepared program to
    /// the caller ([`search_prepared`]): part of `search_ms`, but the run's prepare, not a
    /// cost of searching.
    pub kept_prepare_ms: Option<f64>,
}

impl SearchReport {
    /// Whether the share rule skipped the search: the run was too short for it to pay for
    /// itself ([`payoff`]), so only the cost model's pick was measured and it stands.
    pub fn too_short(&self) -> bool {
        self.payoff.as_ref().is_some_and(|p| !p.fits)
    }

    /// The decision's kind: `too_short` when the share rule skipped the search, else `kept`
    /// or `measured_winner` ([`stats::Decision::kind`]).
    pub fn decision_kind(&self) -> &'static str {
        if self.too_short() { "too_short" } else { self.decision.kind() }
    }

    /// The decision in words: [`Payoff::too_short_text`] when the share rule skipped the
    /// search, else the [`stats::Decision`]'s text.
    pub fn decision_text(&self) -> String {
        match self.payoff.as_ref().filter(|p| !p.fits) {
            Some(p) => p.too_short_text(&format!(
                "the cost model's pick ({})",
                self.decision.baseline_label
            )),
            None => self.decision.to_string(),
        }
    }

    /// Milliseconds of the search that were the search's own cost: `search_ms` less the
    /// prepare it handed over to the caller ([`SearchReport::kept_prepare_ms`]).
    pub fn own_ms(&self) -> f64 {
        (self.search_ms - self.kept_prepare_ms.unwrap_or(0.0)).max(0.0)
    }

    /// The selected candidate's row.
    pub fn winner(&self) -> Option<&CandidateTiming> {
        self.candidates.get(self.selected)
    }

    /// The unfused candidate's row, if the list has one.
    pub fn unfused(&self) -> Option<&CandidateTiming> {
        self.candidates.iter().find(|c| c.label == unfused_label())
    }

    /// Rows that were measured.
    pub fn measured(&self) -> impl Iterator<Item = &CandidateTiming> {
        self.candidates.iter().filter(|c| c.status == CandidateStatus::Measured)
    }

    /// The search line: `search     3.912 ms on cpu: 3 of 3 candidates measured in 4
    /// interleaved rounds (15 planned; stopped early: no candidate can still be shown faster)`,
    /// then `, after 1 warm-up round` when untimed rounds ran, then the share rule's budget
    /// when it applied (`; budget 51.632 ms, 25% of the run with it`), then the prepare handed
    /// to the caller when there is one (`; 0.912 ms of it the selected candidate's prepare,
    /// kept for the run`). When the share rule
    /// skipped the search: `search     skipped: the run (10 executes of 0.131 ms, ...) is too
    /// short for a search to pay for itself (...); kept the cost model's pick (fused)`.
    pub fn search_line(&self) -> String {
        if self.too_short() {
            return format!("search     skipped: {}", self.decision_text());
        }
        let share = match &self.payoff {
            Some(p) => {
                format!(
                    "; budget {:.3} ms, {}% of the run with it",
                    p.budget_ms,
                    payoff::share_percent(p.share)
                )
            }
            None => String::new(),
        };
        let handed = match self.kept_prepare_ms {
            Some(ms) => {
                format!("; {ms:.3} ms of it the selected candidate's prepare, kept for the run")
            }
            None => String::new(),
        };
        let stop = match self.stopped {
            None => String::new(),
            Some(RoundsStop::Futile) => {
                "; stopped early: no candidate can still be shown faster".to_string()
            }
            Some(RoundsStop::TimeLimit { limit }) => {
                format!("; stopped at the time limit of {:.3} ms", limit.as_secs_f64() * 1e3)
            }
        };
        let warm = match self.warmup_rounds {
            0 => String::new(),
            n => format!(", after {n} warm-up round{}", plural(n)),
        };
        format!(
            "search     {:.3} ms on {}: {} of {} candidate{} measured in {} interleaved round{} \
             ({} planned{stop}){warm}{share}{handed}",
            self.search_ms,
            self.runtime,
            self.measured().count(),
            self.candidates.len(),
            plural(self.candidates.len()),
            self.rounds,
            plural(self.rounds),
            self.planned_rounds,
        )
    }

    /// The choice line: `choice     kept the cost model's pick (fused): no candidate faster
    /// with confidence (...); one-sided sign test, alpha 0.01` or `choice     measured winner:
    /// bias, p = 3.1e-5, median speedup 7.3% over ...; one-sided sign test, alpha 0.01`.
    pub fn choice_line(&self) -> String {
        format!(
            "choice     {}; one-sided sign test, alpha {}",
            self.decision,
            tolerance_text(self.decision.alpha)
        )
    }

    /// The break-even line: `break-even: 1,234 executions (search 12.345 ms / 0.0100 ms saved
    /// per execute against unfused)`, or why there is none: `never (the unfused candidate is
    /// selected)`, `never (the selected candidate measured no faster than unfused)`, `unknown (the unfused candidate was not measured)`, `unknown (only the
    /// unfused candidate was measured)`.
    pub fn break_even_line(&self) -> String {
        let saved = match (self.unfused().and_then(|u| u.median_ms), self.winner()) {
            (Some(u), Some(w)) => w.median_ms.map(|m| u - m),
            _ => None,
        };
        match (self.break_even, saved) {
            (BreakEven::Executions(_), Some(saved)) => format!(
                "break-even: {} (search {:.3} ms / {} ms saved per execute against unfused)",
                self.break_even,
                self.search_ms,
                significant(saved, 3)
            ),
            // Unknown with a measured unfused row: it was the only one measured.
            (BreakEven::Unknown, _)
                if self.unfused().is_some_and(|u| u.status == CandidateStatus::Measured) =>
            {
                "break-even: unknown (only the unfused candidate was measured)".to_string()
            }
            (BreakEven::Unknown, _) => {
                "break-even: unknown (the unfused candidate was not measured)".to_string()
            }
            _ if self.winner().is_some_and(|w| w.label == unfused_label()) => {
                "break-even: never (the unfused candidate is selected)".to_string()
            }
            _ => "break-even: never (the selected candidate measured no faster than unfused)"
                .to_string(),
        }
    }
}

impl fmt::Display for SearchReport {
    /// The candidate table, then the search time and the break-even. A candidate's
    /// `max_abs_diff` is its largest absolute difference from the reference's outputs (`-`
    /// when it has none):
    ///
    /// ```text
    /// candidate  median_ms  slab_bytes  launches  max_abs_diff  status
    /// unfused       0.1883   1,693,696         8         0.0e0  measured  reference
    /// bias          0.1610   1,463,296         5         0.0e0  measured
    /// fused         0.1584   1,463,296         3         0.0e0  measured  selected, cost model's pick
    /// search     3.912 ms on cpu: 3 of 3 candidates measured in 4 interleaved rounds (15 planned; stopped early: no candidate can still be shown faster)
    /// choice     kept the cost model's pick (fused): no candidate faster with confidence (closest: bias, median speedup -1.6%, faster by more than 3.0% in 0 of 4 rounds, p = 1.0000); one-sided sign test, alpha 0.01
    /// break-even: 131 executions (search 3.912 ms / 0.0299 ms saved per execute against unfused)
    /// ```
    ///
    /// When the share rule skipped the search ([`SearchReport::too_short`]), only the search
    /// line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.too_short() {
            return f.write_str(&self.search_line());
        }
        let rows: Vec<[String; 6]> = self
            .candidates
            .iter()
            .map(|c| {
                let mut notes = Vec::new();
                if c.index == self.reference {
                    notes.push("reference");
                }
                if c.index == self.selected {
                    notes.push("selected");
                }
                if c.cost_model_pick {
                    notes.push("cost model's pick");
                }
                let mut status = c.status.describe(c.slab_bytes);
                if !notes.is_empty() {
                    status = format!("{status}  {}", notes.join(", "));
                }
                [
                    c.label.clone(),
                    c.median_ms.map_or_else(|| "-".to_string(), |m| format!("{m:.4}")),
                    group(c.slab_bytes),
                    c.launches.to_string(),
                    c.max_abs_diff.map_or_else(|| "-".to_string(), |d| format!("{d:.1e}")),
                    status,
                ]
            })
            .collect();
        let header = ["candidate", "median_ms", "slab_bytes", "launches", "max_abs_diff", "status"];
        let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for row in &rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut l = String::new();
            for (i, (cell, w)) in cells.iter().zip(&width).enumerate() {
                let piece = match i {
                    0 => format!("{cell:<w$}"),
                    5 => format!("  {cell}"),
                    _ => format!("  {cell:>w$}"),
                };
                l.push_str(&piece);
            }
            l
        };
        let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
        writeln!(f, "{}", line(&head))?;
        for row in &rows {
            writeln!(f, "{}", line(row))?;
        }
        writeln!(f, "{}", self.search_line())?;
        writeln!(f, "{}", self.choice_line())?;
        write!(f, "{}", self.break_even_line())
    }
}

/// Why a search returned no winner.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The candidate list is empty.
    #[error("search needs at least one candidate")]
    NoCandidates,
    /// An option is out of range (`trials` 0, `max_candidates` 0, a negative or non-finite
    /// tolerance).
    #[error("invalid search option: {0}")]
    InvalidOption(String),
    /// Every candidate's slab exceeds the memory budget.
    #[error(
        "every candidate's slab exceeds the memory budget of {budget} bytes (smallest: {smallest} bytes)"
    )]
    OverBudget {
        /// The budget, bytes.
        budget: usize,
        /// The smallest candidate slab, bytes.
        smallest: usize,
    },
    /// No candidate could be prepared and executed: the first candidate's error.
    #[error("no candidate ran: {label}: {source}")]
    NothingRan {
        /// The candidate that failed first.
        label: String,
        /// Its error.
        #[source]
        source: RuntimeError,
    },
    /// Candidates ran, but none that finished its trials agrees with the reference's outputs
    /// (the reference itself failed after its first execute, and every other candidate that
    /// ran disagrees with that execute's outputs).
    #[error(
        "no candidate agrees with the reference {reference}, which did not finish its trials: \
         {mismatched} disagree (first: {first})"
    )]
    NoAgreement {
        /// The reference candidate's label.
        reference: String,
        /// How many candidates disagree with it.
        mismatched: usize,
        /// The first of them: `label: mismatch against ...`.
        first: String,
    },
    /// The selected candidate's dumps could not be written.
    #[error(transparent)]
    Dump(#[from] CompileError),
}

/// The `LLIR_BEST` block of a new fastest candidate: a first line `LLIR_BEST candidate=<i>
/// label=<label> median_ms=<ms> slab_bytes=<bytes> launches=<n>` (the only line with timings),
/// the program's canonical LLIR text (`lumen_compiler::dump::llir_text`, byte-identical
/// between runs), and `LLIR_BEST_END`. Ends with a newline.
pub fn llir_best_block(
    index: usize,
    median_ms: f64,
    program: &CompiledProgram,
    label: &str,
) -> String {
    let label: String =
        label.chars().map(|c| if c.is_whitespace() || c == '=' { '_' } else { c }).collect();
    let mut text = format!(
        "LLIR_BEST candidate={index} label={label} median_ms={median_ms:.6} slab_bytes={} launches={}\n",
        program.figures.slab_bytes, program.figures.launches
    );
    text.push_str(&dump::llir_text(program));
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("LLIR_BEST_END\n");
    text
}

/// Seeded values uniform in [-1, 1) for every buffer of `role` (`Input` or `Weight`) of
/// `program`, by name and declared shape (row-major f32): the random inputs and weights of
/// `lumen compare --profile`. The generator is splitmix64, so the values depend only on
/// `seed` and the buffer order. Integer (index) buffers hold zeros instead: row 0 exists in
/// every table a gather reads, and the time does not depend on which rows are read.
///
/// # Errors
/// [`RuntimeError::Alloc`] when a buffer's element count overflows or cannot be allocated.
pub fn random_tensors(
    program: &CompiledProgram,
    role: BufferRole,
    seed: u64,
) -> Result<Tensors, RuntimeError> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut out = Tensors::new();
    for b in program.llir.buffers.iter().filter(|b| b.role == role) {
        let n = element_count(&b.shape).ok_or(RuntimeError::Alloc { bytes: usize::MAX })?;
        match b.dtype {
            DType::I64 => {
                out.insert(b.id.clone(), HostTensor::from_i64(b.shape.clone(), vec![0; n])?);
                continue;
            }
            DType::I32 => {
                out.insert(b.id.clone(), HostTensor::from_i32(b.shape.clone(), vec![0; n])?);
                continue;
            }
            DType::F32 | DType::U8 => {}
        }
        let mut data: Vec<f32> = Vec::new();
        data.try_reserve_exact(n)
            .map_err(|_| RuntimeError::Alloc { bytes: n.saturating_mul(4) })?;
        data.extend((0..n).map(|_| ((next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0));
        out.insert(b.id.clone(), HostTensor::new(b.shape.clone(), data)?);
    }
    Ok(out)
}

fn progress_bar(progress: Progress, len: usize) -> Option<ProgressBar> {
    if progress == Progress::Hidden || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "search {bar:30.cyan/blue} {pos}/{len} candidates  {elapsed_precise}  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    Some(bar)
}

/// A candidate prepared and executed once, ready to be compared and timed.
struct FirstRun {
    prepared: Box<dyn PreparedProgram>,
    /// Milliseconds of `prepare`.
    prepare_ms: f64,
    /// When the first execute began (the warm-up's start).
    warm: Instant,
    /// Wall time of the first execute, ms.
    first_ms: f64,
    /// The first execute's outputs.
    outputs: Tensors,
}

/// Prepares one candidate and executes it once (the first warm-up run).
fn first_run(
    runtime: &dyn Runtime,
    program: &CompiledProgram,
    weights: &Tensors,
    inputs: &Tensors,
) -> Result<FirstRun, RuntimeError> {
    let mut prepared = runtime.prepare(program, weights)?;
    let prepare_ms = prepared.prepare_seconds() * 1e3;
    let warm = Instant::now();
    let outputs = prepared.execute(inputs)?;
    let first_ms = warm.elapsed().as_secs_f64() * 1e3;
    Ok(FirstRun { prepared, prepare_ms, warm, first_ms, outputs })
}

/// Whether every element of every output is finite.
fn all_finite(outputs: &Tensors) -> bool {
    outputs.values().all(|t| t.data().iter().all(|v| v.is_finite()))
}

/// Compares the `outputs` of the candidate in `row` with `reference`: records the largest
/// difference and, when they disagree, marks the row a mismatch (a mismatch has no timings)
/// and notes it. Returns whether they agree.
fn judge(
    row: &mut CandidateTiming,
    outputs: &Tensors,
    reference: &(usize, String, Tensors),
    tolerance: Tolerance,
    mismatched: &mut Vec<String>,
) -> bool {
    let comparison = compare_outputs(outputs, &reference.2, tolerance);
    row.max_abs_diff = comparison.max_abs_diff;
    let Some(disagreement) = comparison.disagreement else { return true };
    row.status =
        CandidateStatus::Mismatch { reference: reference.1.clone(), tolerance, disagreement };
    row.median_ms = None;
    row.trials_ms.clear();
    mismatched.push(format!("{}: {}", row.label, row.status.describe(row.slab_bytes)));
    false
}

/// A candidate in the running: prepared, executed once, and agreeing with the reference (or
/// waiting for one to be known).
struct Live {
    /// Its index in the candidate list.
    index: usize,
    prepared: Box<dyn PreparedProgram>,
    /// Wall time of its first execute, ms.
    first_ms: f64,
    /// Its execute time in each timed round so far, ms.
    trials: Vec<f64>,
}

/// Runs one round: one execute of every candidate in `live`, starting at position `first`
/// (modulo their number) and going on in candidate order, so successive rounds rotate who goes
/// first. A timed round appends each execute's wall time (ms) to its candidate's trials; an
/// untimed one counts a warm-up run on its row. A candidate whose execute fails leaves the
/// running: its row is marked failed and the first such error kept in `first_error`. Returns
/// the round's total execute time, ms.
fn run_round(
    live: &mut Vec<Live>,
    rows: &mut [CandidateTiming],
    inputs: &Tensors,
    first: usize,
    timed: bool,
    first_error: &mut Option<(String, RuntimeError)>,
) -> f64 {
    let n = live.len();
    let mut total_ms = 0.0;
    let mut failed = Vec::new();
    for k in 0..n {
        let pos = (first + k) % n;
        let Some(c) = live.get_mut(pos) else { continue };
        let start = Instant::now();
        let result = c.prepared.execute(inputs);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        match result {
            Ok(_) => {
                total_ms += ms;
                if timed {
                    c.trials.push(ms);
                } else if let Some(row) = rows.get_mut(c.index) {
                    row.warmup_runs += 1;
                }
            }
            Err(err) => {
                if let Some(row) = rows.get_mut(c.index) {
                    row.status = CandidateStatus::Failed { error: err.to_string() };
                    first_error.get_or_insert((row.label.clone(), err));
                }
                failed.push(pos);
            }
        }
    }
    failed.sort_unstable();
    for pos in failed.into_iter().rev() {
        live.remove(pos);
    }
    total_ms
}

/// The baseline among the candidates in the running: the cost model's pick when it is one of
/// them, otherwise the one the cost model rates cheapest (the lower index on a tie).
fn baseline_of(live: &[Live], rows: &[CandidateTiming]) -> Option<usize> {
    live.iter()
        .filter_map(|c| rows.get(c.index))
        .min_by_key(|r| (!r.cost_model_pick, r.cost, r.index))
        .map(|r| r.index)
}

/// Whether any challenger in `live` could still be shown faster than the baseline if every
/// one of the `remaining` rounds went its way ([`stats::can_still_win`] at alpha divided by the
/// number of challengers).
fn any_can_win(live: &[Live], baseline: usize, remaining: usize, options: &SearchOptions) -> bool {
    let Some(base) = live.iter().find(|c| c.index == baseline) else { return false };
    let challengers = live.len().saturating_sub(1);
    if challengers == 0 {
        return false;
    }
    let alpha = options.alpha / challengers as f64;
    live.iter().filter(|c| c.index != baseline).any(|c| {
        let t = stats::paired_sign_test(&base.trials, &c.trials, options.min_speedup, alpha);
        stats::can_still_win(t.wins, t.losses, remaining, alpha)
    })
}

/// Profiles `candidates` on `runtime` and returns the report with the choice (see the module
/// docs).
///
/// For each candidate in order: skipped when its planned slab exceeds
/// [`SearchOptions::memory_budget`] or a limit ([`SearchOptions::max_candidates`],
/// [`SearchOptions::time_limit`]) is reached; otherwise prepared with `weights` and executed
/// once with `inputs` (host tensors by name, the programs' declared shapes). A candidate the
/// runtime refuses is reported as failed and the search goes on.
///
/// The reference is the first candidate whose first execute succeeds with every output finite
/// (the first that succeeds at all when none is finite everywhere, e.g. NaN inputs); every
/// other candidate's first-execute outputs are compared with the reference's
/// ([`compare_outputs`] within [`SearchOptions::tolerance`]), and one that disagrees is
/// reported as [`CandidateStatus::Mismatch`], never timed and never selected.
///
/// The candidates that agree then run [`SearchOptions::warmup`] untimed interleaved rounds and
/// up to [`SearchOptions::trials`] timed ones (as many as fit in [`SearchOptions::budget`];
/// fewer with early stopping or a time limit); a candidate whose execute fails in a round
/// leaves the running. The selected candidate is the cost model's pick (or the cheapest
/// measured candidate by the cost model) unless another is faster with confidence
/// ([`stats::decide`]). All of them are prepared at once, and dropped when the rounds end.
/// With [`SearchOptions::log_llir`], the selected candidate's [`llir_best_block`] goes to
/// stderr; with [`SearchOptions::dump_dir`], its dumps are written there.
///
/// # Errors
/// [`SearchError::NoCandidates`], [`SearchError::InvalidOption`] (`trials` 0,
/// `max_candidates` 0, a tolerance that is negative or not finite, `alpha` outside (0, 1),
/// `min_speedup` outside [0, 1)), [`SearchError::OverBudget`] when no candidate fits the
/// budget, [`SearchError::NoAgreement`] when candidates ran but none that finished its
/// rounds agrees with the reference, [`SearchError::NothingRan`] with the first runtime
/// error when none could run (e.g. missing or misshapen weights or inputs),
/// [`SearchError::Dump`] when the selected candidate's dumps cannot be written.
pub fn search(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    weights: &Tensors,
    inputs: &Tensors,
    options: &SearchOptions,
    progress: Progress,
) -> Result<SearchReport, SearchError> {
    search_impl(runtime, candidates, weights, inputs, options, progress, false).map(|s| s.report)
}

/// A search's report, with the selected candidate still prepared ([`search_prepared`]).
pub struct Searched {
    /// What the search measured and chose.
    pub report: SearchReport,
    /// The selected candidate, prepared on the search's runtime with the search's weights
    /// (and executed by the search: its first execute and rounds), for the caller to run
    /// instead of preparing it again; `None` only when it could not be kept.
    pub prepared: Option<Box<dyn PreparedProgram>>,
}

impl fmt::Debug for Searched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Searched")
            .field("report", &self.report)
            .field("prepared", &self.prepared.as_ref().map(|p| p.label().to_string()))
            .finish()
    }
}

/// [`search`], keeping the selected candidate prepared for the caller: a caller that runs
/// the selected candidate on the same runtime with the same weights saves its second
/// prepare. Its prepare time is then the caller's, not the search's
/// ([`SearchReport::kept_prepare_ms`]), and the share rule ([`payoff`]) counts the
/// baseline's prepare as the run's.
///
/// # Errors
/// As [`search`].
pub fn search_prepared(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    weights: &Tensors,
    inputs: &Tensors,
    options: &SearchOptions,
    progress: Progress,
) -> Result<Searched, SearchError> {
    search_impl(runtime, candidates, weights, inputs, options, progress, true)
}

/// The baseline the share rule measures first: the cost model's pick when it fits the memory
/// budget, otherwise the candidate within it the cost model rates cheapest (the lower index on
/// a tie), as [`baseline_of`] would choose among all of them.
fn share_baseline(candidates: &[Candidate], options: &SearchOptions) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| options.memory_budget.is_none_or(|b| c.program.figures.slab_bytes <= b))
        .min_by_key(|(i, c)| (!c.picked, c.cost, *i))
        .map(|(i, _)| i)
}

/// The row of candidate `index` before the search did anything with it.
fn fresh_row(index: usize, c: &Candidate) -> CandidateTiming {
    let figures = &c.program.figures;
    CandidateTiming {
        index,
        label: c.label.clone(),
        program_label: c.program.label.clone(),
        slab_bytes: figures.slab_bytes,
        launches: figures.launches,
        flops: figures.flops,
        cost_model_pick: c.picked,
        cost: c.cost,
        prepare_ms: None,
        warmup_runs: 0,
        trials_ms: Vec::new(),
        median_ms: None,
        max_abs_diff: None,
        status: CandidateStatus::Measured,
    }
}

/// The report of a search the share rule skipped: only `baseline` was prepared and executed
/// once (`first`), and it stands.
#[allow(clippy::too_many_arguments)]
fn too_short(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    options: &SearchOptions,
    baseline: usize,
    first: FirstRun,
    payoff: Payoff,
    start: Instant,
    keep: bool,
) -> Result<Searched, SearchError> {
    let rows: Vec<CandidateTiming> = candidates
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let mut row = fresh_row(index, c);
            if index == baseline {
                row.prepare_ms = Some(first.prepare_ms);
                row.warmup_runs = 1;
                row.max_abs_diff = Some(0.0);
            } else if let Some(budget) =
                options.memory_budget.filter(|&b| c.program.figures.slab_bytes > b)
            {
                row.status = CandidateStatus::OverBudget { budget };
            } else {
                row.status = CandidateStatus::Skipped { limit: SearchLimit::RunTooShort };
            }
            row
        })
        .collect();
    let label = rows.get(baseline).map_or("", |r| r.label.as_str());
    let is_pick = rows.get(baseline).is_some_and(|r| r.cost_model_pick);
    let pick = candidates.iter().find(|c| c.picked).map(|c| c.label.as_str());
    let decision = stats::decide(
        (baseline, label, is_pick, pick),
        &[],
        &[],
        options.alpha,
        options.min_speedup,
    );
    if let (true, Some(c)) = (options.log_llir, candidates.get(baseline)) {
        let block = llir_best_block(baseline, first.first_ms, &c.program, &c.label);
        let _ = std::io::stderr().lock().write_all(block.as_bytes());
    }
    let prepared = keep.then_some(first.prepared);
    let report = SearchReport {
        runtime: runtime.name().to_string(),
        trials: options.trials,
        planned_rounds: 0,
        rounds: 0,
        stopped: None,
        warmup: options.warmup,
        warmup_rounds: 0,
        warmup_time_ms: options.warmup_time.as_secs_f64() * 1e3,
        budget_ms: options.budget.as_secs_f64() * 1e3,
        candidates: rows,
        reference: baseline,
        tolerance: options.tolerance,
        selected: baseline,
        decision,
        search_ms: start.elapsed().as_secs_f64() * 1e3,
        break_even: BreakEven::Unknown,
        payoff: Some(payoff),
        kept_prepare_ms: prepared.as_ref().map(|_| first.prepare_ms),
    };
    if let (Some(dir), Some(c)) = (&options.dump_dir, candidates.get(baseline)) {
        dump::write_dumps(dir, &c.program)?;
    }
    Ok(Searched { report, prepared })
}

/// [`search`] and [`search_prepared`] (and the tuning cache's search): `keep` keeps the selected
/// candidate prepared (`prepared` is `None` otherwise).
pub(crate) fn search_impl(
    runtime: &dyn Runtime,
    candidates: &[Candidate],
    weights: &Tensors,
    inputs: &Tensors,
    options: &SearchOptions,
    progress: Progress,
    keep: bool,
) -> Result<Searched, SearchError> {
    validate(candidates, options)?;
    let start = Instant::now();
    // The share rule: the baseline first, alone; no challenger when a search cannot pay.
    let mut early: Option<(usize, Result<FirstRun, RuntimeError>)> = None;
    let mut share: Option<Payoff> = None;
    if let (Some(plan), Some(b)) = (payoff::applies(options), share_baseline(candidates, options))
        && let Some(c) = candidates.get(b)
    {
        match first_run(runtime, &c.program, weights, inputs) {
            Ok(first) => {
                let challengers = candidates
                    .iter()
                    .enumerate()
                    .filter(|(i, c)| {
                        *i != b
                            && options
                                .memory_budget
                                .is_none_or(|m| c.program.figures.slab_bytes <= m)
                    })
                    .count();
                let p = payoff::payoff(
                    options.share,
                    &plan,
                    first.prepare_ms,
                    first.first_ms,
                    challengers,
                    payoff::useful_rounds(challengers, options.alpha, MIN_ROUNDS_BEFORE_STOP),
                    keep,
                );
                if !p.fits {
                    return too_short(runtime, candidates, options, b, first, p, start, keep);
                }
                share = Some(p);
                early = Some((b, Ok(first)));
            }
            // A baseline that fails is reported in its turn, and the search goes on without
            // the rule (nothing to estimate the run with).
            Err(err) => early = Some((b, Err(err))),
        }
    }
    let bar = progress_bar(progress, candidates.len());
    let mut rows: Vec<CandidateTiming> = Vec::with_capacity(candidates.len());
    let mut live: Vec<Live> = Vec::new();
    let mut attempted = 0usize;
    let mut ran = false;
    let mut first_error: Option<(String, RuntimeError)> = None;
    // (index, label, first-execute outputs) of the reference candidate.
    let mut reference: Option<(usize, String, Tensors)> = None;
    // Candidates with a non-finite output that ran before any reference, with their outputs:
    // judged once there is one.
    let mut held: Vec<(Live, Tensors)> = Vec::new();
    let mut mismatched: Vec<String> = Vec::new();
    let mut warm_start: Option<Instant> = None;
    for (index, c) in candidates.iter().enumerate() {
        let figures = &c.program.figures;
        if let Some(bar) = &bar {
            bar.set_message(c.label.clone());
        }
        // The baseline measured first by the share rule is no skip.
        let measured_early = early.as_ref().is_some_and(|(b, _)| *b == index);
        let over_budget = options
            .memory_budget
            .filter(|&b| figures.slab_bytes > b)
            .map(|budget| CandidateStatus::OverBudget { budget });
        let limited = options
            .max_candidates
            .filter(|&n| attempted >= n)
            .map(SearchLimit::MaxCandidates)
            .or_else(|| {
                options
                    .time_limit
                    .filter(|&limit| ran && start.elapsed() >= limit)
                    .map(SearchLimit::TimeLimit)
            })
            .filter(|_| !measured_early)
            .map(|limit| CandidateStatus::Skipped { limit });
        let mut row = fresh_row(index, c);
        if let Some(status) = over_budget.or(limited) {
            row.status = status;
        } else {
            attempted += 1;
            let run = match early.take_if(|(b, _)| *b == index) {
                Some((_, run)) => run,
                None => first_run(runtime, &c.program, weights, inputs),
            };
            match run {
                Err(err) => {
                    row.status = CandidateStatus::Failed { error: err.to_string() };
                    first_error.get_or_insert((c.label.clone(), err));
                }
                Ok(run) => {
                    ran = true;
                    warm_start.get_or_insert(run.warm);
                    row.prepare_ms = Some(run.prepare_ms);
                    row.warmup_runs = 1;
                    let FirstRun { prepared, first_ms, outputs, .. } = run;
                    let candidate = Live { index, prepared, first_ms, trials: Vec::new() };
                    match &reference {
                        Some(r) => {
                            if judge(&mut row, &outputs, r, options.tolerance, &mut mismatched) {
                                live.push(candidate);
                            }
                        }
                        None if all_finite(&outputs) => {
                            row.max_abs_diff = Some(0.0);
                            let r = (index, c.label.clone(), outputs);
                            // The held candidates are judged against the new reference.
                            for (h, outs) in held.drain(..) {
                                if let Some(prev) = rows.get_mut(h.index)
                                    && judge(prev, &outs, &r, options.tolerance, &mut mismatched)
                                {
                                    live.push(h);
                                }
                            }
                            reference = Some(r);
                            live.push(candidate);
                        }
                        None => held.push((candidate, outputs)),
                    }
                }
            }
        }
        rows.push(row);
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    // No candidate was finite everywhere: the first held one is the reference after all.
    if reference.is_none() && !held.is_empty() {
        let mut held = held.into_iter();
        if let Some((first, outputs)) = held.next() {
            let label = rows.get(first.index).map(|r| r.label.clone()).unwrap_or_default();
            if let Some(row) = rows.get_mut(first.index) {
                row.max_abs_diff = Some(0.0);
            }
            let r = (first.index, label, outputs);
            live.push(first);
            for (h, outs) in held {
                if let Some(row) = rows.get_mut(h.index)
                    && judge(row, &outs, &r, options.tolerance, &mut mismatched)
                {
                    live.push(h);
                }
            }
            reference = Some(r);
        }
    }
    live.sort_by_key(|c| c.index);
    if let Some(bar) = &bar {
        bar.set_message("rounds");
    }
    let over_time = || options.time_limit.is_some_and(|limit| start.elapsed() >= limit);
    // Warm-up rounds; the last one's duration is the estimate the budget plans with.
    let mut round_ms: f64 = live.iter().map(|c| c.first_ms).sum();
    let mut turn = 0usize;
    let mut warmup_rounds = 0usize;
    while !live.is_empty()
        && !over_time()
        && (warmup_rounds < options.warmup
            || warm_start.is_some_and(|w| w.elapsed() < options.warmup_time))
    {
        round_ms = run_round(&mut live, &mut rows, inputs, turn, false, &mut first_error);
        turn += 1;
        warmup_rounds += 1;
    }
    // The timed rounds' budget: the option's, or under the share rule what is left of the
    // share (the prepare the run takes over is the run's, not the search's), never more than
    // the option's and never fewer rounds than a useful search.
    let mut budget_ms = options.budget.as_secs_f64() * 1e3;
    let planned = match &share {
        None => stats::planned_rounds(budget_ms, round_ms, options.trials),
        Some(p) => {
            let own_ms =
                start.elapsed().as_secs_f64() * 1e3 - if keep { p.prepare_ms } else { 0.0 };
            budget_ms = p.rounds_budget_ms(own_ms).min(budget_ms);
            stats::planned_rounds(budget_ms, round_ms, options.trials)
                .max(p.rounds.min(options.trials))
        }
    };
    let mut rounds = 0usize;
    let mut stopped = None;
    while rounds < planned && !live.is_empty() {
        if rounds > 0
            && let Some(limit) = options.time_limit.filter(|_| over_time())
        {
            stopped = Some(RoundsStop::TimeLimit { limit });
            break;
        }
        if options.early_stop
            && rounds >= MIN_ROUNDS_BEFORE_STOP
            && baseline_of(&live, &rows)
                .is_none_or(|b| !any_can_win(&live, b, planned - rounds, options))
        {
            stopped = Some(RoundsStop::Futile);
            break;
        }
        run_round(&mut live, &mut rows, inputs, turn, true, &mut first_error);
        turn += 1;
        rounds += 1;
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    for c in &live {
        if let Some(row) = rows.get_mut(c.index) {
            row.median_ms = median(&c.trials);
            row.trials_ms = c.trials.clone();
        }
    }
    let Some(baseline) = baseline_of(&live, &rows) else {
        if let (Some((_, label, _)), Some(first)) = (reference, mismatched.first()) {
            return Err(SearchError::NoAgreement {
                reference: label,
                mismatched: mismatched.len(),
                first: first.clone(),
            });
        }
        if let Some((label, source)) = first_error {
            return Err(SearchError::NothingRan { label, source });
        }
        let budget = options.memory_budget.unwrap_or(0);
        let smallest = rows.iter().map(|r| r.slab_bytes).min().unwrap_or(0);
        return Err(SearchError::OverBudget { budget, smallest });
    };
    let trials: Vec<(usize, Vec<f64>)> = live.iter().map(|c| (c.index, c.trials.clone())).collect();
    let label_of = |i: usize| rows.get(i).map_or("", |r| r.label.as_str());
    let base_trials = trials.iter().find(|(i, _)| *i == baseline).map_or(&[][..], |(_, t)| t);
    let challengers: Vec<(usize, &str, &[f64])> = trials
        .iter()
        .filter(|(i, _)| *i != baseline)
        .map(|(i, t)| (*i, label_of(*i), t.as_slice()))
        .collect();
    let pick = candidates.iter().find(|c| c.picked).map(|c| c.label.as_str());
    let is_pick = rows.get(baseline).is_some_and(|r| r.cost_model_pick);
    let decision = stats::decide(
        (baseline, label_of(baseline), is_pick, pick),
        base_trials,
        &challengers,
        options.alpha,
        options.min_speedup,
    );
    let selected = decision.selected;
    // Every slab but the kept one is freed before the dumps are written.
    let mut prepared = None;
    for c in live.drain(..) {
        if keep && c.index == selected {
            prepared = Some(c.prepared);
        }
    }
    let kept_prepare_ms =
        prepared.as_ref().and_then(|_| rows.get(selected).and_then(|r| r.prepare_ms));
    if let (true, Some(c), Some(row)) =
        (options.log_llir, candidates.get(selected), rows.get(selected))
    {
        let block = llir_best_block(selected, row.median_ms.unwrap_or(0.0), &c.program, &c.label);
        // One write so concurrent stderr lines never interleave inside it; a closed stderr is
        // not the search's failure.
        let _ = std::io::stderr().lock().write_all(block.as_bytes());
    }
    let search_ms = start.elapsed().as_secs_f64() * 1e3;
    // A mismatched or failed unfused candidate is no baseline.
    let unfused_ms = rows
        .iter()
        .find(|r| r.label == unfused_label() && r.status == CandidateStatus::Measured)
        .and_then(|r| r.median_ms);
    let winner_is_unfused = rows.get(selected).is_some_and(|r| r.label == unfused_label());
    let winner_ms = rows.get(selected).and_then(|r| r.median_ms).unwrap_or(f64::NAN);
    // One measured candidate was chosen by default: no break-even either way.
    let compared = rows.iter().filter(|r| r.status == CandidateStatus::Measured).count() > 1;
    let report = SearchReport {
        runtime: runtime.name().to_string(),
        trials: options.trials,
        planned_rounds: planned,
        rounds,
        stopped,
        warmup: options.warmup,
        warmup_rounds,
        warmup_time_ms: options.warmup_time.as_secs_f64() * 1e3,
        budget_ms,
        candidates: rows,
        // A selected candidate agreed with a reference, so there is one.
        reference: reference.map_or(selected, |(i, ..)| i),
        tolerance: options.tolerance,
        selected,
        decision,
        search_ms,
        break_even: if compared {
            break_even(search_ms, unfused_ms, winner_ms, winner_is_unfused)
        } else {
            BreakEven::Unknown
        },
        payoff: share,
        kept_prepare_ms,
    };
    if let (Some(dir), Some(c)) = (&options.dump_dir, candidates.get(selected)) {
        dump::write_dumps(dir, &c.program)?;
    }
    Ok(Searched { report, prepared })
}

/// The checks [`search`] makes before any work.
fn validate(candidates: &[Candidate], options: &SearchOptions) -> Result<(), SearchError> {
    let invalid = |why: String| Err(SearchError::InvalidOption(why));
    if candidates.is_empty() {
        return Err(SearchError::NoCandidates);
    }
    if options.trials == 0 {
        return invalid("trials must be at least 1".to_string());
    }
    if options.max_candidates == Some(0) {
        return invalid("max_candidates must be at least 1".to_string());
    }
    if !options.tolerance.is_valid() {
        return invalid(format!(
            "tolerance must be finite and non-negative, not abs {} rel {}",
            options.tolerance.abs, options.tolerance.rel
        ));
    }
    if !(options.alpha > 0.0 && options.alpha < 1.0) {
        return invalid(format!("alpha must be in (0, 1), not {}", options.alpha));
    }
    if !(options.min_speedup >= 0.0 && options.min_speedup < 1.0) {
        return invalid(format!("min_speedup must be in [0, 1), not {}", options.min_speedup));
    }
    if !(options.share > 0.0 && options.share < 1.0) {
        return invalid(format!("share must be in (0, 1), not {}", options.share));
    }
    Ok(())
}

/// `s` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `v` with at least `digits` significant digits and never fewer than 3 decimals:
/// `0.0129` -> `0.0129`, `0.000034` -> `0.0000340`, `12.5` -> `12.500` (a saving of a few
/// microseconds per execute must not print as `0.000`).
fn significant(v: f64, digits: i32) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v:.3}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).clamp(3, 12) as usize;
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fixed times pin the arithmetic: search_ms / (unfused_ms - winner_ms).
    #[test]
    fn break_even_arithmetic() {
        let be = break_even(3000.0, Some(0.5), 0.3, false);
        match be {
            BreakEven::Executions(x) => assert!((x - 15_000.0).abs() < 1e-6, "{x}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(be.executions(), Some(15_000));
        assert_eq!(be.to_string(), "15,000 executions");
        // 12 ms of search, 0.25 ms -> 0.17 ms: 150 executions exactly repay it.
        let be = break_even(12.0, Some(0.25), 0.17, false);
        let BreakEven::Executions(x) = be else { panic!("{be:?}") };
        assert!((x - 150.0).abs() < 1e-9, "{x}");
        // A fraction of an execution still needs a whole one.
        assert_eq!(break_even(1.0, Some(3.0), 1.0, false).executions(), Some(1));
        assert_eq!(break_even(1.0, Some(3.0), 1.0, false).to_string(), "1 execution");
        assert_eq!(break_even(5.0, Some(1.0), 0.5, false), BreakEven::Executions(10.0));
    }

    #[test]
    fn break_even_never_and_unknown() {
        assert_eq!(break_even(3000.0, Some(0.5), 0.5, true), BreakEven::Never);
        assert_eq!(break_even(3000.0, Some(0.3), 0.3, false), BreakEven::Never);
        assert_eq!(break_even(3000.0, Some(0.3), 0.4, false), BreakEven::Never);
        assert_eq!(break_even(3000.0, Some(f64::NAN), 0.4, false), BreakEven::Never);
        assert_eq!(break_even(3000.0, None, 0.4, false), BreakEven::Unknown);
        assert_eq!(break_even(3000.0, None, 0.4, true), BreakEven::Never);
        assert_eq!(BreakEven::Never.to_string(), "never");
        // A vanishing saving saturates instead of overflowing.
        assert_eq!(BreakEven::Executions(f64::INFINITY).executions(), Some(u64::MAX));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0]), Some(4.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // One stray slow trial does not move it.
        assert_eq!(median(&[1.0, 1.1, 50.0, 0.9, 1.0]), Some(1.0));
    }

    #[test]
    fn savings_keep_their_significant_digits() {
        assert_eq!(significant(0.0129, 3), "0.0129");
        assert_eq!(significant(0.000034, 3), "0.0000340");
        assert_eq!(significant(0.00021, 3), "0.000210");
        assert_eq!(significant(12.5, 3), "12.500");
        assert_eq!(significant(0.0, 3), "0.000");
        assert_eq!(significant(f64::INFINITY, 3), "inf");
    }

    fn row(index: usize, label: &str, median_ms: f64) -> CandidateTiming {
        CandidateTiming {
            index,
            label: label.to_string(),
            program_label: format!("p-{label}"),
            slab_bytes: 1_196_288,
            launches: 1,
            flops: 0,
            cost_model_pick: false,
            cost: 8_000_000,
            prepare_ms: Some(0.1),
            warmup_runs: 1,
            trials_ms: vec![median_ms],
            median_ms: Some(median_ms),
            max_abs_diff: Some(0.0),
            status: CandidateStatus::Measured,
        }
    }

    /// A report over `candidates` whose decision compares each row's trials with row
    /// `baseline`'s (the cost model's pick).
    fn report(candidates: Vec<CandidateTiming>, baseline: usize, search_ms: f64) -> SearchReport {
        let rounds = candidates.iter().map(|c| c.trials_ms.len()).max().unwrap_or(0);
        let base = candidates[baseline].trials_ms.clone();
        let challengers: Vec<(usize, &str, &[f64])> = candidates
            .iter()
            .filter(|c| c.index != baseline && c.status == CandidateStatus::Measured)
            .map(|c| (c.index, c.label.as_str(), c.trials_ms.as_slice()))
            .collect();
        let label = candidates[baseline].label.clone();
        let decision =
            stats::decide((baseline, &label, true, None), &base, &challengers, 0.01, 0.03);
        let selected = decision.selected;
        let unfused = candidates[0].median_ms;
        let winner = candidates[selected].median_ms.unwrap();
        SearchReport {
            runtime: "cpu".into(),
            trials: 15,
            planned_rounds: 15,
            rounds,
            stopped: None,
            warmup: 1,
            warmup_rounds: 1,
            warmup_time_ms: 1.0,
            budget_ms: 1000.0,
            reference: 0,
            tolerance: DEFAULT_TOLERANCE,
            selected,
            decision,
            search_ms,
            break_even: break_even(search_ms, unfused, winner, selected == 0),
            candidates,
            payoff: None,
            kept_prepare_ms: None,
        }
    }

    #[test]
    fn report_lines_say_rounds_choice_and_a_tiny_saving() {
        let mut unfused = row(0, "unfused", 0.01234);
        let mut fused = row(1, "fused", 0.01230);
        unfused.trials_ms = vec![0.01234; 4];
        fused.trials_ms = vec![0.01230; 4];
        fused.cost_model_pick = true;
        let mut report = report(vec![unfused, fused], 1, 20.0);
        report.rounds = 4;
        report.stopped = Some(RoundsStop::Futile);
        let text = report.to_string();
        assert!(
            text.contains(
                "search     20.000 ms on cpu: 2 of 2 candidates measured in 4 interleaved rounds \
                 (15 planned; stopped early: no candidate can still be shown faster), after 1 \
                 warm-up round\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\nchoice     kept the cost model's pick (fused): no candidate faster with \
                 confidence (closest: unfused, median speedup -0.3%, faster by more than 3.0% in \
                 0 of 4 rounds, p = 1.0000); one-sided sign test, alpha 0.01\n"
            ),
            "{text}"
        );
        // 0.00004 ms saved: 500,000 executions (to float rounding) and a saving that shows.
        assert!(text.contains(" ms / 0.0000400 ms saved per execute against unfused)"), "{text}");
        let one = SearchReport {
            candidates: vec![row(0, "unfused", 0.5)],
            selected: 0,
            rounds: 1,
            stopped: Some(RoundsStop::TimeLimit { limit: Duration::from_millis(2) }),
            break_even: BreakEven::Never,
            decision: stats::decide((0, "unfused", true, None), &[0.5], &[], 0.01, 0.03),
            ..report
        };
        let text = one.to_string();
        assert!(
            text.contains(
                ": 1 of 1 candidate measured in 1 interleaved round (15 planned; stopped at the \
                 time limit of 2.000 ms), after 1 warm-up round\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "choice     kept the cost model's pick (unfused): no other candidate was measured;"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_measured_winner_is_selected_and_said() {
        let mut unfused = row(0, "unfused", 0.5);
        let mut bias = row(1, "bias", 0.25);
        let mut fused = row(2, "fused", 0.3125);
        unfused.trials_ms = vec![0.5; 15];
        bias.trials_ms = vec![0.25; 15];
        fused.trials_ms = vec![0.3125; 15];
        fused.cost_model_pick = true;
        let report = report(vec![unfused, bias, fused], 2, 30.0);
        assert_eq!(report.selected, 1);
        let text = report.to_string();
        assert!(
            text.contains(
                "\nchoice     measured winner: bias, p = 3.1e-5, median speedup 20.0% over the \
                 cost model's pick (fused), faster by more than 3.0% in 15 of 15 rounds; \
                 one-sided sign test, alpha 0.01\n"
            ),
            "{text}"
        );
        let selected = text.lines().find(|l| l.starts_with("bias ")).unwrap();
        assert!(selected.ends_with("  measured  selected"), "{selected}");
        // 30 ms of search, 0.25 ms saved per execute against unfused: 120 executions.
        assert!(
            text.ends_with(
                "break-even: 120 executions (search 30.000 ms / 0.250 ms saved per execute \
                 against unfused)"
            ),
            "{text}"
        );
    }

    #[test]
    fn break_even_lines_say_why_there_is_none() {
        let skipped = |index, label: &str| CandidateTiming {
            trials_ms: Vec::new(),
            median_ms: None,
            max_abs_diff: None,
            prepare_ms: None,
            warmup_runs: 0,
            status: CandidateStatus::Skipped { limit: SearchLimit::MaxCandidates(1) },
            ..row(index, label, 0.0)
        };
        let mut report = report(vec![row(0, "unfused", 0.5), skipped(1, "fused")], 0, 20.0);
        report.break_even = BreakEven::Unknown;
        assert_eq!(
            report.break_even_line(),
            "break-even: unknown (only the unfused candidate was measured)"
        );
        let unfused_skipped = SearchReport {
            candidates: vec![skipped(0, "unfused"), row(1, "fused", 0.5)],
            selected: 1,
            reference: 1,
            ..report.clone()
        };
        assert_eq!(
            unfused_skipped.break_even_line(),
            "break-even: unknown (the unfused candidate was not measured)"
        );
        let slower = SearchReport {
            candidates: vec![row(0, "unfused", 0.5), row(1, "fused", 0.6)],
            break_even: break_even(20.0, Some(0.5), 0.5, true),
            ..report
        };
        assert_eq!(
            slower.break_even_line(),
            "break-even: never (the unfused candidate is selected)"
        );
        // The cost model's pick kept though unfused measured faster (not with confidence).
        let kept = SearchReport { selected: 1, ..slower };
        assert_eq!(
            kept.break_even_line(),
            "break-even: never (the selected candidate measured no faster than unfused)"
        );
    }

    fn tensors(list: &[(&str, &[usize], &[f32])]) -> Tensors {
        list.iter()
            .map(|(name, shape, data)| {
                (name.to_string(), HostTensor::new(shape.to_vec(), data.to_vec()).unwrap())
            })
            .collect()
    }

    #[test]
    fn tolerances_are_abs_plus_rel() {
        let t = Tolerance { abs: 1e-4, rel: 1e-3 };
        assert!(t.allows(1.0001, 1.0)); // 1e-4 <= 1e-4 + 1e-3
        assert!(t.allows(101.0, 100.9)); // 0.1 <= 1e-4 + 0.1009
        assert!(!t.allows(101.2, 100.9));
        assert!(!t.allows(0.0002, 0.0));
        assert!(t.allows(-0.0, 0.0));
        // Non-finite values agree only with the same value; NaN with NaN.
        assert!(t.allows(f32::NAN, f32::NAN));
        assert!(!t.allows(f32::NAN, 1.0) && !t.allows(1.0, f32::NAN));
        assert!(t.allows(f32::INFINITY, f32::INFINITY));
        assert!(!t.allows(f32::INFINITY, f32::NEG_INFINITY));
        // rel x |inf| would cover any finite value: refused explicitly.
        assert!(!t.allows(1.0, f32::INFINITY));
        let exact = Tolerance { abs: 0.0, rel: 0.0 };
        assert!(exact.allows(0.5, 0.5) && !exact.allows(0.5, 0.5 + f32::EPSILON));
        assert_eq!(DEFAULT_TOLERANCE.to_string(), "1e-4 + 1e-4 x |reference|");
        assert!(DEFAULT_TOLERANCE.is_valid());
        assert!(!Tolerance { abs: -0.1, rel: 0.0 }.is_valid());
    }

    #[test]
    fn outputs_compare_by_name_shape_then_value() {
        let t = DEFAULT_TOLERANCE;
        let want = tensors(&[("y", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), ("z", &[1], &[7.0])]);
        // Same values in another output order: agreement, difference 0.
        let reordered =
            tensors(&[("z", &[1], &[7.0]), ("y", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])]);
        assert_eq!(
            compare_outputs(&reordered, &want, t),
            OutputComparison { max_abs_diff: Some(0.0), disagreement: None }
        );
        // Within tolerance: the difference is reported, no disagreement.
        let close =
            tensors(&[("y", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.00005]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&close, &want, t);
        assert!(c.disagreement.is_none());
        assert!((c.max_abs_diff.unwrap() - 5e-5).abs() < 1e-6);
        // The worst element out of tolerance, with its row-major index.
        let off = tensors(&[("y", &[2, 3], &[0.0, 1.5, 2.0, 3.0, 4.0, 3.0]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&off, &want, t);
        assert_eq!(c.max_abs_diff, Some(2.0));
        assert_eq!(
            c.disagreement,
            Some(Disagreement::Value {
                output: "y".into(),
                index: vec![1, 2],
                got: 3.0,
                want: 5.0,
                abs_diff: 2.0
            })
        );
        assert_eq!(
            c.disagreement.unwrap().to_string(),
            "y[1, 2] is 3.0000e0, the reference 5.0000e0 (abs diff 2.000e0)"
        );
        // NaN against a number is the worst, and sticks in the maximum.
        let nan =
            tensors(&[("y", &[2, 3], &[0.0, 9.0, 2.0, f32::NAN, 4.0, 5.0]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&nan, &want, t);
        assert!(c.max_abs_diff.unwrap().is_nan());
        assert!(
            matches!(c.disagreement, Some(Disagreement::Value { ref index, .. }) if index == &[1, 0])
        );
        // NaN where the reference has NaN agrees.
        assert_eq!(compare_outputs(&nan, &nan, t).disagreement, None);
        assert_eq!(compare_outputs(&nan, &nan, t).max_abs_diff, Some(0.0));
        // Other names, other shapes: nothing pairs up.
        let renamed = tensors(&[("y", &[2, 3], &[0.0; 6]), ("w", &[1], &[7.0])]);
        let c = compare_outputs(&renamed, &want, t);
        assert_eq!(c.max_abs_diff, None);
        assert_eq!(c.disagreement.unwrap().to_string(), "outputs [w, y], the reference [y, z]");
        let reshaped = tensors(&[("y", &[3, 2], &[0.0; 6]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&reshaped, &want, t);
        assert_eq!(c.max_abs_diff, None);
        assert_eq!(
            c.disagreement.unwrap().to_string(),
            "output y has shape [3, 2], the reference [2, 3]"
        );
        // A scalar and an empty tensor.
        let a = tensors(&[("s", &[], &[1.0]), ("e", &[0, 4], &[])]);
        let b = tensors(&[("s", &[], &[2.0]), ("e", &[0, 4], &[])]);
        let c = compare_outputs(&a, &b, t);
        assert!(
            matches!(c.disagreement, Some(Disagreement::Value { ref index, .. }) if index.is_empty())
        );
    }

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(0, &[2, 3]), [0, 0]);
        assert_eq!(unravel(5, &[2, 3]), [1, 2]);
        assert_eq!(unravel(7, &[2, 3, 4]), [0, 1, 3]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
    }

    #[test]
    fn groups_digits() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_196_288), "1,196,288");
    }

    #[test]
    fn statuses_describe_themselves() {
        assert_eq!(
            CandidateStatus::OverBudget { budget: 1_000_000 }.describe(1_196_288),
            "skipped: slab 1,196,288 bytes over the memory budget of 1,000,000 bytes"
        );
        assert_eq!(
            CandidateStatus::Skipped { limit: SearchLimit::MaxCandidates(2) }.describe(0),
            "skipped: candidate limit of 2 reached"
        );
        assert_eq!(
            CandidateStatus::Skipped { limit: SearchLimit::TimeLimit(Duration::from_millis(20)) }
                .describe(0),
            "skipped: time limit of 20.000 ms reached"
        );
        assert_eq!(CandidateStatus::Measured.word(), "measured");
        let mismatch = CandidateStatus::Mismatch {
            reference: "unfused".into(),
            tolerance: DEFAULT_TOLERANCE,
            disagreement: Disagreement::Value {
                output: "y".into(),
                index: vec![12, 4],
                got: 1.234,
                want: 1.203,
                abs_diff: 0.031,
            },
        };
        assert_eq!(mismatch.word(), "mismatch");
        assert_eq!(
            mismatch.describe(0),
            "mismatch against unfused (tolerance 1e-4 + 1e-4 x |reference|): y[12, 4] is \
             1.2340e0, the reference 1.2030e0 (abs diff 3.100e-2)"
        );
    }
}
