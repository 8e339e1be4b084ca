//! lumen-compiler: the Rust DSL, the HLIR, lowering to the LLIR, egg fusion and canonical dumps.
//!
//! Pipeline: DSL [`Graph`] -> HLIR -> (fusion) -> LLIR -> lifetimes -> `lumen_planner::plan_slab`
//! -> [`CompiledProgram`].

pub mod llir;
pub mod program;

pub use llir::{BufferId, BufferRole, Epilogue, Llir, LlirBuffer, LlirNode, LlirOp, NodeId};
pub use program::{CompiledProgram, Figures};
