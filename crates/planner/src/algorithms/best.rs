//! `best`: the smallest plan lumen can find. Every greedy (first fit in request order among
//! them, so `best` is never worse than Luminal's plan) and the bottom-left greedy
//! ([`Lowest`]), then a search seeded with the winner: on interval problems the exact skyline
//! search ([`super::skyline`]) with a binary search on the slab size, on other DAGs an iterated
//! greedy over placement orders ([`super::local`]), split between the bottom-left order and the
//! best fixed order when bottom-left won. The search stops early once the plan meets the exact
//! lower bound.
//!
//! Why bottom-left: on dense layered DAGs (each buffer conflicting with a couple of hundred
//! others) one decode costs millions of neighbour visits, so the iterated greedy affords a
//! dozen moves and `best` was its seed. A fixed order (size, lifetime, start) places a large
//! buffer of a late layer before the small ones of early layers and leaves holes under it;
//! bottom-left fills the slab from offset 0 upward wherever the DAG allows, for about two
//! decodes. On the layered DAG suite of the `algorithms` bench it moved the geometric mean of
//! slab / lower bound from 1.100 to 1.084 (500 layers x 20: 1.105 to 1.081; measured when
//! lifetimes were ranks of a depth-first order, before levels); on interval problems the
//! skyline search decides, and the MiniMalloc results are unchanged.

use std::time::Instant;

use super::greedy::{Fit, Greedy, Lowest};
use super::instance::{Instance, capacity_error};
use super::local::{self, Incumbent};
use super::orders;
use super::skyline::{Intervals, Outcome};
use crate::{PlanError, SlabOptions};

/// Work budget of the interval search, in segment visits: about half a second on a 2-core
/// laptop-class machine for the hardest MiniMalloc file, far less on easy ones.
pub(crate) const INTERVAL_WORK: u64 = 400_000_000;

/// The best plan found: offsets in request order. The search stops once the slab meets
/// `lower_bound` (bytes, the exact heaviest antichain).
///
/// # Errors
/// [`PlanError::CapacityExceeded`] when even the best plan passes `options.capacity`; it names
/// the request that ends highest in that plan.
pub(crate) fn best(
    inst: &Instance<'_>,
    options: &SlabOptions,
    lower_bound: usize,
) -> Result<Vec<usize>, PlanError> {
    let deadline = options.time_budget.map(|d| Instant::now() + d);
    let n = inst.reserved.len();
    let mut incumbent = Incumbent { slab: usize::MAX, offsets: vec![0; n] };

    // Every greedy; first fit in request order is Luminal's plan, so `best` never loses to it.
    let request: Vec<u32> = (0..n as u32).collect();
    let size = orders::size_desc(inst);
    let size_by_start = orders::size_desc_by_start(inst);
    let lifetime = orders::lifetime_desc(inst);
    let area = orders::area_desc(inst);
    let start = orders::start_order(inst);
    let mut greedy = Greedy::default();
    let mut offsets = vec![0usize; n];
    let mut seed: (&[u32], Fit) = (&request, Fit::First);
    for (order, fit) in [
        (&request, Fit::First),
        (&size, Fit::First),
        (&size, Fit::Best),
        (&size_by_start, Fit::First),
        (&size_by_start, Fit::Best),
        (&lifetime, Fit::Best),
        (&lifetime, Fit::First),
        (&area, Fit::First),
        (&area, Fit::Best),
        (&start, Fit::First),
    ] {
        if let Ok(slab) =
            greedy.place(&inst.conflicts, inst.reserved, order, fit, usize::MAX, &mut offsets)
            && slab < incumbent.slab
        {
            incumbent.offer(slab, &offsets);
            seed = (order, fit);
        }
        // A plan at the exact lower bound is optimal; a passed deadline ends the portfolio
        // (first fit in request order, the first greedy, always ran).
        if incumbent.slab <= lower_bound || deadline.is_some_and(|d| Instant::now() >= d) {
            return finish(inst, options, incumbent);
        }
    }

    // Bottom-left: the buffer whose lowest gap starts lowest goes next. Its plan is a first-fit
    // decode of its placement order, so the iterated greedy can start from it.
    let mut bottom_left: Vec<u32> = Vec::with_capacity(n);
    let slab =
        Lowest::default().place(&inst.conflicts, inst.reserved, &mut offsets, &mut bottom_left);
    let bottom_left_won = slab < incumbent.slab;
    incumbent.offer(slab, &offsets);

    if incumbent.slab > lower_bound {
        if inst.conflicts.is_intervals() {
            interval_search(inst, &mut incumbent, deadline);
        } else if bottom_left_won {
            // Two runs, half the budget each: from the bottom-left order, then from the best of
            // the other orders, whose neighbourhood differs (it sometimes ends lower).
            let half = deadline.map(|d| {
                let now = Instant::now();
                now + d.saturating_duration_since(now) / 2
            });
            local::improve(inst, &mut incumbent, &bottom_left, Fit::First, lower_bound, 2, half);
            local::improve(inst, &mut incumbent, seed.0, seed.1, lower_bound, 2, deadline);
        } else {
            local::improve(inst, &mut incumbent, seed.0, seed.1, lower_bound, 1, deadline);
        }
    }

    finish(inst, options, incumbent)
}

