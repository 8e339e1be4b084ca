//! `lumen plan-slab FILE`: plan a JSON problem or a MiniMalloc CSV.
//! `lumen plan-slab --compare FILE...`: every algorithm on every file, slab / lower_bound and
//! time, with the geometric mean per algorithm.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use lumen_planner::svg::group;
use lumen_planner::{
    PlanError, ProblemError, SlabAlgorithm, SlabOptions, SlabPlan, SlabProblem,
    layout_svg_with_names, plan_slab, verify,
};
use serde_json::{Map, Value, json};

use super::usage::UsageError;
use super::{errors, out};

/// Arguments of `lumen plan-slab`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The problem: the planner's JSON form, or a MiniMalloc CSV (`.csv`, `id,lower,upper,size`).
    #[arg(required_unless_present = "compare")]
    file: Option<PathBuf>,
    /// Print one JSON object (offsets, totals) instead of the table.
    #[arg(long)]
    json: bool,
    /// Largest slab in bytes; overrides the file's `capacity` (default: unbounded).
    #[arg(long, value_name = "BYTES")]
    capacity: Option<usize>,
    /// Offset and size granularity in bytes; overrides the file's `alignment` (default 256).
    #[arg(long, value_name = "BYTES")]
    alignment: Option<usize>,
    /// Placement algorithm; overrides the file's `algorithm` (default first-fit; `best` is the
    /// best lumen has).
    #[arg(long, value_name = "NAME", value_parser = algorithm_parser())]
    algorithm: Option<SlabAlgorithm>,
    /// Wall-clock limit in seconds for `best`'s search, instead of its fixed work budget: an
    /// upper bound (the search often stops sooner; a larger budget need not give a smaller
    /// slab), and the plan then depends on the machine's speed. Only `best` searches: planning one file
    /// with another algorithm (from --algorithm or the file) is an error; --compare gives it to
    /// `best`.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    time_budget: Option<Duration>,
    /// Run every algorithm on each FILE and print slab / lower_bound and the time per
    /// algorithm and file, with the geometric mean (`--json`: one object).
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["file", "svg", "algorithm"])]
    compare: Vec<PathBuf>,
    /// Also draw the layout as an SVG picture (written atomically).
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
}

/// `--algorithm`: the names of `SlabAlgorithm::ALL`, listed with a line each in `--help`.
/// Shared by every subcommand that plans a slab.
pub(crate) fn algorithm_parser() -> impl clap::builder::TypedValueParser<Value = SlabAlgorithm> {
    use clap::builder::TypedValueParser as _;
    let names = SlabAlgorithm::ALL
        .iter()
        .map(|a| clap::builder::PossibleValue::new(a.name()).help(a.summary()));
    clap::builder::PossibleValuesParser::new(names).try_map(|name: String| {
        SlabAlgorithm::from_name(&name).ok_or_else(|| format!("unknown slab algorithm {name:?}"))
    })
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.parse().map_err(|_| format!("not a number of seconds: {text:?}"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("not a usable duration: {text:?}"))
}

/// Runs `lumen plan-slab`: loads, applies the overrides, plans, optionally writes the SVG, prints.
///
/// # Errors
/// An unreadable or malformed file, any planner error (with the file name in front), or a
/// failure to write the SVG; nothing is printed and no SVG is left behind in those cases. A
/// [`UsageError`] (status 2) for `--time-budget` when the file is planned with an algorithm
/// other than `best`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.compare.is_empty() {
        return compare(&args);
    }
    let Some(path) = &args.file else {
        return Err(UsageError::new("no problem file given").into());
    };
    let file = path.display().to_string();
    if let Some(out) = &args.svg {
        check_svg_target(out, path)?;
    }
    let mut problem = load(path)?;
    if let Some(capacity) = args.capacity {
        problem.options.capacity = Some(capacity);
    }
    if let Some(alignment) = args.alignment {
        problem.options.alignment = alignment;
    }
    if let Some(algorithm) = args.algorithm {
        problem.options.algorithm = algorithm;
    }
    if args.time_budget.is_some() {
        // The greedy algorithms would ignore it; a limit that does nothing is refused instead.
        if problem.options.algorithm != SlabAlgorithm::Best {
            return Err(UsageError::new(format!(
                "--time-budget applies to the best algorithm only, and {file} is planned with \
                 {} (add --algorithm best)",
                problem.options.algorithm
            ))
            .into());
        }
        problem.options.time_budget = args.time_budget;
    }
    let plan = problem.plan().map_err(|e| anyhow!("{file}: {}", errors::message(&e)))?;

    if let Some(out) = &args.svg {
        let svg = layout_svg_with_names(&problem.dag, &problem.buffers, &plan, |n| {
            problem.node_name(n).to_string()
        });
        write_atomically(out, svg.as_bytes())
            .with_context(|| format!("cannot write {}", out.display()))?;
    }

    if args.json {
        out::print_json(&json_report(&problem, &plan))
    } else {
        Ok(out::print(&table(&file, &problem, &plan))?)
    }
}

