//! One run = one fresh process in its own process group.
//!
//! stdout and stderr go straight to files in the run directory (the child
//! writes them; nothing is buffered here, nothing truncated). A timeout or an
//! interrupt kills the whole group (SIGTERM, then SIGKILL after a grace
//! period), so a workload's children cannot outlive it. After a normal exit
//! stragglers of the group are killed too.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Install a Ctrl-C / SIGTERM handler that asks the runner to stop; idempotent.
pub fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    });
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// For tests and embedders: request a stop as Ctrl-C would.
pub fn request_interrupt(on: bool) {
    INTERRUPTED.store(on, Ordering::SeqCst);
}

#[derive(Debug, Clone)]
pub struct RunRequest {
    pub argv: Vec<String>,
    /// Variables set on top of the inherited environment.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub timeout: Option<Duration>,
    /// Where stdout, stderr and meta.json go (created).
    pub run_dir: PathBuf,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
    /// The process could not be started (message).
    pub spawn_error: Option<String>,
    pub wall_s: f64,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

impl RunOutcome {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.interrupted && self.spawn_error.is_none()
    }

    /// Why the run failed, in words; `None` on success.
    pub fn failure(&self) -> Option<String> {
        if let Some(e) = &self.spawn_error {
            return Some(format!("could not start: {e}"));
        }
        if self.interrupted {
            return Some("interrupted (Ctrl-C); process group killed".into());
        }
        if self.timed_out {
            return Some(format!("timed out after {:.1}s; process group killed", self.wall_s));
        }
        if let Some(s) = self.signal {
            return Some(format!("killed by signal {s} ({})", signal_name(s)));
        }
        match self.exit_code {
            Some(0) => None,
            Some(c) => Some(format!("exited with status {c}")),
            None => Some("no exit status".into()),
        }
    }
}

pub fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

fn kill_group(pgid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Run one process to completion, timeout or interrupt.
pub fn run(req: &RunRequest) -> std::io::Result<RunOutcome> {
    let stdout = req.run_dir.join("stdout");
    let stderr = req.run_dir.join("stderr");
    let out_f = katlas_fs::create_file(&stdout)?;
    let err_f = katlas_fs::create_file(&stderr)?;
    let mut outcome = RunOutcome {
        exit_code: None,
        signal: None,
        timed_out: false,
        interrupted: false,
        spawn_error: None,
        wall_s: 0.0,
        stdout: stdout.clone(),
        stderr: stderr.clone(),
        stdout_bytes: 0,
        stderr_bytes: 0,
    };
    let Some((prog, args)) = req.argv.split_first() else {
        outcome.spawn_error = Some("empty command".into());
        return Ok(outcome);
    };
    let mut cmd = Command::new(prog);
    cmd.args(args).envs(&req.env).current_dir(&req.cwd).stdin(Stdio::null()).stdout(Stdio::from(out_f)).stderr(Stdio::from(err_f)).process_group(0);
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            outcome.spawn_error = Some(format!("{prog}: {e}"));
            return Ok(outcome);
        }
    };
    let pgid = child.id() as i32;
    let mut term_sent: Option<Instant> = None;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        let elapsed = start.elapsed();
        if term_sent.is_none() {
            if req.timeout.is_some_and(|t| elapsed >= t) {
                outcome.timed_out = true;
            } else if interrupted() {
                outcome.interrupted = true;
            }
            if outcome.timed_out || outcome.interrupted {
                kill_group(pgid, libc::SIGTERM);
                term_sent = Some(Instant::now());
            }
        } else if term_sent.is_some_and(|t| t.elapsed() >= req.kill_grace) {
            kill_group(pgid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(if elapsed < Duration::from_millis(200) { 2 } else { 20 }));
    };
    outcome.wall_s = start.elapsed().as_secs_f64();
    // Stragglers (background children) of the group go with the leader.
    kill_group(pgid, libc::SIGKILL);
    outcome.exit_code = status.code();
    outcome.signal = status.signal();
    outcome.stdout_bytes = std::fs::metadata(&stdout).map(|m| m.len()).unwrap_or(0);
    outcome.stderr_bytes = std::fs::metadata(&stderr).map(|m| m.len()).unwrap_or(0);
    Ok(outcome)
}

/// The last `max` bytes of a file as text (lossy), starting at a line boundary when possible.
pub fn tail(path: &Path, max: u64) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    if len == 0 {
        return None;
    }
    let start = len.saturating_sub(max);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    f.read_to_end(&mut buf).ok()?;
    let mut text = String::from_utf8_lossy(&buf).to_string();
    if start > 0 {
        if let Some(i) = text.find('\n') {
            text = text[i + 1..].to_string();
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(dir: &Path, sh: &str, timeout_ms: Option<u64>) -> RunRequest {
        RunRequest {
            argv: vec!["sh".into(), "-c".into(), sh.into()],
            env: [("KATLAS_TEST_X".to_string(), "42".to_string())].into(),
            cwd: dir.to_path_buf(),
            timeout: timeout_ms.map(Duration::from_millis),
            run_dir: dir.join("run"),
            kill_grace: Duration::from_millis(300),
        }
    }

    #[test]
    fn captures_everything_untruncated() {
        let d = tempfile::tempdir().unwrap();
        // 200k lines on stdout, env visible, stderr separate.
        let o = run(&req(d.path(), "i=0; while [ $i -lt 200000 ]; do echo line$i; i=$((i+1)); done; echo err$KATLAS_TEST_X >&2", None)).unwrap();
        assert!(o.success(), "{o:?}");
        let text = std::fs::read_to_string(&o.stdout).unwrap();
        assert_eq!(text.lines().count(), 200_000);
        assert!(text.ends_with("line199999\n"));
        assert_eq!(std::fs::read_to_string(&o.stderr).unwrap(), "err42\n");
        assert_eq!(tail(&o.stdout, 12).unwrap(), "line199999\n");
    }

    #[test]
    fn timeout_kills_the_group() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("survived");
        // A background grandchild that would write a marker after the timeout.
        let sh = format!("(sleep 2; touch {}) & echo started; sleep 30", marker.display());
        let o = run(&req(d.path(), &sh, Some(300))).unwrap();
        assert!(o.timed_out && !o.success(), "{o:?}");
        assert!(o.wall_s < 5.0);
        assert!(o.failure().unwrap().contains("timed out"));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "grandchild outlived the timeout");
        assert_eq!(std::fs::read_to_string(&o.stdout).unwrap(), "started\n");
    }

    #[test]
    fn signal_and_exit_codes() {
        let d = tempfile::tempdir().unwrap();
        let o = run(&req(d.path(), "kill -SEGV $$", None)).unwrap();
        assert_eq!(o.signal, Some(libc::SIGSEGV));
        assert!(o.failure().unwrap().contains("SIGSEGV"));
        let o = run(&req(d.path(), "exit 3", None)).unwrap();
        assert_eq!(o.exit_code, Some(3));
        let mut r = req(d.path(), "", None);
        r.argv = vec!["/nonexistent/binary".into()];
        let o = run(&r).unwrap();
        assert!(o.spawn_error.is_some() && !o.success());
    }
}
