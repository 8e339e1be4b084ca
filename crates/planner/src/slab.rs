//! Buffer requests, options, the plan, and [`plan_slab`] (Luminal's first fit in request order).

use std::collections::HashSet;

use fixedbitset::FixedBitSet;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

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
    /// In-place mark: the request index of an operand whose bytes this buffer may take. Set
    /// by the compiler for an elementwise op's output when an operand of the same size and
    /// layout dies at that op (the pair's only shared use is that op, every other use of the
    /// operand reaches it, and it reaches every other use of this buffer). The planner may then
    /// place this buffer at exactly the operand's offset, though both are live at the op; no
    /// other overlap. XLA's buffer assignment (`CanShareBuffer`), TVM's static memory planner
    /// and burn's fusion reuse buffers the same way. `None` (the default) is Luminal's
    /// `plan_slab` exactly.
    pub in_place_of: Option<usize>,
}

impl SlabBuffer {
    /// A request for `bytes` bytes used by `uses`.
    pub fn new(
        id: impl Into<String>,
        bytes: usize,
        uses: impl IntoIterator<Item = NodeIndex>,
    ) -> Self {
        Self { id: id.into(), bytes, uses: uses.into_iter().collect(), in_place_of: None }
    }

    /// This request, marked as writable in place of request `operand` (see
    /// [`SlabBuffer::in_place_of`]).
    #[must_use]
    pub fn in_place_of(mut self, operand: usize) -> Self {
        self.in_place_of = Some(operand);
        self
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
    /// Size-descending first fit: largest buffer first, each in the lowest gap between the
    /// placed buffers it conflicts with (TFLite Micro's greedy memory planner).
    FirstFitSize,
    /// Size-descending best fit: largest buffer first, each in the smallest gap that holds it,
    /// else above everything it conflicts with (TFLite's arena planner, XLA's
    /// `GlobalDecreasingSizeBestFitHeap`).
    BestFitSize,
    /// Lifetime-descending best fit: the buffer live over the longest stretch of the DAG's
    /// topological order first (XLA's temporal sort). The order only guides; conflicts still
    /// come from the DAG.
    Lifetime,
    /// The best lumen has: every greedy above and a bottom-left greedy (the buffer whose lowest
    /// gap starts lowest goes next), then a search that keeps the best plan found.
    /// On interval problems (the DAG's closure is a total order) an exact branch and bound over
    /// canonical bottom-up placements with a binary search on the slab size, in the spirit of
    /// MiniMalloc (Moffitt, ASPLOS 2023); on other DAGs an iterated greedy over placement
    /// orders. Never worse than `first-fit`; deterministic under the default work budget.
    Best,
}

impl SlabAlgorithm {
    /// Every algorithm, in the order `--help` lists them.
    pub const ALL: &'static [SlabAlgorithm] = &[
        SlabAlgorithm::FirstFit,
        SlabAlgorithm::FirstFitSize,
        SlabAlgorithm::BestFitSize,
        SlabAlgorithm::Lifetime,
        SlabAlgorithm::Best,
    ];

    /// The algorithm's name on the command line and in JSON (`first-fit`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SlabAlgorithm::FirstFit => "first-fit",
            SlabAlgorithm::FirstFitSize => "first-fit-size",
            SlabAlgorithm::BestFitSize => "best-fit-size",
            SlabAlgorithm::Lifetime => "lifetime",
            SlabAlgorithm::Best => "best",
        }
    }

    /// One line on what the algorithm does, for `--help`.
    pub fn summary(self) -> &'static str {
        match self {
            SlabAlgorithm::FirstFit => {
                "request order, lowest gap (Luminal's plan_slab; the default)"
            }
            SlabAlgorithm::FirstFitSize => "largest first, lowest gap (TFLite Micro)",
            SlabAlgorithm::BestFitSize => "largest first, smallest gap that fits (TFLite, XLA)",
            SlabAlgorithm::Lifetime => "longest-lived first, smallest gap that fits (XLA temporal)",
            SlabAlgorithm::Best => {
                "every greedy, then a search toward the lower bound (the best lumen has)"
            }
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
    /// Wall-clock limit for the search of [`SlabAlgorithm::Best`] (the greedy algorithms ignore
    /// it). `None` (the default) runs a fixed work budget instead: the same input always gives
    /// the same plan, in well under a second on the MiniMalloc suite. `Some(limit)` searches
    /// until the limit passes or the search is exhausted, so the plan may then depend on the
    /// machine's speed; it is never worse than the greedy algorithms' best.
    pub time_budget: Option<std::time::Duration>,
}

