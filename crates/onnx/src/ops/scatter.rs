//! The scatters and their gather twin, rows of the movement family ([`super::movement::OPS`]):
//! `ScatterElements` (and the older `Scatter`) as lumen's `scatter_elements` op itself;
//! `ScatterND`, `GatherND` and `TensorScatter` as one `scatter_elements` (or one `gather`) of
//! positions computed from their indices.
//!
//! `ScatterND` and `GatherND` address the `k` leading axes of the data (after `batch_dims`)
//! with k-tuples: the data is viewed with those axes merged into one, and each tuple becomes
//! its flat position there, `sum_j idx_j * stride_j` (each component counted from the end when
//! negative). Known at import, the positions are computed there (a component outside its axis
//! is refused); computed at run time, they are f32 arithmetic on the indices (exact: at most
//! 2^24 positions are addressed), and a tuple with a component outside its axis gets the
//! position one past the last, so the op reports it at run time instead of reading a wrong
//! element.

use lumen_compiler::{DType, ScatterReduction, Tensor};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Importer, IndexBuffer, Value, attr_i, attr_s, axis, node_name, one};
use crate::proto::NodeProto;

/// Positions f32 arithmetic addresses exactly (2^24): the most a computed flat index reaches.
const EXACT_F32: usize = 1 << 24;

/// The `reduction` attribute of a scatter (`none` when absent), checked against the model's
/// opset: `add` and `mul` from opset 16, `max` and `min` from 18; `Scatter` has none.
fn reduction(im: &Importer, n: &NodeProto) -> Result<ScatterReduction, OnnxError> {
    let name = attr_s(n, "reduction").unwrap_or_else(|| "none".into());
    let r: ScatterReduction =
        name.parse().map_err(|_| im.unsupported(n, format!("reduction = {name:?}")))?;
    let since = match r {
        ScatterReduction::None => 0,
        ScatterReduction::Add | ScatterReduction::Mul => 16,
        ScatterReduction::Max | ScatterReduction::Min => 18,
    };
    if n.op_type == "Scatter" && r != ScatterReduction::None {
        return Err(im.malformed(n, format!("Scatter has no reduction (reduction = {name:?})")));
    }
    if im.opset < since {
        return Err(im.malformed(
            n,
            format!("reduction = {name:?} needs opset {since} (the model's is {})", im.opset),
        ));
    }
    Ok(r)
}

/// Input 0 (the data, f32 or integer) and input `i` (values of the data's type: a scatter's
/// updates) as program tensors, the second cast to the data's type when it differs.
fn data_and_values(
    im: &mut Importer,
    n: &NodeProto,
    i: usize,
) -> Result<(Tensor, Tensor), OnnxError> {
    let data = im.tensor(n, 0)?;
    let dtype = data.dtype().unwrap_or(DType::F32);
    let values = if dtype == DType::F32 { im.f32_tensor(n, i)? } else { im.tensor(n, i)? };
    let values = if values.dtype() == Some(dtype) { values } else { values.cast(dtype) };
    Ok((data, values))
}

/// Input `i` as integer indices (a float tensor is cast to i64).
fn index_tensor(im: &mut Importer, n: &NodeProto, i: usize) -> Result<Tensor, OnnxError> {
    let t = im.tensor(n, i)?;
    Ok(match t.dtype() {
        Some(d) if d.is_index() => t,
        _ => t.cast(DType::I64),
    })
}

/// `ScatterElements` (opset 11 on: `axis`, `reduction` none, add and mul from 16, max and
/// min from 18) and `Scatter` (opset 9 and 10: the same without reduction): lumen's
/// `scatter_elements`, f32 or integer data. Of two plain updates on one element the last in
/// row-major order wins (ONNX Runtime's CPU order; the CUDA runtime keeps one of them); an
/// index outside the axis (after counting a negative one from the end) is a run-time error.
pub(super) fn scatter_elements(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let r = reduction(im, n)?;
    let (data, updates) = data_and_values(im, n, 2)?;
    let indices = index_tensor(im, n, 1)?;
    im.note_index_input(n, 1);
    let rank = data.rank().unwrap_or(0);
    let a = attr_i(n, "axis", 0);
    let a = axis(a, rank).ok_or_else(|| im.malformed(n, format!("axis {a} for rank {rank}")))?;
    one(data.scatter_elements(a as isize, &indices, &updates, r))
}

