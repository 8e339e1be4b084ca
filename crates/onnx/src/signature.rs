//! A model's graph inputs as the file declares them (name, element type, each dimension a
//! number, a `dim_param` name, or unknown), read without importing the model: what a caller
//! needs to choose the shapes it imports with (a decoder's cache length, say).

use prost::Message;

use crate::OnnxError;
use crate::proto::ModelSignature;

/// One dimension of a declared input shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclaredDim {
    /// A fixed length (`dim_value`).
    Fixed(usize),
    /// A symbolic length (`dim_param`), by name: `batch`, `past_sequence_length`.
    Named(String),
    /// Neither given (or a negative `dim_value`).
    Unknown,
}

impl std::fmt::Display for DeclaredDim {
    /// The number, the `dim_param` name, or `?`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeclaredDim::Fixed(n) => write!(f, "{n}"),
            DeclaredDim::Named(name) => write!(f, "{name}"),
            DeclaredDim::Unknown => write!(f, "?"),
        }
    }
}

/// A graph input no initializer gives, as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredInput {
    /// Its ONNX name.
    pub name: String,
    /// `onnx.TensorProto.DataType` of its elements (1 float, 7 int64, ...; 0 when the input
    /// is not a tensor or declares none).
    pub elem_type: i32,
    /// Its dimensions, outermost first; `None` when the file gives no shape at all.
    pub dims: Option<Vec<DeclaredDim>>,
}

/// The graph inputs of the model in `bytes` that no initializer gives, in graph order.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that do not decode, [`OnnxError::NoGraph`].
pub fn declared_inputs(bytes: &[u8]) -> Result<Vec<DeclaredInput>, OnnxError> {
    let model = ModelSignature::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.ok_or(OnnxError::NoGraph)?;
    let given: std::collections::BTreeSet<&str> =
        graph.initializer.iter().map(|i| i.name.as_str()).collect();
    Ok(graph
        .input
        .iter()
        .filter(|i| !given.contains(i.name.as_str()))
        .map(|i| {
            let tensor = i.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
            let dims = tensor.and_then(|t| t.shape.as_ref()).map(|s| {
                s.dim
                    .iter()
                    .map(|d| match (d.dim_value, &d.dim_param) {
                        (Some(v), _) if v >= 0 => DeclaredDim::Fixed(v as usize),
                        (_, Some(p)) if !p.is_empty() => DeclaredDim::Named(p.clone()),
                        _ => DeclaredDim::Unknown,
                    })
                    .collect()
            });
            DeclaredInput {
                name: i.name.clone(),
                elem_type: tensor.map_or(0, |t| t.elem_type),
                dims,
            }
        })
        .collect())
}
