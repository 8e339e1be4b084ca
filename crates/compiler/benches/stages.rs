//! Compile time per stage, without the planner, for programs of growing size: how each
//! compiler stage scales (issue 16). Prints one table; no criterion, since the large programs
//! are single runs of seconds.
//!
//! ```sh
//! cargo bench -p lumen-compiler --bench stages            # every program and size
//! cargo bench -p lumen-compiler --bench stages -- chain   # rows whose program contains "chain"
//! cargo bench -p lumen-compiler --bench stages -- max=3000 # sizes up to 3,000 only
//! ```
//!
//! Stages, as `Graph::compile` with fusion runs them (the planner, `plan_slab`, is left out:
//! it is timed by the planner's own benches):
//!
//! - `build`: the DSL calls that build the program, and the HLIR snapshot (`Graph::hlir`);
//! - `validate`: `Hlir::infer` (structure, names, shapes);
//! - `load`: the HLIR into an e-graph (`fusion::egraph::load`: validation, canonical order);
//! - `saturate`: the rewrite rules under the runner's bounds (`fusion::saturate`);
//! - `extract`: the three fused policies' extractions and their HLIRs over one extraction table
//!   and one HLIR builder (`extract_with`, `HlirBuilder::build`), one after another (`compile`
//!   runs each policy's extraction and lowering on its own thread);
//! - `lower`: the four candidates lowered to LLIR (`lower`, with the canonical order), one after
//!   another, as `compile` lowers them (in parallel) before it plans the cheapest;
//! - `dump`: the fused program's LLIR text, `.dot`, plan text and JSON (over a placeholder
//!   plan).
//!
//! Times are the thread's CPU time in milliseconds (wall time off Linux), so other processes on
//! a shared machine do not inflate them. `total` is their sum; `svg*` (not in the total) is the
//! planner's slab picture that `--dump-dir` also writes; `exp` in the summary is the growth exponent log(t2/t1)/log(n2/n1)
//! between the smallest and largest size of a program (1 = linear, 2 = quadratic).

use std::time::{Duration, Instant};

use lumen_compiler::fusion::{self, FusionConfig, candidates::POLICIES, egraph};
use lumen_compiler::program::ProgramOptions;
use lumen_compiler::{
    CompileOptions, CompiledProgram, Figures, Graph, Hlir, dump, lower, programs,
};
use lumen_planner::SlabPlan;

/// A program family and its sizes.
struct Family {
    name: &'static str,
    /// What the size counts.
    unit: &'static str,
    sizes: &'static [usize],
    build: fn(usize) -> Graph,
}

/// A deep elementwise chain of `n` ops over `x [64, 64]`: `tanh`, `* 0.5`, `+ x`, repeated
/// (the shape of program where colour refinement needs one round per level).
fn chain(n: usize) -> Graph {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 64]);
    let mut h = x.clone();
    for i in 0..n {
        h = match i % 3 {
            0 => h.tanh(),
            1 => h * 0.5,
            _ => h + &x,
        };
    }
    h.output("y");
    cx
}

fn mlp(layers: usize) -> Graph {
    let widths = vec![256; layers + 1];
    programs::mlp(&widths, 32).expect("mlp")
}

fn transformer(blocks: usize) -> Graph {
    programs::transformer(programs::TransformerSizes { blocks, ..Default::default() })
        .expect("transformer")
}

const FAMILIES: &[Family] = &[
    Family { name: "chain", unit: "ops", sizes: &[1_000, 3_000, 10_000], build: chain },
    Family { name: "mlp", unit: "layers", sizes: &[1_000, 3_000, 10_000], build: mlp },
    Family { name: "transformer", unit: "blocks", sizes: &[24, 96], build: transformer },
];

const STAGES: [&str; 7] = ["build", "validate", "load", "saturate", "extract", "lower", "dump"];

/// A placeholder plan (every buffer after the previous one) so the dumps can be timed without
/// the planner.
fn placeholder(llir: lumen_compiler::Llir, label: &str) -> CompiledProgram {
    let reserved: Vec<usize> =
        llir.buffers.iter().map(|b| b.bytes.max(1).div_ceil(256) * 256).collect();
    let mut offsets = Vec::with_capacity(reserved.len());
    let mut end = 0usize;
    for r in &reserved {
        offsets.push(end);
        end = end.saturating_add(*r);
    }
    let figures = Figures {
        nodes: llir.nodes.len(),
        launches: llir.nodes.iter().filter(|n| n.op.is_launch()).count(),
        slab_bytes: end,
        naive_bytes: end,
        lower_bound: 0,
        dram_bytes: llir.dram_bytes(),
        flops: llir.nodes.iter().map(|n| n.op.flops()).fold(0, u64::saturating_add),
    };
    CompiledProgram {
        label: label.to_string(),
        dag: llir.dag(),
        llir,
        plan: SlabPlan { offsets, reserved, slab_bytes: end, naive_bytes: end, lower_bound: 0 },
        figures,
        options: ProgramOptions::from(&CompileOptions::default()),
    }
}

struct Row {
    hlir_nodes: usize,
    llir_nodes: usize,
    egraph: String,
    times: [Duration; 7],
    /// `plan_svg` (the planner's layout picture, written by `--dump-dir`): not in the total.
    svg: Duration,
}