/// How a tensor of k-tuples addresses the data of `GatherND` / `ScatterND`: the data's
/// `batch` leading axes, then the `dims` the tuples index, then the `tail` each tuple's slice
/// covers.
struct Addressing {
    /// The batch axes (GatherND's `batch_dims`), shared by data and indices.
    batch: Vec<usize>,
    /// The axes the tuples index (`k` of them).
    dims: Vec<usize>,
    /// The axes after them: one slice per tuple.
    tail: Vec<usize>,
    /// The indices' shape without its last axis: one position per tuple.
    positions: Vec<usize>,
}

impl Addressing {
    /// The addressing of `data` of `shape` by `indices` of shape `ishape` with `b` batch axes.
    fn new(
        im: &Importer,
        n: &NodeProto,
        shape: &[usize],
        ishape: &[usize],
        b: usize,
    ) -> Result<Self, OnnxError> {
        let (r, q) = (shape.len(), ishape.len());
        let k = ishape.last().copied().unwrap_or(0);
        if q == 0 || b >= q.min(r) || k == 0 || b + k > r || shape[..b] != ishape[..b] {
            return Err(im.malformed(
                n,
                format!(
                    "indices {ishape:?} do not address data {shape:?} with batch_dims {b} (the \
                     last axis, 1 to {} long, indexes the data's axes after the batch ones, \
                     which both share)",
                    r.saturating_sub(b)
                ),
            ));
        }
        Ok(Addressing {
            batch: shape[..b].to_vec(),
            dims: shape[b..b + k].to_vec(),
            tail: shape[b + k..].to_vec(),
            positions: ishape[..q - 1].to_vec(),
        })
    }

    /// Rows of the data viewed `[rows, row length]` with the batch and indexed axes merged.
    fn rows(&self) -> usize {
        self.batch.iter().chain(&self.dims).product()
    }

    /// Elements of one tuple's slice.
    fn row_len(&self) -> usize {
        self.tail.iter().product()
    }

    /// Each tuple's row (`[positions]`, i64) from the k-tuples of input `i`: computed at
    /// import when the indices are known there (a component outside its axis refused), else
    /// by the program (see the module docs; more than [`EXACT_F32`] rows refused), a tensor
    /// named `{node}.rows`, which a run-time error about a bad tuple names.
    fn flat(&self, im: &mut Importer, n: &NodeProto, i: usize) -> Result<Tensor, OnnxError> {
        let rows = self.rows();
        let k = self.dims.len();
        let per_batch: usize = self.dims.iter().product();
        // Row stride of each indexed axis within one batch entry.
        let strides: Vec<usize> =
            (0..k).map(|j| self.dims[j + 1..].iter().product::<usize>()).collect();
        let tuples: usize = self.positions.iter().product();
        // Tuples per batch entry: the batch axes lead the positions.
        let per_entry = tuples / self.batch.iter().product::<usize>().max(1);
        if let Some(Value::Const(c)) = im.input(n, i) {
            let idx = c.to_i64();
            let mut flat = Vec::with_capacity(tuples);
            for t in 0..tuples {
                let mut at = (t / per_entry.max(1) * per_batch) as i64;
                for j in 0..k {
                    let (v, s) = (idx[t * k + j], self.dims[j] as i64);
                    let w = if v < 0 { v + s } else { v };
                    if !(0..s).contains(&w) {
                        return Err(im.malformed(
                            n,
                            format!("index {v} of tuple {t} is outside axis {j} of length {s}"),
                        ));
                    }
                    at += w * strides[j] as i64;
                }
                flat.push(at);
            }
            return im.const_weight(n, "rows", Const::i64(self.positions.clone(), flat));
        }
        if rows > EXACT_F32 {
            return Err(im.unsupported(
                n,
                format!(
                    "indices computed at run time address {rows} rows: lumen computes their \
                     positions in f32, exact up to 2^24"
                ),
            ));
        }
        let idx = im.tensor(n, i)?;
        let f = if idx.dtype() == Some(DType::F32) { idx } else { idx.cast(DType::F32) };
        let mut sum: Option<Tensor> = None;
        let mut outside: Option<Tensor> = None;
        for (j, (&len, &stride)) in self.dims.iter().zip(&strides).enumerate() {
            let x = f.slice(-1, j, j + 1);
            let s = len as f32;
            let w = &x + x.less_than(0.0) * s;
            let bad = w.less_than(0.0) + (1.0 - w.less_than(s));
            let term = &w * stride as f32;
            sum = Some(match sum {
                None => term,
                Some(acc) => acc + term,
            });
            outside = Some(match outside {
                None => bad,
                Some(acc) => acc + bad,
            });
        }
        let (Some(mut sum), Some(outside)) = (sum, outside) else {
            return Err(im.malformed(n, "indices with an empty last axis"));
        };
        if !self.batch.is_empty() {
            // Each batch entry's first row, over the positions (batch axes first).
            let q = self.positions.len() + 1;
            let mut shape = self.batch.clone();
            shape.resize(q, 1);
            let count: usize = self.batch.iter().product();
            let first = (0..count).map(|e| (e * per_batch) as f32).collect();
            sum = sum + im.const_weight(n, "batch_rows", Const::f32(shape, first))?;
        }
        // A tuple with a component outside its axis gets row `rows`, one past the last.
        let row = outside.less_than(0.5).select(&sum, rows as f32);
        let name = im.names.make(&format!("{}.rows", node_name(n)));
        im.index_buffers.push(IndexBuffer {
            buffer: name.clone(),
            node: node_name(n),
            op: n.op_type.clone(),
            note: "a tuple with an index outside its axis shows as the row one past the last"
                .into(),
        });
        Ok(row.reshape(self.positions.clone()).cast(DType::I64).name(name))
    }
}

