//! Movement operators: views of their input (`Transpose`, `Reshape`, `Flatten`, `Squeeze`,
//! `Unsqueeze`, `Expand`, `Slice`, `Split`), and the two that copy (`Concat`, `Gather`). The
//! scatters (`ScatterElements`, `Scatter`, `ScatterND`, `TensorScatter`) and `GatherND` are
//! rows of this table with their handlers in [`super::scatter`].

use lumen_compiler::{DType, PadMode, Tensor};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{
    Handler, Importer, Value, attr, attr_f, attr_i, attr_ints, attr_s, axis, one,
};
use crate::proto::NodeProto;
use crate::proto::data_type;

/// The movement operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("Transpose", view),
    ("Reshape", view),
    ("Flatten", view),
    ("Squeeze", view),
    ("Unsqueeze", view),
    ("Expand", view),
    ("Slice", view),
    ("Concat", concat),
    ("Split", split),
    ("Gather", gather),
    ("Pad", pad),
    ("CenterCropPad", center_crop_pad),
    ("GatherElements", gather_elements),
    ("Trilu", trilu),
    ("Tile", tile),
    ("DepthToSpace", depth_to_space),
    ("SpaceToDepth", space_to_depth),
    ("EyeLike", eye_like),
    ("OneHot", one_hot),
    ("Compress", compress),
    ("ReverseSequence", reverse_sequence),
    ("ScatterElements", super::scatter::scatter_elements),
    ("Scatter", super::scatter::scatter_elements),
    ("ScatterND", super::scatter::scatter_nd),
    ("GatherND", super::scatter::gather_nd),
    ("TensorScatter", super::scatter::tensor_scatter),
];

/// `Transpose`, `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Expand`, `Slice`: views, no copy.
fn view(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    // A view of an integer input's view: an f32 twin can replay it.
    if let Some((root, steps)) = n.input.first().and_then(|i| im.int_views.get(i)) {
        let mut steps = steps.clone();
        steps.push(n.clone());
        let root = *root;
        if let Some(out) = n.output.first() {
            im.int_views.insert(out.clone(), (root, steps));
        }
    }
    one(im.view(n, x)?)
}

/// `Concat`: a copy into one tensor.
fn concat(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let parts = (0..n.input.len()).map(|i| im.tensor(n, i)).collect::<Result<Vec<_>, _>>()?;
    let a = attr_i(n, "axis", 0);
    one(join(im, &parts, a as isize))
}

/// `parts` joined along `axis`, keeping their element type: lumen's copy into one tensor is
/// f32, so integer parts (shape arithmetic computed at run time) are joined as f32 (exact
/// below 2^24 in magnitude) and cast back to the first integer part's type.
pub(crate) fn join(im: &Importer, parts: &[Tensor], axis: isize) -> Tensor {
    let int = parts.iter().find_map(|p| p.dtype().filter(|d| d.is_index()));
    match int {
        None => im.cx.concat(parts, axis),
        Some(int) => {
            let floats: Vec<Tensor> = parts
                .iter()
                .map(|p| if p.dtype() == Some(DType::F32) { p.clone() } else { p.cast(DType::F32) })
                .collect();
            im.cx.concat(&floats, axis).cast(int)
        }
    }
}

/// `Split`: slices along the axis (views).
fn split(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let a = axis(attr_i(n, "axis", 0), shape.len())
        .ok_or_else(|| im.malformed(n, "axis out of range"))?;
    let outs = n.output.len();
    let sizes: Vec<usize> = match im.ints(n, 1)? {
        Some(v) => v.iter().map(|&d| d.max(0) as usize).collect(),
        None => match attr_ints(n, "split") {
            Some(v) if !v.is_empty() => v.iter().map(|&d| d.max(0) as usize).collect(),
            _ => {
                // Equal parts, the last smaller when the axis does not divide.
                let parts = attr_i(n, "num_outputs", outs as i64).max(1) as usize;
                let each = shape[a].div_ceil(parts);
                (0..parts).map(|p| each.min(shape[a].saturating_sub(p * each))).collect()
            }
        },
    };
    if sizes.iter().sum::<usize>() != shape[a] || sizes.len() != outs {
        return Err(im.malformed(
            n,
            format!("split sizes {sizes:?} do not cover axis {a} of {shape:?} in {outs} outputs"),
        ));
    }
    let mut start = 0;
    let mut parts = Vec::with_capacity(outs);
    for len in sizes {
        parts.push(x.slice(a as isize, start, start + len));
        start += len;
    }
    Ok(parts)
}

