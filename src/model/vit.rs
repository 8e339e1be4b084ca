//! The vision-transformer file layout, the one `data/make_digits_vit.py` writes from PyTorch.
//!
//! Metadata (strings): `architecture` = `vit`; `image` = `HxW` in pixels (`8x8`); `patch`
//! (the patch side in pixels, dividing both image sides); `width` (D, a multiple of
//! `heads`); `heads`; `blocks`; `ffn` (the FFN hidden width F); `classes` (C); optional `eps`
//! (layer-norm epsilon, default 1e-5) and `gelu` (`erf`, the default, or `tanh`); optional
//! `framework` (who trained it, for the report) and `framework_accuracy` (the accuracy to
//! reproduce).
//!
//! Tensors (f32 unless said; weights `[in, out]`, `y = x @ w + b`):
//! `x` `[B, H*W]` the images, row-major pixels; `embed.w` `[P*P, D]`, `embed.b` `[D]`;
//! `pos` `[T, D]` with T = (H/P)(W/P) patches in row-major order over the patch grid, each
//! patch's pixels row-major; for each block `i`: `blk{i}.ln1.g`, `blk{i}.ln1.b` `[D]`,
//! `blk{i}.{q,k,v,o}.w` `[D, D]` and `.b` `[D]`, `blk{i}.ln2.g`, `blk{i}.ln2.b` `[D]`,
//! `blk{i}.ff1.w` `[D, F]`, `.b` `[F]`, `blk{i}.ff2.w` `[F, D]`, `.b` `[D]`; `norm.g`,
//! `norm.b` `[D]`; `head.w` `[D, C]`, `head.b` `[C]`; optional `y` `[B]` (i64 or i32
//! labels) and `logits` `[B, C]` (the framework's). The network is
//! [`lumen_compiler::models::vit`].

use std::collections::BTreeMap;

use lumen_compiler::models::{Gelu, VitConfig, vit};
use lumen_compiler::{Graph, ShapeText};
use lumen_runtime::{HostTensor, Tensors};
use safetensors::SafeTensors;

use super::{ModelError, f32_tensor, labels_and_logits, read_metadata, shape_err};

/// A vision transformer read from a file, with its input batch and what to check against.
#[derive(Debug, Clone, PartialEq)]
pub struct VitModel {
    /// The hyper-parameters from the metadata.
    pub config: VitConfig,
    /// Every weight, by the names [`VitConfig::weights`] lists.
    pub weights: Tensors,
    /// Inputs `x` `[B, H*W]`.
    pub x: HostTensor,
    /// Labels `y` `[B]`, if the file has them.
    pub labels: Option<Vec<i64>>,
    /// Reference logits `[B, C]`, if the file has them.
    pub logits: Option<HostTensor>,
    /// The file header's `__metadata__`, sorted by key.
    pub metadata: BTreeMap<String, String>,
}

/// A positive whole number from metadata `key`.
fn count(meta: &BTreeMap<String, String>, key: &'static str) -> Result<usize, ModelError> {
    let value = meta
        .get(key)
        .ok_or_else(|| ModelError::Metadata { key, problem: "is missing".to_string() })?;
    match value.trim().parse::<usize>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(ModelError::Metadata {
            key,
            problem: format!("is {value:?}, not a positive whole number"),
        }),
    }
}

/// The hyper-parameters a file's metadata states (see the module docs).
///
/// # Errors
/// [`ModelError::Metadata`] naming the key that is missing or malformed, or sizes that do
/// not divide (`patch`: `4 does not divide the 6x6 image`; `heads`: `width 30 is not a
/// multiple of 4 heads`).
pub fn config(meta: &BTreeMap<String, String>) -> Result<VitConfig, ModelError> {
    let image = meta
        .get("image")
        .ok_or_else(|| ModelError::Metadata { key: "image", problem: "is missing".to_string() })?;
    let sides: Option<Vec<usize>> = image
        .trim()
        .split('x')
        .map(|s| s.trim().parse::<usize>().ok().filter(|&v| v > 0))
        .collect();
    let [h, w] = sides.as_deref().unwrap_or(&[]) else {
        return Err(ModelError::Metadata {
            key: "image",
            problem: format!("is {image:?}, not HxW in pixels (e.g. 8x8)"),
        });
    };
    // H*W must fit in a size: every shape built from the image is at most that.
    if h.checked_mul(*w).is_none_or(|p| p > isize::MAX as usize) {
        return Err(ModelError::Metadata {
            key: "image",
            problem: format!("is {image:?}: {h}x{w} pixels do not fit in memory"),
        });
    }
    let eps = match meta.get("eps") {
        None => 1e-5,
        Some(v) => match v.trim().parse::<f32>() {
            Ok(e) if e.is_finite() && e > 0.0 => e,
            _ => {
                return Err(ModelError::Metadata {
                    key: "eps",
                    problem: format!("is {v:?}, not a positive number"),
                });
            }
        },
    };
    let gelu = match meta.get("gelu").map(|g| g.trim()) {
        None | Some("erf") => Gelu::Erf,
        Some("tanh") => Gelu::Tanh,
        Some(other) => {
            return Err(ModelError::Metadata {
                key: "gelu",
                problem: format!("is {other:?}, expected erf or tanh"),
            });
        }
    };
    let config = VitConfig {
        image: [*h, *w],
        patch: count(meta, "patch")?,
        width: count(meta, "width")?,
        heads: count(meta, "heads")?,
        blocks: count(meta, "blocks")?,
        ffn: count(meta, "ffn")?,
        classes: count(meta, "classes")?,
        eps,
        gelu,
    };
    if h % config.patch != 0 || w % config.patch != 0 {
        return Err(ModelError::Metadata {
            key: "patch",
            problem: format!("{} does not divide the {h}x{w} image", config.patch),
        });
    }
    if !config.width.is_multiple_of(config.heads) {
        return Err(ModelError::Metadata {
            key: "heads",
            problem: format!("width {} is not a multiple of {} heads", config.width, config.heads),
        });
    }
    Ok(config)
}

