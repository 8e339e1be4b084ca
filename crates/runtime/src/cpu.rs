//! The CPU runtime: the whole program runs inside ONE aligned allocation of `slab_bytes`.
//!
//! Every buffer is the f32 range at its planned offset, exactly as Luminal's arena and the
//! CUDA runtime place it on the device, so a planning error (two live buffers sharing bytes)
//! corrupts results instead of hiding behind separate allocations (the default mode trusts the
//! plan: that is how the differential tests catch planner bugs). Two debugging modes make such
//! errors visible:
//!
//! - memory debug (`LUMINAL_CUDA_MEMORY_DEBUG=1` or [`CpuOptions::memory_debug`]): prepare
//!   verifies the plan with the planner's independent checker and refuses one where two live
//!   buffers overlap, naming the pair ([`crate::layout::verify_plan`]); the slab starts as NaN
//!   and every buffer is NaN-filled after its last use, so reading a dead or never-written
//!   buffer turns outputs into NaN; the memory plan is printed at prepare;
//! - no reuse ([`Placement::NoReuse`]): every buffer gets its own range; outputs must be
//!   bit-identical to the planned run.
//!
//! Weights are uploaded once at prepare, unless the plan lets another buffer reuse a weight's
//! bytes after its last reader (or memory debug poisons it): such a weight is uploaded again by
//! every execute's upload node.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use lumen_compiler::hlir::checked_bytes_of;
use lumen_compiler::view::coalesce;
use lumen_compiler::{
    BufferRole, CompiledProgram, DType, ElemOp, IntOp, Llir, LlirBuffer, LlirOp, ReduceOp,
    ScatterReduction, SymbolId, View,
};

use crate::error::TensorKind;
use crate::gemm::Matrix;
use lumen_compiler::conv::{ConvEpilogue, ConvGeometry};

use crate::kernels::{self, Activation, epilogue_parts};
use crate::layout::{Placement, SLAB_ALIGNMENT, SlabLayout, memory_plan_lines};
use crate::packed::PackedWeight;
use crate::phases::Peak;
use crate::runtime::{ExecProfile, PreparedProgram, Runtime, check_tensors};
use crate::team::WorkerWait;
use crate::threads::Threads;
use crate::winograd::WinogradWeights;
use crate::{HostTensor, RuntimeEnv, RuntimeError, Tensors};

/// Options of the CPU runtime.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuOptions {
    /// Planned offsets (default) or every buffer its own range.
    pub placement: Placement,
    /// Verify the plan at prepare (with [`Placement::Planned`]: an overlapping pair of live
    /// buffers is [`RuntimeError::InvalidProgram`] naming them, see
    /// [`crate::layout::verify_plan`]), start the slab as NaN, NaN-fill each buffer after its
    /// last use, print the memory plan on stderr at prepare.
    pub memory_debug: bool,
    /// Print one `CPU_EXEC_PROFILE` line on stderr per execute.
    pub profile_recapture: bool,
    /// The peak to report against; `None` = derived from this machine's instruction set,
    /// clock and the threads used ([`crate::cpu_peak::detect`]).
    pub peak: Option<Peak>,
    /// Worker threads for the GEMM, elementwise ops and reductions; `None` (default) = every
    /// core `std::thread::available_parallelism` reports, `Some(1)` = the calling thread only.
    pub threads: Option<usize>,
    /// Copy every input into the slab on each execute, as Luminal's runtime does. Off by
    /// default: an f32 input nothing writes into is read from the caller's tensor in place.
    pub copied_inputs: bool,
    /// Keep weights unpacked: every product with a weight calls the `gemm` crate on the
    /// slab's copy (which packs it on each call) instead of the copy packed once at prepare
    /// ([`crate::packed`]). Off by default; for side-by-side measurements and tests.
    pub unpacked_weights: bool,
    /// Run every dense 3x3 convolution on the dense (im2col) path instead of Winograd
    /// F(2x2, 3x3) ([`crate::winograd`], whose weights are transformed at prepare). Off by
    /// default; for side-by-side measurements and tests. Set from `LUMEN_CPU_NO_WINOGRAD` by
    /// [`CpuOptions::from_env`].
    pub no_winograd: bool,
    /// Worker threads sleep as soon as they find no work, instead of spinning for up to
    /// [`crate::team::SPIN`] between kernels (see [`crate::team`]). Off by default; for
    /// several processes sharing the cores. Set from `LUMEN_CPU_PASSIVE_WAIT` by
    /// [`CpuOptions::from_env`].
    pub passive_wait: bool,
}

impl CpuOptions {
    /// The threads an execute runs on: [`CpuOptions::threads`], else every core
    /// `std::thread::available_parallelism` reports (1 when it cannot tell); at least 1.
    pub fn thread_count(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    /// How the team's workers wait between kernels ([`WorkerWait::of`] the thread count and
    /// [`CpuOptions::passive_wait`]); `None` for one thread.
    pub fn worker_wait(&self) -> Option<WorkerWait> {
        WorkerWait::of(self.thread_count(), !self.passive_wait)
    }

    /// Planned placement, switches from `LUMINAL_CUDA_MEMORY_DEBUG`,
    /// `LUMINAL_CUDA_PROFILE_RECAPTURE` and `LUMEN_CPU_PASSIVE_WAIT` (see [`RuntimeEnv`]).
    pub fn from_env() -> Self {
        let env = RuntimeEnv::from_env();
        Self {
            memory_debug: env.memory_debug,
            profile_recapture: env.profile_recapture,
            passive_wait: env.passive_wait,
            no_winograd: env.no_winograd,
            ..Self::default()
        }
    }
}

/// The CPU runtime (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct CpuRuntime {
    options: CpuOptions,
}

impl CpuRuntime {
    /// A CPU runtime with `options`.
    pub fn new(options: CpuOptions) -> Self {
        Self { options }
    }

    /// A CPU runtime configured from the environment ([`CpuOptions::from_env`]).
    pub fn from_env() -> Self {
        Self::new(CpuOptions::from_env())
    }

    /// Its options.
    pub fn options(&self) -> &CpuOptions {
        &self.options
    }

    /// [`Runtime::prepare`] with the concrete type, for callers that want it.
    ///
    /// # Errors
    /// As [`Runtime::prepare`].
    pub fn prepare_cpu(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<CpuProgram, RuntimeError> {
        CpuProgram::new(program, weights, self.options.clone())
    }
}

impl Runtime for CpuRuntime {
    fn name(&self) -> &'static str {
        "cpu"
    }

    /// `cpu placement=Planned memory_debug=false profile_recapture=false threads=2`: the
    /// options that change an execute's time, the thread count resolved (the peak only labels
    /// the report); ` passive_wait=true` appended when the workers do not spin.
    fn tuning_identity(&self) -> String {
        let o = &self.options;
        format!(
            "cpu placement={:?} memory_debug={} profile_recapture={} threads={}{}",
            o.placement,
            o.memory_debug,
            o.profile_recapture,
            o.thread_count(),
            if o.passive_wait { " passive_wait=true" } else { "" }
        )
    }

    /// [`CpuOptions::peak`], else derived from the instruction set, the clock and
    /// [`CpuOptions::thread_count`] ([`crate::cpu_peak::detect`]).
    fn peak(&self) -> Peak {
        self.options
            .peak
            .clone()
            .unwrap_or_else(|| crate::cpu_peak::detect(self.options.thread_count()))
    }

    fn threads(&self) -> usize {
        self.options.thread_count()
    }

    fn worker_wait(&self) -> Option<WorkerWait> {
        self.options.worker_wait()
    }

    fn prepare(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<Box<dyn PreparedProgram>, RuntimeError> {
        Ok(Box::new(self.prepare_cpu(program, weights)?))
    }
}

/// One 256-byte-aligned allocation, viewed as f32 elements.
#[derive(Debug)]
struct Slab {
    storage: Vec<f32>,
    // Element index in `storage` of the aligned base, and the slab's length in elements.
    base: usize,
    len: usize,
}

impl Slab {
    fn new(bytes: usize, fill: f32) -> Result<Self, RuntimeError> {
        let alloc_err = RuntimeError::Alloc { bytes };
        let len = bytes.div_ceil(4);
        // Over-allocate by one alignment unit and start at the first aligned element.
        let total = len.checked_add(SLAB_ALIGNMENT / 4).ok_or(alloc_err.clone())?;
        let mut storage = Vec::new();
        storage.try_reserve_exact(total).map_err(|_| alloc_err.clone())?;
        storage.resize(total, fill);
        let base = storage.as_ptr().align_offset(SLAB_ALIGNMENT);
        if base > SLAB_ALIGNMENT / 4 {
            return Err(alloc_err);
        }
        Ok(Self { storage, base, len })
    }

