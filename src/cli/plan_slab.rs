//! `lumen plan-slab FILE`: plan a JSON problem or a MiniMalloc CSV (SPEC section 2).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use lumen_planner::{ProblemError, SlabAlgorithm, SlabPlan, SlabProblem, layout_svg_with_names};
use serde_json::{Map, Value, json};

/// Arguments of `lumen plan-slab`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The problem: the planner's JSON form, or a MiniMalloc CSV (`.csv`, `id,lower,upper,size`).
    file: PathBuf,
    /// Print one JSON object (offsets, totals) instead of the table.
    #[arg(long)]
    json: bool,
    /// Largest slab in bytes; overrides the file's `capacity` (default: unbounded).
    #[arg(long, value_name = "BYTES")]
    capacity: Option<usize>,
    /// Offset and size granularity in bytes; overrides the file's `alignment` (default 256).
    #[arg(long, value_name = "BYTES")]
    alignment: Option<usize>,
    /// Placement algorithm; overrides the file's `algorithm` (default first-fit).
    #[arg(long, value_name = "NAME", value_parser = parse_algorithm)]
    algorithm: Option<SlabAlgorithm>,
    /// Also draw the layout as an SVG picture (written atomically).
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
}

fn parse_algorithm(name: &str) -> Result<SlabAlgorithm, String> {
    SlabAlgorithm::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = SlabAlgorithm::ALL.iter().map(|a| a.name()).collect();
        format!("unknown slab algorithm {name:?} (known: {})", known.join(", "))
    })
}

/// Runs `lumen plan-slab`: loads, applies the overrides, plans, optionally writes the SVG, prints.
///
/// # Errors
/// An unreadable or malformed file, any planner error (with the file name in front), or a
/// failure to write the SVG; nothing is printed and no SVG is left behind in those cases.
pub fn run(args: Args) -> anyhow::Result<()> {
    let file = args.file.display().to_string();
    let mut problem = SlabProblem::load(&args.file).map_err(|e| match e {
        ProblemError::Io { .. } => anyhow!(e),
        other => anyhow!("{file}: {other}"),
    })?;
    if let Some(capacity) = args.capacity {
        problem.options.capacity = Some(capacity);
    }
    if let Some(alignment) = args.alignment {
        problem.options.alignment = alignment;
    }
    if let Some(algorithm) = args.algorithm {
        problem.options.algorithm = algorithm;
    }
    let plan = problem.plan().map_err(|e| anyhow!("{file}: {e}"))?;

    if let Some(out) = &args.svg {
        let svg = layout_svg_with_names(&problem.dag, &problem.buffers, &plan, |n| {
            problem.node_name(n).to_string()
        });
        write_atomically(out, svg.as_bytes())
            .with_context(|| format!("cannot write {}", out.display()))?;
    }

    if args.json {
        let text = serde_json::to_string_pretty(&json_report(&problem, &plan))?;
        println!("{text}");
    } else {
        print!("{}", table(&file, &problem, &plan));
    }
    Ok(())
}

/// The `--json` object: SPEC section 2's keys first, then the options and per-buffer sizes.
fn json_report(problem: &SlabProblem, plan: &SlabPlan) -> Value {
    let mut offsets = Map::new();
    let mut reserved = Map::new();
    for ((buf, &o), &r) in problem.buffers.iter().zip(&plan.offsets).zip(&plan.reserved) {
        offsets.insert(buf.id.clone(), json!(o));
        reserved.insert(buf.id.clone(), json!(r));
    }
    json!({
        "offsets": offsets,
        "slab_bytes": plan.slab_bytes,
        "naive_bytes": plan.naive_bytes,
        "lower_bound": plan.lower_bound,
        "ratio": ratio(plan).map(|r| (r * 1e6).round() / 1e6),
        "reserved": reserved,
        "buffers": problem.buffers.len(),
        "nodes": problem.dag.node_count(),
        "alignment": problem.options.alignment,
        "capacity": problem.options.capacity,
        "algorithm": problem.options.algorithm.name(),
    })
}

/// slab_bytes / lower_bound, or `None` when there is nothing to place.
fn ratio(plan: &SlabPlan) -> Option<f64> {
    (plan.lower_bound > 0).then(|| plan.slab_bytes as f64 / plan.lower_bound as f64)
}

/// The readable report: one row per buffer in request order, then the totals.
fn table(file: &str, problem: &SlabProblem, plan: &SlabPlan) -> String {
    let o = &problem.options;
    let capacity = o.capacity.map_or("unbounded".to_string(), |c| format!("{} bytes", group(c)));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{file}: {} buffers over {} DAG nodes, {}, alignment {} bytes, capacity {capacity}",
        problem.buffers.len(),
        problem.dag.node_count(),
        o.algorithm,
        o.alignment,
    );
    let id_w = problem.buffers.iter().map(|b| b.id.chars().count()).max().unwrap_or(0).max(2);
    let num_w = group(plan.slab_bytes.max(plan.naive_bytes)).len().max(8);
    let _ = writeln!(
        s,
        "\n{:<id_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}",
        "id", "bytes", "reserved", "offset", "end"
    );
    for ((buf, &off), &res) in problem.buffers.iter().zip(&plan.offsets).zip(&plan.reserved) {
        let _ = writeln!(
            s,
            "{:<id_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}",
            buf.id,
            group(buf.bytes),
            group(res),
            group(off),
            group(off.saturating_add(res)),
        );
    }
    let saved = plan.naive_bytes.saturating_sub(plan.slab_bytes);
    let saved_pct = if plan.naive_bytes > 0 {
        format!(" ({:.1}% of naive)", 100.0 * saved as f64 / plan.naive_bytes as f64)
    } else {
        String::new()
    };
    let _ = writeln!(s);
    let _ = writeln!(s, "slab_bytes          {:>num_w$}", group(plan.slab_bytes));
    let _ = writeln!(s, "naive_bytes         {:>num_w$}", group(plan.naive_bytes));
    let _ = writeln!(s, "lower_bound         {:>num_w$}", group(plan.lower_bound));
    let _ = writeln!(
        s,
        "slab / lower_bound  {:>num_w$}",
        ratio(plan).map_or("-".to_string(), |r| format!("{r:.3}"))
    );
    let _ = writeln!(s, "reuse saves         {:>num_w$}{saved_pct}", group(saved));
    s
}

/// `1196288` -> `1,196,288`.
fn group(v: usize) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`, so readers
/// see the old file or the whole new one, never a half-written one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