/// `ScatterND` (opset 11 on; `reduction` as [`scatter_elements`]'s): the data viewed as `[rows,
/// slice]` with the axes the k-tuples index merged, and one `scatter_elements` along the rows
/// of each tuple's flat row ([`Addressing::flat`]), its updates one slice per tuple.
pub(super) fn scatter_nd(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let r = reduction(im, n)?;
    let (data, updates) = data_and_values(im, n, 2)?;
    let shape = data.shape().unwrap_or_default();
    let ishape = im.input(n, 1).map(|v| im.shape_of(&v)).unwrap_or_default();
    let at = Addressing::new(im, n, &shape, &ishape, 0)?;
    let mut want = at.positions.clone();
    want.extend(&at.tail);
    let ushape = updates.shape().unwrap_or_default();
    if ushape != want {
        return Err(im.malformed(
            n,
            format!("updates {ushape:?} for indices {ishape:?} into data {shape:?}: {want:?}"),
        ));
    }
    let (rows, len) = (at.rows(), at.row_len());
    let tuples: usize = at.positions.iter().product();
    let flat = at.flat(im, n, 1)?.reshape(vec![tuples, 1]).expand(vec![tuples, len]);
    let table = data.reshape(vec![rows, len]);
    let updates = updates.reshape(vec![tuples, len]);
    one(table.scatter_elements(0, &flat, &updates, r).reshape(shape))
}

/// `GatherND` (opset 11 on, `batch_dims` from 12): each tuple's slice of the data viewed as
/// `[rows, slice]` (batch and indexed axes merged), one `gather` of the rows
/// ([`Addressing::flat`]); integer data is gathered as f32 (exact below 2^24) and cast back.
pub(super) fn gather_nd(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let data = im.tensor(n, 0)?;
    let int = data.dtype().filter(|d| d.is_index());
    let data = im.f32_tensor(n, 0)?;
    let shape = data.shape().unwrap_or_default();
    let ishape = im.input(n, 1).map(|v| im.shape_of(&v)).unwrap_or_default();
    let b = usize::try_from(attr_i(n, "batch_dims", 0))
        .map_err(|_| im.malformed(n, "batch_dims must not be negative"))?;
    let at = Addressing::new(im, n, &shape, &ishape, b)?;
    let flat = at.flat(im, n, 1)?;
    let table = data.reshape(vec![at.rows(), at.row_len()]);
    let mut out_shape = at.positions.clone();
    out_shape.extend(&at.tail);
    let y = table.gather(&flat).reshape(out_shape);
    one(match int {
        Some(d) => y.cast(d),
        None => y,
    })
}

