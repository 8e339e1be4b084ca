//! `Attention` (opset 23 on): scaled dot-product attention over `[batch, heads, seq, head]`
//! tensors (or `[batch, seq, hidden]` with `q_num_heads` and `kv_num_heads`), as matmuls, a
//! softmax and selects; masks, the causal and sliding-window frontiers, the key/value cache
//! and grouped-query heads follow ONNX's reference (`onnx.reference.ops.op_attention`).
//! `RotaryEmbedding` (opset 23 on) rotates query/key pairs by position (RoFormer's rotary
//! position embedding), as `onnx.reference.ops.op_rotary_embedding` does. The recurrent
//! blocks of linear-attention and state-space decoders (opset 27): `LinearAttention`, unrolled
//! over the static sequence, and `CausalConvWithState`, a depthwise causal convolution.

use lumen_compiler::{ConvSpec, Tensor};

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr, attr_f, attr_i, attr_s};
use crate::proto::NodeProto;

/// The attention operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("Attention", attention),
    ("RotaryEmbedding", rotary_embedding),
    ("LinearAttention", linear_attention),
    ("CausalConvWithState", causal_conv_with_state),
];

/// `[batch, seq, heads * head]` as `[batch, heads, seq, head]` (a view).
fn split_heads(im: &Importer, n: &NodeProto, t: Tensor, heads: usize) -> Result<Tensor, OnnxError> {
    let shape = t.shape().unwrap_or_default();
    if heads == 0 || shape[2] % heads != 0 {
        return Err(
            im.malformed(n, format!("{heads} heads do not divide a hidden size of {}", shape[2]))
        );
    }
    Ok(t.reshape(vec![shape[0], shape[1], heads, shape[2] / heads]).permute(&[0, 2, 1, 3]))
}

