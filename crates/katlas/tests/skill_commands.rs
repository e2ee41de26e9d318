//! Every `katlas …` command the agent skill shows exists in `katlas --help`, and every
//! command in its fenced blocks runs, in order, on the fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skill_files() -> Vec<(String, String)> {
    ["SKILL.md", "playbook.md"]
        .iter()
        .map(|f| {
            let p = repo().join(".agents/skills/katlas").join(f);
            (f.to_string(), std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        })
        .collect()
}

/// Lines of ```sh fences that start with `katlas `.
fn fenced_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t.trim_start_matches('`').starts_with("sh");
            continue;
        }
        if in_sh && t.starts_with("katlas ") {
            out.push(t.to_string());
        }
    }
    out
}

/// Subcommands shown as commands: inline code spans `` `katlas NAME …` `` and fenced lines.
fn named_subcommands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut starts: Vec<usize> = text.match_indices("`katlas ").map(|(i, _)| i + 8).collect();
    for line in fenced_commands(text) {
        if let Some(i) = text.find(&line) {
            starts.push(i + 7);
        }
    }
    for i in starts {
        let rest = &text[i..];
        let word: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
        if !word.is_empty() && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

fn help_commands() -> Vec<String> {
    let o = Command::new(env!("CARGO_BIN_EXE_katlas")).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let after = text.split("Commands:").nth(1).expect("help lists commands");
    let list = after.split("Options:").next().unwrap();
    list.lines().filter(|l| l.starts_with("  ") && !l.starts_with("   ")).filter_map(|l| l.split_whitespace().next().map(str::to_string)).collect()
}

#[test]
fn skill_commands_exist_in_help() {
    let known = help_commands();
    assert!(known.contains(&"fit".to_string()), "{known:?}");
    for (file, text) in skill_files() {
        let named = named_subcommands(&text);
        if file == "SKILL.md" {
            for w in ["collect", "fit", "isa", "suggest", "task", "route", "eval", "ledger"] {
                assert!(named.iter().any(|n| n == w), "SKILL.md teaches `katlas {w}`: {named:?}");
            }
        }
        for w in named {
            assert!(known.contains(&w), "{file}: `katlas {w}` is not a command of `katlas --help` ({known:?})");
        }
    }
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git").args(args).current_dir(dir).output().expect("git runs");
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn skill_commands_run_on_fixtures() {
    let shared = repo().join("fixtures");
    let ncu = shared.join("h200/ncu_llama_raw.csv");
    let rows = shared.join("hipfire/atlas_rows_v0.jsonl");
    let objects = repo().join("crates/katlas-isa/tests/fixtures/kernels.gfx1201.hsaco");
    for p in [&ncu, &rows, &objects] {
        assert!(p.exists(), "fixture {} is required", p.display());
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    std::fs::copy(&rows, p.join("rows.jsonl")).unwrap();
    std::fs::write(p.join(".gitignore"), ".katlas/\n").unwrap();
    std::fs::write(p.join("katlas.toml"), "[route.decode]\ncommands = [\"true\"]\n").unwrap();
    git(p, &["init", "-q", "."]);
    git(p, &["-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"]);
    git(p, &["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "fixture"]);

    let bin = PathBuf::from(env!("CARGO_BIN_EXE_katlas"));
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    for (file, text) in skill_files() {
        for cmd in fenced_commands(&text) {
            let task = std::fs::read_dir(p.join(".katlas/tasks"))
                .ok()
                .and_then(|rd| rd.filter_map(Result::ok).max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok()))
                .map(|e| e.file_name().to_string_lossy().to_string())
                .unwrap_or_default();
            let o = Command::new("sh")
                .args(["-c", &cmd])
                .current_dir(p)
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .env("KATLAS_CONFIG_DIR", p.join(".katlas/test-user-config"))
                .env("ROWS", "rows.jsonl")
                .env("NCU", &ncu)
                .env("CODE_OBJECTS", &objects)
                .env("ISA", "isa.json")
                .env("CLAIM", "decode")
                .env("TASK", &task)
                .output()
                .unwrap();
            let code = o.status.code();
            // eval gives a verdict (0/1) or says the fixture row's benchmark binary is absent (3).
            let allowed: &[i32] = if cmd.starts_with("katlas eval") { &[0, 1, 3] } else { &[0] };
            assert!(
                code.is_some_and(|c| allowed.contains(&c)),
                "{file}: `{cmd}` exited {code:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 10, "ran {ran} commands");
}
