//! The interval sweeps of [`crate::lower_bound()`] and [`crate::verify()`] against the general
//! path (min-flow lower bound, closure test of every byte-overlapping pair) on random interval
//! problems: chain DAGs numbered out of order, with shortcut edges, one-node detours and unused
//! side nodes (the used nodes still lie on one path), and plans with planted errors.

use petgraph::graph::NodeIndex;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use crate::lower_bound::{antichain_of, exact};
use crate::order::BufferOrder;
use crate::verify::{Sweep, check};
use crate::{Dag, SlabAlgorithm, SlabBuffer, SlabOptions, SlabPlan, VerifyError, plan_slab};

/// A random interval problem and a change to its plan.
#[derive(Debug, Clone)]
struct Case {
    /// Chain nodes `0..chain` (edges `k -> k + 1`).
    chain: usize,
    /// Gaps `k` (between chain nodes `k` and `k + 1`) that hold a detour node `k -> d -> k + 1`;
    /// at most one per gap, so the detours stay on the total order.
    detours: Vec<usize>,
    /// Extra forward edges between chain positions (they change no order).
    shortcuts: Vec<(usize, usize)>,
    /// Chain positions with an unused side node hanging off them.
    sides: Vec<usize>,
    /// Node insertion order: timeline point `p` (chain, then detours, then sides) becomes node
    /// `relabel[p]`.
    relabel: Vec<usize>,
    /// (bytes, uses as timeline points among chain and detours).
    buffers: Vec<(usize, Vec<usize>)>,
    alignment: usize,
    algorithm: usize,
    change: Change,
}

/// What is done to the plan before it is verified.
#[derive(Debug, Clone)]
enum Change {
    /// Nothing: a valid plan.
    None,
    /// Every offset replaced by `units[i] * alignment` (many overlaps, most of them conflicts).
    Scatter { units: Vec<usize>, fix_slab: bool },
    /// Buffer `i` moved onto buffer `j`'s offset.
    Onto { i: usize, j: usize, fix_slab: bool },
    /// Buffer `i` moved by `by` bytes (misaligned unless `by` is a multiple of the alignment).
    Shift { i: usize, by: usize, fix_slab: bool },
    /// Capacity set `below` bytes under the slab.
    Capacity { below: usize },
    /// The reported lower bound moved by `by` bytes up (or down when `down`).
    LowerBound { by: usize, down: bool },
}

fn change(max_buffers: usize) -> impl Strategy<Value = Change> {
    let i = 0..max_buffers;
    prop_oneof![
        1 => Just(Change::None),
        3 => (prop::collection::vec(0usize..6, max_buffers), any::<bool>())
            .prop_map(|(units, fix_slab)| Change::Scatter { units, fix_slab }),
        3 => (i.clone(), i.clone(), any::<bool>())
            .prop_map(|(i, j, fix_slab)| Change::Onto { i, j, fix_slab }),
        1 => (i, 1usize..300, any::<bool>())
            .prop_map(|(i, by, fix_slab)| Change::Shift { i, by, fix_slab }),
        1 => (1usize..600).prop_map(|below| Change::Capacity { below }),
        1 => (1usize..300, any::<bool>()).prop_map(|(by, down)| Change::LowerBound { by, down }),
    ]
}

