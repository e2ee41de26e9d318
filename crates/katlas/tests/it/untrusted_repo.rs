//! A repository katlas runs in may be hostile: links in `.katlas/` that point out of
//! the project, task ids that climb out of `.katlas/tasks/`, and commands in its files
//! (`[eval] settle`, task packets, workload specs) that must be shown and trusted
//! before they run (issue 15, the HIGH and MEDIUM items).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli::katlas_cmd;

struct Repo {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    user_config: PathBuf,
}

fn repo() -> Repo {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("clone");
    let outside = d.path().join("home");
    let user_config = d.path().join("user-config");
    for p in [&root, &outside, &user_config] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::create_dir_all(root.join(".katlas")).unwrap();
    Repo { _dir: d, root, outside, user_config }
}

impl Repo {
    fn katlas(&self, args: &[&str]) -> Output {
        self.katlas_env(args, &[])
    }
    fn katlas_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        // The test environment without KATLAS_YES, and a user config of this test's own.
        katlas_cmd(&self.root).args(args).env("KATLAS_CONFIG_DIR", &self.user_config).envs(env.iter().copied()).output().unwrap()
    }
    /// A file outside the project that a link in the clone points at.
    fn victim(&self, name: &str) -> PathBuf {
        let p = self.outside.join(name);
        std::fs::write(&p, "precious\n").unwrap();
        p
    }
    fn outside_untouched(&self) {
        for e in std::fs::read_dir(&self.outside).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                assert_eq!(std::fs::read_to_string(&p).unwrap(), "precious\n", "{} was written through a link", p.display());
            } else {
                assert!(std::fs::read_dir(&p).unwrap().next().is_none(), "{} got files through a link", p.display());
            }
        }
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

const EVAL: &[&str] = &["--metric", "tok_s", "-n", "3", "--telemetry", "false"];

fn args<'a>(head: &[&'a str]) -> Vec<&'a str> {
    head.iter().copied().chain(EVAL.iter().copied()).collect()
}

