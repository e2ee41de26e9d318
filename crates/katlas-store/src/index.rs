//! `.katlas/index.sqlite`: the query index, rebuilt from the files under `.katlas/` at any time
//! and never trusted over them.
//!
//! Freshness: the index remembers each source file's size and mtime (nanoseconds) and, for
//! JSON-lines files, how many bytes it has read and the md5 of the last 4 KiB of those bytes.
//! Every open compares the files with that record: an unchanged file is trusted; a JSON-lines
//! file that grew and whose indexed prefix still ends with the same bytes is read from where the
//! index stopped (appends are the normal way the corpus, the ledger and samples grow); anything
//! else (a rewritten, truncated or new file, a file that went away, an index from another
//! version, a missing or unreadable index) is read again. Writers serialise on
//! `index.sqlite.lock`; a full rebuild writes a new file and renames it over the old one, so a
//! reader never sees half an index.

use crate::extract::{self, Batch, Val};
use crate::lean::LeanRow;
use crate::schema::{self, TableDef};
use crate::sources::{self, Kind, Source};
use fs4::fs_std::FileExt;
use katlas_corpus::Layout;
use katlas_model::digest::md5_hex;
use rayon::prelude::*;
use rusqlite::{Connection, OpenFlags, Transaction};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bumped whenever a table or view changes: an index of another version is rebuilt.
pub const INDEX_VERSION: i64 = 1;
const TAIL: u64 = 4096;
/// Lines parsed together (in parallel) before their records are inserted.
const CHUNK_BYTES: usize = 8 << 20;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Sql { path: PathBuf, source: rusqlite::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io { path: path.to_path_buf(), source }
}
fn sql(path: &Path) -> impl FnOnce(rusqlite::Error) -> IndexError + '_ {
    move |source| IndexError::Sql { path: path.to_path_buf(), source }
}

pub fn index_path(layout: &Layout) -> PathBuf {
    layout.root.join("index.sqlite")
}

/// What bringing the index up to date did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    /// The whole index was written anew.
    pub rebuilt: bool,
    pub sources: usize,
    /// Sources read (wholly or from where the index stopped).
    pub sources_read: usize,
    /// Records inserted: rows, ledger entries, eval results, samples, ISA objects.
    pub records: u64,
    /// Bad lines or documents recorded in the `errors` table by this refresh.
    pub errors: u64,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct SourceState {
    size: u64,
    mtime_ns: i64,
    indexed_len: u64,
    lines: u64,
    tail_md5: String,
}

fn stat(path: &Path) -> std::io::Result<(u64, i64)> {
    let m = std::fs::metadata(path)?;
    let mtime = m.modified()?.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
    Ok((m.len(), mtime))
}

enum Plan {
    Fresh,
    Append { from: u64, lines: u64 },
    Reindex,
}

const SOURCES_DDL: &str = "CREATE TABLE IF NOT EXISTS sources (rel TEXT PRIMARY KEY, kind TEXT NOT NULL, size BIGINT NOT NULL, \
    mtime_ns BIGINT NOT NULL, indexed_len BIGINT NOT NULL, lines BIGINT NOT NULL, tail_md5 TEXT NOT NULL);\n\
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);\n";

fn known_sources(conn: &Connection) -> rusqlite::Result<HashMap<String, SourceState>> {
    let mut st = conn.prepare("SELECT rel, size, mtime_ns, indexed_len, lines, tail_md5 FROM sources")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            SourceState {
                size: r.get::<_, i64>(1)? as u64,
                mtime_ns: r.get(2)?,
                indexed_len: r.get::<_, i64>(3)? as u64,
                lines: r.get::<_, i64>(4)? as u64,
                tail_md5: r.get(5)?,
            },
        ))
    })?;
    rows.collect()
}

fn version_ok(conn: &Connection) -> bool {
    conn.query_row("SELECT value FROM meta WHERE key = 'index_version'", [], |r| r.get::<_, String>(0)).ok().and_then(|v| v.parse::<i64>().ok())
        == Some(INDEX_VERSION)
}

fn tail_md5(path: &Path, end: u64) -> std::io::Result<String> {
    let start = end.saturating_sub(TAIL);
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(start))?;
    let mut buf = vec![0u8; (end - start) as usize];
    f.read_exact(&mut buf)?;
    Ok(md5_hex(&buf))
}

