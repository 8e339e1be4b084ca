//! How the CUDA runtime runs each LLIR node, decided on the host before any device memory is
//! touched: which generated kernels it launches with which arguments ([`super::codegen`]), or
//! which cuBLASLt problem and calls it is ([`super::lt::lt_problem`]). Every op of the LLIR
//! has a form here; a node whose views no form expresses (more than
//! [`super::codegen::MAX_RANK`] axes after collapsing, a matmul operand without a unit stride)
//! is refused with [`RuntimeError::Unsupported`] naming the op, the node and why. Host-only,
//! so CI checks every program without a GPU.

use lumen_compiler::{CompiledProgram, DType, ElemOp, LlirOp, ReduceOp, View};

use super::codegen::{
    BLOCK, KernelSpec, MAX_GRID, MAX_RANK, ReduceForm, collapse, grid_for, pack_views,
};
use super::lt::{LtCalls, lt_problem};
use crate::RuntimeError;

/// A kernel's pointer argument: a buffer's first byte, or the error record of the program's
/// `i`-th gather (four u64: the smallest bad row, its id, its element offset, unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ptr {
    /// `slab + offset` of the buffer.
    Buffer(usize),
    /// The i-th gather's error record.
    Errors(usize),
}

/// One kernel launch, host-side: the kernel, its pointer arguments, its by-value arguments
/// (blobs of 64-bit words, in parameter order), the grid and block (threads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelLaunch {
    /// The kernel.
    pub spec: KernelSpec,
    /// Pointer arguments, first.
    pub ptrs: Vec<Ptr>,
    /// By-value arguments after them.
    pub words: Vec<Vec<u64>>,
    /// Blocks.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
}

/// How the CUDA runtime runs one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// The upload or readback copies.
    Copy,
    /// cuBLASLt calls (one problem, one call per outer batch index).
    Matmul(LtCalls),
    /// A matmul with an empty output: nothing to do.
    MatmulEmpty,
    /// A K = 0 matmul: the output zeroed, then these kernels (the bias add, the activation).
    MatmulK0(Vec<KernelLaunch>),
    /// Generated kernels, in order (none for an empty output).
    Kernels(Vec<KernelLaunch>),
}

impl Launch {
    /// The kernels the node launches.
    pub fn kernels(&self) -> &[KernelLaunch] {
        match self {
            Launch::MatmulK0(k) | Launch::Kernels(k) => k,
            _ => &[],
        }
    }
}

