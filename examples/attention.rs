//! Scaled dot-product attention in the DSL, with a causal mask: built from primitives (matmul,
//! a transpose that is only a view, a max-subtracted softmax), compiled, and run on the CPU.
//! The README's "A worked example: attention" section walks through this file and its output.
//!
//! `cargo run --example attention` (set `LLIR_DUMP_DIR=DIR` to also write the dump files).

use lumen::compiler::{CompileOptions, Graph, dump};
use lumen::runtime::{CpuRuntime, HostTensor, Runtime, Tensors};

/// Batch, heads, sequence length, head width.
const B: usize = 1;
const H: usize = 2;
const S: usize = 4;
const D: usize = 8;

/// The attention program: inputs `q`, `k`, `v` `[B, H, S, D]`, weight `mask` `[S, S]`, output
/// `out` `[B, H, S, D]`.
pub fn build() -> Graph {
    let mut cx = Graph::new();
    let q = cx.input("q", [B, H, S, D]);
    let k = cx.input("k", [B, H, S, D]);
    let v = cx.input("v", [B, H, S, D]);
    // 0 where a query may look, -1e9 above the diagonal: broadcast over batch and heads.
    let mask = cx.weight("mask", [S, S]);

    // k.transpose(-1, -2) is a view with swapped strides: the batched matmul reads it as is.
    let scores = (q.matmul(k.transpose(-1, -2)) * (1.0 / (D as f32).sqrt()) + &mask).name("scores");
    // softmax(x) = exp(x - max) / sum(exp(x - max)): a DSL function over max, sub, exp, sum, div.
    let probs = scores.softmax(-1).name("probs");
    probs.matmul(&v).output("out");
    cx
}

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cx = build();
    let options = CompileOptions { name: "attention".to_string(), ..CompileOptions::default() };
    let program = cx.compile(&options)?;
    print!("{}", dump::llir_text(&program));
    println!(
        "{} launches, slab {} bytes (lower bound {})",
        program.figures.launches, program.figures.slab_bytes, program.figures.lower_bound
    );

    let causal: Vec<f32> = (0..S * S).map(|i| if i % S > i / S { -1e9 } else { 0.0 }).collect();
    let weights: Tensors = [("mask".to_string(), HostTensor::new([S, S], causal)?)].into();
    let mut prepared = CpuRuntime::default().prepare(&program, &weights)?;
    let n = B * H * S * D;
    let ramp = |scale: f32| {
        HostTensor::new([B, H, S, D], (0..n).map(|i| (i % 7) as f32 * scale - 1.0).collect())
    };
    let inputs: Tensors = [
        ("q".to_string(), ramp(0.3)?),
        ("k".to_string(), ramp(0.2)?),
        ("v".to_string(), ramp(0.5)?),
    ]
    .into();
    let outputs = prepared.execute(&inputs)?;
    let out = outputs.get("out").ok_or("no output out")?;
    // The first query sees only the first key: its output is the first value row.
    let first_v = &inputs["v"].data()[..D];
    assert_eq!(&out.data()[..D], first_v);
    println!("out {:?}, first row {:?}", out.shape(), &out.data()[..D]);
    Ok(())
}
