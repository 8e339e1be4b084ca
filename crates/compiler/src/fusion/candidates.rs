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
//! Extraction never recomputes a product to fuse it. egg's tree cost prices each e-class on its
//! own, so when a matmul's plain product is also an output or feeds a second op, the cheapest
//! tree for the other consumer is a second matmul with a fused epilogue. XLA and TVM refuse to
//! duplicate an expensive producer into a fusion; so does lumen: after each extraction, a fused
//! e-node that hides an e-class (its plain product, or the biased product under an activation)
//! that something else also needs is banned, and extraction runs again. Every round bans at
//! least one chosen e-node, so the loop ends.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use egg::{CostFunction, Id, Language};

use super::FusionConfig;
use super::cost::{ExtractionCost, Fusions};
use super::lang::{FusionEGraph, FusionLang, Loaded, build_hlir};
use crate::compile::{CompileOptions, llir_figures, lower_with_options, plan_llir};
use crate::error::CompileError;
use crate::hlir::Hlir;
use crate::llir::Llir;
use crate::ops::BinaryOp;
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

/// Extracts, for every e-class the program needs, the cheapest e-node `fusions` allows that
/// recomputes no product (see the module docs). Returns the choice per canonical e-class.
///
/// # Errors
/// [`CompileError::Fusion`] when no finite-cost program exists (never for an e-graph loaded
/// from a valid HLIR, whose original unfused e-nodes are always allowed).
pub fn extract(
    loaded: &Loaded,
    config: &FusionConfig,
    fusions: Fusions,
) -> Result<BTreeMap<Id, FusionLang>, CompileError> {
    let eg = &loaded.egraph;
    let root = eg.find(loaded.root);
    let written = loaded.written_canonical();
    let mut banned: BTreeSet<FusionLang> = BTreeSet::new();
    loop {
        let choice = {
            let mut cost =
                ExtractionCost::new(eg, config.cost, fusions, &banned).preferring(&written);
            let best = best_nodes(eg, &mut cost);
            if best.get(&root).is_none_or(|(c, _)| *c == u64::MAX) {
                return Err(CompileError::Fusion(
                    "no program of finite cost in the e-graph".to_string(),
                ));
            }
            let mut choice: BTreeMap<Id, FusionLang> = BTreeMap::new();
            let mut stack = vec![root];
            while let Some(class) = stack.pop() {
                if choice.contains_key(&class) {
                    continue;
                }
                let Some((_, node)) = best.get(&class) else {
                    return Err(CompileError::Fusion(format!("e-class {class} has no cost")));
                };
                stack.extend(node.children().iter().map(|&c| eg.find(c)));
                choice.insert(class, node.clone());
            }
            choice
        };
        let conflicts = recomputing(eg, &choice);
        let before = banned.len();
        banned.extend(conflicts);
        if banned.len() == before {
            return Ok(choice);
        }
    }
}

/// The cheapest e-node of every e-class under `cost`, with its cost: Knuth's generalization
/// of Dijkstra's algorithm, exact because the cost is superior (an e-node never costs less
/// than any child). A class is final the first time it leaves the heap; an e-node enters the
/// heap once all its children are final. O(E log E) for E child slots, where egg's
/// `Extractor` rescans every class until nothing changes (one pass per level of a deep
/// program). Ties go to the smaller e-class id, then the first e-node of the class.
pub fn best_nodes<CF>(eg: &FusionEGraph, cost: &mut CF) -> BTreeMap<Id, (u64, FusionLang)>
where
    CF: CostFunction<FusionLang, Cost = u64>,
{
    let classes: Vec<Id> = {
        let mut ids: Vec<Id> = eg.classes().map(|c| c.id).collect();
        ids.sort_unstable();
        ids
    };
    // Every (class, node) slot waiting on a child class, by child.
    let mut waiting_on: BTreeMap<Id, Vec<(Id, usize)>> = BTreeMap::new();
    let mut missing: BTreeMap<(Id, usize), usize> = BTreeMap::new();
    let mut heap: BinaryHeap<Reverse<(u64, Id, usize)>> = BinaryHeap::new();
    let mut best: BTreeMap<Id, (u64, FusionLang)> = BTreeMap::new();
    let node_cost = |cost: &mut CF, node: &FusionLang, best: &BTreeMap<Id, (u64, FusionLang)>| {
        cost.cost(node, |c| best.get(&eg.find(c)).map_or(u64::MAX, |(k, _)| *k))
    };
    for &class in &classes {
        for (i, node) in eg[class].nodes.iter().enumerate() {
            if node.is_leaf() {
                heap.push(Reverse((node_cost(cost, node, &best), class, i)));
            } else {
                for &c in node.children() {
                    waiting_on.entry(eg.find(c)).or_default().push((class, i));
                }
                missing.insert((class, i), node.len());
            }
        }
    }
    while let Some(Reverse((k, class, i))) = heap.pop() {
        if best.contains_key(&class) {
            continue;
        }
        let Some(node) = eg[class].nodes.get(i) else { continue };
        best.insert(class, (k, node.clone()));
        for &(parent, j) in waiting_on.get(&class).map(Vec::as_slice).unwrap_or(&[]) {
            let Some(left) = missing.get_mut(&(parent, j)) else { continue };
            *left = left.saturating_sub(1);
            if *left == 0
                && !best.contains_key(&parent)
                && let Some(pnode) = eg[parent].nodes.get(j)
            {
                heap.push(Reverse((node_cost(cost, pnode, &best), parent, j)));
            }
        }
    }
    best
}

