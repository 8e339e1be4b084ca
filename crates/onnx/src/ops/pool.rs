//! Poolings: `MaxPool` and `AveragePool` (kernel, strides, dilations, explicit or automatic
//! padding, `ceil_mode`, `count_include_pad`) as the DSL's window-and-reduce composites, and
//! `GlobalAveragePool` / `GlobalMaxPool` as reductions over the spatial axes; `LpPool` as an
//! average pool of `|x|^p`. MaxPool's `Indices` output is an argmax over each window's
//! elements mapped to flat input positions; `MaxUnpool` scatters values back to such positions.

use lumen_compiler::{DType, IntOp, PadMode, ScatterReduction, Tensor};

use super::spatial::{spatial_list, spatial_pads};
use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Handler, Importer, IndexBuffer, attr_i, attr_ints, node_name, one};
use crate::proto::NodeProto;

/// The pooling operators, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("MaxPool", max_pool),
    ("AveragePool", average_pool),
    ("GlobalAveragePool", global_average_pool),
    ("GlobalMaxPool", global_max_pool),
    ("LpPool", lp_pool),
    ("MaxUnpool", max_unpool),
];

/// The most elements an input may have for MaxPool's `Indices` (and MaxUnpool's output):
/// positions are computed in f32, exact below 2^24.
const MAX_INDEXED: usize = 1 << 24;

/// The pooled input and its parameters: `(x, kernel, strides, dilations, pads, ceil_mode)`.
type Pooling = (Tensor, Vec<usize>, Vec<usize>, Vec<usize>, Vec<(usize, usize)>, bool);

fn pooling(im: &mut Importer, n: &NodeProto) -> Result<Pooling, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    if !(3..=5).contains(&shape.len()) {
        return Err(im.unsupported(
            n,
            format!(
                "an input of shape {shape:?} (lumen pools [N, C, ...] with 1 to 3 spatial axes)"
            ),
        ));
    }
    let s = shape.len() - 2;
    if attr_ints(n, "kernel_shape").is_none() {
        return Err(im.malformed(n, "no kernel_shape"));
    }
    let kernel = spatial_list(im, n, "kernel_shape", s, 1, 1)?;
    let strides = spatial_list(im, n, "strides", s, 1, 1)?;
    let dilations = spatial_list(im, n, "dilations", s, 1, 1)?;
    let pads = spatial_pads(im, n, &shape[2..], &kernel, &strides, &dilations)?;
    for (i, (&(b, e), &k)) in pads.iter().zip(&kernel).enumerate() {
        let span = (k - 1) * dilations[i] + 1;
        if span > shape[2 + i] + b + e {
            return Err(im.malformed(
                n,
                format!(
                    "kernel_shape: a kernel spanning {span} along spatial axis {i} is larger than \
                     the padded input ({})",
                    shape[2 + i] + b + e
                ),
            ));
        }
        if b >= span || e >= span {
            return Err(im.malformed(
                n,
                format!("pads ({b}, {e}) along spatial axis {i} must be smaller than the kernel ({span})"),
            ));
        }
    }
    let ceil = attr_i(n, "ceil_mode", 0) != 0;
    Ok((x, kernel, strides, dilations, pads, ceil))
}

/// `MaxPool`, and its `Indices` output when asked for ([`pool_indices`]).
fn max_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, kernel, strides, dilations, pads, ceil) = pooling(im, n)?;
    let y = x.max_pool(&kernel, &strides, &dilations, &pads, ceil);
    if !n.output.get(1).is_some_and(|o| !o.is_empty()) {
        return one(y);
    }
    let storage = attr_i(n, "storage_order", 0);
    if !(0..=1).contains(&storage) {
        return Err(im.malformed(n, format!("storage_order = {storage} (it is 0 or 1)")));
    }
    let pooled = y.shape().unwrap_or_default();
    let geometry = Geometry { kernel, strides, dilations, pads };
    let indices = pool_indices(im, n, &x, &pooled, &geometry, storage == 1)?;
    Ok(vec![y, indices])
}

/// A pooling's window geometry per spatial axis.
struct Geometry {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<(usize, usize)>,
}

