//! The perf-variant allowlist: `[[perf_allowlist]]` rows in `katlas.toml` and/or
//! `perf-allowlist.toml` at the project root (same table name; katlas.toml rows first).
//!
//! A row keys a kernel's perf variant on an atom (`gfx1100`), a family (`gfx11`), a class
//! (`rdna3_dgpu`) and/or a capability (`cap = "wmma"`). Rows of one kernel are read in order
//! and the first that matches an atom picks its variant, like the arms of a dispatch `match`;
//! an atom no row matches runs the portable default.

use crate::config::Settings;
use crate::error::{BuildError, Result};
use katlas_project::Project;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub const ALLOWLIST_FILE: &str = "perf-allowlist.toml";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllowRow {
    /// Kernel id (module name).
    pub kernel: String,
    /// Atom, family or class the row keys on.
    #[serde(default)]
    pub arch: Option<String>,
    /// Capability the row keys on (`wmma`, `mfma`, `wgmma` …).
    #[serde(default)]
    pub cap: Option<String>,
    pub variant: String,
    /// True when the variant was measured to win on this key.
    #[serde(default)]
    pub measured: bool,
    /// Ledger entry ids (`.katlas/ledger.jsonl`) behind `measured = true`.
    #[serde(default)]
    pub evidence: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowFile {
    #[serde(default)]
    perf_allowlist: Vec<AllowRow>,
}

/// What a row's key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    Atom,
    Family,
    Class,
    Capability,
    /// No arch and no cap: every atom.
    All,
    Unknown,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LocatedRow {
    /// 1-based position among all rows.
    pub index: usize,
    pub file: String,
    pub line: Option<usize>,
    pub row: AllowRow,
    pub kind: KeyKind,
    /// Every atom of the table the key matches.
    pub atoms: BTreeSet<String>,
}

impl LocatedRow {
    pub fn key(&self) -> String {
        match (&self.row.arch, &self.row.cap) {
            (Some(a), Some(c)) => format!("{a}+cap:{c}"),
            (Some(a), None) => a.clone(),
            (None, Some(c)) => format!("cap:{c}"),
            (None, None) => "*".into(),
        }
    }
    pub fn place(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        }
    }
}

/// Lines of the `[[perf_allowlist]]` headers in `text`, in order.
fn header_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim().trim_end_matches(|c: char| c == '#' || c.is_whitespace()).starts_with("[[perf_allowlist]]"))
        .map(|(i, _)| i + 1)
        .collect()
}

/// Classify a row key against the table.
pub fn key_atoms(s: &Settings, row: &AllowRow) -> (KeyKind, BTreeSet<String>) {
    let all: BTreeSet<String> = s.db.atoms().map(|a| a.name.clone()).collect();
    let (mut kind, mut set) = match row.arch.as_deref() {
        None => (KeyKind::All, all),
        Some(k) => {
            if s.db.atoms().any(|a| a.name == k) {
                (KeyKind::Atom, BTreeSet::from([k.to_string()]))
            } else if s.db.atoms().any(|a| a.family == k || a.also_families.iter().any(|f| f == k)) {
                (KeyKind::Family, s.db.family_members(k).iter().map(|a| a.name.clone()).collect())
            } else if s.db.atoms().any(|a| a.class == k) {
                (KeyKind::Class, s.db.atoms().filter(|a| a.class == k).map(|a| a.name.clone()).collect())
            } else {
                (KeyKind::Unknown, BTreeSet::new())
            }
        }
    };
    if let Some(c) = &row.cap {
        let with: BTreeSet<String> = s.db.atoms().filter(|a| a.has_cap(c)).map(|a| a.name.clone()).collect();
        set = set.intersection(&with).cloned().collect();
        if kind != KeyKind::Unknown && kind != KeyKind::Atom {
            kind = KeyKind::Capability;
        }
    }
    (kind, set)
}

/// All rows, katlas.toml first, then perf-allowlist.toml.
pub fn load(project: &Project, s: &Settings) -> Result<Vec<LocatedRow>> {
    let mut rows: Vec<(String, Option<usize>, AllowRow)> = Vec::new();
    if let Some(cfg) = &project.config_path {
        let from_cfg: Vec<AllowRow> = project.section(&["perf_allowlist"]).map_err(|e| BuildError::BadInput(e.to_string()))?.unwrap_or_default();
        let text = std::fs::read_to_string(cfg).unwrap_or_default();
        let lines = header_lines(&text);
        for (i, r) in from_cfg.into_iter().enumerate() {
            rows.push((s.rel(cfg), lines.get(i).copied(), r));
        }
    }
    let extra = project.root.join(ALLOWLIST_FILE);
    if extra.is_file() {
        let text = std::fs::read_to_string(&extra).map_err(|e| BuildError::io(&extra, e))?;
        let de = toml::de::Deserializer::parse(&text).map_err(|e| BuildError::BadInput(format!("{}: {e}", extra.display())))?;
        let file: AllowFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.span().map(|sp| text[..sp.start.min(text.len())].matches('\n').count() + 1);
            BuildError::BadInput(format!("{}{}: {path}: {}", extra.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), inner.message()))
        })?;
        let lines = header_lines(&text);
        for (i, r) in file.perf_allowlist.into_iter().enumerate() {
            rows.push((s.rel(&extra), lines.get(i).copied(), r));
        }
    }
    Ok(rows
        .into_iter()
        .enumerate()
        .map(|(i, (file, line, row))| {
            let (kind, atoms) = key_atoms(s, &row);
            LocatedRow { index: i + 1, file, line, row, kind, atoms }
        })
        .collect())
}
