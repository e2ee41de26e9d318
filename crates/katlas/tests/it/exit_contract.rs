//! Exit codes and messages a person meets at the edges: nothing to scan is bad input, a write
//! the disk refuses is the environment (3) whichever path met it, a missing program is named as
//! written, Ctrl-C of a collect is 130; and the table of docs/cli.md ("Exit codes") lists
//! every code the source returns, each produced here (or in verdict_exit_codes.rs) by a real
//! command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{katlas_cmd, repo, KATLAS};

#[test]
fn isa_scan_of_files_without_code_objects_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let readme = d.path().join("README.md");
    std::fs::write(&readme, "# not a code object\n").unwrap();
    let o = katlas_cmd(d.path()).args(["isa", "scan"]).arg(&readme).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no code object found"));
    assert!(!d.path().join(".katlas/isa").exists() || std::fs::read_dir(d.path().join(".katlas/isa")).unwrap().next().is_none(), "no empty manifest written");
}

fn dev_full() -> std::fs::File {
    std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full is needed for this test (Linux)")
}

#[test]
fn reports_to_a_full_device_are_clean_errors_not_panics() {
    for args in [&["arch", "ls"][..], &["schema"][..], &["arch", "show", "gfx1100"][..], &["--help"][..], &["fit", "--help"][..]] {
        let o = katlas_cmd(Path::new(".")).args(args).stdout(Stdio::from(dev_full())).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: a report the disk refused is the environment: {err}");
        assert!(err.starts_with("katlas: error: ") && err.contains("No space left on device"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // A closed pipe is not an error: `katlas arch ls | head -1`.
    let o = katlas_testkit::cli::isolate(&mut Command::new("sh")).arg("-c").arg(format!("{KATLAS} arch ls | head -1")).output().unwrap();
    assert!(o.status.success());
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

#[test]
fn a_missing_program_is_named_as_written_and_exits_3() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    let o = katlas_cmd(d.path())
        .args(["eval", "--baseline", "/nonexistent/prog --x", "--candidate", "/nonexistent/prog", "--metric", "x", "--telemetry", "false"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("program `/nonexistent/prog` not found"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A usage error speaks like every other katlas error (`katlas: error: …`, exit 2), with clap's
/// own explanation and its usage line or pointer to --help after it; help and version still go
/// to stdout with exit 0.
#[test]
fn usage_errors_are_katlas_errors_and_help_is_success() {
    let run = |args: &[&str]| katlas_cmd(Path::new(".")).args(args).output().unwrap();
    for args in [&["fit", "--no-such-flag"][..], &["no-such-command"][..], &["eval", "-n", "many"][..]] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("katlas: error: "), "{args:?}: {err}");
        assert!(!err.contains("katlas: error: error:"), "{args:?}: {err}");
        assert!(err.contains("Usage:") || err.contains("--help"), "{args:?}: {err}");
    }
    for args in [&["--help"][..], &["fit", "--help"][..], &["--version"][..]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(!o.stdout.is_empty() && o.stderr.is_empty(), "{args:?}");
    }
    // No subcommand: the help, as a usage error.
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Usage:"));
}

/// A row appended to a corpus file on a full disk fails deep in katlas-corpus, whose error
/// carries the OS error as text: it is the same class (3) as a report that cannot reach stdout,
/// not bad input. (`--output /dev/full`: the rows file is opened for appending, never replaced,
/// so only the device itself is written to.)
#[test]
fn a_row_the_disk_refuses_is_exit_3_like_a_report_it_refuses() {
    dev_full();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("katlas.toml"), "[workload.quick]\ncommand = 'echo v=1'\nparsers = ['kv']\n").unwrap();
    let o = katlas_cmd(d.path()).args(["collect", "quick", "--output", "/dev/full"]).env("KATLAS_YES", "1").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("/dev/full") && err.contains("No space left on device"), "{err}");
}

/// An export's writer is typed down to the OS error (katlas-store's `ExportError`), so its class
/// decides the code: the disk refusing the CSV is 3, a table nobody has is 2.
#[test]
fn an_export_the_disk_refuses_is_exit_3_and_an_unknown_table_exit_2() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    let full = katlas_cmd(d.path()).args(["export", "--format", "csv", "--table", "rows", "--out", "-"]).stdout(Stdio::from(dev_full())).output().unwrap();
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(3), "{err}");
    assert!(err.contains("No space left on device") && !err.contains("panicked"), "{err}");
    let unknown = katlas_cmd(d.path()).args(["export", "--format", "csv", "--table", "nope", "--out", "-"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2), "{}", String::from_utf8_lossy(&unknown.stderr));
}

/// A write the CLI makes itself keeps its OS error too (`CliError::io`): an ISA manifest the disk
/// refuses is 3, named by its path.
#[test]
fn a_manifest_the_disk_refuses_is_exit_3() {
    dev_full();
    let d = tempfile::tempdir().unwrap();
    let cubin = repo().join("fixtures/h200/triton-cache/KJZIFGNVC3EZPCSNAFTF64CHVZZXBQYEVZBUNYH7U2MGYVBPTNCQ/matmul_kernel.cubin");
    let o = katlas_cmd(d.path()).args(["isa", "scan"]).arg(&cubin).args(["--output", "/dev/full"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("/dev/full: No space left on device"), "{err}");
}

/// Ctrl-C of `katlas collect` stops the running workload (its process group is killed) and
/// exits 130, keeping what it measured.
#[test]
fn ctrl_c_of_collect_exits_130() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::write(root.join("katlas.toml"), "[workload.hang]\ncommand = '''sh -c 'echo $$ > started; exec sleep 60' '''\nparsers = ['kv']\n").unwrap();
    let child = katlas_cmd(root)
        .args(["collect", "hang", "--output", "rows.jsonl"])
        .env("KATLAS_YES", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !root.join("started").exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "the workload never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to the child this test spawned and has not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("(interrupted: rows measured so far are kept)"), "{out}");
    assert!(t0.elapsed() < Duration::from_secs(50), "collect waited for the workload instead of stopping it");
}

/// The codes of the table in docs/cli.md's "Exit codes" section.
fn documented_codes() -> BTreeSet<u8> {
    let doc = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let section = doc.split("\n## Exit codes\n").nth(1).expect("docs/cli.md has an `## Exit codes` section");
    let section = section.split("\n## ").next().unwrap();
    section.lines().filter_map(|l| l.strip_prefix("| ")).filter_map(|l| l.split(" |").next()).filter_map(|c| c.trim().parse().ok()).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every exit code the source can return, each with where: the constants of `ctx::exit` it
/// uses, the literals of `ExitCode::from(…)` and `process::exit(…)`, and the codes
/// katlas-build's `exit_code()` gives `katlas build`. Returns them and how many sites were read.
fn codes_in_source() -> (BTreeMap<u8, Vec<String>>, usize) {
    let root = repo();
    let ctx = std::fs::read_to_string(root.join("crates/katlas/src/ctx.rs")).unwrap();
    let konst = regex::Regex::new(r"pub const ([A-Z_]+): u8 = (\d+);").unwrap();
    let named: BTreeMap<String, u8> = konst.captures_iter(&ctx).map(|c| (c[1].to_string(), c[2].parse().unwrap())).collect();
    assert!(named.len() >= 4, "ctx::exit's constants not found: {named:?}");
    let literal = regex::Regex::new(r"(?:ExitCode::from|process::exit)\(\s*(\d+)\s*\)").unwrap();
    let uses = regex::Regex::new(r"exit::([A-Z_]+)\b").unwrap();
    let mut files = Vec::new();
    rust_files(&root.join("crates/katlas/src"), &mut files);
    let (mut found, mut sites) = (BTreeMap::<u8, Vec<String>>::new(), 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let at = f.strip_prefix(&root).unwrap().display().to_string();
        for c in literal.captures_iter(&text) {
            sites += 1;
            found.entry(c[1].parse().unwrap()).or_default().push(format!("{at}: {}", &c[0]));
        }
        for c in uses.captures_iter(&text) {
            sites += 1;
            let code = *named.get(&c[1]).unwrap_or_else(|| panic!("{at}: exit::{} is not a constant of ctx::exit", &c[1]));
            found.entry(code).or_default().push(format!("{at}: {}", &c[0]));
        }
    }
    // `katlas build` returns the matrix's own codes (`BuildReport::exit_code`); an error of any
    // crate reaches a code only through its class, mapped in ctx.rs (`CliError::of_class`).
    let body = regex::Regex::new(r"(?s)fn exit_code\(&self\) -> u8 \{(.*?)\n    \}").unwrap();
    let arm = regex::Regex::new(r"(?:=>|\{)\s*(\d+)\s*[,}]").unwrap();
    for f in ["crates/katlas-build/src/build.rs"] {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        let b = body.captures(&text).unwrap_or_else(|| panic!("{f}: no `fn exit_code(&self) -> u8`"));
        for c in arm.captures_iter(&b[1]) {
            sites += 1;
            found.entry(c[1].parse().unwrap()).or_default().push(format!("{f}: exit_code() -> {}", &c[1]));
        }
    }
    (found, sites)
}

/// docs/cli.md's table and the source agree: no code is returned that the table lacks, and the
/// table lists none that nothing returns (101, a panic, comes from Rust's runtime). The top
/// `--help` states every code too.
#[test]
fn the_exit_code_table_lists_every_code_the_source_returns() {
    let documented = documented_codes();
    assert!(documented.is_superset(&BTreeSet::from([0, 1, 2, 3])), "docs/cli.md's exit code table: {documented:?}");
    let (found, sites) = codes_in_source();
    assert!(sites > 20, "only {sites} exit-code sites read in crates/katlas/src");
    let undocumented: Vec<String> = found.iter().filter(|(c, _)| !documented.contains(c)).map(|(c, at)| format!("{c}: {}", at.join("; "))).collect();
    assert!(undocumented.is_empty(), "codes returned but missing from docs/cli.md's table:\n  {}", undocumented.join("\n  "));
    let unused: Vec<&u8> = documented.iter().filter(|c| **c != 101 && !found.contains_key(c)).collect();
    assert!(unused.is_empty(), "docs/cli.md lists codes nothing returns: {unused:?}");
    let o = katlas_cmd(Path::new(".")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    let said = help.split("Exit codes:").nth(1).expect("`katlas --help` states the exit codes");
    for c in documented.iter().filter(|c| **c != 101) {
        assert!(said.contains(&format!("{c} ")), "`katlas --help` does not mention exit code {c}: {said}");
    }
}
