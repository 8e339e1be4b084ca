//! Operators whose output's *shape* depends on their input values: `NonZero`, `Unique`,
//! `NonMaxSuppression` (how many elements, values or boxes are kept) and `MelWeightMatrix`
//! (its sizes are inputs). lumen compiles static shapes, so these are evaluated at import time
//! only: every input must be known then, as a constant or as a graph input whose value is given
//! (`lumen run --inputs`, [`ImportOptions::values`](crate::ImportOptions::values)), and the
//! program is specialised to those values as it is for a Reshape's shape.
//!
//! The evaluations follow ONNX's reference implementation (`onnx.reference.ops`), in f32.

use std::cmp::Ordering;

use crate::constant::{Const, Data, IntType};
use crate::error::OnnxError;
use crate::importer::{Importer, attr, attr_i};
use crate::proto::{NodeProto, data_type};

/// The operators evaluated here, whose inputs must all be known at import time.
pub(crate) const DATA_DEPENDENT: &[&str] =
    &["NonZero", "Unique", "NonMaxSuppression", "MelWeightMatrix"];

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Two elements compared as NumPy sorts them: numbers in order, NaN last (equal to NaN).
fn order(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

impl Importer {
    /// Evaluates a [`DATA_DEPENDENT`] node whose inputs are all `inputs` (known; `None` for an
    /// absent optional input): its outputs, or `None` for another operator.
    ///
    /// # Errors
    /// [`OnnxError::Malformed`] naming the node, the operator and what is wrong (a missing
    /// input, an axis out of range, shapes that disagree, a size out of range).
    pub(crate) fn fold_data_dependent(
        &self,
        n: &NodeProto,
        inputs: &[Option<&Const>],
    ) -> Result<Option<Vec<Const>>, OnnxError> {
        let need = |i: usize| {
            inputs
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| self.malformed(n, format!("input {i} is missing")))
        };
        let out = match n.op_type.as_str() {
            "NonZero" => vec![self.non_zero(n, need(0)?)?],
            "Unique" => self.unique(n, need(0)?)?,
            "NonMaxSuppression" => vec![self.non_max_suppression(n, inputs)?],
            "MelWeightMatrix" => {
                let sizes: Vec<&Const> = (0..5).map(need).collect::<Result<_, _>>()?;
                vec![self.mel_weight_matrix(n, &sizes)?]
            }
            _ => return Ok(None),
        };
        Ok(Some(out))
    }

    /// `NonZero`: the coordinates of the elements that are not zero, `[rank, count]` i64 in
    /// row-major order (a scalar is read as one element of rank 1, as ONNX Runtime does).
    fn non_zero(&self, n: &NodeProto, x: &Const) -> Result<Const, OnnxError> {
        let shape = if x.shape.is_empty() { vec![1] } else { x.shape.clone() };
        let st = strides(&shape);
        let hits: Vec<usize> = match &x.data {
            Data::F32(v) => (0..v.len()).filter(|&i| v[i] != 0.0).collect(),
            Data::I64(v) => (0..v.len()).filter(|&i| v[i] != 0).collect(),
        };
        self.foldable(n, &[shape.len(), hits.len()])?;
        let mut out = Vec::with_capacity(shape.len() * hits.len());
        for (a, &s) in st.iter().enumerate() {
            out.extend(hits.iter().map(|&i| ((i / s) % shape[a]) as i64));
        }
        Ok(Const::i64(vec![shape.len(), hits.len()], out))
    }

    /// `Unique`: the distinct elements (no `axis`: of the flattened input) or distinct slices
    /// along `axis`, sorted ascending (slices lexicographically) or, with `sorted = 0`, in order
    /// of first occurrence; with the first occurrence of each (`indices`), each element's
    /// position in the output (`inverse_indices`) and the `counts`. NaN equals NaN.
    fn unique(&self, n: &NodeProto, x: &Const) -> Result<Vec<Const>, OnnxError> {
        let sorted = attr_i(n, "sorted", 1) != 0;
        // The input as `[outer, len, inner]` around the axis (no axis: `[1, all, 1]`).
        let (a, len, outer, inner) = match attr(n, "axis") {
            Some(at) => {
                let rank = x.shape.len();
                let a = crate::importer::axis(at.i, rank).ok_or_else(|| {
                    self.malformed(n, format!("axis {} is out of range for rank {rank}", at.i))
                })?;
                let outer: usize = x.shape[..a].iter().product();
                let inner: usize = x.shape[a + 1..].iter().product();
                (Some(a), x.shape[a], outer, inner)
            }
            None => (None, x.len(), 1, 1),
        };
        let values = x.to_f32();
        let ints = match &x.data {
            Data::I64(v) => Some(v.clone()),
            Data::F32(_) => None,
        };
        // Slice `k`'s elements, in row-major order.
        let element = |k: usize, j: usize| -> usize {
            let (o, i) = (j / inner, j % inner);
            (o * len + k) * inner + i
        };
        let width = outer * inner;
        let compare = |p: usize, q: usize| -> Ordering {
            for j in 0..width {
                let (e, f) = (element(p, j), element(q, j));
                let c = match &ints {
                    Some(v) => v[e].cmp(&v[f]),
                    None => order(values[e], values[f]),
                };
                if c != Ordering::Equal {
                    return c;
                }
            }
            Ordering::Equal
        };
        // Slices sorted (stably, so the first of equal ones comes first), then grouped.
        let mut by_value: Vec<usize> = (0..len).collect();
        by_value.sort_by(|&p, &q| compare(p, q));
        let mut groups: Vec<(usize, usize)> = Vec::new(); // (first occurrence, count)
        let mut group_of = vec![0usize; len];
        for (i, &k) in by_value.iter().enumerate() {
            if i > 0 && compare(by_value[i - 1], k) == Ordering::Equal {
                let last = groups.len() - 1;
                groups[last].1 += 1;
                group_of[k] = last;
            } else {
                groups.push((k, 1));
                group_of[k] = groups.len() - 1;
            }
        }
        // The output order: sorted as grouped, or by first occurrence.
        let mut order_of: Vec<usize> = (0..groups.len()).collect();
        if !sorted {
            order_of.sort_by_key(|&g| groups[g].0);
        }
        let mut rank_of = vec![0usize; groups.len()];
        for (r, &g) in order_of.iter().enumerate() {
            rank_of[g] = r;
        }
        let kept: Vec<usize> = order_of.iter().map(|&g| groups[g].0).collect();
        let mut y_shape = x.shape.clone();
        match a {
            Some(a) => y_shape[a] = kept.len(),
            None => y_shape = vec![kept.len()],
        }
        let mut picks = Vec::with_capacity(outer * kept.len() * inner);
        for o in 0..outer {
            for &k in &kept {
                picks.extend((0..inner).map(|i| (o * len + k) * inner + i));
            }
        }
        let y = match &x.data {
            Data::F32(v) => Const::f32(y_shape, picks.iter().map(|&e| v[e]).collect()),
            Data::I64(v) => Const::ints(y_shape, picks.iter().map(|&e| v[e]).collect(), x.int),
        };
        let count = kept.len();
        let indices = Const::i64(vec![count], kept.iter().map(|&k| k as i64).collect());
        let inverse =
            Const::i64(vec![len], (0..len).map(|k| rank_of[group_of[k]] as i64).collect());
        let counts =
            Const::i64(vec![count], order_of.iter().map(|&g| groups[g].1 as i64).collect());
        Ok(vec![y, indices, inverse, counts])
    }

    /// `NonMaxSuppression`: per batch and class, the boxes by descending score (equal scores by
    /// index), above `score_threshold` when given, each kept unless its IoU with one kept
    /// before is over `iou_threshold`, at most `max_output_boxes_per_class` (absent: 0) of
    /// them; `[selected, 3]` rows of (batch, class, box), `[0, 3]` when there is no box or no
    /// class. Boxes are `[y1, x1, y2, x2]` corners in any order, or `[x, y, w, h]` centres with
    /// `center_point_box = 1`.
    fn non_max_suppression(
        &self,
        n: &NodeProto,
        inputs: &[Option<&Const>],
    ) -> Result<Const, OnnxError> {
        // An empty optional input counts as absent; boxes and scores may hold no box or no
        // class (the result is then `[0, 3]`).
        let get = |i: usize| inputs.get(i).copied().flatten().filter(|c| !c.is_empty());
        let (Some(boxes), Some(scores)) =
            (inputs.first().copied().flatten(), inputs.get(1).copied().flatten())
        else {
            return Err(self.malformed(n, "boxes and scores are required"));
        };
        let center = attr_i(n, "center_point_box", 0);
        if !(0..=1).contains(&center) {
            return Err(self.malformed(n, format!("center_point_box = {center} (it is 0 or 1)")));
        }
        let (&[batches, count, four], &[sb, classes, sn]) =
            (boxes.shape.as_slice(), scores.shape.as_slice())
        else {
            return Err(self.malformed(
                n,
                format!(
                    "boxes {:?} and scores {:?} (expected [batches, boxes, 4] and \
                     [batches, classes, boxes])",
                    boxes.shape, scores.shape
                ),
            ));
        };
        if four != 4 || sb != batches || sn != count {
            return Err(self.malformed(
                n,
                format!(
                    "boxes {:?} and scores {:?} disagree (expected [batches, boxes, 4] and \
                     [batches, classes, boxes])",
                    boxes.shape, scores.shape
                ),
            ));
        }
        let limit = get(2).map_or(0, |c| c.to_i64()[0].max(0)) as usize;
        let iou = get(3).map_or(0.0, |c| c.to_f32()[0]);
        let min_score = get(4).map(|c| c.to_f32()[0]);
        let (b, s) = (boxes.to_f32(), scores.to_f32());
        // A box's extent along x and y, (min, max) each.
        let extent = |batch: usize, i: usize| -> [(f32, f32); 2] {
            let v = &b[(batch * count + i) * 4..(batch * count + i) * 4 + 4];
            let sorted = |p: f32, q: f32| if p >= q { (q, p) } else { (p, q) };
            if center == 0 {
                [sorted(v[1], v[3]), sorted(v[0], v[2])]
            } else {
                let (hw, hh) = (v[2] / 2.0, v[3] / 2.0);
                [(v[0] - hw, v[0] + hw), (v[1] - hh, v[1] + hh)]
            }
        };
        let suppresses = |batch: usize, i: usize, j: usize| -> bool {
            let (p, q) = (extent(batch, i), extent(batch, j));
            let mut area = 1.0f32;
            for axis in 0..2 {
                let lo = p[axis].0.max(q[axis].0);
                let hi = p[axis].1.min(q[axis].1);
                if hi <= lo {
                    return false;
                }
                area *= hi - lo;
            }
            let size = |e: [(f32, f32); 2]| (e[0].1 - e[0].0) * (e[1].1 - e[1].0);
            let (a1, a2) = (size(p), size(q));
            let union = a1 + a2 - area;
            if area <= 0.0 || a1 <= 0.0 || a2 <= 0.0 || union <= 0.0 {
                return false;
            }
            area / union > iou
        };
        let mut out = Vec::new();
        for batch in 0..batches {
            for class in 0..classes {
                let row = &s[(batch * classes + class) * count..][..count];
                let mut candidates: Vec<usize> =
                    (0..count).filter(|&i| min_score.is_none_or(|t| row[i] > t)).collect();
                // Highest score first; equal scores by index (a stable sort).
                candidates.sort_by(|&p, &q| order(row[q], row[p]));
                let mut kept: Vec<usize> = Vec::new();
                for i in candidates {
                    if kept.len() >= limit {
                        break;
                    }
                    if kept.iter().all(|&j| !suppresses(batch, i, j)) {
                        kept.push(i);
                        out.extend([batch as i64, class as i64, i as i64]);
                    }
                }
            }
        }
        Ok(Const::i64(vec![out.len() / 3, 3], out))
    }

    /// `MelWeightMatrix`: `[dft_length / 2 + 1, num_mel_bins]` triangular filters between
    /// `lower_edge_hertz` and `upper_edge_hertz` on the mel scale, as ONNX's reference computes
    /// them (bin edges rounded down to FFT bins); `output_datatype` float (the default) or
    /// int64, int32, int8 or uint8 (the weights truncated; the value keeps that type).
    fn mel_weight_matrix(&self, n: &NodeProto, c: &[&Const]) -> Result<Const, OnnxError> {
        let scalar = |i: usize, what: &str| -> Result<&Const, OnnxError> {
            match c[i].len() {
                1 => Ok(c[i]),
                k => Err(self.malformed(n, format!("{what} has {k} elements (expected one)"))),
            }
        };
        let bins = scalar(0, "num_mel_bins")?.to_i64()[0];
        let dft = scalar(1, "dft_length")?.to_i64()[0];
        let rate = scalar(2, "sample_rate")?.to_i64()[0];
        let low = f64::from(scalar(3, "lower_edge_hertz")?.to_f32()[0]);
        let high = f64::from(scalar(4, "upper_edge_hertz")?.to_f32()[0]);
        if bins < 1 || dft < 1 || rate < 1 {
            return Err(self.malformed(
                n,
                format!(
                    "num_mel_bins {bins}, dft_length {dft} and sample_rate {rate} must be positive"
                ),
            ));
        }
        let (bins, spectrum) = (bins as usize, (dft / 2 + 1) as usize);
        self.foldable(n, &[spectrum, bins])?;
        let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
        let (low_mel, high_mel) = (mel(low), mel(high));
        let step = (high_mel - low_mel) / (bins + 2) as f64;
        let edges: Vec<i64> = (0..bins + 2)
            .map(|i| {
                let hz = 700.0 * ((i as f64 * step + low_mel) / 2595.0 * 10f64.ln()).exp_m1();
                (((dft + 1) as f64 * hz) / rate as f64).floor() as i64
            })
            .collect();
        let mut out = vec![0.0f32; spectrum * bins];
        let mut set = |j: i64, i: usize, v: f64| -> Result<(), OnnxError> {
            match usize::try_from(j).ok().filter(|&j| j < spectrum) {
                Some(j) => {
                    out[j * bins + i] = v as f32;
                    Ok(())
                }
                None => Err(self.malformed(
                    n,
                    format!(
                        "a filter edge falls on frequency bin {j}, outside the {spectrum} bins \
                         (upper_edge_hertz above sample_rate / 2?)"
                    ),
                )),
            }
        };
        for i in 0..bins {
            let (left, centre, right) = (edges[i], edges[i + 1], edges[i + 2]);
            if centre == left {
                set(centre, i, 1.0)?;
            } else {
                for j in left..=centre {
                    set(j, i, (j - left) as f64 / (centre - left) as f64)?;
                }
            }
            if right > centre {
                for j in centre..right {
                    set(j, i, (right - j) as f64 / (right - centre) as f64)?;
                }
            }
        }
        let to = attr_i(n, "output_datatype", i64::from(data_type::FLOAT)) as i32;
        Ok(match to {
            data_type::FLOAT | data_type::DOUBLE => Const::f32(vec![spectrum, bins], out),
            // Integer weights truncated, in the type asked for.
            data_type::INT64 | data_type::INT32 | data_type::INT8 | data_type::UINT8 => {
                let int = IntType::of(to).unwrap_or_default();
                Const::ints(vec![spectrum, bins], out.iter().map(|&v| v as i64).collect(), int)
            }
            other => {
                return Err(OnnxError::DType {
                    name: crate::importer::node_name(n),
                    dtype: data_type::name(other),
                });
            }
        })
    }
}
