//! Every `katlas …` command the agent skill shows exists in `katlas --help`, every command in
//! its fenced blocks runs, in order, on the fixtures, and its "Starting in a new project"
//! section runs verbatim on a fresh scratch project from `katlas init` to a ledger entry.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::cli::{katlas_cmd, repo, KATLAS};

fn skill_files() -> Vec<(String, String)> {
    ["SKILL.md", "playbook.md"]
        .iter()
        .map(|f| {
            let p = repo().join(".agents/skills/katlas").join(f);
            (f.to_string(), std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        })
        .collect()
}

/// The heading of the section that starts a project from nothing; it runs on its own project.
const NEW_PROJECT: &str = "## Starting in a new project";

/// The new-project section's text (to the next `## ` heading), and the text without it.
fn split_new_project(text: &str) -> (String, String) {
    let Some(start) = text.find(NEW_PROJECT) else { return (String::new(), text.to_string()) };
    let body = &text[start + NEW_PROJECT.len()..];
    let end = body.find("\n## ").map_or(text.len(), |i| start + NEW_PROJECT.len() + i + 1);
    (text[start..end].to_string(), format!("{}{}", &text[..start], &text[end..]))
}

/// Every line of each ```sh fence, one list per fence.
fn fenced_blocks(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            match cur.take() {
                Some(b) => out.push(b),
                None if t.trim_start_matches('`').starts_with("sh") => cur = Some(Vec::new()),
                None => {}
            }
            continue;
        }
        if let Some(b) = cur.as_mut() {
            b.push(line.to_string());
        }
    }
    out
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
    let o = katlas_cmd(Path::new(".")).arg("--help").output().unwrap();
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

    let bin = PathBuf::from(KATLAS);
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    for (file, text) in skill_files() {
        let (_, rest) = split_new_project(&text);
        for cmd in fenced_commands(&rest) {
            let task = std::fs::read_dir(p.join(".katlas/tasks"))
                .ok()
                .and_then(|rd| rd.filter_map(Result::ok).max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok()))
                .map(|e| e.file_name().to_string_lossy().to_string())
                .unwrap_or_default();
            let o = katlas_testkit::cli::isolate(&mut Command::new("sh"))
                .args(["-c", &cmd])
                .current_dir(p)
                .env("PATH", &path)
                .env("KATLAS_CONFIG_DIR", p.join(".katlas/test-user-config"))
                .env("ROWS", "rows.jsonl")
                .env("PHASE", "decode_ar")
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

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn newest_task(project: &Path) -> String {
    std::fs::read_dir(project.join(".katlas/tasks"))
        .ok()
        .and_then(|rd| rd.filter_map(Result::ok).max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok()))
        .map(|e| e.file_name().to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The section as an agent in a fresh project runs it: a git repository holding only a CUDA
/// file, a HIP file, a Python workload and its correctness check (tests/skill-project). Each
/// fence runs whole (`sh -e`, so a failing command fails the test); `$TASK` is the task the
/// section's `katlas task` wrote, as in the test above. Between the task and the eval the test
/// does the agent's part: the multi-row edit in the allowed kernel files.
#[test]
fn skill_new_project_section_runs_from_init_to_ledger() {
    let skill = std::fs::read_to_string(repo().join(".agents/skills/katlas/SKILL.md")).unwrap();
    let (section, _) = split_new_project(&skill);
    assert!(!section.is_empty(), "SKILL.md has a `{NEW_PROJECT}` section");
    let blocks = fenced_blocks(&section);
    let lines: Vec<&str> = blocks.iter().flatten().map(|l| l.trim()).collect();
    // The order a new project needs: trust before the collect that runs the workload, a row
    // before fit, a task before its eval, the ledger last.
    let steps = ["katlas init", "katlas trust", "katlas collect", "katlas fit", "katlas suggest", "katlas task", "katlas eval", "katlas ledger ls"];
    let at: Vec<usize> = steps
        .iter()
        .map(|s| lines.iter().position(|l| l.starts_with(s) || l.contains(&format!("$({s}"))).unwrap_or_else(|| panic!("the section runs `{s}`: {lines:?}")))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "the section's steps run in the order {steps:?}: {lines:?}");
    let evals: Vec<&&str> = lines.iter().filter(|l| l.starts_with("katlas eval")).collect();
    assert!(evals.iter().any(|l| l.contains("$TASK")), "the section evals the task: {evals:?}");
    assert!(evals.iter().any(|l| l.contains("--baseline") && l.contains("--command")), "the section shows `eval --baseline REF --command`: {evals:?}");

    let python = Command::new("python3").arg("--version").output();
    assert!(python.is_ok_and(|o| o.status.success()), "python3 is required: the scratch project's workload is a Python script");

    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("project");
    copy_tree(&repo().join("crates/katlas/tests/skill-project"), &p);
    std::fs::remove_file(p.join("README.md")).unwrap();
    let bin = PathBuf::from(KATLAS);
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let sh = |script: &str, task: &str| {
        katlas_testkit::cli::isolate(&mut Command::new("sh"))
            .args(["-exc", script])
            .current_dir(&p)
            .env("PATH", &path)
            .env("KATLAS_CONFIG_DIR", d.path().join("user-config"))
            .env("GIT_AUTHOR_NAME", "agent")
            .env("GIT_AUTHOR_EMAIL", "agent@example.com")
            .env("GIT_COMMITTER_NAME", "agent")
            .env("GIT_COMMITTER_EMAIL", "agent@example.com")
            .env("TASK", task)
            .output()
            .unwrap()
    };
    let setup = sh("git init -q . && git add -A && git commit -qm 'gemv kernels and their workload'", "");
    assert!(setup.status.success(), "scratch project: {}", String::from_utf8_lossy(&setup.stderr));

    let mut edited = false;
    for block in &blocks {
        if !edited && block.iter().any(|l| l.trim().starts_with("katlas eval")) {
            let clean = sh("test -z \"$(git status --porcelain)\"", "");
            assert!(clean.status.success(), "the section commits what init and the workload file added before the task's baseline (HEAD) is taken");
            for f in ["kernels/gemv.cu", "kernels/gemv.hip"] {
                let text = std::fs::read_to_string(p.join(f)).unwrap();
                assert!(text.contains("#define ROWS_PER_BLOCK 1\n"), "{f}");
                std::fs::write(p.join(f), text.replace("#define ROWS_PER_BLOCK 1\n", "#define ROWS_PER_BLOCK 4\n")).unwrap();
            }
            edited = true;
        }
        // An eval's verdict is its exit code (1: anything but improved); 2 and 3 are failures.
        let script: Vec<String> = block.iter().map(|l| if l.trim().starts_with("katlas eval") { format!("{l} || [ $? -eq 1 ]") } else { l.clone() }).collect();
        let o = sh(&script.join("\n"), &newest_task(&p));
        assert!(
            o.status.success(),
            "the block\n{}\nfailed ({:?})\nstdout:\n{}\nstderr:\n{}",
            block.join("\n"),
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(edited, "the section ends in an eval");

    let task = newest_task(&p);
    let packet: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join(".katlas/tasks").join(&task).join("task.json")).unwrap()).unwrap();
    assert_eq!(packet["kernel"], "gemv_f32", "the task targets the workload's hot kernel");
    let allowed = packet["allowed_files"].to_string();
    assert!(allowed.contains("kernels/gemv.cu") && allowed.contains("kernels/gemv.hip"), "both kernel sources are allowed: {allowed}");

    let o = katlas_cmd(&p).args(["ledger", "ls", "--format", "json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ledger: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let entries = ledger.as_array().expect("ledger ls --format json is an array of entries");
    assert_eq!(entries.len(), evals.len(), "one ledger entry per eval of the section: {ledger:#}");
    for e in entries {
        let verdict = e["verdict"].as_str().unwrap_or_default();
        assert!(
            ["improved", "no_change", "regressed", "inconclusive", "unstable"].contains(&verdict),
            "a verdict that measured the change, not `{verdict}`: {:#}",
            e["reasons"]
        );
        assert_eq!(e["metric"], "decode_tok_s", "judged on the workload's metric");
    }
    assert_eq!(entries[0]["task_id"], task.as_str(), "the first eval is the task's");
}
