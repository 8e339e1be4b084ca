//! Models stored as safetensors files: an MLP's layers, a batch of inputs, and optionally the
//! labels and the reference logits to check a run against (SPEC section 6).
//!
//! The layout is the one `data/make_digits_mlp.py` writes from scikit-learn's `MLPClassifier`:
//! weights `w1..wL` of shape `[in, out]` and biases `b1..bL` of shape `[out]` (so
//! `h = relu(h @ w + b)`, no relu after the last layer), inputs `x` `[B, in]` f32, labels `y`
//! `[B]` (i64 or i32) and logits `[B, out]` f32. Any number of layers, any widths, any output
//! width; everything is checked and a bad file is a typed [`ModelError`], never a panic.

use std::collections::BTreeMap;
use std::path::Path;

use lumen_compiler::{CompileError, Graph, programs};
use lumen_runtime::{HostTensor, RuntimeError, Tensors};
use safetensors::{Dtype, SafeTensors};
use thiserror::Error;

/// Why a model file could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The path given.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// Not a valid safetensors file (header, offsets).
    #[error("not a safetensors file: {0}")]
    Format(String),
    /// A tensor the model needs is absent.
    #[error("the file has no tensor `{name}` ({what})")]
    Missing {
        /// The tensor's name.
        name: String,
        /// What it would hold.
        what: &'static str,
    },
    /// A tensor has a dtype lumen cannot use for it.
    #[error("tensor `{name}` has dtype {got}, expected {expected}")]
    Dtype {
        /// The tensor's name.
        name: String,
        /// Its dtype in the file.
        got: String,
        /// What lumen accepts.
        expected: &'static str,
    },
    /// A tensor's shape does not fit the model.
    #[error("tensor `{name}` has shape {got:?}, expected {expected}")]
    Shape {
        /// The tensor's name.
        name: String,
        /// Its shape in the file.
        got: Vec<usize>,
        /// What the model needs, in words (e.g. `[64, _]`).
        expected: String,
    },
    /// Layers are not numbered 1..L without gaps, or a weight lacks its bias.
    #[error("layers must be w1..wL with b1..bL: {0}")]
    Layers(String),
    /// The MLP could not be built or compiled.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// A tensor could not be converted (its data length does not match its shape).
    #[error(transparent)]
    Tensor(#[from] RuntimeError),
}

/// One dense layer: `out = in @ w + b`.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// Weight `[in, out]`, row-major f32.
    pub w: HostTensor,
    /// Bias `[out]`, f32.
    pub b: HostTensor,
}

/// An MLP read from a file, with its input batch and what to check the outputs against.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpModel {
    /// Layers in order; relu follows every layer but the last.
    pub layers: Vec<Layer>,
    /// Inputs `x` `[B, in]`.
    pub x: HostTensor,
    /// Labels `y` `[B]`, if the file has them.
    pub labels: Option<Vec<i64>>,
    /// Reference logits `[B, out]`, if the file has them.
    pub logits: Option<HostTensor>,
    /// The file header's `__metadata__` (e.g. `sklearn_accuracy`), sorted by key.
    pub metadata: BTreeMap<String, String>,
}

/// Reads an MLP from a safetensors file (see the module docs for the layout).
///
/// # Errors
/// [`ModelError::Io`] when the file cannot be read, and every error of [`parse_mlp`].
pub fn load_mlp(path: &Path) -> Result<MlpModel, ModelError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ModelError::Io { path: path.display().to_string(), reason: e.to_string() })?;
    parse_mlp(&bytes)
}

fn f32_tensor(
    st: &SafeTensors<'_>,
    name: &str,
    what: &'static str,
) -> Result<HostTensor, ModelError> {
    let view = st.tensor(name).map_err(|_| ModelError::Missing { name: name.to_string(), what })?;
    if view.dtype() != Dtype::F32 {
        return Err(ModelError::Dtype {
            name: name.to_string(),
            got: format!("{:?}", view.dtype()),
            expected: "F32",
        });
    }
    let data =
        view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(HostTensor::new(view.shape().to_vec(), data)?)
}

/// The labels' shape and values.
type Labels = (Vec<usize>, Vec<i64>);

fn labels(st: &SafeTensors<'_>) -> Result<Option<Labels>, ModelError> {
    let Ok(view) = st.tensor("y") else { return Ok(None) };
    let data: Vec<i64> = match view.dtype() {
        Dtype::I64 => view
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        Dtype::I32 => view
            .data()
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        other => {
            return Err(ModelError::Dtype {
                name: "y".into(),
                got: format!("{other:?}"),
                expected: "I64 or I32",
            });
        }
    };
    Ok(Some((view.shape().to_vec(), data)))
}

