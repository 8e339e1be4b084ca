//! Elementwise operators: arithmetic, activations, comparisons, `Where`, `Clip`, `Cast`. Each
//! becomes DSL calls over the op table's primitives (a `LeakyRelu` is a `less_than` and a
//! `select`), broadcast NumPy-style. The integer bit operators' handlers are in
//! [`super::bitwise`].

use lumen_compiler::{DType, ElemOp, Tensor, UnaryOp};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Handler, Importer, Value, attr, attr_f, attr_i, one};
use crate::proto::{NodeProto, data_type};

/// The elementwise operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("Add", arithmetic),
    ("Sub", arithmetic),
    ("Mul", arithmetic),
    ("Div", arithmetic),
    ("Pow", pow),
    ("Sqrt", sqrt),
    ("Reciprocal", reciprocal),
    ("Exp", exp),
    ("Log", log),
    ("Tanh", tanh),
    ("Erf", erf),
    ("Relu", relu),
    ("Sigmoid", sigmoid),
    ("Neg", neg),
    ("Abs", abs),
    ("Identity", identity),
    ("Dropout", dropout),
    ("LeakyRelu", leaky_relu),
    ("Gelu", gelu),
    ("Where", where_),
    ("Equal", equal),
    ("Not", not),
    ("Less", less),
    ("Greater", greater),
    ("Max", max_min),
    ("Min", max_min),
    ("Clip", clip),
    ("Cast", cast),
    ("Range", range),
    ("HannWindow", window),
    ("HammingWindow", window),
    ("BlackmanWindow", window),
    ("HardSigmoid", hard_sigmoid),
    ("HardSwish", hard_swish),
    ("PRelu", prelu),
    ("Elu", elu),
    ("Selu", selu),
    ("Celu", celu),
    ("Softplus", softplus),
    ("Softsign", softsign),
    ("ThresholdedRelu", thresholded_relu),
    ("Mish", mish),
    ("Sum", sum_mean),
    ("Mean", sum_mean),
    ("GreaterOrEqual", ordered),
    ("LessOrEqual", ordered),
    ("And", logical),
    ("Or", logical),
    ("Xor", logical),
    ("IsNaN", is_nan),
    ("IsInf", is_inf),
    ("Sign", sign),
    ("CastLike", cast_like),
    ("Floor", rounding),
    ("Ceil", rounding),
    ("Round", rounding),
    ("Mod", modulo),
    ("Swish", swish),
    ("Shrink", shrink),
    ("Sin", math),
    ("Cos", math),
    ("Tan", math),
    ("Asin", math),
    ("Acos", math),
    ("Atan", math),
    ("Sinh", math),
    ("Cosh", math),
    ("Asinh", math),
    ("Acosh", math),
    ("Atanh", math),
    ("BitwiseAnd", super::bitwise::bitwise),
    ("BitwiseOr", super::bitwise::bitwise),
    ("BitwiseXor", super::bitwise::bitwise),
    ("BitwiseNot", super::bitwise::bitwise),
    ("BitShift", super::bitwise::bit_shift),
];

/// `Add`, `Sub`, `Mul`, `Div`: broadcasting binary arithmetic. `x * HardSigmoid(x)` with
/// PyTorch's constants (how opsets before 14 write hard swish) is the `hardswish` primitive.
fn arithmetic(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = n.op_type.as_str();
    if op == "Mul"
        && let [a, b] = n.input.as_slice()
    {
        let swish_of = |h: &String, x: &String| im.hard_sigmoids.get(h) == Some(x);
        if swish_of(b, a) || swish_of(a, b) {
            let i = if swish_of(b, a) { 0 } else { 1 };
            return one(im.f32_tensor(n, i)?.hardswish());
        }
    }
    let (a, b) = im.binary_operands(n)?;
    one(match op {
        "Add" => a + b,
        "Sub" => a - b,
        "Mul" => a * b,
        _ => a / b,
    })
}

