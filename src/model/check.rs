//! Checking a run's logits against what the model file holds: finite values, the max abs
//! error against the framework's logits, and the accuracy against the labels, equal to the
//! framework's (scikit-learn's `sklearn_accuracy`, another framework's `framework_accuracy`,
//! or the file's own logits' accuracy).

use lumen_runtime::{HostTensor, Tensors};

use super::Model;

/// Predicted class of each row of `logits` `[B, C]`: the argmax (first on ties); for a
/// single column (a binary classifier's logit), 1 when the logit is > 0, else 0.
pub fn predictions(logits: &HostTensor) -> Vec<i64> {
    let cols = logits.shape().last().copied().unwrap_or(0);
    if cols == 0 {
        return Vec::new();
    }
    logits
        .data()
        .chunks_exact(cols)
        .map(|row| {
            if cols == 1 {
                return i64::from(row[0] > 0.0);
            }
            let mut best = 0;
            for (j, v) in row.iter().enumerate() {
                if *v > row[best] {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

/// How many predictions equal the labels, and that count over the number of labels (0 for
/// none). Rows beyond the shorter of the two are not counted.
pub fn accuracy(logits: &HostTensor, labels: &[i64]) -> (usize, f64) {
    let correct = predictions(logits).iter().zip(labels).filter(|(p, y)| p == y).count();
    let acc = if labels.is_empty() { 0.0 } else { correct as f64 / labels.len() as f64 };
    (correct, acc)
}

/// Largest `|a - b|` over two same-shape tensors; `None` when the shapes or the element types
/// differ. NaN anywhere gives NaN; equal infinities (a max over an empty axis is -inf in both)
/// differ by 0. Integer tensors (an argmax, a label) compare exactly: 0 only when every
/// element is equal.
pub fn max_abs_err(a: &HostTensor, b: &HostTensor) -> Option<f64> {
    if a.shape() != b.shape() || a.dtype() != b.dtype() {
        return None;
    }
    if let (Some(x), Some(y)) = (a.index_values(), b.index_values()) {
        return Some(x.iter().zip(&y).map(|(p, q)| p.abs_diff(*q) as f64).fold(0.0, f64::max));
    }
    let mut worst = 0.0f64;
    for (x, y) in a.data().iter().zip(b.data()) {
        if x == y {
            continue;
        }
        let e = (f64::from(*x) - f64::from(*y)).abs();
        if e.is_nan() {
            return Some(f64::NAN);
        }
        worst = worst.max(e);
    }
    Some(worst)
}

/// Default budget of [`check_outputs`] for the max abs error against the reference logits:
/// lumen computes in f32, scikit-learn in f64, so 1e-4 leaves room for f32 rounding over a
/// few hundred-term dot products and nothing more.
pub const DEFAULT_TOLERANCE: f64 = 1e-4;

/// Whether a check of a run's outputs passed, failed, or could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// The outputs pass.
    Passed,
    /// The outputs fail: the run must exit non-zero.
    Failed,
    /// The file lacks what the check needs (no logits, no labels, no reference accuracy).
    Skipped,
}

impl CheckStatus {
    /// `passed`, `failed`, `skipped` (the JSON word).
    pub fn word(self) -> &'static str {
        match self {
            CheckStatus::Passed => "passed",
            CheckStatus::Failed => "failed",
            CheckStatus::Skipped => "skipped",
        }
    }
}

/// One check of a run's logits: its name (`finite`, `max_abs_err`, `accuracy`), its status
/// and one line saying what it compared, or why it was skipped or failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// `finite`, `max_abs_err` or `accuracy`.
    pub name: &'static str,
    /// The outcome.
    pub status: CheckStatus,
    /// One line: what was compared, the figures, or why it was skipped.
    pub detail: String,
}

/// Where the reference accuracy of the `accuracy` check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceSource {
    /// The file header's `sklearn_accuracy` metadata.
    ScikitLearn,
    /// The file header's `framework_accuracy` metadata (the framework named by `framework`).
    Framework,
    /// The argmax of the file's reference `logits` against its labels (no metadata).
    FileLogits,
}

impl ReferenceSource {
    /// `scikit-learn`, `framework` or `the file's logits`.
    pub fn describe(self) -> &'static str {
        match self {
            ReferenceSource::ScikitLearn => "scikit-learn",
            ReferenceSource::Framework => "framework",
            ReferenceSource::FileLogits => "the file's logits",
        }
    }
}

