//! The statistical proof of docs/PERF.md, with simulated (seeded) sample
//! noise and the real verdict code. Deterministic: fixed seeds.

use katlas_eval::sim::{experiment, Scenario};
use katlas_eval::verdict::{JudgeConfig, Plan};

fn cfg() -> JudgeConfig {
    JudgeConfig::default()
}

/// The default eval plan (`--auto`): first look at 3 runs per side, budget 30.
fn auto() -> Plan {
    Plan::adaptive(3, 30)
}

#[test]
fn aa_false_positive_rate_fixed_and_adaptive() {
    for (name, plan) in [("fixed N=10", Plan::fixed(10)), ("adaptive 3..30", auto()), ("fast fixed N=5", Plan::fixed(5))] {
        let e = experiment(Scenario::new(0.0, 0.02), &plan, &cfg(), 200, 11);
        let fp = e.improved + e.regressed;
        eprintln!("A/A {name}: {e:?}");
        assert!(fp as f64 / 200.0 <= 0.05, "A/A {name}: {fp}/200 improved+regressed ({e:?})");
    }
}

#[test]
fn aa_rate_holds_with_zero_threshold() {
    // The looks' alpha split is what protects the adaptive mode when the band
    // gives no slack: with a 0% threshold the error rate must still be <= alpha.
    let c = JudgeConfig { threshold: 0.0, ..cfg() };
    let e = experiment(Scenario::new(0.0, 0.02), &auto(), &c, 200, 12);
    eprintln!("A/A threshold 0: {e:?}");
    assert!((e.improved + e.regressed) as f64 / 200.0 <= 0.05, "{e:?}");
}

#[test]
fn five_percent_slowdown_found() {
    for (name, plan) in [("adaptive 3..30", auto()), ("fixed N=10", Plan::fixed(10))] {
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

#[test]
fn adaptive_needs_no_more_runs_than_fixed_ten_for_three_percent() {
    // CV 1%: the noise at which a fixed N=10 protocol resolves a 3% effect against a 1% band.
    let fixed = experiment(Scenario::new(0.03, 0.01), &Plan::fixed(10), &cfg(), 100, 41);
    let adaptive = experiment(Scenario::new(0.03, 0.01), &auto(), &cfg(), 100, 41);
    eprintln!("+3% cv1%: fixed {fixed:?} adaptive {adaptive:?}");
    assert!(adaptive.mean_runs_per_side <= 10.0, "{adaptive:?}");
    assert!(adaptive.improved >= fixed.improved, "adaptive right less often: {adaptive:?} vs {fixed:?}");
}
