//! Fusion end to end: the fused golden plan of SPEC section 3, the candidates and their
//! figures, the comparison with large activations, every epilogue, dumps and determinism.

mod fusion_common;

use fusion_common::{assert_same_outputs, buffer_ids, epilogues, eval, ops, reads};
use lumen_compiler::fusion::{self, FusionConfig, report};
use lumen_compiler::{CompileOptions, Epilogue, Graph, Hlir, HlirOp, LlirOp, SourceLocation};
use lumen_compiler::{compile_hlir, programs};

fn fused_options(name: &str) -> CompileOptions {
    CompileOptions { name: name.into(), ..Default::default() }
}

fn explore(g: &Graph, name: &str) -> fusion::Exploration {
    fusion::explore(&g.hlir(), name, &fused_options(name), &FusionConfig::default()).unwrap()
}

#[test]
fn fuse_is_the_default() {
    assert!(CompileOptions::default().fuse);
    assert_eq!(CompileOptions::default().label(), "program-fused");
}

#[test]
fn fused_linear_relu_is_the_spec_golden_plan() {
    let p =
        programs::linear_relu(64, 256, 64).unwrap().compile(&fused_options("linear-relu")).unwrap();
    assert_eq!(p.label, "linear-relu-fused");
    assert_eq!(
        ops(&p),
        [
            LlirOp::Upload,
            LlirOp::LtMatmul { batch: 1, m: 64, k: 256, n: 64, epilogue: Epilogue::ReluBias },
            LlirOp::Readback
        ]
    );
    assert_eq!(buffer_ids(&p), ["x", "w", "b", "workspace", "y"]);
    assert_eq!(reads(&p, 1), ["x", "w", "b"]);
    assert_eq!(reads(&p, 2), ["y"]);
    // x, w, b, workspace packed in request order; y after them (it conflicts with all four:
    // they are all used by the lt_matmul that writes it).
    assert_eq!(p.plan.offsets, [0, 65_536, 131_072, 131_328, 1_179_904]);
    let f = p.figures;
    assert_eq!(f.slab_bytes, 1_196_288);
    assert_eq!(f.naive_bytes, 1_196_288);
    assert_eq!(f.lower_bound, 1_196_288);
    assert_eq!(f.launches, 1);
    assert_eq!(f.nodes, 3);
    assert_eq!(f.dram_bytes, 147_712);
    // The product plus the epilogue's bias and relu, one FLOP per element each.
    assert_eq!(f.flops, 2 * 64 * 64 * 256 + 2 * 4096);
    lumen_planner::verify(&p.dag, &p.llir.slab_buffers(), &p.plan, &Default::default()).unwrap();
}

