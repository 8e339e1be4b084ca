//! lumen-compiler: the Rust DSL, the HLIR, lowering to the LLIR, egg fusion and canonical dumps.
//!
//! Pipeline: DSL [`Graph`] -> HLIR ([`Hlir`]) -> (fusion) -> LLIR ([`Llir`]) -> lifetimes ->
//! `lumen_planner::plan_slab` -> [`CompiledProgram`]. See SPEC section 3.

#![warn(missing_docs)]

pub mod compile;
pub mod dsl;
pub mod dump;
pub mod error;
pub mod fusion;
pub mod hlir;
pub mod llir;
pub mod lower;
pub mod program;
pub mod programs;

pub use compile::{CompileOptions, LLIR_DUMP_DIR, compile_hlir, plan_hlir};
pub use dsl::{Graph, Tensor};
pub use error::{CompileError, ShapeText, SourceLocation};
pub use hlir::{Hlir, HlirNode, HlirOp, Shape};
pub use llir::{BufferId, BufferRole, Epilogue, Llir, LlirBuffer, LlirNode, LlirOp, NodeId};
pub use program::{CompiledProgram, Figures, ProgramOptions};