/// The layer number of a tensor named `{prefix}{n}` (n >= 1, no leading zeros).
fn layer_index(name: &str, prefix: char) -> Option<usize> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn shape_err(name: &str, got: &[usize], expected: String) -> ModelError {
    ModelError::Shape { name: name.to_string(), got: got.to_vec(), expected }
}

/// Parses an MLP from safetensors bytes: finds `w1..wL` and `b1..bL` (any L >= 1), checks
/// that they chain (`w{i}` `[d_{i-1}, d_i]`, `b{i}` `[d_i]`), that `x` is `[B, d_0]` with
/// B >= 1, and that the optional `y` `[B]` and `logits` `[B, d_L]` fit. Other tensors are
/// ignored.
///
/// # Errors
/// [`ModelError::Format`] for a malformed file; `Missing` (no `x`, no layers), `Layers`
/// (gaps, a weight without its bias or a bias without its weight), `Dtype` (not f32; labels
/// not integer) and `Shape` (ranks, widths that do not chain, batch mismatches, zero sizes).
pub fn parse_mlp(bytes: &[u8]) -> Result<MlpModel, ModelError> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::Format(e.to_string()))?;
    let metadata = SafeTensors::read_metadata(bytes)
        .ok()
        .and_then(|(_, m)| m.metadata().clone())
        .map(|m| m.into_iter().collect())
        .unwrap_or_default();

    let names = st.names();
    let ws: std::collections::BTreeSet<usize> =
        names.iter().filter_map(|n| layer_index(n, 'w')).collect();
    let bs: std::collections::BTreeSet<usize> =
        names.iter().filter_map(|n| layer_index(n, 'b')).collect();
    let count = ws.last().copied().unwrap_or(0);
    if count == 0 {
        return Err(ModelError::Missing { name: "w1".into(), what: "the first layer's weight" });
    }
    if let Some(gap) = (1..=count).find(|i| !ws.contains(i)) {
        return Err(ModelError::Layers(format!("w{count} is present but w{gap} is missing")));
    }
    if let Some(i) = ws.iter().find(|i| !bs.contains(i)) {
        return Err(ModelError::Layers(format!("w{i} has no bias b{i}")));
    }
    if let Some(i) = bs.iter().find(|i| !ws.contains(i)) {
        return Err(ModelError::Layers(format!("b{i} has no weight w{i}")));
    }

    let x = f32_tensor(&st, "x", "the input batch [B, in]")?;
    let (batch, mut width) = match *x.shape() {
        [b, d] if b > 0 && d > 0 => (b, d),
        _ => return Err(shape_err("x", x.shape(), "[B, in] with B, in >= 1".into())),
    };
    let mut layers = Vec::with_capacity(count);
    for i in 1..=count {
        let (wn, bn) = (format!("w{i}"), format!("b{i}"));
        let w = f32_tensor(&st, &wn, "a layer weight [in, out]")?;
        let out = match *w.shape() {
            [d_in, d_out] if d_in == width && d_out > 0 => d_out,
            _ => return Err(shape_err(&wn, w.shape(), format!("[{width}, out] with out >= 1"))),
        };
        let b = f32_tensor(&st, &bn, "a layer bias [out]")?;
        if b.shape() != [out] {
            return Err(shape_err(&bn, b.shape(), format!("[{out}]")));
        }
        layers.push(Layer { w, b });
        width = out;
    }
    let labels = match labels(&st)? {
        None => None,
        Some((shape, data)) if shape == [batch] => Some(data),
        Some((shape, _)) => return Err(shape_err("y", &shape, format!("[{batch}]"))),
    };
    let logits = match st.tensor("logits") {
        Err(_) => None,
        Ok(_) => {
            let t = f32_tensor(&st, "logits", "reference logits")?;
            if t.shape() != [batch, width] {
                return Err(shape_err("logits", t.shape(), format!("[{batch}, {width}]")));
            }
            Some(t)
        }
    };
    Ok(MlpModel { layers, x, labels, logits, metadata })
}

impl MlpModel {
    /// Layer widths, input first: `[64, 128, 64, 10]` for the digits MLP.
    pub fn widths(&self) -> Vec<usize> {
        let mut widths = vec![self.x.shape().get(1).copied().unwrap_or(0)];
        widths.extend(self.layers.iter().map(|l| l.b.shape().first().copied().unwrap_or(0)));
        widths
    }

