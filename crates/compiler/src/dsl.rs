//! The Rust DSL: a [`Graph`] of f32 tensors built with infallible calls, like Luminal's `Graph`.
//!
//! ```
//! use lumen_compiler::{CompileOptions, Graph};
//!
//! let mut cx = Graph::new();
//! let x = cx.input("x", [64, 256]); // f32, row-major
//! let w = cx.weight("w", [256, 64]);
//! let b = cx.weight("b", [64]);
//! let _y = (x.matmul(w) + b).relu().output("y");
//! let program = cx.compile(&CompileOptions::default()).unwrap();
//! assert_eq!(program.figures.slab_bytes, 1_196_288);
//! ```
//!
//! Every call records the caller's source line (`#[track_caller]`); shape errors are reported by
//! [`Graph::compile`] with that line, never by a panic.

use std::cell::RefCell;
use std::ops::Add;
use std::rc::Rc;

use petgraph::graph::NodeIndex;

use crate::error::{CompileError, SourceLocation};
use crate::hlir::{Hlir, HlirOp};
use crate::llir::Epilogue;

#[derive(Debug, Default)]
struct Inner {
    hlir: Hlir,
    /// Errors a DSL call could not report itself (e.g. a tensor of another graph).
    errors: Vec<CompileError>,
}

type Shared = Rc<RefCell<Inner>>;

/// A tensor program under construction. Cheap to clone (a shared handle); single-threaded.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    inner: Shared,
}

/// A handle to a tensor of a [`Graph`]: an HLIR node. Cheap to clone; the ops build new nodes.
#[derive(Debug, Clone)]
pub struct Tensor {
    graph: Shared,
    node: NodeIndex,
}

impl Graph {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares an input of `shape` (elements, row-major f32), uploaded on every execute.
    /// Inputs and weights are uploaded in declaration order: the program's signature.
    #[track_caller]
    pub fn input(&mut self, name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Tensor {
        let op = HlirOp::Input { name: name.into(), shape: shape.into() };
        self.leaf(op, SourceLocation::caller())
    }

    /// Declares a weight of `shape` (elements, row-major f32), uploaded at prepare; again on
    /// every execute when the plan lets a later buffer reuse its bytes (see
    /// [`crate::CompileOptions::resident_weights`]).
    #[track_caller]
    pub fn weight(&mut self, name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Tensor {
        let op = HlirOp::Weight { name: name.into(), shape: shape.into() };
        self.leaf(op, SourceLocation::caller())
    }

    fn leaf(&mut self, op: HlirOp, location: SourceLocation) -> Tensor {
        let node = self.inner.borrow_mut().hlir.add_op(op, &[], location);
        Tensor { graph: Rc::clone(&self.inner), node }
    }

    /// A snapshot of the program's HLIR (later DSL calls do not change it).
    pub fn hlir(&self) -> Hlir {
        self.inner.borrow().hlir.clone()
    }

    /// The first error a DSL call recorded (a tensor of another graph), if any. Shape errors are
    /// found by [`Hlir::validate`] at compile time, not here.
    pub fn recorded_error(&self) -> Option<CompileError> {
        self.inner.borrow().errors.first().cloned()
    }
}

impl Tensor {
    /// The tensor's HLIR node.
    pub fn node(&self) -> NodeIndex {
        self.node
    }

    /// The graph the tensor belongs to.
    pub fn graph(&self) -> Graph {
        Graph { inner: Rc::clone(&self.graph) }
    }

    #[track_caller]
    fn op(&self, op: HlirOp, others: &[&Tensor]) -> Tensor {
        let location = SourceLocation::caller();
        let mut inner = self.graph.borrow_mut();
        let mut operands = vec![self.node];
        for t in others {
            if Rc::ptr_eq(&t.graph, &self.graph) {
                operands.push(t.node);
            } else {
                // Keep the call infallible: compile reports it, and the node's missing operand
                // makes the HLIR invalid rather than silently different.
                inner.errors.push(CompileError::ForeignTensor { op: op.name(), location });
            }
        }
        let node = inner.hlir.add_op(op, &operands, location);
        Tensor { graph: Rc::clone(&self.graph), node }
    }

    /// `self [M, K] x rhs [K, N] -> [M, N]` (cuBLASLt matmul, epilogue DEFAULT). A shape
    /// mismatch is reported by `compile`.
    #[track_caller]
    pub fn matmul(&self, rhs: impl std::borrow::Borrow<Tensor>) -> Tensor {
        self.op(
            HlirOp::Matmul { epilogue: Epilogue::Default },
            &[std::borrow::Borrow::borrow(&rhs)],
        )
    }

    /// Elementwise `max(x, 0)`.
    #[track_caller]
    pub fn relu(&self) -> Tensor {
        self.op(HlirOp::Relu, &[])
    }

    /// Elementwise GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    #[track_caller]
    pub fn gelu(&self) -> Tensor {
        self.op(HlirOp::Gelu, &[])
    }

    /// Marks this tensor as the program output `name` (read back after the last launch) and
    /// returns it, so it can still feed other ops.
    #[track_caller]
    pub fn output(&self, name: impl Into<String>) -> Tensor {
        self.op(HlirOp::Output { name: name.into() }, &[]);
        self.clone()
    }

    #[track_caller]
    fn add_tensor(&self, rhs: &Tensor) -> Tensor {
        self.op(HlirOp::Add, &[rhs])
    }
}

/// `a + b`: equal shapes, or a bias `[N]` broadcast over the rows of an `[M, N]` tensor.
impl Add<Tensor> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn add(self, rhs: Tensor) -> Tensor {
        self.add_tensor(&rhs)
    }
}

/// `a + &b`; see `Tensor + Tensor`.
impl Add<&Tensor> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn add(self, rhs: &Tensor) -> Tensor {
        self.add_tensor(rhs)
    }
}

/// `&a + b`; see `Tensor + Tensor`.
impl Add<Tensor> for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn add(self, rhs: Tensor) -> Tensor {
        self.add_tensor(&rhs)
    }
}

/// `&a + &b`; see `Tensor + Tensor`.
impl Add<&Tensor> for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn add(self, rhs: &Tensor) -> Tensor {
        self.add_tensor(rhs)
    }
}
