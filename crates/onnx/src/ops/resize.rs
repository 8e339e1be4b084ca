//! Resampling: `Resize` (opset 10 on: nearest with every coordinate transformation and
//! rounding mode, linear and cubic; scales or sizes; axes, roi and extrapolation) and the older
//! `Upsample`; `AffineGrid`, the sampling grid of an affine transform, and `GridSample`, which
//! reads an image at the grid's run-time coordinates (taps gathered by computed indices).
//!
//! Each resized axis is computed at import as a table of taps: for every output position, the
//! input positions it reads and their weights, by ONNX's formulas (the coordinate
//! transformation, then the rounding for nearest or the 2 and 4 tap kernels for linear and
//! cubic, edges clamped, `exclude_outside` renormalized). The program then reads each tap with
//! a `take` (one copy) and sums them weighted: an axis of one tap of weight 1 is a plain take,
//! and nearest resizing by a whole factor is a broadcast copy. No op of its own: the same
//! takes serve every mode.

use lumen_compiler::Tensor;

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{
    Handler, Importer, attr_f, attr_floats, attr_i, attr_ints, attr_s, axis, one,
};
use crate::proto::NodeProto;

/// The resampling operators, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("Resize", resize),
    ("Upsample", upsample),
    ("AffineGrid", affine_grid),
    ("GridSample", grid_sample),
];

/// How a position is interpolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// How an output coordinate maps to an input coordinate (`coordinate_transformation_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coordinates {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    TfCropAndResize,
}

/// How nearest mode rounds a coordinate (`nearest_mode`); `Simple` is opset 10's and
/// `Upsample`'s rule (floor when upsampling, ceil when downsampling, as ONNX Runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    Simple,
}

/// Everything that decides one axis' taps.
#[derive(Debug, Clone, Copy)]
struct Resampling {
    mode: Mode,
    coordinates: Coordinates,
    rounding: Rounding,
    cubic_a: f64,
    exclude_outside: bool,
    /// Linear and cubic downsampling widen their kernel by 1 / scale (a low-pass filter).
    antialias: bool,
}

/// One resized axis: its lengths, the scale the coordinates use and its region of interest
/// (`tf_crop_and_resize` only).
#[derive(Debug, Clone, Copy)]
struct Axis {
    input: usize,
    output: usize,
    scale: f64,
    roi: (f64, f64),
}

/// The input coordinate output position `x` reads, or `None` outside a
/// `tf_crop_and_resize` region (the extrapolation value).
fn source(c: Coordinates, x: f64, a: &Axis) -> Option<f64> {
    let (len, out, scale) = (a.input as f64, a.output as f64, a.scale);
    Some(match c {
        Coordinates::HalfPixel => (x + 0.5) / scale - 0.5,
        Coordinates::HalfPixelSymmetric => {
            let adjustment = out / (scale * len);
            let offset = len / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / scale - 0.5
        }
        Coordinates::PytorchHalfPixel => {
            if a.output > 1 {
                (x + 0.5) / scale - 0.5
            } else {
                0.0
            }
        }
        // The resized length is `len * scale` before rounding down (ONNX's reference; ORT and
        // PyTorch use the rounded length, which differs only for a scale that does not give
        // a whole length).
        Coordinates::AlignCorners => {
            let resized = len * scale;
            if a.output == 1 || resized == 1.0 { 0.0 } else { x * (len - 1.0) / (resized - 1.0) }
        }
        Coordinates::Asymmetric => x / scale,
        Coordinates::TfHalfPixelForNn => (x + 0.5) / scale,
        Coordinates::TfCropAndResize => {
            let (s, e) = a.roi;
            let v = if a.output > 1 {
                s * (len - 1.0) + x * (e - s) * (len - 1.0) / (out - 1.0)
            } else {
                0.5 * (s + e) * (len - 1.0)
            };
            if v < 0.0 || v > len - 1.0 {
                return None;
            }
            v
        }
    })
}

