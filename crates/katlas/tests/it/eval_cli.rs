//! `katlas eval|ab|ledger|gate|admissions|route|check-numeric` end to end:
//! exit codes and the JSON contract.

use std::path::Path;
use std::process::Command;

use crate::support::cli;
use cli::{code, counted, git, katlas, katlas_cmd, quick_eval, stdout_json};

fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    d
}

#[test]
fn eval_verdicts_and_exit_codes() {
    let d = project();
    let p = d.path();
    let base = ["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=120", "--metric", "tok_s", "-n", "4", "--telemetry", "false"];
    let o = katlas(p, &[&base[..], &["--format", "json"]].concat());
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["schema"], "katlas.eval.result.v1");
    assert_eq!(r["verdict"], "improved");
    assert_eq!(r["protocol"]["order"], "abba");
    assert_eq!(r["protocol"]["n_per_side"], serde_json::json!([4, 4]));
    assert!((r["effects"][0]["relative_change"].as_f64().unwrap() - 0.2).abs() < 1e-9);
    // The same comparison expected to be no_change: exit 1.
    let o = katlas(p, &[&base[..], &["--expect", "no_change", "--fresh"]].concat());
    assert_eq!(code(&o), 1);
    // Bad input: 2. Missing program: 3.
    assert_eq!(code(&katlas(p, &[&base[..], &["--threshold", "7"]].concat())), 2);
    assert_eq!(code(&katlas(p, &["eval", "--metric", "x"])), 2);
    let o = katlas(p, &["eval", "--baseline", "no-such-katlas-bench", "--candidate", "no-such-katlas-bench", "--metric", "x", "--telemetry", "false"]);
    assert_eq!(code(&o), 3, "{}", String::from_utf8_lossy(&o.stderr));
    // Every verdict is in the ledger, filterable.
    let o = katlas(p, &["ledger", "ls", "--verdict", "improved", "--format", "json"]);
    assert_eq!(code(&o), 0);
    let entries = stdout_json(&o);
    assert_eq!(entries.as_array().unwrap().len(), 2);
    assert_eq!(entries[0]["schema"], "katlas.ledger.v1");
    assert_eq!(entries[0]["disposition"]["kind"], "promote");
    let id = entries[0]["id"].as_str().unwrap();
    let o = katlas(p, &["ledger", "show", &id[..10]]);
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("verdict:     improved"));
    assert_eq!(code(&katlas(p, &["ledger", "show", "zzzz"])), 2);
    assert_eq!(code(&katlas(p, &["ledger", "ls", "--verdict", "better"])), 2);
}

/// `katlas eval --aa` of `command` on `tok_s`, `n` runs a side, the result as JSON.
fn aa(p: &Path, command: &str, n: &str) -> std::process::Output {
    katlas(p, &["eval", "--aa", "--command", command, "--metric", "tok_s", "-n", n, "--telemetry", "false", "--format", "json"])
}

#[test]
fn aa_calibrates_the_noise_threshold() {
    let d = project();
    let p = d.path();
    // The counter makes samples differ: 100, 101, 102 … so the A/A interval has width.
    let cmd = counted("c", "tok_s", "100 + n % 3");
    let o = aa(p, &cmd, "6");
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert_ne!(stdout_json(&o)["verdict"], "improved");
    let noise: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join(".katlas/noise.json")).unwrap()).unwrap();
    let entry = noise.as_object().unwrap().values().next().unwrap();
    let t = entry["band"].as_f64().unwrap();
    assert_eq!(entry["runs_per_side"], 6, "{entry}");
    assert!(t > 0.0 && t < 0.05, "{t}");
    // The next eval of the same command uses the calibrated threshold.
    let o =
        katlas(p, &["eval", "--baseline", &cmd, "--candidate", "echo tok_s=150", "--metric", "tok_s", "-n", "3", "--telemetry", "false", "--format", "json"]);
    assert!((stdout_json(&o)["noise_threshold"].as_f64().unwrap() - t).abs() < 1e-12);
}

/// The ledger's entries, one JSON value each (none when the file is absent).
fn ledger_lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p.join(".katlas/ledger.jsonl")).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_refused_aa_adds_no_ledger_entry() {
    let d = project();
    let p = d.path();
    // Runs that swing between 70 and 130 (robust CV ~30%): the A/A is refused.
    let o = aa(p, &counted("n1", "tok_s", "100 + ((n * 7) % 5 - 2) * 15"), "8");
    assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("A/A calibration refused"), "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["ledger_id"], serde_json::Value::Null, "a refused A/A cites no ledger entry: {r}");
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join(format!(".katlas/evals/{}/result.json", r["eval_id"].as_str().unwrap()))).unwrap()).unwrap();
    assert_eq!(stored["ledger_id"], serde_json::Value::Null, "{stored}");
    assert_eq!(ledger_lines(p).len(), 0, "a refused A/A wrote {:?}", ledger_lines(p));
    // A calibration that is admitted is recorded, as any verdict is.
    let o = aa(p, &counted("n2", "tok_s", "100 + n % 3"), "6");
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let entries = ledger_lines(p);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["id"], stdout_json(&o)["ledger_id"]);
}

