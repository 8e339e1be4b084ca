//! How the CUDA runtime runs each LLIR node, decided on the host before any device memory is
//! touched: which generated kernels it launches with which arguments ([`super::codegen`]), or
//! which cuBLASLt problem and calls it is ([`super::lt::lt_problem`]). Every op of the LLIR
//! has a form here; a node whose views no form expresses (more than
//! [`super::codegen::MAX_RANK`] axes after collapsing, a matmul operand without a unit stride)
//! is refused with [`RuntimeError::Unsupported`] naming the op, the node and why. Host-only,
//! so CI checks every program without a GPU.

use lumen_compiler::{CompiledProgram, DType, ElemOp, IntOp, LlirNode, LlirOp, ReduceOp, View};

use super::codegen::{
    BLOCK, CAST_TYPES, ConvArgs, KernelSpec, MAX_GRID, MAX_RANK, ReduceForm, TakeArgs, TopKArgs,
    collapse, grid_for, pack_views,
};
use super::lt::{LtCalls, lt_problem};
use crate::RuntimeError;

/// A kernel's pointer argument: a buffer's first byte, or the error record of the program's
/// `i`-th node with one ([`error_record`]: gathers, takes, gather_elements, scatter_elements;
/// four u64: the smallest bad row or index position,
/// its id, its element offset in the ids buffer, unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ptr {
    /// `slab + offset` of the buffer.
    Buffer(usize),
    /// The i-th error record (gathers, takes, gather_elements and scatter_elements, in node
    /// order).
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
    launch_in(&program.label, &program.llir, n)
}

