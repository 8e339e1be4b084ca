//! The HLIR: the DSL program as a petgraph DAG of tensor ops, before lowering.
//!
//! Nodes are [`HlirNode`]s (an [`HlirOp`] and the user's source line); an edge `a -> op` with
//! weight `i` says `a` is operand `i` of `op`. This is Luminal's high-level graph: ops know
//! nothing of buffers, launches or the slab. Fusion rewrites HLIR -> HLIR (matmul nodes with
//! non-DEFAULT epilogues); lowering turns it into the LLIR.

use std::collections::BTreeSet;
use std::fmt;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::error::{CompileError, ShapeText, SourceLocation};
use crate::llir::Epilogue;

/// A tensor shape in elements, row-major.
pub type Shape = Vec<usize>;

/// Bytes per element: every lumen tensor is f32.
pub const F32_BYTES: usize = 4;

/// One HLIR operation. Operand shapes are row-major f32.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HlirOp {
    /// A program input (uploaded on every execute); no operands.
    Input {
        /// The user's name, unique in the program.
        name: String,
        /// Shape in elements.
        shape: Shape,
    },
    /// A weight (uploaded at prepare, see [`crate::BufferRole::Weight`]); no operands.
    Weight {
        /// The user's name, unique in the program.
        name: String,
        /// Shape in elements.
        shape: Shape,
    },
    /// `a [M, K] x b [K, N] -> [M, N]`, then the epilogue. Operands `[a, b]`, or `[a, b, bias]`
    /// with `bias` of shape `[N]` when [`Epilogue::has_bias`] (cuBLASLt's `BIAS` epilogues).
    Matmul {
        /// The fused epilogue; DEFAULT straight from the DSL.
        epilogue: Epilogue,
    },
    /// `a + b`: equal shapes, or a bias `[N]` broadcast over the rows of an `[M, N]` tensor
    /// (either operand may be the bias).
    Add,
    /// Elementwise `max(x, 0)`.
    Relu,
    /// Elementwise GELU, tanh form.
    Gelu,
    /// Marks its one operand as a program output named `name` (read back after the last launch).
    Output {
        /// The user's name, unique in the program.
        name: String,
    },
}

impl HlirOp {
    /// Short name used in messages and dumps: `input`, `weight`, `matmul`, `add`, `relu`,
    /// `gelu`, `output`.
    pub fn name(&self) -> &'static str {
        match self {
            HlirOp::Input { .. } => "input",
            HlirOp::Weight { .. } => "weight",
            HlirOp::Matmul { .. } => "matmul",
            HlirOp::Add => "add",
            HlirOp::Relu => "relu",
            HlirOp::Gelu => "gelu",
            HlirOp::Output { .. } => "output",
        }
    }

    /// Whether the node is an input or a weight (a leaf the upload node writes).
    pub fn is_leaf(&self) -> bool {
        matches!(self, HlirOp::Input { .. } | HlirOp::Weight { .. })
    }

    /// Whether the node computes a tensor (becomes a kernel launch when lowered).
    pub fn is_compute(&self) -> bool {
        matches!(self, HlirOp::Matmul { .. } | HlirOp::Add | HlirOp::Relu | HlirOp::Gelu)
    }

    /// Operands the op takes.
    pub fn arity(&self) -> usize {
        match self {
            HlirOp::Input { .. } | HlirOp::Weight { .. } => 0,
            HlirOp::Matmul { epilogue } if epilogue.has_bias() => 3,
            HlirOp::Matmul { .. } | HlirOp::Add => 2,
            HlirOp::Relu | HlirOp::Gelu | HlirOp::Output { .. } => 1,
        }
    }
}

/// One HLIR node: the op and the user's source line that created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HlirNode {
    /// The operation.
    pub op: HlirOp,
    /// Where the user called the DSL (or where a rewrite made the node).
    pub location: SourceLocation,
}

/// The HLIR graph. Node index order is declaration order; the upload node writes inputs and
/// weights in this order (the program's signature), so rewrites must keep leaves in order.
#[derive(Debug, Clone, Default)]
pub struct Hlir {
    /// Nodes, and edges `operand -> op` weighted by the operand index.
    pub graph: DiGraph<HlirNode, usize>,
}

