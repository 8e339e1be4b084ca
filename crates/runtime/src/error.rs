//! Typed errors of the runtimes. Every way a program, an input or a weight can be wrong is one
//! variant here; kernels and execution never panic on user data.

use thiserror::Error;

/// Which side of a program a named tensor belongs to, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// A program input, given to every execute.
    Input,
    /// A weight, given once to prepare.
    Weight,
}

impl std::fmt::Display for TensorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TensorKind::Input => "input",
            TensorKind::Weight => "weight",
        })
    }
}

/// Why a runtime refused to create, prepare or execute.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A host tensor could not be made: its data length is not the product of its shape, or
    /// its memory could not be allocated.
    #[error(transparent)]
    Tensor(#[from] lumen_compiler::tensor::TensorError),
    /// The program declares an input or weight the caller did not give.
    #[error("missing {kind} `{name}` (shape {shape:?})")]
    Missing {
        /// Input or weight.
        kind: TensorKind,
        /// The tensor's name in the program.
        name: String,
        /// The shape the program expects.
        shape: Vec<usize>,
    },
    /// The caller gave a tensor the program does not declare with that kind.
    #[error("unexpected {kind} `{name}`: the program has no {kind} of that name")]
    Unexpected {
        /// Input or weight.
        kind: TensorKind,
        /// The name given.
        name: String,
    },
    /// A given tensor's shape differs from the program's.
    #[error("{kind} `{name}` has shape {got:?}, the program expects {expected:?}")]
    ShapeMismatch {
        /// Input or weight.
        kind: TensorKind,
        /// The tensor's name.
        name: String,
        /// The program's shape.
        expected: Vec<usize>,
        /// The given shape.
        got: Vec<usize>,
    },
    /// A given tensor's element type differs from the program's (f32 given for i64 ids).
    #[error("{kind} `{name}` has dtype {got}, the program expects {expected}")]
    DTypeMismatch {
        /// Input or weight.
        kind: TensorKind,
        /// The tensor's name.
        name: String,
        /// The program's dtype.
        expected: lumen_compiler::DType,
        /// The given dtype.
        got: lumen_compiler::DType,
    },
    /// A gather id (or a take's, gather_elements' or scatter_elements' index) outside the
    /// table's rows or the indexed axis, found at run time: nothing is read or written out of
    /// bounds.
    #[error(
        "{op}: id {index} at position {position} of `{tensor}` is out of range for {}",
        bound_text(op, *rows)
    )]
    IndexOutOfRange {
        /// The op whose index it is: `gather` (for gather, take and gather_elements, as their
        /// messages have always said) or `scatter_elements`.
        op: &'static str,
        /// The ids buffer's name.
        tensor: String,
        /// The id.
        index: i64,
        /// Its row-major position in the ids tensor as declared (not in a view of it).
        position: usize,
        /// Rows of the table (the indexed axis' length).
        rows: usize,
    },
    /// The compiled program is inconsistent with itself or its plan (operand counts, sizes,
    /// offsets, order). The compiler never produces one; a hand-built or corrupted one can.
    #[error("invalid program `{label}`: {reason}")]
    InvalidProgram {
        /// The program's label.
        label: String,
        /// What is wrong, naming the node or buffer.
        reason: String,
    },
    /// A kernel was called with operand lengths that do not match its sizes.
    #[error("kernel {kernel}: {reason}")]
    Kernel {
        /// The kernel's name (`lt_matmul`, `add_bias`, ...).
        kernel: &'static str,
        /// Which operand is wrong and how.
        reason: String,
    },
    /// A runtime that cannot run one of the program's ops (yet): refused at prepare, naming
    /// the op and the node, never a panic or a wrong result.
    #[error("the {runtime} runtime cannot run node {node} ({op}): {reason}")]
    Unsupported {
        /// The runtime (`cuda`).
        runtime: &'static str,
        /// The op's name in dumps (`exp`, `sum`, `lt_matmul`).
        op: String,
        /// The LLIR node.
        node: usize,
        /// What exactly it cannot do.
        reason: String,
    },
    /// The inputs' shapes do not bind the program's symbolic dimensions
    /// ([`lumen_compiler::symbolic`]): a value past its bound, two values for one symbol, a
    /// fixed axis of another length.
    #[error(transparent)]
    Bind(#[from] lumen_compiler::BindError),
    /// The slab (or a host copy) could not be allocated.
    #[error("cannot allocate a slab of {bytes} bytes")]
    Alloc {
        /// Requested size in bytes.
        bytes: usize,
    },
    /// The CPU runtime's worker threads could not be set up: a team of 0 threads
    /// ([`crate::CpuOptions::threads`] = `Some(0)`) or a pool whose threads the OS refused.
    #[error("cannot start the CPU worker threads: {0}")]
    Threads(String),
    /// The CUDA runtime is unavailable: no driver, no device, or a build without `cuda`.
    #[error("no CUDA device: {reason}")]
    NoCudaDevice {
        /// Why.
        reason: String,
    },
    /// A CUDA driver, cuBLASLt or NVRTC call failed, or a plan does not fit what the device
    /// libraries accept (alignment, workspace, no algorithm). Only with the `cuda` feature.
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Cuda(#[from] crate::cuda::error::CudaError),
    /// `runtime_by_name` got a name it does not know.
    #[error("unknown runtime `{name}` (expected cpu or cuda)")]
    UnknownRuntime {
        /// The name given.
        name: String,
    },
}

/// What an out-of-range index is checked against, in [`RuntimeError::IndexOutOfRange`]'s
/// message: a gather's table, or a scatter's axis.
fn bound_text(op: &str, rows: usize) -> String {
    if op == "gather" {
        format!("a table of {rows} rows")
    } else {
        format!("an axis of length {rows}")
    }
}

impl RuntimeError {
    pub(crate) fn invalid(label: &str, reason: impl Into<String>) -> Self {
        RuntimeError::InvalidProgram { label: label.to_string(), reason: reason.into() }
    }

    pub(crate) fn kernel(kernel: &'static str, reason: impl Into<String>) -> Self {
        RuntimeError::Kernel { kernel, reason: reason.into() }
    }
}
