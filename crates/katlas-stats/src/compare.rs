//! Two samples compared as a verdict reads them: the relative change of trimmed means with its
//! seeded percentile bootstrap, the Mann–Whitney U test (exact when it can be) and the drift of
//! a series between its halves. Written here, not borrowed, so the seeding and the tie handling
//! are ours.

use crate::robust::{quantile_sorted, trimmed_mean, trimmed_mean_in_place};
use crate::{normal_cdf, sorted};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Relative change of 20%-trimmed means, `tmean(b) / tmean(a) - 1`.
pub fn relative_change(a: &[f64], b: &[f64]) -> f64 {
    trimmed_mean(b) / trimmed_mean(a) - 1.0
}

/// Seeded percentile bootstrap CI of `tmean(b)/tmean(a) - 1` (20%-trimmed means), both sides
/// resampled independently. Deterministic for a given seed.
pub fn bootstrap_relative_change_ci(a: &[f64], b: &[f64], level: f64, resamples: u32, seed: u64) -> Option<[f64; 2]> {
    bootstrap_relative_change_cis(a, b, &[level], resamples, seed).map(|v| v[0])
}

/// The same bootstrap read at several levels (one resampling, one interval per level).
pub fn bootstrap_relative_change_cis(a: &[f64], b: &[f64], levels: &[f64], resamples: u32, seed: u64) -> Option<Vec<[f64; 2]>> {
    let a = sorted(a);
    let b = sorted(b);
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ba = vec![0.0; a.len()];
    let mut bb = vec![0.0; b.len()];
    let mut stats = Vec::with_capacity(resamples as usize);
    for _ in 0..resamples {
        for x in ba.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in bb.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        let ma = trimmed_mean_in_place(&mut ba);
        let mb = trimmed_mean_in_place(&mut bb);
        stats.push(mb / ma - 1.0);
    }
    stats.sort_by(|x, y| x.total_cmp(y));
    Some(
        levels
            .iter()
            .map(|level| {
                let alpha = 1.0 - level;
                [quantile_sorted(&stats, alpha / 2.0), quantile_sorted(&stats, 1.0 - alpha / 2.0)]
            })
            .collect(),
    )
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U statistic of `b` (count of pairs with b > a, ties counting 1/2).
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` is from the exact permutation distribution.
    pub exact: bool,
}

/// Two-sided Mann–Whitney U test. Exact (permutation distribution of U) when
/// there are no ties and both sides have at most 30 samples; otherwise the
/// normal approximation with tie-corrected variance and continuity correction.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    // Ranks of the pooled sample, average ranks for ties.
    let mut pooled: Vec<(f64, bool)> = a.iter().map(|x| (*x, false)).chain(b.iter().map(|x| (*x, true))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut rank_b = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        if t > 1.0 {
            tie_term += t * t * t - t;
        }
        for item in &pooled[i..=j] {
            if item.1 {
                rank_b += r;
            }
        }
        i = j + 1;
    }
    let u = rank_b - (n2 * (n2 + 1)) as f64 / 2.0;
    let mu = (n1 * n2) as f64 / 2.0;
    if tie_term == 0.0 && n1 <= 30 && n2 <= 30 {
        let dist = u_distribution(n1, n2);
        let total: f64 = dist.iter().sum();
        let u_int = u.round() as usize;
        let lo = u_int.min(n1 * n2 - u_int);
        // P(U <= lo) doubled, by symmetry.
        let tail: f64 = dist[..=lo].iter().sum::<f64>() / total;
        return Some(MannWhitney { u, p: (2.0 * tail).min(1.0), exact: true });
    }
    let nf = n as f64;
    let var = (n1 * n2) as f64 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return Some(MannWhitney { u, p: 1.0, exact: false });
    }
    let z = ((u - mu).abs() - 0.5).max(0.0) / var.sqrt();
    Some(MannWhitney { u, p: (2.0 * (1.0 - normal_cdf(z))).min(1.0), exact: false })
}

/// Counts of each U value (0..=n1*n2) over all C(n1+n2, n1) arrangements.
fn u_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // f[i][j][u]: arrangements of i a's and j b's with U = u; built row by row.
    let max_u = n1 * n2;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0; // i = 0: any number of b's, U = 0
    }
    for i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for u in 0..=i * j {
                // Largest element is an a (adds nothing to U of b) or a b (beats all i a's).
                let from_a = prev[j][u];
                let from_b = if u >= i { cur[j - 1][u - i] } else { 0.0 };
                cur[j][u] = from_a + from_b;
            }
        }
        prev = cur;
    }
    prev[n2].clone()
}

/// Drift of a series in run order: the relative change of 20%-trimmed means from its first
/// half to its second ([`relative_change`]), with the Mann–Whitney p-value between the halves.
pub fn drift(series: &[f64]) -> Option<(f64, f64)> {
    if series.len() < 6 {
        return None;
    }
    let h = series.len() / 2;
    let (first, second) = (&series[..h], &series[series.len() - h..]);
    let d = relative_change(first, second);
    let p = mann_whitney(first, second).map(|m| m.p).unwrap_or(1.0);
    Some((d, p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::close;

    #[test]
    fn bootstrap_is_seeded_and_covers_the_shift() {
        let a: Vec<f64> = (0..20).map(|i| 100.0 + ((i * 7) % 20) as f64 * 0.37).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.10).collect();
        let ci1 = bootstrap_relative_change_ci(&a, &b, 0.95, 10_000, 7).unwrap();
        let ci2 = bootstrap_relative_change_ci(&a, &b, 0.95, 10_000, 7).unwrap();
        assert_eq!(ci1, ci2, "same seed, same interval");
        assert!(ci1[0] <= 0.10 && 0.10 <= ci1[1], "{ci1:?}");
        assert!(ci1[0] > 0.05, "{ci1:?}");
        let ci3 = bootstrap_relative_change_ci(&a, &b, 0.95, 10_000, 8).unwrap();
        assert_ne!(ci1, ci3, "different seed, (slightly) different interval");
    }

    #[test]
    fn mann_whitney_exact_and_normal() {
        // Complete separation at 4 vs 4: p = 2/70.
        let m = mann_whitney(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert!(m.exact);
        assert_eq!(m.u, 16.0);
        assert!(close(m.p, 2.0 / 70.0, 1e-12), "{}", m.p);
        // 3 vs 3 can never reach 0.05 two-sided.
        let m = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!(close(m.p, 0.1, 1e-12));
        // Identical samples: p = 1 (ties path, normal approximation).
        let m = mann_whitney(&[1.0, 1.0, 1.0], &[1.0, 1.0, 1.0]).unwrap();
        assert!(!m.exact);
        assert_eq!(m.p, 1.0);
        // With ties: U = 25.5, tie-corrected z = 10/sqrt(29.5909) -> p = 0.0660
        // (scipy.stats.mannwhitneyu(..., method='asymptotic') agrees).
        let m = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        assert!(!m.exact);
        assert_eq!(m.u, 25.5);
        assert!(close(m.p, 0.0660, 1e-3), "{}", m.p);
        // Exact distribution sums to C(n1+n2, n1).
        let d = u_distribution(5, 7);
        assert_eq!(d.iter().sum::<f64>(), 792.0);
    }

    #[test]
    fn drift_halves() {
        let flat: Vec<f64> = (0..12).map(|i| 100.0 + (i % 3) as f64).collect();
        let (d, p) = drift(&flat).unwrap();
        assert!(d.abs() < 0.01 && p > 0.5, "{d} {p}");
        let ramp: Vec<f64> = (0..12).map(|i| 100.0 + 2.0 * i as f64).collect();
        let (d, p) = drift(&ramp).unwrap();
        assert!(d > 0.1 && p < 0.01, "{d} {p}");
        assert!(drift(&flat[..5]).is_none());
    }
}
