//! Symbolic dimensions: an axis whose length is a named symbol (`seq`, `past`) with an upper
//! bound, bound to a value by each execute.
//!
//! A program is compiled, fused and planned once, at the bound (the slab sized for the worst
//! case, as Luminal's dynamic dimensions and TVM's `tir_var_upper_bound` do), and runs at any
//! value `1..=bound` of each symbol without recompiling. Its meaning at a value is the program
//! evaluated with every symbolic axis that long: reductions and products over a symbolic axis
//! cover the live elements only, outputs come back at their live shapes.
//!
//! How a value is bound: every buffer is written dense and row-major at its *live* shape (the
//! bound shape with each symbolic axis at its value), at the offset the plan gave it (a prefix
//! of its bytes at the bound). [`Llir::bind`] turns the compiled LLIR into the live one: live
//! buffer shapes, every operand's [`View`] restrided for the live layout ([`live_view`]),
//! every op's sizes recomputed from its live operands. Kernels then run unchanged: they take
//! their sizes from the live LLIR. The values come from the inputs' shapes ([`Llir::bind_inputs`]):
//! an input declared `[seq, 512]` given as `[5, 512]` binds `seq = 5`.
//!
//! Which programs keep their meaning: [`propagate`] follows each symbol through the HLIR and
//! refuses, at the user's line, what would change it: a slice or window of a symbolic axis, a
//! concat along one, a reshape that merges or splits one, an axis of fixed length meeting a
//! symbolic one, and the ops that do not take symbolic operands (convolution, pooling,
//! gather/scatter of elements). What it cannot see is a constant computed from a bound: a
//! mean over a symbolic axis divides by the bound (write sum / a length input instead).

use crate::error::{CompileError, ShapeText, SourceLocation};
use crate::hlir::{Hlir, HlirOp, MoveOp, TensorType};
use crate::llir::{Llir, LlirNode, LlirOp};
use crate::polynomial::Polynomial;
use crate::view::{View, row_major_strides};

pub use crate::symbols::{
    Axes, Dim, Symbol, SymbolDecl, SymbolId, SymbolicShape, Symbols, all_fixed,
};

