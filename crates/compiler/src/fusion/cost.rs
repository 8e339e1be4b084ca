//! The cost model: kernel launches and DRAM bytes, as one integer in bytes.
//!
//! A launch costs [`CostModel::launch_bytes`] (the DRAM traffic that takes as long as one
//! launch's fixed overhead), every byte a kernel reads or writes costs one, and every e-node
//! costs one more so no cost is zero. The same formula prices an e-node during extraction
//! ([`ExtractionCost`], egg's bottom-up tree cost) and a whole lowered program when the
//! candidates are compared ([`CostModel::program_cost`], from its LLIR figures, where a shared
//! tensor is counted once).
//!
//! Extraction costs are positive and monotone: an e-node costs at least one more than the sum
//! of its children, so it never costs less than any child, and a cycle (`relu(x) = x`-style
//! self-loops from idempotence) is never chosen over the term it loops on.

use std::collections::BTreeSet;

use egg::{CostFunction, Id, Language};

use super::egraph::FusionEGraph;
use super::lang::FusionLang;
use crate::hlir::checked_bytes;
use crate::llir::Epilogue;
use crate::program::Figures;

/// The cost model's constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostModel {
    /// What one kernel launch costs, in DRAM bytes: the bytes HBM moves during one launch's
    /// fixed overhead. Default 8,000,000 bytes = about 4 us of launch and cuBLASLt setup at
    /// about 2 TB/s, so a small GEMM is launch-bound.
    pub launch_bytes: u64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self { launch_bytes: 8_000_000 }
    }
}

/// One e-node's own share of the work (its children not included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeCost {
    /// Kernel launches: 1 for every op, 0 for leaves and the root.
    pub launches: u64,
    /// Bytes the kernel reads and writes in DRAM (operands plus output; a workspace is scratch
    /// and not counted, as in [`crate::llir::Llir::dram_bytes`]).
    pub dram_bytes: u64,
}

impl CostModel {
    /// `launches * launch_bytes + dram_bytes + nodes`, saturating: the score of a lowered
    /// program from its figures (the candidate with the lowest score is the pick).
    pub fn program_cost(&self, figures: &Figures) -> u64 {
        (figures.launches as u64)
            .saturating_mul(self.launch_bytes)
            .saturating_add(figures.dram_bytes as u64)
            .saturating_add(figures.nodes as u64)
    }

    /// The own score of an e-node with `own` work: `launches * launch_bytes + dram_bytes + 1`.
    pub fn node_score(&self, own: NodeCost) -> u64 {
        own.launches
            .saturating_mul(self.launch_bytes)
            .saturating_add(own.dram_bytes)
            .saturating_add(1)
    }
}

/// Which fused forms a candidate may use (the extraction's policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fusions {
    /// BIAS epilogues (`lt_bias`, and with `activation` the `*_BIAS` forms), and a
    /// convolution's fused residual add.
    pub bias: bool,
    /// Activation epilogues (`lt_relu`, `lt_gelu`, and with `bias` the `*_BIAS` forms), and a
    /// convolution's fused activation.
    pub activation: bool,
}

impl Fusions {
    /// Every fused form.
    pub const ALL: Fusions = Fusions { bias: true, activation: true };

    /// Whether an e-node's fused forms are allowed ([`FusionLang::fused_kinds`]): a BIAS
    /// epilogue or a convolution's residual needs `bias`, an activation epilogue `activation`.
    pub fn allows_node(&self, node: &FusionLang) -> bool {
        let (additive, activation) = node.fused_kinds();
        (!additive || self.bias) && (!activation || self.activation)
    }

    /// Whether a matmul with `epilogue` is allowed (DEFAULT always is).
    pub fn allows(&self, epilogue: Epilogue) -> bool {
        match epilogue {
            Epilogue::Default => true,
            Epilogue::Bias => self.bias,
            Epilogue::Relu | Epilogue::Gelu => self.activation,
            Epilogue::ReluBias | Epilogue::GeluBias => self.bias && self.activation,
        }
    }
}

/// The largest finite extraction cost: `u64::MAX` means "never choose" (see
/// [`ExtractionCost`]), so finite sums saturate one below it. A program whose tensors are
/// near `usize::MAX` bytes still extracts; the planner then refuses it with the same error as
/// without fusion, instead of extraction finding "no program of finite cost".
pub const MAX_FINITE_COST: u64 = u64::MAX - 1;

