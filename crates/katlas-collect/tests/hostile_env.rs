//! The input caps are configurable by environment variable. This binary
//! holds this one test only, so setting variables races with no other test.

use flate2::write::GzEncoder;
use flate2::Compression;
use katlas_collect::parse::{parse, Input};
use std::io::Write;

#[test]
fn limits_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    // 4 MiB of short lines from a few KB of gzip.
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    for _ in 0..(4 << 20) / 8 {
        e.write_all(b"tok_s=1\n").unwrap();
    }
    let bomb = dir.path().join("bomb.gz");
    std::fs::write(&bomb, e.finish().unwrap()).unwrap();
    let long = dir.path().join("long.txt");
    std::fs::write(&long, format!("a=1\n{}\n", "x".repeat(3000))).unwrap();

    // Defaults: both parse.
    assert_eq!(parse("kv", Input::File(&bomb)).unwrap().metric("tok_s"), Some(1.0));
    assert!(parse("kv", Input::File(&long)).is_ok());

    std::env::set_var("KATLAS_MAX_INPUT_BYTES", "1MiB");
    std::env::set_var("KATLAS_MAX_LINE_BYTES", "2k");
    let e = parse("kv", Input::File(&bomb)).unwrap_err().to_string();
    assert!(e.contains("input is larger than the 1048576-byte limit (KATLAS_MAX_INPUT_BYTES"), "{e}");
    let e = parse("kv", Input::File(&long)).unwrap_err().to_string();
    assert!(e.contains("line 2 is longer than the 2048-byte limit (KATLAS_MAX_LINE_BYTES)"), "{e}");
    // The torch-trace element cap is the same variable.
    let t = format!("{{\"traceEvents\": [{{\"name\": \"{}\"}}]}}", "k".repeat(3000));
    let e = parse("torch-trace", Input::Text { text: &t, source: "t.json" }).unwrap_err().to_string();
    assert!(e.contains("longer than the 2048-byte limit (KATLAS_MAX_LINE_BYTES) (byte offset 17)"), "{e}");

    std::env::set_var("KATLAS_MAX_INPUT_BYTES", "plenty");
    let e = parse("kv", Input::File(&long)).unwrap_err().to_string();
    assert!(e.contains("KATLAS_MAX_INPUT_BYTES=\"plenty\": not a byte count"), "{e}");
    std::env::remove_var("KATLAS_MAX_INPUT_BYTES");
    std::env::remove_var("KATLAS_MAX_LINE_BYTES");
}
