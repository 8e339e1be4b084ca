//! A naive f64 interpreter of the LLIR: no slab, no reuse, no fast kernels; every buffer its
//! own vector, every sum in f64. It is the oracle the numeric tests compare the runtimes
//! against (the role NumPy plays in TVM's and XLA's test suites).
//!
//! Every op has the runtimes' semantics, taken from the compiler's op table
//! ([`lumen_compiler::ElemOp::eval_f64`], [`ReduceOp::combine_f64`]), not whatever an f64 library call happens
//! to do: NaN in, NaN out for relu and gelu (a runtime that produces NaN must disagree with a
//! finite oracle, never be excused by it), relu(-0) = -0, gelu(±inf) its limits (+inf, -0).
//! Operands are read through their views with [`View::index`], one element at a time: slow,
//! and independent of the kernels' loop nests.

use indexmap::IndexMap;
use lumen_compiler::{BufferRole, DType, Llir, LlirOp, ReduceOp, View};

use crate::error::TensorKind;
use crate::kernels::epilogue_parts;
use crate::layout::duplicate_buffer_id;
use crate::runtime::check_tensors;
use crate::{RuntimeError, Tensors};

pub use lumen_compiler::ops::{gelu_f64, relu_f64};

/// A row-major f64 tensor produced by [`execute_f64`].
#[derive(Debug, Clone, PartialEq)]
pub struct RefTensor {
    /// Shape in elements.
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub data: Vec<f64>,
}

fn act_f64(act: crate::kernels::Activation, x: f64) -> f64 {
    match act {
        crate::kernels::Activation::Identity => x,
        crate::kernels::Activation::Relu => relu_f64(x),
        crate::kernels::Activation::Gelu => gelu_f64(x),
    }
}