/// `Pow`: common exponents as cheaper ops, any other as an elementwise pow.
fn pow(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let rank = x.rank().unwrap_or(0);
    // A one-element exponent of no higher rank than x: the output has x's shape.
    let e = match im.input(n, 1) {
        Some(Value::Const(c)) if c.len() == 1 && c.shape.len() <= rank => Some(c.to_f32()[0]),
        _ => None,
    };
    // The exponents models use most as cheaper ops (within an ulp of powf; sqrt
    // gives NaN for -inf where powf gives +inf); any other elementwise pow.
    one(match e {
        Some(1.0) => x,
        Some(2.0) => &x * &x,
        Some(3.0) => &x * &x * &x,
        Some(0.5) => x.sqrt(),
        Some(-1.0) => x.recip(),
        _ => {
            let y = im.f32_tensor(n, 1)?;
            x.pow(&y)
        }
    })
}

/// `Sqrt`.
fn sqrt(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.sqrt())
}

/// `Reciprocal`.
fn reciprocal(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.recip())
}

/// `Exp`.
fn exp(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.exp())
}

/// `Log`.
fn log(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.log())
}

/// `Tanh`.
fn tanh(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.tanh())
}

/// `Erf`.
fn erf(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.erf())
}

/// `Sin`, `Cos`, `Tan`, `Asin`, `Acos`, `Atan`, `Sinh`, `Cosh`, `Asinh`, `Acosh`, `Atanh`: the op
/// table's row of the same name (ONNX's name in lower case).
fn math(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let name = n.op_type.to_ascii_lowercase();
    let Some(op) = UnaryOp::ALL.into_iter().find(|op| ElemOp::Unary(*op).name() == name) else {
        return Err(im.unsupported(n, "the op table has no row of this name"));
    };
    one(im.f32_tensor(n, 0)?.apply(op))
}

/// `Relu`.
fn relu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.relu())
}

/// `Sigmoid`.
fn sigmoid(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.sigmoid())
}

/// `Neg`.
fn neg(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(-im.f32_tensor(n, 0)?)
}

/// `Abs`: `max(x, -x)`.
fn abs(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    one(x.maximum(-&x))
}

/// `Identity` and inference `Dropout`: the input itself.
fn identity(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.tensor(n, 0)?)
}

/// Inference `Dropout`: the input itself, and the optional mask all true (f32 1.0, lumen's
/// bool). Training mode is refused before the handler (the importer checks `training_mode`).
fn dropout(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    if n.output.get(1).is_none_or(|o| o.is_empty()) {
        return one(x);
    }
    let shape = x.shape().unwrap_or_default();
    let ones = Const::f32(shape.clone(), vec![1.0; shape.iter().product()]);
    let mask = im.const_weight(n, "mask", ones)?;
    Ok(vec![x, mask])
}

/// `HannWindow`, `HammingWindow`, `BlackmanWindow` (opset 17): the window of `size` points
/// (known at import), periodic (`N = size`, the default) or symmetric (`N = size - 1`), as
/// ONNX defines them: Hann `0.5 - 0.5 cos(2 pi n / N)`, Hamming `25/46 - 21/46 cos(2 pi n /
/// N)`, Blackman `0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)`, computed in f64.
fn window(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let size = match im.ints(n, 0)?.as_deref() {
        Some(&[v]) if v >= 0 => v as usize,
        Some(v) => return Err(im.malformed(n, format!("size = {v:?} (one count, at least 0)"))),
        None => return Err(im.malformed(n, "no size input")),
    };
    im.foldable(n, &[size])?;
    if attr_i(n, "output_datatype", data_type::FLOAT as i64) != data_type::FLOAT as i64 {
        return Err(im.unsupported(n, "output_datatype other than float"));
    }
    let period = if attr_i(n, "periodic", 1) != 0 { size } else { size.saturating_sub(1) } as f64;
    let tau = std::f64::consts::TAU;
    let values: Vec<f32> = (0..size)
        .map(|i| {
            let x = tau * i as f64 / period;
            let w = match n.op_type.as_str() {
                "HannWindow" => 0.5 - 0.5 * x.cos(),
                "HammingWindow" => 25.0 / 46.0 - 21.0 / 46.0 * x.cos(),
                _ => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
            };
            w as f32
        })
        .collect();
    one(im.const_weight(n, "window", Const::f32(vec![size], values))?)
}

