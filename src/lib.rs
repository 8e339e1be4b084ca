//! lumen: a small Luminal-style tensor compiler.
//!
//! A program written in the Rust DSL ([`compiler`]) is lowered to an HLIR, then to an LLIR of
//! kernel and host ops over explicit buffers; the [`planner`] places every buffer at a 256-byte
//! aligned offset in one slab; a [`runtime`] executes the plan on the CPU or on CUDA.
//!
//! This crate re-exports the stage crates and holds the `lumen` command-line tool.

#![warn(missing_docs)]

pub mod model;

pub use lumen_compiler as compiler;
pub use lumen_onnx as onnx;
pub use lumen_planner as planner;
pub use lumen_runtime as runtime;
