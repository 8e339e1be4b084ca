//! Loss operators: `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss` (opset 12 on), as
//! a training export's forward graph computes them. Each target's class is picked by a
//! `GatherElements` (a target at or past the class count is a run-time error; a negative one
//! counts from the end), or, with `ignore_index`, by a one-hot `equal` against the class indices
//! and a `select` (the ignored value may lie outside the classes); then weighted and reduced.

use lumen_compiler::Tensor;

use crate::constant::Const;
use crate::error::OnnxError;
use crate::importer::{Handler, Importer, attr, attr_s, one};
use crate::proto::NodeProto;

/// The loss operators this family imports, by ONNX `op_type`.
pub(super) const OPS: &[(&str, Handler)] = &[
    ("NegativeLogLikelihoodLoss", negative_log_likelihood),
    ("SoftmaxCrossEntropyLoss", softmax_cross_entropy),
];

/// `NegativeLogLikelihoodLoss`: `input [N, C, d...]` log-probabilities, `target [N, d...]`
/// class indices, optional `weight [C]`; `loss = -input[n, target, d] * weight[target]`,
/// 0 where the target is `ignore_index`, then `reduction` (`none`, `sum`, `mean`: the sum
/// over the sum of the weights of the targets not ignored).
fn negative_log_likelihood(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let input = im.f32_tensor(n, 0)?;
    one(picked_loss(im, n, &input)?)
}

/// `SoftmaxCrossEntropyLoss`: the negative log-likelihood of `log_softmax(scores, axis 1)`;
/// its optional second output is that log-probability.
fn softmax_cross_entropy(im: &mut Importer, n: &NodeProto) -> Result<Vec<Tensor>, OnnxError> {
    let scores = im.f32_tensor(n, 0)?;
    if scores.rank().is_some_and(|r| r < 2) {
        return Err(im.malformed(n, "scores must have at least 2 axes, [N, C, ...]"));
    }
    let log_prob = scores.log_softmax(1);
    let loss = picked_loss(im, n, &log_prob)?;
    Ok(if n.output.get(1).is_some_and(|o| !o.is_empty()) {
        vec![loss, log_prob]
    } else {
        vec![loss]
    })
}

/// The reduced loss of `log_prob [N, C, d...]` at node `n`'s targets (input 1), weights
/// (input 2) and `ignore_index`.
fn picked_loss(im: &mut Importer, n: &NodeProto, log_prob: &Tensor) -> Result<Tensor, OnnxError> {
    let shape = log_prob.shape().unwrap_or_default();
    if shape.len() < 2 {
        return Err(im.malformed(n, format!("input of shape {shape:?}: expected [N, C, ...]")));
    }
    let classes = shape[1];
    let reduction = attr_s(n, "reduction").unwrap_or_else(|| "mean".into());
    if !matches!(reduction.as_str(), "none" | "sum" | "mean") {
        return Err(im.unsupported(n, format!("reduction = {reduction:?} (none, sum or mean)")));
    }
    let target = im.f32_tensor(n, 1)?;
    let mut want: Vec<usize> = shape.clone();
    want.remove(1);
    if target.shape().unwrap_or_default() != want {
        return Err(im.malformed(
            n,
            format!("target of shape {:?}: expected {want:?}", target.shape().unwrap_or_default()),
        ));
    }
    // The class index along axis 1, broadcast over N and the trailing axes.
    let mut along = vec![1usize; shape.len()];
    along[1] = classes;
    let index = Const::f32(along.clone(), (0..classes).map(|c| c as f32).collect());
    let index = im.const_weight(n, "classes", index)?;
    let hit = target.unsqueeze(1).equal(&index);
    let ignore = attr(n, "ignore_index").map(|a| a.i);
    // Without ignore_index every target must be a class: picked by GatherElements, which
    // reports one outside the classes at run time (with it, a one-hot pick, since the ignored
    // value may lie outside them).
    let picked = match ignore {
        None => {
            let ids = im.tensor(n, 1)?;
            let ids = if ids.dtype().is_some_and(|d| d.is_index()) {
                ids
            } else {
                ids.cast(lumen_compiler::DType::I64)
            };
            log_prob.gather_elements(1, ids.unsqueeze(1)).reshape(want.clone())
        }
        Some(_) => hit.select(log_prob, 0.0).sum(1, false),
    };
    // Each element's weight: its class's, or 1; 0 where the target is ignored.
    let mut weight = match im.input(n, 2) {
        Some(_) => {
            let w = im.f32_tensor(n, 2)?;
            if w.shape().unwrap_or_default() != [classes] {
                return Err(im.malformed(n, format!("weight must have shape [{classes}]")));
            }
            Some(hit.select(w.reshape(along), 0.0).sum(1, false))
        }
        None => None,
    };
    if let Some(i) = ignore {
        let kept = target.equal(i as f32).select(0.0, 1.0);
        weight = Some(match weight {
            Some(w) => w * kept,
            None => kept,
        });
    }
    let loss = match &weight {
        Some(w) => (picked * w).neg(),
        None => picked.neg(),
    };
    let total = |t: &Tensor| t.reshape(vec![want.iter().product::<usize>()]).sum(0, false);
    Ok(match reduction.as_str() {
        "none" => loss,
        "sum" => total(&loss),
        _ => match &weight {
            Some(w) => total(&loss) / total(w),
            None => total(&loss) / want.iter().product::<usize>() as f32,
        },
    })
}
