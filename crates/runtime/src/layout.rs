//! Where every buffer of a compiled program lives in the slab, checked before anything runs.
//!
//! A runtime trusts the plan's offsets by default (so a planning error shows up as wrong
//! numbers, as in Luminal's arena) but not the program's shape: every operand count, element
//! count, offset, order and buffer id is checked here once, at prepare, so execution can index
//! without panicking. In memory-debug mode the plan itself is verified too
//! ([`SlabLayout::for_runtime`], [`verify_plan`]). Shared by every runtime (CPU today, CUDA
//! behind its feature).

use std::collections::BTreeMap;
use std::ops::Range;

use lumen_compiler::{
    BufferId, BufferRole, CompiledProgram, DType, IntOp, Llir, LlirBuffer, LlirNode, LlirOp, NodeId,
};
use lumen_planner::{SlabOptions, VerifyError};

use crate::RuntimeError;
use crate::tensor::element_count;

/// Alignment in bytes of every offset in [`Placement::NoReuse`] layouts, and of the slab's base
/// address (cuBLASLt's pointer alignment; the planner's default).
pub const SLAB_ALIGNMENT: usize = 256;

/// How buffers are placed in the slab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// The planner's offsets: buffers whose lifetimes are ordered share bytes.
    #[default]
    Planned,
    /// Every buffer its own range, back to back at 256-byte-aligned offsets (the plan's
    /// `naive_bytes`, rounded): no reuse at all. The oracle for differential tests.
    NoReuse,
}

impl Placement {
    /// `planned` or `no-reuse`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Planned => "planned",
            Placement::NoReuse => "no-reuse",
        }
    }
}

/// One buffer's bytes in the slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Offset from the slab base, in bytes.
    pub offset: usize,
    /// True size in bytes (what kernels read and write).
    pub bytes: usize,
    /// Reserved size in bytes (what no other live buffer may touch).
    pub reserved: usize,
}

impl Span {
    /// The f32 elements of the buffer, as indices into the slab viewed as `[f32]`. Only whole
    /// elements inside `offset .. offset + bytes` (a workspace of odd size loses its tail).
    pub fn elems(&self) -> Range<usize> {
        let start = self.offset.div_ceil(4);
        let end = (self.offset + self.bytes) / 4;
        start..end.max(start)
    }

    fn bytes_range(&self) -> Range<usize> {
        self.offset..self.offset + self.bytes
    }

    fn reserved_range(&self) -> Range<usize> {
        self.offset..self.offset + self.reserved
    }
}

fn overlap(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// A checked program's slab layout: one span per LLIR buffer and each buffer's last use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlabLayout {
    /// How the spans were chosen.
    pub placement: Placement,
    /// Bytes of slab the layout needs (the plan's `slab_bytes`, or the no-reuse total).
    pub slab_bytes: usize,
    /// Span of buffer `i`, in LLIR buffer order.
    pub spans: Vec<Span>,
    /// The last node (in canonical execution order) that uses buffer `i`'s bytes: after it runs,
    /// they are dead and may be poisoned. For an operand whose bytes an in-place output took,
    /// that is the output's own last use (and so on along a chain of in-place ops).
    pub last_use: Vec<NodeId>,
}