/// MaxPool's `Indices`: for each window of `x` (`[N, C, *spatial]`, pooled to `pooled`), the
/// flat position in `x` of its largest element, the first of equal ones in row-major window
/// order (ONNX's reference): `((n * C + c) * prod(spatial)) + sum_i h_i * stride_i` with the
/// spatial strides row-major, or column-major (`h + w * H`) for `storage_order = 1`. The
/// windows are views of `x` padded with -inf (padding never wins unless a window's elements
/// are all -inf), one argmax over each window's elements picks the tap, and the tap's offset
/// (a constant table) plus the window's origin (broadcast constants) gives the position, in
/// f32 (exact: inputs of at most 2^24 elements), cast to i64.
fn pool_indices(
    im: &mut Importer,
    n: &NodeProto,
    x: &Tensor,
    pooled: &[usize],
    g: &Geometry,
    column_major: bool,
) -> Result<Tensor, OnnxError> {
    let shape = x.shape().unwrap_or_default();
    let total: usize = shape.iter().product();
    if total > MAX_INDEXED {
        return Err(im.unsupported(
            n,
            format!(
                "the Indices output of an input of {total} elements (lumen computes positions \
                 in f32, exact up to 2^24 elements)"
            ),
        ));
    }
    let s = g.kernel.len();
    let spatial = &shape[2..];
    let out = &pooled[2..];
    // Each axis padded at the end as far as ceil_mode's last window reaches.
    let mut full = Vec::with_capacity(s);
    for i in 0..s {
        let span = (g.kernel[i] - 1) * g.dilations[i] + 1;
        let (b, e) = g.pads[i];
        let reach = (out[i].max(1) - 1) * g.strides[i] + span;
        full.push((b, e + reach.saturating_sub(spatial[i] + b + e)));
    }
    let mut t = x.pad(&full, PadMode::Constant(f32::NEG_INFINITY));
    for i in 0..s {
        t = t.window((2 + 2 * i) as isize, g.kernel[i], g.strides[i], g.dilations[i]);
    }
    // [N, C, O0, K0, O1, K1, ...] -> [N, C, O0, O1, ..., K0 * K1 * ...].
    let mut perm: Vec<isize> = vec![0, 1];
    perm.extend((0..s).map(|i| (2 + 2 * i) as isize));
    perm.extend((0..s).map(|i| (3 + 2 * i) as isize));
    let taps: usize = g.kernel.iter().product();
    let mut windows = pooled.to_vec();
    windows.push(taps);
    let tap = t.permute(&perm).reshape(windows).argmax(-1, false, false);
    // Position strides within one [N, C] plane.
    let mut st = vec![1usize; s];
    for i in 0..s {
        st[i] = if column_major {
            spatial[..i].iter().product()
        } else {
            spatial[i + 1..].iter().product()
        };
    }
    // Each tap's offset from its window's origin.
    let mut offsets = vec![0f32; taps];
    for (l, o) in offsets.iter_mut().enumerate() {
        let mut rest = l;
        for i in (0..s).rev() {
            let k = rest % g.kernel[i];
            rest /= g.kernel[i];
            *o += (k * g.dilations[i] * st[i]) as f32;
        }
    }
    let table = im.const_weight(n, "tap_offsets", Const::f32(vec![taps], offsets))?;
    let windows_count: usize = pooled.iter().product();
    let mut index = table.take(0, tap.reshape(vec![windows_count]), 0.0).reshape(pooled.to_vec());
    // The window origins: the plane's start plus, per axis, o * stride - pad before.
    let plane: usize = spatial.iter().product();
    let (batch, channels) = (shape[0], shape[1]);
    let starts: Vec<f32> = (0..batch * channels).map(|p| (p * plane) as f32).collect();
    let mut dims = vec![batch, channels];
    dims.resize(2 + s, 1);
    index = index + im.const_weight(n, "plane_starts", Const::f32(dims, starts))?;
    for i in 0..s {
        let origin: Vec<f32> = (0..out[i])
            .map(|o| ((o * g.strides[i]) as f32 - g.pads[i].0 as f32) * st[i] as f32)
            .collect();
        let mut dims = vec![1; 2 + s];
        dims[2 + i] = out[i];
        index = index + im.const_weight(n, &format!("origins{i}"), Const::f32(dims, origin))?;
    }
    Ok(index.cast(DType::I64))
}

