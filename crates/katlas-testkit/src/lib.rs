//! What the katlas crates' integration tests share (a dev-dependency only, never published):
//! the repository's paths and fixtures, the isolated environment every run of the katlas binary
//! gets, the hipfire stand-ins and facts several crates test against, the hostile-input suites'
//! time bound and mutation driver, and [`own_process!`].
//!
//! Each crate has one integration-test binary (`tests/it/main.rs`, its files modules of it), so a
//! crate's tests share one process: [`own_process!`] gives the few that change what a process
//! shares a process of their own.

pub mod bound;
pub mod cli;
pub mod hipfire_streams;
pub mod hipfire_tree;
pub mod mutate;
pub mod process;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (this crate lives in its `crates/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// `fixtures/REL` of the repository, which must exist (the fixtures are committed).
pub fn fixture(rel: &str) -> PathBuf {
    let p = repo_root().join("fixtures").join(rel);
    assert!(p.exists(), "fixture {} is missing (the repository's fixtures/ are committed)", p.display());
    p
}

/// A copy of the directory tree `from` at `to` (created), files and directories; a link to a
/// file is copied as the file it points at.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
        }
    }
}

/// The third-party fixture cache (`KATLAS_FIXTURES`, else `.cache/fixtures`) that
/// scripts/fetch-fixtures fills; a missing cache fails the test (it is not a skip).
pub fn fetched() -> PathBuf {
    let p = std::env::var_os("KATLAS_FIXTURES").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cache/fixtures"));
    assert!(p.join("deb").is_dir() && p.join("pypi").is_dir(), "third-party fixtures missing under {}: run scripts/fetch-fixtures first", p.display());
    p
}

/// `REL` in the fetched fixture cache, which must exist.
pub fn fetched_file(rel: &str) -> PathBuf {
    let p = fetched().join(rel);
    assert!(p.exists(), "fixture {} missing: run scripts/fetch-fixtures", p.display());
    p
}

/// The unpacked wheels of scripts/fetch-py-packages (liger-kernel, fla-core,
/// flash-linear-attention and NVIDIA's ncu-report, site-packages layout) in the fetched fixture
/// cache, which must be there.
pub fn py_site() -> PathBuf {
    let cache = std::env::var_os("KATLAS_FIXTURES").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cache/fixtures"));
    let site = cache.join("python/site");
    assert!(site.join(".complete").is_file(), "{} is missing: run scripts/fetch-py-packages", site.display());
    site.canonicalize().unwrap()
}

/// `git ARGS` in `dir` as a test user (no signing, no user or system config); its trimmed
/// stdout. A failure fails the test.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("git {args:?}: {e}"));
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