#[test]
fn links_in_dot_katlas_are_never_written_through() {
    let r = repo();
    std::fs::create_dir_all(r.root.join(".katlas/cache")).unwrap();
    let last = r.victim("suggest-target");
    symlink(&last, r.root.join(".katlas/cache/suggest-last.json")).unwrap();
    let md5 = r.victim("md5-target");
    symlink(&md5, r.root.join(".katlas/cache/md5-cache.jsonl")).unwrap();
    let noise = r.victim("noise-target");
    symlink(&noise, r.root.join(".katlas/noise.json")).unwrap();
    let o = r.katlas(&args(&["eval", "--aa", "--command", "echo tok_s=100", "--no-ledger"]));
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
    // Nor is a band read through it: every eval of the clone refuses until the link goes.
    let o = r.katlas(&args(&["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--no-ledger"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    std::fs::remove_file(r.root.join(".katlas/noise.json")).unwrap();

    let ledger = r.victim("ledger-target");
    symlink(&ledger, r.root.join(".katlas/ledger.jsonl")).unwrap();
    let o = r.katlas(&args(&["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("ledger.jsonl"), "{}", text(&o));

    let rows = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hipfire/atlas_rows_v0.jsonl");
    let o = r.katlas(&["suggest", rows.to_str().unwrap(), "--phase", "decode_ar"]);
    assert!(text(&o).contains("symbolic link"), "suggest warns about the link: {}", text(&o));

    let corpus_dir = r.outside.join("corpus-target");
    std::fs::create_dir_all(&corpus_dir).unwrap();
    let _ = std::fs::remove_dir_all(r.root.join(".katlas/corpus"));
    symlink(&corpus_dir, r.root.join(".katlas/corpus")).unwrap();
    let o = r.katlas(&["corpus", "import", rows.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    let runs_dir = r.outside.join("runs-target");
    std::fs::create_dir_all(&runs_dir).unwrap();
    let _ = std::fs::remove_dir_all(r.root.join(".katlas/runs"));
    symlink(&runs_dir, r.root.join(".katlas/runs")).unwrap();
    std::fs::write(r.root.join("katlas.toml"), "[workload.w]\ncommand = 'echo tok_s=1'\n").unwrap();
    let o = r.katlas(&["--yes", "collect", "w", "--output", r.root.join("rows.jsonl").to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    r.outside_untouched();
}

#[test]
fn a_linked_dot_katlas_is_refused() {
    let r = repo();
    std::fs::remove_dir(r.root.join(".katlas")).unwrap();
    let target = r.outside.join("dot");
    std::fs::create_dir_all(&target).unwrap();
    symlink(&target, r.root.join(".katlas")).unwrap();
    let o = r.katlas(&args(&["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    r.outside_untouched();
}

#[test]
fn task_ids_stay_inside_the_tasks_directory() {
    let r = repo();
    let evil = r.outside.join("X");
    std::fs::create_dir_all(&evil).unwrap();
    let marker = r.outside.join("ran");
    std::fs::write(
        evil.join("task.json"),
        format!(
            r#"{{"schema":"katlas.task.v1","id":"x","created_at":"2026-11-30T00:00:00Z","origin":{{"kind":"manual"}},"objective":"o","hypothesis":"h","target":{{}},"evidence":{{}},"baseline":{{}},"bench":{{"command":["touch","{}"],"metric":"tok_s","goal":"maximize"}},"next":""}}"#,
            marker.display()
        ),
    )
    .unwrap();
    let rel = "../../../home/X";
    for id in [rel, evil.to_str().unwrap(), "a/b"] {
        let o = r.katlas(&["--yes", "eval", id, "-n", "3"]);
        assert_eq!(o.status.code(), Some(2), "{id}: {}", text(&o));
        assert!(text(&o).contains("task id"), "{}", text(&o));
    }
    assert!(!marker.exists(), "the outside task ran");
    assert!(!evil.join("evals").exists(), "evals were written outside");
}

fn task_json(marker: &Path) -> String {
    format!(
        r#"{{"schema":"katlas.task.v1","id":"t1","created_at":"2026-11-30T00:00:00Z","origin":{{"kind":"manual"}},"objective":"o","hypothesis":"h","target":{{}},"evidence":{{}},"baseline":{{}},"build":["touch {m}.build"],"bench":{{"command":["sh","-c","touch {m}.bench; echo tok_s=1"],"metric":"tok_s","goal":"maximize"}},"correctness":[{{"claim":"c","command":"touch {m}.check"}}],"next":""}}"#,
        m = marker.display()
    )
}

#[test]
fn repository_commands_are_shown_and_run_only_when_trusted() {
    let r = repo();
    let m = r.root.join("settled");
    std::fs::write(r.root.join("katlas.toml"), format!("[eval]\nsettle = \"touch {}\"\n", m.display())).unwrap();
    let eval = args(&["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--no-ledger"]);

    // Untrusted: shown, refused, nothing run.
    let o = r.katlas(&eval);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("commands from katlas.toml") && t.contains(&format!("touch {}", m.display())), "{t}");
    assert!(t.contains("katlas trust katlas.toml"), "{t}");
    assert!(!m.exists(), "settle ran before it was trusted");

    // Trusted: shown again, and it runs.
    let o = r.katlas(&["trust", "katlas.toml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(r.user_config.join("trust.json").is_file(), "trust lives in the user's config");
    assert!(!r.root.join(".katlas/trust.json").exists());
    let o = r.katlas(&eval);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("(trusted"), "{}", text(&o));
    assert!(m.exists(), "settle ran once trusted");

    // An edit untrusts the file.
    std::fs::remove_file(&m).unwrap();
    std::fs::write(r.root.join("katlas.toml"), format!("[eval]\nsettle = \"touch {}; true\"\n", m.display())).unwrap();
    let o = r.katlas(&eval);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("CHANGED since you trusted it"), "{}", text(&o));
    assert!(!m.exists());

    // --yes runs it, still showing it.
    let mut yes = vec!["--yes"];
    yes.extend(eval.iter().copied());
    let o = r.katlas(&yes);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("running because of --yes"), "{}", text(&o));
    assert!(m.exists());
}

/// `katlas ab` settles with the same `[eval] settle` as `eval`: shown, refused untrusted.
#[test]
fn ab_runs_the_repositorys_settle_only_when_trusted() {
    let r = repo();
    let m = r.root.join("settled");
    std::fs::write(r.root.join("katlas.toml"), format!("[eval]\nsettle = \"touch {}\"\n", m.display())).unwrap();
    katlas_testkit::git(&r.root, &["init", "-q"]);
    katlas_testkit::git(&r.root, &["add", "katlas.toml"]);
    katlas_testkit::git(&r.root, &["commit", "-qm", "one"]);
    let ab = args(&["ab", "HEAD", "HEAD", "--command", "echo tok_s=100", "--no-ledger"]);

    let o = r.katlas(&ab);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("commands from katlas.toml") && t.contains(&format!("touch {}", m.display())), "{t}");
    assert!(!m.exists(), "settle ran before it was trusted");

    let o = r.katlas(&["trust", "katlas.toml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = r.katlas(&ab);
    assert!(text(&o).contains("(trusted"), "{}", text(&o));
    assert!(m.exists(), "settle ran once trusted: {}", text(&o));
}

#[test]
fn task_packet_commands_need_trust() {
    let r = repo();
    let m = r.root.join("mark");
    std::fs::create_dir_all(r.root.join(".katlas/tasks/t1")).unwrap();
    std::fs::write(r.root.join(".katlas/tasks/t1/task.json"), task_json(&m)).unwrap();
    let o = r.katlas(&["eval", "t1", "-n", "3", "--telemetry", "false"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    for what in ["build:", "bench:", "correctness c:"] {
        assert!(t.contains(what), "{what} shown: {t}");
    }
    for ext in ["build", "bench", "check"] {
        assert!(!r.root.join(format!("mark.{ext}")).exists(), "{ext} ran untrusted");
    }
    // `katlas trust` with no files lists what the project would run.
    let o = r.katlas(&["trust"]);
    assert!(text(&o).contains("task.json (not trusted)"), "{}", text(&o));
}

#[test]
fn workload_files_need_trust() {
    let r = repo();
    let m = r.root.join("collected");
    std::fs::create_dir_all(r.root.join("workloads")).unwrap();
    std::fs::write(r.root.join("workloads/w.toml"), format!("command = \"touch {}; echo tok_s=1\"\n", m.display())).unwrap();
    let o = r.katlas(&["collect", "w"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("workloads/w.toml"), "{}", text(&o));
    assert!(!m.exists());
    let o = r.katlas(&["trust", "workloads/w.toml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = r.katlas(&["collect", "w"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(m.exists());
}

/// Every file under `dir`, with its text.
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push((p.clone(), String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned()));
        }
    }
    out
}

#[test]
fn the_store_password_reaches_no_record_and_no_log() {
    let r = repo();
    // The documented setup: the store URL, password included, in the environment.
    let url = "postgres://katlas:PW-s3cret-42@db.example:5432/katlas";
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    // A token passed on the command line: hidden in what is recorded, not in what runs.
    let arg_token = "s3cr3t-arg-7";
    let env = [("KATLAS_STORE_URL", url), ("HIPFIRE_MIRROR", &*format!("https://{token}@github.com/x"))];
    std::fs::write(
        r.root.join("katlas.toml"),
        format!(
            "[workload.w]\ncommand = 'true --token {arg_token}; echo \"store $KATLAS_STORE_URL\"; echo \"mirror $HIPFIRE_MIRROR\" >&2; echo tok_s=1; exit 3'\n"
        ),
    )
    .unwrap();
    let o = r.katlas_env(&["--yes", "collect", "w"], &env);
    assert_ne!(o.status.code(), Some(0), "the workload fails, so its output is kept: {}", text(&o));
    let side = |v: u32| format!("sh -c 'true --token {arg_token}; echo tok_s={v}; echo \"store $KATLAS_STORE_URL\"; echo \"mirror $HIPFIRE_MIRROR\" >&2'");
    let o = r.katlas_env(&args(&["eval", "--baseline", &side(100), "--candidate", &side(130)]), &env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Every record and message katlas writes is checked, the children's own output included.
    let files = files_under(&r.root.join(".katlas"));
    assert!(files.iter().any(|(p, _)| p.ends_with("ledger.jsonl")), "{files:?}");
    let outputs: Vec<_> = files.iter().filter(|(p, _)| p.ends_with("stdout") || p.extension().is_some_and(|e| e == "stdout")).collect();
    assert!(outputs.iter().any(|(p, _)| p.ends_with("stdout")) && outputs.iter().any(|(p, _)| p.to_string_lossy().contains("/out/")), "{files:?}");
    for (p, t) in &outputs {
        assert!(t.contains("store postgres://katlas:<redacted>@db.example"), "{} keeps the output, credential hidden:\n{t}", p.display());
    }
    let rows: Vec<_> = files.iter().filter(|(p, t)| p.extension().is_some_and(|e| e == "jsonl") && t.contains("--token <redacted>")).collect();
    assert!(!rows.is_empty(), "the command is recorded, its token hidden: {files:?}");
    let rows: Vec<_> = files.iter().filter(|(_, t)| t.contains("db.example")).collect();
    assert!(!rows.is_empty(), "the URL, without its password, is still recorded: {files:?}");
    for (p, t) in &files {
        for secret in ["PW-s3cret-42", token, arg_token] {
            assert!(!t.contains(secret), "{} holds a credential ({secret}):\n{t}", p.display());
        }
    }
    assert!(!text(&o).contains("PW-s3cret-42"), "{}", text(&o));
}

#[test]
fn the_provenance_interpreter_needs_trust() {
    let r = repo();
    let m = r.root.join("interpreter-ran");
    let py = r.root.join("evil-python");
    std::fs::write(&py, format!("#!/bin/sh\ntouch {}\n", m.display())).unwrap();
    std::fs::set_permissions(&py, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(r.root.join("katlas.toml"), "[provenance]\npackages = [\"fla\"]\npython = \"./evil-python\"\n").unwrap();
    let o = r.katlas(&["provenance", "some_kernel"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("[provenance] python: ./evil-python") && t.contains("not trusted"), "{t}");
    assert!(!m.exists(), "the interpreter ran before katlas.toml was trusted");
    let o = r.katlas(&["trust"]);
    assert!(text(&o).contains("provenance.python: ./evil-python"), "{}", text(&o));
    let digest_before = text(&o);
    std::fs::write(r.root.join("katlas.toml"), "[provenance]\npackages = [\"fla\"]\npython = \"./other-python\"\n").unwrap();
    assert_ne!(text(&r.katlas(&["trust"])), digest_before, "the interpreter is part of what is digested");
    let o = r.katlas(&["trust", "katlas.toml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(r.root.join("katlas.toml"), "[provenance]\npackages = [\"fla\"]\npython = \"./evil-python\"\n").unwrap();
    let o = r.katlas(&["provenance", "some_kernel"]);
    assert!(text(&o).contains("CHANGED since you trusted it"), "{}", text(&o));
    assert!(!m.exists());
}

#[test]
fn env_names_record_exactly_those_variables() {
    let r = repo();
    std::fs::write(r.root.join("katlas.toml"), "[identity]\nenv_names = [\"OMP_NUM_THREADS\"]\n").unwrap();
    let env = [("OMP_NUM_THREADS", "8"), ("OMP_NUM_THREADS_EXTRA", "extra-1")];
    let o = r.katlas_env(&["identity", "--format", "json"], &env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let id: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(id["env"]["OMP_NUM_THREADS"], "8", "{id}");
    assert!(id["env"].get("OMP_NUM_THREADS_EXTRA").is_none(), "a name is not a prefix: {id}");
    // Eval's identity records the same.
    let o = r.katlas_env(&args(&["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130"]), &env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ledger = std::fs::read_to_string(r.root.join(".katlas/ledger.jsonl")).unwrap();
    let entry: serde_json::Value = serde_json::from_str(ledger.lines().last().unwrap()).unwrap();
    for s in [&entry["baseline"], &entry["candidate"]] {
        assert_eq!(s["identity"]["env"]["OMP_NUM_THREADS"], "8", "{entry}");
        assert!(s["identity"]["env"].get("OMP_NUM_THREADS_EXTRA").is_none(), "{entry}");
    }
}

#[test]
fn trust_shows_the_env_and_directory_a_command_runs_with() {
    let r = repo();
    std::fs::create_dir_all(r.root.join("workloads")).unwrap();
    std::fs::write(r.root.join("workloads/w.toml"), "command = 'echo tok_s=1'\ncwd = 'sub'\nenv = { LD_PRELOAD = './hook.so' }\n").unwrap();
    let o = r.katlas(&["collect", "w"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("env LD_PRELOAD: ./hook.so") && t.contains("cwd: sub"), "{t}");
    let o = r.katlas(&["trust", "workloads/w.toml"]);
    assert!(text(&o).contains("env.LD_PRELOAD: ./hook.so"), "{}", text(&o));

    // A task packet's bench.env, at eval and in the listing.
    std::fs::create_dir_all(r.root.join(".katlas/tasks/t1")).unwrap();
    let task = task_json(&r.root.join("mark")).replace(r#""metric":"tok_s""#, r#""env":{"LD_PRELOAD":"./task-hook.so"},"metric":"tok_s""#);
    std::fs::write(r.root.join(".katlas/tasks/t1/task.json"), task).unwrap();
    let o = r.katlas(&["eval", "t1", "-n", "3", "--telemetry", "false"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("bench env LD_PRELOAD: ./task-hook.so"), "{}", text(&o));
    let o = r.katlas(&["trust"]);
    assert!(text(&o).contains("LD_PRELOAD: ./task-hook.so"), "{}", text(&o));
}

#[test]
fn a_repository_cannot_widen_what_is_recorded_or_choose_where_it_goes() {
    let r = repo();
    // `env_prefixes = [""]` would record (and push) the user's whole environment.
    std::fs::write(r.root.join("katlas.toml"), "[identity]\nenv_prefixes = [\"\"]\n").unwrap();
    let o = r.katlas_env(&["identity", "--format", "json"], &[("HOME_SECRETISH", "/home/alice")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("katlas.toml:2: identity.env_prefixes"), "{}", text(&o));
    assert!(!text(&o).contains("/home/alice"), "{}", text(&o));

    // `[store] url` chooses where this host's records go: shown, and used only once trusted.
    std::fs::write(r.root.join("katlas.toml"), "[store]\nurl = \"postgres://u:pw-x1@127.0.0.1:1/k\"\n").unwrap();
    let o = r.katlas(&["store", "push"]);
    assert_eq!(o.status.code(), Some(2), "refused before connecting: {}", text(&o));
    let t = text(&o);
    assert!(t.contains("[store] url: postgres://u:<redacted>@127.0.0.1:1/k") && t.contains("not trusted"), "{t}");
    assert!(!t.contains("pw-x1"), "{t}");
    let o = r.katlas(&["trust"]);
    assert!(text(&o).contains("store.url"), "{}", text(&o));
    // The user's own choice needs no trust.
    let o = r.katlas(&["store", "push", "--url", "postgres://u@127.0.0.1:1/k"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}
