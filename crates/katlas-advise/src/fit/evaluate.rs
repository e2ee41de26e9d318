//! Rule evaluation: the fit rules judged on a kernel's (or the phase's) facts, and the view's
//! readings gathered from them, hottest kernel first.

use super::view::{Finding, KernelFit, Missing, Unknown};
use crate::expr::{eval_all, render_template, Facts, Val};
use crate::rules::{FindingKind, FitRule};
use crate::signals::{evidence_for, Source};
use std::collections::{BTreeMap, BTreeSet};

/// Findings of `rules` that hold on `s`, the signals they emit, and the unknown conditions
/// (`signal@rule`) of those that could not decide.
pub(super) fn eval_rules<'r>(rules: impl Iterator<Item = &'r FitRule>, facts: Facts, kernel: Option<&str>) -> (Vec<Finding>, Vec<String>, Vec<Unknown>) {
    let s = facts.values;
    let (mut findings, mut emitted, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for r in rules {
        let (truth, unk) = eval_all(&r.when, &facts);
        match truth {
            Some(true) => {
                let mut numbers = BTreeMap::new();
                let nvidia = matches!(s.get("vendor"), Some(Val::Str(v)) if v == "nvidia");
                let text = r.text_nvidia.as_ref().filter(|_| nvidia).unwrap_or(&r.text);
                for n in r.when.iter().map(|c| c.signal.clone()).chain(crate::expr::template_names(text)) {
                    if n == "kernel" {
                        continue;
                    }
                    if let Some(v) = s.get(&n) {
                        numbers.insert(n, v.clone());
                    }
                }
                findings.push(Finding {
                    rule: r.id.clone(),
                    kind: r.kind,
                    kernel: kernel.map(str::to_string),
                    text: render_template(text, s),
                    numbers,
                    when: r.when.iter().map(|c| c.text.clone()).collect(),
                    source: r.source_nvidia.as_ref().filter(|_| nvidia).unwrap_or(&r.source).clone(),
                });
                emitted.extend(r.emits.iter().cloned());
            }
            Some(false) => {}
            None => unknown.extend(unk.into_iter().map(|signal| Unknown { signal, rule: r.id.clone() })),
        }
    }
    (findings, emitted, unknown)
}

/// The view's row-level findings by kind and the evidence the undecided rules wait on.
pub(super) struct Readings {
    pub likely: Vec<Finding>,
    pub left: Vec<Finding>,
    pub stops: Vec<Finding>,
    pub caveats: Vec<Finding>,
    pub missing: Vec<Missing>,
}

/// The phase's findings first, then each kernel's (hottest first); a stopped kernel's limits
/// and headroom are left out. `phase_waits`: the phase's unknown signals count as missing.
pub(super) fn readings(phase_findings: &[Finding], phase_unknown: &[Unknown], phase_waits: bool, kernels: &[KernelFit]) -> Readings {
    let mut likely = Vec::new();
    let mut left = Vec::new();
    let mut stops = Vec::new();
    let mut caveats = Vec::new();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in phase_findings {
        match f.kind {
            FindingKind::Limit => likely.push(f.clone()),
            FindingKind::Left => left.push(f.clone()),
            FindingKind::Stop => stops.push(f.clone()),
            FindingKind::Caveat => caveats.push(f.clone()),
        }
    }
    if phase_waits {
        for u in phase_unknown {
            missing.entry(evidence_for(&u.signal).to_string()).or_default().insert(u.rule.clone());
        }
    }
    for k in kernels {
        let stopped = k.stopped();
        for f in &k.findings {
            match f.kind {
                FindingKind::Limit if !stopped => likely.push(f.clone()),
                FindingKind::Left if !stopped => left.push(f.clone()),
                FindingKind::Stop => stops.push(f.clone()),
                FindingKind::Caveat => caveats.push(f.clone()),
                FindingKind::Limit | FindingKind::Left => {}
            }
        }
        for u in &k.unknown {
            missing.entry(kernel_evidence(k, &u.signal)).or_default().insert(u.rule.clone());
        }
    }
    let missing = missing.into_iter().map(|(evidence, rules)| Missing { evidence, rules: rules.into_iter().filter(|r| !r.is_empty()).collect() }).collect();
    Readings { likely, left, stops, caveats, missing }
}

/// The evidence a kernel's unknown signal waits on. When the kernel did join an ISA manifest
/// entry, "an ISA manifest entry" is not what is missing: the entry lacks the field, and the
/// line says which entry and which field so it cannot contradict the scope's match count.
fn kernel_evidence(k: &KernelFit, signal: &str) -> String {
    match (crate::signals::get(signal).map(|d| d.from), &k.isa) {
        (Some(Source::Isa), Some(i)) => {
            format!("`{signal}` for {}: its ISA manifest entry ({} in {}, {}) does not record it", k.short_name, i.kernel, i.object, i.arch)
        }
        (Some(Source::Occupancy), Some(i)) => format!(
            "occupancy inputs for {}: its ISA manifest entry ({} in {}, {}) lacks registers, LDS or wave size, or the arch database lacks {}",
            k.short_name, i.kernel, i.object, i.arch, i.arch
        ),
        _ => evidence_for(signal).to_string(),
    }
}
