//! The `lumen compare` report: the candidates side by side, the cost model's pick, and what
//! fusion changes against the unfused program (slab bytes, launches, DRAM bytes).
//!
//! Deterministic: nothing here reads a clock or iterates a hash map, so the text diffs cleanly
//! and is pinned by a snapshot.
//!
//! Refused candidates (the planner found no placement within `capacity`) are listed after the
//! table, and the summary line says why a figure is missing: the unfused baseline refused, every
//! fused candidate refused, or no fused program at all. An [`Exploration`] with no candidate
//! (every one refused, which `lumen compare` builds to list them before it fails) is reported
//! too.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::Exploration;
use super::candidates::Candidate;
use crate::error::CompileError;
use crate::llir::LlirOp;
use lumen_planner::PlanError;

/// The fully fused candidate (or the pick, when there is no `fused`) against `unfused`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The fused side's label (`fused`, or the pick's).
    pub fused: String,
    /// Slab bytes of the unfused candidate.
    pub unfused_slab_bytes: usize,
    /// Slab bytes of the fused side.
    pub fused_slab_bytes: usize,
    /// Launches the fused side saves (negative: it launches more).
    pub launches_saved: i64,
    /// DRAM bytes per execute the fused side saves (negative: it moves more).
    pub dram_bytes_saved: i64,
}

impl Difference {
    /// How the fused slab compares: `smaller`, `equal` or `larger`.
    pub fn slab(&self) -> &'static str {
        match self.fused_slab_bytes.cmp(&self.unfused_slab_bytes) {
            Ordering::Less => "smaller",
            Ordering::Equal => "equal",
            Ordering::Greater => "larger",
        }
    }

    /// Slab bytes the fused side saves (negative: it needs more).
    pub fn slab_bytes_saved(&self) -> i64 {
        signed(self.unfused_slab_bytes) - signed(self.fused_slab_bytes)
    }

    /// One line: `fused vs unfused: slab equal (1,196,288 bytes), 2 launches saved, 65,536 DRAM
    /// bytes saved`.
    pub fn line(&self) -> String {
        let slab = match self.slab() {
            "equal" => format!("slab equal ({} bytes)", group(self.fused_slab_bytes)),
            word => format!(
                "slab {word} by {} bytes ({} vs {})",
                group(self.slab_bytes_saved().unsigned_abs() as usize),
                group(self.fused_slab_bytes),
                group(self.unfused_slab_bytes)
            ),
        };
        format!(
            "{} vs unfused: {slab}, {}, {}",
            self.fused,
            saved(self.launches_saved, "launch", "launches"),
            saved(self.dram_bytes_saved, "DRAM byte", "DRAM bytes")
        )
    }
}

fn signed(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn saved(v: i64, one: &str, many: &str) -> String {
    let n = group(v.unsigned_abs() as usize);
    let unit = if v.unsigned_abs() == 1 { one } else { many };
    if v >= 0 { format!("{n} {unit} saved") } else { format!("{n} {unit} more") }
}

/// The fused-vs-unfused difference, or `None` when the unfused program was refused by the
/// planner or nothing was fused (only one candidate).
pub fn difference(e: &Exploration) -> Option<Difference> {
    let unfused = e.get("unfused")?;
    let fused = e.get("fused").or_else(|| e.picked()).filter(|c| c.label != "unfused")?;
    let (u, f) = (&unfused.program.figures, &fused.program.figures);
    Some(Difference {
        fused: fused.label.clone(),
        unfused_slab_bytes: u.slab_bytes,
        fused_slab_bytes: f.slab_bytes,
        launches_saved: signed(u.launches) - signed(f.launches),
        dram_bytes_saved: signed(u.dram_bytes) - signed(f.dram_bytes),
    })
}

/// ` at capacity 100,000,000 bytes` when a refusal is the planner's capacity error, else
/// ` by the planner`.
fn refused_how(err: &CompileError) -> String {
    match err {
        CompileError::Plan(PlanError::CapacityExceeded { capacity, .. }) => {
            format!(" at capacity {} bytes", group(*capacity))
        }
        _ => " by the planner".to_string(),
    }
}

/// The line in place of [`Difference::line`], or `None` when there is a difference to show.
/// Says which side is missing and why: every candidate refused, the unfused baseline refused
/// (at the capacity, when that is the reason), every fused candidate refused, or no fused
/// program in the e-graph at all.
pub fn no_difference(e: &Exploration) -> Option<String> {
    if difference(e).is_some() {
        return None;
    }
    let refused = |label: &str| e.refused.iter().find(|(l, _)| l == label).map(|(_, err)| err);
    let line = if e.candidates.is_empty() {
        let how = e.refused.first().map(|(_, err)| refused_how(err)).unwrap_or_default();
        format!("nothing to compare: every candidate was refused{how}")
    } else if let Some(err) = refused("unfused") {
        format!("nothing to compare against: the unfused baseline was refused{}", refused_how(err))
    } else if let Some((_, err)) = e.refused.first() {
        format!("nothing to compare: every fused candidate was refused{}", refused_how(err))
    } else {
        "nothing to compare: the e-graph holds no fused program".to_string()
    };
    Some(line)
}

/// The summary line: [`Difference::line`], or [`no_difference`]'s reason.
pub fn summary(e: &Exploration) -> String {
    match difference(e) {
        Some(d) => d.line(),
        None => no_difference(e).unwrap_or_default(),
    }
}

/// The epilogue of every `lt_matmul` of a candidate, in LLIR order, runs of one epilogue
/// counted: `RELU_BIAS x2, BIAS` (a deep MLP stays one short line).
pub fn epilogues(c: &Candidate) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for n in &c.program.llir.nodes {
        if let LlirOp::LtMatmul { epilogue, .. } = n.op {
            match runs.last_mut() {
                Some((name, count)) if *name == epilogue.name() => *count += 1,
                _ => runs.push((epilogue.name(), 1)),
            }
        }
    }
    if runs.is_empty() {
        return "-".to_string();
    }
    let words: Vec<String> = runs
        .into_iter()
        .map(|(name, count)| if count == 1 { name.to_string() } else { format!("{name} x{count}") })
        .collect();
    words.join(", ")
}

