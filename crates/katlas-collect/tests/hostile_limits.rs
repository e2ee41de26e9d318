//! Issue 15 (hostile input): no parser grows without bound. Devices are
//! refused, endless streams and gzip bombs stop at the input cap, endless
//! lines and CSV records at the line cap, each an error saying which limit
//! and where. Every parser is tried; each call runs under a 5 s bound.

use flate2::write::GzEncoder;
use flate2::Compression;
use katlas_collect::parse::{parse, parse_limited, parser_names, Input, Limits, ParseError, ParseOutput, ParserOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result within 5 s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the parser panicked"),
    }
}

fn opts() -> ParserOptions {
    ParserOptions { marker: Some("katlas".into()), ..Default::default() }
}

fn on_file(parser: &'static str, path: PathBuf, limits: Limits) -> Result<ParseOutput, ParseError> {
    bounded(&format!("{parser} {}", path.display()), move || parse_limited(parser, Input::File(&path), &opts(), &limits))
}

fn on_stream(parser: &'static str, r: impl Read + Send + 'static, limits: Limits) -> Result<ParseOutput, ParseError> {
    bounded(&format!("{parser} on a stream"), move || {
        let mut r = r;
        parse_limited(parser, Input::Reader { reader: &mut r, source: "<stdin>" }, &opts(), &limits)
    })
}

fn names() -> Vec<&'static str> {
    parser_names()
}

/// A gzip member of `head`, then `members` copies of one member holding
/// `unit` repeated to 1 MiB: a small file that decompresses to about
/// `members` MiB (MultiGzDecoder reads every member).
fn gz_bomb(path: &Path, head: &[u8], unit: &[u8], members: usize) -> u64 {
    let mut plain = Vec::with_capacity(1 << 20);
    while plain.len() + unit.len() <= 1 << 20 {
        plain.extend_from_slice(unit);
    }
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(&plain).unwrap();
    let member = e.finish().unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    if !head.is_empty() {
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        e.write_all(head).unwrap();
        f.write_all(&e.finish().unwrap()).unwrap();
    }
    for _ in 0..members {
        f.write_all(&member).unwrap();
    }
    f.flush().unwrap();
    (plain.len() * members) as u64
}

