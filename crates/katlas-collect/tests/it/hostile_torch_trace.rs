//! Issue 15 (hostile input): malformed torch traces end, every time, in an
//! error naming line and byte offset (or a result), never in a hang or a panic.
//! Each parse runs on its own thread under a 5 s bound (`katlas_testkit::bound`).

use flate2::write::GzEncoder;
use flate2::Compression;
use katlas_collect::parse::{parse, Input, ParseError, ParseOutput};
use katlas_testkit::bound::bounded;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

fn text(what: &str, bytes: Vec<u8>) -> Result<ParseOutput, ParseError> {
    let source = what.to_string();
    bounded(what, move || {
        // Through the reader path (what stdin takes): bytes need not be UTF-8.
        let mut r = &bytes[..];
        parse("torch-trace", Input::Reader { reader: &mut r, source: &source })
    })
}

fn file(what: &str, path: PathBuf) -> Result<ParseOutput, ParseError> {
    bounded(what, move || parse("torch-trace", Input::File(&path)))
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn real_trace() -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h200/torch_llama_decode_trace.json.gz");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&p).unwrap()).read_to_end(&mut out).unwrap();
    out
}

const BAD: &[u8] = br#"{"traceEvents":[{"a":[}]}"#;

#[test]
fn mismatched_bracket_is_an_error_with_line_and_offset_every_way_in() {
    let dir = tempfile::tempdir().unwrap();
    // The bytes as given, and without the last `}`.
    for bytes in [BAD, &BAD[..BAD.len() - 1]] {
        let plain = dir.path().join("t.json");
        std::fs::write(&plain, bytes).unwrap();
        let packed = dir.path().join("t.json.gz");
        std::fs::write(&packed, gz(bytes)).unwrap();
        let results = [
            ("text", bounded("text", move || parse("torch-trace", Input::Text { text: std::str::from_utf8(bytes).unwrap(), source: "t.json" }))),
            ("stdin", text("t.json", bytes.to_vec())),
            ("stdin .gz", text("t.json", gz(bytes))),
            ("file", file("file", plain.clone())),
            ("file .gz", file("file .gz", packed.clone())),
        ];
        for (how, r) in results {
            let e = r.expect_err(how).to_string();
            // `{"traceEvents":[{"a":[` is 22 bytes: the `}` at offset 22 closes a `[`.
            assert!(e.contains(":1: `}` does not match the open `[` (byte offset 22)"), "{how}: {e}");
        }
    }
}

