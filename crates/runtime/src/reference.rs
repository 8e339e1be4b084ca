//! A naive f64 interpreter of the LLIR: no slab, no reuse, no fast kernels; every buffer its
//! own vector, every sum in f64. It is the oracle the numeric tests compare the runtimes
//! against (the role NumPy plays in TVM's and XLA's test suites).
//!
//! Activations have the runtimes' semantics, not whatever an f64 library call happens to do:
//! NaN in, NaN out for relu and gelu (a runtime that produces NaN must disagree with a finite
//! oracle, never be excused by it), relu(-0) = -0, gelu(±inf) its limits (+inf, -0).

use indexmap::IndexMap;
use lumen_compiler::{BufferRole, Llir, LlirOp};

use crate::error::TensorKind;
use crate::kernels::{Activation, epilogue_parts};
use crate::layout::duplicate_buffer_id;
use crate::runtime::check_tensors;
use crate::{RuntimeError, Tensors};

/// A row-major f64 tensor produced by [`execute_f64`].
#[derive(Debug, Clone, PartialEq)]
pub struct RefTensor {
    /// Shape in elements.
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub data: Vec<f64>,
}

/// GELU, tanh form, in f64: `0.5 x (1 + tanh(z))`, `z = sqrt(2/pi) (x + 0.044715 x^3)`,
/// evaluated as `x / (1 + exp(-2z))` with `t = exp(-2|z|)` (`x / (1 + t)` for `z >= 0`,
/// `x t / (1 + t)` for `z < 0`), the same stable form as [`crate::kernels::gelu_scalar`].
/// Even in f64 the textbook form cancels: it returns 0 from x = -8 down, where the value is
/// -3.1e-21. gelu(+inf) = +inf, gelu(-inf) = -0 (the limit), NaN in, NaN out.
pub fn gelu_f64(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let z = c * x * (1.0 + 0.044_715 * x * x);
    let t = (-2.0 * z.abs()).exp();
    if z >= 0.0 { x / (1.0 + t) } else { x * t / (1.0 + t) }
}

/// relu in f64 with the runtime's semantics: `x < 0 ? 0 : x`, so NaN in, NaN out (a NaN the
/// runtime produced must not become 0 in the oracle, as `f64::max` would make it) and -0
/// stays -0.
pub fn relu_f64(x: f64) -> f64 {
    if x < 0.0 { 0.0 } else { x }
}

fn act_f64(act: Activation, x: f64) -> f64 {
    match act {
        Activation::Identity => x,
        Activation::Relu => relu_f64(x),
        Activation::Gelu => gelu_f64(x),
    }
}

