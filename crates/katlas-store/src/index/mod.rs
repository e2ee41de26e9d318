//! `.katlas/index.sqlite`: the query index, rebuilt from the files under `.katlas/` at any time
//! and never trusted over them.
//!
//! Freshness: the index remembers each source file's size and mtime (nanoseconds), how many
//! bytes of it it has read and the xxh3 digest of those bytes. Every open compares the files
//! with that record: a file of the same size and mtime is trusted; a JSON-lines file whose
//! indexed bytes still have the same digest is read from where the index stopped (appends are
//! how the corpus, the ledger and samples grow, so a query after an append reads only the new
//! lines); a new file is read and added; a changed document (`result.json`, an ISA manifest)
//! has its records replaced. Anything else (a JSON-lines file changed before its indexed end or
//! truncated, a file that went away, a duplicate key whose first copy would now be another
//! file's, an index of another version, a missing or unreadable index) rebuilds the whole
//! index, so an index is always what a rebuild from the files would write. Writers serialise
//! on `index.sqlite.lock`; a rebuild writes a new file and renames it over the old one, so a
//! reader never sees half an index.

use crate::extract::{self, Batch, Val};
use crate::lean::LeanRow;
use crate::schema::{self, TableDef};
use crate::sources::{self, Kind, Source};
use fs4::fs_std::FileExt;
use katlas_corpus::Layout;
use katlas_model::digest::md5_hex;
use rayon::prelude::*;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction};
use std::collections::{HashMap, HashSet};
use std::hash::Hasher;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use twox_hash::XxHash3_64;

mod segments;

/// Bumped whenever a table or view changes: an index of another version is rebuilt.
pub const INDEX_VERSION: i64 = 3;
/// Lines parsed together (in parallel) before their records are inserted.
/// Small enough that the first chunk of a file is soon parsed (the inserter waits for it),
/// large enough to keep the parsing threads busy.
const CHUNK_BYTES: usize = 1 << 20;

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

/// Open a database under `.katlas/` (the index, a rebuild's new file or segment) the way every
/// write there goes: never through a link (katlas-fs), the file itself opened `NOFOLLOW`.
fn open_db(path: &Path, read_only: bool) -> Result<Connection, IndexError> {
    katlas_fs::prepare_database(path).map_err(io(path))?;
    let mode = if read_only { OpenFlags::SQLITE_OPEN_READ_ONLY } else { OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE };
    Connection::open_with_flags(path, mode | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW).map_err(sql(path))
}

/// What bringing the index up to date did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    /// The whole index was written anew.
    pub rebuilt: bool,
    /// Why it was (`None` when only what changed was read).
    pub rebuild_reason: Option<String>,
    pub sources: usize,
    /// Sources read (wholly or from where the index stopped).
    pub sources_read: usize,
    /// Of those, JSON-lines files read from where the index stopped (appends).
    pub appended: usize,
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
    /// When the file was looked at (stat before reading), by this machine's clock.
    checked_ns: i64,
    indexed_len: u64,
    lines: u64,
    /// xxh3-64 (hex) of the first `indexed_len` bytes.
    digest: String,
}

/// A file modified this close to when it was indexed may have been modified again within the
/// file system's timestamp granularity (or a clock step): its size and mtime prove nothing and
/// its bytes are checked (git's "racily clean" rule).
const RACY_NS: i64 = 2_000_000_000;

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

impl SourceState {
    /// Same size and mtime as indexed, and modified well before it was indexed.
    fn unchanged(&self, size: u64, mtime_ns: i64) -> bool {
        size == self.size && mtime_ns == self.mtime_ns && mtime_ns < self.checked_ns - RACY_NS
    }
}

fn stat(path: &Path) -> std::io::Result<(u64, i64)> {
    let m = std::fs::metadata(path)?;
    let mtime = m.modified()?.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
    Ok((m.len(), mtime))
}

