//! The exact lower bound: the maximum-weight antichain of reserved sizes under `precedes`.
//! (Stub: the planner issue replaces it with weighted Dilworth by min-flow.)

use petgraph::graph::DiGraph;

use crate::{PlanError, Reachability, SlabBuffer};

/// Largest total reserved size, in bytes, of a set of pairwise-conflicting buffers: every such set
/// must be disjoint in any plan, so no planner's slab is smaller.
///
/// # Errors
/// The input errors of [`crate::plan_slab`] (alignment, cycle, ids, uses, overflow).
pub fn lower_bound<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    alignment: usize,
) -> Result<usize, PlanError> {
    let (reach, reserved) = crate::slab::validate(dag, buffers, alignment)?;
    Ok(max_antichain(&reach, buffers, &reserved))
}

pub(crate) fn max_antichain(
    _reach: &Reachability,
    _buffers: &[SlabBuffer],
    reserved: &[usize],
) -> usize {
    // TODO(planner issue): exact min-flow. Placeholder: the largest single buffer.
    reserved.iter().copied().max().unwrap_or(0)
}
