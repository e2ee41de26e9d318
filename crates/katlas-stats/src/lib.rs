//! katlas's statistics, written once: the median, mean and variance of measurements, the
//! quantiles of the normal and Student's t distributions, the normal CDF and the Welch interval
//! of a ratio of geometric means (shared by the eval, the store and the collector); the robust
//! summaries and the two-sample comparisons a verdict reads (bootstrap of trimmed means,
//! Mann–Whitney, drift). One small crate, built optimised even in tests: the eval's simulations
//! run its bootstraps millions of times.
//!
//! One rule for every function here: a measurement is a finite number. NaN and infinities are
//! never measurements, so the median leaves them out and the Welch interval refuses them, and a
//! summary of nothing is NaN (or `None`), never a panic.

mod compare;
mod robust;
mod special;

pub use compare::{bootstrap_relative_change_ci, bootstrap_relative_change_cis, drift, mann_whitney, relative_change, MannWhitney};
pub use robust::{cv, mad, median_ci, quantile_sorted, robust_cv, stddev, trimmed_mean, TRIM};

/// Sorted copy of the finite values of `xs`.
pub fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// Median of the finite values of `xs` (the mean of the middle two for an even count); NaN
/// when there are none. Generic so that `f32` samples (the collector keeps millions of launch
/// durations as `f32`) are not copied out as `f64` first.
pub fn median<T: Copy + Into<f64>>(xs: &[T]) -> f64 {
    let mut v: Vec<T> = xs.iter().copied().filter(|x| (*x).into().is_finite()).collect();
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    // Selection, not a sort: a kernel's launch durations can run to millions.
    let (below, mid, _) = v.select_nth_unstable_by(n / 2, |a, b| (*a).into().total_cmp(&(*b).into()));
    let hi: f64 = (*mid).into();
    if n % 2 == 1 {
        hi
    } else {
        let lo = below.iter().map(|x| (*x).into()).fold(f64::NEG_INFINITY, f64::max);
        0.5 * (lo + hi)
    }
}

/// Arithmetic mean; NaN for no values.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample variance (n-1 denominator); NaN below two samples.
pub fn variance(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64
}

/// Quantile of the standard normal (`p` in `[0, 1]`; ±infinity at the ends).
pub fn z_quantile(p: f64) -> f64 {
    assert!((0.0..=1.0).contains(&p), "a quantile's probability is in [0, 1], not {p}");
    // Written as statrs' `mean - sigma * sqrt(2) * erfc_inv(2p)` with mean 0 and sigma 1, so
    // the median's sign of zero is statrs' too.
    0.0 - std::f64::consts::SQRT_2 * special::erfc_inv(2.0 * p)
}

/// Quantile of Student's t with `df` degrees of freedom (the normal's for `df` above 10^6 or
/// infinite; `df` below 1 counts as 1).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !df.is_finite() || df > 1e6 {
        return z_quantile(p);
    }
    assert!((0.0..=1.0).contains(&p), "a quantile's probability is in [0, 1], not {p}");
    let df = df.max(1.0);
    // The t quantile through the inverse regularized incomplete beta function.
    let x1 = if p >= 0.5 { 1.0 - p } else { p };
    let y = special::inv_beta_reg(0.5 * df, 0.5, 2.0 * x1);
    let y = (df * (1. - y) / y).sqrt();
    0.0 + if p >= 0.5 { y } else { -y }
}

/// The standard normal's CDF.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * special::erfc((0.0 - x) / std::f64::consts::SQRT_2)
}

/// Difference of mean logs (`mean(ln b) - mean(ln a)`), its standard error and the
/// Welch–Satterthwaite degrees of freedom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WelchLog {
    pub d: f64,
    pub se: f64,
    pub df: f64,
}

