//! Issue 15 (hostile input) for the store: bad bytes stay line-level errors,
//! nothing reads forever, and concurrent deduplicating appends of the same
//! rows write each row once.

use katlas_corpus::{append_jsonl, append_jsonl_dedup, read_jsonl, read_jsonl_capped, Appended, Fsync, StoreError};
use katlas_model::{Row, ROW_SCHEMA};
use katlas_testkit::bound::bounded;
use std::path::Path;

fn row_line(workload: &str) -> String {
    serde_json::to_string(&Row::new(workload, "decode")).unwrap()
}

#[test]
fn invalid_utf8_line_is_numbered_and_neighbours_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let mut bytes = format!("{}\n", row_line("one")).into_bytes();
    let mut bad = row_line("two").into_bytes();
    bad[20] = 0xff;
    bytes.extend_from_slice(&bad);
    bytes.push(b'\n');
    bytes.extend_from_slice(format!("{}\n", row_line("three")).as_bytes());
    std::fs::write(&path, bytes).unwrap();
    let r = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    let got: Vec<(u64, &str)> = r.records.iter().map(|x| (x.line, x.record.workload.as_str())).collect();
    assert_eq!(got, [(1, "one"), (3, "three")]);
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].line, 2);
    assert!(r.errors[0].to_string().starts_with(&format!("{}:2: not UTF-8", path.display())), "{}", r.errors[0]);
}

#[test]
fn overlong_line_is_numbered_skipped_and_neighbours_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let long = format!("{{\"pad\": \"{}\"}}", "x".repeat(10_000));
    std::fs::write(&path, format!("{}\n{long}\n{}\n", row_line("one"), row_line("three"))).unwrap();
    let r = read_jsonl_capped::<Row>(&path, Some(ROW_SCHEMA), 4096).unwrap();
    let got: Vec<(u64, &str)> = r.records.iter().map(|x| (x.line, x.record.workload.as_str())).collect();
    assert_eq!(got, [(1, "one"), (3, "three")]);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert_eq!(r.errors[0].line, 2);
    assert!(r.errors[0].reason.contains("longer than the 4096-byte limit") && r.errors[0].reason.contains("KATLAS_MAX_LINE_BYTES"), "{}", r.errors[0]);
}

#[test]
fn devices_and_fifos_are_refused_not_read_forever() {
    let e = bounded("read_jsonl(/dev/zero)", || read_jsonl::<Row>(Path::new("/dev/zero"), Some(ROW_SCHEMA)).map(|_| ()).map_err(|e| e.to_string()));
    let e = e.unwrap_err();
    assert!(e.contains("/dev/zero") && e.contains("character device"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.jsonl");
    let ok = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(ok.success());
    // Opening a FIFO with no writer blocks forever; it must be refused before opening.
    let p = fifo.clone();
    let e = bounded("read_jsonl(fifo)", move || read_jsonl::<Row>(&p, Some(ROW_SCHEMA)).map(|_| ()).map_err(|e| e.to_string())).unwrap_err();
    assert!(e.contains("FIFO"), "{e}");
    let p = fifo.clone();
    let e =
        bounded("append_jsonl_dedup(fifo)", move || append_jsonl_dedup(&p, &[Row::new("a", "b")], |r| r.id.as_str(), Fsync::Never).map_err(|e| e.to_string()));
    // open_append on a FIFO without a reader fails (ENXIO) or is refused as not regular; either way it returns.
    assert!(e.is_err(), "{e:?}");
}

fn rows(n: usize) -> Vec<Row> {
    (0..n)
        .map(|i| {
            let mut r = Row::new(format!("w{i}"), "decode");
            r.id = format!("row-{i:04}");
            r.run_index = i as u32;
            r
        })
        .collect()
}

fn count_ids(path: &Path) -> (usize, usize) {
    let r = read_jsonl::<Row>(path, Some(ROW_SCHEMA)).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let ids: std::collections::HashSet<&str> = r.records.iter().map(|x| x.record.id.as_str()).collect();
    (r.records.len(), ids.len())
}

#[test]
fn sixteen_concurrent_dedup_appends_of_the_same_200_rows_write_200() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corpus.jsonl");
    let batch = rows(200);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(16));
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let (path, batch, barrier) = (path.clone(), batch.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                append_jsonl_dedup(&path, &batch, |r| r.id.as_str(), Fsync::Never).unwrap()
            })
        })
        .collect();
    let done: Vec<Appended> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(count_ids(&path), (200, 200));
    assert_eq!(done.iter().map(|d| d.written).sum::<usize>(), 200);
    assert_eq!(done.iter().map(|d| d.already_present).sum::<usize>(), 15 * 200);

    // Half new, half present; repeats inside one batch are written once.
    let mut more = rows(300)[100..].to_vec();
    more.push(more[150].clone());
    let d = append_jsonl_dedup(&path, &more, |r| r.id.as_str(), Fsync::Batch).unwrap();
    assert_eq!(d, Appended { written: 100, already_present: 101 });
    assert_eq!(count_ids(&path), (300, 300));
}

#[test]
fn dedup_append_reads_past_bad_lines_and_isolates_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let batch = rows(3);
    append_jsonl(&path, &batch[..1], Fsync::Never).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, b"\xff\xfe not json\n{\"schema\":\"katlas.row.v1\",\"id\":").unwrap();
    let d = append_jsonl_dedup(&path, &batch, |r| r.id.as_str(), Fsync::Never).unwrap();
    assert_eq!(d, Appended { written: 2, already_present: 1 });
    let r = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    assert_eq!(r.records.len(), 3);
    assert_eq!(r.errors.iter().map(|e| e.line).collect::<Vec<_>>(), [2, 3]);
}

#[test]
fn bad_limit_variable_is_named() {
    let e = StoreError::Limits(katlas_corpus::input::Limits::from_lookup(|_| Some("nope".into())).unwrap_err());
    assert!(e.to_string().contains("KATLAS_MAX_LINE_BYTES"), "{e}");
}
