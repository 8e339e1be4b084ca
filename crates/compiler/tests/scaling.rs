//! Large programs through the compiler stages (no planner): the results that scaling work must
//! keep. No wall-clock assertion; each test stays well under 2 s in a debug build, and
//! `cargo bench -p lumen-compiler --bench stages` has the times.

use lumen_compiler::fusion::{self, FusionConfig, Fusions, Stop, egraph, extract::extract};
use lumen_compiler::lower::lower;
use lumen_compiler::{Epilogue, Graph, HlirOp, Tensor, programs};

/// Two chains of `depth` ops each over `x`, joined at the end, declared one after the other
/// or interleaved.
fn two_chains(depth: usize, interleaved: bool) -> Graph {
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 4]);
    let step = |h: &Tensor, i: usize, j: usize| -> Tensor {
        match (i + j) % 3 {
            0 => h.tanh(),
            1 => h * 0.5,
            _ => h + &x,
        }
    };
    let (mut a, mut b) = (x.clone(), x.clone());
    if interleaved {
        for i in 0..depth {
            b = step(&b, i, 1);
            a = step(&a, i, 0);
        }
    } else {
        for i in 0..depth {
            a = step(&a, i, 0);
        }
        for i in 0..depth {
            b = step(&b, i, 1);
        }
    }
    (a - b).output("y");
    cx
}

#[test]
fn deep_chains_lower_in_one_canonical_order_whatever_the_declaration_order() {
    // 2 x 2,500 ops: colour refinement needs one round per level here (the chains' ops have
    // equal labels), which took minutes before it re-examined only the classes that split.
    let a = two_chains(2_500, false).hlir();
    let b = two_chains(2_500, true).hlir();
    // The HLIRs really differ in node order.
    assert_ne!(a.to_string(), b.to_string());
    let (la, lb) = (lower(&a, 0).unwrap(), lower(&b, 0).unwrap());
    assert_eq!(la, lb);
    assert_eq!(la.nodes.len(), 5_001 + 2);
}

#[test]
fn a_large_mlp_saturates_in_a_few_iterations_and_fuses_every_layer() {
    // 1,500 layers: every rule matches more than egg's default 1,000 times per iteration,
    // which used to ban the rules for a while (more iterations, each over the whole e-graph).
    let layers = 1_500;
    let hlir = programs::mlp(&vec![2; layers + 1], 1).unwrap().hlir();
    let loaded = egraph::load(&hlir).unwrap();
    let before = loaded.egraph.total_number_of_nodes();
    let config = FusionConfig::default();
    let rules = fusion::rules::rules(&config.rules).unwrap();
    let (loaded, sat) = fusion::saturate(loaded, &rules, &config.limits);
    assert_eq!(sat.stop, Stop::Saturated, "{sat:?}");
    assert!(sat.iterations <= 4, "{sat:?}");
    assert!(sat.egraph_nodes <= 3 * before, "{sat:?} from {before} e-nodes");
    let choice = extract(&loaded, &config, Fusions::ALL).unwrap();
    let fused = egraph::build_hlir(&hlir, &loaded, &choice).unwrap();
    let epilogues: Vec<Epilogue> = fused
        .graph
        .node_weights()
        .filter_map(|n| match n.op {
            HlirOp::Matmul { epilogue } => Some(epilogue),
            _ => None,
        })
        .collect();
    assert_eq!(epilogues.len(), layers);
    assert_eq!(epilogues.iter().filter(|&&e| e == Epilogue::ReluBias).count(), layers - 1);
    assert_eq!(epilogues.iter().filter(|&&e| e == Epilogue::Bias).count(), 1);
}