fn load(path: &Path) -> anyhow::Result<SlabProblem> {
    SlabProblem::load(path).map_err(|e| match e {
        ProblemError::Io { .. } => anyhow!(e),
        other => anyhow!("{}: {}", path.display(), errors::message(&other)),
    })
}

/// One algorithm on one file: slab and lower bound (bytes) and planning time (seconds), or the
/// capacity error when the algorithm found no placement within the capacity.
struct Cell {
    slab_bytes: usize,
    lower_bound: usize,
    seconds: f64,
    refused: Option<String>,
}

/// `--compare`: every algorithm on every file (with the file's own capacity and alignment and
/// the command's overrides), each plan checked by `verify`. An algorithm that finds no
/// placement within the capacity is a `refused` cell (one algorithm's failure is a result of
/// the comparison: `best` may fit where first fit does not); a file that no algorithm fits
/// makes the command fail after the table, as `lumen compare` does when no candidate fits.
fn compare(args: &Args) -> anyhow::Result<()> {
    let mut rows: Vec<(String, Vec<Cell>)> = Vec::new();
    for path in &args.compare {
        let file = path.display().to_string();
        let mut problem = load(path)?;
        if let Some(capacity) = args.capacity {
            problem.options.capacity = Some(capacity);
        }
        if let Some(alignment) = args.alignment {
            problem.options.alignment = alignment;
        }
        let mut cells = Vec::new();
        for &algorithm in SlabAlgorithm::ALL {
            let options =
                SlabOptions { algorithm, time_budget: args.time_budget, ..problem.options };
            let start = Instant::now();
            let plan = match plan_slab(&problem.dag, &problem.buffers, &options) {
                Ok(plan) => plan,
                Err(e @ PlanError::CapacityExceeded { .. }) => {
                    cells.push(Cell {
                        slab_bytes: 0,
                        lower_bound: 0,
                        seconds: start.elapsed().as_secs_f64(),
                        refused: Some(errors::message(&e)),
                    });
                    continue;
                }
                Err(e) => return Err(anyhow!("{file}: {algorithm}: {}", errors::message(&e))),
            };
            let seconds = start.elapsed().as_secs_f64();
            verify(&problem.dag, &problem.buffers, &plan, &options)
                .map_err(|e| anyhow!("{file}: {algorithm} gave an invalid plan: {e}"))?;
            cells.push(Cell {
                slab_bytes: plan.slab_bytes,
                lower_bound: plan.lower_bound,
                seconds,
                refused: None,
            });
        }
        rows.push((file, cells));
    }
    // An algorithm refused on some file has no mean comparable with the others': none.
    let geomeans: Vec<Option<f64>> = (0..SlabAlgorithm::ALL.len())
        .map(|k| {
            if rows.iter().any(|(_, c)| c[k].refused.is_some()) {
                return None;
            }
            let ratios: Vec<f64> = rows.iter().filter_map(|(_, c)| cell_ratio(&c[k])).collect();
            (!ratios.is_empty())
                .then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
        })
        .collect();
    let unfit: Vec<&str> = rows
        .iter()
        .filter(|(_, cells)| cells.iter().all(|c| c.refused.is_some()))
        .map(|(file, _)| file.as_str())
        .collect();
    if args.json {
        let files: Vec<Value> = rows
            .iter()
            .map(|(file, cells)| {
                let mut results = Map::new();
                for (a, c) in SlabAlgorithm::ALL.iter().zip(cells) {
                    let cell = match &c.refused {
                        Some(error) => json!({"refused": error, "seconds": c.seconds}),
                        None => json!({"slab_bytes": c.slab_bytes, "ratio": cell_ratio(c),
                                       "seconds": c.seconds}),
                    };
                    results.insert(a.name().to_string(), cell);
                }
                let lower_bound = cells.iter().find(|c| c.refused.is_none()).map(|c| c.lower_bound);
                json!({"file": file, "lower_bound": lower_bound, "results": results})
            })
            .collect();
        let mut geo = Map::new();
        for (a, g) in SlabAlgorithm::ALL.iter().zip(&geomeans) {
            geo.insert(a.name().to_string(), json!(g));
        }
        let names: Vec<&str> = SlabAlgorithm::ALL.iter().map(|a| a.name()).collect();
        let report = json!({"algorithms": names, "files": files, "geomean": geo});
        out::print_json(&report)?;
    } else {
        out::print(&compare_table(&rows, &geomeans))?;
    }
    match unfit.as_slice() {
        [] => Ok(()),
        files => Err(anyhow!(
            "no algorithm fits the capacity of {} ({} of {} files)",
            files.join(", "),
            files.len(),
            rows.len()
        )),
    }
}

