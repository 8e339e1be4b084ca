//! insta snapshots of the canonical LLIR and plan text (in the repository's `snapshots/`).

use lumen_compiler::dump::{llir_text, plan_text};
use lumen_compiler::{CompileOptions, CompiledProgram, programs};

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../../../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s
}

fn compile(graph: lumen_compiler::Graph, name: &str) -> CompiledProgram {
    graph.compile(&CompileOptions { name: name.into(), fuse: false, ..Default::default() }).unwrap()
}

#[test]
fn linear_relu_unfused() {
    let p = compile(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    settings().bind(|| {
        insta::assert_snapshot!("compiler_linear_relu_unfused_llir", llir_text(&p));
        insta::assert_snapshot!("compiler_linear_relu_unfused_plan", plan_text(&p));
    });
}

#[test]
fn mlp_three_layers_unfused() {
    let p = compile(programs::mlp(&[64, 128, 64, 10], 32).unwrap(), "mlp");
    settings().bind(|| {
        insta::assert_snapshot!("compiler_mlp3_unfused_llir", llir_text(&p));
        insta::assert_snapshot!("compiler_mlp3_unfused_plan", plan_text(&p));
    });
}
