//! Flags whose values are a closed set (`eval --order --expect --disposition`, `ledger ls
//! --verdict --disposition`) are checked by clap: a word outside the set is a usage error
//! (exit 2) that lists the words it takes, given before anything runs; the words in the set
//! reach the records as before.

use std::path::Path;
use std::process::Output;

use crate::support::cli;
use cli::{code, katlas, stderr, stdout_json};

fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    d
}

/// An eval whose sides each leave a file behind when they run.
fn eval(dir: &Path, extra: &[&str]) -> Output {
    let base = ["eval", "--baseline", "touch ran; echo tok_s=100", "--candidate", "touch ran; echo tok_s=120", "--metric", "tok_s", "-n", "4"];
    katlas(dir, &[&base[..], &["--telemetry", "false"], extra].concat())
}

/// A refused value: exit 2, clap's message naming the flag and the value, and `words` in it.
fn assert_refused(o: &Output, flag: &str, value: &str, words: &[&str]) {
    let err = stderr(o);
    assert_eq!(code(o), 2, "{flag} {value}: {err}");
    assert!(err.starts_with(&format!("katlas: error: invalid value '{value}' for '{flag} <")), "{flag} {value}: {err}");
    for w in words {
        assert!(err.contains(w), "{flag} {value}: `{w}` not in: {err}");
    }
}

#[test]
fn eval_refuses_a_bad_value_before_it_runs_a_side() {
    let d = project();
    let p = d.path();
    let o = eval(p, &["--order", "zigzag"]);
    assert_refused(&o, "--order", "zigzag", &["[possible values: abba, shuffle]"]);
    let o = eval(p, &["--expect", "better"]);
    let verdicts = "[possible values: improved, regressed, no_change, inconclusive, unstable, incorrect, needs_baseline, invalid]";
    assert_refused(&o, "--expect", "better", &[verdicts]);
    let o = eval(p, &["--disposition", "keep"]);
    assert_refused(&o, "--disposition", "keep", &["promote, reject, opt-in or `revisit-if: CONDITION`"]);
    // The revisit-if form carries a condition; without one it is refused too.
    let o = eval(p, &["--disposition", "revisit-if"]);
    assert_refused(&o, "--disposition", "revisit-if", &["needs a condition"]);
    assert!(!p.join("ran").exists(), "a side ran although a flag was refused");
    assert!(!p.join(".katlas/ledger.jsonl").exists(), "a refused eval left a ledger entry");
}

#[test]
fn eval_takes_the_values_in_the_set() {
    let d = project();
    let p = d.path();
    let o = eval(p, &["--order", "shuffle", "--expect", "improved", "--disposition", "revisit-if: a quieter machine", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = stdout_json(&o);
    assert_eq!(r["verdict"], "improved");
    assert_eq!(r["protocol"]["order"], "shuffle");
    // `no-change` is `no_change`'s other spelling; the comparison is not one: exit 1.
    let o = eval(p, &["--fresh", "--expect", "no-change", "--disposition", "opt-in"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));

    let ls = |args: &[&str]| {
        let o = katlas(p, &[&["ledger", "ls", "--format", "json"], args].concat());
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
        stdout_json(&o).as_array().unwrap().clone()
    };
    let revisit = ls(&["--verdict", "improved", "--disposition", "revisit-if"]);
    assert_eq!(revisit.len(), 1, "{revisit:?}");
    assert_eq!(revisit[0]["disposition"], serde_json::json!({"kind": "revisit-if", "condition": "a quieter machine"}));
    let opt_in = ls(&["--disposition", "opt-in"]);
    assert_eq!(opt_in.len(), 1, "{opt_in:?}");
    assert_ne!(opt_in[0]["id"], revisit[0]["id"]);
    assert!(ls(&["--verdict", "no_change"]).is_empty());
    assert!(ls(&["--verdict", "improved", "--disposition", "promote"]).is_empty());
}

#[test]
fn ledger_ls_refuses_a_bad_value() {
    let d = project();
    let p = d.path();
    let o = katlas(p, &["ledger", "ls", "--verdict", "better"]);
    assert_refused(&o, "--verdict", "better", &["[possible values: improved, regressed, no_change,", "needs_baseline, invalid]"]);
    let o = katlas(p, &["ledger", "ls", "--disposition", "revisit-if: later"]);
    assert_refused(&o, "--disposition", "revisit-if: later", &["[possible values: promote, reject, opt-in, revisit-if]"]);
}

#[test]
fn the_config_files_order_is_still_read_and_checked() {
    let d = project();
    let p = d.path();
    std::fs::write(p.join("katlas.toml"), "[eval]\norder = \"shuffle\"\n").unwrap();
    let o = eval(p, &["--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["protocol"]["order"], "shuffle");
    // The flag wins over the file.
    let o = eval(p, &["--fresh", "--order", "abba", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["protocol"]["order"], "abba");
    std::fs::write(p.join("katlas.toml"), "[eval]\norder = \"zigzag\"\n").unwrap();
    let o = eval(p, &["--fresh"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("katlas.toml: eval.order: unknown order `zigzag` (expected abba or shuffle)"), "{}", stderr(&o));
}
