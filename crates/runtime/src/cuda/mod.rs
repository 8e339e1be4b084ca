//! The CUDA runtime (feature `cuda`): one device slab, cuBLASLt matmuls with fused epilogues
//! (batched and transposed through their layouts, [`lt`]), NVRTC kernels generated from the op
//! table for every other LLIR op ([`codegen`]), one synchronize per execute. Which kernels or
//! cuBLASLt calls a node becomes is decided on the host ([`support`]) and can be run on the
//! host ([`emulate`]) to check it without a GPU.
//!
//! The shape is Luminal's CUDA backend: prepare allocates ONE device buffer of the plan's
//! `slab_bytes` (`cuMemAlloc`), every LLIR buffer is `base + offset` exactly as the planner
//! placed it (so a planning error corrupts results, as on the CPU), weights are uploaded once
//! (again on every execute only when the plan lets a later buffer reuse a weight's bytes, as
//! on the CPU), the cuBLASLt algorithm of each matmul problem is chosen once, and the kernels
//! are compiled once per runtime (those a program needs that are not loaded yet, at its
//! prepare). An execute is then only: host-to-slab copies of the inputs, launches in LLIR order on
//! one stream, readbacks enqueued into pinned staging memory, ONE `cuStreamSynchronize`, and a
//! copy out of the staging memory, each output with its buffer's type (an i32 or i64 output,
//! such as an argmax's labels, is a [`HostTensor`] of that type, as on the CPU). The one device
//! allocation besides the slab holds the error records of the gathers, takes and
//! gather_elements (32 bytes each, only for a program with one): reset on the stream at the start of every execute,
//! copied back before the synchronize, checked after it.
//!
//! Everything is loaded at run time (cudarc `dynamic-loading`): the crate builds without CUDA,
//! and on a machine without a driver or a GPU [`CudaRuntime::new`] returns
//! [`RuntimeError::NoCudaDevice`] saying what is missing; it never panics.
//!
//! Debugging switches (see [`crate::env`]): `LUMINAL_CUDA_PROFILE_RECAPTURE=1` prints a
//! `CUDA_PREPARE_PROFILE` line per prepare and a `CUDA_EXEC_PROFILE` line per execute;
//! `LUMINAL_CUDA_MEMORY_DEBUG=1` verifies the plan at prepare (refusing overlapping live
//! buffers by name), prints the memory plan, starts the slab as NaN and NaN-fills (bytes 0xFF)
//! every buffer after its last use, on the stream, like the CPU runtime.

pub mod codegen;
pub mod device;
pub mod emulate;
pub mod error;
pub mod kernels;
pub mod lt;
pub mod support;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::result;
use cudarc::driver::safe::{CudaEvent, CudaStream};
use cudarc::driver::sys::{self, CUdeviceptr};
use lumen_compiler::{BufferRole, CompiledProgram, DType, LlirBuffer, LlirOp};

pub use codegen::KernelSpec;
pub use device::{
    CUBLASLT, DEVICE_ALIGNMENT, DRIVER, Device, DeviceInfo, Libraries, MIN_DRIVER_VERSION, NVRTC,
    Probe, RequiredLibrary, check_aligned, guarded,
};
pub use error::CudaError;
pub use kernels::{
    CodeKind, CompiledModule, compile_cubin, compile_ptx, compile_source, compile_specs,
    kernel_sources, nvrtc_present, nvrtc_version,
};
pub use lt::{
    ColumnMajor, ComputeMode, LtCalls, LtProblem, MatrixLayout, column_major, cublaslt_epilogue,
    lt_problem,
};
pub use support::{KernelLaunch, Launch, Ptr, check_supported};

use self::device::{DeviceAlloc, PinnedHost};
use self::error::drv;
use self::kernels::{KernelCache, ResolvedLaunch};
use self::lt::{LtOperands, LtPlan, ShapeKey, alignment};
use crate::error::TensorKind;
use crate::layout::{Placement, SlabLayout, memory_plan_lines, role_name};
use crate::phases::Peak;
use crate::runtime::{ExecProfile, PreparedProgram, Runtime, check_tensors};
use crate::{HostTensor, RuntimeEnv, RuntimeError, Tensors};

/// Options of the CUDA runtime.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CudaOptions {
    /// The device ordinal (0 = first GPU).
    pub device: usize,
    /// Matmul compute type: FP32 by default; TF32 only when set here (never silently).
    pub compute: ComputeMode,
    /// Planned offsets (default) or every buffer its own range (the differential oracle).
    pub placement: Placement,
    /// Verify the plan at prepare (with [`Placement::Planned`]: an overlapping pair of live
    /// buffers is [`RuntimeError::InvalidProgram`] naming them, see
    /// [`crate::layout::verify_plan`]), start the slab as NaN, NaN-fill each buffer after its
    /// last use, print the memory plan on stderr at prepare.
    pub memory_debug: bool,
    /// Print `CUDA_PREPARE_PROFILE` and `CUDA_EXEC_PROFILE` lines on stderr.
    pub profile_recapture: bool,
    /// The peak to report against; `None` = the device's FP32 peak from its SM count and clock.
    pub peak: Option<Peak>,
}

