//! Output comparison: whether a candidate computes the same thing as the reference.
//!
//! [`compare_outputs`] pairs a candidate's outputs with the reference candidate's by name and
//! shape, then element by element within a [`Tolerance`] ([`DEFAULT_TOLERANCE`] unless the
//! caller says otherwise); a [`Disagreement`] says where they part. [`tolerance_text`] writes
//! a tolerance as a person would.

use std::fmt;

use serde::Serialize;

use crate::{HostTensor, Tensors};

/// How far a candidate's output element may be from the reference's and still agree:
/// `|got - reference| <= abs + rel * |reference|` (numpy's `allclose` form, elementwise, in
/// f64 of the f32 values). Equal values agree (the same infinity included), as do two NaNs
/// (NaN propagated the same way); any other non-finite pair disagrees.
///
/// The default ([`DEFAULT_TOLERANCE`]) holds every relu and bias candidate of the CPU runtime
/// (they agree exactly) and of cuBLASLt's exact epilogues. cuBLASLt's GELU epilogues may
/// evaluate tanh with the hardware approximation (about 2e-3 from the exact form on outputs
/// of a few units, where the NVRTC kernel of the unfused candidate is exact): a GELU program
/// searched on CUDA needs a looser bound, such as `abs: 3e-3` (`--search-tolerance 3e-3` on
/// the CLI), or its fused candidates are reported as mismatches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Absolute part, in the outputs' units.
    pub abs: f64,
    /// Relative part, a fraction of `|reference|`.
    pub rel: f64,
}

/// The search's default [`Tolerance`]: 1e-4 absolute, the default budget `lumen run` checks
/// its logits against (`lumen::model::DEFAULT_TOLERANCE`), plus 1e-4 relative so outputs of a
/// few hundred or more do not fail on f32 rounding alone (a fused epilogue may round once
/// where separate kernels round twice, and a device library may pick another reduction order
/// per epilogue).
pub const DEFAULT_TOLERANCE: Tolerance = Tolerance { abs: 1e-4, rel: 1e-4 };

impl Default for Tolerance {
    fn default() -> Self {
        DEFAULT_TOLERANCE
    }
}

impl Tolerance {
    /// Whether `got` agrees with the reference value `want` (see [`Tolerance`]).
    ///
    /// ```
    /// use lumen_runtime::search::Tolerance;
    /// let t = Tolerance { abs: 1e-4, rel: 1e-4 };
    /// assert!(t.allows(1000.05, 1000.0)); // 0.05 <= 1e-4 + 0.1
    /// assert!(!t.allows(0.001, 0.0));
    /// assert!(t.allows(f32::NAN, f32::NAN) && !t.allows(f32::INFINITY, 1.0));
    /// ```
    pub fn allows(&self, got: f32, want: f32) -> bool {
        if got == want || (got.is_nan() && want.is_nan()) {
            return true;
        }
        if !got.is_finite() || !want.is_finite() {
            return false;
        }
        let (g, w) = (f64::from(got), f64::from(want));
        (g - w).abs() <= self.abs + self.rel * w.abs()
    }

    /// Whether both parts are finite and non-negative.
    pub fn is_valid(&self) -> bool {
        self.abs.is_finite() && self.abs >= 0.0 && self.rel.is_finite() && self.rel >= 0.0
    }
}

impl std::str::FromStr for Tolerance {
    type Err = String;

    /// `ABS` (relative part kept at [`DEFAULT_TOLERANCE`]'s) or `ABS,REL`, each a finite,
    /// non-negative number: the form of the CLI's `--search-tolerance`.
    ///
    /// ```
    /// use lumen_runtime::search::Tolerance;
    /// assert_eq!("3e-3".parse::<Tolerance>().unwrap(), Tolerance { abs: 3e-3, rel: 1e-4 });
    /// assert_eq!("0,0".parse::<Tolerance>().unwrap(), Tolerance { abs: 0.0, rel: 0.0 });
    /// assert!("-1".parse::<Tolerance>().is_err() && "1,2,3".parse::<Tolerance>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let part = |p: &str| match p.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(format!("`{s}` is not ABS or ABS,REL of finite, non-negative numbers")),
        };
        match s.split(',').collect::<Vec<_>>().as_slice() {
            [abs] => Ok(Tolerance { abs: part(abs)?, rel: DEFAULT_TOLERANCE.rel }),
            [abs, rel] => Ok(Tolerance { abs: part(abs)?, rel: part(rel)? }),
            _ => Err(format!("`{s}` is not ABS or ABS,REL of finite, non-negative numbers")),
        }
    }
}