fn cell_ratio(c: &Cell) -> Option<f64> {
    (c.lower_bound > 0).then(|| c.slab_bytes as f64 / c.lower_bound as f64)
}

/// Rows of files, a column per algorithm: `ratio (seconds)`, then the geometric means.
fn compare_table(rows: &[(String, Vec<Cell>)], geomeans: &[Option<f64>]) -> String {
    let fmt_ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.4}"));
    let file_w = rows.iter().map(|(f, _)| f.chars().count()).max().unwrap_or(0).max(7);
    let col_w = SlabAlgorithm::ALL.iter().map(|a| a.name().len()).max().unwrap_or(0).max(17);
    let mut s = String::new();
    let _ = writeln!(s, "slab / lower_bound (planning time) per algorithm");
    let _ = write!(s, "{:<file_w$}", "file");
    for a in SlabAlgorithm::ALL {
        let _ = write!(s, "  {:>col_w$}", a.name());
    }
    let _ = writeln!(s);
    for (file, cells) in rows {
        let _ = write!(s, "{file:<file_w$}");
        for c in cells {
            let cell = match c.refused {
                Some(_) => format!("refused ({:.3}s)", c.seconds),
                None => format!("{} ({:.3}s)", fmt_ratio(cell_ratio(c)), c.seconds),
            };
            let _ = write!(s, "  {cell:>col_w$}");
        }
        let _ = writeln!(s);
    }
    let _ = write!(s, "{:<file_w$}", "geomean");
    for g in geomeans {
        let _ = write!(s, "  {:>col_w$}", fmt_ratio(*g));
    }
    let _ = writeln!(s);
    s
}

