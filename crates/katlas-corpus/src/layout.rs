//! Where things live under a project's `.katlas/` directory (docs/corpus.md lists them).

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Layout {
    /// The `.katlas` directory itself.
    pub root: PathBuf,
}

impl Layout {
    /// Layout of the project rooted at `project_root`.
    pub fn for_project(project_root: &Path) -> Self {
        Self { root: project_root.join(".katlas") }
    }
    pub fn corpus_dir(&self) -> PathBuf {
        self.root.join("corpus")
    }
    /// Rows go to one file per host and UTC day, which keeps files small and
    /// merges from several machines conflict-free.
    pub fn corpus_file(&self, host: &str, day: &str) -> PathBuf {
        let host: String = host.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect();
        let host = if host.is_empty() { "unknown-host".to_string() } else { host };
        self.corpus_dir().join(format!("{host}-{day}.jsonl"))
    }
    pub fn isa_dir(&self) -> PathBuf {
        self.root.join("isa")
    }
    pub fn tasks_dir(&self) -> PathBuf {
        self.root.join("tasks")
    }
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }
    pub fn ledger(&self) -> PathBuf {
        self.root.join("ledger.jsonl")
    }
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }
    pub fn rules_dir(&self) -> PathBuf {
        self.root.join("rules")
    }
}