    fn elems(&self) -> &[f32] {
        self.storage.get(self.base..self.base + self.len).unwrap_or(&[])
    }

    fn elems_mut(&mut self) -> &mut [f32] {
        self.storage.get_mut(self.base..self.base + self.len).unwrap_or(&mut [])
    }
}

/// One operand, resolved at prepare: the buffer's word range in the slab and the view read.
type Arg = (Range<usize>, View);

/// One node, resolved to word ranges of the slab (4-byte words: f32 values, i32 ids, or an
/// i64 id's two halves) at prepare.
#[derive(Debug, Clone)]
enum Step {
    Upload {
        // (input name, range) copied from the caller's tensors on every execute.
        inputs: Vec<(String, Range<usize>)>,
        // (index into `weights`, range) re-uploaded on every execute.
        weights: Vec<(usize, Range<usize>)>,
    },
    Matmul {
        a: Arg,
        b: Arg,
        // Index into `CpuProgram::packed`: `b`'s matrix packed at prepare.
        packed: Option<usize>,
        bias: Option<Arg>,
        out: Range<usize>,
        dims: (usize, usize, usize, usize),
        act: Activation,
    },
    Map {
        op: ElemOp,
        // Views coalesced at prepare ([`lumen_compiler::view::coalesce`]): the same elements
        // in the same order, in as few axes (as long rows) as the operands allow.
        ins: Vec<Arg>,
        out: Range<usize>,
    },
    Reduce {
        op: ReduceOp,
        input: Arg,
        axis: usize,
        out: Range<usize>,
    },
    Gather {
        table: Arg,
        ids: Arg,
        wide: bool,
        ids_name: String,
        out: Range<usize>,
    },
    Concat {
        ins: Vec<Arg>,
        axis: usize,
        shape: Vec<usize>,
        out: Range<usize>,
    },
    Conv {
        geometry: ConvGeometry,
        epilogue: ConvEpilogue,
        // x, w, then the bias and the residual the epilogue names.
        ins: Vec<Arg>,
        // The im2col workspace (empty when the node has none).
        work: Range<usize>,
        out: Range<usize>,
        // The weights transformed at prepare when the convolution runs as Winograd.
        winograd: Option<Arc<WinogradWeights>>,
    },
    MaxPool {
        geometry: ConvGeometry,
        x: Arg,
        out: Range<usize>,
    },
    Take {
        x: Arg,
        indices: Arg,
        wide: bool,
        axis: usize,
        fill: f32,
        indices_name: String,
        out: Range<usize>,
    },
    Cast {
        x: Arg,
        from: DType,
        to: DType,
        out: Range<usize>,
    },
    IntMap {
        op: IntOp,
        dtype: DType,
        ins: Vec<Arg>,
        out: Range<usize>,
    },
    Arg {
        x: Arg,
        max: bool,
        axis: usize,
        last: bool,
        out: Range<usize>,
    },
    TopK {
        x: Arg,
        axis: usize,
        k: usize,
        largest: bool,
        out: Range<usize>,
    },
    GatherElements {
        data: Arg,
        indices: Arg,
        wide: bool,
        axis: usize,
        indices_name: String,
        out: Range<usize>,
    },
    ScatterElements {
        data: Arg,
        indices: Arg,
        updates: Arg,
        dtype: DType,
        wide: bool,
        axis: usize,
        reduction: ScatterReduction,
        indices_name: String,
        out: Range<usize>,
    },
    Readback {
        outputs: Vec<(String, Vec<usize>, DType, Range<usize>)>,
    },
}

/// A program prepared on the CPU: its slab, its resolved steps, and host copies of the weights
/// it must upload again on every execute.
#[derive(Debug)]
pub struct CpuProgram {
    label: String,
    options: CpuOptions,
    slab: Slab,
    slab_bytes: usize,
    steps: Vec<Step>,
    // Element ranges to NaN-fill after step i (memory debug only).
    poison_after: Vec<Vec<Range<usize>>>,
    // Host copies of weights that are not resident in the slab.
    weights: Vec<Vec<f32>>,
    // Weights packed for the products that read them (see `crate::packed`).
    packed: Vec<PackedWeight>,
    // Bytes of the convolution weights transformed for Winograd (see `crate::winograd`).
    winograd_bytes: usize,
    // Inputs read in place: (range past the slab's end standing for it, input name).
    in_place_inputs: Vec<(Range<usize>, String)>,
    // Declared inputs, checked on every execute.
    input_buffers: Vec<LlirBuffer>,
    flops: u64,
    launches: usize,
    prepare_seconds: f64,
    memory_plan: Vec<String>,
    profile: Option<ExecProfile>,
    // The worker team of `options.threads`, built at prepare.
    threads: Threads,
    // A program with symbolic dimensions: how each execute's values are bound (`None`
    // without symbols).
    symbolic: Option<Binding>,
    // Each state's range in the slab and bound shape, by name.
    states: BTreeMap<String, (Range<usize>, Vec<usize>)>,
    // Time every step ([`PreparedProgram::time_nodes`]).
    time_nodes: bool,
}

/// How a program with symbolic dimensions runs at each execute's values
/// ([`lumen_compiler::symbolic`]): the inputs' shapes give the values; when they differ from
/// the active ones, only the steps of the nodes whose buffers carry a changed symbol are built
/// again ([`Llir::bind_node`]): a decode step that moves `total` but not `seq` rebuilds its
/// attention nodes, not its weight products. Buffers keep their planned start; a live buffer
/// is the prefix of its range.
#[derive(Debug)]
struct Binding {
    llir: Llir,
    // First slab word of each buffer (or of its in-place stand-in past the slab's end).
    starts: Vec<usize>,
    // Inputs read in place: their ranges past the slab's end (inputs without symbolic axes).
    external: BTreeMap<usize, Range<usize>>,
    // The weights the bound upload step re-uploads on every execute.
    reuploads: Vec<(usize, Range<usize>)>,
    // Packed weights looked up by the live products (packed at prepare).
    packer: Packer,
    // The values the program's active steps were built for, and each buffer's live shape.
    active: Vec<usize>,
    live: Vec<Vec<usize>>,
    // The symbols each node depends on, and its FLOP at the active values.
    node_symbols: Vec<Vec<SymbolId>>,
    node_flops: Vec<u64>,
}

impl Binding {
    fn new(
        llir: &Llir,
        starts: Vec<usize>,
        external: BTreeMap<usize, Range<usize>>,
        steps: &[Step],
        packer: &Packer,
    ) -> Self {
        Self {
            llir: llir.clone(),
            starts,
            external,
            reuploads: match steps.first() {
                Some(Step::Upload { weights, .. }) => weights.clone(),
                _ => Vec::new(),
            },
            packer: Packer {
                off: packer.off,
                seen: packer.seen.clone(),
                weights: Vec::new(),
                no_winograd: packer.no_winograd,
                convs: packer.convs.clone(),
                winograd_bytes: 0,
            },
            active: llir.symbols.iter().map(|d| d.bound).collect(),
            live: llir.buffers.iter().map(|b| b.shape.clone()).collect(),
            node_symbols: (0..llir.nodes.len()).map(|i| llir.node_symbols(i)).collect(),
            node_flops: llir.nodes.iter().map(|n| n.op.flops()).collect(),
        }
    }

