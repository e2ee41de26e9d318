//! From two sample series to a verdict, and the sequential (adaptive) plan
//! whose repeated looks are paid for with group-sequential alpha spending.
//!
//! The effect is the ratio of 20%-trimmed means. The decision interval is the
//! hull of the seeded bootstrap CI of that ratio and a Welch-t CI on log
//! values: the bootstrap is robust to outliers but over-trusts very small
//! samples (at n = 3 its interval is bounded by the data range), the t
//! interval is honest at small n. Trimmed means rather than medians: as robust
//! to a stray slow run, but about 94% as efficient as the mean on normal noise
//! where the median is 64%, which is the difference between deciding a 3%
//! effect in 10 runs and needing 20. A verdict
//! needs the hull to clear the noise band `±threshold`:
//!
//! - hull entirely above `+threshold` (in the goal's direction): `improved`
//! - entirely below `-threshold`: `regressed`, also when a side's spread or drift makes
//!   the eval `unstable` otherwise: a wide interval wholly on the worse side is a slowdown
//!   noise cannot explain, while a win under the same spread stays unclaimed
//! - entirely inside `[-threshold, +threshold]`: `no_change`
//! - otherwise `inconclusive`.

use crate::spending::{self, Curve};
use crate::stats;
use katlas_model::ledger::{Effect, Goal, Verdict};