/// `Gather`: rows of a 2-D table by integer ids (an embedding), or constant indices along
/// any axis of a computed tensor (slices).
fn gather(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let data_shape = im.input(n, 0).map(|v| im.shape_of(&v)).unwrap_or_default();
    let rank = data_shape.len();
    let a = axis(attr_i(n, "axis", 0), rank).ok_or_else(|| im.malformed(n, "axis out of range"))?;
    match im.input(n, 1) {
        Some(Value::Const(idx)) => {
            let x = im.tensor(n, 0)?;
            let len = data_shape[a] as i64;
            let mut parts = Vec::new();
            for &i in &idx.to_i64() {
                let i = if i < 0 { i + len } else { i };
                if !(0..len).contains(&i) {
                    return Err(im.malformed(n, format!("index {i} outside 0..{len}")));
                }
                parts.push(x.slice(a as isize, i as usize, i as usize + 1));
            }
            let mut shape = data_shape[..a].to_vec();
            shape.extend(&idx.shape);
            shape.extend(&data_shape[a + 1..]);
            let joined =
                if parts.len() == 1 { parts.remove(0) } else { join(im, &parts, a as isize) };
            Ok(vec![joined.reshape(shape)])
        }
        Some(Value::Tensor(ids)) => {
            let int = im.tensor(n, 0)?.dtype().filter(|d| d.is_index());
            let table = im.f32_tensor(n, 0)?;
            // ONNX counts a negative index from the end: `i + len` where `i < 0`, computed
            // in f32 (exact below 2^24) and cast back to the ids' type.
            let ids = match ids.dtype() {
                Some(d @ (DType::I32 | DType::I64)) => {
                    let f = ids.cast(DType::F32);
                    let ids = (&f + f.less_than(0.0) * data_shape[a] as f32).cast(d);
                    im.name_indices(n, ids, "a negative index counts from the end")
                }
                _ => ids,
            };
            let back = |t: Tensor| match int {
                Some(d) => t.cast(d),
                None => t,
            };
            if rank == 2 && a == 0 {
                return Ok(vec![back(table.gather(&ids))]);
            }
            // Any axis: rows of the [len, rest] view with the gathered axis first, then
            // the output's axes put back in ONNX's order (before, indices, after).
            let before = data_shape[..a].to_vec();
            let after = data_shape[a + 1..].to_vec();
            let mut to_front: Vec<isize> = vec![a as isize];
            to_front.extend((0..rank as isize).filter(|&d| d != a as isize));
            let rest: usize = before.iter().chain(&after).product();
            let rows = table.permute(&to_front).reshape(vec![data_shape[a], rest]);
            let ids_shape = ids.shape().unwrap_or_default();
            let k = ids_shape.len();
            let mut grouped = ids_shape.clone();
            grouped.extend(&before);
            grouped.extend(&after);
            let g = rows.gather(&ids).reshape(grouped);
            let mut order: Vec<isize> = (k..k + a).map(|d| d as isize).collect();
            order.extend((0..k).map(|d| d as isize));
            order.extend((k + a..k + a + after.len()).map(|d| d as isize));
            Ok(vec![back(g.permute(&order))])
        }
        None => Err(im.malformed(n, "no indices")),
    }
}