    /// Rebinds `steps` (and the live input buffers, for the checks) from the active values to
    /// `values`; returns the FLOP of one execute at them. All or nothing: on an error the steps
    /// and the binding are as they were.
    fn rebind(
        &mut self,
        label: &str,
        values: Vec<usize>,
        steps: &mut [Step],
        inputs: &mut [LlirBuffer],
    ) -> Result<u64, RuntimeError> {
        let changed: Vec<bool> = values.iter().zip(&self.active).map(|(a, b)| a != b).collect();
        let touched = |syms: &[SymbolId]| syms.iter().any(|s| changed[s.0]);
        // New live shapes, keeping the old ones to put back on an error.
        let mut old_shapes = Vec::new();
        for b in 0..self.live.len() {
            if self.llir.buffers[b].axes.iter().flatten().any(|s| changed[s.0]) {
                let shape = self.llir.live_shape(b, &values);
                old_shapes.push((b, std::mem::replace(&mut self.live[b], shape)));
            }
        }
        let built = self.build_touched(label, &touched);
        let built = match built {
            Ok(built) => built,
            Err(e) => {
                for (b, shape) in old_shapes {
                    self.live[b] = shape;
                }
                return Err(e);
            }
        };
        for (i, step, flops) in built {
            steps[i] = step;
            self.node_flops[i] = flops;
        }
        for buf in inputs.iter_mut() {
            if let Some(b) = self.llir.buffers.iter().position(|x| x.id == buf.id) {
                buf.shape = self.live[b].clone();
            }
        }
        self.active = values;
        Ok(self.node_flops.iter().fold(0u64, |acc, &f| acc.saturating_add(f)))
    }

    /// The steps of the nodes `touched` picks by their symbols, at the live shapes.
    fn build_touched(
        &mut self,
        label: &str,
        touched: &dyn Fn(&[SymbolId]) -> bool,
    ) -> Result<Vec<(usize, Step, u64)>, RuntimeError> {
        let (llir, live, external, starts) = (&self.llir, &self.live, &self.external, &self.starts);
        let range = |b: usize| match external.get(&b) {
            Some(r) => r.clone(),
            None => {
                let dtype = llir.buffers[b].dtype;
                let words = checked_bytes_of(&live[b], dtype).unwrap_or(usize::MAX).div_ceil(4);
                starts[b]..starts[b] + words
            }
        };
        let mut built = Vec::new();
        for (i, syms) in self.node_symbols.iter().enumerate() {
            if !touched(syms) {
                continue;
            }
            let node = llir.bind_node(i, live)?;
            let flops = node.op.flops();
            let step = match node.op {
                LlirOp::Upload => Step::Upload {
                    inputs: node
                        .writes
                        .iter()
                        .filter(|&&w| {
                            llir.buffers[w].role == BufferRole::Input && !external.contains_key(&w)
                        })
                        .map(|&w| (llir.buffers[w].id.clone(), range(w)))
                        .collect(),
                    weights: self.reuploads.clone(),
                },
                _ => kernel_step(label, llir, &node, &range, &mut self.packer, &Tensors::new())?,
            };
            built.push((i, step, flops));
        }
        Ok(built)
    }
}

impl CpuProgram {
    fn new(
        program: &CompiledProgram,
        weights: &Tensors,
        options: CpuOptions,
    ) -> Result<Self, RuntimeError> {
        let start = Instant::now();
        let threads = Threads::with_wait(options.threads, !options.passive_wait)?;
        let layout = SlabLayout::for_runtime(program, options.placement, options.memory_debug)?;
        let llir = &program.llir;
        check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
        let fill = if options.memory_debug { f32::NAN } else { 0.0 };
        let mut slab = Slab::new(layout.slab_bytes, fill)?;
        // f32 inputs nothing writes into are read from the caller's tensors in place, not
        // copied into the slab: each gets a range past the slab's end, which `split_into`
        // resolves to the tensor (see `External`).
        let mut in_place_inputs = Vec::new();
        let mut past_end = slab.elems_mut().len();
        let mut external = BTreeMap::new();
        for (b, buf) in llir.buffers.iter().enumerate() {
            let written_over = llir.buffers.iter().any(|o| o.in_place_of == Some(b));
            if buf.role == BufferRole::Input
                && buf.dtype == DType::F32
                && !written_over
                && !options.memory_debug
                && !options.copied_inputs
                && lumen_compiler::symbolic::all_fixed(&buf.axes)
            {
                let len = layout.spans[b].elems().len();
                external.insert(b, past_end..past_end + len);
                in_place_inputs.push((past_end..past_end + len, buf.id.clone()));
                past_end += len;
            }
        }
        let range = |b: usize| match external.get(&b) {
            Some(r) => Range::clone(r),
            None => layout.spans[b].elems(),
        };
        let mut host_weights = Vec::new();
        let mut packed = Packer::new(options.unpacked_weights, options.no_winograd);
        let mut steps = Vec::with_capacity(llir.nodes.len());
        for node in &llir.nodes {
            let step = match node.op {
                LlirOp::Upload => {
                    let mut inputs = Vec::new();
                    let mut again = Vec::new();
                    for &w in &node.writes {
                        let buf = &llir.buffers[w];
                        if buf.role == BufferRole::Input {
                            if !external.contains_key(&w) {
                                inputs.push((buf.id.clone(), range(w)));
                            }
                            continue;
                        }
                        if let BufferRole::Constant(value) = buf.role {
                            if options.memory_debug || layout.is_shared(w) {
                                again.push((host_weights.len(), range(w)));
                                host_weights.push(vec![value.value()]);
                            } else {
                                copy_in(slab.elems_mut(), range(w), &[value.value()], &threads)?;
                            }
                            continue;
                        }
                        let Some(t) = weights.get(&buf.id) else { continue };
                        if options.memory_debug || layout.is_shared(w) {
                            again.push((host_weights.len(), range(w)));
                            host_weights.push(t.words().into_owned());
                        } else {
                            copy_in(slab.elems_mut(), range(w), &t.words(), &threads)?;
                        }
                    }
                    Step::Upload { inputs, weights: again }
                }
                _ => kernel_step(&program.label, llir, node, &range, &mut packed, weights)?,
            };
            steps.push(step);
        }
        let mut poison_after = vec![Vec::new(); llir.nodes.len()];
        if options.memory_debug {
            // A state keeps its rows for the next execute.
            for (b, &last) in layout.last_use.iter().enumerate() {
                if llir.buffers[b].role == BufferRole::State {
                    continue;
                }
                poison_after[last].push(range(b));
            }
        }
        let memory_plan = memory_plan_lines("CPU", program, &layout);
        if options.memory_debug {
            for line in &memory_plan {
                eprintln!("{line}");
            }
        }
        let input_buffers =
            llir.buffers.iter().filter(|b| b.role == BufferRole::Input).cloned().collect();
        let states = llir
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.role == BufferRole::State)
            .map(|(i, b)| (b.id.clone(), (range(i), b.shape.clone())))
            .collect();
        let symbolic = (!llir.symbols.is_empty()).then(|| {
            let starts = (0..llir.buffers.len()).map(|b| range(b).start).collect();
            Binding::new(llir, starts, external.clone(), &steps, &packed)
        });
        Ok(Self {
            label: program.label.clone(),
            slab_bytes: layout.slab_bytes,
            options,
            slab,
            steps,
            poison_after,
            weights: host_weights,
            packed: packed.weights,
            winograd_bytes: packed.winograd_bytes,
            in_place_inputs,
            input_buffers,
            flops: llir.nodes.iter().fold(0u64, |acc, n| acc.saturating_add(n.op.flops())),
            launches: llir.nodes.iter().filter(|n| n.op.is_launch()).count(),
            prepare_seconds: start.elapsed().as_secs_f64(),
            memory_plan,
            profile: None,
            threads,
            symbolic,
            states,
            time_nodes: false,
        })
    }

    /// The memory plan as printed in memory-debug mode: a `CPU_MEMORY_PLAN` summary line
    /// (buffers, slab, naive and lower-bound bytes) and one `CPU_MEMORY_BUFFER` line per buffer.
    pub fn memory_plan(&self) -> &[String] {
        &self.memory_plan
    }

    /// Options it was prepared with.
    pub fn options(&self) -> &CpuOptions {
        &self.options
    }

    /// How many weights are uploaded again on every execute because the plan reuses their
    /// bytes (or memory debug poisons them).
    pub fn reuploaded_weights(&self) -> usize {
        self.weights.len()
    }

