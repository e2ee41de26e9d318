//! The statistical proof of docs/PERF.md, with simulated (seeded) sample
//! noise and the real verdict code. Deterministic: fixed seeds.

use katlas_eval::sim::{experiment, Scenario};
use katlas_eval::verdict::{JudgeConfig, Plan};

/// What `katlas eval` judges with by default: band 1%, alpha 5%, `--min-effect` 5% (futility on).
fn cfg() -> JudgeConfig {
    JudgeConfig { min_effect: Some(0.05), ..JudgeConfig::default() }
}

/// The default eval plan (`--auto`): a look after every run per side from 3 to 20.
fn auto() -> Plan {
    Plan::default_adaptive()
}

#[test]
fn aa_false_positive_rate_fixed_and_adaptive() {
    for (name, plan) in [("fixed N=10", Plan::fixed(10)), ("adaptive 3..20", auto()), ("fast fixed N=5", Plan::fixed(5))] {
        let e = experiment(Scenario::new(0.0, 0.02), &plan, &cfg(), 200, 11);
        let fp = e.improved + e.regressed;
        eprintln!("A/A {name}: {e:?}");
        assert!(fp as f64 / 200.0 <= 0.05, "A/A {name}: {fp}/200 improved+regressed ({e:?})");
    }
}

#[test]
fn aa_rate_holds_with_zero_threshold() {
    // The looks' alpha spending is what protects the adaptive mode when the band
    // gives no slack: with a 0% threshold the error rate must still be <= alpha,
    // for the default plan and for a long one with 15 looks.
    let c = JudgeConfig { threshold: 0.0, ..cfg() };
    for plan in [auto(), Plan::adaptive(3, 30)] {
        let e = experiment(Scenario::new(0.0, 0.02), &plan, &c, 400, 12);
        eprintln!("A/A threshold 0 {:?}: {e:?}", plan.looks);
        assert!((e.improved + e.regressed) as f64 / 400.0 <= 0.05, "{e:?}");
    }
}

#[test]
fn naive_repeated_looks_would_break_the_aa_rate() {
    // The control: the same looks each at the full alpha (no spending) call
    // far more A/A pairs different, so the spending above is doing the work.
    use katlas_eval::sim::run_trial;
    use katlas_model::ledger::Verdict;
    let c = JudgeConfig { threshold: 0.0, lazy_bootstrap: true, ..JudgeConfig::default() };
    let plan = Plan::adaptive_every(3, 30, 2);
    let mut fp = 0;
    for t in 0..400u64 {
        let mut hit = false;
        for &n in &plan.looks {
            let one = Plan::fixed(n);
            let o = run_trial(Scenario::new(0.0, 0.02), &one, &c, 12u64.wrapping_add(t * 0x1000_0001));
            if matches!(o.verdict, Verdict::Improved | Verdict::Regressed) {
                hit = true;
                break;
            }
        }
        fp += hit as u32;
    }
    eprintln!("naive looks: {fp}/400");
    assert!(fp as f64 / 400.0 > 0.08, "naive repeated looks should exceed alpha clearly: {fp}/400");
}

#[test]
fn five_percent_slowdown_found() {
    for (name, plan) in [("adaptive 3..20", auto()), ("fixed N=10", Plan::fixed(10))] {
        let e = experiment(Scenario::new(-0.05, 0.02), &plan, &cfg(), 50, 21);
        eprintln!("-5% {name}: {e:?}");
        assert!(e.regressed >= 45, "-5% at CV 2% {name}: regressed in {}/50 ({e:?})", e.regressed);
        assert_eq!(e.improved, 0);
    }
}

#[test]
fn adaptive_stops_early_on_large_effects() {
    let e = experiment(Scenario::new(0.10, 0.02), &auto(), &cfg(), 100, 31);
    eprintln!("+10% adaptive: {e:?}");
    assert!(e.improved >= 95, "{e:?}");
    assert!(e.mean_runs_per_side <= 4.0, "mean runs per side {} > 4", e.mean_runs_per_side);
}

