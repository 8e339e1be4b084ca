//! Elementwise operators: arithmetic, activations, comparisons, `Where`, `Clip`, `Cast`. Each
//! becomes DSL calls over the op table's primitives (a `LeakyRelu` is a `less_than` and a
//! `select`), broadcast NumPy-style.

use lumen_compiler::{DType, Tensor};

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
    ("Dropout", identity),
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
];

/// `Add`, `Sub`, `Mul`, `Div`: broadcasting binary arithmetic.
fn arithmetic(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = n.op_type.as_str();
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
    let x = im.f32_tensor(n, 0)?;
    one(x.equal(0.0))
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
        (to, Some(from)) => Err(im.unsupported(
            n,
            format!(
                "a cast of a computed {from} tensor to {} (lumen casts only at import)",
                data_type::name(to)
            ),
        )),
        _ => one(x),
    }
}

/// `Range` whose bounds are not known at import: refused (static shapes).
fn range(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    Err(im.unsupported(
        n,
        "start, limit and delta must be known at import time (lumen compiles static shapes)",
    ))
}
