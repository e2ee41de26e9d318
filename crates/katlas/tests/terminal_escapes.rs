//! Names from files cannot drive the terminal (issue 15, terminal escapes): ESC, OSC and
//! BEL in kernel names, workload names and row ids are shown as escapes by `corpus ls`,
//! `corpus import`, `parse` and `fit` (text and markdown), a newline in a name does not
//! break a table row, and HTML escapes markup.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn katlas(dir: &Path, args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_katlas"))
        .args(args)
        .current_dir(dir)
        .env("KATLAS_YES", "1")
        .env("KATLAS_CONFIG_DIR", "/nonexistent/katlas-test-config")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "katlas {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(rel)
}

const EVIL_KERNEL: &str = "gemv_hfq4g256_residual\x1b]0;owned\x07\x1b[2J";
const EVIL_WORKLOAD: &str = "wl\x1b]52;c;cGF5bG9hZA==\x07\nsecondline";

/// Every character but the line break is inert (no C0, DEL or C1 control).
fn assert_inert(what: &str, o: &Output) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let bad: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n').collect();
        assert!(bad.is_empty(), "{what} {stream}: raw control characters {bad:?} in\n{text}");
    }
}

#[test]
fn names_from_files_reach_the_terminal_escaped() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::write(root.join("katlas.toml"), "").unwrap();
    // Real rows (hipfire's bench profile), then given hostile names and ids.
    let o = katlas(root, &["parse", "hipfire-bench", fixture("hipfire/bench_ar_profile.txt").to_str().unwrap(), "--rows", "w"]);
    let mut rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(rows.len() >= 2, "{rows:?}");
    for (i, r) in rows.iter_mut().enumerate() {
        r["id"] = format!("r{i}\x1b[2J\n\x07{}", "0".repeat(20)).into();
        r["workload"] = EVIL_WORKLOAD.into();
        for k in r["kernels"].as_array_mut().unwrap() {
            if k["name"] == "gemv_hfq4g256_residual" {
                k["name"] = EVIL_KERNEL.into();
            }
        }
    }
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(root.join("evil.jsonl"), text).unwrap();

    let imported = katlas(root, &["corpus", "import", "evil.jsonl"]);
    assert_inert("corpus import", &imported);
    for fmt in ["text", "markdown"] {
        let ls = katlas(root, &["corpus", "ls", "--format", fmt]);
        assert_inert(&format!("corpus ls --format {fmt}"), &ls);
        let out = String::from_utf8_lossy(&ls.stdout);
        // One line per row: the workload's newline is shown, not obeyed.
        assert_eq!(out.lines().filter(|l| l.contains("secondline")).count(), rows.len(), "{out}");
        assert!(out.lines().all(|l| !l.trim_start().starts_with("secondline")), "{out}");
        assert!(out.contains("wl\\u{1b}]52;c;cGF5bG9hZA==\\u{7}\\nsecondline"), "{out}");
    }
    for fmt in ["text", "markdown"] {
        let fit = katlas(root, &["fit", "evil.jsonl", "--phase", "decode", "--format", fmt]);
        assert_inert(&format!("fit --format {fmt}"), &fit);
        let out = String::from_utf8_lossy(&fit.stdout);
        assert!(out.contains("gemv_hfq4g256_residual\\u{1b}]0;owned\\u{7}\\u{1b}[2J"), "{out}");
        assert!(out.lines().all(|l| !l.trim_start().starts_with("secondline")), "{out}");
    }

    // parse: a kernel name in a profiler's own output.
    let profile = std::fs::read_to_string(fixture("hipfire/bench_ar_profile.txt")).unwrap();
    let evil = profile.replacen("gemv_hfq4g256_residual ", &format!("{EVIL_KERNEL} "), 1);
    assert_ne!(evil, profile);
    std::fs::write(root.join("evil_profile.txt"), evil).unwrap();
    for fmt in ["text", "markdown"] {
        let p = katlas(root, &["parse", "hipfire-bench", "evil_profile.txt", "--format", fmt]);
        assert_inert(&format!("parse --format {fmt}"), &p);
        assert!(String::from_utf8_lossy(&p.stdout).contains("\\u{1b}]0;owned"));
    }

    // HTML escapes markup (and shows controls as escapes too).
    let mut html_row = rows.iter().find(|r| r["kernels"].as_array().unwrap().iter().any(|k| k["name"] == EVIL_KERNEL)).unwrap().clone();
    for k in html_row["kernels"].as_array_mut().unwrap() {
        if k["name"] == EVIL_KERNEL {
            k["name"] = "gemv<script>alert(1)</script>\x1b[2J".into();
        }
    }
    std::fs::write(root.join("html.jsonl"), format!("{html_row}\n")).unwrap();
    let h = katlas(root, &["fit", "html.jsonl", "--format", "html"]);
    assert_inert("fit --format html", &h);
    let out = String::from_utf8_lossy(&h.stdout);
    assert!(out.contains("gemv&lt;script&gt;alert(1)&lt;/script&gt;"), "{out}");
    assert!(!out.contains("<script>"), "{out}");
}