/// `TensorScatter` (opset 24): `update` written into `past_cache` along `axis` (-2 by
/// default; not the batch axis 0), batch row `b` from position `write_indices[b]` (0 when
/// absent), `mode` `linear` or `circular` (positions modulo the axis' length). One plain
/// `scatter_elements` whose indices, `write_indices[b] + s` over the update's shape, are a
/// constant when the write indices are known at import (positions past the axis refused in
/// linear mode), else f32 arithmetic (exact below 2^24).
pub(super) fn tensor_scatter(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (past, update) = data_and_values(im, n, 1)?;
    let shape = past.shape().unwrap_or_default();
    let ushape = update.shape().unwrap_or_default();
    let rank = shape.len();
    let a = attr_i(n, "axis", -2);
    let a = axis(a, rank)
        .filter(|&a| a > 0)
        .ok_or_else(|| im.malformed(n, format!("axis {a} for rank {rank} (not the batch axis)")))?;
    let circular = match attr_s(n, "mode").unwrap_or_else(|| "linear".into()).as_str() {
        "linear" => false,
        "circular" => true,
        other => return Err(im.unsupported(n, format!("mode = {other:?}"))),
    };
    let same_but_axis = ushape.len() == rank
        && ushape.iter().zip(&shape).enumerate().all(|(d, (u, p))| d == a || u == p);
    let (max_len, len) = (shape[a], ushape.get(a).copied().unwrap_or(0));
    if !same_but_axis || len > max_len {
        return Err(im.malformed(
            n,
            format!(
                "update {ushape:?} for past_cache {shape:?}: the same shape but along axis {a}, \
                 at most {max_len} long there"
            ),
        ));
    }
    let batch = shape[0];
    // The positions along the axis, shaped to broadcast: [1, .., len (at a), .., 1].
    let mut seq_shape = vec![1; rank];
    seq_shape[a] = len;
    let mut starts_shape = vec![1; rank];
    starts_shape[0] = batch;
    let known = match im.input(n, 2) {
        None => Some(vec![0; batch]),
        Some(Value::Const(c)) => Some(c.to_i64()),
        Some(Value::Tensor(_)) => None,
    };
    let indices = match known {
        Some(starts) => {
            if starts.len() != batch {
                return Err(
                    im.malformed(n, format!("{} write indices for batch {batch}", starts.len()))
                );
            }
            let mut table = Vec::with_capacity(batch * len);
            for &w in &starts {
                for s in 0..len as i64 {
                    let p = w + s;
                    let p = if circular { p.rem_euclid(max_len.max(1) as i64) } else { p };
                    if !(0..max_len as i64).contains(&p) {
                        return Err(im.malformed(
                            n,
                            format!(
                                "write index {w} + {s} is outside axis {a} of length {max_len}"
                            ),
                        ));
                    }
                    table.push(p);
                }
            }
            let mut table_shape = starts_shape.clone();
            table_shape[a] = len;
            im.const_weight(n, "positions", Const::i64(table_shape, table))?
        }
        None => {
            let starts = im.tensor(n, 2)?;
            let starts =
                if starts.dtype() == Some(DType::F32) { starts } else { starts.cast(DType::F32) };
            let seq = Const::f32(seq_shape, (0..len).map(|s| s as f32).collect());
            let seq = im.const_weight(n, "sequence", seq)?;
            let p = starts.reshape(starts_shape) + seq;
            let p = if circular {
                let m = max_len as f32;
                &p - super::elementwise::floor(&(&p / m)) * m
            } else {
                p
            };
            // Named, so a position past the axis (linear mode) is reported against it.
            let name = im.names.make(&format!("{}.positions", node_name(n)));
            im.index_buffers.push(IndexBuffer {
                buffer: name.clone(),
                node: node_name(n),
                op: n.op_type.clone(),
                note: String::new(),
            });
            p.cast(DType::I64).name(name)
        }
    };
    one(past.scatter_elements(a as isize, indices.expand(ushape), &update, ScatterReduction::None))
}