/// Follows the program's symbols through `hlir` (types from [`Hlir::infer`]): the symbolic
/// axes of every node, indexed by node index (all `None` without symbols).
///
/// # Errors
/// [`CompileError::Symbolic`], at the node's source line, for an op that would change the
/// meaning of a symbolic axis (see the module docs): a slice, window or concat along one, a
/// reshape merging or splitting one, a fixed-length axis broadcast against one, a matmul's
/// inner axes or bias disagreeing, and convolution, pooling, `gather_elements`,
/// `scatter_elements` or a top-k along a symbolic operand axis; an input declared with axes of
/// another rank.
pub fn propagate(hlir: &Hlir, types: &[TensorType]) -> Result<Vec<Axes>, CompileError> {
    let g = &hlir.graph;
    let fixed = |n: usize| vec![None; types.get(n).map_or(0, |t| t.shape.len())];
    if hlir.symbols.is_empty() {
        return Ok((0..g.node_count()).map(fixed).collect());
    }
    // Every symbol must appear in some input's shape: the inputs' shapes bind it.
    for (i, d) in hlir.symbols.decls.iter().enumerate() {
        let bound_by_input =
            hlir.symbols.inputs.iter().any(|(name, axes)| {
                !hlir.states.contains(name) && axes.contains(&Some(SymbolId(i)))
            });
        if !bound_by_input {
            return Err(CompileError::Symbolic {
                op: "symbol",
                message: format!(
                    "`{}` appears in no input's shape, so no execute could bind it (declare an \
                     input with it, e.g. a mask or a length)",
                    d.name
                ),
                location: hlir
                    .symbols
                    .locations
                    .get(i)
                    .copied()
                    .unwrap_or_else(SourceLocation::caller),
            });
        }
    }
    let order = petgraph::algo::toposort(g, None).map_err(|_| CompileError::Cyclic)?;
    let mut axes: Vec<Axes> = (0..g.node_count()).map(fixed).collect();
    for n in order {
        let node = &g[n];
        let operands = hlir.operands(n);
        let ins: Vec<&Axes> = operands.iter().map(|a| &axes[a.index()]).collect();
        let shapes: Vec<&[usize]> =
            operands.iter().map(|a| types[a.index()].shape.as_slice()).collect();
        let rank = types[n.index()].shape.len();
        let err = |message: String| CompileError::Symbolic {
            op: node.op.name(),
            message,
            location: node.location,
        };
        let name = |s: SymbolId| hlir.symbols.decls.get(s.0).map_or("?", |d| d.name.as_str());
        let first_symbol = |a: &Axes| a.iter().flatten().next().copied();
        let out: Axes = match &node.op {
            HlirOp::Input { name: input, shape, .. } => match hlir.symbols.inputs.get(input) {
                Some(a) if a.len() == shape.len() => a.clone(),
                Some(a) => {
                    return Err(err(format!(
                        "input `{input}` has {} axes but {} symbolic axis entries",
                        shape.len(),
                        a.len()
                    )));
                }
                None => vec![None; rank],
            },
            HlirOp::Weight { .. } | HlirOp::Constant { .. } => vec![None; rank],
            HlirOp::Map(_) | HlirOp::IntMap(_) => {
                broadcast(&ins, &shapes, rank).map_err(|(i, s, other)| {
                    err(format!("axis {i}: symbol `{}` against {}", name(s), tag(other, &name)))
                })?
            }
            HlirOp::Reduce { axis, .. } | HlirOp::Arg { axis, .. } => {
                let mut a = ins.first().map(|a| (*a).clone()).unwrap_or_default();
                if *axis < a.len() {
                    a.remove(*axis);
                }
                a
            }
            HlirOp::Matmul { epilogue } => {
                let (a, b) = (ins[0], ins[1]);
                let (ra, rb) = (a.len(), b.len());
                if ra < 2 || rb < 2 {
                    vec![None; rank]
                } else {
                    if a[ra - 1] != b[rb - 2] {
                        return Err(err(format!(
                            "the inner axes differ: {} against {}",
                            tag(a[ra - 1], &name),
                            tag(b[rb - 2], &name)
                        )));
                    }
                    let bias = ins.get(2).and_then(|t| t.first().copied()).flatten();
                    if epilogue.has_bias() && bias != b[rb - 1] {
                        return Err(err(format!(
                            "the bias is {} where the columns are {}",
                            tag(bias, &name),
                            tag(b[rb - 1], &name)
                        )));
                    }
                    let batch_ins = [&a[..ra - 2], &b[..rb - 2]];
                    let batch_shapes = [&shapes[0][..ra - 2], &shapes[1][..shapes[1].len() - 2]];
                    let batch = broadcast_slices(&batch_ins, &batch_shapes, rank - 2).map_err(
                        |(i, s, other)| {
                            err(format!(
                                "batch axis {i}: symbol `{}` against {}",
                                name(s),
                                tag(other, &name)
                            ))
                        },
                    )?;
                    batch.into_iter().chain([a[ra - 2], b[rb - 1]]).collect()
                }
            }
            HlirOp::Gather => {
                // table [V, D], ids [...] -> [..., D]
                let mut a = ins.get(1).map(|a| (*a).clone()).unwrap_or_default();
                a.push(ins[0].get(1).copied().flatten());
                a
            }
            HlirOp::Take { axis, .. } => {
                let mut a = ins[0].clone();
                if let Some(slot) = a.get_mut(*axis) {
                    *slot = ins.get(1).and_then(|i| i.first().copied()).flatten();
                }
                a
            }
            HlirOp::Cast { .. } | HlirOp::Output { .. } => ins[0].clone(),
            HlirOp::AppendRows => {
                if ins[0][1..] != ins[1][1..] {
                    return Err(err(format!(
                        "the update's axes {} differ from the state's {} past axis 0",
                        tags(ins[1], &name),
                        tags(ins[0], &name)
                    )));
                }
                ins[0].clone()
            }
            HlirOp::TopK { axis, .. } => {
                if let Some(s) = ins[0].get(*axis).copied().flatten() {
                    return Err(err(format!(
                        "axis {axis} is symbolic (`{}`): k of a live length is not a fixed count",
                        name(s)
                    )));
                }
                ins[0].clone()
            }
            HlirOp::Concat { axis } => {
                if let Some(s) = ins.iter().find_map(|a| a.get(*axis).copied().flatten()) {
                    return Err(err(format!(
                        "joins along symbolic axis {axis} (`{}`): the offsets of the later \
                         operands would move with its value",
                        name(s)
                    )));
                }
                if let Some(w) = ins.windows(2).find(|w| w[0] != w[1]) {
                    return Err(err(format!(
                        "operands with different symbolic axes: {} and {}",
                        tags(w[0], &name),
                        tags(w[1], &name)
                    )));
                }
                ins[0].clone()
            }
            HlirOp::Conv { .. }
            | HlirOp::MaxPool(_)
            | HlirOp::GatherElements { .. }
            | HlirOp::ScatterElements { .. } => {
                if let Some((i, s)) =
                    ins.iter().enumerate().find_map(|(i, a)| first_symbol(a).map(|s| (i, s)))
                {
                    return Err(err(format!(
                        "operand {i} has symbolic axis `{}`, which this op does not take",
                        name(s)
                    )));
                }
                vec![None; rank]
            }
            HlirOp::Move(m) => moved(m, ins[0], shapes[0], &types[n.index()].shape)
                .map_err(|(s, what)| err(format!("{what} symbolic axis `{}`", name(s))))?,
        };
        axes[n.index()] = out;
    }
    Ok(axes)
}

