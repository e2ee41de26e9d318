//! The query index follows the files: rebuilt from them, updated on appends, re-read when a
//! file changes, goes away or the index itself is damaged; bad lines are recorded, not dropped.

use katlas_corpus::{append_jsonl, Fsync, Layout};
use katlas_model::Row;
use katlas_store::index;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hipfire/atlas_rows_v0.jsonl");

/// The real hipfire rows of fixtures/, converted as `katlas corpus import` converts them.
fn real_rows() -> Vec<Row> {
    std::fs::read_to_string(FIXTURE)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| katlas_model::hipfire::import_v0(serde_json::from_str(l).unwrap(), Some("atlas_rows_v0.jsonl"), Some(i as u64 + 1)).unwrap())
        .collect()
}

fn project() -> (tempfile::TempDir, Layout) {
    let d = tempfile::tempdir().unwrap();
    let l = Layout::for_project(d.path());
    std::fs::create_dir_all(l.corpus_dir()).unwrap();
    (d, l)
}

fn count(l: &Layout, sql: &str) -> i64 {
    let (c, _) = index::open(l).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn renamed(rows: &[Row], tag: &str) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            r.id = format!("{tag}-{}", r.id);
            r
        })
        .collect()
}

#[test]
fn rebuild_holds_every_row_metric_and_kernel_of_the_files() {
    let (_d, l) = project();
    let rows = real_rows();
    assert!(rows.len() >= 3);
    append_jsonl(&l.corpus_file("box-a", "2026-05-14"), &rows, Fsync::Never).unwrap();
    let s = index::rebuild(&l).unwrap();
    assert!(s.rebuilt);
    assert_eq!(s.records, rows.len() as u64);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), rows.len() as i64);
    let metrics: usize = rows.iter().map(|r| r.metrics.len()).sum();
    let kernels: usize = rows.iter().map(|r| r.kernels.len()).sum();
    assert_eq!(count(&l, "SELECT COUNT(*) FROM metrics"), metrics as i64);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM kernels"), kernels as i64);
    // Values survive: the first row's first kernel and a metric, through the views.
    let r0 = &rows[0];
    let k0 = &r0.kernels[0];
    let (c, _) = index::open(&l).unwrap();
    let (name, total): (String, f64) =
        c.query_row("SELECT name, total_us FROM kernels WHERE row_id = ?1 AND idx = 0", [&r0.id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!((name.as_str(), total), (k0.name.as_str(), k0.total_us));
    let (mname, mval) = r0.metrics.iter().next().map(|(k, m)| (k.clone(), m.value)).unwrap();
    let v: f64 = c.query_row("SELECT value FROM row_metrics WHERE row_id = ?1 AND metric = ?2", [&r0.id, &mname], |r| r.get(0)).unwrap();
    assert_eq!(v, mval);
    let host: Option<String> = c.query_row("SELECT host FROM rows WHERE id = ?1", [&r0.id], |r| r.get(0)).unwrap();
    assert_eq!(host, r0.identity.host.hostname);
    let calls: i64 = c.query_row("SELECT SUM(calls) FROM kernel_stats WHERE name = ?1", [&k0.name], |r| r.get(0)).unwrap();
    let want: u64 = rows
        .iter()
        .filter(|r| r.status == katlas_model::Status::Ok && r.pass == "measured")
        .flat_map(|r| &r.kernels)
        .filter(|k| k.name == k0.name)
        .map(|k| k.calls)
        .sum();
    assert_eq!(calls as u64, want);
}

#[test]
fn a_missing_index_is_built_and_an_append_is_read_from_where_the_index_stopped() {
    let (_d, l) = project();
    let rows = real_rows();
    let f = l.corpus_file("box-a", "2026-05-14");
    append_jsonl(&f, &rows, Fsync::Never).unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert!(s.rebuilt, "no index yet: built from the files");
    let (_, s) = index::open(&l).unwrap();
    assert_eq!((s.rebuilt, s.sources_read), (false, 0), "unchanged files: nothing read");
    let more = renamed(&rows, "more");
    append_jsonl(&f, &more, Fsync::Never).unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert_eq!((s.rebuilt, s.sources_read, s.records), (false, 1, more.len() as u64), "only the appended lines are read");
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), 2 * rows.len() as i64);
    let line: i64 = count(&l, &format!("SELECT line FROM rows WHERE id = '{}'", more[0].id));
    assert_eq!(line, rows.len() as i64 + 1, "line numbers continue across the append");
    // A second file appears: read; the first is not.
    append_jsonl(&l.corpus_file("box-b", "2026-05-15"), &renamed(&rows, "b"), Fsync::Never).unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert_eq!(s.sources_read, 1);
    assert_eq!(count(&l, "SELECT COUNT(DISTINCT source) FROM rows"), 2);
}

