//! The digits vision transformer, written out in the DSL next to PyTorch's forward pass, then
//! run on the CPU against the logits PyTorch stored (data/digits_vit.safetensors, made by
//! data/make_digits_vit.py). The program is the one `lumen_compiler::models::vit` builds (the
//! example checks that their LLIR is identical), which `lumen run` uses.
//!
//! `cargo run --release --example vit`

use lumen::compiler::models::{BlockWeights, VitConfig, encoder_block, vit};
use lumen::compiler::{CompileOptions, Graph, dump};
use lumen::model::{self, Model};
use lumen::runtime::{CpuRuntime, Runtime};

/// The ViT of `c` over `batch` images, line by line beside `ViT.forward` in
/// data/make_digits_vit.py.
pub fn build(c: &VitConfig, batch: usize) -> Result<Graph, lumen::compiler::CompileError> {
    let ([h, w], p, d, tokens) = (c.image, c.patch, c.width, c.tokens());
    let mut cx = Graph::new();
    let x = cx.input("x", [batch, h * w]);
    let embed_w = cx.weight("embed.w", [p * p, d]);
    let embed_b = cx.weight("embed.b", [d]);
    let pos = cx.weight("pos", [tokens, d]);
    // patches = x.reshape(b, g, p, g, p).permute(0, 1, 3, 2, 4).reshape(b, tokens, p * p)
    let patches = x.reshape([batch, h / p, p, w / p, p]).permute(&[0, 1, 3, 2, 4]).reshape([
        batch,
        tokens,
        p * p,
    ]);
    // h = self.embed(patches) + self.pos
    let mut t = patches.linear(&embed_w, Some(&embed_b)) + &pos;
    // for block in self.blocks: h = block(h)
    for i in 0..c.blocks {
        let weights = BlockWeights::declare(&mut cx, i, d, c.ffn);
        t = encoder_block(&t, &weights, c.heads, c.eps, c.gelu)?;
    }
    // self.head(self.norm(h).mean(dim=1))
    let norm_g = cx.weight("norm.g", [d]);
    let norm_b = cx.weight("norm.b", [d]);
    let head_w = cx.weight("head.w", [d, c.classes]);
    let head_b = cx.weight("head.b", [c.classes]);
    let pooled = t.layer_norm(&norm_g, &norm_b, c.eps).mean(1, false).name("pooled");
    pooled.linear(&head_w, Some(&head_b)).output("y");
    Ok(cx)
}

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits_vit.safetensors");
    let Model::Vit(m) = model::load(std::path::Path::new(path))? else {
        return Err("not a ViT file".into());
    };
    let batch = m.x.shape()[0];
    let options = CompileOptions { name: "digits-vit".to_string(), ..CompileOptions::default() };
    let program = build(&m.config, batch)?.compile(&options)?;
    let library = vit(&m.config, batch)?.compile(&options)?;
    assert_eq!(dump::llir_text(&program), dump::llir_text(&library), "the same program");

    let mut prepared = CpuRuntime::default().prepare(&program, &m.weights)?;
    let inputs = [("x".to_string(), m.x.clone())].into_iter().collect();
    let logits = prepared.execute(&inputs)?.swap_remove("y").ok_or("no output y")?;
    let labels = m.labels.as_deref().ok_or("no labels")?;
    let (correct, accuracy) = model::accuracy(&logits, labels);
    let reference = m.logits.as_ref().ok_or("no reference logits")?;
    let err = model::max_abs_err(&logits, reference).ok_or("shape mismatch")?;
    println!(
        "{}: {} launches, slab {} bytes",
        Model::Vit(m.clone()).describe(),
        program.figures.launches,
        program.figures.slab_bytes
    );
    println!(
        "accuracy {:.2}% ({correct}/{}), {}: {}; max |lumen - PyTorch| {err:.2e}",
        accuracy * 100.0,
        labels.len(),
        m.metadata.get("framework").map_or("framework", String::as_str),
        m.metadata.get("framework_accuracy").map_or("?", String::as_str),
    );
    assert!(err <= 1e-4);
    Ok(())
}
