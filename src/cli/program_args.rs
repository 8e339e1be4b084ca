//! The program to compile, shared by `lumen compile` and `lumen compare`: a built-in program
//! and its sizes, or an ONNX model (a file ending in `.onnx`) with `--shape` for its symbolic
//! dimensions.

use std::path::Path;

use anyhow::Context;
use clap::builder::TypedValueParser as _;
use lumen_compiler::programs::{self, BuiltinArgs};
use lumen_compiler::{Graph, Target};

use super::usage::UsageError;

/// Which built-in program to build, with its sizes (`--m --k --n` for linear-relu,
/// `--layers --batch` for the mlp, `--batch --seq --width --heads --ffn --layers` for the
/// transformer). A size left out takes the program's default (shown by
/// `--help`, applied in [`programs::builtin`]); a size of the other program is an error.
#[derive(Debug, Clone, clap::Args)]
pub struct ProgramArgs {
    /// The built-in program (`linear-relu`, `mlp` or `transformer`), or an ONNX model file
    /// (`MODEL.onnx`).
    pub program: String,
    /// ONNX: the shape of a graph input, for dimensions the model leaves symbolic
    /// (`--shape input_ids=1,16`; repeatable).
    #[arg(long, value_name = "NAME=DIMS", value_parser = parse_shape)]
    pub shape: Vec<(String, Vec<usize>)>,
    /// linear-relu: rows of x.
    #[arg(long, value_name = "M", help = with_default("linear-relu: rows of x", programs::DEFAULT_M))]
    pub m: Option<usize>,
    /// linear-relu: inner dimension (columns of x, rows of w).
    #[arg(long, value_name = "K", help = with_default(
        "linear-relu: inner dimension (columns of x, rows of w)", programs::DEFAULT_K))]
    pub k: Option<usize>,
    /// linear-relu: columns of w and y.
    #[arg(long, value_name = "N", help = with_default("linear-relu: columns of w and y", programs::DEFAULT_N))]
    pub n: Option<usize>,
    /// mlp: layer sizes, input first, comma-separated; transformer: encoder blocks.
    #[arg(long, value_name = "SIZES", help = format!(
        "mlp: layer sizes, input first, comma-separated [default: {}]; transformer: encoder \
         blocks [default: {}]", layers_text(programs::DEFAULT_LAYERS), programs::DEFAULT_BLOCKS))]
    pub layers: Option<String>,
    /// mlp: batch rows; transformer: sequences.
    #[arg(long, value_name = "ROWS", help = format!(
        "mlp: batch rows [default: {}]; transformer: sequences [default: {}]",
        programs::DEFAULT_BATCH, programs::DEFAULT_TRANSFORMER_BATCH))]
    pub batch: Option<usize>,
    /// transformer: tokens per sequence.
    #[arg(long, value_name = "S", help = with_default("transformer: tokens per sequence", programs::DEFAULT_SEQ))]
    pub seq: Option<usize>,
    /// transformer: model width (a multiple of --heads).
    #[arg(long, value_name = "D", help = with_default(
        "transformer: model width, a multiple of --heads", programs::DEFAULT_WIDTH))]
    pub width: Option<usize>,
    /// transformer: attention heads.
    #[arg(long, value_name = "H", help = with_default("transformer: attention heads", programs::DEFAULT_HEADS))]
    pub heads: Option<usize>,
    /// transformer: FFN hidden width.
    #[arg(long, value_name = "F", help = with_default("transformer: FFN hidden width", programs::DEFAULT_FFN))]
    pub ffn: Option<usize>,
}

/// `--help` text with the default clap would show for a `default_value`: the defaults live in
/// the compiler, which applies them, so that a size given to the wrong program can be told
/// from one left out.
fn with_default(help: &str, default: impl std::fmt::Display) -> String {
    format!("{help} [default: {default}]")
}

