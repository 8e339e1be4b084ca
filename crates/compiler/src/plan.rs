//! Lowering and planning: an HLIR lowered to the LLIR ([`crate::lower::lower`]) with the
//! options' workspace, resident weights and in-place marks, its lifetimes handed to
//! `lumen_planner::plan_slab`, and the [`CompiledProgram`] with its figures. No fusion and no
//! dumps: [`crate::compile`] and the fusion candidates call this.

use lumen_planner::{SlabOptions, plan_slab};

use crate::error::CompileError;
use crate::hlir::Hlir;
use crate::llir::Llir;
use crate::lower::lower;
use crate::options::CompileOptions;
use crate::program::{CompiledProgram, Figures};

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
    mut llir: Llir,
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
pub(crate) fn llir_figures(llir: &Llir) -> Figures {
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
/// node ([`Llir::make_weights_resident`]). What [`plan_hlir`] plans.
///
/// # Errors
/// Every error of [`lower`].
pub fn lower_with_options(hlir: &Hlir, options: &CompileOptions) -> Result<Llir, CompileError> {
    let mut llir = lower(hlir, options.workspace_bytes)?;
    if options.resident_weights {
        llir.make_weights_resident();
    }
    if options.in_place {
        llir.mark_in_place();
    }
    Ok(llir)
}
