//! lumen-planner: places every buffer of a program at an aligned offset in ONE slab.
//!
//! The semantics follow Luminal's `plan_slab` (src/buffer/arena.rs in luminal-ai/luminal):
//! buffers are requested in order, each with a size in bytes and the set of DAG nodes that use
//! it; two buffers may share bytes only when every use of one strictly precedes every use of the
//! other in the DAG's transitive closure. The planner knows nothing of tensors.
//!
//! - [`plan_slab`] places requests (first fit in request order by default).
//! - [`lower_bound()`] is the exact maximum-weight antichain of reserved sizes: no planner can beat it.
//! - [`verify()`] checks any plan independently and names the offending pair.

#![warn(missing_docs)]

mod algorithms;
pub mod error;
mod flow;
pub mod lower_bound;
mod memory;
pub mod order;
pub mod plan;
pub mod problem;
pub mod reach;
pub mod slab;
pub mod svg;
#[cfg(test)]
mod sweep_tests;
#[cfg(test)]
mod test_dag;
pub mod verify;

pub use error::{PlanError, VerifyError};
pub use lower_bound::{Antichain, antichain_of, lower_bound, max_weight_antichain};
pub use order::BufferOrder;
pub use plan::plan_slab;
pub use problem::{ProblemError, SlabProblem};
pub use reach::Reachability;
pub use slab::{
    SlabAlgorithm, SlabBuffer, SlabOptions, SlabPlan, in_place_allowed, reserved_bytes,
};
pub use svg::{layout_svg, layout_svg_with_names};
pub use verify::verify;

/// The DAG type the planner works on: nodes are program steps (kernels, uploads, readbacks),
/// edges are "must run before". Node and edge weights are ignored by the planner.
pub type Dag<N = (), E = ()> = petgraph::graph::DiGraph<N, E>;