/// egg's cost function for extraction: [`CostModel::node_score`] of each e-node, plus one
/// for an e-node the program did not write (so a rewrite that only reorders operands never
/// wins a tie against the user's form), plus its children's costs, saturating at
/// [`MAX_FINITE_COST`]; `u64::MAX` (never chosen while anything else is possible) for an
/// ill-shaped e-node, a banned e-node, a fused form the [`Fusions`] policy does not allow
/// and the program did not write, or an e-node with such a child.
#[derive(Debug)]
pub struct ExtractionCost<'a> {
    egraph: &'a FusionEGraph,
    model: CostModel,
    fusions: Fusions,
    banned: &'a BTreeSet<FusionLang>,
    written: Option<&'a BTreeSet<FusionLang>>,
}

impl<'a> ExtractionCost<'a> {
    /// A cost function over `egraph` with `model`, allowing `fusions` and never choosing an
    /// e-node in `banned` (canonical e-nodes).
    pub fn new(
        egraph: &'a FusionEGraph,
        model: CostModel,
        fusions: Fusions,
        banned: &'a BTreeSet<FusionLang>,
    ) -> Self {
        Self { egraph, model, fusions, banned, written: None }
    }

    /// Prefers the e-nodes of `written` (canonical; the program as loaded) on a tie: every
    /// other e-node costs one more.
    pub fn preferring(mut self, written: &'a BTreeSet<FusionLang>) -> Self {
        self.written = Some(written);
        self
    }

    /// The e-node's own launches and DRAM bytes from its operands' shapes, or `None` when a
    /// shape is unknown (an ill-shaped term).
    pub fn own(&self, enode: &FusionLang) -> Option<NodeCost> {
        if !enode.is_kernel() {
            return Some(NodeCost::default());
        }
        // The output's shape is its e-class's; hash-consing finds the class.
        let class = self.egraph.lookup(enode.clone())?;
        own_cost(self.egraph, class, enode)
    }
}

/// The own launches and DRAM bytes of `enode`, an e-node of e-class `class`: nothing for
/// views, constants, leaves and the root; otherwise one launch reading every child and writing
/// the class's shape. `None` when a shape is unknown (an ill-shaped term).
pub fn own_cost(egraph: &FusionEGraph, class: Id, enode: &FusionLang) -> Option<NodeCost> {
    if !enode.is_kernel() {
        return Some(NodeCost::default());
    }
    let bytes = |id: Id| -> Option<u64> {
        let shape = egraph[id].data.shape.as_ref()?;
        checked_bytes(shape).map(|b| b as u64)
    };
    let mut dram = bytes(class)?;
    for &id in enode.children() {
        dram = dram.saturating_add(bytes(id)?);
    }
    Some(NodeCost { launches: 1, dram_bytes: dram })
}

/// The extraction score of an e-node before its children: [`CostModel::node_score`] of `own`,
/// plus one when `penalised` (an e-node the program did not write, under
/// [`ExtractionCost::preferring`]), capped at [`MAX_FINITE_COST`]; `u64::MAX` (never chosen)
/// when `own` is unknown (an ill-shaped term) or the e-node is not `usable` (banned, or a
/// fused form the policy does not allow). [`ExtractionCost`] and the table of
/// [`super::extract`] both price through it, so they cannot disagree.
pub fn own_score(model: CostModel, own: Option<NodeCost>, usable: bool, penalised: bool) -> u64 {
    match own {
        Some(own) if usable => {
            model.node_score(own).saturating_add(u64::from(penalised)).min(MAX_FINITE_COST)
        }
        _ => u64::MAX,
    }
}

/// Adds a child's cost to an e-node's running cost: `u64::MAX` on either side stays
/// `u64::MAX` (never chosen); finite sums saturate at [`MAX_FINITE_COST`], so a huge but legal
/// program never turns illegal.
pub fn add_child(sum: u64, child: u64) -> u64 {
    match (sum, child) {
        (u64::MAX, _) | (_, u64::MAX) => u64::MAX,
        (sum, child) => sum.saturating_add(child).min(MAX_FINITE_COST),
    }
}

impl CostFunction<FusionLang> for ExtractionCost<'_> {
    type Cost = u64;

    fn cost<C>(&mut self, enode: &FusionLang, mut costs: C) -> u64
    where
        C: FnMut(Id) -> u64,
    {
        // What the program itself wrote is always allowed (a hand-fused matmul included).
        let written = self.written.is_some_and(|w| w.contains(enode));
        let allowed = written || self.fusions.allows_node(enode);
        let usable = allowed && !self.banned.contains(enode);
        let penalised = self.written.is_some() && !written;
        let own = own_score(self.model, self.own(enode), usable, penalised);
        if own == u64::MAX {
            return u64::MAX;
        }
        enode.fold(own, |sum, id| add_child(sum, costs(id)))
    }
}
