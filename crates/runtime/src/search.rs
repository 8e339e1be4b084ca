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
//!
//! [`Candidate::picked`]: lumen_compiler::fusion::Candidate::picked

pub mod compare;
pub mod error;
pub mod options;
pub mod payoff;
pub mod report;
pub mod stats;
pub mod trials;

pub use compare::{
    DEFAULT_TOLERANCE, Disagreement, OutputComparison, Tolerance, compare_outputs, tolerance_text,
};
pub use error::SearchError;
pub use options::{
    DEFAULT_TRIALS, MIN_ROUNDS_BEFORE_STOP, Progress, RunPlan, SEARCH_SHARE, SearchLimit,
    SearchOptions,
};
pub use payoff::Payoff;
pub use report::{
    BreakEven, CandidateStatus, CandidateTiming, RoundsStop, SearchReport, break_even,
    llir_best_block, unfused_label,
};
pub use stats::median;
pub(crate) use trials::search_impl;
pub use trials::{Searched, random_tensors, search, search_prepared};
