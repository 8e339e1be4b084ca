//! Placement quality and speed of every `SlabAlgorithm`.
//!
//! `cargo bench -p lumen-planner --bench algorithms` prints, for each MiniMalloc "challenging"
//! file (google/minimalloc `benchmarks/`, read from `LUMEN_MINIMALLOC_DIR` or
//! `../shared/benchmarks/minimalloc` next to the repository), slab / lower_bound and the time
//! per algorithm, with the geometric mean; then the scale cases: a 20,000-buffer interval trace,
//! 10,000-node layered DAGs, 100,000 unconnected nodes with 2 buffers, and a wide DAG (20,000
//! parallel branches, a buffer on one in 100). Each scale case also prints the process's peak
//! resident memory so far (Linux `VmHWM`). Figures are printed, never asserted.
//!
//! Between the two, the layered DAG suite: 18 layered programs (six shapes from 50 x 20 to
//! 2,500 x 4 layers x width, three seeds each), slab / lower_bound per algorithm with the
//! geometric mean: the non-interval side of `best`.
//!
//! Arguments after `--` filter: `--only NAME` runs one algorithm, `--files A,B` some files,
//! `--skip-scale` / `--scale-only` / `--skip-dags` / `--dags-only` pick sections, `--case TEXT`
//! the scale cases whose name contains TEXT (run one case per process to read its own peak
//! memory).

use std::path::PathBuf;
use std::time::Instant;

use lumen_planner::problem::SlabProblem;
use lumen_planner::{Dag, SlabAlgorithm, SlabBuffer, SlabOptions, plan_slab, verify};
use petgraph::graph::NodeIndex;

fn suite_dir() -> PathBuf {
    std::env::var_os("LUMEN_MINIMALLOC_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks/minimalloc")
    })
}

struct Cli {
    only: Option<SlabAlgorithm>,
    files: Option<Vec<String>>,
    suite: bool,
    scale: bool,
    dags: bool,
    case: Option<String>,
}

fn parse_cli() -> Cli {
    let mut cli = Cli { only: None, files: None, suite: true, scale: true, dags: true, case: None };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--only" => cli.only = args.next().and_then(|n| SlabAlgorithm::from_name(&n)),
            "--files" => {
                cli.files = args.next().map(|f| f.split(',').map(str::to_owned).collect());
            }
            "--skip-scale" => cli.scale = false,
            "--scale-only" => (cli.suite, cli.dags) = (false, false),
            "--skip-dags" => cli.dags = false,
            "--dags-only" => (cli.suite, cli.scale) = (false, false),
            "--case" => cli.case = args.next(),
            _ => {}
        }
    }
    cli
}

/// Plans `problem` with `algorithm`; returns (slab, lower bound, seconds), checked by `verify`.
fn run(dag: &Dag<String>, buffers: &[SlabBuffer], opts: &SlabOptions) -> (usize, usize, f64) {
    let t = Instant::now();
    let plan = match plan_slab(dag, buffers, opts) {
        Ok(plan) => plan,
        Err(e) => panic!("{} failed: {e}", opts.algorithm),
    };
    let secs = t.elapsed().as_secs_f64();
    if let Err(e) = verify(dag, buffers, &plan, opts) {
        panic!("{} produced an invalid plan: {e}", opts.algorithm);
    }
    (plan.slab_bytes, plan.lower_bound, secs)
}

/// One printed table of a suite: a row per problem with slab / lower_bound and the planning
/// time per algorithm, then the geometric mean and the slowest plan per algorithm.
struct Suite {
    algorithms: Vec<SlabAlgorithm>,
    /// Width of the first column.
    label_width: usize,
    log_sum: Vec<f64>,
    max_time: Vec<f64>,
    count: usize,
}

impl Suite {
    /// Prints the title and the header row.
    fn new(title: &str, first: &str, label_width: usize, algorithms: Vec<SlabAlgorithm>) -> Self {
        println!("{title}");
        print!("{first:<label_width$}");
        for a in &algorithms {
            print!(" {:>22}", a.name());
        }
        println!();
        let n = algorithms.len();
        Self { algorithms, label_width, log_sum: vec![0.0; n], max_time: vec![0.0; n], count: 0 }
    }

    /// Plans one problem with every algorithm (`base` gives the other options) and prints its row.
    fn row(&mut self, label: &str, dag: &Dag<String>, buffers: &[SlabBuffer], base: SlabOptions) {
        print!("{label:<w$}", w = self.label_width);
        for (k, &algorithm) in self.algorithms.iter().enumerate() {
            let (slab, lb, secs) = run(dag, buffers, &SlabOptions { algorithm, ..base });
            let ratio = slab as f64 / lb.max(1) as f64;
            self.log_sum[k] += ratio.ln();
            self.max_time[k] = self.max_time[k].max(secs);
            print!(" {:>12.4} ({:>6.3}s)", ratio, secs);
        }
        println!();
        self.count += 1;
    }

