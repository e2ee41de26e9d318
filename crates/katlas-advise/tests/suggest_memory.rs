mod common;

use katlas_advise::history::{HistoryStatus, Ledger};
use katlas_advise::isa::IsaManifest;
use katlas_advise::suggest::{suggest, SuggestOptions, SuggestionQueue};
use katlas_advise::{build_fit, render, FitInput, Rules};
use katlas_arch::ArchDb;
use katlas_model::ledger::*;
use std::collections::BTreeSet;
use std::path::Path;

fn queue(ledger: Option<&Path>) -> SuggestionQueue {
    let row = common::decode_row();
    let dir = tempfile::tempdir().unwrap();
    let m = common::write_manifest(dir.path(), &[("unrelated_kernel", 32, 0, 0)]);
    let isa = IsaManifest::read(&m).unwrap();
    let rules = Rules::builtin().unwrap();
    let db = ArchDb::builtin();
    let fit = build_fit(&FitInput { row: Some(&row), isa: Some(&isa), product: None, arch: None, db, rules: &rules, row_source: None }).unwrap();
    let l = ledger.map(|p| Ledger::read(p).unwrap());
    suggest(&fit, Some(&row), db, &rules, &SuggestOptions { ledger: l.as_ref(), provenance: &[], max: None })
}

pub fn entry(lever: &str, kernel: &str, verdict: Verdict, disposition: Disposition) -> LedgerEntry {
    // Built through JSON so fields the eval helper adds later do not break this test.
    let v = serde_json::json!({
        "schema": LEDGER_SCHEMA,
        "id": format!("led-{lever}-{}", verdict.as_str()),
        "recorded_at": "2026-11-30T10:00:00Z",
        "task_id": "t1",
        "lever": lever, "kernel": kernel, "arch": "gfx1201", "phase": "decode_ar",
        "shape": "decode_ar_pp128_gen50", "quant": "mq4",
        "metric": "gen_tok_s", "goal": "maximize",
        "baseline": serde_json::to_value(EvalSide::default()).unwrap(),
        "candidate": serde_json::to_value(EvalSide::default()).unwrap(),
        "protocol": serde_json::to_value(Protocol::default()).unwrap(),
        "samples": serde_json::to_value(SampleRef::default()).unwrap(),
        "verdict": verdict,
        "noise_threshold": 0.01,
        "disposition": disposition,
    });
    serde_json::from_value(v).expect("ledger entry from json")
}

fn write_ledger(dir: &Path, entries: &[LedgerEntry]) -> std::path::PathBuf {
    let p = dir.join("ledger.jsonl");
    katlas_corpus::append_jsonl(&p, entries, katlas_corpus::Fsync::Never).unwrap();
    p
}

#[test]
fn decode_row_gives_four_lever_types() {
    let q = queue(None);
    println!("{}", render::queue_text(&q));
    let types: BTreeSet<&str> = q.suggestions.iter().map(|s| s.lever.as_str()).collect();
    assert!(types.len() >= 4, "lever types: {types:?}");
    for s in &q.suggestions {
        assert!(!s.evidence.is_empty(), "{} has evidence", s.id);
        assert!(s.hypothesis.starts_with("On gfx1201/"), "{}", s.hypothesis);
        assert_eq!(s.eval.metric.as_deref(), Some("gen_tok_s"));
        assert!(s.eval.stripped_env.contains(&"HIPFIRE_PROFILE_DECODE".to_string()));
        assert!(!s.eval.env.contains_key("HIPFIRE_PROFILE_DECODE"));
        assert!(s.eval.fresh_baseline_required);
    }
    assert_eq!(q.stopped, vec!["fused_rmsnorm_mq_rotate"]);
    assert!(q.suggestions.iter().all(|s| s.kernel.as_deref() != Some("fused_rmsnorm_mq_rotate")));
}