fn plan(src: &Source, known: Option<&SourceState>) -> std::io::Result<Plan> {
    let Some(k) = known else { return Ok(Plan::Reindex) };
    let (size, mtime) = stat(&src.path)?;
    if size == k.size && mtime == k.mtime_ns {
        return Ok(Plan::Fresh);
    }
    if src.kind.is_jsonl() && size >= k.indexed_len && tail_md5(&src.path, k.indexed_len)? == k.tail_md5 {
        return Ok(Plan::Append { from: k.indexed_len, lines: k.lines });
    }
    Ok(Plan::Reindex)
}

/// Whether the index at `path` is current with the project's files (no writes).
fn is_current(path: &Path, srcs: &[Source]) -> Result<bool, IndexError> {
    let conn = match Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX) {
        Ok(c) => c,
        Err(_) => return Ok(false),
    };
    if !version_ok(&conn) {
        return Ok(false);
    }
    let Ok(known) = known_sources(&conn) else { return Ok(false) };
    if known.len() != srcs.len() {
        return Ok(false);
    }
    for s in srcs {
        if !matches!(plan(s, known.get(&s.rel)).map_err(io(&s.path))?, Plan::Fresh) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Exclusive writer lock beside the index.
struct WriterLock(std::fs::File);

impl WriterLock {
    fn take(index: &Path) -> Result<Self, IndexError> {
        let p = index.with_extension("sqlite.lock");
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&p).map_err(io(&p))?;
        f.lock_exclusive().map_err(io(&p))?;
        Ok(Self(f))
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = FileExt::unlock(&self.0);
    }
}

/// Bring the index up to date with the files (rebuilding it when missing, of another version
/// or unreadable) and open it read-only for queries.
pub fn open(layout: &Layout) -> Result<(Connection, Stats), IndexError> {
    let stats = refresh(layout)?;
    let path = index_path(layout);
    let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(sql(&path))?;
    conn.busy_timeout(Duration::from_secs(60)).map_err(sql(&path))?;
    conn.execute_batch("PRAGMA query_only = 1;").map_err(sql(&path))?;
    Ok((conn, stats))
}

/// Update the index from the files: read what changed, or rebuild when needed.
pub fn refresh(layout: &Layout) -> Result<Stats, IndexError> {
    let t0 = Instant::now();
    let path = index_path(layout);
    let srcs = sources::discover(layout).map_err(io(&layout.root))?;
    if path.exists() && is_current(&path, &srcs)? {
        return Ok(Stats { sources: srcs.len(), ..Stats::default() });
    }
    let _lock = WriterLock::take(&path)?;
    let srcs = sources::discover(layout).map_err(io(&layout.root))?;
    let usable = path.exists()
        && Connection::open(&path)
            .ok()
            .is_some_and(|c| version_ok(&c) && c.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0)).ok().as_deref() == Some("ok"));
    if !usable {
        return rebuild_locked(layout, &path, srcs, t0);
    }
    let mut conn = Connection::open(&path).map_err(sql(&path))?;
    conn.busy_timeout(Duration::from_secs(60)).map_err(sql(&path))?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql(&path))?;
    let known = known_sources(&tx).map_err(sql(&path))?;
    let mut stats = Stats { sources: srcs.len(), ..Stats::default() };
    let current: HashSet<&str> = srcs.iter().map(|s| s.rel.as_str()).collect();
    for rel in known.keys().filter(|r| !current.contains(r.as_str())) {
        let kind: String = tx.query_row("SELECT kind FROM sources WHERE rel = ?1", [rel], |r| r.get(0)).map_err(sql(&path))?;
        delete_source(&tx, rel, &kind).map_err(sql(&path))?;
        tx.execute("DELETE FROM sources WHERE rel = ?1", [rel]).map_err(sql(&path))?;
    }
    let mut loader = Loader { tx: &tx, seen_rows: None, sql: HashMap::new() };
    for s in &srcs {
        let (from, lines) = match plan(s, known.get(&s.rel)).map_err(io(&s.path))? {
            Plan::Fresh => continue,
            Plan::Append { from, lines } => (from, lines),
            Plan::Reindex => {
                delete_source(loader.tx, &s.rel, s.kind.as_str()).map_err(sql(&path))?;
                (0, 0)
            }
        };
        ingest(&mut loader, s, from, lines, &mut stats)?;
        stats.sources_read += 1;
    }
    tx.commit().map_err(sql(&path))?;
    stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(stats)
}

/// Write the whole index anew from the files.
pub fn rebuild(layout: &Layout) -> Result<Stats, IndexError> {
    let t0 = Instant::now();
    let path = index_path(layout);
    let _lock = WriterLock::take(&path)?;
    let srcs = sources::discover(layout).map_err(io(&layout.root))?;
    rebuild_locked(layout, &path, srcs, t0)
}

