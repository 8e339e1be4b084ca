//! The search's decision rule: when a measured candidate may replace the cost model's pick.
//!
//! The search times its candidates in interleaved rounds (every candidate once per round, the
//! starting candidate rotating), so each round gives one *paired* sample per candidate: noise
//! that slows the machine for a while slows every candidate of that round alike. For a
//! challenger `c` against the baseline `b` (the cost model's pick), round `i` gives the
//! relative speedup `s_i = (t_b,i - t_c,i) / t_b,i`.
//!
//! **The test** is the exact one-sided *sign test* on those paired differences, shifted by the
//! minimum effect `d` (default 3%): the null hypothesis is "the median speedup is at most `d`",
//! the alternative "the median speedup exceeds `d`". A round with `s_i > d` counts for the
//! challenger, `s_i < d` against it, `s_i == d` is a tie and is dropped (the usual treatment of
//! zero differences in a sign test). With `w` rounds for and `n` rounds that are not ties, the
//! p-value is `P(Binomial(n, 1/2) >= w)`, computed exactly ([`binomial_tail`]). The sign test
//! assumes nothing about the shape of the timing distribution (execute times are skewed, with
//! rare slow outliers: the rank-based Wilcoxon test would assume symmetric differences), and a
//! single stray round counts once, however slow it was.
//!
//! A challenger replaces the baseline only when its p-value is at most `alpha / m` (default
//! `alpha` = 0.01; `m` challengers: Bonferroni's correction, so the chance of *any* false switch
//! stays at most `alpha` when no challenger is really faster) **and** its median speedup is at
//! least `d`. Among several such challengers the one with the largest median speedup wins (the
//! lower candidate index on a tie). Otherwise the baseline stands: a candidate 1% faster, or
//! faster in some runs and slower in others, never flips the choice.
//!
//! The least number of rounds that can ever reject is the smallest `n` with `2^-n <= alpha / m`
//! (7 rounds for one challenger at 0.01, 8 for two, 9 for three); [`can_still_win`] says whether a
//! challenger could still reach significance in the rounds left, which lets the search stop as
//! soon as none can (futility stopping: it can only keep the baseline more often, never switch
//! more often, so the false-switch bound holds).

use serde::Serialize;

/// The median of `samples` (the mean of the two middle values for an even count); `None` for
/// no samples. NaNs sort last.
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => v.get(n / 2).copied(),
        _ => Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0),
    }
}

/// `P(X >= k)` for `X ~ Binomial(n, 1/2)`: the one-sided p-value of a sign test with `k` of `n`
/// rounds for the challenger. Exact up to f64 rounding for any `n` (summed in log space, so
/// `n` in the thousands neither overflows nor underflows to a wrong 0 before the end). 1 for
/// `k == 0`, 0 for `k > n`.
///
/// ```
/// use lumen_runtime::search::stats::binomial_tail;
/// assert_eq!(binomial_tail(10, 0), 1.0);
/// assert!((binomial_tail(7, 7) - 1.0 / 128.0).abs() < 1e-15);
/// assert!((binomial_tail(10, 9) - 11.0 / 1024.0).abs() < 1e-15);
/// assert_eq!(binomial_tail(3, 4), 0.0);
/// ```
pub fn binomial_tail(n: usize, k: usize) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    if n <= EXACT_TAIL_MAX_N {
        // Pascal's triangle of probabilities: every entry is j / 2^n, exact in f64 for n up to
        // 52, so small tails are exact sums of exact terms (smallest first).
        let mut pmf = vec![1.0f64];
        for _ in 0..n {
            let mut next = vec![0.0f64; pmf.len() + 1];
            for (j, p) in pmf.iter().enumerate() {
                next[j] += p / 2.0;
                next[j + 1] += p / 2.0;
            }
            pmf = next;
        }
        return pmf[k..].iter().rev().sum::<f64>().min(1.0);
    }
    // ln C(n, j) by the recurrence C(n, j+1) = C(n, j) (n - j) / (j + 1), from j = k.
    let ln2 = std::f64::consts::LN_2;
    let mut ln_c = ln_choose(n, k);
    let mut terms = Vec::with_capacity(n - k + 1);
    for j in k..=n {
        terms.push(ln_c - n as f64 * ln2);
        if j < n {
            ln_c += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
        }
    }
    let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    (max + sum.ln()).exp().min(1.0)
}

