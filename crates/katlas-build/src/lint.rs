//! `katlas lint dispatch`: the perf-variant allowlist against the ledger and the source.
//!
//! Rules (codes in `Finding::code`):
//! - `no-evidence`, `evidence-missing`, `evidence-verdict`, `evidence-arch`: a `measured = true`
//!   row must cite ledger entries whose verdict is `improved` (not rejected) and whose arch is
//!   the row's atom (or an atom of its family/class/capability).
//! - `unmeasured-capability-variant`: a variant keyed on a family, class or capability without
//!   a measurement for each matrix atom it sends there; `unmeasured-variant` for one atom.
//! - `shadowed`: an earlier row of the same kernel already matches every atom the row names.
//! - `unknown-arch`, `no-matrix-atom`, `unknown-kernel`: keys that match nothing.
//! - `perf-branch-without-row`, `annotation-incomplete`: `// perf:` annotations on dispatch
//!   branches must name an allowlisted `kernel=… variant=…`.
//!   Atoms without a row get the portable default (listed in `effective`).

use crate::allowlist::{load, KeyKind, LocatedRow};
use crate::config::Settings;
use crate::error::Result;
use crate::host_refs::{scan_host, Annotation};
use crate::sources::discover;
use katlas_model::{Disposition, LedgerEntry, Verdict};
use katlas_project::Project;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub const LINT_SCHEMA: &str = "katlas.lint.dispatch.v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Finding {
    pub severity: Severity,
    pub code: String,
    pub message: String,
    /// `file:line` of the row or annotation.
    pub at: Option<String>,
    pub kernel: Option<String>,
    /// 1-based allowlist row.
    pub row: Option<usize>,
}

/// The variant each matrix atom runs for one kernel.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Effective {
    pub kernel: String,
    pub atom: String,
    /// Row variant, or `default` (portable) when no row matches.
    pub variant: String,
    pub row: Option<usize>,
    /// The row is backed by valid ledger evidence for this atom.
    pub measured: bool,
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct LintSummary {
    pub rows: usize,
    pub errors: usize,
    pub warnings: usize,
    pub ledger_entries: usize,
    pub annotations: usize,
}

/// `katlas.lint.dispatch.v1`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LintReport {
    pub schema: String,
    pub matrix: Vec<String>,
    pub ledger: String,
    pub rows: Vec<LocatedRow>,
    pub findings: Vec<Finding>,
    pub effective: Vec<Effective>,
    pub annotations: Vec<Annotation>,
    pub summary: LintSummary,
}

impl LintReport {
    pub fn has_errors(&self) -> bool {
        self.summary.errors > 0
    }
}

/// The arch a ledger entry vouches for: its `arch`, else the candidate's (then baseline's)
/// device. `Err` when the declared arch and the candidate's device disagree.
fn entry_arch(e: &LedgerEntry) -> std::result::Result<Option<String>, String> {
    let declared = e.key.arch.as_deref().map(katlas_arch::canonical_atom);
    let ran = e.candidate.identity.arch().or_else(|| e.baseline.identity.arch()).map(katlas_arch::canonical_atom);
    match (declared, ran) {
        (Some(d), Some(r)) if d != r => Err(format!("says arch {d} but its candidate ran on {r}")),
        (d, r) => Ok(d.or(r)),
    }
}