/// Runs `llir` on `weights` and `inputs` in f64 and returns its outputs in readback order.
///
/// # Errors
/// `Missing`, `Unexpected`, `ShapeMismatch`, `DTypeMismatch` for tensors that do not match the
/// program; [`RuntimeError::IndexOutOfRange`] for a gather id outside its table (or a take's,
/// gather_elements' or scatter_elements' index outside its axis);
/// [`RuntimeError::InvalidProgram`] (label `reference`) when two buffers share an id (checked
/// first), or a node reads a buffer no earlier node wrote, names an absent buffer, reads
/// through a view that leaves its buffer or does not fit the op (or sizes whose product
/// overflows `usize`).
pub fn execute_f64(
    llir: &Llir,
    weights: &Tensors,
    inputs: &Tensors,
) -> Result<IndexMap<String, RefTensor>, RuntimeError> {
    let bad = |reason: String| RuntimeError::invalid("reference", reason);
    if let Some(reason) = duplicate_buffer_id(&llir.buffers) {
        return Err(bad(reason));
    }
    check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
    check_tensors(&llir.buffers, TensorKind::Input, inputs)?;
    let mut vals: Vec<Option<Vec<f64>>> = vec![None; llir.buffers.len()];
    let mut outputs = IndexMap::new();
    for (n, node) in llir.nodes.iter().enumerate() {
        // Operand i: its buffer's values and its view, checked to stay inside the buffer.
        let read = |i: usize| -> Result<(&[f64], &View), RuntimeError> {
            let o = node.reads.get(i).ok_or_else(|| bad(format!("node {n} lacks operand {i}")))?;
            let v = vals.get(o.buffer).and_then(|v| v.as_deref()).ok_or_else(|| {
                bad(format!("node {n} reads buffer {} before it is written", o.buffer))
            })?;
            let fits = o.view.strides.len() == o.view.shape.len()
                && o.view.extent().is_some_and(|e| e <= v.len());
            if !fits {
                return Err(bad(format!("node {n}: operand {i}'s view leaves its buffer")));
            }
            Ok((v, &o.view))
        };
        let at = |(v, view): (&[f64], &View), i: usize| v[view.index(i)];
        let count = |a: usize, b: usize| -> Result<usize, RuntimeError> {
            a.checked_mul(b).ok_or_else(|| bad(format!("node {n}: sizes overflow")))
        };
        let result: Option<Vec<f64>> = match node.op {
            LlirOp::Upload => {
                for &w in &node.writes {
                    let buf =
                        llir.buffers.get(w).ok_or_else(|| bad(format!("absent buffer {w}")))?;
                    let src = match buf.role {
                        BufferRole::Constant(value) => {
                            vals[w] = Some(vec![f64::from(value.value())]);
                            continue;
                        }
                        BufferRole::Input => inputs.get(&buf.id),
                        _ => weights.get(&buf.id),
                    };
                    let src =
                        src.ok_or_else(|| bad(format!("upload of `{}`: no tensor", buf.id)))?;
                    vals[w] = Some(match src.index_values() {
                        Some(ids) => ids.iter().map(|&x| x as f64).collect(),
                        None => src.data().iter().map(|&x| f64::from(x)).collect(),
                    });
                }
                None
            }
            LlirOp::Readback => {
                for r in node.read_buffers() {
                    let buf =
                        llir.buffers.get(r).ok_or_else(|| bad(format!("absent buffer {r}")))?;
                    let data = vals.get(r).and_then(Clone::clone).ok_or_else(|| {
                        bad(format!("readback of `{}` before it is written", buf.id))
                    })?;
                    outputs.insert(buf.id.clone(), RefTensor { shape: buf.shape.clone(), data });
                }
                None
            }
            LlirOp::LtMatmul { batch, m, k, n: cols, epilogue } => {
                let (has_bias, act) = epilogue_parts(epilogue);
                let (mk, kn, mn) = (count(m, k)?, count(k, cols)?, count(m, cols)?);
                let (a, b) = (read(0)?, read(1)?);
                let r = a.1.rank();
                let fits = r >= 2
                    && b.1.rank() == r
                    && a.1.shape[r - 2..] == [m, k]
                    && b.1.shape[r - 2..] == [k, cols]
                    && a.1.elements() == count(batch, mk)?
                    && b.1.elements() == count(batch, kn)?;
                if !fits {
                    return Err(bad(format!("node {n}: matmul views do not match its sizes")));
                }
                let bias = if has_bias { Some(read(2)?) } else { None };
                if bias.is_some_and(|b| b.1.elements() != cols) {
                    return Err(bad(format!("node {n}: bias view is not [{cols}]")));
                }
                let mut out = vec![0.0; count(batch, mn)?];
                for t in 0..batch {
                    for i in 0..m {
                        for j in 0..cols {
                            let dot: f64 = (0..k)
                                .map(|p| at(a, (t * m + i) * k + p) * at(b, (t * k + p) * cols + j))
                                .sum();
                            let bv = bias.map_or(0.0, |bv| at(bv, j));
                            out[(t * m + i) * cols + j] = act_f64(act, dot + bv);
                        }
                    }
                }
                Some(out)
            }
            LlirOp::Map { op, len } => {
                let ins = (0..op.arity()).map(read).collect::<Result<Vec<_>, _>>()?;
                if ins.iter().any(|x| x.1.elements() != len) {
                    return Err(bad(format!("node {n}: operand size != {len}")));
                }
                let arg = |k: usize, i: usize| ins.get(k).map_or(0.0, |&x| at(x, i));
                Some((0..len).map(|i| op.eval_f64([arg(0, i), arg(1, i), arg(2, i)])).collect())
            }
            LlirOp::IntMap { op, len } => {
                let ins = (0..op.arity()).map(read).collect::<Result<Vec<_>, _>>()?;
                if ins.iter().any(|x| x.1.elements() != len) {
                    return Err(bad(format!("node {n}: operand size != {len}")));
                }
                let dtype = node.reads.first().and_then(|o| llir.buffers.get(o.buffer));
                let dtype = dtype.map_or(DType::I64, |b| b.dtype);
                let arg = |k: usize, i: usize| ins.get(k).map_or(0.0, |&x| at(x, i));
                // Integers held as f64: exact for i32, and for i64 up to 2^53.
                Some((0..len).map(|i| op.eval_f64(dtype, arg(0, i), arg(1, i))).collect())
            }
            LlirOp::Reduce { op, axis, len, extent } => {
                let x = read(0)?;
                if x.1.shape.get(axis) != Some(&extent) {
                    return Err(bad(format!("node {n}: axis {axis} is not of length {extent}")));
                }
                Some(reduce_f64(op, x, axis, len))
            }
            LlirOp::Gather { rows, dim, vocab } => {
                let (table, ids) = (read(0)?, read(1)?);
                if table.1.shape != [vocab, dim] || ids.1.elements() != rows {
                    return Err(bad(format!("node {n}: gather views do not match its sizes")));
                }
                let mut out = Vec::with_capacity(count(rows, dim)?);
                for p in 0..rows {
                    let id = at(ids, p);
                    if !(0.0..vocab as f64).contains(&id) {
                        let tensor = node
                            .reads
                            .get(1)
                            .and_then(|o| llir.buffers.get(o.buffer))
                            .map_or_else(String::new, |b| b.id.clone());
                        return Err(RuntimeError::IndexOutOfRange {
                            op: "gather",
                            tensor,
                            index: id as i64,
                            position: ids.1.index(p),
                            rows: vocab,
                        });
                    }
                    out.extend((0..dim).map(|j| at(table, id as usize * dim + j)));
                }
                Some(out)
            }
            LlirOp::Conv { geometry: g, epilogue } => {
                let out_shape = g.output_shape();
                let (xs, ws) = (g.input_shape(), g.weight_shape());
                let (x, w) = (read(0)?, read(1)?);
                let bias = if epilogue.bias { Some(read(2)?) } else { None };
                let residual = if epilogue.residual {
                    Some(read(2 + usize::from(epilogue.bias))?)
                } else {
                    None
                };
                let fits = x.1.shape == xs
                    && w.1.shape == ws
                    && bias.is_none_or(|b| b.1.shape == [g.c_out])
                    && residual.is_none_or(|r| r.1.shape == out_shape);
                if !fits {
                    return Err(bad(format!("node {n}: conv views do not match {}", g.text())));
                }
                Some(lumen_compiler::conv::conv_f64(
                    &g,
                    epilogue,
                    |i| at(x, i),
                    |i| at(w, i),
                    |i| bias.map_or(0.0, |b| at(b, i)),
                    |i| residual.map_or(0.0, |r| at(r, i)),
                ))
            }
            LlirOp::MaxPool { geometry: g } => {
                let x = read(0)?;
                if x.1.shape != g.input_shape() {
                    return Err(bad(format!(
                        "node {n}: max_pool view does not match {}",
                        g.text()
                    )));
                }
                Some(lumen_compiler::conv::max_pool_f64(&g, |i| at(x, i)))
            }
            LlirOp::Take { axis, len, extent, fill } => {
                let (x, idx) = (read(0)?, read(1)?);
                if x.1.shape.get(axis) != Some(&extent) || idx.1.rank() != 1 {
                    return Err(bad(format!("node {n}: take views do not match its sizes")));
                }
                let inner: usize = x.1.shape[axis + 1..].iter().product();
                let picks = idx.1.shape[0];
                let outer: usize = x.1.shape[..axis].iter().product();
                if count(outer, picks)?.checked_mul(inner) != Some(len) {
                    return Err(bad(format!("node {n}: take writes {len} elements")));
                }
                let mut out = Vec::with_capacity(len);
                for o in 0..outer {
                    for j in 0..picks {
                        let id = at(idx, j);
                        if id < 0.0 {
                            out.extend(std::iter::repeat_n(f64::from(fill.value()), inner));
                            continue;
                        }
                        if id >= extent as f64 {
                            let tensor = node
                                .reads
                                .get(1)
                                .and_then(|o| llir.buffers.get(o.buffer))
                                .map_or_else(String::new, |b| b.id.clone());
                            return Err(RuntimeError::IndexOutOfRange {
                                op: "gather",
                                tensor,
                                index: id as i64,
                                position: idx.1.index(j),
                                rows: extent,
                            });
                        }
                        let base = (o * extent + id as usize) * inner;
                        out.extend((0..inner).map(|e| at(x, base + e)));
                    }
                }
                Some(out)
            }
            LlirOp::AppendRows { len } => {
                // The state's values so far (zeros before its first write), its last rows
                // replaced.
                let x = read(0)?;
                let &w =
                    node.writes.first().ok_or_else(|| bad(format!("node {n} writes nothing")))?;
                let elements: usize = llir.buffers[w].shape.iter().product();
                let mut state = vals[w].clone().unwrap_or_else(|| vec![0.0; elements]);
                if x.1.elements() != len || len > state.len() {
                    return Err(bad(format!("node {n}: append_rows of {len} elements")));
                }
                let start = state.len() - len;
                for i in 0..len {
                    state[start + i] = at(x, i);
                }
                Some(state)
            }
            LlirOp::Cast { to, len } => {
                let x = read(0)?;
                if x.1.elements() != len {
                    return Err(bad(format!(
                        "node {n}: cast reads {} elements, writes {len}",
                        x.1.elements()
                    )));
                }
                Some((0..len).map(|i| to.cast_f64(at(x, i))).collect())
            }
            LlirOp::TopK { axis, k, largest, len, extent } => {
                let x = read(0)?;
                if x.1.shape.get(axis) != Some(&extent) || k > extent {
                    return Err(bad(format!(
                        "node {n}: topk's axis {axis} is not of length {extent}"
                    )));
                }
                let inner: usize = x.1.shape[axis + 1..].iter().product();
                let outer = len / (k * inner).max(1);
                let mut out = vec![0.0; len];
                for o in 0..outer {
                    for r in 0..inner {
                        let along: Vec<f64> =
                            (0..extent).map(|e| at(x, (o * extent + e) * inner + r)).collect();
                        for (j, &i) in
                            lumen_compiler::ops::top_k(&along, k, largest).iter().enumerate()
                        {
                            out[(o * k + j) * inner + r] = i as f64;
                        }
                    }
                }
                Some(out)
            }
            LlirOp::GatherElements { axis, len, extent } => {
                let (data, idx) = (read(0)?, read(1)?);
                if data.1.shape.get(axis) != Some(&extent) || idx.1.elements() != len {
                    return Err(bad(format!("node {n}: gather_elements views do not fit")));
                }
                let contiguous = View::contiguous(&data.1.shape);
                let mut out = Vec::with_capacity(len);
                for flat in 0..len {
                    let mut pos = lumen_compiler::view::unravel(flat, &idx.1.shape);
                    let raw = at(idx, flat);
                    let id = if raw < 0.0 { raw + extent as f64 } else { raw };
                    if !(0.0..extent as f64).contains(&id) {
                        let tensor = node
                            .reads
                            .get(1)
                            .and_then(|o| llir.buffers.get(o.buffer))
                            .map_or_else(String::new, |b| b.id.clone());
                        return Err(RuntimeError::IndexOutOfRange {
                            op: "gather",
                            tensor,
                            index: raw as i64,
                            position: idx.1.index(flat),
                            rows: extent,
                        });
                    }
                    pos[axis] = id as usize;
                    let logical = contiguous.offset_of(&pos);
                    out.push(at(data, logical));
                }
                Some(out)
            }
            LlirOp::ScatterElements { axis, reduction, len, extent, updates } => {
                let (data, idx, upd) = (read(0)?, read(1)?, read(2)?);
                let rank = data.1.rank();
                let fits = data.1.shape.get(axis) == Some(&extent)
                    && data.1.elements() == len
                    && idx.1.rank() == rank
                    && idx.1.elements() == updates
                    && upd.1.shape == idx.1.shape;
                if !fits {
                    return Err(bad(format!("node {n}: scatter_elements views do not fit")));
                }
                let dtype = node
                    .reads
                    .first()
                    .and_then(|o| llir.buffers.get(o.buffer))
                    .map_or(lumen_compiler::DType::F32, |b| b.dtype);
                let copy = (0..len).map(|i| at(data, i)).collect();
                let scattered = lumen_compiler::ops::scatter_elements_f64(
                    copy,
                    &data.1.shape,
                    &idx.1.shape,
                    axis,
                    reduction,
                    dtype,
                    |i| at(idx, i),
                    |i| at(upd, i),
                );
                match scattered {
                    Ok(out) => Some(out),
                    Err(e) => {
                        let tensor = node
                            .reads
                            .get(1)
                            .and_then(|o| llir.buffers.get(o.buffer))
                            .map_or_else(String::new, |b| b.id.clone());
                        return Err(RuntimeError::IndexOutOfRange {
                            op: "scatter_elements",
                            tensor,
                            index: e.index as i64,
                            position: idx.1.index(e.position),
                            rows: extent,
                        });
                    }
                }
            }
            LlirOp::Arg { max, axis, last, len, extent } => {
                let x = read(0)?;
                if x.1.shape.get(axis) != Some(&extent) {
                    return Err(bad(format!("node {n}: axis {axis} is not of length {extent}")));
                }
                let inner: usize = x.1.shape[axis + 1..].iter().product();
                Some(
                    (0..len)
                        .map(|o| {
                            let (outer, rest) = (o / inner.max(1), o % inner.max(1));
                            let along =
                                (0..extent).map(|r| at(x, (outer * extent + r) * inner + rest));
                            lumen_compiler::ops::arg_index(along, max, last) as f64
                        })
                        .collect(),
                )
            }
            LlirOp::Concat { axis, len } => {
                let shape = node
                    .concat_shape()
                    .ok_or_else(|| bad(format!("node {n}: concat operands do not join")))?;
                let mut out = vec![0.0; len];
                let mut start = 0usize;
                for i in 0..node.reads.len() {
                    let x = read(i)?;
                    let whole = View::contiguous(&shape);
                    let width = x.1.shape.get(axis).copied().unwrap_or(0);
                    if x.1.rank() != shape.len()
                        || axis >= shape.len()
                        || start + width > shape[axis]
                    {
                        return Err(bad(format!("node {n}: concat operand {i} does not fit")));
                    }
                    let dst = whole.slice(axis, start, start + width);
                    for e in 0..x.1.elements() {
                        out[dst.index(e)] = at(x, e);
                    }
                    start += width;
                }
                Some(out)
            }
        };
        if let Some(result) = result {
            let &w = node.writes.first().ok_or_else(|| bad(format!("node {n} writes nothing")))?;
            let slot = vals.get_mut(w).ok_or_else(|| bad(format!("absent buffer {w}")))?;
            *slot = Some(result);
        }
    }
    Ok(outputs)
}

