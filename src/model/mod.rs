//! Models stored as safetensors files: the weights, a batch of inputs, and optionally the
//! labels and the reference logits to check a run against. The file's metadata key
//! `architecture` says which network it holds: `mlp` (or no key: the layout of
//! `data/make_digits_mlp.py`, see [`mlp`]) or `vit` (a vision transformer whose
//! hyper-parameters are metadata keys, see [`vit`]). Every file is checked and a bad one is a
//! typed [`ModelError`] naming the tensor or key, never a panic; [`check`] compares a run's
//! logits with the file's.

pub mod check;
pub mod llama;
pub mod mlp;
pub mod onnx;
pub mod vit;

use std::collections::BTreeMap;
use std::path::Path;

use lumen_compiler::{CompileError, Graph};
use lumen_runtime::{HostTensor, RuntimeError, Tensors};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use thiserror::Error;

pub use check::*;
pub use llama::{LlamaModel, load_llama};
pub use mlp::{Layer, MlpModel, load_mlp, parse_mlp};
pub use onnx::{OnnxFiles, OnnxModel, is_onnx, load_onnx};
pub use vit::{VitModel, parse_vit};

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
    /// The file's metadata names an architecture lumen does not build.
    #[error("unknown architecture {0:?} in the file's metadata (expected mlp or vit)")]
    Architecture(String),
    /// A metadata key a model needs is absent or not a valid value.
    #[error("metadata `{key}` {problem}")]
    Metadata {
        /// The key.
        key: &'static str,
        /// What is wrong: `is missing`, `is "abc", not a whole number`, ...
        problem: String,
    },
    /// A JSON file of a model directory (`config.json`, a shard index) does not parse.
    #[error("{path} is not valid JSON: {reason}")]
    Json {
        /// The file.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// A key of a model directory's `config.json` is missing, malformed or unsupported.
    #[error("config.json: `{key}` {problem}")]
    Config {
        /// The key.
        key: String,
        /// What is wrong: `is missing`, `is "gelu"; only "silu" is supported`, ...
        problem: String,
    },
    /// Layers are not numbered 1..L without gaps, or a weight lacks its bias.
    #[error("layers must be w1..wL with b1..bL: {0}")]
    Layers(String),
    /// The model could not be built or compiled (hyper-parameters that do not divide).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// A tensor could not be converted (its data length does not match its shape).
    #[error(transparent)]
    Tensor(#[from] RuntimeError),
    /// The ONNX model could not be imported (see [`lumen_onnx::OnnxError`]).
    #[error(transparent)]
    Onnx(#[from] lumen_onnx::OnnxError),
    /// An error about a tensor file given beside the model (`--inputs`, `--expect`).
    #[error("in {path}: {source}")]
    InFile {
        /// The file.
        path: String,
        /// What is wrong in it.
        source: Box<ModelError>,
    },
    /// A reference output of the `--expect` file whose dtype is not the one the model computes
    /// for that output (an int32 reference of an output computed as int64).
    #[error(
        "the --expect file {path} holds output `{name}` as {got}; the model computes it as {computed}"
    )]
    ExpectDtype {
        /// The `--expect` file.
        path: String,
        /// The graph output's ONNX name.
        name: String,
        /// The reference's dtype in the file.
        got: String,
        /// What the program computes (`f32`, `i32`, `i64`).
        computed: &'static str,
    },
    /// A tensor of an `--inputs` or `--expect` file names no graph input or output.
    #[error("the {file} file has a tensor `{name}`, which the model does not have ({expected})")]
    Unexpected {
        /// The tensor's name.
        name: String,
        /// `inputs` or `expect`.
        file: &'static str,
        /// The names the model has, in words.
        expected: String,
    },
}

/// A model read from a file, whichever architecture it declares.
#[derive(Debug, Clone)]
pub enum Model {
    /// A multilayer perceptron ([`mlp`]).
    Mlp(MlpModel),
    /// A vision transformer ([`vit`]).
    Vit(VitModel),
    /// An ONNX model with its input and reference tensors ([`onnx`]).
    Onnx(OnnxModel),
}