impl Hlir {
    /// An empty HLIR.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `op` with `operands` (edge `operands[i] -> op` with weight `i`) and returns it.
    /// Operands must be nodes of this graph; arity is checked by [`Hlir::validate`].
    pub fn add_op(
        &mut self,
        op: HlirOp,
        operands: &[NodeIndex],
        location: SourceLocation,
    ) -> NodeIndex {
        let node = self.graph.add_node(HlirNode { op, location });
        for (i, &a) in operands.iter().enumerate() {
            self.graph.add_edge(a, node, i);
        }
        node
    }

    /// Node `n`'s operands in operand order (empty for a node that is not in the graph).
    pub fn operands(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut ops: Vec<(usize, NodeIndex)> = self
            .graph
            .edges_directed(n, Direction::Incoming)
            .map(|e| (*e.weight(), e.source()))
            .collect();
        ops.sort();
        ops.into_iter().map(|(_, a)| a).collect()
    }

    /// Nodes that use `n`, with the operand index, sorted by node index then operand index.
    pub fn consumers(&self, n: NodeIndex) -> Vec<(NodeIndex, usize)> {
        let mut users: Vec<(NodeIndex, usize)> = self
            .graph
            .edges_directed(n, Direction::Outgoing)
            .map(|e| (e.target(), *e.weight()))
            .collect();
        users.sort();
        users
    }

    /// The `(name, node)` of every output, in node order.
    pub fn outputs(&self) -> Vec<(String, NodeIndex)> {
        self.graph
            .node_indices()
            .filter_map(|n| match &self.graph[n].op {
                HlirOp::Output { name } => Some((name.clone(), n)),
                _ => None,
            })
            .collect()
    }