impl fmt::Display for Tolerance {
    /// `1e-4 + 1e-4 x |reference|`, `0 + 0 x |reference|`, `0.003 + 1e-4 x |reference|`
    /// ([`tolerance_text`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} + {} x |reference|", tolerance_text(self.abs), tolerance_text(self.rel))
    }
}

/// A tolerance as a person writes it: `0`, `1e-4`, `0.5`, `2`, `1.5e-5`. Plain decimals from
/// 0.001 up to 10,000, the shortest exponent form outside that range; either way the text
/// parses back to the same f64 (Rust's shortest round-trip digits).
///
/// ```
/// use lumen_runtime::search::tolerance_text;
/// assert_eq!(tolerance_text(0.0), "0");
/// assert_eq!(tolerance_text(1e-4), "1e-4");
/// assert_eq!(tolerance_text(0.5), "0.5");
/// assert_eq!(tolerance_text(1.5e-5), "1.5e-5");
/// ```
pub fn tolerance_text(tolerance: f64) -> String {
    if tolerance == 0.0 {
        "0".to_string()
    } else if (1e-3..1e4).contains(&tolerance.abs()) {
        format!("{tolerance}")
    } else {
        format!("{tolerance:e}")
    }
}

/// Why a candidate's outputs do not agree with the reference's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Disagreement {
    /// The candidate returns other output names than the reference (each list sorted).
    Outputs {
        /// The candidate's output names.
        got: Vec<String>,
        /// The reference's output names.
        want: Vec<String>,
    },
    /// An output has another shape than the reference's.
    Shape {
        /// The output's name.
        output: String,
        /// The candidate's shape.
        got: Vec<usize>,
        /// The reference's shape.
        want: Vec<usize>,
    },
    /// An element is out of tolerance: the one with the largest absolute difference among
    /// those out of tolerance (NaN counts as the largest; the first on a tie, outputs in the
    /// candidate's order, elements row-major).
    Value {
        /// The output's name.
        output: String,
        /// The element's row-major index, one entry per axis.
        index: Vec<usize>,
        /// The candidate's value.
        got: f32,
        /// The reference's value.
        want: f32,
        /// `|got - want|` in f64 (NaN when one of them is NaN).
        abs_diff: f64,
    },
}

impl fmt::Display for Disagreement {
    /// `y[12, 4] is 1.2340e0, the reference 1.2030e0 (abs diff 3.100e-2)`, `output y has shape
    /// [4, 3], the reference [4, 2]`, `outputs [y, z], the reference [y]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disagreement::Outputs { got, want } => {
                write!(f, "outputs [{}], the reference [{}]", got.join(", "), want.join(", "))
            }
            Disagreement::Shape { output, got, want } => {
                write!(f, "output {output} has shape {got:?}, the reference {want:?}")
            }
            Disagreement::Value { output, index, got, want, abs_diff } => {
                let index: Vec<String> = index.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "{output}[{}] is {got:.4e}, the reference {want:.4e} (abs diff {abs_diff:.3e})",
                    index.join(", ")
                )
            }
        }
    }
}

/// How one candidate's outputs compare with the reference's ([`compare_outputs`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputComparison {
    /// The largest `|got - want|` over every element of every output (f64 of the f32 values;
    /// 0 for equal values and for two NaNs; NaN when one side is NaN and the other is not);
    /// `None` when the output names or shapes differ, so no element pairs up.
    pub max_abs_diff: Option<f64>,
    /// Why they disagree; `None` when every element is within the tolerance.
    pub disagreement: Option<Disagreement>,
}