pub fn lint_dispatch(project: &Project, s: &Settings, ledger: Option<&Path>) -> Result<LintReport> {
    let rows = load(project, s)?;
    let ledger_path: PathBuf = ledger.map(Path::to_path_buf).unwrap_or_else(|| s.layout().ledger());
    let mut findings = Vec::new();
    let f = |sev: Severity, code: &str, msg: String, r: Option<&LocatedRow>| Finding {
        severity: sev,
        code: code.into(),
        message: msg,
        at: r.map(LocatedRow::place),
        kernel: r.map(|r| r.row.kernel.clone()),
        row: r.map(|r| r.index),
    };

    let mut entries: BTreeMap<String, LedgerEntry> = BTreeMap::new();
    let rep = katlas_corpus::ledger::read(&ledger_path).map_err(|e| crate::error::BuildError::BadInput(e.to_string()))?;
    for e in rep.errors {
        findings.push(f(Severity::Warning, "ledger-line", format!("{e} (skipped)"), None));
    }
    for r in rep.records {
        entries.insert(r.record.id.clone(), r.record);
    }
    let ledger_shown = s.rel(&ledger_path);
    let matrix: BTreeSet<&str> = s.matrix.iter().map(String::as_str).collect();

    // Kernel ids the sources define, when kernel roots are configured.
    let kernels: Option<BTreeSet<String>> =
        (!s.kernel_roots.is_empty()).then(|| discover(s, &s.kernel_roots).ok()).flatten().map(|v| v.into_iter().map(|x| x.kernel).collect());

    // The matrix atoms each row actually decides: first match wins.
    let first_match = |idx: usize, atom: &str| -> bool {
        let k = &rows[idx].row.kernel;
        rows.iter().position(|r| &r.row.kernel == k && r.atoms.contains(atom)) == Some(idx)
    };
    let mut verified: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for (ri, r) in rows.iter().enumerate() {
        let key = r.key();
        let in_matrix: BTreeSet<&str> = r.atoms.iter().map(String::as_str).filter(|a| matrix.contains(a)).collect();
        let decides: BTreeSet<&str> = in_matrix.iter().copied().filter(|a| first_match(ri, a)).collect();
        if r.kind == KeyKind::Unknown {
            findings.push(f(
                Severity::Error,
                "unknown-arch",
                format!("row {} ({}): `{key}` is not an atom, family or class of the arch table", r.index, r.row.kernel),
                Some(r),
            ));
            continue;
        }
        if in_matrix.is_empty() {
            findings.push(f(
                Severity::Warning,
                "no-matrix-atom",
                format!("row {} ({} {key}): matches no atom of the matrix ({})", r.index, r.row.kernel, s.matrix.join(" ")),
                Some(r),
            ));
        }
        if let Some(k) = &kernels {
            if !k.contains(&r.row.kernel) {
                findings.push(f(
                    Severity::Warning,
                    "unknown-kernel",
                    format!("row {}: kernel `{}` is not a kernel source under the kernel roots", r.index, r.row.kernel),
                    Some(r),
                ));
            }
        }
        // Evidence.
        let mut measured_atoms: BTreeSet<String> = BTreeSet::new();
        if r.row.measured {
            if r.row.evidence.is_empty() {
                findings.push(f(
                    Severity::Error,
                    "no-evidence",
                    format!(
                        "row {} ({} {key} -> {}): measured = true but no ledger evidence (add `evidence = [\"<ledger id>\"]`)",
                        r.index, r.row.kernel, r.row.variant
                    ),
                    Some(r),
                ));
            }
            for id in &r.row.evidence {
                let Some(e) = entries.get(id) else {
                    findings.push(f(
                        Severity::Error,
                        "evidence-missing",
                        format!("row {} ({} {key}): evidence `{id}` is not in {ledger_shown}", r.index, r.row.kernel),
                        Some(r),
                    ));
                    continue;
                };
                if e.verdict != Verdict::Improved || matches!(e.disposition, Disposition::Reject) {
                    findings.push(f(
                        Severity::Error,
                        "evidence-verdict",
                        format!("row {} ({} {key}): ledger `{id}` says {} / {}, not improved", r.index, r.row.kernel, e.verdict, e.disposition),
                        Some(r),
                    ));
                    continue;
                }
                match entry_arch(e) {
                    Err(why) => {
                        findings.push(f(Severity::Error, "evidence-arch", format!("row {} ({} {key}): ledger `{id}` {why}", r.index, r.row.kernel), Some(r)))
                    }
                    Ok(None) => findings.push(f(
                        Severity::Error,
                        "evidence-arch",
                        format!("row {} ({} {key}): ledger `{id}` records no arch, so it cannot vouch for {key}", r.index, r.row.kernel),
                        Some(r),
                    )),
                    Ok(Some(a)) if !r.atoms.contains(&a) => findings.push(f(
                        Severity::Error,
                        "evidence-arch",
                        format!("row {} ({} {key}): ledger `{id}` was measured on {a}, which the row does not key", r.index, r.row.kernel),
                        Some(r),
                    )),
                    Ok(Some(a)) => {
                        if let Some(k) = &e.key.kernel {
                            if k != &r.row.kernel {
                                findings.push(f(
                                    Severity::Warning,
                                    "evidence-kernel",
                                    format!("row {}: ledger `{id}` is about kernel `{k}`, the row about `{}`", r.index, r.row.kernel),
                                    Some(r),
                                ));
                            }
                        }
                        measured_atoms.insert(a);
                    }
                }
            }
        }
        let unmeasured: Vec<&str> = decides.iter().copied().filter(|a| !measured_atoms.contains(*a)).collect();
        verified.insert(r.index, measured_atoms.clone());
        match r.kind {
            KeyKind::Family | KeyKind::Class | KeyKind::Capability | KeyKind::All if !unmeasured.is_empty() => {
                let msg = if r.row.measured {
                    format!(
                        "row {} ({} {key} -> {}): keyed on a {} but measured only on {}; {} get the variant without a measurement (add atom rows or evidence)",
                        r.index,
                        r.row.kernel,
                        r.row.variant,
                        kind_word(r.kind),
                        if measured_atoms.is_empty() { "nothing".into() } else { measured_atoms.iter().cloned().collect::<Vec<_>>().join(" ") },
                        unmeasured.join(" ")
                    )
                } else {
                    format!(
                        "row {} ({} {key} -> {}): perf variant keyed on a {} without a measured row; {} run it unmeasured (capabilities decide legality, measurements decide speed)",
                        r.index,
                        r.row.kernel,
                        r.row.variant,
                        kind_word(r.kind),
                        unmeasured.join(" ")
                    )
                };
                findings.push(f(Severity::Error, "unmeasured-capability-variant", msg, Some(r)));
            }
            KeyKind::Atom if !r.row.measured => findings.push(f(
                Severity::Warning,
                "unmeasured-variant",
                format!("row {} ({} {key} -> {}): measured = false; measure it or drop the row", r.index, r.row.kernel, r.row.variant),
                Some(r),
            )),
            _ => {}
        }
    }

    // Shadowing: first match wins, so a row whose atoms an earlier row already covers is dead.
    for (j, rj) in rows.iter().enumerate() {
        if rj.kind == KeyKind::Unknown {
            continue;
        }
        if let Some(ri) = rows[..j].iter().find(|ri| ri.row.kernel == rj.row.kernel && ri.kind != KeyKind::Unknown && rj.atoms.is_subset(&ri.atoms)) {
            findings.push(f(
                Severity::Error,
                "shadowed",
                format!(
                    "row {} ({} {} -> {}) is shadowed by row {} ({} -> {}) at {}, which comes first and covers every atom it keys",
                    rj.index,
                    rj.row.kernel,
                    rj.key(),
                    rj.row.variant,
                    ri.index,
                    ri.key(),
                    ri.row.variant,
                    ri.place()
                ),
                Some(rj),
            ));
        }
    }

    // What each matrix atom runs.
    let mut effective = Vec::new();
    let kernel_ids: BTreeSet<&str> = rows.iter().map(|r| r.row.kernel.as_str()).collect();
    for k in &kernel_ids {
        for a in &s.matrix {
            let hit = rows.iter().find(|r| r.row.kernel == *k && r.atoms.contains(a));
            effective.push(Effective {
                kernel: k.to_string(),
                atom: a.clone(),
                variant: hit.map(|r| r.row.variant.clone()).unwrap_or_else(|| "default".into()),
                row: hit.map(|r| r.index),
                measured: hit.is_some_and(|r| r.row.measured && verified.get(&r.index).is_some_and(|v| v.contains(a))),
            });
        }
    }

    // Gate annotations on dispatch branches.
    let host = scan_host(s, &BTreeSet::new());
    for a in host.annotations.iter().filter(|a| a.kind == "perf") {
        let at = Some(format!("{}:{}", a.file, a.line));
        match (a.fields.get("kernel"), a.fields.get("variant")) {
            (Some(k), Some(v)) => {
                if !rows.iter().any(|r| &r.row.kernel == k && &r.row.variant == v) {
                    findings.push(Finding {
                        severity: Severity::Error,
                        code: "perf-branch-without-row".into(),
                        message: format!("perf branch `{}` selects {k} variant `{v}`, which no allowlist row names", a.branch.as_deref().unwrap_or("?")),
                        at,
                        kernel: Some(k.clone()),
                        row: None,
                    });
                }
            }
            _ => findings.push(Finding {
                severity: Severity::Warning,
                code: "annotation-incomplete".into(),
                message: format!("`// perf: {}` names no kernel=… variant=…; it cannot be checked against the allowlist", a.text),
                at,
                kernel: None,
                row: None,
            }),
        }
    }

    findings.sort_by(|a, b| (a.severity, a.row, &a.at).cmp(&(b.severity, b.row, &b.at)));
    let summary = LintSummary {
        rows: rows.len(),
        errors: findings.iter().filter(|x| x.severity == Severity::Error).count(),
        warnings: findings.iter().filter(|x| x.severity == Severity::Warning).count(),
        ledger_entries: entries.len(),
        annotations: host.annotations.len(),
    };
    Ok(LintReport {
        schema: LINT_SCHEMA.into(),
        matrix: s.matrix.clone(),
        ledger: ledger_shown,
        rows,
        findings,
        effective,
        annotations: host.annotations,
        summary,
    })
}

fn kind_word(k: KeyKind) -> &'static str {
    match k {
        KeyKind::Atom => "atom",
        KeyKind::Family => "family",
        KeyKind::Class => "class",
        KeyKind::Capability => "capability",
        KeyKind::All => "catch-all (every atom)",
        KeyKind::Unknown => "unknown key",
    }
}
