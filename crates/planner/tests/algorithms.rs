//! Placement algorithms: every plan passes `verify`, `best` never loses to first fit, first fit
//! matches the SPEC's description run naively, the compressed closure matches a DFS, and the
//! greedy baselines reproduce the MiniMalloc README's reference heights.

mod common;

use std::path::PathBuf;

use common::{Case, layered_program, random_case};
use lumen_planner::{
    Dag, PlanError, Reachability, SlabAlgorithm, SlabBuffer, SlabOptions, SlabPlan, SlabProblem,
    lower_bound, plan_slab, reserved_bytes, verify,
};
use petgraph::graph::NodeIndex;
use proptest::prelude::*;

fn opts(algorithm: SlabAlgorithm, alignment: usize, capacity: Option<usize>) -> SlabOptions {
    SlabOptions { algorithm, alignment, capacity, ..SlabOptions::default() }
}

/// Plans with `algorithm` and checks the plan with `verify`.
fn planned<N>(dag: &Dag<N>, bufs: &[SlabBuffer], o: &SlabOptions) -> SlabPlan {
    let plan = plan_slab(dag, bufs, o).unwrap_or_else(|e| panic!("{}: {e}", o.algorithm));
    if let Err(e) = verify(dag, bufs, &plan, o) {
        panic!("{} produced an invalid plan: {e}", o.algorithm);
    }
    plan
}

/// SPEC section 2's first fit, written from its text: for each request, the earlier requests
/// that conflict with it sorted by offset, scanned from 0, first gap that fits.
fn naive_first_fit(dag: &Dag, bufs: &[SlabBuffer], alignment: usize) -> Vec<usize> {
    let reach = Reachability::new(dag).unwrap();
    let mut offsets: Vec<usize> = Vec::new();
    for (i, b) in bufs.iter().enumerate() {
        let size = reserved_bytes(b.bytes, alignment).unwrap();
        let mut busy: Vec<(usize, usize)> = (0..i)
            .filter(|&j| reach.conflicts(&bufs[j].uses, &b.uses))
            .map(|j| {
                let r = reserved_bytes(bufs[j].bytes, alignment).unwrap();
                (offsets[j], offsets[j] + r)
            })
            .collect();
        busy.sort_unstable();
        let mut at = 0usize;
        for (start, end) in busy {
            if at + size <= start {
                break;
            }
            at = at.max(end);
        }
        offsets.push(at);
    }
    offsets
}

/// Strict reachability by depth-first search from every node.
fn dfs_closure(dag: &Dag) -> Vec<Vec<bool>> {
    let n = dag.node_count();
    let mut out = vec![vec![false; n]; n];
    for (a, row) in out.iter_mut().enumerate() {
        let mut stack: Vec<NodeIndex> = dag.neighbors(NodeIndex::new(a)).collect();
        while let Some(v) = stack.pop() {
            if !row[v.index()] {
                row[v.index()] = true;
                stack.extend(dag.neighbors(v));
            }
        }
    }
    out
}

/// A random DAG: edge density drawn from 0.05..0.7, sizes up to 4 KiB or up to 1 MiB.
fn dag_case(max_nodes: usize, max_buffers: usize) -> impl Strategy<Value = Case> {
    random_case(max_nodes, max_buffers, 0.05f64..0.7, prop_oneof![0usize..=4096, 0usize..=1 << 20])
}

/// Random intervals on a chain DAG of `steps` nodes: (first step, last step, bytes).
fn interval_case(max_buffers: usize) -> impl Strategy<Value = (usize, Vec<(usize, usize, usize)>)> {
    (2usize..40).prop_flat_map(move |steps| {
        let rows = prop::collection::vec(
            (0..steps, 0usize..12, prop_oneof![1usize..=16, 1usize..=4096]),
            0..=max_buffers,
        )
        .prop_map(move |rows| {
            rows.into_iter().map(|(s, len, b)| (s, (s + len).min(steps - 1), b * 256)).collect()
        });
        (Just(steps), rows)
    })
}

fn chain(steps: usize, rows: &[(usize, usize, usize)]) -> (Dag, Vec<SlabBuffer>) {
    let mut dag: Dag = Dag::new();
    let ids: Vec<NodeIndex> = (0..steps).map(|_| dag.add_node(())).collect();
    for w in ids.windows(2) {
        dag.add_edge(w[0], w[1], ());
    }
    let bufs = rows
        .iter()
        .enumerate()
        .map(|(k, &(s, e, b))| SlabBuffer::new(format!("i{k}"), b, [ids[s], ids[e]]))
        .collect();
    (dag, bufs)
}

