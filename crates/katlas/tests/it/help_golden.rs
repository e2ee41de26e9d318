//! `katlas … --help` of every command, byte for byte against the committed files in
//! crates/katlas/tests/golden/help/ (`katlas.txt` for the top, `fleet-wait.txt` for
//! `katlas fleet wait`), so a change to what a user reads in the help shows in review.
//!
//! The command tree is read from the built binary itself (the `Commands:` list of each help,
//! recursively), so a new command without a golden file fails, and so does a golden file whose
//! command is gone. After a deliberate change,
//! `KATLAS_BLESS=1 cargo test -p katlas --test it help_golden::` rewrites the files; that run
//! still fails, naming them, so blessing never makes a run pass by itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::cli::{katlas_cmd, KATLAS};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/help")
}

/// `katlas PATH… --help`, at a fixed width: clap is built with `wrap_help`, which wraps at the
/// terminal's width (`COLUMNS`, else the terminal's size), so without it the files would
/// depend on the window the tests ran in.
fn help(dir: &Path, path: &[String]) -> String {
    let o = katlas_cmd(dir).args(path).arg("--help").env("COLUMNS", "100").env("LINES", "50").output().expect("katlas runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.is_empty(), "`{KATLAS} {} --help`: exit {:?}\n{err}", path.join(" "), o.status.code());
    String::from_utf8(o.stdout).unwrap_or_else(|e| panic!("`katlas {} --help` is not UTF-8: {e}", path.join(" ")))
}

/// The subcommands a help lists under `Commands:`: each entry's name is indented by two spaces
/// (a wrapped description goes on deeper). clap's own `help` is not a command of katlas's.
fn subcommands(help: &str) -> Vec<String> {
    let mut lines = help.lines().skip_while(|l| *l != "Commands:");
    if lines.next().is_none() {
        return Vec::new();
    }
    lines
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command path from the top (`[]`) down, with its help.
fn walk(dir: &Path, path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let text = help(dir, &path);
    let subs = subcommands(&text);
    out.push((path.clone(), text));
    for s in subs {
        let mut p = path.clone();
        p.push(s);
        walk(dir, p, out);
    }
}

fn file_name(path: &[String]) -> String {
    if path.is_empty() {
        "katlas.txt".into()
    } else {
        format!("{}.txt", path.join("-"))
    }
}

/// The first line where `want` and `got` differ, for the failure message.
fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.split('\n').collect(), got.split('\n').collect());
    let i = (0..w.len().max(g.len())).find(|&i| w.get(i) != g.get(i)).unwrap_or(0);
    format!("line {}:\n      golden: {:?}\n      now:    {:?}", i + 1, w.get(i).unwrap_or(&"<end>"), g.get(i).unwrap_or(&"<end>"))
}

#[test]
fn every_commands_help_matches_its_golden_file() {
    let scratch = tempfile::tempdir().unwrap();
    let mut helps = Vec::new();
    walk(scratch.path(), Vec::new(), &mut helps);
    // The walk must reach the nested commands, not stop at a top that lists none.
    assert!(helps.len() > 40, "only {} commands found from `katlas --help`", helps.len());
    assert!(helps.iter().any(|(p, _)| p == &["fleet", "wait"]), "`katlas fleet wait` not reached");

    let mut want: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (path, text) in helps {
        let name = file_name(&path);
        let shown = format!("katlas {}", path.join(" ")).trim_end().to_string();
        if let Some((other, _)) = want.insert(name.clone(), (shown.clone(), text)) {
            panic!("`{other}` and `{shown}` would share the golden file {name}");
        }
    }

    let dir = golden_dir();
    let bless = std::env::var_os("KATLAS_BLESS").is_some_and(|v| !v.is_empty() && v != "0");
    let (mut missing, mut changed, mut stale) = (Vec::new(), Vec::new(), Vec::new());
    for (name, (shown, text)) in &want {
        match std::fs::read(dir.join(name)) {
            Ok(bytes) if bytes == text.as_bytes() => {}
            Ok(bytes) => changed.push(format!("{shown} ({name}) changed at {}", first_difference(&String::from_utf8_lossy(&bytes), text))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(format!("{shown}: no golden file {name}")),
            Err(e) => panic!("{}: {e}", dir.join(name).display()),
        }
    }
    for entry in std::fs::read_dir(&dir).into_iter().flatten() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !want.contains_key(&name) {
            stale.push(name);
        }
    }
    let gone = stale.iter().map(|n| format!("{n}: no such command any more"));
    let problems: Vec<String> = missing.iter().chain(&changed).cloned().chain(gone).collect();
    if problems.is_empty() {
        return;
    }
    let list = problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n");
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, (_, text)) in &want {
            std::fs::write(dir.join(name), text).unwrap();
        }
        for name in &stale {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        panic!("blessed {} golden help file(s) in {}; review and commit them, then run again without KATLAS_BLESS:\n{list}", problems.len(), dir.display());
    }
    panic!(
        "{} command help(s) differ from {}:\n{list}\n\
         After a deliberate change: KATLAS_BLESS=1 cargo test -p katlas --test it help_golden::",
        problems.len(),
        dir.display()
    );
}

#[test]
fn the_commands_list_is_read_as_clap_writes_it() {
    let text = "Usage: katlas corpus <COMMAND>\n\nCommands:\n  ls        List rows\n  validate  Check a rows file; the description\n            wraps onto a second line\n  help      Print this message\n\nOptions:\n  --project <DIR>  Project root\n";
    assert_eq!(subcommands(text), ["ls", "validate"]);
    assert!(subcommands("Usage: katlas fit [OPTIONS] <ROW>\n\nOptions:\n  -h, --help  Print help\n").is_empty());
}
