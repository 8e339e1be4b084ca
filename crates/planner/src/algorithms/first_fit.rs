//! Luminal's first fit in request order (`plan_slab` in src/buffer/arena.rs of luminal-ai/luminal).
//!
//! Same offsets as testing every earlier request against the closure; the earlier requests that
//! conflict with request `i` are read from the interference graph instead (its neighbour list
//! is ascending, so they are a prefix), which makes a 20,000-buffer trace linear in its
//! conflicts rather than quadratic in its requests.

use super::Conflicts;
use crate::{PlanError, SlabBuffer};

const SLAB_OVERFLOW: PlanError = PlanError::TotalOverflow { total: "slab_bytes" };

/// For each request in order: the earlier requests it conflicts with, sorted by offset, are
/// scanned from 0 and the request takes the first gap it fits in.
///
/// # Errors
/// [`PlanError::TotalOverflow`] naming `slab_bytes` when an end overflows (not once the reserved
/// sizes are known to sum within `usize`), [`PlanError::CapacityExceeded`] for the first
/// request whose end passes `capacity`.
pub(crate) fn first_fit(
    conflicts: &Conflicts,
    buffers: &[SlabBuffer],
    reserved: &[usize],
    capacity: Option<usize>,
) -> Result<Vec<usize>, PlanError> {
    let mut offsets: Vec<usize> = Vec::with_capacity(buffers.len());
    let mut busy: Vec<(usize, usize)> = Vec::new();
    for (i, (buf, &size)) in buffers.iter().zip(reserved).enumerate() {
        busy.clear();
        for &j in conflicts.neighbors(i).iter().take_while(|&&j| (j as usize) < i) {
            let (o, r) = (offsets[j as usize], reserved[j as usize]);
            // Earlier ends were checked when they were placed.
            busy.push((o, o + r));
        }
        busy.sort_unstable();
        let mut candidate = 0usize;
        for &(start, end) in &busy {
            let want_end = candidate.checked_add(size).ok_or(SLAB_OVERFLOW)?;
            if want_end <= start {
                break;
            }
            candidate = candidate.max(end);
        }
        let end = candidate.checked_add(size).ok_or(SLAB_OVERFLOW)?;
        if let Some(cap) = capacity.filter(|&cap| end > cap) {
            return Err(PlanError::CapacityExceeded { capacity: cap, index: i, bytes: buf.bytes });
        }
        offsets.push(candidate);
    }
    Ok(offsets)
}
