//! A bare call of the CPU runtime's GEMM library, timed: the ceiling `scripts/bench-cpu.sh`
//! sets lumen against (no bias, no activation, no slab, no upload or readback, B not packed
//! ahead).
//!
//! `cargo run --release -p lumen-runtime --example bare_gemm -- [--runs N] [--threads T]
//! MxKxN [MxKxN ...]` runs `C[M,N] = A[M,K] · B[K,N]` (row-major f32) for every shape in turn,
//! `N` times (after one untimed warm-up), and prints one JSON object: `median_ms` (the median
//! over the runs of the time to do all the shapes once), `runs`, `shapes`, `threads` (the
//! threads the library ran on) and `library`.
//!
//! The library is the `gemm` crate's `gemm::gemm`, the GEMM the CPU runtime calls
//! (`Parallelism::None` on one thread, `Parallelism::Rayon(t)` inside a rayon pool of `t`
//! threads otherwise). When the runtime's GEMM changes, [`gemm`] is the one place to change
//! here.

use std::hint::black_box;
use std::time::Instant;

/// The library's name, for the report.
const LIBRARY: &str = "gemm 0.19 (gemm::gemm)";

/// The most threads [`gemm`] is asked to use.
const MAX_THREADS: usize = 1024;

/// `MxKxN` as three positive whole numbers.
fn parse_shape(text: &str) -> Result<(usize, usize, usize), String> {
    let dims: Vec<usize> = text
        .split('x')
        .map(|d| d.parse::<usize>().map_err(|_| format!("`{text}` is not MxKxN")))
        .collect::<Result<_, _>>()?;
    match dims.as_slice() {
        [m, k, n] if *m > 0 && *k > 0 && *n > 0 => Ok((*m, *k, *n)),
        _ => Err(format!("`{text}` is not MxKxN of positive whole numbers")),
    }
}

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

fn run() -> Result<(), String> {
    let mut runs = 20usize;
    let mut threads = 1usize;
    let mut shapes = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| -> Result<usize, String> {
            let v = args.next().ok_or(format!("{flag} needs a value"))?;
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("{flag} `{v}` is not a positive whole number"))
        };
        match arg.as_str() {
            "--runs" => runs = value("--runs")?,
            "--threads" => threads = value("--threads")?,
            shape => shapes.push(parse_shape(shape)?),
        }
    }
    if shapes.is_empty() {
        return Err("give at least one shape MxKxN".to_string());
    }
    if threads > MAX_THREADS {
        return Err(format!("{LIBRARY} runs on at most {MAX_THREADS} thread(s) here"));
    }
    let mut buffers: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> = shapes
        .iter()
        .map(|&(m, k, n)| (data(m * k, 1), data(k * n, 2), vec![0.0; m * n]))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
    let mut once = || {
        let t = Instant::now();
        for (&(m, k, n), (a, b, c)) in shapes.iter().zip(buffers.iter_mut()) {
            lumen_runtime::gemm::bare_sgemm((m, k, n), black_box(a), black_box(b), c, threads)
                .map_err(|e| e.to_string())?;
            black_box(&c);
        }
        Ok::<f64, String>(t.elapsed().as_secs_f64() * 1e3)
    };
    let times: Vec<f64> = pool.install(|| {
        once()?;
        (0..runs).map(|_| once()).collect::<Result<_, _>>()
    })?;
    // runs >= 1 (checked above), so there is a median.
    let median = lumen_runtime::search::median(&times).unwrap_or(f64::NAN);
    let shapes: Vec<String> = shapes.iter().map(|(m, k, n)| format!("\"{m}x{k}x{n}\"")).collect();
    println!(
        "{{\"median_ms\": {median}, \"runs\": {runs}, \"threads\": {threads}, \"shapes\": [{}], \
         \"library\": \"{LIBRARY}\"}}",
        shapes.join(", ")
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