#[test]
fn values_that_cannot_start_are_errors_not_loops() {
    let cases: &[(&[u8], &str)] = &[
        (br#"{"traceEvents":[}"#, "expected a value, found `}` (byte offset 16)"),
        (br#"{"traceEvents":[1,]}"#, "expected a value, found `]` (byte offset 18)"),
        (br#"{"traceEvents":[,]}"#, "expected a value, found `,` (byte offset 16)"),
        (br#"{"traceEvents":[1 2]}"#, "expected `,` or `]` after a traceEvents element, found `2` (byte offset 18)"),
        (br#"{"traceEvents":[:]}"#, "expected a value, found `:`"),
        (b"{\"traceEvents\":[\x00]}", "expected a value, found byte 0x00"),
        (br#"{"traceEvents":[]]}"#, "expected `,` or `}` after a top-level value, found `]`"),
        (br#"{"traceEvents":[] "x":1}"#, "expected `,` or `}` after a top-level value, found `\"`"),
        (br#"{"traceEvents":[]}}"#, "trailing data after the top-level object: `}`"),
        (br#"{"traceEvents":[], 7: 1}"#, "expected an object key, found `7`"),
        (b"{\"traceEvents\":[\n{\"x\": [1, 2}\n]}", ":2: `}` does not match the open `[`"),
        (br#"{"traceEvents":[{"s": "\"}]"#, "truncated"),
        (br#"{"traceEvents":[tru"#, "truncated"),
    ];
    for (bytes, want) in cases {
        let e = text("t.json", bytes.to_vec()).expect_err(&String::from_utf8_lossy(bytes)).to_string();
        assert!(e.contains(want), "{}: {e}", String::from_utf8_lossy(bytes));
    }
}

#[test]
fn truncated_real_trace_is_an_error() {
    let full = std::sync::Arc::new(real_trace());
    let n = full.len();
    for cut in [1, 2, 100, 4096, n / 3, n / 2, n - 2, n - 1] {
        let t = full.clone();
        let r = bounded(&format!("cut at {cut}"), move || {
            let mut r = &t[..cut];
            parse("torch-trace", Input::Reader { reader: &mut r, source: "cut.json" })
        });
        let e = r.expect_err(&format!("cut at {cut}")).to_string();
        assert!(e.contains("truncated"), "cut at {cut}: {e}");
    }
    // A truncated .gz (the compressed stream cut) is an error too.
    let dir = tempfile::tempdir().unwrap();
    let packed = gz(&full);
    let p = dir.path().join("cut.json.gz");
    std::fs::write(&p, &packed[..packed.len() / 2]).unwrap();
    file("cut .gz", p).expect_err("cut .gz");
}

#[test]
fn byte_flipped_real_trace_ends_in_time_without_panic() {
    let full = std::sync::Arc::new(real_trace());
    let n = full.len();
    // Deterministic positions spread over the file, each byte replaced by
    // bytes that break structure (brackets, quotes, separators) or by noise.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let subs = [b'}', b']', b'[', b'{', b'"', b',', b':', b'\\', 0x00, 0xff];
    let mut errors = 0;
    for i in 0..12 {
        let pos = (next() % n as u64) as usize;
        let sub = subs[i % subs.len()];
        let mut v = (*full).clone();
        v[pos] = if v[pos] == sub { sub ^ 0x20 } else { sub };
        let what = format!("byte {pos} set to 0x{sub:02x}");
        let r = bounded(&what, move || {
            let mut r = &v[..];
            parse("torch-trace", Input::Reader { reader: &mut r, source: "flip.json" })
        });
        if let Err(e) = r {
            errors += 1;
            assert!(e.line.is_some(), "{what}: error without a line: {e}");
        }
    }
    assert!(errors > 0, "no flip produced an error");

    // A `}` where an event starts is named at exactly that byte.
    let pos = memchr::memmem::find(&full, b"\n  {\n    \"ph\": \"X\", \"cat\": \"kernel\"").expect("a kernel event") + 3;
    let mut v = (*full).clone();
    v[pos] = b'}';
    let line = 1 + full[..pos].iter().filter(|&&b| b == b'\n').count();
    let e = text("flip.json", v.clone()).expect_err("`}` at an event").to_string();
    assert!(e.starts_with(&format!("flip.json:{line}: expected a value, found `}}` (byte offset {pos})")), "{e}");

    // The same through a .gz file, and a flipped byte inside the compressed stream.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flip.json.gz");
    std::fs::write(&p, gz(&v)).unwrap();
    let e = file("flip .gz", p.clone()).expect_err("flip .gz").to_string();
    assert!(e.contains(&format!("(byte offset {pos})")), "{e}");
    let mut packed = gz(&full);
    let mid = packed.len() / 2;
    packed[mid] ^= 0x55;
    std::fs::write(&p, &packed).unwrap();
    let _ = file("corrupt .gz", p);
}

#[test]
fn oversized_event_is_an_error_naming_where_it_starts() {
    use katlas_collect::parse::{parse_limited, Limits, ParserOptions};
    let mut doc = br#"{"traceEvents":[{"ph":"X"},
{"name":""#
        .to_vec();
    doc.extend(std::iter::repeat_n(b'a', 10_000));
    doc.extend_from_slice(br#""}]}"#);
    let limits = Limits { max_line: 4096, max_input: 1 << 20 };
    let e = bounded("oversized", move || {
        let mut r = &doc[..];
        parse_limited("torch-trace", Input::Reader { reader: &mut r, source: "big.json" }, &ParserOptions::default(), &limits)
    })
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("big.json:2: value starting here is longer than the 4096-byte limit (KATLAS_MAX_LINE_BYTES) (byte offset 28)"), "{e}");
}
