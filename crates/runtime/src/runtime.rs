//! The runtime traits: a [`Runtime`] prepares a compiled program once; the
//! [`PreparedProgram`] it returns executes it many times.
//!
//! The split is Luminal's (compile once, run many) and CUDA's (allocate, upload weights and
//! build kernels up front so an execute is only uploads, launches and a readback). Both traits
//! are object-safe so a caller can pick a backend at run time (`--runtime cpu|cuda`) and a
//! search can prepare several candidates side by side.

use lumen_compiler::{BufferRole, CompiledProgram, LlirBuffer, Target};
use serde::Serialize;

use crate::error::TensorKind;
use crate::phases::Peak;
use crate::{HostTensor, RuntimeError, Tensors};

/// A backend that turns compiled programs into runnable ones.
pub trait Runtime {
    /// Short name: `cpu`, `cuda`. Also the prefix of its profile line (`CPU_EXEC_PROFILE`).
    fn name(&self) -> &'static str;

    /// The peak throughput the phase report compares against, in FLOP/s, with its basis.
    fn peak(&self) -> Peak;

    /// The compile target of the programs this runtime runs ([`Target::for_runtime`] of its
    /// name): what a program compiled for it reserves (the CPU's matmuls need no cuBLASLt
    /// workspace).
    fn target(&self) -> Target {
        Target::for_runtime(self.name())
    }

    /// Host threads an execute runs on (the CPU runtime's worker threads; 1 by default, the
    /// thread that launches a GPU's kernels).
    fn threads(&self) -> usize {
        1
    }

    /// How the runtime's worker threads wait between kernels (the CPU runtime's team,
    /// [`crate::team`]); `None` when it has none.
    fn worker_wait(&self) -> Option<crate::team::WorkerWait> {
        None
    }

    /// What a measured timing depends on besides the program and the host machine
    /// ([`crate::tuning::machine`]): the runtime's name, its options that change how fast a
    /// program runs, and its device. Part of the tuning cache's key ([`crate::tuning`]), so a
    /// choice measured under other options or on another device is never reused. The default
    /// is the name alone.
    fn tuning_identity(&self) -> String {
        self.name().to_string()
    }

    /// Prepares `program`: checks it, allocates its slab (`program.plan.slab_bytes`, or more
    /// in a no-reuse mode), sets up kernels and uploads `weights` (every buffer of role
    /// `Weight`, by name, shapes exactly as declared).
    ///
    /// # Errors
    /// [`RuntimeError::InvalidProgram`] for an inconsistent program; `Missing`, `Unexpected`
    /// or `ShapeMismatch` for weights that do not match the program; `Alloc` when the slab
    /// cannot be allocated; backend errors (no device, driver failures).
    fn prepare(
        &self,
        program: &CompiledProgram,
        weights: &Tensors,
    ) -> Result<Box<dyn PreparedProgram>, RuntimeError>;
}

/// A program ready to run on one backend; owns its slab.
pub trait PreparedProgram {
    /// The compiled program's label (e.g. `linear-relu-unfused`).
    fn label(&self) -> &str;

    /// Bytes of slab this preparation allocated.
    fn slab_bytes(&self) -> usize;

    /// Seconds `prepare` took (slab allocation, checks, weight upload).
    fn prepare_seconds(&self) -> f64;

