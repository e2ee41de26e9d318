//! `--touched REV`: the atoms that can reach a file changed since REV. An atom is touched when
//! a changed file is the source it resolves to for some kernel or anything that source
//! includes; a deleted source touches every atom its tag would have reached.

use crate::config::Settings;
use crate::error::{BuildError, Result};
use crate::includes::includes;
use crate::resolve::{resolve, tag_reaches};
use crate::sources::{parse_name, Lang, Source};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Touched {
    pub rev: String,
    /// Changed files (project-relative where inside the project).
    pub changed: Vec<String>,
    /// Atoms to build, in matrix order.
    pub atoms: Vec<String>,
    /// Why each atom is touched: the changed files it reaches.
    pub reasons: BTreeMap<String, Vec<String>>,
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let o = Command::new("git").arg("-C").arg(root).args(args).output().map_err(|e| BuildError::MissingEnv(format!("--touched needs git: {e}")))?;
    if !o.status.success() {
        return Err(BuildError::BadInput(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Files changed since `rev` (committed, staged, unstaged) plus untracked files, absolute.
pub fn changed_files(root: &Path, rev: &str) -> Result<Vec<PathBuf>> {
    let top = PathBuf::from(git(root, &["rev-parse", "--show-toplevel"])?.trim());
    let mut set = BTreeSet::new();
    for l in git(root, &["diff", "--name-only", rev, "--"])?.lines() {
        set.insert(top.join(l));
    }
    for l in git(root, &["ls-files", "--others", "--exclude-standard"])?.lines() {
        set.insert(top.join(l));
    }
    Ok(set.into_iter().collect())
}

pub fn touched_atoms(s: &Settings, sources: &[Source], rev: &str, changed: &[PathBuf]) -> Touched {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let changed_c: BTreeSet<PathBuf> = changed.iter().map(|p| canon(p)).collect();
    let mut reasons: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let by_file: BTreeMap<&str, &Source> = sources.iter().map(|x| (x.file.as_str(), x)).collect();
    let mut inc_memo: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
    for r in resolve(s, sources, &s.matrix) {
        let src = by_file[r.file.as_str()];
        let reach = inc_memo.entry(r.file.clone()).or_insert_with(|| {
            let mut set = includes(&src.path, &s.include_dirs).files;
            set.insert(canon(&src.path));
            set
        });
        for c in reach.intersection(&changed_c) {
            reasons.entry(r.atom.clone()).or_default().insert(s.rel(c));
        }
    }
    // Deleted sources: the atoms their tag reaches.
    for c in changed.iter().filter(|c| !c.exists()) {
        let in_root = s.kernel_roots.iter().any(|r| c.starts_with(r));
        let Some(name) = c.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some((kernel, lang, tag, tag_kind)) = parse_name(s, name) else {
            continue;
        };
        if !in_root {
            continue;
        }
        let ghost = Source { path: c.clone(), file: s.rel(c), kernel, group: String::new(), out_stem: String::new(), lang, tag, tag_kind };
        for atom in &s.matrix {
            if Lang::for_vendor(s.atom(atom).vendor) == lang && tag_reaches(s, &ghost, atom).is_some() {
                reasons.entry(atom.clone()).or_default().insert(ghost.file.clone());
            }
        }
    }
    Touched {
        rev: rev.to_string(),
        changed: changed.iter().map(|c| s.rel(c)).collect(),
        atoms: s.matrix.iter().filter(|a| reasons.contains_key(*a)).cloned().collect(),
        reasons: reasons.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect(),
    }
}