impl SlabLayout {
    /// Checks `program` (see [`check_program`]) and lays its buffers out by `placement`.
    ///
    /// # Errors
    /// [`RuntimeError::InvalidProgram`] naming the first inconsistency found.
    pub fn new(program: &CompiledProgram, placement: Placement) -> Result<Self, RuntimeError> {
        check_program(program)?;
        let label = program.label.as_str();
        let llir = &program.llir;
        let plan = &program.plan;
        let mut spans = Vec::with_capacity(llir.buffers.len());
        let slab_bytes = match placement {
            Placement::Planned => {
                for ((buf, &offset), &reserved) in
                    llir.buffers.iter().zip(&plan.offsets).zip(&plan.reserved)
                {
                    spans.push(Span { offset, bytes: buf.bytes, reserved });
                }
                plan.slab_bytes
            }
            Placement::NoReuse => {
                let mut next = 0usize;
                for (buf, &reserved) in llir.buffers.iter().zip(&plan.reserved) {
                    spans.push(Span { offset: next, bytes: buf.bytes, reserved });
                    next = reserved
                        .checked_next_multiple_of(SLAB_ALIGNMENT)
                        .and_then(|r| next.checked_add(r))
                        .ok_or_else(|| RuntimeError::invalid(label, "slab size overflows"))?;
                }
                next
            }
        };
        for (i, (buf, span)) in llir.buffers.iter().zip(&spans).enumerate() {
            let end = span.offset.checked_add(span.reserved);
            if span.bytes > span.reserved || end.is_none_or(|e| e > slab_bytes) {
                return Err(RuntimeError::invalid(
                    label,
                    format!(
                        "buffer {i} `{}` ({} bytes, {} reserved at offset {}) does not fit the \
                         {slab_bytes}-byte slab",
                        buf.id, span.bytes, span.reserved, span.offset
                    ),
                ));
            }
            if buf.role != BufferRole::Workspace && span.offset % 4 != 0 {
                return Err(RuntimeError::invalid(
                    label,
                    format!(
                        "buffer `{}` at offset {} is not 4-byte aligned for f32",
                        buf.id, span.offset
                    ),
                ));
            }
        }
        // A node's output must not share bytes with its operands or its workspace: the plan
        // guarantees it (they all use that node), and kernels borrow them at the same time.
        // The one exception is in-place reuse: an elementwise output marked in place of an
        // operand of its size, at exactly its offset and read whole (each element is read
        // before it is written). Any other overlap, a node reading its own output included, is refused.
        for (n, node) in llir.nodes.iter().enumerate() {
            if !node.op.is_launch() {
                continue;
            }
            for &w in &node.writes {
                let ws = spans[w].bytes_range();
                for r in node.read_buffers().chain(node.workspace) {
                    let in_place = matches!(node.op, LlirOp::Map { .. })
                        && llir.buffers[w].in_place_of == Some(r)
                        && spans[w].offset == spans[r].offset
                        && spans[w].bytes == spans[r].bytes
                        && node.workspace != Some(r)
                        && node
                            .reads
                            .iter()
                            .filter(|o| o.buffer == r)
                            .all(|o| o.view.is_whole(&llir.buffers[w].shape));
                    if !in_place && overlap(&ws, &spans[r].bytes_range()) {
                        return Err(RuntimeError::invalid(
                            label,
                            format!(
                                "node {n} ({}) writes `{}` over the bytes of `{}`, which it also \
                                 uses: the plan is not valid",
                                node.op.name(),
                                llir.buffers[w].id,
                                llir.buffers[r].id
                            ),
                        ));
                    }
                }
            }
        }
        let mut last_use: Vec<NodeId> =
            llir.buffers.iter().map(|b| b.uses.iter().copied().max().unwrap_or(0)).collect();
        // In-place outputs live on in their operands' bytes: walk each chain operand -> output
        // -> ... from its head and give every link the chain's last use.
        let mut taker: Vec<Option<BufferId>> = vec![None; llir.buffers.len()];
        for (w, b) in llir.buffers.iter().enumerate() {
            if let Some(r) = b.in_place_of.filter(|&r| r < spans.len())
                && spans[w].offset == spans[r].offset
                && spans[w].bytes == spans[r].bytes
            {
                taker[r] = Some(w);
            }
        }
        let has_donor: Vec<bool> = {
            let mut d = vec![false; llir.buffers.len()];
            taker.iter().flatten().for_each(|&w| d[w] = true);
            d
        };
        for head in (0..taker.len()).filter(|&b| taker[b].is_some() && !has_donor[b]) {
            let mut chain = vec![head];
            while let Some(w) = chain.last().and_then(|&b| taker[b]) {
                if chain.len() > taker.len() {
                    break;
                }
                chain.push(w);
            }
            let end = chain.iter().map(|&b| last_use[b]).max().unwrap_or(0);
            chain.iter().for_each(|&b| last_use[b] = end);
        }
        Ok(Self { placement, slab_bytes, spans, last_use })
    }

    /// The layout a runtime prepares with: [`SlabLayout::new`], and in memory-debug mode with
    /// planned placement also [`verify_plan`]. The default mode trusts the plan, so a planning
    /// error shows up as wrong numbers (what the differential tests rely on to catch planner
    /// bugs); memory debug is where a user asks for the plan to be checked, so there an
    /// overlapping plan is refused before any byte is touched. A no-reuse layout ignores the
    /// plan's offsets, so nothing in them can corrupt it and they are not verified.
    ///
    /// # Errors
    /// [`RuntimeError::InvalidProgram`]: from [`SlabLayout::new`], or from [`verify_plan`]
    /// naming the overlapping pair (or other inconsistency) of the plan.
    pub fn for_runtime(
        program: &CompiledProgram,
        placement: Placement,
        memory_debug: bool,
    ) -> Result<Self, RuntimeError> {
        let layout = Self::new(program, placement)?;
        if memory_debug && placement == Placement::Planned {
            verify_plan(program)?;
        }
        Ok(layout)
    }

    /// Whether buffer `i`'s reserved bytes are shared with any other buffer (the plan reuses
    /// them). A weight whose bytes are shared must be uploaded again on every execute.
    pub fn is_shared(&self, i: BufferId) -> bool {
        let Some(mine) = self.spans.get(i).map(Span::reserved_range) else { return false };
        self.spans.iter().enumerate().any(|(j, s)| j != i && overlap(&mine, &s.reserved_range()))
    }
}