    /// Checks the HLIR and infers every node's shape (indexed by node index; an output has its
    /// operand's shape).
    ///
    /// # Errors
    /// [`CompileError::Cyclic`]; [`CompileError::Arity`] or [`CompileError::Malformed`] for a
    /// broken node; [`CompileError::BadName`] for an empty, repeated or reserved name, or one
    /// that is not identifier-like ([`tensor_name_problem`]), at the DSL call that named it;
    /// [`CompileError::ShapeMismatch`] / [`CompileError::Rank`] for operands the op cannot
    /// combine; [`CompileError::ShapeOverflow`] for a tensor whose bytes overflow `usize`;
    /// [`CompileError::OutputOfLeaf`], [`CompileError::OutputTwice`],
    /// [`CompileError::NoOutputs`]. With several errors, the first in node order is reported.
    pub fn validate(&self) -> Result<Vec<Shape>, CompileError> {
        let order =
            petgraph::algo::toposort(&self.graph, None).map_err(|_| CompileError::Cyclic)?;
        self.check_structure()?;
        let mut shapes: Vec<Option<Shape>> = vec![None; self.graph.node_count()];
        // Errors are collected per node so the first in declaration order wins, whatever
        // order the toposort visits nodes in.
        let mut first_err: Option<(NodeIndex, CompileError)> = None;
        for n in order {
            let operands = self.operands(n);
            let operand_shapes: Option<Vec<&Shape>> =
                operands.iter().map(|a| shapes[a.index()].as_ref()).collect();
            // An operand that failed already reported its own error.
            let Some(operand_shapes) = operand_shapes else { continue };
            match infer_shape(&self.graph[n], &operand_shapes) {
                Ok(s) => shapes[n.index()] = Some(s),
                Err(e) => {
                    if first_err.as_ref().is_none_or(|(m, _)| n < *m) {
                        first_err = Some((n, e));
                    }
                }
            }
        }
        if let Some((_, e)) = first_err {
            return Err(e);
        }
        Ok(shapes.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Arity, operand indices, names and outputs.
    fn check_structure(&self) -> Result<(), CompileError> {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let mut output_of: Vec<Option<&str>> = vec![None; self.graph.node_count()];
        let mut any_output = false;
        for n in self.graph.node_indices() {
            let node = &self.graph[n];
            let mut idx: Vec<usize> =
                self.graph.edges_directed(n, Direction::Incoming).map(|e| *e.weight()).collect();
            idx.sort_unstable();
            if idx.len() != node.op.arity() {
                return Err(CompileError::Arity {
                    op: node.op.name(),
                    expected: node.op.arity(),
                    got: idx.len(),
                    location: node.location,
                });
            }
            if idx.iter().enumerate().any(|(i, &w)| i != w) {
                return Err(CompileError::Malformed {
                    message: format!(
                        "{} has operand indices {idx:?}, not 0..{}",
                        node.op.name(),
                        idx.len()
                    ),
                    location: node.location,
                });
            }
            let (kind, name) = match &node.op {
                HlirOp::Input { name, .. } => ("input", name),
                HlirOp::Weight { name, .. } => ("weight", name),
                HlirOp::Output { name } => ("output", name),
                _ => continue,
            };
            let problem = if name.is_empty() {
                Some("empty".to_string())
            } else if let Some(problem) = tensor_name_problem(name) {
                Some(problem)
            } else if is_reserved_name(name) {
                Some(
                    "reserved for compiler buffers (t0, t1, ..., workspace, workspace0, ...)"
                        .to_string(),
                )
            } else if !names.insert(name.as_str()) {
                Some("already used".to_string())
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(CompileError::BadName {
                    kind,
                    name: name.clone(),
                    problem,
                    location: node.location,
                });
            }
            if let HlirOp::Output { name } = &node.op {
                any_output = true;
                if self.graph.edges_directed(n, Direction::Outgoing).next().is_some() {
                    return Err(CompileError::Malformed {
                        message: format!("output {name:?} has consumers"),
                        location: node.location,
                    });
                }
                let Some(&src) = self.operands(n).first() else { continue };
                match &self.graph[src].op {
                    HlirOp::Input { name: leaf, .. } | HlirOp::Weight { name: leaf, .. } => {
                        return Err(CompileError::OutputOfLeaf {
                            name: name.clone(),
                            leaf: leaf.clone(),
                            location: node.location,
                        });
                    }
                    _ => {}
                }
                if let Some(first) = output_of[src.index()] {
                    return Err(CompileError::OutputTwice {
                        first: first.to_string(),
                        name: name.clone(),
                        location: node.location,
                    });
                }
                output_of[src.index()] = Some(name.as_str());
            }
        }
        if !any_output {
            return Err(CompileError::NoOutputs);
        }
        Ok(())
    }
}

/// Why `name` cannot name a tensor, if it cannot: tensor names appear in the one-line
/// canonical dumps (`reads=[x, w]`, `buffer x f32[64, 256] input bytes=65536`), the plan
/// table and the JSON, so they are restricted to an identifier-like set that keeps every line
/// unambiguous: ASCII letters, digits, `_`, `.` and `-` (`w1`, `layers.0.weight`, `b-1`). A
/// space, `,`, a bracket, a quote, `=` or a control character would let one name read as two,
/// or end a line. Empty names are reported separately (`empty`).
///
/// Returns `not identifier-like: ' ' is not allowed (...)` for the first character outside
/// the set, `None` for a valid (or empty) name.
pub fn tensor_name_problem(name: &str) -> Option<String> {
    let c = name.chars().find(|&c| !crate::compile::is_name_char(c))?;
    Some(format!(
        "not identifier-like: {} is not allowed (a tensor name uses ASCII letters, digits, \
         '_', '.' and '-': dumps print one entry per line)",
        quoted_char(c)
    ))
}

/// A character as messages quote it: `'/'`, `' '`, `'\n'` (escaped, so the message stays on
/// one line).
pub(crate) fn quoted_char(c: char) -> String {
    format!("{c:?}")
}

/// Elements of `shape` (the product of its dimensions), or `None` when it overflows `usize`.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Whether a user name would collide with compiler-made buffer names: `t` or `workspace`
/// followed by digits, and `workspace` itself.
pub fn is_reserved_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name == "workspace"
        || name.strip_prefix("workspace").is_some_and(digits)
        || name.strip_prefix('t').is_some_and(digits)
}

/// Size in bytes of an f32 tensor of `shape`, or `None` when it overflows `usize`.
pub fn checked_bytes(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(F32_BYTES, |acc, &d| acc.checked_mul(d))
}

/// Shape of `node` given its operands' shapes (already checked for arity).
fn infer_shape(node: &HlirNode, operands: &[&Shape]) -> Result<Shape, CompileError> {
    let location = node.location;
    let mismatch =
        |op: &'static str, lhs: &Shape, rhs: &Shape, reason: String| CompileError::ShapeMismatch {
            op,
            lhs: ShapeText(lhs.clone()),
            rhs: ShapeText(rhs.clone()),
            reason,
            location,
        };
    let shape = match (&node.op, operands) {
        (HlirOp::Input { shape, .. } | HlirOp::Weight { shape, .. }, []) => shape.clone(),
        (HlirOp::Matmul { epilogue }, [a, b, rest @ ..]) => {
            for s in [a, b] {
                if s.len() != 2 {
                    return Err(CompileError::Rank {
                        op: "matmul",
                        shape: ShapeText(s.to_vec()),
                        rank: s.len(),
                        expected: 2,
                        location,
                    });
                }
            }
            let (m, k, k2, n) = (a[0], a[1], b[0], b[1]);
            if k != k2 {
                return Err(mismatch(
                    "matmul",
                    a,
                    b,
                    format!("inner dimensions {k} and {k2} differ ([M, K] x [K, N])"),
                ));
            }
            let out = vec![m, n];
            if let (true, [bias]) = (epilogue.has_bias(), rest)
                && bias.as_slice() != [n]
            {
                return Err(mismatch(
                    "matmul bias",
                    &out,
                    bias,
                    format!("the {} epilogue needs a bias of shape [{n}]", epilogue.name()),
                ));
            }
            out
        }
        (HlirOp::Add, [a, b]) => {
            if a == b || is_bias_of(b, a) {
                a.to_vec()
            } else if is_bias_of(a, b) {
                b.to_vec()
            } else {
                return Err(mismatch(
                    "add",
                    a,
                    b,
                    "add needs equal shapes, or a bias [N] broadcast over the rows of an [M, N] tensor"
                        .to_string(),
                ));
            }
        }
        (HlirOp::Relu | HlirOp::Gelu | HlirOp::Output { .. }, [a]) => a.to_vec(),
        (op, ops) => {
            return Err(CompileError::Arity {
                op: op.name(),
                expected: op.arity(),
                got: ops.len(),
                location,
            });
        }
    };
    if checked_bytes(&shape).is_none() {
        let name = match &node.op {
            HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } => name.clone(),
            op => op.name().to_string(),
        };
        return Err(CompileError::ShapeOverflow {
            name,
            op: node.op.name(),
            shape: ShapeText(shape),
            location,
        });
    }
    Ok(shape)
}