#[test]
fn linear_relu_candidates_compare_as_the_spec_says() {
    let e = explore(&programs::linear_relu(64, 256, 64).unwrap(), "linear-relu");
    let labels: Vec<&str> = e.candidates.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    assert_eq!(e.picked().unwrap().label, "fused");
    assert_eq!(e.candidates.iter().filter(|c| c.picked).count(), 1);
    assert!(e.refused.is_empty());
    assert_eq!(e.saturation.stop, fusion::Stop::Saturated);

    let unfused = e.get("unfused").unwrap();
    let bias = e.get("bias").unwrap();
    let fused = e.get("fused").unwrap();
    // The unfused candidate is exactly what --no-fuse compiles.
    let no_fuse = programs::linear_relu(64, 256, 64)
        .unwrap()
        .compile(&CompileOptions { fuse: false, name: "linear-relu".into(), ..Default::default() })
        .unwrap();
    assert_eq!(unfused.program.llir, no_fuse.llir);
    assert_eq!(unfused.program.plan, no_fuse.plan);
    assert_eq!(unfused.program.label, "linear-relu-unfused");
    assert_eq!(bias.program.label, "linear-relu-bias");

    let (u, b, f) = (unfused.program.figures, bias.program.figures, fused.program.figures);
    assert_eq!((u.launches, b.launches, f.launches), (3, 2, 1));
    assert_eq!((u.slab_bytes, b.slab_bytes, f.slab_bytes), (1_196_288, 1_196_288, 1_196_288));
    // t0 and t1 are each written once and read once unfused: 4 x 16,384 bytes.
    assert_eq!((u.dram_bytes, b.dram_bytes, f.dram_bytes), (213_248, 180_480, 147_712));
    assert_eq!(u.dram_bytes - f.dram_bytes, 65_536);
    assert_eq!(epilogues(&bias.program), [Epilogue::Bias]);
    assert_eq!(
        ops(&bias.program)[2],
        LlirOp::Map { op: lumen_compiler::ElemOp::Unary(lumen_compiler::UnaryOp::Relu), len: 4096 },
        "bias-only fused keeps the activation as its own launch"
    );
    // Cost = launches x 8,000,000 + DRAM bytes + LLIR nodes.
    assert_eq!(unfused.cost, 3 * 8_000_000 + 213_248 + 5);
    assert_eq!(fused.cost, 8_000_000 + 147_712 + 3);

    let d = report::difference(&e).unwrap();
    assert_eq!(d.slab(), "equal");
    assert_eq!(d.launches_saved, 2);
    assert_eq!(d.dram_bytes_saved, 65_536);
    assert_eq!(
        d.line(),
        "fused vs unfused: slab equal (1,196,288 bytes), 2 launches saved, 65,536 DRAM bytes saved"
    );
    // Every candidate computes the same outputs as the program.
    let want = eval(&programs::linear_relu(64, 256, 64).unwrap().hlir());
    for c in &e.candidates {
        assert_same_outputs(&want, &eval(&c.hlir));
    }
}

#[test]
fn large_activations_make_the_fused_slab_smaller() {
    let g = programs::linear_relu(4096, 64, 4096).unwrap();
    let e = explore(&g, "linear-relu");
    let u = e.get("unfused").unwrap().program.figures;
    let f = e.get("fused").unwrap().program.figures;
    // Unfused, t0 and t1 (64 MiB each) are live together at add_bias, after x, w, b and the
    // workspace that t0 overlaps in time; fused, only y (64 MiB) follows the 3 MiB of inputs.
    assert_eq!(u.slab_bytes, 137_379_840);
    assert_eq!(f.slab_bytes, 70_270_976);
    assert_eq!(f.slab_bytes, f.lower_bound);
    let d = report::difference(&e).unwrap();
    assert_eq!(d.slab(), "smaller");
    assert_eq!(d.slab_bytes_saved(), 67_108_864);
    assert_eq!(d.launches_saved, 2);
    assert_eq!(d.dram_bytes_saved, 4 * 4096 * 4096 * 4);
    assert!(
        report::compare_text(&e).contains("fused vs unfused: slab smaller by 67,108,864 bytes")
    );
    assert_eq!(report::compare_json(&e)["fused_vs_unfused"]["slab"], "smaller");
}

#[test]
fn mlp_fuses_every_layer_and_keeps_the_logits_layer_bias_only() {
    let g = programs::mlp(&[64, 128, 64, 10], 32).unwrap();
    let p = g.compile(&fused_options("mlp")).unwrap();
    assert_eq!(epilogues(&p), [Epilogue::ReluBias, Epilogue::ReluBias, Epilogue::Bias]);
    assert_eq!(p.figures.launches, 3);
    assert_eq!(
        buffer_ids(&p),
        [
            "x",
            "w1",
            "b1",
            "w2",
            "b2",
            "w3",
            "b3",
            "workspace0",
            "t0",
            "workspace1",
            "t1",
            "workspace2",
            "y"
        ]
    );
    let e = explore(&g, "mlp");
    let labels: Vec<&str> = e.candidates.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["unfused", "bias", "fused"]);
    let d = report::difference(&e).unwrap();
    assert_eq!(d.launches_saved, 5);
    let want = eval(&g.hlir());
    for c in &e.candidates {
        assert_same_outputs(&want, &eval(&c.hlir));
    }
}

