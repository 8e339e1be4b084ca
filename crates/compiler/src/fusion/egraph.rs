//! The fusion e-graph ([`FusionLang`] with the shape analysis) and the two conversions: an
//! HLIR loaded into a fresh e-graph ([`load`]), and one chosen e-node per e-class built back
//! into an HLIR ([`build_hlir`]).

use std::collections::{BTreeMap, BTreeSet};

use egg::{EGraph, Id, Language, Symbol};
use petgraph::graph::NodeIndex;

use super::analysis::ShapeAnalysis;
use super::lang::FusionLang;
use crate::error::{CompileError, SourceLocation};
use crate::hlir::{Hlir, HlirNode, HlirOp, TensorName, TensorType};

/// The fusion e-graph: [`FusionLang`] with the shape analysis.
pub type FusionEGraph = EGraph<FusionLang, ShapeAnalysis>;

/// An HLIR program loaded into an e-graph.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The e-graph (rebuilt, congruence closed).
    pub egraph: FusionEGraph,
    /// The `outputs` root e-class (canonicalize with `egraph.find` after rewriting).
    pub root: Id,
    /// Per output, in the root's child order (sorted by name): its name and the source line of
    /// `.output()`.
    pub outputs: Vec<(String, SourceLocation)>,
    /// The e-class of each original HLIR node that reaches an output (by node index).
    pub class_of: Vec<Option<Id>>,
    /// The e-nodes the program itself wrote (children canonical as loaded; see
    /// [`Loaded::written_canonical`]). Extraction prefers them on a tie, so a commuted `add`
    /// never replaces the operand order the user wrote.
    pub written: BTreeSet<FusionLang>,
}

impl Loaded {
    /// [`Loaded::written`] with children canonical in the current e-graph (after rewriting).
    pub fn written_canonical(&self) -> BTreeSet<FusionLang> {
        self.written.iter().map(|n| n.clone().map_children(|c| self.egraph.find(c))).collect()
    }

    /// The user's source line for each e-class, canonical after rewriting: the first HLIR node
    /// (in node index order) that landed in it. A fused e-node keeps the line of the op the
    /// user wrote on top (the `relu` of `relu(x.matmul(w) + b)`).
    pub fn locations(&self, hlir: &Hlir) -> BTreeMap<Id, SourceLocation> {
        let mut at = BTreeMap::new();
        for n in hlir.graph.node_indices() {
            if let (Some(Some(id)), Some(node)) =
                (self.class_of.get(n.index()), hlir.graph.node_weight(n))
            {
                at.entry(self.egraph.find(*id)).or_insert(node.location);
            }
        }
        at
    }

    /// The user's tensor name ([`crate::Tensor::name`]) for each e-class, canonical after
    /// rewriting: the first named HLIR node (in node index order) that landed in it.
    pub fn names(&self, hlir: &Hlir) -> BTreeMap<Id, TensorName> {
        let mut names = BTreeMap::new();
        for n in hlir.graph.node_indices() {
            if let (Some(Some(id)), Some(HlirNode { name: Some(name), .. })) =
                (self.class_of.get(n.index()), hlir.graph.node_weight(n))
            {
                names.entry(self.egraph.find(*id)).or_insert_with(|| name.clone());
            }
        }
        names
    }
}

