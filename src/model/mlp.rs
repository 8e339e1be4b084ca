//! The MLP file layout, the one `data/make_digits_mlp.py` writes from scikit-learn's
//! `MLPClassifier`: weights `w1..wL` of shape `[in, out]` and biases `b1..bL` of shape `[out]`
//! (so `h = relu(h @ w + b)`, no relu after the last layer), inputs `x` `[B, in]` f32, labels
//! `y` `[B]` (i64 or i32) and logits `[B, out]` f32. Any number of layers, any widths, any
//! output width. The metadata's `sklearn_accuracy` is the accuracy to reproduce.

use std::collections::BTreeMap;
use std::path::Path;

use lumen_compiler::{Graph, programs};
use lumen_runtime::{HostTensor, Tensors};
use safetensors::SafeTensors;

use super::{ModelError, f32_tensor, labels_and_logits, read_metadata, shape_err};

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

/// The layer number of a tensor named `{prefix}{n}` (n >= 1, no leading zeros).
fn layer_index(name: &str, prefix: char) -> Option<usize> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
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
/// `w1` defines the input width, so an `x` of another width is `x`'s error (`tensor `x` has
/// shape [16, 5], expected [16, 4] (w1 is [4, 8])`); a later `w{i}` that does not take the
/// previous layer's width is `w{i}`'s.
pub fn parse_mlp(bytes: &[u8]) -> Result<MlpModel, ModelError> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::Format(e.to_string()))?;
    let metadata = read_metadata(bytes)?;

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
            // The first weight defines the input width: a batch of another width is x's
            // mismatch, not the layer's.
            [d_in, d_out] if i == 1 && d_in > 0 && d_out > 0 => {
                let expected = format!("[{batch}, {d_in}] (w1 is {:?})", w.shape());
                return Err(shape_err("x", x.shape(), expected));
            }
            _ => return Err(shape_err(&wn, w.shape(), format!("[{width}, out] with out >= 1"))),
        };
        let b = f32_tensor(&st, &bn, "a layer bias [out]")?;
        if b.shape() != [out] {
            return Err(shape_err(&bn, b.shape(), format!("[{out}]")));
        }
        layers.push(Layer { w, b });
        width = out;
    }
    let (labels, logits) = labels_and_logits(&st, batch, width)?;
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

    /// `MLP 64 -> 128 -> 64 -> 10 (relu between layers)`.
    pub fn describe(&self) -> String {
        let widths: Vec<String> = self.widths().iter().map(usize::to_string).collect();
        let relu =
            if self.layers.len() == 1 { "one layer, no relu" } else { "relu between layers" };
        format!("MLP {} ({relu})", widths.join(" -> "))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names() {
        assert_eq!(layer_index("w1", 'w'), Some(1));
        assert_eq!(layer_index("w12", 'w'), Some(12));
        for bad in ["w", "w0", "w01", "wx", "b1", "w1a", "w-1"] {
            assert_eq!(layer_index(bad, 'w'), None, "{bad}");
        }
    }
}