/// Runs `llir` on `weights` and `inputs` in f64 and returns its outputs in readback order.
///
/// # Errors
/// `Missing`, `Unexpected`, `ShapeMismatch` for tensors that do not match the program;
/// [`RuntimeError::InvalidProgram`] (label `reference`) when two buffers share an id (checked
/// first), or a node reads a buffer no earlier node wrote, names an absent buffer or has
/// operands of the wrong size (or sizes whose product overflows `usize`).
pub fn execute_f64(
    llir: &Llir,
    weights: &Tensors,
    inputs: &Tensors,
) -> Result<IndexMap<String, RefTensor>, RuntimeError> {
    let bad = |reason: String| RuntimeError::invalid("reference", reason);
    if let Some(reason) = duplicate_buffer_id(&llir.buffers) {
        return Err(bad(reason));
    }
    check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
    check_tensors(&llir.buffers, TensorKind::Input, inputs)?;
    let mut vals: Vec<Option<Vec<f64>>> = vec![None; llir.buffers.len()];
    let mut outputs = IndexMap::new();
    for (n, node) in llir.nodes.iter().enumerate() {
        let read = |i: usize| -> Result<&[f64], RuntimeError> {
            let b = *node.reads.get(i).ok_or_else(|| bad(format!("node {n} lacks operand {i}")))?;
            vals.get(b)
                .and_then(|v| v.as_deref())
                .ok_or_else(|| bad(format!("node {n} reads buffer {b} before it is written")))
        };
        let want = |v: &[f64], len: usize| -> Result<(), RuntimeError> {
            if v.len() == len {
                Ok(())
            } else {
                Err(bad(format!("node {n}: operand size {} != {len}", v.len())))
            }
        };
        // Element counts of the op's operands, refused rather than wrapped when they overflow.
        let count = |a: usize, b: usize| -> Result<usize, RuntimeError> {
            a.checked_mul(b).ok_or_else(|| bad(format!("node {n}: sizes overflow")))
        };
        let result: Option<Vec<f64>> = match node.op {
            LlirOp::Upload => {
                for &w in &node.writes {
                    let buf =
                        llir.buffers.get(w).ok_or_else(|| bad(format!("absent buffer {w}")))?;
                    let src = match buf.role {
                        BufferRole::Input => inputs.get(&buf.id),
                        _ => weights.get(&buf.id),
                    };
                    let src =
                        src.ok_or_else(|| bad(format!("upload of `{}`: no tensor", buf.id)))?;
                    vals[w] = Some(src.data().iter().map(|&x| f64::from(x)).collect());
                }
                None
            }
            LlirOp::Readback => {
                for &r in &node.reads {
                    let buf =
                        llir.buffers.get(r).ok_or_else(|| bad(format!("absent buffer {r}")))?;
                    let data = vals.get(r).and_then(Clone::clone).ok_or_else(|| {
                        bad(format!("readback of `{}` before it is written", buf.id))
                    })?;
                    outputs.insert(buf.id.clone(), RefTensor { shape: buf.shape.clone(), data });
                }
                None
            }
            LlirOp::LtMatmul { m, k, n: cols, epilogue } => {
                let (has_bias, act) = epilogue_parts(epilogue);
                let (a, b) = (read(0)?, read(1)?);
                want(a, count(m, k)?)?;
                want(b, count(k, cols)?)?;
                let bias = if has_bias { Some(read(2)?) } else { None };
                if let Some(bias) = bias {
                    want(bias, cols)?;
                }
                let mut out = vec![0.0; count(m, cols)?];
                for i in 0..m {
                    for j in 0..cols {
                        let dot: f64 = (0..k).map(|p| a[i * k + p] * b[p * cols + j]).sum();
                        out[i * cols + j] = act_f64(act, dot + bias.map_or(0.0, |bv| bv[j]));
                    }
                }
                Some(out)
            }
            LlirOp::AddBias { m, n: cols } => {
                let (x, bias) = (read(0)?, read(1)?);
                want(x, count(m, cols)?)?;
                want(bias, cols)?;
                Some(x.iter().enumerate().map(|(i, v)| v + bias[i % cols]).collect())
            }
            LlirOp::Add { len } => {
                let (a, b) = (read(0)?, read(1)?);
                want(a, len)?;
                want(b, len)?;
                Some(a.iter().zip(b).map(|(x, y)| x + y).collect())
            }
            LlirOp::Relu { len } | LlirOp::Gelu { len } => {
                let x = read(0)?;
                want(x, len)?;
                let act = if matches!(node.op, LlirOp::Relu { .. }) {
                    Activation::Relu
                } else {
                    Activation::Gelu
                };
                Some(x.iter().map(|&v| act_f64(act, v)).collect())
            }
        };
        if let Some(result) = result {
            let &w = node.writes.first().ok_or_else(|| bad(format!("node {n} writes nothing")))?;
            let slot = vals.get_mut(w).ok_or_else(|| bad(format!("absent buffer {w}")))?;
            *slot = Some(result);
        }
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use lumen_compiler::Epilogue;

    use super::*;

    #[test]
    fn gelu_f64_is_accurate_on_the_tail() {
        // mpmath at 60 digits: x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))).
        let exact = [
            (3.0, 2.996_362_607_918_227),
            (-1.0, -0.158_808_009_391_723_3),
            (-5.0, -2.291_796_196_629_506e-7),
            (-6.0, -8.439_646_700_762_297e-11),
            (-8.0, -3.107_782_937_501_111_2e-21),
            (-12.0, -1.635_985_449_353_481e-61),
            (-14.0, -2.569_400_277_353_559e-94),
        ];
        for (x, want) in exact {
            let got = gelu_f64(x);
            let rel = (got - want).abs() / want.abs();
            assert!(rel < 1e-12, "gelu_f64({x}) = {got:e}, exact {want:e}, rel {rel:e}");
        }
        assert_eq!(gelu_f64(0.0), 0.0);
        assert_eq!(gelu_f64(f64::INFINITY), f64::INFINITY);
        let neg = gelu_f64(f64::NEG_INFINITY);
        assert!(neg == 0.0 && neg.is_sign_negative(), "gelu_f64(-inf) = {neg}");
        assert!(gelu_f64(f64::NAN).is_nan());
    }

    #[test]
    fn overflowing_sizes_are_an_error_not_a_panic() {
        use lumen_compiler::{CompileOptions, Graph};

        use crate::HostTensor;

        let mut cx = Graph::new();
        let x = cx.input("x", [2, 3]);
        let w = cx.weight("w", [3, 2]);
        x.matmul(w).output("y");
        let program = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
        let weights: Tensors =
            [("w".into(), HostTensor::new([3, 2], vec![1.0; 6]).unwrap())].into();
        let inputs: Tensors = [("x".into(), HostTensor::new([2, 3], vec![1.0; 6]).unwrap())].into();
        let ok = execute_f64(&program.llir, &weights, &inputs).unwrap();
        assert_eq!(ok["y"].data, [3.0; 4]);
        for (m, k, n) in [(usize::MAX, 3, 2), (2, usize::MAX, 2), (2, 3, usize::MAX)] {
            let mut llir = program.llir.clone();
            llir.nodes[1].op = LlirOp::LtMatmul { m, k, n, epilogue: Epilogue::Default };
            let err = execute_f64(&llir, &weights, &inputs).unwrap_err();
            assert!(err.to_string().contains("node 1: sizes overflow"), "{err}");
        }
        let mut llir = program.llir.clone();
        llir.nodes[1].op = LlirOp::AddBias { m: usize::MAX, n: 2 };
        let err = execute_f64(&llir, &weights, &inputs).unwrap_err();
        assert!(err.to_string().contains("node 1: sizes overflow"), "{err}");
    }

    #[test]
    fn relu_f64_propagates_nan_like_the_runtime() {
        assert!(relu_f64(f64::NAN).is_nan());
        assert_eq!(relu_f64(-2.0), 0.0);
        assert_eq!(relu_f64(3.5), 3.5);
        assert_eq!(relu_f64(f64::NEG_INFINITY), 0.0);
        assert_eq!(relu_f64(f64::INFINITY), f64::INFINITY);
        assert!(act_f64(Activation::Relu, f64::NAN).is_nan());
        assert!(act_f64(Activation::Gelu, f64::NAN).is_nan());
    }
}