fn tag<'a>(s: Option<SymbolId>, name: &impl Fn(SymbolId) -> &'a str) -> String {
    s.map_or("a fixed axis".to_string(), |s| format!("symbol `{}`", name(s)))
}

fn tags<'a>(a: &Axes, name: &impl Fn(SymbolId) -> &'a str) -> String {
    let parts: Vec<String> = a.iter().map(|s| s.map_or("_".into(), |s| name(s).into())).collect();
    format!("[{}]", parts.join(", "))
}

/// What broadcasting found wrong: the output axis, the symbol, and what it met there (another
/// symbol, or `None`: a fixed length other than 1).
type Clash = (usize, SymbolId, Option<SymbolId>);

/// NumPy broadcasting of symbolic axes (aligned right): a symbolic axis meets the same symbol
/// or a length-1 axis; `Err` ([`Clash`]) when it meets another symbol or a fixed length.
fn broadcast(ins: &[&Axes], shapes: &[&[usize]], rank: usize) -> Result<Axes, Clash> {
    let ins: Vec<&[Option<SymbolId>]> = ins.iter().map(|a| a.as_slice()).collect();
    broadcast_slices(&ins, shapes, rank)
}

fn broadcast_slices(
    ins: &[&[Option<SymbolId>]],
    shapes: &[&[usize]],
    rank: usize,
) -> Result<Axes, Clash> {
    let mut out = vec![None; rank];
    for (i, slot) in out.iter_mut().enumerate() {
        let at = |a: &[Option<SymbolId>], s: &[usize]| -> Option<(Option<SymbolId>, usize)> {
            let pad = rank.checked_sub(s.len())?;
            (i >= pad).then(|| (a.get(i - pad).copied().flatten(), s[i - pad]))
        };
        let present: Vec<(Option<SymbolId>, usize)> =
            ins.iter().zip(shapes).filter_map(|(a, s)| at(a, s)).collect();
        let Some(sym) = present.iter().find_map(|(t, _)| *t) else { continue };
        if let Some(&(other, _)) =
            present.iter().find(|&&(t, len)| t != Some(sym) && !(t.is_none() && len == 1))
        {
            return Err((i, sym, other));
        }
        *slot = Some(sym);
    }
    Ok(out)
}

