//! The search (SPEC section 5) on the CPU runtime: every candidate of the e-graph is prepared
//! and timed in interleaved rounds, the choice is the sign test's over the report's own rounds
//! (the cost model's pick unless another is faster with confidence: a candidate slowed down on
//! purpose loses its place, one that is not keeps it), limits and the memory budget skip
//! candidates and say so, the break-even follows the report's own figures, and the LLIR_BEST
//! block and the selected candidate's dumps are the canonical text. Every candidate's outputs are compared with the
//! reference's: one fed in from another program disagrees, says where, and is never selected.
//! No wall-clock limit is asserted anywhere.

use std::time::Duration;

use lumen_compiler::fusion::{self, Candidate};
use lumen_compiler::{BufferRole, CompileOptions, CompiledProgram, Graph, dump, programs};
use lumen_runtime::search::{
    self, BreakEven, CandidateStatus, DEFAULT_TOLERANCE, Disagreement, Progress, RoundsStop,
    SearchError, SearchLimit, SearchOptions, SearchReport, Tolerance, llir_best_block,
    random_tensors, stats,
};
use lumen_runtime::{
    CpuRuntime, ExecProfile, Peak, PreparedProgram, Runtime, RuntimeError, Tensors,
};

/// The candidates of a built-in program compiled under the name `name`.
fn candidates(graph: lumen_compiler::Graph, name: &str) -> Vec<Candidate> {
    let options = CompileOptions { name: name.to_string(), ..CompileOptions::default() };
    fusion::candidates(&graph.hlir(), &options).expect("candidates")
}

fn data(c: &[Candidate]) -> (Tensors, Tensors) {
    let p = &c[0].program;
    (
        random_tensors(p, BufferRole::Weight, 1).expect("weights"),
        random_tensors(p, BufferRole::Input, 2).expect("inputs"),
    )
}

/// `trials` rounds exactly (no early stop, one warm-up round), the defaults otherwise.
fn options(trials: usize) -> SearchOptions {
    SearchOptions { trials, early_stop: false, warmup: 1, ..SearchOptions::default() }
}

fn run(c: &[Candidate], opts: &SearchOptions) -> Result<SearchReport, SearchError> {
    let (w, x) = data(c);
    search::search(&CpuRuntime::default(), c, &w, &x, opts, Progress::Hidden)
}

/// What every successful report must satisfy, whatever the timings.
fn check_report(report: &SearchReport, c: &[Candidate], trials: usize) {
    assert_eq!(report.runtime, "cpu");
    assert_eq!(report.candidates.len(), c.len());
    assert_eq!(report.trials, trials);
    assert!(1 <= report.planned_rounds && report.planned_rounds <= trials);
    assert!(1 <= report.rounds && report.rounds <= report.planned_rounds);
    if report.stopped.is_none() {
        assert_eq!(report.rounds, report.planned_rounds);
    }
    for (i, (row, cand)) in report.candidates.iter().zip(c).enumerate() {
        assert_eq!(row.index, i);
        assert_eq!(row.label, cand.label);
        assert_eq!(row.program_label, cand.program.label);
        assert_eq!(row.slab_bytes, cand.program.figures.slab_bytes);
        assert_eq!(row.launches, cand.program.figures.launches);
        assert_eq!(row.cost_model_pick, cand.picked);
        assert_eq!(row.cost, cand.cost);
        if row.status == CandidateStatus::Measured {
            // Compared with the reference before it was timed, and in tolerance of it.
            let diff = row.max_abs_diff.expect("a measured row was compared");
            assert!(diff.is_finite() && diff >= 0.0, "{}: {diff}", row.label);
            // Interleaved: every measured candidate ran every round.
            assert_eq!(row.trials_ms.len(), report.rounds);
            assert!(row.trials_ms.iter().all(|t| t.is_finite() && *t >= 0.0));
            assert_eq!(row.median_ms, search::median(&row.trials_ms));
            assert!(row.prepare_ms.is_some());
            assert_eq!(row.warmup_runs, 1 + report.warmup_rounds);
        } else {
            assert!(row.median_ms.is_none() && row.trials_ms.is_empty());
        }
    }
    // The reference is the first row that ran: 0 from itself.
    let reference = &report.candidates[report.reference];
    assert_eq!(reference.max_abs_diff, Some(0.0));
    assert!(report.candidates[..report.reference].iter().all(|r| r.max_abs_diff.is_none()));
    assert_eq!(report.tolerance, DEFAULT_TOLERANCE);
    // The baseline is the cost model's pick when measured, else the cheapest measured.
    let measured: Vec<_> = report.measured().collect();
    let baseline = measured
        .iter()
        .min_by_key(|r| (!r.cost_model_pick, r.cost, r.index))
        .expect("a measured candidate");
    let d = &report.decision;
    assert_eq!(d.baseline, baseline.index);
    assert_eq!(d.baseline_is_pick, baseline.cost_model_pick);
    // The decision is the sign test over the report's own rounds.
    let challengers: Vec<(usize, &str, &[f64])> = measured
        .iter()
        .filter(|r| r.index != baseline.index)
        .map(|r| (r.index, r.label.as_str(), r.trials_ms.as_slice()))
        .collect();
    let pick = c.iter().find(|c| c.picked).map(|c| c.label.as_str());
    let again = stats::decide(
        (baseline.index, &baseline.label, baseline.cost_model_pick, pick),
        &baseline.trials_ms,
        &challengers,
        0.01,
        0.03,
    );
    assert_eq!(&again, d);
    assert_eq!(report.selected, d.selected);
    match d.winning() {
        None => assert_eq!(report.selected, baseline.index),
        Some(w) => {
            assert!(w.p_value <= 0.01 / challengers.len() as f64 && w.median_speedup >= 0.03);
            assert_eq!(report.selected, w.candidate);
        }
    }
    let winner = report.winner().expect("winner");
    assert_eq!(winner.status, CandidateStatus::Measured);
    let best = winner.median_ms.expect("winner measured");
    // The break-even is the report's own arithmetic, unknown when nothing was compared.
    let unfused = report.unfused().and_then(|u| u.median_ms);
    let expected = if measured.len() < 2 {
        BreakEven::Unknown
    } else {
        search::break_even(report.search_ms, unfused, best, winner.label == "unfused")
    };
    assert_eq!(report.break_even, expected);
    if let (BreakEven::Executions(x), Some(u)) = (report.break_even, unfused) {
        assert!((x * (u - best) - report.search_ms).abs() <= 1e-9 * report.search_ms.max(1.0));
    }
    assert!(report.search_ms > 0.0);
}

