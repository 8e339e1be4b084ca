//! [`CompileOptions`]: what `compile` is asked to do (fuse or not, workspace, alignment,
//! capacity, algorithm, program name, dumps, resident weights, in-place reuse), and the checks
//! on them that the planner cannot make.

use std::path::PathBuf;

use lumen_planner::SlabAlgorithm;

use crate::error::CompileError;
pub use crate::names::{MAX_PROGRAM_NAME_BYTES, sanitize_program_name};
use crate::names::{program_name_problem, stem_problem};
use crate::target::Target;

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
    /// cuBLASLt workspace per `lt_matmul`, in bytes (default 1,048,576 = 1 MiB, the CUDA
    /// target's, [`crate::Target::workspace_bytes`]). 0 gives a matmul no workspace buffer
    /// at all (what the CPU target compiles with: its matmuls use none).
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
    /// Program name, the stem of the dump labels `{name}-fused` / `{name}-unfused` (default
    /// `program`). It becomes part of file names, so [`Graph::compile`] refuses, whether or
    /// not dumps are written, a name that is not 1 to [`MAX_PROGRAM_NAME_BYTES`] bytes of
    /// ASCII letters, digits, `_`, `-`, `.` not starting with `.`
    /// ([`validate_program_name`]; [`sanitize_program_name`] makes any text such a name).
    pub name: String,
    /// Directory to write dumps into; overrides `LLIR_DUMP_DIR` when set.
    pub dump_dir: Option<PathBuf>,
    /// Keep every weight's bytes to itself for the whole execute (default false: plan_slab's
    /// Luminal semantics, where a weight lives from upload to its last reader).
    ///
    /// When true, each weight's uses also include the readback node, so the planner lets no
    /// later buffer reuse its bytes and a runtime can upload it once at prepare. The trade-off:
    /// the slab must hold every weight for the whole program (slab bytes grow by up to the
    /// weights' reserved sizes; an MLP's later activations can no longer sit where `w1` was),
    /// against weights that the plan does reuse being uploaded again on every execute (host
    /// to device bytes per execute; the CPU runtime counts them as re-uploaded weights).
    /// Only the uses and the plan change; the LLIR's nodes, launches, FLOPs and DRAM bytes do
    /// not.
    pub resident_weights: bool,
    /// Let an elementwise op write its output into an operand that dies there (in-place
    /// reuse; [`crate::Llir::mark_in_place`] marks the pairs, the planner may then place the
    /// output at the operand's offset). Default false: plan_slab's Luminal semantics, where a
    /// node's inputs and outputs never alias, and every golden plan. `lumen run` turns it on
    /// (`--no-in-place` turns it off); `compile` and `compare` take `--in-place`.
    pub in_place: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            fuse: true,
            workspace_bytes: crate::target::CUDA_WORKSPACE_BYTES,
            alignment: crate::target::SLAB_ALIGNMENT,
            capacity: None,
            algorithm: SlabAlgorithm::FirstFit,
            name: "program".to_string(),
            dump_dir: None,
            resident_weights: false,
            in_place: false,
        }
    }
}

/// Checks that `name` can be the stem of dump file names (`{name}-fused.llir.txt`, ...) and
/// never a path: 1 to [`MAX_PROGRAM_NAME_BYTES`] bytes of ASCII letters, digits, `_`, `-` and
/// `.`, not starting with `.`. So `../x`, `/tmp/x` and `sub/dir` are refused, as are names
/// a shell or a file system would treat specially (spaces, `\`, control characters, `.hidden`).
/// The rule of Luminal's `LLIR_DUMP_DIR` labels, which are Rust identifiers, widened to the
/// `-` and `.` of file names.
///
/// # Errors
/// [`CompileError::ProgramName`] saying what is wrong.
pub fn validate_program_name(name: &str) -> Result<(), CompileError> {
    match program_name_problem(name) {
        Some(problem) => Err(CompileError::ProgramName { name: name.to_string(), problem }),
        None => Ok(()),
    }
}

/// Checks a dump label (a program name plus its suffix) as [`validate_program_name`] does,
/// without the length bound, which the suffix may pass.
///
/// # Errors
/// [`CompileError::ProgramName`] saying what is wrong.
pub(crate) fn validate_label(label: &str) -> Result<(), CompileError> {
    match stem_problem(label) {
        Some(problem) => Err(CompileError::ProgramName { name: label.to_string(), problem }),
        None => Ok(()),
    }
}

impl CompileOptions {
    /// Checks what the planner cannot know: that [`CompileOptions::alignment`] keeps f32
    /// buffers whole (a power of two of at least 4 bytes), and that
    /// [`CompileOptions::name`] can label dump files. Zero alignment is left to the planner,
    /// so it keeps plan_slab's `slab alignment must be positive`.
    ///
    /// # Errors
    /// [`CompileError::Alignment`] for a positive alignment that is not such a power of two;
    /// [`CompileError::ProgramName`] for a name [`validate_program_name`] refuses.
    pub fn validate(&self) -> Result<(), CompileError> {
        let a = self.alignment;
        if a != 0 && (a < 4 || !a.is_power_of_two()) {
            return Err(CompileError::Alignment { alignment: a });
        }
        validate_program_name(&self.name)
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

impl Target {
    /// [`CompileOptions::default`] with this target's workspace and alignment.
    pub fn options(self) -> CompileOptions {
        CompileOptions {
            workspace_bytes: self.workspace_bytes(),
            alignment: self.alignment(),
            ..CompileOptions::default()
        }
    }
}
