//! katlas's one process runner: collect's runs, eval's samples, settle commands,
//! correctness routes and gate commands all start processes here.
//!
//! One run = one fresh process in its own process group. stdout and stderr go
//! to files the child writes itself: the run directory's `stdout`/`stderr`
//! ([`run`]), or unnamed temporary files read back after the group is gone
//! ([`run_captured`]). No pipe is read while the child runs, so a grandchild
//! that keeps an output open can never hold a run past its bound.
//!
//! The group is the unit that is killed: a timeout or an interrupt sends
//! SIGTERM to the whole group, then SIGKILL after the grace period, and after
//! the leader exits its stragglers are killed too. `sh -c 'sleep 100 | cat'`
//! dies with its pipeline.
//!
//! The group also dies with katlas, however katlas dies (`kill -9` included):
//! - a watchdog process, forked before the workload and out of katlas's
//!   terminal group, holds the read end of a pipe whose write end only katlas
//!   holds. When katlas exits normally it says "done" on the pipe; when the pipe
//!   closes without that, katlas is gone and the watchdog kills the group
//!   (SIGTERM, the grace, SIGKILL);
//! - the group leader itself has `PR_SET_PDEATHSIG = SIGKILL`, so it goes at
//!   once (the death signal follows the thread that spawned it; the runner
//!   spawns and waits on the same thread).

use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
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
    /// Inherited variables removed (instrumentation switches).
    pub env_remove: Vec<String>,
    pub cwd: PathBuf,
    pub timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

impl RunRequest {
    pub fn new(argv: Vec<String>, cwd: &Path) -> Self {
        Self { argv, env: BTreeMap::new(), env_remove: Vec::new(), cwd: cwd.to_path_buf(), timeout: None, kill_grace: Duration::from_secs(3) }
    }

    /// `sh -c COMMAND`.
    pub fn shell(command: &str, cwd: &Path) -> Self {
        Self::new(vec!["sh".into(), "-c".into(), command.into()], cwd)
    }
}

/// How a run ended.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Exit {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
    /// The process could not be started (message).
    pub spawn_error: Option<String>,
    pub wall_s: f64,
}

impl Exit {
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

/// A run whose output went to files in its run directory.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunOutcome {
    #[serde(flatten)]
    pub exit: Exit,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

impl std::ops::Deref for RunOutcome {
    type Target = Exit;
    fn deref(&self) -> &Exit {
        &self.exit
    }
}

/// A run whose output was read back into memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl std::ops::Deref for Captured {
    type Target = Exit;
    fn deref(&self) -> &Exit {
        &self.exit
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

/// Run one process to completion, timeout or interrupt; stdout and stderr go
/// to `run_dir/stdout` and `run_dir/stderr` (created).
pub fn run(req: &RunRequest, run_dir: &Path) -> std::io::Result<RunOutcome> {
    let stdout = run_dir.join("stdout");
    let stderr = run_dir.join("stderr");
    let out_f = katlas_fs::create_file(&stdout)?;
    let err_f = katlas_fs::create_file(&stderr)?;
    let exit = run_to(req, out_f, err_f)?;
    let stdout_bytes = std::fs::metadata(&stdout).map(|m| m.len()).unwrap_or(0);
    let stderr_bytes = std::fs::metadata(&stderr).map(|m| m.len()).unwrap_or(0);
    Ok(RunOutcome { exit, stdout, stderr, stdout_bytes, stderr_bytes })
}

/// Run one process with its output captured in memory (through unnamed
/// temporary files, read once the whole group is gone).
pub fn run_captured(req: &RunRequest) -> std::io::Result<Captured> {
    let mut out_f = tempfile::tempfile()?;
    let mut err_f = tempfile::tempfile()?;
    let exit = run_to(req, out_f.try_clone()?, err_f.try_clone()?)?;
    let read_back = |f: &mut File| -> std::io::Result<Vec<u8>> {
        f.seek(SeekFrom::Start(0))?;
        let mut b = Vec::new();
        f.read_to_end(&mut b)?;
        Ok(b)
    };
    Ok(Captured { exit, stdout: read_back(&mut out_f)?, stderr: read_back(&mut err_f)? })
}

fn run_to(req: &RunRequest, out_f: File, err_f: File) -> std::io::Result<Exit> {
    let mut exit = Exit::default();
    let Some((prog, args)) = req.argv.split_first() else {
        exit.spawn_error = Some("empty command".into());
        return Ok(exit);
    };
    let mut cmd = Command::new(prog);
    cmd.args(args).current_dir(&req.cwd).stdin(Stdio::null()).stdout(Stdio::from(out_f)).stderr(Stdio::from(err_f)).process_group(0);
    for k in &req.env_remove {
        cmd.env_remove(k);
    }
    cmd.envs(&req.env);
    // SAFETY: getpid before the fork; prctl, getppid and _exit are async-signal-safe.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // katlas died between the fork and the prctl: nobody will wait for this run.
            if libc::getppid() != parent {
                libc::_exit(137);
            }
            Ok(())
        });
    }
    let watchdog = Watchdog::start(req.kill_grace)?;
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            watchdog.finish();
            exit.spawn_error = Some(format!("{prog}: {e}"));
            return Ok(exit);
        }
    };
    let pgid = child.id() as i32;
    watchdog.guard(pgid);
    let mut term_sent: Option<Instant> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => {
                kill_group(pgid, libc::SIGKILL);
                let _ = child.wait();
                watchdog.finish();
                return Err(e);
            }
        }
        let elapsed = start.elapsed();
        if term_sent.is_none() {
            if req.timeout.is_some_and(|t| elapsed >= t) {
                exit.timed_out = true;
            } else if interrupted() {
                exit.interrupted = true;
            }
            if exit.timed_out || exit.interrupted {
                kill_group(pgid, libc::SIGTERM);
                term_sent = Some(Instant::now());
            }
        } else if term_sent.is_some_and(|t| t.elapsed() >= req.kill_grace) {
            kill_group(pgid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(if elapsed < Duration::from_millis(200) { 2 } else { 20 }));
    };
    exit.wall_s = start.elapsed().as_secs_f64();
    // Stragglers (background children, the rest of a pipeline) go with the leader.
    kill_group(pgid, libc::SIGKILL);
    watchdog.finish();
    exit.exit_code = status.code();
    exit.signal = status.signal();
    Ok(exit)
}

