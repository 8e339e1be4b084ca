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

/// The longest program name, in bytes: with `-activation` (the longest candidate suffix),
/// `.llir.txt` and the temporary name a dump is written under, a file name stays below the
/// 255 bytes common file systems allow.
pub const MAX_PROGRAM_NAME_BYTES: usize = 200;

/// What makes `name` unusable as a file-name stem (charset and leading `.` only), if anything.
fn stem_problem(name: &str) -> Option<String> {
    let Some(first) = name.chars().next() else { return Some("it is empty".to_string()) };
    if first == '.' {
        // `.` and `..` name directories; any other leading dot hides the dump.
        return Some("it starts with '.'".to_string());
    }
    name.chars()
        .find(|&c| !is_name_char(c))
        .map(|c| format!("{} is not allowed", crate::hlir::quoted_char(c)))
}

/// The characters of program and tensor names: ASCII letters, digits, `_`, `-`, `.`.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
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
    let problem = stem_problem(name).or_else(|| {
        (name.len() > MAX_PROGRAM_NAME_BYTES).then(|| format!("it is {} bytes long", name.len()))
    });
    match problem {
        Some(problem) => Err(CompileError::ProgramName { name: name.to_string(), problem }),
        None => Ok(()),
    }
}

/// Checks a dump label (a program name plus its suffix) as [`validate_program_name`] does,
/// without the length bound, which the suffix may pass.
pub(crate) fn validate_label(label: &str) -> Result<(), CompileError> {
    match stem_problem(label) {
        Some(problem) => Err(CompileError::ProgramName { name: label.to_string(), problem }),
        None => Ok(()),
    }
}

/// A valid program name made from any text (a file stem, a user's title): every character
/// outside ASCII letters, digits, `_`, `-`, `.` becomes `_`, as does a leading `.`; empty text
/// becomes `program`; the result is cut to [`MAX_PROGRAM_NAME_BYTES`]. Always passes
/// [`validate_program_name`]. `my model` -> `my_model`, `../x` -> `_._x`.
pub fn sanitize_program_name(text: &str) -> String {
    let mut name: String = text
        .chars()
        .enumerate()
        .map(|(i, c)| if is_name_char(c) && !(i == 0 && c == '.') { c } else { '_' })
        .take(MAX_PROGRAM_NAME_BYTES)
        .collect();
    if name.is_empty() {
        name.push_str("program");
    }
    name
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
/// [`CompileError::ProgramName`] when `name` (or `options.name`) cannot label dump files
/// ([`validate_program_name`]); [`CompileError::Alignment`] for an alignment that does not
/// suit f32 buffers ([`CompileOptions::validate`]), the shape, name and structure errors of
/// [`Hlir::validate`], [`CompileError::Plan`] when the planner refuses the lifetimes (zero
/// alignment, capacity, overflow), [`CompileError::Dump`] when a dump cannot be written.
pub fn compile_hlir(
    hlir: &Hlir,
    name: &str,
    options: &CompileOptions,
) -> Result<CompiledProgram, CompileError> {
    validate_program_name(name)?;
    let label = format!("{name}-{}", if options.fuse { "fused" } else { "unfused" });
    let program = plan_hlir(hlir, &label, options)?;
    if let Some(dir) = options.resolved_dump_dir() {
        crate::dump::write_dumps(&dir, &program)?;
    }
    Ok(program)
}

/// Lowers `hlir` as it is (with [`CompileOptions::resident_weights`] applied) and plans its
/// slab, labelled `label`; writes no dumps (the fusion candidates are planned this way, and
/// only the one compiled is dumped; [`crate::dump::write_dumps`] checks the label then).
///
/// # Errors
/// As [`compile_hlir`], without [`CompileError::Dump`] and with only `options.name` checked.
pub fn plan_hlir(
    hlir: &Hlir,
    label: &str,
    options: &CompileOptions,
) -> Result<CompiledProgram, CompileError> {
    options.validate()?;
    plan_llir(lower_with_options(hlir, options)?, label, options)
}

/// Plans an already lowered `llir` ([`lower_with_options`]) with `options`' capacity,
/// alignment and algorithm, labelled `label`, recording `options` in the program
/// ([`crate::program::ProgramOptions`]): the second half of [`plan_hlir`], for callers
/// that lowered first (the fusion candidates, deduplicated by LLIR before they are planned).
/// Does not check `options` ([`CompileOptions::validate`]).
///
/// # Errors
/// [`CompileError::Plan`] when the planner refuses the lifetimes.
pub(crate) fn plan_llir(
    mut llir: crate::Llir,
    label: &str,
    options: &CompileOptions,
) -> Result<CompiledProgram, CompileError> {
    let dag = llir.dag();
    let requests = llir.slab_buffers();
    let slab = SlabOptions {
        capacity: options.capacity,
        alignment: options.alignment,
        algorithm: options.algorithm,
        ..SlabOptions::default()
    };
    let mut plan = plan_slab(&dag, &requests, &slab);
    if requests.iter().any(|r| r.in_place_of.is_some()) {
        // Placement takes in-place offsets greedily, which can end higher than the plan
        // without marks (a fresh user found the ViT 2.5% larger): the marks stay only when
        // they do not make the slab larger, so in-place reuse never costs memory.
        let plain: Vec<_> = requests
            .iter()
            .cloned()
            .map(|r| lumen_planner::SlabBuffer { in_place_of: None, ..r })
            .collect();
        if let Ok(without) = plan_slab(&dag, &plain, &slab)
            && plan.as_ref().map_or(true, |with| without.slab_bytes < with.slab_bytes)
        {
            plan = Ok(without);
            llir.buffers.iter_mut().for_each(|b| b.in_place_of = None);
        }
    }
    let plan = plan?;
    let figures = Figures {
        slab_bytes: plan.slab_bytes,
        naive_bytes: plan.naive_bytes,
        lower_bound: plan.lower_bound,
        ..llir_figures(&llir)
    };
    Ok(CompiledProgram {
        label: label.to_string(),
        llir,
        dag,
        plan,
        figures,
        options: options.into(),
    })
}

/// The figures `llir` has before it is planned: nodes, launches, DRAM bytes and FLOPs, with
/// the plan's `slab_bytes`, `naive_bytes` and `lower_bound` left at 0. Enough for the cost
/// model ([`crate::fusion::CostModel::program_cost`]), which reads no plan.
pub(crate) fn llir_figures(llir: &crate::Llir) -> Figures {
    Figures {
        nodes: llir.nodes.len(),
        launches: llir.nodes.iter().filter(|n| n.op.is_launch()).count(),
        slab_bytes: 0,
        naive_bytes: 0,
        lower_bound: 0,
        dram_bytes: llir.dram_bytes(),
        flops: llir.nodes.iter().map(|n| n.op.flops()).fold(0u64, u64::saturating_add),
    }
}

/// Lowers `hlir` ([`lower`]) with `options.workspace_bytes` of workspace per matmul, then,
/// when [`CompileOptions::resident_weights`], extends every weight's uses to the readback
/// node ([`crate::Llir::make_weights_resident`]). What [`plan_hlir`] plans.
///
/// # Errors
/// Every error of [`lower`].
pub fn lower_with_options(
    hlir: &Hlir,
    options: &CompileOptions,
) -> Result<crate::Llir, CompileError> {
    let mut llir = lower(hlir, options.workspace_bytes)?;
    if options.resident_weights {
        llir.make_weights_resident();
    }
    if options.in_place {
        llir.mark_in_place();
    }
    Ok(llir)
}