#[derive(Debug, Clone)]
pub struct JudgeConfig {
    /// Relative noise threshold (0.01 = 1%).
    pub threshold: f64,
    /// Family-wise error rate over all looks (two-sided).
    pub alpha: f64,
    pub resamples: u32,
    pub seed: u64,
    pub goal: Goal,
    /// Drift between halves beyond this (relative) and significant is `unstable`.
    pub drift_limit: f64,
    /// Significance the half-vs-half Mann–Whitney test needs to call drift.
    pub drift_p: f64,
    /// Coefficient of variation beyond this on either side is `unstable`.
    pub cv_limit: f64,
    /// Skip the bootstrap when the Welch interval alone cannot decide (the
    /// hull contains it, so the verdict is the same; the report lacks the
    /// bootstrap CI). For simulations and interim looks.
    pub lazy_bootstrap: bool,
    /// The smallest change the user cares about. A band wider than it cannot show
    /// that such a change is absent, so `no_change` against it is `inconclusive`.
    pub min_effect: Option<f64>,
    /// Futility error: the chance, at a true effect of `min_effect`, that the eval
    /// stops for futility (`no_change`) instead of finding it. 0 turns futility off
    /// (the `--aa` calibration wants the whole plan's efficacy interval).
    pub beta: f64,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        Self {
            threshold: 0.01,
            alpha: 0.05,
            resamples: 10_000,
            seed: 0x6b61_746c_6173,
            goal: Goal::Maximize,
            drift_limit: 0.03,
            drift_p: 0.01,
            cv_limit: 0.10,
            lazy_bootstrap: false,
            min_effect: None,
            beta: DEFAULT_BETA,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Judgement {
    pub verdict: Verdict,
    pub effect: Option<Effect>,
    pub reasons: Vec<String>,
    /// (side label, drift) per side with enough samples.
    pub drift: Vec<(String, f64)>,
}

/// Where a look stands: the efficacy interval's level, and the futility interval's
/// level when the eval may stop for futility at this look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    pub level: f64,
    pub futility_level: Option<f64>,
    /// Runs per side and two-sided alpha of the plan's last look (for the futility
    /// stop's check that the whole budget could not clear the band either).
    pub final_n: u32,
    pub final_alpha: f64,
}

/// Judge candidate series `b` against baseline `a`, both in run order, with a
/// decision interval at `level` and no futility stop.
pub fn judge(a: &[f64], b: &[f64], level: f64, cfg: &JudgeConfig) -> Judgement {
    judge_look(a, b, Look { level, futility_level: None, final_n: a.len() as u32, final_alpha: 1.0 - level }, cfg)
}

/// Judge at look `k` of `plan`: its efficacy level and, with `--min-effect`, its futility level.
pub fn judge_at(a: &[f64], b: &[f64], plan: &Plan, k: usize, cfg: &JudgeConfig) -> Judgement {
    judge_look(a, b, plan.look(k, cfg), cfg)
}

fn hull(boot: Option<[f64; 2]>, welch: Option<[f64; 2]>) -> Option<[f64; 2]> {
    match (boot, welch) {
        (Some(x), Some(y)) => Some([x[0].min(y[0]), x[1].max(y[1])]),
        (Some(x), None) => Some(x),
        (None, y) => y,
    }
}

/// How far above the current estimate, in standard errors, the futility stop's projection
/// looks. The estimate alone (0) stops too many small real effects at the first looks,
/// where the estimate is itself uncertain; the futility interval's own bound (~2) keeps
/// A/A evals running to 13 runs. 0.5 keeps the power of fixed N=10 on a 3% effect at CV 1%
/// and 2% (the sweep: `cargo run --release -p katlas-eval --example seq_design`).
pub const FUTILITY_OPTIMISM: f64 = 0.5;

/// Whether an effect half a standard error larger than the current estimate
/// (`FUTILITY_OPTIMISM`), measured with the whole budget (`look.final_n` runs per side at the
/// last look's level, the spread as now), would clear the band `±t`: then a small real
/// effect may still be on its way to a verdict, and futility must not end the eval.
fn budget_could_clear(a: &[f64], b: &[f64], look: &Look, t: f64) -> bool {
    let Some(w) = stats::welch_log(a, b) else { return false };
    let n = a.len().min(b.len()).max(2) as f64;
    let nk = (look.final_n as f64).max(n);
    let q = stats::t_quantile(1.0 - look.final_alpha / 2.0, 2.0 * nk - 2.0);
    let best = w.d.abs() + FUTILITY_OPTIMISM * w.se;
    best - q * w.se * (n / nk).sqrt() > (1.0 + t).ln()
}

/// Whether `ci` lies strictly inside `(-m, m)`.
fn inside(ci: [f64; 2], m: f64) -> bool {
    ci[0] > -m && ci[1] < m
}

/// Judge with an efficacy interval at `look.level` and, when `look.futility_level` and
/// `cfg.min_effect` are set, a futility interval: when that interval lies inside
/// ±min_effect, an effect of the size asked about is ruled out and the verdict is
/// `no_change` (the equivalence half of the sequential test).
pub fn judge_look(a: &[f64], b: &[f64], look: Look, cfg: &JudgeConfig) -> Judgement {
    let level = look.level;
    let mut reasons = Vec::new();
    let mut drift_out = Vec::new();
    if a.is_empty() {
        return Judgement { verdict: Verdict::NeedsBaseline, effect: None, reasons: vec!["baseline produced no usable samples".into()], drift: drift_out };
    }
    if b.is_empty() {
        return Judgement { verdict: Verdict::Inconclusive, effect: None, reasons: vec!["candidate produced no usable samples".into()], drift: drift_out };
    }
    let mut unstable = false;
    for (label, s) in [("baseline", a), ("candidate", b)] {
        // Robust spread (1.4826 MAD / median): a consistent spread, not one outlier.
        let cv = stats::robust_cv(s);
        if cv.is_finite() && cv > cfg.cv_limit {
            unstable = true;
            reasons.push(format!("{label} spread (robust CV) {:.1}% exceeds the {:.1}% limit", cv * 100.0, cfg.cv_limit * 100.0));
        }
        if let Some((d, p)) = stats::drift(s) {
            drift_out.push((label.to_string(), d));
            if d.abs() > cfg.drift_limit && p < cfg.drift_p {
                unstable = true;
                reasons.push(format!("{label} drifted {:+.1}% between first and second half (p = {p:.3}, limit ±{:.1}%)", d * 100.0, cfg.drift_limit * 100.0));
            }
        }
    }
    let futility = match (look.futility_level, cfg.min_effect) {
        (Some(l), Some(m)) if m > 0.0 && l > 0.0 && l < 1.0 => Some((l, m)),
        _ => None,
    };
    let rel = stats::relative_change(a, b);
    let welch = stats::welch_log_ci(a, b, level);
    let welch_f = futility.and_then(|(l, _)| stats::welch_log_ci(a, b, l));
    let sign = match cfg.goal {
        Goal::Maximize => 1.0,
        Goal::Minimize => -1.0,
    };
    // The hull only widens the Welch interval, so when Welch alone can neither decide nor
    // stop for futility, neither can the hull.
    let undecidable = welch.is_some_and(|w| classify(w, sign, cfg.threshold) == Verdict::Inconclusive)
        && futility.is_none_or(|(_, m)| welch_f.is_some_and(|w| !inside(w, m)));
    let (boot, boot_f) = if cfg.lazy_bootstrap && undecidable {
        (None, None)
    } else {
        let levels: Vec<f64> = std::iter::once(level).chain(futility.map(|(l, _)| l)).collect();
        match stats::bootstrap_relative_change_cis(a, b, &levels, cfg.resamples, cfg.seed) {
            Some(v) => (Some(v[0]), v.get(1).copied()),
            None => (None, None),
        }
    };
    let ci_eff = hull(boot, welch);
    let ci_fut = hull(boot_f, welch_f);
    let p = stats::mann_whitney(a, b).map(|m| m.p);
    let mut effect =
        ci_eff.map(|ci| Effect { relative_change: rel, ci, ci_level: level, bootstrap_ci: boot, gain: sign * rel, p_value: p, resamples: cfg.resamples });
    let regressed_through_spread = unstable && a.len() >= 2 && b.len() >= 2 && ci_eff.is_some_and(|ci| classify(ci, sign, cfg.threshold) == Verdict::Regressed);
    let verdict = if unstable && !regressed_through_spread {
        Verdict::Unstable
    } else if a.len() < 2 || b.len() < 2 || ci_eff.is_none() {
        reasons.push(format!("too few samples for an interval ({} vs {})", a.len(), b.len()));
        Verdict::Inconclusive
    } else {
        let ci = ci_eff.expect("checked");
        let gain_ci = |ci: [f64; 2]| if sign > 0.0 { ci } else { [-ci[1], -ci[0]] };
        let t = cfg.threshold;
        let mut v = classify(ci, sign, t);
        let [glo, ghi] = gain_ci(ci);
        reasons.push(format!(
            "gain {:+.2}%, {:.1}% interval [{:+.2}%, {:+.2}%] against noise threshold ±{:.2}%",
            sign * rel * 100.0,
            level * 100.0,
            glo * 100.0,
            ghi * 100.0,
            t * 100.0
        ));
        if regressed_through_spread {
            // `unstable` keeps noise from shipping as a win; it must not hide a slowdown whose
            // interval, however wide the spread made it, lies wholly on the worse side.
            reasons.push(
                "regressed despite the spread named above: the whole interval lies beyond the noise band on the worse side, so noise cannot explain it".into(),
            );
        }
        if let (Verdict::Inconclusive, Some((fl, m)), Some(fci)) = (v, futility, ci_fut) {
            // Futility needs both: an effect of the size asked about is ruled out, and the
            // interval still reaches the noise band. An interval inside ±min_effect but clear of
            // the band is a real effect smaller than asked about: more runs will show it.
            if inside(fci, m) && !budget_could_clear(a, b, &look, t) {
                v = Verdict::NoChange;
                let [flo, fhi] = gain_ci(fci);
                reasons.push(format!(
                    "no change of ±{:.2}% or more (--min-effect): the {:.1}% futility interval [{:+.2}%, {:+.2}%] lies inside it, so the eval stopped for futility",
                    m * 100.0,
                    fl * 100.0,
                    flo * 100.0,
                    fhi * 100.0
                ));
                // The interval shown is the one that decided.
                effect = effect.map(|e| Effect { ci: fci, ci_level: fl, bootstrap_ci: boot_f, ..e });
            }
        }
        if let Some(m) = cfg.min_effect.filter(|m| v == Verdict::NoChange && t > *m) {
            v = Verdict::Inconclusive;
            reasons.push(format!(
                "the noise band ±{:.2}% is wider than the {:.2}% effect asked about (--min-effect): an effect that size could hide inside it, so this is not `no_change`",
                t * 100.0,
                m * 100.0
            ));
        }
        v
    };
    Judgement { verdict, effect, reasons, drift: drift_out }
}

/// Verdict of an interval of relative change against the band `±t`;
/// `sign` is -1 for metrics where lower is better.
pub fn classify(ci: [f64; 2], sign: f64, t: f64) -> Verdict {
    let (glo, ghi) = if sign > 0.0 { (ci[0], ci[1]) } else { (-ci[1], -ci[0]) };
    if glo > t {
        Verdict::Improved
    } else if ghi < -t {
        Verdict::Regressed
    } else if glo >= -t && ghi <= t {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    }
}

/// First look of the default adaptive plan, in runs per side.
pub const DEFAULT_MIN_RUNS: u32 = 3;
/// Budget of the default adaptive plan, in runs per side (see docs/PERF.md).
pub const DEFAULT_MAX_RUNS: u32 = 20;
/// Runs per side between two looks of the default plan.
pub const DEFAULT_STEP: u32 = 1;
/// Default futility error (see `JudgeConfig::beta`).
pub const DEFAULT_BETA: f64 = 0.05;

/// Planned looks of an eval: per-side sample counts at which a verdict may be drawn,
/// and how the efficacy and futility errors are spent over them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub looks: Vec<u32>,
    pub efficacy: Curve,
    pub futility: Curve,
}

