//! The golden plan of SPEC sections 2 and 3: unfused linear-relu, M=64, K=256, N=64.

use lumen_compiler::{
    BinaryOp, BufferRole, CompileOptions, ElemOp, Epilogue, Graph, LlirOp, UnaryOp, View, programs,
};

fn spec_program() -> Graph {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 256]);
    let w = cx.weight("w", [256, 64]);
    let b = cx.weight("b", [64]);
    (x.matmul(w) + b).relu().output("y");
    cx
}

#[test]
fn unfused_linear_relu_matches_the_spec_table() {
    let p = spec_program().compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    let ops: Vec<&str> = p.llir.nodes.iter().map(|n| n.op.name()).collect();
    // SPEC's add_bias is the elementwise add reading the bias [64] broadcast over the rows.
    assert_eq!(ops, ["upload", "lt_matmul", "add", "relu", "readback"]);
    assert_eq!(
        p.llir.nodes[1].op,
        LlirOp::LtMatmul { batch: 1, m: 64, k: 256, n: 64, epilogue: Epilogue::Default }
    );
    assert_eq!(p.llir.nodes[2].op, LlirOp::Map { op: ElemOp::Binary(BinaryOp::Add), len: 4096 });
    let bias = &p.llir.nodes[2].reads[1];
    assert_eq!(p.llir.buffers[bias.buffer].id, "b");
    assert_eq!(bias.view, View { shape: vec![64, 64], strides: vec![0, 1], offset: 0 });
    assert_eq!(p.llir.nodes[3].op, LlirOp::Map { op: ElemOp::Unary(UnaryOp::Relu), len: 4096 });

    // (id, bytes, uses by op name, offset) exactly as SPEC section 2's table.
    let table: [(&str, usize, &[&str], usize); 7] = [
        ("x", 65_536, &["upload", "lt_matmul"], 0),
        ("w", 65_536, &["upload", "lt_matmul"], 65_536),
        ("b", 256, &["upload", "add"], 131_072),
        ("workspace", 1_048_576, &["lt_matmul"], 131_328),
        ("t0", 16_384, &["lt_matmul", "add"], 1_179_904),
        ("t1", 16_384, &["add", "relu"], 0),
        ("y", 16_384, &["relu", "readback"], 16_384),
    ];
    assert_eq!(p.llir.buffers.len(), table.len());
    for (i, (id, bytes, uses, offset)) in table.into_iter().enumerate() {
        let buf = &p.llir.buffers[i];
        assert_eq!(buf.id, id);
        assert_eq!(buf.bytes, bytes, "{id}");
        let names: Vec<&str> = buf.uses.iter().map(|&u| p.llir.nodes[u].op.name()).collect();
        assert_eq!(names, uses, "{id}");
        assert_eq!(p.plan.offsets[i], offset, "{id}");
    }
    let roles: Vec<BufferRole> = p.llir.buffers.iter().map(|b| b.role).collect();
    assert_eq!(
        roles,
        [
            BufferRole::Input,
            BufferRole::Weight,
            BufferRole::Weight,
            BufferRole::Workspace,
            BufferRole::Intermediate,
            BufferRole::Intermediate,
            BufferRole::Output
        ]
    );
    assert_eq!(p.label, "program-unfused");
    assert_eq!(p.figures.nodes, 5);
    assert_eq!(p.figures.launches, 3);
    assert_eq!(p.figures.slab_bytes, 1_196_288);
    assert_eq!(p.figures.naive_bytes, 1_229_056);
    assert_eq!(p.figures.dram_bytes, 213_248);
    // 2*64*64*256 for the product, one FLOP per element for the bias and the relu.
    assert_eq!(p.figures.flops, 2 * 64 * 64 * 256 + 2 * 4096);
    assert_eq!(p.figures.lower_bound, 1_196_288);
}

#[test]
fn builtin_linear_relu_is_the_spec_program() {
    let options = CompileOptions { name: "linear-relu".into(), fuse: false, ..Default::default() };
    let a = programs::linear_relu(64, 256, 64).unwrap().compile(&options).unwrap();
    let b = spec_program().compile(&options).unwrap();
    assert_eq!(a.llir, b.llir);
    assert_eq!(a.plan, b.plan);
    assert_eq!(a.label, "linear-relu-unfused");
}

#[test]
fn dag_edges_follow_node_inputs() {
    let p = spec_program().compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    let edges: Vec<(usize, usize)> =
        p.dag.raw_edges().iter().map(|e| (e.source().index(), e.target().index())).collect();
    // Data edges: add_bias also reads b from upload. The closure is SPEC's chain
    // upload -> lt_matmul -> add_bias -> relu -> readback either way.
    assert_eq!(edges, [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4)]);
}
