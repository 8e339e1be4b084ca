//! Canonical text: the same program, declared in another op order, dumps byte-identically.

mod random_program;

use lumen_compiler::dump::{compiled_json, llir_dot, llir_text, plan_text};
use lumen_compiler::{CompileOptions, Graph, Tensor};
use proptest::prelude::*;
use random_program::{Draw, Op, build};

fn options() -> CompileOptions {
    CompileOptions { name: "two-heads".into(), fuse: false, ..Default::default() }
}

/// Leaves in the same order (the signature), ops and outputs declared in either order.
fn two_heads(heads_reversed: bool) -> Graph {
    let mut cx = Graph::new();
    let x = cx.input("x", [8, 16]);
    let w1 = cx.weight("w1", [16, 16]);
    let b1 = cx.weight("b1", [16]);
    let w2 = cx.weight("w2", [16, 16]);
    let b2 = cx.weight("b2", [16]);
    let head1 = |x: &Tensor| (x.matmul(&w1) + &b1).relu();
    let head2 = |x: &Tensor| (x.matmul(&w2) + &b2).gelu();
    if heads_reversed {
        let g = head2(&x);
        let r = head1(&x);
        (&g + &x).output("residual");
        r.output("relu_head");
        g.output("gelu_head");
    } else {
        let r = head1(&x);
        r.output("relu_head");
        let g = head2(&x).output("gelu_head");
        (g + &x).output("residual");
    }
    cx
}

#[test]
fn another_declaration_order_gives_identical_text() {
    let a = two_heads(false).compile(&options()).unwrap();
    let b = two_heads(true).compile(&options()).unwrap();
    // The HLIRs really differ in node order.
    assert_ne!(two_heads(false).hlir().to_string(), two_heads(true).hlir().to_string());
    assert_eq!(llir_text(&a), llir_text(&b));
    assert_eq!(plan_text(&a), plan_text(&b));
    assert_eq!(llir_dot(&a), llir_dot(&b));
    assert_eq!(compiled_json(&a), compiled_json(&b));
    assert_eq!(a.plan, b.plan);
}

#[test]
fn compiling_twice_is_byte_identical() {
    let g = two_heads(false);
    assert_eq!(
        llir_text(&g.compile(&options()).unwrap()),
        llir_text(&g.compile(&options()).unwrap())
    );
}

#[test]
fn the_signature_order_is_kept() {
    // Inputs and weights are uploaded in declaration order, like a function's parameters.
    let p = two_heads(true).compile(&options()).unwrap();
    let uploaded: Vec<&str> =
        p.llir.nodes[0].writes.iter().map(|&b| p.llir.buffers[b].id.as_str()).collect();
    assert_eq!(uploaded, ["x", "w1", "b1", "w2", "b2"]);
}

/// Random programs of up to 11 ops, every op equally likely (a bias always on the right).
fn program() -> impl Strategy<Value = (Vec<Op>, Vec<bool>, Vec<u32>)> {
    random_program::program(Draw { max_ops: 11, weights: [1; 5], bias_either_side: false })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn declaration_order_never_changes_the_text(
        (ops, outputs, p1) in program(),
        p2 in proptest::collection::vec(any::<u32>(), 12),
    ) {
        let opts = CompileOptions { workspace_bytes: 4096, fuse: false, ..Default::default() };
        let a = build(&ops, &outputs, &p1).compile(&opts).unwrap();
        let b = build(&ops, &outputs, &p2[..ops.len()]).compile(&opts).unwrap();
        prop_assert_eq!(llir_text(&a), llir_text(&b));
        prop_assert_eq!(plan_text(&a), plan_text(&b));
        lumen_planner::verify(&a.dag, &a.llir.slab_buffers(), &a.plan, &Default::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Canonical numbering is topological and uses are sorted.
        for (i, node) in a.llir.nodes.iter().enumerate() {
            prop_assert!(node.inputs.iter().all(|&j| j < i));
        }
        for buf in &a.llir.buffers {
            prop_assert!(!buf.uses.is_empty());
            prop_assert!(buf.uses.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