impl Plan {
    /// A fixed-N protocol: one look.
    pub fn fixed(n: u32) -> Self {
        Self { looks: vec![n.max(1)], efficacy: spending::EFFICACY, futility: spending::FUTILITY }
    }
    /// Adaptive: first look at `min`, then a look every `DEFAULT_STEP` runs per side, ending at `max`.
    /// Looks are cheap under group-sequential spending (see `spending`), so
    /// they are frequent enough that an eval stops soon after its interval clears.
    pub fn adaptive(min: u32, max: u32) -> Self {
        Self::adaptive_every(min, max, DEFAULT_STEP)
    }
    pub fn adaptive_every(min: u32, max: u32, step: u32) -> Self {
        let min = min.max(2);
        let max = max.max(min);
        let mut looks: Vec<u32> = (min..max).step_by(step.max(1) as usize).collect();
        looks.push(max);
        Self { looks, efficacy: spending::EFFICACY, futility: spending::FUTILITY }
    }
    /// The `--auto` plan with the default run counts.
    pub fn default_adaptive() -> Self {
        Self::adaptive(DEFAULT_MIN_RUNS, DEFAULT_MAX_RUNS)
    }
    pub fn max(&self) -> u32 {
        *self.looks.last().expect("a plan has at least one look")
    }
    /// Two-sided level each look's interval uses. A fixed plan uses `alpha`;
    /// an adaptive one spends `alpha` over its looks with group-sequential
    /// boundaries, so the chance that any look wrongly leaves the band is
    /// `alpha` (normal theory), not the `alpha` per look a naive repeated test has.
    pub fn look_alphas(&self, alpha: f64) -> Vec<f64> {
        spending::nominal_alphas(&self.looks, alpha, self.efficacy)
    }
    /// Two-sided alpha of each look's futility interval: `beta` spent over the looks,
    /// each side of the equivalence test getting `beta` (so the interval's two-sided
    /// level is `1 - 2·increment`).
    pub fn futility_alphas(&self, beta: f64) -> Vec<f64> {
        spending::nominal_alphas(&self.looks, 2.0 * beta, self.futility)
    }
    /// Confidence level of look `k` (0-based).
    pub fn look_level(&self, k: usize, alpha: f64) -> f64 {
        1.0 - self.look_alphas(alpha)[k.min(self.looks.len() - 1)]
    }
    /// Look `k`'s efficacy and futility levels under `cfg`.
    pub fn look(&self, k: usize, cfg: &JudgeConfig) -> Look {
        let k = k.min(self.looks.len() - 1);
        let futility_level = (cfg.beta > 0.0 && cfg.min_effect.is_some()).then(|| 1.0 - self.futility_alphas(cfg.beta)[k]);
        let final_alpha = self.look_alphas(cfg.alpha)[self.looks.len() - 1];
        Look { level: self.look_level(k, cfg.alpha), futility_level, final_n: self.max(), final_alpha }
    }
    pub fn is_adaptive(&self) -> bool {
        self.looks.len() > 1
    }
}

