//! Matrix products: `MatMul` (batched, NumPy semantics) and `Gemm`.

use lumen_compiler::Tensor;

use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr_f, attr_i, one};
use crate::proto::NodeProto;

/// The linalg operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[("MatMul", matmul), ("Gemm", gemm), ("Det", det)];

/// `MatMul`: NumPy semantics, 1-D operands promoted and the added axis removed.
fn matmul(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (a, b) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    let (ra, rb) = (a.rank().unwrap_or(0), b.rank().unwrap_or(0));
    let a2 = if ra == 1 { a.unsqueeze(0) } else { a };
    let b2 = if rb == 1 { b.unsqueeze(-1) } else { b };
    let mut y = a2.matmul(&b2);
    if rb == 1 {
        let mut s = y.shape().unwrap_or_default();
        s.pop();
        y = y.reshape(s);
    }
    if ra == 1 {
        let mut s = y.shape().unwrap_or_default();
        let at = s.len().saturating_sub(if rb == 1 { 1 } else { 2 });
        if at < s.len() {
            s.remove(at);
        }
        y = y.reshape(s);
    }
    one(y)
}

/// `Gemm`: `alpha op(A) op(B) + beta C`, transposes as views.
fn gemm(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let mut a = im.f32_tensor(n, 0)?;
    let mut b = im.f32_tensor(n, 1)?;
    if attr_i(n, "transA", 0) != 0 {
        a = a.transpose(0, 1);
    }
    if attr_i(n, "transB", 0) != 0 {
        b = b.transpose(0, 1);
    }
    let (alpha, beta) = (attr_f(n, "alpha", 1.0), attr_f(n, "beta", 1.0));
    let mut y = a.matmul(&b);
    if alpha != 1.0 {
        y = y * alpha;
    }
    if im.input(n, 2).is_some() {
        let c = im.f32_tensor(n, 2)?;
        y = if beta == 1.0 { y + c } else { y + c * beta };
    }
    one(y)
}

/// `Det`: the determinant of each `[M, M]` matrix of `[..., M, M]`, for M up to 3 by the
/// cofactor expansion along the first row (larger matrices would need a pivoted elimination,
/// which lumen does not build).
fn det(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let rank = shape.len();
    if rank < 2 || shape[rank - 1] != shape[rank - 2] {
        return Err(im.malformed(n, format!("input of shape {shape:?}: expected [..., M, M]")));
    }
    let m = shape[rank - 1];
    let e = |i: usize, j: usize| x.slice(-2, i, i + 1).slice(-1, j, j + 1);
    let minor = |a: (usize, usize), b: (usize, usize), c: (usize, usize), d: (usize, usize)| {
        e(a.0, a.1) * e(b.0, b.1) - e(c.0, c.1) * e(d.0, d.1)
    };
    let d = match m {
        // The empty product: 1 for each matrix.
        0 => {
            let batch = shape[..rank - 2].to_vec();
            let ones = x.graph().constant(1.0).reshape(vec![1; batch.len()]).expand(batch.clone());
            return one(ones.reshape(batch));
        }
        1 => e(0, 0),
        2 => minor((0, 0), (1, 1), (0, 1), (1, 0)),
        3 => {
            e(0, 0) * minor((1, 1), (2, 2), (1, 2), (2, 1))
                - e(0, 1) * minor((1, 0), (2, 2), (1, 2), (2, 0))
                + e(0, 2) * minor((1, 0), (2, 1), (1, 1), (2, 0))
        }
        _ => return Err(im.unsupported(n, format!("{m}x{m} matrices (lumen computes up to 3x3)"))),
    };
    one(d.reshape(shape[..rank - 2].to_vec()))
}