/// `Attention`: `softmax(softcap(Q K^T scale) + bias) V` per head, `bias` the sum of the
/// mask (bool: 0 or -inf; float: added), the causal frontier (bottom-right aligned after the
/// cache), the sliding window and the padding of `nonpad_kv_seqlen`; a row every key of which
/// is masked is 0. Outputs: `Y`, `present_key`, `present_value` (the cache with the new keys
/// and values) and `qk_matmul_output` (mode 0 or 1: the scaled, softcapped products; 2: with
/// the bias; 3: the probabilities).
fn attention(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (q, k, v) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?, im.f32_tensor(n, 2)?);
    let rank = q.rank().unwrap_or(0);
    if k.rank() != Some(rank) || v.rank() != Some(rank) || !(rank == 3 || rank == 4) {
        return Err(im.malformed(n, "Q, K and V must all be 3-D or all 4-D"));
    }
    let heads = |name: &str| attr(n, name).map(|a| usize::try_from(a.i).unwrap_or(0));
    let (q_heads, kv_heads) = (heads("q_num_heads"), heads("kv_num_heads"));
    let (q, k, v) = if rank == 3 {
        let (Some(qh), Some(kvh)) = (q_heads, kv_heads) else {
            return Err(im.malformed(n, "3-D inputs need q_num_heads and kv_num_heads"));
        };
        (split_heads(im, n, q, qh)?, split_heads(im, n, k, kvh)?, split_heads(im, n, v, kvh)?)
    } else {
        (q, k, v)
    };
    let (qs, ks) = (q.shape().unwrap_or_default(), k.shape().unwrap_or_default());
    let (batch, qh, q_len, head) = (qs[0], qs[1], qs[2], qs[3]);
    // The cache: present = past ++ new along the sequence.
    let present = |im: &mut Importer, i: usize, t: Tensor| -> Result<(Tensor, usize), OnnxError> {
        match im.input(n, i) {
            Some(_) => {
                let past = im.f32_tensor(n, i)?;
                let len = past.shape().unwrap_or_default().get(2).copied().unwrap_or(0);
                Ok((im.cx.concat(&[past, t], 2), len))
            }
            None => Ok((t, 0)),
        }
    };
    let (k, past_len) = present(im, 4, k)?;
    let (v, _) = present(im, 5, v)?;
    let (present_k, present_v) = (k.clone(), v.clone());
    let kv_len = k.shape().unwrap_or_default()[2];
    let kvh = ks[1];
    let nonpad = match im.input(n, 6) {
        Some(_) if past_len > 0 || im.input(n, 4).is_some() => {
            return Err(im.malformed(n, "nonpad_kv_seqlen with a past key/value cache"));
        }
        Some(_) => Some(im.f32_tensor(n, 6)?.reshape(vec![batch, 1, 1, 1])),
        None => None,
    };

    let scale = match attr(n, "scale") {
        Some(a) => a.f,
        None => 1.0 / (head as f32).sqrt(),
    };
    let root = scale.sqrt();
    let causal = attr_i(n, "is_causal", 0) != 0;
    let (left, right) = (attr_i(n, "left_window_size", -1), attr_i(n, "right_window_size", -1));
    let softcap = attr_f(n, "softcap", 0.0);
    let mode = attr_i(n, "qk_matmul_output_mode", 0);
    if !(0..=3).contains(&mode) {
        return Err(im.unsupported(n, format!("qk_matmul_output_mode = {mode} (0 to 3)")));
    }

    // The additive bias over [.., q_len, kv_len]: constant frontiers first.
    let neg_inf = im.cx.constant(f32::NEG_INFINITY);
    let zero = im.cx.constant(0.0);
    let mut bias: Option<Tensor> = None;
    let add = |bias: Option<Tensor>, t: Tensor| {
        Some(match bias {
            Some(b) => b + t,
            None => t,
        })
    };
    if let Some(m) = im.input(n, 3).map(|_| n.input[3].clone()) {
        // A bool mask is lumen's f32 0/1 (a bool input or comparison) or an integer constant.
        let int_const = im.const_input(n, 3).is_some_and(|c| !c.is_float());
        let boolean = im.bools.contains(&m) || int_const;
        let mask = im.f32_tensor(n, 3)?;
        let mut mask = if boolean { mask.select(&zero, &neg_inf) } else { mask };
        let ms = mask.shape().unwrap_or_default();
        let last = ms.last().copied().unwrap_or(0);
        if last < kv_len {
            // A shorter mask leaves the later keys masked.
            let mut pads = vec![(0, 0); ms.len()];
            pads[ms.len() - 1] = (0, kv_len - last);
            mask = mask.pad(&pads, lumen_compiler::PadMode::Constant(f32::NEG_INFINITY));
        }
        bias = add(bias, mask);
    }
    // Key j is allowed for query i when j - i <= offset (causal) and within the window; with
    // nonpad_kv_seqlen the offset is per batch, nonpad[b] - q_len: allowed when
    // j - i + q_len <= nonpad[b], compared at run time.
    let frontier = |pick: &dyn Fn(i64) -> bool| -> Vec<f32> {
        (0..q_len * kv_len)
            .map(|e| {
                let d = (e % kv_len) as i64 - (e / kv_len) as i64;
                if pick(d) { 0.0 } else { f32::NEG_INFINITY }
            })
            .collect()
    };
    let windowed = left >= 0 || right >= 0;
    match &nonpad {
        None => {
            let offset = past_len as i64;
            let keep = |d: i64| {
                // d = j - i; the query's absolute position is i + offset.
                let rel = d - offset;
                (!causal || rel <= 0) && (left < 0 || -rel <= left) && (right < 0 || rel <= right)
            };
            if causal || windowed {
                let c = Const::f32(vec![q_len, kv_len], frontier(&keep));
                bias = add(bias, im.const_weight(n, "frontier", c)?);
            }
        }
        Some(len) => {
            // rel = j - i + q_len - nonpad[b]; allowed: rel <= 0 (causal), -rel <= left,
            // rel <= right; and j < nonpad[b] (padding).
            let d: Vec<f32> = (0..q_len * kv_len)
                .map(|e| ((e % kv_len) as i64 - (e / kv_len) as i64 + q_len as i64) as f32)
                .collect();
            let d = im.const_weight(n, "distance", Const::f32(vec![1, 1, q_len, kv_len], d))?;
            let rel = &d - len;
            let mut allowed: Option<Tensor> = None;
            let mut both = |t: Tensor| {
                allowed = Some(match allowed.take() {
                    Some(a) => a * t,
                    None => t,
                })
            };
            if causal {
                both(rel.less_than(0.5));
            }
            if left >= 0 {
                both((-&rel).less_than(left as f32 + 0.5));
            }
            if right >= 0 {
                both(rel.less_than(right as f32 + 0.5));
            }
            let j: Vec<f32> = (0..kv_len).map(|j| j as f32).collect();
            let j = im.const_weight(n, "keys", Const::f32(vec![1, 1, 1, kv_len], j))?;
            both(j.less_than(len));
            if let Some(a) = allowed {
                bias = add(bias, a.select(&zero, &neg_inf));
            }
        }
    }

    // Grouped-query attention: each key/value head serves q_heads / kv_heads query heads.
    let (k, v) = if qh != kvh {
        if kvh == 0 || qh % kvh != 0 {
            return Err(im.malformed(n, format!("{qh} query heads for {kvh} key/value heads")));
        }
        let reps = qh / kvh;
        let repeat = |t: &Tensor| {
            let s = t.shape().unwrap_or_default();
            t.unsqueeze(2)
                .expand(vec![s[0], s[1], reps, s[2], s[3]])
                .contiguous()
                .reshape(vec![s[0], qh, s[2], s[3]])
        };
        (repeat(&k), repeat(&v))
    } else {
        (k, v)
    };
    let mut qk = (&q * root).matmul((&k * root).transpose(2, 3));
    if softcap > 0.0 {
        qk = (&qk * (1.0 / softcap)).tanh() * softcap;
    }
    let logits = match &bias {
        Some(b) => &qk + b,
        None => qk.clone(),
    };
    let mut probs = logits.softmax(-1);
    if let Some(b) = &bias {
        // A row whose every key is masked attends to nothing: 0.
        let full = vec![batch, qh, q_len, kv_len];
        let masked = b.expand(full).max(-1, true).equal(f32::NEG_INFINITY);
        probs = masked.select(&zero, &probs);
    }
    let y = probs.matmul(&v);
    let y = if rank == 3 {
        let dv = y.shape().unwrap_or_default()[3];
        y.permute(&[0, 2, 1, 3]).contiguous().reshape(vec![batch, q_len, qh * dv])
    } else {
        y
    };
    let qk_out = match mode {
        2 => logits,
        3 => probs,
        _ => qk,
    };
    Ok(vec![y, present_k, present_v, qk_out])
}