enum Plan {
    /// Same size and mtime as indexed.
    Fresh,
    /// A JSON-lines file whose indexed bytes are unchanged: read from `from` on, the digest
    /// going on from `hasher`.
    Append { from: u64, lines: u64, hasher: Box<XxHash3_64> },
    /// Not in the index yet: read and added.
    New,
    /// A document that changed: its records are replaced.
    Replace,
    /// Anything else: the whole index is written anew, for this reason.
    Rebuild(String),
}

const SOURCES_DDL: &str = "CREATE TABLE IF NOT EXISTS sources (rel TEXT PRIMARY KEY, kind TEXT NOT NULL, size BIGINT NOT NULL, \
    mtime_ns BIGINT NOT NULL, checked_ns BIGINT NOT NULL, indexed_len BIGINT NOT NULL, lines BIGINT NOT NULL, digest TEXT NOT NULL);\n\
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);\n";

fn known_sources(conn: &Connection) -> rusqlite::Result<HashMap<String, SourceState>> {
    let mut st = conn.prepare("SELECT rel, size, mtime_ns, checked_ns, indexed_len, lines, digest FROM sources")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            SourceState {
                size: r.get::<_, i64>(1)? as u64,
                mtime_ns: r.get(2)?,
                checked_ns: r.get(3)?,
                indexed_len: r.get::<_, i64>(4)? as u64,
                lines: r.get::<_, i64>(5)? as u64,
                digest: r.get(6)?,
            },
        ))
    })?;
    rows.collect()
}

fn version_ok(conn: &Connection) -> bool {
    conn.query_row("SELECT value FROM meta WHERE key = 'index_version'", [], |r| r.get::<_, String>(0)).ok().and_then(|v| v.parse::<i64>().ok())
        == Some(INDEX_VERSION)
}

fn hex(h: &XxHash3_64) -> String {
    format!("{:016x}", h.finish())
}

/// The digest of a file's first `len` bytes, ready to go on with the bytes after them; `None`
/// when the file is shorter.
fn prefix_digest(path: &Path, len: u64) -> std::io::Result<Option<XxHash3_64>> {
    let mut h = XxHash3_64::new();
    let mut r = std::fs::File::open(path)?.take(len);
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
        got += n as u64;
    }
    Ok((got == len).then_some(h))
}

/// What a refresh does with a source. A JSON-lines file is only ever appended to by katlas;
/// that it was is proved by the digest of every byte the index had read, so an edit anywhere
/// before the indexed end (same size or not) is seen.
fn plan(src: &Source, known: Option<&SourceState>) -> std::io::Result<Plan> {
    let Some(k) = known else { return Ok(Plan::New) };
    let (size, mtime) = stat(&src.path)?;
    if k.unchanged(size, mtime) {
        return Ok(Plan::Fresh);
    }
    // Same size and mtime, but too recent to prove anything by them.
    let racy = size == k.size && mtime == k.mtime_ns;
    let jsonl = src.kind.is_jsonl();
    if !jsonl && !racy {
        return Ok(Plan::Replace);
    }
    if size < k.indexed_len {
        return Ok(if jsonl { Plan::Rebuild(format!("{}: shorter than the index had read (truncated or rewritten)", src.rel)) } else { Plan::Replace });
    }
    let same = prefix_digest(&src.path, k.indexed_len)?.filter(|h| hex(h) == k.digest);
    Ok(match same {
        Some(_) if racy && size == k.indexed_len => Plan::Fresh,
        Some(hasher) if jsonl => Plan::Append { from: k.indexed_len, lines: k.lines, hasher: Box::new(hasher) },
        None if jsonl => Plan::Rebuild(format!("{}: changed before the end the index had read (not an append)", src.rel)),
        _ => Plan::Replace,
    })
}