/// The cubic convolution weights of the four taps around a coordinate of fraction `t`
/// (Keys' kernel with parameter `a`, ONNX's `cubic_coeff_a`).
fn cubic(t: f64, a: f64) -> [f64; 4] {
    let far = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
    let near = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// The taps of every output position of axis `a`: `(input position or -1 for the
/// extrapolation value, weight)`.
fn taps(r: &Resampling, a: &Axis) -> Vec<Vec<(i64, f64)>> {
    let last = a.input as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last);
    (0..a.output)
        .map(|j| {
            let Some(x) = source(r.coordinates, j as f64, a) else { return vec![(-1, 1.0)] };
            if r.antialias && r.mode != Mode::Nearest && a.scale < 1.0 {
                return antialiased(r, x, a);
            }
            match r.mode {
                Mode::Nearest => {
                    let down = a.scale < 1.0;
                    let i = match r.rounding {
                        Rounding::RoundPreferFloor if x.fract().abs() == 0.5 => x.floor(),
                        Rounding::RoundPreferCeil if x.fract().abs() == 0.5 => x.ceil(),
                        Rounding::RoundPreferFloor | Rounding::RoundPreferCeil => x.round(),
                        Rounding::Floor => x.floor(),
                        Rounding::Ceil => x.ceil(),
                        Rounding::Simple if down => x.ceil(),
                        Rounding::Simple => x.trunc(),
                    };
                    vec![(clamp(i as i64), 1.0)]
                }
                Mode::Linear => {
                    let x0 = x.floor();
                    let t = x - x0;
                    vec![(clamp(x0 as i64), 1.0 - t), (clamp(x0 as i64 + 1), t)]
                }
                Mode::Cubic => {
                    let x0 = x.floor() as i64;
                    let w = cubic(x - x0 as f64, r.cubic_a);
                    let mut t: Vec<(i64, f64)> =
                        (0..4).map(|k| (x0 - 1 + k as i64, w[k])).collect();
                    if r.exclude_outside {
                        let inside: f64 =
                            t.iter().filter(|(i, _)| (0..=last).contains(i)).map(|p| p.1).sum();
                        for p in &mut t {
                            p.1 = if (0..=last).contains(&p.0) { p.1 / inside } else { 0.0 };
                        }
                    }
                    t.into_iter().map(|(i, w)| (clamp(i), w)).collect()
                }
            }
        })
        .collect()
}

/// The taps of an antialiased linear or cubic kernel at input coordinate `x` of axis `a`
/// (downsampling, `scale < 1`), as ONNX's reference: the kernel stretched by `1 / scale` over
/// the neighbours of `x` (the one left of it when `x` is whole), weights normalized to sum 1,
/// indices past the edges clamped (or, with `exclude_outside`, their weights dropped).
fn antialiased(r: &Resampling, x: f64, a: &Axis) -> Vec<(i64, f64)> {
    let s = a.scale;
    let floor = x.floor();
    let (base, ratio) =
        if x == floor { (floor as i64 - 1, 1.0) } else { (floor as i64, x - floor) };
    let (first, weight): (i64, Box<dyn Fn(f64) -> f64>) = match r.mode {
        Mode::Cubic => {
            let c = r.cubic_a;
            let kernel = move |d: f64| {
                let d = d.abs();
                if d <= 1.0 {
                    ((c + 2.0) * d - (c + 3.0)) * d * d + 1.0
                } else if d < 2.0 {
                    ((c * d - 5.0 * c) * d + 8.0 * c) * d - 4.0 * c
                } else {
                    0.0
                }
            };
            ((-2.0 / s).floor() as i64 + 1, Box::new(kernel))
        }
        _ => ((-1.0 / s).floor() as i64 + 1, Box::new(|d: f64| (1.0 - d.abs()).clamp(0.0, 1.0))),
    };
    let last = a.input as i64 - 1;
    let mut taps: Vec<(i64, f64)> =
        (first..=1 - first).map(|k| (base + k, weight((k as f64 - ratio) * s))).collect();
    if r.exclude_outside {
        for t in &mut taps {
            if !(0..=last).contains(&t.0) {
                t.1 = 0.0;
            }
        }
    }
    let total: f64 = taps.iter().map(|t| t.1).sum();
    taps.into_iter().map(|(i, w)| (i.clamp(0, last), w / total)).collect()
}

