//! Fusion legality, distilled from public bug reports in other compilers (a bias folded into a
//! GEMM epilogue along the wrong axis, an activation moved across an add, a product fused away
//! from a consumer that needed it, a scalar treated as a vector), plus the runner's bounds and
//! the cost model's monotonicity.

mod fusion_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use egg::{Extractor, Id, Language, RecExpr, Runner};
use fusion_common::{assert_same_outputs, epilogues, eval, reads};
use lumen_compiler::fusion::analysis::{
    BiasBroadcast, ShapeAnalysis, add_shape, bias_broadcast, bias_is_fusable,
};
use lumen_compiler::fusion::cost::{CostModel, ExtractionCost, Fusions};
use lumen_compiler::fusion::egraph::FusionEGraph;
use lumen_compiler::fusion::lang::FusionLang;
use lumen_compiler::fusion::rules::{FusionRewrite, RuleSet, rules};
use lumen_compiler::fusion::{self, FusionConfig, Limits, Stop};
use lumen_compiler::{
    BinaryOp, CompileOptions, ElemOp, Epilogue, Graph, LlirOp, TensorType, UnaryOp, programs,
};

/// Saturates `expr` (leaves named in `leaves`) with the default rules (and idempotence when
/// asked) and returns the e-graph and the expression's e-class.
fn saturate(expr: &str, leaves: &[(&str, &[usize])], idempotence: bool) -> (FusionEGraph, Id) {
    let shapes: BTreeMap<String, TensorType> =
        leaves.iter().map(|(n, s)| (n.to_string(), TensorType::f32(s.to_vec()))).collect();
    let mut eg = FusionEGraph::new(ShapeAnalysis::new(shapes));
    let root = eg.add_expr(&expr.parse::<RecExpr<FusionLang>>().unwrap());
    let set = RuleSet { relu_idempotence: idempotence };
    let runner = Runner::default().with_egraph(eg).run(&rules(&set).unwrap());
    assert!(matches!(runner.stop_reason, Some(egg::StopReason::Saturated)));
    let root = runner.egraph.find(root);
    (runner.egraph, root)
}

fn any_node(eg: &FusionEGraph, pred: impl Fn(&FusionLang) -> bool) -> bool {
    eg.classes().any(|c| c.nodes.iter().any(&pred))
}

fn explore(cx: &Graph) -> fusion::Exploration {
    fusion::explore(&cx.hlir(), "p", &CompileOptions::default(), &FusionConfig::default()).unwrap()
}

// --- A row bias [M, 1] on a square [2, 2] output is not fused ---------------------------------

#[test]
fn a_row_bias_on_a_square_output_is_not_a_last_axis_bias() {
    // [M, 1] indexes the rows (axis 0): one value per row. cuBLASLt's BIAS is one value per
    // column. On a square output the element counts agree, which is exactly the trap.
    assert_eq!(bias_broadcast(&[2, 1], &[2, 2]), BiasBroadcast::Axes(vec![0]));
    assert!(!bias_is_fusable(&[2, 1], &[2, 2]));
    assert_eq!(bias_broadcast(&[2], &[2, 2]), BiasBroadcast::LastAxis);
    assert!(bias_is_fusable(&[2], &[2, 2]));
    // [1, N] indexes the right axis but is not cuBLASLt's vector.
    assert_eq!(bias_broadcast(&[1, 2], &[2, 2]), BiasBroadcast::Axes(vec![1]));
    assert!(!bias_is_fusable(&[1, 2], &[2, 2]));
    assert_eq!(bias_broadcast(&[2, 2], &[2, 2]), BiasBroadcast::Elementwise);
    assert_eq!(bias_broadcast(&[3], &[2, 2]), BiasBroadcast::Incompatible);
    assert_eq!(bias_broadcast(&[1, 2, 2], &[2, 2]), BiasBroadcast::Incompatible);
}

