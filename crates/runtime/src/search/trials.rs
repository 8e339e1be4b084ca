//! The search itself: every candidate prepared and executed once (compared with the
//! reference), then timed in interleaved rounds until the budget, a limit or early stopping
//! ends them, and the choice made ([`search`], [`search_prepared`]); plus the seeded
//! [`random_tensors`] a caller searches with.

use std::fmt;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lumen_compiler::fusion::Candidate;
use lumen_compiler::{BufferRole, CompiledProgram, DType, dump};

use super::compare::{Tolerance, compare_outputs};
use super::error::SearchError;
use super::options::{MIN_ROUNDS_BEFORE_STOP, Progress, SearchLimit, SearchOptions};
use super::payoff::{self, Payoff};
use super::report::{
    BreakEven, CandidateStatus, CandidateTiming, RoundsStop, SearchReport, break_even,
    llir_best_block, unfused_label,
};
use super::stats::{self, median};
use crate::tensor::element_count;
use crate::{HostTensor, PreparedProgram, Runtime, RuntimeError, Tensors};

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