/// Every algorithm on one input: each plan verified, the lower bound respected and the same
/// for all, `best` at most every other slab. Returns the plans in `SlabAlgorithm::ALL` order.
fn check_all(dag: &Dag, bufs: &[SlabBuffer], alignment: usize) -> Vec<SlabPlan> {
    let exact = lower_bound(dag, bufs, alignment).unwrap();
    let plans: Vec<SlabPlan> =
        SlabAlgorithm::ALL.iter().map(|&a| planned(dag, bufs, &opts(a, alignment, None))).collect();
    let best = plans[SlabAlgorithm::ALL.iter().position(|&a| a == SlabAlgorithm::Best).unwrap()]
        .slab_bytes;
    for (plan, a) in plans.iter().zip(SlabAlgorithm::ALL) {
        assert_eq!(plan.lower_bound, exact, "{a}: lower bound");
        assert!(plan.slab_bytes >= exact, "{a}: slab below the lower bound");
        assert!(best <= plan.slab_bytes, "best {best} > {a} {}", plan.slab_bytes);
    }
    plans
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_algorithm_verifies_on_random_dags(case in dag_case(12, 20)) {
        let (dag, bufs) = case.build();
        check_all(&dag, &bufs, case.alignment);
    }

    #[test]
    fn every_algorithm_verifies_on_random_intervals((steps, rows) in interval_case(28)) {
        let (dag, bufs) = chain(steps, &rows);
        check_all(&dag, &bufs, 256);
    }

    #[test]
    fn first_fit_matches_the_naive_reference(case in dag_case(12, 24)) {
        let (dag, bufs) = case.build();
        let plan = planned(&dag, &bufs, &opts(SlabAlgorithm::FirstFit, case.alignment, None));
        prop_assert_eq!(plan.offsets, naive_first_fit(&dag, &bufs, case.alignment));
    }

    #[test]
    fn closure_matches_depth_first_search(case in dag_case(40, 0)) {
        let (dag, _) = case.build();
        let reach = Reachability::new(&dag).unwrap();
        let truth = dfs_closure(&dag);
        for (a, want) in truth.iter().enumerate() {
            let row = reach.row(NodeIndex::new(a)).unwrap();
            for (b, &expected) in want.iter().enumerate() {
                prop_assert_eq!(reach.reaches(NodeIndex::new(a), NodeIndex::new(b)), expected);
                prop_assert_eq!(row.contains(b), expected);
            }
        }
    }

    /// Greedy plans are deterministic, so a capacity equal to their slab keeps the plan and
    /// one byte less fails with the request that no longer fits; `best` fits its own slab and
    /// fails below the lower bound.
    #[test]
    fn capacity_is_respected(case in dag_case(10, 14)) {
        let (dag, bufs) = case.build();
        prop_assume!(!bufs.is_empty());
        for &a in SlabAlgorithm::ALL {
            let free = planned(&dag, &bufs, &opts(a, case.alignment, None));
            let tight = planned(&dag, &bufs, &opts(a, case.alignment, Some(free.slab_bytes)));
            prop_assert!(tight.slab_bytes <= free.slab_bytes);
            if a != SlabAlgorithm::Best {
                prop_assert_eq!(&tight.offsets, &free.offsets);
                let err = plan_slab(&dag, &bufs, &opts(a, case.alignment, Some(free.slab_bytes - 1)));
                let is_capacity = matches!(err, Err(PlanError::CapacityExceeded { .. }));
                prop_assert!(is_capacity);
            }
            let below = plan_slab(&dag, &bufs, &opts(a, case.alignment, Some(free.lower_bound - 1)));
            let is_capacity = matches!(below, Err(PlanError::CapacityExceeded { .. }));
            prop_assert!(is_capacity);
        }
    }
}

#[test]
fn best_is_deterministic() {
    let csv = minimalloc_dir().join("C.1048576.csv");
    let p = if csv.is_file() {
        SlabProblem::load(&csv).unwrap()
    } else {
        SlabProblem::from_csv_str("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\n").unwrap()
    };
    let o = SlabOptions { algorithm: SlabAlgorithm::Best, ..p.options };
    let first = planned(&p.dag, &p.buffers, &o);
    let second = planned(&p.dag, &p.buffers, &o);
    assert_eq!(first, second);
}