/// Digit grouping for the tables (`1196288` -> `1,196,288`): the planner's, so every table
/// lumen prints groups numbers the same way.
pub use lumen_planner::svg::group;

/// The readable report: a header with the e-graph's size, one row per candidate (nodes,
/// launches, buffers, slab_bytes, naive_bytes, lower_bound, dram_bytes in bytes, cost in
/// launch-equivalent bytes, `*` on the pick, the matmuls' epilogues), the refused candidates,
/// the fused-vs-unfused line (or why there is none, [`summary`]) and the pick. Grouped digits; no
/// timings. With no candidate left (all refused) the table is left out.
pub fn compare_text(e: &Exploration) -> String {
    let mut s = String::new();
    let sat = &e.saturation;
    let _ = writeln!(s, "# lumen compare: {}", e.name);
    let _ = writeln!(
        s,
        "# e-graph: {} e-nodes, {} e-classes after {} iterations ({})",
        sat.egraph_nodes, sat.egraph_classes, sat.iterations, sat.stop
    );
    let header = [
        "candidate",
        "nodes",
        "launches",
        "buffers",
        "slab_bytes",
        "naive_bytes",
        "lower_bound",
        "dram_bytes",
        "cost",
        "pick",
    ];
    let rows: Vec<[String; 10]> = e
        .candidates
        .iter()
        .map(|c| {
            let f = &c.program.figures;
            [
                c.label.clone(),
                group(f.nodes),
                group(f.launches),
                group(c.program.llir.buffers.len()),
                group(f.slab_bytes),
                group(f.naive_bytes),
                group(f.lower_bound),
                group(f.dram_bytes),
                group(usize::try_from(c.cost).unwrap_or(usize::MAX)),
                if c.picked { "*".to_string() } else { String::new() },
            ]
        })
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&width).enumerate() {
            if i == 0 {
                let _ = write!(l, "{cell:<w$}");
            } else if i + 1 == cells.len() {
                let _ = write!(l, "  {cell:<w$}");
            } else {
                let _ = write!(l, "  {cell:>w$}");
            }
        }
        l
    };
    if !rows.is_empty() {
        let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
        let _ = writeln!(s, "{}  epilogues", line(&head));
    }
    for (row, c) in rows.iter().zip(&e.candidates) {
        let _ = writeln!(s, "{}  {}", line(row), epilogues(c));
    }
    for (label, err) in &e.refused {
        let _ = writeln!(s, "{label}: refused by the planner: {err}");
    }
    let _ = writeln!(s, "{}", summary(e));
    if let Some(p) = e.picked() {
        let _ = writeln!(s, "cost model picks: {} ({}-{})", p.label, e.name, p.label);
    }
    s
}