/// Checks that a compiled program is self-consistent, so a runtime can execute it without
/// panicking:
///
/// - buffer ids are unique (inputs are fed and outputs returned by name: two outputs of one
///   name would come back as one tensor, two inputs of one name would both get one tensor);
/// - the plan has one offset and one reserved size per buffer;
/// - every tensor buffer is f32, i32 or i64 with `bytes = size · ∏shape`; every buffer has
///   uses, all of them existing nodes;
/// - nodes are in topological order (each input has a smaller id) and every buffer a node
///   reads, writes or uses as workspace lists that node among its uses;
/// - every operand's view stays inside its buffer, and each op has the operands its kind
///   needs with matching views (matmul `[.., m, k]` and `[.., k, n]` over `batch` products,
///   a bias `[n]` when the epilogue has one, out `batch·m·n`; a map's views all of the
///   output's `len` elements; a reduction's axis of length `extent`; a gather's `[vocab,
///   dim]` table and integer ids); computed buffers are f32;
/// - upload writes only inputs, weights and constants, and every one of them is uploaded;
/// - every buffer read is written by an earlier node.
///
/// # Errors
/// [`RuntimeError::InvalidProgram`] naming the first inconsistency.
pub fn check_program(program: &CompiledProgram) -> Result<(), RuntimeError> {
    let label = program.label.as_str();
    let bad = |reason: String| RuntimeError::invalid(label, reason);
    let llir = &program.llir;
    let plan = &program.plan;
    let nb = llir.buffers.len();
    if let Some(reason) = duplicate_buffer_id(&llir.buffers) {
        return Err(bad(reason));
    }
    if plan.offsets.len() != nb || plan.reserved.len() != nb {
        return Err(bad(format!(
            "the plan has {} offsets and {} reserved sizes for {nb} buffers",
            plan.offsets.len(),
            plan.reserved.len()
        )));
    }
    for buf in &llir.buffers {
        if buf.uses.is_empty() {
            return Err(bad(format!("buffer `{}` has no uses", buf.id)));
        }
        if let Some(&u) = buf.uses.iter().find(|&&u| u >= llir.nodes.len()) {
            return Err(bad(format!("buffer `{}` uses absent node {u}", buf.id)));
        }
        if buf.role == BufferRole::Workspace {
            continue;
        }
        if !matches!(buf.dtype, DType::F32 | DType::I32 | DType::I64) {
            return Err(bad(format!(
                "buffer `{}` has dtype {}, only f32, i32 and i64 tensors run",
                buf.id, buf.dtype
            )));
        }
        let want = element_count(&buf.shape).and_then(|n| n.checked_mul(buf.dtype.size()));
        if want != Some(buf.bytes) {
            return Err(bad(format!(
                "buffer `{}` has shape {:?} but {} bytes",
                buf.id, buf.shape, buf.bytes
            )));
        }
    }
    let mut written = vec![false; nb];
    for (n, node) in llir.nodes.iter().enumerate() {
        let op = node.op;
        let name = op.name();
        let fail = |what: String| bad(format!("node {n} ({name}) {what}"));
        if let Some(&i) = node.inputs.iter().find(|&&i| i >= n) {
            return Err(bad(format!(
                "node {n} ({name}) depends on node {i}: nodes are not in topological order"
            )));
        }
        for b in node.buffers() {
            let Some(buf) = llir.buffers.get(b) else {
                return Err(fail(format!("names absent buffer {b}")));
            };
            if !buf.uses.contains(&n) {
                return Err(fail(format!(
                    "uses buffer `{}` but its uses {:?} do not list the node",
                    buf.id, buf.uses
                )));
            }
        }
        if let Some(ws) = node.workspace
            && llir.buffers[ws].role != BufferRole::Workspace
        {
            return Err(fail(format!(
                "has workspace `{}`, which is not a workspace buffer",
                llir.buffers[ws].id
            )));
        }
        for o in &node.reads {
            let buf = &llir.buffers[o.buffer];
            if buf.role == BufferRole::Workspace {
                return Err(fail(format!("reads workspace `{}`", buf.id)));
            }
            let v = &o.view;
            let fits = v.strides.len() == v.shape.len()
                && v.extent().is_some_and(|e| e <= buf.bytes / buf.dtype.size());
            if !fits {
                return Err(fail(format!(
                    "reads `{}` (shape {:?}) through a view of shape {:?} that reaches outside it",
                    buf.id, buf.shape, v.shape
                )));
            }
        }
        check_operands(node, llir, &fail)?;
        if let Some(r) = node.read_buffers().find(|&r| !written[r]) {
            return Err(fail(format!("reads `{}` before any node writes it", llir.buffers[r].id)));
        }
        for &w in &node.writes {
            written[w] = true;
        }
    }
    if let Some(buf) = llir.buffers.iter().zip(&written).find_map(|(b, &w)| {
        (!w && matches!(b.role, BufferRole::Input | BufferRole::Weight | BufferRole::Constant(_)))
            .then_some(b)
    }) {
        return Err(bad(format!("{} `{}` is never uploaded", role_name(buf.role), buf.id)));
    }
    Ok(())
}

