//! Correctness routes by claim class: `[route.CLAIM]` in katlas.toml.
//!
//! ```toml
//! [route.kernel-numeric]
//! description = "numerics of a changed kernel against the CPU reference"
//! commands = ["cargo test -p lab numeric", "katlas check-numeric out.bin ref.bin --dims 64,128"]
//! ```
//!
//! A command's outcome: exit 0 is PASS; exit 77 (the automake convention) is
//! SKIP; a command that cannot start (126/127) is BLOCKED; any other exit is
//! FAIL. A line `KATLAS_ROUTE=SKIP|BLOCKED|FAIL|PASS` in its output overrides
//! a zero exit only towards a worse outcome. SKIP and BLOCKED never count as
//! PASS, and an unknown claim class is BLOCKED (fail closed).

use crate::protocol::run_process;
use katlas_model::ledger::{CorrectnessCheck, RouteOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    #[serde(default)]
    pub description: Option<String>,
    /// Shell commands, run in order in the side's directory.
    #[serde(default)]
    pub commands: Vec<String>,
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// Outcome of one shell command as a route check.
pub fn run_check(claim: &str, command: &str, cwd: &Path, env: &BTreeMap<String, String>, timeout: Duration) -> CorrectnessCheck {
    let argv = vec!["sh".to_string(), "-c".to_string(), command.to_string()];
    // The same private scratch layout as a measured sample: nothing in the environment tells
    // a program whether it is being checked or measured.
    let scratch = crate::sandbox::Sandbox::new();
    let mut env = env.clone();
    if let Ok(s) = &scratch {
        s.apply(&mut env);
    }
    let (outcome, detail) = match run_process(&argv, &env, &[], cwd, timeout) {
        Err(e) => (RouteOutcome::Blocked, Some(e.to_string())),
        Ok(r) if r.timed_out => (RouteOutcome::Fail, Some(format!("timed out after {:.0} s", timeout.as_secs_f64()))),
        Ok(r) => {
            let text = format!("{}\n{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
            let declared = text.lines().rev().find_map(|l| l.trim().strip_prefix("KATLAS_ROUTE=")).map(str::trim);
            let by_exit = match r.code {
                Some(0) => RouteOutcome::Pass,
                Some(77) => RouteOutcome::Skip,
                Some(126) | Some(127) => RouteOutcome::Blocked,
                _ => RouteOutcome::Fail,
            };
            let outcome = match (by_exit, declared) {
                (RouteOutcome::Pass, Some("SKIP")) => RouteOutcome::Skip,
                (RouteOutcome::Pass, Some("BLOCKED")) => RouteOutcome::Blocked,
                (RouteOutcome::Pass, Some("FAIL")) => RouteOutcome::Fail,
                (o, _) => o,
            };
            let last = telling_line(&text);
            let detail = match r.code {
                Some(c) => format!("exit {c}{}", if last.is_empty() { String::new() } else { format!(": {last}") }),
                None => "killed by a signal".into(),
            };
            (outcome, Some(detail))
        }
    };
    CorrectnessCheck { claim: claim.into(), check: command.into(), outcome, detail }
}

/// The line of a check's output that says why it ended: the last one naming an error, a
/// failure or no tests (a test runner's summary, an exception), else the last non-empty one. A
/// runner's closing warning on stderr must not hide `ImportError` or `no tests ran` on stdout.
fn telling_line(text: &str) -> String {
    const WORDS: [&str; 6] = ["error", "failed", "failure", "no tests ran", "traceback", "exception"];
    let lines = || text.lines().rev().map(str::trim).filter(|l| !l.is_empty());
    let line = lines().find(|l| {
        let l = l.to_ascii_lowercase();
        WORDS.iter().any(|w| l.contains(w))
    });
    let line = line.or_else(|| lines().next()).unwrap_or("");
    // pytest's summary says how many failed; its `E   SomeError: ...` line says why.
    let cause = lines().find(|l| l.starts_with("E ") && (l.contains("Error") || l.contains("Exception") || l.contains("assert")));
    let line = match cause {
        Some(c) if c != line => format!("{line} — {}", c.trim_start_matches('E').trim()),
        _ => line.to_string(),
    };
    katlas_identity::redact_secrets(&line).chars().take(400).collect()
}

/// Run every command of a claim's route. An unknown claim (`None`) or a route
/// without commands is one BLOCKED check.
pub fn run_route(claim: &str, spec: Option<&RouteSpec>, cwd: &Path, env: &BTreeMap<String, String>) -> Vec<CorrectnessCheck> {
    let Some(spec) = spec else {
        return vec![CorrectnessCheck {
            claim: claim.into(),
            check: "-".into(),
            outcome: RouteOutcome::Blocked,
            detail: Some(format!("no [route.{claim}] in katlas.toml: unknown claim class (fail closed)")),
        }];
    };
    if spec.commands.is_empty() {
        return vec![CorrectnessCheck {
            claim: claim.into(),
            check: "-".into(),
            outcome: RouteOutcome::Blocked,
            detail: Some(format!("[route.{claim}] has no commands")),
        }];
    }
    let timeout = Duration::from_secs_f64(spec.timeout_s.unwrap_or(1800.0));
    spec.commands.iter().map(|c| run_check(claim, c, cwd, env, timeout)).collect()
}

/// The route passes only when there is at least one check and every check passed.
pub fn all_pass(checks: &[CorrectnessCheck]) -> bool {
    !checks.is_empty() && checks.iter().all(|c| c.outcome.is_pass())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cmds: &[&str]) -> RouteSpec {
        RouteSpec { commands: cmds.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn outcomes() {
        let d = tempfile::tempdir().unwrap();
        let env = BTreeMap::new();
        let c = run_route("x", Some(&spec(&["true", "exit 77", "exit 3", "no-such-command-katlas", "echo KATLAS_ROUTE=BLOCKED"])), d.path(), &env);
        let o: Vec<RouteOutcome> = c.iter().map(|c| c.outcome).collect();
        assert_eq!(o, vec![RouteOutcome::Pass, RouteOutcome::Skip, RouteOutcome::Fail, RouteOutcome::Blocked, RouteOutcome::Blocked]);
        assert!(!all_pass(&c));
        assert!(all_pass(&run_route("x", Some(&spec(&["true"])), d.path(), &env)));
    }

    #[test]
    fn a_failure_is_named_by_the_line_that_says_why() {
        let d = tempfile::tempdir().unwrap();
        let script =
            "echo 'E   ImportError: cannot import name fused_gdn_gate'; echo '1 error in 2.1s'; echo 'warner(PytestBenchmarkWarning(text))' >&2; exit 2";
        let c = run_route("x", Some(&spec(&[script])), d.path(), &BTreeMap::new());
        let detail = c[0].detail.clone().unwrap();
        assert!(detail.starts_with("exit 2: 1 error in 2.1s"), "{detail}");
        let c = run_route("x", Some(&spec(&["echo 'no tests ran in 0.5s'; echo 'a warning' >&2; exit 5"])), d.path(), &BTreeMap::new());
        assert_eq!(c[0].detail.as_deref(), Some("exit 5: no tests ran in 0.5s"));
    }

    #[test]
    fn unknown_claim_fails_closed() {
        let d = tempfile::tempdir().unwrap();
        let c = run_route("nope", None, d.path(), &BTreeMap::new());
        assert_eq!(c[0].outcome, RouteOutcome::Blocked);
        assert!(!all_pass(&c));
        assert!(!all_pass(&[]), "no checks is not a pass");
        let c = run_route("empty", Some(&spec(&[])), d.path(), &BTreeMap::new());
        assert_eq!(c[0].outcome, RouteOutcome::Blocked);
    }
}