#[test]
fn every_epilogue_is_found() {
    type Build = fn(
        &lumen_compiler::Tensor,
        &lumen_compiler::Tensor,
        &lumen_compiler::Tensor,
    ) -> lumen_compiler::Tensor;
    let cases: [(Build, &[Epilogue], &[&str]); 5] = [
        (|x, w, b| (x.matmul(w) + b).relu(), &[Epilogue::ReluBias], &["unfused", "bias", "fused"]),
        (|x, w, b| (x.matmul(w) + b).gelu(), &[Epilogue::GeluBias], &["unfused", "bias", "fused"]),
        (|x, w, b| x.matmul(w) + b, &[Epilogue::Bias], &["unfused", "bias"]),
        (|x, w, _| x.matmul(w).relu(), &[Epilogue::Relu], &["unfused", "activation"]),
        (|x, w, _| x.matmul(w).gelu(), &[Epilogue::Gelu], &["unfused", "activation"]),
    ];
    for (build, want, labels) in cases {
        let mut cx = Graph::new();
        let x = cx.input("x", [3, 5]);
        let w = cx.weight("w", [5, 7]);
        let b = cx.weight("b", [7]);
        build(&x, &w, &b).output("y");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        assert_eq!(epilogues(&p), want);
        assert_eq!(p.figures.launches, 1);
        // The signature keeps the unused bias.
        assert_eq!(&buffer_ids(&p)[..3], ["x", "w", "b"]);
        let e = explore(&cx, "p");
        let got: Vec<&str> = e.candidates.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(got, labels, "{want:?}");
        for c in &e.candidates {
            assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
        }
    }
}

#[test]
fn a_bias_written_on_the_left_fuses_too() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (&b + x.matmul(&w)).relu().output("y");
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(epilogues(&p), [Epilogue::ReluBias]);
    assert_eq!(reads(&p, 1), ["x", "w", "b"]);
}

#[test]
fn nothing_to_fuse_gives_one_candidate() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let y = cx.input("y", [2, 3]);
    (x + y).relu().output("z");
    let e = explore(&cx, "p");
    assert_eq!(e.candidates.len(), 1);
    assert_eq!(e.candidates[0].label, "unfused");
    assert!(e.candidates[0].picked);
    assert!(report::difference(&e).is_none());
    assert!(report::compare_text(&e).contains("nothing to compare"));
    // compile with fuse still labels the program fused: it went through the fusion pipeline.
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(p.label, "program-fused");
    assert_eq!(p.figures.launches, 2);
}

#[test]
fn a_hand_fused_program_round_trips() {
    let at = SourceLocation::caller();
    let mut h = Hlir::new();
    let x = h.add_op(
        HlirOp::Input { name: "x".into(), shape: vec![4, 8], dtype: lumen_compiler::DType::F32 },
        &[],
        at,
    );
    let w = h.add_op(
        HlirOp::Weight { name: "w".into(), shape: vec![8, 8], dtype: lumen_compiler::DType::F32 },
        &[],
        at,
    );
    let b = h.add_op(
        HlirOp::Weight { name: "b".into(), shape: vec![8], dtype: lumen_compiler::DType::F32 },
        &[],
        at,
    );
    let mm = h.add_op(HlirOp::Matmul { epilogue: Epilogue::Bias }, &[x, w, b], at);
    let r = h.add_op(
        HlirOp::Map(lumen_compiler::ElemOp::Unary(lumen_compiler::UnaryOp::Relu)),
        &[mm],
        at,
    );
    h.add_op(HlirOp::Output { name: "y".into() }, &[r], at);
    let p = fusion::compile_fused(&h, "hand", &CompileOptions::default()).unwrap();
    // lt_bias then relu fuses on to RELU_BIAS.
    assert_eq!(epilogues(&p), [Epilogue::ReluBias]);
    assert_eq!(p.figures.launches, 1);
    let e =
        fusion::explore(&h, "hand", &CompileOptions::default(), &FusionConfig::default()).unwrap();
    for c in &e.candidates {
        assert_same_outputs(&eval(&h), &eval(&c.hlir));
    }
}