/// `MaxUnpool`: `X`'s values written at the flat positions `I` holds (MaxPool's `Indices`)
/// of a zero tensor of the output's shape: `output_shape` when given (known at import, of
/// `X`'s rank, N and C kept, no smaller than the unpooled shape), else the unpooled shape
/// `[N, C, *out]`, `out = (in - 1) * stride - pads + kernel` per spatial axis. Positions are
/// flat over the whole output (`output_shape`'s layout), as ONNX Runtime and PyTorch read
/// them: MaxPool's `Indices` of an input of `output_shape` put each value back where it was.
/// ONNX's reference reads them in the unpooled shape instead and pads that result to
/// `output_shape`; the two agree when the shapes do, so where they differ and `I` is not a
/// MaxPool's `Indices` (hand-fed positions, whose layout only the producer knows) the node is
/// refused rather than read one way silently.
///
/// One `scatter_elements` of the flattened values at the positions, a computed buffer named
/// `{node}.positions` ([`Imported::index_buffers`](crate::Imported::index_buffers)) where a
/// negative position becomes the output's size: a position outside `0..size` is a run-time
/// error naming the node (known at import: refused then). Of two values sent to one position
/// the last in row-major order wins on the CPU.
fn max_unpool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    if !(3..=5).contains(&shape.len()) {
        return Err(im.unsupported(
            n,
            format!(
                "an input of shape {shape:?} (lumen unpools [N, C, ...] with 1 to 3 spatial axes)"
            ),
        ));
    }
    let s = shape.len() - 2;
    if attr_ints(n, "kernel_shape").is_none() {
        return Err(im.malformed(n, "no kernel_shape"));
    }
    let kernel = spatial_list(im, n, "kernel_shape", s, 1, 1)?;
    let strides = spatial_list(im, n, "strides", s, 1, 1)?;
    let pads = match attr_ints(n, "pads") {
        None => vec![0i64; 2 * s],
        Some(p) if p.len() == 2 * s && p.iter().all(|&v| v >= 0) => p,
        Some(p) => {
            return Err(
                im.malformed(n, format!("pads = {p:?}: expected {} values of at least 0", 2 * s))
            );
        }
    };
    let mut inferred = shape[..2].to_vec();
    for i in 0..s {
        let len = (shape[2 + i] as i64 - 1) * strides[i] as i64 - pads[i] - pads[s + i]
            + kernel[i] as i64;
        if len < 1 {
            return Err(im.malformed(
                n,
                format!("pads = {pads:?}: spatial axis {i} of the output would have length {len}"),
            ));
        }
        inferred.push(len as usize);
    }
    let indices = im.tensor(n, 1)?;
    let ishape = indices.shape().unwrap_or_default();
    let dtype = indices.dtype().filter(|&d| d.is_index());
    let Some(dtype) = dtype.filter(|_| ishape == shape) else {
        let what = match indices.dtype() {
            Some(DType::F32) if im.bools.contains(&n.input[1]) => "bool",
            Some(d) => d.name(),
            None => "not a tensor",
        };
        return Err(im.malformed(
            n,
            format!(
                "input 1 (`{}`, I) is {what} of shape {ishape:?}; it must be int64 (or int32) \
                 positions of X's shape {shape:?}",
                n.input[1]
            ),
        ));
    };
    let target = match n.input.get(2).filter(|s| !s.is_empty()) {
        None => inferred.clone(),
        Some(given) => {
            let Some(target) = im.needed_input(n, 2) else {
                return Err(im.unsupported(
                    n,
                    format!(
                        "input 2 (`{given}`, output_shape) must be known at import time: lumen \
                         compiles static shapes (a constant, or a graph input whose value is \
                         given)"
                    ),
                ));
            };
            let target = target.to_i64();
            let fits = target.len() == inferred.len()
                && target[..2].iter().zip(&inferred).all(|(&t, &i)| t == i as i64)
                && target[2..].iter().zip(&inferred[2..]).all(|(&t, &i)| t >= i as i64);
            if !fits {
                return Err(im.malformed(
                    n,
                    format!(
                        "output_shape {target:?}: it must keep N and C and be no smaller than \
                         the unpooled shape {inferred:?}"
                    ),
                ));
            }
            target.iter().map(|&d| d as usize).collect()
        }
    };
    let from_max_pool = im
        .producers
        .get(&n.input[1])
        .is_some_and(|(p, k)| p.op_type == "MaxPool" && *k == 1 && p.domain.is_empty());
    if target != inferred && !from_max_pool {
        return Err(im.unsupported(
            n,
            format!(
                "output_shape {target:?} differs from the unpooled shape {inferred:?} and I is \
                 not a MaxPool's Indices: ONNX Runtime and PyTorch read its positions in \
                 {target:?}, ONNX's reference in {inferred:?} (then pads), and lumen does not \
                 guess which layout these positions use"
            ),
        ));
    }
    let total: usize = target.iter().product();
    let count: usize = shape.iter().product();
    if let Some(c) = im.const_input(n, 1)
        && let Some((p, &v)) =
            c.to_i64().iter().enumerate().find(|(_, v)| !(0..total as i64).contains(v))
    {
        return Err(im.malformed(
            n,
            format!(
                "input 1 (`{}`, I) holds {v} at position {p}, outside the output's {total} \
                 positions (0..{total} in {target:?})",
                n.input[1]
            ),
        ));
    }
    // A negative position becomes `total`, which the scatter reports as out of range (it
    // would count a negative one from the end): `m` is -1 for a negative position, else 0, and
    // `p ^ ((p ^ total) & m)` is `total` or `p`, exact in i64.
    let p = if dtype == DType::I64 { indices } else { indices.cast(DType::I64) };
    let p = p.reshape(vec![count]);
    let sign = im.const_weight(n, "sign_shift", Const::i64(vec![1], vec![63]))?;
    let size = im.const_weight(n, "size", Const::i64(vec![1], vec![total as i64]))?;
    let m = p.int_op(IntOp::ShiftRight, &[&sign]);
    let flip = p.int_op(IntOp::BitXor, &[&size]).int_op(IntOp::BitAnd, &[&m]);
    let name = im.names.make(&format!("{}.positions", node_name(n)));
    let positions = p.int_op(IntOp::BitXor, &[&flip]).name(name.clone());
    im.index_buffers.push(IndexBuffer {
        buffer: name,
        node: node_name(n),
        op: n.op_type.clone(),
        note: "a negative position of I shows as the output's size".into(),
    });
    let zeros = im.cx.constant(0.0).reshape(vec![1]).expand(vec![total]);
    let flat = zeros.scatter_elements(0, positions, x.reshape(vec![count]), ScatterReduction::None);
    one(flat.reshape(target))
}

