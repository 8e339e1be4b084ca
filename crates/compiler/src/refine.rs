//! Colour refinement (1-dimensional Weisfeiler-Lehman) over the live HLIR: the structural
//! colours of lowering's canonical order ([`crate::lower`]), in O((n + m) log n) for n live
//! nodes and m operand edges (plus the signatures of the nodes each round re-examines, see
//! below), where recomputing every node's signature each round took one round per level of
//! the program (O(n x depth): a 10,000-op elementwise chain took 50 s).
//!
//! # What is computed (unchanged)
//!
//! A node's initial colour is the rank of its label (op, parameters, and the name of leaves,
//! outputs and named tensors) among the distinct labels. Round r recolours every node by the
//! rank, among the distinct signatures of the round, of its signature `(colour, operand
//! colours in operand order, consumer (colour, operand index) pairs sorted)`, all colours of
//! round r - 1; rounds stop at the first that splits no class. The colours are compared only
//! by order (the canonical order takes the ready node of the smallest colour), so what must
//! not change is the final total preorder of the nodes, and it does not: a test checks it
//! against that round-by-round algorithm, kept as the oracle.
//!
//! # How
//!
//! - Rounds are the same rounds, but a round looks only at the classes that can split: a
//!   class whose nodes were equal last round can only split if a node's neighbour moved to a
//!   new class. When a class splits into parts, every part but one largest is *fresh*; the
//!   next round re-examines only the classes holding a neighbour (operand or consumer) of a
//!   fresh node, and in such a class only the nodes next to a fresh node plus one other
//!   member: all the others have equal signatures (each of their neighbours either kept its
//!   class or went to the largest part, the same for all of them). A node is fresh only in a
//!   part at most half its class, so at most log2(n) times (Hopcroft's argument).
//! - Colours are labels in an order-maintenance list (Bender et al., "Two simplified
//!   algorithms for maintaining order in a list", ESA 2002): a split inserts the new parts
//!   next to the class they came from, in signature order, so every earlier comparison keeps
//!   its answer, without renumbering all classes each round (ranks would). Inserting relabels
//!   the smallest sparse enough aligned block of labels around the insertion point:
//!   O(log n) amortized.
//! - Classes are ranges of one array (Paige and Tarjan), so moving a part out costs its size.
//!
//! A node whose class keeps being re-examined computes its signature again each time, which
//! costs its degree: a node with thousands of consumers that shares its label with another
//! node could make that O(degree x rounds); leaves, constants and outputs have unique labels,
//! and a class of one node is never examined.

use std::collections::BTreeMap;

use petgraph::graph::NodeIndex;

use crate::hlir::{Hlir, HlirNode};

/// No element.
const NIL: usize = usize::MAX;

/// Labels live in `0..LIMIT`.
const LIMIT: u64 = 1 << 62;

/// A list of elements with integer labels increasing along the list, so two elements compare
/// in O(1) by label. Element 0 is a sentinel head (label 0) that is never a class.
#[derive(Debug)]
struct OrderList {
    label: Vec<u64>,
    prev: Vec<usize>,
    next: Vec<usize>,
}

impl OrderList {
    /// The sentinel followed by `k` elements (ids 1..=k) spread evenly over the labels.
    fn new(k: usize) -> Self {
        let step = LIMIT / (k as u64 + 1);
        let label = (0..=k as u64).map(|i| i * step).collect();
        let prev = (0..=k).map(|i| if i == 0 { NIL } else { i - 1 }).collect();
        let next = (0..=k).map(|i| if i == k { NIL } else { i + 1 }).collect();
        Self { label, prev, next }
    }

    /// A new element just after `x`; returns its id.
    fn insert_after(&mut self, x: usize) -> usize {
        let id = self.label.len();
        let after = self.next[x];
        // A placeholder equal to x's label keeps the list sorted until the relabel.
        self.label.push(self.label[x]);
        self.prev.push(x);
        self.next.push(after);
        self.next[x] = id;
        if after != NIL {
            self.prev[after] = id;
        }
        let (lo, hi) = (self.label[x], if after == NIL { LIMIT } else { self.label[after] });
        if hi - lo >= 2 {
            self.label[id] = lo + (hi - lo) / 2;
        } else {
            self.relabel(x);
        }
        id
    }

