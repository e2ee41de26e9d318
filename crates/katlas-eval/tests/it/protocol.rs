//! The fresh-process protocol with a real CPU workload (`katlas-eval-spin`)
//! and the fake-win patterns it must catch.

use crate::support::evals::{self, cx};
use katlas_eval::eval::{run_eval, CaptureContext, EvalSpec, SideInput, SolSpec};
use katlas_eval::protocol::{Runner, Settings, Side};
use katlas_eval::verdict::{judge, JudgeConfig, Plan};
use katlas_model::ledger::{EvalSample, Goal, Verdict};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const SPIN: &str = env!("CARGO_BIN_EXE_katlas-eval-spin");

/// Real-process tests time CPU work: run them one at a time so they do not
/// measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn side(label: &str, name: &str, args: &[&str], cwd: &Path) -> Side {
    let mut argv = vec![SPIN.to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    Side { label: label.into(), name: name.into(), argv, env: BTreeMap::new(), cwd: cwd.to_path_buf() }
}

/// The suite's settings with one warmup, a minute per run, and the `KATLAS_PROFILE`
/// instrumentation switch removed from every side.
fn settings(plan: Plan) -> Settings {
    Settings { warmups: 1, strip_env: vec!["KATLAS_PROFILE".into()], ..evals::settings(plan, Duration::from_secs(60)) }
}

fn input(s: Side) -> SideInput {
    evals::input(s, None)
}

/// The eval in `dir/eval`, appending to `dir/ledger.jsonl`.
fn spec(dir: &Path, sides: Vec<SideInput>, plan: Plan) -> EvalSpec {
    EvalSpec { ledger_path: Some(dir.join("ledger.jsonl")), ..evals::spec(dir, "eval", sides, settings(plan)) }
}