/// The `compared` cell of each `ledger ls` row, by id prefix.
fn compared_cells(p: &Path) -> Vec<(String, String)> {
    let o = katlas(p, &["ledger", "ls"]);
    assert_eq!(code(&o), 0);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let cells = |l: &str| l.trim_matches(|c| c == '│' || c == ' ').split('┆').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let mut rows = out.lines().filter(|l| l.starts_with('│')).map(cells);
    let head = rows.next().unwrap_or_else(|| panic!("no table: {out}"));
    let i = head.iter().position(|h| h == "compared").unwrap_or_else(|| panic!("no `compared` column in {head:?}"));
    rows.map(|r| (r[0].clone(), r[i].clone())).collect()
}

#[test]
fn ledger_ls_names_what_each_eval_compared() {
    let d = project();
    let p = d.path();
    let run = |args: &[&str]| {
        let o = katlas(p, &[&["eval"][..], args, &["--metric", "tok_s", "-n", "3", "--telemetry", "false", "--format", "json"]].concat());
        stdout_json(&o)["ledger_id"].as_str().unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&o.stderr))).to_string()
    };
    // Two ad-hoc evals: both sides are `baseline` and `candidate`; only the commands differ.
    let first = run(&["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=120"]);
    let second = run(&["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=90"]);
    let variant = run(&["--command", "echo tok_s=$((100 + KV))", "--variant", "KV=0", "--variant", "KV=7"]);
    let rows = compared_cells(p);
    let cell = |id: &str| rows.iter().find(|(k, _)| id.starts_with(k.as_str())).map(|(_, c)| c.clone()).unwrap_or_else(|| panic!("{id} in {rows:?}"));
    assert_eq!(cell(&first), "echo tok_s=100 → echo tok_s=120");
    assert_eq!(cell(&second), "echo tok_s=100 → echo tok_s=90");
    assert_eq!(cell(&variant), "KV=0 → KV=7");
    let show = String::from_utf8_lossy(&katlas(p, &["ledger", "show", &second]).stdout).into_owned();
    assert!(show.lines().any(|l| l == "compared:    echo tok_s=100 → echo tok_s=90"), "{show}");
    // The JSON carries what the column is made of: each side's label, ref and command.
    let j = stdout_json(&katlas(p, &["ledger", "show", &second, "--format", "json"]));
    assert_eq!(j["candidate"]["command"], serde_json::json!(["sh", "-c", "echo tok_s=90"]), "{j}");
    assert_eq!(j["baseline"]["label"], "baseline", "{j}");
}

#[test]
fn env_variant_and_route_change() {
    let d = project();
    let command = "echo tok_s=$((100 + KV)); echo kernel_seen=attn_$KV";
    let o = katlas(
        d.path(),
        &["eval", "--command", command, "--variant", "KV=0", "--variant", "KV=10", "--metric", "tok_s", "-n", "3", "--telemetry", "false", "--format", "json"],
    );
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "improved");
    assert_eq!(r["sides"][1]["knobs"]["KV"], "10");
    let changes = r["route_changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c.as_str().unwrap().contains("attn_10")), "{changes:?}");
}

#[test]
fn gate_fails_closed_and_updates_upwards() {
    let d = project();
    let p = d.path();
    let dir = p.join("tests/speed-baselines");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("../katlas-eval/tests/data/speed-baselines-gfx1100.txt"), dir.join("gfx1100.txt")).unwrap();
    assert_eq!(code(&katlas(p, &["gate", "--arch", "gfx1100"])), 1, "nothing checked");
    assert_eq!(code(&katlas(p, &["gate", "--arch", "gfx942"])), 1, "no baseline file");
    let o = katlas(
        p,
        &["gate", "--arch", "gfx1100", "--command", "echo 4b_mq4_gen_tok_s=200", "-n", "3", "--key", "4b_mq4_gen_tok_s", "--update", "--format", "json"],
    );
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout_json(&o)["passed"], true);
    let text = std::fs::read_to_string(dir.join("gfx1100.txt")).unwrap();
    assert!(text.contains("4b_mq4_gen_tok_s=200.0") && text.contains("#9b_mq4_pp128_prefill_tok_s=1190.0"), "{text}");
    let o = katlas(p, &["gate", "--arch", "gfx1100", "--command", "echo 4b_mq4_gen_tok_s=150", "-n", "3", "--key", "4b_mq4_gen_tok_s"]);
    assert_eq!(code(&o), 1, "25% below the floor");
    assert_eq!(code(&katlas(p, &["gate", "--arch", "gfx1100", "--allow-lower"])), 2, "--allow-lower needs --reason");
}

#[test]
fn admissions_check_and_query() {
    let d = project();
    let p = d.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../katlas-eval/tests/data/admissions.yml");
    let f = fixture.to_str().unwrap();
    assert_eq!(code(&katlas(p, &["admissions", "check", f])), 0);
    let exact = ["admissions", "query", "--file", f, "--gpu", "gfx1201", "--quant", "mq4", "--kv", "q8", "--max-seq", "2048"];
    let full = [&exact[..], &["--decode-mode", "plain_AR", "--pp", "1", "--tp", "1", "--transport", "HIP"]].concat();
    assert_eq!(code(&katlas(p, &full)), 0);
    assert_eq!(code(&katlas(p, &exact)), 1, "unpinned route fields do not match");
    let mut other = full.clone();
    other[5] = "gfx1100";
    assert_eq!(code(&katlas(p, &other)), 1);
    // No registry at all admits nothing.
    assert_eq!(code(&katlas(p, &["admissions", "query", "--gpu", "gfx1201", "--quant", "mq4", "--kv", "q8", "--max-seq", "2048"])), 1);
    let wild = p.join("wild.yml");
    std::fs::write(&wild, std::fs::read_to_string(&fixture).unwrap().replace("gpu: gfx1201", "gpu: \"*\"")).unwrap();
    let o = katlas(p, &["admissions", "check", wild.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stdout).contains("wildcard"));
}