/// Reads a model from a safetensors file, by the `architecture` its metadata declares.
///
/// # Errors
/// [`ModelError::Io`] when the file cannot be read, and every error of [`parse`].
pub fn load(path: &Path) -> Result<Model, ModelError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ModelError::Io { path: path.display().to_string(), reason: e.to_string() })?;
    parse(&bytes)
}

/// Parses a model from safetensors bytes: [`parse_mlp`] when the metadata has no
/// `architecture` key or says `mlp`, [`parse_vit`] when it says `vit`.
///
/// # Errors
/// [`ModelError::Format`] for a malformed file, [`ModelError::Architecture`] for another
/// architecture, and every error of the architecture's parser.
pub fn parse(bytes: &[u8]) -> Result<Model, ModelError> {
    let metadata = read_metadata(bytes)?;
    match metadata.get("architecture").map(|a| a.trim()) {
        None | Some("mlp") => Ok(Model::Mlp(parse_mlp(bytes)?)),
        Some("vit") => Ok(Model::Vit(parse_vit(bytes)?)),
        Some(other) => Err(ModelError::Architecture(other.to_string())),
    }
}

/// The file header's `__metadata__`, sorted by key (empty when absent).
///
/// # Errors
/// [`ModelError::Format`] for a malformed header.
pub(crate) fn read_metadata(bytes: &[u8]) -> Result<BTreeMap<String, String>, ModelError> {
    let (_, meta) =
        SafeTensors::read_metadata(bytes).map_err(|e| ModelError::Format(e.to_string()))?;
    Ok(meta.metadata().clone().map(|m| m.into_iter().collect()).unwrap_or_default())
}