/// Up to this many rounds [`binomial_tail`] sums the exact probabilities (O(n^2) work);
/// above it, in log space.
const EXACT_TAIL_MAX_N: usize = 1024;

/// `ln C(n, k)` as a sum of logarithms (exact enough for p-values; `k <= n`).
fn ln_choose(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (0..k).map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln()).sum()
}

/// The least number of rounds a sign test needs before it can ever reach `p <= alpha`: the
/// smallest `n` with `2^-n <= alpha` (all `n` rounds for the challenger). `alpha` in (0, 1).
///
/// ```
/// use lumen_runtime::search::stats::min_rounds_to_reject;
/// assert_eq!(min_rounds_to_reject(0.01), 7); // 1/128 = 0.0078
/// assert_eq!(min_rounds_to_reject(0.005), 8); // 0.01 shared by two challengers
/// ```
pub fn min_rounds_to_reject(alpha: f64) -> usize {
    let mut n = 0usize;
    let mut p = 1.0f64;
    while p > alpha && n < 4096 {
        n += 1;
        p /= 2.0;
    }
    n
}

/// Whether a challenger with `wins` and `losses` so far (ties dropped) could still reach
/// `p <= alpha` if every one of the `remaining` rounds went its way: all-wins is the best case,
/// since with the losses fixed each further win lowers the p-value.
///
/// ```
/// use lumen_runtime::search::stats::can_still_win;
/// // 15 rounds planned at 0.005: 13 wins of 15 are needed (p = 0.0037), so 2 losses are the most.
/// assert!(can_still_win(3, 2, 10, 0.005));
/// assert!(!can_still_win(2, 3, 10, 0.005));
/// ```
pub fn can_still_win(wins: usize, losses: usize, remaining: usize, alpha: f64) -> bool {
    let n = wins + losses + remaining;
    binomial_tail(n, wins + remaining) <= alpha
}

/// One challenger against the baseline over the paired rounds ([`paired_sign_test`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedComparison {
    /// The challenger's candidate index.
    pub candidate: usize,
    /// The challenger's label.
    pub label: String,
    /// Paired rounds compared.
    pub rounds: usize,
    /// Rounds in which the challenger was faster than the baseline by more than the minimum
    /// speedup.
    pub wins: usize,
    /// Rounds in which it was not (its speedup below the minimum).
    pub losses: usize,
    /// Rounds whose speedup equals the minimum exactly (dropped from the test).
    pub ties: usize,
    /// Median over the rounds of `(baseline_ms - challenger_ms) / baseline_ms`, a fraction
    /// (0.05 = 5% faster; negative when slower); NaN with no rounds.
    pub median_speedup: f64,
    /// One-sided sign-test p-value, `P(Binomial(wins + losses, 1/2) >= wins)`; 1 with no rounds.
    pub p_value: f64,
    /// Whether it passed: `p_value <= alpha_per_comparison` and `median_speedup >= min_speedup`.
    pub significant: bool,
}

/// The sign test of the challenger's times `candidate_ms` against the baseline's `baseline_ms`,
/// round by round (the two slices paired by position; extra elements of the longer one are
/// ignored; a round with a non-finite or non-positive baseline time is dropped), against the
/// null "median speedup <= `min_speedup`" at level `alpha`. Times in any one unit.
///
/// ```
/// use lumen_runtime::search::stats::paired_sign_test;
/// let base = [1.0; 8];
/// let fast = [0.9; 8]; // 10% faster every round
/// let t = paired_sign_test(&base, &fast, 0.03, 0.005);
/// assert_eq!((t.wins, t.losses, t.p_value), (8, 0, 1.0 / 256.0));
/// assert!(t.significant && (t.median_speedup - 0.1).abs() < 1e-12);
/// ```
pub fn paired_sign_test(
    baseline_ms: &[f64],
    candidate_ms: &[f64],
    min_speedup: f64,
    alpha: f64,
) -> PairedComparison {
    let speedups: Vec<f64> = baseline_ms
        .iter()
        .zip(candidate_ms)
        .filter(|(b, c)| b.is_finite() && **b > 0.0 && c.is_finite())
        .map(|(b, c)| (b - c) / b)
        .collect();
    let wins = speedups.iter().filter(|&&s| s > min_speedup).count();
    let losses = speedups.iter().filter(|&&s| s < min_speedup).count();
    let ties = speedups.len() - wins - losses;
    let p_value = binomial_tail(wins + losses, wins);
    let median_speedup = median(&speedups).unwrap_or(f64::NAN);
    PairedComparison {
        candidate: 0,
        label: String::new(),
        rounds: speedups.len(),
        wins,
        losses,
        ties,
        median_speedup,
        p_value,
        significant: p_value <= alpha && median_speedup >= min_speedup,
    }
}

