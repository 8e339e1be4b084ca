//! A compiled program: the LLIR, its lifetime DAG and its slab plan, with the figures users compare.

use lumen_planner::{Dag, SlabAlgorithm, SlabPlan};
use serde::Serialize;

use crate::llir::Llir;
use crate::options::CompileOptions;

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
    /// The options `plan` was made with ([`ProgramOptions`]): a verifier checks the plan
    /// against these instead of guessing them from the offsets.
    pub options: ProgramOptions,
}

/// The [`CompileOptions`] a [`CompiledProgram`] was lowered and planned with, as recorded by
/// `compile`: what a verifier or a report needs to know about how the LLIR and the plan were
/// made (Luminal keeps its compile settings beside the graph for the same reason).
///
/// Left out: `name` (the program's label carries it), `dump_dir` (where dumps went, not what
/// was compiled) and `fuse` (a pipeline switch: every candidate of a fusion exploration,
/// the unfused one included, is planned under the same options; the label and the LLIR's
/// epilogues say what was fused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProgramOptions {
    /// Slab alignment, bytes: every offset and reserved size of the plan is a multiple of it.
    pub alignment: usize,
    /// Largest slab the planner was allowed, bytes; `None` = unbounded.
    pub capacity: Option<usize>,
    /// The planner's placement algorithm.
    pub algorithm: SlabAlgorithm,
    /// cuBLASLt workspace per `lt_matmul`, bytes.
    pub workspace_bytes: usize,
    /// Whether every weight's uses reach the readback node
    /// ([`CompileOptions::resident_weights`]).
    pub resident_weights: bool,
    /// Whether elementwise outputs were marked in place of dying operands
    /// ([`CompileOptions::in_place`]); absent from JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_place: bool,
}

impl From<&CompileOptions> for ProgramOptions {
    fn from(o: &CompileOptions) -> Self {
        Self {
            alignment: o.alignment,
            capacity: o.capacity,
            algorithm: o.algorithm,
            workspace_bytes: o.workspace_bytes,
            resident_weights: o.resident_weights,
            in_place: o.in_place,
        }
    }
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

#[cfg(test)]
mod tests {
    use lumen_planner::SlabAlgorithm;

    use super::ProgramOptions;
    use crate::fusion;
    use crate::{CompileOptions, programs};

    #[test]
    fn compile_records_its_options() {
        let options = CompileOptions {
            fuse: false,
            workspace_bytes: 4096,
            alignment: 64,
            capacity: Some(1 << 24),
            algorithm: SlabAlgorithm::Best,
            name: "rec".to_string(),
            dump_dir: None,
            resident_weights: true,
            in_place: true,
        };
        let want = ProgramOptions {
            alignment: 64,
            capacity: Some(1 << 24),
            algorithm: SlabAlgorithm::Best,
            workspace_bytes: 4096,
            resident_weights: true,
            in_place: true,
        };
        let graph = programs::linear_relu(8, 16, 4).unwrap();
        assert_eq!(graph.compile(&options).unwrap().options, want);
        let fused = CompileOptions { fuse: true, ..options.clone() };
        assert_eq!(graph.compile(&fused).unwrap().options, want);
        // Every candidate of an exploration records the options it was planned under.
        for c in fusion::candidates(&graph.hlir(), &fused).unwrap() {
            assert_eq!(c.program.options, want, "{}", c.label);
        }
        assert_eq!(ProgramOptions::from(&CompileOptions::default()).alignment, 256);
    }
}