impl Model {
    /// `mlp`, `vit` or `onnx`: the file's architecture.
    pub fn architecture(&self) -> &'static str {
        match self {
            Model::Mlp(_) => "mlp",
            Model::Vit(_) => "vit",
            Model::Onnx(_) => "onnx",
        }
    }

    /// The network in words: `MLP 64 -> 128 -> 64 -> 10 (relu between layers)`, `ViT 8x8
    /// image, 2x2 patches -> 16 tokens, width 32, 4 heads, 2 blocks, FFN 64, erf-GELU, 10
    /// classes`, `ONNX opset 17 (pytorch 2.15.0), 212 nodes (...)`.
    pub fn describe(&self) -> String {
        match self {
            Model::Mlp(m) => m.describe(),
            Model::Vit(m) => m.describe(),
            Model::Onnx(m) => m.describe(),
        }
    }

    /// The network in the DSL: input `x`, output `y` (the logits `[B, classes]`) for the
    /// MLP and the ViT; the imported graph's inputs and outputs for ONNX.
    ///
    /// # Errors
    /// [`ModelError::Compile`] when the builder refuses the sizes (never for a parsed model).
    pub fn graph(&self) -> Result<Graph, ModelError> {
        match self {
            Model::Mlp(m) => m.graph(),
            Model::Vit(m) => m.graph(),
            Model::Onnx(m) => Ok(m.imported.graph.clone()),
        }
    }

    /// The weights by the names [`Model::graph`] declares (borrowed where the model holds
    /// them: an ONNX model's may be tens of megabytes).
    pub fn weights(&self) -> std::borrow::Cow<'_, Tensors> {
        match self {
            Model::Mlp(m) => std::borrow::Cow::Owned(m.weights()),
            Model::Vit(m) => std::borrow::Cow::Borrowed(&m.weights),
            Model::Onnx(m) => std::borrow::Cow::Borrowed(&m.imported.weights),
        }
    }

    /// The program's inputs by the names [`Model::graph`] declares: `x` for the MLP and the
    /// ViT.
    pub fn inputs(&self) -> Tensors {
        match self {
            Model::Mlp(m) => [("x".to_string(), m.x.clone())].into_iter().collect(),
            Model::Vit(m) => [("x".to_string(), m.x.clone())].into_iter().collect(),
            Model::Onnx(m) => m.inputs.clone(),
        }
    }

    /// The leading dimension of the first input (rows of `x`); 0 without inputs.
    pub fn batch(&self) -> usize {
        let first = match self {
            Model::Mlp(m) => Some(&m.x),
            Model::Vit(m) => Some(&m.x),
            Model::Onnx(m) => m.inputs.values().next(),
        };
        first.and_then(|x| x.shape().first().copied()).unwrap_or(0)
    }

    /// The output the accuracy and the report's headline are about: `y` (the logits) for the
    /// MLP and the ViT, the first graph output for ONNX.
    pub fn primary_output(&self) -> String {
        match self {
            Model::Mlp(_) | Model::Vit(_) => "y".to_string(),
            Model::Onnx(m) => {
                m.imported.outputs.first().map(|(_, l)| l.clone()).unwrap_or_default()
            }
        }
    }

    /// Labels `y` `[B]`, if the file has them (never for ONNX).
    pub fn labels(&self) -> Option<&[i64]> {
        match self {
            Model::Mlp(m) => m.labels.as_deref(),
            Model::Vit(m) => m.labels.as_deref(),
            Model::Onnx(_) => None,
        }
    }

    /// Reference values of the primary output ([`Model::primary_output`]): the file's
    /// logits `[B, classes]`, or the `--expect` file's first graph output.
    pub fn logits(&self) -> Option<&HostTensor> {
        match self {
            Model::Mlp(m) => m.logits.as_ref(),
            Model::Vit(m) => m.logits.as_ref(),
            Model::Onnx(m) => m.expect.as_ref()?.get(&self.primary_output()),
        }
    }

    /// Every reference output, by the program's output name: the file's `logits` as `y`, or
    /// the outputs the `--expect` file holds. Empty without references.
    pub fn references(&self) -> Vec<(String, &HostTensor)> {
        match self {
            Model::Mlp(_) | Model::Vit(_) => {
                self.logits().map(|l| ("y".to_string(), l)).into_iter().collect()
            }
            Model::Onnx(m) => {
                m.expect.iter().flat_map(|e| e.iter().map(|(k, v)| (k.clone(), v))).collect()
            }
        }
    }

    /// What the references are, in words: `the file's logits`, `the --expect outputs`.
    pub fn reference_words(&self) -> &'static str {
        match self {
            Model::Mlp(_) | Model::Vit(_) => "the file's logits",
            Model::Onnx(_) => "the --expect outputs",
        }
    }

    /// The file header's metadata, sorted by key (for ONNX: producer, opset, nodes, folded).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        match self {
            Model::Mlp(m) => &m.metadata,
            Model::Vit(m) => &m.metadata,
            Model::Onnx(m) => &m.metadata,
        }
    }
}

pub(crate) fn f32_tensor(
    st: &SafeTensors<'_>,
    name: &str,
    what: &'static str,
) -> Result<HostTensor, ModelError> {
    let view = st.tensor(name).map_err(|_| ModelError::Missing { name: name.to_string(), what })?;
    let wrong = || ModelError::Dtype {
        name: name.to_string(),
        got: format!("{:?}", view.dtype()),
        expected: "F32",
    };
    if view.dtype() != Dtype::F32 {
        return Err(wrong());
    }
    decode(&view)?.ok_or_else(wrong)
}

impl From<lumen_runtime::TensorError> for ModelError {
    fn from(e: lumen_runtime::TensorError) -> Self {
        ModelError::Tensor(RuntimeError::from(e))
    }
}