#[test]
fn real_processes_find_a_large_slowdown() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let a = side("A", "baseline", &["--factor", "1", "--iters", "1000000"], d.path());
    let b = side("B", "candidate", &["--factor", "4", "--iters", "1000000"], d.path());
    let r = run_eval(&spec(d.path(), vec![input(a), input(b)], Plan::fixed(8)), &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Regressed, "{:?}", r.result.reasons);
    let e = &r.result.effects[0];
    assert!(e.relative_change > 0.5, "4x the work takes longer: {e:?}");
    assert!(e.gain < 0.0);
    // Every sample is a record with identity of its run; warmups kept but marked.
    let samples: Vec<EvalSample> =
        std::fs::read_to_string(d.path().join("eval/samples.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(samples.len(), 2 + 16);
    assert_eq!(samples.iter().filter(|s| s.pass == "warmup").count(), 2);
    assert_eq!(r.result.protocol.sequence.len(), 16);
    assert_eq!(&r.result.protocol.sequence[..4], &["B", "A", "A", "B"], "ABBA after the warmup block");
    assert!(d.path().join("eval/result.json").exists());
    let ledger = katlas_eval::ledger::read(&d.path().join("ledger.jsonl")).unwrap();
    assert_eq!(ledger.records.len(), 1);
    assert_eq!(ledger.records[0].record.verdict, Verdict::Regressed);
    assert_eq!(ledger.records[0].record.samples.path, "eval/samples.jsonl");
    assert!(ledger.records[0].record.samples.md5.is_some());
}

#[test]
fn killed_eval_resumes_from_stored_samples() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let sides = vec![side("A", "baseline", &["--iters", "200000"], d.path()), side("B", "candidate", &["--iters", "200000"], d.path())];
    let st = settings(Plan::fixed(4));
    let dir = d.path().join("ev");
    let runner = Runner { dir: dir.clone(), eval_id: "r".into(), sides: &sides, settings: &st, progress: None };
    let first = runner.run().unwrap();
    assert_eq!(first.resumed, 0);
    let path = dir.join("samples.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10);
    // Kill after 5 runs, mid-way through writing the 6th line.
    let kept = format!("{}\n{}", lines[..5].join("\n"), &lines[5][..20]);
    std::fs::write(&path, kept).unwrap();
    let again = runner.run().unwrap();
    assert_eq!(again.resumed, 5, "five stored samples replayed");
    let mut seqs: Vec<u64> = again.samples.iter().map(|s| s.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>());
    // Replayed samples are the stored ones, unchanged.
    for (old, new) in first.samples.iter().zip(&again.samples).take(5) {
        assert_eq!(old, new);
    }
    // A line this host did not write (pulled, copied) is never replayed, nor appended to.
    let mut forged = first.samples[6].clone();
    forged.value = forged.value.map(|v| v * 2.0);
    let pulled =
        format!("{}\n{}\n", std::fs::read_to_string(&path).unwrap().lines().take(6).collect::<Vec<_>>().join("\n"), serde_json::to_string(&forged).unwrap());
    std::fs::write(&path, &pulled).unwrap();
    let e = runner.run().unwrap_err().to_string();
    assert!(e.contains("not resumed: 1 of its 6 stored sample(s) were not written by this host"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), pulled);
    // A different plan in the same directory is refused, not mixed in.
    let other = settings(Plan::fixed(6));
    let r2 = Runner { dir: dir.clone(), eval_id: "r".into(), sides: &sides, settings: &other, progress: None };
    assert!(r2.run().unwrap_err().to_string().contains("different eval plan"));
}

#[test]
fn order_effect_is_not_a_win() {
    let _serial = serial();
    // Identical binaries; a run right after another run does half the work (warm
    // caches/clocks). The settle step cools the machine before each block. The metric is
    // the work each real process did (`work=`), so the order effect is the only effect and
    // machine noise cannot blur what the protocol does with it.
    let d = tempfile::tempdir().unwrap();
    let warm = d.path().join("warm");
    let w = warm.display().to_string();
    let args = ["--iters", "100000", "--warm-file", w.as_str(), "--warm-gain", "0.5", "--warm-window-ms", "60000"];
    let a = side("A", "baseline", &args, d.path());
    let b = side("B", "candidate", &args, d.path());
    // The naive protocol (baseline then candidate, cooled before each pair, as a same-shell
    // A-then-B comparison does) sees a 50% "win" for the candidate:
    let mut na = Vec::new();
    let mut nb = Vec::new();
    for _ in 0..6 {
        let _ = std::fs::remove_file(&warm);
        for (s, out) in [(&a, &mut na), (&b, &mut nb)] {
            let o = Command::new(&s.argv[0]).args(&s.argv[1..]).output().unwrap();
            let t = String::from_utf8_lossy(&o.stdout);
            let v: f64 = t.lines().find_map(|l| l.strip_prefix("work=")).unwrap().parse().unwrap();
            out.push(v);
        }
    }
    let cfg = JudgeConfig { goal: Goal::Minimize, ..JudgeConfig::default() };
    let naive = judge(&na, &nb, 0.95, &cfg);
    assert_eq!(naive.verdict, Verdict::Improved, "the trap is real: {:?}", naive.reasons);
    assert!((naive.effect.as_ref().unwrap().gain - 0.5).abs() < 1e-9);
    // katlas: ABBA blocks with the same settle step; each side runs warm in half its blocks.
    let mut s = spec(d.path(), vec![input(a), input(b)], Plan::fixed(6));
    s.settings.metric = "work".into();
    s.settings.warmups = 0;
    s.settings.settle = Some(format!("rm -f '{w}'"));
    s.settings.judge = cfg;
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.protocol.sequence, ["A", "B", "B", "A", "A", "B", "B", "A", "A", "B", "B", "A"]);
    assert_ne!(r.result.verdict, Verdict::Improved, "{:?}", r.result.reasons);
    assert_ne!(r.result.verdict, Verdict::Regressed, "{:?}", r.result.reasons);
    assert_eq!(r.result.effects[0].relative_change, 0.0, "both sides ran cold 3 times and warm 3 times");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A repo with two commits: the second edits `src/dispatch.rs`.
fn two_commit_repo(root: &Path) -> (String, String) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("kernels")).unwrap();
    git(root, &["init", "-q"]);
    std::fs::write(root.join("kernels/gemv.hip"), "v1\n").unwrap();
    std::fs::write(root.join("src/dispatch.rs"), "v1\n").unwrap();
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    let c1 = git(root, &["rev-parse", "HEAD"]);
    std::fs::write(root.join("kernels/gemv.hip"), "v2\n").unwrap();
    std::fs::write(root.join("src/dispatch.rs"), "v2\n").unwrap();
    git(root, &["commit", "-qam", "two"]);
    let c2 = git(root, &["rev-parse", "HEAD"]);
    (c1, c2)
}