#[test]
fn a_rewritten_or_removed_file_is_never_trusted_from_the_index() {
    let (_d, l) = project();
    let rows = real_rows();
    let f = l.corpus_file("box-a", "2026-05-14");
    append_jsonl(&f, &rows, Fsync::Never).unwrap();
    index::open(&l).unwrap();
    // Rewritten with other rows (the indexed prefix changed): the old rows go.
    std::fs::remove_file(&f).unwrap();
    let other = renamed(&rows[..1], "x");
    append_jsonl(&f, &other, Fsync::Never).unwrap();
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), 1);
    assert_eq!(count(&l, &format!("SELECT COUNT(*) FROM rows WHERE id = '{}'", other[0].id)), 1);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM metrics"), other[0].metrics.len() as i64, "the old rows' metrics went with them");
    // Grown but with different bytes before the old end: re-read whole, not appended to.
    let mut text = std::fs::read_to_string(&f).unwrap();
    text = text.replacen(&other[0].id, &format!("{}z", &other[0].id[..other[0].id.len() - 1]), 1);
    text.push_str(&serde_json::to_string(&renamed(&rows[1..2], "y")[0]).unwrap());
    text.push('\n');
    std::fs::write(&f, text).unwrap();
    assert_eq!(count(&l, &format!("SELECT COUNT(*) FROM rows WHERE id = '{}'", other[0].id)), 0);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), 2);
    // Removed: its rows go.
    std::fs::remove_file(&f).unwrap();
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), 0);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM kernels"), 0);
}

#[test]
fn bad_lines_are_recorded_beside_the_good_rows_and_a_torn_last_line_waits() {
    let (_d, l) = project();
    let rows = real_rows();
    let f = l.corpus_file("box-a", "2026-05-14");
    let mut text = String::new();
    text.push_str(&serde_json::to_string(&rows[0]).unwrap());
    text.push_str("\n{not json\n");
    let mut wrong = serde_json::to_value(&rows[1]).unwrap();
    wrong["metrics"] = serde_json::json!({"gen_tok_s": {"value": "fast"}});
    text.push_str(&wrong.to_string());
    text.push('\n');
    text.push_str(&serde_json::to_string(&rows[2]).unwrap());
    text.push('\n');
    let torn = serde_json::to_string(&renamed(&rows[..1], "torn")[0]).unwrap();
    text.push_str(&torn[..torn.len() / 2]);
    std::fs::write(&f, &text).unwrap();
    let (c, s) = index::open(&l).unwrap();
    assert_eq!(s.errors, 2);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), 2, "the good rows on both sides of the bad lines");
    let errs: Vec<(String, i64, String)> = c
        .prepare("SELECT source, line, reason FROM errors ORDER BY line")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(errs.len(), 2);
    assert_eq!((errs[0].0.as_str(), errs[0].1), ("corpus/box-a-2026-05-14.jsonl", 2));
    assert!(errs[0].2.contains("invalid JSON"), "{}", errs[0].2);
    assert_eq!(errs[1].1, 3);
    assert!(errs[1].2.contains("metrics.gen_tok_s.value"), "names the field: {}", errs[1].2);
    // The writer finishes its line: the row arrives.
    std::fs::write(&f, format!("{text}{}\n", &torn[torn.len() / 2..])).unwrap();
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), 3);
    assert_eq!(count(&l, "SELECT line FROM rows WHERE id LIKE 'torn-%'"), 5);
}

#[test]
fn a_damaged_index_is_rebuilt_not_trusted() {
    let (_d, l) = project();
    let rows = real_rows();
    append_jsonl(&l.corpus_file("box-a", "2026-05-14"), &rows, Fsync::Never).unwrap();
    index::open(&l).unwrap();
    let p = index::index_path(&l);
    std::fs::write(&p, b"this is not a database").unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert!(s.rebuilt);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), rows.len() as i64);
    // A query connection cannot write.
    let (c, _) = index::open(&l).unwrap();
    assert!(c.execute("DELETE FROM rows", []).is_err());
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), rows.len() as i64);
}