/// Compares a candidate's `got` outputs with the reference's `want`, by name (candidates may
/// return their outputs in different orders: the order is each LLIR's canonical one), shape,
/// then element by element within `tolerance`.
///
/// ```
/// use lumen_runtime::search::{Tolerance, compare_outputs};
/// use lumen_runtime::{HostTensor, Tensors};
/// let t = |v: Vec<f32>| -> Tensors {
///     [("y".to_string(), HostTensor::new([2, 2], v).unwrap())].into_iter().collect()
/// };
/// let c = compare_outputs(&t(vec![1.0, 2.0, 3.0, 4.5]), &t(vec![1.0, 2.0, 3.0, 4.0]),
///                         Tolerance::default());
/// assert_eq!(c.max_abs_diff, Some(0.5));
/// assert_eq!(c.disagreement.unwrap().to_string(),
///            "y[1, 1] is 4.5000e0, the reference 4.0000e0 (abs diff 5.000e-1)");
/// ```
pub fn compare_outputs(got: &Tensors, want: &Tensors, tolerance: Tolerance) -> OutputComparison {
    let names = |t: &Tensors| -> Vec<String> {
        let mut v: Vec<String> = t.keys().cloned().collect();
        v.sort();
        v
    };
    let (got_names, want_names) = (names(got), names(want));
    if got_names != want_names {
        return OutputComparison {
            max_abs_diff: None,
            disagreement: Some(Disagreement::Outputs { got: got_names, want: want_names }),
        };
    }
    let mut max_abs_diff = 0.0f64;
    // (abs diff, output, flat index, got, want) of the worst element out of tolerance.
    let mut worst: Option<(f64, &str, usize, f32, f32)> = None;
    for (name, g) in got {
        let Some(w) = want.get(name) else { continue };
        if g.shape() != w.shape() || g.data().len() != w.data().len() {
            return OutputComparison {
                max_abs_diff: None,
                disagreement: Some(Disagreement::Shape {
                    output: name.clone(),
                    got: g.shape().to_vec(),
                    want: w.shape().to_vec(),
                }),
            };
        }
        // Integer outputs (a label, an argmax) agree exactly or not at all; an integer
        // tensor against a float one is a value that differs.
        let (gi, wi) = (g.index_values(), w.index_values());
        if gi.is_some() || wi.is_some() {
            let (gv, wv) = (gi.unwrap_or_default(), wi.unwrap_or_default());
            let differs = g.dtype() != w.dtype() || gv != wv;
            let i = gv.iter().zip(&wv).position(|(a, b)| a != b).unwrap_or(0);
            let (a, b) = (
                gv.get(i).map_or(f32::NAN, |&v| v as f32),
                wv.get(i).map_or(f32::NAN, |&v| v as f32),
            );
            if differs && worst.is_none() {
                worst = Some((f64::INFINITY, name.as_str(), i, a, b));
            }
            continue;
        }
        for (i, (&a, &b)) in g.data().iter().zip(w.data()).enumerate() {
            let d = if a == b || (a.is_nan() && b.is_nan()) {
                0.0
            } else {
                (f64::from(a) - f64::from(b)).abs()
            };
            if d.is_nan() || d > max_abs_diff {
                // NaN sticks: f64::max would drop it.
                max_abs_diff = if max_abs_diff.is_nan() { max_abs_diff } else { d };
            }
            if !tolerance.allows(a, b)
                && worst.is_none_or(|(wd, ..)| !wd.is_nan() && (d.is_nan() || d > wd))
            {
                worst = Some((d, name.as_str(), i, a, b));
            }
        }
    }
    let disagreement = worst.map(|(abs_diff, output, flat, a, b)| Disagreement::Value {
        output: output.to_string(),
        index: unravel(flat, got.get(output).map_or(&[], HostTensor::shape)),
        got: a,
        want: b,
        abs_diff,
    });
    OutputComparison { max_abs_diff: Some(max_abs_diff), disagreement }
}

