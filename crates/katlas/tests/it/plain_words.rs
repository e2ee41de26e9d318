//! Verdicts a kernel engineer reads in one line (issue 14, item 6): the finding first, one
//! sign convention across `eval`, `ab`, the ledger and `gate` (+ = better), units on the
//! numbers, the sequential level explained, the CV the rule used, what to do with an
//! undecided eval's numbers, and progress on a terminal with elapsed time and what is left.

use std::path::Path;

use crate::support::cli;
use cli::{counted, git, katlas, stdout_json};

fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    d
}

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn eval<S: AsRef<str>>(dir: &Path, args: &[S]) -> String {
    let mut a = vec!["eval"];
    a.extend(args.iter().map(AsRef::as_ref));
    a.extend_from_slice(&["--telemetry", "false", "--fresh"]);
    text(&katlas(dir, &a))
}

/// The JSON result of `eval ARGS` run afresh, the counter `files` of an earlier run removed.
fn eval_json<S: AsRef<str>>(dir: &Path, args: &[S], files: &[&str]) -> serde_json::Value {
    for f in files {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let mut a = vec!["eval"];
    a.extend(args.iter().map(AsRef::as_ref));
    a.extend_from_slice(&["--telemetry", "false", "--fresh", "--format", "json"]);
    stdout_json(&katlas(dir, &a))
}

/// A counter expression spread wide enough that a 5% spread limit calls it unstable.
const SPREAD: &str = "100 + (n * 37) % 41";

/// The arguments of a fixed-N eval of two counted commands on `metric` — (counter file,
/// expression) for the baseline and the candidate — under the spread limit `cv_limit`,
/// with no ledger entry.
fn fixed_eval(metric: &str, (fa, base): (&str, &str), (fb, cand): (&str, &str), n: u32, cv_limit: f64) -> Vec<String> {
    let (base, cand, n, cv_limit) = (counted(fa, metric, base), counted(fb, metric, cand), n.to_string(), cv_limit.to_string());
    ["--baseline", &base, "--candidate", &cand, "--metric", metric, "-n", &n, "--cv-limit", &cv_limit, "--no-ledger"].map(String::from).to_vec()
}

/// The cells of the table row whose first cell is `label`.
fn row(out: &str, label: &str) -> Vec<String> {
    out.lines()
        .map(|l| l.trim_matches(|c| c == '│' || c == ' ').split('┆').map(|c| c.trim().to_string()).collect::<Vec<_>>())
        .find(|cells| cells.first().is_some_and(|c| c == label))
        .unwrap_or_else(|| panic!("no table row `{label}`:\n{out}"))
}

/// The header cells of the first table.
fn header(out: &str) -> Vec<String> {
    let l = out.lines().find(|l| l.starts_with('│')).unwrap_or_else(|| panic!("no table:\n{out}"));
    l.trim_matches(|c| c == '│' || c == ' ').split('┆').map(|c| c.trim().to_string()).collect()
}

fn cell(out: &str, label: &str, column: &str) -> String {
    let h = header(out);
    let i = h.iter().position(|c| c == column).unwrap_or_else(|| panic!("no column `{column}` in {h:?}"));
    row(out, label)[i].clone()
}

fn ledger_id(out: &str) -> String {
    out.lines().find_map(|l| l.strip_prefix("ledger: ")).unwrap_or_else(|| panic!("no ledger id:\n{out}")).to_string()
}

#[test]
fn eval_leads_with_the_verdict_in_one_line() {
    let d = project();
    let base = counted("a", "time_ms", "100 + n % 3");
    let slower = counted("b", "time_ms", "110 + n % 3");
    let out = eval(d.path(), &["--baseline", &base, "--candidate", &slower, "--metric", "time_ms", "-n", "6", "--no-ledger"]);
    let first = out.lines().next().unwrap();
    let (size, rest) = first.strip_prefix("candidate ").and_then(|r| r.split_once("% slower (95% CI ")).unwrap_or_else(|| panic!("{first}"));
    let size: f64 = size.parse().unwrap();
    assert!((9.0..11.5).contains(&size), "a 10% slower time: {first}");
    let (ci, tail) = rest.split_once("% slower), ").unwrap_or_else(|| panic!("{first}"));
    let (lo, hi) = ci.split_once('–').unwrap_or_else(|| panic!("an en-dash range: {first}"));
    let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(lo <= size && size <= hi && lo > 0.0, "{first}");
    assert_eq!(tail, "6 runs/side, ABBA, fresh processes → regressed");
}

#[test]
fn one_sign_convention_in_eval_ab_the_ledger_and_gate() {
    let d = project();
    let p = d.path();
    // A time that rose and a rate that fell are both slower: a negative gain everywhere.
    for (metric, base, cand) in [("time_ms", "100 + n % 3", "110 + n % 3"), ("tok_s", "110 + n % 3", "100 + n % 3")] {
        let (fa, fb) = (format!("{metric}.a"), format!("{metric}.b"));
        let out = eval(p, &["--baseline", &counted(&fa, metric, base), "--candidate", &counted(&fb, metric, cand), "--metric", metric, "-n", "6"]);
        assert!(out.lines().next().unwrap().contains("% slower ("), "{out}");
        assert!(header(&out).contains(&"gain (+ = better)".to_string()), "{out}");
        let gain = cell(&out, "candidate", "gain (+ = better)");
        assert!(gain.starts_with('-'), "{metric}: eval table gain {gain}");
        let interval = cell(&out, "candidate", "gain interval");
        assert!(interval.starts_with("[-") && interval.contains(", -"), "{metric}: the interval is in the gain's sign: {interval}");
        let id = ledger_id(&out);
        // ledger ls and show: the same gain and interval, in the same sign.
        let ls = text(&katlas(p, &["ledger", "ls", "--metric", metric]));
        assert_eq!(cell(&ls, &id[..12], "gain"), gain, "{ls}");
        assert_eq!(cell(&ls, &id[..12], "gain interval"), interval, "the interval at its level: {ls}");
        let show = text(&katlas(p, &["ledger", "show", &id]));
        let line = show.lines().find(|l| l.starts_with("gain:")).unwrap_or_else(|| panic!("{show}"));
        assert!(line.starts_with(&format!("gain:        {gain} (+ = faster, - = slower), interval {interval}, ")), "{line}");
        assert!(show.lines().next().unwrap().contains("% slower ("), "ledger show leads with the eval's line: {show}");
        let j = stdout_json(&katlas(p, &["ledger", "show", &id, "--format", "json"]));
        assert!(j["effect"]["gain"].as_f64().unwrap() < 0.0, "{j}");
    }
    // ab: the same words and sign.
    std::fs::write(p.join(".gitignore"), ".katlas/\n").unwrap();
    std::fs::write(p.join("speed"), "100\n").unwrap();
    git(p, &["init", "-q"]);
    git(p, &["add", "speed", ".gitignore"]);
    git(p, &["commit", "-qm", "a"]);
    let a = git(p, &["rev-parse", "HEAD"]);
    std::fs::write(p.join("speed"), "120\n").unwrap();
    git(p, &["commit", "-qam", "b"]);
    let b = git(p, &["rev-parse", "HEAD"]);
    let o = katlas(p, &["ab", &a, &b, "--command", "echo time_ms=$(cat speed)", "--metric", "time_ms", "-n", "4", "--telemetry", "false", "--no-ledger"]);
    let out = text(&o);
    let first = out.lines().next().unwrap();
    assert!(first.contains(" 20.0% slower (95% CI ") && first.ends_with("→ regressed"), "{out}");
    let cand = out.lines().find(|l| l.contains(&b[..10]) && l.contains('┆')).unwrap_or_else(|| panic!("{out}"));
    assert!(cand.contains("-20.00%"), "ab table gain: {cand}");
    // gate: a time above its ceiling is worse, shown negative under the same heading.
    std::fs::create_dir_all(p.join("tests/speed-baselines")).unwrap();
    std::fs::write(p.join("tests/speed-baselines/gfx1100.txt"), "time_ms=10\ngen_tok_s=50\n").unwrap();
    let out = text(&katlas(p, &["gate", "--arch", "gfx1100", "--command", "echo time_ms=72; echo gen_tok_s=60", "-n", "3"]));
    assert_eq!(cell(&out, "time_ms", "vs floor (+ = better)"), "-620.00%", "{out}");
    assert_eq!(cell(&out, "gen_tok_s", "vs floor (+ = better)"), "+20.00%", "{out}");
}

#[test]
fn gate_leads_with_the_verdict_in_one_line() {
    let d = project();
    let p = d.path();
    std::fs::create_dir_all(p.join("tests/speed-baselines")).unwrap();
    std::fs::write(p.join("tests/speed-baselines/gfx1100.txt"), "time_ms=10\ngen_tok_s=50\n").unwrap();
    let o = katlas(p, &["gate", "--arch", "gfx1100", "--command", "echo time_ms=72; echo gen_tok_s=60", "-n", "3"]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o);
    assert_eq!(out.lines().next().unwrap(), "gate gfx1100: FAIL — time_ms 620.0% slower than its ceiling 10 ms (tolerance 1.0%); median of 3 runs", "{out}");
    let out = text(&katlas(p, &["gate", "--arch", "gfx1100", "--command", "echo time_ms=5; echo gen_tok_s=60", "-n", "2"]));
    assert_eq!(out.lines().next().unwrap(), "gate gfx1100: PASS — 2 of 2 floor(s) held; median of 2 runs", "{out}");
}

#[test]
fn units_on_the_numbers_of_eval_the_ledger_and_gate() {
    let d = project();
    let p = d.path();
    let out = eval(
        p,
        &["--baseline", &counted("a", "time_ms", "100 + n % 3"), "--candidate", &counted("b", "time_ms", "110 + n % 3"), "--metric", "time_ms", "-n", "6"],
    );
    let h = header(&out);
    for col in ["median (ms)", "95% CI of median (ms)", "MAD (ms)", "robust CV", "gain (+ = better)"] {
        assert!(h.contains(&col.to_string()), "column {col}: {h:?}");
    }
    assert!(cell(&out, "candidate", "robust CV").ends_with('%') && cell(&out, "candidate", "gain (+ = better)").ends_with('%'), "{out}");
    assert!(out.contains("metric time_ms (lower is better)") && out.contains("noise threshold ±1.00%"), "{out}");
    let show = text(&katlas(p, &["ledger", "show", &ledger_id(&out)]));
    let sides: Vec<&str> = show.lines().filter(|l| l.starts_with("side:")).collect();
    assert_eq!(sides.len(), 2, "{show}");
    for s in sides {
        assert!(s.contains(" ms robust CV=") && s.contains("%"), "median in ms, CV in %: {s}");
    }
    assert!(show.contains("metric:      time_ms (lower is better)"), "{show}");
    std::fs::create_dir_all(p.join("tests/speed-baselines")).unwrap();
    std::fs::write(p.join("tests/speed-baselines/gfx1100.txt"), "time_ms=10\ngen_tok_s=50\n").unwrap();
    let out = text(&katlas(p, &["gate", "--arch", "gfx1100", "--command", "echo time_ms=5; echo gen_tok_s=60", "-n", "2"]));
    assert_eq!((cell(&out, "time_ms", "floor"), cell(&out, "time_ms", "median")), ("10 ms".into(), "5.0000 ms".into()), "{out}");
    assert_eq!((cell(&out, "gen_tok_s", "floor"), cell(&out, "gen_tok_s", "median")), ("50 tok/s".into(), "60.0000 tok/s".into()), "{out}");
}

#[test]
fn the_sequential_level_is_explained_where_it_is_shown() {
    let d = project();
    let p = d.path();
    // Adaptive (no -n): a clear regression stops at the first look, at that look's level.
    let args = ["--baseline", &counted("a", "time_ms", "100 + n % 3"), "--candidate", &counted("b", "time_ms", "130 + n % 3"), "--metric", "time_ms"];
    let out = eval(p, &args);
    let interval = cell(&out, "candidate", "gain interval");
    let level = interval.rsplit(" at ").next().unwrap().to_string();
    assert_ne!(level, "95.0%", "an adaptive look's level is not the plain 95%: {out}");
    let lvl = level.trim_end_matches(".0%").trim_end_matches('%');
    let note = format!("next: the {lvl}% interval is the sequential test's level at look 1: each look of an adaptive eval spends part of its 5% error, so the interval is wider than a single 95% one");
    assert!(out.lines().any(|l| l == note), "{note}\n{out}");
    // The ledger shows the same level and says what it is.
    let show = text(&katlas(p, &["ledger", "show", &ledger_id(&out)]));
    assert!(show.contains(&format!(" at {level}")) && show.lines().any(|l| l == note), "{show}");
    // A fixed plan's 95% interval needs no note.
    let out = eval(
        p,
        &[
            "--baseline",
            &counted("c", "time_ms", "100 + n % 3"),
            "--candidate",
            &counted("e", "time_ms", "130 + n % 3"),
            "--metric",
            "time_ms",
            "-n",
            "4",
            "--no-ledger",
        ],
    );
    assert!(cell(&out, "candidate", "gain interval").ends_with(" at 95.0%") && !out.contains("sequential test's level"), "{out}");
}

#[test]
fn the_cv_shown_is_the_one_the_unstable_rule_judged() {
    let d = project();
    let p = d.path();
    let args = fixed_eval("time_ms", ("a", SPREAD), ("b", SPREAD), 8, 0.05);
    let out = eval(p, &args);
    assert!(out.contains("verdict: unstable"), "{out}");
    // The reason names a side's robust CV; the table's column shows the same number.
    let reason = out.lines().find(|l| l.contains("spread (robust CV)")).unwrap_or_else(|| panic!("{out}"));
    let side = reason.trim().trim_start_matches("- ").split(' ').next().unwrap();
    let judged = reason.split("(robust CV) ").nth(1).unwrap().split('%').next().unwrap();
    let shown = cell(&out, side, "robust CV");
    let shown_f: f64 = shown.trim_end_matches('%').parse().unwrap();
    assert_eq!(format!("{shown_f:.1}"), judged, "table {shown} vs rule {judged}");
    // And the JSON's summary CV is that number too.
    std::fs::remove_file(p.join("a")).unwrap();
    std::fs::remove_file(p.join("b")).unwrap();
    let j = eval_json(p, &args, &[]);
    let cv = j["sides"].as_array().unwrap().iter().find(|s| s["label"] == side).unwrap()["summary"]["cv"].as_f64().unwrap();
    assert_eq!(format!("{:.2}%", cv * 100.0), shown);
}

#[test]
fn undecided_verdicts_say_what_to_do_with_the_numbers() {
    let d = project();
    let p = d.path();
    // Inconclusive: a small difference inside wide noise at a fixed N.
    let args = fixed_eval("tok_s", ("a", "100 + (n % 2) * 20"), ("b", "101 + (n % 2) * 20"), 4, 0.5);
    let out = eval(p, &args);
    assert!(out.contains("verdict: inconclusive"), "{out}");
    let j = eval_json(p, &args, &["a", "b"]);
    let cv = j["sides"].as_array().unwrap().iter().filter_map(|s| s["summary"]["cv"].as_f64()).fold(0.0f64, f64::max);
    let need = katlas_eval::words::runs_needed(cv, 0.05);
    let note = out.lines().find(|l| l.starts_with("next: inconclusive: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(
        note.contains(&format!("at robust CV {:.1}% a 5.0% effect needs about {need} runs/side (this eval had 4)", cv * 100.0)),
        "the runs a 5% effect needs, from the measured CV: {note}"
    );
    assert!(note.contains("--max-runs") && note.contains("--settle") && note.contains("taskset"), "{note}");
    // Unstable: lower the noise first; the runs a 5% effect would need at that CV.
    let args = fixed_eval("time_ms", ("c", SPREAD), ("e", SPREAD), 8, 0.05);
    let out = eval(p, &args);
    let j = eval_json(p, &args, &["c", "e"]);
    assert_eq!(j["verdict"], "unstable");
    let cv = j["sides"].as_array().unwrap().iter().filter_map(|s| s["summary"]["cv"].as_f64()).fold(0.0f64, f64::max);
    let note = out.lines().find(|l| l.starts_with("next: unstable: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(note.contains("--settle") && note.contains("taskset") && note.contains("--warmups"), "{note}");
    assert!(note.contains(&format!("a 5.0% effect would need about {} runs/side", katlas_eval::words::runs_needed(cv, 0.05))), "{note}");
}

#[test]
fn progress_on_a_terminal_shows_elapsed_time_and_what_is_left() {
    // `script` gives katlas a pseudo-terminal for stderr (util-linux, on every Linux CI image).
    let d = project();
    let p = d.path();
    std::fs::write(p.join("a.sh"), counted("a", "time_ms", "100 + n % 3")).unwrap();
    std::fs::write(p.join("b.sh"), counted("b", "time_ms", "110 + n % 3")).unwrap();
    let cmd =
        format!("{} eval --baseline 'sleep 0.2; sh a.sh' --candidate 'sleep 0.2; sh b.sh' --metric time_ms -n 3 --telemetry false --no-ledger", cli::KATLAS);
    let o = katlas_testkit::cli::isolate(&mut std::process::Command::new("script"))
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(p)
        .env("KATLAS_YES", "1")
        .output()
        .expect("`script` (util-linux) runs the eval on a pseudo-terminal");
    let raw = String::from_utf8_lossy(&o.stdout);
    // The bar: elapsed time first, runs done of the plan, and an estimate of what is left.
    assert!(raw.contains("00:00:0") && raw.contains("run 1/8") && raw.contains(" left at most: "), "{raw}");
    assert!(!raw.contains("katlas eval: "), "a terminal gets the bar, not the per-look lines: {raw}");
    assert!(raw.contains("→ regressed"), "{raw}");
}
