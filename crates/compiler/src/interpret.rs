//! An f64 interpreter of the HLIR: the program as the user wrote it, op by op on whole
//! row-major values, with no lowering, no views in buffers, no fusion and no slab.
//!
//! It is the oracle that checks lowering itself: the runtimes and the LLIR reference
//! interpreter (in lumen-runtime) both read operands through the views lowering made, so a
//! wrong view would fool them alike; this interpreter never sees one. Movement ops copy,
//! broadcasting is NumPy's, matmuls are plain triple loops, and elementwise ops and
//! reductions take their scalar meaning from the op table ([`crate::ops`]), so a NaN rule is
//! the same everywhere. The role NumPy plays for TVM's and XLA's lowering tests.

use std::collections::BTreeMap;

use crate::error::CompileError;
use crate::hlir::{Hlir, HlirOp, Shape};
use crate::llir::Epilogue;
use crate::ops::ElemOp;
use crate::view::{View, walk};

/// A row-major f64 tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// Shape in elements.
    pub shape: Shape,
    /// Elements, row-major.
    pub data: Vec<f64>,
}

/// The elements of contiguous `data` read through `view` of it, in row-major order.
fn read(data: &[f64], view: &View) -> Vec<f64> {
    let mut out = Vec::with_capacity(view.elements());
    walk(&view.shape, [view], |[o]| out.push(data[o]));
    out
}

fn epilogue_f64(epilogue: Epilogue, x: f64) -> f64 {
    match epilogue.activation() {
        Some(act) => ElemOp::Unary(act).eval_f64([x, 0.0, 0.0]),
        None => x,
    }
}

