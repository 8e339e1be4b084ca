//! The LLIR: kernel and host ops over explicit buffers, in canonical topological order.
//!
//! This is the contract between the compiler (which builds it), the planner (which places its
//! buffers) and the runtimes (which execute it). Buffers are whole tensors, row-major; a kernel
//! reads each operand through a [`View`] (shape, strides, offset) of its buffer, so movement
//! costs no copy, and writes its output contiguous.

use serde::Serialize;

use crate::conv::{ConvEpilogue, ConvGeometry};
use crate::dtype::{DType, Scalar};
use crate::ops::{ElemOp, IntOp, ReduceOp, ScatterReduction, UnaryOp};
use crate::view::View;

/// Index of a node in [`Llir::nodes`] (its canonical number).
pub type NodeId = usize;
/// Index of a buffer in [`Llir::buffers`] (its request order).
pub type BufferId = usize;

/// cuBLASLt matmul epilogues (`CUBLASLT_EPILOGUE_*`) lumen can fuse. BIAS adds a vector of
/// length N to every row of the [M, N] output; RELU/GELU (tanh form) follow the bias when both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Epilogue {
    /// Plain product.
    Default,
    /// `+ bias[N]` over the rows.
    Bias,
    /// `relu(product)`.
    Relu,
    /// `relu(product + bias)`.
    ReluBias,
    /// `gelu(product)`, tanh approximation.
    Gelu,
    /// `gelu(product + bias)`, tanh approximation.
    GeluBias,
}

impl Epilogue {
    /// Every epilogue, in declaration order (the six cuBLASLt epilogues lumen emits).
    pub const ALL: [Epilogue; 6] = [
        Epilogue::Default,
        Epilogue::Bias,
        Epilogue::Relu,
        Epilogue::ReluBias,
        Epilogue::Gelu,
        Epilogue::GeluBias,
    ];

    /// cuBLASLt's name: `DEFAULT`, `BIAS`, `RELU`, `RELU_BIAS`, `GELU`, `GELU_BIAS`.
    pub fn name(self) -> &'static str {
        match self {
            Epilogue::Default => "DEFAULT",
            Epilogue::Bias => "BIAS",
            Epilogue::Relu => "RELU",
            Epilogue::ReluBias => "RELU_BIAS",
            Epilogue::Gelu => "GELU",
            Epilogue::GeluBias => "GELU_BIAS",
        }
    }

    /// Whether the epilogue reads a bias vector (a third operand of the matmul).
    pub fn has_bias(self) -> bool {
        matches!(self, Epilogue::Bias | Epilogue::ReluBias | Epilogue::GeluBias)
    }
}

impl Epilogue {
    /// The epilogue's activation: `Relu`, `Gelu` (tanh form) or none.
    pub fn activation(self) -> Option<UnaryOp> {
        match self {
            Epilogue::Default | Epilogue::Bias => None,
            Epilogue::Relu | Epilogue::ReluBias => Some(UnaryOp::Relu),
            Epilogue::Gelu | Epilogue::GeluBias => Some(UnaryOp::Gelu),
        }
    }

    /// The epilogue that adds a bias (or not) and then applies `activation`: `None` when
    /// cuBLASLt has no such epilogue (an activation other than relu and tanh-GELU).
    pub fn from_parts(bias: bool, activation: Option<UnaryOp>) -> Option<Epilogue> {
        match (bias, activation) {
            (false, None) => Some(Epilogue::Default),
            (true, None) => Some(Epilogue::Bias),
            (false, Some(UnaryOp::Relu)) => Some(Epilogue::Relu),
            (true, Some(UnaryOp::Relu)) => Some(Epilogue::ReluBias),
            (false, Some(UnaryOp::Gelu)) => Some(Epilogue::Gelu),
            (true, Some(UnaryOp::Gelu)) => Some(Epilogue::GeluBias),
            _ => None,
        }
    }

    /// FLOP per output element the epilogue adds: 1 for the bias, plus the activation's
    /// ([`ElemOp::flops_per_element`]: relu 1, gelu 8).
    pub fn flops_per_element(self) -> u64 {
        u64::from(self.has_bias())
            + self.activation().map_or(0, |a| ElemOp::Unary(a).flops_per_element())
    }
}

