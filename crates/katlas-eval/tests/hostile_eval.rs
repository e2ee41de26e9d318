//! Eval against hostile benches: runs that will not stop, and the fake wins a bench can
//! fake (inputs the identity cannot see, state shared between runs, links out of the tree).

use katlas_eval::protocol::{Order, Runner, Settings, Side};
use katlas_eval::verdict::{JudgeConfig, Plan};
use katlas_model::ledger::Goal;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn settings(plan: Plan, timeout: Duration) -> Settings {
    Settings {
        metric: "elapsed_ms".into(),
        parser: "kv".into(),
        warmups: 0,
        plan,
        order: Order::Abba,
        seed: 5,
        settle: None,
        timeout,
        judge: JudgeConfig { goal: Goal::Minimize, cv_limit: 1.0, drift_limit: 10.0, ..JudgeConfig::default() },
        telemetry: false,
        strip_env: Vec::new(),
    }
}

fn sh_side(label: &str, name: &str, cmd: &str, cwd: &Path) -> Side {
    Side { label: label.into(), name: name.into(), argv: vec!["sh".into(), "-c".into(), cmd.into()], env: BTreeMap::new(), cwd: cwd.to_path_buf() }
}

/// Running, not a zombie left for a reaper.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// `sh -c 'sleep 100 | cat'` that times out: the whole pipeline dies and the eval
/// returns within its bound (killing only `sh` left `sleep` holding the output pipe,
/// so the eval waited the full 100 s per run and `sleep`/`cat` lived on).
#[test]
fn a_timed_out_pipeline_leaves_no_process_and_returns_in_bound() {
    let d = tempfile::tempdir().unwrap();
    let pids = d.path().join("pids");
    let p = pids.display();
    let cmd = format!("sh -c 'echo $$ >> {p}; exec sleep 100' | sh -c 'echo $$ >> {p}; exec cat'");
    let sides = vec![sh_side("A", "baseline", &cmd, d.path()), sh_side("B", "candidate", &cmd, d.path())];
    let st = settings(Plan::fixed(1), Duration::from_millis(800));
    let runner = Runner { dir: d.path().join("ev"), eval_id: "hang".into(), sides: &sides, settings: &st, progress: None };
    let t0 = Instant::now();
    let out = runner.run().unwrap();
    let took = t0.elapsed();
    // Two runs of 0.8 s each plus the kill grace; 100 s each before.
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(out.samples.len(), 2);
    assert!(out.samples.iter().all(|s| s.error.as_deref().is_some_and(|e| e.contains("timed out"))), "{:?}", out.samples);
    let listed: Vec<i32> = std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(listed.len(), 4, "sleep and cat of both runs");
    std::thread::sleep(Duration::from_millis(300));
    let survivors: Vec<i32> = listed.into_iter().filter(|p| alive(*p)).collect();
    assert!(survivors.is_empty(), "still running after the eval returned: {survivors:?}");
}