/// The SPEC's golden examples under every algorithm; `best` meets the lower bound on each.
#[test]
fn spec_examples_under_every_algorithm() {
    // Seed table.
    let mut dag: Dag = Dag::new();
    let [up, mm, ab, relu, rb] = [(); 5].map(|_| dag.add_node(()));
    dag.extend_with_edges([(up, mm), (mm, ab), (ab, relu), (relu, rb)]);
    let seed = vec![
        SlabBuffer::new("x", 65_536, [up, mm]),
        SlabBuffer::new("w", 65_536, [up, mm]),
        SlabBuffer::new("b", 256, [up, ab]),
        SlabBuffer::new("workspace", 1_048_576, [mm]),
        SlabBuffer::new("t0", 16_384, [mm, ab]),
        SlabBuffer::new("t1", 16_384, [ab, relu]),
        SlabBuffer::new("y", 16_384, [relu, rb]),
    ];
    let plans = check_all(&dag, &seed, 256);
    for (plan, a) in plans.iter().zip(SlabAlgorithm::ALL) {
        assert_eq!(plan.naive_bytes, 1_229_056, "{a}");
        assert_eq!(plan.lower_bound, 1_196_288, "{a}");
    }
    assert_eq!(plans[0].offsets, vec![0, 65_536, 131_072, 131_328, 1_179_904, 0, 16_384]);
    let best = planned(&dag, &seed, &opts(SlabAlgorithm::Best, 256, None));
    assert_eq!(best.slab_bytes, 1_196_288);

    // Diamond: p and q on parallel branches never share bytes.
    let mut dag: Dag = Dag::new();
    let [a, b, c, d] = [(); 4].map(|_| dag.add_node(()));
    dag.extend_with_edges([(a, b), (a, c), (b, d), (c, d)]);
    let diamond = vec![
        SlabBuffer::new("p", 1000, [a, b]),
        SlabBuffer::new("q", 1000, [a, c]),
        SlabBuffer::new("r", 1000, [d]),
    ];
    for plan in check_all(&dag, &diamond, 256) {
        assert_eq!(plan.slab_bytes, 2048);
        assert_ne!(plan.offsets[0], plan.offsets[1]);
    }

    // Parallel branches: 768 fits for every algorithm, 767 for none (the lower bound is 768).
    let mut dag: Dag = Dag::new();
    let [na, nb, join] = [(); 3].map(|_| dag.add_node(()));
    dag.extend_with_edges([(na, join), (nb, join)]);
    let par = vec![
        SlabBuffer::new("a", 257, [na]),
        SlabBuffer::new("b", 256, [nb]),
        SlabBuffer::new("joined", 512, [join]),
    ];
    for &alg in SlabAlgorithm::ALL {
        let plan = planned(&dag, &par, &opts(alg, 256, Some(768)));
        assert_eq!(plan.slab_bytes, 768, "{alg}");
        let err = plan_slab(&dag, &par, &opts(alg, 256, Some(767))).unwrap_err();
        assert!(matches!(err, PlanError::CapacityExceeded { capacity: 767, .. }), "{alg}: {err}");
    }

    // Lifetime gaps: 32 fits for every algorithm.
    let mut dag: Dag = Dag::new();
    let [s, m, e] = [(); 3].map(|_| dag.add_node(()));
    dag.extend_with_edges([(s, m), (m, e)]);
    let gaps = vec![
        SlabBuffer::new("0", 16, [s, e]),
        SlabBuffer::new("1", 16, [m]),
        SlabBuffer::new("2", 16, [e]),
    ];
    for &alg in SlabAlgorithm::ALL {
        assert_eq!(planned(&dag, &gaps, &opts(alg, 16, Some(32))).slab_bytes, 32, "{alg}");
    }
}

#[test]
fn algorithm_names_round_trip() {
    let names: Vec<&str> = SlabAlgorithm::ALL.iter().map(|a| a.name()).collect();
    assert_eq!(names, ["first-fit", "first-fit-size", "best-fit-size", "lifetime", "best"]);
    for &a in SlabAlgorithm::ALL {
        assert_eq!(SlabAlgorithm::from_name(a.name()), Some(a));
        assert_eq!(a.to_string(), a.name());
    }
    assert_eq!(SlabAlgorithm::from_name("worst-fit"), None);
    assert_eq!(SlabAlgorithm::default(), SlabAlgorithm::FirstFit);
}

