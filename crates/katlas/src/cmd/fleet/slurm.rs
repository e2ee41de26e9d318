//! Slurm's own commands, the only way a fleet's work reaches the cluster: `sbatch` submits,
//! `squeue` reports, `scancel` cancels. katlas never schedules anything itself.

use crate::ctx::CliError;
use katlas_proc::RunRequest;
use std::path::Path;
use std::time::Duration;

/// What the scheduler says about one job; `None` from [`job`] when it no longer knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub state: String,
    pub node: Option<String>,
    pub reason: Option<String>,
}

impl JobInfo {
    /// Waiting or running: its result may still come.
    pub fn live(&self) -> bool {
        let s = self.state.split_whitespace().next().unwrap_or("");
        matches!(
            s,
            "PENDING"
                | "CONFIGURING"
                | "RUNNING"
                | "COMPLETING"
                | "SUSPENDED"
                | "REQUEUED"
                | "REQUEUE_HOLD"
                | "REQUEUE_FED"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
        )
    }
}

fn run(argv: &[&str], cwd: &Path) -> Result<(bool, String, String), CliError> {
    let mut req = RunRequest::new(argv.iter().map(|s| s.to_string()).collect(), cwd);
    req.timeout = Some(Duration::from_secs(60));
    let out = katlas_proc::run_captured(&req).map_err(|e| CliError::missing_env(format!("{}: {e}", argv[0])))?;
    if let Some(e) = &out.exit.spawn_error {
        return Err(CliError::missing_env(format!(
            "{} could not start ({e}): katlas sends fleet work to Slurm's own commands; run on a host where sbatch, squeue and scancel are installed",
            argv[0]
        )));
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    Ok((out.exit.success(), text(&out.stdout), text(&out.stderr)))
}

/// Submit one job script; its job id.
pub fn sbatch(script: &Path, cwd: &Path) -> Result<String, CliError> {
    let s = script.to_string_lossy();
    let (ok, out, err) = run(&["sbatch", "--parsable", &s], cwd)?;
    if !ok {
        return Err(CliError::bad_input(format!("sbatch {s}: {}", if err.is_empty() { &out } else { &err })));
    }
    // `--parsable` prints `JOBID` or `JOBID;CLUSTER`.
    let id = out.lines().last().unwrap_or("").split(';').next().unwrap_or("").trim().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return Err(CliError::bad_input(format!("sbatch {s}: no job id in its output `{out}`")));
    }
    Ok(id)
}

/// The scheduler's view of one job, `None` once it has forgotten it (finished long ago).
pub fn job(id: &str, cwd: &Path) -> Result<Option<JobInfo>, CliError> {
    let (ok, out, err) = run(&["squeue", "--noheader", "--states=all", "--jobs", id, "--format=%i|%T|%N|%r"], cwd)?;
    if !ok {
        if err.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(CliError::missing_env(format!("squeue --jobs {id}: {err}")));
    }
    Ok(out.lines().find_map(|l| {
        let f: Vec<&str> = l.split('|').collect();
        (f.len() == 4 && f[0].trim() == id).then(|| {
            let opt = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty() && s != "(null)" && s != "None");
            JobInfo { state: f[1].trim().to_string(), node: opt(f[2]), reason: opt(f[3]) }
        })
    }))
}

pub fn scancel(ids: &[String], cwd: &Path) -> Result<(), CliError> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut argv = vec!["scancel"];
    argv.extend(ids.iter().map(String::as_str));
    let (ok, out, err) = run(&argv, cwd)?;
    if !ok {
        return Err(CliError::bad_input(format!("scancel {}: {}", ids.join(" "), if err.is_empty() { out } else { err })));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_waiting_and_running_states_are_live() {
        let j = |s: &str| JobInfo { state: s.into(), node: None, reason: None };
        for s in ["PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"] {
            assert!(j(s).live(), "{s}");
        }
        for s in ["COMPLETED", "CANCELLED", "CANCELLED by 0", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"] {
            assert!(!j(s).live(), "{s}");
        }
    }
}
