//! Constant folding: a node whose inputs are all known at import time (and `Shape` or `Size`
//! of anything) is evaluated here, so shape arithmetic and constant subgraphs never reach the
//! program. Movement folds through the same shape rules as computed tensors
//! ([`Importer::movement`]); float math is lumen's own, so a folded value is what the runtime
//! would have computed.

use lumen_compiler::view::View;
use lumen_compiler::{DType, IntOp};

use crate::constant::{Const, Data, IntType};
use crate::error::OnnxError;
use crate::importer::{Importer, Value, attr, attr_i, attr_ints, axis, node_name, read_tensor};
use crate::proto::{NodeProto, data_type};

impl Importer {
    /// Folds a node whose inputs are all known (and `Shape` of anything), or `None` when the
    /// op has no folding here (it is then computed by the program).
    pub(crate) fn fold(
        &self,
        n: &NodeProto,
        inputs: &[Option<Value>],
    ) -> Result<Option<Vec<Const>>, OnnxError> {
        let c = |i: usize| -> Option<&Const> {
            match inputs.get(i) {
                Some(Some(Value::Const(c))) => Some(c),
                _ => None,
            }
        };
        let need =
            |i: usize| c(i).ok_or_else(|| self.malformed(n, format!("input {i} is missing")));
        // The shape of input 0, known or computed (what Shape and Size read).
        let first_shape = || match inputs.first() {
            Some(Some(v)) => Ok(self.shape_of(v)),
            _ => Err(self.malformed(n, "no input")),
        };
        let bin = |ff: fn(f32, f32) -> f32,
                   fi: fn(i64, i64) -> i64|
         -> Result<Option<Vec<Const>>, OnnxError> {
            let (a, b) = (need(0)?, need(1)?);
            if let Some(shape) = lumen_compiler::view::broadcast_shapes(&a.shape, &b.shape) {
                self.foldable(n, &shape)?;
            }
            let out = a.zip(b, ff, fi).ok_or_else(|| {
                self.malformed(
                    n,
                    format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape),
                )
            })?;
            Ok(Some(vec![out]))
        };
        let un = |ff: fn(f32) -> f32| -> Result<Option<Vec<Const>>, OnnxError> {
            Ok(Some(vec![need(0)?.as_float().map(ff, |x| x)]))
        };
        match n.op_type.as_str() {
            "Constant" => {
                let value = if let Some(a) = attr(n, "value") {
                    let t =
                        a.t.as_ref().ok_or_else(|| self.malformed(n, "value is not a tensor"))?;
                    read_tensor(t, &node_name(n))?
                } else if let Some(a) = attr(n, "value_float") {
                    Const::f32(vec![], vec![a.f])
                } else if let Some(a) = attr(n, "value_floats") {
                    Const::f32(vec![a.floats.len()], a.floats.clone())
                } else if let Some(a) = attr(n, "value_int") {
                    Const::i64(vec![], vec![a.i])
                } else if let Some(a) = attr(n, "value_ints") {
                    Const::i64(vec![a.ints.len()], a.ints.clone())
                } else {
                    return Err(self.unsupported(n, "only tensor, float(s) and int(s) values"));
                };
                Ok(Some(vec![value]))
            }
            "Identity" => Ok(Some(vec![need(0)?.clone()])),
            // Sizes from the `split` input (opset 13 on) or attribute, else equal parts (the
            // last one shorter, as `num_outputs` asks from opset 18).
            "Split" => {
                let x = need(0)?;
                let a = axis(attr_i(n, "axis", 0), x.shape.len())
                    .ok_or_else(|| self.malformed(n, "axis out of range"))?;
                let len = x.shape[a];
                let parts = n.output.len().max(1);
                let sizes: Vec<usize> =
                    match c(1).map(Const::to_i64).or_else(|| attr_ints(n, "split")) {
                        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
                        None => {
                            let each = len.div_ceil(parts);
                            (0..parts).map(|i| each.min(len.saturating_sub(i * each))).collect()
                        }
                    };
                if sizes.len() != parts || sizes.iter().sum::<usize>() != len {
                    return Err(self.malformed(n, format!("split {sizes:?} of an axis of {len}")));
                }
                let whole = View::contiguous(&x.shape);
                let mut start = 0;
                let mut out = Vec::with_capacity(parts);
                for size in sizes {
                    out.push(x.through(&whole.slice(a, start, start + size)));
                    start += size;
                }
                Ok(Some(out))
            }
            // Inference: the optional mask is all true.
            "Dropout" => {
                let x = need(0)?.clone();
                let mask = Const::i64(x.shape.clone(), vec![1; x.len()]);
                Ok(Some(if n.output.len() > 1 { vec![x, mask] } else { vec![x] }))
            }
            "Size" => {
                let count: usize = first_shape()?.iter().product();
                Ok(Some(vec![Const::i64(vec![], vec![count as i64])]))
            }
            // fmod = 1: the sign of the dividend (C's fmod); 0: of the divisor (Python's).
            "Mod" if attr_i(n, "fmod", 0) != 0 => {
                bin(|x, y| x % y, |x, y| x.checked_rem(y).unwrap_or(0))
            }
            "Mod" => bin(
                |x, y| x - y * (x / y).floor(),
                |x, y| {
                    x.checked_rem(y)
                        .map_or(0, |r| if r != 0 && (r < 0) != (y < 0) { r + y } else { r })
                },
            ),
            "ReduceProd" => {
                // Shape arithmetic (a Shape's elements multiplied): one axis at most.
                let x = need(0)?;
                if x.shape.len() > 1 {
                    return Ok(None);
                }
                let keep = attr_i(n, "keepdims", 1) != 0;
                let shape = if keep { vec![1; x.shape.len()] } else { Vec::new() };
                Ok(Some(vec![if x.is_float() {
                    Const::f32(shape, vec![x.to_f32().iter().product()])
                } else {
                    let product = x.to_i64().iter().fold(1i64, |a, &b| a.wrapping_mul(b));
                    Const::ints(shape, vec![product], x.int)
                }]))
            }
            "Trilu" => {
                // A constant mask (torch.triu/tril of ones): keep j - i >= k (upper) or <= k.
                let x = need(0)?;
                let r = x.shape.len();
                if r < 2 {
                    return Err(self.malformed(n, "input of rank < 2"));
                }
                let k = match c(1) {
                    Some(k) => k.to_i64().first().copied().unwrap_or(0),
                    None => 0,
                };
                let upper = attr_i(n, "upper", 1) != 0;
                let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
                let keep = |e: usize| {
                    let (i, j) = ((e / cols % rows.max(1)) as i64, (e % cols.max(1)) as i64);
                    if upper { j - i >= k } else { j - i <= k }
                };
                Ok(Some(vec![match &x.data {
                    Data::F32(v) => Const::f32(
                        x.shape.clone(),
                        v.iter().enumerate().map(|(e, &a)| if keep(e) { a } else { 0.0 }).collect(),
                    ),
                    Data::I64(v) => Const::ints(
                        x.shape.clone(),
                        v.iter().enumerate().map(|(e, &a)| if keep(e) { a } else { 0 }).collect(),
                        x.int,
                    ),
                }]))
            }
            "Shape" => {
                let shape: Vec<i64> = first_shape()?.iter().map(|&d| d as i64).collect();
                let r = shape.len() as i64;
                let clamp = |a: i64| (if a < 0 { a + r } else { a }).clamp(0, r) as usize;
                let (s, e) = (clamp(attr_i(n, "start", 0)), clamp(attr_i(n, "end", r)));
                let dims = if s < e { shape[s..e].to_vec() } else { Vec::new() };
                Ok(Some(vec![Const::i64(vec![dims.len()], dims)]))
            }
            "ConstantOfShape" => {
                let shape: Vec<usize> =
                    need(0)?.to_i64().iter().map(|&d| d.max(0) as usize).collect();
                self.foldable(n, &shape)?;
                let count: usize = shape.iter().product();
                let value = match attr(n, "value").and_then(|a| a.t.as_ref()) {
                    Some(t) => read_tensor(t, &node_name(n))?,
                    None => Const::f32(vec![1], vec![0.0]),
                };
                Ok(Some(vec![match value.data {
                    Data::F32(v) => {
                        Const::f32(shape, vec![v.first().copied().unwrap_or(0.0); count])
                    }
                    Data::I64(v) => {
                        Const::ints(shape, vec![v.first().copied().unwrap_or(0); count], value.int)
                    }
                }]))
            }
            "Range" => {
                let (s, l, d) = (need(0)?, need(1)?, need(2)?);
                if s.is_float() || l.is_float() || d.is_float() {
                    let (s, l, d) = (s.to_f32()[0], l.to_f32()[0], d.to_f32()[0]);
                    if d == 0.0 {
                        return Err(self.malformed(n, "delta is 0"));
                    }
                    let count = ((l - s) / d).ceil().max(0.0) as usize;
                    self.foldable(n, &[count])?;
                    Ok(Some(vec![Const::f32(
                        vec![count],
                        (0..count).map(|i| s + i as f32 * d).collect(),
                    )]))
                } else {
                    let int = s.int;
                    let (s, l, d) = (s.to_i64()[0], l.to_i64()[0], d.to_i64()[0]);
                    if d == 0 {
                        return Err(self.malformed(n, "delta is 0"));
                    }
                    let count = (((l - s) as f64) / d as f64).ceil().max(0.0) as usize;
                    self.foldable(n, &[count])?;
                    Ok(Some(vec![Const::ints(
                        vec![count],
                        (0..count as i64).map(|i| s + i * d).collect(),
                        int,
                    )]))
                }
            }
            "Cast" => {
                let to = attr_i(n, "to", i64::from(data_type::FLOAT)) as i32;
                let x = need(0)?;
                Ok(Some(vec![match to {
                    data_type::FLOAT | data_type::DOUBLE => x.as_float(),
                    data_type::INT64 | data_type::INT32 | data_type::INT8 | data_type::UINT8 => {
                        x.as_type(IntType::of(to).unwrap_or_default())
                    }
                    // Non-zero is true (a float 0.5 included: not truncated first).
                    data_type::BOOL => x
                        .map(|v| f32::from(u8::from(v != 0.0)), |v| i64::from(v != 0))
                        .as_type(IntType::Bool),
                    other => {
                        return Err(OnnxError::DType {
                            name: node_name(n),
                            dtype: data_type::name(other),
                        });
                    }
                }]))
            }
            "Add" => bin(|a, b| a + b, |a, b| a.wrapping_add(b)),
            "Sub" => bin(|a, b| a - b, |a, b| a.wrapping_sub(b)),
            "Mul" => bin(|a, b| a * b, |a, b| a.wrapping_mul(b)),
            "Div" => {
                if !need(0)?.is_float() && !need(1)?.is_float() && need(1)?.to_i64().contains(&0) {
                    return Err(self.malformed(n, "integer division by zero"));
                }
                bin(|a, b| a / b, |a, b| a.wrapping_div(b))
            }
            "Pow" => bin(f32::powf, |a, b| a.wrapping_pow(b.clamp(0, u32::MAX as i64) as u32)),
            "Equal" => bin(|a, b| f32::from(u8::from(a == b)), |a, b| i64::from(a == b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "Less" => bin(|a, b| f32::from(u8::from(a < b)), |a, b| i64::from(a < b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "Greater" => bin(|a, b| f32::from(u8::from(a > b)), |a, b| i64::from(a > b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "GreaterOrEqual" => bin(|a, b| f32::from(u8::from(a >= b)), |a, b| i64::from(a >= b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "LessOrEqual" => bin(|a, b| f32::from(u8::from(a <= b)), |a, b| i64::from(a <= b))
                .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            // Booleans are integer constants, 0 or 1 (ONNX's bool).
            "And" => bin(
                |a, b| f32::from(u8::from(a != 0.0 && b != 0.0)),
                |a, b| i64::from(a != 0 && b != 0),
            )
            .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "Or" => bin(
                |a, b| f32::from(u8::from(a != 0.0 || b != 0.0)),
                |a, b| i64::from(a != 0 || b != 0),
            )
            .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "Xor" => bin(
                |a, b| f32::from(u8::from((a != 0.0) != (b != 0.0))),
                |a, b| i64::from((a != 0) != (b != 0)),
            )
            .map(|o| o.map(|v| v.into_iter().map(|c| c.as_type(IntType::Bool)).collect())),
            "Max" | "Min" => {
                let max = n.op_type == "Max";
                let mut acc = need(0)?.clone();
                for i in 1..inputs.len() {
                    let b = need(i)?;
                    acc = if max {
                        acc.zip(b, f32::max, i64::max)
                    } else {
                        acc.zip(b, f32::min, i64::min)
                    }
                    .ok_or_else(|| self.malformed(n, "shapes do not broadcast"))?;
                }
                Ok(Some(vec![acc]))
            }
            "Neg" => Ok(Some(vec![need(0)?.map(|x| -x, |x| x.wrapping_neg())])),
            "Abs" => Ok(Some(vec![need(0)?.map(f32::abs, i64::wrapping_abs)])),
            "Sqrt" => un(f32::sqrt),
            "Reciprocal" => un(|x| 1.0 / x),
            "Exp" => un(f32::exp),
            "Log" => un(f32::ln),
            "Floor" => un(f32::floor),
            "Ceil" => un(f32::ceil),
            "Round" => un(f32::round_ties_even),
            "Relu" => Ok(Some(vec![need(0)?.map(|x| x.max(0.0), |x| x.max(0))])),
            "Not" => {
                crate::ops::not_bool(self, n)?;
                Ok(Some(vec![need(0)?.as_type(IntType::Bool).map(|x| x, |x| i64::from(x == 0))]))
            }
            "Where" => {
                let (cond, x, y) = (need(0)?, need(1)?, need(2)?);
                let shape = lumen_compiler::view::broadcast_shapes(&cond.shape, &x.shape)
                    .and_then(|s| lumen_compiler::view::broadcast_shapes(&s, &y.shape))
                    .ok_or_else(|| self.malformed(n, "shapes do not broadcast"))?;
                self.foldable(n, &shape)?;
                let through =
                    |c: &Const| View::contiguous(&c.shape).expand(&shape).map(|v| c.through(&v));
                let (cond, x, y) = (through(cond), through(x), through(y));
                let (Some(cond), Some(x), Some(y)) = (cond, x, y) else {
                    return Err(self.malformed(n, "shapes do not broadcast"));
                };
                let pick = cond.to_i64();
                Ok(Some(vec![if x.is_float() || y.is_float() {
                    let (xv, yv) = (x.to_f32(), y.to_f32());
                    Const::f32(
                        shape,
                        pick.iter()
                            .enumerate()
                            .map(|(i, &c)| if c != 0 { xv[i] } else { yv[i] })
                            .collect(),
                    )
                } else {
                    let (xv, yv) = (x.to_i64(), y.to_i64());
                    let int = if x.int == IntType::I64 { y.int } else { x.int };
                    Const::ints(
                        shape,
                        pick.iter()
                            .enumerate()
                            .map(|(i, &c)| if c != 0 { xv[i] } else { yv[i] })
                            .collect(),
                        int,
                    )
                }]))
            }
            "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" | "BitShift" => {
                self.fold_bits(n, inputs).map(|c| Some(vec![c]))
            }
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Expand" | "Transpose" | "Slice"
            | "Concat" | "Gather" => {
                // The same shape rules as for computed tensors, on known values.
                let shapes: Vec<Vec<usize>> = inputs
                    .iter()
                    .map(|v| v.as_ref().map(|v| self.shape_of(v)).unwrap_or_default())
                    .collect();
                let x = need(0)?;
                let moved = match n.op_type.as_str() {
                    "Concat" => {
                        let rank = x.shape.len();
                        let a = axis(attr_i(n, "axis", 0), rank)
                            .ok_or_else(|| self.malformed(n, "axis out of range"))?;
                        let parts: Vec<Const> = (0..inputs.len())
                            .map(|i| need(i).cloned())
                            .collect::<Result<_, _>>()?;
                        Const::concat(&parts, a).ok_or_else(|| {
                            self.malformed(
                                n,
                                "the inputs' shapes differ outside the axis (or there are none)",
                            )
                        })?
                    }
                    "Gather" => {
                        let idx = need(1)?;
                        let rank = x.shape.len();
                        let a = axis(attr_i(n, "axis", 0), rank)
                            .ok_or_else(|| self.malformed(n, "axis out of range"))?;
                        let len = x.shape[a] as i64;
                        let mut parts = Vec::new();
                        for &i in &idx.to_i64() {
                            let i = if i < 0 { i + len } else { i };
                            if !(0..len).contains(&i) {
                                return Err(
                                    self.malformed(n, format!("index {i} outside 0..{len}"))
                                );
                            }
                            let v = View::contiguous(&x.shape).slice(a, i as usize, i as usize + 1);
                            parts.push(x.through(&v));
                        }
                        let mut shape = x.shape[..a].to_vec();
                        shape.extend(&idx.shape);
                        shape.extend(&x.shape[a + 1..]);
                        self.foldable(n, &shape)?;
                        match Const::concat(&parts, a) {
                            Some(c) => c.reshaped(shape),
                            None => match &x.data {
                                Data::F32(_) => Const::f32(shape, vec![]),
                                Data::I64(_) => Const::ints(shape, vec![], x.int),
                            },
                        }
                    }
                    "Slice" if self.slice_ranges(n, &x.shape)?.iter().any(|r| r.step < 0) => {
                        // A backward slice: the elements gathered axis by axis.
                        let mut c = x.clone();
                        for r in self.slice_ranges(n, &x.shape)? {
                            let parts: Vec<Const> = r
                                .indices()
                                .map(|i| {
                                    c.through(&View::contiguous(&c.shape).slice(r.axis, i, i + 1))
                                })
                                .collect();
                            let mut shape = c.shape.clone();
                            shape[r.axis] = r.count;
                            c = Const::concat(&parts, r.axis).unwrap_or_else(|| match &c.data {
                                Data::F32(_) => Const::f32(shape.clone(), vec![]),
                                Data::I64(_) => Const::ints(shape.clone(), vec![], c.int),
                            });
                        }
                        c
                    }
                    _ => {
                        let (view, out) = self.movement(n, &shapes)?;
                        self.foldable(n, &out)?;
                        match view {
                            Some(v) => x.through(&v),
                            None => x.clone().reshaped(out),
                        }
                    }
                };
                Ok(Some(vec![moved]))
            }
            _ => Ok(None),
        }
    }
}

impl Importer {
    /// A bit operator (`BitwiseAnd`, `BitwiseOr`, `BitwiseXor`, `BitwiseNot`, `BitShift`) of
    /// constants, in their ONNX type: int32 and int64 as lumen's integer op table computes them
    /// ([`IntOp::eval`], what the program would give), int8 and uint8 in 8 bits (a uint8 shift
    /// right is logical, `BitwiseNot` of uint8 is `255 - x`); the result keeps the type. Inputs
    /// of two types, floats and booleans are refused, naming the input.
    fn fold_bits(&self, n: &NodeProto, inputs: &[Option<Value>]) -> Result<Const, OnnxError> {
        let op = crate::ops::bit_op(self, n)?;
        let mut operands: Vec<&Const> = Vec::with_capacity(op.arity());
        for i in 0..op.arity() {
            let c = match inputs.get(i) {
                Some(Some(Value::Const(c))) => c,
                _ => return Err(self.malformed(n, format!("input {i} is missing"))),
            };
            let first = operands.first().map(|f| f.int);
            if c.is_float() || c.int == IntType::Bool || first.is_some_and(|t| t != c.int) {
                let what = if c.is_float() { "float" } else { c.int.name() };
                let beside = first.map_or(String::new(), |t| format!(" beside {}", t.name()));
                return Err(self.unsupported(
                    n,
                    format!(
                        "input {i} (`{}`) is {what}{beside}; {} takes integers of one type",
                        n.input[i], n.op_type
                    ),
                ));
            }
            operands.push(c);
        }
        let int = operands[0].int;
        let eval = |a: i64, b: i64| -> i64 {
            match int {
                IntType::I64 | IntType::I32 => op.eval(int.dtype(), a, b),
                _ => {
                    let width = i64::from(int.bits());
                    let outside = !(0..width).contains(&b);
                    let y = match op {
                        IntOp::ShiftLeft if outside => 0,
                        IntOp::ShiftLeft => ((a as u64) << b) as i64,
                        // Only a negative (signed) value fills with ones.
                        IntOp::ShiftRight if outside => -i64::from(a < 0),
                        IntOp::ShiftRight => a >> b,
                        other => other.eval(DType::I64, a, b),
                    };
                    int.wrap(y)
                }
            }
        };
        let (a, b) = match operands.as_slice() {
            [a] => (*a, *a),
            [a, b] => (*a, *b),
            _ => return Err(self.malformed(n, "no inputs")),
        };
        if let Some(shape) = lumen_compiler::view::broadcast_shapes(&a.shape, &b.shape) {
            self.foldable(n, &shape)?;
        }
        a.zip(b, |x, _| x, eval).ok_or_else(|| {
            self.malformed(n, format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape))
        })
    }
}
