//! `TfIdfVectorizer` (opset 9 on, integer tokens): n-gram counts per row at run time, as
//! comparisons of shifted slices of the tokens with the pool's n-grams, multiplied over each
//! n-gram's tokens, summed over the start positions and skips, and spread to the output columns
//! by one constant matrix; then weighted by `mode`. Its row is in the reduction family's table.

use lumen_compiler::{DType, Tensor};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Importer, Value, attr_floats, attr_i, attr_ints, attr_s, one};
use crate::proto::NodeProto;

/// Tokens are compared in f32: exact while every pool token is below 2^24 in magnitude (a
/// larger input token then rounds to no pool token).
const MAX_TOKEN: i64 = 1 << 24;

/// The pool's n-grams of one length: their tokens (`tokens[j]` the j-th token of each, as
/// f32) and their output columns.
struct Level {
    /// The n-gram length.
    size: usize,
    /// `size` rows of one token per n-gram.
    tokens: Vec<Vec<f32>>,
    /// Each n-gram's output column, `None` for an n-gram a later identical one overrides.
    columns: Vec<Option<usize>>,
}

/// `TfIdfVectorizer`: for input `[C]` or `[B, C]` of integer tokens, output `[O]` or `[B, O]`
/// (`O = max(ngram_indexes) + 1`). An n-gram of the pool (`pool_int64s`, `ngram_counts` giving
/// where each length starts) whose length is within `min_gram_length..=max_gram_length` is
/// counted at every start position and, from length 2 on, every skip of up to
/// `max_skip_count` tokens between its tokens (ONNX's reference); its count goes to column
/// `ngram_indexes[k]` (`k` its position among the pool's n-grams). `mode` TF keeps the
/// counts, IDF gives `weights[col]` (or 1) where a count is positive, TFIDF multiplies by
/// `weights[col]` (or 1). `pool_strings` (string tokens) are refused.
pub(super) fn tfidf_vectorizer(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    if attr_ints(n, "pool_int64s").is_none() {
        return Err(im.unsupported(n, "pool_strings (lumen computes integer tokens only)"));
    }
    let pool = attr_ints(n, "pool_int64s").unwrap_or_default();
    if let Some(t) = pool.iter().find(|t| t.abs() >= MAX_TOKEN) {
        return Err(im.unsupported(
            n,
            format!("pool_int64s holds {t} (lumen compares tokens in f32, exact below 2^24)"),
        ));
    }
    let counts = attr_ints(n, "ngram_counts").unwrap_or_default();
    let indexes = attr_ints(n, "ngram_indexes").unwrap_or_default();
    let (min, max) = (attr_i(n, "min_gram_length", 0), attr_i(n, "max_gram_length", 0));
    let skips = attr_i(n, "max_skip_count", 0);
    if min < 1 || max < min || skips < 0 {
        return Err(im.malformed(
            n,
            format!(
                "min_gram_length {min}, max_gram_length {max}, max_skip_count {skips} (expected \
                 1 <= min <= max and skips >= 0)"
            ),
        ));
    }
    let mode = attr_s(n, "mode").unwrap_or_default();
    if !matches!(mode.as_str(), "TF" | "IDF" | "TFIDF") {
        return Err(im.malformed(n, format!("mode `{mode}` (TF, IDF or TFIDF)")));
    }
    if indexes.iter().any(|&i| i < 0) || indexes.is_empty() {
        return Err(im.malformed(n, format!("ngram_indexes {indexes:?} (non-negative, not empty)")));
    }
    let width = indexes.iter().copied().max().unwrap_or(0) as usize + 1;
    let weights = attr_floats(n, "weights").unwrap_or_default();
    if !weights.is_empty() && weights.len() < width {
        return Err(
            im.malformed(n, format!("{} weights for {width} output columns", weights.len()))
        );
    }
    // The pool's levels: length i + 1 from ngram_counts[i] to the next level's start.
    let mut levels: Vec<Level> = Vec::new();
    let mut id = 0usize;
    let mut seen: std::collections::HashMap<Vec<i64>, usize> = Default::default();
    for (i, &start) in counts.iter().enumerate() {
        let end = counts.get(i + 1).copied().unwrap_or(pool.len() as i64);
        if start < 0 || end < start || end as usize > pool.len() {
            return Err(im.malformed(
                n,
                format!("ngram_counts {counts:?} for a pool of {} tokens", pool.len()),
            ));
        }
        let size = i + 1;
        let grams = (end - start) as usize / size;
        if !(min as usize..=max as usize).contains(&size) || grams == 0 {
            id += grams;
            continue;
        }
        let mut level = Level { size, tokens: vec![Vec::new(); size], columns: Vec::new() };
        for g in 0..grams {
            let at = start as usize + g * size;
            let gram = pool[at..at + size].to_vec();
            let column = *indexes.get(id).ok_or_else(|| {
                im.malformed(
                    n,
                    format!("ngram_indexes has {} entries, fewer than the n-grams", indexes.len()),
                )
            })? as usize;
            // An identical n-gram seen before (of this length, so of this level) is overridden
            // by this one, as in the reference's map.
            if let Some(k) = seen.insert(gram.clone(), g) {
                level.columns[k] = None;
            }
            for (j, &t) in gram.iter().enumerate() {
                level.tokens[j].push(t as f32);
            }
            level.columns.push(Some(column));
            id += 1;
        }
        levels.push(level);
    }
    // Tokens are int32 or int64 (or strings): a float or boolean input is an invalid model,
    // which ONNX Runtime refuses at load. A computed f32 tensor is one or the other.
    let float = matches!(im.input(n, 0), Some(Value::Tensor(t)) if t.dtype() == Some(DType::F32));
    match im.known_type(n, 0) {
        Some(t @ ("float" | "bool" | "int8" | "uint8")) => {
            return Err(im.malformed(
                n,
                format!(
                    "input 0 (`{}`) is {t}; TfIdfVectorizer takes int32 or int64 tokens (ONNX \
                     Runtime refuses the model)",
                    n.input[0]
                ),
            ));
        }
        None if float => {
            return Err(im.malformed(
                n,
                format!(
                    "input 0 (`{}`) is a float or boolean tensor; TfIdfVectorizer takes int32 or \
                     int64 tokens",
                    n.input[0]
                ),
            ));
        }
        _ => {}
    }
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    let (rows, len) = match shape.as_slice() {
        [] => (1, 1),
        [c] => (1, *c),
        [b, c] if *b > 0 => (*b, *c),
        _ => {
            return Err(
                im.malformed(n, format!("input of shape {shape:?} (expected [C] or [B, C])"))
            );
        }
    };
    let x = x.reshape(vec![rows, len, 1]);
    let mut total: Option<Tensor> = None;
    for level in &levels {
        let grams = level.columns.len();
        let skips = if level.size == 1 { 0 } else { skips as usize };
        let mut tokens = Vec::with_capacity(level.size);
        for (j, column) in level.tokens.iter().enumerate() {
            let hint = format!("gram{}_token{j}", level.size);
            tokens.push(im.const_weight(n, &hint, Const::f32(vec![grams], column.clone()))?);
        }
        let mut level_counts: Option<Tensor> = None;
        for d in 1..=skips + 1 {
            let span = (level.size - 1) * d;
            if span >= len {
                break;
            }
            let starts = len - span;
            let mut hit: Option<Tensor> = None;
            for (j, token) in tokens.iter().enumerate() {
                let eq = x.slice(1, j * d, j * d + starts).equal(token);
                hit = Some(match hit {
                    None => eq,
                    Some(h) => h * eq,
                });
            }
            let Some(hit) = hit else { continue };
            let c = hit.sum(1, false);
            level_counts = Some(match level_counts {
                None => c,
                Some(acc) => acc + c,
            });
        }
        let Some(level_counts) = level_counts else { continue };
        let mut spread = vec![0f32; grams * width];
        for (k, column) in level.columns.iter().enumerate() {
            if let Some(col) = column {
                spread[k * width + col] = 1.0;
            }
        }
        let spread = im.const_weight(
            n,
            &format!("gram{}_columns", level.size),
            Const::f32(vec![grams, width], spread),
        )?;
        let out = level_counts.matmul(spread);
        total = Some(match total {
            None => out,
            Some(t) => t + out,
        });
    }
    let counts = match total {
        Some(t) => t,
        None => im.cx.constant(0.0).reshape(vec![1, 1]).expand(vec![rows, width]),
    };
    let weight = if weights.is_empty() {
        None
    } else {
        Some(im.const_weight(n, "weights", Const::f32(vec![width], weights[..width].to_vec()))?)
    };
    let y = match (mode.as_str(), weight) {
        ("IDF", w) => {
            let present = counts.less_than(0.5).neg() + 1.0;
            match w {
                Some(w) => present * w,
                None => present,
            }
        }
        ("TFIDF", Some(w)) => counts * w,
        _ => counts,
    };
    one(if shape.len() == 2 { y } else { y.reshape(vec![width]) })
}