/// One LLIR operation. Sizes are element counts; computed tensors are row-major f32, read
/// through their [`Operand`] views and written whole and contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LlirOp {
    /// Host-to-slab copy of every input, weight and constant (writes them all).
    Upload,
    /// cuBLASLt matmul: `batch` products `a [m, k] x b [k, n]` (plus `bias [n]` over the rows
    /// when the epilogue has one), then the epilogue. Operand views are `[m, k]` and `[k, n]`
    /// for one product, `[batch axes..., m, k]` and `[batch axes..., k, n]` otherwise (a
    /// broadcast batch axis has stride 0; a transposed operand is a view with swapped
    /// strides, never a copy). Uses its workspace buffer; writes `out [batch axes..., m, n]`.
    LtMatmul {
        /// Products (the product of the batch axes; 1 for a plain GEMM).
        batch: usize,
        /// Rows of each output matrix.
        m: usize,
        /// Inner dimension.
        k: usize,
        /// Columns of each output matrix.
        n: usize,
        /// Fused epilogue.
        epilogue: Epilogue,
    },
    /// `out[i] = op(operands at i)` over `len` elements: every operand's view has the
    /// output's shape (broadcast operands have stride-0 axes).
    Map {
        /// The elementwise op ([`crate::ops`]).
        #[serde(rename = "elem")]
        op: ElemOp,
        /// Output elements.
        len: usize,
    },
    /// `out[i] = op(operands at i)` over `len` elements of one integer type (i32 or i64,
    /// the operands' and the output's): an exact integer op ([`IntOp`]). Every operand's view
    /// has the output's shape (broadcast operands have stride-0 axes).
    IntMap {
        /// The integer op ([`crate::ops::IntOp`]).
        #[serde(rename = "int")]
        op: IntOp,
        /// Output elements.
        len: usize,
    },
    /// A reduction of one operand over `axis`, which the output drops.
    Reduce {
        /// Sum or max.
        #[serde(rename = "reduce")]
        op: ReduceOp,
        /// The reduced axis of the operand's view.
        axis: usize,
        /// Output elements.
        len: usize,
        /// The reduced axis' length.
        extent: usize,
    },
    /// Embedding lookup: reads `table [vocab, dim]` and `ids [...]` (i32/i64), writes
    /// `[..., dim]`; an id outside `0..vocab` is a runtime error.
    Gather {
        /// Ids looked up (rows of the output).
        rows: usize,
        /// Columns of the table and the output.
        dim: usize,
        /// Rows of the table.
        vocab: usize,
    },
    /// A convolution ([`crate::conv`]): reads `x [N, C, *in]` and `w [OC, C / groups,
    /// *kernel]` through their views, then `bias [OC]` and `residual [N, OC, *out]` when the
    /// epilogue has them; writes `[N, OC, *out]`. Its workspace (when
    /// [`ConvGeometry::workspace_bytes`] is not 0) holds the im2col patch matrix of one image
    /// and group.
    Conv {
        /// Shapes, strides, dilations, pads and groups, resolved.
        geometry: ConvGeometry,
        /// Bias, residual and activation applied to each output element.
        epilogue: ConvEpilogue,
    },
    /// A max pool ([`crate::HlirOp::MaxPool`]): reads `x [N, C, *in]` through its view, writes
    /// `[N, C, *out]`, each element the max of its window (padded positions skipped; NaN wins;
    /// of equal values the first in row-major window order, which only tells `-0` from `+0`).
    /// Its geometry is a depthwise convolution's ([`ConvGeometry::pool`]: `groups = OC = C`).
    MaxPool {
        /// Shapes, window, strides, dilations and pads, resolved.
        geometry: ConvGeometry,
    },
    /// Elements picked along `axis` by an index operand ([`crate::HlirOp::Take`]): reads `x`
    /// and `indices` (1-D, i32/i64), writes `len` elements; `extent` is `x`'s length along
    /// `axis` (an index at or past it is a runtime error), `fill` the value of a negative index.
    Take {
        /// The axis picked along.
        axis: usize,
        /// Output elements.
        len: usize,
        /// The input's length along `axis`.
        extent: usize,
        /// The value of a negative index.
        fill: Scalar,
    },
    /// `len` elements of one operand (any dtype, read through its view in row-major order)
    /// converted to `to` ([`crate::HlirOp::Cast`]; [`crate::DType::cast_f64`] says how) and
    /// written contiguous: also the typed copy of an integer view.
    Cast {
        /// The element type written.
        to: DType,
        /// Elements.
        len: usize,
    },
    /// The i64 index of the largest (`max`) or smallest element along `axis` of one f32
    /// operand ([`crate::HlirOp::Arg`]), which the output of `len` elements drops.
    Arg {
        /// Argmax or argmin.
        max: bool,
        /// The searched axis of the operand's view.
        axis: usize,
        /// The last of equal elements rather than the first.
        last: bool,
        /// Output elements.
        len: usize,
        /// The searched axis' length.
        extent: usize,
    },
    /// The i64 positions of the `k` largest (or smallest) elements along `axis` of one f32
    /// operand ([`crate::HlirOp::TopK`], [`crate::ops::top_k`]); `len` output elements,
    /// `extent` the axis' length.
    TopK {
        /// The searched axis.
        axis: usize,
        /// Positions per row.
        k: usize,
        /// Largest first, or smallest first.
        largest: bool,
        /// Output elements.
        len: usize,
        /// The searched axis' length.
        extent: usize,
    },
    /// Elements of `data` picked along `axis` by an index operand of the output's shape
    /// ([`crate::HlirOp::GatherElements`]); `extent` is `data`'s length along `axis`.
    GatherElements {
        /// The axis picked along.
        axis: usize,
        /// Output elements.
        len: usize,
        /// `data`'s length along `axis`.
        extent: usize,
    },
    /// A copy of `data` with elements along `axis` replaced by (or combined with) `updates`
    /// at `indices` ([`crate::HlirOp::ScatterElements`]): reads `data` (f32, i32 or i64),
    /// `indices` (i32/i64) and `updates` (the data's dtype, the indices' shape), each through
    /// its view; writes `len` elements of the data's dtype, a fresh buffer (never in place).
    /// `extent` is `data`'s length along `axis` (an index outside `-extent..extent` is a
    /// runtime error), `updates` the number of updates.
    ScatterElements {
        /// The axis the indices address.
        axis: usize,
        /// How an update combines with the element it lands on.
        reduction: ScatterReduction,
        /// Output elements (the data's).
        len: usize,
        /// `data`'s length along `axis`.
        extent: usize,
        /// Updates (and indices).
        updates: usize,
    },
    /// The `len` elements of one operand (read through its view in row-major order) written
    /// contiguous into the last rows, along axis 0, of the output buffer, a state
    /// ([`BufferRole::State`]): from row `R - r` where `R` is the state's rows and `r` the
    /// operand's (live rows, with symbols: a KV cache's append, [`crate::HlirOp::AppendRows`]).
    /// The rows before keep their bytes.
    AppendRows {
        /// Elements written.
        len: usize,
    },
    /// Operands joined along `axis` into one contiguous output of `len` elements.
    Concat {
        /// The joined axis.
        axis: usize,
        /// Output elements.
        len: usize,
    },
    /// Slab-to-host copy of every output (reads them all).
    Readback,
}

