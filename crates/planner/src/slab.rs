//! Buffer requests, options, the plan, and [`plan_slab`] (Luminal's first fit in request order).

use std::collections::HashSet;

use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use crate::order::BufferOrder;
use crate::{PlanError, Reachability};

/// One buffer request: `bytes` of storage live at and between the DAG nodes in `uses` (every
/// read, write, upload and readback of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlabBuffer {
    /// Unique id (e.g. `x`, `workspace`, `t0`).
    pub id: String,
    /// True size in bytes; 0 is allowed and still reserves one alignment unit.
    pub bytes: usize,
    /// Non-empty set of DAG nodes that use the buffer.
    pub uses: Vec<NodeIndex>,
}

impl SlabBuffer {
    /// A request for `bytes` bytes used by `uses`.
    pub fn new(
        id: impl Into<String>,
        bytes: usize,
        uses: impl IntoIterator<Item = NodeIndex>,
    ) -> Self {
        Self { id: id.into(), bytes, uses: uses.into_iter().collect() }
    }
}

/// How the planner places requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SlabAlgorithm {
    /// Luminal's first fit in request order: each request goes in the lowest gap between the
    /// earlier requests it conflicts with. Exact reproduction of `plan_slab`.
    #[default]
    FirstFit,
}

impl SlabAlgorithm {
    /// Every algorithm, in the order `--help` lists them.
    pub const ALL: &'static [SlabAlgorithm] = &[SlabAlgorithm::FirstFit];

    /// The algorithm's name on the command line and in JSON (`first-fit`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SlabAlgorithm::FirstFit => "first-fit",
        }
    }

    /// Parses a name produced by [`SlabAlgorithm::name`]; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }
}

impl std::fmt::Display for SlabAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Planner options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabOptions {
    /// Largest slab in bytes the plan may use; `None` = unbounded.
    pub capacity: Option<usize>,
    /// Every offset and reserved size is a multiple of this, in bytes (default 256, cuBLASLt's
    /// pointer alignment). Must be positive.
    pub alignment: usize,
    /// Placement algorithm.
    pub algorithm: SlabAlgorithm,
}

impl Default for SlabOptions {
    fn default() -> Self {
        Self { capacity: None, alignment: 256, algorithm: SlabAlgorithm::FirstFit }
    }
}

/// A placement: request `i` lives at `offsets[i] .. offsets[i] + reserved[i]` in the slab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlabPlan {
    /// Byte offset of each request, in request order.
    pub offsets: Vec<usize>,
    /// Reserved size of each request in bytes: `round_up(max(bytes, 1), alignment)`.
    pub reserved: Vec<usize>,
    /// Slab size in bytes: the highest `offset + reserved` (0 with no requests).
    pub slab_bytes: usize,
    /// Sum of reserved sizes in bytes: the slab with no reuse at all.
    pub naive_bytes: usize,
    /// Exact maximum-weight antichain of reserved sizes under `precedes`, in bytes.
    pub lower_bound: usize,
}

/// Reserved size in bytes of a `bytes`-byte request: `round_up(max(bytes, 1), alignment)`.
///
/// # Errors
/// [`PlanError::ZeroAlignment`] for alignment 0, [`PlanError::Overflow`] when rounding overflows.
pub fn reserved_bytes(bytes: usize, alignment: usize) -> Result<usize, PlanError> {
    if alignment == 0 {
        return Err(PlanError::ZeroAlignment);
    }
    let b = bytes.max(1);
    b.div_ceil(alignment).checked_mul(alignment).ok_or(PlanError::Overflow)
}

/// Checks everything SPEC section 2 lists as bad input, in its order, and returns the closure
/// and the reserved sizes.
pub(crate) fn validate<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    alignment: usize,
) -> Result<(Reachability, Vec<usize>), PlanError> {
    if alignment == 0 {
        return Err(PlanError::ZeroAlignment);
    }
    let reach = Reachability::new(dag)?;
    let mut seen = HashSet::with_capacity(buffers.len());
    let mut reserved = Vec::with_capacity(buffers.len());
    for buf in buffers {
        if !seen.insert(buf.id.as_str()) {
            return Err(PlanError::DuplicateId { id: buf.id.clone() });
        }
        if buf.uses.is_empty() {
            return Err(PlanError::NoUses { id: buf.id.clone() });
        }
        if let Some(node) = buf.uses.iter().find(|n| n.index() >= dag.node_count()) {
            return Err(PlanError::AbsentNode { id: buf.id.clone(), node: node.index() });
        }
        reserved.push(reserved_bytes(buf.bytes, alignment)?);
    }
    Ok((reach, reserved))
}