/// How node `n` of `program` runs on CUDA.
///
/// # Errors
/// [`RuntimeError::Unsupported`] naming the op and the node, with what no form expresses;
/// [`RuntimeError::InvalidProgram`] for a node inconsistent with itself.
pub fn launch(program: &CompiledProgram, n: usize) -> Result<Launch, RuntimeError> {
    let Some(node) = program.llir.nodes.get(n) else {
        return Err(RuntimeError::invalid(&program.label, format!("no node {n}")));
    };
    let refuse = |reason: String| RuntimeError::Unsupported {
        runtime: "cuda",
        op: node.op.name().to_string(),
        node: n,
        reason,
    };
    let invalid = |what: &str| RuntimeError::invalid(&program.label, format!("node {n}: {what}"));
    let out = || node.writes.first().copied().ok_or_else(|| invalid("writes nothing"));
    match node.op {
        LlirOp::Upload | LlirOp::Readback => Ok(Launch::Copy),
        LlirOp::LtMatmul { batch, m, k, n: cols, epilogue } => {
            let [x, w, rest @ ..] = node.reads.as_slice() else {
                return Err(invalid("lt_matmul operands"));
            };
            if let Some(bias) = rest.first() {
                let unit = bias.view.rank() == 1 && (bias.view.strides[0] == 1 || cols <= 1);
                if !unit || bias.view.shape != [cols] {
                    return Err(refuse("a bias read through a strided view".into()));
                }
            }
            if batch == 0 || m == 0 || cols == 0 {
                return Ok(Launch::MatmulEmpty);
            }
            if k == 0 {
                let y = out()?;
                let len = batch * m * cols;
                let shape = [batch * m, cols];
                let whole = View::contiguous(&shape);
                let mut kernels = Vec::new();
                if let Some(bias) = rest.first() {
                    let row = View::contiguous(&[cols]).expand(&shape).map(|mut v| {
                        v.offset = bias.view.offset;
                        v
                    });
                    let row = row.ok_or_else(|| invalid("bias shape"))?;
                    kernels.push(map_launch(
                        ElemOp::Binary(lumen_compiler::BinaryOp::Add),
                        &shape,
                        &[&whole, &row],
                        y,
                        &[y, bias.buffer],
                    )?);
                }
                if let Some(act) = epilogue.activation() {
                    kernels.push(map_launch(
                        ElemOp::Unary(act),
                        &[len],
                        &[&View::contiguous(&[len])],
                        y,
                        &[y],
                    )?);
                }
                return Ok(Launch::MatmulK0(kernels.into_iter().flatten().collect()));
            }
            lt_problem(&x.view, &w.view, (batch, m, k, cols)).map(Launch::Matmul).map_err(refuse)
        }
        LlirOp::Map { op, len } => {
            if node.reads.len() != op.arity() {
                return Err(invalid("map operand count"));
            }
            let shape = node.reads[0].view.shape.clone();
            if node.reads.iter().any(|r| r.view.shape != shape)
                || View::contiguous(&shape).elements() != len
            {
                return Err(invalid("map operand shapes"));
            }
            let views: Vec<&View> = node.reads.iter().map(|r| &r.view).collect();
            let bufs: Vec<usize> = node.reads.iter().map(|r| r.buffer).collect();
            let k =
                map_launch(op, &shape, &views, out()?, &bufs).map_err(|e| refuse(e.to_string()))?;
            Ok(Launch::Kernels(k.into_iter().collect()))
        }
        LlirOp::Reduce { op, axis, .. } => {
            let [input] = node.reads.as_slice() else { return Err(invalid("reduce operands")) };
            reduce_launch(op, &input.view, axis, input.buffer, out()?)
                .map(|k| Launch::Kernels(k.into_iter().collect()))
                .map_err(refuse)
        }
        LlirOp::Gather { vocab, dim, .. } => {
            let [table, ids] = node.reads.as_slice() else {
                return Err(invalid("gather operands"));
            };
            let wide = program.llir.buffers.get(ids.buffer).map(|b| b.dtype) == Some(DType::I64);
            let tv = &table.view;
            if tv.shape != [vocab, dim] {
                return Err(invalid("gather table view"));
            }
            let index = gather_index(program, n);
            let (shape, views) = collapse(&ids.view.shape, &[&ids.view]);
            let rank = shape.len();
            if rank > MAX_RANK {
                return Err(refuse(format!(
                    "ids of rank {rank} after collapsing (at most {MAX_RANK})"
                )));
            }
            let rows = ids.view.elements() as u64;
            let ids_words = pack_views(&shape, &views);
            let table_words = vec![
                tv.offset as u64,
                tv.strides[0] as u64,
                tv.strides[1] as u64,
                vocab as u64,
                dim as u64,
            ];
            let mut kernels = Vec::new();
            if rows > 0 {
                kernels.push(KernelLaunch {
                    spec: KernelSpec::Gather { wide, rank },
                    ptrs: vec![
                        Ptr::Buffer(out()?),
                        Ptr::Buffer(table.buffer),
                        Ptr::Buffer(ids.buffer),
                        Ptr::Errors(index),
                    ],
                    words: vec![ids_words.clone(), table_words],
                    grid: grid_for(rows.saturating_mul(dim as u64)),
                    block: BLOCK,
                });
                kernels.push(KernelLaunch {
                    spec: KernelSpec::GatherReport { wide, rank },
                    ptrs: vec![Ptr::Buffer(ids.buffer), Ptr::Errors(index)],
                    words: vec![ids_words],
                    grid: 1,
                    block: 1,
                });
            }
            Ok(Launch::Kernels(kernels))
        }
        LlirOp::Conv { .. } | LlirOp::Take { .. } => {
            Err(refuse("no CUDA kernel is generated for it yet (the CPU runtime runs it)".into()))
        }
        LlirOp::Concat { axis, .. } => {
            let shape = node.concat_shape().ok_or_else(|| invalid("concat shape"))?;
            let whole = View::contiguous(&shape);
            let y = out()?;
            let mut start = 0usize;
            let mut kernels = Vec::new();
            for r in &node.reads {
                let end = start + r.view.shape[axis];
                let slice = whole.slice(axis, start, end);
                start = end;
                let (cs, cv) = collapse(&r.view.shape, &[&r.view, &slice]);
                if cs.len() > MAX_RANK {
                    return Err(refuse(format!(
                        "an operand of rank {} after collapsing",
                        cs.len()
                    )));
                }
                let len = r.view.elements() as u64;
                if len == 0 {
                    continue;
                }
                kernels.push(KernelLaunch {
                    spec: KernelSpec::Copy { rank: cs.len() },
                    ptrs: vec![Ptr::Buffer(y), Ptr::Buffer(r.buffer)],
                    words: vec![pack_views(&cs, &cv)],
                    grid: grid_for(len),
                    block: BLOCK,
                });
            }
            Ok(Launch::Kernels(kernels))
        }
    }
}