/// The process that kills a run's group when katlas dies without finishing it.
struct Watchdog {
    pid: libc::pid_t,
    /// Write end of the pipe the watchdog waits on; only katlas holds it.
    fd: libc::c_int,
}

impl Watchdog {
    fn start(grace: Duration) -> std::io::Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: plain pipe2/fork; the child runs only async-signal-safe calls and never returns.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::fork();
            if pid < 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fds[0]);
                libc::close(fds[1]);
                return Err(e);
            }
            if pid == 0 {
                watchdog_main(fds[0], grace);
            }
            libc::close(fds[0]);
            Ok(Self { pid, fd: fds[1] })
        }
    }

    /// Tell the watchdog which group to kill.
    fn guard(&self, pgid: i32) {
        let b = pgid.to_ne_bytes();
        // SAFETY: writing 4 bytes from a live buffer to our own pipe.
        unsafe {
            libc::write(self.fd, b.as_ptr().cast(), b.len());
        }
    }

    /// The run is over: the watchdog exits without killing anything.
    fn finish(self) {
        // SAFETY: our own pipe and child.
        unsafe {
            let done = [0u8; 1];
            libc::write(self.fd, done.as_ptr().cast(), 1);
            libc::close(self.fd);
            let mut st = 0;
            while libc::waitpid(self.pid, &mut st, 0) < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {}
        }
    }
}

/// The watchdog's whole life, in the forked child: async-signal-safe calls only.
unsafe fn watchdog_main(rfd: libc::c_int, grace: Duration) -> ! {
    // Out of katlas's group, deaf to the terminal: Ctrl-C must not take it before it acts.
    libc::setpgid(0, 0);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
        libc::signal(sig, libc::SIG_IGN);
    }
    // Keep no other descriptor: katlas's write end (so its death closes the pipe), its
    // outputs, and std's spawn-error pipe (whose EOF a concurrent spawn waits for).
    let (lo, hi) = (rfd as libc::c_uint, libc::c_uint::MAX);
    if rfd > 0 && libc::syscall(libc::SYS_close_range, 0 as libc::c_uint, lo - 1, 0 as libc::c_uint) != 0 {
        for fd in 0..rfd {
            libc::close(fd);
        }
    }
    if libc::syscall(libc::SYS_close_range, lo + 1, hi, 0 as libc::c_uint) != 0 {
        for fd in rfd + 1..65536 {
            libc::close(fd);
        }
    }
    let mut pg = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = libc::read(rfd, pg.as_mut_ptr().add(got).cast(), 4 - got);
        if n > 0 {
            got += n as usize;
        } else if n == 0 || *libc::__errno_location() != libc::EINTR {
            // Nothing was started, or katlas is gone before starting it.
            libc::_exit(0);
        }
    }
    let pgid = i32::from_ne_bytes(pg);
    let mut b = [0u8; 1];
    loop {
        let n = libc::read(rfd, b.as_mut_ptr().cast(), 1);
        if n == 1 {
            libc::_exit(0);
        }
        if n == 0 || *libc::__errno_location() != libc::EINTR {
            break;
        }
    }
    // katlas died with the run going: the run goes too.
    libc::kill(-pgid, libc::SIGTERM);
    let ts = libc::timespec { tv_sec: grace.as_secs() as libc::time_t, tv_nsec: grace.subsec_nanos() as libc::c_long };
    libc::nanosleep(&ts, std::ptr::null_mut());
    libc::kill(-pgid, libc::SIGKILL);
    libc::_exit(0)
}

