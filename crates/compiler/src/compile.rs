//! `compile`: the whole pipeline, DSL [`Graph`] or HLIR -> (fusion) -> LLIR -> lifetimes ->
//! `plan_slab` -> [`CompiledProgram`], with the dumps written when asked. The stages live in
//! their own modules; this one only chooses and orders them.

use crate::dsl::Graph;
use crate::error::CompileError;
use crate::hlir::Hlir;
pub use crate::options::{
    CompileOptions, LLIR_DUMP_DIR, MAX_PROGRAM_NAME_BYTES, sanitize_program_name,
    validate_program_name,
};
pub use crate::plan::{lower_with_options, plan_hlir};
use crate::program::CompiledProgram;

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
