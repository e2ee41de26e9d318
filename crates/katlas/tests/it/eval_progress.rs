//! Progress of `katlas eval` without a terminal: one line per look on stderr (elapsed time,
//! runs so far, the current interval), never a progress bar's control characters.

use crate::support::cli::katlas;

#[test]
fn without_a_terminal_each_look_is_one_line_on_stderr() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    // Stderr is a pipe here: not a terminal. The counter gives the runs a spread.
    let cmd = "n=$(cat c 2>/dev/null || echo 0); echo $((n+1)) > c; echo time_ms=$((100 + n % 3))";
    let o = katlas(d.path(), &["eval", "--baseline", cmd, "--candidate", cmd, "--metric", "time_ms", "--max-runs", "6", "--telemetry", "false", "--no-ledger"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let looks: Vec<&str> = err.lines().filter(|l| l.starts_with("katlas eval: ")).collect();
    assert!(!looks.is_empty(), "no look lines on stderr:\n{err}");
    assert!(looks[0].contains("look 1, 3 runs/side: gain "), "{looks:?}");
    for (i, l) in looks.iter().enumerate() {
        assert!(l.contains(&format!("look {}", i + 1)) && l.contains(" s, look ") && l.contains("% interval ["), "{l}");
        assert!(l.contains("+ = faster"), "the sign convention is said: {l}");
    }
    assert!(!err.contains('\r') && !err.contains('\u{1b}'), "no bar control characters:\n{err:?}");
    // The last look's verdict is the eval's.
    let out = String::from_utf8_lossy(&o.stdout);
    let verdict = out.lines().find_map(|l| l.strip_prefix("verdict: ")).expect("verdict line").to_string();
    assert!(looks.last().unwrap().ends_with(&format!("→ {verdict}")), "{looks:?} vs {verdict}");
}
