//! Where things live under a project's `.katlas/` directory (docs/corpus.md lists them): the
//! one place those paths are built, so no crate joins `.katlas/…` by hand.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Layout {
    /// The `.katlas` directory itself.
    pub root: PathBuf,
}

impl Layout {
    /// Layout of the project rooted at `project_root`.
    pub fn for_project(project_root: &Path) -> Self {
        Self { root: katlas_fs::dot_dir(project_root) }
    }
    /// The directories `katlas init` creates.
    pub fn init_dirs(&self) -> [PathBuf; 4] {
        [self.corpus_dir(), self.isa_dir(), self.tasks_dir(), self.runs_dir()]
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
    /// The ISA scan cache (by content digest), shared by `isa scan`, build and fit.
    pub fn isa_cache_dir(&self) -> PathBuf {
        self.cache_dir().join("isa")
    }
    /// The manifest `katlas build` writes for its code objects.
    pub fn build_isa_manifest(&self) -> PathBuf {
        self.isa_dir().join("build.json")
    }
    /// The last `katlas suggest` queue, for `katlas task --rank N`.
    pub fn suggest_last(&self) -> PathBuf {
        self.cache_dir().join("suggest-last.json")
    }
    /// Build state (`katlas build`).
    pub fn build_dir(&self) -> PathBuf {
        self.root.join("build")
    }
    pub fn rules_dir(&self) -> PathBuf {
        self.root.join("rules")
    }
    /// Project overrides of the arch database (`*.toml`, read in name order).
    pub fn arch_rules_dir(&self) -> PathBuf {
        self.rules_dir().join("arch")
    }
}
