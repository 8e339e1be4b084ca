//! Tensor programs beyond MLPs: every primitive's shape rule and error, views that cost no
//! copy, names that survive into the LLIR, fusion inside a transformer (and where it must not
//! happen), and the planner keeping parallel branches apart.

use lumen_compiler::dump::{llir_text, plan_text};
use lumen_compiler::{
    CompileError, CompileOptions, CompiledProgram, DType, Epilogue, Graph, LlirOp,
    multi_head_attention, programs, scaled_dot_product_attention,
};
use lumen_planner::SlabOptions;

fn unfused() -> CompileOptions {
    CompileOptions { fuse: false, ..Default::default() }
}

fn op_names(p: &CompiledProgram) -> Vec<&'static str> {
    p.llir.nodes.iter().map(|n| n.op.name()).collect()
}

fn epilogues(p: &CompiledProgram) -> Vec<Epilogue> {
    p.llir
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            LlirOp::LtMatmul { epilogue, .. } => Some(epilogue),
            _ => None,
        })
        .collect()
}

// ---- shapes of every primitive -----------------------------------------------------------------

#[test]
fn every_primitive_infers_its_shape_eagerly() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3, 4]);
    let v = cx.input("v", [4]);
    let ids = cx.input_typed("ids", [2, 5], DType::I64);
    let table = cx.weight("table", [10, 6]);
    let shape = |t: &lumen_compiler::Tensor| t.shape().unwrap();
    assert_eq!(shape(&(&x + &v)), [2, 3, 4]);
    assert_eq!(shape(&(1.0 - &x)), [2, 3, 4]);
    assert_eq!(shape(&(-&x).exp().log().sqrt().recip().tanh().erf()), [2, 3, 4]);
    assert_eq!(shape(&x.maximum(0.0).less_than(&v).equal(1.0)), [2, 3, 4]);
    assert_eq!(shape(&x.less_than(0.5).select(&x, 0.0)), [2, 3, 4]);
    assert_eq!(shape(&x.sum(1, false)), [2, 4]);
    assert_eq!(shape(&x.max(-1, true)), [2, 3, 1]);
    assert_eq!(shape(&x.mean(0, false)), [3, 4]);
    assert_eq!(shape(&x.reshape([6, 4])), [6, 4]);
    assert_eq!(shape(&x.permute(&[2, 0, 1])), [4, 2, 3]);
    assert_eq!(shape(&x.transpose(-1, -2)), [2, 4, 3]);
    assert_eq!(shape(&v.expand([3, 4])), [3, 4]);
    assert_eq!(shape(&x.slice(-1, 1, 3)), [2, 3, 2]);
    assert_eq!(shape(&x.unsqueeze(1)), [2, 1, 3, 4]);
    assert_eq!(shape(&cx.concat(&[&x, &x.slice(1, 0, 1)], 1)), [2, 4, 4]);
    assert_eq!(shape(&x.matmul(x.transpose(-1, -2))), [2, 3, 3]);
    assert_eq!(shape(&x.matmul(cx.weight("w", [4, 7]))), [2, 3, 7]);
    assert_eq!(shape(&table.gather(&ids)), [2, 5, 6]);
    assert_eq!(ids.dtype(), Some(DType::I64));
    assert_eq!(shape(&x.softmax(-1)), [2, 3, 4]);
    assert_eq!(shape(&x.log_softmax(1)), [2, 3, 4]);
    assert_eq!(shape(&x.gelu_erf().sigmoid()), [2, 3, 4]);
    let g = cx.weight("g", [4]);
    assert_eq!(shape(&x.layer_norm(&g, &v, 1e-5)), [2, 3, 4]);
    assert_eq!(shape(&x.rms_norm(&g, 1e-6)), [2, 3, 4]);
    assert!(cx.recorded_error().is_none(), "{:?}", cx.recorded_error());
}