impl LlirOp {
    /// The op's name in dumps: `upload`, `lt_matmul`, the elementwise op's name (`add`,
    /// `relu`, `contiguous`, ...), `sum`/`max`, `gather`, `concat`, `readback`.
    pub fn name(&self) -> &'static str {
        match self {
            LlirOp::Upload => "upload",
            LlirOp::LtMatmul { .. } => "lt_matmul",
            LlirOp::Map { op, .. } => op.name(),
            LlirOp::IntMap { op, .. } => op.name(),
            LlirOp::Reduce { op, .. } => op.name(),
            LlirOp::Gather { .. } => "gather",
            LlirOp::Conv { .. } => "conv",
            LlirOp::MaxPool { .. } => "max_pool",
            LlirOp::Take { .. } => "take",
            LlirOp::Cast { .. } => "cast",
            LlirOp::Arg { max: true, .. } => "argmax",
            LlirOp::Arg { max: false, .. } => "argmin",
            LlirOp::TopK { .. } => "topk",
            LlirOp::GatherElements { .. } => "gather_elements",
            LlirOp::ScatterElements { .. } => "scatter_elements",
            LlirOp::AppendRows { .. } => "append_rows",
            LlirOp::Concat { .. } => "concat",
            LlirOp::Readback => "readback",
        }
    }

    /// Whether the op is a kernel launch (everything but upload and readback).
    pub fn is_launch(&self) -> bool {
        !matches!(self, LlirOp::Upload | LlirOp::Readback)
    }

    /// Floating-point operations the op performs: `batch * (2 m n k + m n e)` for a matmul
    /// whose epilogue does `e` per element ([`Epilogue::flops_per_element`]); `len x`
    /// [`ElemOp::flops_per_element`] for a map; `len x extent` for a reduction;
    /// [`ConvGeometry::flops`] for a convolution; one per window tap of every output for a max
    /// pool; one per update for a scatter with a reduction; none for an integer map, gather, take, concat, a
    /// plain scatter, upload and readback (copies).
    ///
    /// Saturates at `u64::MAX` rather than wrapping: a `[2^21, 2^21] x [2^21, 2^21]` matmul
    /// is 2^64 FLOP, one past what a `u64` holds, and is reported as `u64::MAX`.
    pub fn flops(&self) -> u64 {
        match *self {
            LlirOp::LtMatmul { batch, m, k, n, epilogue } => {
                let mn = wide(m).saturating_mul(wide(n));
                mn.saturating_mul(2)
                    .saturating_mul(wide(k))
                    .saturating_add(mn.saturating_mul(epilogue.flops_per_element()))
                    .saturating_mul(wide(batch))
            }
            LlirOp::Map { op, len } => wide(len).saturating_mul(op.flops_per_element()),
            LlirOp::Reduce { len, extent, .. } => wide(len).saturating_mul(wide(extent)),
            LlirOp::Conv { geometry, epilogue } => geometry.flops(epilogue),
            LlirOp::MaxPool { geometry } => wide(geometry.batch)
                .saturating_mul(wide(geometry.c_out))
                .saturating_mul(wide(geometry.output_positions()))
                .saturating_mul(wide(geometry.taps())),
            LlirOp::Arg { len, extent, .. } | LlirOp::TopK { len, extent, .. } => {
                wide(len).saturating_mul(wide(extent))
            }
            // One combine per update; a plain scatter only copies.
            LlirOp::ScatterElements { reduction: ScatterReduction::None, .. } => 0,
            LlirOp::ScatterElements { updates, .. } => wide(updates),
            // Integer ops: no floating-point operation.
            LlirOp::IntMap { .. }
            | LlirOp::Gather { .. }
            | LlirOp::Take { .. }
            | LlirOp::GatherElements { .. }
            | LlirOp::Cast { .. }
            | LlirOp::Concat { .. }
            | LlirOp::AppendRows { .. }
            | LlirOp::Upload
            | LlirOp::Readback => 0,
        }
    }
}

