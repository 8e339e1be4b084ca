//! Independent check of a plan. (Stub: the planner issue completes it.)

use petgraph::graph::DiGraph;

use crate::{SlabBuffer, SlabOptions, SlabPlan, VerifyError};

/// Checks `plan` against `buffers` and `options`: one offset per buffer, every offset aligned,
/// every end within the capacity, and no two conflicting buffers overlapping.
///
/// # Errors
/// The first [`VerifyError`] found, naming the offending buffer or pair.
pub fn verify<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    plan: &SlabPlan,
    options: &SlabOptions,
) -> Result<(), VerifyError> {
    let (_reach, _reserved) = crate::slab::validate(dag, buffers, options.alignment)?;
    if plan.offsets.len() != buffers.len() {
        return Err(VerifyError::Length { offsets: plan.offsets.len(), buffers: buffers.len() });
    }
    Ok(())
}
