//! Source-tree identity through the git CLI.
//!
//! The diff digest covers what a rebuild would see: the diff of tracked files
//! against HEAD (binary-safe) plus the path and *contents* of every untracked,
//! non-ignored file. hipfire's digest hashed only `git diff`, so a new source
//! file left the digest unchanged.

use katlas_model::digest::Md5Builder;
use katlas_model::SourceIdentity;
use std::path::Path;
use std::process::{Command, Stdio};

fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git").arg("-C").arg(root).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    out.status.success().then_some(out.stdout)
}

fn git_str(root: &Path, args: &[&str]) -> Option<String> {
    let s = String::from_utf8(git(root, args)?).ok()?;
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Identity of the git work tree containing `dir`, computed at its top level
/// whatever `dir` is. Outside git every field is `null`.
pub fn source_identity(dir: &Path) -> SourceIdentity {
    let Some(top) = git_str(dir, &["rev-parse", "--show-toplevel"]) else {
        return SourceIdentity { root: Some(dir.display().to_string()), ..Default::default() };
    };
    let root = Path::new(&top);
    let commit = git_str(root, &["rev-parse", "--verify", "-q", "HEAD"]);
    let branch = git_str(root, &["symbolic-ref", "-q", "--short", "HEAD"]).or_else(|| commit.as_ref().map(|_| "HEAD (detached)".to_string()));
    // With no commit yet, everything is new: diff against the empty tree.
    const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    let base = commit.clone().unwrap_or_else(|| EMPTY_TREE.to_string());
    // katlas's own output (.katlas/: rows, ledger, eval worktrees) is evidence
    // about the source, not source: appending a row must not change identity.
    const NOT_SOURCE: &str = ":(exclude,top).katlas";
    let diff = git(root, &["diff", "--binary", "--no-color", "--no-ext-diff", &base, "--", ".", NOT_SOURCE]).unwrap_or_default();
    let untracked = git(root, &["ls-files", "-z", "--others", "--exclude-standard", "--", ".", NOT_SOURCE]).unwrap_or_default();
    let untracked: Vec<&[u8]> = untracked.split(|b| *b == 0).filter(|p| !p.is_empty()).collect();
    let dirty = !diff.is_empty() || !untracked.is_empty();
    let diff_md5 = dirty.then(|| {
        let mut h = Md5Builder::new();
        h.update(b"katlas-diff-v1\0").update(&diff);
        for rel in &untracked {
            let path = root.join(String::from_utf8_lossy(rel).as_ref());
            h.update(b"\0untracked\0").update(rel).update(b"\0");
            match std::fs::read(&path) {
                Ok(bytes) => {
                    h.update(format!("{}\0", bytes.len()).as_bytes()).update(&bytes);
                }
                // A file that vanished or can't be read still changes the digest, by name.
                Err(e) => {
                    h.update(format!("unreadable:{}\0", e.kind()).as_bytes());
                }
            }
        }
        h.finish()
    });
    SourceIdentity { root: Some(top.clone()), commit_short: commit.as_ref().map(|c| c.chars().take(7).collect()), commit, branch, dirty: Some(dirty), diff_md5 }
}
