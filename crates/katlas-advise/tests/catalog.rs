//! The rules data is consistent: every signal a rule or lever names exists.

use katlas_advise::expr::template_names;
use katlas_advise::fit::COMPUTED_SIGNALS;
use katlas_advise::Rules;
use std::collections::BTreeSet;

#[test]
fn every_named_signal_exists() {
    let r = Rules::builtin().unwrap();
    let mut known: BTreeSet<String> = COMPUTED_SIGNALS.iter().map(|s| s.to_string()).collect();
    for rule in &r.fit.rules {
        known.extend(rule.emits.iter().cloned());
    }
    for rule in &r.fit.rules {
        for c in &rule.when {
            assert!(known.contains(&c.signal), "fit rule {}: unknown signal `{}`", rule.id, c.signal);
        }
        for n in template_names(&rule.text).into_iter().chain(rule.text_nvidia.iter().flat_map(|t| template_names(t))) {
            assert!(known.contains(&n), "fit rule {}: text quotes unknown signal `{n}`", rule.id);
        }
    }
    for l in &r.levers.levers {
        for c in l.trigger_conds.iter().flatten().chain(l.legal.iter()) {
            assert!(known.contains(&c.signal), "lever {}: unknown signal `{}`", l.id, c.signal);
        }
        for k in l.boost.keys().chain(l.damp.keys()) {
            assert!(known.contains(k), "lever {}: boost/damp on unknown signal `{k}`", l.id);
        }
    }
}

#[test]
fn catalog_has_the_eleven_levers_with_sources() {
    let r = Rules::builtin().unwrap();
    let ids: BTreeSet<&str> = r.levers.levers.iter().map(|l| l.id.as_str()).collect();
    for want in [
        "multirow_gemv",
        "k_split",
        "prefetch_pipeline",
        "wave_size_port",
        "matrix_path",
        "fusion",
        "wide_loads",
        "lds_staging",
        "compiler_levers",
        "env_sweep",
        "graph_capture",
    ] {
        assert!(ids.contains(want), "lever {want} in data/levers.toml");
    }
    for l in &r.levers.levers {
        assert!(!l.candidate_steps.is_empty(), "{}: candidate steps", l.id);
        assert!(!l.magnitude.source.trim().is_empty(), "{}: magnitude source", l.id);
        assert!(l.magnitude.low_pct <= l.magnitude.high_pct, "{}: magnitude range", l.id);
        assert!(!l.hypothesis.trim().is_empty() && !l.risk.trim().is_empty(), "{}: mechanism and risk", l.id);
    }
    // Demotion is data, and only counts no-improvement verdicts.
    let demote: BTreeSet<&str> = r.levers.history.demote.keys().map(String::as_str).collect();
    assert_eq!(demote, BTreeSet::from(["no_change", "regressed"]));
}

#[test]
fn sol_bands_are_nsight_style() {
    let r = Rules::builtin().unwrap();
    let mins: Vec<f64> = r.fit.bands.iter().map(|b| b.min_pct).collect();
    assert_eq!(mins, vec![80.0, 60.0, 10.0, 0.0]);
}