/// `x` resampled along `axes` (each with its [`Axis`]) by `r`, filling `extrapolation`
/// outside a crop.
fn resample(
    im: &mut Importer,
    n: &NodeProto,
    x: Tensor,
    r: &Resampling,
    axes: &[(usize, Axis)],
    extrapolation: f32,
) -> Result<Tensor, OnnxError> {
    let mut y = x;
    // Nearest by a whole factor along an axis (each input element repeated `f` times): a
    // broadcast and one copy for all such axes.
    let mut repeat: Vec<(usize, usize)> = Vec::new();
    let mut rest: Vec<(usize, Axis, Vec<Vec<(i64, f64)>>)> = Vec::new();
    for &(ax, a) in axes {
        let t = taps(r, &a);
        let identity =
            a.output == a.input && t.iter().enumerate().all(|(j, p)| p == &[(j as i64, 1.0)]);
        if identity {
            continue;
        }
        let f = a.output / a.input.max(1);
        let repeats = a.input > 0
            && a.output == a.input * f
            && t.iter().enumerate().all(|(j, p)| p == &[((j / f) as i64, 1.0)]);
        if repeats {
            repeat.push((ax, f));
        } else {
            rest.push((ax, a, t));
        }
    }
    if !repeat.is_empty() {
        let shape = y.shape().unwrap_or_default();
        let (mut split, mut spread, mut merged) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &d) in shape.iter().enumerate() {
            match repeat.iter().find(|(ax, _)| *ax == i) {
                Some(&(_, f)) => {
                    split.extend([d, 1]);
                    spread.extend([d, f]);
                    merged.push(d * f);
                }
                None => {
                    split.push(d);
                    spread.push(d);
                    merged.push(d);
                }
            }
        }
        y = y.reshape(split).expand(spread).reshape(merged);
    }
    for (ax, a, t) in rest {
        let width = t.iter().map(Vec::len).max().unwrap_or(1);
        let rank = y.rank().unwrap_or(0);
        let mut along = vec![a.output];
        along.resize(rank - ax, 1);
        let mut sum: Option<Tensor> = None;
        for k in 0..width {
            let idx: Vec<i64> = t.iter().map(|p| p.get(k).map_or(0, |q| q.0)).collect();
            let w: Vec<f32> = t.iter().map(|p| p.get(k).map_or(0.0, |q| q.1 as f32)).collect();
            let idx =
                im.const_weight(n, &format!("axis{ax}_tap{k}"), Const::i64(vec![a.output], idx))?;
            let picked = y.take(ax as isize, &idx, extrapolation);
            let part = if w.iter().all(|&v| v == 1.0) {
                picked
            } else {
                let w = im.const_weight(
                    n,
                    &format!("axis{ax}_weight{k}"),
                    Const::f32(along.clone(), w),
                )?;
                picked * w
            };
            sum = Some(match sum {
                None => part,
                Some(s) => s + part,
            });
        }
        if let Some(s) = sum {
            y = s;
        }
    }
    Ok(y)
}

