//! The validated problem every placement algorithm works on, and the error they share.

use super::conflicts::Conflicts;
use crate::{PlanError, SlabBuffer};

/// A validated problem: the interference graph and reserved sizes (bytes, request order).
/// Algorithms other than first fit run only once the sizes are known to sum within `usize`, so
/// no offset they compute (at most the sum of the sizes placed so far) overflows.
pub(crate) struct Instance<'a> {
    pub(crate) buffers: &'a [SlabBuffer],
    pub(crate) reserved: &'a [usize],
    pub(crate) conflicts: Conflicts,
}

/// The capacity error for buffer `index` (request order).
pub(crate) fn capacity_error(
    inst: &Instance<'_>,
    capacity: Option<usize>,
    index: usize,
) -> PlanError {
    PlanError::CapacityExceeded {
        capacity: capacity.unwrap_or(usize::MAX),
        index,
        bytes: inst.buffers.get(index).map_or(0, |b| b.bytes),
    }
}