/// The last `max` bytes of a file as text (lossy), starting at a line boundary when possible.
pub fn tail(path: &Path, max: u64) -> Option<String> {
    let mut f = File::open(path).ok()?;
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
        let mut r = RunRequest::shell(sh, dir);
        r.env.insert("KATLAS_TEST_X".into(), "42".into());
        r.timeout = timeout_ms.map(Duration::from_millis);
        r.kill_grace = Duration::from_millis(300);
        r
    }

    fn alive(pid: i32) -> bool {
        // A zombie waiting for a reaper that never comes is not running.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    }

    #[test]
    fn captures_everything_untruncated() {
        let d = tempfile::tempdir().unwrap();
        // 200k lines on stdout, env visible, stderr separate.
        let sh = "i=0; while [ $i -lt 200000 ]; do echo line$i; i=$((i+1)); done; echo err$KATLAS_TEST_X >&2";
        let o = run(&req(d.path(), sh, None), &d.path().join("run")).unwrap();
        assert!(o.success(), "{o:?}");
        let text = std::fs::read_to_string(&o.stdout).unwrap();
        assert_eq!(text.lines().count(), 200_000);
        assert!(text.ends_with("line199999\n"));
        assert_eq!(std::fs::read_to_string(&o.stderr).unwrap(), "err42\n");
        assert_eq!(tail(&o.stdout, 12).unwrap(), "line199999\n");
        let c = run_captured(&req(d.path(), sh, None)).unwrap();
        assert!(c.success(), "{c:?}");
        assert_eq!(c.stdout, std::fs::read(&o.stdout).unwrap());
        assert_eq!(c.stderr, b"err42\n");
    }

    #[test]
    fn timeout_kills_the_group() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("survived");
        // A background grandchild that would write a marker after the timeout.
        let sh = format!("(sleep 2; touch {}) & echo started; sleep 30", marker.display());
        let o = run(&req(d.path(), &sh, Some(300)), &d.path().join("run")).unwrap();
        assert!(o.timed_out && !o.success(), "{o:?}");
        assert!(o.wall_s < 5.0);
        assert!(o.failure().unwrap().contains("timed out"));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "grandchild outlived the timeout");
        assert_eq!(std::fs::read_to_string(&o.stdout).unwrap(), "started\n");
    }

    #[test]
    fn a_timed_out_pipeline_dies_whole_in_memory_capture() {
        let d = tempfile::tempdir().unwrap();
        let pids = d.path().join("pids");
        // Both ends of the pipeline record their pids, then hold the pipe open.
        let sh = format!("sh -c 'echo $$ >> {p}; exec sleep 100' | sh -c 'echo $$ >> {p}; exec cat'", p = pids.display());
        let t0 = Instant::now();
        let c = run_captured(&req(d.path(), &sh, Some(500))).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "bounded: {:?}", t0.elapsed());
        assert!(c.timed_out, "{c:?}");
        let listed: Vec<i32> = std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(listed.len(), 2);
        std::thread::sleep(Duration::from_millis(200));
        for p in listed {
            assert!(!alive(p), "pid {p} outlived the timeout");
        }
    }

    #[test]
    fn signal_and_exit_codes() {
        let d = tempfile::tempdir().unwrap();
        let o = run(&req(d.path(), "kill -SEGV $$", None), &d.path().join("run")).unwrap();
        assert_eq!(o.signal, Some(libc::SIGSEGV));
        assert!(o.failure().unwrap().contains("SIGSEGV"));
        let o = run_captured(&req(d.path(), "exit 3", None)).unwrap();
        assert_eq!(o.exit_code, Some(3));
        let mut r = req(d.path(), "", None);
        r.argv = vec!["/nonexistent/binary".into()];
        let o = run_captured(&r).unwrap();
        assert!(o.spawn_error.is_some() && !o.success());
    }

    #[test]
    fn env_remove_and_env() {
        let d = tempfile::tempdir().unwrap();
        std::env::set_var("KATLAS_PROC_TEST_STRIP", "1");
        let mut r = req(d.path(), "echo ${KATLAS_PROC_TEST_STRIP:-gone} $KATLAS_TEST_X", None);
        r.env_remove = vec!["KATLAS_PROC_TEST_STRIP".into()];
        assert_eq!(run_captured(&r).unwrap().stdout, b"gone 42\n");
    }
}
