//! The input caps are configurable by environment variable. The variables are read from the
//! process environment, which every test of this binary shares: each setting is tried in a
//! process of its own, set before it starts (`katlas_testkit::own_process!`).

use flate2::write::GzEncoder;
use flate2::Compression;
use katlas_collect::parse::{parse, Input};
use std::io::Write;
use std::path::PathBuf;

/// 4 MiB of short lines from a few KB of gzip, and a file whose second line is 3000 bytes.
fn inputs(dir: &tempfile::TempDir) -> (PathBuf, PathBuf) {
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    for _ in 0..(4 << 20) / 8 {
        e.write_all(b"tok_s=1\n").unwrap();
    }
    let bomb = dir.path().join("bomb.gz");
    std::fs::write(&bomb, e.finish().unwrap()).unwrap();
    let long = dir.path().join("long.txt");
    std::fs::write(&long, format!("a=1\n{}\n", "x".repeat(3000))).unwrap();
    (bomb, long)
}

#[test]
fn default_limits_read_both_inputs() {
    for v in ["KATLAS_MAX_INPUT_BYTES", "KATLAS_MAX_LINE_BYTES"] {
        assert!(std::env::var_os(v).is_none(), "{v} is set in the test environment: unset it");
    }
    let dir = tempfile::tempdir().unwrap();
    let (bomb, long) = inputs(&dir);
    assert_eq!(parse("kv", Input::File(&bomb)).unwrap().metric("tok_s"), Some(1.0));
    assert!(parse("kv", Input::File(&long)).is_ok());
}

#[test]
fn limits_come_from_the_environment() {
    if !katlas_testkit::own_process!(limits_come_from_the_environment, &[("KATLAS_MAX_INPUT_BYTES", "1MiB"), ("KATLAS_MAX_LINE_BYTES", "2k")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (bomb, long) = inputs(&dir);
    let e = parse("kv", Input::File(&bomb)).unwrap_err().to_string();
    assert!(e.contains("input is larger than the 1048576-byte limit (KATLAS_MAX_INPUT_BYTES"), "{e}");
    let e = parse("kv", Input::File(&long)).unwrap_err().to_string();
    assert!(e.contains("line 2 is longer than the 2048-byte limit (KATLAS_MAX_LINE_BYTES)"), "{e}");
    // The torch-trace element cap is the same variable.
    let t = format!("{{\"traceEvents\": [{{\"name\": \"{}\"}}]}}", "k".repeat(3000));
    let e = parse("torch-trace", Input::Text { text: &t, source: "t.json" }).unwrap_err().to_string();
    assert!(e.contains("longer than the 2048-byte limit (KATLAS_MAX_LINE_BYTES) (byte offset 17)"), "{e}");
}

#[test]
fn a_cap_that_is_not_a_byte_count_is_an_error() {
    if !katlas_testkit::own_process!(a_cap_that_is_not_a_byte_count_is_an_error, &[("KATLAS_MAX_INPUT_BYTES", "plenty"), ("KATLAS_MAX_LINE_BYTES", "2k")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, long) = inputs(&dir);
    let e = parse("kv", Input::File(&long)).unwrap_err().to_string();
    assert!(e.contains("KATLAS_MAX_INPUT_BYTES=\"plenty\": not a byte count"), "{e}");
}