#[test]
fn linear_relu_64x256x64_measures_three_candidates() {
    let c = candidates(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    let labels: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    let report = run(&c, &options(5)).unwrap();
    check_report(&report, &c, 5);
    assert_eq!(report.measured().count(), 3);
    // The golden slab (SPEC section 2) is the same for all three; launches 3, 2, 1.
    let slabs: Vec<usize> = report.candidates.iter().map(|r| r.slab_bytes).collect();
    assert_eq!(slabs, [1_196_288; 3]);
    let launches: Vec<usize> = report.candidates.iter().map(|r| r.launches).collect();
    assert_eq!(launches, [3, 2, 1]);
    // The three compute the same thing: the unfused reference, then within 1e-4 of it (on
    // the CPU the epilogue rounds as the separate kernels do).
    assert_eq!(report.reference, 0);
    for row in &report.candidates {
        assert!(row.max_abs_diff.unwrap() <= DEFAULT_TOLERANCE.abs, "{}", row.label);
    }
    let text = report.to_string();
    assert!(
        text.starts_with("candidate  median_ms  slab_bytes  launches  max_abs_diff  status\n"),
        "{text}"
    );
    assert_eq!(text.lines().nth(1).map(|l| l.ends_with("  measured  reference")), Some(true));
    assert!(
        text.contains(
            " ms on cpu: 3 of 3 candidates measured in 5 interleaved rounds (5 planned), after 1 \
             warm-up round\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nchoice     "), "{text}");
    assert!(text.lines().last().unwrap().starts_with("break-even: "), "{text}");
    // Exactly one table row is selected (the break-even line may say "the selected candidate"
    // too, when the measured medians put fused no faster than unfused).
    let rows = text.lines().skip(1).take_while(|l| !l.starts_with("search "));
    assert_eq!(rows.filter(|l| l.contains("selected")).count(), 1, "{text}");
}

#[test]
fn digits_mlp_shape_measures_three_candidates() {
    // The digits MLP's architecture and batch (SPEC section 6) with seeded weights.
    let c = candidates(programs::mlp(&[64, 128, 64, 10], 450).unwrap(), "digits_mlp");
    assert!(c.len() >= 3, "{}", c.len());
    let report = run(&c, &options(3)).unwrap();
    check_report(&report, &c, 3);
    assert!(report.measured().count() >= 3);
    let launches: Vec<usize> = report.candidates.iter().map(|r| r.launches).collect();
    assert_eq!(launches, [8, 5, 3]);
}

// About 1 GFLOP per execute; 3 candidates x (1 warm-up + 3 trials) take a few seconds in a
// debug build (matrixmultiply itself is optimized in test builds).
#[test]
fn linear_relu_512x2048x512_measures_three_candidates() {
    let c = candidates(programs::linear_relu(512, 2048, 512).unwrap(), "linear-relu");
    assert_eq!(c.len(), 3);
    let report = run(&c, &options(3)).unwrap();
    check_report(&report, &c, 3);
    assert_eq!(report.measured().count(), 3);
}

#[test]
fn memory_budget_skips_candidates_over_it() {
    let c = candidates(programs::mlp(&[64, 128, 64, 10], 450).unwrap(), "digits_mlp");
    let slabs: Vec<usize> = c.iter().map(|c| c.program.figures.slab_bytes).collect();
    // Unfused holds three [450, 128] intermediates' worth more than the fused programs.
    assert_eq!(slabs, [1_693_696, 1_463_296, 1_463_296]);
    let opts = SearchOptions { memory_budget: Some(1_500_000), ..options(2) };
    let report = run(&c, &opts).unwrap();
    check_report(&report, &c, 2);
    assert_eq!(report.candidates[0].status, CandidateStatus::OverBudget { budget: 1_500_000 });
    assert_eq!(
        report.candidates[0].status.describe(report.candidates[0].slab_bytes),
        "skipped: slab 1,693,696 bytes over the memory budget of 1,500,000 bytes"
    );
    assert_eq!(report.measured().count(), 2);
    assert_ne!(report.selected, 0);
    // No unfused time, no baseline.
    assert_eq!(report.break_even, BreakEven::Unknown);
    assert!(
        report
            .to_string()
            .ends_with("break-even: unknown (the unfused candidate was not measured)")
    );

    // A budget equal to a slab does not exceed it.
    let opts = SearchOptions { memory_budget: Some(1_693_696), ..options(1) };
    assert_eq!(run(&c, &opts).unwrap().measured().count(), 3);

    // Nothing fits: a typed error naming the smallest slab.
    let opts = SearchOptions { memory_budget: Some(1_000), ..options(1) };
    let err = run(&c, &opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "every candidate's slab exceeds the memory budget of 1000 bytes (smallest: 1463296 bytes)"
    );
}

#[test]
fn candidate_and_time_limits_skip_the_rest() {
    let c = candidates(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    let opts = SearchOptions { max_candidates: Some(1), ..options(2) };
    let report = run(&c, &opts).unwrap();
    check_report(&report, &c, 2);
    assert_eq!(report.selected, 0);
    // Only unfused was measured: nothing was compared, so no break-even (not `never`).
    assert_eq!(report.break_even, BreakEven::Unknown);
    assert!(
        report
            .to_string()
            .ends_with("break-even: unknown (only the unfused candidate was measured)")
    );
    for row in &report.candidates[1..] {
        assert_eq!(row.status, CandidateStatus::Skipped { limit: SearchLimit::MaxCandidates(1) });
    }

    let opts = SearchOptions { max_candidates: Some(2), ..options(1) };
    let report = run(&c, &opts).unwrap();
    assert_eq!(report.measured().count(), 2);
    assert!(report.selected < 2);

    // A zero time limit still measures the first candidate, so there is always a winner.
    let opts = SearchOptions { time_limit: Some(Duration::ZERO), ..options(1) };
    let report = run(&c, &opts).unwrap();
    check_report(&report, &c, 1);
    assert_eq!(report.selected, 0);
    assert_eq!(
        report.candidates[2].status,
        CandidateStatus::Skipped { limit: SearchLimit::TimeLimit(Duration::ZERO) }
    );
    assert_eq!(report.break_even.to_string(), "unknown");
}

#[test]
fn bad_options_and_bad_data_are_typed_errors() {
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    assert!(matches!(run(&c, &options(0)), Err(SearchError::InvalidOption(_))));
    let opts = SearchOptions { max_candidates: Some(0), ..options(1) };
    assert!(matches!(run(&c, &opts), Err(SearchError::InvalidOption(_))));
    let none = Tensors::new();
    let empty =
        search::search(&CpuRuntime::default(), &[], &none, &none, &options(1), Progress::Hidden);
    assert!(matches!(empty, Err(SearchError::NoCandidates)));

    // Weights missing: every candidate fails; the first error is returned.
    let (_, x) = data(&c);
    let err = search::search(
        &CpuRuntime::default(),
        &c,
        &Tensors::new(),
        &x,
        &options(1),
        Progress::Hidden,
    )
    .unwrap_err();
    match &err {
        SearchError::NothingRan { label, source: RuntimeError::Missing { name, .. } } => {
            assert_eq!(label, "unfused");
            assert_eq!(name, "w");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.to_string(), "no candidate ran: unfused: missing weight `w` (shape [16, 4])");
}

#[test]
fn llir_best_block_is_the_canonical_text() {
    let c = candidates(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    let fused = &c[2];
    let block = llir_best_block(2, 0.125, &fused.program, &fused.label);
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(
        lines[0],
        "LLIR_BEST candidate=2 label=fused median_ms=0.125000 slab_bytes=1196288 launches=1"
    );
    assert_eq!(lines.last(), Some(&"LLIR_BEST_END"));
    let body = lines[1..lines.len() - 1].join("\n") + "\n";
    assert_eq!(body, dump::llir_text(&fused.program));
    assert!(body.starts_with("# lumen LLIR: linear-relu-fused\n"), "{body}");
    // Another timing changes the first line only.
    let again = llir_best_block(2, 9.5, &fused.program, &fused.label);
    assert_eq!(again.split_once('\n').unwrap().1, block.split_once('\n').unwrap().1);
}

#[test]
fn dump_dir_receives_the_winner() {
    let dir = tempfile::tempdir().unwrap();
    let c = candidates(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    let opts = SearchOptions { dump_dir: Some(dir.path().to_path_buf()), ..options(2) };
    let report = run(&c, &opts).unwrap();
    let winner = report.winner().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let label = &winner.program_label;
    assert_eq!(
        files,
        [
            format!("{label}.llir.dot"),
            format!("{label}.llir.txt"),
            format!("{label}.plan.svg"),
            format!("{label}.plan.txt")
        ]
    );
    let text = std::fs::read_to_string(dir.path().join(format!("{label}.llir.txt"))).unwrap();
    assert_eq!(text, dump::llir_text(&c[report.selected].program));
}

#[test]
fn random_tensors_are_seeded_and_shaped() {
    let c = candidates(programs::linear_relu(4, 3, 2).unwrap(), "tiny");
    let p = &c[0].program;
    let w = random_tensors(p, BufferRole::Weight, 7).unwrap();
    assert_eq!(w.keys().collect::<Vec<_>>(), ["w", "b"]);
    assert_eq!(w["w"].shape(), &[3, 2]);
    assert_eq!(w["b"].shape(), &[2]);
    assert_eq!(w, random_tensors(p, BufferRole::Weight, 7).unwrap());
    assert_ne!(w, random_tensors(p, BufferRole::Weight, 8).unwrap());
    assert!(w.values().flat_map(|t| t.data()).all(|v| (-1.0..1.0).contains(v)));
    let x = random_tensors(p, BufferRole::Input, 7).unwrap();
    assert_eq!(x.keys().collect::<Vec<_>>(), ["x"]);
}

/// `relu(x @ w + b)` with `relu` replaced by `gelu`: the same inputs, weights and output as
/// linear-relu, other values.
fn linear_gelu(m: usize, k: usize, n: usize) -> CompiledProgram {
    let mut cx = Graph::new();
    let x = cx.input("x", [m, k]);
    let w = cx.weight("w", [k, n]);
    let b = cx.weight("b", [n]);
    (x.matmul(w) + b).gelu().output("y");
    let options = CompileOptions { name: "linear-gelu".to_string(), ..CompileOptions::default() };
    cx.compile(&options).expect("linear-gelu")
}

/// `c` with its program replaced by `program` (label, cost and pick kept): what a buggy
/// rewrite would hand the search.
fn impostor(c: &Candidate, program: CompiledProgram) -> Candidate {
    Candidate { program, ..c.clone() }
}

#[test]
fn a_candidate_that_computes_something_else_is_never_selected() {
    let (m, k, n) = (64, 256, 64);
    let mut c = candidates(programs::linear_relu(m, k, n).unwrap(), "linear-relu");
    let gelu = linear_gelu(m, k, n);
    // The impostor is the fused slot: the fewest launches, so the likeliest to be fastest.
    c[2] = impostor(&c[2], gelu.clone());
    c[2].picked = true;
    let report = run(&c, &options(2)).unwrap();
    check_report(&report, &c, 2);
    assert_eq!(report.reference, 0);
    assert_ne!(report.selected, 2);
    assert_eq!(report.measured().count(), 2);
    let row = &report.candidates[2];
    assert!(row.median_ms.is_none() && row.trials_ms.is_empty(), "not timed: {row:?}");
    assert_eq!(row.warmup_runs, 1);
    let CandidateStatus::Mismatch { reference, tolerance, disagreement } = &row.status else {
        panic!("{:?}", row.status)
    };
    assert_eq!((reference.as_str(), *tolerance), ("unfused", DEFAULT_TOLERANCE));
    let Disagreement::Value { output, index, got, want, abs_diff } = disagreement else {
        panic!("{disagreement:?}")
    };
    // The worst element is the largest difference overall, and the values are the two
    // programs' own outputs there.
    assert_eq!(Some(*abs_diff), row.max_abs_diff);
    assert!(*abs_diff > 1e-3, "gelu and relu differ by more than rounding: {abs_diff}");
    let (w, x) = data(&c);
    let cpu = CpuRuntime::default();
    let out = |p: &CompiledProgram| cpu.prepare(p, &w).unwrap().execute(&x).unwrap();
    let (relu_y, gelu_y) = (out(&c[0].program), out(&gelu));
    assert_eq!(output, "y");
    let flat = index[0] * n + index[1];
    assert_eq!((*got, *want), (gelu_y["y"].data()[flat], relu_y["y"].data()[flat]));
    assert_eq!(*abs_diff, (f64::from(*got) - f64::from(*want)).abs());
    let largest = gelu_y["y"]
        .data()
        .iter()
        .zip(relu_y["y"].data())
        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
        .fold(0.0, f64::max);
    assert_eq!(*abs_diff, largest);
    // The status and the table say why.
    let detail = row.status.describe(row.slab_bytes);
    let want_detail = format!(
        "mismatch against unfused (tolerance 1e-4 + 1e-4 x |reference|): y[{}, {}] is {got:.4e}, \
         the reference {want:.4e} (abs diff {abs_diff:.3e})",
        index[0], index[1]
    );
    assert_eq!(detail, want_detail);
    let text = report.to_string();
    let line = text.lines().find(|l| l.starts_with("fused ")).unwrap();
    assert!(line.ends_with(&format!("  {detail}  cost model's pick")), "{line}");
    assert!(line.contains(&format!("  {:.1e}  mismatch", abs_diff)), "{line}");
    assert!(text.contains(": 2 of 3 candidates measured in "), "{text}");

    // A tolerance wide enough for gelu against relu lets it through.
    let loose = SearchOptions { tolerance: Tolerance { abs: 1.0, rel: 0.0 }, ..options(1) };
    let report = run(&c, &loose).unwrap();
    assert_eq!(report.candidates[2].status, CandidateStatus::Measured);
    assert_eq!(report.candidates[2].max_abs_diff, Some(largest));
}

#[test]
fn bad_tolerances_are_refused() {
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    for tolerance in [
        Tolerance { abs: -1e-4, rel: 0.0 },
        Tolerance { abs: 0.0, rel: f64::NAN },
        Tolerance { abs: f64::INFINITY, rel: 0.0 },
    ] {
        let opts = SearchOptions { tolerance, ..options(1) };
        assert!(matches!(run(&c, &opts), Err(SearchError::InvalidOption(_))), "{tolerance:?}");
    }
    // Zero tolerance is exact agreement, which the CPU candidates of linear-relu have.
    let opts = SearchOptions { tolerance: Tolerance { abs: 0.0, rel: 0.0 }, ..options(1) };
    let report = run(&c, &opts).unwrap();
    assert_eq!(report.measured().count(), 3);
}

/// What a [`Faulty`] runtime does wrong to the programs it names.
#[derive(Clone, Copy)]
enum Fault {
    /// Every execute after the first `n` fails (0: it never runs; 1: a reference whose
    /// outputs exist but that never finishes its trials).
    FailAfter(usize),
    /// The first element of every output is NaN (a kernel bug the cross-check must not take
    /// as the standard).
    NanFirst,
    /// Every execute sleeps this long first (a slow candidate, milliseconds).
    SleepMs(u64),
}

/// The CPU runtime, except that each program named in `faults` suffers its fault.
struct Faulty {
    cpu: CpuRuntime,
    faults: Vec<(String, Fault)>,
}

impl Faulty {
    /// The same `fault` for every program in `labels`.
    fn new(labels: &[&str], fault: Fault) -> Self {
        Self::each(&labels.iter().map(|l| (*l, fault)).collect::<Vec<_>>())
    }

    fn each(faults: &[(&str, Fault)]) -> Self {
        Self {
            cpu: CpuRuntime::default(),
            faults: faults.iter().map(|(l, f)| (l.to_string(), *f)).collect(),
        }
    }
}

struct FaultyRun {
    inner: Box<dyn PreparedProgram>,
    fault: Fault,
    runs: usize,
}

impl Runtime for Faulty {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn peak(&self) -> Peak {
        self.cpu.peak()
    }

    fn prepare(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<Box<dyn PreparedProgram>, RuntimeError> {
        let inner = self.cpu.prepare(program, weights)?;
        match self.faults.iter().find(|(l, _)| *l == program.label) {
            Some(&(_, fault)) => Ok(Box::new(FaultyRun { inner, fault, runs: 0 })),
            None => Ok(inner),
        }
    }
}

impl PreparedProgram for FaultyRun {
    fn label(&self) -> &str {
        self.inner.label()
    }

    fn slab_bytes(&self) -> usize {
        self.inner.slab_bytes()
    }

    fn prepare_seconds(&self) -> f64 {
        self.inner.prepare_seconds()
    }

    fn execute(&mut self, inputs: &Tensors) -> Result<Tensors, RuntimeError> {
        self.runs += 1;
        match self.fault {
            Fault::FailAfter(ok) if self.runs > ok => {
                Err(RuntimeError::Kernel { kernel: "flaky", reason: "second execute".into() })
            }
            Fault::FailAfter(_) => self.inner.execute(inputs),
            Fault::SleepMs(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                self.inner.execute(inputs)
            }
            Fault::NanFirst => Ok(self
                .inner
                .execute(inputs)?
                .into_iter()
                .map(|(name, t)| {
                    let mut data = t.data().to_vec();
                    if let Some(first) = data.first_mut() {
                        *first = f32::NAN;
                    }
                    (name, lumen_runtime::HostTensor::new(t.shape().to_vec(), data).unwrap())
                })
                .collect()),
        }
    }

    fn last_profile(&self) -> Option<&ExecProfile> {
        self.inner.last_profile()
    }
}

#[test]
fn a_reference_that_fails_its_trials_still_judges_the_rest() {
    let (m, k, n) = (8, 16, 4);
    let c = candidates(programs::linear_relu(m, k, n).unwrap(), "small");
    let (w, x) = data(&c);
    let runtime = Faulty::new(&["small-unfused"], Fault::FailAfter(1));
    // The bias candidate agrees with the failed reference and wins; the impostor does not.
    let mut mixed = c.clone();
    mixed[2] = impostor(&c[2], linear_gelu(m, k, n));
    let report = search::search(&runtime, &mixed, &w, &x, &options(1), Progress::Hidden).unwrap();
    assert_eq!((report.reference, report.selected), (0, 1));
    assert_eq!(report.candidates[0].status.word(), "failed");
    assert_eq!(report.candidates[0].max_abs_diff, Some(0.0));
    assert_eq!(report.candidates[2].status.word(), "mismatch");
    // Nothing else agrees: a typed error naming the reference and the first disagreement.
    let mut none = mixed.clone();
    none[1] = impostor(&c[1], linear_gelu(m, k, n));
    let err = search::search(&runtime, &none, &w, &x, &options(1), Progress::Hidden).unwrap_err();
    let SearchError::NoAgreement { reference, mismatched, first } = &err else { panic!("{err:?}") };
    assert_eq!((reference.as_str(), *mismatched), ("unfused", 2));
    assert!(first.starts_with("bias: mismatch against unfused (tolerance "), "{first}");
    assert!(
        err.to_string().starts_with(
            "no candidate agrees with the reference unfused, which did not finish its trials: 2 \
             disagree (first: bias: mismatch against unfused"
        ),
        "{err}"
    );
}

#[test]
fn the_first_candidate_that_runs_is_the_reference() {
    let (m, k, n) = (8, 16, 4);
    let c = candidates(programs::linear_relu(m, k, n).unwrap(), "small");
    let (w, x) = data(&c);
    // The unfused program never executes: the bias candidate is the reference, and the
    // impostor in the fused slot is compared with it.
    let runtime = Faulty::new(&["small-unfused"], Fault::FailAfter(0));
    let mut mixed = c.clone();
    mixed[2] = impostor(&c[2], linear_gelu(m, k, n));
    let report = search::search(&runtime, &mixed, &w, &x, &options(1), Progress::Hidden).unwrap();
    assert_eq!((report.reference, report.selected), (1, 1));
    assert_eq!(report.candidates[0].status.word(), "failed");
    assert_eq!(report.candidates[0].max_abs_diff, None);
    let CandidateStatus::Mismatch { reference, .. } = &report.candidates[2].status else {
        panic!("{:?}", report.candidates[2].status)
    };
    assert_eq!(reference, "bias");
    let text = report.to_string();
    let row = |label: &str| text.lines().find(|l| l.starts_with(label)).unwrap().to_string();
    assert!(row("unfused ").contains("  -  failed: kernel flaky: second execute"), "{text}");
    assert!(row("bias ").ends_with("  0.0e0  measured  reference, selected"), "{text}");
}

#[test]
fn a_nan_in_the_first_candidate_does_not_make_it_the_standard() {
    let (m, k, n) = (8, 16, 4);
    let c = candidates(programs::linear_relu(m, k, n).unwrap(), "small");
    let (w, x) = data(&c);
    // The unfused program runs first but returns a NaN where the others are finite: the bias
    // candidate, finite everywhere, is the reference; unfused is judged against it once known.
    let runtime = Faulty::new(&["small-unfused"], Fault::NanFirst);
    let report = search::search(&runtime, &c, &w, &x, &options(1), Progress::Hidden).unwrap();
    assert_eq!(report.reference, 1);
    assert_ne!(report.selected, 0, "the NaN candidate is never selected");
    let CandidateStatus::Mismatch { reference, disagreement, .. } = &report.candidates[0].status
    else {
        panic!("{:?}", report.candidates[0].status)
    };
    assert_eq!(reference, "bias");
    assert!(
        disagreement.to_string().starts_with("y[0, 0] is NaN, the reference "),
        "{disagreement}"
    );
    assert!(report.candidates[0].max_abs_diff.is_some_and(f64::is_nan));
    assert_eq!(report.candidates[2].status, CandidateStatus::Measured);
    assert_eq!(report.candidates[2].max_abs_diff, Some(0.0));

    // When every candidate has the NaN (NaN inputs, say), none is finite: the first that ran
    // is the reference and, NaN meeting NaN, they all agree.
    let all: Vec<&str> = c.iter().map(|c| c.program.label.as_str()).collect();
    let runtime = Faulty::new(&all, Fault::NanFirst);
    let report = search::search(&runtime, &c, &w, &x, &options(1), Progress::Hidden).unwrap();
    assert_eq!(report.reference, 0);
    assert_eq!(report.measured().count(), 3);
    assert!(report.candidates.iter().all(|r| r.max_abs_diff == Some(0.0)));

    // A NaN in the last candidate only: it is judged against the finite reference as before.
    let runtime = Faulty::new(&["small-fused"], Fault::NanFirst);
    let report = search::search(&runtime, &c, &w, &x, &options(1), Progress::Hidden).unwrap();
    assert_eq!(report.reference, 0);
    assert_eq!(report.candidates[2].status.word(), "mismatch");
    assert!(report.candidates[2].trials_ms.is_empty(), "not timed once known to disagree");
}

#[test]
fn a_reference_that_fails_its_trials_still_judges_the_held_candidates() {
    let (m, k, n) = (8, 16, 4);
    let c = candidates(programs::linear_relu(m, k, n).unwrap(), "small");
    let (w, x) = data(&c);
    // unfused has a NaN (held); bias, finite, becomes the reference and then fails its trials:
    // unfused must still be judged against bias, and the fused candidate wins.
    let runtime =
        Faulty::each(&[("small-unfused", Fault::NanFirst), ("small-bias", Fault::FailAfter(1))]);
    let report = search::search(&runtime, &c, &w, &x, &options(1), Progress::Hidden).unwrap();
    assert_eq!((report.reference, report.selected), (1, 2));
    let unfused = &report.candidates[0];
    assert_eq!(unfused.status.word(), "mismatch");
    assert_eq!((unfused.median_ms, unfused.trials_ms.len()), (None, 0), "a mismatch has no median");
    assert_eq!(report.candidates[1].status.word(), "failed");
    // No measured unfused candidate, so no break-even against it.
    assert!(report.unfused().is_some_and(|u| u.median_ms.is_none()));
}

#[test]
fn a_candidate_faster_with_confidence_replaces_the_pick() {
    // The cost model's pick (fused) and unfused sleep 3 ms an execute; bias, a few
    // microseconds, is faster by far in every round: the sign test switches to it.
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    assert!(c[2].picked);
    let (w, x) = data(&c);
    let runtime = Faulty::new(&["small-unfused", "small-fused"], Fault::SleepMs(3));
    let opts = SearchOptions::default();
    let report = search::search(&runtime, &c, &w, &x, &opts, Progress::Hidden).unwrap();
    check_report(&report, &c, 15);
    assert_eq!(report.selected, 1, "{report}");
    let d = &report.decision;
    assert_eq!((d.baseline, d.kind(), d.alpha_per_comparison), (2, "measured_winner", 0.005));
    let w = d.winning().unwrap();
    assert_eq!(w.label, "bias");
    // All rounds ran: bias could still win after every one of them.
    assert_eq!(report.rounds, 15);
    assert!(w.wins >= 13 && w.p_value <= 0.005 && w.median_speedup > 0.9, "{w:?}");
    let text = report.to_string();
    assert!(text.contains("\nchoice     measured winner: bias, p = "), "{text}");
}

#[test]
fn a_pick_that_no_candidate_beats_stops_the_rounds_early() {
    // The challengers sleep 2 ms an execute: slower than the pick in every round, so after the
    // third round neither can reach 13 wins of 15 and the rounds end.
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    let (w, x) = data(&c);
    let runtime = Faulty::new(&["small-unfused", "small-bias"], Fault::SleepMs(2));
    let opts = SearchOptions::default();
    let report = search::search(&runtime, &c, &w, &x, &opts, Progress::Hidden).unwrap();
    check_report(&report, &c, 15);
    assert_eq!((report.selected, report.rounds, report.planned_rounds), (2, 3, 15));
    assert_eq!(report.stopped, Some(RoundsStop::Futile));
    assert_eq!(report.decision.kind(), "kept");
    for comparison in &report.decision.comparisons {
        assert_eq!((comparison.wins, comparison.losses, comparison.p_value), (0, 3, 1.0));
    }
    let text = report.to_string();
    assert!(
        text.contains(
            ": 3 of 3 candidates measured in 3 interleaved rounds (15 planned; stopped early: no \
             candidate can still be shown faster)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "\nchoice     kept the cost model's pick (fused): no candidate faster with confidence \
             (closest: "
        ),
        "{text}"
    );
}

#[test]
fn the_budget_plans_fewer_rounds_for_a_slow_program() {
    // Every candidate sleeps 5 ms: a round takes at least 15 ms, so a 50 ms budget fits at
    // most 3 rounds of the 15.
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    let (w, x) = data(&c);
    let all: Vec<&str> = c.iter().map(|c| c.program.label.as_str()).collect();
    let runtime = Faulty::new(&all, Fault::SleepMs(5));
    let opts = SearchOptions { budget: Duration::from_millis(50), ..options(15) };
    let report = search::search(&runtime, &c, &w, &x, &opts, Progress::Hidden).unwrap();
    check_report(&report, &c, 15);
    assert!((1..=3).contains(&report.planned_rounds), "{}", report.planned_rounds);
    assert_eq!(report.rounds, report.planned_rounds);
}

#[test]
fn bad_statistics_options_are_refused() {
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    for opts in [
        SearchOptions { alpha: 0.0, ..options(1) },
        SearchOptions { alpha: 1.0, ..options(1) },
        SearchOptions { alpha: f64::NAN, ..options(1) },
        SearchOptions { min_speedup: -0.01, ..options(1) },
        SearchOptions { min_speedup: 1.0, ..options(1) },
    ] {
        assert!(matches!(run(&c, &opts), Err(SearchError::InvalidOption(_))), "{opts:?}");
    }
}

/// The CPU runtime, recording the label of every program it prepares.
#[derive(Default)]
struct Counting {
    cpu: CpuRuntime,
    prepared: std::sync::Mutex<Vec<String>>,
}

impl Counting {
    fn prepared(&self) -> Vec<String> {
        self.prepared.lock().unwrap().clone()
    }
}

impl Runtime for Counting {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn peak(&self) -> Peak {
        self.cpu.peak()
    }

    fn prepare(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<Box<dyn PreparedProgram>, RuntimeError> {
        self.prepared.lock().unwrap().push(program.label.clone());
        self.cpu.prepare(program, weights)
    }
}

/// The share rule with a run of `executes` executes and nothing spent before the search.
fn share_options(executes: u64) -> SearchOptions {
    SearchOptions {
        run: Some(search::RunPlan { executes, spent: Duration::ZERO }),
        ..SearchOptions::default()
    }
}

#[test]
fn a_run_too_short_to_pay_keeps_the_pick_and_prepares_no_challenger() {
    // One execute after the search: whatever the machine's times, two more prepares and 8
    // rounds cost more than a third of one prepare and one execute.
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    let (w, x) = data(&c);
    let runtime = Counting::default();
    let searched =
        search::search_prepared(&runtime, &c, &w, &x, &share_options(1), Progress::Hidden).unwrap();
    let report = &searched.report;
    // Only the cost model's pick was prepared, once, and it is handed over prepared.
    assert_eq!(runtime.prepared(), ["small-fused"]);
    assert_eq!(
        searched.prepared.as_ref().map(|p| p.label().to_string()).as_deref(),
        Some("small-fused")
    );
    assert!(report.too_short());
    assert_eq!((report.selected, report.reference, report.rounds), (2, 2, 0));
    assert_eq!(report.decision_kind(), "too_short");
    assert_eq!(report.decision.kind(), "kept");
    assert_eq!(report.break_even, BreakEven::Unknown);
    let p = report.payoff.as_ref().unwrap();
    assert!(!p.fits && p.needs_ms > p.budget_ms, "{p:?}");
    assert_eq!((p.run_executes, p.challengers, p.rounds, p.reuses_prepare), (1, 2, 8, true));
    assert_eq!(report.kept_prepare_ms, report.candidates[2].prepare_ms);
    for row in &report.candidates[..2] {
        assert_eq!(row.status, CandidateStatus::Skipped { limit: SearchLimit::RunTooShort });
        assert_eq!(row.prepare_ms, None);
    }
    assert_eq!(report.candidates[2].status, CandidateStatus::Measured);
    let text = report.to_string();
    assert!(text.starts_with("search     skipped: the run (1 execute of "), "{text}");
    assert!(
        text.ends_with(", 25% of the run with it); kept the cost model's pick (fused)"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
    assert_eq!(report.decision_text(), text.trim_start_matches("search     skipped: "));
    // The plain search hands nothing over, so the pick's prepare is the search's own cost.
    let report = run(&c, &share_options(1)).unwrap();
    assert!(report.too_short() && report.kept_prepare_ms.is_none());
    assert!(!report.payoff.unwrap().reuses_prepare);
}

#[test]
fn a_run_long_enough_to_pay_is_searched() {
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    let (w, x) = data(&c);
    let runtime = Counting::default();
    let opts = share_options(u64::MAX / 4);
    let searched = search::search_prepared(&runtime, &c, &w, &x, &opts, Progress::Hidden).unwrap();
    let report = &searched.report;
    check_report(report, &c, 15);
    // The pick first (measured alone before any challenger), then the others in order.
    assert_eq!(runtime.prepared(), ["small-fused", "small-unfused", "small-bias"]);
    assert!(!report.too_short() && report.payoff.as_ref().unwrap().fits);
    assert!(report.measured().count() == 3);
    // The reference is still the first candidate in list order, not the pick measured first.
    assert_eq!(report.reference, 0);
    // A useful search: at least the 8 rounds a switch needs are planned (1 s at most).
    assert!(report.planned_rounds >= 8, "{}", report.planned_rounds);
    assert!(report.budget_ms <= 1000.0);
    let selected = report.candidates[report.selected].program_label.clone();
    assert_eq!(searched.prepared.as_ref().map(|p| p.label().to_string()), Some(selected));
    // The kept program still runs.
    let mut kept = searched.prepared.unwrap();
    assert!(kept.execute(&x).is_ok());
    assert!(report.to_string().contains(", 25% of the run with it; "), "{report}");
}

#[test]
fn an_explicit_budget_searches_a_short_run() {
    let c = candidates(programs::linear_relu(8, 16, 4).unwrap(), "small");
    for opts in [
        SearchOptions { time_limit: Some(Duration::from_secs(60)), ..share_options(1) },
        SearchOptions { max_candidates: Some(3), ..share_options(1) },
        SearchOptions { trials: 2, ..SearchOptions::default() },
    ] {
        let report = run(&c, &opts).unwrap();
        assert!(report.payoff.is_none() && !report.too_short(), "{opts:?}");
        assert_eq!(report.measured().count(), 3, "{report}");
    }
    let bad = SearchOptions { share: 1.0, ..share_options(1) };
    assert!(matches!(run(&c, &bad), Err(SearchError::InvalidOption(_))));
}
