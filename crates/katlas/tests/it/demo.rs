//! `scripts/demo` end to end on the debug binaries, then the command its task packet names
//! (TASK.md's `## Next`), run exactly: the demo's next step ends in a measured verdict.

use crate::support::cli::{binaries, repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A command in the test environment, its trust recorded in the test's own config and nothing
/// trusted by `KATLAS_YES`: the demo trusts what it runs, as a user does.
fn env<'a>(c: &'a mut Command, config: &Path) -> &'a mut Command {
    katlas_testkit::cli::isolate(c).env("KATLAS_CONFIG_DIR", config)
}

fn text(o: &Output) -> String {
    format!("exit {:?}\nstdout:\n{}\nstderr:\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The `verdict: …` line an eval prints.
fn verdict(o: &Output) -> Option<String> {
    String::from_utf8_lossy(&o.stdout).lines().find_map(|l| l.strip_prefix("verdict: ")).map(|v| v.trim().to_string())
}

/// Whether an eval's words say its runs shared state (the guard's reason).
fn shared_state(text: &str) -> bool {
    text.contains("runs share state")
}

/// What an eval measured and judged; `invalid` (incomparable sides) and the like are not.
const MEASURED: [&str; 5] = ["improved", "regressed", "no_change", "inconclusive", "unstable"];

#[test]
fn the_demos_task_eval_ends_in_a_measured_verdict() {
    let bin = binaries();
    let d = tempfile::tempdir().unwrap();
    let (project, config) = (d.path().join("demo"), d.path().join("config"));
    // The demo as documented, on a small GEMV (debug binaries on a 2-core box).
    let o = env(&mut Command::new("bash"), &config)
        .arg(repo().join("scripts/demo"))
        .env("KATLAS_DEMO_BIN", &bin)
        .env("KATLAS_DEMO_DIR", &project)
        .env("KATLAS_DEMO_SHAPE", "256x1024")
        .env("KATLAS_DEMO_SAMPLES", "10")
        .output()
        .unwrap();
    assert!(o.status.success(), "scripts/demo: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // Its banners paste: an argument with a space is quoted.
    assert!(out.contains("$ katlas fit ") && out.contains("--product 'NVIDIA H200'"), "{out}");
    let v = verdict(&o).unwrap_or_else(|| panic!("the demo's eval printed no verdict: {}", text(&o)));
    assert!(MEASURED.contains(&v.as_str()), "the demo's eval: {v}\n{}", text(&o));

    // The task packet the demo wrote: it judges what the demo measured, the lever applied
    // in the file it allows.
    let tasks: Vec<PathBuf> = std::fs::read_dir(project.join(".katlas/tasks")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let task: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tasks[0].join("task.json")).unwrap()).unwrap();
    assert_eq!((task["bench"]["metric"].as_str(), task["bench"]["goal"].as_str()), (Some("cpu_min_us"), Some("minimize")), "{task}");
    assert_eq!(task["bench"]["command"][0], "./gemv.sh", "{task}");
    assert!(task["bench"]["env"].get("LD_LIBRARY_PATH").is_none(), "a CPU run needs no CUDA library path: {task}");
    assert_eq!(task["allowed_files"], serde_json::json!(["gemv.sh"]));
    // A would-be `improved` without a correctness check is `invalid` (unverified): the lab's
    // oracle check is the task's.
    assert_eq!(task["correctness"][0]["command"], "./gemv.sh --shapes 256x1024 --samples 1", "{task}");
    let md = std::fs::read_to_string(tasks[0].join("TASK.md")).unwrap();
    let next = md.split("## Next").nth(1).and_then(|s| s.lines().map(str::trim).find(|l| l.starts_with("katlas "))).unwrap_or_else(|| panic!("{md}"));
    let words: Vec<&str> = next.split_whitespace().collect();
    assert_eq!(&words[..2], ["katlas", "eval"], "{next}");

    // TASK.md's command, exactly, after the demo: a measured verdict, recorded in the ledger.
    // On a busy box one stalled first run of the candidate reads as state shared between runs
    // (`invalid`, "re-run"): it is run again, at most three times, as its message says.
    let mut runs = 0;
    loop {
        runs += 1;
        let o = env(&mut Command::new(bin.join("katlas")), &config).args(&words[1..]).current_dir(&project).output().unwrap();
        let v = verdict(&o).unwrap_or_else(|| panic!("`{next}` printed no verdict: {}", text(&o)));
        if runs < 3 && v == "invalid" && shared_state(&String::from_utf8_lossy(&o.stdout)) {
            continue;
        }
        assert!(MEASURED.contains(&v.as_str()), "`{next}`: {v}\n{}", text(&o));
        break;
    }
    let o = env(&mut Command::new(bin.join("katlas")), &config).args(["ledger", "ls", "--format", "json"]).current_dir(&project).output().unwrap();
    let ledger: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let entries = ledger.as_array().or_else(|| ledger["entries"].as_array()).unwrap_or_else(|| panic!("{ledger}"));
    assert_eq!(entries.len(), 1 + runs, "the demo's eval and this one's runs: {ledger}");
    for e in entries {
        let retried = e["verdict"] == "invalid" && shared_state(&e["reasons"].to_string());
        assert!(MEASURED.contains(&e["verdict"].as_str().unwrap_or("")) || retried, "{e}");
        assert_eq!(e["metric"], "cpu_min_us", "{e}");
    }
}