/// Whether `bias` is `[N]` for a `[M, N]` `matrix`: the only broadcast lumen has (cuBLASLt's
/// BIAS epilogue, over the last axis).
pub fn is_bias_of(bias: &[usize], matrix: &[usize]) -> bool {
    matches!((bias, matrix), ([n], [_, n2]) if n == n2)
}

impl fmt::Display for Hlir {
    /// One line per node in node order: `%3 = matmul[DEFAULT] %0, %1 : [64, 64]`; shapes are
    /// shown when the whole graph infers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shapes = self.validate().ok();
        for n in self.graph.node_indices() {
            write!(f, "%{} = ", n.index())?;
            match &self.graph[n].op {
                HlirOp::Input { name, .. } => write!(f, "input {name}")?,
                HlirOp::Weight { name, .. } => write!(f, "weight {name}")?,
                HlirOp::Matmul { epilogue } => write!(f, "matmul[{}]", epilogue.name())?,
                HlirOp::Output { name } => write!(f, "output {name}")?,
                op => f.write_str(op.name())?,
            }
            for (i, a) in self.operands(n).iter().enumerate() {
                write!(f, "{} %{}", if i == 0 { "" } else { "," }, a.index())?;
            }
            match (&shapes, &self.graph[n].op) {
                (Some(s), _) => {
                    if let Some(shape) = s.get(n.index()) {
                        write!(f, " : {}", ShapeText(shape.clone()))?;
                    }
                }
                (None, HlirOp::Input { shape, .. } | HlirOp::Weight { shape, .. }) => {
                    write!(f, " : {}", ShapeText(shape.clone()))?;
                }
                (None, _) => {}
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