/// The operands, views and output each op kind needs (see [`check_program`]).
fn check_operands(
    node: &LlirNode,
    llir: &Llir,
    fail: &dyn Fn(String) -> RuntimeError,
) -> Result<(), RuntimeError> {
    let buf = |b: BufferId| &llir.buffers[b];
    let f32_reads = || -> Result<(), RuntimeError> {
        match node.reads.iter().find(|o| buf(o.buffer).dtype != DType::F32) {
            Some(o) => Err(fail(format!(
                "reads `{}` of dtype {}, not f32",
                buf(o.buffer).id,
                buf(o.buffer).dtype
            ))),
            None => Ok(()),
        }
    };
    // The one output of a kernel, of `dtype`, with `len` elements.
    let output_of = |len: Option<usize>, dtype: DType| -> Result<(), RuntimeError> {
        let [w] = node.writes.as_slice() else {
            return Err(fail(format!("writes {} buffers, a kernel writes one", node.writes.len())));
        };
        let out = buf(*w);
        if out.dtype != dtype || out.role == BufferRole::Workspace {
            return Err(fail(format!("writes `{}`, which is not an {dtype} tensor", out.id)));
        }
        if len.is_none_or(|l| l != out.bytes / dtype.size()) {
            return Err(fail(format!(
                "writes `{}` of shape {:?}, the op needs {} f32 elements",
                out.id,
                out.shape,
                len.map_or("an overflowing count of".to_string(), |l| l.to_string())
            )));
        }
        Ok(())
    };
    let output = |len: Option<usize>| output_of(len, DType::F32);
    let arity = |want: usize| -> Result<(), RuntimeError> {
        if node.reads.len() == want {
            Ok(())
        } else {
            Err(fail(format!("reads {} buffers, the op needs {want}", node.reads.len())))
        }
    };
    match node.op {
        LlirOp::Upload => {
            if !node.reads.is_empty() {
                return Err(fail("reads buffers".to_string()));
            }
            if let Some(&w) = node.writes.iter().find(|&&w| {
                !matches!(
                    buf(w).role,
                    BufferRole::Input | BufferRole::Weight | BufferRole::Constant(_)
                )
            }) {
                return Err(fail(format!(
                    "writes `{}`, which is not an input, weight or constant",
                    buf(w).id
                )));
            }
        }
        LlirOp::Readback => {
            if !node.writes.is_empty() {
                return Err(fail("writes buffers".to_string()));
            }
            if let Some(o) = node.reads.iter().find(|o| !buf(o.buffer).dtype.is_host()) {
                return Err(fail(format!(
                    "reads back `{}` of dtype {}",
                    buf(o.buffer).id,
                    buf(o.buffer).dtype
                )));
            }
            if let Some(o) = node.reads.iter().find(|o| !o.view.is_whole(&buf(o.buffer).shape)) {
                return Err(fail(format!("reads `{}` through a view", buf(o.buffer).id)));
            }
        }
        LlirOp::LtMatmul { batch, m, k, n: cols, epilogue } => {
            arity(2 + usize::from(epilogue.has_bias()))?;
            f32_reads()?;
            let (va, vb) = (&node.reads[0].view, &node.reads[1].view);
            let r = va.rank();
            let ok = r >= 2
                && vb.rank() == r
                && va.shape[r - 2..] == [m, k]
                && vb.shape[r - 2..] == [k, cols]
                && va.shape[..r - 2] == vb.shape[..r - 2]
                && va.shape[..r - 2].iter().try_fold(1usize, |a, &d| a.checked_mul(d))
                    == Some(batch);
            if !ok {
                return Err(fail(format!(
                    "reads views {:?} and {:?}, the op needs [.., {m}, {k}] and [.., {k}, {cols}] over {batch} products",
                    va.shape, vb.shape
                )));
            }
            if let Some(bias) = node.reads.get(2)
                && bias.view.shape != [cols]
            {
                return Err(fail(format!(
                    "reads a bias view {:?}, the op needs [{cols}]",
                    bias.view.shape
                )));
            }
            output(batch.checked_mul(m).and_then(|x| x.checked_mul(cols)))?;
        }
        LlirOp::Map { op, len } => {
            arity(op.arity())?;
            f32_reads()?;
            if let Some(o) = node
                .reads
                .iter()
                .find(|o| o.view.elements() != len || o.view.shape != node.reads[0].view.shape)
            {
                return Err(fail(format!(
                    "reads `{}` through a view of shape {:?}, the op needs {len} elements in one shape",
                    buf(o.buffer).id,
                    o.view.shape
                )));
            }
            output(Some(len))?;
        }
        LlirOp::IntMap { op, len } => {
            arity(op.arity())?;
            let dtype = buf(node.reads[0].buffer).dtype;
            if let Some(o) = node.reads.iter().find(|o| {
                let b = buf(o.buffer);
                !IntOp::takes(b.dtype) || b.dtype != dtype
            }) {
                return Err(fail(format!(
                    "reads `{}` of dtype {}, the op needs i32 or i64 operands of one type",
                    buf(o.buffer).id,
                    buf(o.buffer).dtype
                )));
            }
            if let Some(o) = node
                .reads
                .iter()
                .find(|o| o.view.elements() != len || o.view.shape != node.reads[0].view.shape)
            {
                return Err(fail(format!(
                    "reads `{}` through a view of shape {:?}, the op needs {len} elements in one shape",
                    buf(o.buffer).id,
                    o.view.shape
                )));
            }
            output_of(Some(len), dtype)?;
        }
        LlirOp::Reduce { axis, len, extent, .. } => {
            arity(1)?;
            f32_reads()?;
            let v = &node.reads[0].view;
            let others: Option<usize> = v
                .shape
                .iter()
                .enumerate()
                .filter(|&(a, _)| a != axis)
                .try_fold(1usize, |acc, (_, &d)| acc.checked_mul(d));
            if v.shape.get(axis) != Some(&extent) || others != Some(len) {
                return Err(fail(format!(
                    "reads a view of shape {:?}, the op reduces axis {axis} of length {extent} to {len} elements",
                    v.shape
                )));
            }
            output(Some(len))?;
        }
        LlirOp::Gather { rows, dim, vocab } => {
            arity(2)?;
            let (table, ids) = (&node.reads[0], &node.reads[1]);
            if buf(table.buffer).dtype != DType::F32 || table.view.shape != [vocab, dim] {
                return Err(fail(format!(
                    "reads a table view {:?}, the op needs f32 [{vocab}, {dim}]",
                    table.view.shape
                )));
            }
            if !buf(ids.buffer).dtype.is_index() || ids.view.elements() != rows {
                return Err(fail(format!(
                    "reads ids `{}` ({}, {} elements), the op needs {rows} i32 or i64 ids",
                    buf(ids.buffer).id,
                    buf(ids.buffer).dtype,
                    ids.view.elements()
                )));
            }
            output(rows.checked_mul(dim))?;
        }
        LlirOp::Conv { geometry: g, epilogue } => {
            arity(epilogue.operands())?;
            f32_reads()?;
            let out = g.output_shape();
            let (x, w) = (g.input_shape(), g.weight_shape());
            let mut want = vec![x, w];
            if epilogue.bias {
                want.push(vec![g.c_out]);
            }
            if epilogue.residual {
                want.push(out.clone());
            }
            if let Some((o, shape)) =
                node.reads.iter().zip(&want).find(|(o, shape)| o.view.shape != **shape)
            {
                return Err(fail(format!(
                    "reads `{}` through a view of shape {:?}, the op needs {shape:?}",
                    buf(o.buffer).id,
                    o.view.shape
                )));
            }
            let ws = node.workspace.map_or(0, |b| buf(b).bytes);
            if ws < g.workspace_bytes() {
                return Err(fail(format!(
                    "has {ws} bytes of workspace, the op needs {}",
                    g.workspace_bytes()
                )));
            }
            output(out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)))?;
        }
        LlirOp::MaxPool { geometry: g } => {
            arity(1)?;
            f32_reads()?;
            let (x, out) = (g.input_shape(), g.output_shape());
            if node.reads[0].view.shape != x {
                return Err(fail(format!(
                    "reads `{}` through a view of shape {:?}, the op needs {x:?}",
                    buf(node.reads[0].buffer).id,
                    node.reads[0].view.shape
                )));
            }
            output(out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)))?;
        }
        LlirOp::Take { axis, len, extent, .. } => {
            arity(2)?;
            let (x, idx) = (&node.reads[0], &node.reads[1]);
            if buf(x.buffer).dtype != DType::F32 || x.view.shape.get(axis) != Some(&extent) {
                return Err(fail(format!(
                    "reads a view {:?} of `{}`, the op needs f32 with axis {axis} of length {extent}",
                    x.view.shape,
                    buf(x.buffer).id
                )));
            }
            let mut shape = x.view.shape.clone();
            shape[axis] = idx.view.elements();
            if !buf(idx.buffer).dtype.is_index() || idx.view.rank() != 1 {
                return Err(fail(format!(
                    "reads indices `{}` ({}, shape {:?}), the op needs 1-D i32 or i64",
                    buf(idx.buffer).id,
                    buf(idx.buffer).dtype,
                    idx.view.shape
                )));
            }
            if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(len) {
                return Err(fail(format!("writes {len} elements, its operands make {shape:?}")));
            }
            output(Some(len))?;
        }
        LlirOp::AppendRows { len } => {
            arity(1)?;
            let x = &node.reads[0];
            let [w] = node.writes.as_slice() else {
                return Err(fail("writes no single state".to_string()));
            };
            let state = buf(*w);
            let rows_fit = state.shape.first().is_some_and(|&r| r > 0)
                && x.view.elements() == len
                && len % (state.bytes / 4 / state.shape[0].max(1)).max(1) == 0
                && len <= state.bytes / 4;
            if state.role != BufferRole::State || state.dtype != DType::F32 || !rows_fit {
                return Err(fail(format!(
                    "appends {len} elements (`{}`) to `{}` ({}), not whole rows of an f32 state",
                    buf(x.buffer).id,
                    state.id,
                    role_name(state.role)
                )));
            }
            f32_reads()?;
        }
        LlirOp::Cast { to, len } => {
            arity(1)?;
            let x = &node.reads[0];
            if !buf(x.buffer).dtype.is_host() || x.view.elements() != len {
                return Err(fail(format!(
                    "reads `{}` ({}, {} elements), the op converts {len} f32/i32/i64 elements",
                    buf(x.buffer).id,
                    buf(x.buffer).dtype,
                    x.view.elements()
                )));
            }
            output_of(Some(len), to)?;
        }
        LlirOp::TopK { axis, k, len, extent, .. } => {
            arity(1)?;
            f32_reads()?;
            let v = &node.reads[0].view;
            let others: Option<usize> = v
                .shape
                .iter()
                .enumerate()
                .filter(|&(a, _)| a != axis)
                .try_fold(1usize, |acc, (_, &d)| acc.checked_mul(d));
            if v.shape.get(axis) != Some(&extent)
                || k > extent
                || others.and_then(|o| o.checked_mul(k)) != Some(len)
            {
                return Err(fail(format!(
                    "reads a view of shape {:?}, the op takes {k} of axis {axis} (length {extent}) into {len} elements",
                    v.shape
                )));
            }
            output_of(Some(len), DType::I64)?;
        }
        LlirOp::GatherElements { axis, len, extent } => {
            arity(2)?;
            let (data, idx) = (&node.reads[0], &node.reads[1]);
            let fits = buf(data.buffer).dtype == DType::F32
                && buf(idx.buffer).dtype.is_index()
                && data.view.shape.get(axis) == Some(&extent)
                && idx.view.rank() == data.view.rank()
                && idx.view.elements() == len;
            if !fits {
                return Err(fail(format!(
                    "reads data {:?} and indices {:?}, the op needs f32 data with axis {axis} of length {extent} and {len} integer indices of its rank",
                    data.view.shape, idx.view.shape
                )));
            }
            output(Some(len))?;
        }
        LlirOp::ScatterElements { axis, len, extent, updates, .. } => {
            arity(3)?;
            let (data, idx, upd) = (&node.reads[0], &node.reads[1], &node.reads[2]);
            let dtype = buf(data.buffer).dtype;
            let (dv, iv) = (&data.view, &idx.view);
            let fits = matches!(dtype, DType::F32 | DType::I32 | DType::I64)
                && buf(upd.buffer).dtype == dtype
                && buf(idx.buffer).dtype.is_index()
                && dv.shape.get(axis) == Some(&extent)
                && dv.elements() == len
                && iv.rank() == dv.rank()
                && iv.elements() == updates
                && upd.view.shape == iv.shape
                && iv
                    .shape
                    .iter()
                    .zip(&dv.shape)
                    .enumerate()
                    .all(|(a, (i, d))| a == axis || i <= d);
            if !fits {
                return Err(fail(format!(
                    "reads data {:?} ({dtype}), indices {:?} and updates {:?}, the op needs f32, i32 or i64 data of {len} elements with axis {axis} of length {extent}, and {updates} integer indices and updates of the data's type in one shape of its rank",
                    dv.shape, iv.shape, upd.view.shape
                )));
            }
            // A fresh output of the data's type: the op copies, never writes in place.
            output_of(Some(len), dtype)?;
        }
        LlirOp::Arg { axis, len, extent, .. } => {
            arity(1)?;
            f32_reads()?;
            let v = &node.reads[0].view;
            let others: Option<usize> = v
                .shape
                .iter()
                .enumerate()
                .filter(|&(a, _)| a != axis)
                .try_fold(1usize, |acc, (_, &d)| acc.checked_mul(d));
            if v.shape.get(axis) != Some(&extent) || others != Some(len) {
                return Err(fail(format!(
                    "reads a view of shape {:?}, the op searches axis {axis} of length {extent} for {len} elements",
                    v.shape
                )));
            }
            output_of(Some(len), DType::I64)?;
        }
        LlirOp::Concat { axis, len } => {
            if node.reads.is_empty() {
                return Err(fail("reads nothing".to_string()));
            }
            f32_reads()?;
            let rank = node.reads[0].view.rank();
            let fits = node.concat_shape().is_some_and(|s| {
                s.iter().product::<usize>() == len
                    && node.reads.iter().all(|o| {
                        o.view.rank() == rank
                            && o.view
                                .shape
                                .iter()
                                .zip(&s)
                                .enumerate()
                                .all(|(a, (x, y))| a == axis || x == y)
                    })
            });
            if !fits {
                return Err(fail(format!(
                    "operands do not join along axis {axis} into {len} elements"
                )));
            }
            output(Some(len))?;
        }
    }
    Ok(())
}