/// The `--json` object: plan_slab's keys first, then the options and per-buffer sizes.
fn json_report(problem: &SlabProblem, plan: &SlabPlan) -> Value {
    let mut offsets = Map::new();
    let mut reserved = Map::new();
    // Marked buffers: the operand each may take the bytes of, and whether the plan did.
    let mut in_place = Map::new();
    for ((buf, &o), &r) in problem.buffers.iter().zip(&plan.offsets).zip(&plan.reserved) {
        offsets.insert(buf.id.clone(), json!(o));
        reserved.insert(buf.id.clone(), json!(r));
        if let Some(p) = buf.in_place_of.and_then(|p| problem.buffers.get(p).map(|b| (p, b))) {
            let taken = plan.offsets.get(p.0) == Some(&o);
            in_place.insert(buf.id.clone(), json!({"of": p.1.id, "taken": taken}));
        }
    }
    json!({
        "offsets": offsets,
        "slab_bytes": plan.slab_bytes,
        "naive_bytes": plan.naive_bytes,
        "lower_bound": plan.lower_bound,
        "ratio": ratio(plan).map(|r| (r * 1e6).round() / 1e6),
        "optimal": plan.slab_bytes == plan.lower_bound,
        "reserved": reserved,
        "in_place": in_place,
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
    // Escaped, so a newline or control character in an id cannot break the table's rows.
    let ids: Vec<String> =
        problem.buffers.iter().map(|b| b.id.escape_debug().to_string()).collect();
    // Capped: a longer id overflows its cell instead of widening every row (and a width past
    // 65,535 would not format at all).
    let id_w = ids.iter().map(|id| id.chars().count()).max().unwrap_or(0).clamp(2, 64);
    let num_w = group(plan.slab_bytes.max(plan.naive_bytes)).len().max(8);
    let _ = writeln!(
        s,
        "\n{:<id_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}",
        "id", "bytes", "reserved", "offset", "end"
    );
    let rows = problem.buffers.iter().zip(&ids).zip(&plan.offsets).zip(&plan.reserved);
    for (((buf, id), &off), &res) in rows {
        let _ = write!(
            s,
            "{:<id_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}  {:>num_w$}",
            id,
            group(buf.bytes),
            group(res),
            group(off),
            group(off.saturating_add(res)),
        );
        // Only marked buffers say it, so unmarked problems print as they always did.
        if let Some((op, op_off)) =
            buf.in_place_of.and_then(|p| Some((problem.buffers.get(p)?, *plan.offsets.get(p)?)))
        {
            let taken = if op_off == off { "" } else { " (not taken)" };
            let _ = write!(s, "  in place of {}{taken}", op.id.escape_debug());
        }
        let _ = writeln!(s);
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
    // A plan at the exact lower bound is optimal: no placement can be smaller.
    let _ = writeln!(
        s,
        "slab / lower_bound  {:>num_w$}{}",
        ratio(plan).map_or("-".to_string(), |r| format!("{r:.3}")),
        if plan.slab_bytes == plan.lower_bound { " (optimal)" } else { "" }
    );
    let _ = writeln!(s, "reuse saves         {:>num_w$}{saved_pct}", group(saved));
    s
}

/// `--svg OUT` may name a new path or a regular file, never the problem file itself (it would
/// be replaced), nor a link, a FIFO, a device or a folder (the atomic rename would replace the
/// link or fail half-way on the others). Checked before planning, so a refusal costs nothing.
fn check_svg_target(out: &Path, input: &Path) -> anyhow::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(out) else { return Ok(()) };
    let what = if meta.file_type().is_symlink() {
        Some("a symbolic link")
    } else if meta.is_dir() {
        Some("a folder")
    } else if !meta.is_file() {
        Some("not a regular file")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(UsageError::new(format!(
            "--svg {} is {what}; give a new path or a regular file",
            out.display()
        ))
        .into());
    }
    let same = match (std::fs::canonicalize(out), std::fs::canonicalize(input)) {
        (Ok(a), Ok(b)) => a == b || same_inode(&meta, &b),
        _ => false,
    };
    if same {
        return Err(UsageError::new(format!(
            "--svg {} is the problem file itself; give another path",
            out.display()
        ))
        .into());
    }
    Ok(())
}

/// `true` when `meta` and the file at `other` are one file under two names (a hard link).
#[cfg(unix)]
fn same_inode(meta: &std::fs::Metadata, other: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(other).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
}

#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &Path) -> bool {
    false
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
