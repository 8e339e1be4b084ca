//! Equality saturation: the rewrite rules run over a loaded e-graph within [`Limits`].

use std::fmt;
use std::time::Duration;

use egg::{BackoffScheduler, Runner, StopReason};

use super::config::Limits;
use super::egraph;
use super::rules;

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
