//! The README's exit-code contract for every verdict of `eval`, `ab` and `gate`
//! (0 positive, 1 negative or failed gate, 2 bad input, 3 missing environment), and
//! gates that know which way is better (issue 14, items 2 and 3).

use std::path::Path;

use crate::support::cli;
use cli::{git, katlas, katlas_cmd, quick_eval};

fn verdict_and_code(dir: &Path, args: &[&str]) -> (String, i32) {
    let mut a = vec!["eval"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--telemetry", "false", "--no-ledger", "--fresh", "--format", "json"]);
    let o = katlas(dir, &a);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)));
    (v["verdict"].as_str().unwrap().to_string(), o.status.code().unwrap_or(-1))
}

/// A command whose `tok_s` follows `expr` of a per-command counter `n` (0, 1, 2 …).
fn counted(file: &str, expr: &str) -> String {
    cli::counted(file, "tok_s", expr)
}

#[test]
fn every_eval_verdict_has_its_exit_code() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    std::fs::write(p.join("katlas.toml"), "[route.numeric]\ncommands = [\"false\"]\n").unwrap();
    let wobble_a = counted("a", "100 + (n % 2) * 20");
    let wobble_b = counted("b", "101 + (n % 2) * 20");
    let drift_a = counted("c", "100 + n * 10");
    let drift_b = counted("e", "100 + n * 10");
    let cases: Vec<(&str, Vec<&str>, i32)> = vec![
        ("improved", vec!["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--metric", "tok_s", "-n", "4"], 0),
        ("regressed", vec!["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=70", "--metric", "tok_s", "-n", "4"], 1),
        ("no_change", vec!["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=100 ", "--metric", "tok_s", "-n", "4"], 1),
        ("inconclusive", vec!["--baseline", &wobble_a, "--candidate", &wobble_b, "--metric", "tok_s", "-n", "4", "--cv-limit", "0.5"], 1),
        ("unstable", vec!["--baseline", &drift_a, "--candidate", &drift_b, "--metric", "tok_s", "-n", "6"], 1),
        ("incorrect", vec!["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--metric", "tok_s", "-n", "3", "--claim", "numeric"], 1),
        ("needs_baseline", vec!["--baseline", "false", "--candidate", "echo tok_s=1", "--metric", "tok_s", "-n", "3"], 1),
        (
            "invalid",
            vec!["--baseline", "echo time_ms=10", "--candidate", "echo time_ms=1", "--metric", "time_ms", "-n", "3", "--bytes", "1e12", "--peak-gbps", "100"],
            1,
        ),
    ];
    for (want, args, code) in cases {
        let (v, c) = verdict_and_code(p, &args);
        assert_eq!(v, want, "{args:?}");
        assert_eq!(c, code, "{want}: exit {c}");
    }
    // --expect makes another verdict the positive one.
    let (v, c) =
        verdict_and_code(p, &["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=70", "--metric", "tok_s", "-n", "4", "--expect", "regressed"]);
    assert_eq!((v.as_str(), c), ("regressed", 0));
}