#[test]
fn stale_binary_and_allowed_files_are_invalid() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let (c1, c2) = two_commit_repo(&repo);
    let wt = d.path().join("wt");
    let base = katlas_eval::worktree::prepare(&repo, &c1, &wt, Some("echo built > built.txt")).unwrap();
    let cand = katlas_eval::worktree::prepare(&repo, "HEAD", &wt, None).unwrap();
    assert_eq!(cand.commit, c2);
    assert!(base.path.join("built.txt").exists(), "build ran in the worktree");
    assert!(!repo.join("built.txt").exists(), "the user's checkout is untouched");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "user's tree still clean");
    // Both sides run the same prebuilt binary from a shared build directory (in no git
    // repository, so it could be these sources' build) although their sources differ: stale.
    let build = d.path().join("build");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::copy(SPIN, build.join("bench")).unwrap();
    let prebuilt = |label: &str, name: &str, cwd: &Path| {
        let mut s = side(label, name, &["--iters", "1000"], cwd);
        s.argv[0] = build.join("bench").display().to_string();
        s
    };
    let mut a = input(prebuilt("A", "baseline", &base.path));
    a.source_root = Some(base.path.clone());
    let mut b = input(prebuilt("B", "candidate", &cand.path));
    b.source_root = Some(cand.path.clone());
    let r = run_eval(&spec(d.path(), vec![a.clone(), b.clone()], Plan::fixed(3)), &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid);
    assert!(r.result.reasons.iter().any(|x| x.contains("stale binary")), "{:?}", r.result.reasons);
    assert!(r.outcome.is_none(), "nothing measured");
    // Allowed files: the candidate changed src/dispatch.rs outside kernels/.
    let changed = katlas_eval::worktree::changed_files(&repo, &c1, &c2).unwrap();
    assert_eq!(changed, vec!["kernels/gemv.hip", "src/dispatch.rs"]);
    let mut s = spec(
        d.path(),
        vec![input(side("A", "baseline", &["--iters", "1000"], d.path())), input(side("B", "candidate", &["--iters", "1000"], d.path()))],
        Plan::fixed(3),
    );
    s.allowed_files = Some((vec!["kernels/*.hip".into()], changed));
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid);
    assert!(r.result.reasons.iter().any(|x| x.contains("allowed files breached: src/dispatch.rs")), "{:?}", r.result.reasons);
    let ledger = katlas_eval::ledger::read(&d.path().join("ledger.jsonl")).unwrap();
    assert_eq!(ledger.records.len(), 2, "rejections are recorded too");
    // Rebuilt binaries, but both load the same precompiled kernel blob: stale code objects.
    for (wt, tag) in [(&base.path, "old"), (&cand.path, "new")] {
        std::fs::write(wt.join("bench-bin"), tag).unwrap();
        std::fs::write(wt.join("kernels.hsaco"), "same blob").unwrap();
    }
    let blob_side = |label: &str, name: &str, wt: &Path| {
        let mut s = input(Side {
            label: label.into(),
            name: name.into(),
            argv: vec!["sh".into(), "-c".into(), format!("{SPIN} --iters 1000; echo code_object=kernels.hsaco")],
            env: BTreeMap::new(),
            cwd: wt.to_path_buf(),
        });
        s.source_root = Some(wt.to_path_buf());
        s.binary = Some("bench-bin".into());
        s
    };
    let mut s = spec(d.path(), vec![blob_side("A", "baseline", &base.path), blob_side("B", "candidate", &cand.path)], Plan::fixed(3));
    s.dir = d.path().join("blob");
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    assert!(r.result.reasons[0].contains("stale code objects"), "{:?}", r.result.reasons);
    assert_eq!(r.result.sides[1].identity.code_objects.len(), 1);
}

#[test]
fn faster_than_light_is_invalid() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let a = side("A", "baseline", &["--iters", "300000", "--bytes", "1e6"], d.path());
    // Claims to move 1 TB per run in well under a second.
    let b = side("B", "candidate", &["--iters", "300000", "--bytes", "1e12"], d.path());
    let mut s = spec(d.path(), vec![input(a), input(b)], Plan::fixed(3));
    s.sol = Some(SolSpec {
        bytes: None,
        bytes_key: Some("bytes".into()),
        time_key: "elapsed_ms".into(),
        peak_gbps: 960.0,
        peak_source: "test".into(),
        margin: 0.05,
    });
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    assert!(r.result.reasons[0].contains("faster than the speed of light"));
}

#[test]
fn crashing_candidate_and_failed_route_are_incorrect() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let a = side("A", "baseline", &["--iters", "1000"], d.path());
    let b = side("B", "candidate", &["--iters", "1000", "--fail"], d.path());
    let r = run_eval(&spec(d.path(), vec![input(a.clone()), input(b)], Plan::fixed(3)), &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Incorrect, "{:?}", r.result.reasons);
    // The route skips on the candidate's tree only (a marker file there), passes on the baseline's.
    let (da, db) = (d.path().join("side-a"), d.path().join("side-b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    std::fs::write(db.join("skip-here"), "").unwrap();
    let route = |cmd: &str| vec![("numeric".to_string(), Some(katlas_eval::routes::RouteSpec { commands: vec![cmd.into()], ..Default::default() }))];
    let sides = || vec![input(side("A", "baseline", &["--iters", "1000"], &da)), input(side("B", "candidate", &["--iters", "1000"], &db))];
    let mut s = spec(d.path(), sides(), Plan::fixed(3));
    s.dir = d.path().join("eval2");
    s.correctness = route("if [ -e skip-here ]; then exit 77; fi");
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Incorrect, "SKIP never counts as PASS: {:?}", r.result.reasons);
    assert!(r.result.reasons[0].contains("SKIP"));
    // A check that fails on the baseline too cannot judge the candidate: invalid, saying so.
    let mut s = spec(d.path(), sides(), Plan::fixed(3));
    s.dir = d.path().join("eval3");
    s.correctness = route("echo 'E   RuntimeError: not supported on this GPU'; echo '1 failed in 0.1s'; exit 1");
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    let why = r.result.reasons.join("\n");
    assert!(why.contains("fails on the baseline too") && why.contains("RuntimeError: not supported on this GPU"), "{why}");
}

