//! Extraction: the cheapest program a fusion policy allows, chosen from the saturated e-graph.
//!
//! Every e-class gets its cheapest e-node under the cost model ([`super::cost`]) by Knuth's
//! generalization of Dijkstra's algorithm ([`best_nodes`]); the choice is read from the root
//! down.
//!
//! Extraction never recomputes a product to fuse it. egg's tree cost prices each e-class on its
//! own, so when a matmul's plain product is also an output or feeds a second op, the cheapest
//! tree for the other consumer is a second matmul with a fused epilogue. XLA and TVM refuse to
//! duplicate an expensive producer into a fusion; so does lumen: after each extraction, a fused
//! e-node that hides an e-class (its plain product, or the biased product under an activation)
//! that something else also needs is banned, and extraction runs again. Every round bans at
//! least one chosen e-node, so the loop ends.
//!
//! Several policies extract from one e-graph, each possibly several times, so what does not
//! depend on the policy is computed once in an [`ExtractionTable`]: the e-classes and e-nodes
//! as dense arrays, each e-node's own score and whether the program wrote it. An extraction
//! over the table then touches no hash map and no e-node comparison (the 10,000-layer MLP's
//! three extractions went from ~600 ms to a fraction of it); [`best_nodes`] over egg's
//! `CostFunction` stays as the definition the table is tested against.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use egg::{CostFunction, Id, Language};

use super::FusionConfig;
use super::cost::{Fusions, add_child, own_cost, own_score};
use super::egraph::{FusionEGraph, Loaded};
use super::lang::FusionLang;
use crate::conv::ConvEpilogue;
use crate::error::CompileError;
use crate::ops::BinaryOp;

/// An extraction: the chosen e-node of every e-class the program needs (canonical ids).
pub type Choice = BTreeMap<Id, FusionLang>;

/// The policy-independent facts of a saturated e-graph's extraction, as dense arrays: e-class
/// `c` (the `c`-th canonical e-class by id) owns e-nodes `first[c]..first[c + 1]`, and e-node
/// `s` reads the classes `children[child_start[s]..child_start[s + 1]]`.
#[derive(Debug)]
pub struct ExtractionTable {
    /// Canonical e-class ids, ascending; the position is the dense class index.
    classes: Vec<Id>,
    /// Dense index of each canonical e-class, by `usize::from(id)` (`u32::MAX` elsewhere).
    dense: Vec<u32>,
    /// First e-node slot of each class; one more entry than classes.
    first: Vec<usize>,
    /// Per e-node slot: its score before children with the penalty for an e-node the program
    /// did not write ([`own_score`] when usable), `None` for an ill-shaped e-node.
    score: Vec<Option<u64>>,
    /// Per e-node slot: the program wrote it (always allowed, whatever the policy).
    written: Vec<bool>,
    /// Per e-node slot: the fused forms it uses ([`FusionLang::fused_kinds`]).
    fused: Vec<(bool, bool)>,
    /// Start of each slot's children in `children`; one more entry than slots.
    child_start: Vec<usize>,
    /// Dense class index of every child slot.
    children: Vec<u32>,
    /// Per class: the (slot, child position) pairs waiting on it, as a CSR over `waiting`.
    waiting_start: Vec<usize>,
    /// Parent slots, one per child occurrence.
    waiting: Vec<u32>,
}