/// Parses a vision transformer from safetensors bytes: its hyper-parameters from the
/// metadata ([`config`]), then every weight [`VitConfig::weights`] lists with exactly its
/// shape, `x` `[B, H*W]` (B >= 1), and the optional `y` `[B]` and `logits` `[B, C]`. Other
/// tensors are ignored.
///
/// # Errors
/// [`ModelError::Format`] for a malformed file; [`ModelError::Metadata`] (see [`config`]);
/// `Missing` for an absent weight or `x`, `Dtype` (not f32; labels not integer) and `Shape`
/// naming the tensor and the shape it needs.
pub fn parse_vit(bytes: &[u8]) -> Result<VitModel, ModelError> {
    let metadata = read_metadata(bytes)?;
    let config = config(&metadata)?;
    let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::Format(e.to_string()))?;
    let pixels = config.image[0] * config.image[1];
    // Each block has 16 tensors: a `blocks` the file cannot hold is refused before the names
    // of every block's tensors are listed (billions of them for a corrupt value).
    if config.blocks > st.len() {
        return Err(ModelError::Metadata {
            key: "blocks",
            problem: format!(
                "is {}, but the file holds only {} tensors (16 a block)",
                config.blocks,
                st.len()
            ),
        });
    }
    let x = f32_tensor(&st, "x", "the input images [B, H*W]")?;
    let batch = match *x.shape() {
        [b, p] if b > 0 && p == pixels => b,
        _ => {
            let expected = format!(
                "[B, {pixels}] with B >= 1 (the {}x{} image)",
                config.image[0], config.image[1]
            );
            return Err(shape_err("x", x.shape(), expected));
        }
    };
    let mut weights = Tensors::new();
    for (name, shape) in config.weights() {
        let t = f32_tensor(&st, &name, "a weight of the vision transformer")?;
        if t.shape() != shape.as_slice() {
            return Err(shape_err(&name, t.shape(), ShapeText(shape).to_string()));
        }
        weights.insert(name, t);
    }
    let (labels, logits) = labels_and_logits(&st, batch, config.classes)?;
    Ok(VitModel { config, weights, x, labels, logits, metadata })
}

impl VitModel {
    /// `ViT 8x8 image, 2x2 patches -> 16 tokens, width 32, 4 heads, 2 blocks, FFN 64,
    /// erf-GELU, 10 classes`.
    pub fn describe(&self) -> String {
        let c = &self.config;
        let gelu = match c.gelu {
            Gelu::Erf => "erf-GELU",
            Gelu::Tanh => "tanh-GELU",
        };
        format!(
            "ViT {}x{} image, {p}x{p} patches -> {} tokens, width {}, {} heads, {} {}, FFN {}, \
             {gelu}, {} classes",
            c.image[0],
            c.image[1],
            c.tokens(),
            c.width,
            c.heads,
            c.blocks,
            if c.blocks == 1 { "block" } else { "blocks" },
            c.ffn,
            c.classes,
            p = c.patch,
        )
    }

    /// The network in the DSL ([`vit`]) over this batch.
    ///
    /// # Errors
    /// [`ModelError::Compile`] when the builder refuses the sizes (never for a parsed model).
    pub fn graph(&self) -> Result<Graph, ModelError> {
        Ok(vit(&self.config, self.x.shape().first().copied().unwrap_or(0))?)
    }
}