/// `RotaryEmbedding`: `X` `[batch, heads, seq, head]` (or `[batch, seq, hidden]` with
/// `num_heads`) rotated pairwise by the angles of `cos_cache`/`sin_cache`: `[positions,
/// rot / 2]` rows picked by `position_ids [batch, seq]` when given, else `[batch, seq, rot /
/// 2]` directly. The first `rotary_embedding_dim` (default: all) features of each head rotate,
/// as two halves (`x1 cos - x2 sin`, `x1 sin + x2 cos`) or, `interleaved`, as even/odd pairs;
/// the rest pass through.
fn rotary_embedding(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let x = im.f32_tensor(n, 0)?;
    let shape = x.shape().unwrap_or_default();
    // As [batch, seq, heads, head].
    let x = match shape.len() {
        4 => x.permute(&[0, 2, 1, 3]),
        3 => {
            let heads = attr(n, "num_heads").map_or(0, |a| usize::try_from(a.i).unwrap_or(0));
            if heads == 0 || shape[2] % heads != 0 {
                return Err(im.malformed(
                    n,
                    format!("num_heads = {heads} for a hidden size of {}", shape[2]),
                ));
            }
            x.reshape(vec![shape[0], shape[1], heads, shape[2] / heads])
        }
        _ => return Err(im.malformed(n, format!("X has shape {shape:?}: expected 3-D or 4-D"))),
    };
    let (b, s, h, d) = match x.shape().unwrap_or_default()[..] {
        [b, s, h, d] => (b, s, h, d),
        _ => return Err(im.malformed(n, format!("X has shape {shape:?}"))),
    };
    let rot = match attr_i(n, "rotary_embedding_dim", 0) {
        0 => d,
        r => usize::try_from(r).unwrap_or(usize::MAX),
    };
    if rot > d || rot % 2 != 0 {
        return Err(im.malformed(n, format!("rotary_embedding_dim = {rot} for a head of {d}")));
    }
    let half = rot / 2;
    let (cos, sin) = (im.f32_tensor(n, 1)?, im.f32_tensor(n, 2)?);
    let pick = |cache: Tensor, im: &mut Importer| -> Result<Tensor, OnnxError> {
        let rows = match im.input(n, 3) {
            Some(_) => cache.gather(im.tensor(n, 3)?),
            None => cache,
        };
        let got = rows.shape().unwrap_or_default();
        if got.len() != 3 || got[..2] != [b, s] || got[2] < half {
            return Err(im.malformed(
                n,
                format!("a cos/sin cache read as {got:?}: expected [{b}, {s}, >= {half}]"),
            ));
        }
        Ok(rows.slice(-1, 0, half).unsqueeze(2))
    };
    let (cos, sin) = (pick(cos, im)?, pick(sin, im)?);
    let turning = x.slice(-1, 0, rot);
    let interleaved = attr_i(n, "interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        let pairs = turning.reshape(vec![b, s, h, half, 2]);
        let part = |i: usize| pairs.slice(-1, i, i + 1).reshape(vec![b, s, h, half]);
        (part(0), part(1))
    } else {
        (turning.slice(-1, 0, half), turning.slice(-1, half, rot))
    };
    let real = &cos * &x1 - &sin * &x2;
    let imag = &sin * &x1 + &cos * &x2;
    let turned = if interleaved {
        im.cx.concat(&[real.unsqueeze(-1), imag.unsqueeze(-1)], -1).reshape(vec![b, s, h, rot])
    } else {
        im.cx.concat(&[real, imag], -1)
    };
    let y = if rot < d { im.cx.concat(&[turned, x.slice(-1, rot, d)], -1) } else { turned };
    Ok(vec![match shape.len() {
        4 => y.permute(&[0, 2, 1, 3]),
        _ => y.reshape(shape),
    }])
}