#[test]
fn ab_exits_1_when_a_comparison_is_not_decided() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join(".gitignore"), ".katlas/\ncount\n").unwrap();
    std::fs::write(p.join("speed"), "100\n").unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "a"]);
    let a = git(p, &["rev-parse", "HEAD"]);
    std::fs::write(p.join("speed"), "130\n").unwrap();
    git(p, &["commit", "-qam", "b"]);
    let b = git(p, &["rev-parse", "HEAD"]);
    let steady = "echo tok_s=$(cat speed)";
    let o = katlas(p, &["ab", &a, &b, "--command", steady, "--metric", "tok_s", "-n", "4", "--telemetry", "false", "--no-ledger"]);
    assert_eq!(o.status.code(), Some(0), "decided: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // Each run drifts upwards: the sides are unstable, so ab cannot tell (it used to exit 0).
    let drifting = "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; echo tok_s=$(( $(cat speed) + n * 15 ))";
    let o = katlas(p, &["ab", &a, &b, "--command", drifting, "--metric", "tok_s", "-n", "6", "--telemetry", "false", "--no-ledger", "--fresh"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("unstable"), "{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
}

#[test]
fn gate_fails_a_time_that_rose_passes_one_that_fell_and_refuses_unknown_keys() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join("tests/speed-baselines")).unwrap();
    std::fs::write(p.join("tests/speed-baselines/gfx1100.txt"), "time_ms=10\n").unwrap();
    let gate = |cmd: &str| katlas(p, &["gate", "--arch", "gfx1100", "--command", cmd, "-n", "3"]);
    let o = gate("echo time_ms=72");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "a 7x slower time fails: {out}");
    assert!(out.contains("above the ceiling") && out.contains("FAIL"), "{out}");
    let o = gate("echo time_ms=5");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    // A key whose name gives no direction is refused before anything runs.
    std::fs::write(p.join("tests/speed-baselines/gfx1100.txt"), "score=10\n").unwrap();
    let o = katlas(p, &["gate", "--arch", "gfx1100", "--command", "touch ran; echo score=11", "-n", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no direction for score"));
    assert!(!p.join("ran").exists(), "nothing measured for an ungateable file");
    // ... and accepted once katlas.toml says which way is better.
    std::fs::write(p.join("katlas.toml"), "[gate]\ngoals = { score = \"minimize\" }\n").unwrap();
    let o = katlas(p, &["gate", "--arch", "gfx1100", "--command", "echo score=11", "-n", "1"]);
    assert_eq!(o.status.code(), Some(1), "a minimized score that rose 10% fails: {}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn a_python_bench_with_a_real_speedup_is_improved_not_a_stale_binary() {
    // The stale-binary check hashed /usr/bin/python3 (the same on both sides) and
    // rejected a real 3x speedup as `invalid: stale binary` (issue 15).
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join(".gitignore"), ".katlas/\n").unwrap();
    // The bench does the work, and reports a time set by the work's size (a quarter of what it
    // takes here, so the wall time shows the saving on a machine four times faster), with a
    // little per-process jitter: what is tested is that the sides' shared interpreter is no
    // stale binary, and a busy machine's stall (a slow first run reads as state shared between
    // runs) must not decide the verdict.
    let bench = |work: u32| {
        format!("import os\ns = 0\nfor i in range({work}):\n    s += i * i\nprint(f'time_ms={{{work} / 40000 * (1 + (os.getpid() % 7) * 0.002):.3f}}')\n")
    };
    std::fs::write(p.join("bench.py"), bench(600_000)).unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "slow"]);
    let base = git(p, &["rev-parse", "HEAD"]);
    std::fs::write(p.join("bench.py"), bench(200_000)).unwrap();
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"].into_iter().find(|p| Path::new(p).exists()).expect("python3");
    let cmd = format!("{python} bench.py");
    let o = katlas(
        p,
        &[
            "eval",
            "--baseline",
            &base,
            "--command",
            &cmd,
            "--metric",
            "time_ms",
            "-n",
            "6",
            "--cv-limit",
            "0.5",
            "--telemetry",
            "false",
            "--no-ledger",
            "--format",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["verdict"], "improved", "{v}");
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn a_noisy_aa_stores_no_band_and_a_true_slowdown_is_never_no_change() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    // A deliberately noisy command: runs swing between 70 and 130 (robust CV ~30%).
    let noisy = counted("n1", "100 + ((n * 7) % 5 - 2) * 15");
    let o = katlas(p, &["eval", "--aa", "--command", &noisy, "--metric", "tok_s", "-n", "8", "--telemetry", "false", "--format", "json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "a refused calibration is negative: {err}");
    assert!(err.contains("A/A calibration refused") && err.contains("measured robust CV"), "{err}");
    assert!(!p.join(".katlas/noise.json").exists(), "no band stored");
    // The same command 10% slower: whatever the band, never `no_change`, never a reject.
    let slower = counted("n2", "(100 + ((n * 7) % 5 - 2) * 15) * 9 / 10");
    let o = katlas(p, &["eval", "--baseline", &noisy, "--candidate", &slower, "--metric", "tok_s", "-n", "8", "--telemetry", "false", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_ne!(v["verdict"], "no_change", "{v}");
    assert!(v["reasons"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("noise band ±1.00% from the default")), "{v}");
    // Even against an explicitly wide band, a no_change becomes inconclusive.
    let o = katlas(
        p,
        &[
            "eval",
            "--baseline",
            &noisy,
            "--candidate",
            &slower,
            "--metric",
            "tok_s",
            "-n",
            "8",
            "--threshold",
            "0.31",
            "--cv-limit",
            "0.9",
            "--telemetry",
            "false",
            "--fresh",
            "--format",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "inconclusive", "{v}");
    let ledger = std::fs::read_to_string(p.join(".katlas/ledger.jsonl")).unwrap();
    assert!(!ledger.contains("\"reject\""), "no reject reached the ledger: {ledger}");
}

#[test]
fn a_metric_typo_stops_after_the_first_run_and_writes_no_ledger_entry() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    let bench = "echo run >> runs.log; echo cpu_ms=12.5; echo wall_ms=13";
    let o = katlas(p, &["eval", "--baseline", bench, "--candidate", bench, "--metric", "cpu_msx", "-n", "5", "--telemetry", "false"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("printed no `cpu_msx`") && err.contains("cpu_ms, wall_ms"), "{err}");
    let runs = std::fs::read_to_string(p.join("runs.log")).unwrap().lines().count();
    assert!(runs <= 2, "stopped at the first run ({runs} runs)");
    assert!(!p.join(".katlas/ledger.jsonl").exists(), "no ledger entry for a failed setup");
    // --no-ledger prints no ledger id.
    let o = katlas(
        p,
        &["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--metric", "tok_s", "-n", "3", "--telemetry", "false", "--no-ledger"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("ledger:"), "{out}");
}

#[test]
fn eight_identical_concurrent_evals_leave_one_consistent_sample_set() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_path_buf();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    let args = [
        "eval",
        "--baseline",
        "sleep 0.05; echo tok_s=100",
        "--candidate",
        "sleep 0.05; echo tok_s=130",
        "--metric",
        "tok_s",
        "-n",
        "4",
        "--telemetry",
        "false",
    ];
    let kids: Vec<_> =
        (0..8).map(|_| katlas_cmd(&p).args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap()).collect();
    let outs: Vec<_> = kids.into_iter().map(|k| k.wait_with_output().unwrap()).collect();
    let ran = outs.iter().filter(|o| o.status.code() == Some(0)).count();
    let busy = outs.iter().filter(|o| String::from_utf8_lossy(&o.stderr).contains("another katlas eval is running")).count();
    assert!(
        ran >= 1 && ran + busy == 8,
        "ran {ran}, refused {busy}: {:?}",
        outs.iter().map(|o| String::from_utf8_lossy(&o.stderr).to_string()).collect::<Vec<_>>()
    );
    // Every eval directory holds one sample per planned run, and each ledger entry cites
    // the digest its samples file has.
    let ledger = std::fs::read_to_string(p.join(".katlas/ledger.jsonl")).unwrap();
    assert_eq!(ledger.lines().count(), ran);
    for line in ledger.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        let path = p.join(e["samples"]["path"].as_str().unwrap());
        let text = std::fs::read(&path).unwrap();
        assert_eq!(e["samples"]["md5"].as_str().unwrap(), katlas_model::digest::md5_hex(&text), "{}", path.display());
        let mut seqs: Vec<u64> =
            String::from_utf8_lossy(&text).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"].as_u64().unwrap()).collect();
        let n = seqs.len();
        seqs.sort();
        seqs.dedup();
        assert_eq!(seqs.len(), n, "no sample written twice");
    }
}

#[test]
fn a_torn_sample_line_is_reported_on_resume() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    let args = quick_eval(&["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--metric", "tok_s"]);
    let o = katlas(p, &args);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let samples = p.join(v["samples"]["path"].as_str().unwrap());
    // Kill mid-write: the last line torn, and the result not yet written.
    let text = std::fs::read_to_string(&samples).unwrap();
    std::fs::write(&samples, &text[..text.len() - 20]).unwrap();
    std::fs::remove_file(samples.parent().unwrap().join("result.json")).unwrap();
    let o = katlas(p, &args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert!(v["reasons"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("not resumed; that run is measured again")), "{v}");
}

#[test]
fn zero_and_negative_times_are_invalid_samples_not_wins() {
    // Fake wins of issue 15: time_ms=0 (infinitely fast) and a negative time were `improved`.
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    for bad in ["0", "-5"] {
        let cand = format!("echo time_ms={bad}");
        let (v, c) = verdict_and_code(
            p,
            &["--baseline", "echo time_ms=10", "--candidate", &cand, "--metric", "time_ms", "-n", "3", "--bytes", "1e6", "--peak-gbps", "1000"],
        );
        assert_ne!(v, "improved", "time_ms={bad}");
        assert_eq!(c, 1);
    }
}

/// A candidate truly 30% slower on a noisy machine (robust CV about 13% on both sides): the
/// interval lies wholly on the slower side, so it is `regressed` with the spread named, not
/// `unstable`; a 30% win under the same spread stays unclaimed.
#[test]
fn a_clear_regression_under_spread_is_regressed() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    let noisy = counted("a", "100 + (n % 2) * 20");
    let slower = counted("b", "70 + (n % 2) * 14");
    let faster = counted("c", "130 + (n % 2) * 26");
    let o = katlas(
        p,
        &["eval", "--baseline", &noisy, "--candidate", &slower, "--metric", "tok_s", "-n", "8", "--telemetry", "false", "--no-ledger", "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["verdict"], "regressed", "{v}");
    assert_eq!(o.status.code(), Some(1));
    let reasons: Vec<&str> = v["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert!(reasons.iter().any(|r| r.contains("spread (robust CV)")), "{reasons:?}");
    let (v, c) = verdict_and_code(p, &["--baseline", &noisy, "--candidate", &faster, "--metric", "tok_s", "-n", "8"]);
    assert_eq!((v.as_str(), c), ("unstable", 1));
}