#[test]
fn routes_fail_closed() {
    let d = project();
    let p = d.path();
    std::fs::write(p.join("katlas.toml"), "[route.kernel-numeric]\ncommands = [\"true\"]\n[route.skips]\ncommands = [\"exit 77\"]\n").unwrap();
    assert_eq!(code(&katlas(p, &["route", "kernel-numeric"])), 0);
    assert_eq!(code(&katlas(p, &["route", "kernel-numeric", "--run"])), 0);
    let o = katlas(p, &["route", "skips", "--run"]);
    assert_eq!(code(&o), 1, "SKIP is not PASS");
    assert!(String::from_utf8_lossy(&o.stdout).contains("SKIP"));
    let o = katlas(p, &["route", "wmma-layout"]);
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stdout).contains("BLOCKED"));
    // An eval whose claim is unknown is incorrect, never a win.
    let o = katlas(
        p,
        &[
            "eval",
            "--baseline",
            "echo t_s=1",
            "--candidate",
            "echo t_s=2",
            "--metric",
            "t_s",
            "-n",
            "3",
            "--claim",
            "nope",
            "--telemetry",
            "false",
            "--format",
            "json",
        ],
    );
    assert_eq!(code(&o), 1);
    assert_eq!(stdout_json(&o)["verdict"], "incorrect");
}

#[test]
fn check_numeric_histograms() {
    let d = project();
    let p = d.path();
    let (rows, cols) = (16usize, 32usize);
    let a: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let mut b = a.clone();
    for r in 0..rows {
        b[r * cols + 5] += 1.0; // one bad column: lane 5
    }
    let write = |name: &str, v: &[f32]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(p.join(name), bytes).unwrap();
    };
    write("a.bin", &a);
    write("b.bin", &b);
    assert_eq!(code(&katlas(p, &["check-numeric", "a.bin", "a.bin", "--dims", "16,32"])), 0);
    let o = katlas(p, &["check-numeric", "b.bin", "a.bin", "--dims", "16,32", "--format", "json"]);
    assert_eq!(code(&o), 1);
    let r = stdout_json(&o);
    assert_eq!(r["bad"], 16);
    assert_eq!(r["by_lane"][5], 16);
    assert_eq!(r["by_col"][5], 16);
    let o = katlas(p, &["check-numeric", "b.bin", "a.bin", "--dims", "16,32"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("bad cells only in lanes [5]"));
    assert_eq!(code(&katlas(p, &["check-numeric", "a.bin", "a.bin", "--dims", "10,10"])), 2);
}