/// The reduction of `x` over `axis` in f64, `len` outputs in row-major order of the other axes.
fn reduce_f64(op: ReduceOp, (v, view): (&[f64], &View), axis: usize, len: usize) -> Vec<f64> {
    let extent = view.shape[axis];
    // Output index o, reduced index r -> the element's row-major index in the view.
    let inner: usize = view.shape[axis + 1..].iter().product();
    (0..len)
        .map(|o| {
            let (outer, rest) = (o / inner.max(1), o % inner.max(1));
            (0..extent).fold(op.identity_f64(), |acc, r| {
                let i = (outer * extent + r) * inner + rest;
                op.combine_f64(acc, v[view.index(i)])
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use lumen_compiler::Epilogue;

    use super::*;

    #[test]
    fn gelu_f64_is_accurate_on_the_tail() {
        // mpmath at 60 digits: x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))).
        let exact = [
            (3.0, 2.996_362_607_918_227),
            (-1.0, -0.158_808_009_391_723_3),
            (-5.0, -2.291_796_196_629_506e-7),
            (-6.0, -8.439_646_700_762_297e-11),
            (-8.0, -3.107_782_937_501_111_2e-21),
            (-12.0, -1.635_985_449_353_481e-61),
            (-14.0, -2.569_400_277_353_559e-94),
        ];
        for (x, want) in exact {
            let got = gelu_f64(x);
            let rel = (got - want).abs() / want.abs();
            assert!(rel < 1e-12, "gelu_f64({x}) = {got:e}, exact {want:e}, rel {rel:e}");
        }
        assert_eq!(gelu_f64(0.0), 0.0);
        assert_eq!(gelu_f64(f64::INFINITY), f64::INFINITY);
        let neg = gelu_f64(f64::NEG_INFINITY);
        assert!(neg == 0.0 && neg.is_sign_negative(), "gelu_f64(-inf) = {neg}");
        assert!(gelu_f64(f64::NAN).is_nan());
    }

    #[test]
    fn overflowing_sizes_are_an_error_not_a_panic() {
        use lumen_compiler::{CompileOptions, Graph};

        use crate::HostTensor;

        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        let w = cx.weight("w", [3, 2]);
        x.matmul(w).output("y");
        let program = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
        let weights: Tensors =
            [("w".into(), HostTensor::new([3, 2], vec![1.0; 6]).unwrap())].into();
        let inputs: Tensors = [("x".into(), HostTensor::new([2, 3], vec![1.0; 6]).unwrap())].into();
        let ok = execute_f64(&program.llir, &weights, &inputs).unwrap();
        assert_eq!(ok["y"].data, [3.0; 4]);
        for (m, k, n) in [(usize::MAX, 3, 2), (2, usize::MAX, 2), (2, 3, usize::MAX)] {
            let mut llir = program.llir.clone();
            llir.nodes[1].op = LlirOp::LtMatmul { batch: 1, m, k, n, epilogue: Epilogue::Default };
            let err = execute_f64(&llir, &weights, &inputs).unwrap_err();
            assert!(err.to_string().contains("node 1: sizes overflow"), "{err}");
        }
    }

    #[test]
    fn relu_f64_propagates_nan_like_the_runtime() {
        assert!(relu_f64(f64::NAN).is_nan());
        assert_eq!(relu_f64(-2.0), 0.0);
        assert_eq!(relu_f64(3.5), 3.5);
        assert_eq!(relu_f64(f64::NEG_INFINITY), 0.0);
        assert_eq!(relu_f64(f64::INFINITY), f64::INFINITY);
        assert!(act_f64(crate::kernels::Activation::Relu, f64::NAN).is_nan());
        assert!(act_f64(crate::kernels::Activation::Gelu, f64::NAN).is_nan());
    }
}