/// What the decision rule concluded ([`decide`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The baseline's candidate index: the cost model's pick when it was measured, otherwise
    /// the measured candidate the cost model rates cheapest.
    pub baseline: usize,
    /// The baseline's label.
    pub baseline_label: String,
    /// Whether the baseline is the cost model's pick itself.
    pub baseline_is_pick: bool,
    /// The cost model's pick's label, when it is not the baseline (it was not measured).
    pub pick_label: Option<String>,
    /// The candidate index the rule selects: the winner, or the baseline.
    pub selected: usize,
    /// The family-wise significance level (default 0.01).
    pub alpha: f64,
    /// `alpha` divided by the number of challengers (Bonferroni); `alpha` with none.
    pub alpha_per_comparison: f64,
    /// The least median speedup a winner must show, a fraction (default 0.03).
    pub min_speedup: f64,
    /// One comparison per challenger, in candidate order.
    pub comparisons: Vec<PairedComparison>,
    /// Index in `comparisons` of the winner, when one passed.
    pub winner: Option<usize>,
}

impl Decision {
    /// `measured_winner` or `kept` (the JSON's `decision.kind`).
    pub fn kind(&self) -> &'static str {
        if self.winner.is_some() { "measured_winner" } else { "kept" }
    }

    /// The winning comparison, if any.
    pub fn winning(&self) -> Option<&PairedComparison> {
        self.winner.and_then(|w| self.comparisons.get(w))
    }

    /// The challenger that came closest when none won: the lowest p-value, then the largest
    /// median speedup, then the lower index.
    pub fn closest(&self) -> Option<&PairedComparison> {
        self.comparisons.iter().min_by(|a, b| {
            a.p_value
                .total_cmp(&b.p_value)
                .then(b.median_speedup.total_cmp(&a.median_speedup))
                .then(a.candidate.cmp(&b.candidate))
        })
    }

    /// The name of what was kept: `the cost model's pick (fused)`, or `unfused, the cheapest
    /// candidate measured by the cost model (its pick fused was not measured)`.
    fn kept_words(&self) -> String {
        match &self.pick_label {
            None => format!("the cost model's pick ({})", self.baseline_label),
            Some(pick) => format!(
                "{}, the cost model's cheapest measured candidate (its pick {pick} was not measured)",
                self.baseline_label
            ),
        }
    }
}

/// `7.3%`, `-1.6%`, `n/a`.
fn percent(fraction: f64) -> String {
    if fraction.is_finite() { format!("{:.1}%", fraction * 100.0) } else { "n/a".to_string() }
}

/// `p = 0.0039`, `p = 3.1e-5`, `p = 1.000`.
pub fn p_text(p: f64) -> String {
    if p >= 1e-3 { format!("p = {p:.4}") } else { format!("p = {p:.1e}") }
}

impl std::fmt::Display for Decision {
    /// `measured winner: bias, p = 3.1e-5, median speedup 7.3% over the cost model's pick
    /// (fused), faster by more than 3% in 15 of 15 rounds`, or `kept the cost model's pick
    /// (fused): no candidate faster with confidence (closest: bias, median speedup -1.6%, faster
    /// by more than 3% in 0 of 5 rounds, p = 1.0000)`, or `kept the cost model's pick (fused):
    /// no other candidate was measured`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let min = percent(self.min_speedup);
        if let Some(w) = self.winning() {
            let over = match &self.pick_label {
                None => format!("the cost model's pick ({})", self.baseline_label),
                Some(_) => self.baseline_label.clone(),
            };
            return write!(
                f,
                "measured winner: {}, {}, median speedup {} over {over}, faster by more than \
                 {min} in {} of {} rounds",
                w.label,
                p_text(w.p_value),
                percent(w.median_speedup),
                w.wins,
                w.rounds
            );
        }
        let kept = self.kept_words();
        match self.closest() {
            None => write!(f, "kept {kept}: no other candidate was measured"),
            Some(c) => write!(
                f,
                "kept {kept}: no candidate faster with confidence (closest: {}, median speedup \
                 {}, faster by more than {min} in {} of {} rounds, {})",
                c.label,
                percent(c.median_speedup),
                c.wins,
                c.rounds,
                p_text(c.p_value)
            ),
        }
    }
}

