//! The harness the CLI tests share (`use crate::support::cli;`): the built binary run in a
//! directory with the test environment of `katlas_testkit::cli` — no colour, no user config, no
//! team store, no `KATLAS_ARCH` from the developer's shell — and no trust prompt (trust prompts
//! are tested in untrusted_repo.rs with [`katlas_cmd`], which leaves `KATLAS_YES` unset).
#![allow(dead_code)] // each test file uses its own part of the harness

pub use katlas_testkit::cli::{code, json, ok, stderr, stdout, stdout_json};
pub use katlas_testkit::{fixture, git, py_site, repo_root as repo};
use std::path::Path;
use std::process::{Command, Output};

/// The katlas binary this crate's tests run.
pub const KATLAS: &str = env!("CARGO_BIN_EXE_katlas");

/// `katlas` in `dir` with the test environment and no `KATLAS_YES`; add args and more env.
pub fn katlas_cmd(dir: &Path) -> Command {
    katlas_testkit::cli::command(KATLAS, dir)
}

/// `katlas ARGS` in `dir`.
pub fn katlas(dir: &Path, args: &[&str]) -> Output {
    katlas_env(dir, args, &[])
}

/// `katlas ARGS` in `dir` with `vars` set on top of the test environment.
pub fn katlas_env(dir: &Path, args: &[&str], vars: &[(&str, &std::ffi::OsStr)]) -> Output {
    katlas_cmd(dir).args(args).env("KATLAS_YES", "1").envs(vars.iter().copied()).output().expect("katlas runs")
}
