//! lumen as a library: DSL -> compile -> `CpuRuntime::prepare` -> execute -> read the outputs.
//! The README's "Using lumen as a library" section is this file from its first `use` on
//! (`tests/cli_compile.rs` checks they agree and runs `main`).
//!
//! `cargo run --example library`

use lumen::compiler::{CompileOptions, Graph};
use lumen::runtime::{CpuRuntime, HostTensor, Runtime, Tensors};

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    // y = relu(x [2, 3] @ w [3, 4] + b [4]); every tensor is row-major f32.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 4]);
    let b = cx.weight("b", [4]);
    let _y = (x.matmul(w) + b).relu().output("y");

    // Shape errors, bad names and planner refusals come back here as a typed CompileError.
    // Fusion is on by default: one lt_matmul with the RELU_BIAS epilogue.
    let options = CompileOptions { name: "tiny".to_string(), ..CompileOptions::default() };
    let program = cx.compile(&options)?;
    println!(
        "{}: {} launch, slab {} bytes",
        program.label, program.figures.launches, program.figures.slab_bytes
    );

    // Prepare once: allocate the slab and upload the weights (matched by name and shape).
    let mut weights = Tensors::new();
    let w_data = vec![1.0, 0.0, -1.0, 0.5, 0.0, 1.0, -1.0, 0.5, 1.0, 1.0, -1.0, 0.5];
    weights.insert("w".to_string(), HostTensor::new([3, 4], w_data)?);
    weights.insert("b".to_string(), HostTensor::new([4], vec![0.5, -5.0, 1.0, 0.0])?);
    let mut prepared = CpuRuntime::default().prepare(&program, &weights)?;

    // Execute as often as needed: inputs in by name, outputs back by name (in buffer order).
    let mut inputs = Tensors::new();
    inputs.insert("x".to_string(), HostTensor::new([2, 3], vec![1., 2., 3., 4., 5., 6.])?);
    let outputs = prepared.execute(&inputs)?;
    let y = outputs.get("y").ok_or("no output y")?;
    println!("y {:?} = {:?}", y.shape(), y.data());
    assert_eq!(y.shape(), [2, 4]);
    assert_eq!(y.data(), [4.5, 0.0, 0.0, 3.0, 10.5, 6.0, 0.0, 7.5]);
    Ok(())
}