/// The symbolic axes after a movement op (`input` of shape `from`, result of shape `to`), or
/// `Err((symbol, what it does))`.
fn moved(
    m: &MoveOp,
    input: &Axes,
    from: &[usize],
    to: &[usize],
) -> Result<Axes, (SymbolId, &'static str)> {
    let sym_at = |i: usize| input.get(i).copied().flatten();
    match m {
        MoveOp::Permute { perm } => Ok(perm.iter().map(|&p| sym_at(p)).collect()),
        MoveOp::Expand { shape } => {
            let pad = shape.len().saturating_sub(input.len());
            let mut out = vec![None; shape.len()];
            for (i, slot) in out.iter_mut().enumerate().skip(pad) {
                if let Some(s) = sym_at(i - pad) {
                    if from.get(i - pad) != shape.get(i) {
                        return Err((s, "expands"));
                    }
                    *slot = Some(s);
                }
            }
            Ok(out)
        }
        MoveOp::Slice { axis, start, end } => match sym_at(*axis) {
            Some(s) if !(*start == 0 && Some(end) == from.get(*axis)) => Err((s, "slices")),
            _ => Ok(input.clone()),
        },
        MoveOp::Window { axis, .. } => match sym_at(*axis) {
            Some(s) => Err((s, "takes windows of")),
            None => {
                let mut out = input.clone();
                out.insert((*axis + 1).min(out.len()), None);
                Ok(out)
            }
        },
        MoveOp::Reshape { .. } => {
            let mut out = vec![None; to.len()];
            for (i, s) in input.iter().enumerate() {
                let Some(s) = *s else { continue };
                let outer: usize = from[..i].iter().product();
                let inner: usize = from[i + 1..].iter().product();
                let kept = (0..to.len()).find(|&o| {
                    to[o] == from[i]
                        && out[o].is_none()
                        && to[..o].iter().product::<usize>() == outer
                        && to[o + 1..].iter().product::<usize>() == inner
                });
                match kept {
                    Some(o) => out[o] = Some(s),
                    None => return Err((s, "merges or splits")),
                }
            }
            Ok(out)
        }
    }
}

/// Why a binding or a live view failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// A symbol's value is 0 or past its bound.
    #[error("symbol `{name}` = {value} is outside 1..={bound}")]
    OutOfRange {
        /// The symbol.
        name: String,
        /// The value given.
        value: usize,
        /// Its bound.
        bound: usize,
    },
    /// Two inputs give one symbol two values.
    #[error(
        "symbol `{name}` is {first} by input `{first_input}` but {second} by input `{second_input}`"
    )]
    Conflict {
        /// The symbol.
        name: String,
        /// The first value.
        first: usize,
        /// The input that gave it.
        first_input: String,
        /// The other value.
        second: usize,
        /// The input that gave it.
        second_input: String,
    },
    /// A symbol no input's shape binds.
    #[error("symbol `{name}` appears in no input's shape, so no execute can bind it")]
    Unbound {
        /// The symbol.
        name: String,
    },
    /// An input's given shape differs from its declared one on a fixed axis or in rank.
    #[error("input `{name}` is {} but is declared {expected}", ShapeText(got.clone()))]
    Shape {
        /// The input.
        name: String,
        /// The declared shape, symbols printed (`[seq<=32, 512]`).
        expected: String,
        /// The shape given.
        got: Vec<usize>,
    },
    /// An append of more rows than its state has live: the rows `total - seq .. total` would
    /// start before row 0.
    #[error(
        "append_rows to `{state}` writes {rows} rows but the state has {live} live rows{}",
        symbol.as_ref().map_or(String::new(), |s| format!(" (`{s}` = {live})"))
    )]
    AppendPastState {
        /// The state.
        state: String,
        /// Rows the update has.
        rows: usize,
        /// Rows the state has at this binding.
        live: usize,
        /// The symbol of the state's rows, if any.
        symbol: Option<String>,
    },
    /// A view the live layout cannot express (a program [`propagate`] should have refused).
    #[error("buffer `{buffer}`: {reason}")]
    View {
        /// The buffer read.
        buffer: String,
        /// What went wrong.
        reason: String,
    },
}