/// The decision rule (see the module docs): each challenger in `challengers` (candidate index,
/// label, per-round times) against the baseline's per-round times `baseline_ms`, at
/// family-wise level `alpha` with minimum median speedup `min_speedup`. `baseline` is
/// (candidate index, label, whether it is the cost model's pick, the pick's label otherwise).
pub fn decide(
    baseline: (usize, &str, bool, Option<&str>),
    baseline_ms: &[f64],
    challengers: &[(usize, &str, &[f64])],
    alpha: f64,
    min_speedup: f64,
) -> Decision {
    let alpha_per_comparison =
        if challengers.is_empty() { alpha } else { alpha / challengers.len() as f64 };
    let comparisons: Vec<PairedComparison> = challengers
        .iter()
        .map(|&(candidate, label, times)| PairedComparison {
            candidate,
            label: label.to_string(),
            ..paired_sign_test(baseline_ms, times, min_speedup, alpha_per_comparison)
        })
        .collect();
    // The largest median speedup among those that passed; the lower index on a tie.
    let winner = comparisons
        .iter()
        .enumerate()
        .filter(|(_, c)| c.significant)
        .min_by(|(_, a), (_, b)| {
            b.median_speedup.total_cmp(&a.median_speedup).then(a.candidate.cmp(&b.candidate))
        })
        .map(|(i, _)| i);
    let (index, label, is_pick, pick) = baseline;
    Decision {
        baseline: index,
        baseline_label: label.to_string(),
        baseline_is_pick: is_pick,
        pick_label: if is_pick { None } else { pick.map(str::to_string) },
        selected: winner.and_then(|w| comparisons.get(w)).map_or(index, |c| c.candidate),
        alpha,
        alpha_per_comparison,
        min_speedup,
        comparisons,
        winner,
    }
}

