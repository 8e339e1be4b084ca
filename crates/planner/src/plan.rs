//! [`plan_slab`]: the planner's entry point. The request is checked ([`crate::slab`]), the
//! exact lower bound computed ([`crate::lower_bound`]), the buffers placed by the chosen
//! algorithm, and the plan's totals assembled.

use petgraph::graph::DiGraph;

use crate::error::PlanError;
use crate::slab::{SlabBuffer, SlabOptions, SlabPlan, naive_total, validate};

/// Plans `buffers` into one slab over `dag`, following Luminal's `plan_slab`.
///
/// First fit: for each request in order, the earlier requests that conflict with it (neither
/// precedes the other) are sorted by offset and scanned from 0; the request takes the first gap
/// it fits in. Request order is part of the plan. The plan also carries `slab_bytes`,
/// `naive_bytes` and the exact [`crate::lower_bound()`].
///
/// # Errors
/// Every [`PlanError`]: zero alignment, a cyclic DAG, duplicate ids, empty uses, absent nodes,
/// a size that overflows when rounded to the alignment ([`PlanError::Overflow`]), reserved
/// sizes whose sum overflows ([`PlanError::TotalOverflow`] naming `naive_bytes`),
/// [`PlanError::CapacityExceeded`] when a request's end passes `options.capacity`, and
/// [`PlanError::OutOfMemory`] when a structure that can outgrow the input (the closure's
/// bitsets, the buffer order, the conflicting pairs of parallel branches) cannot be allocated.
pub fn plan_slab<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    options: &SlabOptions,
) -> Result<SlabPlan, PlanError> {
    let (reach, reserved) = validate(dag, buffers, options.alignment)?;
    // On a total order (every interval trace) the heaviest antichain is the peak load, found by
    // a sweep; elsewhere by min-flow over the materialized order.
    let lower_bound = crate::lower_bound::exact(&reach, buffers, &reserved)?;
    let offsets = crate::algorithms::place(options, &reach, buffers, &reserved, lower_bound)?;
    finish(reserved, offsets, lower_bound)
}

/// Assembles a plan's totals from its offsets (`offsets` and `reserved` in request order) and
/// the exact lower bound in bytes.
pub(crate) fn finish(
    reserved: Vec<usize>,
    offsets: Vec<usize>,
    lower_bound: usize,
) -> Result<SlabPlan, PlanError> {
    let mut slab_bytes = 0usize;
    for (o, r) in offsets.iter().zip(&reserved) {
        let end = o.checked_add(*r).ok_or(PlanError::TotalOverflow { total: "slab_bytes" })?;
        slab_bytes = slab_bytes.max(end);
    }
    let naive_bytes = naive_total(&reserved)?;
    Ok(SlabPlan { offsets, reserved, slab_bytes, naive_bytes, lower_bound })
}
