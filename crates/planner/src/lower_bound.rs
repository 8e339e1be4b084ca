//! The exact lower bound: the maximum-weight antichain of reserved sizes under `precedes`.
//!
//! Buffers that pairwise conflict must all be disjoint in any plan, so the heaviest such set
//! bounds every planner's slab from below. It is found exactly by weighted Dilworth: the heaviest
//! antichain weighs as much as the fewest chains covering each buffer `w` times, and that cover
//! is a maximum flow. The network has a left copy `L_v` and a right copy `R_v` of each buffer:
//! `s -> L_v` and `R_v -> t` with capacity `w(v)`, `L_u -> R_v` unbounded for every *cover* pair
//! `u ⋖ v` of the order (its transitive reduction), and `R_v -> L_v` unbounded so a chain may run
//! through `v` to reach what `v` precedes. Maximum flow `F` links chain pieces, the antichain
//! weighs `sum(w) - F`, and the buffers with `L_v` on the source side of the minimum cut and
//! `R_v` on the sink side are one such antichain (the witness).
//!
//! With only cover pairs the network has `O(n + cover pairs)` edges instead of `O(n^2)` for the
//! full relation. Luminal has no lower bound; this is the textbook reduction (Dilworth 1950;
//! Ford and Fulkerson's min-flow form) solved with Dinic's algorithm.
//!
//! Interval problems (the closure among the used nodes is a total order, as for every
//! MiniMalloc CSV) skip the order altogether: buffers conflict exactly when their rank intervals
//! overlap, and pairwise-overlapping intervals share a point (Helly), so the heaviest antichain
//! is the peak load, found by a sweep over sorted endpoints in `O(n log n)` time and `O(n)`
//! memory instead of `n^2` bits.

use petgraph::graph::DiGraph;

use crate::flow::{FlowNetwork, INF};
use crate::order::BufferOrder;
use crate::{PlanError, Reachability, SlabBuffer};

/// Bits per storage word of a `FixedBitSet` (`fixedbitset::Block` is `usize`).
const BLOCK_BITS: usize = usize::BITS as usize;

/// A maximum-weight antichain: buffers that pairwise conflict (neither precedes the other), so
/// every plan must keep them disjoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Antichain {
    /// Total reserved size of the members, in bytes: the lower bound.
    pub weight: usize,
    /// The members, as ascending request indices.
    pub members: Vec<usize>,
}

/// Largest total reserved size, in bytes, of a set of pairwise-conflicting buffers: every such set
/// must be disjoint in any plan, so no planner's slab is smaller. Reserved sizes are
/// `round_up(max(bytes, 1), alignment)` as in [`crate::plan_slab`].
///
/// Cost: on interval problems (the used nodes lie on one path) a sweep over the buffers'
/// endpoints, `O(n log n)`; on other DAGs the min-flow of [`antichain_of`] over the materialized
/// order (`n^2` bits).
///
/// # Errors
/// The input errors of [`crate::plan_slab`] (zero alignment, cycle, duplicate ids, empty uses,
/// absent nodes), [`PlanError::Overflow`] when a reserved size overflows,
/// [`PlanError::TotalOverflow`] when their sum does, and [`PlanError::OutOfMemory`] when the
/// closure or the order cannot be allocated.
pub fn lower_bound<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    alignment: usize,
) -> Result<usize, PlanError> {
    let (reach, reserved) = crate::slab::validate(dag, buffers, alignment)?;
    exact(&reach, buffers, &reserved)
}

/// The exact lower bound in bytes of validated `buffers` (reserved sizes `reserved`, request
/// order) over the projected closure `reach`: the peak load when the closure is a total order,
/// the min-flow antichain otherwise. What [`crate::plan_slab`], [`lower_bound`] and
/// [`crate::verify()`] report.
///
/// # Errors
/// [`PlanError::TotalOverflow`] (naming `naive_bytes`) when the reserved sizes sum past
/// `usize::MAX`; [`PlanError::OutOfMemory`] when the order cannot be allocated.
pub(crate) fn exact(
    reach: &Reachability,
    buffers: &[SlabBuffer],
    reserved: &[usize],
) -> Result<usize, PlanError> {
    if reach.is_total_order() {
        interval_peak(&interval_spans(reach, buffers), reserved)
    } else {
        Ok(antichain_of(&BufferOrder::new(reach, buffers)?, reserved)?.weight)
    }
}

/// Lowest and highest topological rank of each buffer's uses (request order), in half ranks:
/// rank `r` is point `2r + 1`, except that an in-place operand's last use (the op where its
/// marked output is written) is point `2r`, so the marked pair's spans part. When the closure
/// among the used nodes is a total order, buffer `i` is live over the closed interval
/// `spans[i]`, and two unmarked buffers conflict exactly when their intervals overlap; a marked
/// pair may share bytes (at one offset), which parting their spans relaxes into "may share",
/// so the peak stays a true lower bound.
pub(crate) fn interval_spans(reach: &Reachability, buffers: &[SlabBuffer]) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = buffers
        .iter()
        .map(|buf| {
            let ranks = buf.uses.iter().map(|&u| 2 * u64::from(reach.rank(u)) + 1);
            (ranks.clone().min().unwrap_or(0), ranks.max().unwrap_or(0))
        })
        .collect();
    for (i, buf) in buffers.iter().enumerate() {
        if let Some(p) = buf.in_place_of.filter(|&p| p != i)
            && let Some(span) = spans.get_mut(p)
        {
            span.1 -= 1;
        }
    }
    spans
}