#[test]
fn character_device_is_refused_by_every_parser() {
    for p in names() {
        let e = bounded(p, move || parse(p, Input::File(Path::new("/dev/zero")))).unwrap_err().to_string();
        assert!(e.starts_with("/dev/zero: not a regular file (a character device)"), "{p}: {e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let e = bounded("dir", {
        let d = dir.path().to_path_buf();
        move || parse("kv", Input::File(&d))
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("a directory"), "{e}");
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // Opening a FIFO without a writer would block: it is refused before opening.
    let e = on_file("kv", fifo, Limits::default()).unwrap_err().to_string();
    assert!(e.contains("a FIFO"), "{e}");
}

#[test]
fn endless_zero_stream_stops_at_the_line_cap() {
    // What `katlas parse P - < /dev/zero` feeds a parser: no newline, ever.
    let limits = Limits { max_line: 256 << 10, max_input: 64 << 20 };
    for p in names() {
        let e = on_stream(p, std::io::repeat(0), limits).unwrap_err().to_string();
        let want = match p {
            "torch-trace" => "expected `{`, found byte 0x00",
            "rocprofv3-kernel-trace" | "rocprofv3-counters" | "rocprof-v1" | "ncu-csv" => {
                "starting on line 1 is longer than the 262144-byte limit (KATLAS_MAX_LINE_BYTES)"
            }
            _ => "line 1 is longer than the 262144-byte limit (KATLAS_MAX_LINE_BYTES)",
        };
        assert!(e.contains(want), "{p}: {e}");
    }
}

#[test]
fn endless_stream_of_short_lines_stops_at_the_input_cap() {
    // Half a million empty lines: small enough for the slowest parser in a debug build.
    let limits = Limits { max_line: 1 << 20, max_input: 512 << 10 };
    for p in names() {
        if p == "torch-trace" {
            continue;
        }
        let lines = std::io::repeat(b'\n');
        let e = on_stream(p, lines, limits).unwrap_err().to_string();
        assert!(e.contains("input is larger than the 524288-byte limit (KATLAS_MAX_INPUT_BYTES"), "{p}: {e}");
    }
    // A trace whose events never end: stopped by the input cap too.
    let head = std::io::Cursor::new(br#"{"traceEvents":["#.to_vec());
    let event: &[u8] = br#"{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1},"#;
    let endless = head.chain(Cycle { data: event.to_vec(), pos: 0 });
    let e = on_stream("torch-trace", endless, limits).unwrap_err().to_string();
    assert!(e.contains("KATLAS_MAX_INPUT_BYTES"), "{e}");
}

/// `data` repeated forever.
struct Cycle {
    data: Vec<u8>,
    pos: usize,
}
impl Read for Cycle {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        for b in out.iter_mut() {
            *b = self.data[self.pos];
            self.pos = (self.pos + 1) % self.data.len();
        }
        Ok(out.len())
    }
}

#[test]
fn gzip_bomb_stops_at_the_decompressed_input_cap() {
    let dir = tempfile::tempdir().unwrap();
    // 256 MiB of zeros, and 256 MiB of short lines, from well under 1 MiB each.
    let zeros = dir.path().join("zeros.gz");
    assert_eq!(gz_bomb(&zeros, b"", &[0], 256), 256 << 20);
    let lines = dir.path().join("lines.gz");
    gz_bomb(&lines, b"", b"tok_s=1\n", 256);
    // For the CSV parsers: one header every CSV parser accepts, then endless rows.
    let rows = dir.path().join("rows.csv.gz");
    let header = b"\"ID\",\"Kind\",\"Kernel_Name\",\"Kernel Name\",\"Start_Timestamp\",\"End_Timestamp\",\"Counter_Name\",\"Counter_Value\"\n";
    gz_bomb(&rows, header, b"1,\"KERNEL_DISPATCH\",\"k\",\"k\",1,2,\"c\",1\n", 256);
    assert!(std::fs::metadata(&zeros).unwrap().len() < 1 << 20);
    let limits = Limits { max_line: 64 << 20, max_input: 2 << 20 };
    for p in names() {
        let e = on_file(p, zeros.clone(), limits).unwrap_err().to_string();
        if p == "torch-trace" {
            assert!(e.contains("expected `{`, found byte 0x00"), "{p}: {e}");
        } else {
            assert!(e.contains("input is larger than the 2097152-byte limit (KATLAS_MAX_INPUT_BYTES; decompressed bytes count for .gz)"), "{p}: {e}");
        }
        let many = match katlas_collect::parse::framing(p) {
            katlas_collect::parse::Framing::Lines => &lines,
            katlas_collect::parse::Framing::Csv => &rows,
            katlas_collect::parse::Framing::Json => continue,
        };
        let e = on_file(p, many.clone(), limits).unwrap_err().to_string();
        assert!(e.contains("KATLAS_MAX_INPUT_BYTES"), "{p}: {e}");
    }
    // Through the stream path as well (`katlas parse P - < bomb.gz`).
    let f = std::fs::File::open(&lines).unwrap();
    let e = on_stream("kv", f, limits).unwrap_err().to_string();
    assert!(e.contains("KATLAS_MAX_INPUT_BYTES"), "{e}");
    // Under the cap the same kind of file parses.
    let small = dir.path().join("small.gz");
    gz_bomb(&small, b"", b"tok_s=1\n", 1);
    assert_eq!(on_file("kv", small, limits).unwrap().metric("tok_s"), Some(1.0));
}

#[test]
fn long_line_and_csv_record_named_by_line() {
    let limits = Limits { max_line: 1000, max_input: 1 << 30 };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.txt");
    std::fs::write(&p, format!("a=1\nb=2\n{}\nc=3\n", "x".repeat(5000))).unwrap();
    for parser in ["kv", "json-lines", "katlas-rows", "hipfire-bench", "hipfire-dflash"] {
        let e = on_file(parser, p.clone(), limits).unwrap_err().to_string();
        assert!(e.contains("line 3 is longer than the 1000-byte limit (KATLAS_MAX_LINE_BYTES)"), "{parser}: {e}");
    }
    // A quoted CSV field that never closes holds newlines: the record, not the line, is capped.
    let csv = dir.path().join("k.csv");
    let mut body = String::from("\"Kind\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"KERNEL_DISPATCH\",\"k\",1,2\n\"KERNEL_DISPATCH\",\"open");
    for _ in 0..200 {
        body.push_str("\nshort line");
    }
    std::fs::write(&csv, &body).unwrap();
    for parser in ["rocprofv3-kernel-trace", "rocprofv3-counters", "rocprof-v1", "ncu-csv"] {
        let e = on_file(parser, csv.clone(), limits).unwrap_err().to_string();
        assert!(e.contains("CSV record starting on line 3 is longer than the 1000-byte limit"), "{parser}: {e}");
    }
    // Without the runaway record the file parses.
    std::fs::write(&csv, "\"Kind\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"KERNEL_DISPATCH\",\"k\",1000,3000\n").unwrap();
    let o = on_file("rocprofv3-kernel-trace", csv, limits).unwrap();
    assert_eq!(o.phases[0].kernels[0].total_us, 2.0);
}

#[test]
fn mutated_inputs_never_panic_or_hang() {
    // Deterministic mutations of small valid inputs of every parser.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut inputs: Vec<(&str, Vec<u8>)> = vec![
        ("ncu-csv", std::fs::read(fixtures.join("h200/ncu_llama_raw.csv")).unwrap()[..20_000].to_vec()),
        ("kv", b"tok_s=1\nlat_ms: 2.5\nname: x\n".to_vec()),
        ("json-lines", b"{\"katlas\":1,\"phase\":\"p\",\"x\":2,\"kernels\":[{\"name\":\"k\",\"calls\":1,\"total_us\":1}]}\n".to_vec()),
        (
            "rocprofv3-kernel-trace",
            b"\"Kind\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\",\"Grid_Size\",\"Workgroup_Size\"\n\"KERNEL_DISPATCH\",\"k\",1,2,64,0\n".to_vec(),
        ),
        ("rocprofv3-counters", b"\"Dispatch_Id\",\"Kernel_Name\",\"Counter_Name\",\"Counter_Value\"\n1,\"k\",\"SQ_WAVES\",4\n".to_vec()),
        ("rocprof-v1", b"Index,KernelName,BeginNs,EndNs,wgr,grd,SQ_WAVES\n0,k.kd,1,5,0,64,3\n".to_vec()),
        (
            "torch-trace",
            br#"{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"grid":[1,1,1]}}],"deviceProperties":[{"name":"G"}]}"#.to_vec(),
        ),
        ("katlas-rows", format!("{}\n", serde_json::to_string(&katlas_model::Row::new("w", "p")).unwrap()).into_bytes()),
    ];
    for p in names() {
        if !inputs.iter().any(|(n, _)| *n == p) {
            inputs.push((p, b"SUMMARY gen_tok_s=1 avg_ms=2\n=== PROFILE (prefill pp8, 1.0ms wall) ===\n k 2x 1.0ms 0.5ms 100% 1.0GiB/s\n".to_vec()));
        }
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let subs = [b'"', b',', b'\n', b'{', b'}', b'[', b']', b'\\', b'=', b':', 0x00, 0xff, b'9', b'-'];
    for (p, base) in inputs {
        let base = std::sync::Arc::new(base);
        for i in 0..40 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut v = (*base).clone();
            let pos = (seed % v.len() as u64) as usize;
            match i % 3 {
                0 => v[pos] = subs[(seed >> 32) as usize % subs.len()],
                1 => v.truncate(pos),
                _ => {
                    v.insert(pos, subs[(seed >> 40) as usize % subs.len()]);
                }
            }
            let _ = on_stream(p, std::io::Cursor::new(v), Limits { max_line: 4096, max_input: 1 << 20 });
        }
    }
}
