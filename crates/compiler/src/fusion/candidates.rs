//! Candidate enumeration: the distinct programs the saturated e-graph holds that a user could
//! want, each converted back to an HLIR, lowered, planned and priced.
//!
//! One extraction per fusion policy ([`POLICIES`]): `unfused` (the program as written, not an
//! extraction: an identical op written twice stays two ops; every extraction shares it),
//! `bias` (BIAS epilogues, activations as separate launches), `activation` (RELU/GELU epilogues
//! without bias) and `fused` (everything). Candidates whose LLIR equals an earlier one's are
//! dropped, so a program without a bias has no `bias` candidate, unless sharing alone makes
//! its extraction differ from the program as written (then `bias` is that shared program,
//! without a BIAS epilogue). This is the list the search
//! profiles; the cost model's pick is what `compile` lowers with `fuse: true`.
//!
//! Extraction ([`super::extract`]) never recomputes a product to fuse it.

use super::FusionConfig;
use super::cost::Fusions;
use super::egraph::{HlirBuilder, Loaded};
use super::extract::{Choice, ExtractionTable, extract_with};
use crate::error::CompileError;
use crate::hlir::Hlir;
use crate::llir::Llir;
use crate::options::CompileOptions;
use crate::plan::{llir_figures, lower_with_options, plan_llir};
use crate::program::CompiledProgram;

/// The extraction policies, in candidate order: label and the fused forms allowed.
pub const POLICIES: [(&str, Fusions); 4] = [
    ("unfused", Fusions { bias: false, activation: false }),
    ("bias", Fusions { bias: true, activation: false }),
    ("activation", Fusions { bias: false, activation: true }),
    ("fused", Fusions::ALL),
];

/// Candidates the planner refused, by label, with its error.
pub type Refusals = Vec<(String, CompileError)>;

/// One distinct program the e-graph holds.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// `unfused`, `bias`, `activation` or `fused` ([`POLICIES`]).
    pub label: String,
    /// The candidate's HLIR (inputs and weights in the original declaration order).
    pub hlir: Hlir,
    /// Lowered and planned; its label is `{name}-{label}`.
    pub program: CompiledProgram,
    /// [`super::cost::CostModel::program_cost`] of its figures (launch-equivalent bytes).
    pub cost: u64,
    /// Whether the cost model picks it (exactly one candidate of a list is picked).
    pub picked: bool,
}

/// One policy's extraction, lowered and not yet planned.
struct Lowered {
    label: &'static str,
    hlir: Hlir,
    llir: Llir,
}

