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

/// The directory holding the katlas binary under test and a katlas-lab built beside it:
/// `cargo test --workspace` builds both; `cargo test -p katlas` builds katlas-lab there.
pub fn binaries() -> std::path::PathBuf {
    let dir = Path::new(KATLAS).parent().expect("a binary directory").to_path_buf();
    if !dir.join("katlas-lab").is_file() {
        let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug").to_string();
        let o = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "katlas-lab", "--profile", if profile == "debug" { "dev" } else { &profile }])
            .arg("--target-dir")
            .arg(dir.parent().expect("a target directory"))
            .current_dir(repo())
            .output()
            .expect("cargo runs");
        assert!(o.status.success(), "cargo build -p katlas-lab: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(dir.join("katlas-lab").is_file(), "no katlas-lab beside {KATLAS}");
    dir
}

/// The katlas-lab binary beside the katlas under test.
pub fn lab_binary() -> std::path::PathBuf {
    binaries().join("katlas-lab")
}