/// Whether the index at `path` is current with the project's files (no writes).
fn is_current(path: &Path, srcs: &[Source]) -> Result<bool, IndexError> {
    let conn = match open_db(path, true) {
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
        let f = katlas_fs::open_append(&p).map_err(io(&p))?;
        f.lock_exclusive().map_err(io(&p))?;
        Ok(Self(f))
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = FileExt::unlock(&self.0);
    }
}

/// How far a rebuild is, for a progress display: source files and their bytes read so far, then
/// the indexes being built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub files_read: usize,
    pub files: usize,
    pub bytes_read: u64,
    pub bytes: u64,
    pub building_indexes: bool,
}

/// Called from the rebuild's thread as it goes (a refresh that only reads appends calls nothing).
pub type OnProgress<'a> = &'a (dyn Fn(Progress) + Sync);

fn quiet(_: Progress) {}

/// Bring the index up to date with the files (rebuilding it when missing, of another version
/// or unreadable) and open it read-only for queries.
pub fn open(layout: &Layout) -> Result<(Connection, Stats), IndexError> {
    open_with(layout, &quiet)
}

/// [`open`], saying how a rebuild goes.
pub fn open_with(layout: &Layout, on: OnProgress) -> Result<(Connection, Stats), IndexError> {
    let stats = refresh_with(layout, on)?;
    let path = index_path(layout);
    let conn = open_db(&path, true)?;
    conn.busy_timeout(Duration::from_secs(60)).map_err(sql(&path))?;
    conn.execute_batch("PRAGMA query_only = 1;").map_err(sql(&path))?;
    Ok((conn, stats))
}

/// Update the index from the files: read what changed, or rebuild when needed.
pub fn refresh(layout: &Layout) -> Result<Stats, IndexError> {
    refresh_with(layout, &quiet)
}

/// [`refresh`], saying how a rebuild goes.
pub fn refresh_with(layout: &Layout, on: OnProgress) -> Result<Stats, IndexError> {
    let t0 = Instant::now();
    let path = index_path(layout);
    let srcs = sources::discover(layout).map_err(io(&layout.root))?;
    if path.exists() && is_current(&path, &srcs)? {
        return Ok(Stats { sources: srcs.len(), ..Stats::default() });
    }
    let _lock = WriterLock::take(&path)?;
    let srcs = sources::discover(layout).map_err(io(&layout.root))?;
    let usable = path.exists()
        && open_db(&path, false)
            .ok()
            .is_some_and(|c| version_ok(&c) && c.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0)).ok().as_deref() == Some("ok"));
    if !usable {
        return rebuild_locked(&path, srcs, t0, "no usable index of this version".into(), on);
    }
    let mut conn = open_db(&path, false)?;
    conn.busy_timeout(Duration::from_secs(60)).map_err(sql(&path))?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql(&path))?;
    let known = known_sources(&tx).map_err(sql(&path))?;
    let order: HashMap<&str, usize> = srcs.iter().enumerate().map(|(i, s)| (s.rel.as_str(), i)).collect();
    let mut why = known.keys().find(|r| !order.contains_key(r.as_str())).map(|gone| format!("{gone}: went away"));
    let mut plans = Vec::new();
    for s in &srcs {
        if why.is_some() {
            break;
        }
        match plan(s, known.get(&s.rel)).map_err(io(&s.path))? {
            Plan::Fresh => {}
            Plan::Rebuild(reason) => why = Some(reason),
            p => plans.push((s, p)),
        }
    }
    let mut stats = Stats { sources: srcs.len(), ..Stats::default() };
    if why.is_none() {
        let mut loader = Loader::new(&tx, false, Some(&order));
        for (s, p) in plans {
            let (from, lines, hasher) = match p {
                Plan::Append { from, lines, hasher } => {
                    stats.appended += 1;
                    (from, lines, *hasher)
                }
                Plan::Replace => {
                    delete_document(loader.tx, &s.rel, s.kind).map_err(sql(&path))?;
                    (0, 0, XxHash3_64::new())
                }
                _ => (0, 0, XxHash3_64::new()),
            };
            loader.current = order[s.rel.as_str()];
            ingest(&mut loader, s, from, lines, hasher, &mut stats)?;
            stats.sources_read += 1;
            if let Some(d) = loader.displaced.take() {
                why = Some(d);
                break;
            }
        }
    }
    if let Some(reason) = why {
        drop(tx);
        drop(conn);
        return rebuild_locked(&path, srcs, t0, reason, on);
    }
    tx.commit().map_err(sql(&path))?;
    stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(stats)
}

