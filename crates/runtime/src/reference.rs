//! A naive f64 interpreter of the LLIR: no slab, no reuse, no fast kernels; every buffer its
//! own vector, every sum in f64. It is the oracle the numeric tests compare the runtimes
//! against (the role NumPy plays in TVM's and XLA's test suites).

use indexmap::IndexMap;
use lumen_compiler::{BufferRole, Llir, LlirOp};

use crate::error::TensorKind;
use crate::kernels::{Activation, epilogue_parts};
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

/// GELU, tanh form, in f64.
pub fn gelu_f64(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
}

fn act_f64(act: Activation, x: f64) -> f64 {
    match act {
        Activation::Identity => x,
        Activation::Relu => x.max(0.0),
        Activation::Gelu => gelu_f64(x),
    }
}

/// Runs `llir` on `weights` and `inputs` in f64 and returns its outputs in readback order.
///
/// # Errors
/// `Missing`, `Unexpected`, `ShapeMismatch` for tensors that do not match the program;
/// [`RuntimeError::InvalidProgram`] (label `reference`) when a node reads a buffer no earlier
/// node wrote, names an absent buffer or has operands of the wrong size.
pub fn execute_f64(
    llir: &Llir,
    weights: &Tensors,
    inputs: &Tensors,
) -> Result<IndexMap<String, RefTensor>, RuntimeError> {
    check_tensors(&llir.buffers, TensorKind::Weight, weights)?;
    check_tensors(&llir.buffers, TensorKind::Input, inputs)?;
    let bad = |reason: String| RuntimeError::invalid("reference", reason);
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
                want(a, m * k)?;
                want(b, k * cols)?;
                let bias = if has_bias { Some(read(2)?) } else { None };
                if let Some(bias) = bias {
                    want(bias, cols)?;
                }
                let mut out = vec![0.0; m * cols];
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
                want(x, m * cols)?;
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
