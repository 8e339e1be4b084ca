//! Models older than opset 7: which operators had, at the model's opset, the form lumen reads
//! at opset 7.
//!
//! lumen reads each operator in its forms from opset 7 on ([`crate::import::MIN_OPSET`]).
//! Before 7 many operators had other forms (the arithmetic operators' `broadcast` and `axis`
//! attributes, `consumed_inputs`, BatchNormalization's `is_test`), but many did not change: an
//! ONNX schema version is bumped on any change, so an operator whose version in effect at
//! opset 7 dates from opset `s` reads the same at every opset from `s` on. A model at opset
//! `v < 7` imports when each of its nodes' operators has such a row with `s <= v`; a node of
//! another operator is refused, naming it.

/// For each default-domain operator whose opset-7 form is older than opset 7: the opset it
/// dates from (sorted by name). Made from the onnx package's schema history by
/// `scripts/legacy_opsets.py` (onnx 1.23.2).
pub const SAME_FORM_SINCE: &[(&str, i64)] = &[
    ("Abs", 6),
    ("ArgMax", 1),
    ("ArgMin", 1),
    ("Cast", 6),
    ("Ceil", 6),
    ("Clip", 6),
    ("Concat", 4),
    ("Constant", 1),
    ("Conv", 1),
    ("ConvTranspose", 1),
    ("DepthToSpace", 1),
    ("Elu", 6),
    ("Exp", 6),
    ("Flatten", 1),
    ("Floor", 6),
    ("Gather", 1),
    ("GlobalAveragePool", 1),
    ("GlobalLpPool", 2),
    ("GlobalMaxPool", 1),
    ("HardSigmoid", 6),
    ("Hardmax", 1),
    ("Identity", 1),
    ("If", 1),
    ("InstanceNormalization", 6),
    ("LRN", 1),
    ("LeakyRelu", 6),
    ("Log", 6),
    ("LogSoftmax", 1),
    ("Loop", 1),
    ("LpNormalization", 1),
    ("LpPool", 2),
    ("MatMul", 1),
    ("Max", 6),
    ("MaxPool", 1),
    ("MaxRoiPool", 1),
    ("Mean", 6),
    ("Min", 6),
    ("Neg", 6),
    ("Not", 1),
    ("Pad", 2),
    ("RandomNormal", 1),
    ("RandomNormalLike", 1),
    ("RandomUniform", 1),
    ("RandomUniformLike", 1),
    ("Reciprocal", 6),
    ("ReduceL1", 1),
    ("ReduceL2", 1),
    ("ReduceLogSum", 1),
    ("ReduceLogSumExp", 1),
    ("ReduceMax", 1),
    ("ReduceMean", 1),
    ("ReduceMin", 1),
    ("ReduceProd", 1),
    ("ReduceSum", 1),
    ("ReduceSumSquare", 1),
    ("Relu", 6),
    ("Reshape", 5),
    ("Selu", 6),
    ("Shape", 1),
    ("Sigmoid", 6),
    ("Size", 1),
    ("Slice", 1),
    ("Softmax", 1),
    ("Softplus", 1),
    ("Softsign", 1),
    ("SpaceToDepth", 1),
    ("Split", 2),
    ("Sqrt", 6),
    ("Squeeze", 1),
    ("Sum", 6),
    ("Tanh", 6),
    ("Tile", 6),
    ("TopK", 1),
    ("Transpose", 1),
    ("Unsqueeze", 1),
];

/// The oldest opset whose form of `op` (a default-domain operator) is its opset-7 form: its
/// row of [`SAME_FORM_SINCE`], or 7 for an operator without one (it changed at 7, or is newer).
pub fn same_form_since(op: &str) -> i64 {
    SAME_FORM_SINCE.iter().find(|(name, _)| *name == op).map_or(7, |&(_, since)| since)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_and_older_than_7() {
        assert!(SAME_FORM_SINCE.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(SAME_FORM_SINCE.iter().all(|&(_, s)| (1..7).contains(&s)));
        // Not has had one form since opset 1; Relu lost `consumed_inputs` at 6; Add's legacy
        // `broadcast` attribute went at 7.
        assert_eq!((same_form_since("Not"), same_form_since("Relu")), (1, 6));
        assert_eq!((same_form_since("Add"), same_form_since("Gelu")), (7, 7));
    }
}
