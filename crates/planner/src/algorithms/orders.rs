//! Orders for the greedy passes. Ties always fall back to the request index, so every order is
//! deterministic.

use std::cmp::Reverse;

use super::instance::Instance;

/// Largest reserved size first; ties by longer lifetime, then request order (TFLite's arena
/// planner and XLA's `GlobalDecreasingSizeBestFitHeap` sort this way). On the MiniMalloc
/// suite this reproduces the reference heuristics' heights on 10 of 11 files (first fit) and
/// 9 of 11 (best fit); the rest differ in ties, since lifetimes here are measured in DAG
/// steps rather than the files' time units.
pub(crate) fn size_desc(inst: &Instance<'_>) -> Vec<u32> {
    sorted(inst, |i| {
        let (lo, hi) = inst.conflicts.span(i);
        (Reverse(inst.reserved[i]), Reverse(hi - lo), i)
    })
}

/// Largest reserved size first; ties by earliest use, then request order (a second tie-break
/// for `best`'s portfolio: with few distinct sizes, ties decide much of the plan).
pub(crate) fn size_desc_by_start(inst: &Instance<'_>) -> Vec<u32> {
    sorted(inst, |i| (Reverse(inst.reserved[i]), inst.conflicts.span(i).0, i))
}

/// Longest lifetime (span of topological ranks) first; ties by size descending, then earliest
/// use (XLA's temporal sort).
pub(crate) fn lifetime_desc(inst: &Instance<'_>) -> Vec<u32> {
    sorted(inst, |i| {
        let (lo, hi) = inst.conflicts.span(i);
        (Reverse(hi - lo), Reverse(inst.reserved[i]), lo, i)
    })
}

fn sorted<K: Ord>(inst: &Instance<'_>, key: impl Fn(usize) -> K) -> Vec<u32> {
    let mut order: Vec<u32> = (0..inst.reserved.len() as u32).collect();
    order.sort_by_cached_key(|&i| key(i as usize));
    order
}

/// Largest area (size times span length, plus one) first; ties by earliest use.
pub(crate) fn area_desc(inst: &Instance<'_>) -> Vec<u32> {
    sorted(inst, |i| {
        let (lo, hi) = inst.conflicts.span(i);
        let area = inst.reserved[i] as u128 * (u128::from(hi - lo) + 1);
        (Reverse(area), lo, i)
    })
}

/// Earliest use first; ties by size descending (the order a linear-scan allocator sees).
pub(crate) fn start_order(inst: &Instance<'_>) -> Vec<u32> {
    sorted(inst, |i| (inst.conflicts.span(i).0, Reverse(inst.reserved[i]), i))
}