/// `x` as a `u64` (saturating on a platform whose `usize` is wider).
fn wide(x: usize) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// What a buffer holds; decides who fills it and whether it is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferRole {
    /// A program input, uploaded on every execute.
    Input,
    /// A weight, uploaded at prepare; again on every execute when the plan lets a later
    /// buffer reuse its bytes ([`crate::CompileOptions::resident_weights`] prevents that).
    Weight,
    /// An f32 scalar the program carries ([`crate::HlirOp::Constant`]), uploaded at prepare
    /// like a weight.
    Constant(Scalar),
    /// A matmul's cuBLASLt workspace: scratch, never read back.
    Workspace,
    /// A persistent tensor the runtime owns ([`crate::Graph::state`]): zero at prepare, never
    /// uploaded or read back, its bytes kept from one execute to the next and never shared
    /// with another buffer (its uses span the program); written by
    /// [`LlirOp::AppendRows`] (a KV cache).
    State,
    /// A value produced and consumed inside the program (`t0`, `t1`, ...).
    Intermediate,
    /// A program output, read back after the last launch.
    Output,
}

/// One buffer: a tensor (or workspace) the planner places in the slab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlirBuffer {
    /// Name: the user's name for inputs, weights, outputs and tensors named with
    /// [`crate::Tensor::name`]; `const(VALUE)` for a constant (`const(0.125)`); `workspace`
    /// (or `workspace{i}`) and `t{i}` otherwise.
    pub id: String,
    /// Element type: f32 for computed tensors, i32/i64 for index inputs and weights, u8 for a
    /// workspace (raw bytes).
    pub dtype: DType,
    /// Shape in elements, row-major (a workspace is `[bytes]` of raw bytes).
    pub shape: Vec<usize>,
    /// True size in bytes (element count times the dtype's size; the workspace's configured
    /// size).
    pub bytes: usize,
    /// What the buffer holds.
    pub role: BufferRole,
    /// Canonical ids of the nodes that use it (write, reads, upload, readback), ascending.
    pub uses: Vec<NodeId>,
    /// In-place mark ([`Llir::mark_in_place`]): the intermediate this elementwise output may
    /// overwrite, the planner's [`lumen_planner::SlabBuffer::in_place_of`]. `None` unless
    /// [`crate::CompileOptions::in_place`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_place_of: Option<BufferId>,
    /// Per axis, the symbol its length is ([`crate::symbolic`]); `shape` holds the bound.
    /// All `None` (and absent from JSON) without symbolic axes.
    #[serde(skip_serializing_if = "crate::symbols::all_fixed")]
    pub axes: crate::symbols::Axes,
}