#[test]
fn scalars_are_one_constant_per_value() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 4]);
    ((&x * 0.5) + (&x * 0.5) + 1e-5).output("y");
    let p = cx.compile(&unfused()).unwrap();
    let consts: Vec<&str> = p
        .llir
        .buffers
        .iter()
        .filter(|b| matches!(b.role, lumen_compiler::BufferRole::Constant(_)))
        .map(|b| b.id.as_str())
        .collect();
    assert_eq!(consts, ["const(1e-5)", "const(0.5)"]);
    let text = llir_text(&p);
    assert!(text.contains("buffer const(0.5) f32[] constant bytes=4"), "{text}");
    assert!(text.contains("const(0.5){shape=[4, 4] strides=[0, 0]}"), "{text}");
}

// ---- errors: typed, naming the op, the shapes and the user's line ------------------------------

fn first_error(cx: &Graph) -> CompileError {
    cx.compile(&CompileOptions::default()).unwrap_err()
}

#[test]
fn an_axis_out_of_range_names_the_op_the_axis_and_the_line() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let line = line!() + 1;
    x.sum(2, false).output("y");
    let err = first_error(&cx);
    match &err {
        CompileError::AxisOutOfRange { op: "sum", axis: 2, rank: 2, location } => {
            assert_eq!(location.line(), line);
            assert!(location.file().ends_with("tensor_programs.rs"), "{location}");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().starts_with("sum: axis 2 is out of range for rank 2 (at "), "{err}");
    for build in [
        |x: &lumen_compiler::Tensor| x.softmax(-3),
        |x: &lumen_compiler::Tensor| x.transpose(0, 5),
        |x: &lumen_compiler::Tensor| x.slice(-4, 0, 1),
    ] {
        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        build(&x).output("y");
        assert!(matches!(first_error(&cx), CompileError::AxisOutOfRange { .. }));
    }
}

#[test]
fn movement_errors_are_typed() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    x.reshape([4, 2]).output("y");
    assert_eq!(
        first_error(&cx).to_string().split(" (at ").next().unwrap(),
        "reshape: cannot view [2, 3] as [4, 2]: element counts differ"
    );
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3, 4]);
    x.permute(&[0, 0, 1]).output("y");
    assert!(matches!(first_error(&cx), CompileError::BadPermutation { rank: 3, .. }));
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3, 4]);
    x.permute(&[0, 1]).output("y");
    assert!(
        first_error(&cx)
            .to_string()
            .starts_with("permute: [0, 1] is not a permutation of the 3 axes")
    );
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    x.expand([4, 3, 2]).output("y");
    assert!(matches!(first_error(&cx), CompileError::ShapeMismatch { op: "expand", .. }));
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    x.slice(1, 2, 5).output("y");
    assert_eq!(
        first_error(&cx).to_string().split(" (at ").next().unwrap(),
        "slice: 2..5 of axis 1 is out of range for its length 3"
    );
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    cx.concat(&[&x, &x.transpose(0, 1)], 0).output("y");
    assert!(matches!(first_error(&cx), CompileError::ShapeMismatch { op: "concat", .. }));
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 3, 4]);
    let b = cx.input("b", [5, 4, 6]);
    a.matmul(&b).output("y");
    let err = first_error(&cx).to_string();
    assert!(err.contains("batch dimensions [2] and [5] do not broadcast"), "{err}");
}

#[test]
fn gather_needs_integer_ids_and_ids_feed_nothing_else() {
    let mut cx = Graph::new();
    let table = cx.weight("table", [10, 4]);
    let ids = cx.input("ids", [3]);
    table.gather(&ids).output("y");
    assert_eq!(
        first_error(&cx).to_string().split(" (at ").next().unwrap(),
        "gather: operand 1 is f32, expected i32 or i64"
    );
    let mut cx = Graph::new();
    let ids = cx.input_typed("ids", [3], DType::I32);
    (ids + 1.0).output("y");
    assert!(matches!(first_error(&cx), CompileError::DType { op: "add", operand: 0, .. }));
}

// ---- views: movement costs no copy -------------------------------------------------------------