#[test]
fn a_query_after_an_append_reads_only_the_new_lines_and_an_edit_before_the_indexed_end_rebuilds() {
    let (_d, l) = project();
    let rows = real_rows();
    let f = l.corpus_file("box-a", "2026-05-14");
    // Enough rows that the first lies well before the end (more than any tail a check might read).
    let first: Vec<Row> = (0..12).flat_map(|i| renamed(&rows, &format!("r{i}"))).collect();
    append_jsonl(&f, &first, Fsync::Never).unwrap();
    assert!(std::fs::metadata(&f).unwrap().len() > 64 << 10);
    index::rebuild(&l).unwrap();

    // katlas's writer appends a row: the next query sees it, and only it was read.
    let more = renamed(&rows[..1], "appended");
    append_jsonl(&f, &more, Fsync::Never).unwrap();
    let (c, s) = index::open(&l).unwrap();
    assert_eq!((s.rebuilt, s.sources_read, s.appended, s.records), (false, 1, 1, 1), "{s:?}");
    let line: i64 = c.query_row("SELECT line FROM rows WHERE id = ?1", [&more[0].id], |r| r.get(0)).unwrap();
    assert_eq!(line, first.len() as i64 + 1);
    let (len, lines): (i64, i64) =
        c.query_row("SELECT indexed_len, lines FROM sources WHERE rel = 'corpus/box-a-2026-05-14.jsonl'", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!((len as u64, lines), (std::fs::metadata(&f).unwrap().len(), first.len() as i64 + 1), "the index recorded where it stopped");
    drop(c);

    // The first row's id edited in place, same length, far before the end: the index is
    // rebuilt, not trusted and not read as an append.
    let text = std::fs::read_to_string(&f).unwrap();
    let edited = text.replacen("\"id\":\"r0-", "\"id\":\"q0-", 1);
    assert!(edited != text && edited.len() == text.len());
    std::fs::write(&f, &edited).unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert!(s.rebuilt, "{s:?}");
    assert!(s.rebuild_reason.as_deref().unwrap().contains("corpus/box-a-2026-05-14.jsonl: changed before the end"), "{s:?}");
    let old = format!("r0-{}", rows[0].id);
    assert_eq!(count(&l, &format!("SELECT COUNT(*) FROM rows WHERE id = 'q0-{}'", rows[0].id)), 1);
    assert_eq!(count(&l, &format!("SELECT COUNT(*) FROM rows WHERE id = '{old}'")), 0);

    // An edit before the end and an append at once: still a rebuild, the append does not hide it.
    let text = std::fs::read_to_string(&f).unwrap();
    let mut edited = text.replacen("\"id\":\"r1-", "\"id\":\"q1-", 1);
    edited.push_str(&serde_json::to_string(&renamed(&rows[..1], "late")[0]).unwrap());
    edited.push('\n');
    std::fs::write(&f, &edited).unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert!(s.rebuilt, "{s:?}");
    assert_eq!(count(&l, &format!("SELECT COUNT(*) FROM rows WHERE id IN ('q1-{0}', 'late-{0}')", rows[0].id)), 2);
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), first.len() as i64 + 2);
    // And nothing changed: nothing read.
    let (_, s) = index::open(&l).unwrap();
    assert_eq!((s.rebuilt, s.sources_read), (false, 0));
}

#[test]
fn a_new_file_holding_an_indexed_id_first_in_name_order_rebuilds() {
    // A rebuild keeps the copy of a duplicated row id from the first file in name order; a
    // refresh that finds the id in a new, earlier file cannot keep it incrementally.
    let (_d, l) = project();
    let rows = real_rows();
    append_jsonl(&l.corpus_file("box-b", "2026-05-14"), &rows, Fsync::Never).unwrap();
    index::open(&l).unwrap();
    append_jsonl(&l.corpus_file("box-a", "2026-05-14"), &rows[..1], Fsync::Never).unwrap();
    let (c, s) = index::open(&l).unwrap();
    assert!(s.rebuilt && s.rebuild_reason.as_deref().unwrap().contains("rows key"), "{s:?}");
    let src: String = c.query_row("SELECT source FROM rows WHERE id = ?1", [&rows[0].id], |r| r.get(0)).unwrap();
    assert_eq!(src, "corpus/box-a-2026-05-14.jsonl");
    // A later file with a duplicate changes nothing a rebuild would keep: read incrementally.
    append_jsonl(&l.corpus_file("box-c", "2026-05-14"), &rows[..1], Fsync::Never).unwrap();
    let (_, s) = index::open(&l).unwrap();
    assert_eq!((s.rebuilt, s.sources_read), (false, 1), "{s:?}");
    assert_eq!(count(&l, "SELECT COUNT(*) FROM rows"), rows.len() as i64);
}