    /// Runs the program once: uploads `inputs` (every buffer of role `Input`, by name), runs
    /// every node in order, and returns the outputs read back, named as the program names them,
    /// with their declared shapes (row-major f32).
    ///
    /// Output order is buffer order: the order of the output buffers in `program.llir.buffers`,
    /// which the readback node reads in. That is the LLIR's canonical order (outputs sorted by
    /// the canonical number of the node that produces them), **not** the order the outputs
    /// were declared in the DSL: declaring `a` before `z` can still return `z` first, and the
    /// same graph declared in another order returns the same order. Look outputs up by name
    /// (`outputs["y"]`, or `outputs.get("y")` for an `Option`) rather than by position; the
    /// order is deterministic (an `IndexMap`), so iterating is stable across runs and runtimes.
    ///
    /// ```
    /// # use lumen_compiler::{CompileOptions, Graph};
    /// # use lumen_runtime::{CpuRuntime, HostTensor, Runtime, Tensors};
    /// let mut cx = Graph::new();
    /// let x = cx.input("x", [1, 2]);
    /// x.relu().output("a"); // declared first, yet the canonical order may put `z` first
    /// x.gelu().output("z");
    /// let program = cx.compile(&CompileOptions::default())?;
    /// let mut prepared = CpuRuntime::default().prepare(&program, &Tensors::new())?;
    /// let inputs: Tensors =
    ///     [("x".to_string(), HostTensor::new([1, 2], vec![-1.0, 2.0])?)].into_iter().collect();
    /// let outputs = prepared.execute(&inputs)?;
    /// let order: Vec<&str> = program
    ///     .llir
    ///     .buffers
    ///     .iter()
    ///     .filter(|b| b.role == lumen_compiler::BufferRole::Output)
    ///     .map(|b| b.id.as_str())
    ///     .collect();
    /// assert_eq!(outputs.keys().map(String::as_str).collect::<Vec<_>>(), order);
    /// assert_eq!(outputs["a"].data(), &[0.0, 2.0]); // by name, whatever the order
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// `Missing`, `Unexpected` or `ShapeMismatch` for inputs that do not match the program;
    /// backend errors.
    fn execute(&mut self, inputs: &Tensors) -> Result<Tensors, RuntimeError>;

    /// The profile of the latest successful execute; `None` before the first.
    fn last_profile(&self) -> Option<&ExecProfile>;

    /// Bytes of host memory besides the slab that prepare spent on weights packed for the
    /// GEMM (the CPU runtime's [`crate::packed`]); 0 where nothing is packed.
    fn packed_weight_bytes(&self) -> usize {
        0
    }

    /// Bytes of inputs an execute reads from the caller's tensors in place instead of copying
    /// them into the slab (the CPU runtime's f32 inputs that nothing writes into); they are
    /// not in [`ExecProfile::upload_bytes`]. 0 where every input is copied.
    fn input_bytes_read_in_place(&self) -> usize {
        0
    }

    /// Turns per-node timing on or off for the following executes: each fills
    /// [`ExecProfile::node_ms`] (two clock reads per node, about 50 ns). Returns whether this
    /// runtime times its nodes: the CPU runtime does; CUDA does not yet (a kernel's time there
    /// needs an event pair around each launch), and its executes leave `node_ms` empty.
    fn time_nodes(&mut self, on: bool) -> bool {
        let _ = on;
        false
    }

    /// A copy of state `name` ([`lumen_compiler::Graph::state`]) as it stands after the latest
    /// execute, at its bound shape (rows past those written hold zeros, or NaN under memory
    /// debug); `None` for a name that is not a state or a runtime that keeps none.
    fn state(&self, name: &str) -> Option<HostTensor> {
        let _ = name;
        None
    }
}

/// Timings and counts of one execute. Times in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecProfile {
    /// Wall time of the whole execute, checks included, ms.
    pub total_ms: f64,
    /// Host-to-slab copies of inputs (and weights whose bytes the plan reuses), ms.
    pub upload_ms: f64,
    /// Kernels, ms (on the CPU: the kernels themselves; on CUDA: enqueueing them).
    pub launch_ms: f64,
    /// Waiting for the device, ms (0 on the CPU: kernels run synchronously).
    pub sync_ms: f64,
    /// Slab-to-host copies of the outputs, ms.
    pub readback_ms: f64,
    /// NaN-filling dead buffers in memory-debug mode, ms.
    pub poison_ms: f64,
    /// Kernel launches.
    pub launches: usize,
    /// FLOP the kernels performed.
    pub flops: u64,
    /// Bytes copied host-to-slab.
    pub upload_bytes: usize,
    /// Bytes copied slab-to-host.
    pub readback_bytes: usize,
    /// Wall time of each LLIR node of this execute, ms, by node index (the upload and the
    /// readback included; a node's time is its kernel's, from before its first worker starts
    /// to after its last one ends). Empty unless node timing is on
    /// ([`PreparedProgram::time_nodes`]); what ONNX Runtime's `enable_profiling` and TVM's
    /// debug executor report per operator.
    pub node_ms: Vec<f64>,
}