/// The JSON of `lumen compare --json`: `{"program", "egraph": {"nodes", "classes",
/// "iterations", "stop"}, "candidates": [{"label", "program_label", "nodes", "launches",
/// "buffers", "slab_bytes", "naive_bytes", "lower_bound", "dram_bytes", "flops", "cost",
/// "epilogues": [...], "picked"}], "pick", "fused_vs_unfused": {"fused", "slab",
/// "slab_bytes_saved", "launches_saved", "dram_bytes_saved"} or null, "summary" (the text's
/// summary line: the difference, or why there is none), "refused": [{"label", "error"}]}`.
/// Sizes in bytes; cost in launch-equivalent bytes. `candidates` is empty and `pick` null when
/// every candidate was refused.
pub fn compare_json(e: &Exploration) -> Value {
    let candidates: Vec<Value> = e
        .candidates
        .iter()
        .map(|c| {
            let f = &c.program.figures;
            let epis: Vec<&str> = c
                .program
                .llir
                .nodes
                .iter()
                .filter_map(|n| match n.op {
                    LlirOp::LtMatmul { epilogue, .. } => Some(epilogue.name()),
                    _ => None,
                })
                .collect();
            json!({
                "label": c.label,
                "program_label": c.program.label,
                "nodes": f.nodes,
                "launches": f.launches,
                "buffers": c.program.llir.buffers.len(),
                "slab_bytes": f.slab_bytes,
                "naive_bytes": f.naive_bytes,
                "lower_bound": f.lower_bound,
                "dram_bytes": f.dram_bytes,
                "flops": f.flops,
                "cost": c.cost,
                "epilogues": epis,
                "picked": c.picked,
            })
        })
        .collect();
    let diff = difference(e).map(|d| {
        json!({
            "fused": d.fused,
            "slab": d.slab(),
            "slab_bytes_saved": d.slab_bytes_saved(),
            "launches_saved": d.launches_saved,
            "dram_bytes_saved": d.dram_bytes_saved,
        })
    });
    let refused: Vec<Value> = e
        .refused
        .iter()
        .map(|(label, err)| json!({"label": label, "error": err.to_string()}))
        .collect();
    json!({
        "program": e.name,
        "egraph": {
            "nodes": e.saturation.egraph_nodes,
            "classes": e.saturation.egraph_classes,
            "iterations": e.saturation.iterations,
            "stop": e.saturation.stop.to_string(),
        },
        "candidates": candidates,
        "pick": e.picked().map(|c| c.label.clone()),
        "fused_vs_unfused": diff,
        "summary": summary(e),
        "refused": refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::{FusionConfig, explore};
    use crate::options::CompileOptions;
    use crate::programs;

    fn linear_relu(m: usize, k: usize, n: usize, capacity: Option<usize>) -> Exploration {
        let hlir = programs::linear_relu(m, k, n).unwrap().hlir();
        let options = CompileOptions { capacity, ..CompileOptions::default() };
        explore(&hlir, "linear-relu", &options, &FusionConfig::default()).unwrap()
    }

    fn over(capacity: usize) -> CompileError {
        CompileError::Plan(PlanError::CapacityExceeded { capacity, index: 0, bytes: 65_536 })
    }

    #[test]
    fn the_summary_says_which_side_is_missing() {
        let all = linear_relu(64, 256, 64, None);
        assert_eq!(no_difference(&all), None);
        assert_eq!(
            summary(&all),
            "fused vs unfused: slab equal (1,196,288 bytes), 2 launches saved, 65,536 DRAM bytes \
             saved"
        );

        // Only the fused plan fits: the baseline is what is missing, not a fused program.
        let some = linear_relu(4096, 64, 4096, Some(100_000_000));
        assert_eq!(
            summary(&some),
            "nothing to compare against: the unfused baseline was refused at capacity \
             100,000,000 bytes"
        );
        let text = compare_text(&some);
        assert!(!text.contains("holds no fused program"), "{text}");
        assert!(text.contains("\ncost model picks: fused (linear-relu-fused)\n"), "{text}");
        assert_eq!(compare_json(&some)["summary"], summary(&some));

        // Only the unfused plan fits.
        let mut only_unfused = all.clone();
        only_unfused.candidates.retain(|c| c.label == "unfused");
        only_unfused.pick = 0;
        only_unfused.refused = vec![("bias".into(), over(1_000)), ("fused".into(), over(1_000))];
        assert_eq!(
            summary(&only_unfused),
            "nothing to compare: every fused candidate was refused at capacity 1,000 bytes"
        );
    }

    #[test]
    fn every_candidate_refused_lists_them_without_a_table() {
        let mut none = linear_relu(64, 256, 64, None);
        none.refused = none.candidates.iter().map(|c| (c.label.clone(), over(1_000))).collect();
        none.candidates.clear();
        assert_eq!(
            compare_text(&none),
            "# lumen compare: linear-relu\n\
             # e-graph: 10 e-nodes, 7 e-classes after 3 iterations (saturated)\n\
             unfused: refused by the planner: planning failed: slab capacity 1000 exceeded \
             while placing request 0 (65536 bytes)\n\
             bias: refused by the planner: planning failed: slab capacity 1000 exceeded \
             while placing request 0 (65536 bytes)\n\
             fused: refused by the planner: planning failed: slab capacity 1000 exceeded \
             while placing request 0 (65536 bytes)\n\
             nothing to compare: every candidate was refused at capacity 1,000 bytes\n"
        );
        let v = compare_json(&none);
        assert_eq!(v["candidates"], json!([]));
        assert_eq!(v["pick"], Value::Null);
        assert_eq!(v["refused"].as_array().map(Vec::len), Some(3));
        assert_eq!(
            v["summary"],
            "nothing to compare: every candidate was refused at capacity 1,000 bytes"
        );
    }
}
