//! `kill -9` of `katlas collect` mid-run: the workload (its whole process group) dies
//! with katlas instead of running on under PID 1, and the run it left is recognisable
//! as unfinished (meta.json written at the start says `running`; the next collect marks
//! it `unfinished` and reports it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::KATLAS;

/// The binary in the test environment (`crate::support::cli`); callers set the directory.
fn katlas() -> Command {
    let mut c = Command::new(KATLAS);
    katlas_testkit::cli::isolate(&mut c).env("KATLAS_YES", "1");
    c
}

/// Running, not a zombie waiting for a reaper.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(".katlas/runs")).map(|r| r.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    v.sort();
    v
}

fn meta_status(run_dir: &Path) -> String {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(run_dir.join("meta.json")).unwrap()).unwrap();
    v["status"].as_str().unwrap_or("").to_string()
}

#[test]
fn kill_9_of_collect_takes_the_workload_with_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    // A pipeline whose two ends record their pids and would run for 100 s.
    std::fs::write(
        root.join("katlas.toml"),
        "[workload.hang]\ncommand = '''sh -c 'echo $$ >> pids; exec sleep 100' | sh -c 'echo $$ >> pids; exec cat' '''\nparsers = ['kv']\n\n[workload.quick]\ncommand = 'echo v=1'\nparsers = ['kv']\n",
    )
    .unwrap();
    let mut child = katlas().current_dir(root).args(["collect", "hang", "--output", "rows.jsonl"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let pids_file = root.join("pids");
    let t0 = Instant::now();
    let pids: Vec<i32> = loop {
        let p: Vec<i32> = std::fs::read_to_string(&pids_file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
        if p.len() == 2 {
            break p;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the workload never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let runs = run_dirs(root);
    assert_eq!(runs.len(), 1);
    assert_eq!(meta_status(&runs[0]), "running", "meta.json is written before the workload starts");
    child.kill().unwrap(); // SIGKILL: no handler, no cleanup in katlas
    child.wait().unwrap();
    let t1 = Instant::now();
    while pids.iter().any(|p| alive(*p)) && t1.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let survivors: Vec<&i32> = pids.iter().filter(|p| alive(**p)).collect();
    assert!(survivors.is_empty(), "workload outlived katlas: {survivors:?}");
    assert_eq!(meta_status(&runs[0]), "running", "the killed run never finished");
    // The next collect recognises the run as unfinished, marks it so, and says so once.
    let out = katlas().current_dir(root).args(["collect", "quick", "--output", "rows.jsonl", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<String> = rep["unfinished"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(listed, vec![runs[0].display().to_string()]);
    assert_eq!(meta_status(&runs[0]), "unfinished");
    let done: Vec<PathBuf> = run_dirs(root).into_iter().filter(|r| r != &runs[0]).collect();
    assert_eq!(done.len(), 1);
    assert_eq!(meta_status(&done[0]), "finished");
    let text = katlas().current_dir(root).args(["collect", "quick", "--output", "rows.jsonl"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&text.stdout).contains("unfinished run"), "reported once");
}