/// `Pad`: `constant` (with `constant_value`), `reflect`, `edge` or `wrap` padding of every
/// axis the pads name (opset 18's `axes`, all axes before); pads before opset 11 are the
/// `pads` attribute. A negative pad crops.
fn pad(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    // The value to pad with: known at import, or a scalar the program computes (then the
    // padded places are selected from it at run time).
    let mut computed_value = None;
    let (pads, value) = if im.opset < 11 {
        let pads = attr_ints(n, "pads").or_else(|| attr_ints(n, "paddings"));
        (pads.ok_or_else(|| im.malformed(n, "no pads"))?, attr_f(n, "value", 0.0))
    } else {
        let pads = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no pads input"))?;
        let value = match im.const_input(n, 2) {
            Some(c) => c.to_f32().first().copied().unwrap_or(0.0),
            None if im.input(n, 2).is_some() => {
                let v = im.f32_tensor(n, 2)?;
                if v.shape().unwrap_or_default().iter().product::<usize>() != 1 {
                    return Err(im.malformed(n, "constant_value must be one value"));
                }
                computed_value = Some(v.reshape(Vec::<usize>::new()));
                0.0
            }
            None => 0.0,
        };
        (pads, value)
    };
    let axes: Vec<usize> = match im.ints(n, 3)? {
        Some(a) => a
            .iter()
            .map(|&v| axis(v, rank).ok_or_else(|| im.malformed(n, format!("axes = {a:?}"))))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(im.malformed(n, format!("pads = {pads:?} for {} axes", axes.len())));
    }
    let mode = match attr_s(n, "mode").unwrap_or_else(|| "constant".into()).as_str() {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => return Err(im.unsupported(n, format!("mode = {other:?}"))),
    };
    let mut full = vec![(0usize, 0usize); rank];
    let mut y = x;
    for (k, &a) in axes.iter().enumerate() {
        let (b, e) = (pads[k], pads[axes.len() + k]);
        // A negative pad crops that end first.
        if b < 0 || e < 0 {
            let len = y.shape().unwrap_or_default()[a];
            let (cut_b, cut_e) =
                (b.min(0).unsigned_abs() as usize, e.min(0).unsigned_abs() as usize);
            if cut_b + cut_e > len {
                return Err(
                    im.malformed(n, format!("pads = {pads:?} crop more than axis {a} holds"))
                );
            }
            y = y.slice(a as isize, cut_b, len - cut_e);
        }
        full[a] = (b.max(0) as usize, e.max(0) as usize);
    }
    match (computed_value, mode) {
        (Some(v), PadMode::Constant(_)) => {
            // 1 where padded: zeros of the input's shape padded with ones (a broadcast
            // constant, one copy), then the value selected there.
            let kept = y.shape().unwrap_or_default();
            let zeros = y.graph().constant(0.0).reshape(vec![1; kept.len()]).expand(kept);
            let padded = zeros.pad(&full, PadMode::Constant(1.0));
            one(padded.select(v, y.pad(&full, PadMode::Constant(0.0))))
        }
        _ => one(y.pad(&full, mode)),
    }
}

/// `GatherElements`: elements along `axis` picked by an index tensor of the data's rank.
fn gather_elements(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let data = im.f32_tensor(n, 0)?;
    let indices = im.tensor(n, 1)?;
    im.note_index_input(n, 1);
    let rank = data.rank().unwrap_or(0);
    let a = axis(attr_i(n, "axis", 0), rank).ok_or_else(|| im.malformed(n, "axis out of range"))?;
    one(data.gather_elements(a as isize, &indices))
}

/// `Trilu`: the upper (`upper = 1`, the default) or lower triangle of the last two axes,
/// diagonal `k` (input 1, known at import) included, the rest 0: a select by a constant mask.
fn trilu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let r = shape.len();
    if r < 2 {
        return Err(im.malformed(n, format!("input of rank {r} (at least 2)")));
    }
    let k = im.ints(n, 1)?.and_then(|v| v.first().copied()).unwrap_or(0);
    let upper = attr_i(n, "upper", 1) != 0;
    let (rows, cols) = (shape[r - 2], shape[r - 1]);
    let mask: Vec<f32> = (0..rows * cols)
        .map(|e| {
            let d = (e % cols) as i64 - (e / cols) as i64;
            f32::from(u8::from(if upper { d >= k } else { d <= k }))
        })
        .collect();
    let mask = im.const_weight(n, "mask", Const::f32(vec![rows, cols], mask))?;
    let zero = im.cx.constant(0.0);
    one(mask.select(&x, zero))
}