/// Loads the live part of a validated `hlir` (every node that reaches an output) into a fresh
/// e-graph. Matmuls that already carry an epilogue load as the matching fused form, so a
/// hand-fused program round-trips.
///
/// Nodes are added in a declaration-independent order: leaves in signature order, compute
/// nodes in lowering's canonical order (structural colours), outputs sorted by name. E-class
/// ids, and with them egg's tie-breaks, are then the same for the same program declared in
/// another op order, so the fused LLIR text is too.
///
/// # Errors
/// Every error of [`Hlir::validate`]; [`CompileError::Fusion`] if a node's operands do not
/// match its arity (only a malformed HLIR that escaped validation can do that).
pub fn load(hlir: &Hlir) -> Result<Loaded, CompileError> {
    let types = hlir.infer()?;
    let g = &hlir.graph;
    let mut leaves: BTreeMap<String, TensorType> = BTreeMap::new();
    for n in g.node_indices() {
        if let HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } = &g[n].op {
            leaves.insert(name.clone(), types[n.index()].clone());
        }
    }
    let mut egraph = FusionEGraph::new(ShapeAnalysis::new(leaves));
    let live = crate::lower::live_nodes(hlir);
    let mut order: Vec<NodeIndex> =
        g.node_indices().filter(|&n| g[n].op.is_leaf() && live[n.index()]).collect();
    order.extend(
        crate::lower::compute_order(hlir, &live)
            .into_iter()
            .filter(|&n| !matches!(g[n].op, HlirOp::Output { .. })),
    );
    let mut class_of: Vec<Option<Id>> = vec![None; g.node_count()];
    let mut written = BTreeSet::new();
    for n in order {
        let node = &g[n];
        let ops: Vec<Id> = hlir
            .operands(n)
            .iter()
            .filter_map(|a| class_of.get(a.index()).copied().flatten())
            .collect();
        let enode = match (&node.op, ops.as_slice()) {
            (HlirOp::Input { name, .. } | HlirOp::Weight { name, .. }, []) => {
                FusionLang::Leaf(Symbol::from(name.as_str()))
            }
            (op, ops) => FusionLang::from_op(op, ops).ok_or_else(|| {
                CompileError::Fusion(format!(
                    "{} at {} has {} loaded operands, expected {}",
                    op.name(),
                    node.location,
                    ops.len(),
                    op.arity()
                ))
            })?,
        };
        written.insert(enode.clone());
        class_of[n.index()] = Some(egraph.add(enode));
    }
    let mut outputs: Vec<(String, SourceLocation, Id)> = Vec::new();
    for (name, out) in hlir.outputs() {
        let value =
            hlir.operands(out).first().and_then(|a| class_of.get(a.index()).copied().flatten());
        let Some(value) = value else {
            return Err(CompileError::Fusion(format!("output {name:?} has no loaded value")));
        };
        outputs.push((name, g[out].location, value));
    }
    outputs.sort_by(|a, b| a.0.cmp(&b.0));
    let root = egraph.add(FusionLang::Outputs(outputs.iter().map(|o| o.2).collect()));
    egraph.rebuild();
    Ok(Loaded {
        egraph,
        root,
        outputs: outputs.into_iter().map(|(name, at, _)| (name, at)).collect(),
        class_of,
        written,
    })
}

/// Builds the HLIR of one extraction: `choice` maps each needed (canonical) e-class to the
/// e-node chosen for it. Every input and weight of `original` is kept, in declaration order
/// (the program's signature); then the computed nodes; then the outputs in the root's order.
/// Each e-class becomes one HLIR node, so shared subterms stay shared. When two outputs land
/// in the same e-class (two outputs of equal value), the one later by name gets its own copy
/// of the top op, since a tensor can be read back under one name only. [`HlirBuilder`] does
/// the per-e-graph part once for several extractions.
///
/// # Errors
/// [`CompileError::Fusion`] when a needed e-class has no choice, a leaf names no input or
/// weight of `original`, or an output's value is a leaf (no rule makes one).
pub fn build_hlir(
    original: &Hlir,
    loaded: &Loaded,
    choice: &BTreeMap<Id, FusionLang>,
) -> Result<Hlir, CompileError> {
    HlirBuilder::new(original, loaded).build(choice)
}

/// [`build_hlir`] for many extractions of one saturated e-graph: the source line and name of
/// every e-class ([`Loaded::locations`], [`Loaded::names`]) are looked up once.
#[derive(Debug)]
pub struct HlirBuilder<'a> {
    original: &'a Hlir,
    loaded: &'a Loaded,
    locations: BTreeMap<Id, SourceLocation>,
    names: BTreeMap<Id, TensorName>,
}

impl<'a> HlirBuilder<'a> {
    /// The builder of `loaded`'s extractions, `loaded` being `original` loaded and saturated.
    pub fn new(original: &'a Hlir, loaded: &'a Loaded) -> Self {
        Self {
            original,
            loaded,
            locations: loaded.locations(original),
            names: loaded.names(original),
        }
    }