impl CudaOptions {
    /// Device 0, FP32, planned placement, switches from `LUMINAL_CUDA_MEMORY_DEBUG` and
    /// `LUMINAL_CUDA_PROFILE_RECAPTURE` ([`RuntimeEnv`]).
    pub fn from_env() -> Self {
        let env = RuntimeEnv::from_env();
        Self {
            memory_debug: env.memory_debug,
            profile_recapture: env.profile_recapture,
            ..Self::default()
        }
    }
}

/// The CUDA runtime: an open device and the kernels compiled for it (see the module docs).
#[derive(Debug)]
pub struct CudaRuntime {
    options: CudaOptions,
    device: Arc<Device>,
    // Kernels compile at the prepare that first needs them; every program shares the modules.
    kernels: Rc<KernelCache>,
}

impl CudaRuntime {
    /// Opens `options.device`, after checking that the driver, cuBLASLt and NVRTC libraries
    /// can be loaded and that the device exists.
    ///
    /// # Errors
    /// [`RuntimeError::NoCudaDevice`] saying what is missing (library, driver, device);
    /// [`RuntimeError::Cuda`] when the driver fails afterwards.
    pub fn new(options: CudaOptions) -> Result<Self, RuntimeError> {
        let device = Device::open(options.device)?;
        let kernels = Rc::new(KernelCache::new(&device));
        Ok(Self { options, device, kernels })
    }

    /// [`CudaRuntime::new`] with [`CudaOptions::from_env`].
    ///
    /// # Errors
    /// As [`CudaRuntime::new`].
    pub fn from_env() -> Result<Self, RuntimeError> {
        Self::new(CudaOptions::from_env())
    }

    /// Its options.
    pub fn options(&self) -> &CudaOptions {
        &self.options
    }

    /// The device's facts (name, compute capability, SMs, clock, memory, driver version).
    pub fn device_info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// [`Runtime::prepare`] with the concrete type.
    ///
    /// # Errors
    /// As [`Runtime::prepare`], plus [`RuntimeError::Cuda`] for a failed driver, cuBLASLt or
    /// NVRTC call, a misaligned pointer, no cuBLASLt algorithm or too little workspace.
    pub fn prepare_cuda(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<CudaProgram, RuntimeError> {
        CudaProgram::new(self, program, weights)
    }
}

impl Runtime for CudaRuntime {
    fn name(&self) -> &'static str {
        "cuda"
    }

    /// `cuda device=0 NVIDIA H200 sm_90 driver=13000 compute=fp32 placement=Planned
    /// memory_debug=false profile_recapture=false`: the device and the options that change an
    /// execute's time.
    fn tuning_identity(&self) -> String {
        let (o, d) = (&self.options, self.device.info());
        format!(
            "cuda device={} {} {} driver={} compute={} placement={:?} memory_debug={} \
             profile_recapture={}",
            d.ordinal,
            d.name,
            d.arch(),
            d.driver_version,
            o.compute.name(),
            o.placement,
            o.memory_debug,
            o.profile_recapture
        )
    }

    fn peak(&self) -> Peak {
        if let Some(p) = &self.options.peak {
            return p.clone();
        }
        match self.device.info().fp32_peak() {
            Some((flops, basis)) => Peak { flops, basis },
            // An H100/H200 SXM's FP32 figure, stated as such, when the clock is unknown.
            None => Peak {
                flops: 67e12,
                basis: format!(
                    "{}: nominal 67 TFLOP/s FP32 (H100/H200 SXM)",
                    self.device.info().name
                ),
            },
        }
    }