#[test]
fn eval_and_gate_sections_of_katlas_toml() {
    let d = project();
    let p = d.path();
    std::fs::write(
        p.join("katlas.toml"),
        "[eval]\nthreshold = 0.3\nmin_effect = 0.4\nwarmups = 0\norder = \"shuffle\"\n\n[gate]\nbaselines = \"floors\"\ncommand = \"echo gen_tok_s=101\"\nruns = 2\n",
    )
    .unwrap();
    let ab = ["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=120", "--metric", "tok_s", "-n", "3", "--telemetry", "false"];
    let o = katlas(p, &[&ab[..], &["--format", "json"]].concat());
    assert_eq!(code(&o), 1, "20% is inside a 30% band: {}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "no_change");
    assert_eq!(r["noise_threshold"], 0.3);
    assert_eq!(r["protocol"]["order"], "shuffle");
    assert_eq!(r["protocol"]["warmups"], 0);
    // A flag beats the file.
    let o = katlas(p, &[&ab[..], &["--threshold", "0.01", "--fresh"]].concat());
    assert_eq!(code(&o), 0);
    std::fs::create_dir_all(p.join("floors")).unwrap();
    std::fs::write(p.join("floors/gfx1100.txt"), "gen_tok_s=100\n").unwrap();
    let o = katlas(p, &["gate", "--arch", "gfx1100", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout_json(&o)["checks"][0]["n"], 2);
    std::fs::write(p.join("katlas.toml"), "[eval]\nthreshhold = 0.3\n").unwrap();
    let o = katlas(p, &["eval", "--baseline", "echo tok_s=1", "--candidate", "echo tok_s=1", "--metric", "tok_s"]);
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("katlas.toml:2"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn killed_eval_resumes() {
    let d = project();
    let p = d.path();
    let args =
        ["eval", "--baseline", "sleep 0.1; echo tok_s=100", "--candidate", "sleep 0.1; echo tok_s=120", "--metric", "tok_s", "-n", "6", "--telemetry", "false"];
    let mut child = katlas_cmd(p).args(args).stdout(std::process::Stdio::null()).spawn().unwrap();
    // Kill it once a few samples are on disk (14 runs of >= 0.1 s are planned).
    let samples = || -> usize {
        std::fs::read_dir(p.join(".katlas/evals"))
            .ok()
            .and_then(|mut r| r.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path().join("samples.jsonl")).ok())
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let t0 = std::time::Instant::now();
    while samples() < 4 && t0.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let stored = samples();
    assert!((4..14).contains(&stored), "killed mid-eval with {stored} samples stored");
    let o = katlas(p, &args);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("resumed from"), "{out}");
    assert_eq!(samples(), 14, "the resumed eval ran only the missing samples");
}

#[test]
fn task_eval_builds_the_baseline_ref_in_a_worktree() {
    let d = project();
    let p = d.path();
    // bench.sh reports the speed written in speed.txt; the build step copies kernels/speed.in there.
    std::fs::create_dir_all(p.join("kernels")).unwrap();
    std::fs::write(p.join("bench.sh"), "#!/bin/sh\necho tok_s=$(cat speed.txt)\n").unwrap();
    Command::new("chmod").args(["+x", "bench.sh"]).current_dir(p).status().unwrap();
    std::fs::write(p.join("kernels/speed.in"), "100\n").unwrap();
    std::fs::write(p.join(".gitignore"), ".katlas/\nspeed.txt\n").unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "base"]);
    let base = git(p, &["rev-parse", "HEAD"]);
    let task = |allowed: &str| {
        format!(
            r#"{{"schema":"katlas.task.v1","id":"t1","created_at":"2026-11-30T00:00:00Z","origin":{{"kind":"manual"}},
            "objective":"o","hypothesis":"faster gemv","lever":"multirow_gemv","kernel":"gemv",
            "target":{{"arch":"gfx1100","phase":"decode"}},"evidence":{{}},"baseline":{{"git_ref":"{base}"}},
            "allowed_files":[{allowed}],"build":["cp kernels/speed.in speed.txt"],
            "bench":{{"command":["./bench.sh"],"metric":"tok_s","goal":"maximize"}},
            "correctness":[{{"claim":"task","command":"test -s speed.txt"}}],"next":"katlas eval t1"}}"#
        )
    };
    std::fs::create_dir_all(p.join(".katlas/tasks/t1")).unwrap();
    std::fs::write(p.join(".katlas/tasks/t1/task.json"), task(r#""kernels/*.in""#)).unwrap();
    // The candidate: the working tree, 20% faster.
    std::fs::write(p.join("kernels/speed.in"), "120\n").unwrap();
    let o = katlas(p, &["eval", "t1", "-n", "3", "--telemetry", "false", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "improved");
    assert_eq!(r["task_id"], "t1");
    assert_eq!(r["sides"][0]["git_ref"], base.as_str());
    assert_eq!(r["correctness"][0]["outcome"], "PASS");
    assert!(p.join(".katlas/tasks/t1/evals/1/result.json").exists());
    assert_eq!(git(p, &["stash", "list"]), "", "no stash touched");
    assert!(git(p, &["status", "--porcelain"]).contains("kernels/speed.in"), "the user's edit is still there");
    let e = stdout_json(&katlas(p, &["ledger", "ls", "--task", "t1", "--lever", "multirow_gemv", "--format", "json"]));
    assert_eq!(e[0]["arch"], "gfx1100");
    assert_eq!(e[0]["hypothesis"], "faster gemv");
    // An edit outside the allowed files is invalid, naming the file.
    std::fs::write(p.join("bench.sh"), "#!/bin/sh\necho tok_s=$(cat speed.txt)\n# tuned\n").unwrap();
    let o = katlas(p, &["eval", "t1", "-n", "3", "--telemetry", "false", "--format", "json"]);
    assert_eq!(code(&o), 1);
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "invalid");
    assert!(r["reasons"][0].as_str().unwrap().contains("bench.sh"), "{r}");
    assert!(p.join(".katlas/tasks/t1/evals/2/result.json").exists());
}

/// Samples pulled from a team store land where an eval resumes from. They are another host's
/// evidence: never replayed as local measurement, never appended to.
#[test]
fn samples_this_host_did_not_write_are_never_resumed() {
    let d = project();
    let p = d.path();
    // The candidate is truly 2x slower.
    let args = quick_eval(&["--baseline", "echo tok_s=100", "--candidate", "echo tok_s=50", "--metric", "tok_s"]);
    let o = katlas(p, &args);
    assert_eq!(code(&o), 1);
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "regressed");
    let samples = p.join(r["samples"]["path"].as_str().unwrap());
    let dir = samples.parent().unwrap().to_path_buf();
    // A forged copy that says the candidate is 2x faster.
    let forged: String = std::fs::read_to_string(&samples)
        .unwrap()
        .lines()
        .map(|l| if l.contains("\"side\":\"B\"") { l.replace("50", "200") + "\n" } else { l.to_string() + "\n" })
        .collect();
    // 1. Pulled into the directory before any local run of this eval.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&samples, &forged).unwrap();
    let o = katlas(p, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "regressed", "the pulled samples were resumed: {r}\n{err}");
    assert_eq!(code(&o), 1);
    assert!(err.contains("not resuming") && err.contains("not written by this host"), "one line says why: {err}");
    assert_eq!(err.matches("not resuming").count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&samples).unwrap(), forged, "the pulled file is left as it was, not appended to");
    assert_ne!(p.join(r["samples"]["path"].as_str().unwrap()), samples, "measured in a new directory");
    // 2. Appended to an unfinished local eval: the local samples of the same file are not
    // resumed either, and the file is not appended to.
    let own = p.join(r["samples"]["path"].as_str().unwrap());
    let own_dir = own.parent().unwrap().to_path_buf();
    std::fs::remove_file(own_dir.join("result.json")).unwrap();
    let text = std::fs::read_to_string(&own).unwrap();
    let kept: Vec<&str> = text.lines().take(4).collect();
    let tail: Vec<&str> = forged.lines().skip(4).collect();
    let mixed = format!("{}\n{}\n", kept.join("\n"), tail.join("\n"));
    std::fs::write(&own, &mixed).unwrap();
    let o = katlas(p, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "regressed", "{r}\n{err}");
    assert!(err.contains("not resuming") && err.contains("of its 8 stored sample(s)"), "{err}");
    assert_eq!(std::fs::read_to_string(&own).unwrap(), mixed, "never appended to");
    // 3. This host's own unfinished eval still resumes.
    let mine = p.join(r["samples"]["path"].as_str().unwrap());
    std::fs::remove_file(mine.parent().unwrap().join("result.json")).unwrap();
    let o = katlas(p, &[&args[..args.len() - 2], &["--format", "text"]].concat());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("resumed from 8 stored sample(s)"), "{out}{}", String::from_utf8_lossy(&o.stderr));
}