#[test]
fn a_transposed_operand_is_read_through_its_view() {
    let mut cx = Graph::new();
    let q = cx.input("q", [2, 4, 8, 16]);
    let k = cx.input("k", [2, 4, 8, 16]);
    q.matmul(k.transpose(-1, -2)).output("scores");
    let p = cx.compile(&unfused()).unwrap();
    assert_eq!(op_names(&p), ["upload", "lt_matmul", "readback"], "no transpose kernel");
    let mm = &p.llir.nodes[1];
    assert_eq!(
        mm.op,
        LlirOp::LtMatmul { batch: 8, m: 8, k: 16, n: 8, epilogue: Epilogue::Default }
    );
    assert_eq!(mm.reads[1].view.shape, [8, 16, 8]);
    assert_eq!(mm.reads[1].view.strides, [128, 1, 16], "k^T: unit stride down the rows");
    let text = llir_text(&p);
    assert!(
        text.contains("reads=[q{shape=[8, 8, 16]}, k{shape=[8, 16, 8] strides=[128, 1, 16]}]"),
        "{text}"
    );
}

#[test]
fn a_linear_layer_over_a_batch_is_one_gemm() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 5, 8]);
    let w = cx.weight("w", [8, 3]);
    let b = cx.weight("b", [3]);
    x.linear(&w, Some(&b)).relu().output("y");
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(op_names(&p), ["upload", "lt_matmul", "readback"]);
    assert_eq!(
        p.llir.nodes[1].op,
        LlirOp::LtMatmul { batch: 1, m: 10, k: 8, n: 3, epilogue: Epilogue::ReluBias }
    );
    assert_eq!(p.llir.buffer("y").unwrap().shape, [2, 5, 3]);
}

#[test]
fn reshapes_of_contiguous_data_are_views_and_only_impossible_ones_copy() {
    // Split heads and move them forward: views. Merge them back: one copy.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 5, 8]);
    let heads = x.relu().reshape([2, 5, 2, 4]).permute(&[0, 2, 1, 3]);
    let scaled = &heads * 2.0;
    scaled.permute(&[0, 2, 1, 3]).reshape([2, 5, 8]).output("y");
    heads.reshape([2, 2, 20]).exp().output("z");
    let p = cx.compile(&unfused()).unwrap();
    // The mul runs over the heads-first view, so its buffer is [2, 2, 5, 4]: merging the
    // heads back (y) and folding heads into rows (z) both cross permuted axes and copy; the
    // split, the permutes and the broadcast constant are views.
    let ops = op_names(&p);
    assert_eq!(ops, ["upload", "relu", "mul", "contiguous", "exp", "contiguous", "readback"]);
    let text = llir_text(&p);
    assert!(
        text.contains(
            "mul len=80 inputs=[0, 1] reads=[t0{shape=[2, 2, 5, 4] strides=[40, 4, 8, 1]}"
        ),
        "{text}"
    );
    // y is the copy's own buffer (the reshape that needed it), taken over whole.
    assert!(text.contains("contiguous len=80 inputs=[2] reads=[t1{shape=[2, 5, 2, 4] strides=[40, 4, 20, 1]}] writes=[y]"), "{text}");
}

#[test]
fn an_output_read_through_a_view_is_copied_once() {
    let mut cx = Graph::new();
    let x = cx.input("x", [3, 4]);
    let r = x.relu();
    r.transpose(0, 1).output("t");
    r.reshape([12]).output("flat");
    let p = cx.compile(&unfused()).unwrap();
    assert_eq!(op_names(&p), ["upload", "relu", "contiguous", "readback"]);
    assert_eq!(p.llir.buffer("flat").unwrap().shape, [12], "the relu's own buffer, renamed");
    assert_eq!(p.llir.buffer("t").unwrap().shape, [4, 3]);
}

// ---- names survive into the LLIR and the plan --------------------------------------------------

fn attention_with_names(extra: bool) -> Graph {
    let mut cx = Graph::new();
    let q = cx.input("q", [1, 2, 4, 8]);
    let k = cx.input("k", [1, 2, 4, 8]);
    let v = cx.input("v", [1, 2, 4, 8]);
    let scores = (q.matmul(k.transpose(-1, -2)) * 0.25).name("scores");
    let probs = scores.softmax(-1).name("probs");
    let out = probs.matmul(&v);
    let out = if extra { out.relu() } else { out };
    out.output("out");
    cx
}