fn rebuild_locked(_layout: &Layout, path: &Path, srcs: Vec<Source>, t0: Instant) -> Result<Stats, IndexError> {
    let tmp = path.with_extension(format!("sqlite.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut stats = Stats { rebuilt: true, sources: srcs.len(), ..Stats::default() };
    {
        let mut conn = Connection::open(&tmp).map_err(sql(&tmp))?;
        // A new file nobody reads yet: no journal, no syncs until the final rename.
        conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;")
            .map_err(sql(&tmp))?;
        conn.execute_batch(&format!("{}{SOURCES_DDL}", schema::create_tables())).map_err(sql(&tmp))?;
        // Unique keys of the small tables now; rows, metrics and kernels get theirs after the
        // load (row ids are de-duplicated in memory meanwhile), which is what makes it fast.
        for t in schema::TABLES.iter().filter(|t| !is_bulk(t)) {
            conn.execute_batch(&format!("CREATE UNIQUE INDEX {0}_key ON {0} ({1});", t.name, t.key.join(", "))).map_err(sql(&tmp))?;
        }
        let tx = conn.transaction().map_err(sql(&tmp))?;
        let mut loader = Loader { tx: &tx, seen_rows: Some(HashSet::new()), sql: HashMap::new() };
        for s in &srcs {
            ingest(&mut loader, s, 0, 0, &mut stats)?;
            stats.sources_read += 1;
        }
        tx.commit().map_err(sql(&tmp))?;
        conn.execute_batch(&schema::create_indexes()).map_err(sql(&tmp))?;
        conn.execute_batch(&schema::create_views()).map_err(sql(&tmp))?;
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('index_version', ?1), ('built_at', ?2)",
            [INDEX_VERSION.to_string(), katlas_model::row::now_rfc3339()],
        )
        .map_err(sql(&tmp))?;
        conn.execute_batch("PRAGMA journal_mode = DELETE;").map_err(sql(&tmp))?;
    }
    std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(&tmp))?;
    // A journal left by a writer that died belongs to the old file, never to this one.
    let _ = std::fs::remove_file(path.with_extension("sqlite-journal"));
    std::fs::rename(&tmp, path).map_err(io(path))?;
    stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(stats)
}

fn is_bulk(t: &TableDef) -> bool {
    ["rows", "metrics", "kernels"].contains(&t.name)
}

fn delete_source(tx: &Connection, rel: &str, kind: &str) -> rusqlite::Result<()> {
    let stmts: &[&str] = match kind {
        "rows" => &[
            "DELETE FROM metrics WHERE row_id IN (SELECT id FROM rows WHERE source = ?1)",
            "DELETE FROM kernels WHERE row_id IN (SELECT id FROM rows WHERE source = ?1)",
            "DELETE FROM rows WHERE source = ?1",
        ],
        "ledger" => &["DELETE FROM ledger WHERE source = ?1"],
        "eval_result" => &["DELETE FROM evals WHERE source = ?1", "DELETE FROM eval_sides WHERE source = ?1"],
        "eval_samples" => &["DELETE FROM samples WHERE source = ?1"],
        _ => &["DELETE FROM isa_kernels WHERE manifest = ?1", "DELETE FROM isa_objects WHERE manifest = ?1"],
    };
    for s in stmts {
        tx.execute(s, [rel])?;
    }
    tx.execute("DELETE FROM errors WHERE source = ?1", [rel])?;
    Ok(())
}

struct Loader<'t> {
    tx: &'t Transaction<'t>,
    /// During a rebuild: row ids seen (the unique index comes after the load).
    seen_rows: Option<HashSet<String>>,
    /// Insert statements by table, built once.
    sql: HashMap<&'static str, String>,
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Val::Null => ValueRef::Null,
            Val::Int(i) => ValueRef::Integer(*i),
            Val::Real(f) => ValueRef::Real(*f),
            Val::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

impl Loader<'_> {
    fn insert(&mut self, t: &'static TableDef, cells: &[Val]) -> rusqlite::Result<usize> {
        let bulk = self.seen_rows.is_some() && is_bulk(t);
        let sql = self.sql.entry(t.name).or_insert_with(|| {
            let ph = |i| format!("?{i}");
            if bulk {
                t.plain_insert_sql(ph)
            } else {
                t.insert_sql(ph)
            }
        });
        let mut st = self.tx.prepare_cached(sql)?;
        st.execute(rusqlite::params_from_iter(cells.iter()))
    }
    fn batch(&mut self, b: &Batch) -> rusqlite::Result<()> {
        for (t, rows) in &b.tables {
            for r in rows {
                self.insert(t, r)?;
            }
        }
        Ok(())
    }
    /// A row, then its metrics and kernels when the row was new.
    fn row(&mut self, r: extract::RowCells) -> rusqlite::Result<bool> {
        if let Some(seen) = &mut self.seen_rows {
            if !seen.insert(r.id) {
                return Ok(false);
            }
        }
        if self.insert(&schema::ROWS, &r.row)? == 0 {
            return Ok(false);
        }
        for (t, c) in &r.children {
            self.insert(t, c)?;
        }
        Ok(true)
    }
    fn error(&mut self, source: &str, line: u64, reason: &str) -> rusqlite::Result<()> {
        self.insert(&schema::ERRORS, &[source.into(), line.into(), reason.into()]).map(|_| ())
    }
}

