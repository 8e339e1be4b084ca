//! Typed errors of the planner. Messages are the ones of plan_slab's contract.

use thiserror::Error;

/// Why [`crate::plan_slab`] (or [`crate::lower_bound()`]) refused its input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    /// `alignment` was 0.
    #[error("slab alignment must be positive")]
    ZeroAlignment,
    /// The DAG has a cycle (a self-loop counts).
    #[error("slab lifetime graph must be acyclic")]
    Cyclic,
    /// Two requests share an id.
    #[error("duplicate slab buffer ID: {id}")]
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// A request has an empty `uses` set.
    #[error("slab buffer has no lifetime nodes: {id}")]
    NoUses {
        /// The buffer's id.
        id: String,
    },
    /// A use names a node index that is not in the DAG.
    #[error("slab lifetime references an absent DAG node: buffer {id} uses node {node}")]
    AbsentNode {
        /// The buffer's id.
        id: String,
        /// The absent node index.
        node: usize,
    },
    /// Rounding a request's size up to the alignment overflowed `usize` (plan_slab's message, e.g.
    /// `bytes = usize::MAX` at alignment 256).
    #[error("slab alignment overflow")]
    Overflow,
    /// A total of the plan, in bytes, has no `usize`: `naive_bytes` (the sum of the reserved
    /// sizes, checked before any placement, so every offset an algorithm computes fits) or
    /// `slab_bytes` (a buffer's end in a plan handed to [`crate::verify()`]). The requests may not
    /// even conflict: two `usize::MAX`-byte buffers in sequence overflow naive_bytes alone.
    #[error("slab {total} overflows usize")]
    TotalOverflow {
        /// Which total: `naive_bytes` or `slab_bytes`.
        total: &'static str,
    },
    /// First fit found no place below the capacity. This algorithm found no placement; one may
    /// still exist.
    #[error("slab capacity {capacity} exceeded while placing request {index} ({bytes} bytes)")]
    CapacityExceeded {
        /// The capacity in bytes.
        capacity: usize,
        /// Index of the request in request order.
        index: usize,
        /// The request's true size in bytes (before rounding).
        bytes: usize,
    },
    /// An in-place mark ([`crate::SlabBuffer::in_place_of`]) the planner cannot honour.
    #[error(
        "slab buffer {id} cannot be placed in place of {operand_id} (request {operand}): {reason}"
    )]
    InPlace {
        /// The marked output's id.
        id: String,
        /// The operand's request index as marked.
        operand: usize,
        /// The operand's id (`?` when the index names no request).
        operand_id: String,
        /// Why (shared uses, sizes, a second mark).
        reason: String,
    },
    /// A structure the planner needs could not be allocated: it names the structure and its
    /// size in bytes, so the caller can tell what to shrink (checked up front for every
    /// structure that can grow faster than the input, never an abort).
    #[error("out of memory: the planner's {what} needs {bytes} bytes")]
    OutOfMemory {
        /// The structure (e.g. `closure bitsets`, `buffer order`).
        what: &'static str,
        /// Bytes it needs.
        bytes: usize,
    },
}

/// Why [`crate::verify()`] rejected a plan.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VerifyError {
    /// The plan's input was itself invalid.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan has a different number of offsets than there are buffers.
    #[error("plan has {offsets} offsets for {buffers} buffers")]
    Length {
        /// Offsets in the plan.
        offsets: usize,
        /// Buffers requested.
        buffers: usize,
    },
    /// The plan has a different number of reserved sizes than there are buffers.
    #[error("plan has {reserved} reserved sizes for {buffers} buffers")]
    ReservedLength {
        /// Reserved sizes in the plan.
        reserved: usize,
        /// Buffers requested.
        buffers: usize,
    },
    /// A reserved size is not `round_up(max(bytes, 1), alignment)`.
    #[error("buffer {id} reserves {reserved} bytes but its size and the alignment give {expected}")]
    Reserved {
        /// The buffer's id.
        id: String,
        /// The plan's reserved size in bytes.
        reserved: usize,
        /// The reserved size the buffer's bytes and the alignment give.
        expected: usize,
    },
    /// An offset is not a multiple of the alignment.
    #[error("buffer {id} at offset {offset} is not aligned to {alignment} bytes")]
    Misaligned {
        /// The buffer's id.
        id: String,
        /// Its offset in bytes.
        offset: usize,
        /// The alignment in bytes.
        alignment: usize,
    },
    /// A buffer ends past the capacity (or past the plan's reported slab_bytes).
    #[error("buffer {id} ends at {end}, past the limit of {limit} bytes")]
    OutOfBounds {
        /// The buffer's id.
        id: String,
        /// Its end in bytes (offset + reserved).
        end: usize,
        /// The capacity or slab_bytes it passed.
        limit: usize,
    },
    /// Two buffers whose lifetimes conflict share bytes.
    #[error(
        "buffers {a} [{a_start}, {a_end}) and {b} [{b_start}, {b_end}) overlap but their lifetimes conflict"
    )]
    Overlap {
        /// First buffer's id.
        a: String,
        /// First buffer's start.
        a_start: usize,
        /// First buffer's end (exclusive).
        a_end: usize,
        /// Second buffer's id.
        b: String,
        /// Second buffer's start.
        b_start: usize,
        /// Second buffer's end (exclusive).
        b_end: usize,
    },
    /// The plan's lower bound is not the exact maximum-weight antichain.
    #[error("plan reports lower_bound = {reported} but the exact lower bound is {exact}")]
    LowerBound {
        /// The value the plan carries, in bytes.
        reported: usize,
        /// The exact maximum-weight antichain of reserved sizes, in bytes.
        exact: usize,
    },
    /// The plan's totals do not match its offsets.
    #[error("plan reports {field} = {reported} but its offsets give {actual}")]
    Totals {
        /// Which total: slab_bytes or naive_bytes.
        field: &'static str,
        /// The value the plan carries.
        reported: usize,
        /// The value recomputed from the offsets.
        actual: usize,
    },
}
