//! A compiled program: the LLIR, its lifetime DAG and its slab plan, with the figures users compare.

use lumen_planner::{Dag, SlabPlan};
use serde::Serialize;

use crate::llir::Llir;

/// What `compile` produces and a runtime prepares.
///
/// Buffer `i` of `llir` is request `i` of `plan`: it lives at
/// `plan.offsets[i] .. plan.offsets[i] + plan.reserved[i]` bytes in the slab.
#[derive(Debug, Clone)]
pub struct CompiledProgram {
    /// Dump label: program name plus `-fused` / `-unfused` (e.g. `linear-relu-fused`).
    pub label: String,
    /// The lowered program.
    pub llir: Llir,
    /// The planner's DAG: node `i` is LLIR node `i`, edges from each node's `inputs`.
    pub dag: Dag,
    /// The slab plan of `llir.buffers`, in request order.
    pub plan: SlabPlan,
    /// Summary figures.
    pub figures: Figures,
}

/// Figures of one compiled program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// LLIR nodes, upload and readback included.
    pub nodes: usize,
    /// Kernel launches: nodes other than upload and readback.
    pub launches: usize,
    /// Slab size in bytes.
    pub slab_bytes: usize,
    /// Sum of reserved sizes in bytes (no reuse).
    pub naive_bytes: usize,
    /// Exact lower bound on any plan's slab, in bytes.
    pub lower_bound: usize,
    /// Bytes of tensors read plus written by the compute nodes (workspace not counted).
    pub dram_bytes: usize,
    /// Floating-point operations of one execute (see [`crate::llir::LlirOp::flops`]).
    pub flops: u64,
}