/// Checks `program.plan` with the planner's independent verifier
/// ([`lumen_planner::verify()`], which shares no code with placement): reserved sizes and
/// alignment, `slab_bytes`, `naive_bytes`, the exact `lower_bound`, and above all that no two
/// buffers whose lifetimes conflict (neither precedes the other in `program.dag`) share a byte.
/// The layout's own check only compares a node's output with that node's operands; two
/// operands of one node, or two buffers of parallel branches, on the same bytes pass it and
/// silently corrupt results.
///
/// The plan is checked against the options the program records it was planned with
/// ([`lumen_compiler::ProgramOptions`]): its alignment (so an offset the planner never gave,
/// such as 128 in a 256-aligned plan, is named even though a smaller alignment would explain
/// it) and its capacity. Overlapping pairs are reported before a wrong `slab_bytes`. This is
/// the check `LUMINAL_CUDA_MEMORY_DEBUG=1` runs at prepare (see
/// [`SlabLayout::for_runtime`]); it costs one transitive closure and one min-flow lower bound.
///
/// # Errors
/// [`RuntimeError::InvalidProgram`] with reason `memory debug: the plan fails verification:
/// {verify error}`, e.g. `buffers x [0, 256) and w [0, 256) overlap but their lifetimes
/// conflict`.
pub fn verify_plan(program: &CompiledProgram) -> Result<(), RuntimeError> {
    let fail = |e: VerifyError| {
        RuntimeError::invalid(
            &program.label,
            format!("memory debug: the plan fails verification: {e}"),
        )
    };
    let recorded = &program.options;
    let options = SlabOptions {
        alignment: recorded.alignment,
        capacity: recorded.capacity,
        algorithm: recorded.algorithm,
        ..SlabOptions::default()
    };
    // verify checks the totals before the pairs, but a buffer moved onto another often moves
    // the highest end too: check the pairs against the slab the offsets give first, so the
    // error names the overlap that corrupts results rather than a harmless over-allocation.
    let mut plan = program.plan.clone();
    let reported = plan.slab_bytes;
    plan.slab_bytes = plan
        .offsets
        .iter()
        .zip(&plan.reserved)
        .map(|(&o, &r)| o.saturating_add(r))
        .max()
        .unwrap_or(0);
    lumen_planner::verify(&program.dag, &program.llir.slab_buffers(), &plan, &options)
        .map_err(fail)?;
    if reported != plan.slab_bytes {
        return Err(fail(VerifyError::Totals {
            field: "slab_bytes",
            reported,
            actual: plan.slab_bytes,
        }));
    }
    Ok(())
}

