//! The DSL program of SPEC section 3: `y = relu(x w + b)` with x [64, 256], w [256, 64], b [64],
//! compiled without fusion; prints the canonical LLIR and the slab plan.
//!
//! `cargo run --example linear_relu` (set `LLIR_DUMP_DIR=DIR` to also write the dump files).

use lumen::compiler::{CompileOptions, Graph, dump};

fn main() -> Result<(), lumen::compiler::CompileError> {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 256]); // f32, row-major
    let w = cx.weight("w", [256, 64]);
    let b = cx.weight("b", [64]);
    let _y = (x.matmul(w) + b).relu().output("y");
    let unfused = cx.compile(&CompileOptions {
        fuse: false,
        name: "linear-relu".to_string(),
        ..Default::default()
    })?;
    print!("{}", dump::llir_text(&unfused));
    println!();
    print!("{}", dump::plan_text(&unfused));
    Ok(())
}
