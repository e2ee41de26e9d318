//! The environment every test run of a katlas binary gets, so the developer's own setup never
//! reaches a test: no colour, no user config (`KATLAS_CONFIG_DIR` points at a directory that does
//! not exist, so the trust store is empty and `XDG_CONFIG_HOME`/`HOME` are never consulted for
//! it), no team store (`KATLAS_STORE_URL`), no `KATLAS_ARCH`, no input caps, no answer to trust
//! prompts (`KATLAS_YES` is the caller's choice), no Triton cache of the user's
//! (`~/.triton/cache` is where collect looks without `TRITON_CACHE_DIR`).
//!
//! The binary's path comes from the test crate (`env!("CARGO_BIN_EXE_katlas")` is set only there):
//! crates/katlas/tests/it/support/cli.rs wraps these for the katlas binary.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// The user config directory of a test run: never created, so nothing is read from it.
pub const NO_USER_CONFIG: &str = "/nonexistent/katlas-test-config";

/// Variables of the developer's shell that change what katlas does, removed from every run.
pub const USER_VARS: &[&str] = &["KATLAS_ARCH", "KATLAS_STORE_URL", "KATLAS_YES", "KATLAS_MAX_INPUT_BYTES", "KATLAS_MAX_LINE_BYTES", "XDG_CONFIG_HOME"];

/// `bin` run in `dir` with the test environment (module doc); a test sets more on the result
/// (its own `KATLAS_CONFIG_DIR` or `KATLAS_YES`, for one).
pub fn command(bin: &str, dir: &Path) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(dir);
    isolate(&mut c);
    c
}

/// The test environment on an existing command (a shell that runs katlas, for one).
pub fn isolate(c: &mut Command) -> &mut Command {
    for v in USER_VARS {
        c.env_remove(v);
    }
    c.env("NO_COLOR", "1").env("KATLAS_CONFIG_DIR", NO_USER_CONFIG).env("TRITON_CACHE_DIR", "/nonexistent/katlas-test-triton-cache")
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

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