/// A dense layered program (50 layers x 20 ops, 1,000 buffers, each conflicting with about a
/// hundred others): `best` beats every greedy by 2.5%. Before the bottom-left greedy
/// joined its portfolio it reached 1.0938 of the lower bound here, then 1.0756; since the
/// heuristics sort by levels (longest paths, the same however the DAG is listed) instead of
/// ranks in petgraph's depth-first topological order, 1.0497.
#[test]
fn best_packs_a_dense_layered_program() {
    let (dag, bufs) = layered_program(50, 20, 0xD1CE);
    let plans = check_all(&dag, &bufs, 256);
    let best = &plans[SlabAlgorithm::ALL.iter().position(|&a| a == SlabAlgorithm::Best).unwrap()];
    let ratio = best.slab_bytes as f64 / best.lower_bound as f64;
    assert!((ratio - 1.0497).abs() < 5e-5, "best: {ratio:.4} of the lower bound");
    let greedy = plans
        .iter()
        .zip(SlabAlgorithm::ALL)
        .filter(|&(_, &a)| a != SlabAlgorithm::Best)
        .map(|(p, _)| p.slab_bytes)
        .min();
    // The best greedy is 1.0761 of the bound (1.1716 when lifetimes were ranks in petgraph's
    // depth-first order: levels help the greedy orders most).
    assert!(greedy.is_some_and(|g| g as f64 >= 1.02 * best.slab_bytes as f64), "{greedy:?}");
}

/// The MiniMalloc README example (capacity 12): `best` finds the optimum 12 (alignment 1).
#[test]
fn minimalloc_readme_example_is_solved() {
    let p = SlabProblem::from_csv_str(
        "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n",
    )
    .unwrap();
    let plan = planned(&p.dag, &p.buffers, &opts(SlabAlgorithm::Best, 1, Some(12)));
    assert_eq!(plan.slab_bytes, 12);
    assert_eq!(plan.lower_bound, 12);
}

fn minimalloc_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks/minimalloc")
}

/// Reference heights of the MiniMalloc README (ratio to the lower bound, 3 decimals) that our
/// size-descending first fit and best fit reproduce; F and J differ in ties (our lifetimes
/// are DAG steps, not the files' time units), so they are not pinned.
const README_SIZE_DESC: [(&str, f64, f64); 9] = [
    ("A", 1.290, 1.311),
    ("B", 1.347, 1.347),
    ("C", 1.364, 1.364),
    ("D", 1.309, 1.323),
    ("E", 1.369, 1.401),
    ("G", 1.362, 1.362),
    ("H", 1.360, 1.341),
    ("I", 1.410, 1.410),
    ("K", 1.277, 1.333),
];

#[test]
fn size_descending_baselines_match_the_minimalloc_readme() {
    let dir = minimalloc_dir();
    if !dir.is_dir() {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    }
    for (name, first_fit, best_fit) in README_SIZE_DESC {
        let p = SlabProblem::load(dir.join(format!("{name}.1048576.csv"))).unwrap();
        for (alg, want) in
            [(SlabAlgorithm::FirstFitSize, first_fit), (SlabAlgorithm::BestFitSize, best_fit)]
        {
            let plan = planned(&p.dag, &p.buffers, &SlabOptions { algorithm: alg, ..p.options });
            let got = plan.slab_bytes as f64 / plan.lower_bound as f64;
            assert!((got - want).abs() < 1e-3, "{name} {alg}: {got:.4}, README {want}");
        }
    }
}

/// `best` on the MiniMalloc suite: optimal (slab = lower bound) on files the search settles
/// fast; in release builds, the whole suite with a geometric mean of slab / lower bound of at
/// most 1.05 (the issue's target; the README's greedy baselines are 1.31 to 1.41).
#[test]
fn best_on_the_minimalloc_suite() {
    let dir = minimalloc_dir();
    if !dir.is_dir() {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    }
    let files: &[&str] = if cfg!(debug_assertions) {
        &["B", "C", "G"]
    } else {
        &["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"]
    };
    let mut log_sum = 0.0;
    for name in files {
        let p = SlabProblem::load(dir.join(format!("{name}.1048576.csv"))).unwrap();
        let o = SlabOptions { algorithm: SlabAlgorithm::Best, ..p.options };
        let plan = planned(&p.dag, &p.buffers, &o);
        let ratio = plan.slab_bytes as f64 / plan.lower_bound as f64;
        if ["B", "C", "G"].contains(name) {
            assert_eq!(plan.slab_bytes, plan.lower_bound, "{name}");
        }
        log_sum += ratio.ln();
    }
    let geomean = (log_sum / files.len() as f64).exp();
    assert!(geomean <= 1.05, "geometric mean {geomean:.4}");
}

