//! lumen-onnx: the ONNX front end. An ONNX model (opset 7 to 28, and 1 to 6 where its operators had their opset-7 forms; float32, static shapes or
//! shapes set by the caller) is imported into lumen's DSL ([`import()`]): initializers become
//! weights, graph inputs inputs, graph outputs outputs, constant subgraphs are folded once, and
//! everything downstream (fusion, planning, runtimes, dumps, search) is unchanged.
//!
//! The protobuf is decoded by prost from message declarations in [`proto`] (no protoc).

#![warn(missing_docs)]

pub mod constant;
mod data_dependent;
pub mod error;
mod fold;
pub mod import;
mod importer;
pub mod legacy;
pub mod ops;
pub mod proto;
pub mod signature;

pub use error::OnnxError;
pub use import::{ImportOptions, Imported, ImportedInput, IndexBuffer, import};
