//! End-to-end: `lumen run` on the vision transformers trained by PyTorch
//! (data/make_digits_vit.py): the shipped file and a second architecture made by the same
//! script, both reproducing PyTorch's accuracy and logits; and bad files, each one error line.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use lumen::model::{self, Model};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, serialize};
use serde_json::Value;

mod common;

use common::{error_line_of, json_of, lumen_no_cuda_env as lumen};

const VIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_vit.safetensors");
const VIT_SMALL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_vit_small.safetensors");

fn json(args: &[&str]) -> Value {
    json_of(lumen(args))
}

#[test]
fn the_vit_file_holds_what_its_metadata_declares() {
    let Model::Vit(m) = model::load(Path::new(VIT)).unwrap() else { panic!("not a ViT") };
    assert_eq!(m.config.image, [8, 8]);
    assert_eq!((m.config.patch, m.config.width, m.config.heads), (2, 32, 4));
    assert_eq!((m.config.blocks, m.config.ffn, m.config.classes), (2, 64, 10));
    assert_eq!(m.config.tokens(), 16);
    assert_eq!(m.weights.len(), m.config.weights().len());
    assert_eq!(m.x.shape(), [450, 64]);
    assert_eq!(m.labels.as_ref().map(Vec::len), Some(450));
    assert_eq!(m.metadata["framework"], "PyTorch 2.15.0");
    // The DSL program declares exactly the weights the file holds, in the listed order.
    let hlir = m.graph().unwrap().hlir();
    let declared: Vec<(String, Vec<usize>)> = hlir
        .graph
        .node_indices()
        .filter_map(|n| match &hlir.graph[n].op {
            lumen_compiler::HlirOp::Weight { name, shape, .. } => {
                Some((name.clone(), shape.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(declared, m.config.weights());
}

/// Both files: accuracy equal to PyTorch's on all 450 images, logits within 1e-4, fused and
/// unfused alike; the report names the architecture and the framework.
#[test]
fn both_architectures_match_pytorch() {
    for (file, correct) in [(VIT, 440), (VIT_SMALL, 436)] {
        for mode in ["--no-search", "--no-fuse"] {
            let v = json(&["run", file, "--json", mode, "--runs", "2"]);
            assert_eq!(v["passed"], true, "{file} {mode}: {v}");
            assert_eq!(v["architecture"], "vit");
            assert_eq!(v["correct"], correct, "{file}");
            assert_eq!(v["samples"], 450);
            let framework = v["framework_accuracy"].as_f64().unwrap();
            assert!((v["accuracy"].as_f64().unwrap() - framework).abs() < 1e-6, "{file}");
            assert!(v["max_abs_err"].as_f64().unwrap() <= 1e-4, "{file}: {}", v["max_abs_err"]);
            assert_eq!(v["reference_accuracy_source"], "framework");
        }
    }
    let out = lumen(&["run", VIT, "--no-search"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "model      {VIT}: ViT 8x8 image, 2x2 patches -> 16 tokens, width 32, 4 heads, 2 \
             blocks, FFN 64, erf-GELU, 10 classes, batch 450\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("accuracy   97.78% (440/450) against y (PyTorch 2.15.0: 97.78%)"),
        "{text}"
    );
}

/// The search runs too: the candidate table has the unfused and the bias-fused programs (the
/// erf-GELU has no epilogue, so full fusion is the bias program itself).
#[test]
fn the_search_measures_the_vit_candidates() {
    let v = json(&["run", VIT_SMALL, "--json", "--trials", "1", "--runs", "1"]);
    assert_eq!(v["passed"], true, "{v}");
    let labels: Vec<&str> =
        v["candidates"].as_array().unwrap().iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["unfused", "bias"]);
}

/// The shipped ViT with its tensors and metadata edited, written to `dir/name`.
fn edited(
    dir: &Path,
    name: &str,
    edit: impl FnOnce(&mut BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>, &mut HashMap<String, String>),
) -> String {
    let bytes = std::fs::read(VIT).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut meta =
        safetensors::SafeTensors::read_metadata(&bytes).unwrap().1.metadata().clone().unwrap();
    let mut tensors: BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, (v.dtype(), v.shape().to_vec(), v.data().to_vec())))
        .collect();
    edit(&mut tensors, &mut meta);
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, (d, s, b))| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, serialize(views, Some(meta)).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn bad_vit_files_are_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    type Edit = Box<
        dyn FnOnce(
            &mut BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>,
            &mut HashMap<String, String>,
        ),
    >;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "heads",
            Box::new(|_, m| {
                m.insert("heads".into(), "5".into());
            }),
            "metadata `heads` width 32 is not a multiple of 5 heads",
        ),
        (
            "patch",
            Box::new(|_, m| {
                m.insert("patch".into(), "3".into());
            }),
            "metadata `patch` 3 does not divide the 8x8 image",
        ),
        (
            "arch",
            Box::new(|_, m| {
                m.insert("architecture".into(), "resnet".into());
            }),
            "unknown architecture \"resnet\" in the file's metadata (expected mlp or vit)",
        ),
        (
            "blocks",
            Box::new(|_, m| {
                m.remove("blocks");
            }),
            "metadata `blocks` is missing",
        ),
        (
            "width",
            Box::new(|_, m| {
                m.insert("width".into(), "wide".into());
            }),
            "metadata `width` is \"wide\", not a positive whole number",
        ),
        (
            "image",
            Box::new(|_, m| {
                m.insert("image".into(), "8x".into());
            }),
            "metadata `image` is \"8x\", not HxW in pixels (e.g. 8x8)",
        ),
        (
            "missing",
            Box::new(|t, _| {
                t.remove("blk1.q.w");
            }),
            "the file has no tensor `blk1.q.w` (a weight of the vision transformer)",
        ),
        (
            "extra-block",
            Box::new(|_, m| {
                m.insert("blocks".into(), "3".into());
            }),
            "the file has no tensor `blk2.ln1.g` (a weight of the vision transformer)",
        ),
        (
            // Refused before a name is listed for each of 10^11 blocks (that ran out of memory).
            "huge-blocks",
            Box::new(|_, m| {
                m.insert("blocks".into(), "100000000000".into());
            }),
            "metadata `blocks` is 100000000000, but the file holds only 42 tensors (16 a block)",
        ),
        (
            "huge-image",
            Box::new(|_, m| {
                m.insert("image".into(), "4294967296x4294967296".into());
            }),
            "metadata `image` is \"4294967296x4294967296\": 4294967296x4294967296 pixels do not \
             fit in memory",
        ),
        (
            "pos",
            Box::new(|t, _| {
                let pos = t.get_mut("pos").unwrap();
                pos.1 = vec![8, 64];
            }),
            "tensor `pos` has shape [8, 64], expected [16, 32]",
        ),
        (
            "x",
            Box::new(|t, _| {
                let x = t.get_mut("x").unwrap();
                x.1 = vec![900, 32];
            }),
            "tensor `x` has shape [900, 32], expected [B, 64] with B >= 1 (the 8x8 image)",
        ),
    ];
    for (name, edit, want) in cases {
        let file = edited(dir.path(), &format!("{name}.safetensors"), edit);
        let out = lumen(&["run", &file, "--no-search"]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let line = error_line_of(&["run", &file], out);
        assert!(!line.contains("panicked"), "{line}");
        assert_eq!(
            line.trim_end(),
            format!("error: cannot load a model from {file}: {want}"),
            "{name}"
        );
    }
}

#[path = "../examples/vit.rs"]
mod vit_example;

/// examples/vit.rs writes the ViT out in the DSL beside PyTorch's forward pass: it builds the
/// same LLIR as the library's `models::vit` and matches PyTorch's logits.
#[test]
fn the_vit_example_runs() {
    vit_example::main().expect("the example runs");
}
