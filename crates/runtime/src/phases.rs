//! Phase timing and the phase report: where a run's time goes, and how close execution gets to
//! the hardware's peak.
//!
//! The phases are Luminal's: `graph_compile` (DSL to a planned LLIR), `search` (profiling
//! candidate programs), `prepare` (slab allocation, kernel setup, weight upload) and `execute`
//! (one or more runs). The report gives each phase's seconds and share of the total, and the
//! achieved FLOP/s of one execute against a stated peak (the roofline question: a small GEMM
//! is launch-bound and reaches a tiny fraction of peak). The achieved figure uses the median
//! execute, not the mean: the first execute touches a cold slab and cold caches, and one
//! slow run (another process, a clock change) should not move the figure.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Serialize;

/// One phase of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// DSL -> HLIR -> LLIR -> slab plan.
    GraphCompile,
    /// Preparing and profiling candidate programs.
    Search,
    /// Allocating the slab, setting up kernels, uploading weights.
    Prepare,
    /// Running the program (inputs in, outputs out); usually several times.
    Execute,
}

impl Phase {
    /// Every phase, in report order.
    pub const ALL: [Phase; 4] =
        [Phase::GraphCompile, Phase::Search, Phase::Prepare, Phase::Execute];

    /// `graph_compile`, `search`, `prepare`, `execute`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::GraphCompile => "graph_compile",
            Phase::Search => "search",
            Phase::Prepare => "prepare",
            Phase::Execute => "execute",
        }
    }
}

/// Accumulated time per phase. Record each phase as often as it runs (execute typically many
/// times); the report divides by the count where a per-run figure is wanted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseTimes {
    // Indexed by `Phase as usize`: seconds and how many times the phase ran.
    seconds: [f64; 4],
    counts: [u32; 4],
    // Every execute's seconds, in order, for the median.
    executes: Vec<f64>,
}

impl PhaseTimes {
    /// No time recorded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one run of `phase` lasting `seconds` (negative or non-finite values count as 0).
    pub fn record_seconds(&mut self, phase: Phase, seconds: f64) {
        let s = if seconds.is_finite() && seconds > 0.0 { seconds } else { 0.0 };
        self.seconds[phase as usize] += s;
        self.counts[phase as usize] += 1;
        if phase == Phase::Execute {
            self.executes.push(s);
        }
    }

    /// Adds one run of `phase` lasting `elapsed`.
    pub fn record(&mut self, phase: Phase, elapsed: Duration) {
        self.record_seconds(phase, elapsed.as_secs_f64());
    }

    /// Runs `f`, records its wall time as one run of `phase`, and returns its result.
    pub fn time<T>(&mut self, phase: Phase, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.record(phase, start.elapsed());
        out
    }

    /// Total seconds recorded for `phase`.
    pub fn seconds(&self, phase: Phase) -> f64 {
        self.seconds[phase as usize]
    }

    /// How many runs of `phase` were recorded.
    pub fn count(&self, phase: Phase) -> u32 {
        self.counts[phase as usize]
    }

    /// The median of the recorded executes, seconds (the mean of the two middle ones for an
    /// even count); `None` before the first.
    pub fn median_execute(&self) -> Option<f64> {
        crate::search::median(&self.executes)
    }

    /// The report: each phase's time and share, and the achieved FLOP/s of one execute
    /// (`flops_per_execute` FLOP in the median execute time) against `peak`.
    pub fn report(&self, flops_per_execute: u64, peak: &Peak) -> PhaseReport {
        let total: f64 = self.seconds.iter().sum();
        let phases = Phase::ALL
            .iter()
            .map(|&p| PhaseRow {
                phase: p,
                seconds: self.seconds(p),
                runs: self.count(p),
                share: if total > 0.0 { self.seconds(p) / total } else { 0.0 },
            })
            .collect();
        let runs = self.count(Phase::Execute);
        let achieved = self.median_execute().map(|median| {
            let mean = self.seconds(Phase::Execute) / f64::from(runs);
            Achieved { mean_seconds: mean, ..Achieved::new(flops_per_execute, median, peak) }
        });
        PhaseReport { phases, total_seconds: total, achieved }
    }
}

/// A stated peak throughput and where the number comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Peak {
    /// Peak in FLOP/s.
    pub flops: f64,
    /// How the figure was obtained (e.g. `2 cores x 2.30 GHz (/proc/cpuinfo cpu MHz, ...) x 2
    /// FMA units (assumed) x 16 f32 lanes (AVX-512F) x 2 FLOP = 64 FLOP/cycle per core`).
    pub basis: String,
}

/// Achieved throughput of one execute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Achieved {
    /// FLOP of one execute.
    pub flops: u64,
    /// Seconds of one execute the figures use: the median execute in a [`PhaseReport`].
    pub seconds: f64,
    /// Mean seconds of one execute (the first, cold one included), for comparison; equal to
    /// `seconds` when built by [`Achieved::new`].
    pub mean_seconds: f64,
    /// `flops / seconds`, in FLOP/s (0 when no time was measured).
    pub flops_per_s: f64,
    /// The stated peak, FLOP/s.
    pub peak_flops_per_s: f64,
    /// `flops_per_s / peak_flops_per_s`, in [0, ...) (0 when the peak is not positive).
    pub fraction_of_peak: f64,
}