    fn prepare(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<Box<dyn PreparedProgram>, RuntimeError> {
        Ok(Box::new(self.prepare_cuda(program, weights)?))
    }
}

/// One node, resolved to slab addresses at prepare.
#[derive(Debug, Clone)]
enum Step {
    Upload {
        // (input name, address, bytes), copied from the caller's tensors on every execute.
        inputs: Vec<(String, CUdeviceptr, usize)>,
        // (index into the host weight copies, address), uploaded again on every execute.
        weights: Vec<(usize, CUdeviceptr)>,
    },
    /// A cuBLASLt node (index into the program's [`LtPlan`]; one call per outer batch index).
    Matmul(usize),
    /// A matmul with an empty output (M = 0 or N = 0): nothing to compute.
    Empty,
    /// `act(0 + bias)`: a K = 0 matmul, whose product is all zeros; cuBLASLt is not asked
    /// about empty reductions. Memset, then the bias add and the activation in place.
    MatmulK0 { out: CUdeviceptr, bytes: usize, launches: Vec<ResolvedLaunch> },
    /// Generated kernels (map, reduce, gather or take and its report, conv, cast, arg,
    /// concat's copies).
    Kernels(Vec<ResolvedLaunch>),
    Readback {
        // (output name, shape, dtype, address, 32-bit words, offset in the staging area)
        outputs: Vec<(String, Vec<usize>, DType, CUdeviceptr, usize, usize)>,
    },
}

/// A program prepared on a CUDA device: its slab, its cuBLASLt calls, its steps.
#[derive(Debug)]
pub struct CudaProgram {
    label: String,
    options: CudaOptions,
    steps: Vec<Step>,
    // (address, bytes) to NaN-fill after step i (memory debug only).
    poison_after: Vec<Vec<(CUdeviceptr, usize)>>,
    // Host copies of weights that are not resident in the slab.
    weights: Vec<Vec<f32>>,
    input_buffers: Vec<LlirBuffer>,
    flops: u64,
    launches: usize,
    slab_bytes: usize,
    prepare_seconds: f64,
    memory_plan: Vec<String>,
    prepare_line: String,
    profile: Option<ExecProfile>,
    kernel_ms: Option<f64>,
    // Declaration order is drop order: everything enqueued on the stream and living in the
    // slab goes before the stream, the slab and the context.
    events: (CudaEvent, CudaEvent),
    staging: PinnedHost,
    // One error record per gather, take, gather_elements and scatter_elements (see codegen's
    // docs), reset at the start of each execute and copied into `error_host` before the
    // synchronize.
    errors: Option<DeviceAlloc>,
    error_host: PinnedHost,
    // (the op the error names, ids buffer name, rows: the gather's vocab, the take's,
    // gather_elements' or scatter_elements' extent) per node with an error record, in
    // error-record order.
    index_checks: Vec<(&'static str, String, usize)>,
    lt: LtPlan,
    // A program with symbolic dimensions: how each execute binds its values (`None` without).
    symbolic: Option<CudaBinding>,
    kernels: Rc<KernelCache>,
    stream: Arc<CudaStream>,
    slab: DeviceAlloc,
    device: Arc<Device>,
}

/// How a CUDA program with symbolic dimensions runs at each execute's values
/// ([`lumen_compiler::symbolic`]), as the CPU runtime does: the inputs' shapes give the values;
/// the nodes whose buffers carry a changed symbol get their launches again from the live LLIR
/// ([`support::launch_in`]: sizes and views as kernel arguments), their cuBLASLt calls the
/// live problem ([`LtPlan::replace`]; the heuristic asked once per shape), the uploads and
/// readbacks their live byte counts. Buffers keep their planned addresses; a live buffer is
/// the prefix of its range.
#[derive(Debug)]
struct CudaBinding {
    // The compiled LLIR (at the bounds), and the live one at `active`.
    llir: lumen_compiler::Llir,
    live: lumen_compiler::Llir,
    active: Vec<usize>,
    // Each buffer's live shape at `active`.
    shapes: Vec<Vec<usize>>,
    // The symbols each node depends on.
    node_symbols: Vec<Vec<lumen_compiler::SymbolId>>,
    // Each buffer's address, and its planned bytes (the workspace's size).
    addrs: Vec<CUdeviceptr>,
    span_bytes: Vec<usize>,
    error_base: CUdeviceptr,
    // A rebind failed part-way (cuBLASLt calls may hold newer problems than their steps):
    // the next execute rebuilds every node with a symbol.
    dirty: bool,
}

impl CudaProgram {
    fn new(
        rt: &CudaRuntime,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<Self, RuntimeError> {
        let start = Instant::now();
        let options = rt.options.clone();
        let device = rt.device.clone();
        let layout = SlabLayout::for_runtime(program, options.placement, options.memory_debug)?;
        let llir = &program.llir;
        check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
        // Refused before any device memory is touched.
        let plans = support::launches(program)?;
        device.bind()?;

        let t = Instant::now();
        let kernels = rt.kernels.clone();
        let specs: Vec<_> = plans.iter().flat_map(|l| l.kernels().iter().map(|k| k.spec)).collect();
        let stats = kernels.ensure(&specs)?;
        let kernels_ms = t.elapsed().as_secs_f64() * 1e3;
        let records = support::error_records(program);
        // Four u64 per node with an error record; 0xFF bytes = u64::MAX, "no bad id".
        let errors =
            if records > 0 { Some(DeviceAlloc::new(&device, records * 32, 0xFF)?) } else { None };
        let error_host = PinnedHost::new(&device, records * 8)?;
        let error_base = errors.as_ref().map_or(0, DeviceAlloc::ptr);
        let index_checks: Vec<(&'static str, String, usize)> = llir
            .nodes
            .iter()
            .filter_map(|node| {
                let rows = support::index_rows(&node.op)?;
                let ids = node.reads.get(1).and_then(|o| llir.buffers.get(o.buffer));
                let op = support::index_op(&node.op);
                Some((op, ids.map(|b| b.id.clone()).unwrap_or_default(), rows))
            })
            .collect();

        let t = Instant::now();
        // 0xFF bytes are f32 NaN: a read of never-written bytes shows in the outputs.
        let fill = if options.memory_debug { 0xFF } else { 0 };
        let slab = DeviceAlloc::new(&device, layout.slab_bytes, fill)?;
        let alloc_ms = t.elapsed().as_secs_f64() * 1e3;
        let stream = device.context().new_stream().map_err(drv("cuStreamCreate"))?;
        let base = slab.ptr();
        let addr = |b: usize| base + layout.spans[b].offset as u64;
        let checked = |b: usize, n: usize| -> Result<CUdeviceptr, RuntimeError> {
            let buf = &llir.buffers[b];
            let what = format!(
                "buffer `{}` ({}) of node {n} ({})",
                buf.id,
                role_name(buf.role),
                llir.nodes[n].op.name()
            );
            check_aligned(&what, addr(b))?;
            Ok(addr(b))
        };

        let t = Instant::now();
        let mut lt = LtPlan::new(&device)?;
        let mut host_weights = Vec::new();
        let mut weight_bytes = 0usize;
        let mut upload_ms = 0.0;
        let mut staging_elems = 0usize;
        let mut steps = Vec::with_capacity(llir.nodes.len());
        let mut heuristic_ms = 0.0;
        let resolve =
            |n: usize, k: &support::KernelLaunch| -> Result<ResolvedLaunch, RuntimeError> {
                let ptrs = k
                    .ptrs
                    .iter()
                    .map(|p| match *p {
                        support::Ptr::Buffer(b) => checked(b, n),
                        support::Ptr::Errors(i) => Ok(error_base + 32 * i as u64),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(ResolvedLaunch {
                    function: kernels.function(&k.spec)?,
                    ptrs,
                    words: k.words.clone(),
                    grid: k.grid,
                    block: k.block,
                })
            };
        for (n, node) in llir.nodes.iter().enumerate() {
            let step = match node.op {
                LlirOp::Upload => {
                    let mut inputs = Vec::new();
                    let mut again = Vec::new();
                    for &w in &node.writes {
                        let buf = &llir.buffers[w];
                        let dst = checked(w, n)?;
                        if buf.role == BufferRole::Input {
                            inputs.push((buf.id.clone(), dst, buf.bytes));
                            continue;
                        }
                        let data: Vec<f32> = match buf.role {
                            BufferRole::Constant(value) => vec![value.value()],
                            _ => match weights.get(&buf.id) {
                                Some(t) => t.words().into_owned(),
                                None => continue,
                            },
                        };
                        if options.memory_debug || layout.is_shared(w) {
                            again.push((host_weights.len(), dst));
                            host_weights.push(data);
                        } else if !data.is_empty() {
                            let tu = Instant::now();
                            // SAFETY: dst..dst+bytes is this buffer's checked range of the slab.
                            unsafe { result::memcpy_htod_sync(dst, &data) }
                                .map_err(drv("cuMemcpyHtoD_v2"))?;
                            weight_bytes += data.len() * 4;
                            upload_ms += tu.elapsed().as_secs_f64() * 1e3;
                        }
                    }
                    Step::Upload { inputs, weights: again }
                }
                LlirOp::LtMatmul { epilogue, .. } => match &plans[n] {
                    support::Launch::MatmulEmpty => Step::Empty,
                    support::Launch::MatmulK0(ks) => {
                        let out = checked(node.writes[0], n)?;
                        let launches =
                            ks.iter().map(|k| resolve(n, k)).collect::<Result<Vec<_>, _>>()?;
                        Step::MatmulK0 { out, bytes: llir.buffers[node.writes[0]].bytes, launches }
                    }
                    support::Launch::Matmul(calls) => {
                        let (w, x) = (&node.reads[1], &node.reads[0]);
                        let (wp, xp) = (checked(w.buffer, n)?, checked(x.buffer, n)?);
                        let bias = match node.reads.get(2) {
                            Some(r) => Some(checked(r.buffer, n)? + 4 * r.view.offset as u64),
                            None => None,
                        };
                        let y = checked(node.writes[0], n)?;
                        let workspace = match node.workspace {
                            Some(ws) => (checked(ws, n)?, layout.spans[ws].bytes),
                            None => (0, 0),
                        };
                        let ptrs: Vec<[CUdeviceptr; 3]> = calls
                            .offsets
                            .iter()
                            .map(|&[ow, ox, oy]| {
                                [wp + 4 * ow as u64, xp + 4 * ox as u64, y + 4 * oy as u64]
                            })
                            .collect();
                        let key = ShapeKey {
                            problem: calls.problem,
                            epilogue,
                            workspace: workspace.1,
                            mode: options.compute,
                            align: lt_alignment(&calls.problem, &ptrs),
                        };
                        let th = Instant::now();
                        let call = lt.add(key, LtOperands { calls: ptrs, bias, workspace })?;
                        heuristic_ms += th.elapsed().as_secs_f64() * 1e3;
                        Step::Matmul(call)
                    }
                    _ => return Err(RuntimeError::invalid(&program.label, "lt_matmul launch")),
                },
                LlirOp::Map { .. }
                | LlirOp::IntMap { .. }
                | LlirOp::Reduce { .. }
                | LlirOp::Gather { .. }
                | LlirOp::Conv { .. }
                | LlirOp::MaxPool { .. }
                | LlirOp::Take { .. }
                | LlirOp::Cast { .. }
                | LlirOp::Arg { .. }
                | LlirOp::TopK { .. }
                | LlirOp::GatherElements { .. }
                | LlirOp::ScatterElements { .. }
                | LlirOp::AppendRows { .. }
                | LlirOp::Concat { .. } => Step::Kernels(
                    plans[n].kernels().iter().map(|k| resolve(n, k)).collect::<Result<_, _>>()?,
                ),
                LlirOp::Readback => {
                    let mut outputs = Vec::new();
                    for r in node.read_buffers() {
                        let buf = &llir.buffers[r];
                        // Slab words: an i64 element is two.
                        let elems = buf.bytes / 4;
                        outputs.push((
                            buf.id.clone(),
                            buf.shape.clone(),
                            buf.dtype,
                            checked(r, n)?,
                            elems,
                            staging_elems,
                        ));
                        staging_elems += elems;
                    }
                    Step::Readback { outputs }
                }
            };
            steps.push(step);
        }
        let plan_ms = t.elapsed().as_secs_f64() * 1e3 - heuristic_ms - upload_ms;
        let staging = PinnedHost::new(&device, staging_elems)?;

        let mut poison_after = vec![Vec::new(); llir.nodes.len()];
        if options.memory_debug {
            for (b, &last) in layout.last_use.iter().enumerate() {
                let bytes = layout.spans[b].bytes;
                // A state keeps its rows for the next execute.
                if bytes > 0 && llir.buffers[b].role != BufferRole::State {
                    poison_after[last].push((addr(b), bytes));
                }
            }
        }
        let memory_plan = memory_plan_lines("CUDA", program, &layout);
        if options.memory_debug {
            for line in &memory_plan {
                eprintln!("{line}");
            }
        }
        let ctx = device.context();
        // The fill and the weight copies ran on the legacy stream, whose DMA may still be in
        // flight; the program's non-blocking stream does not wait for it, so wait here.
        ctx.synchronize().map_err(drv("cuCtxSynchronize"))?;
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let events = (
            ctx.new_event(timing).map_err(drv("cuEventCreate"))?,
            ctx.new_event(timing).map_err(drv("cuEventCreate"))?,
        );
        let prepare_seconds = start.elapsed().as_secs_f64();
        let label = program.label.clone();
        let info = device.info();
        let prepare_line = format!(
            "CUDA_PREPARE_PROFILE label={} total_ms={:.3} nvrtc_ms={:.3} module_load_ms={:.3} \
             kernels_compiled={} kernels_ms={kernels_ms:.3} alloc_ms={alloc_ms:.3} \
             heuristic_ms={heuristic_ms:.3} upload_ms={upload_ms:.3} plan_ms={plan_ms:.3} slab_bytes={} \
             upload_bytes={weight_bytes} \
             matmuls={} matmul_shapes={} workspace_needed_bytes={} compute={} device={} sm={}",
            sanitize(&label),
            prepare_seconds * 1e3,
            stats.compile_ms,
            stats.load_ms,
            stats.compiled,
            layout.slab_bytes,
            steps.iter().filter(|s| matches!(s, Step::Matmul(_))).count(),
            lt.heuristic_queries,
            lt.max_workspace_needed(),
            options.compute.name(),
            sanitize(&info.name),
            info.arch(),
        );
        if options.profile_recapture {
            eprintln!("{prepare_line}");
        }
        let input_buffers =
            llir.buffers.iter().filter(|b| b.role == BufferRole::Input).cloned().collect();
        let symbolic = (!llir.symbols.is_empty()).then(|| CudaBinding {
            llir: llir.clone(),
            live: llir.clone(),
            active: llir.symbols.iter().map(|d| d.bound).collect(),
            shapes: llir.buffers.iter().map(|b| b.shape.clone()).collect(),
            node_symbols: (0..llir.nodes.len()).map(|i| llir.node_symbols(i)).collect(),
            addrs: (0..llir.buffers.len()).map(addr).collect(),
            span_bytes: layout.spans.iter().map(|s| s.bytes).collect(),
            error_base,
            dirty: false,
        });
        Ok(Self {
            label,
            slab_bytes: layout.slab_bytes,
            options,
            steps,
            poison_after,
            weights: host_weights,
            input_buffers,
            flops: llir.nodes.iter().fold(0u64, |acc, n| acc.saturating_add(n.op.flops())),
            launches: llir.nodes.iter().filter(|n| n.op.is_launch()).count(),
            prepare_seconds,
            memory_plan,
            prepare_line,
            profile: None,
            kernel_ms: None,
            events,
            staging,
            errors,
            error_host,
            index_checks,
            lt,
            symbolic,
            kernels,
            stream,
            slab,
            device,
        })
    }

    /// The memory plan as printed in memory-debug mode: a `CUDA_MEMORY_PLAN` summary line
    /// (buffers, slab, naive and lower-bound bytes) and one `CUDA_MEMORY_BUFFER` line per buffer.
    pub fn memory_plan(&self) -> &[String] {
        &self.memory_plan
    }

    /// The `CUDA_PREPARE_PROFILE` line of this preparation (milliseconds: total, NVRTC, module
    /// load, slab allocation, cuBLASLt heuristic; bytes; counts).
    pub fn prepare_profile(&self) -> &str {
        &self.prepare_line
    }

    /// Options it was prepared with.
    pub fn options(&self) -> &CudaOptions {
        &self.options
    }

    /// Device time of the latest execute's launches, in milliseconds, measured with CUDA events
    /// recorded on the stream just before the first and just after the last launch (no
    /// uploads, no readbacks): what the compute itself took. `None` before the first execute
    /// or for a program without launches.
    pub fn last_kernel_ms(&self) -> Option<f64> {
        self.kernel_ms
    }

    /// How many weights are uploaded again on every execute because the plan reuses their
    /// bytes (or memory debug poisons them).
    pub fn reuploaded_weights(&self) -> usize {
        self.weights.len()
    }

    /// The device the program lives on.
    pub fn device_info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// Bytes of the device allocation (the slab, at least one 256-byte unit).
    pub fn allocated_bytes(&self) -> usize {
        self.slab.bytes()
    }

    fn run(&mut self, inputs: &Tensors, prof: &mut ExecProfile) -> Result<Tensors, RuntimeError> {
        let stream = self.stream.cu_stream();
        if let Some(errors) = &self.errors {
            // SAFETY: the error records' own allocation; 0xFF bytes are u64::MAX, "no bad id".
            unsafe { result::memset_d8_async(errors.ptr(), 0xFF, errors.bytes(), stream) }
                .map_err(drv("cuMemsetD8Async"))?;
        }
        let first_launch = self.steps.iter().position(is_launch);
        let last_launch = self.steps.iter().rposition(is_launch);
        for (i, step) in self.steps.iter().enumerate() {
            if Some(i) == first_launch {
                self.events.0.record(&self.stream).map_err(drv("cuEventRecord"))?;
            }
            let t = Instant::now();
            match step {
                Step::Upload { inputs: ins, weights } => {
                    for (name, dst, bytes) in ins {
                        // check_tensors ran: every declared input is present with its shape.
                        let Some(t) = inputs.get(name) else { continue };
                        if t.bytes() != *bytes {
                            return Err(RuntimeError::kernel("upload", "input size changed"));
                        }
                        if *bytes > 0 {
                            let words = t.words();
                            // SAFETY: dst..dst+bytes is the input's range of the slab; pageable
                            // memory is staged by the driver before the call returns.
                            unsafe { result::memcpy_htod_async(*dst, &words, stream) }
                                .map_err(drv("cuMemcpyHtoDAsync_v2"))?;
                        }
                        prof.upload_bytes += bytes;
                    }
                    for (w, dst) in weights {
                        let Some(data) = self.weights.get(*w) else { continue };
                        if !data.is_empty() {
                            // SAFETY: as above.
                            unsafe { result::memcpy_htod_async(*dst, data, stream) }
                                .map_err(drv("cuMemcpyHtoDAsync_v2"))?;
                        }
                        prof.upload_bytes += data.len() * 4;
                    }
                    prof.upload_ms += ms(t);
                }
                Step::Matmul(call) => {
                    self.lt.enqueue(*call, stream)?;
                    prof.launch_ms += ms(t);
                }
                Step::MatmulK0 { out, bytes, launches } => {
                    // SAFETY: out..out+bytes is the output's range of the slab.
                    unsafe { result::memset_d8_async(*out, 0, *bytes, stream) }
                        .map_err(drv("cuMemsetD8Async"))?;
                    for l in launches {
                        self.kernels.launch(stream, l)?;
                    }
                    prof.launch_ms += ms(t);
                }
                Step::Kernels(launches) => {
                    for l in launches {
                        self.kernels.launch(stream, l)?;
                    }
                    prof.launch_ms += ms(t);
                }
                Step::Empty => {}
                Step::Readback { outputs } => {
                    let staging = self.staging.as_mut_slice();
                    for (_, _, _, src, elems, at) in outputs {
                        let Some(dst) = staging.get_mut(*at..*at + *elems) else {
                            return Err(RuntimeError::kernel("readback", "staging range"));
                        };
                        if !dst.is_empty() {
                            // SAFETY: src..src+4·elems is the output's range of the slab; dst
                            // is pinned memory owned by self, read only after the synchronize.
                            unsafe { result::memcpy_dtoh_async(dst, *src, stream) }
                                .map_err(drv("cuMemcpyDtoHAsync_v2"))?;
                        }
                    }
                    prof.readback_ms += ms(t);
                }
            }
            if Some(i) == last_launch {
                self.events.1.record(&self.stream).map_err(drv("cuEventRecord"))?;
            }
            if let Some(dead) = self.poison_after.get(i).filter(|d| !d.is_empty()) {
                let t = Instant::now();
                for &(p, bytes) in dead {
                    // SAFETY: p..p+bytes is a buffer's range of the slab, dead after step i.
                    unsafe { result::memset_d8_async(p, 0xFF, bytes, stream) }
                        .map_err(drv("cuMemsetD8Async"))?;
                }
                prof.poison_ms += ms(t);
            }
        }
        if let Some(errors) = &self.errors {
            let dst = self.error_host.as_mut_slice();
            // SAFETY: the error records (bytes() = 4 · dst.len()) into pinned memory owned by
            // self, read only after the synchronize.
            unsafe { result::memcpy_dtoh_async(dst, errors.ptr(), stream) }
                .map_err(drv("cuMemcpyDtoHAsync_v2"))?;
        }
        // The one synchronize of the execute: everything above is on this stream.
        let t = Instant::now();
        self.stream.synchronize().map_err(drv("cuStreamSynchronize"))?;
        prof.sync_ms = ms(t);
        self.check_indices()?;
        self.kernel_ms = match first_launch {
            // SAFETY: both events are live and were recorded on the stream just synchronized,
            // so they are complete (no second wait: cudarc's elapsed_ms would sync them again).
            Some(_) => Some(f64::from(
                unsafe {
                    result::event::elapsed(self.events.0.cu_event(), self.events.1.cu_event())
                }
                .map_err(drv("cuEventElapsedTime"))?,
            )),
            None => None,
        };
        let t = Instant::now();
        let mut out = Tensors::new();
        let staging = self.staging.as_mut_slice();
        for step in &self.steps {
            let Step::Readback { outputs } = step else { continue };
            for (name, shape, dtype, _, elems, at) in outputs {
                let words = staging
                    .get(*at..*at + *elems)
                    .ok_or_else(|| RuntimeError::kernel("readback", "staging range"))?;
                prof.readback_bytes += words.len() * 4;
                // An integer output (a label, an index) is read back with its type.
                let t = match dtype {
                    DType::F32 => HostTensor::new(shape.clone(), words.to_vec())?,
                    _ => HostTensor::from_words(shape.clone(), *dtype, words)?,
                };
                out.insert(name.clone(), t);
            }
        }
        prof.readback_ms += ms(t);
        Ok(out)
    }
}

fn is_launch(step: &Step) -> bool {
    match step {
        Step::Matmul(_) | Step::MatmulK0 { .. } => true,
        Step::Kernels(launches) => !launches.is_empty(),
        Step::Upload { .. } | Step::Readback { .. } | Step::Empty => false,
    }
}

/// The alignment in bytes (A, B, C, D) the heuristic is told for a problem's calls: the
/// smallest over every call's pointers and, with a batch, the batch strides.
fn lt_alignment(p: &lt::LtProblem, calls: &[[CUdeviceptr; 3]]) -> [u32; 4] {
    let stride = |l: &lt::MatrixLayout| {
        if l.batch > 1 { alignment(4 * l.batch_stride.unsigned_abs()) } else { 256 }
    };
    let mut align = [stride(&p.a), stride(&p.b), stride(&p.d), stride(&p.d)];
    for &[a, b, d] in calls {
        align[0] = align[0].min(alignment(a));
        align[1] = align[1].min(alignment(b));
        align[2] = align[2].min(alignment(d));
        align[3] = align[3].min(alignment(d));
    }
    align
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_whitespace() || c == '=' { '_' } else { c }).collect()
}

impl CudaProgram {
    /// Binds the program's symbols to `values` ([`CudaBinding`]): the steps of the nodes whose
    /// buffers carry a changed symbol (every node with a symbol after a failed rebind) from the
    /// live LLIR; the live input buffers and the FLOP figure. Kernels a live launch needs that
    /// prepare did not compile (a view collapsing to another rank) are compiled here.
    ///
    /// # Errors
    /// The binding's errors ([`lumen_compiler::BindError`]), a launch the CUDA runtime refuses,
    /// an NVRTC or cuBLASLt failure. Before any cuBLASLt call changes, the steps are as they
    /// were; after, the next execute rebuilds every symbolic node.
    fn rebind(&mut self, values: Vec<usize>) -> Result<(), RuntimeError> {
        let Some(b) = self.symbolic.as_mut() else { return Ok(()) };
        b.llir.check_values(&values)?;
        let changed: Vec<bool> = values.iter().zip(&b.active).map(|(v, a)| v != a).collect();
        let touched = |syms: &[lumen_compiler::SymbolId]| {
            if b.dirty { !syms.is_empty() } else { syms.iter().any(|s| changed[s.0]) }
        };
        let mut shapes = b.shapes.clone();
        let mut live = b.live.clone();
        for (i, buf) in b.llir.buffers.iter().enumerate() {
            if buf.axes.iter().flatten().any(|s| changed[s.0]) || b.dirty {
                shapes[i] = b.llir.live_shape(i, &values);
                live.buffers[i].shape = shapes[i].clone();
            }
        }
        let nodes: Vec<usize> =
            (0..live.nodes.len()).filter(|&i| touched(&b.node_symbols[i])).collect();
        let mut plans = Vec::with_capacity(nodes.len());
        for &i in &nodes {
            live.nodes[i] = b.llir.bind_node(i, &shapes)?;
            plans.push(support::launch_in(&self.label, &live, i)?);
        }
        let specs: Vec<KernelSpec> =
            plans.iter().flat_map(|p| p.kernels().iter().map(|k| k.spec)).collect();
        self.kernels.ensure(&specs)?;
        let resolve = |k: &support::KernelLaunch| -> Result<ResolvedLaunch, RuntimeError> {
            let ptrs = k
                .ptrs
                .iter()
                .map(|p| match *p {
                    support::Ptr::Buffer(buf) => b.addrs[buf],
                    support::Ptr::Errors(i) => b.error_base + 32 * i as u64,
                })
                .collect();
            Ok(ResolvedLaunch {
                function: self.kernels.function(&k.spec)?,
                ptrs,
                words: k.words.clone(),
                grid: k.grid,
                block: k.block,
            })
        };
        // Steps that need no cuBLASLt change first (all or nothing), then the products.
        let mut built: Vec<(usize, Step)> = Vec::with_capacity(nodes.len());
        let mut products = Vec::new();
        for (&i, plan) in nodes.iter().zip(&plans) {
            let node = &live.nodes[i];
            let step = match (&node.op, plan) {
                (LlirOp::Upload, _) => {
                    let Step::Upload { weights, .. } = &self.steps[i] else {
                        return Err(RuntimeError::invalid(&self.label, "upload step"));
                    };
                    let inputs = node
                        .writes
                        .iter()
                        .filter(|&&w| live.buffers[w].role == BufferRole::Input)
                        .map(|&w| {
                            let buf = &live.buffers[w];
                            let bytes =
                                lumen_compiler::hlir::checked_bytes_of(&buf.shape, buf.dtype);
                            (buf.id.clone(), b.addrs[w], bytes.unwrap_or(buf.bytes))
                        })
                        .collect();
                    Step::Upload { inputs, weights: weights.clone() }
                }
                (LlirOp::Readback, _) => {
                    let Step::Readback { outputs } = &self.steps[i] else {
                        return Err(RuntimeError::invalid(&self.label, "readback step"));
                    };
                    let mut outputs = outputs.clone();
                    for (out, o) in outputs.iter_mut().zip(&node.reads) {
                        let buf = &live.buffers[o.buffer];
                        let bytes = lumen_compiler::hlir::checked_bytes_of(&buf.shape, buf.dtype);
                        out.1 = buf.shape.clone();
                        out.4 = bytes.unwrap_or(buf.bytes) / 4;
                    }
                    Step::Readback { outputs }
                }
                (LlirOp::LtMatmul { .. }, support::Launch::MatmulEmpty) => Step::Empty,
                (LlirOp::LtMatmul { .. }, support::Launch::MatmulK0(ks)) => {
                    let out = node.writes[0];
                    let launches = ks.iter().map(resolve).collect::<Result<Vec<_>, _>>()?;
                    Step::MatmulK0 { out: b.addrs[out], bytes: b.llir.buffers[out].bytes, launches }
                }
                (LlirOp::LtMatmul { epilogue, .. }, support::Launch::Matmul(calls)) => {
                    products.push((i, *epilogue, calls.clone()));
                    continue;
                }
                (_, support::Launch::Kernels(ks)) => {
                    Step::Kernels(ks.iter().map(resolve).collect::<Result<Vec<_>, _>>()?)
                }
                _ => return Err(RuntimeError::invalid(&self.label, "a node without its plan")),
            };
            built.push((i, step));
        }
        b.dirty = !products.is_empty();
        for (i, epilogue, calls) in products {
            let node = &live.nodes[i];
            let (w, x) = (&node.reads[1], &node.reads[0]);
            let bias = node.reads.get(2).map(|r| b.addrs[r.buffer] + 4 * r.view.offset as u64);
            let y = b.addrs[node.writes[0]];
            let workspace = node.workspace.map_or((0, 0), |ws| (b.addrs[ws], b.span_bytes[ws]));
            let (wp, xp) = (b.addrs[w.buffer], b.addrs[x.buffer]);
            let ptrs: Vec<[CUdeviceptr; 3]> = calls
                .offsets
                .iter()
                .map(|&[ow, ox, oy]| [wp + 4 * ow as u64, xp + 4 * ox as u64, y + 4 * oy as u64])
                .collect();
            let key = ShapeKey {
                problem: calls.problem,
                epilogue,
                workspace: workspace.1,
                mode: self.options.compute,
                align: lt_alignment(&calls.problem, &ptrs),
            };
            let ops = LtOperands { calls: ptrs, bias, workspace };
            let step = match self.steps[i] {
                Step::Matmul(call) => {
                    self.lt.replace(call, key, ops)?;
                    Step::Matmul(call)
                }
                _ => Step::Matmul(self.lt.add(key, ops)?),
            };
            built.push((i, step));
        }
        for (i, step) in built {
            self.steps[i] = step;
        }
        for buf in &mut self.input_buffers {
            if let Some(l) = live.buffers.iter().find(|l| l.id == buf.id) {
                buf.shape = l.shape.clone();
            }
        }
        self.flops = live.nodes.iter().fold(0u64, |acc, n| acc.saturating_add(n.op.flops()));
        b.live = live;
        b.shapes = shapes;
        b.active = values;
        b.dirty = false;
        Ok(())
    }

    /// After the synchronize: the first gather, take, gather_elements or scatter_elements (in
    /// node order) whose error record holds a bad row or index, as
    /// [`RuntimeError::IndexOutOfRange`] (its op, its id and element offset in the ids buffer;
    /// rows: the table's rows or the indexed axis' length).
    fn check_indices(&mut self) -> Result<(), RuntimeError> {
        let words = self.error_host.as_mut_slice();
        let u64_at = |i: usize| {
            let lo = u64::from(words[2 * i].to_bits());
            let hi = u64::from(words[2 * i + 1].to_bits());
            lo | (hi << 32)
        };
        for (g, (op, ids, vocab)) in self.index_checks.iter().enumerate() {
            if u64_at(4 * g) == u64::MAX {
                continue;
            }
            return Err(RuntimeError::IndexOutOfRange {
                op,
                tensor: ids.clone(),
                index: u64_at(4 * g + 1) as i64,
                position: usize::try_from(u64_at(4 * g + 2)).unwrap_or(usize::MAX),
                rows: *vocab,
            });
        }
        Ok(())
    }
}

impl PreparedProgram for CudaProgram {
    fn label(&self) -> &str {
        &self.label
    }

    fn slab_bytes(&self) -> usize {
        self.slab_bytes
    }

    fn prepare_seconds(&self) -> f64 {
        self.prepare_seconds
    }

    fn execute(&mut self, inputs: &Tensors) -> Result<Tensors, RuntimeError> {
        let start = Instant::now();
        if let Some(b) = &self.symbolic {
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
            if values != b.active || b.dirty {
                self.device.bind()?;
                self.rebind(values)?;
            }
        }
        check_tensors(&self.input_buffers, TensorKind::Input, inputs)?;
        self.device.bind()?;
        let mut prof =
            ExecProfile { launches: self.launches, flops: self.flops, ..Default::default() };
        let result = self.run(inputs, &mut prof);
        if result.is_err() {
            // Leave nothing in flight that could write the slab after an error return.
            let _ = self.stream.synchronize();
            return result;
        }
        prof.total_ms = ms(start);
        if self.options.profile_recapture {
            let mut line = prof.line("CUDA", &self.label, self.prepare_seconds * 1e3);
            if let Some(k) = self.kernel_ms {
                line.push_str(&format!(" kernel_ms={k:.3}"));
            }
            eprintln!("{line}");
        }
        self.profile = Some(prof);
        result
    }

    fn last_profile(&self) -> Option<&ExecProfile> {
        self.profile.as_ref()
    }
}
