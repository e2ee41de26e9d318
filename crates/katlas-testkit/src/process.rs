//! A test that changes what every thread of its process shares — an environment variable, a
//! process-wide flag such as the interrupt request, the panic hook, a counting global allocator,
//! the kernel's peak-RSS counter — races with the tests that run beside it in the crate's one
//! test binary. [`own_process!`] runs such a test alone in a fresh process of the same binary.

use std::process::Command;

/// Set in the fresh process to the name of the test it runs.
const MARK: &str = "KATLAS_TEST_OWN_PROCESS";

/// The name the test harness gives test `test` of module `module` (`module_path!()`): the path
/// without the crate, `it::interrupt` + `f` → `interrupt::f`.
pub fn test_name(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, m)) => format!("{m}::{test}"),
        None => test.to_string(),
    }
}

/// `own_process!(this_test)` or `own_process!(this_test, &[("VAR", "value")])`, first in the test
/// named `this_test`: `true` in the fresh process, where the caller goes on with its body; in the
/// calling process it runs that test alone (`--exact`, one thread, ignored or not) in a fresh
/// process of this binary with `vars` set from its start, fails if that process fails, and
/// returns `false` (the caller returns).
#[macro_export]
macro_rules! own_process {
    ($test:ident) => {
        $crate::process::run_alone(&$crate::process::test_name(module_path!(), stringify!($test)), &[])
    };
    ($test:ident, $vars:expr) => {
        $crate::process::run_alone(&$crate::process::test_name(module_path!(), stringify!($test)), $vars)
    };
}

/// See [`own_process!`]; `name` as the harness names the test.
pub fn run_alone(name: &str, vars: &[(&str, &str)]) -> bool {
    if std::env::var(MARK).is_ok_and(|v| v == name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's own path");
    let o = Command::new(&exe)
        .args(["--exact", name, "--include-ignored", "--test-threads=1", "--nocapture"])
        .env(MARK, name)
        .envs(vars.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // What the test reports on stderr (timings, peak RSS) shows in the caller's output.
    eprint!("{err}");
    // A name the harness does not know runs no test and passes: that must fail here.
    assert!(out.contains("running 1 test"), "{name}: not a test of {} (it ran none):\n{out}", exe.display());
    assert!(o.status.success(), "{name} failed in its own process (exit {:?}):\n{out}\n{err}", o.status.code());
    false
}