/// [`launch`] of node `n` of `llir` (a program's LLIR, or its live LLIR at a binding of its
/// symbols, [`lumen_compiler::Llir::bind`]), errors naming the program `label`.
///
/// # Errors
/// As [`launch`].
pub fn launch_in(
    label: &str,
    llir: &lumen_compiler::Llir,
    n: usize,
) -> Result<Launch, RuntimeError> {
    let program = Program { label, llir };
    let Some(node) = program.llir.nodes.get(n) else {
        return Err(RuntimeError::invalid(program.label, format!("no node {n}")));
    };
    let refuse = |reason: String| RuntimeError::Unsupported {
        runtime: "cuda",
        op: node.op.name().to_string(),
        node: n,
        reason,
    };
    let invalid = |what: &str| RuntimeError::invalid(program.label, format!("node {n}: {what}"));
    let out = || node.writes.first().copied().ok_or_else(|| invalid("writes nothing"));
    match node.op {
        LlirOp::Upload | LlirOp::Readback => Ok(Launch::Copy),
        // One copy into the state's last rows: its elements (live, with symbols) less `len`.
        LlirOp::AppendRows { len } => {
            let [x] = node.reads.as_slice() else { return Err(invalid("append_rows operands")) };
            let state = out()?;
            let elements: usize = program.llir.buffers[state].shape.iter().product();
            let at = elements.checked_sub(len).ok_or_else(|| invalid("append_rows length"))?;
            let rows = View { offset: at, ..View::contiguous(&x.view.shape) };
            let (cs, cv) = collapse(&x.view.shape, &[&x.view, &rows]);
            if cs.len() > MAX_RANK {
                return Err(refuse(format!("an update of rank {} after collapsing", cs.len())));
            }
            if len == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            Ok(Launch::Kernels(vec![KernelLaunch {
                spec: KernelSpec::Copy { rank: cs.len() },
                ptrs: vec![Ptr::Buffer(state), Ptr::Buffer(x.buffer)],
                words: vec![pack_views(&cs, &cv)],
                grid: grid_for(len as u64),
                block: BLOCK,
            }]))
        }
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
        LlirOp::IntMap { op, len } => {
            if node.reads.len() != op.arity() {
                return Err(invalid("int_map operand count"));
            }
            let shape = node.reads[0].view.shape.clone();
            if node.reads.iter().any(|r| r.view.shape != shape)
                || View::contiguous(&shape).elements() != len
            {
                return Err(invalid("int_map operand shapes"));
            }
            let dtype = program.llir.buffers.get(node.reads[0].buffer).map(|b| b.dtype);
            let dtype = dtype.filter(|&d| IntOp::takes(d));
            let dtype = dtype.ok_or_else(|| invalid("int_map of a type other than i32/i64"))?;
            let views: Vec<&View> = node.reads.iter().map(|r| &r.view).collect();
            let bufs: Vec<usize> = node.reads.iter().map(|r| r.buffer).collect();
            let spec = |rank| KernelSpec::IntMap { op, dtype, rank };
            let k = elementwise_launch(spec, &shape, &views, out()?, &bufs)
                .map_err(|e| refuse(e.to_string()))?;
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
            let index = error_record_in(program.llir, n);
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
        LlirOp::Conv { geometry: g, epilogue } => {
            if node.reads.len() != epilogue.operands() {
                return Err(invalid("conv operand count"));
            }
            if let Some(act) = epilogue.activation.filter(|a| !a.is_activation()) {
                return Err(refuse(format!(
                    "`{act}` is not an activation a conv epilogue applies"
                )));
            }
            if !(1..=lumen_compiler::conv::MAX_SPATIAL).contains(&g.rank)
                || g.groups == 0
                || g.c_in % g.groups != 0
                || g.c_out % g.groups != 0
            {
                return Err(invalid(&format!("conv geometry {}", g.text())));
            }
            let (x_shape, w_shape) = (g.input_shape(), g.weight_shape());
            let (x, w) = (&node.reads[0], &node.reads[1]);
            let bias = epilogue.bias.then(|| &node.reads[2]);
            let residual = epilogue.residual.then(|| &node.reads[2 + usize::from(epilogue.bias)]);
            let strided = node.reads.iter().all(|o| o.view.strides.len() == o.view.shape.len());
            let fits = strided
                && x.view.shape == x_shape
                && w.view.shape == w_shape
                && bias.is_none_or(|b| b.view.shape == [g.c_out])
                && residual.is_none_or(|r| r.view.shape == g.output_shape());
            if !fits {
                return Err(invalid(&format!("conv operand views do not match {}", g.text())));
            }
            let args = ConvArgs::new(
                &g,
                &x.view,
                &w.view,
                bias.map(|b| &b.view),
                residual.map(|r| &r.view),
            );
            if args.len == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            let mut ptrs = vec![Ptr::Buffer(out()?), Ptr::Buffer(x.buffer), Ptr::Buffer(w.buffer)];
            ptrs.extend(bias.iter().chain(&residual).map(|o| Ptr::Buffer(o.buffer)));
            Ok(Launch::Kernels(vec![KernelLaunch {
                spec: KernelSpec::Conv { epilogue },
                ptrs,
                words: vec![args.words()],
                grid: grid_for(args.len),
                block: BLOCK,
            }]))
        }
        LlirOp::MaxPool { geometry: g } => {
            let [x] = node.reads.as_slice() else {
                return Err(invalid("max_pool operand count"));
            };
            if !(1..=lumen_compiler::conv::MAX_SPATIAL).contains(&g.rank)
                || x.view.strides.len() != x.view.shape.len()
                || x.view.shape != g.input_shape()
            {
                return Err(invalid(&format!("max_pool operand view does not match {}", g.text())));
            }
            // The convolution's argument, its weight unused (a view of nothing).
            let args = ConvArgs::new(&g, &x.view, &View::contiguous(&[]), None, None);
            if args.len == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            Ok(Launch::Kernels(vec![KernelLaunch {
                spec: KernelSpec::MaxPool,
                ptrs: vec![Ptr::Buffer(out()?), Ptr::Buffer(x.buffer)],
                words: vec![args.words()],
                grid: grid_for(args.len),
                block: BLOCK,
            }]))
        }
        LlirOp::Take { axis, len, extent, fill } => {
            let [x, idx] = node.reads.as_slice() else {
                return Err(invalid("take operands"));
            };
            let wide = program.llir.buffers.get(idx.buffer).map(|b| b.dtype) == Some(DType::I64);
            let strided = node.reads.iter().all(|o| o.view.strides.len() == o.view.shape.len());
            if !strided || x.view.shape.get(axis) != Some(&extent) || idx.view.rank() != 1 {
                return Err(invalid("take views"));
            }
            let picks = idx.view.shape[0];
            let mut shape = x.view.shape.clone();
            shape[axis] = picks;
            if View::contiguous(&shape).elements() != len {
                return Err(invalid("take output size"));
            }
            // x over the output's shape with the picked axis still: the kernel adds the index
            // times the axis' stride.
            let mut base = x.view.clone();
            base.shape.clone_from(&shape);
            base.strides[axis] = 0;
            let (cs, cv) = collapse(&shape, &[&base]);
            if cs.len() > MAX_RANK {
                return Err(refuse(format!(
                    "x of rank {} after collapsing (at most {MAX_RANK})",
                    cs.len()
                )));
            }
            if picks == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            let args = TakeArgs {
                picks: picks as u64,
                inner: shape[axis + 1..].iter().product::<usize>() as u64,
                stride: x.view.strides[axis] as u64,
                extent: extent as u64,
                idx_offset: idx.view.offset as u64,
                idx_stride: idx.view.strides[0] as u64,
                fill: u64::from(fill.value().to_bits()),
            };
            let index = error_record_in(program.llir, n);
            let (ids_shape, ids_views) = collapse(&idx.view.shape, &[&idx.view]);
            Ok(Launch::Kernels(vec![
                KernelLaunch {
                    spec: KernelSpec::Take { wide, rank: cs.len() },
                    ptrs: vec![
                        Ptr::Buffer(out()?),
                        Ptr::Buffer(x.buffer),
                        Ptr::Buffer(idx.buffer),
                        Ptr::Errors(index),
                    ],
                    words: vec![pack_views(&cs, &cv), args.words()],
                    grid: grid_for((len as u64).max(args.picks)),
                    block: BLOCK,
                },
                KernelLaunch {
                    spec: KernelSpec::GatherReport { wide, rank: ids_shape.len() },
                    ptrs: vec![Ptr::Buffer(idx.buffer), Ptr::Errors(index)],
                    words: vec![pack_views(&ids_shape, &ids_views)],
                    grid: 1,
                    block: 1,
                },
            ]))
        }
        LlirOp::Cast { to, len } => {
            let [x] = node.reads.as_slice() else { return Err(invalid("cast operands")) };
            let from = program.llir.buffers.get(x.buffer).map(|b| b.dtype);
            let from = from.ok_or_else(|| invalid("cast reads no buffer"))?;
            if let Some(d) = [from, to].into_iter().find(|d| !CAST_TYPES.contains(d)) {
                return Err(refuse(format!("a cast of {from} to {to} ({d} is not a tensor type)")));
            }
            let v = &x.view;
            if v.strides.len() != v.shape.len() || v.elements() != len {
                return Err(invalid("cast view"));
            }
            let (cs, cv) = collapse(&v.shape, &[v]);
            if cs.len() > MAX_RANK {
                return Err(refuse(format!(
                    "an operand of rank {} after collapsing (at most {MAX_RANK})",
                    cs.len()
                )));
            }
            if len == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            Ok(Launch::Kernels(vec![KernelLaunch {
                spec: KernelSpec::Cast { from, to, rank: cs.len() },
                ptrs: vec![Ptr::Buffer(out()?), Ptr::Buffer(x.buffer)],
                words: vec![pack_views(&cs, &cv)],
                grid: grid_for(len as u64),
                block: BLOCK,
            }]))
        }
        LlirOp::Arg { max, axis, last, len, extent } => {
            let [x] = node.reads.as_slice() else { return Err(invalid("arg operands")) };
            let v = &x.view;
            if v.strides.len() != v.shape.len() || v.shape.get(axis) != Some(&extent) {
                return Err(invalid("arg view"));
            }
            let rows = Rows::along(v, axis).map_err(refuse)?;
            if rows.count != len as u64 {
                return Err(invalid("arg output size"));
            }
            if rows.count == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            Ok(Launch::Kernels(vec![KernelLaunch {
                spec: KernelSpec::Arg { max, last, rank: rows.shape.len() },
                ptrs: vec![Ptr::Buffer(out()?), Ptr::Buffer(x.buffer)],
                words: vec![
                    pack_views(&rows.shape, &rows.views),
                    vec![rows.extent as u64],
                    vec![rows.stride as u64],
                ],
                grid: grid_for(rows.count),
                block: BLOCK,
            }]))
        }
        LlirOp::TopK { axis, k, largest, len, extent } => {
            let [x] = node.reads.as_slice() else { return Err(invalid("topk operands")) };
            let v = &x.view;
            if v.strides.len() != v.shape.len() || v.shape.get(axis) != Some(&extent) || k > extent
            {
                return Err(invalid("topk view"));
            }
            let rows = Rows::along(v, axis).map_err(refuse)?;
            if rows.count.checked_mul(k as u64) != Some(len as u64) {
                return Err(invalid("topk output size"));
            }
            if len == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            let args = TopKArgs {
                k: k as u64,
                extent: extent as u64,
                stride: rows.stride as u64,
                inner: v.shape[axis + 1..].iter().product::<usize>() as u64,
            };
            Ok(Launch::Kernels(vec![KernelLaunch {
                spec: KernelSpec::TopK { largest, rank: rows.shape.len() },
                ptrs: vec![Ptr::Buffer(out()?), Ptr::Buffer(x.buffer)],
                words: vec![pack_views(&rows.shape, &rows.views), args.words()],
                grid: grid_for(rows.count),
                block: BLOCK,
            }]))
        }
        LlirOp::GatherElements { axis, len, extent } => {
            let [data, idx] = node.reads.as_slice() else {
                return Err(invalid("gather_elements operands"));
            };
            let wide = program.llir.buffers.get(idx.buffer).map(|b| b.dtype) == Some(DType::I64);
            let (dv, iv) = (&data.view, &idx.view);
            let strided = node.reads.iter().all(|o| o.view.strides.len() == o.view.shape.len());
            let fits = strided
                && dv.shape.get(axis) == Some(&extent)
                && iv.rank() == dv.rank()
                && iv.elements() == len
                && iv
                    .shape
                    .iter()
                    .zip(&dv.shape)
                    .enumerate()
                    .all(|(a, (i, d))| a == axis || i <= d);
            if !fits {
                return Err(invalid("gather_elements views"));
            }
            // data over the output's (the indices') shape with the picked axis still: the
            // kernel adds the index times the axis' stride.
            let mut base = dv.clone();
            base.shape.clone_from(&iv.shape);
            base.strides[axis] = 0;
            let (cs, cv) = collapse(&iv.shape, &[&base, iv]);
            if cs.len() > MAX_RANK {
                return Err(refuse(format!(
                    "views of rank {} after collapsing (at most {MAX_RANK})",
                    cs.len()
                )));
            }
            if len == 0 {
                return Ok(Launch::Kernels(Vec::new()));
            }
            let index = error_record_in(program.llir, n);
            let (ids_shape, ids_views) = collapse(&iv.shape, &[iv]);
            Ok(Launch::Kernels(vec![
                KernelLaunch {
                    spec: KernelSpec::GatherElements { wide, rank: cs.len() },
                    ptrs: vec![
                        Ptr::Buffer(out()?),
                        Ptr::Buffer(data.buffer),
                        Ptr::Buffer(idx.buffer),
                        Ptr::Errors(index),
                    ],
                    words: vec![
                        pack_views(&cs, &cv),
                        vec![extent as u64],
                        vec![dv.strides[axis] as u64],
                    ],
                    grid: grid_for(len as u64),
                    block: BLOCK,
                },
                KernelLaunch {
                    spec: KernelSpec::GatherReport { wide, rank: ids_shape.len() },
                    ptrs: vec![Ptr::Buffer(idx.buffer), Ptr::Errors(index)],
                    words: vec![pack_views(&ids_shape, &ids_views)],
                    grid: 1,
                    block: 1,
                },
            ]))
        }
        LlirOp::ScatterElements { axis, reduction, len, extent, updates } => {
            let [data, idx, upd] = node.reads.as_slice() else {
                return Err(invalid("scatter_elements operands"));
            };
            let dtype = program.llir.buffers.get(data.buffer).map(|b| b.dtype);
            let dtype = dtype.ok_or_else(|| invalid("scatter_elements reads no buffer"))?;
            if !CAST_TYPES.contains(&dtype) {
                return Err(refuse(format!("a scatter of {dtype} data")));
            }
            let wide = program.llir.buffers.get(idx.buffer).map(|b| b.dtype) == Some(DType::I64);
            let (dv, iv, uv) = (&data.view, &idx.view, &upd.view);
            let strided = node.reads.iter().all(|o| o.view.strides.len() == o.view.shape.len());
            let fits = strided
                && dv.shape.get(axis) == Some(&extent)
                && dv.elements() == len
                && iv.rank() == dv.rank()
                && uv.shape == iv.shape
                && iv.elements() == updates
                && iv
                    .shape
                    .iter()
                    .zip(&dv.shape)
                    .enumerate()
                    .all(|(a, (i, d))| a == axis || i <= d);
            if !fits {
                return Err(invalid("scatter_elements views"));
            }
            // First the data copied into the output: the same-type cast (a typed copy).
            let (copy_shape, copy_views) = collapse(&dv.shape, &[dv]);
            // Then the updates: the output over the updates' shape with the addressed axis'
            // stride 0 (the kernel adds the index times the axis' stride).
            let strides = lumen_compiler::view::row_major_strides(&dv.shape);
            let stride = strides[axis];
            let mut base = View { shape: iv.shape.clone(), strides, offset: 0 };
            base.strides[axis] = 0;
            let (cs, cv) = collapse(&iv.shape, &[uv, iv, &base]);
            let rank = copy_shape.len().max(cs.len());
            if rank > MAX_RANK {
                return Err(refuse(format!(
                    "views of rank {rank} after collapsing (at most {MAX_RANK})"
                )));
            }
            let y = out()?;
            let mut kernels = Vec::new();
            if len > 0 {
                kernels.push(KernelLaunch {
                    spec: KernelSpec::Cast { from: dtype, to: dtype, rank: copy_shape.len() },
                    ptrs: vec![Ptr::Buffer(y), Ptr::Buffer(data.buffer)],
                    words: vec![pack_views(&copy_shape, &copy_views)],
                    grid: grid_for(len as u64),
                    block: BLOCK,
                });
            }
            if updates > 0 {
                let index = error_record_in(program.llir, n);
                let (ids_shape, ids_views) = collapse(&iv.shape, &[iv]);
                kernels.push(KernelLaunch {
                    spec: KernelSpec::ScatterElements { dtype, wide, rank: cs.len() },
                    ptrs: vec![
                        Ptr::Buffer(y),
                        Ptr::Buffer(upd.buffer),
                        Ptr::Buffer(idx.buffer),
                        Ptr::Errors(index),
                    ],
                    words: vec![
                        pack_views(&cs, &cv),
                        vec![extent as u64],
                        vec![stride as u64],
                        vec![reduction.code()],
                    ],
                    grid: grid_for(updates as u64),
                    block: BLOCK,
                });
                kernels.push(KernelLaunch {
                    spec: KernelSpec::GatherReport { wide, rank: ids_shape.len() },
                    ptrs: vec![Ptr::Buffer(idx.buffer), Ptr::Errors(index)],
                    words: vec![pack_views(&ids_shape, &ids_views)],
                    grid: 1,
                    block: 1,
                });
            }
            Ok(Launch::Kernels(kernels))
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

/// What [`launch_in`] reads of a program: its label and (live) LLIR.
struct Program<'a> {
    label: &'a str,
    llir: &'a lumen_compiler::Llir,
}

/// Whether a node has a device error record: a gather, a take, a gather_elements or a
/// scatter_elements (an id or index out of range is reported through it).
pub fn has_error_record(node: &LlirNode) -> bool {
    index_rows(&node.op).is_some()
}

/// For an op with a device error record: the length its ids or indices are checked against,
/// as [`RuntimeError::IndexOutOfRange`] names it (a gather's table rows, a take's,
/// gather_elements' or scatter_elements' axis length); `None` for every other op.
pub fn index_rows(op: &LlirOp) -> Option<usize> {
    match *op {
        LlirOp::Gather { vocab, .. } => Some(vocab),
        LlirOp::Take { extent, .. }
        | LlirOp::GatherElements { extent, .. }
        | LlirOp::ScatterElements { extent, .. } => Some(extent),
        _ => None,
    }
}

/// The op [`RuntimeError::IndexOutOfRange`] names for a bad index of `op`: `scatter_elements`
/// for a scatter, `gather` for the gathers, takes and gather_elements (as their messages have
/// always said).
pub fn index_op(op: &LlirOp) -> &'static str {
    match op {
        LlirOp::ScatterElements { .. } => "scatter_elements",
        _ => "gather",
    }
}

/// The error record of node `n`: its index among the program's nodes with one
/// ([`has_error_record`]), in node order (`n` past the last node: how many there are).
pub fn error_record(program: &CompiledProgram, n: usize) -> usize {
    error_record_in(&program.llir, n)
}

/// [`error_record`] in `llir`.
fn error_record_in(llir: &lumen_compiler::Llir, n: usize) -> usize {
    let nodes = &llir.nodes;
    nodes[..n.min(nodes.len())].iter().filter(|x| has_error_record(x)).count()
}

/// Error records the program needs: one per gather, take, gather_elements and
/// scatter_elements.
pub fn error_records(program: &CompiledProgram) -> usize {
    error_record(program, program.llir.nodes.len())
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
    elementwise_launch(|rank| KernelSpec::Map { op, rank }, shape, views, out, bufs)
}

/// The one launch of an elementwise kernel (a map's or an integer map's: `spec` of the views'
/// collapsed rank) writing `out` contiguous over `shape` from `bufs` read through `views`
/// (`None` when `shape` is empty).
fn elementwise_launch(
    spec: impl Fn(usize) -> KernelSpec,
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
        spec: spec(cs.len()),
        ptrs,
        words: vec![pack_views(&cs, &cv)],
        grid: grid_for(len),
        block: BLOCK,
    }))
}

