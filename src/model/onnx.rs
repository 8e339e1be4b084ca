//! ONNX models for `lumen run MODEL.onnx --inputs FILE.safetensors [--expect FILE.safetensors]`:
//! the model is imported by [`lumen_onnx::import()`], its inputs are read from a safetensors
//! file by graph input name (f32, or i64/i32 indices and masks), and the optional reference
//! outputs (onnxruntime's, say) from another by graph output name. Dimensions the model leaves
//! symbolic take the shapes of the tensors given, or `--shape NAME=dims`.

use std::collections::BTreeMap;
use std::path::Path;

use lumen_compiler::DType;
use lumen_onnx::{ImportOptions, Imported, import};
use lumen_runtime::{HostTensor, Tensors};
use safetensors::SafeTensors;

use super::ModelError;

/// Whether `file` names an ONNX model: its extension is `.onnx` (any case).
pub fn is_onnx(file: &Path) -> bool {
    file.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// An imported ONNX model with the tensors to run it on and, optionally, to check it against.
#[derive(Debug, Clone)]
pub struct OnnxModel {
    /// The imported program, its weights and its signature.
    pub imported: Imported,
    /// The inputs by the program's (lumen) input names, each the shape and dtype the graph
    /// declares.
    pub inputs: Tensors,
    /// Reference outputs by the program's (lumen) output names, in graph output order: those
    /// of the graph's outputs the `--expect` file holds; `None` without one.
    pub expect: Option<Tensors>,
    /// What describes the model: `producer` (`pytorch 2.15.0`), `opset`, `nodes`, `folded`.
    pub metadata: BTreeMap<String, String>,
}

/// Where an ONNX model's tensors come from: the `--inputs` and `--expect` files and the
/// `--shape` options.
#[derive(Debug, Clone, Default)]
pub struct OnnxFiles<'a> {
    /// A safetensors file holding every graph input by its ONNX name.
    pub inputs: Option<&'a Path>,
    /// A safetensors file holding reference outputs by ONNX graph output name.
    pub expect: Option<&'a Path>,
    /// Shapes of graph inputs by ONNX name, for symbolic dimensions (the given tensors'
    /// shapes are used for inputs not named here).
    pub shapes: BTreeMap<String, Vec<usize>>,
}

/// Reads, imports and binds an ONNX model: `path` is the `.onnx` file.
///
/// # Errors
/// [`ModelError::Io`] for an unreadable file, [`ModelError::Onnx`] for every import error
/// (garbage bytes, an unsupported operator or dtype, symbolic dimensions left open, ...),
/// [`ModelError::Format`] for a malformed safetensors file, [`ModelError::Missing`] without
/// an inputs file for a model that has inputs, [`ModelError::Unexpected`] for a tensor that
/// names no graph input (or output, in the expect file), [`ModelError::Onnx`] with
/// [`lumen_onnx::OnnxError::Binding`] for a graph input the file lacks or gives with another
/// dtype or shape, [`ModelError::ExpectDtype`] for a reference output of another dtype than
/// the program computes for it.
pub fn load_onnx(path: &Path, files: &OnnxFiles<'_>) -> Result<OnnxModel, ModelError> {
    let bytes = read(path)?;
    let given = match files.inputs {
        Some(p) => read_tensors(&read(p)?).map_err(in_file(p))?,
        None => Tensors::new(),
    };
    // Symbolic dimensions take the given tensors' shapes unless --shape says otherwise.
    let mut shapes = files.shapes.clone();
    for (name, t) in &given {
        shapes.entry(name.clone()).or_insert_with(|| t.shape().to_vec());
    }
    let declared = lumen_onnx::import::graph_input_names(&bytes)?;
    if let Some(name) = given.keys().find(|k| !declared.contains(k)) {
        return Err(ModelError::Unexpected {
            name: name.clone(),
            file: "inputs",
            expected: format!("graph inputs: {}", list(&declared)),
        });
    }
    let imported = import(
        &bytes,
        &ImportOptions {
            shapes,
            // Inputs a node needs at import time (a Reshape's shape, Resize's scales)
            // specialise the program; the others stay program inputs.
            values: given.clone(),
        },
    )?;
    if let (None, Some(first)) = (files.inputs, imported.inputs.first()) {
        return Err(ModelError::Missing {
            name: first.onnx_name.clone(),
            what: "a graph input; give the inputs with --inputs FILE.safetensors",
        });
    }
    let inputs = imported.bind_inputs(&given)?;
    let expect = match files.expect {
        None => None,
        Some(p) => {
            let bytes = read(p)?;
            let mut reference = read_references(&bytes).map_err(in_file(p))?;
            let names: Vec<String> = imported.outputs.iter().map(|(o, _)| o.clone()).collect();
            if let Some(name) = reference.keys().find(|k| !names.contains(k)) {
                return Err(ModelError::Unexpected {
                    name: name.clone(),
                    file: "expect",
                    expected: format!("graph outputs: {}", list(&names)),
                });
            }
            let mut by_lumen = Tensors::new();
            for (onnx_name, lumen_name) in &imported.outputs {
                if let Some(t) = reference.shift_remove(onnx_name) {
                    // The output's type, as the program computes it.
                    let want = imported.output_dtype(lumen_name);
                    let Some(t) = as_computed(t, want) else {
                        return Err(ModelError::ExpectDtype {
                            path: p.display().to_string(),
                            name: onnx_name.clone(),
                            got: stored_dtype(&bytes, onnx_name),
                            computed: want.map_or("f32", DType::name),
                        });
                    };
                    by_lumen.insert(lumen_name.clone(), t);
                }
            }
            Some(by_lumen)
        }
    };
    let mut metadata = BTreeMap::new();
    metadata.insert("producer".to_string(), imported.producer.clone());
    metadata.insert("opset".to_string(), imported.opset.to_string());
    metadata.insert("nodes".to_string(), imported.nodes.to_string());
    metadata.insert("folded".to_string(), imported.folded.to_string());
    Ok(OnnxModel { imported, inputs, expect, metadata })
}