impl Achieved {
    /// `flops` FLOP in `seconds` against `peak`. Golden: 2·64·64·256 FLOP in
    /// 10 us at 40 TFLOP/s is 0.21 TFLOP/s, 0.52% of peak.
    pub fn new(flops: u64, seconds: f64, peak: &Peak) -> Self {
        let flops_per_s = achieved_flops(flops, seconds);
        let fraction_of_peak = if peak.flops > 0.0 { flops_per_s / peak.flops } else { 0.0 };
        Self {
            flops,
            seconds,
            mean_seconds: seconds,
            flops_per_s,
            peak_flops_per_s: peak.flops,
            fraction_of_peak,
        }
    }
}

/// FLOP/s of `flops` floating-point operations done in `seconds` (0 when `seconds` is not
/// positive).
pub fn achieved_flops(flops: u64, seconds: f64) -> f64 {
    if seconds > 0.0 { flops as f64 / seconds } else { 0.0 }
}

const FLOP_UNITS: [(f64, &str); 5] =
    [(1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1e3, "kFLOP/s"), (1.0, "FLOP/s")];

/// The largest unit (scale, name) in which `flops_per_s` is at least 1 (FLOP/s below 1).
fn flop_unit(flops_per_s: f64) -> (f64, &'static str) {
    FLOP_UNITS.iter().copied().find(|&(scale, _)| flops_per_s >= scale).unwrap_or((1.0, "FLOP/s"))
}

/// A FLOP/s figure in the largest unit that keeps it at least 1, two decimals:
/// `25.00 TFLOP/s`, `96.00 GFLOP/s`, `512.00 MFLOP/s`.
pub fn format_flops(flops_per_s: f64) -> String {
    format_flops_as(flops_per_s, flops_per_s)
}

/// `flops_per_s` in the unit [`format_flops`] would pick for `reference`, so an achieved
/// figure reads in its peak's unit: 0.21 TFLOP/s of a 40 TFLOP/s peak.
pub fn format_flops_as(flops_per_s: f64, reference: f64) -> String {
    let (scale, unit) = flop_unit(reference);
    format!("{:.2} {unit}", flops_per_s / scale)
}

/// A share as a percentage with one decimal: `85.7%`.
pub fn format_share(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseRow {
    /// The phase.
    pub phase: Phase,
    /// Total seconds over all its runs.
    pub seconds: f64,
    /// How many times it ran.
    pub runs: u32,
    /// Fraction of the run's total time, in [0, 1].
    pub share: f64,
}

/// Where a run's time went, and the throughput of one execute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    /// One row per phase, in [`Phase::ALL`] order (phases that did not run have 0 seconds).
    pub phases: Vec<PhaseRow>,
    /// Sum of all phases, seconds.
    pub total_seconds: f64,
    /// Achieved FLOP/s of one execute (its median time); `None` when nothing executed.
    pub achieved: Option<Achieved>,
}

impl PhaseReport {
    /// The row of `phase`.
    pub fn row(&self, phase: Phase) -> Option<&PhaseRow> {
        self.phases.iter().find(|r| r.phase == phase)
    }
}

/// Seconds with a unit that keeps 3-4 significant digits: `3.000 s`, `0.500 ms`, `10.0 us`.
pub fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

