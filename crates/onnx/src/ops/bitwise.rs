//! The integer bit operators (`BitwiseAnd`, `BitwiseOr`, `BitwiseXor`, `BitwiseNot`,
//! `BitShift`), rows of the elementwise family: each one integer op of lumen's exact integer
//! op table ([`IntOp`]) on int32 or int64 tensors, computed at every value of the type, bit for
//! bit (not through f32 as the integer arithmetic is).

use lumen_compiler::{DType, IntOp, Tensor};

use crate::constant::IntType;
use crate::error::OnnxError;
use crate::importer::{Importer, Value, attr_s, one};
use crate::proto::NodeProto;

/// The integer op of bit operator node `n` (`BitwiseAnd`, `BitwiseOr`, `BitwiseXor`,
/// `BitwiseNot`, or `BitShift` by its required `direction`, `LEFT` or `RIGHT`), also what
/// constant folding computes. The `Bitwise*` operators exist from opset 18 on.
///
/// # Errors
/// [`OnnxError::Malformed`] for a `Bitwise*` node in a model of an older opset (ONNX Runtime
/// refuses such a model) and for a missing or unknown `direction`.
pub(crate) fn bit_op(im: &Importer, n: &NodeProto) -> Result<IntOp, OnnxError> {
    let op = match n.op_type.as_str() {
        "BitwiseAnd" => IntOp::BitAnd,
        "BitwiseOr" => IntOp::BitOr,
        "BitwiseXor" => IntOp::BitXor,
        "BitwiseNot" => IntOp::BitNot,
        _ => {
            return match attr_s(n, "direction").as_deref() {
                Some("LEFT") => Ok(IntOp::ShiftLeft),
                Some("RIGHT") => Ok(IntOp::ShiftRight),
                Some(other) => Err(im.malformed(
                    n,
                    format!("attribute direction is {other:?}; ONNX allows \"LEFT\" or \"RIGHT\""),
                )),
                None => Err(im.malformed(n, "attribute direction (LEFT or RIGHT) is missing")),
            };
        }
    };
    if im.opset < 18 {
        return Err(im.malformed(
            n,
            format!(
                "{} exists from opset 18 on; the model's opset is {} (ONNX Runtime refuses the \
                 model)",
                n.op_type, im.opset
            ),
        ));
    }
    Ok(op)
}

/// `BitwiseAnd`, `BitwiseOr`, `BitwiseXor`, `BitwiseNot` (opset 18 on).
pub(super) fn bitwise(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = bit_op(im, n)?;
    int_op(im, n, op)
}

/// `BitShift`: `direction` `LEFT` or `RIGHT` (required); a signed right shift is arithmetic, a
/// shift outside `0..width` gives 0 (or -1 shifting a negative value right), opset 28's rule.
pub(super) fn bit_shift(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let op = bit_op(im, n)?;
    int_op(im, n, op)
}

/// `op` over the node's first `op.arity()` inputs, all of one integer type: that of the first
/// input the program computes (a graph input or a computed tensor; int32 or int64; a node of
/// constants only is folded at import, in their type). A constant (an int64 weight once in
/// the program) is cast to that type; an input of another type (a float, a boolean, an int32
/// beside an int64 tensor) is refused, naming it.
fn int_op(im: &mut Importer, n: &NodeProto, op: IntOp) -> Result<Vec<Tensor>, OnnxError> {
    let count = op.arity();
    if n.input.len() < count {
        return Err(im.malformed(n, format!("{} needs {count} inputs", n.op_type)));
    }
    let computed = |im: &Importer, i: usize| match im.input(n, i) {
        Some(Value::Tensor(t)) => t.dtype(),
        _ => None,
    };
    let dtype = (0..count).find_map(|i| computed(im, i)).unwrap_or(DType::I64);
    let mut operands = Vec::with_capacity(count);
    for i in 0..count {
        let constant = matches!(
            im.input(n, i),
            Some(Value::Const(c)) if !c.is_float() && c.int != IntType::Bool
        );
        let t = im.tensor(n, i)?;
        let got = t.dtype();
        let t = match got {
            Some(d) if d == dtype && IntOp::takes(d) => t,
            // An integer constant (int64 at import) in the computed input's type.
            Some(DType::I64) if constant && IntOp::takes(dtype) => t.cast(dtype),
            _ => {
                let bool_constant =
                    matches!(im.input(n, i), Some(Value::Const(c)) if c.int == IntType::Bool);
                let what = if im.bools.contains(&n.input[i]) || bool_constant {
                    "a boolean".to_string()
                } else {
                    got.map_or_else(|| "not a tensor".to_string(), |d| d.to_string())
                };
                return Err(im.unsupported(
                    n,
                    format!(
                        "input {i} (`{}`) is {what}; lumen computes {} on int32 or int64 \
                         inputs of one type",
                        n.input[i], n.op_type
                    ),
                ));
            }
        };
        operands.push(t);
    }
    let (first, rest) = operands.split_first().ok_or_else(|| im.malformed(n, "no inputs"))?;
    let rest: Vec<&Tensor> = rest.iter().collect();
    one(first.int_op(op, &rest))
}