/// Runs per side to a verdict for 3%, 5% and 10% effects, the default plan beside fixed
/// N = 10, at the same error rates: A/A false calls <= 5% and no fewer effects found than
/// fixed N = 10 finds at that CV (within two standard errors of the difference).
fn runs_against_fixed_ten(cv: f64, trials: u32) -> (f64, f64) {
    let (mut auto_runs, mut fixed_runs) = (0.0, 0.0);
    for effect in [0.03, 0.05, 0.10] {
        let f = experiment(Scenario::new(effect, cv), &Plan::fixed(10), &cfg(), trials, 3);
        let a = experiment(Scenario::new(effect, cv), &auto(), &cfg(), trials, 3);
        eprintln!("+{:.0}% cv {cv}: fixed10 {f:?}\n   default {a:?}", effect * 100.0);
        let (pf, pa) = (f.improved as f64 / trials as f64, a.improved as f64 / trials as f64);
        let se = ((pf * (1.0 - pf) + pa * (1.0 - pa)) / trials as f64).sqrt();
        assert!(pa >= pf - 2.0 * se, "+{effect} at CV {cv}: default found {} vs fixed N=10 {}", a.improved, f.improved);
        assert_eq!(a.regressed, 0);
        auto_runs += a.mean_runs_per_side / 3.0;
        fixed_runs += f.mean_runs_per_side / 3.0;
    }
    let aa = experiment(Scenario::new(0.0, cv), &auto(), &cfg(), trials, 1);
    assert!((aa.improved + aa.regressed) as f64 / trials as f64 <= 0.05, "A/A at CV {cv}: {aa:?}");
    (auto_runs, fixed_runs)
}

#[test]
fn default_plan_needs_at_most_60_percent_of_fixed_ten_at_cv_1() {
    // The goal of issue 14 at CV 1%: measured 4.3 runs/side against 10 (43%).
    let (auto, fixed) = runs_against_fixed_ten(0.01, 300);
    eprintln!("CV 1%: default {auto:.2} runs/side vs fixed N=10 {fixed:.2}");
    assert!(auto <= 0.6 * fixed, "default {auto:.2} runs/side vs fixed N=10 {fixed:.2}");
}

#[test]
fn default_plan_stops_early_at_cv_2_with_the_power_of_fixed_ten() {
    // At CV 2% the same power costs 68% of fixed N=10 (docs/PERF.md: the 60% goal is not met
    // there); before futility stops the default plan ran an A/A to all 20 runs and a 3%
    // effect to 14.7 on average.
    let (seq, fixed) = runs_against_fixed_ten(0.02, 300);
    eprintln!("CV 2%: default {seq:.2} runs/side vs fixed N=10 {fixed:.2}");
    assert!(seq <= 0.72 * fixed, "default {seq:.2} runs/side vs fixed N=10 {fixed:.2}");
    let aa = experiment(Scenario::new(0.0, 0.02), &auto(), &cfg(), 200, 1);
    assert!(aa.mean_runs_per_side < 7.0 && aa.no_change >= 180, "an A/A ends early as no_change: {aa:?}");
}

#[test]
fn futility_stops_come_from_the_min_effect() {
    // Without --min-effect (or with beta 0, as `eval --aa` runs) an A/A runs the whole plan.
    let off = experiment(Scenario::new(0.0, 0.02), &auto(), &JudgeConfig::default(), 100, 1);
    assert_eq!(off.no_change, 0, "{off:?}");
    assert!(off.mean_runs_per_side > 19.0, "{off:?}");
    let on = experiment(Scenario::new(0.0, 0.02), &auto(), &cfg(), 100, 1);
    assert!(on.no_change >= 90 && on.mean_runs_per_side < 7.0, "{on:?}");
    // A true effect of the size asked about is rarely stopped for futility (beta = 5%).
    let m = experiment(Scenario::new(0.05, 0.03), &auto(), &cfg(), 300, 7);
    assert!(m.no_change as f64 / 300.0 <= 0.05, "{m:?}");
}

#[test]
fn default_budget_holds_up_on_real_process_noise() {
    // A fifth of the runs 3..13% slow (the shape measured for real fresh-process
    // runs): fixed N = 10 misses a 5% slowdown about two times in five; the default
    // plan keeps sampling until it shows.
    let sc = Scenario::with_slow_runs(-0.05, 0.015, 0.2);
    let fixed = experiment(sc, &Plan::fixed(10), &cfg(), 200, 61);
    let default = experiment(sc, &auto(), &cfg(), 200, 61);
    eprintln!("-5% real-like: fixed10 {fixed:?} default {default:?}");
    assert!(default.regressed >= 150, "{default:?}");
    assert!(default.regressed > fixed.regressed + 20);
    assert_eq!(default.improved, 0);
    let aa = experiment(Scenario::with_slow_runs(0.0, 0.015, 0.2), &auto(), &JudgeConfig { threshold: 0.0, ..cfg() }, 200, 62);
    assert!((aa.improved + aa.regressed) as f64 / 200.0 <= 0.05, "{aa:?}");
}