/// How many timed rounds fit the budget: `floor(budget_ms / round_ms)` clamped to
/// `1..=max_rounds` (`max_rounds` when the round time is 0 or not a number). `round_ms` is the
/// measured time of one round (one execute of every candidate), milliseconds; `budget_ms` the
/// time the timed rounds may take, milliseconds. A fast program therefore gets up to
/// `max_rounds` short rounds, a slow one fewer (at least one).
///
/// ```
/// use lumen_runtime::search::stats::planned_rounds;
/// assert_eq!(planned_rounds(1000.0, 0.5, 15), 15); // 2,000 would fit
/// assert_eq!(planned_rounds(1000.0, 61.0, 15), 15); // 16 would fit
/// assert_eq!(planned_rounds(1000.0, 150.0, 15), 6);
/// assert_eq!(planned_rounds(1000.0, 5000.0, 15), 1);
/// ```
pub fn planned_rounds(budget_ms: f64, round_ms: f64, max_rounds: usize) -> usize {
    let max_rounds = max_rounds.max(1);
    if !(round_ms.is_finite() && round_ms > 0.0 && budget_ms.is_finite()) {
        return max_rounds;
    }
    let fit = (budget_ms.max(0.0) / round_ms).floor();
    if fit >= max_rounds as f64 { max_rounds } else { (fit as usize).max(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise source (splitmix64) in [-1, 1).
    fn noise(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        }
    }

    #[test]
    fn binomial_tails_are_exact() {
        // Sums of C(n, j) / 2^n done by hand.
        assert_eq!(binomial_tail(1, 1), 0.5);
        assert!((binomial_tail(4, 3) - 5.0 / 16.0).abs() < 1e-15);
        assert!((binomial_tail(15, 13) - 121.0 / 32768.0).abs() < 1e-15);
        assert!((binomial_tail(20, 17) - 1351.0 / 1_048_576.0).abs() < 1e-15);
        assert!((binomial_tail(20, 10) - 0.588_098_526_000_976_6).abs() < 1e-12);
        // Large n: symmetric around n/2, and no overflow.
        let half = binomial_tail(5001, 2501);
        assert!((half - 0.5).abs() < 1e-9, "{half}");
        assert!(binomial_tail(5000, 5000) == 0.0 || binomial_tail(5000, 5000) < 1e-300);
        assert!(binomial_tail(5000, 2700) < 1e-7);
    }

    #[test]
    fn least_rounds_and_futility() {
        assert_eq!(min_rounds_to_reject(0.01), 7);
        assert_eq!(min_rounds_to_reject(0.01 / 3.0), 9);
        assert_eq!(min_rounds_to_reject(0.5), 1);
        // 15 rounds at alpha 0.01 / 2: 13 of 15 needed, so the third loss ends the hope.
        assert!(can_still_win(0, 0, 15, 0.005));
        assert!(can_still_win(0, 2, 13, 0.005));
        assert!(!can_still_win(0, 3, 12, 0.005));
        // Too few rounds planned: never.
        assert!(!can_still_win(0, 0, 7, 0.005));
        assert!(can_still_win(0, 0, 8, 0.005));
    }

    #[test]
    fn budget_arithmetic() {
        // digits MLP on the CPU: three candidates of ~0.16 ms, a round of ~0.5 ms.
        assert_eq!(planned_rounds(1000.0, 0.5, 15), 15);
        // The ViT: a round of ~62 ms fits 16 times in 1 s; 150 ms rounds fit 6 times.
        assert_eq!(planned_rounds(1000.0, 62.0, 15), 15);
        assert_eq!(planned_rounds(1000.0, 150.0, 15), 6);
        assert_eq!(planned_rounds(1000.0, 333.4, 15), 2);
        // Slower than the budget: one round still measures every candidate.
        assert_eq!(planned_rounds(1000.0, 4000.0, 15), 1);
        assert_eq!(planned_rounds(0.0, 1.0, 15), 1);
        // No usable estimate: the most rounds.
        assert_eq!(planned_rounds(1000.0, 0.0, 15), 15);
        assert_eq!(planned_rounds(1000.0, f64::NAN, 15), 15);
        assert_eq!(planned_rounds(f64::INFINITY, 1.0, 15), 15);
        assert_eq!(planned_rounds(1000.0, 1.0, 0), 1);
    }

    #[test]
    fn a_clear_win_switches() {
        // The challenger is 10% faster than the baseline in every round, under +-1% noise.
        let mut n = noise(7);
        let base: Vec<f64> = (0..15).map(|_| 1.0 + 0.01 * n()).collect();
        let fast: Vec<f64> = base.iter().map(|b| b * 0.9 * (1.0 + 0.01 * n())).collect();
        let slow: Vec<f64> = base.iter().map(|b| b * 1.2).collect();
        let d = decide(
            (2, "fused", true, None),
            &base,
            &[(0, "unfused", &slow), (1, "bias", &fast)],
            0.01,
            0.03,
        );
        assert_eq!(d.alpha_per_comparison, 0.005);
        assert_eq!(d.selected, 1);
        assert_eq!(d.kind(), "measured_winner");
        let w = d.winning().unwrap();
        assert_eq!((w.label.as_str(), w.wins, w.losses, w.ties, w.rounds), ("bias", 15, 0, 0, 15));
        assert_eq!(w.p_value, 1.0 / 32768.0);
        assert!((w.median_speedup - 0.1).abs() < 0.02, "{}", w.median_speedup);
        let slow_c = &d.comparisons[0];
        assert_eq!((slow_c.wins, slow_c.losses, slow_c.p_value), (0, 15, 1.0));
        assert!(!slow_c.significant);
        let text = d.to_string();
        assert!(text.starts_with("measured winner: bias, p = 3.1e-5, median speedup "), "{text}");
        assert!(
            text.ends_with(
                " over the cost model's pick (fused), faster by more than 3.0% in 15 of 15 rounds"
            ),
            "{text}"
        );
    }

    #[test]
    fn noise_keeps_the_pick() {
        // Two challengers with the baseline's own distribution: +-8% noise each, independent.
        for seed in 0..50 {
            let mut n = noise(seed);
            let base: Vec<f64> = (0..15).map(|_| 1.0 + 0.08 * n()).collect();
            let a: Vec<f64> = (0..15).map(|_| 1.0 + 0.08 * n()).collect();
            let b: Vec<f64> = (0..15).map(|_| 1.0 + 0.08 * n()).collect();
            let d = decide(
                (2, "fused", true, None),
                &base,
                &[(0, "unfused", &a), (1, "bias", &b)],
                0.01,
                0.03,
            );
            assert_eq!(d.selected, 2, "seed {seed}: {d}");
            assert_eq!(d.kind(), "kept");
            assert!(d.to_string().starts_with(
                "kept the cost model's pick (fused): no candidate faster with confidence (closest: "
            ));
        }
        // A real but small speedup (2%, under the 3% minimum) never switches either.
        let base = [1.0; 15];
        let small = [0.98; 15];
        let d = decide((1, "fused", true, None), &base, &[(0, "bias", &small)], 0.01, 0.03);
        assert_eq!((d.selected, d.comparisons[0].wins, d.comparisons[0].losses), (1, 0, 15));
        // 6% faster in 12 of 15 rounds, slower in 3: p = 0.0176 > 0.01, kept.
        let mixed: Vec<f64> = (0..15).map(|i| if i % 5 == 0 { 1.05 } else { 0.94 }).collect();
        let d = decide((1, "fused", true, None), &base, &[(0, "bias", &mixed)], 0.01, 0.03);
        let c = &d.comparisons[0];
        assert_eq!((c.wins, c.losses), (12, 3));
        assert!((c.p_value - 576.0 / 32768.0).abs() < 1e-15);
        assert_eq!(d.selected, 1);
    }

    #[test]
    fn ties_keep_the_pick() {
        // Identical times: every round's speedup is 0 < 3%, all losses: kept, p = 1.
        let same = [0.25; 10];
        let d = decide((1, "fused", true, None), &same, &[(0, "bias", &same)], 0.01, 0.03);
        let c = &d.comparisons[0];
        assert_eq!((c.wins, c.losses, c.ties, c.p_value, c.median_speedup), (0, 10, 0, 1.0, 0.0));
        assert_eq!(d.selected, 1);
        // A speedup of exactly the minimum is a tie: dropped, so 8 wins and 4 ties of 12 rounds
        // is 8 of 8 (p = 1/256), median speedup 0.5: passes at 0.01.
        let base = [1.0; 12];
        let t: Vec<f64> = (0..12).map(|i| if i < 4 { 0.75 } else { 0.5 }).collect();
        let c = paired_sign_test(&base, &t, 0.25, 0.01);
        assert_eq!((c.wins, c.losses, c.ties), (8, 0, 4));
        assert_eq!(c.p_value, 1.0 / 256.0);
        assert!(c.significant);
        // Two challengers with the same win: the lower index wins the tie.
        let fast = [0.5; 12];
        let d = decide(
            (2, "fused", true, None),
            &base,
            &[(0, "unfused", &fast), (1, "bias", &fast)],
            0.01,
            0.03,
        );
        assert_eq!(d.selected, 0);
        // No rounds at all: p = 1, kept.
        let c = paired_sign_test(&[], &[], 0.03, 0.01);
        assert_eq!((c.rounds, c.p_value, c.significant), (0, 1.0, false));
        assert!(c.median_speedup.is_nan());
    }

    #[test]
    fn bonferroni_needs_more_rounds_with_more_challengers() {
        // 7 rounds all 10% faster: p = 1/128 = 0.0078, enough alone (0.01), not shared by two.
        let base = [1.0; 7];
        let fast = [0.9; 7];
        let slow = [1.5; 7];
        let alone = decide((1, "fused", true, None), &base, &[(0, "bias", &fast)], 0.01, 0.03);
        assert_eq!(alone.selected, 0);
        let shared = decide(
            (2, "fused", true, None),
            &base,
            &[(0, "unfused", &slow), (1, "bias", &fast)],
            0.01,
            0.03,
        );
        assert_eq!(shared.selected, 2);
        assert_eq!(shared.closest().map(|c| c.label.as_str()), Some("bias"));
    }

    #[test]
    fn a_baseline_other_than_the_pick_says_so() {
        let base = [1.0; 9];
        let d = decide((0, "unfused", false, Some("fused")), &base, &[], 0.01, 0.03);
        assert_eq!(d.selected, 0);
        assert_eq!(
            d.to_string(),
            "kept unfused, the cost model's cheapest measured candidate (its pick fused was not \
             measured): no other candidate was measured"
        );
        let fast = [0.8; 9];
        let d =
            decide((0, "unfused", false, Some("fused")), &base, &[(1, "bias", &fast)], 0.01, 0.03);
        assert_eq!(d.selected, 1);
        assert!(d.to_string().contains(" median speedup 20.0% over unfused, "), "{d}");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0]), Some(4.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // One stray slow trial does not move it.
        assert_eq!(median(&[1.0, 1.1, 50.0, 0.9, 1.0]), Some(1.0));
    }
}
