//! What the measured processes could write that an eval depends on, checked around the
//! runs: the ledger (a candidate that truncates `ledger.jsonl` erases earlier verdicts) and
//! the baseline's worktree (a candidate that writes into it makes the baseline do more work).
//! The processes run as the same user as katlas, so nothing here can stop the write; katlas
//! holds a copy of the ledger to restore, and any such write makes the eval `invalid`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The ledger as it was before the sides ran.
pub struct LedgerCopy {
    path: PathBuf,
    bytes: Option<Vec<u8>>,
}

impl LedgerCopy {
    pub fn take(path: &Path) -> Self {
        Self { path: path.to_path_buf(), bytes: std::fs::read(path).ok() }
    }

    /// When the ledger no longer begins with the copy (truncated, rewritten, removed), put the
    /// copy back and say what happened. Lines appended after the copy are kept only when the
    /// copy is still their prefix.
    pub fn restore_if_shrunk(&self) -> std::io::Result<Option<String>> {
        let Some(before) = &self.bytes else { return Ok(None) };
        let now = std::fs::read(&self.path).ok();
        if now.as_deref().is_some_and(|n| n.starts_with(before)) {
            return Ok(None);
        }
        katlas_fs::write_atomic(&self.path, before)?;
        Ok(Some(format!(
            "{} was {} while the sides ran ({} bytes before, {} after): a measured process wrote to it; the earlier verdicts were restored from the copy katlas held",
            self.path.display(),
            if now.is_none() { "removed" } else { "truncated or rewritten" },
            before.len(),
            now.map(|n| n.len()).unwrap_or(0)
        )))
    }
}

/// Size and modification time of every file of a tree (not `.git`), up to a bound.
pub struct TreeState {
    root: PathBuf,
    files: BTreeMap<PathBuf, (u64, Option<SystemTime>)>,
}

const MAX_FILES: usize = 200_000;

impl TreeState {
    pub fn take(root: &Path) -> Self {
        let mut files = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                if files.len() >= MAX_FILES {
                    break;
                }
                let Ok(ft) = e.file_type() else { continue };
                let p = e.path();
                if ft.is_dir() {
                    if e.file_name() != ".git" {
                        stack.push(p);
                    }
                } else if let Ok(m) = std::fs::symlink_metadata(&p) {
                    files.insert(p, (m.len(), m.modified().ok()));
                }
            }
        }
        Self { root: root.to_path_buf(), files }
    }

    /// Files that existed before and were changed or removed since. New files are not
    /// counted: a bench may write its own outputs beside it.
    pub fn changed_since(&self) -> Vec<String> {
        let now = Self::take(&self.root);
        self.files.iter().filter(|(p, st)| now.files.get(*p) != Some(st)).map(|(p, _)| p.strip_prefix(&self.root).unwrap_or(p).display().to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_ledger_is_restored_and_a_grown_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let l = d.path().join("ledger.jsonl");
        std::fs::write(&l, "{\"a\":1}\n{\"b\":2}\n").unwrap();
        let copy = LedgerCopy::take(&l);
        std::fs::write(&l, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n").unwrap();
        assert_eq!(copy.restore_if_shrunk().unwrap(), None, "appended to: kept");
        std::fs::write(&l, "").unwrap();
        assert!(copy.restore_if_shrunk().unwrap().is_some_and(|m| m.contains("truncated")));
        assert_eq!(std::fs::read_to_string(&l).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }

    #[test]
    fn a_changed_file_of_a_tree_is_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("k")).unwrap();
        std::fs::write(d.path().join("k/speed.in"), "100\n").unwrap();
        let st = TreeState::take(d.path());
        std::fs::write(d.path().join("out.log"), "new").unwrap();
        assert!(st.changed_since().is_empty(), "new files are not counted");
        std::fs::write(d.path().join("k/speed.in"), "1000\n").unwrap();
        assert_eq!(st.changed_since(), vec!["k/speed.in".to_string()]);
    }
}
