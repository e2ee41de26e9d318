//! The rules data is consistent: every signal a rule or lever names exists.

use katlas_advise::expr::template_names;
use katlas_advise::signals::SIGNALS;
use katlas_advise::Rules;
use std::collections::BTreeSet;

#[test]
fn every_named_signal_exists() {
    let r = Rules::builtin().unwrap();
    let mut known: BTreeSet<String> = SIGNALS.iter().map(|s| s.name.to_string()).collect();
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
    let demote: BTreeSet<&str> = r.levers.history.demote.keys().map(|v| v.as_str()).collect();
    assert_eq!(demote, BTreeSet::from(["no_change", "regressed"]));
}

#[test]
fn sol_bands_are_nsight_style() {
    let r = Rules::builtin().unwrap();
    let mins: Vec<f64> = r.fit.bands.iter().map(|b| b.min_pct).collect();
    assert_eq!(mins, vec![80.0, 60.0, 10.0, 0.0]);
}

/// docs/fit.md's signals table is the SignalDef table (KATLAS_WRITE_DOCS=1 rewrites it).
#[test]
fn docs_signals_table_matches_the_signal_defs() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/fit.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (start, end) = ("<!-- signals table: generated from katlas_advise::signals::markdown_table(); a test compares -->\n", "<!-- end signals table -->");
    let a = doc.find(start).expect("docs/fit.md has the signals table markers") + start.len();
    let b = doc[a..].find(end).expect("end marker") + a;
    let want = katlas_advise::signals::markdown_table();
    if std::env::var_os("KATLAS_WRITE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{want}{}", &doc[..a], &doc[b..])).unwrap();
        return;
    }
    assert_eq!(&doc[a..b], want, "docs/fit.md signals table differs from katlas_advise::signals::SIGNALS (rerun with KATLAS_WRITE_DOCS=1)");
}

/// Every signal a fit of real inputs computes is in the table with its type (the insert sites
/// and the table cannot drift apart).
#[test]
fn computed_signals_are_defined_with_their_type() {
    use katlas_advise::expr::Val;
    use katlas_advise::signals::{get, Kind};
    let rules = Rules::builtin().unwrap();
    let db = katlas_arch::ArchDb::builtin();
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h200/torch_llama_decode_trace.json.gz");
    let out = katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(&trace), &Default::default()).unwrap();
    let t = out.phases.iter().find(|t| !t.kernels.is_empty()).unwrap();
    let mut row = katlas_model::Row::new("llama", t.phase.clone());
    row.metrics.extend(out.metrics.clone());
    row.metrics.extend(t.metrics.clone());
    row.kernels = t.kernels.clone();
    katlas_collect::ops::OpRules::builtin().classify_all(&mut row.kernels);
    row.arch = Some("sm_90".into());
    let fit = katlas_advise::build_fit(&katlas_advise::FitInput {
        row: Some(&row),
        isa: None,
        product: Some("NVIDIA H200"),
        arch: None,
        db,
        rules: &rules,
        row_source: None,
    })
    .unwrap();
    let mut seen = 0;
    for (name, v) in fit.kernels.iter().flat_map(|k| &k.signals).chain(&fit.phase.signals) {
        let d = get(name).unwrap_or_else(|| panic!("signal `{name}` is computed but not in signals::SIGNALS"));
        let ok = matches!((d.kind, v), (Kind::Number, Val::Num(_)) | (Kind::Flag, Val::Bool(_)) | (Kind::Word, Val::Str(_)) | (Kind::List, Val::List(_)));
        assert!(ok, "signal `{name}` is {:?} in the table but {v:?} in the fit", d.kind);
        seen += 1;
    }
    assert!(seen > 100, "{seen}");
}
