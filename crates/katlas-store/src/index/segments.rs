//! A rebuild's parallel load: runs of corpus files go into segment databases of their own, one
//! writer each (SQLite has one writer per database), and are copied into the index in name order.
//! The copy is SQLite's transfer (`INSERT INTO t SELECT * FROM seg.t` into a table with no index
//! yet moves records without decoding them), so the index holds exactly what one writer reading
//! the files in order would write: the same rows in the same order, the first copy of an id kept.

use super::{ingest, open_db, small_table_keys, sql, IndexError, Loader, OnProgress, Progress, Stats, BULK_PRAGMAS, SOURCES_DDL};
use crate::schema;
use crate::sources::{Kind, Source};
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};
use twox_hash::XxHash3_64;

/// A segment is a run of corpus files of at least this many bytes (or the run's end): enough
/// work to pay for a database of its own, small enough that a host-day file is one segment.
pub(super) const SEGMENT_BYTES: u64 = 8 << 20;

/// One step of a rebuild, in name order.
enum Step {
    /// Sources read straight into the index (ledger, samples, documents).
    Direct(Range<usize>),
    /// Corpus files loaded by a worker; the segment's number.
    Segment(usize),
}

/// `sizes`: of each source, in bytes.
fn steps(srcs: &[Source], sizes: &[u64], segment_bytes: u64) -> (Vec<Step>, Vec<Range<usize>>) {
    let (mut steps, mut segs) = (Vec::new(), Vec::<Range<usize>>::new());
    let mut bytes = 0u64;
    for (i, s) in srcs.iter().enumerate() {
        let rows = s.kind == Kind::Rows;
        match steps.last_mut() {
            Some(Step::Direct(r)) if !rows => r.end = i + 1,
            Some(Step::Segment(n)) if rows && bytes < segment_bytes => segs[*n].end = i + 1,
            _ if rows => {
                bytes = 0;
                steps.push(Step::Segment(segs.len()));
                segs.push(i..i + 1);
            }
            _ => steps.push(Step::Direct(i..i + 1)),
        }
        if rows {
            bytes += sizes[i];
        }
    }
    (steps, segs)
}

fn segment_path(index_tmp: &Path, n: usize) -> PathBuf {
    index_tmp.with_extension(format!("{}.seg{n}", index_tmp.extension().and_then(|e| e.to_str()).unwrap_or("tmp")))
}

/// Load every source into `conn` (the new index, its bulk tables without indexes yet); returns
/// the progress at the end of the load.
pub(super) fn load(
    conn: &mut Connection,
    index_tmp: &Path,
    srcs: &[Source],
    stats: &mut Stats,
    segment_bytes: u64,
    on: OnProgress,
) -> Result<Progress, IndexError> {
    // A file that cannot be sized counts as empty here; reading it names the error.
    let sizes: Vec<u64> = srcs.iter().map(|s| std::fs::metadata(&s.path).map_or(0, |m| m.len())).collect();
    let mut progress = Progress { files: srcs.len(), bytes: sizes.iter().sum(), ..Progress::default() };
    on(progress);
    let mut advance = |r: Range<usize>| {
        progress.files_read += r.len();
        progress.bytes_read += sizes[r].iter().sum::<u64>();
        on(progress);
    };
    let (steps, segs) = steps(srcs, &sizes, segment_bytes);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(segs.len()).max(1);
    // Segments built ahead of the copy, bounding the disk they take.
    let window = 2 * workers;
    let (work_tx, work_rx) = mpsc::channel::<usize>();
    let work_rx = Mutex::new(work_rx);
    let result = std::thread::scope(|scope| -> Result<(), IndexError> {
        // Owned here, so that an early return closes the queue and the workers stop.
        let work_tx = work_tx;
        let (done_tx, done_rx) = mpsc::channel::<(usize, Result<Stats, IndexError>)>();
        for _ in 0..workers {
            let (work_rx, done_tx, segs) = (&work_rx, done_tx.clone(), &segs);
            scope.spawn(move || loop {
                let next = work_rx.lock().map(|rx| rx.recv());
                let Ok(Ok(n)) = next else { break };
                let path = segment_path(index_tmp, n);
                // A panic becomes this segment's error: the index's thread waits for every
                // segment in turn, and would wait for this one for ever.
                let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build_segment(&path, &srcs[segs[n].clone()])))
                    .unwrap_or_else(|_| Err(IndexError::Io { path: path.clone(), source: std::io::Error::other("the worker loading this segment panicked") }));
                if done_tx.send((n, built)).is_err() {
                    break;
                }
            });
        }
        drop(done_tx);
        for n in 0..window.min(segs.len()) {
            let _ = work_tx.send(n);
        }
        let mut ticket = window;
        let mut ready: HashMap<usize, Result<Stats, IndexError>> = HashMap::new();
        let mut seen: HashSet<String> = HashSet::new();
        for step in steps {
            match step {
                Step::Direct(r) => read_into(conn, index_tmp, &srcs[r.clone()], stats, |k| advance(r.start + k..r.start + k + 1))?,
                Step::Segment(n) => {
                    let built = loop {
                        if let Some(b) = ready.remove(&n) {
                            break b;
                        }
                        match done_rx.recv() {
                            Ok((i, b)) => ready.insert(i, b),
                            Err(_) => unreachable!("segment {n} was handed out and its worker answers before it stops"),
                        };
                    };
                    if ticket < segs.len() {
                        let _ = work_tx.send(ticket);
                        ticket += 1;
                    }
                    let seg_stats = built?;
                    let dups = copy_segment(conn, &segment_path(index_tmp, n), &mut seen).map_err(sql(index_tmp))?;
                    stats.records += seg_stats.records - dups;
                    stats.errors += seg_stats.errors;
                    stats.sources_read += seg_stats.sources_read;
                    advance(segs[n].clone());
                }
            }
        }
        Ok(())
    });
    for n in 0..segs.len() {
        let _ = std::fs::remove_file(segment_path(index_tmp, n));
    }
    result.map(|()| progress)
}