#[test]
fn no_change_demotes_inconclusive_does_not() {
    let base = queue(None);
    let top = &base.suggestions[0];
    let kernel = top.kernel.clone().expect("top suggestion has a kernel");
    let dir = tempfile::tempdir().unwrap();

    // Inconclusive: shown, not counted.
    let p = write_ledger(dir.path(), &[entry(&top.lever, &kernel, Verdict::Inconclusive, Disposition::default_for(Verdict::Inconclusive))]);
    let q = queue(Some(&p));
    let s = q.suggestions.iter().find(|s| s.id == top.id).unwrap();
    assert_eq!(s.rank, 1, "inconclusive does not demote");
    let h = s.history.as_ref().expect("history shown");
    assert_eq!(h.status, HistoryStatus::Seen);
    assert!(!h.attempts[0].counted);
    assert_eq!(h.attempts[0].verdict.as_str(), "inconclusive");

    // no_change on the same target: drops below the others and shows the verdict.
    std::fs::remove_file(&p).unwrap();
    let p = write_ledger(dir.path(), &[entry(&top.lever, &kernel, Verdict::NoChange, Disposition::Reject)]);
    let q = queue(Some(&p));
    println!("{}", render::queue_markdown(&q));
    let s = q.suggestions.iter().find(|s| s.id == top.id).unwrap();
    assert_eq!(s.rank, q.suggestions.len(), "demoted to the bottom");
    assert!(q.suggestions.iter().filter(|x| x.id != s.id).all(|x| x.score > s.score));
    let h = s.history.as_ref().unwrap();
    assert_eq!(h.status, HistoryStatus::Demoted);
    assert_eq!(h.attempts[0].verdict.as_str(), "no_change");
    assert!(render::queue_markdown(&q).contains("prior verdict no_change"));
    assert_eq!(q.history.demoted, 1);

    // Another shape: not the same target, no demotion.
    std::fs::remove_file(&p).unwrap();
    let mut e = entry(&top.lever, &kernel, Verdict::NoChange, Disposition::Reject);
    e.shape = Some("pp512".into());
    let p = write_ledger(dir.path(), &[e]);
    let q = queue(Some(&p));
    assert_eq!(q.suggestions.iter().find(|s| s.id == top.id).unwrap().rank, 1);
}

#[test]
fn revisit_if_condition_restores() {
    let base = queue(None);
    let top = &base.suggestions[0];
    let kernel = top.kernel.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Condition that holds on the current fit (share is 38.2%).
    let p = write_ledger(dir.path(), &[entry(&top.lever, &kernel, Verdict::NoChange, Disposition::RevisitIf { condition: "share_pct > 30".into() })]);
    let q = queue(Some(&p));
    let s = q.suggestions.iter().find(|s| s.id == top.id).unwrap();
    let h = s.history.as_ref().unwrap();
    assert_eq!(h.status, HistoryStatus::Restored);
    assert_eq!(s.rank, 1);
    assert_eq!(h.attempts[0].revisit_holds, Some(true));
    // One that does not hold: demoted, condition shown.
    std::fs::remove_file(&p).unwrap();
    let p = write_ledger(dir.path(), &[entry(&top.lever, &kernel, Verdict::NoChange, Disposition::RevisitIf { condition: "bw_pct < 50".into() })]);
    let q = queue(Some(&p));
    let s = q.suggestions.iter().find(|s| s.id == top.id).unwrap();
    assert_eq!(s.history.as_ref().unwrap().status, HistoryStatus::Demoted);
    assert!(render::queue_text(&q).contains("revisit if: bw_pct < 50 [does not hold yet]"));
}

#[test]
fn bad_ledger_line_is_reported_and_good_ones_kept() {
    let base = queue(None);
    let top = &base.suggestions[0];
    let kernel = top.kernel.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = write_ledger(dir.path(), &[entry(&top.lever, &kernel, Verdict::NoChange, Disposition::Reject)]);
    let good = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, format!("{{\"schema\": \"katlas.ledger.v1\", \"id\": 5\n{good}")).unwrap();
    let q = queue(Some(&p));
    assert_eq!(q.history.errors.len(), 1, "{:?}", q.history.errors);
    assert!(q.history.errors[0].contains(":1"), "{:?}", q.history.errors);
    assert_eq!(q.suggestions.iter().find(|s| s.id == top.id).unwrap().history.as_ref().unwrap().status, HistoryStatus::Demoted);
}

#[test]
fn arch_class_matches_other_atoms_do_not() {
    let base = queue(None);
    let top = &base.suggestions[0];
    let kernel = top.kernel.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // gfx1200 is the same class (rdna4) as the row's gfx1201: same target.
    let mut e = entry(&top.lever, &kernel, Verdict::Regressed, Disposition::Reject);
    e.arch = Some("gfx1200".into());
    let p = write_ledger(dir.path(), &[e]);
    let q = queue(Some(&p));
    let h = q.suggestions.iter().find(|s| s.id == top.id).unwrap().history.clone().unwrap();
    assert_eq!(h.status, HistoryStatus::Demoted);
    assert_eq!(h.attempts[0].matched_by, "arch class rdna4");
    // gfx1100 (rdna3_dgpu) is another class: not the same target.
    std::fs::remove_file(&p).unwrap();
    let mut e = entry(&top.lever, &kernel, Verdict::Regressed, Disposition::Reject);
    e.arch = Some("gfx1100".into());
    let p = write_ledger(dir.path(), &[e]);
    let q = queue(Some(&p));
    assert!(q.suggestions.iter().find(|s| s.id == top.id).unwrap().history.is_none());
    // A variant of the kernel name is the same kernel.
    std::fs::remove_file(&p).unwrap();
    let p = write_ledger(dir.path(), &[entry(&top.lever, &format!("{kernel}_r4"), Verdict::NoChange, Disposition::Reject)]);
    let q = queue(Some(&p));
    assert_eq!(q.suggestions.iter().find(|s| s.id == top.id).unwrap().history.as_ref().unwrap().status, HistoryStatus::Demoted);
}