/// The row-major index, one entry per axis, of element `flat` of a tensor of `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &dim) in index.iter_mut().zip(shape).rev() {
        if dim > 0 {
            *slot = flat % dim;
            flat /= dim;
        }
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensors(list: &[(&str, &[usize], &[f32])]) -> Tensors {
        list.iter()
            .map(|(name, shape, data)| {
                (name.to_string(), HostTensor::new(shape.to_vec(), data.to_vec()).unwrap())
            })
            .collect()
    }

    #[test]
    fn tolerances_are_abs_plus_rel() {
        let t = Tolerance { abs: 1e-4, rel: 1e-3 };
        assert!(t.allows(1.0001, 1.0)); // 1e-4 <= 1e-4 + 1e-3
        assert!(t.allows(101.0, 100.9)); // 0.1 <= 1e-4 + 0.1009
        assert!(!t.allows(101.2, 100.9));
        assert!(!t.allows(0.0002, 0.0));
        assert!(t.allows(-0.0, 0.0));
        // Non-finite values agree only with the same value; NaN with NaN.
        assert!(t.allows(f32::NAN, f32::NAN));
        assert!(!t.allows(f32::NAN, 1.0) && !t.allows(1.0, f32::NAN));
        assert!(t.allows(f32::INFINITY, f32::INFINITY));
        assert!(!t.allows(f32::INFINITY, f32::NEG_INFINITY));
        // rel x |inf| would cover any finite value: refused explicitly.
        assert!(!t.allows(1.0, f32::INFINITY));
        let exact = Tolerance { abs: 0.0, rel: 0.0 };
        assert!(exact.allows(0.5, 0.5) && !exact.allows(0.5, 0.5 + f32::EPSILON));
        assert_eq!(DEFAULT_TOLERANCE.to_string(), "1e-4 + 1e-4 x |reference|");
        assert!(DEFAULT_TOLERANCE.is_valid());
        assert!(!Tolerance { abs: -0.1, rel: 0.0 }.is_valid());
    }

    #[test]
    fn outputs_compare_by_name_shape_then_value() {
        let t = DEFAULT_TOLERANCE;
        let want = tensors(&[("y", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), ("z", &[1], &[7.0])]);
        // Same values in another output order: agreement, difference 0.
        let reordered =
            tensors(&[("z", &[1], &[7.0]), ("y", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])]);
        assert_eq!(
            compare_outputs(&reordered, &want, t),
            OutputComparison { max_abs_diff: Some(0.0), disagreement: None }
        );
        // Within tolerance: the difference is reported, no disagreement.
        let close =
            tensors(&[("y", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.00005]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&close, &want, t);
        assert!(c.disagreement.is_none());
        assert!((c.max_abs_diff.unwrap() - 5e-5).abs() < 1e-6);
        // The worst element out of tolerance, with its row-major index.
        let off = tensors(&[("y", &[2, 3], &[0.0, 1.5, 2.0, 3.0, 4.0, 3.0]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&off, &want, t);
        assert_eq!(c.max_abs_diff, Some(2.0));
        assert_eq!(
            c.disagreement,
            Some(Disagreement::Value {
                output: "y".into(),
                index: vec![1, 2],
                got: 3.0,
                want: 5.0,
                abs_diff: 2.0
            })
        );
        assert_eq!(
            c.disagreement.unwrap().to_string(),
            "y[1, 2] is 3.0000e0, the reference 5.0000e0 (abs diff 2.000e0)"
        );
        // NaN against a number is the worst, and sticks in the maximum.
        let nan =
            tensors(&[("y", &[2, 3], &[0.0, 9.0, 2.0, f32::NAN, 4.0, 5.0]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&nan, &want, t);
        assert!(c.max_abs_diff.unwrap().is_nan());
        assert!(
            matches!(c.disagreement, Some(Disagreement::Value { ref index, .. }) if index == &[1, 0])
        );
        // NaN where the reference has NaN agrees.
        assert_eq!(compare_outputs(&nan, &nan, t).disagreement, None);
        assert_eq!(compare_outputs(&nan, &nan, t).max_abs_diff, Some(0.0));
        // Other names, other shapes: nothing pairs up.
        let renamed = tensors(&[("y", &[2, 3], &[0.0; 6]), ("w", &[1], &[7.0])]);
        let c = compare_outputs(&renamed, &want, t);
        assert_eq!(c.max_abs_diff, None);
        assert_eq!(c.disagreement.unwrap().to_string(), "outputs [w, y], the reference [y, z]");
        let reshaped = tensors(&[("y", &[3, 2], &[0.0; 6]), ("z", &[1], &[7.0])]);
        let c = compare_outputs(&reshaped, &want, t);
        assert_eq!(c.max_abs_diff, None);
        assert_eq!(
            c.disagreement.unwrap().to_string(),
            "output y has shape [3, 2], the reference [2, 3]"
        );
        // A scalar and an empty tensor.
        let a = tensors(&[("s", &[], &[1.0]), ("e", &[0, 4], &[])]);
        let b = tensors(&[("s", &[], &[2.0]), ("e", &[0, 4], &[])]);
        let c = compare_outputs(&a, &b, t);
        assert!(
            matches!(c.disagreement, Some(Disagreement::Value { ref index, .. }) if index.is_empty())
        );
    }

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(0, &[2, 3]), [0, 0]);
        assert_eq!(unravel(5, &[2, 3]), [1, 2]);
        assert_eq!(unravel(7, &[2, 3, 4]), [0, 1, 3]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
    }
}
