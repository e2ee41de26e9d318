//! A throwaway PostgreSQL cluster for the tests that need a team store (Debian's `postgresql`
//! package, installed by scripts/test-all): under a temp dir, on a unix socket there, stopped
//! when dropped.

use std::path::PathBuf;
use std::process::Command;

/// A PostgreSQL cluster of one test: stopped (and its files removed) on drop, panics included.
pub struct Pg {
    pub dir: tempfile::TempDir,
    bin: PathBuf,
    root: bool,
}

fn server_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path().join("bin"))).filter(|b| b.join("initdb").is_file() && b.join("pg_ctl").is_file()).collect())
        .unwrap_or_default();
    // The newest major version.
    dirs.sort_by_key(|d| d.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0));
    dirs.pop().unwrap_or_else(|| {
        panic!("PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin: run scripts/test-all, which installs Debian's postgresql package (apt-get install postgresql)")
    })
}

impl Pg {
    pub fn start() -> Pg {
        let bin = server_bin();
        let dir = tempfile::Builder::new().prefix("katlas-pg-").tempdir().unwrap();
        // initdb refuses to run as root: the cluster then belongs to Debian's `postgres` user.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            let id = |flag: &str| -> u32 {
                let o = Command::new("id").args([flag, "postgres"]).output().unwrap();
                assert!(
                    o.status.success(),
                    "running as root needs the `postgres` user that Debian's postgresql package creates (scripts/test-all installs it)"
                );
                String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
            };
            std::os::unix::fs::chown(dir.path(), Some(id("-u")), Some(id("-g"))).unwrap();
        }
        let pg = Pg { dir, bin, root };
        let data = pg.dir.path().join("data");
        pg.run("initdb", &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"]);
        let opts = format!("-k {} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off", pg.dir.path().display());
        let log = pg.dir.path().join("server.log");
        pg.run("pg_ctl", &["-D", data.to_str().unwrap(), "-o", &opts, "-l", log.to_str().unwrap(), "-w", "-t", "60", "start"]);
        pg
    }

    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn run(&self, tool: &str, args: &[&str]) -> String {
        let o = self.command(tool).args(args).current_dir(self.dir.path()).output().unwrap();
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        assert!(o.status.success(), "{tool} {args:?}: {}\n{}\nserver log:\n{log}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The URL katlas is given: the unix socket in the temp dir, no TCP port to clash.
    pub fn url(&self) -> String {
        format!("postgres://postgres@/postgres?host={}", self.dir.path().display())
    }

    /// SQL through psql, bypassing katlas (what another client of the server could do).
    pub fn psql(&self, sql: &str) -> String {
        self.run("psql", &["-h", self.dir.path().to_str().unwrap(), "-U", "postgres", "-d", "postgres", "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self.command("pg_ctl").args(["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]).output();
    }
}