/// In-place reuse on an elementwise chain: upload -> relu1 -> relu2 -> relu3 -> readback, each
/// output marked in place of its operand. Every algorithm puts the three activations at the
/// input's offset (slab = one tensor), the plan verifies, the lower bound knows the marks, and
/// without marks the plan is Luminal's (two tensors alternate).
#[test]
fn in_place_chain_shares_one_tensor() {
    let mut dag: Dag = Dag::new();
    let [up, r1, r2, r3, rb] = [(); 5].map(|_| dag.add_node(()));
    dag.extend_with_edges([(up, r1), (r1, r2), (r2, r3), (r3, rb)]);
    let plain = vec![
        SlabBuffer::new("x", 4096, [up, r1]),
        SlabBuffer::new("t1", 4096, [r1, r2]),
        SlabBuffer::new("t2", 4096, [r2, r3]),
        SlabBuffer::new("y", 4096, [r3, rb]),
    ];
    let marked: Vec<SlabBuffer> = plain
        .iter()
        .enumerate()
        .map(|(i, b)| if i == 0 { b.clone() } else { b.clone().in_place_of(i - 1) })
        .collect();
    for &alg in SlabAlgorithm::ALL {
        let o = opts(alg, 256, None);
        let without = planned(&dag, &plain, &o);
        assert_eq!((without.slab_bytes, without.lower_bound), (8192, 8192), "{alg}");
        let with = planned(&dag, &marked, &o);
        assert_eq!(with.offsets, [0, 0, 0, 0], "{alg}");
        assert_eq!((with.slab_bytes, with.lower_bound), (4096, 4096), "{alg}");
        verify(&dag, &marked, &with, &o).unwrap();
        // Off the shared offset the pair is a conflict like any other.
        let mut moved = with.clone();
        moved.offsets[2] = 256;
        moved.slab_bytes = 4352;
        assert!(matches!(
            verify(&dag, &marked, &moved, &o),
            Err(lumen_planner::VerifyError::Overlap { .. })
        ));
    }
    // The same chain requested outputs first: an operand placed after the output that takes
    // its bytes joins it at that offset.
    let reversed: Vec<SlabBuffer> = vec![
        SlabBuffer::new("y", 4096, [r3, rb]).in_place_of(1),
        SlabBuffer::new("t2", 4096, [r2, r3]).in_place_of(2),
        SlabBuffer::new("t1", 4096, [r1, r2]).in_place_of(3),
        SlabBuffer::new("x", 4096, [up, r1]),
    ];
    for &alg in SlabAlgorithm::ALL {
        let o = opts(alg, 256, None);
        let plan = planned(&dag, &reversed, &o);
        assert_eq!((plan.offsets.clone(), plan.slab_bytes), (vec![0, 0, 0, 0], 4096), "{alg}");
        verify(&dag, &reversed, &plan, &o).unwrap();
    }
    // Marks the planner cannot honour are errors naming the buffer.
    let larger = vec![plain[0].clone(), SlabBuffer::new("t1", 8192, [r1, r2]).in_place_of(0)];
    let err = plan_slab(&dag, &larger, &SlabOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "slab buffer t1 cannot be placed in place of x (request 0): the output is larger than the operand"
    );
    let not_last = vec![
        SlabBuffer::new("x", 4096, [up, r1, r2]),
        SlabBuffer::new("t1", 4096, [r1, r2]).in_place_of(0),
    ];
    let err = plan_slab(&dag, &not_last, &SlabOptions::default()).unwrap_err();
    assert!(err.to_string().ends_with("the two must share exactly one use (the op)"), "{err}");
    let twice = vec![
        plain[0].clone(),
        SlabBuffer::new("t1", 4096, [r1, r2]).in_place_of(0),
        SlabBuffer::new("u1", 4096, [r1, r3]).in_place_of(0),
    ];
    let err = plan_slab(&dag, &twice, &SlabOptions::default()).unwrap_err();
    assert!(err.to_string().ends_with("already marked for another output"), "{err}");
}