/// `AveragePool`: padding counted in the divisor when `count_include_pad`.
fn average_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, kernel, strides, dilations, pads, ceil) = pooling(im, n)?;
    let include = attr_i(n, "count_include_pad", 0) != 0;
    one(x.avg_pool(&kernel, &strides, &dilations, &pads, ceil, include))
}

/// `LpPool`: `(sum over the window of |x|^p)^(1/p)`, padding counted as zeros: the average
/// pool of `|x|^p` with the padding included, times the window's size. Not `ceil_mode` (its
/// clipped end windows would need their own count).
fn lp_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, kernel, strides, dilations, pads, ceil) = pooling(im, n)?;
    if ceil {
        return Err(im.unsupported(n, "ceil_mode = 1"));
    }
    let p = attr_i(n, "p", 2);
    if p < 1 {
        return Err(im.malformed(n, format!("p = {p} (at least 1)")));
    }
    let size = kernel.iter().product::<usize>() as f32;
    let powered = match p {
        1 => x.maximum(-&x),
        2 => &x * &x,
        _ => x.maximum(-&x).pow(p as f32),
    };
    let sum = powered.avg_pool(&kernel, &strides, &dilations, &pads, false, true) * size;
    one(match p {
        1 => sum,
        2 => sum.sqrt(),
        _ => sum.pow(1.0 / p as f32),
    })
}

/// The input as `[N, C, P]` (its spatial axes merged, a view when they are contiguous) and
/// the shape the pooled result takes, `[N, C, 1, ...]`.
fn merged(im: &mut Importer, n: &NodeProto) -> Result<(Tensor, Vec<usize>), OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    if shape.len() < 3 {
        return Err(im.malformed(n, format!("input of shape {shape:?} (expected [N, C, ...])")));
    }
    let p: usize = shape[2..].iter().product();
    let mut pooled = shape[..2].to_vec();
    pooled.resize(shape.len(), 1);
    Ok((x.reshape(vec![shape[0], shape[1], p]), pooled))
}

/// `GlobalAveragePool`: the mean over the spatial axes, kept with length 1.
fn global_average_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, pooled) = merged(im, n)?;
    one(x.mean(-1, false).reshape(pooled))
}

/// `GlobalMaxPool`: the maximum over the spatial axes, kept with length 1.
fn global_max_pool(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, pooled) = merged(im, n)?;
    one(x.max(-1, false).reshape(pooled))
}