/// The first pair of buffers (in buffer order of the second) that share an id, as the reason
/// "buffers I and J are both named \`ID\`: buffer ids must be unique"; `None` when every id is
/// unique.
pub(crate) fn duplicate_buffer_id(buffers: &[LlirBuffer]) -> Option<String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (j, buf) in buffers.iter().enumerate() {
        if let Some(&i) = seen.get(buf.id.as_str()) {
            return Some(format!(
                "buffers {i} and {j} are both named `{}`: buffer ids must be unique",
                buf.id
            ));
        }
        seen.insert(&buf.id, j);
    }
    None
}

/// The memory plan as `LUMINAL_CUDA_MEMORY_DEBUG=1` prints it: one summary line
/// `{PREFIX}_MEMORY_PLAN label=.. placement=.. buffers=.. slab_bytes=.. naive_bytes=..
/// lower_bound=..` (bytes; naive and lower bound are the plan's, whatever the placement), then
/// one `{PREFIX}_MEMORY_BUFFER` line per buffer in request order with its role, bytes,
/// reserved bytes, offset, uses and last use.
pub fn memory_plan_lines(
    prefix: &str,
    program: &CompiledProgram,
    layout: &SlabLayout,
) -> Vec<String> {
    let plan = &program.plan;
    let mut lines = vec![format!(
        "{prefix}_MEMORY_PLAN label={} placement={} buffers={} slab_bytes={} naive_bytes={} \
         lower_bound={}",
        program.label,
        layout.placement.name(),
        program.llir.buffers.len(),
        layout.slab_bytes,
        plan.naive_bytes,
        plan.lower_bound
    )];
    for ((buf, span), last) in program.llir.buffers.iter().zip(&layout.spans).zip(&layout.last_use)
    {
        let uses: Vec<String> = buf.uses.iter().map(ToString::to_string).collect();
        lines.push(format!(
            "{prefix}_MEMORY_BUFFER id={} role={} bytes={} reserved={} offset={} uses={} last_use={last}",
            buf.id,
            role_name(buf.role),
            span.bytes,
            span.reserved,
            span.offset,
            uses.join(",")
        ));
    }
    lines
}