/// `LeakyRelu`: `x < 0 ? alpha x : x`.
fn leaky_relu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let alpha = attr_f(n, "alpha", 0.01);
    one(x.less_than(0.0).select(&x * alpha, &x))
}

/// `Gelu`: the erf form, or the tanh form for `approximate = "tanh"`.
fn gelu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let approximate = attr(n, "approximate").map(|a| a.s.clone()).unwrap_or_default();
    match approximate.as_slice() {
        b"" | b"none" => one(x.gelu_erf()),
        b"tanh" => one(x.gelu()),
        other => {
            Err(im.unsupported(n, format!("approximate = {:?}", String::from_utf8_lossy(other))))
        }
    }
}

/// `Where`: `select` on a condition of 0.0/1.0.
fn where_(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let cond = im.f32_tensor(n, 0)?;
    let (x, y) = (im.f32_tensor(n, 1)?, im.f32_tensor(n, 2)?);
    one(cond.select(&x, &y))
}

/// `Equal`: 1.0 or 0.0.
fn equal(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (a, b) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    one(a.equal(&b))
}

/// `Not`: `x == 0`.
fn not(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    not_bool(im, n)?;
    let x = im.f32_tensor(n, 0)?;
    one(x.equal(0.0))
}

/// An error unless `Not`'s input may be a boolean: one known to be another type (a float or
/// integer graph input or constant, an integer tensor) is an invalid model, which ONNX
/// Runtime refuses at load. Also checked when `Not` folds.
pub(crate) fn not_bool(im: &Importer, n: &NodeProto) -> Result<(), OnnxError> {
    match im.known_type(n, 0) {
        Some(t) if t != "bool" => Err(im.malformed(
            n,
            format!(
                "input 0 (`{}`) is {t}; Not takes a bool tensor (ONNX Runtime refuses the model)",
                n.input[0]
            ),
        )),
        _ => Ok(()),
    }
}

/// `Less`: 1.0 or 0.0.
fn less(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (a, b) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    one(a.less_than(&b))
}

/// `Greater`: `b < a`.
fn greater(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (a, b) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    one(b.less_than(&a))
}

/// `Max`, `Min`: variadic, broadcasting.
fn max_min(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = n.op_type.as_str();
    let mut acc = im.f32_tensor(n, 0)?;
    for i in 1..n.input.len() {
        let b = im.f32_tensor(n, i)?;
        acc = if op == "Max" { acc.maximum(&b) } else { acc.minimum(&b) };
    }
    one(acc)
}

/// `Clip`: `min`/`max` inputs as `maximum`/`minimum`.
fn clip(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let mut x = im.f32_tensor(n, 0)?;
    if im.opset < 11 {
        // Bounds as attributes; ReLU6 (0, 6) is a primitive.
        let (lo, hi) = (attr_f(n, "min", f32::MIN), attr_f(n, "max", f32::MAX));
        if (lo, hi) == (0.0, 6.0) {
            return one(x.relu6());
        }
        if lo > f32::MIN {
            x = x.maximum(lo);
        }
        if hi < f32::MAX {
            x = x.minimum(hi);
        }
        return one(x);
    }
    let bound = |i: usize| im.const_input(n, i).filter(|c| c.len() == 1).map(|c| c.to_f32()[0]);
    if (bound(1), bound(2)) == (Some(0.0), Some(6.0)) {
        return one(x.relu6());
    }
    if im.input(n, 1).is_some() {
        x = x.maximum(im.f32_tensor(n, 1)?);
    }
    if im.input(n, 2).is_some() {
        x = x.minimum(im.f32_tensor(n, 2)?);
    }
    one(x)
}

