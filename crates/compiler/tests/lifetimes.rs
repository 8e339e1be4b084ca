//! Lifetimes handed to the planner: outputs that are also consumed, dead ops, every epilogue.

use lumen_compiler::{
    BinaryOp, BufferRole, CompileOptions, CompiledProgram, DType, ElemOp, Epilogue, Graph, Hlir,
    HlirOp, LlirOp, SourceLocation, UnaryOp, compile_hlir,
};
use lumen_planner::{SlabOptions, verify};

fn check_plan(p: &CompiledProgram) {
    verify(&p.dag, &p.llir.slab_buffers(), &p.plan, &SlabOptions::default()).unwrap();
}

fn buf<'a>(p: &'a CompiledProgram, id: &str) -> (usize, &'a lumen_compiler::LlirBuffer) {
    let i = p.llir.buffers.iter().position(|b| b.id == id).unwrap();
    (i, &p.llir.buffers[i])
}

fn overlaps(p: &CompiledProgram, a: usize, b: usize) -> bool {
    let (oa, ra) = (p.plan.offsets[a], p.plan.reserved[a]);
    let (ob, rb) = (p.plan.offsets[b], p.plan.reserved[b]);
    oa < ob + rb && ob < oa + ra
}

#[test]
fn an_output_also_consumed_lives_until_readback() {
    // h = relu(x w1) is an output AND feeds z = h w2 + ... ; later intermediates must not reuse
    // h's bytes, because readback copies h out after the last launch.
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 64]);
    let w1 = cx.weight("w1", [64, 64]);
    let w2 = cx.weight("w2", [64, 64]);
    let h = x.matmul(&w1).relu().output("h");
    h.matmul(&w2).relu().gelu().relu().output("z");
    let p = cx
        .compile(&CompileOptions { workspace_bytes: 0, fuse: false, ..Default::default() })
        .unwrap();
    check_plan(&p);
    let readback = p.llir.nodes.len() - 1;
    assert_eq!(p.llir.nodes[readback].op, LlirOp::Readback);
    let (hi, hb) = buf(&p, "h");
    assert_eq!(hb.role, BufferRole::Output);
    // Producer (relu, node 2), consumer (the second matmul, node 3) and readback.
    assert_eq!(hb.uses, [2, 3, readback]);
    let readback_reads: Vec<&str> =
        p.llir.nodes[readback].read_buffers().map(|b| p.llir.buffers[b].id.as_str()).collect();
    assert_eq!(readback_reads, ["h", "z"]);
    // Every buffer born after h's consumer is live while h still is: none may share its bytes.
    for (i, b) in p.llir.buffers.iter().enumerate() {
        if i != hi && b.uses.iter().any(|&u| u > 3) {
            assert!(!overlaps(&p, hi, i), "{} overlaps h", b.id);
        }
    }
    // The same chain without the extra output: the first activation (t1) ends at the second
    // matmul, and first fit does reuse its bytes for a later buffer.
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 64]);
    let w1 = cx.weight("w1", [64, 64]);
    let w2 = cx.weight("w2", [64, 64]);
    x.matmul(&w1).relu().matmul(&w2).relu().gelu().relu().output("z");
    let q = cx
        .compile(&CompileOptions { workspace_bytes: 0, fuse: false, ..Default::default() })
        .unwrap();
    check_plan(&q);
    let (ti, tb) = buf(&q, "t1");
    assert_eq!(tb.uses, [2, 3]);
    let reused: Vec<&str> = q
        .llir
        .buffers
        .iter()
        .enumerate()
        .filter(|&(i, b)| i != ti && b.uses.iter().any(|&u| u > 3) && overlaps(&q, ti, i))
        .map(|(_, b)| b.id.as_str())
        .collect();
    assert!(!reused.is_empty(), "nothing reuses t1's bytes");
}

#[test]
fn dead_ops_are_removed_before_planning() {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 256]);
    let w = cx.weight("w", [256, 64]);
    let b = cx.weight("b", [64]);
    let unused = cx.input("unused", [8, 8]);
    let dead = x.matmul(&w).gelu(); // nobody reads it, not an output
    let _dead_too = dead.relu();
    let _dead_leaf_op = unused.relu();
    (x.matmul(&w) + &b).relu().output("y");
    let p = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    check_plan(&p);
    let ops: Vec<&str> = p.llir.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["upload", "lt_matmul", "add", "relu", "readback"]);
    let ids: Vec<&str> = p.llir.buffers.iter().map(|b| b.id.as_str()).collect();
    // The unused input stays in the signature (upload writes it) but takes no launch.
    assert_eq!(ids, ["x", "w", "b", "unused", "workspace", "t0", "t1", "y"]);
    assert_eq!(buf(&p, "unused").1.uses, [0]);
    // The live part plans exactly as the golden program: x, w, b, unused, then the rest.
    assert_eq!(p.figures.launches, 3);
    assert_eq!(p.figures.dram_bytes, 213_248);
    assert_eq!(p.plan.offsets[0..3], [0, 65_536, 131_072]);
}

