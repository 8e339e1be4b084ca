//! A figure of a program with symbolic dimensions (its FLOP count, say) as a polynomial in the
//! symbols: `2*seq*total*64 + 9*seq` rather than the number at the bound.
//!
//! The figure is not derived symbolically op by op: each op's count is a product of lengths
//! (see [`crate::llir::LlirOp::flops`]), so the program's is a polynomial of low degree in each
//! symbol, and [`Polynomial::fit`] recovers it exactly from the figure sampled on a grid of
//! values (Lagrange interpolation in one symbol at a time over `1..=min(bound, 4)`, exact
//! rational arithmetic), then checks the fit at the bounds. A figure that is not such a
//! polynomial (degree above [`MAX_DEGREE`] in one symbol) fails the check and gives `None`.
//! When a bound is at most `MAX_DEGREE + 1` the grid is every value the symbol can take, so the
//! polynomial is exact there whatever the degree.

use std::collections::BTreeMap;
use std::fmt;

/// The highest power of one symbol [`Polynomial::fit`] looks for: a product over two axes of
/// one symbol (`seq x seq` attention scores) is degree 2; 3 leaves a margin.
pub const MAX_DEGREE: u32 = 3;

/// Grid points sampled at most (product over the symbols): 4 values each for up to 4 symbols.
const MAX_SAMPLES: usize = 256;

/// An exact rational `num / den`, `den > 0`, in lowest terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ratio {
    num: i128,
    den: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// `None` on overflow (values are FLOP counts of real programs: far inside i128).
    fn new(num: i128, den: i128) -> Option<Ratio> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den).max(1);
        let sign = if den < 0 { -1 } else { 1 };
        Some(Ratio { num: sign * num / g, den: sign * den / g })
    }

    fn int(v: i128) -> Ratio {
        Ratio { num: v, den: 1 }
    }

    fn add(self, o: Ratio) -> Option<Ratio> {
        let num = self.num.checked_mul(o.den)?.checked_add(o.num.checked_mul(self.den)?)?;
        Ratio::new(num, self.den.checked_mul(o.den)?)
    }

    fn mul(self, o: Ratio) -> Option<Ratio> {
        Ratio::new(self.num.checked_mul(o.num)?, self.den.checked_mul(o.den)?)
    }
}

/// A polynomial with rational coefficients in named symbols: each term's key is the power of
/// every symbol, in the order of `names`. Zero terms are not stored; terms print highest total
/// degree first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Polynomial {
    names: Vec<String>,
    terms: BTreeMap<Vec<u32>, Ratio>,
}

impl Polynomial {
    fn zero(names: &[String]) -> Polynomial {
        Polynomial { names: names.to_vec(), terms: BTreeMap::new() }
    }

    fn add_term(&mut self, powers: Vec<u32>, c: Ratio) -> Option<()> {
        let sum = self.terms.get(&powers).copied().unwrap_or(Ratio::ZERO).add(c)?;
        if sum.num == 0 {
            self.terms.remove(&powers);
        } else {
            self.terms.insert(powers, sum);
        }
        Some(())
    }

    /// Fits the polynomial of a figure `f` of the symbols `names` (bounds `bounds`, each at
    /// least 1) from its values on the grid `1..=min(bound, MAX_DEGREE + 1)` of each symbol,
    /// and checks it where the grid did not reach: at every symbol's bound (the others at 1)
    /// and at all bounds together.
    ///
    /// Returns `None` when `f` fails at a point (`f` returns `None`), the grid would exceed
    /// 256 samples (more than four symbols), an intermediate overflows, or the check fails
    /// (the figure is not a polynomial of degree at most [`MAX_DEGREE`] in each symbol).
    pub fn fit(
        names: &[String],
        bounds: &[usize],
        f: impl Fn(&[usize]) -> Option<u64>,
    ) -> Option<Polynomial> {
        if names.len() != bounds.len() || bounds.contains(&0) {
            return None;
        }
        let points: Vec<usize> = bounds.iter().map(|&b| b.min(MAX_DEGREE as usize + 1)).collect();
        let samples = points.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n))?;
        if samples > MAX_SAMPLES {
            return None;
        }
        let mut values = Vec::with_capacity(names.len());
        let p = Self::fit_from(names, &points, &mut values, &f)?;
        let mut checks: Vec<Vec<usize>> = (0..bounds.len())
            .map(|i| (0..bounds.len()).map(|j| if i == j { bounds[j] } else { 1 }).collect())
            .collect();
        checks.push(bounds.to_vec());
        for at in checks {
            if p.eval(&at)? != Ratio::int(i128::from(f(&at)?)) {
                return None;
            }
        }
        Some(p)
    }

    /// The polynomial in symbols `values.len()..` with the earlier ones fixed at `values`.
    fn fit_from(
        names: &[String],
        points: &[usize],
        values: &mut Vec<usize>,
        f: &impl Fn(&[usize]) -> Option<u64>,
    ) -> Option<Polynomial> {
        let d = values.len();
        if d == names.len() {
            let mut p = Polynomial::zero(names);
            p.add_term(vec![0; names.len()], Ratio::int(i128::from(f(values)?)))?;
            return Some(p);
        }
        // Lagrange in symbol d: sum over x of p_x(rest) * prod_{y != x} (s - y) / (x - y).
        let n = points[d];
        let mut out = Polynomial::zero(names);
        for x in 1..=n {
            values.push(x);
            let px = Self::fit_from(names, points, values, f)?;
            values.pop();
            // The basis polynomial's coefficients, lowest power first.
            let mut basis = vec![Ratio::int(1)];
            for y in (1..=n).filter(|&y| y != x) {
                let scale = Ratio::new(1, x as i128 - y as i128)?;
                let mut next = vec![Ratio::ZERO; basis.len() + 1];
                for (i, &c) in basis.iter().enumerate() {
                    let c = c.mul(scale)?;
                    next[i + 1] = next[i + 1].add(c)?;
                    next[i] = next[i].add(c.mul(Ratio::int(-(y as i128)))?)?;
                }
                basis = next;
            }
            for (powers, &c) in &px.terms {
                for (k, &b) in basis.iter().enumerate().filter(|(_, b)| b.num != 0) {
                    let mut term = powers.clone();
                    term[d] = k as u32;
                    out.add_term(term, c.mul(b)?)?;
                }
            }
        }
        Some(out)
    }

    fn eval(&self, at: &[usize]) -> Option<Ratio> {
        self.terms.iter().try_fold(Ratio::ZERO, |acc, (powers, &c)| {
            let mut term = c;
            for (&p, &v) in powers.iter().zip(at) {
                for _ in 0..p {
                    term = term.mul(Ratio::int(v as i128))?;
                }
            }
            acc.add(term)
        })
    }

    /// The value at `at` (one value per symbol, in order), when it is a whole number that fits
    /// a `u64`; `None` otherwise.
    pub fn value(&self, at: &[usize]) -> Option<u64> {
        let r = self.eval(at)?;
        if r.den == 1 { u64::try_from(r.num).ok() } else { None }
    }
}