/// Whether a judgement at an interim look ends the eval. `unstable` does not:
/// an early outlier should not end an eval that more samples would settle;
/// it is judged again at the last look.
pub fn is_final(v: Verdict) -> bool {
    matches!(v, Verdict::Improved | Verdict::Regressed | Verdict::NoChange)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_band_wider_than_the_effect_asked_about_is_never_no_change() {
        // The trap: an implausible ±30.97% band turned a true 10% slowdown into no_change.
        let a: Vec<f64> = (0..10).map(|i| 100.0 + (i % 3) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 0.90).collect();
        let wide = JudgeConfig { threshold: 0.3097, ..JudgeConfig::default() };
        assert_eq!(judge(&a, &b, 0.95, &wide).verdict, Verdict::NoChange, "the old behaviour");
        let asked = JudgeConfig { min_effect: Some(0.05), ..wide };
        let j = judge(&a, &b, 0.95, &asked);
        assert_eq!(j.verdict, Verdict::Inconclusive, "{:?}", j.reasons);
        assert!(j.reasons.iter().any(|r| r.contains("wider than the 5.00% effect")));
        // A band inside the effect asked about still gives the statistical verdict.
        let tight = JudgeConfig { threshold: 0.02, min_effect: Some(0.05), ..JudgeConfig::default() };
        assert_eq!(judge(&a, &b, 0.95, &tight).verdict, Verdict::Regressed);
    }

    fn series(center: f64, n: usize, spread: f64) -> Vec<f64> {
        // Deterministic zig-zag around the centre.
        (0..n).map(|i| center * (1.0 + spread * (((i * 7) % 5) as f64 - 2.0) / 2.0)).collect()
    }

    #[test]
    fn clear_improvement_and_regression() {
        let cfg = JudgeConfig::default();
        let a = series(100.0, 10, 0.01);
        let b = series(110.0, 10, 0.01);
        let j = judge(&a, &b, 0.95, &cfg);
        assert_eq!(j.verdict, Verdict::Improved, "{:?}", j.reasons);
        let e = j.effect.unwrap();
        assert!((e.relative_change - 0.10).abs() < 1e-9);
        assert!(e.ci[0] > 0.05 && e.ci[1] < 0.15);
        assert_eq!(judge(&b, &a, 0.95, &cfg).verdict, Verdict::Regressed);
        // Latency metric: lower is better.
        let cfg_min = JudgeConfig { goal: Goal::Minimize, ..JudgeConfig::default() };
        assert_eq!(judge(&a, &b, 0.95, &cfg_min).verdict, Verdict::Regressed);
        assert!(judge(&a, &b, 0.95, &cfg_min).effect.unwrap().gain < 0.0);
    }

    #[test]
    fn no_change_and_inconclusive() {
        let cfg = JudgeConfig::default();
        let a = series(100.0, 20, 0.002);
        let b = series(100.1, 20, 0.002);
        assert_eq!(judge(&a, &b, 0.95, &cfg).verdict, Verdict::NoChange);
        // Noisy and short: straddles the band.
        let a = series(100.0, 4, 0.05);
        let b = series(101.5, 4, 0.05);
        assert_eq!(judge(&a, &b, 0.95, &cfg).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn drift_and_spread_are_unstable() {
        let cfg = JudgeConfig::default();
        let a: Vec<f64> = (0..12).map(|i| 100.0 + 1.5 * i as f64).collect();
        let b = series(130.0, 12, 0.005);
        let j = judge(&a, &b, 0.95, &cfg);
        assert_eq!(j.verdict, Verdict::Unstable);
        assert!(j.reasons.iter().any(|r| r.contains("baseline drifted")), "{:?}", j.reasons);
        let wild = [50.0, 150.0, 60.0, 140.0, 100.0, 45.0, 155.0];
        let j = judge(&wild, &series(100.0, 7, 0.01), 0.95, &cfg);
        assert_eq!(j.verdict, Verdict::Unstable);
        assert!(j.reasons[0].contains("CV"));
        // One outlier is not a spread.
        let one = [100.0, 101.0, 99.0, 100.5, 180.0];
        assert_ne!(judge(&one, &series(100.0, 5, 0.01), 0.95, &cfg).verdict, Verdict::Unstable);
    }

    #[test]
    fn a_clear_regression_under_spread_is_regressed_but_a_win_stays_unstable() {
        // A busy 2-core box: robust CV about 22% on both sides, the candidate 40% slower.
        let cfg = JudgeConfig::default();
        let a = series(100.0, 20, 0.3);
        let slower: Vec<f64> = a.iter().map(|x| x * 0.6).collect();
        let j = judge(&a, &slower, 0.991, &cfg);
        assert_eq!(j.verdict, Verdict::Regressed, "{:?}", j.reasons);
        assert!(j.reasons.iter().any(|r| r.contains("spread (robust CV)")), "the spread is named: {:?}", j.reasons);
        assert!(j.reasons.iter().any(|r| r.contains("regressed despite the spread")), "{:?}", j.reasons);
        // The same for a time (lower is better): the candidate takes longer.
        let min = JudgeConfig { goal: Goal::Minimize, ..JudgeConfig::default() };
        let longer: Vec<f64> = a.iter().map(|x| x * 1.6).collect();
        assert_eq!(judge(&a, &longer, 0.991, &min).verdict, Verdict::Regressed);
        // A win under the same spread is never claimed.
        let faster: Vec<f64> = a.iter().map(|x| x * 1.6).collect();
        assert_eq!(judge(&a, &faster, 0.991, &cfg).verdict, Verdict::Unstable);
        assert_eq!(judge(&a, &slower, 0.991, &min).verdict, Verdict::Unstable);
        // A spread whose interval reaches the band stays unstable.
        let slightly: Vec<f64> = a.iter().map(|x| x * 0.97).collect();
        assert_eq!(judge(&a, &slightly, 0.991, &cfg).verdict, Verdict::Unstable);
    }

    #[test]
    fn missing_sides() {
        let cfg = JudgeConfig::default();
        assert_eq!(judge(&[], &[1.0], 0.95, &cfg).verdict, Verdict::NeedsBaseline);
        assert_eq!(judge(&[1.0, 1.0], &[], 0.95, &cfg).verdict, Verdict::Inconclusive);
        assert_eq!(judge(&[1.0], &[2.0], 0.95, &cfg).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn plans() {
        assert_eq!(Plan::adaptive(3, 8).looks, vec![3, 4, 5, 6, 7, 8]);
        assert_eq!(Plan::adaptive_every(3, 11, 2).looks, vec![3, 5, 7, 9, 11]);
        assert_eq!(Plan::adaptive_every(3, 12, 2).looks, vec![3, 5, 7, 9, 11, 12]);
        assert_eq!(Plan::fixed(10).looks, vec![10]);
        let p = Plan::default_adaptive();
        let alphas = p.look_alphas(0.05);
        assert_eq!(alphas.len(), 18);
        let first = 1.0 - spending::EFFICACY.first_share * 0.05;
        assert!((p.look_level(0, 0.05) - first).abs() < 0.002, "{alphas:?}");
        assert!(p.look_level(17, 0.05) > 0.95 && p.look_level(17, 0.05) < 0.999, "{alphas:?}");
        assert_eq!(Plan::fixed(10).look_level(0, 0.05), 0.95);
        assert_eq!(Plan::adaptive(5, 5).looks, vec![5]);
        // Futility only with an effect to rule out.
        let cfg = JudgeConfig::default();
        assert_eq!(p.look(3, &cfg).futility_level, None);
        let with = JudgeConfig { min_effect: Some(0.05), ..cfg.clone() };
        let l = p.look(3, &with);
        assert!(l.futility_level.is_some_and(|f| f > 0.5 && f < 1.0) && l.final_n == 20, "{l:?}");
        assert_eq!(p.look(3, &JudgeConfig { beta: 0.0, ..with }).futility_level, None);
    }

    #[test]
    fn futility_rules_out_the_effect_asked_about() {
        // Two series at 1% CV, no real change: the 95% interval straddles the ±0.5% band
        // (inconclusive without futility), but an effect of 5% is clearly ruled out.
        let a = series(100.0, 6, 0.01);
        let b = series(100.3, 6, 0.01);
        let plan = Plan::default_adaptive();
        let base = JudgeConfig { threshold: 0.005, ..JudgeConfig::default() };
        assert_eq!(judge_at(&a, &b, &plan, 3, &base).verdict, Verdict::Inconclusive, "no --min-effect: no futility stop");
        let cfg = JudgeConfig { min_effect: Some(0.05), ..base.clone() };
        let j = judge_at(&a, &b, &plan, 3, &cfg);
        assert_eq!(j.verdict, Verdict::NoChange, "{:?}", j.reasons);
        assert!(j.reasons.iter().any(|r| r.contains("stopped for futility")), "{:?}", j.reasons);
        let e = j.effect.unwrap();
        assert_eq!(Some(e.ci_level), plan.look(3, &cfg).futility_level, "the deciding interval is shown: {e:?}");
        assert!(e.ci[0] > -0.05 && e.ci[1] < 0.05, "{e:?}");
        // A band wider than the effect asked about never gives no_change, futility or not.
        let wide = JudgeConfig { threshold: 0.08, ..cfg.clone() };
        assert_eq!(judge_at(&a, &b, &plan, 3, &wide).verdict, Verdict::Inconclusive);
        // A small real effect clear of the band is left to run: the whole budget can show it.
        let b = series(102.5, 6, 0.002);
        let a = series(100.0, 6, 0.002);
        let j = judge_at(&a, &b, &plan, 0, &JudgeConfig { threshold: 0.01, ..cfg.clone() });
        assert_ne!(j.verdict, Verdict::NoChange, "{:?}", j.reasons);
        // At the last look there is no budget left to wait for.
        let fixed = Plan::fixed(6);
        let noisy_a = series(100.0, 6, 0.01);
        let noisy_b = series(101.0, 6, 0.01);
        let j = judge_at(&noisy_a, &noisy_b, &fixed, 0, &JudgeConfig { threshold: 0.01, ..cfg });
        assert_eq!(j.verdict, Verdict::NoChange, "{:?}", j.reasons);
    }
}
