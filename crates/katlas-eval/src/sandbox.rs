//! A private scratch area per run: a fresh `TMPDIR` and `HOME` that no earlier run could
//! fill (a cache one sample leaves in /tmp or ~/.cache for the next is measured, not the
//! code) and that are removed afterwards. Measured samples and correctness checks get the
//! same layout, so the environment does not tell a program which of the two runs it.
//!
//! The scratch path also marks every process the run started: one that still carries it
//! after the run ended and leads a live process group of its own escaped the run's group
//! (`setsid`, `setpgid`) and goes on working after the measurement stopped.

use rand::Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    /// A new, empty, owner-only directory under the system's temporary directory.
    pub fn new() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut rng = rand::rng();
        for _ in 0..16 {
            let name: String = (0..10).map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)])).collect();
            let root = base.join(format!("tmp.{name}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&root) {
                Ok(()) => {
                    for d in ["tmp", "home"] {
                        std::fs::DirBuilder::new().mode(0o700).create(root.join(d))?;
                    }
                    return Ok(Self { root });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, format!("no fresh scratch directory under {}", base.display())))
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Variables set on top of a run's environment.
    pub fn env(&self) -> BTreeMap<String, String> {
        let tmp = self.tmp().display().to_string();
        let home = self.root.join("home");
        let mut env: BTreeMap<String, String> = ["TMPDIR", "TMP", "TEMP"].into_iter().map(|k| (k.to_string(), tmp.clone())).collect();
        env.insert("HOME".into(), home.display().to_string());
        env.insert("XDG_CACHE_HOME".into(), home.join(".cache").display().to_string());
        env
    }

    /// Puts the scratch layout over a run's environment. `TMPDIR` is always the run's own (it
    /// also marks the run's processes); a `HOME` or `XDG_CACHE_HOME` the side declares (a value
    /// other than katlas's own, which every run inherits) is kept. Without a declared `HOME`,
    /// what the user installed or downloaded stays reachable: `PYTHONUSERBASE` points at the real
    /// `~/.local` (pip --user packages) and `HF_HOME` at the real `~/.cache/huggingface` (model
    /// weights), inputs both sides read alike, not state one run leaves for the next.
    pub fn apply(&self, env: &mut BTreeMap<String, String>) {
        let declared = |env: &BTreeMap<String, String>, k: &str| env.get(k).is_some_and(|v| std::env::var(k).ok().as_deref() != Some(v.as_str()));
        let declared_home = declared(env, "HOME");
        for (k, v) in self.env() {
            if k.starts_with("TMP") || k == "TEMP" || !declared(env, &k) {
                env.insert(k, v);
            }
        }
        let Some(real) = std::env::var_os("HOME").map(PathBuf::from).filter(|_| !declared_home) else { return };
        for (var, dir) in [("PYTHONUSERBASE", real.join(".local")), ("HF_HOME", real.join(".cache").join("huggingface"))] {
            if !declared(env, var) && dir.is_dir() {
                env.insert(var.into(), dir.display().to_string());
            }
        }
    }

    /// Processes of the run still alive after it ended, each leading a live group of its own
    /// (so not a straggler of the run's group, which katlas killed): pid and command line.
    pub fn escaped(&self) -> Vec<(i32, String)> {
        let marker = format!("TMPDIR={}\0", self.tmp().display()).into_bytes();
        let me = std::process::id() as i32;
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir("/proc") else { return out };
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if pid == me {
                continue;
            }
            let Ok(environ) = std::fs::read(e.path().join("environ")) else { continue };
            if !environ.windows(marker.len()).any(|w| w == marker.as_slice()) {
                continue;
            }
            let Some(pgid) = stat_pgid(&e.path()) else { continue };
            // A straggler of the run's group points at the group's reaped leader.
            if !Path::new(&format!("/proc/{pgid}")).exists() {
                continue;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string()).unwrap_or_default();
            // It is named in the sample's error, which reaches records.
            let cmd = katlas_identity::redact_command_line(&cmd);
            out.push((pid, cmd));
        }
        out
    }

    /// [`Self::escaped`], each of them killed: their work must not overlap the next run.
    pub fn kill_escaped(&self) -> Vec<(i32, String)> {
        let found = self.escaped();
        for (pid, _) in &found {
            // SAFETY: plain kill(2) of a process that carries this run's scratch marker.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        found
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Process group of `/proc/PID` (field 5 of `stat`, after the parenthesised command name).
fn stat_pgid(proc_dir: &Path) -> Option<i32> {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.next()?; // ppid
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_that_left_the_runs_group_is_found_and_a_fresh_scratch_is_empty() {
        let s = Sandbox::new().unwrap();
        assert_eq!(std::fs::read_dir(s.path().join("tmp")).unwrap().count(), 0);
        let argv: Vec<String> = ["sh", "-c", "setsid sleep 5 & sleep 3 & sleep 0.3; echo ok"].iter().map(|x| x.to_string()).collect();
        let r = crate::protocol::run_process(&argv, &s.env(), &[], s.path(), std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(r.code, Some(0));
        let found = s.kill_escaped();
        assert_eq!(found.len(), 1, "only the setsid one escaped the group: {found:?}");
        assert!(found[0].1.contains("sleep 5"), "{found:?}");
        let path = s.path().to_path_buf();
        drop(s);
        assert!(!path.exists(), "removed after the run");
    }

    #[test]
    fn a_declared_home_is_kept_and_the_users_packages_and_models_stay_reachable() {
        let s = Sandbox::new().unwrap();
        let real = PathBuf::from(std::env::var("HOME").unwrap());
        // Inherited (katlas's own HOME): replaced by the scratch one.
        let mut env: BTreeMap<String, String> = [("HOME".to_string(), real.display().to_string())].into();
        s.apply(&mut env);
        assert_eq!(env["HOME"], s.path().join("home").display().to_string());
        assert_eq!(env["TMPDIR"], s.path().join("tmp").display().to_string());
        if real.join(".local").is_dir() {
            assert_eq!(env["PYTHONUSERBASE"], real.join(".local").display().to_string());
        }
        // Declared by the side: kept, and TMPDIR is still the run's.
        let mut env: BTreeMap<String, String> = [("HOME".to_string(), "/srv/bench-home".to_string()), ("TMPDIR".to_string(), "/x".to_string())].into();
        s.apply(&mut env);
        assert_eq!(env["HOME"], "/srv/bench-home");
        assert_eq!(env["TMPDIR"], s.path().join("tmp").display().to_string());
        assert!(!env.contains_key("PYTHONUSERBASE") && !env.contains_key("HF_HOME"), "{env:?}");
    }
}