/// Runs `hlir` on `leaves` (every input and weight by name, row-major values: f32 data
/// widened, integer ids as whole numbers) and returns every output by name.
///
/// # Errors
/// Every error of [`Hlir::infer`]; [`CompileError::Program`] (program `interpret`) for a
/// missing leaf, a leaf of the wrong size, or a gather id outside its table.
pub fn eval_hlir(
    hlir: &Hlir,
    leaves: &BTreeMap<String, Vec<f64>>,
) -> Result<BTreeMap<String, Value>, CompileError> {
    let bad = |message: String| CompileError::Program { program: "interpret", message };
    let types = hlir.infer()?;
    // Leaves checked in declaration order, so the first missing one is named.
    for n in hlir.graph.node_indices() {
        if let HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } = &hlir.graph[n].op {
            let want: usize = types[n.index()].shape.iter().product();
            match leaves.get(name) {
                None => return Err(bad(format!("no values for `{name}`"))),
                Some(d) if d.len() != want => {
                    return Err(bad(format!("`{name}` has {} values, expected {want}", d.len())));
                }
                Some(_) => {}
            }
        }
    }
    let order = petgraph::algo::toposort(&hlir.graph, None).map_err(|_| CompileError::Cyclic)?;
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); hlir.graph.node_count()];
    let mut outs = BTreeMap::new();
    for n in order {
        let ops = hlir.operands(n);
        let shape = |i: usize| types[ops[i].index()].shape.clone();
        let v = |i: usize| &vals[ops[i].index()];
        let out_shape = types[n.index()].shape.clone();
        let len: usize = out_shape.iter().product();
        let value = match &hlir.graph[n].op {
            HlirOp::Input { name, .. } | HlirOp::Weight { name, .. } => {
                leaves.get(name).cloned().unwrap_or_default()
            }
            HlirOp::Constant { value } => vec![f64::from(value.value())],
            HlirOp::Map(_) | HlirOp::IntMap(_) => {
                let args: Vec<Vec<f64>> = (0..ops.len())
                    .map(|i| {
                        let view = View::contiguous(&shape(i)).expand(&out_shape);
                        view.map(|view| read(v(i), &view)).ok_or_else(|| bad("broadcast".into()))
                    })
                    .collect::<Result<_, _>>()?;
                let arg = |k: usize, i: usize| args.get(k).map_or(0.0, |a| a[i]);
                match &hlir.graph[n].op {
                    // Integers held as f64: exact for i32, and for i64 up to 2^53.
                    HlirOp::IntMap(op) => {
                        let dtype = types[n.index()].dtype;
                        (0..len).map(|i| op.eval_f64(dtype, arg(0, i), arg(1, i))).collect()
                    }
                    HlirOp::Map(op) => {
                        (0..len).map(|i| op.eval_f64([arg(0, i), arg(1, i), arg(2, i)])).collect()
                    }
                    other => return Err(bad(format!("{} is not elementwise", other.name()))),
                }
            }
            HlirOp::Reduce { op, axis } => {
                let s = shape(0);
                let x = v(0);
                let inner: usize = s[axis + 1..].iter().product();
                let outer: usize = s[..*axis].iter().product();
                let mut out = Vec::with_capacity(len);
                for o in 0..outer {
                    for r in 0..inner {
                        let along = (0..s[*axis]).map(|e| x[(o * s[*axis] + e) * inner + r]);
                        out.push(along.fold(op.identity_f64(), |acc, y| op.combine_f64(acc, y)));
                    }
                }
                out
            }
            HlirOp::Matmul { epilogue } => {
                let (sa, sb) = (shape(0), shape(1));
                let (ra, rb) = (sa.len(), sb.len());
                let (m, k, cols) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
                let batch = &out_shape[..out_shape.len() - 2];
                let full = |tail: [usize; 2]| batch.iter().copied().chain(tail).collect::<Vec<_>>();
                let expand = |i: usize, to: &[usize]| {
                    View::contiguous(&shape(i)).expand(to).map(|view| read(v(i), &view))
                };
                let a = expand(0, &full([m, k])).ok_or_else(|| bad("matmul batch".into()))?;
                let w = expand(1, &full([k, cols])).ok_or_else(|| bad("matmul batch".into()))?;
                let bias = if epilogue.has_bias() { v(2).clone() } else { vec![0.0; cols] };
                let count: usize = batch.iter().product();
                let mut out = vec![0.0; count * m * cols];
                for t in 0..count {
                    for i in 0..m {
                        for j in 0..cols {
                            let dot: f64 = (0..k)
                                .map(|p| a[(t * m + i) * k + p] * w[(t * k + p) * cols + j])
                                .sum();
                            out[(t * m + i) * cols + j] = epilogue_f64(*epilogue, dot + bias[j]);
                        }
                    }
                }
                out
            }
            HlirOp::Gather => {
                let (table, ids) = (v(0), v(1));
                let (rows, dim) = (shape(0)[0], shape(0)[1]);
                let mut out = Vec::with_capacity(len);
                for &id in ids {
                    if !(0.0..rows as f64).contains(&id) {
                        return Err(bad(format!("gather id {id} outside 0..{rows}")));
                    }
                    let r = id as usize;
                    out.extend_from_slice(&table[r * dim..(r + 1) * dim]);
                }
                out
            }
            HlirOp::Conv { spec, epilogue } => {
                let geo = crate::conv::ConvGeometry::new(spec, &shape(0), &shape(1))
                    .map_err(|e| bad(format!("conv: {e}")))?;
                let (x, w) = (v(0), v(1));
                let extra = |k: usize| if k < ops.len() { Some(v(k)) } else { None };
                let bias = if epilogue.bias { extra(2) } else { None };
                let residual =
                    if epilogue.residual { extra(2 + usize::from(epilogue.bias)) } else { None };
                crate::conv::conv_f64(
                    &geo,
                    *epilogue,
                    |i| x[i],
                    |i| w[i],
                    |i| bias.map_or(0.0, |b| b[i]),
                    |i| residual.map_or(0.0, |r| r[i]),
                )
            }
            HlirOp::MaxPool(spec) => {
                let geo = crate::conv::ConvGeometry::pool(spec, &shape(0))
                    .map_err(|e| bad(format!("max_pool: {e}")))?;
                let x = v(0);
                crate::conv::max_pool_f64(&geo, |i| x[i])
            }
            HlirOp::Take { axis, fill } => {
                let (x, idx) = (v(0), v(1));
                let s = shape(0);
                let extent = s[*axis];
                let inner: usize = s[axis + 1..].iter().product();
                let outer: usize = s[..*axis].iter().product();
                let mut out = Vec::with_capacity(len);
                for o in 0..outer {
                    for &id in idx {
                        if id < 0.0 {
                            out.extend(std::iter::repeat_n(f64::from(fill.value()), inner));
                        } else if id >= extent as f64 {
                            return Err(bad(format!("take index {id} outside 0..{extent}")));
                        } else {
                            let start = (o * extent + id as usize) * inner;
                            out.extend_from_slice(&x[start..start + inner]);
                        }
                    }
                }
                out
            }
            HlirOp::Cast { to } => v(0).iter().map(|&x| to.cast_f64(x)).collect(),
            HlirOp::Arg { max, axis, last } => {
                let s = shape(0);
                let x = v(0);
                let inner: usize = s[axis + 1..].iter().product();
                let outer: usize = s[..*axis].iter().product();
                let mut out = Vec::with_capacity(len);
                for o in 0..outer {
                    for r in 0..inner {
                        let along = (0..s[*axis]).map(|e| x[(o * s[*axis] + e) * inner + r]);
                        out.push(crate::ops::arg_index(along, *max, *last) as f64);
                    }
                }
                out
            }
            HlirOp::TopK { axis, k, largest } => {
                let s = shape(0);
                let x = v(0);
                let inner: usize = s[axis + 1..].iter().product();
                let outer: usize = s[..*axis].iter().product();
                let mut out = vec![0.0; len];
                for o in 0..outer {
                    for r in 0..inner {
                        let along: Vec<f64> =
                            (0..s[*axis]).map(|e| x[(o * s[*axis] + e) * inner + r]).collect();
                        for (j, &i) in crate::ops::top_k(&along, *k, *largest).iter().enumerate() {
                            out[(o * k + j) * inner + r] = i as f64;
                        }
                    }
                }
                out
            }
            HlirOp::GatherElements { axis } => {
                let (data, idx) = (v(0), v(1));
                let (ds, is) = (shape(0), shape(1));
                let dv = View::contiguous(&ds);
                let mut out = Vec::with_capacity(len);
                for flat in 0..len {
                    let mut pos = crate::view::unravel(flat, &is);
                    let len_axis = ds[*axis] as f64;
                    let id = idx[flat];
                    let id = if id < 0.0 { id + len_axis } else { id };
                    if !(0.0..len_axis).contains(&id) {
                        return Err(bad(format!(
                            "gather_elements index {} outside the axis of {len_axis}",
                            idx[flat]
                        )));
                    }
                    pos[*axis] = id as usize;
                    out.push(data[dv.offset_of(&pos)]);
                }
                out
            }
            HlirOp::ScatterElements { axis, reduction } => {
                let (idx, upd) = (v(1), v(2));
                let dtype = types[n.index()].dtype;
                crate::ops::scatter_elements_f64(
                    v(0).clone(),
                    &shape(0),
                    &shape(1),
                    *axis,
                    *reduction,
                    dtype,
                    |i| idx[i],
                    |i| upd[i],
                )
                .map_err(|e| {
                    bad(format!(
                        "scatter_elements index {} outside the axis of {}",
                        e.index,
                        shape(0)[*axis]
                    ))
                })?
            }
            HlirOp::AppendRows => {
                // The state's values (given like an input's; zeros when not given), its last
                // rows replaced.
                let mut out = v(0).clone();
                out.resize(len, 0.0);
                let update = v(1);
                let at = len.saturating_sub(update.len());
                out[at..].copy_from_slice(&update[..len - at]);
                out
            }
            HlirOp::Concat { axis } => {
                let mut out = vec![0.0; len];
                let whole = View::contiguous(&out_shape);
                let mut start = 0;
                for i in 0..ops.len() {
                    let width = shape(i)[*axis];
                    let dst = whole.slice(*axis, start, start + width);
                    let x = v(i);
                    let mut e = 0;
                    walk(&dst.shape, [&dst], |[o]| {
                        out[o] = x[e];
                        e += 1;
                    });
                    start += width;
                }
                out
            }
            HlirOp::Move(m) => {
                let view = m.apply(&View::contiguous(&shape(0)));
                read(v(0), &view.ok_or_else(|| bad(format!("{m}")))?)
            }
            HlirOp::Output { name } => {
                outs.insert(name.clone(), Value { shape: out_shape.clone(), data: v(0).clone() });
                Vec::new()
            }
        };
        vals[n.index()] = value;
    }
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Graph;

    #[test]
    fn movement_broadcast_and_matmul_by_the_book() {
        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        let b = cx.weight("b", [3]);
        (x.transpose(0, 1).matmul(&x) + &b).output("y");
        x.sum(0, false).output("s");
        let leaves: BTreeMap<String, Vec<f64>> = [
            ("x".to_string(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            ("b".to_string(), vec![10.0, 20.0, 30.0]),
        ]
        .into();
        let out = eval_hlir(&cx.hlir(), &leaves).unwrap();
        // x^T x = [[17, 22, 27], [22, 29, 36], [27, 36, 45]], plus b on every row.
        assert_eq!(out["y"].data, [27.0, 42.0, 57.0, 32.0, 49.0, 66.0, 37.0, 56.0, 75.0]);
        assert_eq!(out["y"].shape, [3, 3]);
        assert_eq!(out["s"].data, [5.0, 7.0, 9.0]);
        let err = eval_hlir(&cx.hlir(), &BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("no values for `x`"), "{err}");
    }
}