#[test]
fn env_variant_reports_route_change() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let mut a = side("A", "KATLAS_SPIN_KERNEL=gemv_wave32", &["--iters", "200000"], d.path());
    a.env.insert("KATLAS_SPIN_KERNEL".into(), "gemv_wave32".into());
    let mut b = side("B", "KATLAS_SPIN_KERNEL=gemv_wave64", &["--iters", "200000"], d.path());
    b.env.insert("KATLAS_SPIN_KERNEL".into(), "gemv_wave64".into());
    let mut ia = input(a);
    ia.knobs.insert("KATLAS_SPIN_KERNEL".into(), "gemv_wave32".into());
    let mut ib = input(b);
    ib.knobs.insert("KATLAS_SPIN_KERNEL".into(), "gemv_wave64".into());
    let mut s = spec(d.path(), vec![ia.clone(), ib.clone()], Plan::fixed(3));
    s.knobs.insert("KATLAS_SPIN_KERNEL".into());
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_ne!(r.result.verdict, Verdict::Invalid, "declared knob may differ: {:?}", r.result.reasons);
    assert!(r.result.route_changes.iter().any(|c| c.contains("gemv_wave64") && c.contains("appears")), "{:?}", r.result.route_changes);
    // Undeclared, the same env difference is an identity mismatch.
    let mut s2 = spec(d.path(), vec![ia, ib], Plan::fixed(3));
    s2.dir = d.path().join("e2");
    let cx2 = CaptureContext { env_prefixes: vec!["KATLAS_".into()], ..cx() };
    let r = run_eval(&s2, &cx2, None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
}

#[test]
fn reference_identity_from_another_host_needs_cross_host() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let sides = || vec![input(side("A", "baseline", &["--iters", "1000"], d.path())), input(side("B", "candidate", &["--iters", "1000"], d.path()))];
    let mut reference = katlas_model::Identity::default();
    reference.host.hostname = Some("some-other-host-katlas".into());
    let mut s = spec(d.path(), sides(), Plan::fixed(3));
    s.reference_identity = Some(reference.clone());
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_eq!(r.result.verdict, Verdict::Invalid);
    assert!(r.result.reasons.iter().any(|x| x.contains("host differs")), "{:?}", r.result.reasons);
    let mut s = spec(d.path(), sides(), Plan::fixed(3));
    s.dir = d.path().join("x");
    s.reference_identity = Some(reference);
    s.cross_host = true;
    let r = run_eval(&s, &cx(), None).unwrap();
    assert_ne!(r.result.verdict, Verdict::Invalid, "{:?}", r.result.reasons);
    assert!(r.result.cross_host);
    assert!(r.result.reasons.iter().any(|x| x.contains("--cross-host")));
}

#[test]
fn old_worktrees_are_pruned_least_recently_used_first() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let (c1, c2) = two_commit_repo(&repo);
    let wt = d.path().join("wt");
    let a = katlas_eval::worktree::prepare(&repo, &c1, &wt, None).unwrap();
    // c1 was used long ago, c2 just now.
    std::fs::write(wt.join(".used").join(a.path.file_name().unwrap()), "1").unwrap();
    let b = katlas_eval::worktree::prepare(&repo, &c2, &wt, None).unwrap();
    let listed = |r: &std::path::Path| git(r, &["worktree", "list", "--porcelain"]);
    assert!(listed(&repo).contains(&a.path.display().to_string()));
    // A protected worktree stays even beyond the kept count.
    let gone = katlas_eval::worktree::prune(&repo, &wt, 0, std::slice::from_ref(&a.path)).unwrap();
    assert_eq!(gone, vec![b.path.clone()]);
    let b = katlas_eval::worktree::prepare(&repo, &c2, &wt, None).unwrap();
    let gone = katlas_eval::worktree::prune(&repo, &wt, 1, &[]).unwrap();
    assert_eq!(gone, vec![a.path.clone()], "the least recently used goes");
    assert!(!a.path.exists() && b.path.exists());
    assert!(!listed(&repo).contains(&a.path.display().to_string()), "git forgot it too");
    assert!(katlas_eval::worktree::prune(&repo, &wt, 1, &[]).unwrap().is_empty());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "user's tree untouched");
}
