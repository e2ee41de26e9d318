//! Eval against hostile benches: runs that will not stop, and the fake wins a bench can
//! fake (inputs the identity cannot see, state shared between runs, links out of the tree).

use crate::support::evals::{self, cx, input, settings};
use katlas_eval::eval::{run_eval, EvalSpec, SideInput};
use katlas_eval::protocol::{Runner, Side};
use katlas_eval::verdict::Plan;
use katlas_model::ledger::Verdict;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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

/// The eval `name` in `dir/name` with `warmups` and 30 s per run.
fn spec(dir: &Path, name: &str, sides: Vec<SideInput>, plan: Plan, warmups: u32) -> EvalSpec {
    let mut settings = settings(plan, Duration::from_secs(30));
    settings.warmups = warmups;
    evals::spec(dir, name, sides, settings)
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Two clones of one commit (identical sources, no binary of their own) whose git-ignored
/// data file differs: 100 ms of work on one side, 50 on the other.
fn clones_with_ignored_data(d: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let origin = d.join("origin");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q"]);
    std::fs::write(origin.join(".gitignore"), "data.txt\n").unwrap();
    // Jitter from the pid so the two sides are not two constants.
    std::fs::write(origin.join("bench.sh"), "read base < data.txt\necho elapsed_ms=$((base + $$ % 3))\n").unwrap();
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-qm", "bench"]);
    let (a, b) = (d.join("a"), d.join("b"));
    for (dir, ms) in [(&a, "100"), (&b, "50")] {
        git(d, &["clone", "-q", origin.to_str().unwrap(), dir.to_str().unwrap()]);
        std::fs::write(dir.join("data.txt"), ms).unwrap();
    }
    (a, b)
}

/// A bench reading a git-ignored file: with identical source and binary, a different
/// ignored file gave +50% `improved`. Named on the command line, it is digested and the
/// difference makes the eval invalid before anything runs; not named, the sides are
/// identical in everything katlas records, and a difference between them is invalid.
#[test]
fn an_ignored_input_is_no_win() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = clones_with_ignored_data(d.path());
    let named = |dir: &Path, l: &str, n: &str| input(sh_side(l, n, "read base < data.txt; echo elapsed_ms=$((base + $$ % 3))", dir), Some(dir));
    let r = run_eval(&spec(d.path(), "named", vec![named(&a, "A", "baseline"), named(&b, "B", "candidate")], Plan::fixed(6), 1), &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    assert!(r.result.reasons[0].contains("git-ignored input `data.txt` differs between the sides"), "{:?}", r.result.reasons);
    assert!(r.outcome.is_none(), "nothing measured");
    // The same trap behind a script that opens the file itself.
    let hidden = |dir: &Path, l: &str, n: &str| input(sh_side(l, n, "sh bench.sh", dir), Some(dir));
    let r = run_eval(&spec(d.path(), "hidden", vec![hidden(&a, "A", "baseline"), hidden(&b, "B", "candidate")], Plan::fixed(6), 1), &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    assert!(r.result.reasons[0].contains("identical in everything katlas records"), "{:?}", r.result.reasons);
    assert!(r.result.effects[0].gain > 0.3, "the trap measured a gain: {:?}", r.result.effects);
}

/// A cache one run leaves for the next (first run slow, the rest fast) only on the
/// candidate's side: +50% `improved` with the default warmup and with `-n 10 --warmups 0`.
/// Its first run performs like the baseline: the runs share state, the eval is invalid.
#[test]
fn a_warm_cache_between_runs_is_no_win() {
    let d = tempfile::tempdir().unwrap();
    for (name, plan, warmups) in [("default", Plan::fixed(6), 1), ("n10-w0", Plan::fixed(10), 0)] {
        let cache = d.path().join(format!("{name}.cache"));
        let c = cache.display();
        let base = sh_side("A", "baseline", "echo elapsed_ms=$((100 + $$ % 3))", d.path());
        let cand = sh_side(
            "B",
            "candidate",
            &format!("if [ -e {c} ]; then echo elapsed_ms=$((50 + $$ % 3)); else touch {c}; echo elapsed_ms=$((100 + $$ % 3)); fi"),
            d.path(),
        );
        let r = run_eval(&spec(d.path(), name, vec![input(base, None), input(cand, None)], plan, warmups), &cx(), None).unwrap();
        assert_eq!(r.result.verdict, Verdict::Invalid, "{name}: {:?}", r.result.reasons);
        assert!(r.result.reasons[0].starts_with("runs share state: the candidate's first run"), "{name}: {:?}", r.result.reasons);
        assert!(r.result.effects[0].gain > 0.3, "{name}: the trap measured a gain: {:?}", r.result.effects);
    }
    // A real gain from the first run on is still a win (real: the wall time falls with it).
    let base = sh_side("A", "baseline", "sleep 0.1; echo elapsed_ms=$((100 + $$ % 3))", d.path());
    let cand = sh_side("B", "candidate", "sleep 0.05; echo elapsed_ms=$((50 + $$ % 3))", d.path());
    let r = run_eval(&spec(d.path(), "real", vec![input(base, None), input(cand, None)], Plan::fixed(6), 1), &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Improved, "{:?}", r.result.reasons);
}

/// The candidate replaced an allowed file by a link to a file outside the repository:
/// still an allowed path in the diff, but no longer the file that was allowed.
#[test]
fn an_allowed_file_linked_out_of_the_repository_is_invalid() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(repo.join("kernels")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("kernels/gemv.hip"), "v1\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    let outside = d.path().join("outside.hip");
    std::fs::write(&outside, "anything\n").unwrap();
    std::fs::remove_file(repo.join("kernels/gemv.hip")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join("kernels/gemv.hip")).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "two"]);
    let changed = katlas_eval::worktree::changed_files(&repo, "HEAD~1", "HEAD").unwrap();
    assert_eq!(changed, vec!["kernels/gemv.hip"]);
    let base = sh_side("A", "baseline", "echo elapsed_ms=$((100 + $$ % 3))", d.path());
    let cand = sh_side("B", "candidate", "echo elapsed_ms=$((50 + $$ % 3))", &repo);
    let mut s = spec(d.path(), "link", vec![input(base, None), input(cand, Some(&repo))], Plan::fixed(6), 1);
    s.allowed_files = Some((vec!["kernels/*.hip".into()], changed.clone()));
    assert!(katlas_eval::guard::allowed_files_breach(&changed, &["kernels/*.hip".into()]).is_empty(), "the path alone is allowed");
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    assert!(
        r.result.reasons[0].contains("kernels/gemv.hip is a symbolic link to") && r.result.reasons[0].contains("outside the repository"),
        "{:?}",
        r.result.reasons
    );
}
