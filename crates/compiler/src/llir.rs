//! The LLIR: kernel and host ops over explicit buffers, in canonical topological order.
//!
//! This is the contract between the compiler (which builds it), the planner (which places its
//! buffers) and the runtimes (which execute it). All tensors are row-major f32.

use serde::Serialize;

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

/// One LLIR operation. Sizes are element counts; every tensor is row-major f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LlirOp {
    /// Host-to-slab copy of every input and weight (writes them all).
    Upload,
    /// cuBLASLt matmul: reads `a` `[m, k]`, `b` `[k, n]` (and `bias` `[n]` when the epilogue has
    /// one), uses its workspace buffer, writes `out` `[m, n]`.
    LtMatmul {
        /// Rows of the output.
        m: usize,
        /// Inner dimension.
        k: usize,
        /// Columns of the output.
        n: usize,
        /// Fused epilogue.
        epilogue: Epilogue,
    },
    /// `out[i, j] = x[i, j] + bias[j]`: reads x `[m, n]` and bias `[n]`, writes out `[m, n]`.
    AddBias {
        /// Rows.
        m: usize,
        /// Columns (bias length).
        n: usize,
    },
    /// Elementwise `out = a + b` over `len` elements of two same-shape tensors.
    Add {
        /// Element count.
        len: usize,
    },
    /// Elementwise `max(x, 0)` over `len` elements.
    Relu {
        /// Element count.
        len: usize,
    },
    /// Elementwise GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    Gelu {
        /// Element count.
        len: usize,
    },
    /// Slab-to-host copy of every output (reads them all).
    Readback,
}

impl LlirOp {
    /// The op's name in dumps: `upload`, `lt_matmul`, `add_bias`, `add`, `relu`, `gelu`, `readback`.
    pub fn name(&self) -> &'static str {
        match self {
            LlirOp::Upload => "upload",
            LlirOp::LtMatmul { .. } => "lt_matmul",
            LlirOp::AddBias { .. } => "add_bias",
            LlirOp::Add { .. } => "add",
            LlirOp::Relu { .. } => "relu",
            LlirOp::Gelu { .. } => "gelu",
            LlirOp::Readback => "readback",
        }
    }

    /// Whether the op is a kernel launch (everything but upload and readback).
    pub fn is_launch(&self) -> bool {
        !matches!(self, LlirOp::Upload | LlirOp::Readback)
    }

    /// Floating-point operations the op performs (2·m·n·k for a matmul plus its epilogue's
    /// elementwise work; one per element for add, add_bias, relu; gelu counted as 8).
    ///
    /// Saturates at `u64::MAX` rather than wrapping: a `[2^21, 2^21] x [2^21, 2^21]` matmul
    /// is 2^64 FLOP, one past what a `u64` holds, and is reported as `u64::MAX`.
    pub fn flops(&self) -> u64 {
        match *self {
            LlirOp::LtMatmul { m, k, n, epilogue } => {
                let mn = wide(m).saturating_mul(wide(n));
                let per_element = match epilogue {
                    Epilogue::Default => 0,
                    Epilogue::Bias | Epilogue::Relu => 1,
                    Epilogue::ReluBias => 2,
                    Epilogue::Gelu => 8,
                    Epilogue::GeluBias => 9,
                };
                mn.saturating_mul(2)
                    .saturating_mul(wide(k))
                    .saturating_add(mn.saturating_mul(per_element))
            }
            LlirOp::AddBias { m, n } => wide(m).saturating_mul(wide(n)),
            LlirOp::Add { len } | LlirOp::Relu { len } => wide(len),
            LlirOp::Gelu { len } => wide(len).saturating_mul(8),
            LlirOp::Upload | LlirOp::Readback => 0,
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
    /// A matmul's cuBLASLt workspace: scratch, never read back.
    Workspace,
    /// A value produced and consumed inside the program (`t0`, `t1`, ...).
    Intermediate,
    /// A program output, read back after the last launch.
    Output,
}

/// One buffer: a tensor (or workspace) the planner places in the slab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlirBuffer {
    /// Name: the user's name for inputs, weights and outputs; `workspace` (or `workspace{i}`) and
    /// `t{i}` otherwise.
    pub id: String,
    /// Element type: `f32` for tensors, `u8` for a workspace (raw bytes).
    pub dtype: &'static str,
    /// Shape in elements, row-major (a workspace is `[bytes]` of raw bytes).
    pub shape: Vec<usize>,
    /// True size in bytes (4 per f32 element; the workspace's configured size).
    pub bytes: usize,
    /// What the buffer holds.
    pub role: BufferRole,
    /// Canonical ids of the nodes that use it (write, reads, upload, readback), ascending.
    pub uses: Vec<NodeId>,
}

/// One node of the LLIR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlirNode {
    /// The operation and its semantic parameters.
    #[serde(flatten)]
    pub op: LlirOp,
    /// Nodes that must run before this one (the DAG's in-edges), ascending canonical ids.
    pub inputs: Vec<NodeId>,
    /// Buffers read, in operand order (matmul: a, b, then bias if fused).
    pub reads: Vec<BufferId>,
    /// Buffers written (the output; for upload, every uploaded buffer).
    pub writes: Vec<BufferId>,
    /// The matmul's workspace buffer, if any.
    pub workspace: Option<BufferId>,
}

/// A lowered program: nodes in canonical topological order, buffers in planner request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Llir {
    /// Nodes; a node's id is its index.
    pub nodes: Vec<LlirNode>,
    /// Buffers; a buffer's id is its index, which is also its request index in the plan.
    pub buffers: Vec<LlirBuffer>,
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
                lumen_planner::SlabBuffer::new(
                    b.id.clone(),
                    b.bytes,
                    b.uses.iter().map(|&u| petgraph::graph::NodeIndex::new(u)),
                )
            })
            .collect()
    }

    /// DRAM traffic of one execute in bytes: the bytes of every tensor each compute node reads
    /// plus the bytes it writes (upload and readback are host copies and not counted; the
    /// workspace is scratch and not counted). A tensor read by two nodes counts twice, as two
    /// kernels load it twice. Unfused linear-relu 64x256x64: 213,248.
    pub fn dram_bytes(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.op.is_launch())
            .flat_map(|n| n.reads.iter().chain(&n.writes))
            .filter_map(|&b| self.buffers.get(b))
            .fold(0usize, |acc, b| acc.saturating_add(b.bytes))
    }

    /// Extends every weight's uses to the readback node (the last node), so the planner
    /// keeps its bytes to itself until the program ends and a runtime can upload it once
    /// ([`crate::CompileOptions::resident_weights`]). Inputs, intermediates and outputs keep
    /// their uses; nodes are unchanged. Idempotent.
    pub fn make_weights_resident(&mut self) {
        let Some(readback) = self.nodes.iter().rposition(|n| n.op == LlirOp::Readback) else {
            return;
        };
        for b in self.buffers.iter_mut().filter(|b| b.role == BufferRole::Weight) {
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
