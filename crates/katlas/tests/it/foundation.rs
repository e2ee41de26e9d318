//! Issue 2's checks, run through the real binary as a user would.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::cli::{fixture, git, katlas_cmd, leaves, stderr, stdout};

/// `katlas ARGS` in `dir`, in the test environment and without `KATLAS_YES`.
fn katlas(dir: &Path, args: &[&str]) -> Output {
    katlas_cmd(dir).args(args).output().expect("run katlas")
}

#[test]
fn help_lists_subcommands_and_each_has_help() {
    let dir = tempfile::tempdir().unwrap();
    let o = katlas(dir.path(), &["--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    let subs: Vec<String> = help
        .split("Commands:")
        .nth(1)
        .expect("help has a Commands section")
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // Wrapped descriptions continue on deeper-indented lines.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|s| s != "help")
        .collect();
    for want in ["init", "identity", "corpus", "schema"] {
        assert!(subs.iter().any(|s| s == want), "`{want}` missing from --help: {subs:?}");
    }
    for s in &subs {
        let o = katlas(dir.path(), &[s, "--help"]);
        assert!(o.status.success(), "katlas {s} --help failed: {}", stderr(&o));
    }
}

#[test]
fn import_keeps_every_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("hipfire/atlas_rows_v0.jsonl");
    let o = katlas(dir.path(), &["corpus", "import", src.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(out["imported"], 3);
    let decode = &rows[0];
    assert_eq!(decode["identity"]["binary"]["md5"], "9d4f1c2a7b3e8f6d5c4b3a2918076e5d");
    assert_eq!(decode["identity"]["source"]["diff_md5"], "3f2e1d0c9b8a7f6e5d4c3b2a19081726");
    assert_eq!(decode["kernels"].as_array().unwrap().len(), 3);
    assert_eq!(decode["kernels"][0]["name"], "gemv_hfq4g256_residual");
    assert_eq!(decode["kernels"][0]["total_us"], 480200.0);
    assert_eq!(decode["route"]["attributes"]["attention_impl"], "attention_flash_asym3");
    assert_eq!(decode["route"]["attributes"]["graph_blob_count"], 412);
    let dflash = &rows[1];
    assert_eq!(dflash["artifacts"]["draft"], "/models/draft.hfq");
    assert_eq!(dflash["identity"]["prompt"]["md5"], "253c7ac50857fe6d0e10fb0d2c5e35c0");
    let err = &rows[2];
    assert_eq!(err["status"], "error");
    assert_eq!(err["error"]["stderr_tail"], "thread 'main' panicked at out of device memory");

    // No field lost: every non-null leaf value of each source row appears in its v1 row.
    let text = std::fs::read_to_string(&src).unwrap();
    for (src_row, v1) in text.lines().filter(|l| !l.trim().is_empty()).zip(rows) {
        let src_row: Value = serde_json::from_str(src_row).unwrap();
        let (have, want) = (leaves(v1), leaves(&src_row));
        for w in want.iter().filter(|w| !w.is_null()) {
            let found = have.iter().any(|h| {
                h == w
                    || match (h.as_f64(), w.as_f64()) {
                        // total_ms is stored as total_us.
                        (Some(a), Some(b)) => a == b || (a - b * 1000.0).abs() < 1e-6 * a.abs().max(1.0),
                        _ => false,
                    }
            });
            assert!(found, "value {w} of the v0 row is missing from the v1 row");
        }
    }

    // Re-import is idempotent and the rows are in the corpus.
    let o = katlas(dir.path(), &["corpus", "import", src.to_str().unwrap(), "--format", "json"]);
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["imported"], 0);
    assert_eq!(out["already_present"], 3);
    let o = katlas(dir.path(), &["corpus", "ls", "--format", "json"]);
    let ls: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(ls["rows"].as_array().unwrap().len(), 3);
}

#[test]
fn garbage_line_named_and_neighbours_listed() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("hipfire/atlas_rows_v0.jsonl");
    let corpus = dir.path().join("c.jsonl");
    let o = katlas(dir.path(), &["corpus", "import", src.to_str().unwrap(), "--output", corpus.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&corpus).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&corpus, format!("{}\n{}\n@@ garbage @@\n{}\n", lines[0], lines[1], lines[2])).unwrap();

    let o = katlas(dir.path(), &["corpus", "validate", corpus.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "validate must fail on a bad line");
    assert!(stderr(&o).contains(&format!("{}:3:", corpus.display())), "{}", stderr(&o));

    let o = katlas(dir.path(), &["corpus", "ls", "--file", corpus.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success());
    let ls: Value = serde_json::from_slice(&o.stdout).unwrap();
    let lines_seen: Vec<u64> = ls["rows"].as_array().unwrap().iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert_eq!(lines_seen, [1, 2, 4]);
    assert_eq!(ls["errors"][0]["line"], 3);

    let o = katlas(dir.path(), &["corpus", "ls", "--file", corpus.to_str().unwrap(), "--strict"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn identity_diff_digest_follows_untracked_content() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("kernel.hip"), "k").unwrap();
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "init"]);
    let id = |cwd: &Path| -> Value {
        let o = katlas(cwd, &["identity", "--format", "json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let clean = id(root);
    assert_eq!(clean["source"]["diff_md5"], Value::Null);
    assert_eq!(clean["source"]["dirty"], false);
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/untracked.hip"), "aaaa").unwrap();
    let a = id(&root.join("sub"))["source"]["diff_md5"].clone();
    std::fs::write(root.join("sub/untracked.hip"), "bbbb").unwrap();
    let b = id(root)["source"]["diff_md5"].clone();
    assert!(a.is_string() && b.is_string());
    assert_ne!(a, b, "content-only change of an untracked file must change the digest");
}

#[test]
fn identity_records_env_without_secrets_and_override() {
    let dir = tempfile::tempdir().unwrap();
    let o = katlas_cmd(dir.path())
        .args(["identity", "--format", "json"])
        .env("HIPFIRE_GRAPH", "1")
        .env("HIPFIRE_HF_TOKEN", "secret")
        .env("KATLAS_ARCH", "gfx1100")
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["env"]["HIPFIRE_GRAPH"], "1");
    assert!(v["env"].get("HIPFIRE_HF_TOKEN").is_none());
    assert!(v["devices"].as_array().unwrap().iter().all(|d| d["arch"] == "gfx1100"));
    // Toolkits absent on this machine are recorded as null, not errors.
    assert!(v["toolkits"].as_object().unwrap().contains_key("nvcc"));
}

#[test]
fn unknown_config_key_is_bad_input_with_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("katlas.toml"), "[project]\nname = \"x\"\nkernel_rot = []\n").unwrap();
    let o = katlas(dir.path(), &["corpus", "ls"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("katlas.toml:3: project.kernel_rot"), "{e}");
}

#[test]
fn init_writes_a_config_that_loads() {
    let dir = tempfile::tempdir().unwrap();
    assert!(katlas(dir.path(), &["init"]).status.success());
    assert!(dir.path().join(".katlas/corpus").is_dir());
    assert_eq!(katlas(dir.path(), &["init"]).status.code(), Some(2), "init must not overwrite");
    let o = katlas(dir.path(), &["corpus", "ls"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn init_makes_git_ignore_katlas_state_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    // A user's own .gitignore without a final newline: its line stays whole.
    std::fs::write(root.join(".gitignore"), "target").unwrap();
    let o = katlas(root, &["init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("added .katlas/ to"), "{}", stdout(&o));
    for f in [".katlas/corpus/rows.jsonl", ".katlas/runs/r1/stdout.txt", ".katlas/index.sqlite"] {
        std::fs::create_dir_all(root.join(f).parent().unwrap()).unwrap();
        std::fs::write(root.join(f), "x\n").unwrap();
    }
    let status = |root: &Path| {
        let o = Command::new("git").arg("-C").arg(root).args(["status", "--porcelain", "--untracked-files=all"]).output().unwrap();
        assert!(o.status.success());
        stdout(&o)
    };
    let s = status(root);
    assert!(!s.contains(".katlas"), "git sees katlas state:\n{s}");
    assert!(s.contains("katlas.toml") && s.contains(".gitignore"), "{s}");

    let o = katlas(root, &["init", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("added .katlas/"), "{}", stdout(&o));
    assert_eq!(std::fs::read_to_string(root.join(".gitignore")).unwrap(), "target\n.katlas/\n");

    // No .gitignore yet: init creates it.
    let fresh = tempfile::tempdir().unwrap();
    assert!(katlas(fresh.path(), &["init"]).status.success());
    assert_eq!(std::fs::read_to_string(fresh.path().join(".gitignore")).unwrap(), ".katlas/\n");
}

#[test]
fn committed_schemas_match_code() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    let o = katlas(Path::new(env!("CARGO_MANIFEST_DIR")), &["schema", "--check", docs.to_str().unwrap()]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}
