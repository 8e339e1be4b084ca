//! Fusion from Rust: the SPEC section 3 program compiled with the e-graph (the default), the
//! fusion candidates side by side, and the fused program's canonical LLIR.
//!
//! `cargo run --example fusion_compare`

use lumen::compiler::fusion::{self, FusionConfig, report};
use lumen::compiler::{CompileOptions, Graph, dump};

fn main() -> Result<(), lumen::compiler::CompileError> {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 256]); // f32, row-major
    let w = cx.weight("w", [256, 64]);
    let b = cx.weight("b", [64]);
    let _y = (x.matmul(w) + b).relu().output("y");

    let options = CompileOptions { name: "linear-relu".to_string(), ..Default::default() };
    let exploration =
        fusion::explore(&cx.hlir(), "linear-relu", &options, &FusionConfig::default())?;
    print!("{}", report::compare_text(&exploration));
    println!();

    // `compile` lowers the cost model's pick: one lt_matmul with the RELU_BIAS epilogue.
    let fused = cx.compile(&options)?;
    print!("{}", dump::llir_text(&fused));
    Ok(())
}