    fn run_step(
        &mut self,
        i: usize,
        inputs: &Tensors,
        ext: External<'_>,
        prof: &mut ExecProfile,
        out: &mut Tensors,
    ) -> Result<(), RuntimeError> {
        let Some(step) = self.steps.get(i) else { return Ok(()) };
        // Kernel steps are timed by `execute`, a run of them at a time (two clock reads per
        // step cost about as much as a small kernel); uploads and readbacks here.
        let t = matches!(step, Step::Upload { .. } | Step::Readback { .. }).then(Instant::now);
        let slab = self.slab.elems_mut();
        let threads = &self.threads;
        match step {
            Step::Upload { inputs: ins, weights } => {
                for (name, r) in ins {
                    // check_tensors already ran: every declared input is present.
                    if let Some(t) = inputs.get(name) {
                        copy_in(slab, r.clone(), &t.words(), threads)?;
                        prof.upload_bytes += t.bytes();
                    }
                }
                for (w, r) in weights {
                    if let Some(data) = self.weights.get(*w) {
                        copy_in(slab, r.clone(), data, threads)?;
                        prof.upload_bytes += data.len() * 4;
                    }
                }
                prof.upload_ms += t.map_or(0.0, ms);
            }
            Step::Readback { outputs } => {
                for (name, shape, dtype, r) in outputs {
                    let src = slab.get(r.clone()).ok_or_else(|| oob(&self.label))?;
                    prof.readback_bytes += src.len() * 4;
                    if *dtype != DType::F32 {
                        out.insert(
                            name.clone(),
                            HostTensor::from_words(shape.clone(), *dtype, src)?,
                        );
                        continue;
                    }
                    // A large output's host copy can fail where the slab did not: an error,
                    // not an abort.
                    let mut data = Vec::new();
                    data.try_reserve_exact(src.len())
                        .map_err(|_| RuntimeError::Alloc { bytes: src.len().saturating_mul(4) })?;
                    data.extend_from_slice(src);
                    out.insert(name.clone(), HostTensor::new(shape.clone(), data)?);
                }
                prof.readback_ms += t.map_or(0.0, ms);
            }
            Step::Matmul { a, b, packed, bias, out: o, dims, act } => {
                let reads: Vec<&Range<usize>> =
                    [Some(&a.0), Some(&b.0), bias.as_ref().map(|x| &x.0)]
                        .into_iter()
                        .flatten()
                        .collect();
                let (dst, ins) = split(slab, ext, o, &reads, &self.label)?;
                let bias = bias.as_ref().and_then(|x| ins.get(2).map(|buf| (*buf, &x.1)));
                let (a, b) = ((ins[0], &a.1), (ins[1], &b.1));
                let packed = packed.and_then(|p| self.packed.get(p));
                kernels::lt_matmul_prepacked(a, (b, packed), bias, dst, *dims, *act, threads)?;
            }
            // In place: an operand occupying exactly the output's bytes (the planner put a
            // marked output at its dying operand's offset) is read from the output itself.
            // At most three operands (the op table's widest arity), borrowed into arrays: no
            // allocation per step.
            Step::Map { op, ins, out: o } => {
                if ins.len() > MAX_OPERANDS {
                    return Err(RuntimeError::invalid(&self.label, "a map of over 3 operands"));
                }
                let in_place = !o.is_empty() && ins.iter().any(|x| x.0 == *o);
                if in_place
                    && ins.iter().any(|x| x.0 == *o && !(x.1.is_contiguous() && x.1.offset == 0))
                {
                    return Err(RuntimeError::invalid(
                        &self.label,
                        "an operand sharing its output's bytes must be read whole",
                    ));
                }
                // The output itself is not borrowed as an operand: an empty range stands in.
                let reads = ins.iter().map(|x| if x.0 == *o { &NOTHING } else { &x.0 });
                let mut bufs: [&[f32]; MAX_OPERANDS] = [&[]; MAX_OPERANDS];
                let dst = split_into(slab, ext, o, reads, &mut bufs, &self.label)?;
                let n = ins.len();
                if in_place {
                    let args: [Option<kernels::Input<'_>>; MAX_OPERANDS] =
                        std::array::from_fn(|k| {
                            ins.get(k).filter(|x| x.0 != *o).map(|x| (bufs[k], &x.1))
                        });
                    kernels::map_in_place(*op, &args[..n], dst, threads)?;
                } else {
                    let args: [kernels::Input<'_>; MAX_OPERANDS] =
                        std::array::from_fn(|k| (bufs[k], ins.get(k).map_or(&NO_VIEW, |x| &x.1)));
                    kernels::map(*op, &args[..n], dst, threads)?;
                }
            }
            Step::Reduce { op, input, axis, out: o } => {
                let mut bufs: [&[f32]; 1] = [&[]];
                let dst = split_into(slab, ext, o, [&input.0], &mut bufs, &self.label)?;
                kernels::reduce(*op, bufs[0], &input.1, *axis, dst, threads)?;
            }
            Step::Gather { table, ids, wide, ids_name, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&table.0, &ids.0], &self.label)?;
                kernels::gather((bufs[0], &table.1), (bufs[1], &ids.1), *wide, ids_name, dst)?;
            }
            Step::Conv { geometry, epilogue, ins, work, out: o, winograd } => {
                let reads: Vec<&Range<usize>> = ins.iter().map(|x| &x.0).collect();
                let (dst, ws, bufs) = split_with_work(slab, ext, o, work, &reads, &self.label)?;
                let arg = |i: usize| bufs.get(i).map(|b| (*b, &ins[i].1));
                let (Some(x), Some(w)) = (arg(0), arg(1)) else {
                    return Err(RuntimeError::invalid(&self.label, "conv operands"));
                };
                let bias = if epilogue.bias { arg(2) } else { None };
                let residual =
                    if epilogue.residual { arg(2 + usize::from(epilogue.bias)) } else { None };
                match winograd {
                    Some(u) => crate::winograd::conv(
                        geometry, *epilogue, x, u, bias, residual, dst, threads,
                    )?,
                    None => crate::conv::conv(
                        geometry, *epilogue, x, w, bias, residual, dst, ws, threads,
                    )?,
                }
            }
            Step::MaxPool { geometry, x, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&x.0], &self.label)?;
                crate::conv::max_pool(geometry, (bufs[0], &x.1), dst, threads)?;
            }
            Step::Cast { x, from, to, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&x.0], &self.label)?;
                kernels::cast((bufs[0], &x.1), *from, *to, dst)?;
            }
            Step::IntMap { op, dtype, ins, out: o } => {
                let reads: Vec<&Range<usize>> = ins.iter().map(|x| &x.0).collect();
                let (dst, bufs) = split(slab, ext, o, &reads, &self.label)?;
                let args: Vec<kernels::Input<'_>> =
                    bufs.iter().zip(ins).map(|(b, x)| (*b, &x.1)).collect();
                kernels::int_map(*op, *dtype, &args, dst)?;
            }
            Step::TopK { x, axis, k, largest, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&x.0], &self.label)?;
                kernels::top_k((bufs[0], &x.1), *axis, *k, *largest, dst)?;
            }
            Step::GatherElements { data, indices, wide, axis, indices_name, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&data.0, &indices.0], &self.label)?;
                kernels::gather_elements(
                    (bufs[0], &data.1),
                    (bufs[1], &indices.1),
                    *wide,
                    *axis,
                    indices_name,
                    dst,
                )?;
            }
            Step::ScatterElements {
                data,
                indices,
                updates,
                dtype,
                wide,
                axis,
                reduction,
                indices_name,
                out: o,
            } => {
                let reads = [&data.0, &indices.0, &updates.0];
                let (dst, bufs) = split(slab, ext, o, &reads, &self.label)?;
                kernels::scatter_elements(
                    (bufs[0], &data.1),
                    (bufs[1], &indices.1),
                    (bufs[2], &updates.1),
                    *dtype,
                    *wide,
                    *axis,
                    *reduction,
                    indices_name,
                    dst,
                    threads,
                )?;
            }
            Step::Arg { x, max, axis, last, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&x.0], &self.label)?;
                kernels::arg((bufs[0], &x.1), *max, *axis, *last, dst)?;
            }
            Step::Take { x, indices, wide, axis, fill, indices_name, out: o } => {
                let (dst, bufs) = split(slab, ext, o, &[&x.0, &indices.0], &self.label)?;
                kernels::take(
                    (bufs[0], &x.1),
                    (bufs[1], &indices.1),
                    *wide,
                    *axis,
                    *fill,
                    indices_name,
                    dst,
                )?;
            }
            Step::Concat { ins, axis, shape, out: o } => {
                let reads: Vec<&Range<usize>> = ins.iter().map(|x| &x.0).collect();
                let (dst, bufs) = split(slab, ext, o, &reads, &self.label)?;
                let args: Vec<kernels::Input<'_>> =
                    bufs.iter().zip(ins).map(|(buf, x)| (*buf, &x.1)).collect();
                kernels::concat(&args, *axis, shape, dst)?;
            }
        }
        if let Some(dead) = self.poison_after.get(i).filter(|d| !d.is_empty()) {
            let t = Instant::now();
            for r in dead {
                if let Some(s) = slab.get_mut(r.clone()) {
                    s.fill(f32::NAN);
                }
            }
            prof.poison_ms += ms(t);
        }
        Ok(())
    }
}