/// `Resize`: inputs `X`, then (opset 11 on) `roi`, `scales`, `sizes`; (opset 10) `X`,
/// `scales`.
fn resize(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    let old = im.opset < 11;
    let mode = match attr_s(n, "mode").unwrap_or_else(|| "nearest".into()).as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => {
            return Err(im.unsupported(n, format!("mode = {other:?} (nearest, linear or cubic)")));
        }
    };
    let coordinates = if old {
        Coordinates::Asymmetric
    } else {
        match attr_s(n, "coordinate_transformation_mode")
            .unwrap_or_else(|| "half_pixel".into())
            .as_str()
        {
            "half_pixel" => Coordinates::HalfPixel,
            "half_pixel_symmetric" => Coordinates::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coordinates::PytorchHalfPixel,
            "align_corners" => Coordinates::AlignCorners,
            "asymmetric" => Coordinates::Asymmetric,
            "tf_half_pixel_for_nn" => Coordinates::TfHalfPixelForNn,
            "tf_crop_and_resize" => Coordinates::TfCropAndResize,
            other => {
                return Err(
                    im.unsupported(n, format!("coordinate_transformation_mode = {other:?}"))
                );
            }
        }
    };
    let rounding = if old {
        Rounding::Simple
    } else {
        match attr_s(n, "nearest_mode").unwrap_or_else(|| "round_prefer_floor".into()).as_str() {
            "round_prefer_floor" => Rounding::RoundPreferFloor,
            "round_prefer_ceil" => Rounding::RoundPreferCeil,
            "floor" => Rounding::Floor,
            "ceil" => Rounding::Ceil,
            other => return Err(im.unsupported(n, format!("nearest_mode = {other:?}"))),
        }
    };
    let r = Resampling {
        mode,
        coordinates,
        rounding,
        cubic_a: f64::from(attr_f(n, "cubic_coeff_a", -0.75)),
        exclude_outside: attr_i(n, "exclude_outside", 0) != 0,
        antialias: attr_i(n, "antialias", 0) != 0,
    };
    let policy = attr_s(n, "keep_aspect_ratio_policy").unwrap_or_else(|| "stretch".into());
    if !matches!(policy.as_str(), "stretch" | "not_larger" | "not_smaller") {
        return Err(im.malformed(n, format!("keep_aspect_ratio_policy = {policy:?}")));
    }
    // The axes the scales, sizes and roi list (opset 18 on), every axis before.
    let axes: Vec<usize> = match attr_ints(n, "axes") {
        Some(a) => a
            .iter()
            .map(|&v| axis(v, rank).ok_or_else(|| im.malformed(n, format!("axes = {a:?}"))))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let (scales_at, sizes_at, roi_at) = if old { (1, usize::MAX, usize::MAX) } else { (2, 3, 1) };
    let floats = |i: usize| -> Option<Vec<f32>> {
        im.needed_input(n, i).map(|c| c.to_f32()).filter(|v| !v.is_empty())
    };
    let given_scales = floats(scales_at);
    let given_sizes =
        if sizes_at == usize::MAX { None } else { im.ints(n, sizes_at)?.filter(|v| !v.is_empty()) };
    let roi = if roi_at == usize::MAX { None } else { floats(roi_at) };
    if given_scales.is_none() && given_sizes.is_none() {
        let name = |i: usize| n.input.get(i).filter(|s| !s.is_empty()).cloned();
        let given: Vec<String> = [scales_at, sizes_at]
            .into_iter()
            .filter_map(|i| name(i).map(|s| format!("input {i} (`{s}`)")))
            .collect();
        let what = if given.is_empty() {
            "neither scales nor sizes is given".to_string()
        } else {
            format!(
                "{} must be known at import time: lumen compiles static shapes (an initializer \
                 or constant, or a graph input whose value is given, as `lumen run --inputs` does)",
                given.join(" or ")
            )
        };
        return Err(im.unsupported(n, what));
    }
    // With sizes, `not_larger` / `not_smaller` keep the aspect ratio: one scale for every axis
    // (the smallest / largest of size / input), each length rounded half up from it.
    let common = match (&given_sizes, policy.as_str()) {
        (Some(sizes), "not_larger" | "not_smaller") if sizes.len() == axes.len() => {
            let ratios = axes.iter().zip(sizes).map(|(&ax, &o)| o as f64 / shape[ax].max(1) as f64);
            let pick = if policy == "not_larger" { f64::min } else { f64::max };
            ratios.reduce(pick)
        }
        _ => None,
    };
    let mut resized = Vec::new();
    for (k, &ax) in axes.iter().enumerate() {
        let input = shape[ax];
        let (output, scale) = if let Some(c) = common {
            ((c * input as f64 + 0.5) as usize, c as f32)
        } else if let Some(sizes) = &given_sizes {
            let bad = || im.malformed(n, format!("sizes = {sizes:?} for axes {axes:?}"));
            let out = sizes.get(k).copied().ok_or_else(bad)?;
            let out = usize::try_from(out).map_err(|_| bad())?;
            (out, out as f32 / input.max(1) as f32)
        } else {
            let scales = given_scales.clone().unwrap_or_default();
            let bad =
                || im.malformed(n, format!("scales = {scales:?} for axes {axes:?}: each positive"));
            let s = scales.get(k).copied().filter(|&s| s > 0.0).ok_or_else(bad)?;
            ((s * input as f32) as usize, s)
        };
        let roi_k = roi.as_ref().map_or((0.0, 1.0), |r| {
            let half = r.len() / 2;
            (
                f64::from(r.get(k).copied().unwrap_or(0.0)),
                f64::from(r.get(half + k).copied().unwrap_or(1.0)),
            )
        });
        resized.push((ax, Axis { input, output, scale: f64::from(scale), roi: roi_k }));
    }
    let extrapolation = attr_f(n, "extrapolation_value", 0.0);
    one(resample(im, n, x, &r, &resized, extrapolation)?)
}