/// A worker's part: `srcs` read into a new database at `path` (it lives until its copy).
fn build_segment(path: &Path, srcs: &[Source]) -> Result<Stats, IndexError> {
    let _ = std::fs::remove_file(path);
    let mut conn = open_db(path, false)?;
    conn.execute_batch(&format!("{BULK_PRAGMAS} PRAGMA cache_size = -16384;")).map_err(sql(path))?;
    conn.execute_batch(&format!("{}{SOURCES_DDL}{}", schema::create_tables(), small_table_keys())).map_err(sql(path))?;
    let mut stats = Stats::default();
    read_into(&mut conn, path, srcs, &mut stats, |_| {})?;
    Ok(stats)
}

/// `srcs` read into `conn` (at `path`) in one transaction; `after(k)` when `srcs[k]` is in.
fn read_into(conn: &mut Connection, path: &Path, srcs: &[Source], stats: &mut Stats, mut after: impl FnMut(usize)) -> Result<(), IndexError> {
    let tx = conn.transaction().map_err(sql(path))?;
    let mut loader = Loader::new(&tx, true, None);
    for (k, s) in srcs.iter().enumerate() {
        ingest(&mut loader, s, 0, 0, XxHash3_64::new(), stats)?;
        stats.sources_read += 1;
        after(k);
    }
    drop(loader);
    tx.commit().map_err(sql(path))
}

/// Copy a segment into the index: rows whose id an earlier file holds are dropped with their
/// metrics and kernels first. Returns how many were dropped.
fn copy_segment(conn: &mut Connection, seg: &Path, seen: &mut HashSet<String>) -> rusqlite::Result<u64> {
    conn.execute("ATTACH DATABASE ?1 AS seg", [seg.to_string_lossy()])?;
    let copied = (|| {
        let tx = conn.transaction()?;
        let mut dups = Vec::new();
        {
            let mut st = tx.prepare("SELECT id FROM seg.rows")?;
            let mut q = st.query([])?;
            while let Some(r) = q.next()? {
                let id: String = r.get(0)?;
                if seen.contains(&id) {
                    dups.push(id);
                } else {
                    seen.insert(id);
                }
            }
        }
        if !dups.is_empty() {
            tx.execute_batch("CREATE TEMP TABLE seg_dups (id TEXT PRIMARY KEY)")?;
            {
                let mut ins = tx.prepare("INSERT OR IGNORE INTO temp.seg_dups (id) VALUES (?1)")?;
                for d in &dups {
                    ins.execute([d])?;
                }
            }
            tx.execute_batch(
                "DELETE FROM seg.rows WHERE id IN (SELECT id FROM temp.seg_dups); \
                 DELETE FROM seg.metrics WHERE row_id IN (SELECT id FROM temp.seg_dups); \
                 DELETE FROM seg.kernels WHERE row_id IN (SELECT id FROM temp.seg_dups); \
                 DROP TABLE temp.seg_dups;",
            )?;
        }
        for t in ["rows", "metrics", "kernels", "errors", "sources"] {
            tx.execute(&format!("INSERT INTO main.{t} SELECT * FROM seg.{t}"), [])?;
        }
        tx.commit()?;
        Ok(dups.len() as u64)
    })();
    conn.execute("DETACH DATABASE seg", [])?;
    copied
}

#[cfg(test)]
mod tests {
    use super::super::write_index;
    use super::*;
    use katlas_corpus::{append_jsonl, Fsync, Layout};

    fn src(name: &str, kind: Kind) -> Source {
        Source { path: PathBuf::from(format!("/nonexistent/{name}")), rel: name.to_string(), kind }
    }

    #[test]
    fn steps_keep_name_order_and_group_corpus_files() {
        let srcs = vec![src("a", Kind::Rows), src("b", Kind::Rows), src("c", Kind::Ledger), src("d", Kind::EvalSamples), src("e", Kind::Rows)];
        let (steps, segs) = steps(&srcs, &[0; 5], SEGMENT_BYTES);
        // Files that cannot be sized count as empty: a and b share a segment.
        assert_eq!(segs, vec![0..2, 4..5]);
        let shape: Vec<String> = steps
            .iter()
            .map(|s| match s {
                Step::Direct(r) => format!("direct {r:?}"),
                Step::Segment(n) => format!("segment {n}"),
            })
            .collect();
        assert_eq!(shape, ["segment 0", "direct 2..4", "segment 1"]);
    }

