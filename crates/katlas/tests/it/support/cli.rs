//! The harness the CLI tests share (`use crate::support::cli;`): the built binary run in a
//! directory with the test environment of `katlas_testkit::cli` — no colour, no user config, no
//! team store, no `KATLAS_ARCH` from the developer's shell — and no trust prompt (trust prompts
//! are tested in untrusted_repo.rs with [`katlas_cmd`], which leaves `KATLAS_YES` unset).
#![allow(dead_code)] // each test file uses its own part of the harness

pub use katlas_testkit::cli::{code, json, ok, stderr, stdout, stdout_json};
pub use katlas_testkit::{copy_tree, fixture, git, py_site, repo_root as repo};
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

/// A shell command whose `METRIC` follows `expr` of a per-command counter `n` (0, 1, 2 …) that
/// it keeps in `file`: samples that differ in a known way.
pub fn counted(file: &str, metric: &str, expr: &str) -> String {
    format!("n=$(cat {file} 2>/dev/null || echo 0); echo $((n+1)) > {file}; echo {metric}=$(({expr}))")
}

/// The arguments of a quick `katlas eval`: `head` (the sides and the metric), then three runs a
/// side, no telemetry, no ledger entry and the result as JSON.
pub fn quick_eval<'a>(head: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["eval"];
    a.extend_from_slice(head);
    a.extend_from_slice(&["-n", "3", "--telemetry", "false", "--no-ledger", "--format", "json"]);
    a
}

/// Every leaf (non-object, non-array value) of `v`, depth first: what a row holds, wherever a
/// format puts it.
pub fn leaves(v: &serde_json::Value) -> Vec<serde_json::Value> {
    fn walk(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => m.values().for_each(|x| walk(x, out)),
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            other => out.push(other.clone()),
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
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