impl ExtractionTable {
    /// The table of `loaded`'s e-graph (rebuilt) under `config`'s cost model, preferring the
    /// e-nodes the program wrote ([`super::cost::ExtractionCost::preferring`]).
    pub fn new(loaded: &Loaded, config: &FusionConfig) -> Self {
        let eg = &loaded.egraph;
        let written_set = loaded.written_canonical();
        let mut classes: Vec<Id> = eg.classes().map(|c| c.id).collect();
        classes.sort_unstable();
        let top = classes.last().map_or(0, |&c| usize::from(c) + 1);
        let mut dense = vec![u32::MAX; top];
        for (i, &c) in classes.iter().enumerate() {
            dense[usize::from(c)] = i as u32;
        }
        let mut table = ExtractionTable {
            first: Vec::with_capacity(classes.len() + 1),
            score: Vec::new(),
            written: Vec::new(),
            fused: Vec::new(),
            child_start: vec![0],
            children: Vec::new(),
            waiting_start: Vec::new(),
            waiting: Vec::new(),
            classes,
            dense,
        };
        for &class in &table.classes {
            table.first.push(table.score.len());
            for node in &eg[class].nodes {
                let written = written_set.contains(node);
                let own = own_cost(eg, class, node);
                table.score.push(own.map(|own| own_score(config.cost, Some(own), true, !written)));
                table.written.push(written);
                table.fused.push(node.fused_kinds());
                for &c in node.children() {
                    table.children.push(table.dense[usize::from(eg.find(c))]);
                }
                table.child_start.push(table.children.len());
            }
        }
        table.first.push(table.score.len());
        // Parents by child class, in slot order (counting sort).
        let mut count = vec![0usize; table.classes.len() + 1];
        for &c in &table.children {
            count[c as usize + 1] += 1;
        }
        for i in 1..count.len() {
            count[i] += count[i - 1];
        }
        table.waiting_start = count.clone();
        table.waiting = vec![0; table.children.len()];
        for slot in 0..table.score.len() {
            for k in table.child_start[slot]..table.child_start[slot + 1] {
                let c = table.children[k] as usize;
                table.waiting[count[c]] = slot as u32;
                count[c] += 1;
            }
        }
        table
    }

    /// The cheapest cost of every canonical e-class under `fusions` with nothing banned, as
    /// [`best_nodes`] with [`super::cost::ExtractionCost::preferring`] the written e-nodes
    /// computes it (`u64::MAX`: no usable program). What the first round of an extraction
    /// starts from; the tests check the two agree.
    pub fn costs(&self, fusions: Fusions) -> BTreeMap<Id, u64> {
        let banned = vec![false; self.score.len()];
        let best = self.best(fusions, &banned);
        self.classes.iter().zip(best).filter_map(|(&id, b)| Some((id, b?.0))).collect()
    }

    /// The class that owns e-node `slot`.
    fn class_of_slot(&self, slot: usize) -> usize {
        self.first.partition_point(|&f| f <= slot) - 1
    }

    /// The cheapest e-node slot of every dense class under `fusions` with the `banned` slots
    /// never chosen, and its cost; `None` for a class no finite or infinite choice reaches.
    /// Exactly [`best_nodes`] with [`super::cost::ExtractionCost`], ties included (smaller
    /// e-class id, then the first e-node of the class).
    fn best(&self, fusions: Fusions, banned: &[bool]) -> Vec<Option<(u64, usize)>> {
        let slots = self.score.len();
        let mut best: Vec<Option<(u64, usize)>> = vec![None; self.classes.len()];
        let mut missing: Vec<usize> =
            (0..slots).map(|s| self.child_start[s + 1] - self.child_start[s]).collect();
        let mut heap: BinaryHeap<Reverse<(u64, u32, u32)>> = BinaryHeap::new();
        let cost_of = |slot: usize, best: &[Option<(u64, usize)>]| -> u64 {
            let usable = (self.written[slot] || {
                let (additive, activation) = self.fused[slot];
                (!additive || fusions.bias) && (!activation || fusions.activation)
            }) && !banned[slot];
            let own = match self.score[slot] {
                Some(score) if usable => score,
                _ => return u64::MAX,
            };
            self.children[self.child_start[slot]..self.child_start[slot + 1]]
                .iter()
                .fold(own, |sum, &c| add_child(sum, best[c as usize].map_or(u64::MAX, |b| b.0)))
        };
        let push = |heap: &mut BinaryHeap<_>, class: usize, slot: usize, cost: u64| {
            heap.push(Reverse((cost, class as u32, (slot - self.first[class]) as u32)));
        };
        for class in 0..self.classes.len() {
            let slots = self.first[class]..self.first[class + 1];
            for slot in slots.filter(|&s| missing[s] == 0) {
                push(&mut heap, class, slot, cost_of(slot, &best));
            }
        }
        while let Some(Reverse((k, class, i))) = heap.pop() {
            let class = class as usize;
            if best[class].is_some() {
                continue;
            }
            best[class] = Some((k, self.first[class] + i as usize));
            for &parent in &self.waiting[self.waiting_start[class]..self.waiting_start[class + 1]] {
                let parent = parent as usize;
                missing[parent] -= 1;
                let owner = self.class_of_slot(parent);
                if missing[parent] == 0 && best[owner].is_none() {
                    push(&mut heap, owner, parent, cost_of(parent, &best));
                }
            }
        }
        best
    }
}