/// The step of kernel (or readback) `node` of `llir`, its buffers resolved by `range` (word
/// ranges of the slab, or past its end for an input read in place); products reading a weight
/// get its packed copy from `packer` (packed at prepare; looked up again for a live LLIR).
fn kernel_step(
    label: &str,
    llir: &lumen_compiler::Llir,
    node: &lumen_compiler::LlirNode,
    range: &dyn Fn(usize) -> Range<usize>,
    packer: &mut Packer,
    weights: &Tensors,
) -> Result<Step, RuntimeError> {
    let arg = |o: &lumen_compiler::Operand| -> Arg { (range(o.buffer), o.view.clone()) };
    let out = || -> Result<Range<usize>, RuntimeError> {
        node.writes
            .first()
            .map(|&w| range(w))
            .ok_or_else(|| RuntimeError::invalid(label, "a kernel writes nothing"))
    };
    Ok(match node.op {
        // A copy into the state's last rows: from element `state elements - len` of its range.
        LlirOp::AppendRows { len } => {
            let [x] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "append_rows operands"));
            };
            // The state's live range: f32, one word per element.
            let state = out()?;
            let start = state.start + state.len().saturating_sub(len);
            let view = coalesce(std::slice::from_ref(&x.view)).swap_remove(0);
            Step::Map {
                op: ElemOp::Unary(lumen_compiler::UnaryOp::Contiguous),
                ins: vec![(range(x.buffer), view)],
                out: start..start + len,
            }
        }
        LlirOp::LtMatmul { batch, m, k, n, epilogue } => {
            let (_, act) = epilogue_parts(epilogue);
            let [a, b, rest @ ..] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "lt_matmul operands"));
            };
            Step::Matmul {
                a: arg(a),
                b: arg(b),
                packed: packer.weight(b.buffer, &llir.buffers[b.buffer], &b.view, weights)?,
                bias: rest.first().map(arg),
                out: out()?,
                dims: (batch, m, k, n),
                act,
            }
        }
        LlirOp::Map { op, .. } => {
            let views: Vec<View> = node.reads.iter().map(|o| o.view.clone()).collect();
            let ins = node
                .reads
                .iter()
                .zip(coalesce(&views))
                .map(|(o, v)| (range(o.buffer), v))
                .collect();
            Step::Map { op, ins, out: out()? }
        }
        LlirOp::Reduce { op, axis, .. } => {
            let [input] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "reduce operands"));
            };
            Step::Reduce { op, input: arg(input), axis, out: out()? }
        }
        LlirOp::Gather { .. } => {
            let [table, ids] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "gather operands"));
            };
            let ids_buf = &llir.buffers[ids.buffer];
            Step::Gather {
                table: arg(table),
                ids: arg(ids),
                wide: ids_buf.dtype == DType::I64,
                ids_name: ids_buf.id.clone(),
                out: out()?,
            }
        }
        LlirOp::Concat { axis, .. } => {
            let shape = node.concat_shape().unwrap_or_default();
            Step::Concat { ins: node.reads.iter().map(arg).collect(), axis, shape, out: out()? }
        }
        LlirOp::Conv { geometry, epilogue } => Step::Conv {
            geometry,
            epilogue,
            ins: node.reads.iter().map(arg).collect(),
            work: node.workspace.map_or(NOTHING, range),
            out: out()?,
            winograd: match node.reads.get(1) {
                Some(w) => {
                    packer.conv(w.buffer, &llir.buffers[w.buffer], &w.view, &geometry, weights)?
                }
                None => None,
            },
        },
        LlirOp::MaxPool { geometry } => {
            let [x] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "max_pool operands"));
            };
            Step::MaxPool { geometry, x: arg(x), out: out()? }
        }
        LlirOp::Take { axis, fill, .. } => {
            let [x, indices] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "take operands"));
            };
            let indices_buf = &llir.buffers[indices.buffer];
            Step::Take {
                x: arg(x),
                indices: arg(indices),
                wide: indices_buf.dtype == DType::I64,
                axis,
                fill: fill.value(),
                indices_name: indices_buf.id.clone(),
                out: out()?,
            }
        }
        LlirOp::IntMap { op, .. } => {
            let Some(first) = node.reads.first() else {
                return Err(RuntimeError::invalid(label, "int_map operands"));
            };
            let dtype = llir.buffers[first.buffer].dtype;
            Step::IntMap { op, dtype, ins: node.reads.iter().map(arg).collect(), out: out()? }
        }
        LlirOp::Cast { to, .. } => {
            let [x] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "cast operands"));
            };
            Step::Cast { x: arg(x), from: llir.buffers[x.buffer].dtype, to, out: out()? }
        }
        LlirOp::TopK { axis, k, largest, .. } => {
            let [x] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "topk operands"));
            };
            Step::TopK { x: arg(x), axis, k, largest, out: out()? }
        }
        LlirOp::GatherElements { axis, .. } => {
            let [data, indices] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "gather_elements operands"));
            };
            let indices_buf = &llir.buffers[indices.buffer];
            Step::GatherElements {
                data: arg(data),
                indices: arg(indices),
                wide: indices_buf.dtype == DType::I64,
                axis,
                indices_name: indices_buf.id.clone(),
                out: out()?,
            }
        }
        LlirOp::ScatterElements { axis, reduction, .. } => {
            let [data, indices, updates] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "scatter_elements operands"));
            };
            let indices_buf = &llir.buffers[indices.buffer];
            Step::ScatterElements {
                data: arg(data),
                indices: arg(indices),
                updates: arg(updates),
                dtype: llir.buffers[data.buffer].dtype,
                wide: indices_buf.dtype == DType::I64,
                axis,
                reduction,
                indices_name: indices_buf.id.clone(),
                out: out()?,
            }
        }
        LlirOp::Arg { max, axis, last, .. } => {
            let [x] = node.reads.as_slice() else {
                return Err(RuntimeError::invalid(label, "arg operands"));
            };
            Step::Arg { x: arg(x), max, axis, last, out: out()? }
        }
        // Each output read whole: its view's shape is the buffer's (live) shape.
        LlirOp::Readback => Step::Readback {
            outputs: node
                .reads
                .iter()
                .map(|o| {
                    let buf = &llir.buffers[o.buffer];
                    (buf.id.clone(), o.view.shape.clone(), buf.dtype, range(o.buffer))
                })
                .collect(),
        },
        LlirOp::Upload => return Err(RuntimeError::invalid(label, "a second upload node")),
    })
}

/// Packs each weight a product reads once at prepare, one copy per (buffer, view), and
/// transforms each weight a Winograd convolution reads, one copy per (buffer, view).
#[derive(Debug)]
struct Packer {
    off: bool,
    seen: BTreeMap<(usize, View), Option<usize>>,
    weights: Vec<PackedWeight>,
    no_winograd: bool,
    convs: BTreeMap<(usize, View), Option<Arc<WinogradWeights>>>,
    winograd_bytes: usize,
}

impl Packer {
    fn new(off: bool, no_winograd: bool) -> Self {
        Self {
            off,
            seen: BTreeMap::new(),
            weights: Vec::new(),
            no_winograd,
            convs: BTreeMap::new(),
            winograd_bytes: 0,
        }
    }