impl Llir {
    /// The value of every symbol (declaration order) that the input shapes `given` (by input
    /// name; `None`: not given) bind, checked: each symbolic axis in `1..=bound`, the same
    /// value wherever a symbol appears, every fixed axis as declared. Inputs not given are
    /// skipped (the runtime reports them missing).
    ///
    /// # Errors
    /// [`BindError::Shape`], [`BindError::OutOfRange`], [`BindError::Conflict`],
    /// [`BindError::Unbound`].
    pub fn bind_inputs<'a>(
        &self,
        given: impl Fn(&str) -> Option<&'a [usize]>,
    ) -> Result<Vec<usize>, BindError> {
        let decls = &self.symbols;
        let mut values: Vec<Option<(usize, &str)>> = vec![None; decls.len()];
        for buf in self.buffers.iter().filter(|b| b.role == crate::BufferRole::Input) {
            let Some(got) = given(&buf.id) else { continue };
            let shape_err = || BindError::Shape {
                name: buf.id.clone(),
                expected: SymbolicShape { shape: &buf.shape, axes: &buf.axes, decls }.to_string(),
                got: got.to_vec(),
            };
            if got.len() != buf.shape.len() {
                return Err(shape_err());
            }
            for (i, (&g, &d)) in got.iter().zip(&buf.shape).enumerate() {
                let Some(s) = buf.axes.get(i).copied().flatten() else {
                    if g != d {
                        return Err(shape_err());
                    }
                    continue;
                };
                let decl = &decls[s.0];
                if g == 0 || g > decl.bound {
                    return Err(BindError::OutOfRange {
                        name: decl.name.clone(),
                        value: g,
                        bound: decl.bound,
                    });
                }
                match values[s.0] {
                    Some((v, first)) if v != g => {
                        return Err(BindError::Conflict {
                            name: decl.name.clone(),
                            first: v,
                            first_input: first.to_string(),
                            second: g,
                            second_input: buf.id.clone(),
                        });
                    }
                    _ => values[s.0] = Some((g, buf.id.as_str())),
                }
            }
        }
        values
            .iter()
            .zip(decls)
            .map(|(v, d)| {
                v.map(|(v, _)| v).ok_or_else(|| BindError::Unbound { name: d.name.clone() })
            })
            .collect()
    }

    /// Checks `values` (declaration order): each in `1..=bound`.
    ///
    /// # Errors
    /// [`BindError::OutOfRange`] naming the first symbol out of range or missing.
    pub fn check_values(&self, values: &[usize]) -> Result<(), BindError> {
        for (i, d) in self.symbols.iter().enumerate() {
            let v = values.get(i).copied().unwrap_or(0);
            if v == 0 || v > d.bound {
                return Err(BindError::OutOfRange {
                    name: d.name.clone(),
                    value: v,
                    bound: d.bound,
                });
            }
        }
        Ok(())
    }

    /// Buffer `b`'s live shape at `values` (checked by [`Llir::check_values`]): its shape with
    /// each symbolic axis at its value.
    pub fn live_shape(&self, b: usize, values: &[usize]) -> Vec<usize> {
        let buf = &self.buffers[b];
        buf.shape
            .iter()
            .enumerate()
            .map(|(i, &d)| buf.axes.get(i).copied().flatten().map_or(d, |s| values[s.0]))
            .collect()
    }

    /// The symbols node `i`'s live form depends on: those of the buffers it reads or writes,
    /// ascending (empty: the node is the same at every binding).
    pub fn node_symbols(&self, i: usize) -> Vec<SymbolId> {
        let Some(node) = self.nodes.get(i) else { return Vec::new() };
        let mut syms: Vec<SymbolId> = node
            .buffers()
            .filter_map(|b| self.buffers.get(b))
            .flat_map(|b| b.axes.iter().flatten().copied())
            .collect();
        syms.sort_unstable();
        syms.dedup();
        syms
    }

    /// Node `i` of the live LLIR whose buffers have the shapes `live` (per buffer, from
    /// [`Llir::live_shape`]): its operand views restrided and its sizes recomputed (see
    /// [`Llir::bind`]).
    ///
    /// # Errors
    /// [`BindError::View`] for an operand view the live layout cannot express.
    pub fn bind_node(&self, i: usize, live: &[Vec<usize>]) -> Result<LlirNode, BindError> {
        let orig = &self.nodes[i];
        let mut node = orig.clone();
        for (o, r) in node.reads.iter_mut().zip(&orig.reads) {
            let buf = &self.buffers[r.buffer];
            o.view = live_view(&buf.shape, &live[r.buffer], &r.view)
                .map_err(|reason| BindError::View { buffer: buf.id.clone(), reason })?;
        }
        // A broadcast axis (stride 0) does not know its live length from its buffer: it
        // is the length the other operands have there.
        match node.op {
            LlirOp::Map { .. } => {
                let rank = node.reads.first().map_or(0, |r| r.view.rank());
                for i in 0..rank {
                    let len = node.reads.iter().find(|r| r.view.strides[i] != 0);
                    if let Some(len) = len.map(|r| r.view.shape[i]) {
                        node.reads.iter_mut().for_each(|r| r.view.shape[i] = len);
                    }
                }
            }
            LlirOp::LtMatmul { .. } => {
                if let [a, b, ..] = node.reads.as_mut_slice() {
                    let (ra, rb) = (a.view.rank(), b.view.rank());
                    let mut pairs: Vec<(usize, usize)> = vec![(ra - 1, rb - 2)];
                    if ra == rb {
                        pairs.extend((0..ra - 2).map(|i| (i, i)));
                    }
                    for (i, j) in pairs {
                        if a.view.strides[i] == 0 {
                            a.view.shape[i] = b.view.shape[j];
                        } else {
                            b.view.shape[j] = a.view.shape[i];
                        }
                    }
                }
            }
            _ => {}
        }
        let out_len = node.writes.first().map(|&w| live[w].iter().product::<usize>()).unwrap_or(0);
        let axis_len = |axis: usize| {
            node.reads.first().and_then(|r| r.view.shape.get(axis)).copied().unwrap_or(0)
        };
        node.op = match node.op {
            LlirOp::LtMatmul { epilogue, .. } => {
                let (a, b) = (&node.reads[0].view, &node.reads[1].view);
                let ra = a.rank();
                LlirOp::LtMatmul {
                    batch: a.shape[..ra - 2].iter().product(),
                    m: a.shape[ra - 2],
                    k: a.shape[ra - 1],
                    n: b.shape[b.rank() - 1],
                    epilogue,
                }
            }
            LlirOp::Map { op, .. } => LlirOp::Map { op, len: out_len },
            LlirOp::IntMap { op, .. } => LlirOp::IntMap { op, len: out_len },
            LlirOp::Reduce { op, axis, .. } => {
                LlirOp::Reduce { op, axis, len: out_len, extent: axis_len(axis) }
            }
            LlirOp::Gather { .. } => {
                let table = &node.reads[0].view.shape;
                LlirOp::Gather {
                    rows: node.reads[1].view.elements(),
                    dim: table.get(1).copied().unwrap_or(0),
                    vocab: table.first().copied().unwrap_or(0),
                }
            }
            LlirOp::Take { axis, fill, .. } => {
                LlirOp::Take { axis, len: out_len, extent: axis_len(axis), fill }
            }
            LlirOp::Cast { to, .. } => LlirOp::Cast { to, len: out_len },
            LlirOp::Arg { max, axis, last, .. } => {
                LlirOp::Arg { max, axis, last, len: out_len, extent: axis_len(axis) }
            }
            LlirOp::TopK { axis, k, largest, .. } => {
                LlirOp::TopK { axis, k, largest, len: out_len, extent: axis_len(axis) }
            }
            LlirOp::Concat { axis, .. } => LlirOp::Concat { axis, len: out_len },
            LlirOp::AppendRows { .. } => {
                let rows = node.reads.first().and_then(|r| r.view.shape.first()).copied();
                let state = node.writes.first().map(|&w| (w, &live[w]));
                if let (Some(rows), Some((w, shape))) = (rows, state)
                    && rows > shape.first().copied().unwrap_or(0)
                {
                    let buf = &self.buffers[w];
                    let symbol = buf.axes.first().copied().flatten();
                    return Err(BindError::AppendPastState {
                        state: buf.id.clone(),
                        rows,
                        live: shape.first().copied().unwrap_or(0),
                        symbol: symbol.and_then(|s| self.symbols.get(s.0)).map(|d| d.name.clone()),
                    });
                }
                LlirOp::AppendRows { len: node.reads.first().map_or(0, |r| r.view.elements()) }
            }
            op => op,
        };
        Ok(node)
    }

    /// The live LLIR at symbol values `values` (declaration order; see the module docs):
    /// every buffer's shape with its symbolic axes at their values, every operand's view
    /// restrided for its buffer's live layout, every op's sizes recomputed. Byte sizes, uses
    /// and the plan's offsets are the compiled ones (the bound's).
    ///
    /// # Errors
    /// [`BindError::OutOfRange`] for a value outside `1..=bound` or a missing one;
    /// [`BindError::View`] for an operand view the live layout cannot express.
    pub fn bind(&self, values: &[usize]) -> Result<Llir, BindError> {
        self.check_values(values)?;
        let live: Vec<Vec<usize>> =
            (0..self.buffers.len()).map(|b| self.live_shape(b, values)).collect();
        let nodes =
            (0..self.nodes.len()).map(|i| self.bind_node(i, &live)).collect::<Result<_, _>>()?;
        let mut out = Llir { nodes, buffers: self.buffers.clone(), symbols: self.symbols.clone() };
        for (buf, shape) in out.buffers.iter_mut().zip(live) {
            buf.shape = shape;
        }
        Ok(out)
    }
}

