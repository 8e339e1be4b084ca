//! insta snapshots of the fused programs (canonical LLIR and plan text) and of the `compare`
//! table, in the repository's `snapshots/`.

use lumen_compiler::dump::{llir_text, plan_text};
use lumen_compiler::fusion::{self, FusionConfig, report};
use lumen_compiler::{CompileOptions, CompiledProgram, Graph, programs};

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../../../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s
}

fn options(name: &str) -> CompileOptions {
    CompileOptions { name: name.into(), fuse: true, ..Default::default() }
}

fn compile(graph: Graph, name: &str) -> CompiledProgram {
    graph.compile(&options(name)).unwrap()
}

fn compare(graph: Graph, name: &str) -> String {
    let e = fusion::explore(&graph.hlir(), name, &options(name), &FusionConfig::default()).unwrap();
    report::compare_text(&e)
}

#[test]
fn linear_relu_fused() {
    let p = compile(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    settings().bind(|| {
        insta::assert_snapshot!("compiler_linear_relu_fused_llir", llir_text(&p));
        insta::assert_snapshot!("compiler_linear_relu_fused_plan", plan_text(&p));
    });
}

#[test]
fn mlp_three_layers_fused() {
    let p = compile(programs::mlp(&[64, 128, 64, 10], 32).unwrap(), "mlp");
    settings().bind(|| {
        insta::assert_snapshot!("compiler_mlp3_fused_llir", llir_text(&p));
        insta::assert_snapshot!("compiler_mlp3_fused_plan", plan_text(&p));
    });
}

#[test]
fn compare_tables() {
    let small = compare(programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    let large = compare(programs::linear_relu(4096, 64, 4096).unwrap(), "linear-relu");
    let mlp = compare(programs::mlp(&[64, 128, 64, 10], 32).unwrap(), "mlp");
    settings().bind(|| {
        insta::assert_snapshot!("compiler_compare_linear_relu", small);
        insta::assert_snapshot!("compiler_compare_linear_relu_large", large);
        insta::assert_snapshot!("compiler_compare_mlp3", mlp);
    });
}
