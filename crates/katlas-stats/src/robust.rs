//! Robust summaries of one sample: spread (standard deviation, MAD, robust CV), the
//! order-statistics interval of the median, the trimmed mean and type-7 quantiles.

use crate::{mean, median, sorted, variance};

pub fn stddev(xs: &[f64]) -> f64 {
    variance(xs).sqrt()
}

/// Coefficient of variation, stddev / |mean|.
pub fn cv(xs: &[f64]) -> f64 {
    stddev(xs) / mean(xs).abs()
}

/// Robust coefficient of variation: `1.4826 · MAD / |median|` (equals the CV
/// for normal data; a single outlier barely moves it).
pub fn robust_cv(xs: &[f64]) -> f64 {
    1.4826 * mad(xs) / median(xs).abs()
}

/// Median absolute deviation from the median (unscaled).
pub fn mad(xs: &[f64]) -> f64 {
    let m = median(xs);
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// Distribution-free CI of the median from order statistics (binomial with
/// p = 1/2), at least `level` coverage. `None` when n is too small for the level.
pub fn median_ci(xs: &[f64], level: f64) -> Option<[f64; 2]> {
    let v = sorted(xs);
    let n = v.len();
    if n < 2 {
        return None;
    }
    // Largest k with P(X < k) <= alpha/2 for X ~ Bin(n, 1/2); interval [x_(k), x_(n-k+1)] (1-based).
    let alpha = 1.0 - level;
    let mut cdf = 0.0;
    let mut k = 0usize;
    let mut pmf = 0.5f64.powi(n as i32);
    for i in 0..n {
        if cdf + pmf > alpha / 2.0 {
            break;
        }
        cdf += pmf;
        k = i + 1;
        pmf = pmf * (n - i) as f64 / (i + 1) as f64;
    }
    if k == 0 {
        return None;
    }
    Some([v[k - 1], v[n - k]])
}

/// Mean of the middle values after dropping `floor(0.2 n)` from each end.
pub fn trimmed_mean(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    trimmed_mean_in_place(&mut v)
}

pub(crate) fn trimmed_mean_in_place(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable_by(|x, y| x.total_cmp(y));
    let g = (TRIM * v.len() as f64).floor() as usize;
    let mid = &v[g..v.len() - g];
    mid.iter().sum::<f64>() / mid.len() as f64
}

/// Share trimmed from each end by `trimmed_mean`.
pub const TRIM: f64 = 0.2;

/// Linear-interpolated quantile (type 7) of sorted data.
pub fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let h = (v.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::close;

    #[test]
    fn robust_summaries() {
        let xs = [1.0, 2.0, 3.0, 4.0, 100.0];
        assert_eq!(mad(&xs), 1.0);
        assert!(close(stddev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.138089935, 1e-8));
        assert!(close(robust_cv(&xs), 1.4826 / 3.0, 1e-12));
    }

    #[test]
    fn median_ci_order_statistics() {
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        // n=10, 95%: k=2 -> [x(2), x(9)] (coverage 97.9%).
        assert_eq!(median_ci(&xs, 0.95), Some([2.0, 9.0]));
        // n=5 cannot reach 95% with order statistics (min coverage 93.75%).
        assert_eq!(median_ci(&xs[..5], 0.95), None);
        assert_eq!(median_ci(&xs[..5], 0.90), Some([1.0, 5.0]));
    }
}
