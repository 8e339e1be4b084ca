//! `compile`: HLIR -> LLIR -> lifetimes -> `plan_slab` -> [`CompiledProgram`].

use std::path::PathBuf;

use lumen_planner::{SlabAlgorithm, SlabOptions, plan_slab};

use crate::dsl::Graph;
use crate::error::CompileError;
use crate::hlir::Hlir;
use crate::lower::lower;
use crate::program::{CompiledProgram, Figures};

/// The environment variable naming a directory to dump every compiled program into
/// (`{label}.llir.txt`, `.llir.dot`, `.plan.txt`, `.plan.svg`), as Luminal's `LLIR_DUMP_DIR`.
pub const LLIR_DUMP_DIR: &str = "LLIR_DUMP_DIR";

/// Options of [`Graph::compile`] and [`compile_hlir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// Run the e-graph fusion before lowering (matmul + bias + activation -> one cuBLASLt
    /// epilogue) and lower the cost model's pick ([`crate::fusion`]). Default true; false
    /// lowers every op as its own launch.
    pub fuse: bool,
    /// cuBLASLt workspace per `lt_matmul`, in bytes (default 1,048,576 = 1 MiB).
    pub workspace_bytes: usize,
    /// Slab alignment in bytes: every buffer's offset and reserved size is a multiple of it.
    /// Default 256, cuBLASLt's pointer alignment, which the CUDA runtime requires of every
    /// device pointer; the CPU runtime needs only 4 (the f32 element size). Must be a power of
    /// two of at least 4 ([`CompileError::Alignment`]; 0 is the planner's
    /// [`lumen_planner::PlanError::ZeroAlignment`]): every alignment hardware asks for is a
    /// power of two, and a multiple of 4 keeps f32 elements whole. The planner itself, which
    /// knows nothing of tensors, accepts any positive alignment.
    pub alignment: usize,
    /// Largest slab in bytes the plan may use; `None` (default) = unbounded.
    pub capacity: Option<usize>,
    /// The planner's placement algorithm (default first fit, Luminal's `plan_slab`).
    pub algorithm: SlabAlgorithm,
    /// Program name for dump labels (default `program`).
    pub name: String,
    /// Directory to write dumps into; overrides `LLIR_DUMP_DIR` when set.
    pub dump_dir: Option<PathBuf>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            fuse: true,
            workspace_bytes: 1 << 20,
            alignment: 256,
            capacity: None,
            algorithm: SlabAlgorithm::FirstFit,
            name: "program".to_string(),
            dump_dir: None,
        }
    }
}

impl CompileOptions {
    /// Checks what the planner cannot know: that [`CompileOptions::alignment`] keeps f32
    /// buffers whole (a power of two of at least 4 bytes). Zero is left to the planner, so it
    /// keeps SPEC's `slab alignment must be positive`.
    ///
    /// # Errors
    /// [`CompileError::Alignment`] for a positive alignment that is not such a power of two.
    pub fn validate(&self) -> Result<(), CompileError> {
        let a = self.alignment;
        if a != 0 && (a < 4 || !a.is_power_of_two()) {
            return Err(CompileError::Alignment { alignment: a });
        }
        Ok(())
    }

    /// The dump label: `{name}-fused` or `{name}-unfused`, by [`CompileOptions::fuse`].
    pub fn label(&self) -> String {
        format!("{}-{}", self.name, if self.fuse { "fused" } else { "unfused" })
    }

    /// Where dumps go: [`CompileOptions::dump_dir`], else a non-empty `LLIR_DUMP_DIR`, else
    /// nowhere. The only place the environment variable is read.
    pub fn resolved_dump_dir(&self) -> Option<PathBuf> {
        self.dump_dir.clone().or_else(|| {
            std::env::var_os(LLIR_DUMP_DIR).filter(|v| !v.is_empty()).map(PathBuf::from)
        })
    }
}

impl Graph {
    /// Compiles the program: validation and shape inference, fusion when `options.fuse` (the
    /// cost model's pick among [`crate::fusion::candidates()`]), lowering, lifetimes and slab
    /// planning. The label is `{options.name}-fused|unfused`.
    ///
    /// # Errors
    /// The first error a DSL call recorded (a tensor of another graph), then every error of
    /// [`compile_hlir`], and with fusion those of [`crate::fusion::compile_fused`].
    pub fn compile(&self, options: &CompileOptions) -> Result<CompiledProgram, CompileError> {
        if let Some(err) = self.recorded_error() {
            return Err(err);
        }
        let hlir = self.hlir();
        if options.fuse {
            return crate::fusion::compile_fused(&hlir, &options.name, options);
        }
        compile_hlir(&hlir, &options.name, options)
    }
}

/// Lowers `hlir` as it is (no fusion) and plans its slab; `name` labels the program
/// (`{name}-fused` / `{name}-unfused` by `options.fuse`, which says which pipeline produced
/// `hlir`). Writes the dumps when [`CompileOptions::resolved_dump_dir`] names a directory.
///
/// # Errors
/// [`CompileError::Alignment`] for an alignment that does not suit f32 buffers
/// ([`CompileOptions::validate`]), the shape, name and structure errors of [`Hlir::validate`],
/// [`CompileError::Plan`] when the planner refuses the lifetimes (zero alignment, capacity,
/// overflow), [`CompileError::Dump`] when a dump cannot be written.
pub fn compile_hlir(
    hlir: &Hlir,
    name: &str,
    options: &CompileOptions,
) -> Result<CompiledProgram, CompileError> {
    let label = format!("{name}-{}", if options.fuse { "fused" } else { "unfused" });
    let program = plan_hlir(hlir, &label, options)?;
    if let Some(dir) = options.resolved_dump_dir() {
        crate::dump::write_dumps(&dir, &program)?;
    }
    Ok(program)
}

/// Lowers `hlir` as it is and plans its slab, labelled `label`; writes no dumps (the fusion
/// candidates are planned this way, and only the one compiled is dumped).
///
/// # Errors
/// As [`compile_hlir`], without [`CompileError::Dump`].
pub fn plan_hlir(
    hlir: &Hlir,
    label: &str,
    options: &CompileOptions,
) -> Result<CompiledProgram, CompileError> {
    options.validate()?;
    let llir = lower(hlir, options.workspace_bytes)?;
    let dag = llir.dag();
    let requests = llir.slab_buffers();
    let slab = SlabOptions {
        capacity: options.capacity,
        alignment: options.alignment,
        algorithm: options.algorithm,
        ..SlabOptions::default()
    };
    let plan = plan_slab(&dag, &requests, &slab)?;
    let figures = Figures {
        nodes: llir.nodes.len(),
        launches: llir.nodes.iter().filter(|n| n.op.is_launch()).count(),
        slab_bytes: plan.slab_bytes,
        naive_bytes: plan.naive_bytes,
        lower_bound: plan.lower_bound,
        dram_bytes: llir.dram_bytes(),
        flops: llir.nodes.iter().map(|n| n.op.flops()).fold(0u64, u64::saturating_add),
    };
    Ok(CompiledProgram { label: label.to_string(), llir, dag, plan, figures })
}