/// `Cast` of a computed tensor: to float from an integer input (its f32 twin), to bool.
fn cast(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let to = attr_i(n, "to", i64::from(data_type::FLOAT)) as i32;
    cast_to(im, n, to)
}

/// `CastLike`: a `Cast` to the element type of input 1 (a computed tensor's type; a constant
/// is float or int64; a value lumen knows to be boolean is bool).
fn cast_like(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let boolean = n.input.get(1).is_some_and(|i| im.bools.contains(i));
    let to = match im.input(n, 1) {
        None => return Err(im.malformed(n, "no target_type input")),
        Some(_) if boolean => data_type::BOOL,
        Some(Value::Const(c)) => {
            if c.is_float() {
                data_type::FLOAT
            } else {
                data_type::INT64
            }
        }
        Some(Value::Tensor(t)) => match t.dtype() {
            Some(DType::I64) => data_type::INT64,
            Some(DType::I32) => data_type::INT32,
            _ => data_type::FLOAT,
        },
    };
    cast_to(im, n, to)
}

/// Input 0 cast to ONNX element type `to` (lumen computes f32, i32, i64, and bool as f32
/// 0.0/1.0; any other target is refused, naming it).
fn cast_to(im: &mut Importer, n: &NodeProto, to: i32) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.tensor(n, 0)?;
    match (to, x.dtype()) {
        (data_type::FLOAT, Some(DType::F32)) => one(x),
        (data_type::FLOAT, Some(DType::I64 | DType::I32)) => one(im.f32_tensor(n, 0)?),
        (data_type::INT64, Some(DType::I64)) | (data_type::INT32, Some(DType::I32)) => one(x),
        // Booleans are f32 0.0 and 1.0 in lumen: a comparison's result already is
        // one; any other value is made one by `x != 0`.
        (data_type::BOOL, Some(_)) => {
            let x = im.f32_tensor(n, 0)?;
            if n.input.first().is_some_and(|i| im.bools.contains(i)) {
                one(x)
            } else {
                one(x.equal(0.0) * -1.0 + 1.0)
            }
        }
        // A computed float to an integer type (a label), or between integer types: the
        // program converts (truncating toward zero).
        (data_type::INT64, Some(_)) => one(x.cast(DType::I64)),
        (data_type::INT32, Some(_)) => one(x.cast(DType::I32)),
        (to, Some(from)) => Err(im.unsupported(
            n,
            format!(
                "to = {}: a cast of a computed {from} tensor to that type (lumen computes f32, \
                 i32, i64, and bool as f32 0.0/1.0)",
                data_type::name(to)
            ),
        )),
        _ => one(x),
    }
}

/// `Range` whose bounds are graph inputs: evaluated from their given values (the program
/// specialised to them), else refused (static shapes).
fn range(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    // Bounds given as graph inputs (a constant Range never reaches here: it is folded).
    let given: Option<Vec<Option<Value>>> =
        (0..3).map(|i| im.needed_input(n, i).map(|c| Some(Value::Const(c)))).collect();
    let folded = match given {
        Some(inputs) => im.fold(n, &inputs)?,
        None => None,
    };
    match folded.and_then(|mut v| v.drain(..).next()) {
        Some(c) => {
            let int = !c.is_float();
            let t = im.const_weight(n, "range", c)?;
            // Given values are read as i64; the output keeps the bounds' integer type.
            let i32_bounds =
                matches!(im.input(n, 0), Some(Value::Tensor(b)) if b.dtype() == Some(DType::I32));
            one(if int && i32_bounds { t.cast(DType::I32) } else { t })
        }
        None => Err(im.unsupported(
            n,
            format!(
                "start, limit and delta (`{}`) must be known at import time: lumen compiles static \
                 shapes (constants, or graph inputs whose values are given, as `lumen run \
                 --inputs` does)",
                n.input.join("`, `")
            ),
        )),
    }
}

