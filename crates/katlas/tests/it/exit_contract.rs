//! Exit codes and messages a person meets at the edges (issue 15): nothing to scan is bad
//! input, an unwritable report is a clean error, a missing program is named as written.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::cli::{katlas_cmd, KATLAS};

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

#[test]
fn reports_to_a_full_device_are_clean_errors_not_panics() {
    if !std::path::Path::new("/dev/full").exists() {
        panic!("/dev/full is needed for this test (Linux)");
    }
    for args in [&["arch", "ls"][..], &["schema"][..], &["arch", "show", "gfx1100"][..]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = katlas_cmd(Path::new(".")).args(args).stdout(Stdio::from(full)).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(101), "{args:?} panicked: {err}");
        assert!(o.status.code().is_some_and(|c| c != 0), "{args:?}: a failed write is not success");
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