/// Extracts, for every e-class the program needs, the cheapest e-node `fusions` allows that
/// recomputes no product (see the module docs). Returns the choice per canonical e-class.
/// Builds an [`ExtractionTable`]; [`extract_with`] reuses one across policies.
///
/// # Errors
/// [`CompileError::Fusion`] when no finite-cost program exists (never for an e-graph loaded
/// from a valid HLIR, whose original unfused e-nodes are always allowed).
pub fn extract(
    loaded: &Loaded,
    config: &FusionConfig,
    fusions: Fusions,
) -> Result<Choice, CompileError> {
    extract_with(&ExtractionTable::new(loaded, config), loaded, fusions)
}

/// [`extract`] over a prepared `table` of `loaded` (built with the same e-graph).
///
/// # Errors
/// As [`extract`].
pub fn extract_with(
    table: &ExtractionTable,
    loaded: &Loaded,
    fusions: Fusions,
) -> Result<Choice, CompileError> {
    let eg = &loaded.egraph;
    let root = eg.find(loaded.root);
    let root_dense = table.dense.get(usize::from(root)).copied().unwrap_or(u32::MAX) as usize;
    let mut banned = vec![false; table.score.len()];
    loop {
        let best = table.best(fusions, &banned);
        if best.get(root_dense).copied().flatten().is_none_or(|(c, _)| c == u64::MAX) {
            return Err(CompileError::Fusion(
                "no program of finite cost in the e-graph".to_string(),
            ));
        }
        let mut choice = Choice::new();
        let mut stack = vec![root_dense];
        while let Some(class) = stack.pop() {
            let id = table.classes[class];
            if choice.contains_key(&id) {
                continue;
            }
            let Some((_, slot)) = best[class] else {
                return Err(CompileError::Fusion(format!("e-class {id} has no cost")));
            };
            stack.extend(
                table.children[table.child_start[slot]..table.child_start[slot + 1]]
                    .iter()
                    .map(|&c| c as usize),
            );
            choice.insert(id, eg[id].nodes[slot - table.first[class]].clone());
        }
        let conflicts = recomputing(eg, &choice);
        let mut more = false;
        for node in &conflicts {
            // A banned e-node is banned wherever it appears (hash-consing: in its one class).
            let Some(class) = eg.lookup(node.clone()) else { continue };
            let class = table.dense[usize::from(class)] as usize;
            for (i, n) in eg[table.classes[class]].nodes.iter().enumerate() {
                let slot = table.first[class] + i;
                if n == node && !banned[slot] {
                    banned[slot] = true;
                    more = true;
                }
            }
        }
        if !more {
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
        FusionLang::Op(..) => {
            // A convolution hides itself without its fused residual and activation, and with
            // both, also the residual sum before the activation.
            let Some((spec, e, ids)) = node.conv_parts() else { return Vec::new() };
            if !(e.residual || e.activation.is_some()) {
                return Vec::new();
            }
            let plain_ids = if e.residual { &ids[..ids.len() - 1] } else { ids };
            let plain = ConvEpilogue { residual: false, activation: None, ..e };
            let mut hidden: Vec<Id> =
                eg.lookup(FusionLang::conv(spec, plain, plain_ids)).into_iter().collect();
            if e.residual && e.activation.is_some() {
                let summed = ConvEpilogue { activation: None, ..e };
                hidden.extend(eg.lookup(FusionLang::conv(spec, summed, ids)));
            }
            hidden
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
