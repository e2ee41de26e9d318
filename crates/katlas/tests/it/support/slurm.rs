//! A throwaway Slurm cluster on this machine for the fleet tests: Debian's `munge` and
//! `slurm-wlm` (installed by scripts/test-all), one controller and one node, partitions `narrow`
//! and `wide` over that node, every file (key, state, spool, logs) under a temp dir and every
//! port chosen free. Dropping it cancels its jobs and stops the daemons.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Slurm {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

/// The node's name in slurm.conf (`slurmd -N` gives it; the controller must be this host).
pub const NODE: &str = "katlasnode";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free TCP port")
}

fn installed(prog: &str) -> PathBuf {
    ["/usr/sbin", "/usr/bin", "/sbin"].iter().map(|d| Path::new(d).join(prog)).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("{prog} not found: the fleet tests need Debian's slurm-wlm and munge packages (scripts/test-all installs them: apt-get install slurm-wlm munge)")
    })
}

fn hostname() -> String {
    let o = Command::new("hostname").arg("-s").output().expect("hostname runs");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

impl Slurm {
    pub fn start() -> Slurm {
        assert_eq!(unsafe { libc::geteuid() }, 0, "slurmd launches jobs as their user and needs root: run the suite as root (CI does)");
        let dir = tempfile::Builder::new().prefix("katlas-slurm-").tempdir().unwrap();
        let p = |s: &str| dir.path().join(s);
        for d in ["munge", "state", "spool", "log"] {
            std::fs::create_dir_all(p(d)).unwrap();
        }
        // munged wants a private key and directories only root can write.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut key = [0u8; 1024];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut key).unwrap();
        std::fs::write(p("munge/key"), key).unwrap();
        std::fs::set_permissions(p("munge/key"), std::fs::Permissions::from_mode(0o400)).unwrap();
        let sock = p("munge/sock");
        let o = Command::new(installed("munged"))
            .arg(format!("--key-file={}", p("munge/key").display()))
            .arg(format!("--socket={}", sock.display()))
            .arg(format!("--pid-file={}", p("munge/pid").display()))
            .arg(format!("--log-file={}", p("munge/log").display()))
            .arg(format!("--seed-file={}", p("munge/seed").display()))
            .arg("--force")
            .output()
            .unwrap();
        assert!(o.status.success(), "munged: {}", String::from_utf8_lossy(&o.stderr));

        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let conf = format!(
            "ClusterName=katlastest\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
             SlurmUser=root\nSlurmdUser=root\n\
             AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             SchedulerType=sched/backfill\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
             MpiDefault=none\nReturnToService=2\nInactiveLimit=0\nMinJobAge=3600\n\
             NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
             PartitionName=narrow Nodes={NODE} Default=YES MaxTime=INFINITE State=UP\n\
             PartitionName=wide Nodes={NODE} MaxTime=INFINITE State=UP\n",
            host = hostname(),
            ctld = free_port(),
            slurmd = free_port(),
            sock = sock.display(),
            d = dir.path().display(),
        );
        std::fs::write(p("slurm.conf"), conf).unwrap();
        let mut s = Slurm { dir, daemons: Vec::new() };
        for (prog, extra) in [("slurmctld", &["-i"][..]), ("slurmd", &["-N", NODE][..])] {
            let log = std::fs::File::create(s.path(&format!("log/{prog}.out"))).unwrap();
            let child = Command::new(installed(prog))
                .arg("-D")
                .args(extra)
                .arg("-f")
                .arg(s.conf())
                .env("SLURM_CONF", s.conf())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            s.daemons.push(child);
        }
        // Up when the node answers idle in both partitions.
        let t0 = Instant::now();
        loop {
            let out = s.output("sinfo", &["-h", "-o", "%P %t"]);
            if out.lines().count() == 2 && out.lines().all(|l| l.ends_with(" idle")) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "the Slurm node did not come up: sinfo says {out:?}\n{}", s.logs());
            std::thread::sleep(Duration::from_millis(300));
        }
        s
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The cluster's slurm.conf: `SLURM_CONF` for every Slurm command of the test.
    pub fn conf(&self) -> PathBuf {
        self.path("slurm.conf")
    }

    /// A Slurm client command (sbatch, squeue, scancel, sinfo) against this cluster.
    pub fn command(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("SLURM_CONF", self.conf());
        c
    }

    /// Stdout of a client command that must succeed.
    pub fn output(&self, prog: &str, args: &[&str]) -> String {
        let o = self.command(prog).args(args).output().unwrap_or_else(|e| panic!("{prog}: {e}"));
        assert!(o.status.success(), "{prog} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// A job's state (`squeue --states=all`), `None` once the controller forgot it.
    pub fn state(&self, job: &str) -> Option<String> {
        let s = self.output("squeue", &["-h", "--states=all", "-j", job, "-o", "%T"]);
        Some(s.trim().to_string()).filter(|s| !s.is_empty())
    }

    /// Wait until `job` is in one of `states`.
    pub fn wait_state(&self, job: &str, states: &[&str]) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.state(job).unwrap_or_default();
            if states.contains(&s.as_str()) {
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "job {job} stayed {s}, not {states:?}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// A job that holds the whole node until cancelled: the jobs submitted after it wait.
    pub fn hold_node(&self) -> String {
        let id = self.output("sbatch", &["--parsable", "--exclusive", "-p", "wide", "-o", "/dev/null", "--wrap", "sleep 900"]).trim().to_string();
        self.wait_state(&id, &["RUNNING"]);
        id
    }

    /// The daemons' logs, for a failure's message.
    pub fn logs(&self) -> String {
        ["log/slurmctld.log", "log/slurmd.log", "log/slurmctld.out", "log/slurmd.out"]
            .iter()
            .map(|f| {
                let t = std::fs::read_to_string(self.path(f)).unwrap_or_default();
                let tail: Vec<&str> = t.lines().rev().take(15).collect();
                format!("--- {f}:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = self.command("scancel").args(["--full", "-p", "narrow,wide"]).output();
        std::thread::sleep(Duration::from_millis(500));
        for c in &mut self.daemons {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        for c in &mut self.daemons {
            let t0 = Instant::now();
            while c.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(pid) = std::fs::read_to_string(self.path("munge/pid")).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}
