//! Movement operators: views of their input (`Transpose`, `Reshape`, `Flatten`, `Squeeze`,
//! `Unsqueeze`, `Expand`, `Slice`, `Split`), and the two that copy (`Concat`, `Gather`).

use lumen_compiler::{PadMode, Tensor};

use crate::error::OnnxError;
use crate::importer::{Handler, Importer, Value, attr_f, attr_i, attr_ints, attr_s, axis, one};
use crate::proto::NodeProto;

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
    ("GatherElements", gather_elements),
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
    one(im.cx.concat(&parts, a as isize))
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
                if parts.len() == 1 { parts.remove(0) } else { im.cx.concat(&parts, a as isize) };
            Ok(vec![joined.reshape(shape)])
        }
        Some(Value::Tensor(ids)) => {
            let table = im.f32_tensor(n, 0)?;
            if rank == 2 && a == 0 {
                return Ok(vec![table.gather(&ids)]);
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
            let mut back: Vec<isize> = (k..k + a).map(|d| d as isize).collect();
            back.extend((0..k).map(|d| d as isize));
            back.extend((k + a..k + a + after.len()).map(|d| d as isize));
            Ok(vec![g.permute(&back)])
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
    let (pads, value) = if im.opset < 11 {
        let pads = attr_ints(n, "pads").or_else(|| attr_ints(n, "paddings"));
        (pads.ok_or_else(|| im.malformed(n, "no pads"))?, attr_f(n, "value", 0.0))
    } else {
        let pads = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no pads input"))?;
        let value = match im.const_input(n, 2) {
            Some(c) => c.to_f32().first().copied().unwrap_or(0.0),
            None if im.input(n, 2).is_some() => {
                return Err(im.unsupported(n, "constant_value must be known at import time"));
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
    one(y.pad(&full, mode))
}

/// `GatherElements`: elements along `axis` picked by an index tensor of the data's rank.
fn gather_elements(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let data = im.f32_tensor(n, 0)?;
    let indices = im.tensor(n, 1)?;
    let rank = data.rank().unwrap_or(0);
    let a = axis(attr_i(n, "axis", 0), rank).ok_or_else(|| im.malformed(n, "axis out of range"))?;
    one(data.gather_elements(a as isize, &indices))
}