impl OnnxModel {
    /// `ONNX opset 17 (pytorch 2.15.0), 212 nodes (40 folded at import), 1.2M parameters:
    /// input_ids [2, 16] i64, attention_mask [2, 16] i64 -> logits`.
    pub fn describe(&self) -> String {
        let im = &self.imported;
        let params: usize = im.weights.values().map(|t| t.shape().iter().product::<usize>()).sum();
        // An f32 twin is the same graph input read as floats: named once, annotated.
        let twinned =
            |name: &str| im.inputs.iter().any(|i| i.cast_from.is_some() && i.onnx_name == name);
        let inputs: Vec<String> = im
            .inputs
            .iter()
            .filter(|i| i.cast_from.is_none())
            .map(|i| {
                let also = if twinned(&i.onnx_name) { " (also read as f32)" } else { "" };
                format!("{} {:?} {}{also}", i.onnx_name, i.shape, i.dtype)
            })
            .collect();
        let outputs: Vec<&str> = im.outputs.iter().map(|(o, _)| o.as_str()).collect();
        let producer = if im.producer.is_empty() { "unknown producer" } else { &im.producer };
        let mut text = format!(
            "ONNX opset {} ({producer}), {} nodes ({} folded at import), {} parameters: {} -> {}",
            im.opset,
            im.nodes,
            im.folded,
            params,
            if inputs.is_empty() { "no inputs".to_string() } else { inputs.join(", ") },
            outputs.join(", ")
        );
        if !im.specialized.is_empty() {
            text.push_str(&format!(
                "; specialised to the given values of {}",
                im.specialized.join(", ")
            ));
        }
        for (name, reason) in &im.skipped {
            text.push_str(&format!("; output {name} left out: {reason}"));
        }
        text
    }
}

/// Names the tensor file an error is about.
fn in_file(path: &Path) -> impl Fn(ModelError) -> ModelError + '_ {
    move |e| ModelError::InFile { path: path.display().to_string(), source: Box::new(e) }
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path)
        .map_err(|e| ModelError::Io { path: path.display().to_string(), reason: e.to_string() })
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "none".to_string() } else { names.join(", ") }
}

/// Reference `t` in the dtype the program computes (`want`; `None` = f32): as it is when the
/// dtypes agree; an integer reference of another width (onnxruntime's uint8 or int32 output of
/// a value lumen computes as i64) converted when every value fits; `None` otherwise.
fn as_computed(t: HostTensor, want: Option<DType>) -> Option<HostTensor> {
    let want = want.unwrap_or(DType::F32);
    if t.dtype() == want {
        return Some(t);
    }
    let values = t.index_values()?;
    let shape = t.shape().to_vec();
    match want {
        DType::I64 => HostTensor::from_i64(shape, values).ok(),
        DType::I32 => {
            let narrow: Option<Vec<i32>> = values.iter().map(|&v| i32::try_from(v).ok()).collect();
            HostTensor::from_i32(shape, narrow?).ok()
        }
        _ => None,
    }
}

/// How the safetensors file `bytes` stores tensor `name`, lowercase (`i64`, `u8`, `bool`), for
/// messages: a `bool` tensor is read as f32 0.0 and 1.0, but the message names the file's type.
fn stored_dtype(bytes: &[u8], name: &str) -> String {
    SafeTensors::deserialize(bytes)
        .ok()
        .and_then(|st| st.tensor(name).ok().map(|v| format!("{:?}", v.dtype()).to_lowercase()))
        .unwrap_or_else(|| "another dtype".to_string())
}

/// Every tensor of a safetensors file, sorted by name: f32 as values, i64 and i32 as indices
/// (little-endian, row-major), bool as f32 0.0 and 1.0.
///
/// # Errors
/// [`ModelError::Format`] for a malformed file, [`ModelError::Dtype`] for another dtype.
pub fn read_tensors(bytes: &[u8]) -> Result<Tensors, ModelError> {
    read_with(bytes, super::decode, "F32, I64, I32 or BOOL")
}

/// [`read_tensors`] for reference outputs: integers of any width up to 64 bits too (u8, i8,
/// u16, i16 as i32; u32 as i64), compared by value.
///
/// # Errors
/// As [`read_tensors`].
pub fn read_references(bytes: &[u8]) -> Result<Tensors, ModelError> {
    read_with(bytes, super::decode_reference, "F32, I64, I32, U32, I16, U16, I8, U8 or BOOL")
}

type Decode = fn(&safetensors::tensor::TensorView<'_>) -> Result<Option<HostTensor>, ModelError>;

fn read_with(bytes: &[u8], decode: Decode, expected: &'static str) -> Result<Tensors, ModelError> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::Format(e.to_string()))?;
    let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
    // safetensors' header is a JSON object; its order is not the writer's, so sort by name.
    names.sort();
    let mut out = Tensors::new();
    for name in names {
        let view = st.tensor(&name).map_err(|e| ModelError::Format(e.to_string()))?;
        let Some(t) = decode(&view)? else {
            return Err(ModelError::Dtype { name, got: format!("{:?}", view.dtype()), expected });
        };
        out.insert(name, t);
    }
    Ok(out)
}