/// Records that carry their `schema` string.
pub trait Schema {
    fn schema(&self) -> &str;
}
impl Schema for LeanRow<'_> {
    fn schema(&self) -> &str {
        &self.schema
    }
}
macro_rules! schema_field {
    ($($t:ty),*) => {$(impl Schema for $t { fn schema(&self) -> &str { &self.schema } })*};
}
schema_field!(katlas_model::LedgerEntry, katlas_model::EvalSample, katlas_model::EvalResult, katlas_isa::manifest::IsaManifest);

/// Parse one JSON record whose `schema` must be `want_schema`: the record, or why not (the
/// field path named). The wrong schema is reported first, even when the rest does not parse.
pub fn parse_line<'de, T: serde::Deserialize<'de> + Schema>(bytes: &'de [u8], want_schema: &str) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let schema_error = |found: Option<&str>| match found {
        Some(s) => format!("field `schema`: expected \"{want_schema}\", found \"{s}\""),
        None => format!("field `schema`: missing (expected \"{want_schema}\")"),
    };
    match parsed {
        Ok(r) if r.schema() == want_schema => Ok(r),
        Ok(r) => Err(schema_error(Some(r.schema()))),
        Err(e) => {
            #[derive(serde::Deserialize)]
            struct Probe {
                #[serde(default)]
                schema: Option<serde_json::Value>,
            }
            match serde_json::from_slice::<Probe>(bytes) {
                Err(e) => Err(format!("invalid JSON: {e}")),
                Ok(Probe { schema: Some(serde_json::Value::String(s)) }) if s != want_schema => Err(schema_error(Some(&s))),
                Ok(Probe { schema: Some(v) }) if !v.is_string() => Err(format!("field `schema`: expected \"{want_schema}\", found {v}")),
                Ok(Probe { schema: None }) => Err(schema_error(None)),
                Ok(_) => {
                    let path = e.path().to_string();
                    Err(if path == "." { format!("invalid record: {}", e.inner()) } else { format!("field `{path}`: {}", e.inner()) })
                }
            }
        }
    }
}

/// One line, parsed and turned into cells (off the inserting thread).
enum Item {
    Blank,
    Bad(String),
    Row(extract::RowCells),
    Ledger(Vec<Val>),
    Sample(Vec<Val>),
}

fn parse_item(kind: Kind, bytes: &[u8], source: &str, line: u64) -> Item {
    let t = bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(bytes).trim_ascii();
    if t.is_empty() {
        return Item::Blank;
    }
    if let Err(e) = std::str::from_utf8(t) {
        return Item::Bad(format!("not UTF-8: {e}"));
    }
    let r = match kind {
        Kind::Rows => parse_line::<LeanRow>(t, katlas_model::ROW_SCHEMA).map(|r| Item::Row(extract::row_cells(&r, source, line))),
        Kind::Ledger => parse_line::<katlas_model::LedgerEntry>(t, katlas_model::LEDGER_SCHEMA).map(|e| Item::Ledger(extract::ledger_cells(&e, source, line))),
        _ => parse_line::<katlas_model::EvalSample>(t, katlas_model::EVAL_SAMPLE_SCHEMA).map(|x| Item::Sample(extract::sample_cells(&x, source, line))),
    };
    r.unwrap_or_else(Item::Bad)
}

/// Parsed whole lines of one chunk, and where the chunk's whole lines end.
struct Chunk {
    items: Vec<(u64, Item)>,
    end: u64,
}