/// The role's name in messages and dumps: `input`, `weight`, `workspace`, `intermediate`,
/// `output`.
pub fn role_name(role: BufferRole) -> &'static str {
    match role {
        BufferRole::Input => "input",
        BufferRole::Weight => "weight",
        BufferRole::Constant(_) => "constant",
        BufferRole::Workspace => "workspace",
        BufferRole::State => "state",
        BufferRole::Intermediate => "intermediate",
        BufferRole::Output => "output",
    }
}

#[cfg(test)]
mod tests {
    use lumen_compiler::{CompileOptions, Graph};
    use lumen_planner::SlabAlgorithm;

    use super::*;

    fn linear_relu(m: usize, k: usize, n: usize, options: &CompileOptions) -> CompiledProgram {
        let mut cx = Graph::new();
        let x = cx.input("x", [m, k]);
        let w = cx.weight("w", [k, n]);
        let b = cx.weight("b", [n]);
        (x.matmul(w) + b).relu().output("y");
        cx.compile(options).unwrap()
    }

    #[test]
    fn the_plan_is_verified_against_its_recorded_alignment_and_capacity() {
        let unfused = CompileOptions { fuse: false, ..CompileOptions::default() };
        let program = linear_relu(4, 3, 5, &unfused);
        assert_eq!(program.options.alignment, 256);
        assert_eq!(verify_plan(&program), Ok(()));
        // y (80 bytes, reserved 256) moved from 256 to 128: no overlap, every reserved size
        // right, and 128 divides every offset, so an alignment guessed from the plan would
        // pass it; the recorded 256 names it.
        let y = program.llir.buffers.iter().position(|b| b.id == "y").unwrap();
        assert_eq!(program.plan.offsets[y], 256);
        let mut p = program.clone();
        p.plan.offsets[y] = 128;
        assert_eq!(
            verify_plan(&p).unwrap_err().to_string(),
            "invalid program `program-unfused`: memory debug: the plan fails verification: \
             buffer y at offset 128 is not aligned to 256 bytes"
        );
        // A plan made at 4 bytes passes against its own alignment, not against 256.
        let four = CompileOptions { alignment: 4, ..unfused.clone() };
        let p = linear_relu(4, 3, 5, &four);
        assert_eq!(p.options.alignment, 4);
        assert_eq!(verify_plan(&p), Ok(()));
        let mut claims_256 = p.clone();
        claims_256.options.alignment = 256;
        assert!(verify_plan(&claims_256).is_err());
        // The recorded capacity is checked too: the golden slab does not fit in 1 MiB.
        let mut p = linear_relu(64, 256, 64, &unfused);
        assert_eq!(verify_plan(&p), Ok(()));
        p.options.capacity = Some(1 << 20);
        let err = verify_plan(&p).unwrap_err().to_string();
        assert!(err.contains("past the limit of 1048576 bytes"), "{err}");
    }