/// Rows below which a reduction over a strided axis still takes one block per row: too few
/// rows to fill the GPU with one thread each.
const FEW_ROWS: u64 = 1024;

/// A view walked along one axis, row by row (a reduction's or an arg's operand): the other
/// axes in order, collapsed ([`collapse`]), and the walked axis' length and stride.
struct Rows {
    /// The collapsed shape of the rows (one output element each).
    shape: Vec<usize>,
    /// The one view of the rows' first elements over `shape`.
    views: Vec<View>,
    /// Rows (output elements).
    count: u64,
    /// The walked axis' length.
    extent: usize,
    /// The walked axis' stride.
    stride: usize,
}

impl Rows {
    /// `view`'s rows along `axis`, or why no kernel takes them (an axis out of range, rows of
    /// [`MAX_RANK`] axes or more after collapsing).
    fn along(view: &View, axis: usize) -> Result<Self, String> {
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
        let (shape, views) = collapse(&rows_view.shape, &[&rows_view]);
        if shape.len() >= MAX_RANK {
            return Err(format!(
                "output rows of rank {} after collapsing (at most {})",
                shape.len(),
                MAX_RANK - 1
            ));
        }
        let count = rows_view.elements() as u64;
        Ok(Rows { shape, views, count, extent, stride })
    }
}

