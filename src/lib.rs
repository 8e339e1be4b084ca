//! lumen: a small Luminal-style tensor compiler.
//!
//! A program written in the Rust DSL ([`compiler`]) is lowered to an HLIR, then to an LLIR of
//! kernel and host ops over explicit buffers; the [`planner`] places every buffer at a 256-byte
//! aligned offset in one slab; a [`runtime`] executes the plan on the CPU or on CUDA.
//!
//! This crate re-exports the stage crates and holds the `lumen` command-line tool.

#![warn(missing_docs)]

pub mod generate;
pub mod model;
pub mod onnx_decoder;

pub use lumen_compiler as compiler;
pub use lumen_onnx as onnx;
pub use lumen_planner as planner;
pub use lumen_runtime as runtime;

/// The README and the user guide's pages (`docs/src/*.md`) as doctests, so that `cargo test
/// --workspace` compiles their Rust snippets (and runs those not marked `no_run`), as `mdbook
/// test docs` does in `scripts/docs-check.sh`.
#[cfg(doctest)]
#[allow(dead_code)]
mod guide {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/src/introduction.md")]
    struct Introduction;
    #[doc = include_str!("../docs/src/tensor-programs.md")]
    struct TensorPrograms;
    #[doc = include_str!("../docs/src/library.md")]
    struct Library;
    #[doc = include_str!("../docs/src/onnx.md")]
    struct Onnx;
    #[doc = include_str!("../docs/src/onnx-operators.md")]
    struct OnnxOperators;
    #[doc = include_str!("../docs/src/run.md")]
    struct Run;
    #[doc = include_str!("../docs/src/vit.md")]
    struct Vit;
    #[doc = include_str!("../docs/src/generate.md")]
    struct Generate;
    #[doc = include_str!("../docs/src/cpu-runtime.md")]
    struct CpuRuntime;
    #[doc = include_str!("../docs/src/threads.md")]
    struct Threads;
    #[doc = include_str!("../docs/src/compile.md")]
    struct Compile;
    #[doc = include_str!("../docs/src/fusion.md")]
    struct Fusion;
    #[doc = include_str!("../docs/src/symbolic.md")]
    struct Symbolic;
    #[doc = include_str!("../docs/src/search.md")]
    struct Search;
    #[doc = include_str!("../docs/src/tuning-cache.md")]
    struct TuningCache;
    #[doc = include_str!("../docs/src/plan-slab.md")]
    struct PlanSlab;
    #[doc = include_str!("../docs/src/in-place.md")]
    struct InPlace;
    #[doc = include_str!("../docs/src/cuda.md")]
    struct Cuda;
    #[doc = include_str!("../docs/src/benchmarks.md")]
    struct Benchmarks;
    #[doc = include_str!("../docs/src/pipeline.md")]
    struct Pipeline;
    #[doc = include_str!("../docs/src/adding-an-op.md")]
    struct AddingAnOp;
    #[doc = include_str!("../docs/src/file-layout.md")]
    struct FileLayout;
    #[doc = include_str!("../docs/src/cli.md")]
    struct Cli;
    #[doc = include_str!("../docs/src/about.md")]
    struct About;
}