/// `Upsample` (opsets 7 to 9): `scales` as an attribute (7, 8) or an input (9), nearest or
/// linear, asymmetric coordinates.
fn upsample(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let mode = match attr_s(n, "mode").unwrap_or_else(|| "nearest".into()).as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        other => return Err(im.unsupported(n, format!("mode = {other:?} (nearest or linear)"))),
    };
    let scales = match attr_floats(n, "scales") {
        Some(s) => s,
        None => im
            .needed_input(n, 1)
            .map(|c| c.to_f32())
            .ok_or_else(|| im.unsupported(n, "scales must be known at import time"))?,
    };
    if scales.len() != shape.len() || scales.iter().any(|&s| !(s > 0.0)) {
        return Err(im.malformed(n, format!("scales = {scales:?} for an input of shape {shape:?}")));
    }
    let r = Resampling {
        mode,
        coordinates: Coordinates::Asymmetric,
        rounding: Rounding::Simple,
        cubic_a: -0.75,
        exclude_outside: false,
        antialias: false,
    };
    let axes: Vec<(usize, Axis)> = shape
        .iter()
        .zip(&scales)
        .enumerate()
        .map(|(i, (&d, &s))| {
            (
                i,
                Axis {
                    input: d,
                    output: (s * d as f32) as usize,
                    scale: f64::from(s),
                    roi: (0.0, 1.0),
                },
            )
        })
        .collect();
    one(resample(im, n, x, &r, &axes, 0.0)?)
}

/// `AffineGrid` (opset 20): `theta [N, 2, 3]` (or `[N, 3, 4]`) applied to the normalized
/// coordinates of every position of an image of `size` `[N, C, H, W]` (or `[N, C, D, H, W]`,
/// known at import): `[x, y, (z,) 1]` with `x` along the last axis, each from -1 to 1 (the
/// pixel centres, or the corners with `align_corners`). The coordinate grid is a constant; the
/// program is one batched matmul, giving `[N, H, W, 2]` (or `[N, D, H, W, 3]`).
fn affine_grid(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let theta = im.f32_tensor(n, 0)?;
    let size = im.ints(n, 1)?.ok_or_else(|| im.malformed(n, "no size input"))?;
    let spatial: Vec<usize> = match size.as_slice() {
        [_, _, rest @ ..] if (2..=3).contains(&rest.len()) && rest.iter().all(|&d| d > 0) => {
            rest.iter().map(|&d| d as usize).collect()
        }
        _ => {
            return Err(
                im.malformed(n, format!("size = {size:?}: [N, C, H, W] or [N, C, D, H, W]"))
            );
        }
    };
    let rank = spatial.len();
    let batch = usize::try_from(size[0]).unwrap_or(0);
    if theta.shape().unwrap_or_default() != [batch, rank, rank + 1] {
        return Err(im.malformed(
            n,
            format!("theta of shape {:?}: expected [{batch}, {rank}, {}]", theta.shape(), rank + 1),
        ));
    }
    let corners = attr_i(n, "align_corners", 0) != 0;
    let coordinate = |i: usize, len: usize| -> f32 {
        let step = if corners { 2.0 / (len as f64 - 1.0) } else { 2.0 / len as f64 };
        let start = if corners { -1.0 } else { -1.0 + step / 2.0 };
        // A single position with align_corners sits at -1 (the reference's arange).
        if corners && len == 1 { -1.0 } else { (start + i as f64 * step) as f32 }
    };
    let positions: usize = spatial.iter().product();
    im.foldable(n, &[positions, rank + 1])?;
    let mut grid = Vec::with_capacity(positions * (rank + 1));
    for p in 0..positions {
        // Row-major index of p; the homogeneous point lists the last axis first.
        let mut rest = p;
        let mut index = vec![0usize; rank];
        for a in (0..rank).rev() {
            index[a] = rest % spatial[a];
            rest /= spatial[a];
        }
        for a in (0..rank).rev() {
            grid.push(coordinate(index[a], spatial[a]));
        }
        grid.push(1.0);
    }
    let grid = im.const_weight(n, "grid", Const::f32(vec![positions, rank + 1], grid))?;
    let mut shape = vec![batch];
    shape.extend(&spatial);
    shape.push(rank);
    one(grid.matmul(theta.transpose(-1, -2)).reshape(shape))
}