fn case(max_chain: usize, max_buffers: usize) -> impl Strategy<Value = Case> {
    (1..=max_chain).prop_flat_map(move |chain| {
        let gaps = chain.saturating_sub(1).max(1);
        let detours = prop::collection::btree_set(0..gaps, 0..=3.min(gaps))
            .prop_map(move |set| set.into_iter().filter(|&g| g + 1 < chain).collect::<Vec<_>>());
        let shortcuts = prop::collection::vec((0..chain, 0..chain), 0..4)
            .prop_map(|pairs| pairs.into_iter().filter(|(a, b)| a < b).collect::<Vec<_>>());
        let sides = prop::collection::vec(0..chain, 0..3);
        (Just(chain), detours, shortcuts, sides).prop_flat_map(
            move |(chain, detours, shortcuts, sides)| {
                let points = chain + detours.len();
                let nodes = points + sides.len();
                let relabel = Just((0..nodes).collect::<Vec<_>>()).prop_shuffle();
                let bytes = prop_oneof![0usize..=300, 0usize..=5000];
                let buffers = prop::collection::vec(
                    (bytes, prop::collection::vec(0..points, 1..=3)),
                    0..=max_buffers,
                );
                let alignment = prop_oneof![Just(1usize), Just(16), Just(64), Just(256)];
                (
                    Just((chain, detours, shortcuts, sides)),
                    relabel,
                    buffers,
                    alignment,
                    0..SlabAlgorithm::ALL.len(),
                    change(max_buffers.max(1)),
                )
                    .prop_map(
                        |(
                            (chain, detours, shortcuts, sides),
                            relabel,
                            buffers,
                            alignment,
                            a,
                            c,
                        )| {
                            Case {
                                chain,
                                detours,
                                shortcuts,
                                sides,
                                relabel,
                                buffers,
                                alignment,
                                algorithm: a,
                                change: c,
                            }
                        },
                    )
            },
        )
    })
}

impl Case {
    fn build(&self) -> (Dag, Vec<SlabBuffer>) {
        let mut dag: Dag = Dag::new();
        let nodes = self.relabel.len();
        let ids: Vec<NodeIndex> = (0..nodes).map(|_| dag.add_node(())).collect();
        let node = |p: usize| ids[self.relabel[p]];
        for k in 1..self.chain {
            dag.add_edge(node(k - 1), node(k), ());
        }
        for (d, &gap) in self.detours.iter().enumerate() {
            let p = self.chain + d;
            dag.add_edge(node(gap), node(p), ());
            dag.add_edge(node(p), node(gap + 1), ());
        }
        for &(a, b) in &self.shortcuts {
            dag.add_edge(node(a), node(b), ());
        }
        for (s, &at) in self.sides.iter().enumerate() {
            dag.add_edge(node(at), node(self.chain + self.detours.len() + s), ());
        }
        let buffers = self
            .buffers
            .iter()
            .enumerate()
            .map(|(k, (bytes, uses))| {
                SlabBuffer::new(format!("b{k}"), *bytes, uses.iter().map(|&u| node(u)))
            })
            .collect();
        (dag, buffers)
    }

    fn options(&self) -> SlabOptions {
        SlabOptions {
            alignment: self.alignment,
            algorithm: SlabAlgorithm::ALL[self.algorithm % SlabAlgorithm::ALL.len()],
            ..SlabOptions::default()
        }
    }

    /// The plan with the change applied, and the options to verify it under.
    fn changed(&self, mut plan: SlabPlan) -> (SlabPlan, SlabOptions) {
        let mut options = self.options();
        let n = plan.offsets.len();
        let fix = match &self.change {
            Change::None => false,
            Change::Scatter { units, fix_slab } => {
                for (o, &u) in plan.offsets.iter_mut().zip(units) {
                    *o = u * self.alignment;
                }
                *fix_slab
            }
            Change::Onto { i, j, fix_slab } => {
                if n > 0 {
                    plan.offsets[i % n] = plan.offsets[j % n];
                }
                *fix_slab
            }
            Change::Shift { i, by, fix_slab } => {
                if n > 0 {
                    plan.offsets[i % n] += by;
                }
                *fix_slab
            }
            Change::Capacity { below } => {
                options.capacity = Some(plan.slab_bytes.saturating_sub(*below));
                false
            }
            Change::LowerBound { by, down } => {
                plan.lower_bound = if *down {
                    plan.lower_bound.saturating_sub(*by)
                } else {
                    plan.lower_bound + by
                };
                false
            }
        };
        if fix {
            plan.slab_bytes =
                plan.offsets.iter().zip(&plan.reserved).map(|(o, r)| o + r).max().unwrap_or(0);
        }
        (plan, options)
    }
}

/// What one case gave on both paths.
#[derive(Debug, PartialEq)]
struct Outcome {
    lower_bound: (usize, usize),
    verify: (Result<(), VerifyError>, Result<(), VerifyError>),
}

