//! The cross-target comparison of one eval run on several machines through a cluster
//! scheduler: each target's verdict checked against what was submitted, the table, and the
//! allowlist decision (promote where measured better, the conservative default elsewhere,
//! reject when any measured target regressed).

use katlas_model::fleet::{ExpectedIdentity, FleetJobResult, FleetRecord};
use katlas_model::ledger::{Disposition, EvalResult, EvalSide, FleetDecision, FleetOutcome, FleetSummary, LedgerEntry, SampleRef, Verdict};
use katlas_model::{ExperimentKey, Identity};

/// Variables the scheduler sets per job to pick its devices: they differ between targets by
/// design and say nothing about what ran.
const SCHEDULER_ENV: &[&str] = &["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_DEVICE_ORDER"];

fn scheduler_set(name: &str) -> bool {
    SCHEDULER_ENV.contains(&name) || name.starts_with("SLURM_")
}

/// Why a target's result may not be compared with the others: a side whose source tree is the
/// submitting checkout ran another commit or diff, a command side ran another binary, or the
/// route-affecting environment differs from the submission's (declared knobs and stripped
/// instrumentation aside). Host, devices and arch differ between targets by design.
pub fn identity_mismatches(expected: &ExpectedIdentity, r: &EvalResult) -> Vec<String> {
    let mut out = Vec::new();
    for side in &r.sides {
        let id = &side.identity;
        let who = format!("side {}", side.label);
        if let Some(want) = expected.binaries.get(&side.label) {
            match (want.md5.as_deref(), id.binary.as_ref().and_then(|b| b.md5.as_deref())) {
                (Some(w), Some(g)) if w != g => out.push(format!("{who}: binary md5 {g}, submitted {w}")),
                (Some(_), None) => out.push(format!("{who}: no binary digest recorded, submitted one")),
                _ => {}
            }
        }
        tree_and_env_mismatches(&who, expected, id, &side.knobs, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// Why a `gate` or `collect` target's job may not be compared with the others: its node ran
/// another commit or diff of the submitting checkout, or another route-affecting environment.
pub fn job_mismatches(expected: &ExpectedIdentity, job: &FleetJobResult) -> Vec<String> {
    let mut out = Vec::new();
    tree_and_env_mismatches("the job", expected, &job.identity, &Default::default(), &mut out);
    out
}

fn tree_and_env_mismatches(who: &str, expected: &ExpectedIdentity, id: &Identity, knobs: &std::collections::BTreeMap<String, String>, out: &mut Vec<String>) {
    if expected.source.root.is_some() && id.source.root == expected.source.root {
        source_mismatch(who, &expected.source, id, out);
    }
    let keys: std::collections::BTreeSet<&String> = expected.env.keys().chain(id.env.keys()).collect();
    for k in keys {
        if scheduler_set(k) || knobs.contains_key(k) {
            continue;
        }
        let (w, g) = (expected.env.get(k), id.env.get(k));
        if w != g {
            let show = |v: Option<&String>| v.map(|s| format!("`{s}`")).unwrap_or_else(|| "unset".into());
            out.push(format!("{who}: env {k} {}, submitted {}", show(g), show(w)));
        }
    }
}

fn source_mismatch(who: &str, want: &katlas_model::SourceIdentity, got: &Identity, out: &mut Vec<String>) {
    let g = &got.source;
    if want.commit != g.commit {
        out.push(format!("{who}: commit {}, submitted {}", g.commit.as_deref().unwrap_or("none"), want.commit.as_deref().unwrap_or("none")));
    } else if want.diff_md5 != g.diff_md5 {
        let show = |d: &Option<String>| d.as_deref().map(|d| format!("diff {d}")).unwrap_or_else(|| "a clean tree".into());
        out.push(format!("{who}: source {}, submitted {} (the tree changed after submission)", show(&g.diff_md5), show(&want.diff_md5)));
    }
}

/// A target's line: its result judged against the submission, or why it has none.
pub fn outcome(target: &str, job_id: Option<&str>, expected: &ExpectedIdentity, result: Option<&EvalResult>, missing: &str) -> FleetOutcome {
    let Some(r) = result else {
        return FleetOutcome {
            target: target.into(),
            arch: None,
            host: None,
            job_id: job_id.map(str::to_string),
            eval_id: None,
            verdict: None,
            effect: None,
            goal: None,
            reasons: vec![missing.to_string()],
            passed: None,
            summary: None,
        };
    };
    let cand = r.sides.last();
    let id = cand.map(|s| &s.identity);
    let mismatches = identity_mismatches(expected, r);
    let (verdict, reasons) = if mismatches.is_empty() {
        (r.verdict, r.reasons.clone())
    } else {
        (Verdict::Invalid, mismatches.into_iter().map(|m| format!("identity against the submission: {m}")).collect())
    };
    FleetOutcome {
        target: target.into(),
        arch: id.and_then(|i| i.arch().map(str::to_string)),
        host: id.and_then(|i| i.host.hostname.clone()),
        job_id: job_id.map(str::to_string),
        eval_id: Some(r.eval_id.clone()),
        verdict: Some(verdict),
        effect: r.effects.first().cloned(),
        goal: Some(r.goal),
        reasons,
        passed: None,
        summary: None,
    }
}

/// A `gate` or `collect` target's line: its job's result judged against the submission, or
/// why it has none. A job whose identity does not match what was submitted is `invalid` and
/// counts as not passed.
pub fn job_outcome(target: &str, job_id: Option<&str>, expected: &ExpectedIdentity, result: Option<&FleetJobResult>, missing: &str) -> FleetOutcome {
    let mut line = outcome(target, job_id, expected, None, missing);
    let Some(j) = result else { return line };
    let mismatches = job_mismatches(expected, j);
    line.arch = j.arch.clone().or_else(|| j.identity.arch().map(str::to_string));
    line.host = j.identity.host.hostname.clone();
    line.eval_id = Some(j.id.clone());
    line.summary = Some(j.summary.clone());
    if mismatches.is_empty() {
        line.passed = Some(j.passed);
        line.reasons = j.reasons.clone();
    } else {
        line.passed = Some(false);
        line.verdict = Some(Verdict::Invalid);
        line.reasons = mismatches.into_iter().map(|m| format!("identity against the submission: {m}")).collect();
    }
    line
}

/// A gate's or collect's fleet passes only when every target passed (held its floors, gave its
/// rows): a gate fails closed, so an unmeasured or `invalid` target fails it too.
pub fn all_passed(lines: &[FleetOutcome]) -> bool {
    !lines.is_empty() && lines.iter().all(|l| l.passed == Some(true))
}

/// Targets must have run the same binaries: for each side, a target whose binary differs
/// from the one most targets ran (every target, on a tie) is `invalid` for the comparison.
/// `results` are the finished targets' results, matched to `lines` by eval id.
pub fn binaries_agree(lines: &mut [FleetOutcome], results: &[&EvalResult]) {
    let md5 = |r: &EvalResult, label: &str| r.sides.iter().find(|s| s.label == label).and_then(|s| s.identity.binary.as_ref()).and_then(|b| b.md5.clone());
    let labels: std::collections::BTreeSet<String> = results.iter().flat_map(|r| r.sides.iter().map(|s| s.label.clone())).collect();
    for label in labels {
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for r in results {
            if let Some(m) = md5(r, &label) {
                *counts.entry(m).or_default() += 1;
            }
        }
        if counts.len() < 2 {
            continue;
        }
        let top = counts.values().max().copied().unwrap_or(0);
        let winners: Vec<&String> = counts.iter().filter(|(_, n)| **n == top).map(|(m, _)| m).collect();
        let majority = (winners.len() == 1).then(|| winners[0].clone());
        for r in results {
            let Some(m) = md5(r, &label) else { continue };
            if majority.as_ref() == Some(&m) {
                continue;
            }
            if let Some(line) = lines.iter_mut().find(|l| l.eval_id.as_deref() == Some(r.eval_id.as_str())) {
                line.verdict = Some(Verdict::Invalid);
                let others: Vec<&String> = counts.keys().filter(|k| **k != m).collect();
                line.reasons.insert(
                    0,
                    format!(
                        "identity across targets: side {label} ran binary md5 {m}, other targets {}",
                        others.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                );
            }
        }
    }
}

/// The allowlist decision over the targets' lines, with the verdict and disposition the
/// ledger records it under. Only valid measurements count: an `invalid`, unstable or
/// unmeasured target keeps the conservative default, and never vetoes or promotes.
pub fn decide(fleet_id: &str, scheduler: &str, targets: Vec<FleetOutcome>) -> (FleetSummary, Verdict, Disposition) {
    let measured = |v: Verdict| targets.iter().filter(move |t| t.verdict == Some(v));
    let key = |t: &FleetOutcome| t.arch.clone().unwrap_or_else(|| t.target.clone());
    let regressed: Vec<String> = measured(Verdict::Regressed).map(|t| t.target.clone()).collect();
    let improved: Vec<String> = measured(Verdict::Improved).map(key).collect();
    let all_improved = !targets.is_empty() && targets.iter().all(|t| t.verdict == Some(Verdict::Improved));
    let (decision, allowlist, verdict, disposition) = if !regressed.is_empty() {
        let keep = if improved.is_empty() {
            String::new()
        } else {
            format!("; it improved on {}: gate it per arch (a perf variant with an allowlist row) and evaluate again to keep that", improved.join(", "))
        };
        let why = format!("regressed on {}{keep}", regressed.join(", "));
        (FleetDecision::Reject, Vec::new(), Verdict::Regressed, Disposition::RevisitIf { condition: why })
    } else if all_improved {
        (FleetDecision::Promote, dedup(improved), Verdict::Improved, Disposition::Promote)
    } else if !improved.is_empty() {
        (FleetDecision::Allowlist, dedup(improved), Verdict::Improved, Disposition::OptIn)
    } else {
        let v = if targets.iter().any(|t| t.verdict == Some(Verdict::NoChange)) { Verdict::NoChange } else { Verdict::Inconclusive };
        (FleetDecision::KeepDefault, Vec::new(), v, Disposition::default_for(v))
    };
    let summary = FleetSummary { fleet_id: fleet_id.into(), scheduler: scheduler.into(), decision, allowlist, targets };
    (summary, verdict, disposition)
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The ledger entry of a fleet's decision: sides, protocol and metric of the first measured
/// target, the decision and every target's line in `fleet`.
pub fn decision_entry(
    record: &FleetRecord,
    first: Option<&EvalResult>,
    summary: FleetSummary,
    verdict: Verdict,
    disposition: Disposition,
    now: &str,
) -> LedgerEntry {
    let side = |k: usize| {
        first.and_then(|r| r.sides.get(k).cloned()).unwrap_or_else(|| EvalSide { label: if k == 0 { "A" } else { "B" }.into(), ..Default::default() })
    };
    let reasons = summary
        .targets
        .iter()
        .map(|t| {
            let v = t.verdict.map(|v| v.to_string()).unwrap_or_else(|| "not measured".into());
            let why = t.reasons.first().map(|r| format!(": {r}")).unwrap_or_default();
            format!("target {}: {v}{why}", t.target)
        })
        .collect();
    LedgerEntry {
        schema: katlas_model::LEDGER_SCHEMA.into(),
        id: format!("fleet-{}", record.id),
        recorded_at: now.into(),
        task_id: None,
        eval_id: Some(format!("fleet/{}", record.id)),
        lever: record.lever.clone(),
        key: ExperimentKey { kernel: record.kernel.clone(), ..Default::default() },
        hypothesis: None,
        metric: record.metric.clone(),
        goal: first.map(|r| r.goal).unwrap_or_default(),
        baseline: side(0),
        candidate: side(1),
        protocol: first.map(|r| r.protocol.clone()).unwrap_or_default(),
        samples: SampleRef { path: format!(".katlas/fleet/{}/fleet.json", record.id), ..Default::default() },
        verdict,
        reasons,
        effect: None,
        noise_threshold: first.map(|r| r.noise_threshold).unwrap_or(0.0),
        correctness: Vec::new(),
        cross_host: true,
        mechanism: None,
        disposition,
        fleet: Some(summary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use katlas_model::ledger::FleetOutcome;

    fn line(target: &str, arch: Option<&str>, v: Option<Verdict>) -> FleetOutcome {
        FleetOutcome {
            target: target.into(),
            arch: arch.map(str::to_string),
            host: None,
            job_id: None,
            eval_id: None,
            verdict: v,
            effect: None,
            goal: None,
            reasons: vec![],
            passed: None,
            summary: None,
        }
    }

    #[test]
    fn a_regression_on_any_measured_target_rejects_and_names_where_it_helped() {
        let (s, v, d) = decide("f", "slurm", vec![line("a", Some("gfx1100"), Some(Verdict::Improved)), line("b", Some("gfx1201"), Some(Verdict::Regressed))]);
        assert_eq!((s.decision, v), (FleetDecision::Reject, Verdict::Regressed));
        assert!(s.allowlist.is_empty());
        let Disposition::RevisitIf { condition } = d else { panic!("{d:?}") };
        assert!(condition.contains("regressed on b") && condition.contains("improved on gfx1100"), "{condition}");
    }

    #[test]
    fn improved_somewhere_and_flat_or_unmeasured_elsewhere_allowlists_only_the_improved_archs() {
        let (s, v, d) = decide(
            "f",
            "slurm",
            vec![
                line("a", Some("sm_90"), Some(Verdict::Improved)),
                line("b", Some("sm_80"), Some(Verdict::NoChange)),
                line("c", None, None),
                line("d", Some("sm_120"), Some(Verdict::Invalid)),
            ],
        );
        assert_eq!((s.decision, v, d), (FleetDecision::Allowlist, Verdict::Improved, Disposition::OptIn));
        assert_eq!(s.allowlist, ["sm_90"]);
    }

    #[test]
    fn everywhere_improved_promotes_and_nothing_better_keeps_the_default() {
        let (s, v, _) = decide("f", "slurm", vec![line("a", Some("sm_90"), Some(Verdict::Improved)), line("b", None, Some(Verdict::Improved))]);
        assert_eq!((s.decision, v), (FleetDecision::Promote, Verdict::Improved));
        assert_eq!(s.allowlist, ["b", "sm_90"], "a target without a known arch is keyed by its name");
        let (s, v, _) = decide("f", "slurm", vec![line("a", None, Some(Verdict::NoChange)), line("b", None, Some(Verdict::Unstable))]);
        assert_eq!((s.decision, v), (FleetDecision::KeepDefault, Verdict::NoChange));
        let (s, _, _) = decide("f", "slurm", vec![line("a", None, Some(Verdict::Invalid))]);
        assert_eq!(s.decision, FleetDecision::KeepDefault, "an invalid target neither promotes nor vetoes");
        // The record keeps the words it always had.
        assert_eq!(serde_json::to_string(&s.decision).unwrap(), "\"keep_default\"");
    }

    fn result_with(diff: Option<&str>, md5: &str, env: &[(&str, &str)]) -> EvalResult {
        let mut id = Identity::default();
        id.source.root = Some("/p".into());
        id.source.commit = Some("c1".into());
        id.source.diff_md5 = diff.map(str::to_string);
        id.binary = Some(katlas_model::FileDigest { md5: Some(md5.into()), ..Default::default() });
        id.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let side = |l: &str| EvalSide { label: l.into(), identity: id.clone(), ..Default::default() };
        EvalResult { eval_id: "fleet/f/a/1".into(), ..crate::test_result("t_us", Default::default(), Verdict::Improved, vec![side("A"), side("B")]) }
    }

    #[test]
    fn a_target_that_ran_another_diff_binary_or_env_is_invalid_for_the_comparison() {
        let mut exp = ExpectedIdentity::default();
        exp.source.root = Some("/p".into());
        exp.source.commit = Some("c1".into());
        exp.source.diff_md5 = Some("d1".into());
        exp.binaries.insert("B".into(), katlas_model::FileDigest { md5: Some("m1".into()), ..Default::default() });
        exp.env.insert("HIP_FORCE".into(), "1".into());
        let same = result_with(Some("d1"), "m1", &[("HIP_FORCE", "1"), ("CUDA_VISIBLE_DEVICES", "3"), ("SLURM_JOB_ID", "9")]);
        assert!(identity_mismatches(&exp, &same).is_empty(), "{:?}", identity_mismatches(&exp, &same));
        let o = outcome("a", Some("7"), &exp, Some(&same), "");
        assert_eq!(o.verdict, Some(Verdict::Improved));
        for (r, want) in [
            (result_with(Some("d2"), "m1", &[("HIP_FORCE", "1")]), "tree changed after submission"),
            (result_with(Some("d1"), "m2", &[("HIP_FORCE", "1")]), "side B: binary md5 m2, submitted m1"),
            (result_with(Some("d1"), "m1", &[("HIP_FORCE", "0")]), "env HIP_FORCE `0`, submitted `1`"),
        ] {
            let o = outcome("a", Some("7"), &exp, Some(&r), "");
            assert_eq!(o.verdict, Some(Verdict::Invalid));
            assert!(o.reasons.iter().any(|x| x.contains(want)), "{want}: {:?}", o.reasons);
        }
        let none = outcome("b", Some("8"), &exp, None, "job 8 CANCELLED without a result");
        assert_eq!((none.verdict, none.reasons[0].as_str()), (None, "job 8 CANCELLED without a result"));
    }

    fn job(diff: &str, passed: bool) -> FleetJobResult {
        let mut identity = Identity::default();
        identity.source.root = Some("/p".into());
        identity.source.commit = Some("c1".into());
        identity.source.diff_md5 = Some(diff.into());
        identity.env.insert("SLURM_JOB_ID".into(), "12".into());
        FleetJobResult {
            schema: katlas_model::fleet::FLEET_JOB_SCHEMA.into(),
            id: "fleet/f/wide/1".into(),
            command: katlas_model::fleet::FleetCommand::Gate,
            identity,
            finished_at: String::new(),
            passed,
            summary: "gate wide: PASS".into(),
            arch: Some("wide".into()),
            reasons: vec![],
            gate: None,
            rows_file: None,
            rows_ok: None,
            rows_error: None,
        }
    }

    #[test]
    fn a_gate_fleet_passes_only_when_every_target_held_and_ran_what_was_submitted() {
        let mut exp = ExpectedIdentity::default();
        exp.source.root = Some("/p".into());
        exp.source.commit = Some("c1".into());
        exp.source.diff_md5 = Some("d1".into());
        let ok = job_outcome("wide", Some("3"), &exp, Some(&job("d1", true)), "");
        assert_eq!((ok.passed, ok.arch.as_deref(), ok.verdict), (Some(true), Some("wide"), None));
        let failed = job_outcome("narrow", Some("4"), &exp, Some(&job("d1", false)), "");
        assert_eq!(failed.passed, Some(false));
        assert!(all_passed(std::slice::from_ref(&ok)));
        assert!(!all_passed(&[ok.clone(), failed]), "one target under its floor fails the fleet");
        let edited = job_outcome("narrow", Some("4"), &exp, Some(&job("d2", true)), "");
        assert_eq!((edited.passed, edited.verdict), (Some(false), Some(Verdict::Invalid)));
        assert!(edited.reasons[0].contains("the tree changed after submission"), "{:?}", edited.reasons);
        let missing = job_outcome("narrow", Some("4"), &exp, None, "job 4 CANCELLED without a result");
        assert!(!all_passed(&[ok, missing]), "an unmeasured target fails closed");
        assert!(!all_passed(&[]));
    }
}
