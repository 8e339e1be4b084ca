//! The GEMM choice, measured: a bare `C = A · B` (row-major f32, no bias, no activation) in
//! GFLOP/s (`2·M·N·K` / median seconds per call) for each candidate, on the shapes of issue 19,
//! on 1 and 2 threads, interleaved.
//!
//! Candidates:
//! - `matrixmultiply`: `matrixmultiply::sgemm` 0.3 with its `threading` feature; its thread
//!   count is fixed per process by `MATMUL_NUM_THREADS`, so each measurement runs in a child
//!   process. At 1 thread it takes the same code path as a build without the feature.
//! - `gemm`: the `gemm` crate's own call, `Parallelism::None` at 1 thread and
//!   `Parallelism::Rayon(t)` inside a rayon pool of `t` threads otherwise.
//! - `lumen`: `lumen_runtime::gemm::matmul_epilogue` (the `gemm` crate on each thread's part of
//!   the rows, the GEMV path for up to 4 rows), what the CPU runtime runs for an unpacked
//!   product; `lumen+bias+relu` the same with the fused RELU_BIAS epilogue (still counted as
//!   `2·M·N·K` FLOP).
//! - `packed`: `lumen_runtime::packed::matmul_packed` on the weight packed beforehand (as the
//!   CPU runtime does at prepare; packing is not timed), what the runtime runs for a product
//!   with a weight; `packed+bias+relu` with the fused epilogue.
//!
//! Rounds are interleaved (every candidate, thread count and shape once per round, each in a
//! fresh process) and the table shows the median over rounds, so a busy machine slows every
//! candidate alike.
//!
//! `cargo run --release -p lumen-runtime --example gemm_choice [-- ROUNDS]`

use std::process::Command;
use std::time::Instant;

use lumen_runtime::Threads;
use lumen_runtime::gemm::{Matrix, matmul_epilogue};
use lumen_runtime::kernels::Activation;
use lumen_runtime::packed::{PackedWeight, matmul_packed};

const SHAPES: [(usize, usize, usize); 5] =
    [(1, 64, 128), (450, 64, 128), (4096, 64, 128), (512, 2048, 512), (2048, 2048, 2048)];
const LIBS: [&str; 6] =
    ["matrixmultiply", "gemm", "lumen", "lumen+bias+relu", "packed", "packed+bias+relu"];
const THREADS: [usize; 2] = [1, 2];

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

/// Median seconds per call of `f`, after a warm-up, over 7 timings of enough calls to take
/// at least 20 ms each.
fn seconds_per_call(mut f: impl FnMut()) -> f64 {
    f();
    let mut reps = 1usize;
    loop {
        let t = Instant::now();
        (0..reps).for_each(|_| f());
        if t.elapsed().as_secs_f64() >= 0.02 {
            break;
        }
        reps *= 2;
    }
    let mut times: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            (0..reps).for_each(|_| f());
            t.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[3]
}

/// One measurement in this process: GFLOP/s of `lib` on `threads` threads at `m x k x n`.
fn cell(lib: &str, threads: usize, (m, k, n): (usize, usize, usize)) -> f64 {
    let (a, b) = (data(m * k, 1), data(k * n, 2));
    let mut c = vec![0.0f32; m * n];
    let secs = match lib {
        // SAFETY: a is m x k, b is k x n, c is m x n, all row-major and unaliased.
        "matrixmultiply" => seconds_per_call(|| unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                k as isize,
                1,
                b.as_ptr(),
                n as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            );
        }),
        "gemm" => {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            pool.install(|| {
                seconds_per_call(|| {
                    lumen_runtime::gemm::bare_sgemm((m, k, n), &a, &b, &mut c, threads)
                        .expect("gemm");
                })
            })
        }
        _ => {
            let team = Threads::new(Some(threads)).expect("threads");
            let am = Matrix::new(&a, 0, (m, k), (k, 1)).expect("a");
            let bm = Matrix::new(&b, 0, (k, n), (n, 1)).expect("b");
            let bias = data(n, 3);
            let (bias, act) = match lib {
                "lumen" | "packed" => (None, Activation::Identity),
                _ => (Some(&bias[..]), Activation::Relu),
            };
            if lib.starts_with("packed") {
                let w = PackedWeight::pack(bm).expect("pack").expect("a micro-kernel family");
                seconds_per_call(|| {
                    matmul_packed(am, &w, bias, &mut c, act, &team).expect("packed product")
                })
            } else {
                seconds_per_call(|| matmul_epilogue(am, bm, bias, &mut c, act, &team))
            }
        }
    };
    std::hint::black_box(&c);
    2.0 * (m * k * n) as f64 / secs / 1e9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("cell") {
        let num = |i: usize| args.get(i).and_then(|s| s.parse::<usize>().ok()).expect("number");
        println!("{}", cell(&args[2], num(3), (num(4), num(5), num(6))));
        return;
    }
    let rounds = args.get(1).and_then(|s| s.parse::<usize>().ok()).unwrap_or(3);
    let exe = std::env::current_exe().expect("own path");
    // (shape, threads, lib) -> GFLOP/s per round.
    let mut results = vec![vec![vec![Vec::new(); LIBS.len()]; THREADS.len()]; SHAPES.len()];
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for (s, &(m, k, n)) in SHAPES.iter().enumerate() {
            for (t, &threads) in THREADS.iter().enumerate() {
                for (l, lib) in LIBS.iter().enumerate() {
                    let out = Command::new(&exe)
                        .args(["cell", lib])
                        .args([threads, m, k, n].map(|x| x.to_string()))
                        .env("MATMUL_NUM_THREADS", threads.to_string())
                        .output()
                        .expect("run a cell");
                    let text = String::from_utf8_lossy(&out.stdout);
                    let gflops: f64 = text.trim().parse().expect("GFLOP/s");
                    results[s][t][l].push(gflops);
                }
            }
        }
    }
    let median = |v: &[f64]| lumen_runtime::search::median(v).unwrap_or(f64::NAN);
    println!("bare GEMM, GFLOP/s, median of {rounds} interleaved rounds");
    println!(
        "{:<16} {:>7} {:>15} {:>8} {:>8} {:>16} {:>8} {:>17}",
        "M x K x N", "threads", LIBS[0], LIBS[1], LIBS[2], LIBS[3], LIBS[4], LIBS[5]
    );
    for (s, &(m, k, n)) in SHAPES.iter().enumerate() {
        for (t, &threads) in THREADS.iter().enumerate() {
            let g: Vec<f64> = (0..LIBS.len()).map(|l| median(&results[s][t][l])).collect();
            println!(
                "{:<16} {:>7} {:>15.1} {:>8.1} {:>8.1} {:>16.1} {:>8.1} {:>17.1}",
                format!("{m}x{k}x{n}"),
                threads,
                g[0],
                g[1],
                g[2],
                g[3],
                g[4],
                g[5]
            );
        }
    }
}