/// How `GridSample` reads a tap outside the image (`padding_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outside {
    Zeros,
    Border,
    Reflection,
}

/// `x` reflected into `[lo, hi]` by its nearer border as many times as it takes (ONNX's
/// reference, PyTorch's `reflect_coordinates`); unchanged inside.
fn reflect(x: &Tensor, lo: f32, hi: f32) -> Tensor {
    use super::elementwise::floor;
    let range = hi - lo;
    let below = x.less_than(lo);
    let above = x.graph().constant(hi).less_than(x);
    let dx = below.select(lo - x, x - hi);
    let turns = floor(&(&dx / range));
    let r = &dx - &turns * range;
    let odd = &turns - floor(&(&turns * 0.5)) * 2.0;
    let from_lo = r.graph().constant(lo) + &r;
    let from_hi = r.graph().constant(hi) - &r;
    let inside_below = odd.select(&from_hi, &from_lo);
    let inside_above = odd.select(&from_lo, &from_hi);
    below.select(inside_below, above.select(inside_above, x))
}

/// `GridSample` (opset 16 on, N-D from 20): `X [N, C, *S]` read at the coordinates of `grid [N,
/// *O, r]` (normalized to [-1, 1], the last axis first), giving `[N, C, *O]`: `nearest` (halves
/// to even), `linear` or `cubic` (Keys, a = -0.75) along each axis, taps outside the image
/// `zeros`, clamped to the `border` or reflected (`reflection`), with or without
/// `align_corners`, as ONNX's reference. The coordinates are run-time values: every tap
/// combination is one gather of computed flat indices, weighted and summed.
fn grid_sample(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    use super::elementwise::{floor, round_half_even, trunc};
    use lumen_compiler::DType;
    let (x, grid) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    let (xs, gs) = (x.shape().unwrap_or_default(), grid.shape().unwrap_or_default());
    let r = xs.len().saturating_sub(2);
    if r == 0 || gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r || xs[2..].contains(&0) {
        return Err(im.malformed(
            n,
            format!("X {xs:?} and grid {gs:?}: expected [N, C, *S] (S not empty) and [N, *O, {r}]"),
        ));
    }
    let mode = attr_s(n, "mode").unwrap_or_else(|| "linear".into());
    let taps = match mode.as_str() {
        "nearest" => 1,
        "linear" | "bilinear" => 2,
        "cubic" | "bicubic" => 4,
        other => return Err(im.unsupported(n, format!("mode = {other:?}"))),
    };
    let outside = match attr_s(n, "padding_mode").unwrap_or_else(|| "zeros".into()).as_str() {
        "zeros" => Outside::Zeros,
        "border" => Outside::Border,
        "reflection" => Outside::Reflection,
        other => return Err(im.unsupported(n, format!("padding_mode = {other:?}"))),
    };
    let corners = attr_i(n, "align_corners", 0) != 0;
    let (batch, channels) = (xs[0], xs[1]);
    let q: usize = gs[1..=r].iter().product();
    let p: usize = xs[2..].iter().product();
    let flat_grid = grid.reshape(vec![batch, q, r]);
    // Per spatial axis: its taps as (index as f32, weight, inside the image).
    let mut axes: Vec<Vec<(Tensor, Option<Tensor>, Option<Tensor>)>> = Vec::with_capacity(r);
    for a in 0..r {
        let len = xs[2 + a] as f32;
        let coord = flat_grid.slice(-1, r - 1 - a, r - a).reshape(vec![batch, q]);
        let mut c = if corners {
            (coord + 1.0) * (0.5 * (len - 1.0))
        } else {
            ((coord + 1.0) * len - 1.0) * 0.5
        };
        if taps == 1 {
            c = round_half_even(&c);
        }
        let (lo, hi) = if corners { (0.0, len - 1.0) } else { (-0.5, len - 0.5) };
        // Only a coordinate outside [lo, hi] moves (inside, cubic's outer taps still read the
        // border pixels through their own clamp).
        c = match outside {
            Outside::Zeros => c,
            Outside::Border => {
                let out = c.less_than(lo) + c.graph().constant(hi).less_than(&c);
                out.select(c.maximum(0.0).minimum(len - 1.0), &c)
            }
            Outside::Reflection => reflect(&c, lo, hi),
        };
        let base = if taps == 1 { trunc(&c) } else { floor(&c) };
        let t = &c - &base;
        let weights: Vec<Option<Tensor>> = match taps {
            1 => vec![None],
            2 => vec![Some(1.0 - &t), Some(t.clone())],
            _ => {
                let a = -0.75f32;
                let far = |d: Tensor| ((&d * a - 5.0 * a) * &d + 8.0 * a) * &d - 4.0 * a;
                let near = |d: Tensor| ((&d * (a + 2.0)) - (a + 3.0)) * &d * &d + 1.0;
                vec![
                    Some(far(&t + 1.0)),
                    Some(near(t.clone())),
                    Some(near(1.0 - &t)),
                    Some(far(2.0 - &t)),
                ]
            }
        };
        let first = if taps == 4 { -1.0 } else { 0.0 };
        let mut per_axis = Vec::with_capacity(taps);
        for (k, w) in weights.into_iter().enumerate() {
            let i = &base + (first + k as f32);
            let (index, inside) = match outside {
                Outside::Zeros => {
                    let inside =
                        i.less_than(0.0).select(0.0, 1.0) * i.less_than(len).select(1.0, 0.0);
                    (i.maximum(0.0).minimum(len - 1.0), Some(inside))
                }
                Outside::Border => (i.maximum(0.0).minimum(len - 1.0), None),
                Outside::Reflection => {
                    (trunc(&reflect(&i, lo, hi)).maximum(0.0).minimum(len - 1.0), None)
                }
            };
            per_axis.push((index, w, inside));
        }
        axes.push(per_axis);
    }
    let data = x.reshape(vec![batch, channels, p]);
    let mut sum: Option<Tensor> = None;
    let combos: usize = axes.iter().map(Vec::len).product();
    for combo in 0..combos {
        let (mut flat, mut weight, mut inside): (Option<Tensor>, Option<Tensor>, Option<Tensor>) =
            (None, None, None);
        let mut rest = combo;
        let mut stride = p;
        for (a, per_axis) in axes.iter().enumerate() {
            let (index, w, ins) = &per_axis[rest % per_axis.len()];
            rest /= per_axis.len();
            stride /= xs[2 + a];
            let term = index * stride as f32;
            flat = Some(match flat {
                None => term,
                Some(f) => f + term,
            });
            for (acc, v) in [(&mut weight, w), (&mut inside, ins)] {
                if let Some(v) = v {
                    *acc = Some(match acc.take() {
                        None => v.clone(),
                        Some(prev) => prev * v,
                    });
                }
            }
        }
        let Some(flat) = flat else { continue };
        let indices = flat.unsqueeze(1).expand(vec![batch, channels, q]).cast(DType::I64);
        let mut picked = data.gather_elements(2, &indices);
        if let Some(inside) = inside {
            picked = inside.unsqueeze(1).select(&picked, 0.0);
        }
        if let Some(w) = weight {
            picked = picked * w.unsqueeze(1);
        }
        sum = Some(match sum {
            None => picked,
            Some(s) => s + picked,
        });
    }
    let mut shape = vec![batch, channels];
    shape.extend(&gs[1..=r]);
    match sum {
        Some(s) => one(s.reshape(shape)),
        None => Err(im.malformed(n, "no taps")),
    }
}
