//! Golden vectors of SPEC section 2: every table, every capacity edge, every bad input.

use lumen_planner::{
    Dag, PlanError, SlabAlgorithm, SlabBuffer, SlabOptions, SlabPlan, VerifyError, lower_bound,
    max_weight_antichain, plan_slab, verify,
};
use petgraph::graph::NodeIndex;

fn opts(alignment: usize, capacity: Option<usize>) -> SlabOptions {
    SlabOptions { alignment, capacity, ..SlabOptions::default() }
}

/// upload -> lt_matmul -> add_bias -> relu -> readback.
fn seed_dag() -> (Dag, [NodeIndex; 5]) {
    let mut dag: Dag = Dag::new();
    let nodes = ["upload", "lt_matmul", "add_bias", "relu", "readback"].map(|_| dag.add_node(()));
    let [up, mm, ab, relu, rb] = nodes;
    dag.extend_with_edges([(up, mm), (mm, ab), (ab, relu), (relu, rb)]);
    (dag, nodes)
}

fn seed_buffers(n: [NodeIndex; 5]) -> Vec<SlabBuffer> {
    let [up, mm, ab, relu, rb] = n;
    vec![
        SlabBuffer::new("x", 65_536, [up, mm]),
        SlabBuffer::new("w", 65_536, [up, mm]),
        SlabBuffer::new("b", 256, [up, ab]),
        SlabBuffer::new("workspace", 1_048_576, [mm]),
        SlabBuffer::new("t0", 16_384, [mm, ab]),
        SlabBuffer::new("t1", 16_384, [ab, relu]),
        SlabBuffer::new("y", 16_384, [relu, rb]),
    ]
}

fn planned(dag: &Dag, bufs: &[SlabBuffer], o: &SlabOptions) -> SlabPlan {
    let plan = plan_slab(dag, bufs, o).expect("golden input plans");
    verify(dag, bufs, &plan, o).expect("golden plan verifies");
    plan
}

#[test]
fn seed_table_offsets_and_totals() {
    let (dag, n) = seed_dag();
    let bufs = seed_buffers(n);
    let plan = planned(&dag, &bufs, &SlabOptions::default());
    assert_eq!(plan.offsets, vec![0, 65_536, 131_072, 131_328, 1_179_904, 0, 16_384]);
    assert_eq!(plan.reserved, vec![65_536, 65_536, 256, 1_048_576, 16_384, 16_384, 16_384]);
    assert_eq!(plan.slab_bytes, 1_196_288);
    assert_eq!(plan.naive_bytes, 1_229_056);
    assert_eq!(plan.lower_bound, 1_196_288);
    assert_eq!(lower_bound(&dag, &bufs, 256), Ok(1_196_288));
    // The antichain that attains it: everything live at lt_matmul.
    let chain = max_weight_antichain(&dag, &bufs, 256).unwrap();
    assert_eq!(chain.members, vec![0, 1, 2, 3, 4]);
    assert_eq!(chain.weight, 1_196_288);
}

#[test]
fn seed_table_reordered_t1_and_y_first() {
    let (dag, n) = seed_dag();
    let mut bufs = seed_buffers(n);
    let tail = bufs.split_off(5);
    bufs.splice(0..0, tail);
    let ids: Vec<&str> = bufs.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["t1", "y", "x", "w", "b", "workspace", "t0"]);
    let plan = planned(&dag, &bufs, &SlabOptions::default());
    assert_eq!(plan.slab_bytes, 1_196_288);
    assert_eq!(plan.lower_bound, 1_196_288);
    assert_eq!(plan.naive_bytes, 1_229_056);
    // t1 = 0 and y = 16,384 (both use relu); x precedes both, so it sits at 0 again.
    assert_eq!(plan.offsets, vec![0, 16_384, 0, 65_536, 131_072, 131_328, 1_179_904]);
}