fn run(case: &Case) -> Outcome {
    let (dag, buffers) = case.build();
    let options = case.options();
    let (reach, reserved) = crate::slab::validate(&dag, &buffers, options.alignment)
        .unwrap_or_else(|e| panic!("generated input is valid: {e}"));
    assert!(reach.is_total_order(), "the used nodes of an interval case lie on one path");
    let sweep = exact(&reach, &buffers, &reserved).unwrap();
    let general =
        antichain_of(&BufferOrder::new(&reach, &buffers).unwrap(), &reserved).unwrap().weight;
    assert_eq!(crate::lower_bound(&dag, &buffers, options.alignment), Ok(sweep));

    let plan = plan_slab(&dag, &buffers, &options).unwrap();
    let (plan, options) = case.changed(plan);
    let fast = check(&dag, &buffers, &plan, &options, Sweep::Auto);
    assert_eq!(crate::verify(&dag, &buffers, &plan, &options), fast);
    let slow = check(&dag, &buffers, &plan, &options, Sweep::General);
    Outcome { lower_bound: (sweep, general), verify: (fast, slow) }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Same lower bound; same `Ok` or the same error (for an overlap, the same pair).
    #[test]
    fn interval_sweeps_match_the_general_path(case in case(24, 28)) {
        let out = run(&case);
        prop_assert_eq!(out.lower_bound.0, out.lower_bound.1);
        prop_assert_eq!(&out.verify.0, &out.verify.1);
    }
}

/// The cases above do reach every verdict: valid plans, overlaps (often several candidate
/// pairs at once), misalignment, capacity and lower-bound errors, on 2,000 drawn cases.
#[test]
fn interval_cases_cover_every_verdict() {
    let mut runner = TestRunner::deterministic();
    let strategy = case(24, 28);
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for _ in 0..2_000 {
        let case = strategy.new_tree(&mut runner).unwrap().current();
        let out = run(&case);
        assert_eq!(out.lower_bound.0, out.lower_bound.1, "{case:?}");
        assert_eq!(out.verify.0, out.verify.1, "{case:?}");
        let kind = match &out.verify.0 {
            Ok(()) => "ok",
            Err(VerifyError::Overlap { .. }) => "overlap",
            Err(VerifyError::Misaligned { .. }) => "misaligned",
            Err(VerifyError::OutOfBounds { .. }) => "out of bounds",
            Err(VerifyError::LowerBound { .. }) => "lower bound",
            Err(VerifyError::Totals { .. }) => "totals",
            Err(_) => "other",
        };
        *seen.entry(kind).or_default() += 1;
    }
    for kind in ["ok", "overlap", "misaligned", "out of bounds", "lower bound", "totals"] {
        assert!(seen.get(kind).copied().unwrap_or(0) >= 20, "{kind}: {seen:?}");
    }
}

/// An overlap where the first range in offset order meets several earlier ones: the pair is
/// the lowest of them, not the first met; ties in offset go by request index.
#[test]
fn first_pair_is_the_lowest_of_the_first_clash() {
    // Chain 0 -> 1 -> 2 -> 3; alignment 1, every buffer 10 bytes.
    let mut dag: Dag = Dag::new();
    let n: Vec<NodeIndex> = (0..4).map(|_| dag.add_node(())).collect();
    for w in n.windows(2) {
        dag.add_edge(w[0], w[1], ());
    }
    let buffers = vec![
        SlabBuffer::new("p", 10, [n[3]]),
        SlabBuffer::new("q", 10, [n[2]]),
        SlabBuffer::new("r", 10, [n[0], n[2]]),
        SlabBuffer::new("s", 10, [n[0]]),
    ];
    let options = SlabOptions { alignment: 1, ..SlabOptions::default() };
    // By offset: s (0), q (2), r (5), p (100). s and q share bytes but s precedes q; r meets
    // both while they are open, s first, but (q, r) = (1, 2) is lower than (r, s) = (2, 3).
    let plan = SlabPlan {
        offsets: vec![100, 2, 5, 0],
        reserved: vec![10; 4],
        slab_bytes: 110,
        naive_bytes: 40,
        lower_bound: 30,
    };
    for sweep in [Sweep::Auto, Sweep::General] {
        let err = check(&dag, &buffers, &plan, &options, sweep).unwrap_err();
        assert_eq!(
            err.to_string(),
            "buffers q [2, 12) and r [5, 15) overlap but their lifetimes conflict"
        );
    }
    // r alone above the rest: valid, and the slab is the peak (r with s at time 0, with q at 2).
    let plan = SlabPlan { offsets: vec![0, 0, 10, 0], slab_bytes: 20, lower_bound: 20, ..plan };
    for sweep in [Sweep::Auto, Sweep::General] {
        assert_eq!(check(&dag, &buffers, &plan, &options, sweep), Ok(()));
    }
    // p and s share offset 0; by (offset, index) p sweeps first and s does not conflict with
    // it (time 3 against 0); then r at 5 meets both, conflicting with s only: (r, s).
    let plan = SlabPlan { offsets: vec![0, 20, 5, 0], slab_bytes: 30, lower_bound: 20, ..plan };
    for sweep in [Sweep::Auto, Sweep::General] {
        let err = check(&dag, &buffers, &plan, &options, sweep).unwrap_err();
        assert_eq!(
            err.to_string(),
            "buffers r [5, 15) and s [0, 10) overlap but their lifetimes conflict"
        );
    }
}