/// Read whole lines from `from` onwards in chunks, parsing each chunk in parallel; a last line
/// without its newline is not consumed (a writer may be in the middle of it).
fn read_chunks(s: &Source, from: u64, first_line: u64, out: std::sync::mpsc::SyncSender<std::io::Result<Chunk>>) {
    let run = || -> std::io::Result<()> {
        let mut f = std::fs::File::open(&s.path)?;
        let locked = f.lock_shared().is_ok();
        f.seek(SeekFrom::Start(from))?;
        let mut r = BufReader::with_capacity(1 << 20, &f);
        let (mut pos, mut lineno) = (from, first_line);
        let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_BYTES + (64 << 10));
        loop {
            chunk.clear();
            let mut eof = false;
            while chunk.len() < CHUNK_BYTES {
                if r.read_until(b'\n', &mut chunk)? == 0 {
                    eof = true;
                    break;
                }
            }
            let complete = chunk.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            if complete > 0 {
                let lines: Vec<(u64, &[u8])> = chunk[..complete - 1].split(|&b| b == b'\n').enumerate().map(|(i, l)| (lineno + 1 + i as u64, l)).collect();
                lineno += lines.len() as u64;
                pos += complete as u64;
                let items: Vec<(u64, Item)> = lines.par_iter().with_min_len(128).map(|&(n, l)| (n, parse_item(s.kind, l, &s.rel, n))).collect();
                if out.send(Ok(Chunk { items, end: pos })).is_err() {
                    break;
                }
            }
            if eof {
                break;
            }
        }
        if locked {
            let _ = FileExt::unlock(&f);
        }
        Ok(())
    };
    if let Err(e) = run() {
        let _ = out.send(Err(e));
    }
}

fn ingest(loader: &mut Loader, s: &Source, from: u64, first_line: u64, stats: &mut Stats) -> Result<(), IndexError> {
    let path = &s.path;
    let (size, mtime) = stat(path).map_err(io(path))?;
    let (indexed_len, lines) = if s.kind.is_jsonl() {
        ingest_jsonl(loader, s, from, first_line, stats)?
    } else {
        ingest_document(loader, s, stats)?;
        (size, 0)
    };
    let tail = if s.kind.is_jsonl() { tail_md5(path, indexed_len).map_err(io(path))? } else { String::new() };
    loader
        .tx
        .execute(
            "INSERT INTO sources (rel, kind, size, mtime_ns, indexed_len, lines, tail_md5) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (rel) DO UPDATE SET kind = excluded.kind, size = excluded.size, mtime_ns = excluded.mtime_ns, \
             indexed_len = excluded.indexed_len, lines = excluded.lines, tail_md5 = excluded.tail_md5",
            rusqlite::params![s.rel, s.kind.as_str(), size as i64, mtime, indexed_len as i64, lines as i64, tail],
        )
        .map_err(sql(path))?;
    Ok(())
}

/// Returns (bytes consumed, lines consumed).
fn ingest_jsonl(loader: &mut Loader, s: &Source, from: u64, first_line: u64, stats: &mut Stats) -> Result<(u64, u64), IndexError> {
    let path = &s.path;
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let (mut pos, mut lines) = (from, first_line);
    std::thread::scope(|scope| -> Result<(), IndexError> {
        scope.spawn(move || read_chunks(s, from, first_line, tx));
        for chunk in rx {
            let chunk = chunk.map_err(io(path))?;
            for (line, item) in chunk.items {
                lines = line;
                let new = match item {
                    Item::Blank => continue,
                    Item::Bad(reason) => {
                        loader.error(&s.rel, line, &reason).map_err(sql(path))?;
                        stats.errors += 1;
                        continue;
                    }
                    Item::Row(r) => loader.row(r).map_err(sql(path))?,
                    Item::Ledger(c) => loader.insert(&schema::LEDGER, &c).map_err(sql(path))? > 0,
                    Item::Sample(c) => loader.insert(&schema::SAMPLES, &c).map_err(sql(path))? > 0,
                };
                stats.records += u64::from(new);
            }
            pos = chunk.end;
        }
        Ok(())
    })?;
    Ok((pos, lines))
}

fn ingest_document(loader: &mut Loader, s: &Source, stats: &mut Stats) -> Result<(), IndexError> {
    let path = &s.path;
    let bytes = std::fs::read(path).map_err(io(path))?;
    let mut b = Batch::default();
    let res = match s.kind {
        Kind::EvalResult => parse_line::<katlas_model::EvalResult>(&bytes, katlas_model::EVAL_RESULT_SCHEMA).map(|r| extract::eval_result(&r, &s.rel, &mut b)),
        _ => parse_line::<katlas_isa::manifest::IsaManifest>(&bytes, katlas_isa::manifest::SCHEMA).map(|m| extract::isa_manifest(&m, &s.rel, &mut b)),
    };
    match res {
        Ok(()) => {
            loader.batch(&b).map_err(sql(path))?;
            stats.records += 1;
        }
        Err(reason) => {
            loader.error(&s.rel, 0, &reason).map_err(sql(path))?;
            stats.errors += 1;
        }
    }
    Ok(())
}