    /// A new element just before `x` (never the sentinel); returns its id.
    fn insert_before(&mut self, x: usize) -> usize {
        self.insert_after(self.prev[x])
    }

    /// Spreads evenly the elements of the smallest aligned block of labels around `x`'s label
    /// whose density is at most (1/1.4)^bits for a block of 2^bits labels (the last block, all
    /// labels, always qualifies).
    fn relabel(&mut self, x: usize) {
        let base = self.label[x];
        for bits in 1..=62u32 {
            let size = 1u64 << bits;
            let lo = base & !(size - 1);
            let hi = lo + size;
            let mut first = x;
            let mut count = 1u64;
            while self.prev[first] != NIL && self.label[self.prev[first]] >= lo {
                first = self.prev[first];
                count += 1;
            }
            let mut last = x;
            while self.next[last] != NIL && self.label[self.next[last]] < hi {
                last = self.next[last];
                count += 1;
            }
            let room = size as f64 / 1.4f64.powi(bits as i32);
            if bits == 62 || (count as f64) <= room {
                let step = size / count;
                let mut at = first;
                let mut value = lo;
                loop {
                    self.label[at] = value;
                    if at == last {
                        break;
                    }
                    value += step;
                    at = self.next[at];
                }
                return;
            }
        }
    }
}

/// Initial colour label of a node: op, parameters, and the name of leaves, outputs and
/// named tensors.
pub(crate) fn label(node: &HlirNode) -> String {
    match &node.name {
        Some(name) => format!("{} \"{}\"", node.op.text(), name.text),
        _ => node.op.text(),
    }
}

/// What a node's next colour is decided by, within its class: its operands' colours in
/// operand order, then its consumers' (colour, operand index) pairs sorted.
type Signature = (Vec<u64>, Vec<(u64, usize)>);

/// The structural colour of every live node (see the module docs), as labels compared by
/// order: node `a` comes before node `b` exactly when the round-by-round refinement gives
/// `a` the smaller colour. `u64::MAX` for dead nodes.
pub(crate) fn structural_colors(hlir: &Hlir, live: &[bool]) -> Vec<u64> {
    let g = &hlir.graph;
    let n = g.node_count();
    let nodes: Vec<usize> = (0..n).filter(|&i| live.get(i).copied().unwrap_or(false)).collect();
    let mut operands: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut consumers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for &v in &nodes {
        operands[v] = hlir.operands(NodeIndex::new(v)).into_iter().map(|a| a.index()).collect();
        consumers[v] = hlir
            .consumers(NodeIndex::new(v))
            .into_iter()
            .filter(|(c, _)| live.get(c.index()).copied().unwrap_or(false))
            .map(|(c, i)| (c.index(), i))
            .collect();
    }

    // Classes are ranges of `elems`; class ids are the order list's element ids (0 unused).
    let mut by_label: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &v in &nodes {
        by_label.entry(label(&g[NodeIndex::new(v)])).or_default().push(v);
    }
    let mut order = OrderList::new(by_label.len());
    let mut class_of = vec![0usize; n];
    let mut elems: Vec<usize> = Vec::with_capacity(nodes.len());
    let mut pos = vec![0usize; n];
    let mut range: Vec<(usize, usize)> = vec![(0, 0)];
    for (i, members) in by_label.into_values().enumerate() {
        let start = elems.len();
        for v in members {
            pos[v] = elems.len();
            elems.push(v);
            class_of[v] = i + 1;
        }
        range.push((start, elems.len()));
    }

    // Round 1 examines every node; later rounds the neighbours of fresh nodes.
    let mut touched: Vec<usize> = nodes.clone();
    let mut stamp = vec![0usize; n];
    let mut round = 1usize;
    for &v in &touched {
        stamp[v] = round;
    }
    loop {
        let signature = |v: usize, order: &OrderList, class_of: &[usize]| -> Signature {
            let ops = operands[v].iter().map(|&a| order.label[class_of[a]]).collect();
            let mut users: Vec<(u64, usize)> =
                consumers[v].iter().map(|&(c, i)| (order.label[class_of[c]], i)).collect();
            users.sort_unstable();
            (ops, users)
        };
        let mut by_class: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &u in &touched {
            let (s, e) = range[class_of[u]];
            if e - s > 1 {
                by_class.entry(class_of[u]).or_default().push(u);
            }
        }
        // Every split of the round from the colours of the previous round, then applied.
        let mut splits: Vec<Split> = Vec::new();
        for (class, members) in by_class {
            let (s, e) = range[class];
            let mut sigs: Vec<(Signature, Option<usize>)> =
                members.iter().map(|&u| (signature(u, &order, &class_of), Some(u))).collect();
            let untouched = (e - s) - members.len();
            if untouched > 0 {
                // One untouched member stands for them all.
                let rep = elems[s..e].iter().copied().find(|&v| stamp[v] != round);
                if let Some(rep) = rep {
                    sigs.push((signature(rep, &order, &class_of), None));
                }
            }
            sigs.sort();
            let mut parts: Vec<Vec<usize>> = Vec::new();
            let mut rest_part = None;
            let mut previous: Option<&Signature> = None;
            for (sig, node) in &sigs {
                if previous != Some(sig) {
                    parts.push(Vec::new());
                    previous = Some(sig);
                }
                match node {
                    Some(v) => parts.last_mut().into_iter().for_each(|p| p.push(*v)),
                    None => rest_part = Some(parts.len() - 1),
                }
            }
            if parts.len() > 1 {
                splits.push(Split { class, parts, rest_part, untouched });
            }
        }
        if splits.is_empty() {
            break;
        }
        let mut fresh: Vec<usize> = Vec::new();
        for split in splits {
            split.apply(&mut order, &mut range, &mut elems, &mut pos, &mut class_of, &mut fresh);
        }
        round += 1;
        touched.clear();
        for &v in &fresh {
            for &u in operands[v].iter().chain(consumers[v].iter().map(|(c, _)| c)) {
                if stamp[u] != round {
                    stamp[u] = round;
                    touched.push(u);
                }
            }
        }
    }
    let mut colour = vec![u64::MAX; n];
    for &v in &nodes {
        colour[v] = order.label[class_of[v]];
    }
    colour
}