/// Plans `buffers` into one slab over `dag`, following Luminal's `plan_slab`.
///
/// First fit: for each request in order, the earlier requests that conflict with it (neither
/// precedes the other) are sorted by offset and scanned from 0; the request takes the first gap
/// it fits in. Request order is part of the plan. The plan also carries `slab_bytes`,
/// `naive_bytes` and the exact [`crate::lower_bound`].
///
/// # Errors
/// Every [`PlanError`]: zero alignment, a cyclic DAG, duplicate ids, empty uses, absent nodes,
/// overflow, and [`PlanError::CapacityExceeded`] when a request's end passes `options.capacity`.
pub fn plan_slab<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    options: &SlabOptions,
) -> Result<SlabPlan, PlanError> {
    let (reach, reserved) = validate(dag, buffers, options.alignment)?;
    let order = BufferOrder::new(&reach, buffers);
    let offsets = place(options.algorithm, &order, buffers, &reserved, options.capacity)?;
    finish(&order, reserved, offsets)
}

/// Runs one placement algorithm: offsets in request order. New algorithms add an arm here.
pub(crate) fn place(
    algorithm: SlabAlgorithm,
    order: &BufferOrder,
    buffers: &[SlabBuffer],
    reserved: &[usize],
    capacity: Option<usize>,
) -> Result<Vec<usize>, PlanError> {
    match algorithm {
        SlabAlgorithm::FirstFit => first_fit(order, buffers, reserved, capacity),
    }
}

/// Assembles a plan's totals from its offsets (`offsets` and `reserved` in request order).
pub(crate) fn finish(
    order: &BufferOrder,
    reserved: Vec<usize>,
    offsets: Vec<usize>,
) -> Result<SlabPlan, PlanError> {
    let mut slab_bytes = 0usize;
    for (o, r) in offsets.iter().zip(&reserved) {
        slab_bytes = slab_bytes.max(o.checked_add(*r).ok_or(PlanError::Overflow)?);
    }
    let naive_bytes = reserved
        .iter()
        .try_fold(0usize, |acc, &r| acc.checked_add(r))
        .ok_or(PlanError::Overflow)?;
    let lower_bound = crate::lower_bound::antichain_of(order, &reserved)?.weight;
    Ok(SlabPlan { offsets, reserved, slab_bytes, naive_bytes, lower_bound })
}

/// Luminal's first fit in request order (see [`plan_slab`]).
pub(crate) fn first_fit(
    order: &BufferOrder,
    buffers: &[SlabBuffer],
    reserved: &[usize],
    capacity: Option<usize>,
) -> Result<Vec<usize>, PlanError> {
    let mut offsets: Vec<usize> = Vec::with_capacity(buffers.len());
    let mut busy: Vec<(usize, usize)> = Vec::new();
    for (i, (buf, &size)) in buffers.iter().zip(reserved).enumerate() {
        busy.clear();
        // Earlier ends were checked when they were placed.
        busy.extend(
            offsets
                .iter()
                .zip(reserved)
                .enumerate()
                .filter(|&(j, _)| order.conflicts(j, i))
                .map(|(_, (&o, &r))| (o, o + r)),
        );
        busy.sort_unstable();
        let mut candidate = 0usize;
        for &(start, end) in &busy {
            let want_end = candidate.checked_add(size).ok_or(PlanError::Overflow)?;
            if want_end <= start {
                break;
            }
            candidate = candidate.max(end);
        }
        let end = candidate.checked_add(size).ok_or(PlanError::Overflow)?;
        if let Some(cap) = capacity.filter(|&cap| end > cap) {
            return Err(PlanError::CapacityExceeded { capacity: cap, index: i, bytes: buf.bytes });
        }
        offsets.push(candidate);
    }
    Ok(offsets)
}