#[test]
fn named_tensors_keep_their_names_and_dumps_diff_small() {
    let a = attention_with_names(false).compile(&unfused()).unwrap();
    let ids: Vec<&str> = a.llir.buffers.iter().map(|b| b.id.as_str()).collect();
    assert!(ids.contains(&"scores") && ids.contains(&"probs"), "{ids:?}");
    let plan = plan_text(&a);
    assert!(plan.lines().any(|l| l.starts_with("scores ")), "{plan}");
    // One more op at the end changes the dump only around it.
    let b = attention_with_names(true).compile(&unfused()).unwrap();
    let (ta, tb) = (llir_text(&a), llir_text(&b));
    let gone: Vec<&str> = ta.lines().filter(|l| !tb.lines().any(|m| m == *l)).collect();
    // The counts, the last matmul (it now writes t5, not out) and the readback's input.
    assert_eq!(gone.len(), 3, "{gone:?}");
    // A duplicate name is an error at the line that named it second.
    let mut cx = Graph::new();
    let x = cx.input("x", [2]);
    x.relu().name("h");
    x.exp().name("h").output("y");
    assert!(matches!(
        cx.compile(&unfused()).unwrap_err(),
        CompileError::BadName { kind: "tensor", .. }
    ));
}

// ---- fusion inside a transformer ----------------------------------------------------------------

fn small_transformer() -> Graph {
    programs::transformer(programs::TransformerSizes {
        batch: 2,
        seq: 4,
        width: 8,
        heads: 2,
        ffn: 16,
        blocks: 1,
    })
    .unwrap()
}

#[test]
fn qkv_and_ffn_projections_become_epilogues() {
    let p = small_transformer().compile(&CompileOptions::default()).unwrap();
    let e = epilogues(&p);
    use Epilogue::*;
    // Q, K, V (order by structure), QK^T, PV, O, FFN1 (tanh GELU), FFN2.
    assert_eq!(e, [Bias, Bias, Bias, Default, Default, Bias, GeluBias, Bias], "{}", llir_text(&p));
    let unfused = small_transformer().compile(&unfused()).unwrap();
    assert!(p.figures.launches < unfused.figures.launches);
    assert!(p.figures.dram_bytes < unfused.figures.dram_bytes);
}

#[test]
fn erf_gelu_is_never_gelu_bias() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 8]);
    let w = cx.weight("w", [8, 16]);
    let b = cx.weight("b", [16]);
    x.linear(&w, Some(&b)).gelu_erf().output("y");
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(epilogues(&p), [Epilogue::Bias], "{}", llir_text(&p));
    assert!(op_names(&p).contains(&"erf"));
}

#[test]
fn a_batched_product_never_takes_a_bias_epilogue() {
    // scores [B, H, S, S] + a bias over the last axis: legal NumPy, but a batched product
    // (both operands 3-D+) is not one GEMM, so the add stays an add.
    let mut cx = Graph::new();
    let q = cx.input("q", [2, 3, 4, 5]);
    let k = cx.input("k", [2, 3, 4, 5]);
    let bias = cx.weight("bias", [4]);
    (q.matmul(k.transpose(-1, -2)) + &bias).relu().output("y");
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert!(epilogues(&p).iter().all(|e| !e.has_bias()), "{}", llir_text(&p));
    assert!(op_names(&p).contains(&"add"));
}

#[test]
fn attention_composite_matches_its_definition() {
    let mut cx = Graph::new();
    let x = cx.input("x", [1, 4, 8]);
    let w: Vec<_> = ["q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "o.w", "o.b"]
        .iter()
        .map(|n| cx.weight(*n, if n.ends_with(".w") { vec![8, 8] } else { vec![8] }))
        .collect();
    let refs = [&w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7]];
    multi_head_attention(&x, refs, 2, None).unwrap().output("y");
    assert!(multi_head_attention(&x, refs, 3, None).is_err(), "8 is not a multiple of 3");
    let mask = cx.input("mask", [4, 4]);
    scaled_dot_product_attention(&x, &x, &x, Some(&mask)).output("z");
    cx.compile(&CompileOptions::default()).unwrap();
}

// ---- the planner keeps parallel branches apart --------------------------------------------------