    /// Prints the geometric mean and the slowest plan per algorithm (nothing without rows).
    fn finish(self) {
        if self.count == 0 {
            return;
        }
        print!("{:<w$}", "geomean", w = self.label_width);
        for s in &self.log_sum {
            print!(" {:>12.4}          ", (s / self.count as f64).exp());
        }
        println!();
        print!("{:<w$}", "max s", w = self.label_width);
        for t in &self.max_time {
            print!(" {:>20.3}s", t);
        }
        println!();
    }
}

fn suite(cli: &Cli) {
    let dir = suite_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("MiniMalloc suite not found at {} (set LUMEN_MINIMALLOC_DIR)", dir.display());
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".1048576.csv")))
        .collect();
    files.sort();
    if let Some(keep) = &cli.files {
        files.retain(|p| {
            let stem = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            keep.iter().any(|k| stem.starts_with(&format!("{k}.")))
        });
    }
    let algorithms: Vec<SlabAlgorithm> = match cli.only {
        Some(a) => vec![a],
        None => SlabAlgorithm::ALL.to_vec(),
    };
    let mut suite = Suite::new(
        "MiniMalloc challenging suite: slab / lower_bound (time)",
        "file",
        6,
        algorithms,
    );
    for path in &files {
        let problem = match SlabProblem::load(path) {
            Ok(p) => p,
            Err(e) => panic!("{}: {e}", path.display()),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let label = name.split('.').next().unwrap_or("");
        suite.row(label, &problem.dag, &problem.buffers, problem.options);
    }
    suite.finish();
}

/// An interval trace of `n` buffers: each lives a few dozen steps, sizes spread over three
/// orders of magnitude (like activation traces), written as a chain DAG over the time points.
fn interval_trace(n: usize) -> (Dag<String>, Vec<SlabBuffer>) {
    let mut rng = 0x5EED_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let steps = n;
    let mut dag: Dag<String> = Dag::new();
    let nodes: Vec<NodeIndex> = (0..steps).map(|t| dag.add_node(format!("t{t}"))).collect();
    for w in nodes.windows(2) {
        dag.add_edge(w[0], w[1], ());
    }
    let buffers = (0..n)
        .map(|i| {
            let start = (next() as usize) % steps;
            let len = 1 + (next() as usize) % 48;
            let end = (start + len).min(steps - 1);
            let bytes = 1024usize << (next() % 11);
            SlabBuffer::new(format!("b{i}"), bytes, [nodes[start], nodes[end]])
        })
        .collect();
    (dag, buffers)
}

/// A layered program: `layers` layers of `width` ops, each op reading two ops of the previous
/// layer (so branches run in parallel and join), one output buffer per op used by the op and
/// its readers.
fn layered_dag(layers: usize, width: usize) -> (Dag<String>, Vec<SlabBuffer>) {
    layered_dag_seeded(layers, width, 0xC0FFEE)
}

/// [`layered_dag`] with its random stream started at `seed` (nonzero).
fn layered_dag_seeded(layers: usize, width: usize, seed: u64) -> (Dag<String>, Vec<SlabBuffer>) {
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut dag: Dag<String> = Dag::new();
    let mut grid: Vec<Vec<NodeIndex>> = Vec::new();
    let mut readers: Vec<Vec<NodeIndex>> = Vec::new();
    for l in 0..layers {
        let row: Vec<NodeIndex> = (0..width).map(|k| dag.add_node(format!("op{l}_{k}"))).collect();
        for _ in 0..width {
            readers.push(Vec::new());
        }
        if let Some(prev) = grid.last() {
            for (k, &v) in row.iter().enumerate() {
                let a = prev[k];
                let b = prev[(next() as usize) % width];
                for p in [a, b] {
                    dag.update_edge(p, v, ());
                    let pi = (l - 1) * width + prev.iter().position(|&x| x == p).unwrap_or(0);
                    readers[pi].push(v);
                }
            }
        }
        grid.push(row);
    }
    let buffers = grid
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, &v)| {
            let bytes = 4096usize << (next() % 8);
            let mut uses = vec![v];
            uses.extend(&readers[i]);
            SlabBuffer::new(format!("t{i}"), bytes, uses)
        })
        .collect();
    (dag, buffers)
}

