//! Sides from git refs: each ref checked out in its own `git worktree` under
//! `.katlas/worktrees/<commit>` and built there. The user's checkout, index
//! and stash are never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone)]
pub struct Worktree {
    pub git_ref: String,
    pub commit: String,
    pub path: PathBuf,
}

fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Full commit of `git_ref` in the repository at `root`.
pub fn resolve(root: &Path, git_ref: &str) -> Result<String, String> {
    git(root, &["rev-parse", "--verify", "--quiet", &format!("{git_ref}^{{commit}}")])
        .map_err(|_| format!("`{git_ref}` is not a commit in {}", root.display()))
}

/// Check `git_ref` out (detached) in its own worktree below `dest`, reusing one
/// already at that commit, then run `build` (a shell command) inside it.
pub fn prepare(root: &Path, git_ref: &str, dest: &Path, build: Option<&str>) -> Result<Worktree, String> {
    let commit = resolve(root, git_ref)?;
    let path = dest.join(&commit[..commit.len().min(16)]);
    let reuse = path.join(".git").exists()
        && git(&path, &["rev-parse", "HEAD"]).map(|h| h == commit).unwrap_or(false);
    if !reuse {
        if path.exists() {
            let _ = git(root, &["worktree", "remove", "--force", &path.display().to_string()]);
            let _ = std::fs::remove_dir_all(&path);
        }
        std::fs::create_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        let _ = git(root, &["worktree", "prune"]);
        git(root, &["worktree", "add", "--detach", "--force", &path.display().to_string(), &commit])?;
    }
    if let Some(cmd) = build {
        let out = Command::new("sh")
            .args(["-c", cmd])
            .current_dir(&path)
            .output()
            .map_err(|e| format!("cannot run build `{cmd}`: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(5).collect();
            return Err(format!(
                "build `{cmd}` failed for {git_ref} ({}) in {}: {}",
                &commit[..12.min(commit.len())],
                path.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    Ok(Worktree { git_ref: git_ref.into(), commit, path })
}

/// Files that differ between two commits (`git diff --name-only`).
pub fn changed_files(root: &Path, from: &str, to: &str) -> Result<Vec<String>, String> {
    let out = git(root, &["diff", "--name-only", from, to])?;
    Ok(out.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
}

/// Files the working tree changes against `from`: tracked diffs plus untracked, non-ignored files.
pub fn changed_in_worktree(root: &Path, from: &str) -> Result<Vec<String>, String> {
    let mut files: Vec<String> = git(root, &["diff", "--name-only", from])?.lines().map(str::to_string).collect();
    files.extend(git(root, &["ls-files", "--others", "--exclude-standard"])?.lines().map(str::to_string));
    files.retain(|f| !f.is_empty() && !f.starts_with(".katlas/"));
    files.sort();
    files.dedup();
    Ok(files)
}