// The fake-win suite (docs/eval.md, "Fake wins"): a task whose kernel `kern.sh N` does N
// units of 50 ms of work and prints the checksum 1+…+N and the time it took; the bench runs
// it on the 4 units in work.txt, the correctness check on 2. Each candidate below fakes a
// win one way; each ends not `improved`, with the reason in one line. A real 2x win is still
// `improved`. Every verdict is decided by a signal, not by timing luck.

const KERN: &str = r#"#!/bin/sh
n=$1
t0=$(date +%s%N)
i=0; sum=0
while [ $i -lt $n ]; do i=$((i+1)); sleep 0.05; sum=$((sum+i)); done
echo checksum=$sum
echo time_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
"#;

/// A kern.sh that runs `pre` first, then `units` units of work (a shell expression of `$1`),
/// printing the checksum `sum` (default: of the units done) and the time times `scale`.
fn kern(pre: &str, units: &str, sum: Option<&str>, scale: &str) -> String {
    format!(
        "#!/bin/sh\n{pre}\nt0=$(date +%s%N)\ni=0; s=0\nwhile [ $i -lt {units} ]; do i=$((i+1)); sleep 0.05; s=$((s+i)); done\necho checksum={}\necho time_ms=$(( ($(date +%s%N) - t0) {scale} / 1000000 ))\n",
        sum.unwrap_or("$s")
    )
}

/// A project whose task `t1` benches kern.sh on `units` units, committed as the baseline;
/// `checked`: whether the task has its correctness check.
fn fake_win_project(p: &Path, checked: bool, units: &str) {
    std::fs::write(p.join(".gitignore"), ".katlas/\n").unwrap();
    std::fs::write(p.join("kern.sh"), KERN).unwrap();
    std::fs::write(p.join("work.txt"), format!("{units}\n")).unwrap();
    std::fs::write(p.join("bench.sh"), "#!/bin/sh\nexec ./kern.sh $(cat work.txt)\n").unwrap();
    std::fs::write(p.join("check.sh"), "#!/bin/sh\n./kern.sh 2 | grep -qx checksum=3\n").unwrap();
    Command::new("chmod").args(["+x", "kern.sh", "bench.sh", "check.sh"]).current_dir(p).status().unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "base"]);
    let base = git(p, &["rev-parse", "HEAD"]);
    let correctness = if checked { r#","correctness":[{"claim":"task","command":"./check.sh"}]"# } else { "" };
    let task = format!(
        r#"{{"schema":"katlas.task.v1","id":"t1","created_at":"2026-11-30T00:00:00Z","origin":{{"kind":"manual"}},
        "objective":"o","hypothesis":"h","lever":"l","kernel":"kern","target":{{"arch":"gfx1100"}},"evidence":{{}},
        "baseline":{{"git_ref":"{base}"}},"allowed_files":["kern.sh"],
        "bench":{{"command":["./bench.sh"],"metric":"time_ms","goal":"minimize"}}{correctness},"next":"katlas eval t1"}}"#
    );
    std::fs::create_dir_all(p.join(".katlas/tasks/t1")).unwrap();
    std::fs::write(p.join(".katlas/tasks/t1/task.json"), task).unwrap();
}

/// `katlas eval t1` with `candidate` as the working tree's kern.sh: (verdict, reasons, exit code).
fn fake_win(checked: bool, candidate: &str, before: impl Fn(&Path), ledger: bool) -> (String, Vec<String>, i32, tempfile::TempDir) {
    fake_win_on(checked, "4", candidate, before, ledger)
}

