//! Property tests on random DAGs whose node ids are not in topological order: uses of 1 to 3
//! nodes, sizes 0 to 1 MiB, alignments 1, 64 and 256.

mod common;

use common::{Case, random_case};
use lumen_planner::{
    BufferOrder, PlanError, Reachability, SlabAlgorithm, SlabOptions, max_weight_antichain,
    plan_slab, reserved_bytes, verify,
};
use petgraph::graph::NodeIndex;
use proptest::prelude::*;

/// A random DAG of up to `max_nodes` nodes, each forward pair an edge with probability
/// `density`; sizes up to 1 MiB.
fn case(max_nodes: usize, max_buffers: usize, density: f64) -> impl Strategy<Value = Case> {
    random_case(max_nodes, max_buffers, Just(density), 0usize..=1 << 20)
}

/// Reachability by plain DFS: `naive[a][b]` iff a path of one or more edges leads a -> b.
fn naive_reach(case: &Case) -> Vec<Vec<bool>> {
    let n = case.nodes;
    let mut out = vec![vec![false; n]; n];
    for (a, row) in out.iter_mut().enumerate() {
        let mut stack: Vec<usize> = case.edges.iter().filter(|e| e.0 == a).map(|e| e.1).collect();
        while let Some(v) = stack.pop() {
            if !row[v] {
                row[v] = true;
                stack.extend(case.edges.iter().filter(|e| e.0 == v).map(|e| e.1));
            }
        }
    }
    out
}

fn naive_precedes(reach: &[Vec<bool>], a: &[usize], b: &[usize]) -> bool {
    a.iter().all(|&x| b.iter().all(|&y| reach[x][y]))
}

