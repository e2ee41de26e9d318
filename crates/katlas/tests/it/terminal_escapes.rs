//! Names from files cannot drive the terminal (issue 15, terminal escapes): ESC, OSC and
//! BEL in kernel names, workload names and row ids are shown as escapes by `corpus ls`,
//! `corpus import`, `parse` and `fit` (text and markdown), a newline in a name does not
//! break a table row, and HTML escapes markup.

use std::path::Path;
use std::process::Output;

use crate::support::cli::{fixture, katlas_cmd};

/// `katlas ARGS` in `dir`, which must succeed.
fn katlas(dir: &Path, args: &[&str]) -> Output {
    let o = crate::support::cli::katlas(dir, args);
    assert!(o.status.success(), "katlas {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

const EVIL_KERNEL: &str = "gemv_hfq4g256_residual\x1b]0;owned\x07\x1b[2J";
const EVIL_WORKLOAD: &str = "wl\x1b]52;c;cGF5bG9hZA==\x07\nsecondline";

/// A control character (C0 with ESC, BEL and CR; DEL; C1) or a bidirectional control.
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Every character but the line break is inert (no C0, DEL, C1 or bidi control).
fn assert_text_inert(what: &str, text: &str) {
    let bad: Vec<char> = text.chars().filter(|c| unsafe_char(*c) && *c != '\n').collect();
    assert!(bad.is_empty(), "{what}: raw control characters {bad:?} in\n{text}");
}

fn assert_inert(what: &str, o: &Output) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        assert_text_inert(&format!("{what} {stream}"), &String::from_utf8_lossy(bytes));
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

/// The kernel and workload names of a second corpus: OSC, CR and a right-to-left override,
/// and a workload that is a spreadsheet formula.
const BIDI_KERNEL: &str = "gemv_hfq4g256_residual\x1b]8;;http://x\x07\r\u{202e}cod.exe";
const FORMULA_WORKLOAD: &str = "=HYPERLINK(\"http://x\",\"ok\")\u{2066}\x1b[2J";

#[test]
fn query_ledger_provenance_isa_and_task_show_names_escaped() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::write(root.join("katlas.toml"), "").unwrap();
    let o = katlas(root, &["parse", "hipfire-bench", fixture("hipfire/bench_ar_profile.txt").to_str().unwrap(), "--rows", "w"]);
    let mut rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (i, r) in rows.iter_mut().enumerate() {
        r["id"] = format!("evilrow{i}\u{202e}{}", "0".repeat(20)).into();
        r["workload"] = FORMULA_WORKLOAD.into();
        for k in r["kernels"].as_array_mut().unwrap() {
            if k["name"] == "gemv_hfq4g256_residual" {
                k["name"] = BIDI_KERNEL.into();
            }
        }
    }
    std::fs::write(root.join("evil.jsonl"), rows.iter().map(|r| format!("{r}\n")).collect::<String>()).unwrap();
    katlas(root, &["corpus", "import", "evil.jsonl"]);

    let md = katlas(root, &["query", "SELECT r.id, r.workload, k.name FROM rows r JOIN kernels k ON k.row_id = r.id", "--format", "markdown"]);
    assert_inert("query --format markdown", &md);
    assert!(String::from_utf8_lossy(&md.stdout).contains("u{202e}cod.exe"), "{}", String::from_utf8_lossy(&md.stdout));

    // CSV: a text cell that a spreadsheet would run starts with `'`; numbers stay numbers.
    let csv = katlas(root, &["query", "SELECT workload, -1 AS n FROM rows LIMIT 1", "--format", "csv"]);
    let out = String::from_utf8_lossy(&csv.stdout);
    let line = out.lines().nth(1).unwrap();
    assert!(line.starts_with("\"'=HYPERLINK(") && line.ends_with(",-1"), "{out}");

    let with_kernel = rows.iter().find(|r| r["kernels"].as_array().unwrap().iter().any(|k| k["name"] == BIDI_KERNEL)).unwrap();
    let prov = katlas(root, &["provenance", "--row", with_kernel["id"].as_str().unwrap(), "--top", "100", "--file", "evil.jsonl"]);
    assert_inert("provenance --row", &prov);
    assert!(String::from_utf8_lossy(&prov.stdout).contains("\\r\\u{202e}cod.exe"), "{}", String::from_utf8_lossy(&prov.stdout));

    let task = katlas(root, &["task", "evil.jsonl", "--phase", "decode", "--kernel", BIDI_KERNEL]);
    assert_inert("task", &task);
    let tasks = root.join(".katlas/tasks");
    let dir = std::fs::read_dir(&tasks).unwrap().next().unwrap().unwrap().path();
    let md = std::fs::read_to_string(dir.join("TASK.md")).unwrap();
    assert!(md.contains("cod.exe"), "{md}");
    assert_text_inert("TASK.md", &md);

    let ev = &["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=130", "--metric", "tok_s", "-n", "3", "--telemetry", "false"];
    let args: Vec<&str> =
        ev.iter().copied().chain(["--kernel", BIDI_KERNEL, "--hypothesis", "h\nverdict:     improved", "--mechanism", "m\r\x1b]0;t\x07"]).collect();
    let o = katlas_cmd(root).args(&args).output().unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&o.stderr));
    let ls = katlas(root, &["ledger", "ls", "--format", "json"]);
    let entries: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    let id = entries[0]["id"].as_str().unwrap();
    let show = katlas(root, &["ledger", "show", id]);
    assert_inert("ledger show", &show);
    assert!(String::from_utf8_lossy(&show.stdout).contains("cod.exe"), "{}", String::from_utf8_lossy(&show.stdout));
    // A value cannot add a line that reads as another field.
    let out = String::from_utf8_lossy(&show.stdout);
    assert_eq!(out.lines().filter(|l| l.starts_with("verdict:")).count(), 1, "{out}");
    let lst = katlas(root, &["ledger", "ls"]);
    assert_inert("ledger ls", &lst);

    // isa show: a manifest (pulled from a team store, say) whose kernel names are hostile.
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("../katlas-isa/tests/fixtures/kernels.hipfb");
    let m = root.join("m.json");
    katlas(root, &["isa", "scan", bundle.to_str().unwrap(), "--disasm", "never", "--output", m.to_str().unwrap(), "--no-cache"]);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    for obj in v["objects"].as_array_mut().unwrap() {
        for k in obj["kernels"].as_array_mut().unwrap() {
            if k["name"] == "vgpr_spill" {
                k["name"] = "vgpr_spill\x1b]0;owned\x07\r\u{202e}x".into();
                k["symbol"] = "vgpr_spill\u{2067}.kd\x1b[2J".into();
            }
        }
    }
    std::fs::write(&m, v.to_string()).unwrap();
    let show = katlas(root, &["isa", "show", "vgpr_spill", "--manifest", m.to_str().unwrap()]);
    assert_inert("isa show", &show);
    assert!(String::from_utf8_lossy(&show.stdout).contains("\\u{202e}x"), "{}", String::from_utf8_lossy(&show.stdout));
}