    /// Rows of `x`.
    pub fn batch(&self) -> usize {
        self.x.shape().first().copied().unwrap_or(0)
    }

    /// The network in the DSL ([`programs::mlp`]): input `x` `[B, in]`, weights `w1, b1, ...`,
    /// relu after every layer but the last, output `y` (the logits) `[B, out]`.
    ///
    /// # Errors
    /// [`ModelError::Compile`] when the builder refuses the sizes (never for a parsed model).
    pub fn graph(&self) -> Result<Graph, ModelError> {
        Ok(programs::mlp(&self.widths(), self.batch())?)
    }

    /// The weights by the names [`MlpModel::graph`] declares.
    pub fn weights(&self) -> Tensors {
        let mut t = Tensors::new();
        for (i, layer) in self.layers.iter().enumerate() {
            t.insert(format!("w{}", i + 1), layer.w.clone());
            t.insert(format!("b{}", i + 1), layer.b.clone());
        }
        t
    }

    /// The program's inputs: `x`.
    pub fn inputs(&self) -> Tensors {
        [("x".to_string(), self.x.clone())].into_iter().collect()
    }
}

/// Predicted class of each row of `logits` `[B, C]`: the argmax (first on ties); for a
/// single column (a binary classifier's logit), 1 when the logit is > 0, else 0.
pub fn predictions(logits: &HostTensor) -> Vec<i64> {
    let cols = logits.shape().last().copied().unwrap_or(0);
    if cols == 0 {
        return Vec::new();
    }
    logits
        .data()
        .chunks_exact(cols)
        .map(|row| {
            if cols == 1 {
                return i64::from(row[0] > 0.0);
            }
            let mut best = 0;
            for (j, v) in row.iter().enumerate() {
                if *v > row[best] {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

/// How many predictions equal the labels, and that count over the number of labels (0 for
/// none). Rows beyond the shorter of the two are not counted.
pub fn accuracy(logits: &HostTensor, labels: &[i64]) -> (usize, f64) {
    let correct = predictions(logits).iter().zip(labels).filter(|(p, y)| p == y).count();
    let acc = if labels.is_empty() { 0.0 } else { correct as f64 / labels.len() as f64 };
    (correct, acc)
}

/// Largest `|a - b|` over two same-shape tensors; `None` when the shapes differ. NaN anywhere
/// gives NaN.
pub fn max_abs_err(a: &HostTensor, b: &HostTensor) -> Option<f64> {
    if a.shape() != b.shape() {
        return None;
    }
    let mut worst = 0.0f64;
    for (x, y) in a.data().iter().zip(b.data()) {
        let e = (f64::from(*x) - f64::from(*y)).abs();
        if e.is_nan() {
            return Some(f64::NAN);
        }
        worst = worst.max(e);
    }
    Some(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], data: &[f32]) -> HostTensor {
        HostTensor::new(shape.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn argmax_and_binary() {
        let logits = t(&[3, 3], &[0.1, 0.5, 0.2, 3.0, 3.0, -1.0, -2.0, -1.0, -3.0]);
        assert_eq!(predictions(&logits), vec![1, 0, 1]);
        assert_eq!(accuracy(&logits, &[1, 0, 2]), (2, 2.0 / 3.0));
        let binary = t(&[3, 1], &[0.5, -0.5, 0.0]);
        assert_eq!(predictions(&binary), vec![1, 0, 0]);
        assert_eq!(accuracy(&binary, &[]).1, 0.0);
    }

    #[test]
    fn max_abs_err_values() {
        assert_eq!(max_abs_err(&t(&[2], &[1.0, 2.0]), &t(&[2], &[1.5, 1.0])), Some(1.0));
        assert_eq!(max_abs_err(&t(&[2], &[1.0, 2.0]), &t(&[1, 2], &[1.0, 2.0])), None);
        assert!(max_abs_err(&t(&[1], &[f32::NAN]), &t(&[1], &[0.0])).unwrap().is_nan());
    }

    #[test]
    fn layer_names() {
        assert_eq!(layer_index("w1", 'w'), Some(1));
        assert_eq!(layer_index("w12", 'w'), Some(12));
        for bad in ["w", "w0", "w01", "wx", "b1", "w1a", "w-1"] {
            assert_eq!(layer_index(bad, 'w'), None, "{bad}");
        }
    }
}