/// The index of node `n` among the program's gathers (its error record).
pub fn gather_index(program: &CompiledProgram, n: usize) -> usize {
    program.llir.nodes[..n].iter().filter(|x| matches!(x.op, LlirOp::Gather { .. })).count()
}

/// Error records the program needs: one per gather.
pub fn gather_count(program: &CompiledProgram) -> usize {
    gather_index(program, program.llir.nodes.len())
}

/// The map kernel of `op` over `shape` reading `views` of `bufs` into `out` (contiguous);
/// `None` for an empty output.
fn map_launch(
    op: ElemOp,
    shape: &[usize],
    views: &[&View],
    out: usize,
    bufs: &[usize],
) -> Result<Option<KernelLaunch>, RuntimeError> {
    let (cs, cv) = collapse(shape, views);
    if cs.len() > MAX_RANK {
        return Err(RuntimeError::kernel(
            "map",
            format!("views of rank {} after collapsing (at most {MAX_RANK})", cs.len()),
        ));
    }
    let len = View::contiguous(shape).elements() as u64;
    if len == 0 {
        return Ok(None);
    }
    let mut ptrs = vec![Ptr::Buffer(out)];
    ptrs.extend(bufs.iter().map(|&b| Ptr::Buffer(b)));
    Ok(Some(KernelLaunch {
        spec: KernelSpec::Map { op, rank: cs.len() },
        ptrs,
        words: vec![pack_views(&cs, &cv)],
        grid: grid_for(len),
        block: BLOCK,
    }))
}

/// Rows below which a reduction over a strided axis still takes one block per row: too few
/// rows to fill the GPU with one thread each.
const FEW_ROWS: u64 = 1024;