/// Everything [`check_outputs`] found about a run's logits.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputCheck {
    /// `finite`, `max_abs_err`, `accuracy`, in that order.
    pub checks: Vec<Check>,
    /// Problems that do not fail the run but make a figure misleading (labels outside the
    /// output classes).
    pub warnings: Vec<String>,
    /// The budget the max abs error was held to.
    pub tolerance: f64,
    /// Largest |lumen - reference| over the logits (NaN when either holds NaN); `None`
    /// without reference logits.
    pub max_abs_err: Option<f64>,
    /// (correct, accuracy) against the labels; `None` without labels.
    pub accuracy: Option<(usize, f64)>,
    /// The accuracy the outputs must reproduce, and where it comes from.
    pub reference_accuracy: Option<(f64, ReferenceSource)>,
    /// Who computed the reference, in words: `scikit-learn`, the file's `framework`
    /// metadata (`PyTorch 2.15.0`), `the file's logits`.
    pub reference_label: Option<String>,
    /// NaN values among lumen's logits.
    pub nan: usize,
    /// Infinite values among lumen's logits.
    pub inf: usize,
    /// Labels that no output column can predict: (row, label), in row order.
    pub labels_out_of_range: Vec<(usize, i64)>,
    /// Every output that has a reference, compared with it, in reference order.
    pub per_output: Vec<OutputError>,
}

/// One output of a run compared with its reference.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputError {
    /// The program's output name (`y` for the MLP's and the ViT's logits).
    pub name: String,
    /// The output's shape; `None` when the run did not return it.
    pub shape: Option<Vec<usize>>,
    /// The reference's shape.
    pub reference_shape: Vec<usize>,
    /// Largest |lumen - reference| ([`max_abs_err`]); `None` when the shapes differ or the
    /// output is missing.
    pub max_abs_err: Option<f64>,
}

impl OutputCheck {
    /// Whether no check failed (skipped checks do not fail a run).
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.status != CheckStatus::Failed)
    }

    /// The failed checks' details, in check order.
    pub fn failures(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| c.status == CheckStatus::Failed)
            .map(|c| c.detail.as_str())
            .collect()
    }
}

/// How many of `t`'s values are NaN, and how many are infinite.
pub fn non_finite(t: &HostTensor) -> (usize, usize) {
    t.data().iter().fold((0, 0), |(nan, inf), v| {
        (nan + usize::from(v.is_nan()), inf + usize::from(v.is_infinite()))
    })
}

/// The number of classes a `[B, C]` logits tensor predicts: C, or 2 for a single column (a
/// binary classifier's logit, see [`predictions`]).
pub fn classes(logits: &HostTensor) -> usize {
    match logits.shape().last().copied().unwrap_or(0) {
        1 => 2,
        c => c,
    }
}

/// A tolerance (an absolute error budget) as a person writes it: `0`, `1e-4`, `0.5`
/// ([`lumen_runtime::search::tolerance_text`], which the search's tolerance prints with too).
pub use lumen_runtime::search::tolerance_text;

/// Labels outside `0..classes` as (row, label), in row order: [`accuracy`] can never count
/// them correct, so an accuracy over them silently drops.
pub fn labels_out_of_range(labels: &[i64], classes: usize) -> Vec<(usize, i64)> {
    let top = i64::try_from(classes).unwrap_or(i64::MAX);
    labels
        .iter()
        .enumerate()
        .filter(|(_, y)| !(0..top).contains(*y))
        .map(|(i, &y)| (i, y))
        .collect()
}

/// Whether an accuracy of `correct` out of `n` reproduces a recorded `reference` fraction:
/// within half a sample, plus 1e-6 for a reference written with six decimals.
fn same_accuracy(correct: usize, n: usize, reference: f64) -> bool {
    if n == 0 || !reference.is_finite() {
        return false;
    }
    let acc = correct as f64 / n as f64;
    (acc - reference).abs() <= 0.5 / n as f64 + 1e-6
}