/// Peak load in bytes of closed intervals `spans` weighing `reserved` (bytes, same order;
/// missing weights count as 0): on intervals the heaviest set of pairwise-overlapping members is
/// the heaviest point (Helly), so on an interval problem this is the exact lower bound. A sweep
/// over sorted endpoints, `O(n log n)`.
///
/// # Errors
/// [`PlanError::TotalOverflow`] (naming `naive_bytes`) when the weights sum past `usize::MAX`.
pub(crate) fn interval_peak(spans: &[(u64, u64)], reserved: &[usize]) -> Result<usize, PlanError> {
    crate::slab::naive_total(reserved)?;
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * spans.len());
    for (&(lo, hi), &r) in spans.iter().zip(reserved) {
        // Ends sort after starts at the same rank: the interval is closed.
        events.push((lo, false, r));
        events.push((hi, true, r));
    }
    events.sort_unstable();
    // The weights sum within usize, so the load never overflows; every end follows its start.
    let (mut load, mut peak) = (0usize, 0usize);
    for (_, end, r) in events {
        if end {
            load = load.saturating_sub(r);
        } else {
            load += r;
            peak = peak.max(load);
        }
    }
    Ok(peak)
}

/// Like [`lower_bound`], and also returns the antichain that attains it (always by the min-flow
/// over the materialized order, `n^2` bits, also on interval problems: the witness is the
/// minimum cut's).
///
/// # Errors
/// As [`lower_bound`].
pub fn max_weight_antichain<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    alignment: usize,
) -> Result<Antichain, PlanError> {
    let (reach, reserved) = crate::slab::validate(dag, buffers, alignment)?;
    let order = BufferOrder::new(&reach, buffers)?;
    antichain_of(&order, &reserved)
}

/// The maximum-weight antichain of an already materialized order, with weights `reserved[i]`
/// (bytes; one per buffer of `order`, missing weights count as 0).
///
/// Cost: the transitive reduction (one bitset OR of at most `n / 64` words per cover pair), and
/// Dinic on `2n + 2` nodes and `3n + cover pairs` edges.
///
/// # Errors
/// [`PlanError::TotalOverflow`] (naming `naive_bytes`) when the weights sum past `usize::MAX`.
pub fn antichain_of(order: &BufferOrder, reserved: &[usize]) -> Result<Antichain, PlanError> {
    let n = order.len();
    let weight = |i: usize| reserved.get(i).copied().unwrap_or(0);
    let total = (0..n)
        .try_fold(0usize, |acc, i| acc.checked_add(weight(i)))
        .ok_or(PlanError::TotalOverflow { total: "naive_bytes" })?;
    if n == 0 {
        return Ok(Antichain::default());
    }

    // Positions of the linear extension: every successor of p sits after p.
    let by_pos = order.linear_extension();
    let succ = order.position_rows();

    let (s, t) = (2 * n, 2 * n + 1);
    let mut net = FlowNetwork::new(2 * n + 2);
    for (p, &i) in by_pos.iter().enumerate() {
        net.add_edge(s, p, weight(i));
        net.add_edge(n + p, t, weight(i));
        net.add_edge(n + p, p, INF);
    }
    // Transitive reduction: walking p's successors in linear-extension order, q is a cover of p
    // unless an earlier cover already precedes it. Covered successors are skipped a word at a
    // time.
    let mut covered = vec![0usize; n.div_ceil(BLOCK_BITS)];
    for (p, row) in succ.iter().enumerate() {
        covered.fill(0);
        let words = row.as_slice();
        for w in 0..words.len() {
            loop {
                let open = words[w] & !covered[w];
                if open == 0 {
                    break;
                }
                let q = w * BLOCK_BITS + open.trailing_zeros() as usize;
                net.add_edge(p, n + q, INF);
                // succ[q] only holds positions after q: OR from q's word on.
                let src = succ[q].as_slice();
                for (d, s) in covered.iter_mut().zip(src).skip(w) {
                    *d |= *s;
                }
                // q itself is handled.
                covered[w] |= 1 << (q % BLOCK_BITS);
            }
        }
    }

    let flow = net.max_flow(s, t);
    let source_side = net.residual_reachable(s);
    let mut members: Vec<usize> = (0..n)
        .filter(|&p| source_side.contains(p) && !source_side.contains(n + p))
        .map(|p| by_pos[p])
        .collect();
    members.sort_unstable();
    let weight_sum = members.iter().map(|&i| weight(i)).sum::<usize>();
    debug_assert_eq!(weight_sum, total - flow, "min cut and max flow disagree");
    Ok(Antichain { weight: weight_sum, members })
}