/// Write the whole index anew from the files.
pub fn rebuild(layout: &Layout) -> Result<Stats, IndexError> {
    rebuild_with(layout, &quiet)
}

/// [`rebuild`], saying how it goes.
pub fn rebuild_with(layout: &Layout, on: OnProgress) -> Result<Stats, IndexError> {
    let t0 = Instant::now();
    let path = index_path(layout);
    let _lock = WriterLock::take(&path)?;
    let srcs = sources::discover(layout).map_err(io(&layout.root))?;
    rebuild_locked(&path, srcs, t0, "asked for".into(), on)
}

fn rebuild_locked(path: &Path, srcs: Vec<Source>, t0: Instant, reason: String, on: OnProgress) -> Result<Stats, IndexError> {
    remove_stale_temp_files(path);
    let tmp = path.with_extension(format!("{TEMP_EXT}{}", std::process::id()));
    let mut stats = Stats { rebuilt: true, rebuild_reason: Some(reason), sources: srcs.len(), ..Stats::default() };
    write_index(&tmp, &srcs, &mut stats, segments::SEGMENT_BYTES, on)?;
    std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(&tmp))?;
    // A journal left by a writer that died belongs to the old file, never to this one.
    let _ = std::fs::remove_file(path.with_extension("sqlite-journal"));
    std::fs::rename(&tmp, path).map_err(io(path))?;
    stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(stats)
}

/// A rebuild's new index is `index.sqlite.tmp-PID` (its segments `….tmp-PID.segN`).
const TEMP_EXT: &str = "sqlite.tmp-";