/// One tensor of a safetensors file as a host tensor: f32 values, i64/i32 indices
/// (little-endian, row-major), or a bool as f32 0.0 and 1.0; `None` for any other dtype.
///
/// # Errors
/// [`ModelError::Tensor`] when the data's length does not match the shape.
pub(crate) fn decode(view: &TensorView<'_>) -> Result<Option<HostTensor>, ModelError> {
    let (shape, data) = (view.shape().to_vec(), view.data());
    Ok(Some(match view.dtype() {
        Dtype::F32 => HostTensor::new(
            shape,
            data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        )?,
        Dtype::I64 => HostTensor::from_i64(
            shape,
            data.chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )?,
        Dtype::I32 => HostTensor::from_i32(
            shape,
            data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        )?,
        // lumen's booleans are f32 0.0 and 1.0 (an ONNX model's bool inputs read so).
        Dtype::BOOL => HostTensor::new(shape, data.iter().map(|&b| f32::from(b != 0)).collect())?,
        _ => return Ok(None),
    }))
}

/// [`decode`], and integers narrower than i32 (u8, i8, u16, i16) widened to i32 and u32 to
/// i64, losslessly: for reference outputs (onnxruntime's uint8 output of a value lumen
/// computes as i64), compared by value. Graph inputs stay strict ([`decode`]): a model's input
/// takes its own type.
///
/// # Errors
/// As [`decode`].
pub(crate) fn decode_reference(view: &TensorView<'_>) -> Result<Option<HostTensor>, ModelError> {
    let (shape, data) = (view.shape().to_vec(), view.data());
    Ok(Some(match view.dtype() {
        Dtype::U8 => HostTensor::from_i32(shape, data.iter().map(|&b| i32::from(b)).collect())?,
        Dtype::I8 => {
            HostTensor::from_i32(shape, data.iter().map(|&b| i32::from(b as i8)).collect())?
        }
        Dtype::U16 => HostTensor::from_i32(
            shape,
            data.chunks_exact(2).map(|c| i32::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
        )?,
        Dtype::I16 => HostTensor::from_i32(
            shape,
            data.chunks_exact(2).map(|c| i32::from(i16::from_le_bytes([c[0], c[1]]))).collect(),
        )?,
        Dtype::U32 => HostTensor::from_i64(
            shape,
            data.chunks_exact(4)
                .map(|c| i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        )?,
        _ => return decode(view),
    }))
}

/// The labels' shape and values.
pub(crate) type Labels = (Vec<usize>, Vec<i64>);

pub(crate) fn labels(st: &SafeTensors<'_>) -> Result<Option<Labels>, ModelError> {
    let Ok(view) = st.tensor("y") else { return Ok(None) };
    match (view.dtype(), decode(&view)?.and_then(|t| t.index_values())) {
        (Dtype::I64 | Dtype::I32, Some(values)) => Ok(Some((view.shape().to_vec(), values))),
        (other, _) => Err(ModelError::Dtype {
            name: "y".into(),
            got: format!("{other:?}"),
            expected: "I64 or I32",
        }),
    }
}

/// The file's optional labels `y` `[batch]` and reference `logits` `[batch, classes]`.
///
/// # Errors
/// [`ModelError::Shape`] for either of another shape, [`ModelError::Dtype`] for a wrong dtype.
pub(crate) fn labels_and_logits(
    st: &SafeTensors<'_>,
    batch: usize,
    classes: usize,
) -> Result<(Option<Vec<i64>>, Option<HostTensor>), ModelError> {
    let labels = match labels(st)? {
        None => None,
        Some((shape, data)) if shape == [batch] => Some(data),
        Some((shape, _)) => return Err(shape_err("y", &shape, format!("[{batch}]"))),
    };
    let logits = match st.tensor("logits") {
        Err(_) => None,
        Ok(_) => {
            let t = f32_tensor(st, "logits", "reference logits")?;
            if t.shape() != [batch, classes] {
                return Err(shape_err("logits", t.shape(), format!("[{batch}, {classes}]")));
            }
            Some(t)
        }
    };
    Ok((labels, logits))
}

pub(crate) fn shape_err(name: &str, got: &[usize], expected: String) -> ModelError {
    ModelError::Shape { name: name.to_string(), got: got.to_vec(), expected }
}
