//! Issue 15 (hostile input) through the real binary: `corpus import` keeps
//! the good lines beside a bad one and names it, refuses devices, and
//! concurrent imports of the same file write each row once.

use katlas_model::Row;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::cli::katlas_cmd;

/// `katlas ARGS` in `dir` in the test environment (no input caps from the developer's shell).
fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = katlas_cmd(dir);
    c.args(args);
    c
}

/// Run to completion (output read as it comes), killed and failed after 20 s.
fn finish(child: Child, what: &str) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{what}: still running after 20 s");
        }
    }
}

fn run(c: &mut Command, what: &str) -> Output {
    finish(c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap(), what)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn row(i: usize) -> Row {
    let mut r = Row::new(format!("w{i}"), "decode");
    r.run_index = i as u32;
    r
}

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn invalid_utf8_on_line_2_is_named_and_lines_1_and_3_imported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("rows.jsonl");
    let mut bytes = Vec::new();
    for i in 1..=3 {
        let mut l = serde_json::to_vec(&row(i)).unwrap();
        if i == 2 {
            l[30] = 0xff;
        }
        bytes.extend_from_slice(&l);
        bytes.push(b'\n');
    }
    std::fs::write(&src, &bytes).unwrap();
    let out = dir.path().join("c.jsonl");

    let o = run(&mut cmd(dir.path(), &["corpus", "import", "rows.jsonl", "--strict", "--output", "c.jsonl"]), "strict import");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{}:2: not UTF-8", src.display())), "{}", stderr(&o));
    assert!(!out.exists(), "--strict imports nothing");

    let o = run(&mut cmd(dir.path(), &["corpus", "import", "rows.jsonl", "--output", "c.jsonl", "--format", "json"]), "import");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("warning: {}:2: not UTF-8", src.display())), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["imported"], 2);
    assert_eq!(report["errors"][0]["line"], 2);
    let got: Vec<Value> = lines_of(&out).iter().map(|r| r["workload"].clone()).collect();
    assert_eq!(got, ["w1", "w3"]);

    // One JSON document with a bad byte: an error with its line, not a whole-file failure.
    let doc = dir.path().join("doc.json");
    let mut text = format!("[\n{},\n{}\n]\n", serde_json::to_string(&row(4)).unwrap(), serde_json::to_string(&row(5)).unwrap()).into_bytes();
    let at = text.iter().rposition(|&b| b == b'w').unwrap();
    text[at] = 0xff;
    std::fs::write(&doc, &text).unwrap();
    let o = run(&mut cmd(dir.path(), &["corpus", "import", "doc.json", "--dry-run"]), "doc import");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{}:3: invalid JSON document", doc.display())), "{}", stderr(&o));
}

#[test]
fn overlong_line_is_named_and_neighbours_imported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("rows.jsonl");
    let pad = format!("{{\"schema\": \"katlas.row.v1\", \"pad\": \"{}\"}}", "x".repeat(20_000));
    let text = format!("{}\n{pad}\n{}\n", serde_json::to_string(&row(1)).unwrap(), serde_json::to_string(&row(3)).unwrap());
    std::fs::write(&src, text).unwrap();
    let o = run(cmd(dir.path(), &["corpus", "import", "rows.jsonl", "--output", "c.jsonl", "--format", "json"]).env("KATLAS_MAX_LINE_BYTES", "8KiB"), "import");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(":2: line of 20039 bytes is longer than the 8192-byte limit (KATLAS_MAX_LINE_BYTES)"), "{}", stderr(&o));
    assert_eq!(lines_of(&dir.path().join("c.jsonl")).len(), 2);
}

#[test]
fn devices_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&mut cmd(dir.path(), &["corpus", "import", "/dev/zero", "--output", "c.jsonl"]), "import /dev/zero");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/dev/zero: not a regular file (a character device)"), "{}", stderr(&o));
    let o = run(&mut cmd(dir.path(), &["corpus", "ls", "--file", "/dev/zero"]), "ls /dev/zero");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("character device"), "{}", stderr(&o));
}

fn sixteen_imports(dir: &Path, args: &[&str]) {
    let children: Vec<Child> = (0..16).map(|_| cmd(dir, args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()).collect();
    for c in children {
        let o = finish(c, "concurrent import");
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

#[test]
fn sixteen_concurrent_imports_of_the_same_file_write_200_rows() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("rows.jsonl");
    let text: String = (0..200).map(|i| format!("{}\n", serde_json::to_string(&row(i)).unwrap())).collect();
    std::fs::write(&src, text).unwrap();

    sixteen_imports(dir.path(), &["corpus", "import", "rows.jsonl", "--output", "c.jsonl"]);
    let rows = lines_of(&dir.path().join("c.jsonl"));
    let ids: std::collections::HashSet<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!((rows.len(), ids.len()), (200, 200));

    // Into the project corpus (one file per host and day).
    sixteen_imports(dir.path(), &["corpus", "import", "rows.jsonl"]);
    let o = run(&mut cmd(dir.path(), &["corpus", "ls", "--format", "json"]), "ls");
    let ls: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = ls["rows"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (200, 200));
}

#[test]
fn parse_reads_stdin_streamed_and_bounded() {
    use std::io::Write;
    // The 24-byte trace that used to hang, on stdin: an error naming the offset, quickly.
    let mut c = katlas_cmd(Path::new("."))
        .args(["parse", "torch-trace", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(br#"{"traceEvents":[{"a":[}]}"#).unwrap();
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<stdin>:1:"), "{}", String::from_utf8_lossy(&o.stderr));
    // Gzipped stdin is decompressed like a .gz file.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"tok_s=5\n").unwrap();
    let mut c = katlas_cmd(Path::new("."))
        .args(["parse", "kv", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(&gz.finish().unwrap()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"tok_s\""), "{}", String::from_utf8_lossy(&o.stdout));
}