fn layers_text(layers: &[usize]) -> String {
    layers.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Parses `NAME=D0,D1,...` (a graph input's name and its dimensions, each a whole number).
///
/// # Errors
/// A message for clap when the `=`, the name or a dimension is missing or malformed.
pub fn parse_shape(text: &str) -> Result<(String, Vec<usize>), String> {
    let (name, dims) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=DIMS (e.g. input_ids=1,16)"))?;
    if name.is_empty() {
        return Err(format!("`{text}` names no input (NAME=DIMS, e.g. input_ids=1,16)"));
    }
    let dims = dims
        .split(',')
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("`{dims}` is not a comma-separated list of whole numbers"))?;
    Ok((name.to_string(), dims))
}

/// The `--shape` options by input name.
///
/// # Errors
/// A [`UsageError`] when one input is given two shapes.
pub fn shape_map(
    shapes: &[(String, Vec<usize>)],
) -> Result<std::collections::BTreeMap<String, Vec<usize>>, UsageError> {
    let mut map = std::collections::BTreeMap::new();
    for (name, dims) in shapes {
        if map.insert(name.clone(), dims.clone()).is_some() {
            return Err(UsageError::new(format!("--shape gives input `{name}` twice")));
        }
    }
    Ok(map)
}

impl ProgramArgs {
    /// Whether the program is an ONNX model file rather than a built-in program.
    pub fn is_onnx(&self) -> bool {
        lumen::model::is_onnx(Path::new(&self.program))
    }

    /// The program's name in labels and dump files: the built-in program's, or the ONNX
    /// file's stem made a valid program name.
    pub fn label(&self) -> String {
        if !self.is_onnx() {
            return self.program.clone();
        }
        Path::new(&self.program)
            .file_stem()
            .map(|s| lumen_compiler::compile::sanitize_program_name(&s.to_string_lossy()))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "model".to_string())
    }

    /// Imports the ONNX model the program names.
    fn onnx_graph(&self) -> anyhow::Result<Graph> {
        let sizes = [
            (self.m.is_some(), "--m"),
            (self.k.is_some(), "--k"),
            (self.n.is_some(), "--n"),
            (self.layers.is_some(), "--layers"),
            (self.batch.is_some(), "--batch"),
            (self.seq.is_some(), "--seq"),
            (self.width.is_some(), "--width"),
            (self.heads.is_some(), "--heads"),
            (self.ffn.is_some(), "--ffn"),
        ];
        if let Some((_, flag)) = sizes.iter().find(|(given, _)| *given) {
            return Err(UsageError::new(format!(
                "{flag} applies to the built-in programs, not an ONNX model (give its input \
                 shapes with --shape NAME=DIMS)"
            ))
            .into());
        }
        let bytes = std::fs::read(&self.program)
            .with_context(|| format!("cannot read {}", self.program))?;
        let options =
            lumen_onnx::ImportOptions { shapes: shape_map(&self.shape)?, ..Default::default() };
        let imported = lumen_onnx::import(&bytes, &options)
            .with_context(|| format!("cannot import {}", self.program))?;
        Ok(imported.graph)
    }

    /// Builds the program.
    ///
    /// # Errors
    /// For an ONNX model, the file's read and import errors (status 1) and a [`UsageError`]
    /// for a built-in program's size flag. Otherwise a [`UsageError`] (status 2) for an
    /// unknown program name, a size of another program
    /// (`--layers applies to mlp and transformer, not linear-relu`) or a malformed `--layers` list; the
    /// compiler's error (status 1) for sizes the program refuses (`--m 0`, `--layers 64`, a
    /// tensor too large).
    pub fn graph(&self) -> anyhow::Result<Graph> {
        if self.is_onnx() {
            return self.onnx_graph();
        }
        if !self.shape.is_empty() {
            return Err(UsageError::new(format!(
                "--shape applies to ONNX models (a file ending in .onnx), not the built-in \
                 program {}",
                self.program
            ))
            .into());
        }
        // Only which flags were given matters here, so --layers' text is not parsed yet.
        let given = BuiltinArgs {
            m: self.m,
            k: self.k,
            n: self.n,
            layers: self.layers.as_ref().map(|_| Vec::new()),
            batch: self.batch,
            seq: self.seq,
            width: self.width,
            heads: self.heads,
            ffn: self.ffn,
        }
        .given();
        // Before parsing --layers: `linear-relu --layers x` is about the flag, not its text.
        programs::check_applicable(&self.program, &given).map_err(UsageError::new)?;
        let sizes = BuiltinArgs {
            m: self.m,
            k: self.k,
            n: self.n,
            layers: self
                .layers
                .as_deref()
                .map(programs::parse_layers)
                .transpose()
                .map_err(UsageError::new)?,
            batch: self.batch,
            seq: self.seq,
            width: self.width,
            heads: self.heads,
            ffn: self.ffn,
        };
        let graph = programs::builtin(&self.program, &sizes)?;
        if let Some(err) = graph.recorded_error() {
            return Err(err.into());
        }
        Ok(graph)
    }
}

/// The compile target and the slab options it sets, shared by `lumen compile` and
/// `lumen compare`: `--target cpu|cuda` picks the cuBLASLt workspace and the alignment
/// ([`Target`]); `--workspace-bytes` and `--alignment` override them one by one. Without
/// `--target` the command's default applies: `cuda` for `compile` and `compare` (so every
/// golden plan holds), the measuring runtime's for `compare --profile`.
#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// The runtime to compile for: `cuda` reserves a cuBLASLt workspace per matmul (1 MiB),
    /// `cpu` none [default: cuda; with compare --profile, the --runtime's].
    #[arg(long, value_name = "TARGET",
          value_parser = clap::builder::PossibleValuesParser::new(Target::NAMES)
              .map(|name| Target::from_name(&name).unwrap_or_default()))]
    pub target: Option<Target>,
    /// cuBLASLt workspace per matmul, in bytes [default: the target's, 1048576 for cuda, 0
    /// for cpu; 0 gives a matmul no workspace buffer].
    #[arg(long, value_name = "BYTES")]
    pub workspace_bytes: Option<usize>,
    /// Slab alignment in bytes: a power of two of at least 4 (whole f32 elements); 256 (both
    /// targets' default) is cuBLASLt's pointer alignment, which the CUDA runtime needs.
    #[arg(long, value_name = "BYTES")]
    pub alignment: Option<usize>,
}

impl TargetArgs {
    /// `--target`, else `default`.
    pub fn target(&self, default: Target) -> Target {
        self.target.unwrap_or(default)
    }

    /// The target's [`CompileOptions`](lumen_compiler::CompileOptions) (`--target`, else
    /// `default`) with the `--workspace-bytes` and `--alignment` given.
    pub fn options(&self, default: Target) -> lumen_compiler::CompileOptions {
        let base = self.target(default).options();
        lumen_compiler::CompileOptions {
            workspace_bytes: self.workspace_bytes.unwrap_or(base.workspace_bytes),
            alignment: self.alignment.unwrap_or(base.alignment),
            ..base
        }
    }
}