/// `Tile`: the input repeated `repeats[d]` times along each axis `d` (input 1, known at
/// import): a view with one new broadcast axis before each, made contiguous by the reshape.
fn tile(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let repeats = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no repeats input"))?;
    if repeats.len() != shape.len() || repeats.iter().any(|&r| r < 0) {
        return Err(im.malformed(n, format!("repeats = {repeats:?} for an input of {shape:?}")));
    }
    let mut split = Vec::with_capacity(2 * shape.len());
    let mut wide = Vec::with_capacity(2 * shape.len());
    for (&d, &r) in shape.iter().zip(&repeats) {
        split.extend([1, d]);
        wide.extend([r as usize, d]);
    }
    let out: Vec<usize> = shape.iter().zip(&repeats).map(|(&d, &r)| d * r as usize).collect();
    im.foldable(n, &out)?;
    one(x.reshape(split).expand(wide).contiguous().reshape(out))
}

/// `DepthToSpace`: `[N, C, H, W]` to `[N, C / b^2, H b, W b]`, in `DCR` (the default) or `CRD`
/// order; a reshape, a transpose and a reshape.
fn depth_to_space(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let b = usize::try_from(attr_i(n, "blocksize", 0)).unwrap_or(0);
    let [batch, c, h, w] = shape[..] else {
        return Err(im.malformed(n, format!("input {shape:?} is not [N, C, H, W]")));
    };
    if b == 0 || c % (b * b) != 0 {
        return Err(im.malformed(n, format!("blocksize = {b} does not divide C = {c} as b^2")));
    }
    let oc = c / (b * b);
    let mode = attr_s(n, "mode").unwrap_or_else(|| "DCR".into());
    let t = match mode.as_str() {
        "DCR" => x.reshape(vec![batch, b, b, oc, h, w]).permute(&[0, 3, 4, 1, 5, 2]),
        "CRD" => x.reshape(vec![batch, oc, b, b, h, w]).permute(&[0, 1, 4, 2, 5, 3]),
        other => return Err(im.unsupported(n, format!("mode = {other:?} (DCR or CRD)"))),
    };
    one(t.contiguous().reshape(vec![batch, oc, h * b, w * b]))
}

/// `SpaceToDepth`: `[N, C, H, W]` to `[N, C b^2, H / b, W / b]`, the inverse of DepthToSpace
/// in its `mode` (`DCR`, the default, or `CRD`).
fn space_to_depth(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let b = usize::try_from(attr_i(n, "blocksize", 0)).unwrap_or(0);
    let [batch, c, h, w] = shape[..] else {
        return Err(im.malformed(n, format!("input {shape:?} is not [N, C, H, W]")));
    };
    if b == 0 || h % b != 0 || w % b != 0 {
        return Err(im.malformed(n, format!("blocksize = {b} does not divide H = {h}, W = {w}")));
    }
    let split = x.reshape(vec![batch, c, h / b, b, w / b, b]);
    let t = match attr_s(n, "mode").unwrap_or_else(|| "DCR".into()).as_str() {
        "DCR" => split.permute(&[0, 3, 5, 1, 2, 4]),
        "CRD" => split.permute(&[0, 1, 3, 5, 2, 4]),
        other => return Err(im.unsupported(n, format!("mode = {other:?} (DCR or CRD)"))),
    };
    one(t.contiguous().reshape(vec![batch, c * b * b, h / b, w / b]))
}