impl Default for SlabOptions {
    fn default() -> Self {
        Self {
            capacity: None,
            alignment: 256,
            algorithm: SlabAlgorithm::FirstFit,
            time_budget: None,
        }
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

/// Sum of `reserved` in bytes: a plan's naive_bytes.
///
/// # Errors
/// [`PlanError::TotalOverflow`] naming `naive_bytes` when the sum has no `usize`.
pub(crate) fn naive_total(reserved: &[usize]) -> Result<usize, PlanError> {
    reserved
        .iter()
        .try_fold(0usize, |acc, &r| acc.checked_add(r))
        .ok_or(PlanError::TotalOverflow { total: "naive_bytes" })
}

/// Checks everything plan_slab's contract lists as bad input, in its order (a cycle anywhere in the
/// DAG is an error, used or not), then that the reserved sizes sum within `usize`, and returns
/// the closure projected onto the used nodes and the reserved sizes.
pub(crate) fn validate<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    alignment: usize,
) -> Result<(Reachability, Vec<usize>), PlanError> {
    if alignment == 0 {
        return Err(PlanError::ZeroAlignment);
    }
    let order = crate::reach::topological_order(dag)?;
    let mut seen = HashSet::with_capacity(buffers.len());
    let mut reserved = Vec::with_capacity(buffers.len());
    // Only used nodes take part in `precedes`: the closure among them is all placement needs,
    // however many nodes carry no buffer.
    let mut used = FixedBitSet::with_capacity(dag.node_count());
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
        for u in &buf.uses {
            used.insert(u.index());
        }
    }
    // Once naive_bytes fits, so does every offset or end any algorithm computes (each is at most
    // a sum of distinct reserved sizes) and every lower bound.
    naive_total(&reserved)?;
    let reach = Reachability::project(dag, &order, &used)?;
    check_marks(&reach, buffers, &reserved)?;
    Ok((reach, reserved))
}

/// Whether `output` may be marked in place of `operand` ([`SlabBuffer::in_place_of`]) over the
/// closure `reach` of the problem's DAG: their only shared use is an op that is the operand's
/// last use (every other use reaches it, and it has one) and the output's first. Sizes and
/// other marks are checked by [`plan_slab`]. What a compiler asks before it marks a pair.
pub fn in_place_allowed(reach: &Reachability, operand: &SlabBuffer, output: &SlabBuffer) -> bool {
    in_place_node(reach, operand, output).is_ok()
}

/// The node where marked output `i` may take operand `p`'s bytes: the pair's only shared use,
/// which every other use of `p` reaches and which reaches every other use of `i`.
pub(crate) fn in_place_node(
    reach: &Reachability,
    operand: &SlabBuffer,
    output: &SlabBuffer,
) -> Result<NodeIndex, &'static str> {
    let mut shared = operand.uses.iter().filter(|u| output.uses.contains(u));
    let (Some(&op), None) = (shared.next(), shared.next()) else {
        return Err("the two must share exactly one use (the op)");
    };
    if operand.uses.iter().all(|&u| u == op) {
        return Err("the operand must have a use before the op (its producer or upload)");
    }
    if !operand.uses.iter().all(|&u| u == op || reach.reaches(u, op)) {
        return Err("the op must be the operand's last use (every other use reaches it)");
    }
    if !output.uses.iter().all(|&u| u == op || reach.reaches(op, u)) {
        return Err("the op must be the output's first use (it reaches every other use)");
    }
    Ok(op)
}

/// Checks every in-place mark: an earlier-placed operand index in range, not the buffer
/// itself, each operand marked once, the output no larger (reserved bytes) than the operand,
/// and the DAG shape of [`in_place_node`].
fn check_marks(
    reach: &Reachability,
    buffers: &[SlabBuffer],
    reserved: &[usize],
) -> Result<(), PlanError> {
    let mut taken = vec![false; buffers.len()];
    for (i, buf) in buffers.iter().enumerate() {
        let Some(p) = buf.in_place_of else { continue };
        let fail = |reason: &str| PlanError::InPlace {
            id: buf.id.clone(),
            operand: p,
            operand_id: buffers.get(p).map_or_else(|| "?".to_string(), |b| b.id.clone()),
            reason: reason.to_string(),
        };
        if p >= buffers.len() {
            return Err(fail("no such request"));
        }
        if p == i {
            return Err(fail("a buffer cannot take its own bytes"));
        }
        if std::mem::replace(&mut taken[p], true) {
            return Err(fail("the operand is already marked for another output"));
        }
        if reserved[i] > reserved[p] {
            return Err(fail("the output is larger than the operand"));
        }
        in_place_node(reach, &buffers[p], buf).map_err(fail)?;
    }
    Ok(())
}