/// The e-classes a fused e-node computes internally without writing them: its plain product,
/// and for `*_BIAS` with an activation also the biased product.
pub fn hidden_classes(eg: &FusionEGraph, node: &FusionLang) -> Vec<Id> {
    let product = |a: Id, w: Id| eg.lookup(FusionLang::Matmul([a, w]));
    match *node {
        FusionLang::LtBias([a, w, _]) | FusionLang::LtRelu([a, w]) | FusionLang::LtGelu([a, w]) => {
            product(a, w).into_iter().collect()
        }
        FusionLang::LtReluBias([a, w, b]) | FusionLang::LtGeluBias([a, w, b]) => {
            let Some(p) = product(a, w) else { return Vec::new() };
            let add = |x, y| eg.lookup(FusionLang::Binary(BinaryOp::Add, [x, y]));
            let biased = add(p, b).or_else(|| add(b, p));
            std::iter::once(p).chain(biased).collect()
        }
        _ => Vec::new(),
    }
}

/// Chosen fused e-nodes that would recompute a value: one that hides an e-class which the
/// program also reads, or which another chosen fused e-node hides too.
///
/// An e-class named by several outputs is built once per output (each output owns its
/// buffer, see `build_hlir`), so its fused e-node hides its product once per copy.
fn recomputing(eg: &FusionEGraph, choice: &BTreeMap<Id, FusionLang>) -> BTreeSet<FusionLang> {
    let mut reads: BTreeMap<Id, usize> = BTreeMap::new();
    let mut copies: BTreeMap<Id, usize> = BTreeMap::new();
    for node in choice.values() {
        for &c in node.children() {
            *reads.entry(eg.find(c)).or_default() += 1;
            if matches!(node, FusionLang::Outputs(_)) {
                *copies.entry(eg.find(c)).or_default() += 1;
            }
        }
    }
    let mut hidden_by: BTreeMap<Id, Vec<&FusionLang>> = BTreeMap::new();
    for (class, node) in choice.iter().filter(|(_, n)| n.is_fused()) {
        let times = copies.get(class).copied().unwrap_or(1).max(1);
        for hidden in hidden_classes(eg, node) {
            hidden_by.entry(hidden).or_default().extend(std::iter::repeat_n(node, times));
        }
    }
    hidden_by
        .into_iter()
        .filter(|(class, nodes)| nodes.len() + reads.get(class).copied().unwrap_or(0) > 1)
        .flat_map(|(_, nodes)| nodes.into_iter().cloned())
        .collect()
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
fn lower_policies(
    original: &Hlir,
    loaded: &Loaded,
    options: &CompileOptions,
    config: &FusionConfig,
) -> Result<Vec<Lowered>, CompileError> {
    // Checked once here rather than by every candidate's planning.
    options.validate()?;
    let mut lowered: Vec<Lowered> = Vec::new();
    for (label, fusions) in POLICIES {
        let hlir = if fusions == POLICIES[0].1 {
            original.clone()
        } else {
            let choice = extract(loaded, config, fusions)?;
            build_hlir(original, loaded, &choice)?
        };
        let llir = match lower_with_options(&hlir, options) {
            Ok(llir) => llir,
            Err(err) if label == POLICIES[0].0 => return Err(err),
            Err(err) => {
                return Err(CompileError::Fusion(format!(
                    "the {label} extraction does not compile: {err}"
                )));
            }
        };
        if lowered.iter().all(|l| l.llir != llir) {
            lowered.push(Lowered { label, hlir, llir });
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

/// The program [`enumerate`] picks, labelled `label`, planning only as many candidates as it
/// takes: the cost model reads no plan, so candidates are tried cheapest first (the first on
/// a tie, as [`enumerate`] breaks them) and the first that plans is the pick. What `compile`
/// with fusion needs; [`enumerate`] plans every candidate for `compare` and the search.
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
    let lowered = lower_policies(original, loaded, options, config)?;
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