/// `HardSigmoid`: `max(0, min(1, alpha x + beta))` (alpha 0.2, beta 0.5 by default). One with
/// PyTorch's constants (1/6, 0.5) is remembered: `x * HardSigmoid(x)` is hard swish.
fn hard_sigmoid(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let (alpha, beta) = (attr_f(n, "alpha", 0.2), attr_f(n, "beta", 0.5));
    if (alpha - 1.0 / 6.0).abs() < 1e-6
        && beta == 0.5
        && let (Some(out), Some(input)) = (n.output.first(), n.input.first())
    {
        im.hard_sigmoids.insert(out.clone(), input.clone());
    }
    one((x * alpha + beta).maximum(0.0).minimum(1.0))
}

/// `HardSwish`: the primitive.
fn hard_swish(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(im.f32_tensor(n, 0)?.hardswish())
}

/// `PRelu`: `x < 0 ? slope x : x`, the slope broadcast to `x` (one per channel, `[C, 1, 1]`).
fn prelu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, slope) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    one(x.less_than(0.0).select(&x * slope, &x))
}

/// `alpha (e^x - 1)` for the negative side of the exponential units.
fn exp_minus_one(x: &Tensor, alpha: f32) -> Tensor {
    (x.exp() - 1.0) * alpha
}

/// `Elu`: `x < 0 ? alpha (e^x - 1) : x`.
fn elu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let alpha = attr_f(n, "alpha", 1.0);
    one(x.less_than(0.0).select(exp_minus_one(&x, alpha), &x))
}

/// `Selu`: `gamma (x <= 0 ? alpha (e^x - 1) : x)`.
fn selu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let alpha = attr_f(n, "alpha", 1.673_263_2);
    let gamma = attr_f(n, "gamma", 1.050_701);
    one(x.less_than(0.0).select(exp_minus_one(&x, alpha), &x) * gamma)
}

/// `Celu`: `max(0, x) + min(0, alpha (e^(x / alpha) - 1))`.
fn celu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let alpha = attr_f(n, "alpha", 1.0);
    one(x.relu() + exp_minus_one(&(&x * (1.0 / alpha)), alpha).minimum(0.0))
}

/// `log(1 + e^x)` in the form that never overflows: `max(x, 0) + log(1 + e^-|x|)`.
fn softplus_of(x: &Tensor) -> Tensor {
    x.relu() + ((-x.maximum(-x)).exp() + 1.0).log()
}

/// `Softplus`: `log(1 + e^x)`.
fn softplus(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    one(softplus_of(&im.f32_tensor(n, 0)?))
}

/// `Softsign`: `x / (1 + |x|)`.
fn softsign(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    one(&x / (x.maximum(-&x) + 1.0))
}

/// `ThresholdedRelu`: `x > alpha ? x : 0`.
fn thresholded_relu(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let alpha = attr_f(n, "alpha", 1.0);
    let zero = im.cx.constant(0.0);
    one(x.graph().constant(alpha).less_than(&x).select(&x, zero))
}

/// `Mish`: `x tanh(softplus(x))`.
fn mish(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    one(&x * softplus_of(&x).tanh())
}

/// `Sum`, `Mean`: variadic, broadcasting.
fn sum_mean(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let mut acc = im.f32_tensor(n, 0)?;
    for i in 1..n.input.len() {
        acc = acc + im.f32_tensor(n, i)?;
    }
    if n.op_type == "Mean" && n.input.len() > 1 {
        acc = acc * (1.0 / n.input.len() as f32);
    }
    one(acc)
}

/// `GreaterOrEqual`, `LessOrEqual`: the strict comparison plus equality (0 for NaN).
fn ordered(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (a, b) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    let strict = if n.op_type == "GreaterOrEqual" { b.less_than(&a) } else { a.less_than(&b) };
    one(strict + a.equal(&b))
}

