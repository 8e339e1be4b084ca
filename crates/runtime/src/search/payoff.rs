//! The share rule: a search must pay for itself within the run that asked for it.
//!
//! A caller that knows what it will do after the search (`lumen run`: prepare the selected
//! candidate and execute it `--runs` times) says so in [`SearchOptions::run`]. The search
//! then measures before it commits: it prepares and first-executes the cost model's pick (the
//! baseline) alone, and from its prepare time and first execute time estimates
//!
//! * **the run** without the search: the time the caller already spent ([`RunPlan::spent`]:
//!   load, graph compile) + one prepare + [`RunPlan::executes`] executes, and
//! * **a minimal useful search**: what the baseline already cost the search (its first
//!   execute, and its prepare unless the run takes the prepared program over), plus each
//!   challenger's prepare and first execute (each estimated at the baseline's), plus
//!   [`useful_rounds`] interleaved rounds of every candidate at the baseline's execute time.
//!
//! The search may take at most [`SEARCH_SHARE`] (25%) of the whole run, itself included:
//! `search <= share x (run + search)`, so its budget is `share / (1 - share) x run` (a third
//! of the run at 25%). When the minimal useful search exceeds it, no challenger is prepared
//! and the cost model's pick stands ([`Payoff::fits`] false: the report's decision is
//! `too_short`); otherwise what is left of the budget after the challengers' first executes
//! is the timed rounds' budget (never more than [`SearchOptions::budget`], never fewer than
//! [`useful_rounds`] rounds). The arithmetic is [`payoff`], a pure function.
//!
//! An explicit budget is a request for a search, and overrides the rule: the rule applies only
//! when [`SearchOptions::run`] is set and neither [`SearchOptions::time_limit`] nor
//! [`SearchOptions::max_candidates`] is ([`applies`]); `lumen run` leaves `run` unset when
//! `--trials`, `--search-time-ms` or `--max-candidates` is given, and `lumen compare
//! --profile` never sets it.
//!
//! [`RunPlan`] and [`SEARCH_SHARE`] are options (they live in [`options`](super::options),
//! below this file, and are re-exported here).

use serde::Serialize;

use super::options::SearchOptions;
pub use super::options::{RunPlan, SEARCH_SHARE};
use super::stats::min_rounds_to_reject;

/// The share rule's arithmetic for one search (every time in milliseconds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Payoff {
    /// The largest share of the whole run the search may take, a fraction ([`SEARCH_SHARE`]).
    pub share: f64,
    /// Executes the caller runs after the search ([`RunPlan::executes`]).
    pub run_executes: u64,
    /// Time the caller spent before the search, ms ([`RunPlan::spent`]).
    pub spent_ms: f64,
    /// The baseline's measured prepare, ms.
    pub prepare_ms: f64,
    /// The baseline's measured first execute, ms: the estimate of every execute.
    pub execute_ms: f64,
    /// Candidates the search would prepare besides the baseline.
    pub challengers: usize,
    /// Timed rounds of a useful search ([`useful_rounds`]).
    pub rounds: usize,
    /// Whether the run takes the search's prepared program over (so the baseline's prepare
    /// is the run's, not the search's).
    pub reuses_prepare: bool,
    /// The run without the search, ms: `spent + prepare + executes x execute`.
    pub run_ms: f64,
    /// The most the search may take, ms: `share / (1 - share) x run_ms`.
    pub budget_ms: f64,
    /// A minimal useful search, ms: the baseline's first execute (and its prepare unless
    /// reused), `challengers x (prepare + execute)`, and `rounds x (challengers + 1) x
    /// execute`.
    pub needs_ms: f64,
    /// Whether `needs_ms <= budget_ms`: the search goes on.
    pub fits: bool,
}

impl Payoff {
    /// The timed rounds' budget, ms, after the search has spent `search_ms` (its own share:
    /// without the prepare the run takes over): what is left of [`Payoff::budget_ms`], at
    /// least 0.
    pub fn rounds_budget_ms(&self, search_ms: f64) -> f64 {
        (self.budget_ms - search_ms).max(0.0)
    }

    /// Why the search was skipped, in words: `the run (10 executes of 0.131 ms, ~5.210 ms in
    /// all) is too short for a search to pay for itself (a useful one needs ~3.105 ms: 2 more
    /// candidates prepared and 8 rounds; budget 1.737 ms, 25% of the run with it); kept the
    /// cost model's pick (fused)`. `kept` names what was kept.
    pub fn too_short_text(&self, kept: &str) -> String {
        format!(
            "the run ({} execute{} of {:.3} ms, ~{:.3} ms in all) is too short for a search to \
             pay for itself (a useful one needs ~{:.3} ms: {} more candidate{} prepared and {} \
             rounds; budget {:.3} ms, {}% of the run with it); kept {kept}",
            self.run_executes,
            if self.run_executes == 1 { "" } else { "s" },
            self.execute_ms,
            self.run_ms,
            self.needs_ms,
            self.challengers,
            if self.challengers == 1 { "" } else { "s" },
            self.rounds,
            self.budget_ms,
            share_percent(self.share),
        )
    }
}

