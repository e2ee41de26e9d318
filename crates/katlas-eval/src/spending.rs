//! Alpha spending for the adaptive plan: how much of the family-wise error
//! rate each look may use, accounting for the looks being correlated.
//!
//! A Bonferroni split (the sum of per-look levels equals alpha) is valid but
//! wasteful: the statistic at look k shares most of its samples with look
//! k−1, so the looks' errors overlap heavily. Group-sequential designs spend a
//! cumulative error `alpha(n)` and choose each look's boundary so that the
//! chance of crossing *first* at that look equals the increment. The
//! boundaries come from the normal-theory joint law of the looks (a random
//! walk observed at the planned counts), computed here by a seeded Monte
//! Carlo, so the same plan always gets the same levels.
//!
//! The same machinery spends two errors. Efficacy (`EFFICACY`, alpha): `first_share` of
//! alpha at the first look so a large effect ends the eval at the minimum run count, the
//! rest along `((n - n1) / (nK - n1))^rho`, linear (`rho = 1`): a 5% effect ends within a few
//! looks, and a front-loaded curve (`rho < 1`) pushed the A/A rate with no band past 5%. Futility (`FUTILITY`, beta against `--min-effect`): the chance that
//! an eval whose true effect is the minimum effect stops for futility instead of finding
//! it (verdict.rs: the futility interval inside ±min_effect).

use crate::stats;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// How a total error is spent over the looks: `first_share` of it at the first look,
/// the rest along `((n - n1) / (nK - n1))^rho`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve {
    pub first_share: f64,
    pub rho: f64,
}

/// Efficacy (type-I error) spending of the default plan.
pub const EFFICACY: Curve = Curve { first_share: 0.5, rho: 1.0 };
/// Futility (type-II error) spending of the default plan.
pub const FUTILITY: Curve = Curve { first_share: 0.5, rho: 1.5 };
const PATHS: usize = 200_000;
const SEED: u64 = 0x6b61_746c_6173_7370;

/// Cumulative error spent by each look.
pub fn cumulative(looks: &[u32], total: f64, curve: Curve) -> Vec<f64> {
    if looks.len() <= 1 {
        return vec![total; looks.len()];
    }
    let n1 = looks[0] as f64;
    let nk = *looks.last().expect("non-empty") as f64;
    let first = curve.first_share * total;
    looks.iter().map(|&n| first + (total - first) * ((n as f64 - n1) / (nk - n1)).clamp(0.0, 1.0).powf(curve.rho)).collect()
}

/// Two-sided nominal level (alpha) each look's interval uses so that the chance of
/// leaving it first at that look is the curve's increment of `total`.
pub fn nominal_alphas(looks: &[u32], total: f64, curve: Curve) -> Vec<f64> {
    if looks.len() <= 1 {
        return vec![total; looks.len()];
    }
    type Memo = Mutex<HashMap<(Vec<u32>, [u64; 3]), Vec<f64>>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    let key = (looks.to_vec(), [total.to_bits(), curve.first_share.to_bits(), curve.rho.to_bits()]);
    if let Some(v) = memo.lock().expect("memo").get(&key) {
        return v.clone();
    }
    let v = boundaries(looks, &cumulative(looks, total, curve));
    memo.lock().expect("memo").insert(key, v.clone());
    v
}

/// |Z| at every look for each simulated path, then per look the boundary that
/// lets exactly the planned share of still-running paths cross.
fn boundaries(looks: &[u32], cum: &[f64]) -> Vec<f64> {
    let k = looks.len();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut z = vec![0.0f64; PATHS * k];
    for p in 0..PATHS {
        let mut s = 0.0;
        let mut i = 0u32;
        for (j, &n) in looks.iter().enumerate() {
            while i < n {
                s += normal(&mut rng);
                i += 1;
            }
            z[p * k + j] = (s / (n.max(1) as f64).sqrt()).abs();
        }
    }
    let mut alive: Vec<usize> = (0..PATHS).collect();
    let mut out = Vec::with_capacity(k);
    for j in 0..k {
        let crossed = PATHS - alive.len();
        let want = ((cum[j] * PATHS as f64).round() as usize).saturating_sub(crossed);
        let mut v: Vec<f64> = alive.iter().map(|&p| z[p * k + j]).collect();
        let thr = if want == 0 || v.is_empty() {
            f64::INFINITY
        } else if want >= v.len() {
            0.0
        } else {
            // The boundary sits between the want-th and (want+1)-th largest |Z|.
            let (_, hi, _) = v.select_nth_unstable_by(want - 1, |a, b| b.total_cmp(a));
            let upper = *hi;
            let next = v[want..].iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (upper + next) / 2.0
        };
        alive.retain(|&p| z[p * k + j] <= thr);
        out.push((2.0 * (1.0 - stats::normal_cdf(thr))).clamp(0.0, 1.0));
    }
    out
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spends_exactly_alpha_and_beats_bonferroni() {
        let looks: Vec<u32> = (3..=20).collect();
        let first = EFFICACY.first_share * 0.05;
        let cum = cumulative(&looks, 0.05, EFFICACY);
        assert!((cum[0] - first).abs() < 1e-12);
        assert!((cum[17] - 0.05).abs() < 1e-12);
        assert!(cum.windows(2).all(|w| w[1] >= w[0]));
        let nom = nominal_alphas(&looks, 0.05, EFFICACY);
        // First look: nothing before it, so its level is its own spend.
        assert!((nom[0] - first).abs() < 0.002, "{nom:?}");
        // Correlated looks: the nominal levels sum to more than alpha
        // (Bonferroni would make them sum to exactly alpha).
        assert!(nom.iter().sum::<f64>() > 0.06, "{nom:?}");
        assert!(nom.iter().all(|&a| a < 0.05), "{nom:?}");
    }

    #[test]
    fn family_error_matches_spend_on_fresh_paths() {
        // Check the boundaries on paths the calibration never saw.
        for (looks, curve) in [(vec![3u32, 5, 7, 9, 11], EFFICACY), ((3..=20).collect(), EFFICACY), ((3..=20).collect(), FUTILITY)] {
            family_rate_is_spend(&looks, curve);
        }
    }

    fn family_rate_is_spend(looks: &[u32], curve: Curve) {
        let nom = nominal_alphas(looks, 0.05, curve);
        let thr: Vec<f64> = nom.iter().map(|a| stats::z_quantile(1.0 - a / 2.0)).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let trials = 100_000;
        let mut hits = 0;
        for _ in 0..trials {
            let mut s = 0.0;
            let mut i = 0;
            for (j, &n) in looks.iter().enumerate() {
                while i < n {
                    s += normal(&mut rng);
                    i += 1;
                }
                if (s / (n as f64).sqrt()).abs() > thr[j] {
                    hits += 1;
                    break;
                }
            }
        }
        let rate = hits as f64 / trials as f64;
        assert!((rate - 0.05).abs() < 0.004, "family-wise rate {rate}");
    }

    #[test]
    fn single_look_is_alpha() {
        assert_eq!(nominal_alphas(&[10], 0.05, EFFICACY), vec![0.05]);
    }
}