/// One class splitting into parts, in signature order.
struct Split {
    class: usize,
    /// The re-examined members of each part.
    parts: Vec<Vec<usize>>,
    /// The part of the members not re-examined, if any.
    rest_part: Option<usize>,
    /// How many members were not re-examined.
    untouched: usize,
}

impl Split {
    /// Gives every part but one (the untouched members' part, else the first largest) a new
    /// class next to `class` in signature order, and appends to `fresh` the members of every
    /// part but the first largest.
    fn apply(
        self,
        order: &mut OrderList,
        range: &mut Vec<(usize, usize)>,
        elems: &mut [usize],
        pos: &mut [usize],
        class_of: &mut [usize],
        fresh: &mut Vec<usize>,
    ) {
        let Split { class, parts, rest_part, untouched } = self;
        let size = |i: usize| parts[i].len() + if rest_part == Some(i) { untouched } else { 0 };
        let largest =
            (0..parts.len()).fold(0, |best, i| if size(i) > size(best) { i } else { best });
        let keep = rest_part.unwrap_or(largest);
        let mut ids = vec![class; parts.len()];
        let mut anchor = class;
        for i in (0..keep).rev() {
            anchor = order.insert_before(anchor);
            ids[i] = anchor;
        }
        anchor = class;
        for id in ids.iter_mut().skip(keep + 1) {
            anchor = order.insert_after(anchor);
            *id = anchor;
        }
        range.resize(order.label.len(), (0, 0));
        for (i, part) in parts.iter().enumerate() {
            if i == keep {
                continue;
            }
            let (start, mut end) = range[class];
            let top = end;
            for &m in part {
                let (p, last) = (pos[m], elems[end - 1]);
                elems.swap(p, end - 1);
                pos[last] = p;
                pos[m] = end - 1;
                class_of[m] = ids[i];
                end -= 1;
            }
            range[class] = (start, end);
            range[ids[i]] = (end, top);
        }
        for (i, part) in parts.iter().enumerate() {
            if i == largest {
                continue;
            }
            if i == keep {
                let (s, e) = range[class];
                fresh.extend_from_slice(&elems[s..e]);
            } else {
                fresh.extend_from_slice(part);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use petgraph::graph::NodeIndex;
    use proptest::prelude::*;

    use super::{OrderList, label, structural_colors};
    use crate::error::SourceLocation;
    use crate::hlir::{Hlir, HlirOp, TensorName};
    use crate::lower::live_nodes;
    use crate::ops::{BinaryOp, ElemOp, UnaryOp};

    type OldSignature = (usize, Vec<usize>, Vec<(usize, usize)>);

    /// The round-by-round refinement lumen used before (every node's signature every round),
    /// kept verbatim as the oracle.
    fn oracle_colors(hlir: &Hlir, live: &[bool]) -> Vec<usize> {
        let g = &hlir.graph;
        let nodes: Vec<NodeIndex> = g.node_indices().filter(|n| live[n.index()]).collect();
        let operands: Vec<Vec<NodeIndex>> = g.node_indices().map(|n| hlir.operands(n)).collect();
        let consumers: Vec<Vec<(NodeIndex, usize)>> = g
            .node_indices()
            .map(|n| hlir.consumers(n).into_iter().filter(|(c, _)| live[c.index()]).collect())
            .collect();

        let labels: BTreeSet<String> = nodes.iter().map(|&n| label(&g[n])).collect();
        let rank: BTreeMap<String, usize> =
            labels.into_iter().enumerate().map(|(i, l)| (l, i)).collect();
        let mut color = vec![usize::MAX; g.node_count()];
        for &n in &nodes {
            color[n.index()] = rank.get(&label(&g[n])).copied().unwrap_or(usize::MAX);
        }
        let mut classes = rank.len();
        for _ in 0..nodes.len() {
            let sigs: Vec<(NodeIndex, OldSignature)> = nodes
                .iter()
                .map(|&n| {
                    let ops = operands[n.index()].iter().map(|a| color[a.index()]).collect();
                    let mut users: Vec<(usize, usize)> =
                        consumers[n.index()].iter().map(|&(c, i)| (color[c.index()], i)).collect();
                    users.sort_unstable();
                    (n, (color[n.index()], ops, users))
                })
                .collect();
            let distinct: BTreeSet<&OldSignature> = sigs.iter().map(|(_, s)| s).collect();
            let rank: BTreeMap<&OldSignature, usize> =
                distinct.into_iter().enumerate().map(|(i, s)| (s, i)).collect();
            let next: Vec<(NodeIndex, usize)> = sigs
                .iter()
                .map(|(n, s)| (*n, rank.get(s).copied().unwrap_or(usize::MAX)))
                .collect();
            let stable = rank.len() == classes;
            classes = rank.len();
            for (n, c) in next {
                color[n.index()] = c;
            }
            if stable {
                break;
            }
        }
        color
    }

    /// The new colours as ranks among the live nodes' distinct colours (the oracle's form).
    fn ranks(colors: &[u64], live: &[bool]) -> Vec<usize> {
        let distinct: BTreeSet<u64> =
            colors.iter().zip(live).filter(|(_, l)| **l).map(|(c, _)| *c).collect();
        let rank: BTreeMap<u64, usize> =
            distinct.into_iter().enumerate().map(|(i, c)| (c, i)).collect();
        colors.iter().zip(live).map(|(c, l)| if *l { rank[c] } else { usize::MAX }).collect()
    }

    fn assert_same_as_oracle(hlir: &Hlir) {
        let live = live_nodes(hlir);
        let new = ranks(&structural_colors(hlir, &live), &live);
        assert_eq!(new, oracle_colors(hlir, &live));
    }

    /// A structural description of a node: op kind (index into a few ops with equal labels,
    /// so refinement has ties to break) and operand picks (taken modulo the earlier nodes).
    type NodeSpec = (u8, Vec<usize>, bool);

    /// Builds an HLIR of `specs` over two inputs, then outputs the last node and every node
    /// whose pick says so; the ops' shapes are not checked (refinement reads only structure).
    fn build(specs: &[NodeSpec], outputs: &[usize]) -> Hlir {
        let at = SourceLocation::caller();
        let mut h = Hlir::new();
        let mut ids: Vec<NodeIndex> = Vec::new();
        ids.push(h.add_op(
            HlirOp::Input { name: "a".into(), shape: vec![2], dtype: crate::DType::F32 },
            &[],
            at,
        ));
        ids.push(h.add_op(
            HlirOp::Input { name: "b".into(), shape: vec![2], dtype: crate::DType::F32 },
            &[],
            at,
        ));
        ids.push(h.add_op(HlirOp::Constant { value: crate::Scalar::new(0.5) }, &[], at));
        for (i, (kind, picks, named)) in specs.iter().enumerate() {
            let pick = |k: usize| ids[picks.get(k).copied().unwrap_or(0) % ids.len()];
            let (op, ops): (HlirOp, Vec<NodeIndex>) = match kind % 6 {
                0 => (HlirOp::Map(ElemOp::Unary(UnaryOp::Relu)), vec![pick(0)]),
                1 => (HlirOp::Map(ElemOp::Unary(UnaryOp::Tanh)), vec![pick(0)]),
                2 => (HlirOp::Map(ElemOp::Binary(BinaryOp::Add)), vec![pick(0), pick(1)]),
                3 => (HlirOp::Map(ElemOp::Binary(BinaryOp::Mul)), vec![pick(0), pick(1)]),
                4 => {
                    let k = 1 + picks.len() % 3;
                    (HlirOp::Concat { axis: 0 }, (0..k).map(pick).collect())
                }
                _ => {
                    (HlirOp::Matmul { epilogue: crate::Epilogue::Default }, vec![pick(0), pick(1)])
                }
            };
            let id = h.add_op(op, &ops, at);
            if *named && i % 7 == 3 {
                h.graph[id].name = Some(TensorName { text: format!("n{i}"), location: at });
            }
            ids.push(id);
        }
        let mut outs: BTreeSet<usize> =
            outputs.iter().map(|o| 3 + o % specs.len().max(1)).collect();
        if !specs.is_empty() {
            outs.insert(ids.len() - 1);
        }
        for (k, o) in outs.into_iter().filter(|&o| o < ids.len()).enumerate() {
            h.add_op(HlirOp::Output { name: format!("y{k}") }, &[ids[o]], at);
        }
        h
    }

    #[test]
    fn order_list_stays_sorted_under_repeated_insertion_at_one_place() {
        let mut list = OrderList::new(3);
        let mut anchor = 2;
        for i in 0..5_000 {
            anchor =
                if i % 2 == 0 { list.insert_after(anchor) } else { list.insert_before(anchor) };
        }
        let mut at = 0;
        let mut seen = 1;
        while list.next[at] != super::NIL {
            assert!(list.label[list.next[at]] > list.label[at]);
            at = list.next[at];
            seen += 1;
        }
        assert_eq!(seen, list.label.len());
    }

    #[test]
    fn deep_chains_and_symmetric_trees_match_the_oracle() {
        // A chain of one op (one class per level, found one level per round), two equal
        // chains side by side, and a balanced tree of adds (every level one class).
        for specs in [
            (0..200).map(|i| (0u8, vec![i + 2], false)).collect::<Vec<_>>(),
            (0..200).map(|i| (0u8, vec![if i < 2 { i } else { i + 1 }], false)).collect(),
            (0..255).map(|i| (2u8, vec![2 * i + 3, 2 * i + 4], false)).collect(),
        ] {
            assert_same_as_oracle(&build(&specs, &[]));
        }
        // The tree's leaves are its first 128 adds over the inputs.
        let mut tree: Vec<NodeSpec> =
            (0..128).map(|i| (2u8, vec![i % 2, 1 - i % 2], false)).collect();
        let mut level: Vec<usize> = (3..131).collect();
        while level.len() > 1 {
            let mut next = Vec::new();
            for pair in level.chunks(2) {
                tree.push((2, pair.to_vec(), false));
                next.push(2 + tree.len());
            }
            level = next;
        }
        assert_same_as_oracle(&build(&tree, &[]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn colours_match_the_round_by_round_oracle(
            specs in prop::collection::vec(
                (0u8..6, prop::collection::vec(0usize..64, 1..4), any::<bool>()),
                0..60,
            ),
            outputs in prop::collection::vec(0usize..64, 0..4),
            window in 1usize..8,
        ) {
            // Operands picked close to the node (`window`) make long chains and many ties.
            let specs: Vec<NodeSpec> = specs
                .into_iter()
                .enumerate()
                .map(|(i, (k, picks, named))| {
                    let near = picks.into_iter().map(|p| (i + 3).saturating_sub(1 + p % window)).collect();
                    (k, near, named)
                })
                .collect();
            let hlir = build(&specs, &outputs);
            let live = live_nodes(&hlir);
            let new = ranks(&structural_colors(&hlir, &live), &live);
            prop_assert_eq!(new, oracle_colors(&hlir, &live));
        }
    }
}