    /// The HLIR of the extraction `choice` ([`build_hlir`]).
    ///
    /// # Errors
    /// As [`build_hlir`].
    pub fn build(&self, choice: &BTreeMap<Id, FusionLang>) -> Result<Hlir, CompileError> {
        let (original, loaded) = (self.original, self.loaded);
        let (locations, names) = (&self.locations, &self.names);
        let eg = &loaded.egraph;
        let fallback = SourceLocation::caller();
        let mut hlir = Hlir {
            symbols: original.symbols.clone(),
            states: original.states.clone(),
            ..Hlir::new()
        };
        let mut leaf_node: BTreeMap<String, NodeIndex> = BTreeMap::new();
        for n in original.graph.node_indices() {
            let node = &original.graph[n];
            if let HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } = &node.op {
                let idx = hlir.graph.add_node(HlirNode {
                    op: node.op.clone(),
                    location: node.location,
                    name: None,
                });
                leaf_node.insert(name.clone(), idx);
            }
        }
        let root = eg.find(loaded.root);
        let Some(FusionLang::Outputs(outs)) = choice.get(&root).or_else(|| eg[root].nodes.first())
        else {
            return Err(CompileError::Fusion("the e-graph root is not an outputs node".into()));
        };
        // Canonical e-class ids index it directly (they are below the e-graph's id count).
        let mut built: Vec<Option<NodeIndex>> = Vec::new();
        let get =
            |built: &Vec<Option<NodeIndex>>, c: Id| built.get(usize::from(c)).copied().flatten();
        for &out in outs.iter() {
            // Post-order without recursion: deep programs must not overflow the stack.
            let mut stack: Vec<(Id, bool)> = vec![(eg.find(out), false)];
            while let Some((class, children_done)) = stack.pop() {
                if get(&built, class).is_some() {
                    continue;
                }
                let enode = choice.get(&class).ok_or_else(|| {
                    CompileError::Fusion(format!("extraction chose nothing for e-class {class}"))
                })?;
                if !children_done {
                    stack.push((class, true));
                    for &c in enode.children().iter().rev() {
                        stack.push((eg.find(c), false));
                    }
                    continue;
                }
                let idx = match enode {
                    FusionLang::Leaf(name) => *leaf_node.get(name.as_str()).ok_or_else(|| {
                        CompileError::Fusion(format!("leaf {name} is no input or weight"))
                    })?,
                    FusionLang::Outputs(_) => {
                        return Err(CompileError::Fusion("an outputs node below the root".into()));
                    }
                    _ => {
                        let op = enode.to_op().ok_or_else(|| {
                            CompileError::Fusion(format!("e-node {enode} has no HLIR op"))
                        })?;
                        let operands: Vec<NodeIndex> = enode
                            .children()
                            .iter()
                            .filter_map(|c| get(&built, eg.find(*c)))
                            .collect();
                        let location = locations.get(&class).copied().unwrap_or(fallback);
                        let idx = hlir.add_op(op, &operands, location);
                        if let Some(name) = names.get(&class) {
                            hlir.graph[idx].name = Some(name.clone());
                        }
                        idx
                    }
                };
                let at = usize::from(class);
                if built.len() <= at {
                    built.resize(at + 1, None);
                }
                built[at] = Some(idx);
            }
        }
        let mut read_back: BTreeSet<NodeIndex> = BTreeSet::new();
        for (&out, (name, location)) in outs.iter().zip(&loaded.outputs) {
            let Some(value) = get(&built, eg.find(out)) else {
                return Err(CompileError::Fusion(format!("output {name:?} was not built")));
            };
            if hlir.graph[value].op.is_leaf() {
                return Err(CompileError::Fusion(format!(
                    "output {name:?} became an input or weight"
                )));
            }
            let value = if read_back.contains(&value) {
                let op = hlir.graph[value].op.clone();
                let at = hlir.graph[value].location;
                let operands = hlir.operands(value);
                hlir.add_op(op, &operands, at)
            } else {
                value
            };
            read_back.insert(value);
            hlir.add_op(HlirOp::Output { name: name.clone() }, &[value], *location);
        }
        Ok(hlir)
    }
}
