//! lumen-compiler: the Rust DSL, the HLIR, lowering to the LLIR, egg fusion and canonical dumps.
//!
//! Pipeline: DSL [`Graph`] -> HLIR ([`Hlir`]) -> (fusion) -> LLIR ([`Llir`]) -> lifetimes ->
//! `lumen_planner::plan_slab` -> [`CompiledProgram`].
//!
//! - [`ops`]: the op table (every elementwise op's and reduction's facts in one place);
//! - [`view`]: views (shape, strides, offset), how kernels read movement without copies;
//! - [`dsl`] and [`composite`]: the primitives and the composites written over them;
//! - [`models`]: lumen's models as DSL programs (MLP, transformer, ViT); [`programs`] the
//!   CLI's built-in programs;
//! - [`hlir`], [`lower`], [`llir`]: the two IRs and the lowering between them;
//! - [`fusion`]: egg rewrites into cuBLASLt epilogues; [`dump`]: canonical text;
//! - [`interpret`]: an f64 interpreter of the HLIR, the oracle of lowering;
//! - [`target`]: what a program compiled for the CPU or the CUDA runtime reserves.

#![warn(missing_docs)]

pub mod compile;
pub mod composite;
pub mod conv;
pub mod decoder;
pub mod dsl;
pub mod dtype;
pub mod dump;
pub mod error;
pub mod fusion;
pub mod hlir;
pub mod interpret;
pub mod llir;
pub mod lower;
pub mod models;
pub mod names;
pub mod ops;
pub mod options;
pub mod plan;
pub mod polynomial;
pub mod program;
pub mod programs;
mod refine;
pub mod sizes;
pub mod spatial;
pub mod symbolic;
pub mod symbols;
pub mod target;
pub mod tensor;
pub mod view;

pub use compile::compile_hlir;
pub use composite::{multi_head_attention, scaled_dot_product_attention};
pub use conv::{ConvEpilogue, ConvGeometry, ConvSpec};
pub use dsl::{Graph, IntoOperand, Tensor};
pub use dtype::{DType, Scalar};
pub use error::{CompileError, ShapeText, SourceLocation};
pub use hlir::{Hlir, HlirNode, HlirOp, MoveOp, Shape, TensorType};
pub use llir::{
    BufferId, BufferRole, Epilogue, Llir, LlirBuffer, LlirNode, LlirOp, NodeId, Operand,
};
pub use ops::{BinaryOp, ElemOp, IntOp, ReduceOp, ScatterReduction, UnaryOp};
pub use options::{CompileOptions, LLIR_DUMP_DIR};
pub use plan::plan_hlir;
pub use program::{CompiledProgram, Figures, ProgramOptions};
pub use spatial::{ConvTransposeSpec, PadMode};
pub use symbolic::{BindError, Dim, Symbol, SymbolDecl, SymbolId};
pub use target::Target;
pub use tensor::{HostTensor, TensorError, Tensors};
pub use view::View;