/// Lowers every policy's extraction of the saturated `loaded` e-graph, in [`POLICIES`] order
/// (the `unfused` one is `original` itself), dropping those whose LLIR equals an earlier
/// one's. Nothing is planned yet: planning dominates with `best`, and a duplicate need not be
/// planned at all.
///
/// The policies are independent reads of one e-graph, so they run in parallel
/// ([`in_parallel`]); the results are gathered in [`POLICIES`] order, so the list, its
/// duplicates and the first error are the same as one after another.
fn lower_policies(
    original: &Hlir,
    loaded: &Loaded,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<Vec<Lowered>, CompileError> {
    // Checked once here rather than by every candidate's planning.
    options.validate()?;
    let table = ExtractionTable::new(loaded, config);
    let builder = HlirBuilder::new(original, loaded);
    lower_all(original, loaded, options, &table, &builder)
}

/// [`lower_policies`] over a prepared extraction table and HLIR builder of `loaded`.
fn lower_all(
    original: &Hlir,
    loaded: &Loaded,
    options: &CompileOptions,
    table: &ExtractionTable,
    builder: &HlirBuilder<'_>,
) -> Result<Vec<Lowered>, CompileError> {
    let one = |(label, fusions): (&'static str, Fusions)| -> Result<Lowered, CompileError> {
        let hlir = if fusions == POLICIES[0].1 {
            original.clone()
        } else {
            builder.build(&extract_with(table, loaded, fusions)?)?
        };
        match lower_with_options(&hlir, options) {
            Ok(llir) => Ok(Lowered { label, hlir, llir }),
            Err(err) if label == POLICIES[0].0 => Err(err),
            Err(err) => {
                Err(CompileError::Fusion(format!("the {label} extraction does not compile: {err}")))
            }
        }
    };
    let results = in_parallel(POLICIES.len(), |i| one(POLICIES[i]));
    let mut lowered: Vec<Lowered> = Vec::new();
    for result in results {
        let l = result?;
        if lowered.iter().all(|k| k.llir != l.llir) {
            lowered.push(l);
        }
    }
    Ok(lowered)
}

/// Lowers every policy's extraction of the saturated `loaded` e-graph (the `unfused`
/// candidate is `original` itself, exactly what `--no-fuse` compiles), drops duplicates by
/// LLIR, plans and prices the rest and marks the cheapest (the first on a tie) as picked.
/// Candidates the planner refuses (e.g. over `options.capacity`) are returned in the second
/// list with their error instead.
///
/// # Errors
/// As [`enumerate_all`], and the first candidate's error when no candidate plans.
pub fn enumerate(
    original: &Hlir,
    loaded: &Loaded,
    name: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<(Vec<Candidate>, Refusals), CompileError> {
    let (found, refused) = enumerate_all(original, loaded, name, options, config)?;
    if found.is_empty() {
        return Err(refused.into_iter().next().map(|(_, e)| e).unwrap_or(CompileError::NoOutputs));
    }
    Ok((found, refused))
}

/// [`enumerate`], except that a program whose every candidate the planner refuses is not an
/// error: the first list is then empty and the second holds every candidate with its own
/// refusal (what `lumen compare` reports when nothing fits its `--capacity`).
///
/// # Errors
/// [`CompileOptions::validate`]'s errors first; [`CompileError::Fusion`] when an extraction
/// does not convert back to a valid HLIR (a bug in a rule), and every error of lowering the
/// unfused program.
pub fn enumerate_all(
    original: &Hlir,
    loaded: &Loaded,
    name: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<(Vec<Candidate>, Refusals), CompileError> {
    let mut found: Vec<Candidate> = Vec::new();
    let mut refused: Refusals = Vec::new();
    for Lowered { label, hlir, llir } in lower_policies(original, loaded, options, config)? {
        match plan_llir(llir, &format!("{name}-{label}"), options) {
            Ok(program) => {
                let cost = config.cost.program_cost(&program.figures);
                found.push(Candidate {
                    label: label.to_string(),
                    hlir,
                    program,
                    cost,
                    picked: false,
                });
            }
            Err(err) => refused.push((label.to_string(), err)),
        }
    }
    let pick = found.iter().enumerate().min_by_key(|(i, c)| (c.cost, *i)).map(|(i, _)| i);
    if let Some(c) = pick.and_then(|i| found.get_mut(i)) {
        c.picked = true;
    }
    Ok((found, refused))
}

/// The program [`enumerate`] picks, labelled `label`, lowering and planning only as many
/// candidates as it takes. What `compile` with fusion needs; [`enumerate`] lowers and plans
/// every candidate for `compare` and the search.
///
/// Lowering is most of a candidate's cost, and most candidates cannot win, so the policies'
/// extractions come first and are lowered in order of a lower bound on their price: every
/// compute op a candidate's HLIR holds is at least one launch of its LLIR, so
/// [`CostModel::launch_bytes`](super::CostModel::launch_bytes) x its compute ops bounds its
/// [`program_cost`](super::CostModel::program_cost) from below. A candidate whose bound
/// (with its policy index, the tie-break) is above the best price found so far is never
/// lowered, nor one whose extraction equals an earlier policy's. On a 10,000-layer MLP that
/// leaves one lowering of four. When anything fails on the way (an extraction or lowering
/// error, or the pick does not plan), the answer comes from lowering every candidate
/// ([`cheapest_of_all`]), so errors and fallbacks are exactly those of [`enumerate`]'s order.
///
/// # Errors
/// As [`enumerate`]: when no candidate plans, the error of the first in [`POLICIES`] order.
pub(crate) fn cheapest(
    original: &Hlir,
    loaded: &Loaded,
    label: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<CompiledProgram, CompileError> {
    options.validate()?;
    let table = ExtractionTable::new(loaded, config);
    let builder = HlirBuilder::new(original, loaded);
    if let Some(program) =
        cheapest_by_bounds(original, loaded, label, options, config, &table, &builder)
    {
        return Ok(program);
    }
    cheapest_of_all(lower_all(original, loaded, options, &table, &builder)?, label, options, config)
}

/// The bounded search of [`cheapest`]: `None` when it cannot answer without lowering every
/// candidate (an error, or a pick the planner refuses).
fn cheapest_by_bounds(
    original: &Hlir,
    loaded: &Loaded,
    label: &str,
    options: &CompileOptions,
    config: &FusionConfig,
    table: &ExtractionTable,
    builder: &HlirBuilder<'_>,
) -> Option<CompiledProgram> {
    // Each policy's extraction (the unfused one is the program as written), in parallel.
    let choices = in_parallel(POLICIES.len(), |i| {
        (i > 0).then(|| extract_with(table, loaded, POLICIES[i].1))
    });
    let mut extracted: Vec<(usize, Option<Choice>)> = Vec::new();
    for (i, choice) in choices.into_iter().enumerate() {
        let choice = match choice {
            None => None,
            Some(Ok(choice)) => Some(choice),
            Some(Err(_)) => return None,
        };
        // An extraction equal to an earlier one lowers to the same LLIR, which loses the tie.
        if choice.is_some() && extracted.iter().any(|(_, c)| c.as_ref() == choice.as_ref()) {
            continue;
        }
        extracted.push((i, choice));
    }
    let live = crate::lower::live_nodes(original);
    let original_ops = original
        .graph
        .node_indices()
        .filter(|n| live[n.index()] && original.graph[*n].op.is_compute())
        .count();
    let mut order: Vec<(u64, usize, Option<Choice>)> = extracted
        .into_iter()
        .map(|(i, choice)| {
            let ops = match &choice {
                None => original_ops,
                Some(c) => c.values().filter(|n| n.is_kernel()).count(),
            };
            (config.cost.launch_bytes.saturating_mul(ops as u64), i, choice)
        })
        .collect();
    order.sort_by_key(|&(bound, i, _)| (bound, i));
    let mut best: Option<(u64, usize, Llir)> = None;
    for (bound, i, choice) in order {
        if best.as_ref().is_some_and(|&(cost, j, _)| (bound, i) > (cost, j)) {
            continue;
        }
        let hlir = match &choice {
            None => None,
            Some(c) => Some(builder.build(c).ok()?),
        };
        let llir = lower_with_options(hlir.as_ref().unwrap_or(original), options).ok()?;
        let cost = config.cost.program_cost(&llir_figures(&llir));
        if best.as_ref().is_none_or(|&(c, j, _)| (cost, i) < (c, j)) {
            best = Some((cost, i, llir));
        }
    }
    plan_llir(best?.2, label, options).ok()
}

/// The cheapest of every lowered candidate that plans, tried cheapest first (the first on a
/// tie, as [`enumerate`] breaks them): the cost model reads no plan, so the first that plans
/// is the pick.
///
/// # Errors
/// When no candidate plans, the error of the first in [`POLICIES`] order.
fn cheapest_of_all(
    lowered: Vec<Lowered>,
    label: &str,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<CompiledProgram, CompileError> {
    let mut order: Vec<(u64, usize)> = lowered
        .iter()
        .enumerate()
        .map(|(i, l)| (config.cost.program_cost(&llir_figures(&l.llir)), i))
        .collect();
    order.sort_unstable();
    let mut errors: Vec<Option<CompileError>> = lowered.iter().map(|_| None).collect();
    let mut lowered: Vec<Option<Lowered>> = lowered.into_iter().map(Some).collect();
    for (_, i) in order {
        let Some(l) = lowered.get_mut(i).and_then(Option::take) else { continue };
        match plan_llir(l.llir, label, options) {
            Ok(program) => return Ok(program),
            Err(err) => errors[i] = Some(err),
        }
    }
    Err(errors.into_iter().flatten().next().unwrap_or(CompileError::NoOutputs))
}

/// `task(0)`, ..., `task(count - 1)` on up to [`std::thread::available_parallelism`] scoped
/// threads, each worker taking the next undone index (so a cheap task does not leave a core
/// idle behind an expensive one), the results in index order whatever finished first. One
/// core, or one task, runs them on the calling thread. A panicking task is re-raised here.
fn in_parallel<T: Send>(count: usize, task: impl Fn(usize) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(count);
    if threads <= 1 {
        return (0..count).map(task).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            return mine;
                        }
                        mine.push((i, task(i)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}