/// The MiniMalloc files (when `../shared/benchmarks/minimalloc` is present): the same lower
/// bound both ways, and the same verdict on each first-fit plan and on it with the highest
/// buffer dropped to offset 0.
#[test]
fn minimalloc_files_agree() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/benchmarks/minimalloc");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} not found", dir.display());
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    for path in &files {
        let p = crate::SlabProblem::load(path).unwrap();
        let (reach, reserved) =
            crate::slab::validate(&p.dag, &p.buffers, p.options.alignment).unwrap();
        assert!(reach.is_total_order(), "{}", path.display());
        let general =
            antichain_of(&BufferOrder::new(&reach, &p.buffers).unwrap(), &reserved).unwrap();
        assert_eq!(exact(&reach, &p.buffers, &reserved), Ok(general.weight), "{}", path.display());
        let mut plan = p.plan().unwrap();
        let verdict = |plan: &SlabPlan| {
            let fast = check(&p.dag, &p.buffers, plan, &p.options, Sweep::Auto);
            let slow = check(&p.dag, &p.buffers, plan, &p.options, Sweep::General);
            assert_eq!(fast, slow, "{}", path.display());
            fast
        };
        assert_eq!(verdict(&plan), Ok(()), "{}", path.display());
        if let Some(top) = (0..plan.offsets.len()).max_by_key(|&i| plan.offsets[i]) {
            plan.offsets[top] = 0;
            plan.slab_bytes =
                plan.offsets.iter().zip(&plan.reserved).map(|(o, r)| o + r).max().unwrap_or(0);
            let err = verdict(&plan);
            assert!(
                matches!(err, Err(VerifyError::Overlap { .. }) | Ok(())),
                "{}: {err:?}",
                path.display()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// On any DAG (parallel branches, several chains), the span-and-window sweep names the same
    /// pair as the closure test of every byte-sharing pair, for valid plans and for offsets
    /// scattered over a few slots (most overlaps conflict, some are legal reuse).
    #[test]
    fn dag_sweep_matches_the_general_path(
        n in 1usize..16,
        edges in prop::collection::vec((0usize..16, 0usize..16), 0..40),
        bufs in prop::collection::vec(
            (1usize..600, prop::collection::vec(0usize..16, 1..=3), 0usize..5),
            1..28,
        ),
        scatter in any::<bool>(),
    ) {
        let (dag, buffers) = crate::test_dag::dag_and_buffers(
            n,
            &edges,
            bufs.iter().map(|(bytes, uses, _)| (*bytes, uses.clone())),
        );
        let options = SlabOptions::default();
        let mut plan = plan_slab(&dag, &buffers, &options).unwrap();
        if scatter {
            plan.offsets = bufs.iter().map(|b| b.2 * 256).collect();
            plan.slab_bytes =
                plan.offsets.iter().zip(&plan.reserved).map(|(o, r)| o + r).max().unwrap_or(0);
        }
        let fast = check(&dag, &buffers, &plan, &options, Sweep::Auto);
        let slow = check(&dag, &buffers, &plan, &options, Sweep::General);
        prop_assert_eq!(&fast, &slow);
        if !scatter {
            prop_assert_eq!(fast, Ok(()));
        }
    }
}