/// `And`, `Or`, `Xor` on booleans (lumen's 0.0 and 1.0): product, maximum, difference squared.
fn logical(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (a, b) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    one(match n.op_type.as_str() {
        "And" => a * b,
        "Or" => a.maximum(b),
        _ => {
            let d = a - b;
            &d * &d
        }
    })
}

/// `IsNaN`: `x != x`.
fn is_nan(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    one(x.equal(&x) * -1.0 + 1.0)
}

/// `IsInf`: `x == +inf` and/or `x == -inf` (both by default).
fn is_inf(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let (pos, neg) = (attr_i(n, "detect_positive", 1) != 0, attr_i(n, "detect_negative", 1) != 0);
    one(match (pos, neg) {
        (true, true) => x.equal(f32::INFINITY) + x.equal(f32::NEG_INFINITY),
        (true, false) => x.equal(f32::INFINITY),
        (false, true) => x.equal(f32::NEG_INFINITY),
        // Detects nothing: zeros (x == x is 0 or 1 for every x, NaN included).
        (false, false) => x.equal(&x) * 0.0,
    })
}

/// `Sign`: `(0 < x) - (x < 0)` (0 for NaN).
fn sign(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let zero = x.graph().constant(0.0);
    one(zero.less_than(&x) - x.less_than(0.0))
}

/// `x` rounded toward zero: through an i32 cast where `|x| < 2^23` (every f32 from 2^23 on is
/// an integer already, and stays as it is, infinities and NaN included).
pub(crate) fn trunc(x: &Tensor) -> Tensor {
    let t = x.cast(DType::I32).cast(DType::F32);
    x.maximum(-x).less_than(8_388_608.0).select(&t, x)
}

/// `floor(x)`: the truncation, less one where it rounded a negative value up.
pub(crate) fn floor(x: &Tensor) -> Tensor {
    let t = trunc(x);
    &t - x.less_than(&t)
}

/// `Floor`, `Ceil`, `Round` (half to even, as ONNX and NumPy round), from the truncation.
fn rounding(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    one(match n.op_type.as_str() {
        "Floor" => floor(&x),
        "Ceil" => {
            let t = trunc(&x);
            &t + t.less_than(&x)
        }
        _ => round_half_even(&x),
    })
}

/// `x` rounded to the nearest integer, halves to the even one (ONNX's `Round`, NumPy's
/// `rint`): floor(x), plus one above a half, plus one at a half when floor(x) is odd.
pub(crate) fn round_half_even(x: &Tensor) -> Tensor {
    let f = floor(x);
    let d = x - &f;
    let half = &f * 0.5;
    let odd = (&half - floor(&half)) * 2.0;
    let up = x.graph().constant(0.5).less_than(&d) + d.equal(0.5) * odd;
    f + up
}

/// `Mod`: `fmod = 1` is C's fmod (`x - y trunc(x / y)`, the dividend's sign); `fmod = 0`
/// Python's (`x - y floor(x / y)`, the divisor's sign). Integers are computed in f32 (exact
/// below 2^24) and cast back; a zero divisor gives NaN (0 once cast to an integer).
fn modulo(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, y) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    let q = &x / &y;
    let whole = if attr_i(n, "fmod", 0) != 0 { trunc(&q) } else { floor(&q) };
    one(&x - &y * whole)
}

/// `Swish`: `x sigmoid(alpha x)` (alpha 1: the silu primitive).
fn swish(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let alpha = attr_f(n, "alpha", 1.0);
    one(if alpha == 1.0 { x.silu() } else { &x * (&x * alpha).sigmoid() })
}

/// `Shrink`: `x - bias` above `lambd`, `x + bias` below `-lambd`, 0 between.
fn shrink(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let (lambd, bias) = (attr_f(n, "lambd", 0.5), attr_f(n, "bias", 0.0));
    let above = x.graph().constant(lambd).less_than(&x);
    let below = x.less_than(-lambd);
    one(above.select(&x - bias, below.select(&x + bias, 0.0)))
}