/// [`WelchLog`] of two samples; `None` unless each side has two values and every value is a
/// finite positive number (a log ratio of anything else means nothing).
pub fn welch_log(a: &[f64], b: &[f64]) -> Option<WelchLog> {
    if a.len() < 2 || b.len() < 2 || a.iter().chain(b).any(|x| *x <= 0.0 || !x.is_finite()) {
        return None;
    }
    let la: Vec<f64> = a.iter().map(|x| x.ln()).collect();
    let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
    let (na, nb) = (la.len() as f64, lb.len() as f64);
    let (va, vb) = (variance(&la) / na, variance(&lb) / nb);
    let se2 = va + vb;
    let df = if se2 > 0.0 { se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0)) } else { f64::INFINITY };
    Some(WelchLog { d: mean(&lb) - mean(&la), se: se2.sqrt(), df })
}

/// Welch-t interval at `level` of the ratio of geometric means, as a relative change
/// (`exp(mean(ln b) - mean(ln a)) - 1`); `None` where [`welch_log`] is.
pub fn welch_log_ci(a: &[f64], b: &[f64], level: f64) -> Option<[f64; 2]> {
    let w = welch_log(a, b)?;
    if w.se <= 0.0 {
        return Some([w.d.exp() - 1.0, w.d.exp() - 1.0]);
    }
    let hw = t_quantile(1.0 - (1.0 - level) / 2.0, w.df) * w.se;
    Some([(w.d - hw).exp() - 1.0, (w.d + hw).exp() - 1.0])
}