/// A share (a fraction) as a percentage for reports, without the noise of binary fractions:
/// `25`, `7` (not `7.000000000000001`), `0.1`; a share too small for three decimals in
/// scientific notation (`1e-298`).
///
/// ```
/// use lumen_runtime::search::payoff::share_percent;
/// assert_eq!([0.25, 0.07, 0.57, 0.001].map(share_percent), ["25", "7", "57", "0.1"]);
/// assert_eq!(share_percent(1e-300), "1e-298");
/// ```
pub fn share_percent(share: f64) -> String {
    let percent = share * 100.0;
    let fixed = format!("{percent:.3}");
    let fixed = fixed.trim_end_matches('0').trim_end_matches('.');
    if fixed == "0" && percent != 0.0 { format!("{percent:.0e}") } else { fixed.to_string() }
}

/// The timed rounds of a minimal useful search with `challengers` challengers at family-wise
/// level `alpha`: the least number of rounds in which the sign test can ever show a
/// challenger faster ([`min_rounds_to_reject`] at `alpha / challengers`; fewer can never
/// switch, so they would be spent for nothing), and never fewer than `floor`.
///
/// ```
/// use lumen_runtime::search::payoff::useful_rounds;
/// assert_eq!(useful_rounds(2, 0.01, 3), 8); // 2^-8 <= 0.005
/// assert_eq!(useful_rounds(1, 0.01, 3), 7);
/// assert_eq!(useful_rounds(0, 0.01, 3), 7);
/// ```
pub fn useful_rounds(challengers: usize, alpha: f64, floor: usize) -> usize {
    let alpha = alpha / challengers.max(1) as f64;
    min_rounds_to_reject(alpha).max(floor)
}

/// The share rule's arithmetic (see the module docs): `plan` is the caller's run, `share`
/// the largest share of it the search may take (in (0, 1)), `prepare_ms` and `execute_ms`
/// the baseline's measured prepare and first execute (ms), `challengers` the candidates the
/// search would prepare besides it, `rounds` the timed rounds of a useful search, and
/// `reuses_prepare` whether the run takes the search's prepared program over.
///
/// ```
/// use std::time::Duration;
/// use lumen_runtime::search::payoff::{RunPlan, payoff};
/// // 10 executes of 0.15 ms after 4 ms of load and compile, a 0.9 ms prepare: a run of
/// // 6.4 ms allows 2.13 ms of search; two more prepares and 8 rounds of 3 need 5.85 ms.
/// let plan = RunPlan { executes: 10, spent: Duration::from_millis(4) };
/// let p = payoff(0.25, &plan, 0.9, 0.15, 2, 8, true);
/// assert!((p.run_ms - 6.4).abs() < 1e-9 && (p.budget_ms - 6.4 / 3.0).abs() < 1e-9);
/// assert!((p.needs_ms - 5.85).abs() < 1e-9 && !p.fits);
/// // 1,000 executes: a run of 154.9 ms, 51.6 ms of search allowed.
/// let long = RunPlan { executes: 1000, ..plan };
/// assert!(payoff(0.25, &long, 0.9, 0.15, 2, 8, true).fits);
/// ```
pub fn payoff(
    share: f64,
    plan: &RunPlan,
    prepare_ms: f64,
    execute_ms: f64,
    challengers: usize,
    rounds: usize,
    reuses_prepare: bool,
) -> Payoff {
    let spent_ms = plan.spent.as_secs_f64() * 1e3;
    let (prepare, execute) = (prepare_ms.max(0.0), execute_ms.max(0.0));
    let run_ms = spent_ms + prepare + plan.executes as f64 * execute;
    let budget_ms = share / (1.0 - share) * run_ms;
    let baseline_ms = execute + if reuses_prepare { 0.0 } else { prepare };
    let needs_ms = baseline_ms
        + challengers as f64 * (prepare + execute)
        + rounds as f64 * (challengers + 1) as f64 * execute;
    Payoff {
        share,
        run_executes: plan.executes,
        spent_ms,
        prepare_ms: prepare,
        execute_ms: execute,
        challengers,
        rounds,
        reuses_prepare,
        run_ms,
        budget_ms,
        needs_ms,
        // Not a number (a NaN time) never fits: the cost model's pick stands.
        fits: needs_ms <= budget_ms,
    }
}