proptest! {

    #[test]
    fn plans_verify_and_respect_bounds(case in case(24, 40, 0.15)) {
        let (dag, bufs) = case.build();
        let o = case.options();
        let plan = plan_slab(&dag, &bufs, &o).unwrap();
        verify(&dag, &bufs, &plan, &o).unwrap();
        prop_assert!(plan.lower_bound <= plan.slab_bytes);
        prop_assert!(plan.slab_bytes <= plan.naive_bytes);
        for (&off, &r) in plan.offsets.iter().zip(&plan.reserved) {
            prop_assert_eq!(off % case.alignment, 0);
            prop_assert_eq!(r % case.alignment, 0);
        }
    }

    #[test]
    fn lower_bound_is_the_brute_force_maximum(case in case(8, 11, 0.3)) {
        let (dag, bufs) = case.build();
        let reach = naive_reach(&case);
        let n = bufs.len();
        let w: Vec<usize> =
            bufs.iter().map(|b| reserved_bytes(b.bytes, case.alignment).unwrap()).collect();
        let conflict = |i: usize, j: usize| {
            let (a, b) = (&case.buffers[i].1, &case.buffers[j].1);
            !naive_precedes(&reach, a, b) && !naive_precedes(&reach, b, a)
        };
        let mut best = 0usize;
        for mask in 0u32..(1 << n) {
            let members: Vec<usize> = (0..n).filter(|&i| mask & (1 << i) != 0).collect();
            let anti = members
                .iter()
                .enumerate()
                .all(|(k, &i)| members[k + 1..].iter().all(|&j| conflict(i, j)));
            if anti {
                best = best.max(members.iter().map(|&i| w[i]).sum());
            }
        }
        let chain = max_weight_antichain(&dag, &bufs, case.alignment).unwrap();
        prop_assert_eq!(chain.weight, best);
        // The witness is itself an antichain of that weight.
        prop_assert_eq!(chain.members.iter().map(|&i| w[i]).sum::<usize>(), best);
        for (k, &i) in chain.members.iter().enumerate() {
            for &j in &chain.members[k + 1..] {
                prop_assert!(conflict(i, j), "witness members {} and {} are ordered", i, j);
            }
        }
    }

    #[test]
    fn closure_and_order_match_plain_dfs(case in case(20, 16, 0.2)) {
        let (dag, bufs) = case.build();
        let naive = naive_reach(&case);
        let reach = Reachability::new(&dag).unwrap();
        for (a, row) in naive.iter().enumerate() {
            for (b, &expected) in row.iter().enumerate() {
                prop_assert_eq!(
                    reach.reaches(NodeIndex::new(a), NodeIndex::new(b)),
                    expected,
                    "reaches({}, {})", a, b
                );
            }
        }
        let order = BufferOrder::new(&reach, &bufs).unwrap();
        for i in 0..bufs.len() {
            for j in 0..bufs.len() {
                prop_assert_eq!(
                    order.precedes(i, j),
                    naive_precedes(&naive, &case.buffers[i].1, &case.buffers[j].1)
                );
            }
        }
    }

    /// The closure projected onto a random subset of nodes answers every pair like a DFS:
    /// pairs inside the projection from the compressed closure, the rest by a search. Projected
    /// onto the buffers' uses, as `plan_slab` builds it, `precedes` is the DFS's.
    #[test]
    fn projected_closure_matches_plain_dfs(
        case in case(32, 16, 0.12),
        keep in prop::collection::vec(prop::bool::weighted(0.3), 32),
    ) {
        let (dag, bufs) = case.build();
        let naive = naive_reach(&case);
        let nodes: Vec<NodeIndex> =
            (0..case.nodes).filter(|&i| keep[i]).map(NodeIndex::new).collect();
        let reach = Reachability::among(&dag, nodes.iter().copied()).unwrap();
        prop_assert_eq!(reach.node_count(), case.nodes);
        prop_assert_eq!(reach.projected_count(), nodes.len());
        for (a, want) in naive.iter().enumerate() {
            let row = reach.row(NodeIndex::new(a)).unwrap();
            for (b, &expected) in want.iter().enumerate() {
                prop_assert_eq!(
                    reach.reaches(NodeIndex::new(a), NodeIndex::new(b)),
                    expected,
                    "reaches({}, {})", a, b
                );
                prop_assert_eq!(row.contains(b), expected, "row {} bit {}", a, b);
            }
        }
        let uses = bufs.iter().flat_map(|b| b.uses.iter().copied());
        let reach = Reachability::among(&dag, uses).unwrap();
        let order = BufferOrder::new(&reach, &bufs).unwrap();
        for i in 0..bufs.len() {
            for j in 0..bufs.len() {
                let want = naive_precedes(&naive, &case.buffers[i].1, &case.buffers[j].1);
                prop_assert_eq!(order.precedes(i, j), want);
                prop_assert_eq!(reach.precedes(&bufs[i].uses, &bufs[j].uses), want);
            }
        }
    }

    /// Every algorithm depends on the problem only: another numbering of the nodes, the edges
    /// in reverse order, and redundant edges (transitive shortcuts, repeats) give the same plan.
    #[test]
    fn plans_ignore_how_the_dag_is_listed(
        case in case(16, 24, 0.2),
        seed in any::<u64>(),
    ) {
        let (dag, bufs) = case.build();
        let mut relabel = case.identity();
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in (1..relabel.len()).rev() {
            relabel.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let (mut dag2, bufs2) = case.build_relabelled(&relabel, true);
        // Redundant edges: a few shortcuts a -> c over a -> b -> c, and a few repeats.
        let node = |i: usize| NodeIndex::new(relabel[i]);
        for &(a, b) in &case.edges {
            for &(b2, c) in &case.edges {
                if b == b2 && next() % 3 == 0 {
                    dag2.add_edge(node(a), node(c), ());
                }
            }
            if next() % 4 == 0 {
                dag2.add_edge(node(a), node(b), ());
            }
        }
        for &algorithm in SlabAlgorithm::ALL {
            let o = SlabOptions { algorithm, ..case.options() };
            let a = plan_slab(&dag, &bufs, &o).unwrap();
            let b = plan_slab(&dag2, &bufs2, &o).unwrap();
            prop_assert_eq!(&a, &b, "{}", algorithm);
            // Same input twice, same plan.
            prop_assert_eq!(&a, &plan_slab(&dag, &bufs, &o).unwrap());
        }
    }

    #[test]
    fn capacity_only_cuts_first_fit_short(case in case(12, 20, 0.2)) {
        let (dag, bufs) = case.build();
        let mut o = case.options();
        let free = plan_slab(&dag, &bufs, &o).unwrap();
        o.capacity = Some(free.slab_bytes);
        prop_assert_eq!(&plan_slab(&dag, &bufs, &o).unwrap(), &free);
        if free.slab_bytes > 0 {
            let cap = free.slab_bytes - 1;
            o.capacity = Some(cap);
            let first = free
                .offsets
                .iter()
                .zip(&free.reserved)
                .position(|(o, r)| o + r > cap)
                .unwrap();
            prop_assert_eq!(
                plan_slab(&dag, &bufs, &o).unwrap_err(),
                PlanError::CapacityExceeded { capacity: cap, index: first, bytes: bufs[first].bytes }
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// In-place marks: for random DAGs with every mark the planner accepts, every algorithm's
    /// plan verifies (a marked pair overlaps only at one offset), the lower bound stays at or
    /// below the slab, and a marked output that shares bytes with its operand sits exactly at
    /// its offset.
    #[test]
    fn in_place_marks_keep_plans_valid(
        case in case(14, 22, 0.25),
        marks in prop::collection::vec((0usize..22, 0usize..22), 0..12),
    ) {
        let (dag, mut bufs) = case.build();
        let n = bufs.len();
        let o = case.options();
        // Keep each candidate mark the planner accepts, one at a time.
        for &(out, operand) in &marks {
            if n == 0 {
                break;
            }
            let (out, operand) = (out % n, operand % n);
            let mut trial = bufs.clone();
            trial[out].in_place_of = Some(operand);
            if plan_slab(&dag, &trial, &o).is_ok() {
                bufs = trial;
            }
        }
        for &algorithm in SlabAlgorithm::ALL {
            let o = SlabOptions { algorithm, ..case.options() };
            let plan = plan_slab(&dag, &bufs, &o).unwrap();
            prop_assert_eq!(verify(&dag, &bufs, &plan, &o), Ok(()), "{}", algorithm);
            prop_assert!(plan.lower_bound <= plan.slab_bytes, "{}", algorithm);
            for (i, b) in bufs.iter().enumerate() {
                if let Some(p) = b.in_place_of {
                    let (oi, op) = (plan.offsets[i], plan.offsets[p]);
                    let meet = oi < op + plan.reserved[p] && op < oi + plan.reserved[i];
                    prop_assert!(!meet || oi == op, "{}: {} meets {} off its offset", algorithm, i, p);
                }
            }
            // A marked pair moved off its shared offset onto overlapping bytes is refused.
            if let Some((i, p)) = bufs.iter().enumerate().find_map(|(i, b)| {
                b.in_place_of.filter(|&p| plan.offsets[p] == plan.offsets[i]).map(|p| (i, p))
            }) && o.alignment < plan.reserved[p]
            {
                let mut bad = plan.clone();
                bad.offsets[i] += o.alignment;
                bad.slab_bytes = bad.offsets.iter().zip(&bad.reserved).map(|(a, r)| a + r).max().unwrap_or(0);
                prop_assert!(verify(&dag, &bufs, &bad, &o).is_err());
            }
        }
    }
}