impl fmt::Display for PhaseReport {
    /// The phase table, then the throughput line:
    ///
    /// ```text
    /// phase           runs        time   share
    /// graph_compile      1  400.000 ms   11.4%
    /// ...
    /// total                    3.501 s
    /// execute: 4.19 GFLOP/s achieved (2097152 FLOP in a median 500.0 us; mean 500.0 us), 0.01% of 40.00 TFLOP/s peak
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<14} {:>5} {:>11} {:>7}", "phase", "runs", "time", "share")?;
        for r in &self.phases {
            writeln!(
                f,
                "{:<14} {:>5} {:>11} {:>7}",
                r.phase.name(),
                r.runs,
                format_seconds(r.seconds),
                format_share(r.share)
            )?;
        }
        write!(f, "{:<14} {:>5} {:>11}", "total", "", format_seconds(self.total_seconds))?;
        if let Some(a) = &self.achieved {
            write!(
                f,
                "\nexecute: {} achieved ({} FLOP in a median {}; mean {}), {:.2}% of {} peak",
                format_flops(a.flops_per_s),
                a.flops,
                format_seconds(a.seconds),
                format_seconds(a.mean_seconds),
                a.fraction_of_peak * 100.0,
                format_flops(a.peak_flops_per_s)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden_times() -> PhaseTimes {
        let mut t = PhaseTimes::new();
        t.record_seconds(Phase::GraphCompile, 0.4);
        t.record_seconds(Phase::Search, 3.0);
        t.record_seconds(Phase::Prepare, 0.1);
        t.record_seconds(Phase::Execute, 0.5e-3);
        t.record_seconds(Phase::Execute, 0.5e-3);
        t
    }

    fn peak_40t() -> Peak {
        Peak { flops: 40e12, basis: "stated".into() }
    }

    // Golden: 0.4 s, 3.0 s, 0.1 s and two executes of 0.5 ms: search is 85.7%.
    #[test]
    fn golden_search_share() {
        let report = golden_times().report(0, &peak_40t());
        assert!((report.total_seconds - 3.501).abs() < 1e-12);
        let search = report.row(Phase::Search).unwrap();
        assert!((search.share - 3.0 / 3.501).abs() < 1e-12);
        assert_eq!(format_share(search.share), "85.7%");
        let exec = report.row(Phase::Execute).unwrap();
        assert_eq!(exec.runs, 2);
        assert!((exec.seconds - 1e-3).abs() < 1e-15);
        assert_eq!(format_share(report.row(Phase::GraphCompile).unwrap().share), "11.4%");
        let shares: f64 = report.phases.iter().map(|r| r.share).sum();
        assert!((shares - 1.0).abs() < 1e-12);
    }

    // Golden: achieved(2*64*64*256 FLOP, 10 us, peak 40 TFLOP/s) = 0.21 TFLOP/s, 0.52%.
    #[test]
    fn golden_achieved() {
        let flop = 2 * 64 * 64 * 256;
        assert_eq!(flop, 2_097_152);
        let a = Achieved::new(flop, 10e-6, &peak_40t());
        assert!((a.flops_per_s - 2.097_152e11).abs() < 1.0);
        assert_eq!(format_flops_as(a.flops_per_s, a.peak_flops_per_s), "0.21 TFLOP/s");
        assert_eq!(format_flops(a.flops_per_s), "209.72 GFLOP/s");
        assert!((a.fraction_of_peak - 0.005_242_88).abs() < 1e-12);
        assert_eq!(format!("{:.2}%", a.fraction_of_peak * 100.0), "0.52%");
    }

    // A cold first execute moves the mean, not the median: 2 ms then 0.5, 0.5 ms is a median
    // of 0.5 ms (6 GFLOP/s for 3 MFLOP) and a mean of 1 ms.
    #[test]
    fn report_uses_median_execute() {
        let mut t = PhaseTimes::new();
        for s in [2.0e-3, 0.5e-3, 0.5e-3] {
            t.record_seconds(Phase::Execute, s);
        }
        let r = t.report(3_000_000, &peak_40t());
        let a = r.achieved.unwrap();
        assert!((a.seconds - 0.5e-3).abs() < 1e-15);
        assert!((a.mean_seconds - 1e-3).abs() < 1e-15);
        assert!((a.flops_per_s - 6e9).abs() < 1e-3);
        let median = crate::search::median;
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&[4.0]), Some(4.0));
    }

    #[test]
    fn golden_table_text() {
        let text = golden_times().report(2_097_152, &peak_40t()).to_string();
        assert_eq!(
            text,
            "phase           runs        time   share\n\
             graph_compile      1  400.000 ms   11.4%\n\
             search             1     3.000 s   85.7%\n\
             prepare            1  100.000 ms    2.9%\n\
             execute            2    1.000 ms    0.0%\n\
             total                    3.501 s\n\
             execute: 4.19 GFLOP/s achieved (2097152 FLOP in a median 500.0 us; mean 500.0 us), 0.01% of 40.00 TFLOP/s peak"
        );
    }

    #[test]
    fn empty_and_degenerate() {
        let r = PhaseTimes::new().report(10, &peak_40t());
        assert_eq!(r.total_seconds, 0.0);
        assert!(r.achieved.is_none());
        assert!(r.phases.iter().all(|p| p.share == 0.0));
        assert_eq!(achieved_flops(10, 0.0), 0.0);
        let mut t = PhaseTimes::new();
        t.record_seconds(Phase::Execute, f64::NAN);
        t.record_seconds(Phase::Execute, -1.0);
        assert_eq!(t.seconds(Phase::Execute), 0.0);
        assert_eq!(t.count(Phase::Execute), 2);
        let a = Achieved::new(10, 1.0, &Peak { flops: 0.0, basis: String::new() });
        assert_eq!(a.fraction_of_peak, 0.0);
    }

    #[test]
    fn flops_units() {
        assert_eq!(format_flops(2.5e13), "25.00 TFLOP/s");
        assert_eq!(format_flops(9.6e10), "96.00 GFLOP/s");
        assert_eq!(format_flops(5.12e8), "512.00 MFLOP/s");
        assert_eq!(format_flops(0.5), "0.50 FLOP/s");
        assert_eq!(format_flops_as(6.97e10, 1.28e11), "69.70 GFLOP/s");
        assert_eq!(format_flops(5.12e6), "5.12 MFLOP/s");
        assert_eq!(format_flops(12.0), "12.00 FLOP/s");
    }
}