    /// The Winograd weights of convolution `g` reading its weights through `view` from buffer
    /// `index` (`buf`), transformed here once; `None` when `g` does not go through Winograd
    /// ([`crate::winograd::eligible`]), it is off, or `buf` is not a weight.
    fn conv(
        &mut self,
        index: usize,
        buf: &LlirBuffer,
        view: &View,
        g: &ConvGeometry,
        weights: &Tensors,
    ) -> Result<Option<Arc<WinogradWeights>>, RuntimeError> {
        if self.no_winograd || buf.role != BufferRole::Weight || !crate::winograd::eligible(g) {
            return Ok(None);
        }
        let key = (index, view.clone());
        if let Some(at) = self.convs.get(&key) {
            return Ok(at.clone());
        }
        let Some(tensor) = weights.get(&buf.id) else { return Ok(None) };
        let words = tensor.words();
        let fits =
            view.shape == g.weight_shape() && view.extent().is_some_and(|e| e <= words.len());
        let at = if fits {
            let mut w = Vec::with_capacity(view.elements());
            view.for_each_offset(|o| w.push(words[o]));
            let u = WinogradWeights::transform(g, &w)?;
            self.winograd_bytes += u.bytes();
            Some(Arc::new(u))
        } else {
            None
        };
        self.convs.insert(key, at.clone());
        Ok(at)
    }

    /// The packed copy of the `[k, n]` matrix `view` reads from buffer `index` (`buf`), as an
    /// index into `weights`; `None` when `buf` is not a weight, the view's batch axes do not
    /// all broadcast one matrix, or this CPU has no packed path.
    fn weight(
        &mut self,
        index: usize,
        buf: &LlirBuffer,
        view: &View,
        weights: &Tensors,
    ) -> Result<Option<usize>, RuntimeError> {
        let Some(nb) = view.rank().checked_sub(2) else { return Ok(None) };
        if self.off || buf.role != BufferRole::Weight || view.strides[..nb].iter().any(|&s| s != 0)
        {
            return Ok(None);
        }
        let key = (index, view.clone());
        if let Some(at) = self.seen.get(&key) {
            return Ok(*at);
        }
        let Some(tensor) = weights.get(&buf.id) else { return Ok(None) };
        let words = tensor.words();
        let shape = (view.shape[nb], view.shape[nb + 1]);
        let strides = (view.strides[nb], view.strides[nb + 1]);
        let at = match Matrix::new(&words, view.offset, shape, strides) {
            Some(w) => PackedWeight::pack(w)?.map(|p| {
                self.weights.push(p);
                self.weights.len() - 1
            }),
            None => None,
        };
        self.seen.insert(key, at);
        Ok(at)
    }
}

/// The most operands a map takes (`select`).
const MAX_OPERANDS: usize = 3;

/// The range an operand read from the output itself is borrowed as (empty: no bytes).
const NOTHING: Range<usize> = 0..0;

/// The view of an unused operand slot.
static NO_VIEW: View = View { shape: Vec::new(), strides: Vec::new(), offset: 0 };

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn oob(label: &str) -> RuntimeError {
    RuntimeError::invalid(label, "a buffer range falls outside the slab")
}

/// Copies `data` into the slab's range `r`, split over the team from
/// [`crate::threads::PAR_MIN_ELEMS`] elements (one core's copy does not saturate the memory
/// bandwidth; a 512 x 2048 input is 4 MiB per execute).
fn copy_in(
    slab: &mut [f32],
    r: Range<usize>,
    data: &[f32],
    threads: &Threads,
) -> Result<(), RuntimeError> {
    match slab.get_mut(r) {
        Some(dst) if dst.len() == data.len() => {
            let parallel = data.len() >= crate::threads::PAR_MIN_ELEMS;
            // Parts of at least PAR_MIN_PART_ELEMS elements.
            let align = crate::threads::PAR_MIN_PART_ELEMS;
            threads.for_parts(dst, (data.len(), 1), align, parallel, |rows, part| {
                part.copy_from_slice(&data[rows]);
                Ok::<(), RuntimeError>(())
            })
        }
        _ => Err(RuntimeError::Kernel { kernel: "upload", reason: "buffer size mismatch".into() }),
    }
}

/// Borrows `out` mutably and every operand range shared, from one slab, without copying:
/// [`split_into`] into a new vector.
fn split<'s>(
    slab: &'s mut [f32],
    ext: External<'s>,
    out: &Range<usize>,
    reads: &[&Range<usize>],
    label: &str,
) -> Result<(&'s mut [f32], Vec<&'s [f32]>), RuntimeError> {
    let mut ins: Vec<&'s [f32]> = vec![&[]; reads.len()];
    let dst = split_into(slab, ext, out, reads.iter().copied(), &mut ins, label)?;
    Ok((dst, ins))
}

