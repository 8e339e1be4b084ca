//! What the CUDA runtime can run today, decided per LLIR node on the host, before any device
//! memory is touched: the first op set (plain and fused cuBLASLt matmuls over whole row-major
//! buffers, add, add of a row bias, relu and gelu). Every other node is refused with
//! [`RuntimeError::Unsupported`] naming the op and the node; the CPU runtime runs them all.
//! Host-only, so CI checks it without a GPU.

use lumen_compiler::{BinaryOp, CompiledProgram, ElemOp, LlirNode, LlirOp, Operand, UnaryOp, View};

use super::kernels::Kernel;
use crate::RuntimeError;

/// How the CUDA runtime runs one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// The upload or readback copies.
    Copy,
    /// A cuBLASLt matmul over whole row-major operands (`batch` = 1).
    Matmul,
    /// An NVRTC kernel over whole buffers. For [`Kernel::AddBias`], `matrix` and `bias` are the
    /// operand indices of the `[m, n]` tensor and the `[n]` vector, `cols` is n; otherwise
    /// operands are passed in order.
    Kernel {
        /// The kernel.
        kernel: Kernel,
        /// Operand index of the full tensor (AddBias) or the first operand.
        matrix: usize,
        /// Operand index of the bias vector (AddBias) or the second operand.
        bias: usize,
        /// Columns (AddBias), else 0.
        cols: usize,
    },
}

/// Whether `o` reads a whole row-major buffer as `shape`.
fn whole(o: &Operand, shape: &[usize]) -> bool {
    o.view.offset == 0 && o.view.is_contiguous() && o.view.shape == shape
}

/// Whether `o` is an `[n]` vector broadcast over the rows of `shape` (add_bias's operand).
fn row_bias(o: &Operand, shape: &[usize]) -> bool {
    let n = shape.last().copied().unwrap_or(0);
    View::contiguous(&[n]).expand(shape).is_some_and(|v| v == o.view)
}

/// How node `n` of `program` runs on CUDA.
///
/// # Errors
/// [`RuntimeError::Unsupported`] naming the op and the node, with what is missing: a batched
/// product, an operand read through a strided view, or an op with no NVRTC kernel yet.
pub fn launch(program: &CompiledProgram, n: usize) -> Result<Launch, RuntimeError> {
    let Some(node) = program.llir.nodes.get(n) else {
        return Err(RuntimeError::invalid(&program.label, format!("no node {n}")));
    };
    let refuse = |reason: &str| RuntimeError::Unsupported {
        runtime: "cuda",
        op: node.op.name().to_string(),
        node: n,
        reason: reason.to_string(),
    };
    match node.op {
        LlirOp::Upload | LlirOp::Readback => Ok(Launch::Copy),
        LlirOp::LtMatmul { batch, m, k, n: cols, .. } => {
            if batch != 1 {
                return Err(refuse("a batched product (the CPU runtime runs it)"));
            }
            let plain = matches!(node.reads.as_slice(), [a, b, rest @ ..]
                if whole(a, &[m, k]) && whole(b, &[k, cols])
                    && rest.iter().all(|r| whole(r, &[cols])));
            if plain {
                Ok(Launch::Matmul)
            } else {
                Err(refuse("an operand read through a strided view (the CPU runtime runs it)"))
            }
        }
        LlirOp::Map { op, .. } => map_launch(node, op).ok_or_else(|| {
            refuse(
                "its NVRTC kernel is not written yet (the CUDA runtime runs add, add of a row \
                 bias, relu and gelu over whole buffers; the CPU runtime runs every op)",
            )
        }),
        LlirOp::Reduce { .. } | LlirOp::Gather { .. } | LlirOp::Concat { .. } => {
            Err(refuse("its NVRTC kernel is not written yet (the CPU runtime runs every op)"))
        }
    }
}

fn map_launch(node: &LlirNode, op: ElemOp) -> Option<Launch> {
    let shape = &node.reads.first()?.view.shape;
    let kernel = |kernel, matrix, bias, cols| Some(Launch::Kernel { kernel, matrix, bias, cols });
    match (op, node.reads.as_slice()) {
        (ElemOp::Binary(BinaryOp::Add), [x, y]) => {
            let cols = shape.last().copied().unwrap_or(0);
            match (whole(x, shape), whole(y, shape)) {
                (true, true) => kernel(Kernel::Add, 0, 1, 0),
                (true, false) if row_bias(y, shape) => kernel(Kernel::AddBias, 0, 1, cols),
                (false, true) if row_bias(x, shape) => kernel(Kernel::AddBias, 1, 0, cols),
                _ => None,
            }
        }
        (ElemOp::Unary(UnaryOp::Relu), [x]) if whole(x, shape) => kernel(Kernel::Relu, 0, 0, 0),
        (ElemOp::Unary(UnaryOp::Gelu), [x]) if whole(x, shape) => kernel(Kernel::Gelu, 0, 0, 0),
        _ => None,
    }
}

/// Checks that the CUDA runtime can run every node of `program` ([`launch`]), in node order.
///
/// # Errors
/// The first node's [`RuntimeError::Unsupported`].
pub fn check_supported(program: &CompiledProgram) -> Result<(), RuntimeError> {
    (0..program.llir.nodes.len()).try_for_each(|n| launch(program, n).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use lumen_compiler::{CompileOptions, Graph, programs};

    use super::*;

    #[test]
    fn the_first_op_set_runs_and_everything_else_is_refused_by_name() {
        for fuse in [false, true] {
            let options = CompileOptions { fuse, ..Default::default() };
            let p = programs::mlp(&[8, 16, 4], 3).unwrap().compile(&options).unwrap();
            check_supported(&p).unwrap();
        }
        let mut cx = Graph::new();
        let x = cx.input("x", [4, 8]);
        x.exp().sum(-1, false).output("y");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        let err = check_supported(&p).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the cuda runtime cannot run node 1 (exp): its NVRTC kernel is not written yet (the \
             CUDA runtime runs add, add of a row bias, relu and gelu over whole buffers; the CPU \
             runtime runs every op)"
        );
        let t = programs::transformer(Default::default()).unwrap();
        let p = t.compile(&CompileOptions::default()).unwrap();
        let err = check_supported(&p).unwrap_err();
        assert!(matches!(err, RuntimeError::Unsupported { runtime: "cuda", .. }), "{err}");
        // A transposed operand of a matmul is a strided view: refused, not misread.
        let mut cx = Graph::new();
        let a = cx.input("a", [4, 3]);
        let w = cx.weight("w", [5, 3]);
        a.matmul(w.transpose(0, 1)).output("y");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        let err = check_supported(&p).unwrap_err().to_string();
        assert!(
            err.contains("node 1 (lt_matmul): an operand read through a strided view"),
            "{err}"
        );
    }
}
