//! Placement algorithms behind [`SlabAlgorithm`](crate::SlabAlgorithm).
//!
//! Every algorithm places each buffer at an aligned offset so that two buffers share bytes only
//! when one precedes the other in the DAG (plan_slab's rule: buffers on parallel branches
//! conflict even where a timeline would order them). They differ in how hard they try to keep
//! the slab small:
//!
//! | algorithm | order | gap | source |
//! |---|---|---|---|
//! | `first-fit` | request order | lowest | Luminal's `plan_slab` (the default) |
//! | `first-fit-size` | size descending | lowest | TFLite Micro's greedy planner |
//! | `best-fit-size` | size descending | smallest | TFLite's arena planner, XLA's heap simulator |
//! | `lifetime` | lifetime descending | smallest | XLA's temporal sort |
//! | `best` | several greedy orders and bottom-left, then a search | | lumen |
//!
//! All of them work on [`Conflicts`] (spans plus the few conflicting pairs with disjoint spans,
//! built once by a sweep) and ask [`Occupancy`] for gaps, so no algorithm stores or scans the
//! conflicting pairs, whose number can be quadratic in the buffers.

mod best;
mod conflicts;
mod greedy;
mod instance;
mod local;
mod occupancy;
mod orders;
mod rng;
mod skyline;

pub(crate) use conflicts::Conflicts;

use crate::{PlanError, Reachability, SlabAlgorithm, SlabBuffer, SlabOptions};
use greedy::{Fit, Greedy};
use instance::{Instance, capacity_error};

/// Runs `options.algorithm` on validated input: offsets in request order. `lower_bound` (the
/// exact heaviest antichain, bytes) lets `best` stop as soon as a plan meets it.
///
/// # Errors
/// [`PlanError::TotalOverflow`] when the reserved sizes sum past `usize::MAX` (validated input
/// never does), [`PlanError::CapacityExceeded`] when the algorithm finds no placement within
/// `options.capacity`, and [`PlanError::OutOfMemory`] when the conflicting pairs of parallel
/// branches cannot be allocated.
pub(crate) fn place(
    options: &SlabOptions,
    reach: &Reachability,
    buffers: &[SlabBuffer],
    reserved: &[usize],
    lower_bound: usize,
) -> Result<Vec<usize>, PlanError> {
    let conflicts = Conflicts::new(reach, buffers)?;
    // Validation checked naive_bytes already; checked again here because no offset an algorithm
    // computes may overflow, and that rests on this sum.
    crate::slab::naive_total(reserved)?;
    let inst = Instance { buffers, reserved, conflicts };
    match options.algorithm {
        // Luminal's plan_slab: request order, lowest gap.
        SlabAlgorithm::FirstFit => {
            let request: Vec<u32> = (0..reserved.len() as u32).collect();
            greedy_plan(&inst, &request, Fit::First, options.capacity)
        }
        SlabAlgorithm::FirstFitSize => {
            greedy_plan(&inst, &orders::size_desc(&inst), Fit::First, options.capacity)
        }
        SlabAlgorithm::BestFitSize => {
            greedy_plan(&inst, &orders::size_desc(&inst), Fit::Best, options.capacity)
        }
        SlabAlgorithm::Lifetime => {
            greedy_plan(&inst, &orders::lifetime_desc(&inst), Fit::Best, options.capacity)
        }
        SlabAlgorithm::Best => best::best(&inst, options, lower_bound),
    }
}

/// One greedy pass; a capacity error names the first buffer, in placement order, that passed.
fn greedy_plan(
    inst: &Instance<'_>,
    order: &[u32],
    fit: Fit,
    capacity: Option<usize>,
) -> Result<Vec<usize>, PlanError> {
    let mut offsets = vec![0usize; inst.reserved.len()];
    let limit = capacity.unwrap_or(usize::MAX);
    match Greedy::default().place(&inst.conflicts, inst.reserved, order, fit, limit, &mut offsets) {
        Ok(_) => Ok(offsets),
        Err(i) => Err(capacity_error(inst, capacity, i)),
    }
}