#[test]
fn diamond() {
    let mut dag: Dag = Dag::new();
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|_| dag.add_node(()));
    dag.extend_with_edges([(a, b), (a, c), (b, d), (c, d)]);
    let bufs = vec![
        SlabBuffer::new("p", 1000, [a, b]),
        SlabBuffer::new("q", 1000, [a, c]),
        SlabBuffer::new("r", 1000, [d]),
    ];
    let plan = planned(&dag, &bufs, &opts(256, None));
    assert_eq!(plan.offsets, vec![0, 1024, 0]);
    assert_eq!(plan.slab_bytes, 2048);
    assert_eq!(plan.naive_bytes, 3072);
    assert_eq!(plan.lower_bound, 2048);
}

fn parallel() -> (Dag, Vec<SlabBuffer>) {
    let mut dag: Dag = Dag::new();
    let [a, b, join] = ["a", "b", "join"].map(|_| dag.add_node(()));
    dag.extend_with_edges([(a, join), (b, join)]);
    let bufs = vec![
        SlabBuffer::new("a", 257, [a]),
        SlabBuffer::new("b", 256, [b]),
        SlabBuffer::new("joined", 512, [join]),
    ];
    (dag, bufs)
}

#[test]
fn parallel_branches_fit_at_768() {
    let (dag, bufs) = parallel();
    let plan = planned(&dag, &bufs, &opts(256, Some(768)));
    assert_eq!(plan.offsets, vec![0, 512, 0]);
    assert_eq!(plan.slab_bytes, 768);
    assert_eq!(plan.lower_bound, 768);
}

#[test]
fn parallel_branches_fail_at_767() {
    let (dag, bufs) = parallel();
    let err = plan_slab(&dag, &bufs, &opts(256, Some(767))).unwrap_err();
    assert_eq!(err, PlanError::CapacityExceeded { capacity: 767, index: 1, bytes: 256 });
    assert_eq!(err.to_string(), "slab capacity 767 exceeded while placing request 1 (256 bytes)");
}

fn gaps() -> (Dag, Vec<SlabBuffer>) {
    let mut dag: Dag = Dag::new();
    let [start, middle, end] = ["start", "middle", "end"].map(|_| dag.add_node(()));
    dag.extend_with_edges([(start, middle), (middle, end)]);
    let bufs = vec![
        SlabBuffer::new("0", 16, [start, end]),
        SlabBuffer::new("1", 16, [middle]),
        SlabBuffer::new("2", 16, [end]),
    ];
    (dag, bufs)
}

#[test]
fn lifetime_gaps_fit_at_32() {
    let (dag, bufs) = gaps();
    let plan = planned(&dag, &bufs, &opts(16, Some(32)));
    assert_eq!(plan.offsets, vec![0, 16, 16]);
    assert_eq!(plan.slab_bytes, 32);
    assert_eq!(plan.lower_bound, 32);
}

#[test]
fn lifetime_gaps_fail_at_31() {
    let (dag, bufs) = gaps();
    let err = plan_slab(&dag, &bufs, &opts(16, Some(31))).unwrap_err();
    assert_eq!(err, PlanError::CapacityExceeded { capacity: 31, index: 1, bytes: 16 });
}

#[test]
fn empty_tensor_reserves_one_unit() {
    let (dag, n) = seed_dag();
    let bufs = vec![SlabBuffer::new("e", 0, [n[0]]), SlabBuffer::new("f", 1, [n[0]])];
    let plan = planned(&dag, &bufs, &opts(256, None));
    assert_eq!(plan.reserved, vec![256, 256]);
    assert_eq!(plan.offsets, vec![0, 256]);
}

#[test]
fn no_buffers_is_an_empty_plan() {
    let (dag, _) = seed_dag();
    let plan = planned(&dag, &[], &SlabOptions::default());
    assert_eq!(
        plan,
        SlabPlan {
            offsets: vec![],
            reserved: vec![],
            slab_bytes: 0,
            naive_bytes: 0,
            lower_bound: 0
        }
    );
}