/// `EyeLike`: ones on diagonal `k` of a 2-D shape, known at import (the input's shape); the
/// input's type unless `dtype` says float or an integer type.
fn eye_like(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let [rows, cols] = shape[..] else {
        return Err(im.malformed(n, format!("input {shape:?} is not 2-D")));
    };
    let k = attr_i(n, "k", 0);
    let on = |e: usize| (e % cols) as i64 - (e / cols) as i64 == k;
    let dtype = match attr_i(n, "dtype", -1) as i32 {
        -1 => x.dtype().unwrap_or(DType::F32),
        data_type::FLOAT | data_type::BOOL => DType::F32,
        data_type::INT64 => DType::I64,
        data_type::INT32 => DType::I32,
        other => {
            return Err(im.unsupported(n, format!("dtype = {}", data_type::name(other))));
        }
    };
    let c = if dtype == DType::F32 {
        Const::f32(shape.clone(), (0..rows * cols).map(|e| f32::from(u8::from(on(e)))).collect())
    } else {
        Const::i64(shape.clone(), (0..rows * cols).map(|e| i64::from(on(e))).collect())
    };
    let t = im.const_weight(n, "eye", c)?;
    // A weight is a leaf; the program computes its output (a typed copy).
    one(if dtype == DType::F32 { t.contiguous() } else { t.cast(dtype) })
}

/// `CenterCropPad` (opset 18): each axis of `axes` (every axis by default) cropped or padded
/// with zeros to the length `shape` gives, centred: a crop starts at `(len - want) / 2`, a pad
/// puts `(want - len) / 2` zeros before and the rest after (ONNX's reference rounds both
/// down). `shape` must be known at import.
fn center_crop_pad(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    // Integers are padded as f32 (exact below 2^24) and cast back.
    let int = x.dtype().filter(|d| d.is_index());
    let x = if int.is_some() { x.cast(DType::F32) } else { x };
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let want = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no shape input"))?;
    let axes: Vec<usize> = match attr_ints(n, "axes") {
        Some(a) => a
            .iter()
            .map(|&v| axis(v, rank).ok_or_else(|| im.malformed(n, format!("axes = {a:?}"))))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if want.len() != axes.len() || want.iter().any(|&w| w < 0) {
        return Err(im.malformed(n, format!("shape = {want:?} for axes {axes:?}")));
    }
    if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
        return Err(im.malformed(n, format!("axes = {axes:?}: an axis listed twice")));
    }
    let mut pads = vec![(0usize, 0usize); rank];
    let mut y = x;
    for (&a, &w) in axes.iter().zip(&want) {
        let (len, w) = (shape[a], w as usize);
        if len > w {
            let start = (len - w) / 2;
            y = y.slice(a as isize, start, start + w);
        } else {
            let before = (w - len) / 2;
            pads[a] = (before, w - len - before);
        }
    }
    if pads.iter().any(|&p| p != (0, 0)) {
        y = y.pad(&pads, PadMode::Constant(0.0));
    }
    one(match int {
        Some(d) => y.cast(d),
        None => y,
    })
}

/// `Compress`: the slices along `axis` (of the flattened input when there is no axis) whose
/// `condition` is true. The output's length depends on the condition's values, so they must be
/// known at import (a constant, or a graph input whose value is given).
fn compress(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let Some(condition) = im.needed_input(n, 1) else {
        return Err(im.unsupported(
            n,
            "condition must be known at import time (the output's length depends on it)",
        ));
    };
    let kept: Vec<i64> = condition
        .to_i64()
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c != 0)
        .map(|(i, _)| i as i64)
        .collect();
    let (x, a) = match attr(n, "axis") {
        Some(v) => {
            let a =
                axis(v.i, shape.len()).ok_or_else(|| im.malformed(n, format!("axis = {}", v.i)))?;
            (x, a)
        }
        None => (x.reshape(vec![shape.iter().product::<usize>()]), 0),
    };
    let len = x.shape().unwrap_or_default()[a];
    if kept.last().is_some_and(|&i| i as usize >= len) {
        return Err(im.malformed(n, format!("condition selects past the axis' {len} slices")));
    }
    let indices = im.const_weight(n, "kept", Const::i64(vec![kept.len()], kept))?;
    one(x.take(a as isize, &indices, 0.0))
}