impl Llir {
    /// FLOP of one execute as a polynomial in the symbols (`128*seq*total + 320*seq`): the
    /// sum of [`LlirOp::flops`] over the live LLIR ([`Llir::bind`]) fitted by
    /// [`Polynomial::fit`]. `None` for a program without symbols, or when the count is not a
    /// polynomial of degree at most [`crate::polynomial::MAX_DEGREE`] in each symbol.
    pub fn flops_polynomial(&self) -> Option<Polynomial> {
        if self.symbols.is_empty() {
            return None;
        }
        let names: Vec<String> = self.symbols.iter().map(|d| d.name.clone()).collect();
        let bounds: Vec<usize> = self.symbols.iter().map(|d| d.bound).collect();
        // Node by node: an append (a copy, no FLOP) may not bind at grid points no execute
        // reaches (more rows appended than the state has live), where the others still count.
        Polynomial::fit(&names, &bounds, |values| {
            self.check_values(values).ok()?;
            let live: Vec<Vec<usize>> =
                (0..self.buffers.len()).map(|b| self.live_shape(b, values)).collect();
            (0..self.nodes.len())
                .filter(|&i| !matches!(self.nodes[i].op, LlirOp::AppendRows { .. }))
                .try_fold(0u64, |acc, i| {
                    Some(acc.saturating_add(self.bind_node(i, &live).ok()?.op.flops()))
                })
        })
    }
}