/// [`split`] with a second mutable range, the node's workspace `work` (empty: none): both
/// borrowed mutably, each operand shared from the slab around them (or, past the slab's end,
/// from an input read in place). The three kinds must not overlap (the layout check
/// guarantees it).
fn split_with_work<'s>(
    slab: &'s mut [f32],
    ext: External<'s>,
    out: &Range<usize>,
    work: &Range<usize>,
    reads: &[&Range<usize>],
    label: &str,
) -> Result<(&'s mut [f32], &'s mut [f32], Vec<&'s [f32]>), RuntimeError> {
    if work.is_empty() {
        let (dst, ins) = split(slab, ext, out, reads, label)?;
        return Ok((dst, &mut [], ins));
    }
    let slab_len = slab.len();
    let overlaps = || RuntimeError::invalid(label, "a kernel's output or workspace overlaps");
    let (first, second) = if out.start <= work.start { (out, work) } else { (work, out) };
    if first.end > second.start {
        return Err(overlaps());
    }
    let (lo, rest) = slab.split_at_mut_checked(first.start).ok_or_else(|| oob(label))?;
    let (a, rest) = rest.split_at_mut_checked(first.len()).ok_or_else(|| oob(label))?;
    let (mid, rest) =
        rest.split_at_mut_checked(second.start - first.end).ok_or_else(|| oob(label))?;
    let (b, hi) = rest.split_at_mut_checked(second.len()).ok_or_else(|| oob(label))?;
    let shared: [(usize, &'s [f32]); 3] = [(0, lo), (first.end, mid), (second.end, hi)];
    let mut ins = Vec::with_capacity(reads.len());
    for r in reads {
        ins.push(if r.is_empty() {
            &[][..]
        } else if r.start >= slab_len {
            let (_, data) = ext.iter().find(|(e, _)| e == *r).ok_or_else(|| oob(label))?;
            data
        } else {
            let piece = shared.iter().find(|(at, p)| *at <= r.start && r.end <= at + p.len());
            let (at, p) = piece.ok_or_else(overlaps)?;
            &p[r.start - at..r.end - at]
        });
    }
    let (dst, ws) = if out.start <= work.start { (a, b) } else { (b, a) };
    Ok((dst, ws, ins))
}

/// Inputs read in place for one execute: (the range past the slab's end that stands for an
/// input, the caller's tensor data).
type External<'a> = &'a [(Range<usize>, &'a [f32])];

/// Borrows `out` mutably and each operand range of `reads` shared into `ins` (in order; at
/// most `ins.len()` of them), from one slab, without copying or allocating: split the slab
/// around `out`; each operand must lie wholly before or after it (the layout check
/// guarantees it; empty operands may lie anywhere). A range past the slab's end is an input
/// read in place: its slice of `ext`.
fn split_into<'s, 'r>(
    slab: &'s mut [f32],
    ext: External<'s>,
    out: &Range<usize>,
    reads: impl IntoIterator<Item = &'r Range<usize>>,
    ins: &mut [&'s [f32]],
    label: &str,
) -> Result<&'s mut [f32], RuntimeError> {
    let slab_len = slab.len();
    let (lo, rest) = slab.split_at_mut_checked(out.start).ok_or_else(|| oob(label))?;
    let (dst, hi) = rest.split_at_mut_checked(out.len()).ok_or_else(|| oob(label))?;
    let (lo, hi): (&'s [f32], &'s [f32]) = (lo, hi);
    for (slot, r) in ins.iter_mut().zip(reads) {
        *slot = if r.is_empty() {
            &[]
        } else if r.start >= slab_len {
            let (_, data) = ext.iter().find(|(e, _)| e == r).ok_or_else(|| oob(label))?;
            data
        } else if r.end <= out.start {
            lo.get(r.clone()).ok_or_else(|| oob(label))?
        } else if r.start >= out.end {
            hi.get(r.start - out.end..r.end - out.end).ok_or_else(|| oob(label))?
        } else {
            return Err(RuntimeError::invalid(label, "a kernel's output overlaps its operand"));
        };
    }
    Ok(dst)
}

impl PreparedProgram for CpuProgram {
    fn label(&self) -> &str {
        &self.label
    }

    fn slab_bytes(&self) -> usize {
        self.slab_bytes
    }

    fn prepare_seconds(&self) -> f64 {
        self.prepare_seconds
    }

    fn packed_weight_bytes(&self) -> usize {
        self.packed.iter().map(PackedWeight::bytes).sum::<usize>() + self.winograd_bytes
    }

    fn input_bytes_read_in_place(&self) -> usize {
        self.in_place_inputs.iter().map(|(r, _)| r.len() * 4).sum()
    }

    fn execute(&mut self, inputs: &Tensors) -> Result<Tensors, RuntimeError> {
        let start = Instant::now();
        if let Some(b) = &mut self.symbolic {
            // A missing input is reported as such, before its symbols are found unbound.
            if let Some(buf) =
                self.input_buffers.iter().find(|buf| !inputs.contains_key(buf.id.as_str()))
            {
                return Err(RuntimeError::Missing {
                    kind: TensorKind::Input,
                    name: buf.id.clone(),
                    shape: buf.shape.clone(),
                });
            }
            let values = b.llir.bind_inputs(|name| inputs.get(name).map(HostTensor::shape))?;
            if values != b.active {
                self.flops =
                    b.rebind(&self.label, values, &mut self.steps, &mut self.input_buffers)?;
            }
        }
        check_tensors(&self.input_buffers, TensorKind::Input, inputs)?;
        let mut prof =
            ExecProfile { launches: self.launches, flops: self.flops, ..Default::default() };
        let mut out = Tensors::new();
        // check_tensors ran: every input is present, with its declared shape and dtype (f32
        // for the ones read in place, so `data` holds every element).
        let ext: Vec<(Range<usize>, &[f32])> = self
            .in_place_inputs
            .iter()
            .filter_map(|(r, name)| inputs.get(name).map(|t| (r.clone(), t.data())))
            .collect();
        // Kernel steps are timed a run at a time (between uploads and readbacks), less the
        // memory-debug poisoning done inside the run (timed on its own).
        let mut run: Option<(Instant, f64)> = None;
        for i in 0..self.steps.len() {
            let kernel = !matches!(self.steps[i], Step::Upload { .. } | Step::Readback { .. });
            match run {
                None if kernel => run = Some((Instant::now(), prof.poison_ms)),
                Some((t, poison)) if !kernel => {
                    prof.launch_ms += ms(t) - (prof.poison_ms - poison);
                    run = None;
                }
                _ => {}
            }
            if self.time_nodes {
                let t = Instant::now();
                self.run_step(i, inputs, &ext, &mut prof, &mut out)?;
                prof.node_ms.push(ms(t));
            } else {
                self.run_step(i, inputs, &ext, &mut prof, &mut out)?;
            }
        }
        if let Some((t, poison)) = run {
            prof.launch_ms += ms(t) - (prof.poison_ms - poison);
        }
        prof.total_ms = ms(start);
        if self.options.profile_recapture {
            eprintln!("{}", prof.line("CPU", &self.label, self.prepare_seconds * 1e3));
        }
        self.profile = Some(prof);
        Ok(out)
    }

    fn last_profile(&self) -> Option<&ExecProfile> {
        self.profile.as_ref()
    }

    fn time_nodes(&mut self, on: bool) -> bool {
        self.time_nodes = on;
        true
    }

    fn state(&self, name: &str) -> Option<HostTensor> {
        let (range, shape) = self.states.get(name)?;
        let words = self.slab.elems().get(range.clone())?;
        HostTensor::new(shape.clone(), words.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use lumen_compiler::{CompileOptions, Graph};

    use super::*;

    /// A 3x3 convolution with bias, residual and SiLU routed to Winograd (its weights
    /// transformed at prepare, counted in the packed bytes) gives the dense path's outputs
    /// (`no_winograd`) within 1e-4 · max(1, |dense|), on 1 and 2 threads.
    #[test]
    fn winograd_matches_the_dense_path_through_the_runtime() {
        use lumen_compiler::conv::ConvSpec;
        let (c, oc, hw) = (24, 20, 17);
        let mut cx = Graph::new();
        let x = cx.input("x", [1, c, hw, hw]);
        let r = cx.input("r", [1, oc, hw, hw]);
        let w = cx.weight("w", [oc, c, 3, 3]);
        let b = cx.weight("b", [oc]);
        let spec = ConvSpec { pads: vec![(1, 1); 2], ..ConvSpec::unit(2) };
        (x.conv(&w, Some(&b), &spec) + r).silu().output("y");
        let program = cx.compile(&CompileOptions::default()).unwrap();
        let vals = |n: usize, s: u32| -> Vec<f32> {
            (0..n)
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ s) as f32 / 4.3e9 - 0.5)
                .collect()
        };
        let mut weights = Tensors::new();
        weights
            .insert("w".into(), HostTensor::new(vec![oc, c, 3, 3], vals(oc * c * 9, 1)).unwrap());
        weights.insert("b".into(), HostTensor::new(vec![oc], vals(oc, 2)).unwrap());
        let mut inputs = Tensors::new();
        inputs
            .insert("x".into(), HostTensor::new(vec![1, c, hw, hw], vals(c * hw * hw, 3)).unwrap());
        inputs.insert(
            "r".into(),
            HostTensor::new(vec![1, oc, hw, hw], vals(oc * hw * hw, 4)).unwrap(),
        );
        let run = |no_winograd: bool, threads: usize| {
            let options =
                CpuOptions { no_winograd, threads: Some(threads), ..CpuOptions::default() };
            let mut prepared = CpuRuntime::new(options).prepare_cpu(&program, &weights).unwrap();
            let bytes = prepared.packed_weight_bytes();
            (prepared.execute(&inputs).unwrap().shift_remove("y").unwrap(), bytes)
        };
        let (dense, dense_bytes) = run(true, 1);
        for threads in [1, 2] {
            let (wino, bytes) = run(false, threads);
            if crate::packed::vector_lanes().is_some() {
                assert_eq!(bytes, dense_bytes + 16 * oc * c * 4, "transformed weights");
            }
            for (a, b) in wino.data().iter().zip(dense.data()) {
                assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} vs {b}");
            }
        }
    }

    fn linear_relu() -> CompiledProgram {
        let mut cx = Graph::new();
        let x = cx.input("x", [4, 3]);
        let w = cx.weight("w", [3, 5]);
        let b = cx.weight("b", [5]);
        (x.matmul(w) + b).relu().output("y");
        cx.compile(&CompileOptions { fuse: false, ..CompileOptions::default() }).unwrap()
    }

    fn filled(shape: &[usize], v: f32) -> HostTensor {
        HostTensor::new(shape.to_vec(), vec![v; shape.iter().product()]).unwrap()
    }

    /// A linear-relu large enough that the matmul (135 MFLOP) and the maps (1 Mi outputs)
    /// split: fused and unfused, outputs bit-identical on 1, 2 and 3 threads (spinning or
    /// passive workers) and on repeats;
    /// a team of 0 threads is a typed error at prepare.
    #[test]
    fn outputs_are_bit_identical_across_thread_counts() {
        let (m, k, n) = (2048, 64, 515);
        let data = |len: usize, seed: usize| -> Vec<f32> {
            (0..len).map(|i| ((i * 2_654_435_761 + seed) % 1000) as f32 / 500.0 - 1.0).collect()
        };
        let weights: Tensors = [
            ("w".into(), HostTensor::new([k, n], data(k * n, 1)).unwrap()),
            ("b".into(), HostTensor::new([n], data(n, 2)).unwrap()),
        ]
        .into();
        let inputs: Tensors =
            [("x".into(), HostTensor::new([m, k], data(m * k, 3)).unwrap())].into();
        for fuse in [false, true] {
            let mut cx = Graph::new();
            let x = cx.input("x", [m, k]);
            let w = cx.weight("w", [k, n]);
            let b = cx.weight("b", [n]);
            (x.matmul(w) + b).relu().output("y");
            let program =
                cx.compile(&CompileOptions { fuse, ..CompileOptions::default() }).unwrap();
            let mut first: Option<Vec<u32>> = None;
            // Spinning workers, and on 2 threads sleeping ones (`passive_wait`).
            for (threads, passive_wait) in [(1, false), (2, false), (3, false), (2, true)] {
                let options =
                    CpuOptions { threads: Some(threads), passive_wait, ..CpuOptions::default() };
                let mut prepared = CpuProgram::new(&program, &weights, options).unwrap();
                for _ in 0..2 {
                    let out = prepared.execute(&inputs).unwrap();
                    let bits: Vec<u32> = out["y"].data().iter().map(|v| v.to_bits()).collect();
                    match &first {
                        None => first = Some(bits),
                        Some(want) => assert!(
                            bits == *want,
                            "fuse {fuse}, {threads} threads, passive {passive_wait}"
                        ),
                    }
                }
            }
            // One value against the f64 product.
            let y0: f64 = (0..k)
                .map(|p| f64::from(data(m * k, 3)[p]) * f64::from(data(k * n, 1)[p * n]))
                .sum::<f64>()
                + f64::from(data(n, 2)[0]);
            let got = f64::from(f32::from_bits(first.unwrap()[0]));
            assert!((got - y0.max(0.0)).abs() < 1e-4, "y[0, 0] = {got}, want {}", y0.max(0.0));
            let none = CpuOptions { threads: Some(0), ..CpuOptions::default() };
            let err = CpuProgram::new(&program, &weights, none).unwrap_err();
            assert!(matches!(err, RuntimeError::Threads(_)), "{err}");
        }
    }

    /// Weights packed at prepare (a plain one with a fused bias and ReLU, a transposed one read
    /// through swapped strides, both multiplying a batch of 3 matrices) give the unpacked
    /// path's outputs within f32 rounding, on 1 and 2 threads, and report their packed bytes;
    /// `unpacked_weights` packs none.
    #[test]
    fn packed_weights_match_the_unpacked_path() {
        let (batch, m, k, n) = (3, 70, 600, 90);
        let data = |len: usize, seed: usize| -> Vec<f32> {
            (0..len).map(|i| ((i * 2_654_435_761 + seed) % 1000) as f32 / 500.0 - 1.0).collect()
        };
        let mut cx = Graph::new();
        let x = cx.input("x", [batch, m, k]);
        let w1 = cx.weight("w1", [k, n]);
        let w2 = cx.weight("w2", [k, n]);
        let b = cx.weight("b", [n]);
        let h = (x.matmul(w1) + b).relu();
        h.matmul(w2.transpose(0, 1)).output("y");
        let program = cx.compile(&CompileOptions::default()).unwrap();
        let weights: Tensors = [
            ("w1".into(), HostTensor::new([k, n], data(k * n, 1)).unwrap()),
            ("w2".into(), HostTensor::new([k, n], data(k * n, 2)).unwrap()),
            ("b".into(), HostTensor::new([n], data(n, 3)).unwrap()),
        ]
        .into();
        let inputs: Tensors =
            [("x".into(), HostTensor::new([batch, m, k], data(batch * m * k, 4)).unwrap())].into();
        let run = |unpacked_weights: bool, threads: usize| {
            let options =
                CpuOptions { unpacked_weights, threads: Some(threads), ..CpuOptions::default() };
            let mut prepared = CpuProgram::new(&program, &weights, options).unwrap();
            let packed = prepared.packed_weight_bytes();
            (prepared.execute(&inputs).unwrap().shift_remove("y").unwrap(), packed)
        };
        let (want, none) = run(true, 1);
        assert_eq!(none, 0);
        for threads in [1, 2] {
            let (got, packed) = run(false, threads);
            // Both weights, each padded to whole vectors, when this CPU has a packed path.
            let one = Matrix::new(&[1.0], 0, (1, 1), (1, 1)).unwrap();
            if PackedWeight::pack(one).unwrap().is_some() {
                assert!(packed >= 2 * k * n * 4, "{packed} bytes packed");
            }
            assert_eq!(got.shape(), want.shape());
            for (i, (g, w)) in got.data().iter().zip(want.data()).enumerate() {
                assert!((g - w).abs() <= 1e-3 * (1.0 + w.abs()), "y[{i}]: {g} vs {w}");
            }
        }
    }

    /// Inputs read in place (the default) give the bits of inputs copied into the slab, for a
    /// matmul, a map and a reduction reading the same input; nothing of them is uploaded.
    #[test]
    fn inputs_read_in_place_match_copied_inputs() {
        let (m, k, n) = (33, 40, 50);
        let mut cx = Graph::new();
        let x = cx.input("x", [m, k]);
        let w = cx.weight("w", [k, n]);
        x.matmul(w).relu().output("y");
        x.exp().output("e");
        x.sum(1, false).output("s");
        let program = cx.compile(&CompileOptions::default()).unwrap();
        let data = |len: usize, seed: usize| -> Vec<f32> {
            (0..len).map(|i| ((i * 2_654_435_761 + seed) % 1000) as f32 / 500.0 - 1.0).collect()
        };
        let weights: Tensors =
            [("w".into(), HostTensor::new([k, n], data(k * n, 1)).unwrap())].into();
        let inputs: Tensors =
            [("x".into(), HostTensor::new([m, k], data(m * k, 2)).unwrap())].into();
        let run = |copied_inputs: bool| {
            let options = CpuOptions { copied_inputs, ..CpuOptions::default() };
            let mut prepared = CpuProgram::new(&program, &weights, options).unwrap();
            let out = prepared.execute(&inputs).unwrap();
            let uploaded = prepared.last_profile().unwrap().upload_bytes;
            (out, uploaded, prepared.input_bytes_read_in_place())
        };
        let (copied, copied_upload, none) = run(true);
        let (in_place, upload, read) = run(false);
        assert_eq!((copied_upload, none), (m * k * 4, 0));
        assert_eq!((upload, read), (0, m * k * 4));
        for name in ["y", "e", "s"] {
            let bits = |t: &HostTensor| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&in_place[name]), bits(&copied[name]), "{name}");
        }
    }

    #[test]
    fn memory_debug_poisons_every_buffer_after_its_last_use() {
        // Memory debug refuses overlapping plans at prepare, so poisoning can no longer be
        // seen through a corrupted plan's outputs: check the slab itself. After an execute
        // every buffer has passed its last use (outputs at readback), so every byte is NaN.
        let program = linear_relu();
        let weights: Tensors =
            [("w".into(), filled(&[3, 5], 0.5)), ("b".into(), filled(&[5], 1.0))].into();
        let inputs: Tensors = [("x".into(), filled(&[4, 3], 2.0))].into();
        let layout = SlabLayout::new(&program, Placement::Planned).unwrap();
        for memory_debug in [false, true] {
            let options = CpuOptions { memory_debug, ..CpuOptions::default() };
            let mut prepared = CpuProgram::new(&program, &weights, options).unwrap();
            let out = prepared.execute(&inputs).unwrap();
            assert_eq!(out["y"].data(), &[4.0; 20]); // relu(3 * 2 * 0.5 + 1)
            let slab = prepared.slab.elems_mut();
            for (buf, span) in program.llir.buffers.iter().zip(&layout.spans) {
                let elems = &slab[span.elems()];
                let nan = elems.iter().filter(|v| v.is_nan()).count();
                if memory_debug {
                    assert_eq!(nan, elems.len(), "`{}` is poisoned", buf.id);
                } else if buf.role != BufferRole::Workspace {
                    assert_eq!(nan, 0, "`{}` holds values", buf.id);
                }
            }
        }
    }
}