#[test]
fn every_epilogue_lowers_to_one_lt_matmul() {
    // The fusion issue produces these HLIR nodes; lowering must already handle them.
    for epilogue in Epilogue::ALL {
        let here = SourceLocation::caller();
        let mut h = Hlir::new();
        let x = h.add_op(
            HlirOp::Input { name: "x".into(), shape: vec![64, 256], dtype: DType::F32 },
            &[],
            here,
        );
        let w = h.add_op(
            HlirOp::Weight { name: "w".into(), shape: vec![256, 64], dtype: DType::F32 },
            &[],
            here,
        );
        let b = h.add_op(
            HlirOp::Weight { name: "b".into(), shape: vec![64], dtype: DType::F32 },
            &[],
            here,
        );
        let operands = if epilogue.has_bias() { vec![x, w, b] } else { vec![x, w] };
        let mm = h.add_op(HlirOp::Matmul { epilogue }, &operands, here);
        h.add_op(HlirOp::Output { name: "y".into() }, &[mm], here);
        let options = CompileOptions { fuse: true, ..Default::default() };
        let p = compile_hlir(&h, "linear-relu", &options).unwrap();
        check_plan(&p);
        assert_eq!(p.label, "linear-relu-fused");
        let node = &p.llir.nodes[1];
        assert_eq!(node.op, LlirOp::LtMatmul { batch: 1, m: 64, k: 256, n: 64, epilogue });
        let reads: Vec<&str> = node.read_buffers().map(|r| p.llir.buffers[r].id.as_str()).collect();
        let want: &[&str] = if epilogue.has_bias() { &["x", "w", "b"] } else { &["x", "w"] };
        assert_eq!(reads, want, "{epilogue:?}");
        assert_eq!(p.figures.launches, 1);
        if epilogue == Epilogue::ReluBias {
            // SPEC section 3: the fused golden program.
            let ids: Vec<&str> = p.llir.buffers.iter().map(|b| b.id.as_str()).collect();
            assert_eq!(ids, ["x", "w", "b", "workspace", "y"]);
            assert_eq!(p.figures.slab_bytes, 1_196_288);
            assert_eq!(p.figures.dram_bytes, 147_712);
        }
    }
}

#[test]
fn a_bias_epilogue_checks_the_bias_shape() {
    let here = SourceLocation::caller();
    let mut h = Hlir::new();
    let x = h.add_op(
        HlirOp::Input { name: "x".into(), shape: vec![2, 4], dtype: DType::F32 },
        &[],
        here,
    );
    let w = h.add_op(
        HlirOp::Weight { name: "w".into(), shape: vec![4, 5], dtype: DType::F32 },
        &[],
        here,
    );
    let b =
        h.add_op(HlirOp::Weight { name: "b".into(), shape: vec![3], dtype: DType::F32 }, &[], here);
    let mm = h.add_op(HlirOp::Matmul { epilogue: Epilogue::ReluBias }, &[x, w, b], here);
    h.add_op(HlirOp::Output { name: "y".into() }, &[mm], here);
    let err =
        compile_hlir(&h, "p", &CompileOptions { fuse: false, ..Default::default() }).unwrap_err();
    assert!(
        matches!(err, lumen_compiler::CompileError::ShapeMismatch { op: "matmul bias", .. }),
        "{err:?}"
    );
}

#[test]
fn several_matmuls_get_numbered_workspaces_and_share_them_in_time() {
    let p = lumen_compiler::programs::mlp(&[64, 128, 64, 10], 32)
        .unwrap()
        .compile(&CompileOptions { fuse: false, ..Default::default() })
        .unwrap();
    check_plan(&p);
    let ws: Vec<(&str, &[usize])> = p
        .llir
        .buffers
        .iter()
        .filter(|b| b.role == BufferRole::Workspace)
        .map(|b| (b.id.as_str(), b.uses.as_slice()))
        .collect();
    assert_eq!(ws, [("workspace0", &[1][..]), ("workspace1", &[4][..]), ("workspace2", &[7][..])]);
    // Each workspace lives only during its matmul, so the three reuse the same bytes.
    let offsets: Vec<usize> = ["workspace0", "workspace1", "workspace2"]
        .iter()
        .map(|id| p.plan.offsets[buf(&p, id).0])
        .collect();
    assert!(offsets.iter().all(|&o| o == offsets[0]), "{offsets:?}");
    assert_eq!(p.figures.launches, 8);
    assert_eq!(p.figures.slab_bytes, p.figures.lower_bound);
}

#[test]
fn residual_add_of_equal_shapes_lowers_to_add() {
    let mut cx = Graph::new();
    let x = cx.input("x", [8, 16]);
    let w = cx.weight("w", [16, 16]);
    (x.matmul(&w).gelu() + &x).output("y");
    let p = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    check_plan(&p);
    let ops: Vec<LlirOp> = p.llir.nodes.iter().map(|n| n.op).collect();
    assert_eq!(
        ops,
        [
            LlirOp::Upload,
            LlirOp::LtMatmul { batch: 1, m: 8, k: 16, n: 16, epilogue: Epilogue::Default },
            LlirOp::Map { op: ElemOp::Unary(UnaryOp::Gelu), len: 128 },
            LlirOp::Map { op: ElemOp::Binary(BinaryOp::Add), len: 128 },
            LlirOp::Readback
        ]
    );
    // x is read by the matmul and by the add: it lives until the add.
    assert_eq!(buf(&p, "x").1.uses, [0, 1, 3]);
    assert_eq!(p.llir.nodes[3].inputs, [0, 2]);
}