/// `LinearAttention` (opset 27): per step `t`, the state `S [B, Hkv, dk, dv]` (from
/// `past_state`, else zeros) is decayed by `exp(decay_t)` (`gated`, `gated_delta`), the value
/// corrected to `beta_t (v_t - k_t S)` (`delta`, `gated_delta`), `S += k_t^T v_t`, and the output
/// read as `scale q_t S` with each key/value head's state shared by its group of query heads.
/// Unrolled over the static sequence (every step its matmuls, as the recurrent operators);
/// outputs `[B, T, Hq dv]` and the last state. `chunk_size` is a hint without effect here.
fn linear_attention(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (q, k, v) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?, im.f32_tensor(n, 2)?);
    let rule = attr_s(n, "update_rule").unwrap_or_else(|| "gated_delta".into());
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        other => return Err(im.unsupported(n, format!("update_rule = {other:?}"))),
    };
    let heads = |name: &str| attr(n, name).map_or(0, |a| usize::try_from(a.i).unwrap_or(0));
    let (qh, kvh) = (heads("q_num_heads"), heads("kv_num_heads"));
    if qh == 0 || kvh == 0 || qh % kvh != 0 {
        return Err(im.malformed(
            n,
            format!("q_num_heads = {qh}, kv_num_heads = {kvh}: a positive multiple of it"),
        ));
    }
    let (qs, ks, vs) = (
        q.shape().unwrap_or_default(),
        k.shape().unwrap_or_default(),
        v.shape().unwrap_or_default(),
    );
    let three = |s: &[usize]| s.len() == 3 && s[..2] == qs[..2.min(qs.len())];
    if qs.len() != 3 || !three(&ks) || !three(&vs) || qs[2] % qh != 0 || vs[2] % kvh != 0 {
        return Err(im.malformed(
            n,
            format!("query {qs:?}, key {ks:?}, value {vs:?}: expected [B, T, heads * head]"),
        ));
    }
    let (b, t, dk, dv, group) = (qs[0], qs[1], qs[2] / qh, vs[2] / kvh, qh / kvh);
    if t == 0 {
        return Err(im.unsupported(n, "an empty sequence (T = 0)"));
    }
    if ks[2] != kvh * dk {
        return Err(im.malformed(n, format!("key {ks:?}: expected [{b}, {t}, {}]", kvh * dk)));
    }
    // Query heads grouped under their key/value head: [B, Hkv, group, T, dk].
    let q5 = q.reshape(vec![b, t, kvh, group, dk]).permute(&[0, 2, 3, 1, 4]);
    let k4 = k.reshape(vec![b, t, kvh, dk]).permute(&[0, 2, 1, 3]);
    let v4 = v.reshape(vec![b, t, kvh, dv]).permute(&[0, 2, 1, 3]);
    let optional = |im: &mut Importer, i: usize| -> Result<Option<Tensor>, OnnxError> {
        match im.input(n, i) {
            Some(_) => Ok(Some(im.f32_tensor(n, i)?)),
            None => Ok(None),
        }
    };
    let (past, decay, beta) = (optional(im, 3)?, optional(im, 4)?, optional(im, 5)?);
    if gating != decay.is_some() || delta != beta.is_some() {
        return Err(im.malformed(
            n,
            format!(
                "update_rule {rule:?} with decay {} and beta {}",
                decay.is_some(),
                beta.is_some()
            ),
        ));
    }
    // decay: [B, T, Hkv] (per head) or [B, T, Hkv dk] (per key feature), as [B, Hkv, T, 1|dk].
    let decay = match decay {
        Some(g) => {
            let last = g.shape().unwrap_or_default().get(2).copied().unwrap_or(0);
            let per = if last == kvh {
                1
            } else if last == kvh * dk {
                dk
            } else {
                0
            };
            if per == 0 {
                return Err(
                    im.malformed(n, format!("decay's last axis {last}: {kvh} or {}", kvh * dk))
                );
            }
            Some(g.reshape(vec![b, t, kvh, per]).permute(&[0, 2, 1, 3]))
        }
        None => None,
    };
    // beta: [B, T, Hkv or 1] as [B, Hkv|1, T, 1].
    let beta = match beta {
        Some(x) => {
            let last = x.shape().unwrap_or_default().get(2).copied().unwrap_or(0);
            if last != kvh && last != 1 {
                return Err(im.malformed(n, format!("beta's last axis {last}: {kvh} or 1")));
            }
            Some(x.reshape(vec![b, t, last, 1]).permute(&[0, 2, 1, 3]))
        }
        None => None,
    };
    let mut state = match past {
        Some(p) => {
            if p.shape().unwrap_or_default() != [b, kvh, dk, dv] {
                return Err(
                    im.malformed(n, format!("past_state: expected [{b}, {kvh}, {dk}, {dv}]"))
                );
            }
            p
        }
        None => {
            let zeros = Const::f32(vec![b, kvh, dk, dv], vec![0.0; b * kvh * dk * dv]);
            im.const_weight(n, "state", zeros)?
        }
    };
    let scale = match attr_f(n, "scale", 0.0) {
        0.0 => 1.0 / (dk as f32).sqrt(),
        s => s,
    };
    let mut steps = Vec::with_capacity(t);
    for i in 0..t {
        let at = |x: &Tensor, axis: isize| x.slice(axis, i, i + 1);
        let (k_t, mut v_t) = (at(&k4, 2), at(&v4, 2));
        if let Some(g) = &decay {
            // [B, Hkv, 1, 1|dk] -> [B, Hkv, 1|dk, 1]: over the key features, broadcast over dv.
            state = &state * at(g, 2).transpose(-1, -2).exp();
        }
        if let Some(beta) = &beta {
            v_t = at(beta, 2) * (&v_t - k_t.matmul(&state));
        }
        state = &state + k_t.transpose(-1, -2) * &v_t;
        let q_t = at(&q5, 3).reshape(vec![b, kvh, group, dk]);
        steps.push((q_t.matmul(&state) * scale).unsqueeze(3));
    }
    let out = im.cx.concat(&steps, 3).permute(&[0, 3, 1, 2, 4]).reshape(vec![b, t, qh * dv]);
    Ok(vec![out, state])
}