/// The new index and segments of rebuilds that were killed: only a rebuild that holds the
/// writer lock writes them, and the caller holds it now, so every one found is left over.
fn remove_stale_temp_files(index: &Path) {
    let (Some(dir), Some(name)) = (index.parent(), index.file_name()) else { return };
    let prefix = format!("{}.tmp-", name.to_string_lossy());
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A whole index from the files, at `tmp` (a new file nobody reads yet).
fn write_index(tmp: &Path, srcs: &[Source], stats: &mut Stats, segment_bytes: u64, on: OnProgress) -> Result<(), IndexError> {
    let _ = std::fs::remove_file(tmp);
    let mut conn = open_db(tmp, false)?;
    // No journal, no syncs until the final rename; the indexes built after the load sort on
    // helper threads (SQLite takes at most 8).
    let sorters = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    conn.execute_batch(&format!("{BULK_PRAGMAS} PRAGMA cache_size = -65536; PRAGMA threads = {sorters};")).map_err(sql(tmp))?;
    conn.execute_batch(&format!("{}{SOURCES_DDL}", schema::create_tables())).map_err(sql(tmp))?;
    // Unique keys of the small tables now; rows, metrics and kernels get theirs after the
    // load (row ids are de-duplicated in memory meanwhile), which is what makes it fast.
    conn.execute_batch(&small_table_keys()).map_err(sql(tmp))?;
    let loaded = segments::load(&mut conn, tmp, srcs, stats, segment_bytes, on)?;
    on(Progress { building_indexes: true, ..loaded });
    // The sorter of CREATE INDEX works in pieces the size of the page cache: small pieces that
    // stay in the CPU's caches were faster (1M rows, 16 cores: 6.6-7.1 s against 7.7-9.2 s).
    conn.execute_batch("PRAGMA cache_size = -2000;").map_err(sql(tmp))?;
    conn.execute_batch(&schema::create_indexes()).map_err(sql(tmp))?;
    conn.execute_batch(&schema::create_views()).map_err(sql(tmp))?;
    conn.execute("INSERT INTO meta (key, value) VALUES ('index_version', ?1), ('built_at', ?2)", [INDEX_VERSION.to_string(), katlas_model::row::now_rfc3339()])
        .map_err(sql(tmp))?;
    conn.execute_batch("PRAGMA journal_mode = DELETE;").map_err(sql(tmp))?;
    Ok(())
}

/// A database written once in bulk and read later (the new index, a rebuild's segments): no
/// journal and no syncs (a rebuild that dies leaves a file nobody reads), and 16 KiB pages (the
/// segments' copy into the index took 35% less time than with 4 KiB pages, the index sort 10%
/// less). A memory map for reading was tried and dropped: no gain on 16 cores, twice the RSS.
const BULK_PRAGMAS: &str = "PRAGMA page_size = 16384; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA temp_store = MEMORY;";

/// The unique keys of every table but rows, metrics and kernels (inserts into those tables
/// resolve conflicts by them).
fn small_table_keys() -> String {
    schema::TABLES.iter().filter(|t| !is_bulk(t)).map(|t| format!("CREATE UNIQUE INDEX {0}_key ON {0} ({1});\n", t.name, t.key.join(", "))).collect()
}

fn is_bulk(t: &TableDef) -> bool {
    ["rows", "metrics", "kernels"].contains(&t.name)
}

/// Drop a document's records before it is read again (only documents are replaced: a
/// JSON-lines file changed other than by an append rebuilds the index).
fn delete_document(tx: &Connection, rel: &str, kind: Kind) -> rusqlite::Result<()> {
    let stmts: &[&str] = match kind {
        Kind::EvalResult => &["DELETE FROM evals WHERE source = ?1", "DELETE FROM eval_sides WHERE source = ?1"],
        Kind::Isa => &["DELETE FROM isa_kernels WHERE manifest = ?1", "DELETE FROM isa_objects WHERE manifest = ?1"],
        _ => &[],
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
    /// Prepared inserts, by position in `schema::TABLES`.
    stmts: Vec<Option<rusqlite::Statement<'t>>>,
    /// During a refresh: each source's position in name order and the one being read, to
    /// notice a key the index holds from a file a rebuild would read after this one.
    order: Option<HashMap<String, usize>>,
    current: usize,
    /// Why this refresh cannot stand for a rebuild (a rebuild follows).
    displaced: Option<String>,
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

impl<'t> Loader<'t> {
    fn new(tx: &'t Transaction<'t>, rebuild: bool, order: Option<&HashMap<&str, usize>>) -> Self {
        Loader {
            tx,
            seen_rows: rebuild.then(HashSet::new),
            stmts: schema::TABLES.iter().map(|_| None).collect(),
            order: order.map(|o| o.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
            current: 0,
            displaced: None,
        }
    }

    fn insert(&mut self, t: &'static TableDef, cells: &[Val]) -> rusqlite::Result<usize> {
        let i = schema::TABLES.iter().position(|x| x.name == t.name).expect("a table of the schema");
        if self.stmts[i].is_none() {
            // Metrics and kernels go in only with their new row: they never conflict.
            let plain = is_bulk(t) && (self.seen_rows.is_some() || t.name != "rows");
            let ph = |i| format!("?{i}");
            let sql = if plain { t.plain_insert_sql(ph) } else { t.insert_sql(ph) };
            self.stmts[i] = Some(self.tx.prepare(&sql)?);
        }
        let st = self.stmts[i].as_mut().expect("prepared above");
        for (j, c) in cells.iter().enumerate() {
            st.raw_bind_parameter(j + 1, c)?;
        }
        let n = st.raw_execute()?;
        if n == 0 && self.order.is_some() {
            self.check_displaced(t, cells)?;
        }
        Ok(n)
    }

    /// A record whose key the index holds already: fine when the holder is this file or one
    /// a rebuild reads first (the first in name order is kept); otherwise only a rebuild
    /// gives what a rebuild gives.
    fn check_displaced(&mut self, t: &TableDef, cells: &[Val]) -> rusqlite::Result<()> {
        let col = |name: &str| t.columns.iter().position(|c| c.0 == name);
        let Some(src) = col("source") else { return Ok(()) };
        let keys: Vec<&Val> = t.key.iter().filter_map(|k| col(k)).map(|i| &cells[i]).collect();
        let cond: Vec<String> = t.key.iter().enumerate().map(|(i, k)| format!("{k} = ?{}", i + 1)).collect();
        let holder: Option<String> = self
            .tx
            .query_row(&format!("SELECT source FROM {} WHERE {}", t.name, cond.join(" AND ")), rusqlite::params_from_iter(keys.iter()), |r| r.get(0))
            .optional()?;
        let later = holder.as_ref().and_then(|h| self.order.as_ref()?.get(h)).is_some_and(|&p| p > self.current);
        if later && self.displaced.is_none() {
            let key: Vec<String> = keys.iter().map(|v| format!("{v:?}")).collect();
            self.displaced = Some(format!(
                "{} key {} is in {} and in {}, which the index read first: a rebuild keeps the first in name order",
                t.name,
                key.join(", "),
                cells[src].as_str().unwrap_or("?"),
                holder.unwrap_or_default()
            ));
        }
        Ok(())
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
    fn row(&mut self, r: &mut extract::RowCells) -> rusqlite::Result<bool> {
        if let Some(seen) = &mut self.seen_rows {
            if !seen.insert(std::mem::take(&mut r.id)) {
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
schema_field!(
    katlas_model::LedgerEntry,
    katlas_model::EvalSample,
    katlas_model::EvalResult,
    katlas_isa::manifest::IsaManifest,
    katlas_model::fleet::FleetJobResult
);

/// Parse one JSON record whose `schema` must be `want_schema`: the record, or why not (the
/// field path named). The wrong schema is reported first, even when the rest does not parse.
pub fn parse_line<'de, T: serde::Deserialize<'de> + Schema>(bytes: &'de [u8], want_schema: &str) -> Result<T, String> {
    // The common case without the cost of tracking the path; a record that fails is parsed
    // again for the path its error names.
    if let Ok(r) = serde_json::from_slice::<T>(bytes) {
        if r.schema() == want_schema {
            return Ok(r);
        }
    }
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
fn read_chunks(s: &Source, from: u64, first_line: u64, mut hasher: XxHash3_64, out: std::sync::mpsc::SyncSender<std::io::Result<Chunk>>) -> XxHash3_64 {
    let mut run = || -> std::io::Result<()> {
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
                hasher.write(&chunk[..complete]);
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
    hasher
}

fn ingest(loader: &mut Loader, s: &Source, from: u64, first_line: u64, hasher: XxHash3_64, stats: &mut Stats) -> Result<(), IndexError> {
    let path = &s.path;
    let checked = now_ns();
    let (size, mtime) = stat(path).map_err(io(path))?;
    let (indexed_len, lines, digest) =
        if s.kind.is_jsonl() { ingest_jsonl(loader, s, from, first_line, hasher, stats)? } else { ingest_document(loader, s, stats)? };
    loader
        .tx
        .execute(
            "INSERT INTO sources (rel, kind, size, mtime_ns, checked_ns, indexed_len, lines, digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
             ON CONFLICT (rel) DO UPDATE SET kind = excluded.kind, size = excluded.size, mtime_ns = excluded.mtime_ns, \
             checked_ns = excluded.checked_ns, indexed_len = excluded.indexed_len, lines = excluded.lines, digest = excluded.digest",
            rusqlite::params![s.rel, s.kind.as_str(), size as i64, mtime, checked, indexed_len as i64, lines as i64, digest],
        )
        .map_err(sql(path))?;
    Ok(())
}

/// Returns (bytes consumed, lines consumed, digest of the bytes up to there).
fn ingest_jsonl(loader: &mut Loader, s: &Source, from: u64, first_line: u64, hasher: XxHash3_64, stats: &mut Stats) -> Result<(u64, u64, String), IndexError> {
    let path = &s.path;
    let (tx, rx) = std::sync::mpsc::sync_channel(8);
    let (mut pos, mut lines) = (from, first_line);
    let hasher = std::thread::scope(|scope| -> Result<XxHash3_64, IndexError> {
        let reader = scope.spawn(move || read_chunks(s, from, first_line, hasher, tx));
        for chunk in rx {
            let mut chunk = chunk.map_err(io(path))?;
            for (line, item) in chunk.items.iter_mut() {
                let line = *line;
                lines = line;
                let new = match item {
                    Item::Blank => continue,
                    Item::Bad(reason) => {
                        loader.error(&s.rel, line, reason).map_err(sql(path))?;
                        stats.errors += 1;
                        continue;
                    }
                    Item::Row(r) => loader.row(r).map_err(sql(path))?,
                    Item::Ledger(c) => loader.insert(&schema::LEDGER, c).map_err(sql(path))? > 0,
                    Item::Sample(c) => loader.insert(&schema::SAMPLES, c).map_err(sql(path))? > 0,
                };
                stats.records += u64::from(new);
            }
            pos = chunk.end;
            // Freeing a chunk's cells (dozens of strings a row) is left to another thread.
            rayon::spawn(move || drop(chunk));
            if loader.displaced.is_some() {
                break;
            }
        }
        Ok(reader.join().expect("the reader thread does not panic"))
    })?;
    Ok((pos, lines, hex(&hasher)))
}

/// Returns (bytes read, 0 lines, digest of the document).
fn ingest_document(loader: &mut Loader, s: &Source, stats: &mut Stats) -> Result<(u64, u64, String), IndexError> {
    let path = &s.path;
    let bytes = std::fs::read(path).map_err(io(path))?;
    let mut b = Batch::default();
    let res = match s.kind {
        Kind::EvalResult => parse_line::<katlas_model::EvalResult>(&bytes, katlas_model::EVAL_RESULT_SCHEMA).map(|r| extract::eval_result(&r, &s.rel, &mut b)),
        // Checked, not tabled: `katlas fleet` reads a fleet's jobs from its own directory.
        Kind::FleetJob => parse_line::<katlas_model::fleet::FleetJobResult>(&bytes, katlas_model::fleet::FLEET_JOB_SCHEMA).map(|_| ()),
        _ => parse_line::<katlas_isa::manifest::IsaManifest>(&bytes, katlas_isa::manifest::SCHEMA)
            .map(|m| extract::isa_manifest(&m, &s.rel, &md5_hex(&bytes), &mut b)),
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
    let mut h = XxHash3_64::new();
    h.write(&bytes);
    Ok((bytes.len() as u64, 0, hex(&h)))
}

/// SQLite's own `SQLITE_FULL` is a full disk, the environment; any other SQLite failure is
/// the input's (the SQL, the index's contents).
pub fn sqlite_class(e: &rusqlite::Error) -> katlas_fs::class::Class {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
        katlas_fs::class::Class::Environment
    } else {
        katlas_fs::class::Class::Input
    }
}

/// A full disk under the index (SQLite's, or the OS's) is the environment.
impl katlas_fs::class::Classify for IndexError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            IndexError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            IndexError::Sql { source, .. } => sqlite_class(source),
        }
    }
}