/// Every bad input of SPEC section 2, through plan_slab, lower_bound and verify alike.
fn assert_bad(dag: &Dag, bufs: &[SlabBuffer], alignment: usize, want: PlanError, msg: &str) {
    let o = opts(alignment, None);
    assert_eq!(plan_slab(dag, bufs, &o).unwrap_err(), want);
    assert_eq!(lower_bound(dag, bufs, alignment).unwrap_err(), want);
    let empty = SlabPlan {
        offsets: vec![0; bufs.len()],
        reserved: vec![256; bufs.len()],
        slab_bytes: 0,
        naive_bytes: 0,
        lower_bound: 0,
    };
    assert_eq!(verify(dag, bufs, &empty, &o).unwrap_err(), VerifyError::Plan(want.clone()));
    assert!(want.to_string().starts_with(msg), "{want} does not start with {msg}");
}

#[test]
fn bad_alignment_zero() {
    let (dag, n) = seed_dag();
    let bufs = seed_buffers(n);
    assert_bad(&dag, &bufs, 0, PlanError::ZeroAlignment, "slab alignment must be positive");
}

#[test]
fn bad_duplicate_ids() {
    let (dag, n) = seed_dag();
    let bufs = vec![SlabBuffer::new("x", 1, [n[0]]), SlabBuffer::new("x", 2, [n[1]])];
    assert_bad(
        &dag,
        &bufs,
        256,
        PlanError::DuplicateId { id: "x".into() },
        "duplicate slab buffer ID",
    );
}

#[test]
fn bad_overflow() {
    let (dag, n) = seed_dag();
    let bufs = vec![SlabBuffer::new("huge", usize::MAX, [n[0]])];
    assert_bad(&dag, &bufs, 256, PlanError::Overflow, "slab alignment overflow");
    // Alignment 1 does not round: nothing overflows an alignment, the total does.
    let two = vec![SlabBuffer::new("a", usize::MAX, [n[0]]), SlabBuffer::new("b", 1, [n[0]])];
    let naive = PlanError::TotalOverflow { total: "naive_bytes" };
    assert_eq!(plan_slab(&dag, &two, &opts(1, None)).unwrap_err(), naive);
    assert_eq!(lower_bound(&dag, &two, 1).unwrap_err(), naive);
}

/// Two buffers of `usize::MAX` bytes at alignment 1 on a chain: they do not conflict (a -> b),
/// so each fits alone at offset 0, but their sum, naive_bytes, has no `usize`. The error names
/// that total, not the alignment, with every algorithm.
#[test]
fn bad_total_overflow_names_the_total() {
    let mut dag: Dag = Dag::new();
    let (a, b) = (dag.add_node(()), dag.add_node(()));
    dag.add_edge(a, b, ());
    let bufs = vec![SlabBuffer::new("p", usize::MAX, [a]), SlabBuffer::new("q", usize::MAX, [b])];
    for &algorithm in SlabAlgorithm::ALL {
        let o = SlabOptions { algorithm, ..opts(1, None) };
        let err = plan_slab(&dag, &bufs, &o).unwrap_err();
        assert_eq!(err, PlanError::TotalOverflow { total: "naive_bytes" }, "{algorithm}");
        assert_eq!(err.to_string(), "slab naive_bytes overflows usize");
    }
    // The same sizes at alignment 256 still fail while rounding: SPEC's message.
    assert_eq!(
        plan_slab(&dag, &bufs, &opts(256, None)).unwrap_err().to_string(),
        "slab alignment overflow"
    );
    // Half of usize::MAX each still sums within usize and plans.
    let half = usize::MAX / 2;
    let bufs = vec![SlabBuffer::new("p", half, [a]), SlabBuffer::new("q", half, [b])];
    let plan = planned(&dag, &bufs, &opts(1, None));
    assert_eq!((plan.offsets, plan.slab_bytes, plan.naive_bytes), (vec![0, 0], half, 2 * half));
}