    fn real_rows(tag: &str) -> Vec<katlas_model::Row> {
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hipfire/atlas_rows_v0.jsonl");
        std::fs::read_to_string(fixture)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let mut r = katlas_model::hipfire::import_v0(serde_json::from_str(l).unwrap(), None, None).unwrap();
                r.id = format!("{tag}-{}", r.id);
                r
            })
            .collect()
    }

    /// Every table, every column but when a file was looked at, in rowid order.
    fn dump(path: &Path) -> Vec<String> {
        let c = Connection::open(path).unwrap();
        let mut out = Vec::new();
        for t in schema::TABLES.iter().map(|t| t.name).chain(["sources"]) {
            let mut st = c.prepare(&format!("SELECT * FROM {t} ORDER BY rowid")).unwrap();
            let cols: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
            let mut q = st.query([]).unwrap();
            while let Some(r) = q.next().unwrap() {
                let cells: Vec<String> =
                    (0..cols.len()).filter(|&i| cols[i] != "checked_ns").map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap())).collect();
                out.push(format!("{t}: {}", cells.join(" | ")));
            }
        }
        out
    }

    /// Each file in a segment of its own, loaded in parallel, gives the index one writer
    /// reading the files in name order gives: same records, same order, the first copy of a
    /// duplicated id kept (with its own metrics and kernels), bad lines recorded.
    #[test]
    fn segments_in_parallel_give_what_one_writer_gives() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout::for_project(d.path());
        std::fs::create_dir_all(l.corpus_dir()).unwrap();
        let (a, b) = (real_rows("a"), real_rows("b"));
        append_jsonl(&l.corpus_file("box-a", "2026-05-14"), &a, Fsync::Never).unwrap();
        let f2 = l.corpus_file("box-b", "2026-05-14");
        append_jsonl(&f2, &b, Fsync::Never).unwrap();
        std::fs::OpenOptions::new().append(true).open(&f2).and_then(|mut f| std::io::Write::write_all(&mut f, b"{not json\n")).unwrap();
        // A later file repeats an id of the first with other values, and adds its own rows.
        let mut again = a[1].clone();
        again.workload = "a copy that must not win".into();
        let mut c = real_rows("c");
        c.insert(0, again);
        append_jsonl(&l.corpus_file("box-c", "2026-05-15"), &c, Fsync::Never).unwrap();
        // A ledger line that is not JSON: read straight into the index between the segments.
        std::fs::write(l.root.join("ledger.jsonl"), "{not json\n").unwrap();
        let srcs = crate::sources::discover(&l).unwrap();
        assert_eq!(srcs.iter().filter(|s| s.kind == Kind::Rows).count(), 3);
        assert_eq!(srcs.len(), 4);
        let (mut serial, mut parallel) = (Stats::default(), Stats::default());
        let (p1, p2) = (d.path().join("one.sqlite"), d.path().join("many.sqlite"));
        write_index(&p1, &srcs, &mut serial, u64::MAX, &|_| {}).unwrap();
        let seen = Mutex::new(Vec::new());
        write_index(&p2, &srcs, &mut parallel, 1, &|p| seen.lock().unwrap().push(p)).unwrap();
        // Progress: the start, then a step a file, in order, ending with the whole corpus read,
        // then the indexes.
        let seen = seen.into_inner().unwrap();
        let total: u64 = srcs.iter().map(|s| std::fs::metadata(&s.path).unwrap().len()).sum();
        assert_eq!(seen.iter().map(|p| p.files_read).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 4]);
        assert!(seen.windows(2).all(|w| w[0].bytes_read < w[1].bytes_read || w[1].building_indexes));
        assert_eq!(seen.last(), Some(&Progress { files_read: 4, files: 4, bytes_read: total, bytes: total, building_indexes: true }));
        let (one, many) = (dump(&p1), dump(&p2));
        assert_eq!(one, many);
        let rows = (a.len() + b.len() + c.len() - 1) as u64;
        assert_eq!((serial.records, serial.errors, serial.sources_read), (rows, 2, 4));
        assert_eq!((parallel.records, parallel.errors, parallel.sources_read), (rows, 2, 4));
        let conn = Connection::open(&p2).unwrap();
        let w: String = conn.query_row("SELECT workload FROM rows WHERE id = ?1", [&a[1].id], |r| r.get(0)).unwrap();
        assert_eq!(w, a[1].workload);
        let m: i64 = conn.query_row("SELECT COUNT(*) FROM metrics WHERE row_id = ?1", [&a[1].id], |r| r.get(0)).unwrap();
        assert_eq!(m, a[1].metrics.len() as i64, "the dropped copy's metrics are not added to the kept row's");
        let leftovers = std::fs::read_dir(d.path()).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".seg")).count();
        assert_eq!(leftovers, 0, "segment files are removed");
    }
}
