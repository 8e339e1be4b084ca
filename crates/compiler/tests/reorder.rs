//! Canonical text: the same program, declared in another op order, dumps byte-identically.

use lumen_compiler::dump::{compiled_json, llir_dot, llir_text, plan_text};
use lumen_compiler::{CompileOptions, Graph, Tensor};
use proptest::prelude::*;

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

/// One op of a random program; operands index earlier values (0..3 are x, w, b).
#[derive(Debug, Clone)]
enum Op {
    Matmul(usize),
    Bias(usize),
    Add(usize, usize),
    Relu(usize),
    Gelu(usize),
}

impl Op {
    fn operands(&self) -> Vec<usize> {
        match *self {
            Op::Matmul(a) | Op::Bias(a) | Op::Relu(a) | Op::Gelu(a) => vec![a],
            Op::Add(a, b) => vec![a, b],
        }
    }
}

/// Random programs over x [4, 8], w [8, 8], b [8]: every value is [4, 8] so every op is valid.
/// Value 0 is x; op `i` makes value `i + 1`.
fn program() -> impl Strategy<Value = (Vec<Op>, Vec<bool>, Vec<u32>)> {
    (1usize..12).prop_flat_map(|n| {
        let ops: Vec<BoxedStrategy<Op>> = (0..n)
            .map(|i| {
                let v = 0..=i; // values available to op i
                prop_oneof![
                    v.clone().prop_map(Op::Matmul),
                    v.clone().prop_map(Op::Bias),
                    (v.clone(), v.clone()).prop_map(|(a, b)| Op::Add(a, b)),
                    v.clone().prop_map(Op::Relu),
                    v.prop_map(Op::Gelu),
                ]
                .boxed()
            })
            .collect();
        (
            ops,
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::vec(any::<u32>(), n),
        )
    })
}

/// Builds the program declaring ops in the topological order that `priority` picks.
fn build(ops: &[Op], outputs: &[bool], priority: &[u32]) -> Graph {
    let n = ops.len();
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 8]);
    let w = cx.weight("w", [8, 8]);
    let b = cx.weight("b", [8]);
    let mut values: Vec<Option<Tensor>> = vec![Some(x)];
    values.resize(n + 1, None);
    let mut done = vec![false; n];
    for _ in 0..n {
        let next = (0..n)
            .filter(|&i| !done[i] && ops[i].operands().iter().all(|&v| values[v].is_some()))
            .min_by_key(|&i| (priority[i], i))
            .unwrap();
        done[next] = true;
        let get = |v: usize| values[v].clone().unwrap();
        let t = match ops[next] {
            Op::Matmul(a) => get(a).matmul(&w),
            Op::Bias(a) => get(a) + &b,
            Op::Add(a, c) => get(a) + get(c),
            Op::Relu(a) => get(a).relu(),
            Op::Gelu(a) => get(a).gelu(),
        };
        if outputs[next] || next == n - 1 {
            t.output(format!("y{next}"));
        }
        values[next + 1] = Some(t);
    }
    cx
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