/// `nodes` unconnected nodes and two buffers, on the first and the last node: almost no node
/// carries a buffer, so only two take part in `precedes`.
fn sparse_nodes(nodes: usize) -> (Dag<String>, Vec<SlabBuffer>) {
    let mut dag: Dag<String> = Dag::new();
    let ids: Vec<NodeIndex> = (0..nodes.max(2)).map(|i| dag.add_node(format!("n{i}"))).collect();
    let (first, last) = (ids[0], ids[ids.len() - 1]);
    (dag, vec![SlabBuffer::new("a", 4096, [first]), SlabBuffer::new("b", 4096, [last])])
}

/// A wide DAG: `source -> a_i -> b_i -> sink` for `branches` parallel branches (a chain cover
/// as wide as the DAG), an input on the source, an output on the sink, and a buffer
/// `[a_i, b_i]` on one branch in `every`.
fn wide_dag(branches: usize, every: usize) -> (Dag<String>, Vec<SlabBuffer>) {
    let mut dag: Dag<String> = Dag::new();
    let source = dag.add_node("source".to_string());
    let sink = dag.add_node("sink".to_string());
    let mut buffers = vec![SlabBuffer::new("in", 1 << 16, [source])];
    for i in 0..branches {
        let a = dag.add_node(format!("a{i}"));
        let b = dag.add_node(format!("b{i}"));
        dag.add_edge(source, a, ());
        dag.add_edge(a, b, ());
        dag.add_edge(b, sink, ());
        if i % every.max(1) == 0 {
            buffers.push(SlabBuffer::new(format!("t{i}"), 4096 << (i % 5), [a, b]));
        }
    }
    buffers.push(SlabBuffer::new("out", 1 << 16, [sink]));
    (dag, buffers)
}

/// Peak resident memory of this process so far, from `/proc/self/status` (Linux only).
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

type Case = (&'static str, fn() -> (Dag<String>, Vec<SlabBuffer>));

fn scale(cli: &Cli) {
    let algorithms: Vec<SlabAlgorithm> = match cli.only {
        Some(a) => vec![a],
        None => SlabAlgorithm::ALL.to_vec(),
    };
    let cases: [Case; 5] = [
        ("interval trace, 20,000 buffers", || interval_trace(20_000)),
        ("layered DAG, 10,000 nodes (2,500 x 4)", || layered_dag(2_500, 4)),
        ("layered DAG, 10,000 nodes (500 x 20)", || layered_dag(500, 20)),
        ("sparse: 100,000 unconnected nodes, 2 buffers", || sparse_nodes(100_000)),
        ("wide DAG: 20,000 parallel branches, a buffer on 1 in 100", || wide_dag(20_000, 100)),
    ];
    println!();
    println!("Scale: time per plan_slab (plan checked by verify), slab / lower_bound");
    for (name, make) in cases {
        if cli.case.as_ref().is_some_and(|c| !name.contains(c.as_str())) {
            continue;
        }
        let (dag, buffers) = make();
        println!("{name}: {} nodes, {} buffers", dag.node_count(), buffers.len());
        for &algorithm in &algorithms {
            let opts = SlabOptions { algorithm, ..SlabOptions::default() };
            let (slab, lb, secs) = run(&dag, &buffers, &opts);
            println!(
                "  {:<16} {:>8.3}s  slab / lower_bound = {:.4}",
                algorithm.name(),
                secs,
                slab as f64 / lb.max(1) as f64
            );
        }
        println!("  peak resident memory so far: {}", peak_rss());
    }
}

fn main() {
    let cli = parse_cli();
    if cli.suite {
        suite(&cli);
    }
    if cli.dags {
        dags(&cli);
    }
    if cli.scale {
        scale(&cli);
    }
}

/// The layered DAG suite: slab / lower_bound per algorithm, the geometric mean, the slowest
/// plan.
fn dags(cli: &Cli) {
    let algorithms: Vec<SlabAlgorithm> = match cli.only {
        Some(a) => vec![a],
        None => SlabAlgorithm::ALL.to_vec(),
    };
    const SHAPES: [(usize, usize); 6] =
        [(2_500, 4), (1_000, 10), (500, 20), (250, 40), (100, 10), (50, 20)];
    const SEEDS: [u64; 3] = [0xC0FFEE, 0xBEEF, 0xD1CE];
    println!();
    let mut suite = Suite::new(
        "Layered DAG suite (layers x width, seed): slab / lower_bound (time)",
        "dag",
        18,
        algorithms,
    );
    for (layers, width) in SHAPES {
        for seed in SEEDS {
            let (dag, buffers) = layered_dag_seeded(layers, width, seed);
            suite.row(
                &format!("{layers}x{width} {seed:x}"),
                &dag,
                &buffers,
                SlabOptions::default(),
            );
        }
    }
    suite.finish();
}