/// [`fake_win`] with the benchmarked number of units.
fn fake_win_on(checked: bool, units: &str, candidate: &str, before: impl Fn(&Path), ledger: bool) -> (String, Vec<String>, i32, tempfile::TempDir) {
    let d = project();
    let p = d.path();
    fake_win_project(p, checked, units);
    std::fs::write(p.join("kern.sh"), candidate).unwrap();
    before(p);
    // A spread of a loaded machine must not turn a verdict the guards act on into `unstable`.
    // A 5% band: no pattern's verdict may hang on a chance call of a few percent.
    let mut args = vec!["eval", "t1", "-n", "3", "--threshold", "0.05", "--cv-limit", "1", "--drift-limit", "10", "--telemetry", "false", "--format", "json"];
    if !ledger {
        args.push("--no-ledger");
    }
    let o = katlas(p, &args);
    let r = stdout_json(&o);
    let reasons = r["reasons"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
    (r["verdict"].as_str().unwrap().to_string(), reasons, code(&o), d)
}

fn says(reasons: &[String], what: &str) -> bool {
    reasons.first().is_some_and(|r| r.contains(what) && !r.contains('\n'))
}

/// A fake win of `candidate` on `units` units that katlas catches: exit 1, the verdict
/// `verdict`, and a first reason that says `what`.
fn caught(checked: bool, units: &str, candidate: &str, verdict: &str, what: &str) {
    let (v, r, c, _d) = fake_win_on(checked, units, candidate, |_| {}, false);
    assert_eq!((v.as_str(), c), (verdict, 1), "{r:?}");
    assert!(says(&r, what), "{r:?}");
}

#[test]
fn fake_win_a_real_2x_win_is_still_improved() {
    let (v, r, c, _d) = fake_win(true, &KERN.replace("sleep 0.05", "sleep 0.025"), |_| {}, false);
    assert_eq!((v.as_str(), c), ("improved", 0), "{r:?}");
}

#[test]
fn fake_win_a_cache_left_in_tmp_by_an_earlier_run() {
    // An earlier run left its cache in the TMPDIR katlas inherits; with it, one unit of work.
    let name = format!("kern-{}.cache", std::process::id());
    let cache = std::env::temp_dir().join(&name);
    std::fs::write(&cache, "warm").unwrap();
    let cand = kern(&format!("c=${{TMPDIR:-/tmp}}/{name}; n=$1; [ -f \"$c\" ] && n=1; touch \"$c\""), "$n", Some("$(($1*($1+1)/2))"), "");
    let (v, r, c, _d) = fake_win(true, &cand, |_| {}, false);
    let _ = std::fs::remove_file(&cache);
    // Each sample's private TMPDIR starts empty: the cache never helps, there is no win.
    assert_ne!(v, "improved", "{r:?}");
    assert_eq!(c, 1);
}

#[test]
fn fake_win_skips_work_when_it_detects_it_is_measured() {
    // Measured, katlas is its parent (bench.sh execs it); checked, check.sh is.
    let measured = "n=$1; [ \"$(cat /proc/$PPID/comm)\" = katlas ] && n=1";
    caught(true, "4", &kern(measured, "$n", None, ""), "incorrect", "output checksum `checksum` of the measured runs differs");
}

#[test]
fn fake_win_hard_codes_the_benchmarked_input() {
    // The benchmarked input (4) takes a shortcut; the correctness check's input (2) does not.
    caught(true, "4", &kern("n=$1; [ \"$1\" = 4 ] && n=1", "$n", None, ""), "incorrect", "baseline 10, candidate 1");
}

#[test]
fn fake_win_writes_into_the_baseline_worktree() {
    // The baseline reads its work from work.txt: the candidate doubles it there.
    let cand = format!("#!/bin/sh\nfor f in .katlas/worktrees/*/work.txt; do echo 9 > \"$f\"; done\n{}", &KERN["#!/bin/sh\n".len()..]);
    caught(true, "4", &cand, "invalid", "the baseline's worktree was modified while the sides ran (work.txt)");
}

#[test]
fn fake_win_a_quarter_of_the_work_with_no_correctness_check() {
    // A quarter of the work, with the checksum of the whole: nothing checks it.
    caught(false, "4", &kern("", "1", Some("$(($1*($1+1)/2))"), ""), "invalid", "unverified: the task has no correctness check");
}

#[test]
fn fake_win_leaves_a_daemon_that_finishes_after_the_sample() {
    // The work goes to a setsid daemon; the sample reports only the hand-off.
    // It waits until the daemon is in its own session, so the hand-off never races the sample's end.
    let cand = kern(
        "f=${TMPDIR:-/tmp}/kern-daemon.$$; F=$f setsid sh -c 'echo $$ > \"$F\"; sleep 0.4' </dev/null >/dev/null 2>&1 &\n\
         while [ ! -s \"$f\" ]; do sleep 0.01; done; rm -f \"$f\"",
        "1",
        Some("$(($1*($1+1)/2))"),
        "",
    );
    caught(true, "4", &cand, "invalid", "a process of the sample outlived it");
}

#[test]
fn fake_win_prints_half_its_measured_time() {
    // 8 units: the claimed saving (200 ms) stands far above a loaded machine's wall-time noise.
    caught(true, "8", &kern("", "$1", None, "/ 2"), "invalid", "but the runs' wall time fell by only");
}

#[test]
fn fake_win_truncates_the_ledger_during_its_run() {
    let cand = format!("#!/bin/sh\n: > .katlas/ledger.jsonl\n{}", &KERN["#!/bin/sh\n".len()..].replace("sleep 0.05", "sleep 0.025"));
    let earlier = |p: &Path| {
        let o = katlas(p, &["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=90", "--metric", "tok_s", "-n", "3", "--telemetry", "false"]);
        assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stderr));
    };
    let (v, r, c, d) = fake_win(true, &cand, earlier, true);
    assert_eq!((v.as_str(), c), ("invalid", 1), "{r:?}");
    assert!(says(&r, "ledger.jsonl was truncated or rewritten while the sides ran"), "{r:?}");
    let e = stdout_json(&katlas(d.path(), &["ledger", "ls", "--format", "json"]));
    let verdicts: Vec<&str> = e.as_array().unwrap().iter().map(|x| x["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, vec!["regressed", "invalid"], "the earlier verdict restored, this one appended");
    // An eval that does not write the ledger (--no-ledger) protects it all the same.
    let (v, r, _, d) = fake_win(true, &cand, earlier, false);
    assert_eq!(v, "invalid", "{r:?}");
    assert!(says(&r, "ledger.jsonl was truncated or rewritten"), "{r:?}");
    let e = stdout_json(&katlas(d.path(), &["ledger", "ls", "--format", "json"]));
    assert_eq!(e.as_array().unwrap().len(), 1, "restored: {e}");
}

/// A bench that runs its git-ignored build output by name (`./bench`): the program a real
/// change rebuilds is not an input whose difference makes the sides incomparable.
#[test]
fn a_bench_naming_its_ignored_build_output_is_judged() {
    let d = project();
    let p = d.path();
    std::fs::write(p.join(".gitignore"), ".katlas/\nbench\n").unwrap();
    std::fs::write(p.join("bench.in"), "#!/bin/sh\nsleep 0.1\necho time_ms=100\n").unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "base"]);
    let base = git(p, &["rev-parse", "HEAD"]);
    std::fs::write(p.join("bench.in"), "#!/bin/sh\nsleep 0.05\necho time_ms=50\n").unwrap();
    let eval = |command: &str| {
        katlas(p, &quick_eval(&["--baseline", &base, "--command", command, "--build", "cp bench.in bench && chmod +x bench", "--metric", "time_ms"]))
    };
    let o = eval("./bench");
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "improved", "{r}\n{}", String::from_utf8_lossy(&o.stderr));
    // An ignored data file the command names is still an input.
    std::fs::write(p.join(".gitignore"), ".katlas/\nbench\ndata.txt\n").unwrap();
    std::fs::write(p.join("data.txt"), "x\n").unwrap();
    let o = eval("./bench data.txt");
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "invalid", "{r}");
    assert!(r["reasons"][0].as_str().unwrap().contains("git-ignored input `data.txt`"), "{r}");
}