/// `view` of a dense row-major buffer of `bound` shape, restrided for the same buffer written
/// dense at `live` shape (each axis at most as long; the symbolic ones shorter). Each view
/// axis steps along a run of adjacent buffer axes (a reshape that merged them), part of one
/// buffer axis (a reshape that split it), or none (stride 0, broadcast); its live length and
/// stride follow the live lengths of those buffer axes, and the offset's position is kept.
///
/// # Errors
/// A message when a view axis covers part of an axis whose length changes (a slice or a split
/// of a symbolic axis) or the offset lies inside such an axis' shortened part.
pub fn live_view(bound: &[usize], live: &[usize], view: &View) -> Result<View, String> {
    if bound == live || view.elements() == 0 {
        return Ok(view.clone());
    }
    let bs = row_major_strides(bound);
    let ls = row_major_strides(live);
    let changed = |j: usize| bound[j] != live[j];
    // The offset as a position in the bound buffer, re-laid out.
    let mut offset = 0usize;
    let mut rest = view.offset;
    for j in 0..bound.len() {
        let idx = if bs[j] == 0 { 0 } else { rest / bs[j] };
        rest -= idx * bs[j];
        if changed(j) && idx >= live[j] && view.elements() > 0 {
            return Err(format!("the view starts at index {idx} of an axis now {} long", live[j]));
        }
        offset += idx * ls[j];
    }
    let mut shape = Vec::with_capacity(view.rank());
    let mut strides = Vec::with_capacity(view.rank());
    for (&len, &stride) in view.shape.iter().zip(&view.strides) {
        if stride == 0 {
            shape.push(len);
            strides.push(0);
            continue;
        }
        if len <= 1 {
            // Any stride addresses one element, but kernels choose their path by strides: keep
            // the one the program compiled at the live shape has (that of the buffer axis
            // with this stride, at the live layout).
            shape.push(len);
            strides
                .push((0..bound.len()).rev().find(|&j| bs[j] == stride).map_or(stride, |j| ls[j]));
            continue;
        }
        // The innermost buffer axis this axis steps within: bs[j] <= stride < bs[j-1].
        let Some(j) = (0..bound.len())
            .rev()
            .find(|&j| bs[j] > 0 && stride % bs[j] == 0 && stride / bs[j] < bound[j])
        else {
            return Err(format!("an axis of stride {stride} matches no buffer axis"));
        };
        let q = stride / bs[j];
        if q * len <= bound[j] {
            // Within buffer axis j (a split part, or all of it when q = 1 and len = bound).
            if changed(j) {
                if q != 1 || len != bound[j] {
                    return Err(format!(
                        "an axis covers {len} x {q} of an axis of length {} that is now {}",
                        bound[j], live[j]
                    ));
                }
                shape.push(live[j]);
            } else {
                shape.push(len);
            }
            strides.push(q * ls[j]);
            continue;
        }
        // A merge of buffer axes j, j-1, ...: whole axes only (q = 1), lengths multiplying.
        if q != 1 {
            return Err(format!("an axis of stride {stride} and length {len} straddles axes"));
        }
        let (mut covered, mut live_len, mut i) = (1usize, 1usize, j + 1);
        while covered < len && i > 0 {
            i -= 1;
            covered *= bound[i];
            live_len *= live[i];
        }
        if covered != len {
            return Err(format!("an axis of length {len} does not cover whole buffer axes"));
        }
        shape.push(live_len);
        strides.push(ls[j]);
    }
    Ok(View { shape, strides, offset })
}