/// The reduction of `view` over `axis` into `out` (see the codegen module docs for the forms).
fn reduce_launch(
    op: ReduceOp,
    view: &View,
    axis: usize,
    input: usize,
    out: usize,
) -> Result<Option<KernelLaunch>, String> {
    let rank = view.rank();
    if axis >= rank {
        return Err(format!("axis {axis} of a rank-{rank} view"));
    }
    let mut perm: Vec<usize> = (0..rank).filter(|&a| a != axis).collect();
    perm.push(axis);
    let moved = view.permute(&perm);
    let rows_view = View {
        shape: moved.shape[..rank - 1].to_vec(),
        strides: moved.strides[..rank - 1].to_vec(),
        offset: moved.offset,
    };
    let (extent, stride) = (moved.shape[rank - 1], moved.strides[rank - 1]);
    let (cs, cv) = collapse(&rows_view.shape, &[&rows_view]);
    if cs.len() >= MAX_RANK {
        return Err(format!(
            "output rows of rank {} after collapsing (at most {})",
            cs.len(),
            MAX_RANK - 1
        ));
    }
    let rows = rows_view.elements() as u64;
    if rows == 0 {
        return Ok(None);
    }
    let form = if stride == 1 || extent <= 1 || rows < FEW_ROWS {
        ReduceForm::Row
    } else {
        ReduceForm::Strided
    };
    let grid = match form {
        ReduceForm::Row => rows.min(MAX_GRID) as u32,
        ReduceForm::Strided => grid_for(rows),
    };
    Ok(Some(KernelLaunch {
        spec: KernelSpec::Reduce { op, form, rank: cs.len() },
        ptrs: vec![Ptr::Buffer(out), Ptr::Buffer(input)],
        words: vec![pack_views(&cs, &cv), vec![extent as u64], vec![stride as u64]],
        grid,
        block: BLOCK,
    }))
}

/// Checks that the CUDA runtime can run every node of `program` ([`launch`]), in node order.
///
/// # Errors
/// The first node's [`RuntimeError::Unsupported`].
pub fn check_supported(program: &CompiledProgram) -> Result<(), RuntimeError> {
    (0..program.llir.nodes.len()).try_for_each(|n| launch(program, n).map(|_| ()))
}

/// Every node's launch, in node order ([`launch`]).
///
/// # Errors
/// As [`launch`].
pub fn launches(program: &CompiledProgram) -> Result<Vec<Launch>, RuntimeError> {
    (0..program.llir.nodes.len()).map(|n| launch(program, n)).collect()
}

#[cfg(test)]
mod tests {
    use lumen_compiler::{CompileOptions, Graph, programs};

    use super::*;

    #[test]
    fn every_op_of_the_built_in_programs_has_a_cuda_form() {
        for fuse in [false, true] {
            let options = CompileOptions { fuse, ..Default::default() };
            let p = programs::mlp(&[8, 16, 4], 3).unwrap().compile(&options).unwrap();
            check_supported(&p).unwrap();
            let t = programs::transformer(Default::default()).unwrap();
            let p = t.compile(&options).unwrap();
            check_supported(&p).unwrap_or_else(|e| panic!("transformer fuse={fuse}: {e}"));
        }
        let mut cx = Graph::new();
        let x = cx.input("x", [4, 8]);
        x.exp().sum(-1, false).output("y");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        let ls = launches(&p).unwrap();
        assert!(matches!(ls[1].kernels()[0].spec, KernelSpec::Map { rank: 1, .. }), "{:?}", ls[1]);
        assert!(
            matches!(
                ls[2].kernels()[0].spec,
                KernelSpec::Reduce { form: ReduceForm::Row, rank: 1, .. }
            ),
            "{:?}",
            ls[2]
        );
    }

    #[test]
    fn a_transposed_operand_is_a_transposed_layout_not_a_copy() {
        let mut cx = Graph::new();
        let a = cx.input("a", [4, 3]);
        let w = cx.weight("w", [5, 3]);
        a.matmul(w.transpose(0, 1)).output("y");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        let ls = launches(&p).unwrap();
        let Some(Launch::Matmul(calls)) = ls.iter().find(|l| matches!(l, Launch::Matmul(_))) else {
            panic!("{ls:?}")
        };
        assert!(calls.problem.trans_a && !calls.problem.trans_b, "{calls:?}");
        // W [5, 3] row-major read as [3, 5]: column-major 3 x 5 with ld 3, transposed.
        assert_eq!((calls.problem.a.rows, calls.problem.a.cols, calls.problem.a.ld), (3, 5, 3));
        assert_eq!(calls.offsets, [[0, 0, 0]]);
    }
}