/// One operand of a kernel: a buffer read through a view.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Operand {
    /// The buffer read.
    pub buffer: BufferId,
    /// How the kernel reads it (in elements of the buffer's dtype).
    pub view: View,
}

impl Operand {
    /// The whole buffer `buffer` of `shape`, read row-major.
    pub fn whole(buffer: BufferId, shape: &[usize]) -> Self {
        Self { buffer, view: View::contiguous(shape) }
    }
}

/// One node of the LLIR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlirNode {
    /// The operation and its semantic parameters.
    #[serde(flatten)]
    pub op: LlirOp,
    /// Nodes that must run before this one (the DAG's in-edges), ascending canonical ids.
    pub inputs: Vec<NodeId>,
    /// Operands read, in operand order (matmul: a, b, then bias if fused), each through its
    /// view. Upload reads nothing; readback reads every output whole.
    pub reads: Vec<Operand>,
    /// Buffers written (the output; for upload, every uploaded buffer).
    pub writes: Vec<BufferId>,
    /// The matmul's workspace buffer, if any.
    pub workspace: Option<BufferId>,
}

impl LlirNode {
    /// The buffers read, in operand order (a buffer read twice appears twice).
    pub fn read_buffers(&self) -> impl Iterator<Item = BufferId> + '_ {
        self.reads.iter().map(|o| o.buffer)
    }

    /// The shape a concat writes: its first operand's view with `axis` as long as all the
    /// operands' together (the output buffer may carry another shape of the same elements,
    /// when an output took it over through a reshape). `None` for another op, no operand, or
    /// an axis out of range.
    pub fn concat_shape(&self) -> Option<Vec<usize>> {
        let LlirOp::Concat { axis, .. } = self.op else { return None };
        let mut shape = self.reads.first()?.view.shape.clone();
        let total = self
            .reads
            .iter()
            .try_fold(0usize, |acc, o| o.view.shape.get(axis).and_then(|&d| acc.checked_add(d)))?;
        *shape.get_mut(axis)? = total;
        Some(shape)
    }

    /// Every buffer the node touches: reads, writes, then the workspace.
    pub fn buffers(&self) -> impl Iterator<Item = BufferId> + '_ {
        self.read_buffers().chain(self.writes.iter().copied()).chain(self.workspace)
    }
}

/// A lowered program: nodes in canonical topological order, buffers in planner request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Llir {
    /// Nodes; a node's id is its index.
    pub nodes: Vec<LlirNode>,
    /// Buffers; a buffer's id is its index, which is also its request index in the plan.
    pub buffers: Vec<LlirBuffer>,
    /// The program's symbols ([`crate::symbolic`]), in declaration order: shapes and sizes
    /// here are at their bounds, [`Llir::bind`] gives the LLIR at other values. Empty (and
    /// absent from JSON) for a program without symbolic dimensions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<crate::symbols::SymbolDecl>,
}

impl Llir {
    /// The planner's DAG: node `i` is LLIR node `i`, an edge `j -> i` for every `j` in
    /// `nodes[i].inputs`.
    pub fn dag(&self) -> lumen_planner::Dag {
        let mut dag = lumen_planner::Dag::with_capacity(self.nodes.len(), self.nodes.len());
        let ids: Vec<_> = self.nodes.iter().map(|_| dag.add_node(())).collect();
        for (i, node) in self.nodes.iter().enumerate() {
            for &j in &node.inputs {
                if let (Some(&a), Some(&b)) = (ids.get(j), ids.get(i)) {
                    dag.add_edge(a, b, ());
                }
            }
        }
        dag
    }

    /// The planner's requests, in buffer order: `{id, bytes, uses}` with uses as DAG nodes.
    pub fn slab_buffers(&self) -> Vec<lumen_planner::SlabBuffer> {
        self.buffers
            .iter()
            .map(|b| {
                let mut request = lumen_planner::SlabBuffer::new(
                    b.id.clone(),
                    b.bytes,
                    b.uses.iter().map(|&u| petgraph::graph::NodeIndex::new(u)),
                );
                request.in_place_of = b.in_place_of;
                request
            })
            .collect()
    }

