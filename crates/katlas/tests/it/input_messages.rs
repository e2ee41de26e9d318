//! Messages for inputs that cannot be read as given (issue 15): a symbolic link loop is
//! said to be one (not "no such file"), a leading UTF-8 byte order mark is read past, bad
//! UTF-8 is named by file and line, and a damaged .gz by file, line and decompressed byte.

use std::io::Write;
use std::process::Output;

use crate::support::cli;
use cli::{fixture, katlas, stderr};

fn with_bom(bytes: &[u8]) -> Vec<u8> {
    let mut v = b"\xEF\xBB\xBF".to_vec();
    v.extend_from_slice(bytes);
    v
}

#[test]
fn a_link_loop_is_named_as_a_loop() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::os::unix::fs::symlink(root.join("b.jsonl"), root.join("a.jsonl")).unwrap();
    std::os::unix::fs::symlink(root.join("a.jsonl"), root.join("b.jsonl")).unwrap();
    for args in [&["parse", "kv", "a.jsonl"][..], &["corpus", "import", "a.jsonl"], &["corpus", "ls", "--file", "a.jsonl"], &["fit", "a.jsonl"]] {
        let o = katlas(root, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("a.jsonl") && stderr(&o).contains("symbolic link loop"), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("no such file"), "{args:?}: {}", stderr(&o));
    }
    // A link to nothing is not "no such file" either, and a missing file still is.
    std::os::unix::fs::symlink(root.join("gone"), root.join("dangling.txt")).unwrap();
    let o = katlas(root, &["parse", "kv", "dangling.txt"]);
    assert!(stderr(&o).contains("symbolic link to nothing"), "{}", stderr(&o));
    let o = katlas(root, &["parse", "kv", "absent.txt"]);
    assert!(stderr(&o).contains("absent.txt: no such file"), "{}", stderr(&o));
}

#[test]
fn a_byte_order_mark_is_read_past() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    // CSV (a real ncu export) and JSON lines (rows of a real hipfire bench) through parse.
    let csv = std::fs::read(fixture("h200/ncu_llama_raw.csv")).unwrap();
    std::fs::write(root.join("bom.csv"), with_bom(&csv)).unwrap();
    let plain = katlas(root, &["parse", "ncu-csv", fixture("h200/ncu_llama_raw.csv").to_str().unwrap(), "--format", "json"]);
    let bom = katlas(root, &["parse", "ncu-csv", "bom.csv", "--format", "json"]);
    assert!(bom.status.success(), "{}", stderr(&bom));
    let kernels = |o: &Output| serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["phases"][0]["kernels"].as_array().unwrap().len();
    assert_eq!(kernels(&bom), kernels(&plain));
    assert!(kernels(&bom) > 0);
    let rows = katlas(root, &["parse", "hipfire-bench", fixture("hipfire/bench_ar_profile.txt").to_str().unwrap(), "--rows", "w"]);
    assert!(rows.status.success());
    let n = String::from_utf8_lossy(&rows.stdout).lines().count();
    std::fs::write(root.join("rows.jsonl"), with_bom(&rows.stdout)).unwrap();
    // JSON: a real torch trace, decompressed, behind a BOM.
    let mut trace = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(fixture("h200/torch_llama_decode_trace.json.gz")).unwrap()), &mut trace)
        .unwrap();
    std::fs::write(root.join("trace.json"), with_bom(&trace)).unwrap();
    let o = katlas(root, &["parse", "torch-trace", "trace.json", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plain = katlas(root, &["parse", "torch-trace", fixture("h200/torch_llama_decode_trace.json.gz").to_str().unwrap(), "--format", "json"]);
    assert_eq!(kernels(&o), kernels(&plain));
    // corpus import of a JSONL file and of a JSON document, and corpus ls reading them.
    let o = katlas(root, &["corpus", "import", "rows.jsonl", "--format", "json"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    let first = String::from_utf8_lossy(&rows.stdout).lines().next().unwrap().to_string();
    std::fs::write(root.join("one.json"), with_bom(format!("[{first}]").as_bytes())).unwrap();
    let o = katlas(root, &["corpus", "import", "one.json", "--dry-run", "--format", "json"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    std::fs::write(root.join("stored.jsonl"), with_bom(&rows.stdout)).unwrap();
    let o = katlas(root, &["corpus", "ls", "--file", "stored.jsonl", "--format", "json"]);
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["rows"].as_array().unwrap().len(), n);
    // TOML: the project's katlas.toml.
    std::fs::write(root.join("katlas.toml"), with_bom(b"[workload.w]\ncommand = 'echo v=1'\nparsers = ['kv']\n")).unwrap();
    let o = katlas(root, &["collect", "--list", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"w\""));
}

#[test]
fn bad_utf8_and_damaged_gzip_are_named_by_file_and_place() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::write(root.join("katlas.toml"), b"[project]\nname = \"ok\"\n# caf\xe9\n").unwrap();
    let o = katlas(root, &["collect", "--list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("katlas.toml:3: byte 6 of the line (0xe9) is not valid UTF-8"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("stream did not contain valid UTF-8"), "{}", stderr(&o));
    std::fs::remove_file(root.join("katlas.toml")).unwrap();
    // corpus import: the bad line is numbered, the good ones kept.
    let rows = katlas(root, &["parse", "hipfire-bench", fixture("hipfire/bench_ar_profile.txt").to_str().unwrap(), "--rows", "w"]);
    let lines: Vec<&[u8]> = rows.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    let mut bad = Vec::new();
    bad.extend_from_slice(lines[0]);
    bad.extend_from_slice(b"\n{\"x\": \"\xff\"}\n");
    bad.extend_from_slice(lines[1]);
    bad.push(b'\n');
    std::fs::write(root.join("bad.jsonl"), bad).unwrap();
    let o = katlas(root, &["corpus", "import", "bad.jsonl", "--format", "json"]);
    assert!(stderr(&o).contains("bad.jsonl:2") && stderr(&o).contains("UTF-8"), "{}", stderr(&o));
    // A real profile gzipped, then damaged in the middle of its deflate stream.
    let text = std::fs::read(fixture("hipfire/bench_ar_profile.txt")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&text).unwrap();
    let mut gz = gz.finish().unwrap();
    let cut = gz.len() / 2;
    gz.truncate(cut);
    std::fs::write(root.join("cut.txt.gz"), &gz).unwrap();
    let o = katlas(root, &["parse", "hipfire-bench", "cut.txt.gz"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("cut.txt.gz") && e.contains("gzip:") && e.contains("decompressed byte") && e.contains("line "), "{e}");
}
