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

/// A scatter of i64 data along axis 1 by transposed indices, with updates read through a
/// slice, then an f32 scatter-add: the `scatter_elements` node line (axis, reduction, sizes,
/// operand views) and its fresh output buffer of the data's type.
#[test]
fn scatter_elements() {
    use lumen_compiler::{DType, Graph, ScatterReduction};
    let mut cx = Graph::new();
    let d = cx.input_typed("d", [2, 5], DType::I64);
    let idx = cx.input_typed("idx", [3, 2], DType::I32);
    let u = cx.input_typed("u", [2, 4], DType::I64);
    let ids = idx.transpose(0, 1);
    d.scatter_elements(1, &ids, u.slice(1, 1, 4), ScatterReduction::None).output("y");
    let x = cx.input("x", [4, 3]);
    let v = cx.input("v", [2, 3]);
    x.scatter_elements(0, ids.slice(0, 1, 2), v.slice(0, 0, 1), ScatterReduction::Add).output("z");
    let hlir = cx.hlir().to_string();
    assert!(hlir.contains("%5 = scatter_elements:1:none %0, %3, %4 : [2, 5]"), "{hlir}");
    assert!(hlir.contains("= scatter_elements:0:add %7, %9, %10 : [4, 3]"), "{hlir}");
    let p = compile(cx, "scatter");
    settings().bind(|| {
        insta::assert_snapshot!("compiler_scatter_elements_llir", llir_text(&p));
    });
}
