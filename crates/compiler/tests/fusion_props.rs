//! Property tests of fusion over random programs: every candidate computes what the program
//! computes (f64 reference), plans verify, the pick is the cheapest, fusion never adds launches
//! or DRAM bytes, and the fused text does not depend on the order ops were declared in.

mod fusion_common;
mod random_program;

use fusion_common::{assert_same_outputs, eval};
use lumen_compiler::CompileOptions;
use lumen_compiler::dump::{llir_text, plan_text};
use lumen_compiler::fusion::cost::{CostModel, ExtractionCost};
use lumen_compiler::fusion::{self, FusionConfig, RuleSet};
use proptest::prelude::*;
use random_program::{Draw, Op, build};

/// Up to 10 ops over value 0 (the input x [4, 8]) and earlier op results, all [4, 8]; matmuls
/// are weighted up so that fusable chains are common, and a bias may come on either side.
fn program() -> impl Strategy<Value = (Vec<Op>, Vec<bool>, Vec<u32>)> {
    random_program::program(Draw { max_ops: 10, weights: [3, 3, 1, 2, 1], bias_either_side: true })
}

fn options() -> CompileOptions {
    CompileOptions { workspace_bytes: 4096, name: "p".into(), ..Default::default() }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn every_candidate_computes_the_program(
        (ops, outputs, priority) in program(),
        idempotence in any::<bool>(),
    ) {
        let g = build(&ops, &outputs, &priority);
        let hlir = g.hlir();
        let want = eval(&hlir);
        let config = FusionConfig { rules: RuleSet { relu_idempotence: idempotence }, ..Default::default() };
        let e = fusion::explore(&hlir, "p", &options(), &config).unwrap();
        prop_assert_eq!(&e.saturation.stop, &fusion::Stop::Saturated);
        prop_assert_eq!(e.candidates[0].label.as_str(), "unfused");
        let unfused = e.candidates[0].program.figures;
        let best = e.candidates.iter().map(|c| c.cost).min().unwrap();
        prop_assert_eq!(e.picked().unwrap().cost, best);
        for c in &e.candidates {
            assert_same_outputs(&want, &eval(&c.hlir));
            let p = &c.program;
            lumen_planner::verify(&p.dag, &p.llir.slab_buffers(), &p.plan, &Default::default())
                .map_err(|err| TestCaseError::fail(format!("{}: {err}", c.label)))?;
            prop_assert!(p.figures.launches <= unfused.launches, "{}", c.label);
            if !idempotence {
                // Fusion only removes launches and round trips; it never recomputes a product.
                prop_assert!(p.figures.dram_bytes <= unfused.dram_bytes, "{}", c.label);
                prop_assert!(p.figures.flops <= unfused.flops, "{}", c.label);
            }
        }
        // The fused compile is the pick.
        let compiled = g.compile(&options()).unwrap();
        let pick = &fusion::explore(&hlir, "p", &options(), &FusionConfig::default()).unwrap();
        let picked = &pick.picked().unwrap().program;
        prop_assert_eq!(&compiled.llir, &picked.llir);
        prop_assert_eq!(&compiled.plan, &picked.plan);
        prop_assert_eq!(&compiled.figures, &picked.figures);
        prop_assert_eq!(compiled.label.as_str(), "p-fused");
    }

    /// `compile` with fusion plans only as many candidates as it takes; under any capacity it
    /// still gives exactly `explore`'s pick, or `explore`'s error when nothing fits.
    #[test]
    fn compile_is_the_pick_under_a_capacity(
        (ops, outputs, priority) in program(),
        percent in 30usize..=110,
        algorithm in prop::sample::select(lumen_planner::SlabAlgorithm::ALL),
    ) {
        let g = build(&ops, &outputs, &priority);
        let free = g.compile(&CompileOptions { fuse: false, ..options() }).unwrap();
        let capacity = free.figures.slab_bytes * percent / 100;
        let opts = CompileOptions { capacity: Some(capacity), algorithm, ..options() };
        let explored = fusion::explore(&g.hlir(), "p", &opts, &FusionConfig::default());
        match (g.compile(&opts), explored) {
            (Ok(compiled), Ok(e)) => {
                let picked = &e.picked().unwrap().program;
                prop_assert_eq!(&compiled.llir, &picked.llir);
                prop_assert_eq!(&compiled.plan, &picked.plan);
                prop_assert_eq!(compiled.label.as_str(), "p-fused");
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => {
                let (a, b) = (a.map(|p| p.label), b.map(|e| e.pick));
                prop_assert!(false, "compile {:?} but explore {:?}", a, b);
            }
        }
    }

    #[test]
    fn best_nodes_agrees_with_eggs_extractor(
        (ops, outputs, priority) in program(),
        idempotence in any::<bool>(),
        bias in any::<bool>(),
        activation in any::<bool>(),
    ) {
        let hlir = build(&ops, &outputs, &priority).hlir();
        let loaded = fusion::egraph::load(&hlir).unwrap();
        let rules = fusion::rules::rules(&RuleSet { relu_idempotence: idempotence }).unwrap();
        let (loaded, _) = fusion::saturate(loaded, &rules, &fusion::Limits::default());
        let eg = &loaded.egraph;
        let banned = std::collections::BTreeSet::new();
        let fusions = fusion::Fusions { bias, activation };
        let cost = || ExtractionCost::new(eg, CostModel::default(), fusions, &banned);
        let egg_best = egg::Extractor::new(eg, cost());
        let ours = fusion::extract::best_nodes(eg, &mut cost());
        for class in eg.classes() {
            prop_assert_eq!(ours[&class.id].0, egg_best.find_best_cost(class.id));
        }
        // The dense table the compiler extracts with prices exactly as the cost function,
        // preferring the written e-nodes.
        let written = loaded.written_canonical();
        let mut preferring = cost().preferring(&written);
        let reference = fusion::extract::best_nodes(eg, &mut preferring);
        let config = fusion::FusionConfig::default();
        let table = fusion::extract::ExtractionTable::new(&loaded, &config).costs(fusions);
        for class in eg.classes() {
            prop_assert_eq!(table.get(&class.id), reference.get(&class.id).map(|b| &b.0));
        }
    }

    #[test]
    fn declaration_order_never_changes_the_fused_text(
        (ops, outputs, p1) in program(),
        p2 in proptest::collection::vec(any::<u32>(), 10),
    ) {
        let a = build(&ops, &outputs, &p1).compile(&options()).unwrap();
        let b = build(&ops, &outputs, &p2[..ops.len()]).compile(&options()).unwrap();
        prop_assert_eq!(llir_text(&a), llir_text(&b));
        prop_assert_eq!(plan_text(&a), plan_text(&b));
    }
}

/// The built-in programs, where the bounded search of `compile` skips lowering most
/// candidates: its pick is still exactly `explore`'s, which lowers and plans them all.
#[test]
fn compile_is_the_pick_on_the_builtin_programs() {
    use lumen_compiler::programs::{BUILTIN, BuiltinArgs, builtin};
    for name in BUILTIN {
        let g = builtin(name, &BuiltinArgs::default()).unwrap();
        let compiled = g.compile(&options()).unwrap();
        let explored =
            fusion::explore(&g.hlir(), "p", &options(), &FusionConfig::default()).unwrap();
        let picked = &explored.picked().unwrap().program;
        assert_eq!(compiled.llir, picked.llir, "{name}");
        assert_eq!(compiled.plan, picked.plan, "{name}");
    }
}
