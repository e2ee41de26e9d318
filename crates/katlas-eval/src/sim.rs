//! Simulated sample noise for the statistical experiments (A/A false-positive
//! rate, power, adaptive run counts). The verdict code under test is the real
//! one; only the measurements are drawn in-process, seeded, so a 200-trial
//! experiment runs in seconds and gives the same answer every time.

use crate::verdict::{is_final, judge_at, JudgeConfig, Plan};
use katlas_model::ledger::Verdict;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A simulated workload pair: the candidate's true level relative to the
/// baseline (`0.05` = 5% more of the metric) and the per-sample CV.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub effect: f64,
    pub cv: f64,
    pub level: f64,
    /// Share of slow runs (0 = plain log-normal noise). With a share, a run is
    /// slowed by 3..13% with that probability, the shape measured for real
    /// fresh-process runs of `katlas-eval-spin` on the H200 box (docs/PERF.md:
    /// a ~1.5% core and about a fifth of the runs a few percent slow).
    pub slow_share: f64,
}

impl Scenario {
    pub fn new(effect: f64, cv: f64) -> Self {
        Self { effect, cv, level: 100.0, slow_share: 0.0 }
    }
    /// Real-process-like noise: a `cv` core plus `share` of runs 3..13% slow.
    pub fn with_slow_runs(effect: f64, cv: f64, share: f64) -> Self {
        Self { effect, cv, level: 100.0, slow_share: share }
    }
    fn draw(&self, rng: &mut ChaCha8Rng, median: f64) -> f64 {
        let x = sample(rng, median, self.cv);
        if self.slow_share > 0.0 && rng.random::<f64>() < self.slow_share {
            x * (1.03 + 0.10 * rng.random::<f64>())
        } else {
            x
        }
    }
}

/// Standard normal by Box–Muller (two uniforms, one output).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Log-normal sample with the given median and CV.
pub fn sample(rng: &mut ChaCha8Rng, median: f64, cv: f64) -> f64 {
    let sigma = (1.0 + cv * cv).ln().sqrt();
    median * (sigma * normal(rng)).exp()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialOutcome {
    pub verdict: Verdict,
    /// Measured samples per side when the eval stopped.
    pub runs_per_side: u32,
}

/// One eval under `plan`: samples arrive in pairs, the verdict is drawn at each
/// planned look with the look's efficacy and futility levels, stopping at the first final one.
pub fn run_trial(sc: Scenario, plan: &Plan, cfg: &JudgeConfig, seed: u64) -> TrialOutcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut a = Vec::new();
    let mut b = Vec::new();
    let cfg = JudgeConfig { seed: seed ^ 0x9e37_79b9_7f4a_7c15, lazy_bootstrap: true, ..cfg.clone() };
    let mut last = Verdict::Inconclusive;
    for (k, &n) in plan.looks.iter().enumerate() {
        while (a.len() as u32) < n {
            a.push(sc.draw(&mut rng, sc.level));
            b.push(sc.draw(&mut rng, sc.level * (1.0 + sc.effect)));
        }
        last = judge_at(&a, &b, plan, k, &cfg).verdict;
        if is_final(last) || k + 1 == plan.looks.len() {
            break;
        }
    }
    TrialOutcome { verdict: last, runs_per_side: a.len() as u32 }
}

/// Outcome counts of `trials` seeded trials.
#[derive(Debug, Clone, Default)]
pub struct Experiment {
    pub trials: u32,
    pub improved: u32,
    pub regressed: u32,
    pub no_change: u32,
    pub inconclusive: u32,
    pub unstable: u32,
    pub mean_runs_per_side: f64,
}

impl Experiment {
    pub fn share(&self, v: Verdict) -> f64 {
        let c = match v {
            Verdict::Improved => self.improved,
            Verdict::Regressed => self.regressed,
            Verdict::NoChange => self.no_change,
            Verdict::Inconclusive => self.inconclusive,
            Verdict::Unstable => self.unstable,
            _ => 0,
        };
        c as f64 / self.trials as f64
    }
}

pub fn experiment(sc: Scenario, plan: &Plan, cfg: &JudgeConfig, trials: u32, base_seed: u64) -> Experiment {
    let mut e = Experiment { trials, ..Default::default() };
    let mut runs = 0u64;
    for t in 0..trials {
        let o = run_trial(sc, plan, cfg, base_seed.wrapping_add(t as u64 * 0x1000_0001));
        runs += o.runs_per_side as u64;
        match o.verdict {
            Verdict::Improved => e.improved += 1,
            Verdict::Regressed => e.regressed += 1,
            Verdict::NoChange => e.no_change += 1,
            Verdict::Unstable => e.unstable += 1,
            _ => e.inconclusive += 1,
        }
    }
    e.mean_runs_per_side = runs as f64 / trials as f64;
    e
}
