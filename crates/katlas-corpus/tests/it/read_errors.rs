use katlas_corpus::{append_jsonl, read_jsonl, Fsync};
use katlas_model::{Row, ROW_SCHEMA};
use std::io::Write;

#[test]
fn garbage_line_reported_and_neighbours_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    append_jsonl(&path, &[Row::new("a", "decode")], Fsync::Batch).unwrap();
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{not json at all\n").unwrap();
    append_jsonl(&path, &[Row::new("b", "decode")], Fsync::Batch).unwrap();
    let r = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    assert_eq!(r.records.len(), 2);
    assert_eq!(r.records[0].record.workload, "a");
    assert_eq!(r.records[1].record.workload, "b");
    assert_eq!(r.records[1].line, 3);
    assert_eq!(r.errors.len(), 1);
    let msg = r.errors[0].to_string();
    assert!(msg.starts_with(&format!("{}:2: invalid JSON", path.display())), "{msg}");
}

#[test]
fn torn_tail_is_isolated_from_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    append_jsonl(&path, &[Row::new("a", "decode")], Fsync::Batch).unwrap();
    // A writer that died mid-line.
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"schema\":\"katlas.row.v1\",\"id\":").unwrap();
    let r = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    assert_eq!(r.records.len(), 1);
    assert!(r.errors[0].reason.contains("torn line"), "{}", r.errors[0]);
    append_jsonl(&path, &[Row::new("b", "decode")], Fsync::Batch).unwrap();
    let r = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    assert_eq!(r.records.iter().map(|x| x.record.workload.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].line, 2);
}

#[test]
fn wrong_schema_and_bad_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let mut good = serde_json::to_value(Row::new("a", "p")).unwrap();
    std::fs::write(&path, "").unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    writeln!(f, "{}", serde_json::json!({"schema": "katlas.task.v1"})).unwrap();
    good["run_index"] = serde_json::json!("three");
    writeln!(f, "{good}").unwrap();
    let r = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    assert_eq!(r.records.len(), 0);
    assert!(r.errors[0].reason.contains("field `schema`"), "{}", r.errors[0]);
    assert!(r.errors[1].reason.contains("run_index"), "{}", r.errors[1]);
}