/// [`check_all_outputs`] for a program with one output, the primary one (`logits`
/// `[B, out]`).
pub fn check_outputs(model: &Model, logits: &HostTensor, tolerance: f64) -> OutputCheck {
    let outputs = [(model.primary_output(), logits.clone())].into_iter().collect();
    check_all_outputs(model, &outputs, tolerance)
}

/// Checks a run's outputs (by the program's output names) against what `model`'s files hold
/// to compare with:
///
/// - `finite`: no NaN or infinity in any output (always checked);
/// - `max_abs_err`: the largest |lumen - reference| over every reference output (the file's
///   `logits`, or the `--expect` file's tensors) is at most `tolerance` (skipped without
///   references; NaN fails);
/// - `accuracy`: the argmax accuracy of the primary output ([`Model::primary_output`])
///   against the labels `y` equals the reference accuracy: the `sklearn_accuracy` metadata,
///   else `framework_accuracy`, else the file's logits' own accuracy (skipped without labels
///   or any reference).
///
/// Labels outside the output classes are a warning (they can never be predicted; scikit-learn
/// would not have scored them either). Never panics; an output of another shape than its
/// reference, or one the run did not return, counts as a failed `max_abs_err`.
pub fn check_all_outputs(model: &Model, outputs: &Tensors, tolerance: f64) -> OutputCheck {
    let mut checks = Vec::with_capacity(3);
    let mut warnings = Vec::new();
    let what = match model {
        Model::Onnx(_) => "output values",
        _ => "logits",
    };
    let total: usize = outputs.values().map(|t| t.data().len()).sum();
    let references = model.references();
    // An infinity the reference holds too is the right answer, not a failure.
    let (nan, inf, expected_inf) = outputs
        .iter()
        .map(|(name, t)| match references.iter().find(|(r, _)| r == name) {
            Some((_, r)) if r.shape() == t.shape() => {
                t.data().iter().zip(r.data()).fold((0, 0, 0), |(nan, inf, same), (v, w)| {
                    let infinite = v.is_infinite();
                    (
                        nan + usize::from(v.is_nan()),
                        inf + usize::from(infinite && v != w),
                        same + usize::from(infinite && v == w),
                    )
                })
            }
            _ => {
                let (nan, inf) = non_finite(t);
                (nan, inf, 0)
            }
        })
        .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    checks.push(if nan + inf == 0 {
        Check {
            name: "finite",
            status: CheckStatus::Passed,
            detail: if expected_inf == 0 {
                format!("all {total} {what} are finite")
            } else {
                format!(
                    "no NaN, and no infinity the reference lacks: {expected_inf} of {total} {what} \
                     are infinities the reference holds too"
                )
            },
        }
    } else {
        Check {
            name: "finite",
            status: CheckStatus::Failed,
            detail: format!("non-finite outputs: {nan} NaN and {inf} infinite of {total} {what}"),
        }
    });

    // The worst error over every reference; the first output that cannot be compared.
    let mut worst: Option<f64> = None;
    let mut mismatch: Option<String> = None;
    let mut per_output = Vec::with_capacity(references.len());
    for (name, reference) in &references {
        let got = outputs.get(name);
        let err = got.and_then(|got| max_abs_err(got, reference));
        per_output.push(OutputError {
            name: name.clone(),
            shape: got.map(|t| t.shape().to_vec()),
            reference_shape: reference.shape().to_vec(),
            max_abs_err: err,
        });
        match got.map(|got| (got, err)) {
            Some((_, Some(err))) => {
                worst = Some(match worst {
                    Some(w) if w.is_nan() || w >= err => w,
                    _ => err,
                });
            }
            Some((got, None)) => {
                mismatch.get_or_insert_with(|| match model {
                    Model::Onnx(_) => format!(
                        "output `{name}` of shape {:?} cannot be compared with its reference {:?}",
                        got.shape(),
                        reference.shape()
                    ),
                    _ => format!(
                        "outputs of shape {:?} cannot be compared with the file's logits {:?}",
                        got.shape(),
                        reference.shape()
                    ),
                });
            }
            None => {
                mismatch.get_or_insert_with(|| format!("the run returned no output `{name}`"));
            }
        }
    }
    let max_abs_err = if mismatch.is_some() { None } else { worst };
    if let Model::Onnx(m) = model
        && m.expect.is_some()
    {
        for name in outputs.keys().filter(|k| !references.iter().any(|(r, _)| r == *k)) {
            warnings.push(format!(
                "output `{name}` has no reference in the --expect file: it is not compared"
            ));
        }
    }
    let against = model.reference_words();
    checks.push(match (references.is_empty(), mismatch, max_abs_err) {
        (true, _, _) => Check {
            name: "max_abs_err",
            status: CheckStatus::Skipped,
            detail: match model {
                Model::Onnx(m) if m.expect.is_some() => {
                    "the --expect file holds none of the outputs".to_string()
                }
                Model::Onnx(_) => "no reference outputs (--expect)".to_string(),
                _ => "no reference logits in the file".to_string(),
            },
        },
        (false, Some(why), _) => {
            Check { name: "max_abs_err", status: CheckStatus::Failed, detail: why }
        }
        (false, None, Some(err)) if err <= tolerance => Check {
            name: "max_abs_err",
            status: CheckStatus::Passed,
            detail: format!("max abs error {err:.3e} within {}", tolerance_text(tolerance)),
        },
        (false, None, Some(err)) if err.is_nan() => Check {
            name: "max_abs_err",
            status: CheckStatus::Failed,
            detail: format!("max abs error is NaN (NaN in the outputs or in {against})"),
        },
        (false, None, err) => Check {
            name: "max_abs_err",
            status: CheckStatus::Failed,
            detail: format!(
                "max abs error {:.3e} over the budget of {}",
                err.unwrap_or(f64::NAN),
                tolerance_text(tolerance)
            ),
        },
    });

    let missing;
    let logits = match outputs.get(&model.primary_output()) {
        Some(t) => t,
        // Not returned (max_abs_err says so): no rows to count.
        None => {
            missing = HostTensor::new(vec![0], Vec::new()).expect("an empty tensor is well-formed");
            &missing
        }
    };
    let out_of_range = match model.labels() {
        Some(labels) => labels_out_of_range(labels, classes(logits)),
        None => Vec::new(),
    };
    if let (Some(labels), Some(&(row, y))) = (model.labels(), out_of_range.first()) {
        let top = classes(logits).saturating_sub(1);
        warnings.push(format!(
            "{} of {} labels lie outside the classes 0..={top} the outputs can predict (first: \
             y[{row}] = {y}); they always count as wrong",
            out_of_range.len(),
            labels.len()
        ));
    }

    let accuracy = model.labels().map(|labels| self::accuracy(logits, labels));
    let recorded = |key: &str| {
        model
            .metadata()
            .get(key)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
    };
    let reference_accuracy = recorded("sklearn_accuracy")
        .map(|v| (v, ReferenceSource::ScikitLearn))
        .or_else(|| recorded("framework_accuracy").map(|v| (v, ReferenceSource::Framework)))
        .or_else(|| {
            let (r, labels) = (model.logits()?, model.labels()?);
            Some((self::accuracy(r, labels).1, ReferenceSource::FileLogits))
        });
    let reference_name = |source: ReferenceSource| match source {
        ReferenceSource::Framework => model
            .metadata()
            .get("framework")
            .cloned()
            .unwrap_or_else(|| source.describe().to_string()),
        other => other.describe().to_string(),
    };
    checks.push(match (model.labels(), accuracy, reference_accuracy) {
        (None, _, _) | (_, None, _) => Check {
            name: "accuracy",
            status: CheckStatus::Skipped,
            detail: match model {
                Model::Onnx(_) => "an ONNX run has no labels".to_string(),
                _ => "no labels y in the file".to_string(),
            },
        },
        (Some(_), Some(_), None) => Check {
            name: "accuracy",
            status: CheckStatus::Skipped,
            detail: "no reference accuracy in the file (no sklearn_accuracy, no \
                     framework_accuracy, no logits)"
                .to_string(),
        },
        (Some(labels), Some((correct, acc)), Some((reference, source))) => {
            let n = labels.len();
            if same_accuracy(correct, n, reference) {
                Check {
                    name: "accuracy",
                    status: CheckStatus::Passed,
                    detail: format!(
                        "accuracy {:.2}% ({correct}/{n}) equals the reference ({}: {:.2}%)",
                        acc * 100.0,
                        reference_name(source),
                        reference * 100.0
                    ),
                }
            } else {
                Check {
                    name: "accuracy",
                    status: CheckStatus::Failed,
                    detail: format!(
                        "accuracy {:.2}% ({correct}/{n}) differs from the reference ({}: {:.2}%)",
                        acc * 100.0,
                        reference_name(source),
                        reference * 100.0
                    ),
                }
            }
        }
    });
    let reference_label = reference_accuracy.map(|(_, source)| reference_name(source));
    OutputCheck {
        checks,
        warnings,
        tolerance,
        max_abs_err,
        accuracy,
        reference_accuracy,
        reference_label,
        nan,
        inf,
        labels_out_of_range: out_of_range,
        per_output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], data: &[f32]) -> HostTensor {
        HostTensor::new(shape.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn argmax_and_binary() {
        let logits = t(&[3, 3], &[0.1, 0.5, 0.2, 3.0, 3.0, -1.0, -2.0, -1.0, -3.0]);
        assert_eq!(predictions(&logits), vec![1, 0, 1]);
        assert_eq!(accuracy(&logits, &[1, 0, 2]), (2, 2.0 / 3.0));
        let binary = t(&[3, 1], &[0.5, -0.5, 0.0]);
        assert_eq!(predictions(&binary), vec![1, 0, 0]);
        assert_eq!(accuracy(&binary, &[]).1, 0.0);
    }

    #[test]
    fn max_abs_err_values() {
        assert_eq!(max_abs_err(&t(&[2], &[1.0, 2.0]), &t(&[2], &[1.5, 1.0])), Some(1.0));
        assert_eq!(max_abs_err(&t(&[2], &[1.0, 2.0]), &t(&[1, 2], &[1.0, 2.0])), None);
        assert!(max_abs_err(&t(&[1], &[f32::NAN]), &t(&[1], &[0.0])).unwrap().is_nan());
    }

    fn model(labels: Option<Vec<i64>>, logits: Option<HostTensor>, sk: Option<&str>) -> Model {
        let metadata = sk
            .map(|v| [("sklearn_accuracy".to_string(), v.to_string())].into())
            .unwrap_or_default();
        let x = t(&[2, 1], &[0.0, 0.0]);
        Model::Mlp(crate::model::MlpModel { layers: Vec::new(), x, labels, logits, metadata })
    }

    fn statuses(c: &OutputCheck) -> Vec<(&str, CheckStatus)> {
        c.checks.iter().map(|k| (k.name, k.status)).collect()
    }

    #[test]
    fn checks_pass_fail_and_skip() {
        use CheckStatus::*;
        let ours = t(&[2, 2], &[1.0, 0.0, 0.0, 1.0]);
        // Everything there and equal.
        let m = model(Some(vec![0, 1]), Some(ours.clone()), Some("1.0"));
        let c = check_outputs(&m, &ours, DEFAULT_TOLERANCE);
        assert_eq!(
            statuses(&c),
            [("finite", Passed), ("max_abs_err", Passed), ("accuracy", Passed)]
        );
        assert!(c.passed() && c.failures().is_empty() && c.warnings.is_empty());
        assert_eq!(c.reference_accuracy, Some((1.0, ReferenceSource::ScikitLearn)));

        // Off by one everywhere: over the budget, unless the budget allows it.
        let off = t(&[2, 2], &[2.0, 1.0, 1.0, 2.0]);
        let c = check_outputs(&m, &off, DEFAULT_TOLERANCE);
        assert_eq!(c.failures(), ["max abs error 1.000e0 over the budget of 1e-4"]);
        assert!(check_outputs(&m, &off, 1.0).passed());

        // Accuracy differs from the recorded one (argmax of row 0 flips).
        let flipped = t(&[2, 2], &[0.0, 1.0, 0.0, 1.0]);
        let m2 = model(Some(vec![0, 1]), None, Some("1.0"));
        let c = check_outputs(&m2, &flipped, DEFAULT_TOLERANCE);
        assert_eq!(statuses(&c)[1], ("max_abs_err", Skipped));
        assert_eq!(
            c.failures(),
            ["accuracy 50.00% (1/2) differs from the reference (scikit-learn: 100.00%)"]
        );

        // No metadata: the file's logits give the reference accuracy.
        let m3 = model(Some(vec![0, 1]), Some(ours.clone()), None);
        let c = check_outputs(&m3, &ours, DEFAULT_TOLERANCE);
        assert_eq!(c.reference_accuracy, Some((1.0, ReferenceSource::FileLogits)));
        assert_eq!(
            c.checks[2].detail,
            "accuracy 100.00% (2/2) equals the reference (the file's logits: 100.00%)"
        );

        // NaN: the finite check and the error check both fail.
        let nan = t(&[2, 2], &[f32::NAN, 0.0, 0.0, f32::INFINITY]);
        let c = check_outputs(&m, &nan, DEFAULT_TOLERANCE);
        assert_eq!((c.nan, c.inf), (1, 1));
        assert_eq!(c.failures()[0], "non-finite outputs: 1 NaN and 1 infinite of 4 logits");
        assert!(c.max_abs_err.unwrap().is_nan());

        // Nothing to compare with: only the finite check runs.
        let bare = model(None, None, None);
        let c = check_outputs(&bare, &ours, DEFAULT_TOLERANCE);
        assert_eq!(
            statuses(&c),
            [("finite", Passed), ("max_abs_err", Skipped), ("accuracy", Skipped)]
        );
        assert!(c.passed());
    }

    #[test]
    fn labels_outside_the_classes_warn() {
        assert_eq!(labels_out_of_range(&[0, 9, 10, -1, 99], 10), [(2, 10), (3, -1), (4, 99)]);
        assert_eq!(classes(&t(&[3, 1], &[0.0; 3])), 2);
        assert!(labels_out_of_range(&[0, 1], 2).is_empty());
        let logits = t(&[2, 2], &[1.0, 0.0, 0.0, 1.0]);
        let m = model(Some(vec![0, 99]), None, None);
        let c = check_outputs(&m, &logits, DEFAULT_TOLERANCE);
        assert_eq!(c.labels_out_of_range, [(1, 99)]);
        assert_eq!(
            c.warnings,
            ["1 of 2 labels lie outside the classes 0..=1 the outputs can predict (first: \
              y[1] = 99); they always count as wrong"]
        );
        assert!(c.passed(), "a warning alone does not fail");
    }

    #[test]
    fn tolerances_print_as_written() {
        let cases = [
            (0.0, "0"),
            (1e-4, "1e-4"),
            (DEFAULT_TOLERANCE, "1e-4"),
            (0.5, "0.5"),
            (1.5, "1.5"),
            (2.0, "2"),
            (0.001, "0.001"),
            (1.5e-5, "1.5e-5"),
            (1e-12, "1e-12"),
            (1e4, "1e4"),
            (9999.5, "9999.5"),
        ];
        for (tolerance, text) in cases {
            assert_eq!(tolerance_text(tolerance), text);
            assert_eq!(text.parse::<f64>().unwrap(), tolerance, "{text} round-trips");
        }
        // The check's words use the same form.
        let m = model(None, Some(t(&[1], &[0.0])), None);
        let c = check_outputs(&m, &t(&[1], &[0.25]), 0.0);
        assert_eq!(c.failures(), ["max abs error 2.500e-1 over the budget of 0"]);
        let c = check_outputs(&m, &t(&[1], &[0.25]), 0.5);
        assert_eq!(c.checks[1].detail, "max abs error 2.500e-1 within 0.5");
    }

    #[test]
    fn accuracy_equality_allows_six_decimals() {
        assert!(same_accuracy(439, 450, 0.975556));
        assert!(!same_accuracy(438, 450, 0.975556));
        assert!(!same_accuracy(0, 0, 0.0));
        assert!(!same_accuracy(1, 1, f64::NAN));
    }
}
