//! Sides from git refs: each ref checked out in its own `git worktree` under
//! `.katlas/worktrees/<commit>` and built there. The user's checkout, index
//! and stash are never touched.

use crate::error::EvalError;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone)]
pub struct Worktree {
    pub git_ref: String,
    pub commit: String,
    pub path: PathBuf,
}

/// git that cannot start is the environment; git refusing a ref or a tree is the input.
fn git(root: &Path, args: &[&str]) -> Result<String, EvalError> {
    let out = Command::new("git").arg("-C").arg(root).args(args).output().map_err(|source| EvalError::Run { prog: "git".into(), source })?;
    if !out.status.success() {
        return Err(EvalError::Input(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Full commit of `git_ref` in the repository at `root`.
pub fn resolve(root: &Path, git_ref: &str) -> Result<String, EvalError> {
    git(root, &["rev-parse", "--verify", "--quiet", &format!("{git_ref}^{{commit}}")]).map_err(|e| match e {
        EvalError::Input(_) => EvalError::Input(format!("`{git_ref}` is not a commit in {}", root.display())),
        other => other,
    })
}

/// Check `git_ref` out (detached) in its own worktree below `dest`, reusing one
/// already at that commit, then run `build` (a shell command) inside it.
pub fn prepare(root: &Path, git_ref: &str, dest: &Path, build: Option<&str>) -> Result<Worktree, EvalError> {
    let commit = resolve(root, git_ref)?;
    let name = &commit[..commit.len().min(16)];
    let path = dest.join(name);
    // Last use is stamped beside the worktrees, not inside them: a file inside would count as
    // an untracked change in the side's source identity.
    let stamps = dest.join(".used");
    let _ = katlas_fs::write_atomic(&stamps.join(name), now_secs().to_string().as_bytes());
    let reuse = path.join(".git").exists() && git(&path, &["rev-parse", "HEAD"]).map(|h| h == commit).unwrap_or(false);
    if !reuse {
        if path.exists() {
            let _ = git(root, &["worktree", "remove", "--force", &path.display().to_string()]);
            let _ = std::fs::remove_dir_all(&path);
        }
        katlas_fs::create_dir_all(dest).map_err(|source| EvalError::Io { path: dest.to_path_buf(), source })?;
        let _ = git(root, &["worktree", "prune"]);
        git(root, &["worktree", "add", "--detach", "--force", &path.display().to_string(), &commit])?;
    }
    if let Some(cmd) = build {
        let out = Command::new("sh")
            .args(["-c", cmd])
            .current_dir(&path)
            .output()
            .map_err(|e| EvalError::Start { prog: format!("build {cmd}"), why: e.to_string() })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(5).collect();
            return Err(EvalError::Input(format!(
                "build `{cmd}` failed for {git_ref} ({}) in {}: {}",
                &commit[..12.min(commit.len())],
                path.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )));
        }
    }
    Ok(Worktree { git_ref: git_ref.into(), commit, path })
}

/// Files that differ between two commits (`git diff --name-only`).
pub fn changed_files(root: &Path, from: &str, to: &str) -> Result<Vec<String>, EvalError> {
    let out = git(root, &["diff", "--name-only", from, to])?;
    Ok(out.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
}

/// Files the working tree changes against `from`: tracked diffs plus untracked, non-ignored files.
pub fn changed_in_worktree(root: &Path, from: &str) -> Result<Vec<String>, EvalError> {
    let mut files: Vec<String> = git(root, &["diff", "--name-only", from])?.lines().map(str::to_string).collect();
    files.extend(git(root, &["ls-files", "--others", "--exclude-standard"])?.lines().map(str::to_string));
    files.retain(|f| !f.is_empty() && !f.starts_with(".katlas/"));
    files.sort();
    files.dedup();
    Ok(files)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Remove all but the `keep` most recently used worktrees below `dest` (as `git worktree
/// remove`, then `git worktree prune`), never one in `protect`. Called before an eval
/// prepares its own sides, so a run never loses the worktrees it is using. Returns what was
/// removed.
pub fn prune(root: &Path, dest: &Path, keep: usize, protect: &[PathBuf]) -> Result<Vec<PathBuf>, EvalError> {
    let Ok(rd) = std::fs::read_dir(dest) else { return Ok(Vec::new()) };
    let stamps = dest.join(".used");
    let mut trees: Vec<(u64, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != ".used")
        .map(|e| {
            let used = std::fs::read_to_string(stamps.join(e.file_name())).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
            (used, e.path())
        })
        .collect();
    trees.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut removed = Vec::new();
    for (_, path) in trees.into_iter().skip(keep) {
        if protect.iter().any(|p| p == &path) {
            continue;
        }
        let _ = git(root, &["worktree", "remove", "--force", &path.display().to_string()]);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|source| EvalError::Io { path: path.clone(), source })?;
        }
        if let Some(n) = path.file_name() {
            let _ = std::fs::remove_file(stamps.join(n));
        }
        removed.push(path);
    }
    if !removed.is_empty() {
        git(root, &["worktree", "prune"])?;
    }
    Ok(removed)
}