    #[test]
    fn valid_plans_pass_verification_whatever_the_alignment_and_algorithm() {
        for fuse in [false, true] {
            for alignment in [4, 16, 256, 4096] {
                for algorithm in [
                    SlabAlgorithm::FirstFit,
                    SlabAlgorithm::FirstFitSize,
                    SlabAlgorithm::BestFitSize,
                    SlabAlgorithm::Lifetime,
                    SlabAlgorithm::Best,
                ] {
                    let options =
                        CompileOptions { fuse, alignment, algorithm, ..CompileOptions::default() };
                    for (m, k, n) in [(4, 3, 5), (64, 256, 64), (1, 0, 1)] {
                        let p = linear_relu(m, k, n, &options);
                        assert_eq!(
                            verify_plan(&p),
                            Ok(()),
                            "{} {alignment} {algorithm:?}",
                            p.label
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn overlaps_are_named_before_a_wrong_slab_size() {
        let unfused = CompileOptions { fuse: false, ..CompileOptions::default() };
        let program = linear_relu(4, 3, 5, &unfused);
        // t0 is alone at the top of the slab (above the 1 MiB workspace): moving it onto b
        // (both read by add_bias) both overlaps and lowers the highest end.
        let (b, t0) = (2, 4);
        let ids = (program.llir.buffers[b].id.as_str(), program.llir.buffers[t0].id.as_str());
        assert_eq!(ids, ("b", "t0"));
        assert_eq!(program.plan.offsets[t0] + program.plan.reserved[t0], program.plan.slab_bytes);
        let mut p = program.clone();
        p.plan.offsets[t0] = p.plan.offsets[b];
        assert_eq!(
            verify_plan(&p).unwrap_err().to_string(),
            "invalid program `program-unfused`: memory debug: the plan fails verification: \
             buffers b [512, 768) and t0 [512, 768) overlap but their lifetimes conflict"
        );
        // Without an overlap, a slab size the offsets do not give is reported.
        let mut p = program.clone();
        p.plan.slab_bytes += 256;
        assert_eq!(
            verify_plan(&p).unwrap_err().to_string(),
            "invalid program `program-unfused`: memory debug: the plan fails verification: \
             plan reports slab_bytes = 1049856 but its offsets give 1049600"
        );
    }
}