#[test]
fn parallel_qkv_branches_never_alias_and_the_plan_verifies() {
    for fuse in [false, true] {
        let p =
            small_transformer().compile(&CompileOptions { fuse, ..Default::default() }).unwrap();
        let options = SlabOptions { alignment: 256, ..SlabOptions::default() };
        lumen_planner::verify(&p.dag, &p.llir.slab_buffers(), &p.plan, &options)
            .unwrap_or_else(|e| panic!("fuse={fuse}: {e}"));
        // The Q, K and V projections all read the same normalised input: three parallel
        // branches whose outputs (and workspaces) must be pairwise disjoint in the slab.
        let projections: Vec<usize> = p
            .llir
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n.op, LlirOp::LtMatmul { batch: 1, n: 8, k: 8, .. }))
            .map(|(i, _)| i)
            .take(3)
            .collect();
        assert_eq!(projections.len(), 3);
        let inputs: Vec<&Vec<usize>> =
            projections.iter().map(|&i| &p.llir.nodes[i].inputs).collect();
        assert!(inputs.windows(2).all(|w| w[0] == w[1]), "Q, K, V share their producer");
        let mut spans: Vec<(usize, usize, &str)> = Vec::new();
        for &i in &projections {
            let node = &p.llir.nodes[i];
            for b in node.writes.iter().copied().chain(node.workspace) {
                let at = p.plan.offsets[b];
                spans.push((at, at + p.plan.reserved[b], &p.llir.buffers[b].id));
            }
        }
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "fuse={fuse}: {} and {} overlap", a.2, b.2);
            }
        }
        assert!(p.figures.slab_bytes >= p.figures.lower_bound);
    }
}

// ---- snapshots ----------------------------------------------------------------------------------

#[test]
fn transformer_dumps_are_pinned() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for fuse in [false, true] {
            let options =
                CompileOptions { fuse, name: "transformer".to_string(), ..Default::default() };
            let p = small_transformer().compile(&options).unwrap();
            let label = if fuse { "fused" } else { "unfused" };
            insta::assert_snapshot!(format!("compiler_transformer_{label}_llir"), llir_text(&p));
            insta::assert_snapshot!(format!("compiler_transformer_{label}_plan"), plan_text(&p));
        }
    });
}

// ---- found by a first-time user --------------------------------------------------------------

#[test]
fn names_are_checked_at_the_name_call_and_only_computed_tensors_take_one() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let e = x.exp();
    let line = line!() + 1;
    e.name("bad name").output("y");
    match first_error(&cx) {
        CompileError::BadName { kind: "tensor", location, .. } => assert_eq!(location.line(), line),
        other => panic!("{other:?}"),
    }
    for build in [
        |x: &lumen_compiler::Tensor| x.transpose(0, 1).name("xt").relu(),
        |x: &lumen_compiler::Tensor| x.name("alias").relu(),
    ] {
        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        build(&x).output("y");
        let err = first_error(&cx).to_string();
        assert!(err.starts_with("tensor name "), "{err}");
        assert!(err.contains("view") || err.contains("not a computed tensor"), "{err}");
    }
}

#[test]
fn composites_report_errors_in_their_own_name() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 6]);
    x.softmax(2).output("y");
    assert!(first_error(&cx).to_string().starts_with("softmax: axis 2 is out of range for rank 2"));
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 6]);
    let g = cx.weight("g", [5]);
    let b = cx.weight("b", [6]);
    x.layer_norm(&g, &b, 1e-5).output("y");
    let err = first_error(&cx).to_string();
    assert!(
        err.starts_with("layer_norm: shapes [2, 6] and [5] do not match: gamma must be [6]"),
        "{err}"
    );
    let mut cx = Graph::new();
    let x = cx.input("x", [3, 6]);
    let w: Vec<_> = (0..8).map(|i| cx.weight(format!("w{i}"), [6])).collect();
    let refs = [&w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7]];
    let err = multi_head_attention(&x, refs, 2, None).unwrap_err().to_string();
    assert!(err.contains("x must be [B, S, D], got [3, 6]"), "{err}");
}

#[test]
fn a_foreign_tensor_on_the_left_is_reported_by_both_graphs() {
    let mut a = Graph::new();
    let mut b = Graph::new();
    let x = a.input("x", [2]);
    let y = b.input("y", [2]);
    (y + x).output("o");
    for g in [&a, &b] {
        let err = g.compile(&CompileOptions::default()).unwrap_err();
        assert!(matches!(err, CompileError::ForeignTensor { op: "add", .. }), "{err:?}");
    }
}