#[test]
fn bad_empty_uses() {
    let (dag, _) = seed_dag();
    let bufs = vec![SlabBuffer::new("lonely", 4, [])];
    assert_bad(
        &dag,
        &bufs,
        256,
        PlanError::NoUses { id: "lonely".into() },
        "slab buffer has no lifetime nodes",
    );
}

#[test]
fn bad_self_loop_and_cycle() {
    let mut dag: Dag = Dag::new();
    let a = dag.add_node(());
    dag.add_edge(a, a, ());
    let bufs = vec![SlabBuffer::new("x", 4, [a])];
    assert_bad(&dag, &bufs, 256, PlanError::Cyclic, "slab lifetime graph must be acyclic");

    let (mut dag, n) = seed_dag();
    dag.add_edge(n[4], n[1], ());
    let bufs = seed_buffers(n);
    assert_bad(&dag, &bufs, 256, PlanError::Cyclic, "slab lifetime graph must be acyclic");
}

#[test]
fn bad_absent_node() {
    let (dag, n) = seed_dag();
    let bufs = vec![SlabBuffer::new("ghost", 4, [n[0], NodeIndex::new(99)])];
    assert_bad(
        &dag,
        &bufs,
        256,
        PlanError::AbsentNode { id: "ghost".into(), node: 99 },
        "slab lifetime references an absent DAG node",
    );
}

#[test]
fn verify_names_the_offending_pair() {
    let (dag, n) = seed_dag();
    let bufs = seed_buffers(n);
    let o = SlabOptions::default();
    let good = plan_slab(&dag, &bufs, &o).unwrap();

    // t0 moved onto x: both live at lt_matmul.
    let mut bad = good.clone();
    bad.offsets[4] = 0;
    bad.slab_bytes = 1_179_904;
    let err = verify(&dag, &bufs, &bad, &o).unwrap_err();
    assert_eq!(
        err.to_string(),
        "buffers x [0, 65536) and t0 [0, 16384) overlap but their lifetimes conflict"
    );

    let mut bad = good.clone();
    bad.offsets[2] = 131_100;
    assert_eq!(
        verify(&dag, &bufs, &bad, &o).unwrap_err(),
        VerifyError::Misaligned { id: "b".into(), offset: 131_100, alignment: 256 }
    );

    let capped = opts(256, Some(1_196_032));
    assert_eq!(
        verify(&dag, &bufs, &good, &capped).unwrap_err(),
        VerifyError::OutOfBounds { id: "t0".into(), end: 1_196_288, limit: 1_196_032 }
    );

    let mut bad = good.clone();
    bad.slab_bytes += 256;
    assert_eq!(
        verify(&dag, &bufs, &bad, &o).unwrap_err(),
        VerifyError::Totals { field: "slab_bytes", reported: 1_196_544, actual: 1_196_288 }
    );

    let mut bad = good.clone();
    bad.naive_bytes = 1;
    assert!(matches!(
        verify(&dag, &bufs, &bad, &o),
        Err(VerifyError::Totals { field: "naive_bytes", .. })
    ));

    let mut bad = good.clone();
    bad.lower_bound = 0;
    assert_eq!(
        verify(&dag, &bufs, &bad, &o).unwrap_err(),
        VerifyError::LowerBound { reported: 0, exact: 1_196_288 }
    );

    let mut bad = good.clone();
    bad.reserved[6] = 256;
    assert!(matches!(verify(&dag, &bufs, &bad, &o), Err(VerifyError::Reserved { .. })));

    let mut bad = good.clone();
    bad.offsets.pop();
    assert_eq!(
        verify(&dag, &bufs, &bad, &o).unwrap_err(),
        VerifyError::Length { offsets: 6, buffers: 7 }
    );

    // Sharing bytes is fine when one precedes the other: x [0, 65536) and t1 at 0.
    assert_eq!(good.offsets[5], 0);
    verify(&dag, &bufs, &good, &o).unwrap();
}