impl ExecProfile {
    /// The `LUMINAL_CUDA_PROFILE_RECAPTURE` line: `{PREFIX}_EXEC_PROFILE` then `key=value`
    /// fields, times in ms with 3 decimals, e.g.
    /// `CPU_EXEC_PROFILE label=mlp-unfused total_ms=0.120 prepare_ms=0.800 upload_ms=0.010
    /// launch_ms=0.100 sync_ms=0.000 readback_ms=0.002 poison_ms=0.000 launches=5
    /// flops=123456 upload_bytes=4096 readback_bytes=640 gflops=1.029`.
    pub fn line(&self, prefix: &str, label: &str, prepare_ms: f64) -> String {
        let label: String =
            label.chars().map(|c| if c.is_whitespace() || c == '=' { '_' } else { c }).collect();
        let gflops =
            if self.total_ms > 0.0 { self.flops as f64 / (self.total_ms * 1e6) } else { 0.0 };
        format!(
            "{prefix}_EXEC_PROFILE label={label} total_ms={:.3} prepare_ms={prepare_ms:.3} \
             upload_ms={:.3} launch_ms={:.3} sync_ms={:.3} readback_ms={:.3} poison_ms={:.3} \
             launches={} flops={} upload_bytes={} readback_bytes={} gflops={gflops:.3}",
            self.total_ms,
            self.upload_ms,
            self.launch_ms,
            self.sync_ms,
            self.readback_ms,
            self.poison_ms,
            self.launches,
            self.flops,
            self.upload_bytes,
            self.readback_bytes,
        )
    }
}

/// Checks named tensors against the buffers of one role among `buffers` (`Input` for
/// execute, `Weight` for prepare): each declared one present with its exact shape, nothing
/// extra. Declared order is buffer order, so the first error is deterministic.
///
/// # Errors
/// [`RuntimeError::Missing`], then [`RuntimeError::ShapeMismatch`] for the first declared
/// tensor that is wrong, else [`RuntimeError::Unexpected`] for the first extra name given.
pub fn check_tensors(
    buffers: &[LlirBuffer],
    kind: TensorKind,
    given: &Tensors,
) -> Result<(), RuntimeError> {
    let role = match kind {
        TensorKind::Input => BufferRole::Input,
        TensorKind::Weight => BufferRole::Weight,
    };
    let declared = || buffers.iter().filter(move |b| b.role == role);
    for buf in declared() {
        let Some(t) = given.get(&buf.id) else {
            return Err(RuntimeError::Missing {
                kind,
                name: buf.id.clone(),
                shape: buf.shape.clone(),
            });
        };
        if t.shape() != buf.shape.as_slice() {
            return Err(RuntimeError::ShapeMismatch {
                kind,
                name: buf.id.clone(),
                expected: buf.shape.clone(),
                got: t.shape().to_vec(),
            });
        }
        if t.dtype() != buf.dtype {
            return Err(RuntimeError::DTypeMismatch {
                kind,
                name: buf.id.clone(),
                expected: buf.dtype,
                got: t.dtype(),
            });
        }
    }
    if let Some(name) = given.keys().find(|name| !declared().any(|b| &b.id == *name)) {
        return Err(RuntimeError::Unexpected { kind, name: name.clone() });
    }
    Ok(())
}
