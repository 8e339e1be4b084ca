//! Speed of `plan_slab` (first fit, which also computes the exact lower bound) and of
//! `lower_bound` alone, on random layered DAGs of 1k and 10k buffers, on DAGs where almost no
//! node carries a buffer (100,000 unconnected nodes with 2 buffers; 20,000 parallel branches
//! with a buffer on one in 100), and on every MiniMalloc file
//! in ../shared/benchmarks/minimalloc (skipped when absent). Before timing, prints each
//! MiniMalloc file's slab / lower_bound: the baseline better planners are measured against.
//! Last, `lower_bound` and `verify` alone on MiniMalloc-like interval CSVs of 10,000 and
//! 100,000 buffers (group `intervals`).
//!
//! `cargo bench -p lumen-planner --bench plan_slab` (add `-- --quick` for a fast pass).

use std::path::PathBuf;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lumen_planner::{Dag, SlabBuffer, SlabOptions, SlabProblem, lower_bound, plan_slab, verify};
use petgraph::graph::NodeIndex;

/// xorshift64*: a fixed stream so every run plans the same DAGs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A tensor-program-like DAG: `buffers / 10` layers of 8 nodes, each node feeding two nodes of
/// the next layer; each buffer used by 1 to 3 nodes within 3 consecutive layers, 0 to 1 MiB.
fn layered(buffers: usize, seed: u64) -> (Dag, Vec<SlabBuffer>) {
    const WIDTH: usize = 8;
    let layers = (buffers / 10).max(2);
    let mut rng = Rng(seed | 1);
    let mut dag: Dag = Dag::new();
    let nodes: Vec<Vec<NodeIndex>> =
        (0..layers).map(|_| (0..WIDTH).map(|_| dag.add_node(())).collect()).collect();
    for pair in nodes.windows(2) {
        for &a in &pair[0] {
            for _ in 0..2 {
                dag.update_edge(a, pair[1][rng.below(WIDTH)], ());
            }
        }
    }
    let bufs = (0..buffers)
        .map(|i| {
            let layer = rng.below(layers);
            let uses: Vec<NodeIndex> = (0..1 + rng.below(3))
                .map(|_| {
                    let l = (layer + rng.below(3)).min(layers - 1);
                    nodes[l][rng.below(WIDTH)]
                })
                .collect();
            SlabBuffer::new(format!("b{i}"), rng.below((1 << 20) + 1), uses)
        })
        .collect();
    (dag, bufs)
}

fn minimalloc_files() -> Vec<PathBuf> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks/minimalloc");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    if files.is_empty() {
        eprintln!("minimalloc benchmarks skipped: {} not found", dir.display());
    }
    files
}

fn random_dags(c: &mut Criterion) {
    let mut group = c.benchmark_group("layered");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    for n in [1_000usize, 10_000] {
        let (dag, bufs) = layered(n, 0x5eed + n as u64);
        let o = SlabOptions::default();
        let plan = plan_slab(&dag, &bufs, &o).expect("random DAGs plan");
        println!(
            "layered {n}: slab {} lower_bound {} naive {} slab/lower_bound {:.3}",
            plan.slab_bytes,
            plan.lower_bound,
            plan.naive_bytes,
            plan.slab_bytes as f64 / plan.lower_bound.max(1) as f64
        );
        group.bench_with_input(BenchmarkId::new("plan_slab", n), &n, |b, _| {
            b.iter(|| plan_slab(&dag, &bufs, &o))
        });
        group.bench_with_input(BenchmarkId::new("lower_bound", n), &n, |b, _| {
            b.iter(|| lower_bound(&dag, &bufs, o.alignment))
        });
    }
    group.finish();
}

/// `nodes` unconnected nodes, a buffer on the first and one on the last.
fn sparse(nodes: usize) -> (Dag, Vec<SlabBuffer>) {
    let mut dag: Dag = Dag::new();
    let ids: Vec<NodeIndex> = (0..nodes.max(2)).map(|_| dag.add_node(())).collect();
    let (first, last) = (ids[0], ids[ids.len() - 1]);
    (dag, vec![SlabBuffer::new("a", 4096, [first]), SlabBuffer::new("b", 4096, [last])])
}

