//! The harness the CLI tests share (`#[path = "support/cli.rs"] mod cli;`): the built binary
//! run in a directory with the test environment — no colour, no trust prompt (trust prompts are
//! tested in untrusted_repo.rs), no user config, no `KATLAS_ARCH` from the developer's shell —
//! and the repository's fixtures.
#![allow(dead_code)] // each test file uses its own part of the harness

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `katlas ARGS` in `dir`.
pub fn katlas(dir: &Path, args: &[&str]) -> Output {
    katlas_env(dir, args, &[])
}

/// `katlas ARGS` in `dir` with `vars` set on top of the test environment.
pub fn katlas_env(dir: &Path, args: &[&str], vars: &[(&str, &std::ffi::OsStr)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_katlas"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("KATLAS_YES", "1")
        .env("KATLAS_CONFIG_DIR", "/nonexistent/katlas-test-config")
        .env_remove("KATLAS_ARCH")
        .envs(vars.iter().copied())
        .output()
        .expect("katlas runs")
}

/// Stdout of a run that must succeed (the failure shows both streams).
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout:\n{}\nstderr:\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Stdout of a run that must succeed, as JSON.
pub fn json(o: &Output) -> Value {
    serde_json::from_str(&ok(o)).expect("json output")
}

/// Stdout as JSON whatever the exit code (verdicts that exit 1 still print their document).
pub fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// The exit code (-1 for a signal).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fixtures/REL`, which must exist.
pub fn fixture(rel: &str) -> PathBuf {
    let p = repo().join("fixtures").join(rel);
    assert!(p.exists(), "fixture {} is required (repository fixtures/)", p.display());
    p
}

/// `git ARGS` in `dir` as a test user (no signing); its trimmed stdout; fails the test on error.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git").args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]).args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The unpacked wheels of scripts/fetch-py-packages (liger-kernel, fla-core,
/// flash-linear-attention and NVIDIA's ncu-report, site-packages layout), under `KATLAS_FIXTURES` like every fetched
/// fixture, which must be there.
pub fn py_site() -> PathBuf {
    let cache = std::env::var_os("KATLAS_FIXTURES").map(PathBuf::from).unwrap_or_else(|| repo().join(".cache/fixtures"));
    let site = cache.join("python/site");
    assert!(site.join(".complete").is_file(), "{} is missing: run scripts/fetch-py-packages", site.display());
    site.canonicalize().unwrap()
}
