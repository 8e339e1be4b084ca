//! The spatial attributes convolutions and pools share: per-axis lists (`kernel_shape`,
//! `strides`, `dilations`) and the padding (`pads`, `auto_pad`), checked with errors naming
//! node and attribute.

use crate::error::OnnxError;
use crate::importer::{Importer, attr_ints, attr_s};
use crate::proto::NodeProto;

/// A per-axis attribute of `spatial` entries, each at least `min` (`strides`, `dilations`,
/// `kernel_shape`), or `default` when absent.
pub(crate) fn spatial_list(
    im: &Importer,
    n: &NodeProto,
    name: &str,
    spatial: usize,
    default: usize,
    min: i64,
) -> Result<Vec<usize>, OnnxError> {
    match attr_ints(n, name) {
        None => Ok(vec![default; spatial]),
        Some(v) if v.len() == spatial && v.iter().all(|&x| x >= min) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => Err(
            im.malformed(n, format!("{name} = {v:?}: expected {spatial} values of at least {min}"))
        ),
    }
}

/// The padding of each spatial axis, `(before, after)`: the `pads` attribute (`[b0, b1, ..,
/// e0, e1, ..]`, none negative) or, by `auto_pad`, `VALID` (none) or `SAME_UPPER` /
/// `SAME_LOWER` (an output of `ceil(in / stride)`, the odd element after or before) for an
/// input of spatial lengths `input` and a kernel of `kernel` taps `dilations` apart.
pub(crate) fn spatial_pads(
    im: &Importer,
    n: &NodeProto,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<Vec<(usize, usize)>, OnnxError> {
    let spatial = input.len();
    let auto = attr_s(n, "auto_pad").unwrap_or_default();
    match auto.as_str() {
        "" | "NOTSET" => match attr_ints(n, "pads") {
            None => Ok(vec![(0, 0); spatial]),
            Some(p) if p.len() == 2 * spatial && p.iter().all(|&x| x >= 0) => {
                Ok((0..spatial).map(|i| (p[i] as usize, p[spatial + i] as usize)).collect())
            }
            Some(p) if p.iter().any(|&x| x < 0) => Err(im.unsupported(
                n,
                format!("pads = {p:?}: negative pads (lumen pads with zeros, it does not crop)"),
            )),
            Some(p) => {
                Err(im.malformed(n, format!("pads = {p:?}: expected {} values", 2 * spatial)))
            }
        },
        "VALID" => Ok(vec![(0, 0); spatial]),
        "SAME_UPPER" | "SAME_LOWER" => Ok((0..spatial)
            .map(|i| {
                let out = input[i].div_ceil(strides[i]);
                let span = (kernel[i] - 1) * dilations[i] + 1;
                let total = ((out.max(1) - 1) * strides[i] + span).saturating_sub(input[i]);
                if auto == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                }
            })
            .collect()),
        other => Err(im.unsupported(n, format!("auto_pad = {other:?}"))),
    }
}
