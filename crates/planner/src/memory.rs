//! Allocation guards: the structures that can outgrow the input (a bitset closure, the buffer
//! order, the conflicting pairs of wide parallel branches) are sized first and their bytes
//! reserved fallibly, so running out of memory is a [`PlanError::OutOfMemory`] naming the
//! structure and its size, never an abort.

use crate::PlanError;

/// Checks that `bytes` can be allocated now by reserving them once (and releasing them).
///
/// # Errors
/// [`PlanError::OutOfMemory`] naming `what` when the size overflows or the allocator refuses.
pub(crate) fn ensure(what: &'static str, bytes: Option<usize>) -> Result<(), PlanError> {
    let fail = |bytes| PlanError::OutOfMemory { what, bytes };
    let bytes = bytes.ok_or(fail(usize::MAX))?;
    // Small structures cannot be what runs a machine out of memory; skip the probe.
    if bytes < 64 << 20 {
        return Ok(());
    }
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(bytes).map_err(|_| fail(bytes))
}

/// Bytes of `rows` bitsets of `bits` bits each (32-bit blocks), `None` on overflow.
pub(crate) fn bitset_bytes(rows: usize, bits: usize) -> Option<usize> {
    bits.div_ceil(32).checked_mul(4)?.checked_mul(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_structure_and_size() {
        assert_eq!(ensure("buffer order", Some(1 << 20)), Ok(()));
        assert_eq!(
            ensure("buffer order", Some(usize::MAX / 2)),
            Err(PlanError::OutOfMemory { what: "buffer order", bytes: usize::MAX / 2 })
        );
        assert_eq!(
            ensure("closure bitsets", bitset_bytes(usize::MAX, 64)),
            Err(PlanError::OutOfMemory { what: "closure bitsets", bytes: usize::MAX })
        );
        assert_eq!(bitset_bytes(3, 33), Some(24));
        assert_eq!(
            PlanError::OutOfMemory { what: "buffer order", bytes: 12 }.to_string(),
            "out of memory: the planner's buffer order needs 12 bytes"
        );
    }
}
