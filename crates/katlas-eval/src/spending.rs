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
//! The spending curve puts `FIRST_SHARE` of alpha on the first look (a large
//! effect should end the eval at the minimum run count) and spends the rest
//! along `((n - n1) / (nK - n1))^RHO`, keeping most of it for the later looks
//! where small effects are decided.

use crate::stats;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub const FIRST_SHARE: f64 = 0.5;
pub const RHO: f64 = 1.5;
const PATHS: usize = 200_000;
const SEED: u64 = 0x6b61_746c_6173_7370;

/// Cumulative alpha spent by each look.
pub fn cumulative(looks: &[u32], alpha: f64) -> Vec<f64> {
    if looks.len() <= 1 {
        return vec![alpha; looks.len()];
    }
    let n1 = looks[0] as f64;
    let nk = *looks.last().expect("non-empty") as f64;
    let first = FIRST_SHARE * alpha;
    looks.iter().map(|&n| first + (alpha - first) * ((n as f64 - n1) / (nk - n1)).clamp(0.0, 1.0).powf(RHO)).collect()
}

/// Two-sided nominal level (alpha) each look's interval uses.
pub fn nominal_alphas(looks: &[u32], alpha: f64) -> Vec<f64> {
    if looks.len() <= 1 {
        return vec![alpha; looks.len()];
    }
    type Memo = Mutex<HashMap<(Vec<u32>, u64), Vec<f64>>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    let key = (looks.to_vec(), alpha.to_bits());
    if let Some(v) = memo.lock().expect("memo").get(&key) {
        return v.clone();
    }
    let v = boundaries(looks, &cumulative(looks, alpha));
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
        let looks = [3, 5, 7, 9, 11];
        let cum = cumulative(&looks, 0.05);
        assert!((cum[0] - 0.025).abs() < 1e-12);
        assert!((cum[4] - 0.05).abs() < 1e-12);
        assert!(cum.windows(2).all(|w| w[1] >= w[0]));
        let nom = nominal_alphas(&looks, 0.05);
        // First look: nothing before it, so its level is its own spend.
        assert!((nom[0] - 0.025).abs() < 0.002, "{nom:?}");
        // Correlated looks: the nominal levels sum to more than alpha
        // (Bonferroni would make them sum to exactly alpha).
        assert!(nom.iter().sum::<f64>() > 0.055, "{nom:?}");
        // Yet every level stays below alpha and the last one is the largest after the first.
        assert!(nom.iter().all(|&a| a < 0.05), "{nom:?}");
        assert!(nom[4] > nom[1] && nom[4] > nom[2], "{nom:?}");
    }

    #[test]
    fn family_error_matches_spend_on_fresh_paths() {
        // Check the boundaries on paths the calibration never saw.
        let looks = [3u32, 5, 7, 9, 11];
        let nom = nominal_alphas(&looks, 0.05);
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
        assert_eq!(nominal_alphas(&[10], 0.05), vec![0.05]);
    }
}