/// Whether `a` is within `tol` of `b`: the tests' comparison of computed statistics.
#[cfg(test)]
fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_measurements() {
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0, 100.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median::<f64>(&[]).is_nan(), "the median of nothing is NaN, not a panic");
        assert_eq!(median(&[3.5f32, 1.0, 2.0, 8.25]), 2.75, "f32 samples");
        assert!(median(&[f32::NAN]).is_nan());
        assert!(median(&[f64::NAN, f64::INFINITY]).is_nan());
        assert_eq!(median(&[f64::NAN, 1.0, 3.0]), 2.0, "NaN is not a measurement");
        assert_eq!(median(&[f64::NEG_INFINITY, 1.0, 3.0, f64::INFINITY]), 2.0, "nor is an infinity");
        // Selection agrees with a sort on every length and order.
        for n in 1..40usize {
            let xs: Vec<f64> = (0..n).map(|i| ((i * 37 + 11) % 23) as f64 * 0.5).collect();
            let s = sorted(&xs);
            let want = if n % 2 == 1 { s[n / 2] } else { 0.5 * (s[n / 2 - 1] + s[n / 2]) };
            assert_eq!(median(&xs), want, "{xs:?}");
        }
    }

    #[test]
    fn moments() {
        assert_eq!(mean(&[1.0, 2.0, 3.0, 4.0, 100.0]), 22.0);
        assert!(mean(&[]).is_nan());
        assert!(variance(&[1.0]).is_nan());
        assert!(close(variance(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).sqrt(), 2.138089935, 1e-8));
    }

    #[test]
    fn quantiles_match_tables() {
        assert!(close(z_quantile(0.975), 1.959964, 1e-5));
        assert!(close(t_quantile(0.975, 4.0), 2.776445, 1e-4));
        assert!(close(t_quantile(0.995, 10.0), 3.169273, 1e-4));
        assert!(close(t_quantile(0.025, 4.0), -2.776445, 1e-4));
        assert!(close(normal_cdf(1.959964), 0.975, 1e-6));
        assert_eq!(z_quantile(0.5).to_bits(), 0.0f64.to_bits());
        assert_eq!(z_quantile(1.0), f64::INFINITY);
        assert_eq!(t_quantile(0.975, f64::INFINITY), z_quantile(0.975));
    }

    /// Values `statrs` 0.19.1 computed (`Normal::new(0, 1)`, `StudentsT::new(0, 1, df)`), as
    /// bits: the port must give the same numbers, not close ones.
    #[test]
    fn quantiles_are_statrs_to_the_bit() {
        for &(p, bits) in Z_QUANTILE {
            assert_eq!(z_quantile(p).to_bits(), bits, "z_quantile({p})");
        }
        for &(p, df, bits) in T_QUANTILE {
            assert_eq!(t_quantile(p, df).to_bits(), bits, "t_quantile({p}, {df})");
        }
        for &(x, bits) in NORMAL_CDF {
            assert_eq!(normal_cdf(x).to_bits(), bits, "normal_cdf({x})");
        }
    }

    const Z_QUANTILE: &[(f64, u64)] = &[
        (0.5, 0x0),
        (0.9, 0x3ff4813c36e26d33),
        (0.95, 0x3ffa515209676abc),
        (0.975, 0x3fff5c0331eeff83),
        (0.995, 0x40049b4c64d69161),
        (0.999, 0x4008b8cbb7204470),
        (0.9995, 0x400a52ffadd2f906),
        (0.025, 0xbfff5c0331eeff86),
        (1e-6, 0xc0130381a9799f7e),
        (0.99999999, 0x401672b074346f16),
        (0.6, 0x3fd036d6c4a04b5a),
    ];

    const T_QUANTILE: &[(f64, f64, u64)] = &[
        (0.975, 1.0, 0x40296993aacc4d1c),
        (0.975, 2.0, 0x401135ea98e146bf),
        (0.975, 4.0, 0x40063628d9efb5e2),
        (0.975, 9.5, 0x4001f3fe5766b402),
        (0.975, 30.0, 0x40005692f10aad7f),
        (0.975, 1000.0, 0x3fff65bda9fcf645),
        (0.995, 10.0, 0x40095aaba187f875),
        (0.95, 3.3, 0x400226345d911623),
        (0.9, 17.0, 0x3ff55585a0803c73),
        (0.025, 4.0, 0xc0063628d9efb5e7),
        (0.5, 5.0, 0x0),
        (0.9995, 2.0, 0x403f995ba4065a23),
        (0.999, 123.4, 0x400942bf47b219ea),
    ];

    const NORMAL_CDF: &[(f64, u64)] = &[
        (0.0, 0x3fe0000000000000),
        (0.3, 0x3fe3c5ee2cc40b78),
        (-0.3, 0x3fd87423a677e90f),
        (0.7, 0x3fe841d5715c32a8),
        (1.0, 0x3feaec4bd11ef4fa),
        (-1.0, 0x3fc44ed0bb842c1a),
        (1.959964, 0x3fef333333af89d1),
        (2.5, 0x3fefcd2163504010),
        (-3.0, 0x3f561de1f981cbb1),
        (5.0, 0x3fefffff661ae86f),
        (-8.0, 0x3cc669d2c9126776),
        (-12.0, 0x392272b313646901),
        (30.0, 0x3ff0000000000000),
        (-40.0, 0x0),
    ];

    #[test]
    fn welch_interval() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let b = [110.0, 112.2, 107.8, 111.1, 108.9];
        let ci = welch_log_ci(&a, &b, 0.95).unwrap();
        assert!(ci[0] < 0.10 && ci[1] > 0.10 && ci[0] > 0.07, "{ci:?}");
        assert!(welch_log_ci(&a[..1], &b, 0.95).is_none());
        assert!(welch_log_ci(&[1.0, -1.0], &b, 0.95).is_none());
        assert!(welch_log_ci(&[1.0, f64::INFINITY], &b, 0.95).is_none(), "an infinity is not a measurement");
        assert!(welch_log_ci(&[1.0, f64::NAN], &b, 0.95).is_none(), "nor is NaN");
        // No spread on either side: the interval is the point.
        let ci = welch_log_ci(&[2.0, 2.0], &[3.0, 3.0], 0.95).unwrap();
        assert_eq!(ci[0], ci[1]);
        assert!(close(ci[0], 0.5, 1e-12));
    }
}