    /// Marks each elementwise output that may be written into one of its operands' bytes
    /// (in-place reuse, as XLA's buffer assignment `CanShareBuffer` and TVM's static memory
    /// planner allow): a `Map` node's output takes its first operand that is an intermediate
    /// of the same dtype and shape, read whole and in order by every read of the node (so
    /// each element is read before the same element is written), not already given to another
    /// output, and dead after the node (the planner's rule: the pair's only shared use is the
    /// node, every other use of the operand reaches it, it reaches every other use of the
    /// output). Inputs, weights, constants and outputs are never overwritten: the runtime
    /// uploads the first once and reads the last back. Returns the number of marks.
    pub fn mark_in_place(&mut self) -> usize {
        let dag = self.dag();
        let mut requests = self.slab_buffers();
        let used = requests.iter().flat_map(|b| b.uses.iter().copied()).collect::<Vec<_>>();
        let Ok(reach) = lumen_planner::Reachability::among(&dag, used) else { return 0 };
        let mut taken = vec![false; self.buffers.len()];
        for b in &self.buffers {
            if let Some(a) = b.in_place_of.and_then(|a| taken.get_mut(a)) {
                *a = true;
            }
        }
        let mut marks = 0;
        for node in &self.nodes {
            let (LlirOp::Map { .. }, [out]) = (&node.op, node.writes.as_slice()) else { continue };
            let out = *out;
            if self.buffers.get(out).is_none_or(|b| b.in_place_of.is_some()) {
                continue;
            }
            let o = &self.buffers[out];
            let fits = |a: BufferId| {
                let b = &self.buffers[a];
                a != out
                    && !taken[a]
                    && b.role == BufferRole::Intermediate
                    && b.dtype == o.dtype
                    && b.shape == o.shape
                    && b.bytes == o.bytes
                    && node
                        .reads
                        .iter()
                        .filter(|r| r.buffer == a)
                        .all(|r| r.view.is_whole(&o.shape))
                    && lumen_planner::in_place_allowed(&reach, &requests[a], &requests[out])
            };
            if let Some(a) = node.reads.iter().map(|r| r.buffer).find(|&a| fits(a)) {
                self.buffers[out].in_place_of = Some(a);
                requests[out].in_place_of = Some(a);
                taken[a] = true;
                marks += 1;
            }
        }
        marks
    }

    /// DRAM traffic of one execute in bytes: for each compute node, the distinct bytes each
    /// operand's view touches ([`View::footprint`]: a broadcast bias `[N]` counts N elements,
    /// a slice only its part) plus the bytes it writes (upload and readback are host copies
    /// and not counted; the workspace is scratch and not counted). A tensor read by two nodes
    /// counts twice, as two kernels load it twice. Unfused linear-relu 64x256x64: 213,248.
    pub fn dram_bytes(&self) -> usize {
        let mut total = 0usize;
        for node in self.nodes.iter().filter(|n| n.op.is_launch()) {
            for o in &node.reads {
                if let Some(b) = self.buffers.get(o.buffer) {
                    let bytes = o.view.footprint().saturating_mul(b.dtype.size());
                    total = total.saturating_add(bytes.min(b.bytes));
                }
            }
            for b in node.writes.iter().filter_map(|&b| self.buffers.get(b)) {
                total = total.saturating_add(b.bytes);
            }
        }
        total
    }

    /// Extends every weight's (and constant's) uses to the readback node (the last node), so the planner
    /// keeps its bytes to itself until the program ends and a runtime can upload it once
    /// ([`crate::CompileOptions::resident_weights`]). Inputs, intermediates and outputs keep
    /// their uses; nodes are unchanged. Idempotent.
    pub fn make_weights_resident(&mut self) {
        let Some(readback) = self.nodes.iter().rposition(|n| n.op == LlirOp::Readback) else {
            return;
        };
        for b in self
            .buffers
            .iter_mut()
            .filter(|b| matches!(b.role, BufferRole::Weight | BufferRole::Constant(_)))
        {
            if !b.uses.contains(&readback) {
                b.uses.push(readback);
                b.uses.sort_unstable();
            }
        }
    }

    /// The buffer named `id`, if any.
    pub fn buffer(&self, id: &str) -> Option<&LlirBuffer> {
        self.buffers.iter().find(|b| b.id == id)
    }
}