/// The incumbent's offsets, or the capacity error naming the request that ends highest (the
/// first such in request order) when even it passes `options.capacity`.
fn finish(
    inst: &Instance<'_>,
    options: &SlabOptions,
    incumbent: Incumbent,
) -> Result<Vec<usize>, PlanError> {
    let n = inst.reserved.len();
    if let Some(capacity) = options.capacity.filter(|&c| incumbent.slab > c) {
        let worst = (0..n).max_by_key(|&i| (incumbent.offsets[i] + inst.reserved[i], n - i));
        return Err(capacity_error(inst, Some(capacity), worst.unwrap_or(0)));
    }
    Ok(incumbent.offsets)
}

/// Binary search on the slab size between the peak load (the exact lower bound here) and the
/// incumbent, each probe an exact search with restarts on a share of the budget (work, or the
/// time left before `deadline`). A probe that runs out of budget counts as a failure, so the
/// answer is an upper bound, and optimal when a probe at the peak succeeds.
fn interval_search(inst: &Instance<'_>, incumbent: &mut Incumbent, deadline: Option<Instant>) {
    let n = inst.reserved.len();
    let spans: Vec<(u32, u32)> = (0..n).map(|i| inst.conflicts.span(i)).collect();
    let problem = Intervals::new(&spans, inst.reserved);
    // One descent visits every segment per buffer placed; when even that passes the budget
    // (tens of thousands of buffers), the greedy plans are all there is time for.
    if deadline.is_none()
        && (problem.segments() as u64).saturating_mul(n as u64) > INTERVAL_WORK / 4
    {
        return;
    }
    // Every gravity-packed offset is a sum of sizes: probe multiples of their gcd only.
    let unit = inst.reserved.iter().fold(0usize, |g, &r| gcd(g, r)).max(1);
    let mut lo = problem.peak();
    let mut work_left = INTERVAL_WORK;
    let mut first = true;
    while lo < incumbent.slab {
        let gap = incumbent.slab - lo;
        if !first && gap <= unit.max(lo / 1000) {
            break;
        }
        // First the bound itself (most files meet it), then halve the gap.
        let target = if first { lo } else { lo + (gap - 1) / 2 };
        let capacity = (target / unit * unit).max(lo);
        let share = if first { 4 } else { 3 };
        first = false;
        let (work, until) = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break;
                }
                (u64::MAX, Some(now + (d - now) / share))
            }
            None => {
                if work_left < MIN_PROBE_WORK {
                    break;
                }
                (work_left / share as u64, None)
            }
        };
        let (outcome, used) = problem.search_restarts(capacity, work, until);
        work_left = work_left.saturating_sub(used);
        match outcome {
            Outcome::Found(offsets) => {
                let slab = offsets.iter().zip(inst.reserved).map(|(o, r)| o + r).max().unwrap_or(0);
                incumbent.offer(slab, &offsets);
            }
            Outcome::Infeasible | Outcome::OutOfBudget => lo = capacity + 1,
        }
    }
}

/// Smallest share of work worth a probe.
const MIN_PROBE_WORK: u64 = 2_000_000;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}