/// `katlas ARGS` with `site` on PYTHONPATH: the "installed" packages of a package task.
fn katlas_py(dir: &Path, site: &Path, args: &[&str]) -> std::process::Output {
    katlas_cmd(dir).args(args).env("KATLAS_YES", "1").env("PYTHONPATH", site).output().expect("katlas runs")
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// An installed third-party package (`fakelib`, a Triton kernel `_rms_kernel` in ops/rms.py),
/// a stand-in `triton` (no GPU in CI) and a minimal `pytest` runner, laid out like site-packages.
fn fake_site(site: &Path) {
    write(&site.join("fakelib/__init__.py"), "");
    write(&site.join("fakelib/ops/__init__.py"), "");
    write(
        &site.join("fakelib/ops/rms.py"),
        "import triton\n\nSPEED = 100\n\n\n@triton.jit\ndef _rms_kernel(x):\n    pass\n\n\ndef rms(x):\n    return x * 1.0\n",
    );
    write(&site.join("fakelib/__pycache__/stale.cpython-311.pyc"), "bytecode");
    write(&site.join("fakelib-1.2.3.dist-info/METADATA"), "Metadata-Version: 2.1\nName: fakelib\nVersion: 1.2.3\n\nbody\n");
    write(&site.join("fakelib-1.2.3.dist-info/top_level.txt"), "fakelib\n");
    write(&site.join("triton/__init__.py"), "def jit(f):\n    return f\n");
    write(&site.join("pytest/__init__.py"), "");
    write(
        &site.join("pytest/__main__.py"),
        "import glob, os, runpy, sys\nargs, paths, i = sys.argv[1:], [], 0\nwhile i < len(args):\n    if args[i] in ('-p', '-k'):\n        i += 2\n        continue\n    if not args[i].startswith('-'):\n        paths.append(args[i])\n    i += 1\nfor p in paths:\n    for f in (sorted(glob.glob(os.path.join(p, 'test_*.py'))) if os.path.isdir(p) else [p]):\n        ns = runpy.run_path(f)\n        for k, v in sorted(ns.items()):\n            if k.startswith('test_') and callable(v):\n                v()\nprint('passed')\n",
    );
}

/// `katlas task --package` copies an installed package into the project, refuses it until it is
/// committed, allows the kernel's file; eval runs each side against its own copy with its own
/// Triton cache, runs the library's tests on the candidate's copy, and calls a compile that
/// did not change with the source `invalid`.
#[test]
fn task_on_a_third_party_package_copy() {
    let site_dir = tempfile::tempdir().unwrap();
    let site = site_dir.path();
    fake_site(site);
    let d = project();
    let p = d.path();
    // The bench does what Triton does: the cache entry's hash is a digest of the kernel's source.
    // A copy that says USE_INSTALLED makes it import the installed package instead.
    write(
        &p.join("bench.py"),
        "import hashlib, importlib, importlib.util, os, sys\n\
         spec = importlib.util.find_spec('fakelib.ops.rms')\n\
         if 'USE_INSTALLED' in open(spec.origin).read():\n    sys.path = [e for e in sys.path if not e.endswith('third_party/python')]\n    [sys.modules.pop(k) for k in list(sys.modules) if k.startswith('fakelib')]\n\
         m = importlib.import_module('fakelib.ops.rms')\n\
         h = hashlib.sha256(open(m.__file__, 'rb').read()).hexdigest()[:16]\n\
         d = os.path.join(os.environ['TRITON_CACHE_DIR'], h)\n\
         os.makedirs(d, exist_ok=True)\n\
         open(os.path.join(d, '_rms_kernel.json'), 'w').write('{}')\n\
         print('kernel_us=%s' % (1000.0 / m.SPEED))\n",
    );
    write(
        &p.join("libtests/test_rms.py"),
        // Like a real library suite, the tests compile the kernel for other shapes too.
        "import os\nimport fakelib.ops.rms as m\n\n\ndef test_rms():\n    open('route-ran.txt', 'w').write(os.path.abspath(m.__file__))\n    d = os.path.join(os.environ['TRITON_CACHE_DIR'], 'other-shape')\n    os.makedirs(d, exist_ok=True)\n    open(os.path.join(d, '_rms_kernel.json'), 'w').write('{}')\n    assert m.rms(2.0) == 2.0\n",
    );
    std::fs::write(p.join(".gitignore"), ".katlas/\nroute-ran.txt\n").unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "base"]);
    let task_args = [
        "task",
        "--from-op",
        "--name",
        "rms",
        "--op",
        "fakelib.rms",
        "--shape",
        "4,8",
        "--eval-command",
        "python3 bench.py",
        "--metric",
        "kernel_us",
        "--goal",
        "minimize",
        "--parser",
        "kv",
        "--kernel",
        "_rms_kernel",
        "--package",
        "fakelib",
        "--tests",
        "libtests",
        "--format",
        "json",
    ];
    // The copy is new: refused with the commands that commit it.
    let o = katlas_py(p, site, &task_args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("git add third_party/python/fakelib && git commit -m"), "{err}");
    assert!(err.contains("fakelib 1.2.3") && err.contains(&site.join("fakelib").display().to_string()), "{err}");
    assert!(err.contains("same `katlas task` command again"), "{err}");
    assert!(!p.join(".katlas/tasks").exists() || std::fs::read_dir(p.join(".katlas/tasks")).unwrap().next().is_none(), "no packet yet");
    let copy = p.join("third_party/python/fakelib");
    assert!(copy.join("ops/rms.py").is_file());
    assert!(!copy.join("__pycache__").exists(), "bytecode is not copied");
    git(p, &["add", "third_party/python/fakelib"]);
    git(p, &["commit", "-qm", "vendor fakelib"]);
    let o = katlas_py(p, site, &task_args);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let t = stdout_json(&o);
    assert_eq!(t["allowed_files"], serde_json::json!(["third_party/python/fakelib/ops/rms.py"]));
    assert_eq!(t["package"]["version"], "1.2.3");
    assert_eq!(t["package"]["kernel_line"], 7);
    assert_eq!(t["bench"]["env"]["PYTHONPATH"], "third_party/python");
    assert_eq!(t["correctness"][0]["claim"], "library-tests");
    let id = t["id"].as_str().unwrap().to_string();
    let rms = copy.join("ops/rms.py");
    let base_src = std::fs::read_to_string(&rms).unwrap();
    let eval = |src: &str| {
        std::fs::write(&rms, src).unwrap();
        let _ = std::fs::remove_file(p.join("route-ran.txt"));
        let o = katlas_py(p, site, &["eval", &id, "-n", "3", "--telemetry", "false", "--format", "json"]);
        (stdout_json(&o), code(&o))
    };
    // A real edit: faster, its own compile, the library's tests run against the candidate's copy.
    let (r, c) = eval(&base_src.replace("SPEED = 100", "SPEED = 200"));
    assert_eq!((r["verdict"].as_str(), c), (Some("improved"), 0), "{r}");
    assert_eq!(r["correctness"][0]["outcome"], "PASS", "{r}");
    let ran = std::fs::read_to_string(p.join("route-ran.txt")).unwrap();
    assert_eq!(Path::new(&ran), std::fs::canonicalize(&rms).unwrap(), "the library's tests imported the candidate's copy");
    let cache = p.join(format!(".katlas/tasks/{id}/evals/1/triton-cache"));
    assert!(cache.join("A").is_dir() && cache.join("B").is_dir(), "one Triton cache per side");
    // The copy changed, but the bench imported the installed package: the baseline's compile.
    let (r, c) = eval(&base_src.replace("SPEED = 100", "SPEED = 200\n# USE_INSTALLED"));
    assert_eq!((r["verdict"].as_str(), c), (Some("invalid"), 1), "{r}");
    assert!(
        r["reasons"][0]
            .as_str()
            .unwrap()
            .contains("stale compile: _rms_kernel's Triton cache entries are the baseline's although third_party/python/fakelib/ops/rms.py changed"),
        "{r}"
    );
    // Faster and wrong: the library's tests fail.
    let (r, c) = eval(&base_src.replace("SPEED = 100", "SPEED = 200").replace("x * 1.0", "x * 2.0"));
    assert_eq!((r["verdict"].as_str(), c), (Some("incorrect"), 1), "{r}");
    assert_eq!(r["correctness"][0]["outcome"], "FAIL", "{r}");
}
