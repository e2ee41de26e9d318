//! Issue 15 (hostile input): no parser grows without bound. Devices are
//! refused, endless streams and gzip bombs stop at the input cap, endless
//! lines and CSV records at the line cap, each an error saying which limit
//! and where. Every parser is tried; each call runs under a 5 s bound.

use flate2::write::GzEncoder;
use flate2::Compression;
use katlas_collect::parse::{parse, parse_limited, parser_names, Input, Limits, ParseError, ParseOutput, ParserOptions};
use katlas_testkit::bound::bounded;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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
            "proton" => "expected `[` (Proton's hatchet tree is a JSON array), found byte 0x00",
            // SQLite reads a database in place: a stream is refused before a byte is read.
            "rocpd" => "rocpd reads SQLite databases in place",
            // NVIDIA's reader takes a report file: a stream is refused before a byte is read.
            "ncu-rep" => "ncu-rep is read by NVIDIA's reader from a file",
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
        if p == "torch-trace" || p == "rocpd" || p == "ncu-rep" {
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

/// Proton trees: a tree whose nodes never end stops at the input cap or, under a larger one, at
/// the node cap; scopes nested without end are walked without recursion (the nodes past the
/// depth cap skipped by counting brackets) until the input cap.
#[test]
fn proton_trees_stop_at_the_input_and_node_caps_however_deep() {
    let root = || std::io::Cursor::new(br#"[{"frame": {"name": "ROOT"}, "children": ["#.to_vec());
    // Past the scanner's first 1 MiB read, so the cap is met inside the tree.
    let small = Limits { max_line: 1 << 20, max_input: 8 << 20 };
    let wide = root().chain(Cycle { data: br#"{"frame": {"name": "k"}, "metrics": {"count": 1, "time (ns)": 5}},"#.to_vec(), pos: 0 });
    let e = on_stream("proton", wide, small).unwrap_err().to_string();
    assert!(e.contains("input is larger than the 8388608-byte limit (KATLAS_MAX_INPUT_BYTES"), "{e}");
    assert!(e.contains(": [0].children["), "named by the node being read: {e}");
    let bare = root().chain(Cycle { data: b"{},".to_vec(), pos: 0 });
    let e = on_stream("proton", bare, Limits { max_line: 1 << 20, max_input: 64 << 20 }).unwrap_err().to_string();
    assert!(e.contains(&format!("the tree has more than {} nodes; stopped", katlas_collect::parse::proton::MAX_NODES)), "{e}");
    assert!(e.starts_with("<stdin>:1: [0].children[1999999]: "), "{e}");
    let deep = root().chain(Cycle { data: br#"{"frame": {"name": "s"}, "children": ["#.to_vec(), pos: 0 });
    let e = on_stream("proton", deep, small).unwrap_err().to_string();
    assert!(e.contains("KATLAS_MAX_INPUT_BYTES"), "{e}");
    assert!(e.contains(&format!("[0]{}", ".children[0]".repeat(katlas_collect::parse::proton::MAX_DEPTH))), "the path of the skipped subtree: {e}");
}

/// Proton's trace output (an object, where the tree is an array): events that never end stop at
/// the input cap, an event past the element cap stops at it, and members other than
/// `traceEvents` are passed by counting brackets however deep, never held. Each error names the
/// element or member being read.
#[test]
fn proton_traces_stop_at_the_input_and_element_caps() {
    let small = Limits { max_line: 1 << 20, max_input: 8 << 20 };
    let head = || std::io::Cursor::new(br#"{"displayTimeUnit":"us","traceEvents":["#.to_vec());
    let event = br#"{"args":{"call_stack":["ROOT","decode","k"]},"cat":"kernel","dur":1.5,"name":"k","ph":"X","tid":7,"ts":1},"#;
    let endless = head().chain(Cycle { data: event.to_vec(), pos: 0 });
    let e = on_stream("proton", endless, small).unwrap_err().to_string();
    assert!(e.contains("input is larger than the 8388608-byte limit (KATLAS_MAX_INPUT_BYTES"), "{e}");
    assert!(e.contains(": traceEvents["), "named by the event being read: {e}");
    // One event whose call stack never ends: stopped at the element cap.
    let tiny = Limits { max_line: 64 << 10, max_input: 8 << 20 };
    let long = head()
        .chain(std::io::Cursor::new(br#"{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"call_stack":["#.to_vec()))
        .chain(Cycle { data: br#""s","#.to_vec(), pos: 0 });
    let e = on_stream("proton", long, tiny).unwrap_err().to_string();
    assert!(e.contains("traceEvents[0]: value starting here is longer than the 65536-byte limit (KATLAS_MAX_LINE_BYTES)"), "{e}");
    // A member nested without end before the events: skipped by counting, until the input cap.
    let deep = std::io::Cursor::new(br#"{"otherData":"#.to_vec()).chain(Cycle { data: b"[".to_vec(), pos: 0 });
    let e = on_stream("proton", deep, small).unwrap_err().to_string();
    assert!(e.contains("otherData: ") && e.contains("KATLAS_MAX_INPUT_BYTES"), "{e}");
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
        if p == "rocpd" {
            // Never decompressed: SQLite needs the file itself.
            assert!(e.ends_with("zeros.gz: gzip-compressed: decompress it first (SQLite reads a database in place)"), "{e}");
            continue;
        }
        if p == "ncu-rep" {
            // Never decompressed, never handed to NVIDIA's reader.
            assert!(e.ends_with("zeros.gz: gzip-compressed: decompress it first (NVIDIA's reader reads a report in place)"), "{e}");
            continue;
        }
        if p == "torch-trace" || p == "proton" {
            assert!(e.contains("found byte 0x00"), "{p}: {e}");
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
        (
            "proton",
            br#"[{"children":[{"children":[{"children":[],"frame":{"name":"k","type":"function"},"metrics":{"count":2,"device_id":"0","device_type":"CUDA","time (ns)":3000,"bytes":64}}],"frame":{"name":"decode","type":"function"},"metrics":{}}],"frame":{"name":"ROOT","type":"function"},"metrics":{"count":0,"time (ns)":0}},{"CUDA":{"0":{"arch":"90"}}}]"#.to_vec(),
        ),
        // Proton's trace output, two streams, one object a line.
        (
            "proton",
            b"{\"displayTimeUnit\":\"us\",\"traceEvents\":[{\"args\":{\"call_stack\":[\"ROOT\",\"decode\",\"k\"]},\"cat\":\"kernel\",\"dur\":1.5,\"name\":\"k\",\"ph\":\"X\",\"tid\":7,\"ts\":0.5}]}\n{\"displayTimeUnit\":\"us\",\"traceEvents\":[{\"args\":{\"call_stack\":[\"ROOT\",\"_Z1fv\"]},\"cat\":\"kernel\",\"dur\":2,\"name\":\"_Z1fv\",\"ph\":\"X\",\"tid\":9,\"ts\":1}]}\n".to_vec(),
        ),
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

// --- rocpd databases (SQLite files, read in place) --------------------------------------------
//
// The databases come from `scripts/rocpd-from-csv.py` and the real MI300A CSV run in fixtures/
// (format-only: no rocpd database of a real run can be fetched at test time), then are damaged.

fn rocpd_db(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = dir.join("omp_results.db");
    let o = std::process::Command::new("python3")
        .arg(root.join("scripts/rocpd-from-csv.py"))
        .arg(root.join("fixtures/rocprofv3-mi300a"))
        .arg(&out)
        .output()
        .expect("python3 runs rocpd-from-csv.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The table-name suffix `rocpd-from-csv.py` gives process 4242.
const SFX: &str = "_00000000_0000_7000_8000_000000001092";

fn edit(db: &Path, sql: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(sql).unwrap();
}

fn rocpd(path: PathBuf) -> Result<ParseOutput, ParseError> {
    on_file("rocpd", path, Limits::default())
}

#[test]
fn rocpd_non_databases_are_refused_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let good = rocpd_db(d.path());
    let bytes = std::fs::read(&good).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage.db", b"not a database at all, just text\n".repeat(100), "not an SQLite database (no `SQLite format 3` header)"),
        ("empty.db", Vec::new(), "not an SQLite database"),
        ("cut.db", bytes[..bytes.len() / 3].to_vec(), "SQLite: database disk image is malformed"),
        ("header-only.db", bytes[..100].to_vec(), ""),
    ];
    for (name, data, want) in cases {
        let p = d.path().join(name);
        std::fs::write(&p, &data).unwrap();
        let e = rocpd(p.clone()).unwrap_err().to_string();
        assert!(e.starts_with(&p.display().to_string()) && e.contains(want), "{name}: {e}");
    }
    // A link is not followed; a stream cannot be read in place.
    let link = d.path().join("link.db");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let e = rocpd(link.clone()).unwrap_err().to_string();
    assert!(e.contains("a symbolic link"), "{e}");
    let e = on_stream("rocpd", std::io::Cursor::new(bytes.clone()), Limits::default()).unwrap_err().to_string();
    assert_eq!(e, "<stdin>: rocpd reads SQLite databases in place: give the .db file (or a directory of them), not a stream");
    // In a directory, files that are no rocpd database are skipped with a warning; the good one is read.
    let dir = d.path().join("run");
    std::fs::create_dir_all(dir.join("host")).unwrap();
    std::fs::copy(&good, dir.join("host/4242_results.db")).unwrap();
    std::fs::write(dir.join("notes.db"), b"text").unwrap();
    std::os::unix::fs::symlink(&good, dir.join("host/alias.db")).unwrap();
    let o = rocpd(dir.clone()).unwrap();
    assert_eq!(o.phases[0].launches, Some(9));
    assert!(o.warnings.iter().any(|w| w.contains("notes.db: not an SQLite database") && w.ends_with("skipped")), "{:?}", o.warnings);
    assert!(o.warnings.iter().any(|w| w.contains("alias.db: not a regular file")), "{:?}", o.warnings);
    std::fs::remove_file(dir.join("host/4242_results.db")).unwrap();
    let e = rocpd(dir).unwrap_err().to_string();
    assert!(e.contains("no rocpd database"), "{e}");
}

#[test]
fn rocpd_missing_tables_and_columns_name_file_table_and_column() {
    let d = tempfile::tempdir().unwrap();
    let db = rocpd_db(d.path());
    let shown = db.display().to_string();
    edit(&db, &format!("DROP VIEW rocpd_info_kernel_symbol; DROP TABLE rocpd_info_kernel_symbol{SFX};"));
    let e = rocpd(db.clone()).unwrap_err().to_string();
    assert_eq!(e, format!("{shown}: key `rocpd_info_kernel_symbol{SFX}`: table missing: the kernel names of rocpd_kernel_dispatch{SFX} cannot be read"));
    let db = rocpd_db(d.path());
    edit(&db, &format!("ALTER TABLE rocpd_kernel_dispatch{SFX} DROP COLUMN \"end\";"));
    let e = rocpd(db.clone()).unwrap_err().to_string();
    assert_eq!(e, format!("{shown}: key `rocpd_kernel_dispatch{SFX}.end`: column missing"));
    let db = rocpd_db(d.path());
    edit(&db, &format!("DROP VIEW rocpd_kernel_dispatch; DROP TABLE rocpd_kernel_dispatch{SFX};"));
    let e = rocpd(db.clone()).unwrap_err().to_string();
    assert_eq!(e, format!("{shown}: no rocpd_kernel_dispatch table: not a rocpd database"));
    // A column computed by SQL the file brings is not read.
    let db = rocpd_db(d.path());
    edit(&db, &format!("ALTER TABLE rocpd_info_agent{SFX} ADD COLUMN slow TEXT GENERATED ALWAYS AS (printf('%.*c', 1000000, 'x')) VIRTUAL;"));
    let e = rocpd(db.clone()).unwrap_err().to_string();
    assert!(e.contains(&format!("key `rocpd_info_agent{SFX}.slow`: a generated column")), "{e}");
}

#[test]
fn rocpd_bad_rows_are_warnings_naming_table_row_and_column_and_the_good_rows_stay() {
    // Each damaged dispatch row (id, what is done to it) and the warning that names it.
    let damage = [
        (1, "start = 'soon'", "column `start`: text `soon` is not an integer"),
        (2, "grid_size_x = 1099511627776", "column `grid_size_x`: 1099511627776 does not fit 32 bits"),
        (3, "\"end\" = start - 1", "column `end`: before `start`"),
        (4, "kernel_id = 999", "column `kernel_id`: 999 is not in rocpd_info_kernel_symbol"),
        (5, "workgroup_size_x = -64", "column `workgroup_size_x`: -64 is negative"),
        (6, "group_segment_size = x'00ff'", "column `group_segment_size`: a 2-byte blob is not an integer"),
    ];
    let d = tempfile::tempdir().unwrap();
    let db = rocpd_db(d.path());
    let t = format!("rocpd_kernel_dispatch{SFX}");
    let mut sql: String = damage.iter().map(|(id, set, _)| format!("UPDATE {t} SET {set} WHERE id = {id};\n")).collect();
    sql += &format!("UPDATE rocpd_info_agent{SFX} SET extdata = '{{not json' WHERE id = 4;");
    edit(&db, &sql);
    let o = rocpd(db.clone()).unwrap();
    let shown = db.display().to_string();
    for (id, _, what) in damage {
        let head = format!("{shown}: table `{t}` row id {id}: {what}");
        assert!(o.warnings.iter().any(|w| w.starts_with(&head) && w.ends_with("; row skipped")), "{head}\n{:?}", o.warnings);
    }
    assert_eq!(o.phases[0].launches, Some(3), "dispatches 7, 8 and 9 stay");
    assert_eq!(o.artifacts["rocpd"][0]["skipped"], 6);
    // Bad agent JSON costs the CU count, not the device.
    assert_eq!(o.route["device"], "AMD Instinct MI300A");
    assert!(!o.route.contains_key("cu_count"));
}

/// Rewrite a table b-tree so every child pointer on its leftmost path leads to the next page of
/// that path: one leaf's rows come back once per path through the tree. Pages past the last one
/// the file still needs are cut off, so the rows far outnumber what the file could hold.
fn repeat_leftmost_leaf(path: &Path, root: u32, page_size: usize) {
    let mut b = std::fs::read(path).unwrap();
    let at = |n: u32| (n as usize - 1) * page_size + if n == 1 { 100 } else { 0 };
    let be16 = |b: &[u8], o: usize| u16::from_be_bytes([b[o], b[o + 1]]) as usize;
    let be32 = |b: &[u8], o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let mut path_pages = vec![root];
    while b[at(*path_pages.last().unwrap())] == 0x05 {
        let h = at(*path_pages.last().unwrap());
        let first = be16(&b, h + 12);
        path_pages.push(be32(&b, (*path_pages.last().unwrap() as usize - 1) * page_size + first));
    }
    assert!(path_pages.len() >= 3, "the test needs a tree two interior levels deep: {path_pages:?}");
    for w in path_pages.windows(2) {
        let (n, next) = (w[0], w[1]);
        let h = at(n);
        for j in 0..be16(&b, h + 3) {
            let off = (n as usize - 1) * page_size + be16(&b, h + 12 + 2 * j);
            b[off..off + 4].copy_from_slice(&next.to_be_bytes());
        }
        b[h + 8..h + 12].copy_from_slice(&next.to_be_bytes());
    }
    let keep = *path_pages.iter().max().unwrap();
    b.truncate(keep as usize * page_size);
    b[28..32].copy_from_slice(&keep.to_be_bytes());
    let counter = [b[24], b[25], b[26], b[27]];
    b[92..96].copy_from_slice(&counter);
    std::fs::write(path, b).unwrap();
}

#[test]
fn rocpd_huge_values_and_row_counts_stay_bounded() {
    let d = tempfile::tempdir().unwrap();
    // Values at the edges of 64 bits: kept when they are valid, a warning when not.
    let db = rocpd_db(d.path());
    let t = format!("rocpd_kernel_dispatch{SFX}");
    edit(
        &db,
        &format!(
            "UPDATE {t} SET start = 9223372036854775000, \"end\" = 9223372036854775807 WHERE id = 1;
             UPDATE {t} SET start = -9223372036854775808 WHERE id = 2;
             UPDATE {t} SET grid_size_x = 4294967295, workgroup_size_x = 1 WHERE id = 3;"
        ),
    );
    let o = rocpd(db).unwrap();
    assert_eq!(o.phases[0].launches, Some(8));
    assert!(o.warnings.iter().any(|w| w.contains("row id 2: column `start`: -9223372036854775808 is negative")), "{:?}", o.warnings);
    let norm = o.phases[0].kernel("__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26").unwrap();
    assert!((norm.min_us.unwrap() - 0.807).abs() < 1e-3, "807 ns at the end of time: {norm:?}");
    let bc = o.phases[0].kernel("__omp_offloading_32_2f3c0__QMboundary_modPboundary_conditions_l24").unwrap();
    assert_eq!(bc.grid, Some([4294967295, 1, 1]), "the largest 32-bit grid, in workgroups of 1");
    // A b-tree whose pages repeat: more rows than the file can hold is an error, fast.
    let p = d.path().join("dag.db");
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch(&format!(
        "PRAGMA page_size = 512;
         CREATE TABLE rocpd_info_kernel_symbol{SFX} (id INTEGER PRIMARY KEY, display_name TEXT);
         INSERT INTO rocpd_info_kernel_symbol{SFX} VALUES (1, 'k');
         CREATE TABLE {t} (id INTEGER PRIMARY KEY, kernel_id INTEGER, start INTEGER, \"end\" INTEGER);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
         INSERT INTO {t} SELECT i, 1, i * 10, i * 10 + 5 FROM n;"
    ))
    .unwrap();
    let root: u32 = c.query_row(&format!("SELECT rootpage FROM sqlite_schema WHERE name = '{t}'"), [], |r| r.get(0)).unwrap();
    drop(c);
    repeat_leftmost_leaf(&p, root, 512);
    let len = std::fs::metadata(&p).unwrap().len();
    let e = rocpd(p.clone()).unwrap_err().to_string();
    assert_eq!(e, format!("{}: key `{t}`: more than {} rows, more than a {len}-byte file can hold: the database is corrupt", p.display(), len / 4 + 16));
}

#[test]
fn rocpd_mutated_databases_never_panic_or_hang() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::read(rocpd_db(d.path())).unwrap();
    let page = 4096;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut ok, mut failed) = (0, 0);
    for i in 0..300 {
        let mut v = base.clone();
        match i % 5 {
            // Bytes anywhere past the header: page headers, cell pointers, record headers, values.
            0 | 1 => {
                for _ in 0..1 + next() % 8 {
                    let pos = 100 + (next() as usize % (v.len() - 100));
                    v[pos] = next() as u8;
                }
            }
            // Cut at a page boundary or anywhere.
            2 => v.truncate(if next() % 2 == 0 { (next() as usize % (v.len() / page)) * page } else { next() as usize % v.len() }),
            // A whole page of noise.
            3 => {
                let p = 1 + next() as usize % (v.len() / page - 1);
                for b in &mut v[p * page..(p + 1) * page] {
                    *b = next() as u8;
                }
            }
            // The database header's own fields (page size, page count, schema cookie, encoding).
            _ => {
                let pos = 16 + next() as usize % 84;
                v[pos] = next() as u8;
            }
        }
        let p = d.path().join(format!("m{i}.db"));
        std::fs::write(&p, &v).unwrap();
        match rocpd(p.clone()) {
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(e.to_string().starts_with(&p.display().to_string()), "an error names the file: {e}");
                failed += 1;
            }
        }
        std::fs::remove_file(&p).unwrap();
    }
    assert!(ok > 0 && failed > 0, "mutations both kept and broke databases: {ok} read, {failed} refused");
}