/// `CausalConvWithState` (opset 27): a depthwise convolution `[C, 1, k]` over the length of
/// `input [B, C, L]` left-padded by `past_state [B, C, k - 1]` (zeros when absent), plus the
/// bias, then SiLU when `activation` is `silu` or `swish`; the second output is the padded
/// input's last `k - 1` positions (the state for the next call).
fn causal_conv_with_state(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let (x, w) = (im.f32_tensor(n, 0)?, im.f32_tensor(n, 1)?);
    let (xs, ws) = (x.shape().unwrap_or_default(), w.shape().unwrap_or_default());
    if xs.len() != 3 || ws.len() != 3 || ws[0] != xs[1] || ws[1] != 1 || ws[2] == 0 {
        return Err(im.malformed(
            n,
            format!("input {xs:?}, weight {ws:?}: expected [B, C, L] and [C, 1, k]"),
        ));
    }
    let (b, c, k) = (xs[0], xs[1], ws[2]);
    let activation = attr_s(n, "activation").unwrap_or_else(|| "none".into());
    let silu = match activation.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        other => return Err(im.unsupported(n, format!("activation = {other:?}"))),
    };
    let bias = match im.input(n, 2) {
        Some(_) => Some(im.f32_tensor(n, 2)?),
        None => None,
    };
    let past = match im.input(n, 3) {
        Some(_) => {
            let p = im.f32_tensor(n, 3)?;
            if p.shape().unwrap_or_default() != [b, c, k - 1] {
                return Err(im.malformed(n, format!("past_state: expected [{b}, {c}, {}]", k - 1)));
            }
            p
        }
        None => {
            let zeros = Const::f32(vec![b, c, k - 1], vec![0.0; b * c * (k - 1)]);
            im.const_weight(n, "state", zeros)?
        }
    };
    let padded = if k > 1 { im.cx.concat(&[past, x], 2) } else { x };
    let spec = ConvSpec { groups: c, ..ConvSpec::unit(1) };
    let y = padded.conv(&w, bias.as_ref(), &spec);
    let y = if silu { y.silu() } else { y };
    let len = padded.shape().unwrap_or_default()[2];
    Ok(vec![y, padded.slice(2, len - (k - 1), len)])
}