impl fmt::Display for Polynomial {
    /// `2*seq*total + 3/2*seq^2 - 4`: highest total degree first, then by the symbols' powers
    /// in declaration order; `0` for the zero polynomial.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<(&Vec<u32>, &Ratio)> = self.terms.iter().collect();
        terms.sort_by(|a, b| {
            let deg = |p: &Vec<u32>| p.iter().sum::<u32>();
            deg(b.0).cmp(&deg(a.0)).then_with(|| b.0.cmp(a.0))
        });
        if terms.is_empty() {
            return write!(f, "0");
        }
        for (i, (powers, c)) in terms.into_iter().enumerate() {
            let negative = c.num < 0;
            match (i, negative) {
                (0, true) => write!(f, "-")?,
                (0, false) => {}
                (_, true) => write!(f, " - ")?,
                (_, false) => write!(f, " + ")?,
            }
            let mut factors: Vec<String> = Vec::new();
            let (num, den) = (c.num.abs(), c.den);
            let constant = powers.iter().all(|&p| p == 0);
            if num != 1 || den != 1 || constant {
                factors.push(if den == 1 { num.to_string() } else { format!("{num}/{den}") });
            }
            for (name, &p) in self.names.iter().zip(powers.iter()) {
                match p {
                    0 => {}
                    1 => factors.push(name.clone()),
                    p => factors.push(format!("{name}^{p}")),
                }
            }
            write!(f, "{}", factors.join("*"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Polynomial;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fits_products_and_prints_them() {
        // An attention-like count: 2*seq*total*64 + 5*seq*64 + 7.
        let f = |v: &[usize]| Some((2 * v[0] * v[1] * 64 + 5 * v[0] * 64 + 7) as u64);
        let p = Polynomial::fit(&names(&["seq", "total"]), &[32, 256], f).unwrap();
        assert_eq!(p.to_string(), "128*seq*total + 320*seq + 7");
        assert_eq!(p.value(&[3, 100]), f(&[3, 100]));
        // Squares and fractions: seq*(seq+1)/2.
        let tri = |v: &[usize]| Some((v[0] * (v[0] + 1) / 2) as u64);
        let p = Polynomial::fit(&names(&["seq"]), &[64], tri).unwrap();
        assert_eq!(p.to_string(), "1/2*seq^2 + 1/2*seq");
        // A constant, and the zero polynomial.
        assert_eq!(Polynomial::fit(&names(&["n"]), &[9], |_| Some(12)).unwrap().to_string(), "12");
        assert_eq!(Polynomial::fit(&names(&["n"]), &[9], |_| Some(0)).unwrap().to_string(), "0");
    }

    #[test]
    fn refuses_what_is_not_a_low_degree_polynomial() {
        // Degree 4 in seq: the grid 1..=4 cannot see it, the check at the bound does.
        assert_eq!(Polynomial::fit(&names(&["seq"]), &[10], |v| Some(v[0].pow(4) as u64)), None);
        assert_eq!(Polynomial::fit(&names(&["seq"]), &[10], |v| Some(1u64 << v[0])), None);
        // A bound within the grid: every value is sampled, so any figure fits exactly.
        let p = Polynomial::fit(&names(&["s"]), &[3], |v| Some(1u64 << v[0])).unwrap();
        assert_eq!((1..=3).map(|s| p.value(&[s])).collect::<Vec<_>>(), [Some(2), Some(4), Some(8)]);
        // A failing sample, a zero bound, five symbols (too many samples).
        assert_eq!(Polynomial::fit(&names(&["s"]), &[3], |_| None), None);
        assert_eq!(Polynomial::fit(&names(&["s"]), &[0], |_| Some(1)), None);
        let five = names(&["a", "b", "c", "d", "e"]);
        assert_eq!(Polynomial::fit(&five, &[8; 5], |_| Some(1)), None);
    }
}
