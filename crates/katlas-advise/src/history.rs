//! Suggestion memory: prior ledger verdicts on the same target.
//!
//! An attempt matches a suggestion by (lever, kernel, arch atom or class, phase, shape
//! bucket, quant). Only the verdicts named in `levers.toml [history] demote` count as
//! rejections (no improvement beyond the noise threshold); every other verdict is shown
//! and not counted. A rejection whose `revisit-if` condition now holds on the fit
//! signals is shown as restored and not counted.

use crate::expr::{eval_all, Cond};
use crate::names::variant_base;
use crate::rules::HistorySettings;
use katlas_arch::ArchDb;
use katlas_model::ledger::{disposition_text, Disposition, LedgerEntry, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The target a suggestion is for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Target {
    pub arch: Option<String>,
    pub arch_class: Option<String>,
    pub product: Option<String>,
    pub workload: Option<String>,
    pub phase: Option<String>,
    pub shape: Option<String>,
    pub quant: Option<String>,
    pub row_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PriorAttempt {
    pub ledger_id: String,
    pub recorded_at: String,
    #[serde(default)]
    pub task_id: Option<String>,
    #[schemars(with = "String")]
    pub verdict: Verdict,
    /// `promote`, `reject`, `opt-in`, `revisit-if: …`.
    #[serde(with = "disposition_text")]
    #[schemars(with = "String")]
    pub disposition: Disposition,
    #[serde(default)]
    pub revisit_if: Option<String>,
    /// Whether the revisit-if condition holds on the current fit (`null`: not a
    /// condition katlas can check, shown for a person to judge).
    #[serde(default)]
    pub revisit_holds: Option<bool>,
    /// Counted as a rejection (demotes the suggestion).
    pub counted: bool,
    /// Signed gain of the candidate (positive = better), when the eval measured one.
    #[serde(default)]
    pub gain: Option<f64>,
    #[serde(default)]
    pub noise_threshold: Option<f64>,
    /// How the entry matched (`arch atom` or `arch class <c>`).
    pub matched_by: String,
    pub note: String,
}

word_enum! {
    /// What the ledger's memory did to a suggestion.
    pub enum HistoryStatus {
        /// A matching rejection took points away.
        Demoted = "demoted",
        /// A rejection's revisit-if condition holds now: not counted.
        Restored = "restored",
        /// Prior attempts shown, none counted.
        Seen = "seen",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SuggestionHistory {
    pub status: HistoryStatus,
    /// Score points taken away.
    pub demotion: f64,
    pub attempts: Vec<PriorAttempt>,
}

/// Ledger entries read from `.katlas/ledger.jsonl`, with the bad lines reported.
pub struct Ledger {
    pub path: String,
    pub entries: Vec<LedgerEntry>,
    pub errors: Vec<String>,
}

impl Ledger {
    /// Through `katlas_corpus::ledger::read` (a missing ledger is empty).
    pub fn read(path: &Path) -> Result<Ledger, crate::AdviseError> {
        let rep = katlas_corpus::ledger::read(path).map_err(|e| crate::AdviseError::input(path.display().to_string(), e.to_string()))?;
        Ok(Ledger {
            path: path.display().to_string(),
            entries: rep.records.into_iter().map(|l| l.record).collect(),
            errors: rep.errors.iter().map(|e| e.to_string()).collect(),
        })
    }
}

fn same_opt(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x.eq_ignore_ascii_case(y),
        (None, None) => true,
        _ => false,
    }
}

fn same_kernel(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y || variant_base(x) == variant_base(y),
        (None, None) => true,
        _ => false,
    }
}

/// How an entry's arch matches the target's: by atom, by class, or not.
fn arch_match(db: &ArchDb, entry: &Option<String>, target: &Target) -> Option<String> {
    let (Some(e), Some(t)) = (entry, &target.arch) else {
        return if entry.is_none() && target.arch.is_none() { Some("no arch".into()) } else { None };
    };
    if katlas_arch::canonical_atom(e) == katlas_arch::canonical_atom(t) {
        return Some("arch atom".into());
    }
    let ec = db.atom(e).map(|a| a.class.clone());
    match (ec, &target.arch_class) {
        (Some(x), Some(y)) if x == *y => Some(format!("arch class {x}")),
        _ => None,
    }
}

/// Whether the entry is an attempt of `lever` on `kernel` at `target`.
pub fn matches(db: &ArchDb, e: &LedgerEntry, lever: &str, kernel: &Option<String>, target: &Target) -> Option<String> {
    if e.lever.as_deref() != Some(lever) {
        return None;
    }
    if !same_kernel(&e.key.kernel, kernel)
        || !same_opt(&e.key.phase, &target.phase)
        || !same_opt(&e.key.shape, &target.shape)
        || !same_opt(&e.key.quant, &target.quant)
    {
        return None;
    }
    arch_match(db, &e.key.arch, target)
}

/// Parse a revisit-if condition written in the rules syntax (`A and B`, or one
/// condition per `;`); `None` when it is prose.
fn parse_condition(text: &str) -> Option<Vec<Cond>> {
    let parts: Vec<&str> = text.split(" and ").flat_map(|p| p.split(';')).map(str::trim).filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return None;
    }
    parts.iter().map(|p| Cond::parse(p).ok()).collect()
}

/// History of one suggestion from the matching entries, judged on the current signals.
pub fn judge(
    db: &ArchDb,
    settings: &HistorySettings,
    entries: &[LedgerEntry],
    lever: &str,
    kernel: &Option<String>,
    target: &Target,
    signals: &dyn crate::expr::Lookup,
) -> Option<SuggestionHistory> {
    let mut attempts = Vec::new();
    let mut demotion = 0.0;
    let mut restored = false;
    for e in entries {
        let Some(how) = matches(db, e, lever, kernel, target) else { continue };
        let verdict = e.verdict;
        let points = settings.demote.get(&verdict).copied();
        let revisit = match &e.disposition {
            Disposition::RevisitIf { condition } => Some(condition.clone()),
            _ => None,
        };
        let holds = revisit.as_deref().and_then(parse_condition).and_then(|c| eval_all(&c, signals).0);
        let (counted, note) = match (points, holds) {
            (Some(_), Some(true)) if settings.restore_when_condition_holds => {
                restored = true;
                (false, format!("rejected ({verdict}) but its revisit-if condition `{}` holds now: restored", revisit.clone().unwrap_or_default()))
            }
            (Some(p), _) => {
                demotion += p;
                (true, format!("rejected: {verdict} on the same target (-{p} points)"))
            }
            (None, _) => (false, format!("{verdict}: shown, not counted as a rejection")),
        };
        attempts.push(PriorAttempt {
            ledger_id: e.id.clone(),
            recorded_at: e.recorded_at.clone(),
            task_id: e.task_id.clone(),
            verdict,
            disposition: e.disposition.clone(),
            revisit_if: revisit,
            revisit_holds: holds,
            counted,
            gain: e.effect.as_ref().map(|x| x.gain),
            noise_threshold: Some(e.noise_threshold),
            matched_by: how,
            note,
        });
    }
    if attempts.is_empty() {
        return None;
    }
    let status = if demotion > 0.0 {
        HistoryStatus::Demoted
    } else if restored {
        HistoryStatus::Restored
    } else {
        HistoryStatus::Seen
    };
    Some(SuggestionHistory { status, demotion, attempts })
}