#[test]
fn the_rule_condition_alone_refuses_a_row_bias() {
    // The analysis accepts the broadcast add (its shape is [2, 2]); only the rule's condition
    // keeps it out of the epilogue.
    let leaves: &[(&str, &[usize])] = &[("x", &[2, 3]), ("w", &[3, 2]), ("r", &[2, 1])];
    let (eg, root) = saturate("(relu (add (matmul x w) r))", leaves, false);
    assert_eq!(eg[root].data.shape, Some(vec![2, 2]));
    assert!(!any_node(&eg, |n| matches!(n, FusionLang::LtBias(_))));
    assert!(!any_node(&eg, |n| matches!(n, FusionLang::LtReluBias(_))));
    // The same program with a [2] bias fuses.
    let leaves: &[(&str, &[usize])] = &[("x", &[2, 3]), ("w", &[3, 2]), ("b", &[2])];
    let (eg, root) = saturate("(relu (add (matmul x w) b))", leaves, false);
    assert!(eg[root].nodes.iter().any(|n| matches!(n, FusionLang::LtReluBias(_))));
}

#[test]
fn the_dsl_broadcasts_a_row_bias_but_never_fuses_it() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 2]);
    let r = cx.weight("r", [2, 1]);
    (x.matmul(&w) + &r).relu().output("y");
    let e = explore(&cx);
    for c in &e.candidates {
        assert!(!epilogues(&c.program).iter().any(|e| e.has_bias()), "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
}

// --- add(relu(matmul), b) is never RELU_BIAS ---------------------------------------------------

#[test]
fn relu_then_bias_is_never_relu_bias() {
    let leaves: &[(&str, &[usize])] = &[("x", &[4, 3]), ("w", &[3, 5]), ("b", &[5])];
    let (eg, root) = saturate("(add (relu (matmul x w)) b)", leaves, true);
    assert!(!any_node(&eg, |n| matches!(n, FusionLang::LtReluBias(_) | FusionLang::LtBias(_))));
    // relu(matmul) itself may become RELU; the add stays an add.
    assert!(any_node(&eg, |n| matches!(n, FusionLang::LtRelu(_))));
    assert!(eg[root].nodes.iter().all(|n| matches!(n, FusionLang::Binary(BinaryOp::Add, _))));

    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (x.matmul(&w).relu() + &b).output("y");
    let e = explore(&cx);
    for c in &e.candidates {
        assert!(!epilogues(&c.program).iter().any(|e| e.has_bias()), "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
    let p = &e.picked().unwrap().program;
    assert_eq!(epilogues(p), [Epilogue::Relu]);
    assert_eq!(p.llir.nodes[2].op, LlirOp::Map { op: ElemOp::Binary(BinaryOp::Add), len: 20 });
    assert_eq!(p.llir.nodes[2].reads[1].view.strides, [0, 1]);
}

#[test]
fn gelu_then_bias_is_never_gelu_bias() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (&b + x.matmul(&w).gelu()).relu().output("y");
    let e = explore(&cx);
    for c in &e.candidates {
        assert!(!epilogues(&c.program).iter().any(|e| e.has_bias()), "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
}

// --- relu(relu(matmul + b)) with idempotence --------------------------------------------------

#[test]
fn double_relu_with_idempotence_terminates_and_is_one_relu_bias() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (x.matmul(&w) + &b).relu().relu().output("y");
    let config = FusionConfig { rules: RuleSet { relu_idempotence: true }, ..Default::default() };
    let e = fusion::explore(&cx.hlir(), "p", &CompileOptions::default(), &config).unwrap();
    // The idempotence rule makes a self-loop (relu(c) in class c); the runner still saturates.
    assert_eq!(e.saturation.stop, Stop::Saturated);
    assert!(e.saturation.iterations <= 5, "{:?}", e.saturation);
    let p = &e.picked().unwrap().program;
    assert_eq!(epilogues(p), [Epilogue::ReluBias]);
    assert_eq!(p.figures.launches, 1);
    for c in &e.candidates {
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
    // Without the rule, the outer relu stays a launch of its own.
    let plain = explore(&cx);
    let p = &plain.picked().unwrap().program;
    assert_eq!(epilogues(p), [Epilogue::ReluBias]);
    assert_eq!(p.figures.launches, 2);
}

#[test]
fn idempotence_merges_two_equal_outputs_and_each_keeps_its_name() {
    // relu(t) and relu(relu(t)) become one e-class; both outputs must still be read back.
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    let r = (x.matmul(&w) + &b).relu();
    r.output("once");
    r.relu().output("twice");
    let config = FusionConfig { rules: RuleSet { relu_idempotence: true }, ..Default::default() };
    let e = fusion::explore(&cx.hlir(), "p", &CompileOptions::default(), &config).unwrap();
    for c in &e.candidates {
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
        let outputs: Vec<&str> = c
            .program
            .llir
            .buffers
            .iter()
            .filter(|b| b.role == lumen_compiler::BufferRole::Output)
            .map(|b| b.id.as_str())
            .collect();
        assert_eq!(outputs.len(), 2, "{}", c.label);
    }
}

// --- a product also used elsewhere stays a plain product ---------------------------------------

/// Every lt_matmul of `p` that writes `buffer` has epilogue DEFAULT, and there is one.
fn plain_product_writes(p: &lumen_compiler::CompiledProgram, buffer: &str) {
    let id = p.llir.buffers.iter().position(|b| b.id == buffer).unwrap();
    let writers: Vec<LlirOp> =
        p.llir.nodes.iter().filter(|n| n.writes.contains(&id)).map(|n| n.op).collect();
    assert_eq!(writers.len(), 1, "{writers:?}");
    assert!(
        matches!(writers[0], LlirOp::LtMatmul { epilogue: Epilogue::Default, .. }),
        "{writers:?}"
    );
}

#[test]
fn a_product_that_is_also_an_output_stays_plain_and_is_not_recomputed() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    let t = x.matmul(&w).output("t");
    (t + &b).relu().output("y");
    let e = explore(&cx);
    for c in &e.candidates {
        plain_product_writes(&c.program, "t");
        // One matmul: fusing y's epilogue would need a second product.
        assert_eq!(epilogues(&c.program), [Epilogue::Default], "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
    let p = cx.compile(&CompileOptions::default()).unwrap();
    plain_product_writes(&p, "t");
    // The add reads the product that t holds.
    assert_eq!(reads(&p, 2), ["t", "b"]);
}

#[test]
fn a_product_feeding_two_ops_stays_plain_for_both() {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    let t = x.matmul(&w);
    (&t + &b).relu().output("y");
    t.gelu().output("g");
    let e = explore(&cx);
    for c in &e.candidates {
        assert_eq!(epilogues(&c.program), [Epilogue::Default], "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
    let p = cx.compile(&CompileOptions::default()).unwrap();
    // gelu and add_bias both read the one plain product.
    let t0 = p.llir.buffers.iter().position(|b| b.id == "t0").unwrap();
    let readers = p.llir.nodes.iter().filter(|n| n.read_buffers().any(|b| b == t0)).count();
    assert_eq!(readers, 2);
    plain_product_writes(&p, "t0");
}

#[test]
fn a_biased_product_feeding_two_activations_fuses_the_bias_once() {
    // relu(t + b) and gelu(t + b): fusing both activations would compute the product twice;
    // one BIAS matmul feeding both activations is the fused program.
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    let h = x.matmul(&w) + &b;
    h.relu().output("r");
    h.gelu().output("g");
    let e = explore(&cx);
    for c in &e.candidates {
        assert_eq!(epilogues(&c.program).len(), 1, "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
    let p = &e.picked().unwrap().program;
    assert_eq!(epilogues(p), [Epilogue::Bias]);
    assert_eq!(p.figures.launches, 3);
}

#[test]
fn an_output_in_the_middle_of_a_chain_blocks_only_what_it_must() {
    // h = t + b is an output; relu(h) may not fuse the bias again, but h itself may be BIAS.
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    let h = (x.matmul(&w) + &b).output("h");
    h.relu().output("y");
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(epilogues(&p), [Epilogue::Bias]);
    assert_eq!(p.llir.nodes[2].op, LlirOp::Map { op: ElemOp::Unary(UnaryOp::Relu), len: 20 });
    assert_eq!(reads(&p, 2), ["h"]);
}

// --- a scalar bias is not fused ----------------------------------------------------------------

#[test]
fn a_scalar_bias_is_not_fused() {
    assert_eq!(bias_broadcast(&[1], &[2, 4]), BiasBroadcast::Scalar);
    assert_eq!(bias_broadcast(&[], &[2, 4]), BiasBroadcast::Scalar);
    assert_eq!(bias_broadcast(&[1, 1], &[2, 4]), BiasBroadcast::Scalar);
    assert!(!bias_is_fusable(&[1], &[2, 4]));
    assert!(!bias_is_fusable(&[], &[2, 4]));
    assert_eq!(add_shape(&[2, 4], &[1]), Some(vec![2, 4]));
    for (name, shape) in [("s", &[1][..]), ("e", &[][..])] {
        let leaves: &[(&str, &[usize])] = &[("x", &[2, 3]), ("w", &[3, 4]), (name, shape)];
        let (eg, _) = saturate(&format!("(relu (add (matmul x w) {name}))"), leaves, false);
        assert!(!any_node(&eg, |n| n.epilogue().is_some_and(Epilogue::has_bias)), "{name}");
    }
    // The DSL broadcasts a scalar (a weight [1] and a constant alike), never as a bias.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 4]);
    let s = cx.weight("s", [1]);
    (x.matmul(&w) + &s).output("y");
    (x.matmul(&w) * 2.0 + 0.5).relu().output("z");
    let e = explore(&cx);
    for c in &e.candidates {
        assert!(!epilogues(&c.program).iter().any(|e| e.has_bias()), "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
}

#[test]
fn a_one_column_output_takes_a_length_one_bias_at_full_length_n() {
    // N = 1: the [1] bias IS the [N] vector, materialized at its full length.
    assert_eq!(bias_broadcast(&[1], &[4, 1]), BiasBroadcast::LastAxis);
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 1]);
    let s = cx.weight("s", [1]);
    (x.matmul(&w) + &s).relu().output("y");
    let p = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(epilogues(&p), [Epilogue::ReluBias]);
    let s = p.llir.buffer("s").unwrap();
    assert_eq!((s.shape.as_slice(), s.bytes), (&[1][..], 4));
    for c in &explore(&cx).candidates {
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
}

// --- bounded runner and monotone costs ----------------------------------------------------------

/// Associativity and commutativity of add: a rule set with cycles whose e-graph grows
/// exponentially on a long sum.
fn ac_rules() -> Vec<FusionRewrite> {
    let mut r = rules(&RuleSet::default()).unwrap();
    r.push(egg::rewrite!("add-assoc"; "(add (add ?a ?b) ?c)" => "(add ?a (add ?b ?c))"));
    r.push(egg::rewrite!("add-assoc-rev"; "(add ?a (add ?b ?c))" => "(add (add ?a ?b) ?c)"));
    r
}

fn long_sum(terms: usize) -> Graph {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 4]);
    let mut acc = x.matmul(&w);
    for i in 0..terms {
        let t = cx.weight(format!("v{i}"), [2, 4]);
        acc = acc + t;
    }
    let b = cx.weight("b", [4]);
    (acc + b).relu().output("y");
    cx
}

#[test]
fn a_cyclic_exploding_rule_set_stops_at_the_node_limit() {
    let cx = long_sum(12);
    let hlir = cx.hlir();
    let loaded = fusion::egraph::load(&hlir).unwrap();
    let limits = Limits {
        node_limit: 2_000,
        iter_limit: 1_000,
        time_limit: Duration::from_secs(60),
        ..Limits::default()
    };
    let (loaded, sat) = fusion::saturate(loaded, &ac_rules(), &limits);
    assert!(matches!(sat.stop, Stop::NodeLimit(_)), "{sat:?}");
    // egg checks the limit between rule applications; the overshoot is bounded by one batch.
    assert!(sat.egraph_nodes < 40_000, "{sat:?}");
    // Extraction still works on the partial e-graph, and every candidate is still the program.
    let config = FusionConfig::default();
    let (list, _) =
        fusion::candidates::enumerate(&hlir, &loaded, "sum", &CompileOptions::default(), &config)
            .unwrap();
    for c in &list {
        assert_same_outputs(&eval(&hlir), &eval(&c.hlir));
    }
}

#[test]
fn the_iteration_limit_stops_a_cyclic_rule_set() {
    let cx = long_sum(12);
    let loaded = fusion::egraph::load(&cx.hlir()).unwrap();
    let limits = Limits {
        node_limit: 1_000_000,
        iter_limit: 3,
        time_limit: Duration::from_secs(60),
        ..Limits::default()
    };
    let (_, sat) = fusion::saturate(loaded, &ac_rules(), &limits);
    assert_eq!(sat.stop, Stop::IterationLimit(3));
    assert_eq!(sat.iterations, 3);
}

#[test]
fn the_default_limits_bound_a_cyclic_rule_set() {
    let cx = long_sum(16);
    let loaded = fusion::egraph::load(&cx.hlir()).unwrap();
    let (_, sat) = fusion::saturate(loaded, &ac_rules(), &Limits::default());
    assert!(!matches!(sat.stop, Stop::Saturated | Stop::Other(_)), "{sat:?}");
}

/// Checks that every e-node's cost is at least one more than each child's best cost, and
/// that every own score is positive.
fn assert_monotone(eg: &FusionEGraph, fusions: Fusions) {
    let banned = BTreeSet::new();
    let extractor =
        Extractor::new(eg, ExtractionCost::new(eg, CostModel::default(), fusions, &banned));
    let mut cf = ExtractionCost::new(eg, CostModel::default(), fusions, &banned);
    for class in eg.classes() {
        for node in &class.nodes {
            let cost = egg::CostFunction::cost(&mut cf, node, |c| extractor.find_best_cost(c));
            for &c in node.children() {
                let child = extractor.find_best_cost(c);
                assert!(cost > child || cost == u64::MAX, "{node:?}: {cost} vs child {child}");
            }
            if let Some(own) = cf.own(node) {
                assert!(CostModel::default().node_score(own) > 0);
            }
        }
        assert!(extractor.find_best_cost(class.id) > 0);
    }
}

#[test]
fn costs_are_positive_and_monotone() {
    let g = programs::mlp(&[8, 16, 8, 4], 2).unwrap();
    let hlir = g.hlir();
    let loaded = fusion::egraph::load(&hlir).unwrap();
    let rules = rules(&RuleSet { relu_idempotence: true }).unwrap();
    let (loaded, _) = fusion::saturate(loaded, &rules, &Limits::default());
    for fusions in [Fusions::ALL, Fusions { bias: true, activation: false }] {
        assert_monotone(&loaded.egraph, fusions);
    }
    let leaves: &[(&str, &[usize])] = &[("x", &[4, 3]), ("w", &[3, 5]), ("b", &[5])];
    let (eg, _) = saturate("(relu (relu (add b (matmul x w))))", leaves, true);
    assert_monotone(&eg, Fusions::ALL);
}

#[test]
fn fused_costs_less_than_unfused_in_the_e_graph() {
    let leaves: &[(&str, &[usize])] = &[("x", &[64, 256]), ("w", &[256, 64]), ("b", &[64])];
    let (eg, root) = saturate("(relu (add (matmul x w) b))", leaves, false);
    let banned = BTreeSet::new();
    let best = |fusions| {
        Extractor::new(&eg, ExtractionCost::new(&eg, CostModel::default(), fusions, &banned))
            .find_best(root)
    };
    let (fused_cost, fused) = best(Fusions::ALL);
    let (plain_cost, plain) = best(Fusions { bias: false, activation: false });
    assert_eq!(fused.to_string(), "(lt_relu_bias x w b)");
    assert_eq!(plain.to_string(), "(relu (add (matmul x w) b))");
    // One launch and x + w + b + y bytes, plus one per e-node (4: the op and three leaves).
    assert_eq!(fused_cost, 8_000_000 + 147_712 + 4);
    assert_eq!(plain_cost, 3 * 8_000_000 + 213_248 + 6);
}

#[test]
fn two_equal_outputs_never_recompute_the_product() {
    // y0 = x@w + b and y1 = x@w + b: the e-graph merges them into one e-class, but each output
    // owns a buffer, so that e-class is built twice. Fusing its bias would run the product twice
    // (proptest regression in fusion_props): the candidates keep one plain product instead.
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 8]);
    let w = cx.weight("w", [8, 8]);
    let b = cx.weight("b", [8]);
    let t = x.matmul(&w);
    (&t + &b).output("y0");
    (&t + &b).output("y1");
    let e = explore(&cx);
    let unfused = e.candidates[0].program.figures;
    for c in &e.candidates {
        assert_eq!(epilogues(&c.program), [Epilogue::Default], "{}", c.label);
        assert!(c.program.figures.flops <= unfused.flops, "{}", c.label);
        assert_same_outputs(&eval(&cx.hlir()), &eval(&c.hlir));
    }
}