/// The reduction of `view` over `axis` into `out` (see the codegen module docs for the forms).
fn reduce_launch(
    op: ReduceOp,
    view: &View,
    axis: usize,
    input: usize,
    out: usize,
) -> Result<Option<KernelLaunch>, String> {
    let Rows { shape: cs, views: cv, count: rows, extent, stride } = Rows::along(view, axis)?;
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
    fn a_fused_conv_is_one_launch_reading_its_operands_through_their_views() {
        use lumen_compiler::{ConvEpilogue, ConvSpec, UnaryOp};
        let mut cx = Graph::new();
        // Channels 1..4 of a [1, 5, 6, 6] input: offset 36, the larger tensor's strides.
        let x = cx.input("x", [1, 5, 6, 6]).slice(1, 1, 4);
        let w = cx.weight("w", [4, 3, 3, 3]);
        let b = cx.weight("b", [4]);
        let spec = ConvSpec {
            strides: vec![2, 2],
            dilations: vec![1, 1],
            pads: vec![(1, 1), (1, 0)],
            groups: 1,
        };
        x.conv(&w, Some(&b), &spec).relu().output("y");
        let p = cx.compile(&CompileOptions { fuse: true, ..Default::default() }).unwrap();
        let ls = launches(&p).unwrap();
        let convs: Vec<&KernelLaunch> = ls
            .iter()
            .flat_map(|l| l.kernels())
            .filter(|k| matches!(k.spec, KernelSpec::Conv { .. }))
            .collect();
        let [k] = convs.as_slice() else { panic!("{ls:?}") };
        let relu = ConvEpilogue { bias: true, residual: false, activation: Some(UnaryOp::Relu) };
        assert_eq!(k.spec, KernelSpec::Conv { epilogue: relu });
        assert_eq!(k.ptrs.len(), 4, "out, x, w, bias");
        let a = ConvArgs::from_words(&k.words[0]).unwrap();
        assert_eq!(ConvArgs::from_words(&a.words()), Some(a));
        // (6 + 2 - 3) / 2 + 1 = 3 rows, (6 + 1 - 3) / 2 + 1 = 3 columns.
        assert_eq!((a.len, a.c_out, a.cg, a.ocg), (4 * 9, 4, 3, 4));
        // The spatial axes right-aligned in the three slots: the unused slot 0 first.
        assert_eq!((a.output, a.input, a.kernel), ([1, 3, 3], [1, 6, 6], [1, 3, 3]));
        assert_eq!((a.stride, a.pad), ([1, 2, 2], [0, 1, 1]));
        assert_eq!(a.x, [36, 180, 36, 0, 6, 1]);
        assert_eq!(a.w, [0, 27, 9, 0, 3, 1]);
        assert_eq!((a.bias, a.residual), ([0, 1], [0; 6]));
    }

    #[test]
    fn a_take_is_its_kernel_and_a_rank_one_report_sharing_an_error_record() {
        let mut cx = Graph::new();
        let table = cx.weight("table", [5, 2]);
        table.gather(cx.input_typed("g", [3], DType::I32)).output("rows");
        let x = cx.input("x", [2, 5, 3]).transpose(0, 2);
        let idx = cx.input_typed("idx", [4], DType::I64);
        x.take(1, &idx, -1.5).output("y");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        assert_eq!(error_records(&p), 2);
        let ls = launches(&p).unwrap();
        let ks: Vec<&KernelLaunch> = ls
            .iter()
            .flat_map(|l| l.kernels())
            .filter(|k| matches!(k.spec, KernelSpec::Take { .. }))
            .collect();
        let [take] = ks.as_slice() else { panic!("{ls:?}") };
        // x [3, 5, 2] read transposed: strides [1, 3, 15] over the output [3, 4, 2], the
        // picked axis' stride 0 in the view and 3 in the argument.
        assert_eq!(take.spec, KernelSpec::Take { wide: true, rank: 3 });
        assert_eq!(take.ptrs[3], Ptr::Errors(1), "the second record: the gather has the first");
        assert_eq!(
            take.words[0],
            pack_views(
                &[3, 4, 2],
                &[View { shape: vec![3, 4, 2], strides: vec![1, 0, 15], offset: 0 }]
            )
        );
        let t = TakeArgs::from_words(&take.words[1]).unwrap();
        assert_eq!((t.picks, t.inner, t.stride, t.extent), (4, 2, 3, 5));
        assert_eq!((t.idx_offset, t.idx_stride, t.fill), (0, 1, u64::from((-1.5f32).to_bits())));
        let report =
            ls.iter().flat_map(|l| l.kernels()).find(|k| k.ptrs == [take.ptrs[2], take.ptrs[3]]);
        assert_eq!(report.map(|k| k.spec), Some(KernelSpec::GatherReport { wide: true, rank: 1 }));
    }

    #[test]
    fn casts_and_args_read_their_operand_through_its_view() {
        let mut cx = Graph::new();
        let ids = cx.input_typed("ids", [2, 3], DType::I64);
        ids.transpose(0, 1).cast(DType::F32).output("f");
        let x = cx.input("x", [4, 5, 3]);
        x.argmax(1, false, true).output("am");
        x.slice(2, 1, 3).argmin(0, false, false).output("amin");
        let p = cx.compile(&CompileOptions::default()).unwrap();
        let ks: Vec<KernelLaunch> =
            launches(&p).unwrap().iter().flat_map(|l| l.kernels().to_vec()).collect();
        let find = |family: &str| -> Vec<&KernelLaunch> {
            ks.iter().filter(|k| k.spec.family() == family).collect()
        };
        let [cast] = find("cast")[..] else { panic!("{ks:?}") };
        // ids [2, 3] read transposed: [3, 2] with strides [1, 3], in i64 elements.
        assert_eq!(cast.spec, KernelSpec::Cast { from: DType::I64, to: DType::F32, rank: 2 });
        assert_eq!(
            cast.words,
            [pack_views(&[3, 2], &[View::contiguous(&[2, 3]).permute(&[1, 0])])]
        );
        let [am, amin] = find("arg")[..] else { panic!("{ks:?}") };
        // Axis 1 of [4, 5, 3]: rows [4, 3] with strides [15, 1], the axis of stride 3.
        assert_eq!(am.spec, KernelSpec::Arg { max: true, last: true, rank: 2 });
        let rows = View { shape: vec![4, 3], strides: vec![15, 1], offset: 0 };
        assert_eq!(am.words, [pack_views(&[4, 3], &[rows]), vec![5], vec![3]]);
        // Axis 0 of the slice [4, 5, 2] (offset 1): rows [5, 2] of strides [3, 1], stride 15.
        assert_eq!(amin.spec, KernelSpec::Arg { max: false, last: false, rank: 2 });
        let rows = View { shape: vec![5, 2], strides: vec![3, 1], offset: 1 };
        assert_eq!(amin.words, [pack_views(&[5, 2], &[rows]), vec![4], vec![15]]);
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