/// `source -> a_i -> b_i -> sink` for `branches` branches; a buffer on the source, the sink
/// and one branch in `every`.
fn wide(branches: usize, every: usize) -> (Dag, Vec<SlabBuffer>) {
    let mut dag: Dag = Dag::new();
    let source = dag.add_node(());
    let sink = dag.add_node(());
    let mut bufs = vec![SlabBuffer::new("in", 1 << 16, [source])];
    for i in 0..branches {
        let a = dag.add_node(());
        let b = dag.add_node(());
        dag.add_edge(source, a, ());
        dag.add_edge(a, b, ());
        dag.add_edge(b, sink, ());
        if i % every.max(1) == 0 {
            bufs.push(SlabBuffer::new(format!("t{i}"), 4096 << (i % 5), [a, b]));
        }
    }
    bufs.push(SlabBuffer::new("out", 1 << 16, [sink]));
    (dag, bufs)
}

/// Few buffers on many nodes: time follows the used nodes, not the DAG's size or width.
fn unused_nodes(c: &mut Criterion) {
    let mut group = c.benchmark_group("unused_nodes");
    group.sample_size(10);
    let cases = [
        ("sparse_100k_nodes_2_buffers", sparse(100_000)),
        ("wide_20k_branches", wide(20_000, 100)),
    ];
    for (name, (dag, bufs)) in &cases {
        let o = SlabOptions::default();
        group.bench_function(BenchmarkId::new("plan_slab", name), |b| {
            b.iter(|| plan_slab(dag, bufs, &o))
        });
    }
    group.finish();
}

fn minimalloc(c: &mut Criterion) {
    let files = minimalloc_files();
    if files.is_empty() {
        return;
    }
    let mut group = c.benchmark_group("minimalloc");
    group.sample_size(10);
    println!("{:<16} {:>5} {:>10} {:>12} {:>8}", "file", "n", "slab", "lower_bound", "ratio");
    for path in files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let p = match SlabProblem::load(&path) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{name}: skipped: {e}");
                continue;
            }
        };
        let plan = match p.plan() {
            Ok(plan) => plan,
            Err(e) => {
                eprintln!("{name}: skipped: {e}");
                continue;
            }
        };
        println!(
            "{name:<16} {:>5} {:>10} {:>12} {:>8.3}",
            p.buffers.len(),
            plan.slab_bytes,
            plan.lower_bound,
            plan.slab_bytes as f64 / plan.lower_bound.max(1) as f64
        );
        group.bench_function(BenchmarkId::new("plan_slab", &name), |b| b.iter(|| p.plan()));
        group.bench_function(BenchmarkId::new("lower_bound", &name), |b| {
            b.iter(|| lower_bound(&p.dag, &p.buffers, p.options.alignment))
        });
    }
    group.finish();
}

/// A MiniMalloc-style CSV of `n` buffers over about `n` time units: most live 1 to 64 units,
/// one in 100 up to `n / 50`; sizes log-uniform from 1 B to 1 MiB. About 40 buffers are live
/// at any time, so the conflicting pairs grow linearly while all pairs grow as `n^2`.
fn interval_csv(n: usize, seed: u64) -> String {
    let mut rng = Rng(seed | 1);
    let mut text = String::from("id,lower,upper,size\n");
    for i in 0..n {
        let lower = rng.below(n);
        let len = if rng.below(100) == 0 { 1 + rng.below(n / 50 + 1) } else { 1 + rng.below(64) };
        let scale = 1usize << rng.below(21);
        let size = 1 + rng.below(scale);
        text.push_str(&format!("{i},{lower},{},{size}\n", lower + len));
    }
    text
}

/// The sweeps of `lower_bound` and `verify` on interval problems, against a first-fit plan.
fn intervals(c: &mut Criterion) {
    let mut group = c.benchmark_group("intervals");
    group.sample_size(10);
    for n in [10_000usize, 100_000] {
        let p = match SlabProblem::from_csv_str(&interval_csv(n, 0x1A7E + n as u64)) {
            Ok(p) => p,
            Err(e) => panic!("generated CSV: {e}"),
        };
        let plan = match p.plan() {
            Ok(plan) => plan,
            Err(e) => panic!("interval problem: {e}"),
        };
        println!(
            "intervals {n}: slab {} lower_bound {} naive {}",
            plan.slab_bytes, plan.lower_bound, plan.naive_bytes
        );
        group.bench_with_input(BenchmarkId::new("lower_bound", n), &n, |b, _| {
            b.iter(|| lower_bound(&p.dag, &p.buffers, p.options.alignment))
        });
        group.bench_with_input(BenchmarkId::new("verify", n), &n, |b, _| {
            b.iter(|| verify(&p.dag, &p.buffers, &plan, &p.options))
        });
    }
    group.finish();
}

criterion_group!(benches, random_dags, unused_nodes, minimalloc, intervals);
criterion_main!(benches);