#[test]
fn dumps_of_a_fused_compile_are_labelled_fused() {
    let dir = tempfile::tempdir().unwrap();
    let options = CompileOptions {
        name: "linear-relu".into(),
        dump_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let p = programs::linear_relu(64, 256, 64).unwrap().compile(&options).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "linear-relu-fused.llir.dot",
            "linear-relu-fused.llir.txt",
            "linear-relu-fused.plan.svg",
            "linear-relu-fused.plan.txt"
        ]
    );
    let txt = std::fs::read_to_string(dir.path().join("linear-relu-fused.llir.txt")).unwrap();
    assert_eq!(txt, lumen_compiler::dump::llir_text(&p));
    assert!(txt.contains("epilogue=RELU_BIAS"), "{txt}");
}

#[test]
fn compile_hlir_still_lowers_as_is() {
    // compile_hlir never fuses: it lowers the HLIR it is given (the runtime tests rely on it).
    let h = programs::linear_relu(64, 256, 64).unwrap().hlir();
    let p = compile_hlir(&h, "linear-relu", &CompileOptions::default()).unwrap();
    assert_eq!(p.figures.launches, 3);
}

#[test]
fn a_capacity_only_the_fused_plan_meets_refuses_the_others() {
    let g = programs::linear_relu(4096, 64, 4096).unwrap();
    let options = CompileOptions { capacity: Some(100_000_000), ..fused_options("big") };
    let e = fusion::explore(&g.hlir(), "big", &options, &FusionConfig::default()).unwrap();
    let labels: Vec<&str> = e.candidates.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["fused"]);
    let refused: Vec<&str> = e.refused.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(refused, ["unfused", "bias"]);
    assert!(matches!(e.refused[0].1, lumen_compiler::CompileError::Plan(_)));
    assert!(report::compare_text(&e).contains("unfused: refused by the planner: planning failed"));
    // compile with fusion meets the capacity; without, it cannot.
    assert_eq!(g.compile(&options).unwrap().figures.slab_bytes, 70_270_976);
    let err = g.compile(&CompileOptions { fuse: false, ..options.clone() }).unwrap_err();
    assert!(err.to_string().contains("slab capacity 100000000 exceeded"), "{err}");
    // Nothing fits: the unfused candidate's error.
    let tiny = CompileOptions { capacity: Some(1000), ..options };
    let err = g.compile(&tiny).unwrap_err();
    assert!(err.to_string().contains("slab capacity 1000 exceeded"), "{err}");
}

#[test]
fn compile_errors_are_the_same_with_fusion() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [4, 5]);
    x.matmul(&w).relu().output("y");
    let fused = cx.compile(&CompileOptions::default()).unwrap_err();
    let unfused = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap_err();
    assert_eq!(fused, unfused);
    let ok = programs::linear_relu(2, 3, 4).unwrap();
    let bad = ok.compile(&CompileOptions { alignment: 0, ..Default::default() }).unwrap_err();
    assert!(bad.to_string().contains("slab alignment must be positive"), "{bad}");
}

#[test]
fn compiling_twice_is_byte_identical() {
    let g = programs::mlp(&[64, 128, 64, 10], 32).unwrap();
    let a = explore(&g, "mlp");
    let b = explore(&g, "mlp");
    assert_eq!(report::compare_text(&a), report::compare_text(&b));
    assert_eq!(report::compare_json(&a), report::compare_json(&b));
    for (x, y) in a.candidates.iter().zip(&b.candidates) {
        assert_eq!(
            lumen_compiler::dump::llir_text(&x.program),
            lumen_compiler::dump::llir_text(&y.program)
        );
    }
}