/// `ReverseSequence`: along `time_axis` (0 by default), the first `sequence_lens[b]` elements
/// of each batch row `b` (along `batch_axis`, 1 by default) reversed, the rest as they are.
/// `sequence_lens` must be known at import: the picks are a constant table of indices.
fn reverse_sequence(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let (t_axis, b_axis) = (attr_i(n, "time_axis", 0), attr_i(n, "batch_axis", 1));
    let (Some(ta), Some(ba)) = (axis(t_axis, rank), axis(b_axis, rank)) else {
        return Err(im.malformed(n, format!("time_axis {t_axis}, batch_axis {b_axis}")));
    };
    if ta == ba || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)) {
        return Err(im.malformed(n, "time_axis and batch_axis must be 0 and 1"));
    }
    let lens = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no sequence_lens"))?;
    let (t, b) = (shape[ta], shape[ba]);
    if lens.len() != b || lens.iter().any(|&l| l < 0 || l as usize > t) {
        return Err(im.malformed(n, format!("sequence_lens {lens:?} for {b} rows of {t} steps")));
    }
    // The source step of every (time, batch) position, laid out as the first two axes are.
    let mut table = vec![0i64; t * b];
    for (bi, &len) in lens.iter().enumerate() {
        for ti in 0..t {
            let from = if (ti as i64) < len { len - 1 - ti as i64 } else { ti as i64 };
            let at = if ta == 0 { ti * b + bi } else { bi * t + ti };
            table[at] = from;
        }
    }
    let mut lead = vec![shape[0], shape[1]];
    lead.resize(rank, 1);
    let table = im.const_weight(n, "steps", Const::i64(lead, table))?;
    // Integers are picked as f32 (exact below 2^24) and cast back.
    match x.dtype().filter(|d| d.is_index()) {
        Some(d) => {
            one(x.cast(DType::F32).gather_elements(ta as isize, table.expand(shape)).cast(d))
        }
        None => one(x.gather_elements(ta as isize, table.expand(shape))),
    }
}

/// `OneHot`: `on` where the index (from the end when negative) equals the position along
/// the new axis `axis` of length `depth` (known at import), `off` elsewhere; `values` is
/// `[off, on]`.
fn one_hot(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let indices = im.f32_tensor(n, 0)?;
    let depth = im
        .needed_input(n, 1)
        .and_then(|c| c.to_f32().first().copied())
        .ok_or_else(|| im.unsupported(n, "depth must be known at import time"))?;
    let depth = depth as i64;
    if depth <= 0 {
        return Err(im.malformed(n, format!("depth = {depth}")));
    }
    im.foldable(n, &[depth as usize])?;
    let values = im.tensor(n, 2)?;
    let out_int = values.dtype().filter(|d| d.is_index());
    let values = im.f32_tensor(n, 2)?;
    let shape = indices.shape().unwrap_or_default();
    let rank = shape.len() + 1;
    let a =
        axis(attr_i(n, "axis", -1), rank).ok_or_else(|| im.malformed(n, "axis out of range"))?;
    let wrapped = &indices + indices.less_than(0.0) * depth as f32;
    let mut iota_shape = vec![1; rank];
    iota_shape[a] = depth as usize;
    let iota = Const::f32(iota_shape, (0..depth).map(|i| i as f32).collect());
    let iota = im.const_weight(n, "positions", iota)?;
    let hit = iota.equal(wrapped.unsqueeze(a as isize));
    let (off, on) = (
        values.slice(0, 0, 1).reshape(Vec::<usize>::new()),
        values.slice(0, 1, 2).reshape(Vec::<usize>::new()),
    );
    let y = hit.select(on, off);
    one(match out_int {
        Some(d) => y.cast(d),
        None => y,
    })
}