/// The calling thread's CPU time (Linux: `CLOCK_THREAD_CPUTIME_ID`), which other processes
/// on a shared machine do not inflate; `None` elsewhere, where wall time is used.
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Option<Duration> {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; the clock id is Linux's.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (rc == 0).then(|| Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Runs `f`, adding its thread CPU time (else its wall time) to `slot`.
fn time<T>(slot: &mut Duration, f: impl FnOnce() -> T) -> T {
    let (cpu, wall) = (thread_cpu_time(), Instant::now());
    let out = f();
    *slot += match (cpu, thread_cpu_time()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => wall.elapsed(),
    };
    out
}

fn run(build: fn(usize) -> Graph, n: usize) -> Row {
    let options = CompileOptions::default();
    let config = FusionConfig::default();
    let mut t = [Duration::ZERO; 7];
    let hlir: Hlir = time(&mut t[0], || build(n).hlir());
    time(&mut t[1], || hlir.infer().expect("valid"));
    let loaded = time(&mut t[2], || egraph::load(&hlir).expect("load"));
    let rules = fusion::rules::rules(&config.rules).expect("rules");
    let (loaded, sat) = time(&mut t[3], || fusion::saturate(loaded, &rules, &config.limits));
    let extracted: Vec<Hlir> = time(&mut t[4], || {
        let table = fusion::extract::ExtractionTable::new(&loaded, &config);
        let builder = egraph::HlirBuilder::new(&hlir, &loaded);
        POLICIES[1..]
            .iter()
            .map(|&(_, fusions)| {
                let choice =
                    fusion::extract::extract_with(&table, &loaded, fusions).expect("extract");
                builder.build(&choice).expect("build_hlir")
            })
            .collect()
    });
    let mut lowered = time(&mut t[5], || {
        std::iter::once(&hlir)
            .chain(&extracted)
            .map(|h| lower::lower(h, options.workspace_bytes).expect("lower"))
            .collect::<Vec<_>>()
    });
    let fused = placeholder(lowered.pop().expect("fused"), "bench-fused");
    let bytes = time(&mut t[6], || {
        dump::llir_text(&fused).len()
            + dump::llir_dot(&fused).len()
            + dump::plan_text(&fused).len()
            + dump::compiled_json(&fused).to_string().len()
    });
    assert!(bytes > 0);
    let mut svg = Duration::ZERO;
    time(&mut svg, || dump::plan_svg(&fused).len());
    Row {
        hlir_nodes: hlir.graph.node_count(),
        llir_nodes: fused.llir.nodes.len(),
        egraph: format!("{} / {} it / {}", sat.egraph_nodes, sat.iterations, sat.stop),
        times: t,
        svg,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; `max=N` skips sizes above N; any other argument filters
    // programs by name.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let max: usize = args
        .iter()
        .find_map(|a| a.strip_prefix("max=").and_then(|v| v.parse().ok()))
        .unwrap_or(usize::MAX);
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("max=")).collect();
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}  e-graph (nodes / iterations / stop)",
        "program",
        "size",
        "hlir",
        "llir",
        STAGES[0],
        STAGES[1],
        STAGES[2],
        STAGES[3],
        STAGES[4],
        STAGES[5],
        STAGES[6],
        "total",
        "svg*"
    );
    let clock = if thread_cpu_time().is_some() { "thread CPU" } else { "wall" };
    println!(
        "# milliseconds of {clock} time per stage; exp = growth exponent, smallest to largest"
    );
    let mut summary = Vec::new();
    for family in FAMILIES {
        if !filters.is_empty() && !filters.iter().any(|f| family.name.contains(f.as_str())) {
            continue;
        }
        let mut first: Option<(usize, Row)> = None;
        let mut last: Option<(usize, Row)> = None;
        for &n in family.sizes.iter().filter(|&&n| n <= max) {
            let row = run(family.build, n);
            let total: Duration = row.times.iter().sum();
            let cols: Vec<String> = row.times.iter().map(|&d| format!("{:>8}", ms(d))).collect();
            println!(
                "{:<12} {:>6} {:>6} {:>6} {} {:>8} {:>9}  {}",
                family.name,
                n,
                row.hlir_nodes,
                row.llir_nodes,
                cols.join(" "),
                ms(total),
                ms(row.svg),
                row.egraph
            );
            if first.is_none() {
                first = Some((n, row));
            } else {
                last = Some((n, row));
            }
        }
        if let (Some((n1, a)), Some((n2, b))) = (first, last) {
            let ratio = (n2 as f64 / n1 as f64).ln();
            let exp = |x: Duration, y: Duration| {
                let (x, y) = (x.as_secs_f64().max(1e-6), y.as_secs_f64().max(1e-6));
                format!("{:>8.2}", (y / x).ln() / ratio)
            };
            let cols: Vec<String> =
                a.times.iter().zip(&b.times).map(|(&x, &y)| exp(x, y)).collect();
            let total = exp(a.times.iter().sum(), b.times.iter().sum());
            let svg = exp(a.svg, b.svg);
            summary.push(format!(
                "{:<12} {:>6} {:>6} {:>6} {} {total} {svg}  ({} {}: {n1} -> {n2})",
                family.name,
                "exp",
                "",
                "",
                cols.join(" "),
                family.name,
                family.unit
            ));
        }
    }
    for line in summary {
        println!("{line}");
    }
}
