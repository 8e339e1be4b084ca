//! What a search reports: one [`CandidateTiming`] row per candidate with its
//! [`CandidateStatus`], why the rounds stopped ([`RoundsStop`]), the [`BreakEven`], and the
//! [`SearchReport`] that holds them and prints itself as a table; plus the `LLIR_BEST` block
//! of the selected candidate ([`llir_best_block`]).

use std::fmt;
use std::time::Duration;

use lumen_compiler::fusion::candidates::POLICIES;
use lumen_compiler::fusion::report::group;
use lumen_compiler::{CompiledProgram, dump};
use serde::Serialize;

use super::compare::{Disagreement, Tolerance, tolerance_text};
use super::options::SearchLimit;
use super::payoff::{self, Payoff};
use super::stats;

/// The label of the unfused candidate, the break-even's baseline.
pub fn unfused_label() -> &'static str {
    POLICIES[0].0
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
    /// The cost model's price of it (launch-equivalent DRAM bytes,
    /// [`Candidate::cost`](lumen_compiler::fusion::Candidate::cost)): the lowest measured one
    /// is the baseline when the pick itself was not measured.
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
    /// candidate's
    /// ([`OutputComparison::max_abs_diff`](super::compare::OutputComparison::max_abs_diff); 0
    /// for the reference itself); `None` when it never executed or its outputs do not pair up
    /// with the reference's.
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

/// Why the timed rounds ended before the planned number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RoundsStop {
    /// Early stopping: no challenger could still be shown faster in the rounds left.
    Futile,
    /// [`SearchOptions::time_limit`](super::options::SearchOptions::time_limit) had passed.
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
    /// The most timed rounds asked for
    /// ([`SearchOptions::trials`](super::options::SearchOptions::trials)).
    pub trials: usize,
    /// Timed rounds the budget planned ([`stats::planned_rounds`]).
    pub planned_rounds: usize,
    /// Timed rounds run: every measured candidate has this many `trials_ms`.
    pub rounds: usize,
    /// Why the rounds ended before `planned_rounds`, when they did.
    pub stopped: Option<RoundsStop>,
    /// Untimed rounds asked for after the first executes
    /// ([`SearchOptions::warmup`](super::options::SearchOptions::warmup)).
    pub warmup: usize,
    /// Untimed rounds run.
    pub warmup_rounds: usize,
    /// Least warm-up time in all, ms.
    pub warmup_time_ms: f64,
    /// The timed rounds' time budget, ms:
    /// [`SearchOptions::budget`](super::options::SearchOptions::budget), or under the share
    /// rule what was left of the search's share when the rounds began (never more).
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
    /// the caller ([`search_prepared`](super::trials::search_prepared)): part of `search_ms`,
    /// but the run's prepare, not a cost of searching.
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
    use super::super::compare::DEFAULT_TOLERANCE;
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