/// Whether the share rule applies to a search with these options: a [`RunPlan`] is given,
/// and no explicit budget (a time limit or a candidate limit) asks for a search regardless.
pub fn applies(options: &SearchOptions) -> Option<RunPlan> {
    options.run.filter(|_| options.time_limit.is_none() && options.max_candidates.is_none())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn plan(executes: u64, spent_ms: u64) -> RunPlan {
        RunPlan { executes, spent: Duration::from_millis(spent_ms) }
    }

    #[test]
    fn a_short_run_does_not_fit_and_a_long_one_does() {
        // The digits MLP on the CPU: 0.9 ms prepares, 0.15 ms executes, 3 ms of load and
        // compile, two challengers, 8 rounds.
        let short = payoff(0.25, &plan(10, 3), 0.9, 0.15, 2, 8, true);
        assert!((short.run_ms - 5.4).abs() < 1e-9, "{short:?}");
        assert!((short.budget_ms - 1.8).abs() < 1e-9, "{short:?}");
        // 0.15 + 2 x 1.05 + 8 x 3 x 0.15 = 5.85 ms.
        assert!((short.needs_ms - 5.85).abs() < 1e-9, "{short:?}");
        assert!(!short.fits);
        assert_eq!(
            short.too_short_text("the cost model's pick (fused)"),
            "the run (10 executes of 0.150 ms, ~5.400 ms in all) is too short for a search to \
             pay for itself (a useful one needs ~5.850 ms: 2 more candidates prepared and 8 \
             rounds; budget 1.800 ms, 25% of the run with it); kept the cost model's pick \
             (fused)"
        );
        // Without taking the prepared program over, the baseline's prepare is search time.
        let unreused = payoff(0.25, &plan(10, 3), 0.9, 0.15, 2, 8, false);
        assert!((unreused.needs_ms - 6.75).abs() < 1e-9);
        // The rule's break-even: run_ms >= 3 x 5.85 = 17.55 ms, i.e. 91 executes.
        assert!(!payoff(0.25, &plan(90, 3), 0.9, 0.15, 2, 8, true).fits);
        let fits = payoff(0.25, &plan(92, 3), 0.9, 0.15, 2, 8, true);
        assert!(fits.fits, "{fits:?}");
        // The rounds get what is left, never below zero.
        assert!((fits.rounds_budget_ms(2.0) - (fits.budget_ms - 2.0)).abs() < 1e-12);
        assert_eq!(fits.rounds_budget_ms(1e9), 0.0);
        let long = payoff(0.25, &plan(100_000, 3), 0.9, 0.15, 2, 8, true);
        assert!(long.fits && long.budget_ms > 5000.0);
    }

    #[test]
    fn the_share_is_of_the_whole_run() {
        // A search that takes exactly its budget is exactly the share of the run with it.
        for share in [0.1, 0.25, 0.5] {
            let p = payoff(share, &plan(50, 2), 1.0, 0.2, 3, 9, false);
            let whole = p.run_ms + p.budget_ms;
            assert!((p.budget_ms / whole - share).abs() < 1e-12, "{share}: {p:?}");
        }
        // One candidate to compare with nothing: still priced (its rounds), one execute.
        let p = payoff(0.25, &plan(1, 0), 1.0, 0.5, 0, 7, true);
        assert!((p.needs_ms - (0.5 + 7.0 * 0.5)).abs() < 1e-12 && !p.fits);
        // A NaN time never fits.
        assert!(!payoff(0.25, &plan(10, 3), f64::NAN, 0.15, 2, 8, true).fits);
    }

    #[test]
    fn an_explicit_budget_overrides_the_rule() {
        let run = Some(plan(10, 3));
        let with_run = SearchOptions { run, ..SearchOptions::default() };
        assert_eq!(applies(&with_run), run);
        assert_eq!(applies(&SearchOptions::default()), None);
        let timed =
            SearchOptions { time_limit: Some(Duration::from_millis(50)), ..with_run.clone() };
        assert_eq!(applies(&timed), None);
        let limited = SearchOptions { max_candidates: Some(2), ..with_run };
        assert_eq!(applies(&limited), None);
    }

    #[test]
    fn useful_rounds_can_switch() {
        assert_eq!(useful_rounds(2, 0.01, 3), 8);
        assert_eq!(useful_rounds(3, 0.01, 3), 9);
        assert_eq!(useful_rounds(1, 0.5, 3), 3);
    }
}
