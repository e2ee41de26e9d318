//! The ledger: `.katlas/ledger.jsonl`, every verdict appended, never edited. Reading and
//! appending are `katlas_corpus::ledger`'s (shared with suggest's history and the build
//! lint); this module adds the queries `katlas ledger` answers.

use crate::error::EvalError;
pub use katlas_corpus::ledger::{append, read};
use katlas_model::ledger::{LedgerEntry, Verdict};

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub verdict: Option<Verdict>,
    pub lever: Option<String>,
    pub kernel: Option<String>,
    pub arch: Option<String>,
    pub task: Option<String>,
    pub metric: Option<String>,
    /// Disposition kind: `promote`, `reject`, `opt-in`, `revisit-if`.
    pub disposition: Option<String>,
    /// Entries recorded at or after this RFC 3339 time (string order is time order).
    pub since: Option<String>,
}

impl Filter {
    pub fn matches(&self, e: &LedgerEntry) -> bool {
        let eq = |want: &Option<String>, have: &Option<String>| want.as_ref().is_none_or(|w| have.as_deref() == Some(w.as_str()));
        self.verdict.is_none_or(|v| v == e.verdict)
            && eq(&self.lever, &e.lever)
            && self.kernel.as_ref().is_none_or(|k| e.key.kernel.as_deref().is_some_and(|x| x.contains(k.as_str())))
            && eq(&self.arch, &e.key.arch)
            && eq(&self.task, &e.task_id)
            && self.metric.as_ref().is_none_or(|m| &e.metric == m)
            && self.disposition.as_ref().is_none_or(|d| e.disposition.kind() == d)
            && self.since.as_ref().is_none_or(|s| e.recorded_at.as_str() >= s.as_str())
    }
}

/// Entry by id or unique id prefix.
pub fn find<'a>(entries: &'a [LedgerEntry], id: &str) -> Result<&'a LedgerEntry, EvalError> {
    let hits: Vec<&LedgerEntry> = entries.iter().filter(|e| e.id.starts_with(id)).collect();
    match hits.len() {
        0 => Err(EvalError::Input(format!("no ledger entry with id `{id}`"))),
        1 => Ok(hits[0]),
        n => Err(EvalError::Input(format!("id prefix `{id}` matches {n} entries; give more characters"))),
    }
}
