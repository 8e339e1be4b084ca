//! lumen-runtime: runs compiled programs inside their planned slab.
//!
//! - [`Runtime`] / [`PreparedProgram`]: prepare once (slab, kernels, weights), execute many
//!   times (inputs in, outputs out). Object-safe; pick a backend with [`runtime_by_name`].
//! - [`CpuRuntime`]: the default backend. ONE 256-byte-aligned allocation of `slab_bytes`;
//!   every buffer is the range at its planned offset (f32 inputs nothing writes into are
//!   read from the caller's tensors in place); a matmul with a weight reads a copy packed
//!   once at prepare, run by lumen's blocked loops around the `gemm` crate's micro-kernels
//!   with the cuBLASLt-style epilogue fused ([`mod@packed`]), any other matmul is the `gemm`
//!   crate with the same epilogue and a GEMV path for a few rows ([`mod@gemm`]); the matmul,
//!   maps and reductions split over [`CpuOptions::threads`] ([`mod@threads`], on a team of
//!   spinning workers, [`mod@team`]); memory-debug
//!   (plan verification, NaN poisoning) and no-reuse modes.
//! - [`cpu_peak`]: the CPU's peak FLOP/s from its instruction set, clock and threads.
//! - [`isa`]: running a loop compiled for the widest instruction set the CPU has.
//! - [`layout`]: the checks every runtime runs on a compiled program before touching memory.
//! - [`node_profile`]: where an execute's time goes, node by node and per op class (the
//!   medians of [`ExecProfile::node_ms`], on when [`PreparedProgram::time_nodes`] is).
//! - [`phases`]: phase timing (graph_compile, search, prepare, execute), shares, achieved
//!   FLOP/s against a stated peak.
//! - [`reference`](mod@reference): a naive f64 interpreter of the LLIR, the oracle of the
//!   numeric tests.
//! - [`mod@search`]: Luminal's search phase: profile the fusion candidates on a runtime in
//!   interleaved rounds, keep the cost model's pick unless another candidate is faster with
//!   confidence (a sign test), report per-candidate medians, the decision and the break-even.
//! - [`tuning`]: the tuning cache, a search's choice stored by program, runtime and machine.
//! - [`mod@winograd`]: Winograd F(2x2, 3x3) for the dense 3x3 stride-1 convolutions: 16
//!   products of transformed weights and input tiles on the packed path's micro-kernels.
//! - [`mod@env`]: the `LUMINAL_*` switches, read in one place.
//! - `cuda` (feature `cuda`): the CUDA runtime: one device slab, cuBLASLt matmuls with fused
//!   epilogues, NVRTC kernels, one synchronize per execute; libraries loaded at run time.
//!
//! All tensors are row-major f32.

#![warn(missing_docs)]

pub mod conv;
pub mod cpu;
pub mod cpu_peak;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod env;
pub mod error;
pub mod gemm;
pub mod isa;
pub mod kernels;
pub mod layout;
pub mod node_profile;
pub mod packed;
pub mod phases;
pub mod reference;
pub mod runtime;
pub mod search;
pub mod team;
pub mod threads;
pub mod tuning;
pub mod winograd;

pub use cpu::{CpuOptions, CpuProgram, CpuRuntime};
pub use env::RuntimeEnv;
pub use error::{RuntimeError, TensorKind};
pub use layout::{Placement, SlabLayout};
/// Host tensors, shared with the front ends: see [`lumen_compiler::tensor`].
pub use lumen_compiler::tensor;
pub use lumen_compiler::tensor::{HostTensor, TensorError, Tensors};
pub use node_profile::NodeProfile;
pub use phases::{Achieved, Peak, Phase, PhaseReport, PhaseTimes};
pub use runtime::{ExecProfile, PreparedProgram, Runtime, check_tensors};
pub use search::{
    BreakEven, CandidateStatus, CandidateTiming, Progress, SearchError, SearchOptions,
    SearchReport, search,
};
pub use threads::Threads;

/// Runtime names [`runtime_by_name`] accepts, in `--help` order.
pub const RUNTIME_NAMES: &[&str] = &["cpu", "cuda"];

/// The runtime called `name` (`cpu` or `cuda`), configured from the environment
/// ([`RuntimeEnv`]).
///
/// # Errors
/// [`RuntimeError::UnknownRuntime`] for another name; [`RuntimeError::NoCudaDevice`] for
/// `cuda` when the build has no CUDA runtime or the machine has no usable device.
pub fn runtime_by_name(name: &str) -> Result<Box<dyn Runtime>, RuntimeError> {
    match name {
        "cpu" => Ok(Box::new(CpuRuntime::from_env())),
        "cuda" => cuda_runtime(),
        other => Err(RuntimeError::UnknownRuntime { name: other.to_string() }),
    }
}

/// [`runtime_by_name`] with the CPU runtime's worker threads set to `threads`
/// ([`CpuOptions::threads`]; `None` = every core). The CUDA runtime has no such option:
/// `threads` is ignored there (the CLI refuses `--threads` with it).
///
/// # Errors
/// As [`runtime_by_name`].
pub fn runtime_with_threads(
    name: &str,
    threads: Option<usize>,
) -> Result<Box<dyn Runtime>, RuntimeError> {
    match name {
        "cpu" => Ok(Box::new(CpuRuntime::new(CpuOptions { threads, ..CpuOptions::from_env() }))),
        other => runtime_by_name(other),
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_runtime() -> Result<Box<dyn Runtime>, RuntimeError> {
    Err(RuntimeError::NoCudaDevice {
        reason: "lumen was built without the `cuda` feature".to_string(),
    })
}

// Opening the device checks for the libraries and a GPU first, so a machine without them gets
// NoCudaDevice, never a panic.
#[cfg(feature = "cuda")]
fn cuda_runtime() -> Result<Box<dyn Runtime>, RuntimeError> {
    Ok(Box::new(cuda::CudaRuntime::from_env()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_compile_for_their_target_and_report_threads() {
        use lumen_compiler::Target;
        assert_eq!(CpuRuntime::default().target(), Target::Cpu);
        let one = runtime_with_threads("cpu", Some(1)).map(|r| (r.target(), r.threads()));
        assert_eq!(one.ok(), Some((Target::Cpu, 1)));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(runtime_with_threads("cpu", None).map(|r| r.threads()).ok(), Some(cores));
        assert!(runtime_with_threads("tpu", Some(1)).is_err());
    }

    #[test]
    fn runtime_names() {
        assert_eq!(runtime_by_name("cpu").map(|r| r.name()).ok(), Some("cpu"));
        let err = runtime_by_name("tpu").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("unknown runtime `tpu` (expected cpu or cuda)"));
        #[cfg(not(feature = "cuda"))]
        assert_eq!(
            runtime_by_name("cuda").err().map(|e| e.to_string()).as_deref(),
            Some("no CUDA device: lumen was built without the `cuda` feature")
        );
    }
}
