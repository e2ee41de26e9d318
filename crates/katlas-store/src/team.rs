//! The team store: a PostgreSQL database several hosts push their `.katlas/` records to and
//! pull each other's from (docs/store.md).
//!
//! Every record (corpus row, ledger entry, eval result, eval sample, ISA manifest) is stored
//! once, keyed by (kind, id), with the exact bytes of its line or document: a pull writes those
//! bytes back, so a pulled file is the pushed file byte for byte and a row keeps its whole
//! identity (host, GPUs, binary, commit) for the comparison rules. Beside the bytes, the same
//! tables and views as the SQLite index (one DDL, `schema.rs`) are filled from the same
//! extraction (`extract.rs`), so `katlas query --store` runs the SQL `katlas query` runs.
//!
//! Pushes are idempotent: records are copied into session-temporary tables and moved with
//! `INSERT … ON CONFLICT DO NOTHING`, one transaction per batch; the table rows of a record go
//! in only when the record itself was new in that transaction. Every transaction takes its
//! row locks in one global order (table, then key), so concurrent pushers of overlapping
//! records wait for each other instead of deadlocking.

use crate::extract::{self, Batch, Val};
use crate::index::{self, parse_line};
use crate::lean::LeanRow;
use crate::query::QueryResult;
use crate::schema::{self, TableDef, Ty};
use crate::sources::{self, Kind, Source};
use katlas_corpus::Layout;
use katlas_model::digest::md5_hex;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bumped whenever a table or view of the store changes; a store of another version is refused.
pub const STORE_VERSION: i64 = 3;
/// Records per push transaction.
pub const BATCH_RECORDS: usize = 5000;
/// Key of the advisory lock that serialises creating the schema.
const SCHEMA_LOCK: i64 = 0x6b61_746c_6173;

const RECORDS_DDL: &str = "CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, id TEXT NOT NULL, source TEXT NOT NULL, \
    line BIGINT NOT NULL, md5 TEXT NOT NULL, raw BYTEA NOT NULL, pushed_by TEXT, pushed_at TIMESTAMPTZ NOT NULL DEFAULT now(), \
    PRIMARY KEY (kind, id));\n\
    CREATE INDEX IF NOT EXISTS records_by_source ON records (source, line);\n";

#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("{0}")]
    Url(String),
    #[error("team store {store}: {what}: {reason}")]
    Sql { store: String, what: &'static str, reason: String },
    #[error("team store {store}: {reason}")]
    Store { store: String, reason: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Index(#[from] index::IndexError),
}

impl TeamError {
    /// The server could not be reached or refused us (a missing environment, not bad input).
    pub fn is_connect(&self) -> bool {
        matches!(self, TeamError::Sql { what: "connect", .. })
    }
}

fn pgerr<'a>(store: &'a str, what: &'static str) -> impl FnOnce(postgres::Error) -> TeamError + 'a {
    move |e| TeamError::Sql { store: store.to_string(), what, reason: pg_reason(&e) }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TeamError + '_ {
    move |source| TeamError::Io { path: path.to_path_buf(), source }
}

/// A PostgreSQL error with the server's message, detail and hint (the crate's `Display` says
/// only "db error").
pub fn pg_reason(e: &postgres::Error) -> String {
    if let Some(d) = e.as_db_error() {
        let mut s = format!("{}: {}", d.severity(), d.message());
        if let Some(x) = d.detail() {
            s.push_str(&format!(" ({x})"));
        }
        if let Some(x) = d.hint() {
            s.push_str(&format!("; hint: {x}"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(&format!(": {c}"));
        src = c.source();
    }
    s
}

/// The URL without its password: what messages name.
pub fn redacted(url: &str) -> String {
    let Ok(c) = url.parse::<postgres::Config>() else { return "(unparsable URL)".into() };
    let (mut tcp, mut unix) = (Vec::new(), Vec::new());
    for h in c.get_hosts() {
        match h {
            postgres::config::Host::Tcp(s) => tcp.push(s.clone()),
            postgres::config::Host::Unix(p) => unix.push(p.display().to_string()),
        }
    }
    let port = c.get_ports().first().filter(|_| !tcp.is_empty()).map(|p| format!(":{p}")).unwrap_or_default();
    let user = c.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let socket = if unix.is_empty() { String::new() } else { format!("?host={}", unix.join(",")) };
    format!("postgres://{user}{}{port}/{}{socket}", tcp.join(","), c.get_dbname().unwrap_or(""))
}

/// A connection to the team store.
pub struct Store {
    client: Client,
    name: String,
    temp_tables: bool,
}

impl Store {
    /// Connect (no TLS: reach a remote server through an SSH tunnel or a local socket).
    pub fn connect(url: &str) -> Result<Store, TeamError> {
        let name = redacted(url);
        let mut cfg: postgres::Config = url.parse().map_err(|e: postgres::Error| TeamError::Url(format!("store URL: {}", pg_reason(&e))))?;
        cfg.application_name("katlas");
        let client = cfg.connect(NoTls).map_err(|e| TeamError::Sql { store: name.clone(), what: "connect", reason: pg_reason(&e) })?;
        Ok(Store { client, name, temp_tables: false })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Create the tables and views when the store is new; refuse a store of another version.
    pub fn ensure_schema(&mut self) -> Result<(), TeamError> {
        let name = self.name.clone();
        let err = |what| pgerr(&name, what);
        let mut tx = self.client.transaction().map_err(err("begin"))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK]).map_err(err("schema lock"))?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)").map_err(err("create store_meta"))?;
        let found: Option<String> =
            tx.query_opt("SELECT value FROM store_meta WHERE key = 'store_version'", &[]).map_err(err("read store_meta"))?.map(|r| r.get(0));
        match found {
            Some(v) if v == STORE_VERSION.to_string() => {}
            Some(v) => {
                return Err(TeamError::Store {
                    store: self.name.clone(),
                    reason: format!("store version {v}, this katlas writes version {STORE_VERSION}: use a katlas of that version or a new database"),
                })
            }
            None => {
                let views: String = schema::VIEWS.iter().map(|(n, q)| format!("CREATE OR REPLACE VIEW {n} AS {q};\n")).collect();
                let ddl = format!("{}{RECORDS_DDL}{}{views}", schema::create_tables(), schema::create_indexes());
                tx.batch_execute(&ddl).map_err(err("create tables"))?;
                tx.execute(
                    "INSERT INTO store_meta (key, value) VALUES ('store_version', $1), ('created_at', $2)",
                    &[&STORE_VERSION.to_string(), &katlas_model::row::now_rfc3339()],
                )
                .map_err(err("write store_meta"))?;
            }
        }
        tx.commit().map_err(err("commit schema"))
    }

    /// Refuse a database that holds no katlas store (reads never create one).
    fn check_store(&mut self) -> Result<(), TeamError> {
        let v = self.client.query_opt("SELECT to_regclass('store_meta') IS NOT NULL", &[]).map_err(pgerr(&self.name, "look for store_meta"))?;
        let exists: bool = v.map(|r| r.get(0)).unwrap_or(false);
        if !exists {
            return Err(TeamError::Store { store: self.name.clone(), reason: "holds no katlas store yet (`katlas store push` creates it)".into() });
        }
        let v: Option<String> = self
            .client
            .query_opt("SELECT value FROM store_meta WHERE key = 'store_version'", &[])
            .map_err(pgerr(&self.name, "read store_meta"))?
            .map(|r| r.get(0));
        if v.as_deref() != Some(&STORE_VERSION.to_string()) {
            return Err(TeamError::Store { store: self.name.clone(), reason: format!("store version {v:?}, this katlas reads version {STORE_VERSION}") });
        }
        Ok(())
    }

    fn create_temp_tables(&mut self) -> Result<(), TeamError> {
        if self.temp_tables {
            return Ok(());
        }
        let mut ddl = String::from(
            "CREATE TEMP TABLE push_records (kind TEXT, id TEXT, source TEXT, line BIGINT, md5 TEXT, raw BYTEA) ON COMMIT DELETE ROWS;\n\
             CREATE TEMP TABLE push_new (kind TEXT, id TEXT, PRIMARY KEY (kind, id)) ON COMMIT DELETE ROWS;\n",
        );
        for t in schema::TABLES.iter().filter(|t| owner(t).is_some()) {
            ddl.push_str(&format!("CREATE TEMP TABLE push_{0} (LIKE {0}) ON COMMIT DELETE ROWS;\n", t.name));
        }
        self.client.batch_execute(&ddl).map_err(pgerr(&self.name, "create temporary tables"))?;
        self.temp_tables = true;
        Ok(())
    }
}

/// The record kind a table's rows belong to and the SQL of their record id (`t` is the row).
fn owner(t: &TableDef) -> Option<(&'static str, &'static str)> {
    Some(match t.name {
        "rows" => ("rows", "t.id"),
        "metrics" | "kernels" => ("rows", "t.row_id"),
        "ledger" => ("ledger", "t.id"),
        "evals" | "eval_sides" => ("eval_result", "t.eval_id"),
        "samples" => ("eval_samples", "t.eval_id || '/' || t.seq"),
        "isa_objects" | "isa_kernels" => ("isa", "t.manifest_md5"),
        _ => return None,
    })
}

/// One record as pushed and pulled: its exact bytes and where it came from.
#[derive(Debug, Clone)]
pub struct Record {
    pub kind: Kind,
    pub id: String,
    /// Path relative to `.katlas/`.
    pub source: String,
    /// 1-based line of a JSON-lines record; 0 for a whole document.
    pub line: u64,
    /// The line without its newline, or the whole document.
    pub raw: Vec<u8>,
}

/// A record id of the store: eval samples have none of their own (eval id and sequence).
fn sample_id(eval_id: &str, seq: u64) -> String {
    format!("{eval_id}/{seq}")
}

/// A line or document parsed: the record and its table rows, or why it is not one.
enum Parsed {
    Blank,
    Bad(String),
    Record(Record, Batch),
}

fn parse_record(kind: Kind, source: &str, line: u64, raw: &[u8]) -> Parsed {
    let t = raw.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(raw).trim_ascii();
    if t.is_empty() {
        return Parsed::Blank;
    }
    let text = match std::str::from_utf8(t) {
        Ok(text) => text,
        Err(e) => return Parsed::Bad(format!("not UTF-8: {e}")),
    };
    // Records written before credentials were redacted at the source still hold them; the
    // store is shared, so such a record stays here.
    if katlas_identity::holds_secret(text) {
        return Parsed::Bad("holds a credential (a password, token or key): not pushed; redact it in the file and push again".into());
    }
    let mut b = Batch::default();
    let id = match kind {
        Kind::Rows => parse_line::<LeanRow>(t, katlas_model::ROW_SCHEMA).map(|r| {
            let c = extract::row_cells(&r, source, line);
            b.push(&schema::ROWS, c.row);
            for (tab, cells) in c.children {
                b.push(tab, cells);
            }
            c.id
        }),
        Kind::Ledger => parse_line::<katlas_model::LedgerEntry>(t, katlas_model::LEDGER_SCHEMA).map(|e| {
            b.push(&schema::LEDGER, extract::ledger_cells(&e, source, line));
            e.id
        }),
        Kind::EvalSamples => parse_line::<katlas_model::EvalSample>(t, katlas_model::EVAL_SAMPLE_SCHEMA).map(|s| {
            b.push(&schema::SAMPLES, extract::sample_cells(&s, source, line));
            sample_id(&s.eval_id, s.seq)
        }),
        Kind::EvalResult => parse_line::<katlas_model::EvalResult>(t, katlas_model::EVAL_RESULT_SCHEMA).map(|r| {
            extract::eval_result(&r, source, &mut b);
            r.eval_id
        }),
        // Keyed by content: hosts write manifests of the same name (`isa/build.json` on every
        // host that builds), and each is its own record.
        Kind::Isa => parse_line::<katlas_isa::manifest::IsaManifest>(t, katlas_isa::manifest::SCHEMA).map(|m| {
            let md5 = md5_hex(raw);
            extract::isa_manifest(&m, source, &md5, &mut b);
            md5
        }),
        // Kept whole in `records` only: the submitting side reads a fleet's jobs by id.
        Kind::FleetJob => parse_line::<katlas_model::fleet::FleetJobResult>(t, katlas_model::fleet::FLEET_JOB_SCHEMA).map(|j| j.id),
    };
    match id {
        Ok(id) => Parsed::Record(Record { kind, id, source: source.to_string(), line, raw: raw.to_vec() }, b),
        Err(reason) => Parsed::Bad(reason),
    }
}

/// Where a push or pull stands.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Progress {
    /// Records read (push: from the files; pull: from the store).
    pub records: u64,
    /// Push: bytes of the source files read so far, of `bytes_total`.
    pub bytes: u64,
    pub bytes_total: u64,
    pub elapsed_ms: u64,
}

/// A line or document that was not pushed or pulled, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    pub source: String,
    pub line: u64,
    pub reason: String,
}

/// At most this many skipped records and conflicts are listed (all are counted).
const LISTED: usize = 20;

/// What a push did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PushStats {
    pub store: String,
    pub sources: usize,
    /// Records read from the files (each id once).
    pub records: u64,
    /// Records the store did not hold before.
    pub new: u64,
    /// Records the store held already with the same bytes.
    pub present: u64,
    /// Records the store held already under the same id with other bytes (the store's kept).
    pub conflicts: u64,
    /// Records found twice in the files (the first pushed).
    pub duplicates: u64,
    /// Lines or documents that are no record (bad JSON, wrong schema) or a last line without
    /// its newline: not pushed, counted here.
    pub skipped: u64,
    pub transactions: u64,
    pub bytes: u64,
    pub elapsed_ms: u64,
    pub records_per_s: f64,
    /// New records by kind.
    pub new_by_kind: BTreeMap<String, u64>,
    /// The first skipped lines and conflicting records.
    pub skipped_list: Vec<Skipped>,
    pub conflict_list: Vec<Skipped>,
}

impl PushStats {
    fn skip(&mut self, source: &str, line: u64, reason: String) {
        self.skipped += 1;
        if self.skipped_list.len() < LISTED {
            self.skipped_list.push(Skipped { source: source.to_string(), line, reason });
        }
    }
}

/// Records and table rows waiting for the next transaction.
#[derive(Default)]
struct Pending {
    records: Vec<Record>,
    tables: BTreeMap<&'static str, Vec<Vec<Val>>>,
}

impl Pending {
    fn add(&mut self, r: Record, b: Batch) {
        self.records.push(r);
        for (t, rows) in b.tables {
            self.tables.entry(t.name).or_default().extend(rows);
        }
    }
}

/// A cell typed for its column (binary COPY is strict about types; SQLite is not).
enum Cell<'a> {
    I(Option<i64>),
    F(Option<f64>),
    T(Option<&'a str>),
}

fn cell(v: &Val, ty: Ty) -> Result<Cell<'_>, String> {
    Ok(match (ty, v) {
        (Ty::Int, Val::Null) => Cell::I(None),
        (Ty::Int, Val::Int(i)) => Cell::I(Some(*i)),
        (Ty::Real, Val::Null) => Cell::F(None),
        (Ty::Real, Val::Real(f)) => Cell::F(Some(*f)),
        (Ty::Real, Val::Int(i)) => Cell::F(Some(*i as f64)),
        (Ty::Text, Val::Null) => Cell::T(None),
        (Ty::Text, Val::Text(s)) => Cell::T(Some(s)),
        (ty, v) => return Err(format!("{v:?} in a {} column", ty.sql())),
    })
}

impl Cell<'_> {
    fn as_sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Cell::I(x) => x,
            Cell::F(x) => x,
            Cell::T(x) => x,
        }
    }
}

fn pg_type(ty: Ty) -> Type {
    match ty {
        Ty::Text => Type::TEXT,
        Ty::Int => Type::INT8,
        Ty::Real => Type::FLOAT8,
    }
}

/// Read every source file, whole lines only, in batches of at most `BATCH_RECORDS` records
/// (parsed in parallel), and hand each batch to `sink`.
fn read_sources(srcs: &[Source], stats: &mut PushStats, sink: &mut dyn FnMut(Pending, u64, &mut PushStats) -> Result<(), TeamError>) -> Result<(), TeamError> {
    let mut seen: HashSet<(Kind, String)> = HashSet::new();
    let mut pending = Pending::default();
    let mut bytes_read = 0u64;
    let mut take = |parsed: Vec<(u64, Parsed)>, src: &Source, pending: &mut Pending, stats: &mut PushStats| {
        for (line, p) in parsed {
            match p {
                Parsed::Blank => {}
                Parsed::Bad(reason) => stats.skip(&src.rel, line, reason),
                Parsed::Record(r, b) => {
                    stats.records += 1;
                    if seen.insert((r.kind, r.id.clone())) {
                        pending.add(r, b);
                    } else {
                        stats.duplicates += 1;
                    }
                }
            }
        }
    };
    for s in srcs {
        if !s.kind.is_jsonl() {
            let bytes = std::fs::read(&s.path).map_err(io(&s.path))?;
            bytes_read += bytes.len() as u64;
            let p = parse_record(s.kind, &s.rel, 0, &bytes);
            take(vec![(0, p)], s, &mut pending, stats);
            if pending.records.len() >= BATCH_RECORDS {
                sink(std::mem::take(&mut pending), bytes_read, stats)?;
            }
            continue;
        }
        let f = std::fs::File::open(&s.path).map_err(io(&s.path))?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut lineno = 0u64;
        loop {
            let mut lines: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut eof = false;
            while lines.len() + pending.records.len() < BATCH_RECORDS {
                let mut buf = Vec::new();
                let n = r.read_until(b'\n', &mut buf).map_err(io(&s.path))?;
                if n == 0 {
                    eof = true;
                    break;
                }
                bytes_read += n as u64;
                lineno += 1;
                if buf.last() != Some(&b'\n') {
                    // A writer may be in the middle of it: the next push takes it whole.
                    stats.skip(&s.rel, lineno, "last line has no newline yet (not pushed)".into());
                    eof = true;
                    break;
                }
                buf.pop();
                lines.push((lineno, buf));
            }
            let parsed: Vec<(u64, Parsed)> = lines.par_iter().with_min_len(64).map(|(n, l)| (*n, parse_record(s.kind, &s.rel, *n, l))).collect();
            take(parsed, s, &mut pending, stats);
            if pending.records.len() >= BATCH_RECORDS {
                sink(std::mem::take(&mut pending), bytes_read, stats)?;
            }
            if eof {
                break;
            }
        }
    }
    if !pending.records.is_empty() {
        sink(pending, bytes_read, stats)?;
    }
    Ok(())
}

/// Push every record of the project's files; `progress` is called after each transaction.
pub fn push(store: &mut Store, layout: &Layout, pushed_by: Option<&str>, progress: &mut dyn FnMut(&Progress)) -> Result<PushStats, TeamError> {
    push_only(store, layout, pushed_by, &|_| true, progress)
}

/// [`push`] restricted to the source files `keep` accepts (a fleet job pushes its own eval).
pub fn push_only(
    store: &mut Store,
    layout: &Layout,
    pushed_by: Option<&str>,
    keep: &dyn Fn(&Source) -> bool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<PushStats, TeamError> {
    let t0 = Instant::now();
    store.ensure_schema()?;
    store.create_temp_tables()?;
    // What pulls wrote is other hosts' and in the store already: a push sends this host's own.
    let srcs: Vec<Source> = sources::discover(layout).map_err(io(&layout.root))?.into_iter().filter(|s| !s.is_pulled() && keep(s)).collect();
    let bytes_total: u64 = srcs.iter().filter_map(|s| std::fs::metadata(&s.path).ok()).map(|m| m.len()).sum();
    let mut stats = PushStats { store: store.name.clone(), sources: srcs.len(), ..PushStats::default() };
    let mut sent = 0u64;
    read_sources(&srcs, &mut stats, &mut |mut p: Pending, bytes, stats: &mut PushStats| {
        // One global lock order for every transaction: records by (kind, id), then each table by key.
        p.records.sort_by(|a, b| (a.kind.as_str(), &a.id).cmp(&(b.kind.as_str(), &b.id)));
        let mut tries = 0;
        loop {
            tries += 1;
            match send(store, &p, pushed_by, stats) {
                Ok(()) => break,
                // A deadlock the order above rules out, or a serialisation failure: try again.
                Err(Retry::Again(_)) if tries < 4 => continue,
                Err(Retry::Again(e)) | Err(Retry::Fail(e)) => return Err(e),
            }
        }
        stats.transactions += 1;
        sent += p.records.len() as u64;
        progress(&Progress { records: sent, bytes, bytes_total, elapsed_ms: t0.elapsed().as_millis() as u64 });
        Ok(())
    })?;
    stats.bytes = bytes_total;
    stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    stats.records_per_s = stats.records as f64 / t0.elapsed().as_secs_f64().max(1e-9);
    Ok(stats)
}

enum Retry {
    Again(TeamError),
    Fail(TeamError),
}

/// One batch in one transaction.
fn send(store: &mut Store, p: &Pending, pushed_by: Option<&str>, stats: &mut PushStats) -> Result<(), Retry> {
    let name = store.name.clone();
    let fail = |what: &'static str| {
        let name = name.clone();
        move |e: postgres::Error| {
            let retry =
                e.code().is_some_and(|c| *c == postgres::error::SqlState::T_R_DEADLOCK_DETECTED || *c == postgres::error::SqlState::T_R_SERIALIZATION_FAILURE);
            let err = TeamError::Sql { store: name.clone(), what, reason: pg_reason(&e) };
            if retry {
                Retry::Again(err)
            } else {
                Retry::Fail(err)
            }
        }
    };
    let mut tx = store.client.transaction().map_err(fail("begin"))?;
    {
        let sink = tx.copy_in("COPY push_records (kind, id, source, line, md5, raw) FROM STDIN BINARY").map_err(fail("copy records"))?;
        let mut w = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT, Type::BYTEA]);
        for r in &p.records {
            let md5 = md5_hex(&r.raw);
            let line = r.line as i64;
            w.write(&[&r.kind.as_str(), &r.id, &r.source, &line, &md5, &r.raw]).map_err(fail("copy records"))?;
        }
        w.finish().map_err(fail("copy records"))?;
    }
    let new = tx
        .execute(
            "WITH ins AS (INSERT INTO records (kind, id, source, line, md5, raw, pushed_by) \
             SELECT kind, id, source, line, md5, raw, $1 FROM push_records ORDER BY kind, id \
             ON CONFLICT (kind, id) DO NOTHING RETURNING kind, id) \
             INSERT INTO push_new SELECT kind, id FROM ins",
            &[&pushed_by],
        )
        .map_err(fail("insert records"))?;
    let conflicts = tx
        .query(
            "SELECT p.source, p.line, p.kind, p.id FROM push_records p JOIN records r ON r.kind = p.kind AND r.id = p.id \
             WHERE r.md5 <> p.md5 ORDER BY p.source, p.line",
            &[],
        )
        .map_err(fail("compare records"))?;
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for r in tx.query("SELECT kind, COUNT(*) FROM push_new GROUP BY kind", &[]).map_err(fail("count new records"))? {
        by_kind.insert(r.get(0), r.get::<_, i64>(1) as u64);
    }
    for t in schema::TABLES {
        let Some(rows) = p.tables.get(t.name) else { continue };
        let Some((kind, id_sql)) = owner(t) else { continue };
        let cols = t.column_names().join(", ");
        let types: Vec<Type> = t.columns.iter().map(|c| pg_type(c.1)).collect();
        let sink = tx.copy_in(&format!("COPY push_{} ({cols}) FROM STDIN BINARY", t.name)).map_err(fail("copy table rows"))?;
        let mut w = BinaryCopyInWriter::new(sink, &types);
        for row in rows {
            let cells: Vec<Cell> = row
                .iter()
                .zip(t.columns)
                .map(|(v, c)| cell(v, c.1).map_err(|m| format!("{}.{}: {m}", t.name, c.0)))
                .collect::<Result<_, _>>()
                .map_err(|reason| Retry::Fail(TeamError::Store { store: name.clone(), reason }))?;
            let refs: Vec<&(dyn ToSql + Sync)> = cells.iter().map(Cell::as_sql).collect();
            w.write(&refs).map_err(fail("copy table rows"))?;
        }
        w.finish().map_err(fail("copy table rows"))?;
        let key = t.key.iter().map(|k| format!("t.{k}")).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "INSERT INTO {0} ({cols}) SELECT {1} FROM push_{0} t \
             WHERE EXISTS (SELECT 1 FROM push_new n WHERE n.kind = '{kind}' AND n.id = {id_sql}) \
             ORDER BY {key} ON CONFLICT ({2}) DO NOTHING",
            t.name,
            t.columns.iter().map(|c| format!("t.{}", c.0)).collect::<Vec<_>>().join(", "),
            t.key.join(", "),
        );
        tx.execute(&sql, &[]).map_err(fail("insert table rows"))?;
    }
    tx.commit().map_err(fail("commit"))?;
    stats.new += new;
    stats.conflicts += conflicts.len() as u64;
    stats.present += p.records.len() as u64 - new - conflicts.len() as u64;
    for (k, n) in by_kind {
        *stats.new_by_kind.entry(k).or_default() += n;
    }
    for c in conflicts {
        if stats.conflict_list.len() < LISTED {
            let (kind, id): (String, String) = (c.get(2), c.get(3));
            stats.conflict_list.push(Skipped {
                source: c.get(0),
                line: c.get::<_, i64>(1) as u64,
                reason: format!("{kind} {id}: the store holds other bytes under this id (kept the store's)"),
            });
        }
    }
    Ok(())
}

/// What a pull did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PullStats {
    pub store: String,
    /// Records in the store.
    pub records: u64,
    /// Records written into the project.
    pub written: u64,
    /// Records the project held already.
    pub present: u64,
    /// Documents the project holds under the same path with other bytes (left as they are).
    pub conflicts: u64,
    /// Store records refused: a path outside the layout, bytes that are no such record, an id
    /// that is not the record's.
    pub refused: u64,
    pub files_written: usize,
    pub elapsed_ms: u64,
    pub written_by_kind: BTreeMap<String, u64>,
    pub conflict_list: Vec<Skipped>,
    pub refused_list: Vec<Skipped>,
}

fn kind_of(s: &str) -> Option<Kind> {
    [Kind::Rows, Kind::Ledger, Kind::EvalResult, Kind::EvalSamples, Kind::Isa, Kind::FleetJob].into_iter().find(|k| k.as_str() == s)
}

/// The longest file name a pulled record may have (bytes), and its whole path under `.katlas/`.
const MAX_NAME: usize = 128;
const MAX_SOURCE: usize = 1024;
/// A batch of pulled records is checked and written once it holds this many bytes (or
/// `BATCH_RECORDS` records), so a pull's memory stays bounded whatever the store holds.
const BATCH_BYTES: usize = 64 << 20;

/// The directory under `pulled/` of the host that pushed a record: its name as the store holds
/// it, cut to what is safe as one file name (anyone can push under any name: it says whose
/// the records claim to be, never that they are this host's).
fn host_dir(pushed_by: Option<&str>) -> String {
    let name: String = pushed_by.unwrap_or("").chars().take(64).map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let name = name.trim_start_matches('.');
    if name.is_empty() {
        "unknown-host".into()
    } else {
        name.into()
    }
}

/// Where a pulled record is written under `.katlas/`. Rows and ISA manifests join the
/// project's (each carries its own host, GPU and binary, which every comparison reads), rows in
/// a file named for the host that pushed them (`corpus/pulled@HOST@NAME`), never in one of this
/// host's; ledger entries, eval results and samples are another host's measurements and
/// verdicts, kept under `pulled/HOST/` where no eval resumes from them and no ledger of this
/// host lists them.
fn destination(kind: Kind, rel: &str, host: &str) -> String {
    match kind {
        Kind::Rows => match rel.strip_prefix("corpus/") {
            Some(name) => format!("corpus/{}{host}@{name}", sources::PULLED_ROWS_PREFIX),
            None => rel.to_string(),
        },
        Kind::Isa => rel.to_string(),
        Kind::Ledger | Kind::EvalResult | Kind::EvalSamples | Kind::FleetJob => format!("{}/{host}/{rel}", sources::PULLED_DIR),
    }
}

/// Whether a store's `source` is a path this kind of record lives at under `.katlas/`
/// (the store is another host's data: it never names a file elsewhere).
fn source_ok(kind: Kind, rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    // Short enough for any file system once a pull adds to it (`pulled/HOST/`, an ISA
    // manifest's `-md5`), and no control characters (a name that breaks every later listing).
    let plain = |s: &str| {
        !s.is_empty() && s.len() <= MAX_NAME && s != "." && s != ".." && !s.starts_with('.') && !s.contains(['\\', '\0']) && !s.chars().any(char::is_control)
    };
    if !parts.iter().all(|p| plain(p)) {
        return false;
    }
    let eval_dir = |p: &[&str]| matches!(p, ["evals", _] | ["tasks", _, "evals", _] | ["fleet", _, _, _]);
    match kind {
        Kind::Rows => matches!(parts.as_slice(), ["corpus", f] if f.ends_with(".jsonl")),
        Kind::Ledger => parts == ["ledger.jsonl"],
        Kind::Isa => matches!(parts.as_slice(), ["isa", f] if f.ends_with(".json")),
        Kind::EvalResult => parts.last() == Some(&"result.json") && eval_dir(&parts[..parts.len() - 1]),
        Kind::EvalSamples => parts.last() == Some(&"samples.jsonl") && eval_dir(&parts[..parts.len() - 1]),
        Kind::FleetJob => matches!(parts.as_slice(), ["fleet", _, _, _, "job.json"]),
    }
}

/// The records the project holds (by the store's (kind, id)), from its refreshed index; ISA
/// manifests by the md5 of their files.
fn local_ids(layout: &Layout) -> Result<HashSet<(String, String)>, TeamError> {
    let (conn, _) = index::open(layout)?;
    let path = index::index_path(layout);
    let sql = "SELECT 'rows', id FROM rows UNION ALL SELECT 'ledger', id FROM ledger UNION ALL SELECT 'eval_result', eval_id FROM evals \
               UNION ALL SELECT 'eval_samples', eval_id || '/' || seq FROM samples";
    let e = |e: rusqlite::Error| TeamError::Index(index::IndexError::Sql { path: path.clone(), source: e });
    let mut st = conn.prepare(sql).map_err(e)?;
    let mut ids = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(e)?.collect::<Result<HashSet<_>, _>>().map_err(e)?;
    for s in sources::discover(layout).map_err(io(&layout.root))?.into_iter().filter(|s| s.kind == Kind::Isa) {
        let bytes = std::fs::read(&s.path).map_err(io(&s.path))?;
        ids.insert((Kind::Isa.as_str().to_string(), md5_hex(&bytes)));
    }
    Ok(ids)
}

/// A record as the store holds it.
struct Fetched {
    kind: String,
    /// `None` when longer than [`MAX_SOURCE`] (not fetched whole).
    id: Option<String>,
    rel: Option<String>,
    line: u64,
    /// `None` when over the line cap (not fetched); `size` says how long.
    raw: Option<Vec<u8>>,
    size: i64,
    host: String,
}

impl Fetched {
    fn id(&self) -> &str {
        self.id.as_deref().unwrap_or("(an id too long to show)")
    }
    fn rel(&self) -> &str {
        self.rel.as_deref().unwrap_or("(a path too long to show)")
    }
}

/// A store record's kind, or why it is refused: the store is another host's data, so its
/// path must be one of the layout's, its bytes a record of that kind, and its id the record's.
fn check_fetched(f: &Fetched, max_line: usize) -> Result<Kind, String> {
    let kind = kind_of(&f.kind).ok_or("unknown record kind")?;
    let (Some(id), Some(rel)) = (&f.id, &f.rel) else { return Err(format!("an id or path over {MAX_SOURCE} bytes")) };
    if !source_ok(kind, rel) {
        return Err("not a path this kind of record lives at under .katlas/ (or a name too long, or with control characters)".into());
    }
    let Some(raw) = &f.raw else { return Err(format!("{} bytes, over the {max_line}-byte line cap (KATLAS_MAX_LINE_BYTES)", f.size)) };
    if kind.is_jsonl() && raw.contains(&b'\n') {
        return Err("a line holding a newline".into());
    }
    match parse_record(kind, rel, f.line, raw) {
        Parsed::Record(r, _) if &r.id == id => Ok(kind),
        Parsed::Record(r, _) => Err(format!("the bytes are record {}, not this id", r.id)),
        Parsed::Bad(reason) => Err(reason),
        Parsed::Blank => Err("empty".into()),
    }
}

/// Lines of one JSON-lines file waiting to be appended.
struct Lines {
    rel: String,
    kind: Kind,
    lines: Vec<(String, Vec<u8>)>,
    bytes: usize,
}

/// Pull every record the project does not hold into its files (another host's ledger
/// entries and evals under `pulled/HOST/`, [`destination`]); `progress` is called after each
/// batch of records to write (checked in parallel) or at the end. A record that cannot be
/// written is refused and reported; the others are written all the same.
pub fn pull(store: &mut Store, layout: &Layout, progress: &mut dyn FnMut(&Progress)) -> Result<PullStats, TeamError> {
    let t0 = Instant::now();
    store.check_store()?;
    let max_line = katlas_corpus::input::Limits::from_env().map_err(|reason| TeamError::Store { store: store.name.clone(), reason })?.max_line;
    let mut stats = PullStats { store: store.name.clone(), ..PullStats::default() };
    let local = local_ids(layout)?;
    let mut files: HashSet<String> = HashSet::new();
    let name = store.name.clone();
    let err = |what| pgerr(&name, what);
    let mut tx = store.client.build_transaction().read_only(true).start().map_err(err("begin"))?;
    // Only what is small enough to be a record here is fetched whole: the rest is refused by
    // its size, its bytes never leaving the server.
    let cap = max_line.min(i64::MAX as usize) as i64;
    let limit = MAX_SOURCE as i64;
    let mut it = tx
        .query_raw(
            "SELECT kind, CASE WHEN octet_length(id) <= $2::BIGINT THEN id END, CASE WHEN octet_length(source) <= $2::BIGINT THEN source END, line, \
             CASE WHEN octet_length(raw) <= $1::BIGINT THEN raw END, octet_length(raw)::BIGINT, left(pushed_by, 64) \
             FROM records ORDER BY source, line, kind, id",
            [&cap as &(dyn ToSql + Sync), &limit],
        )
        .map_err(err("read records"))?;
    let mut cur: Option<Lines> = None;
    let mut done = false;
    while !done {
        let mut chunk: Vec<Fetched> = Vec::with_capacity(BATCH_RECORDS);
        let mut chunk_bytes = 0usize;
        while chunk.len() < BATCH_RECORDS && chunk_bytes < BATCH_BYTES {
            let Some(row) = it.next().map_err(err("read records"))? else {
                done = true;
                break;
            };
            let f = Fetched {
                kind: row.get(0),
                id: row.get(1),
                rel: row.get(2),
                line: row.get::<_, i64>(3).max(0) as u64,
                raw: row.get(4),
                size: row.get(5),
                host: host_dir(row.get(6)),
            };
            stats.records += 1;
            // What the project holds is not parsed again.
            if f.id.as_ref().is_some_and(|id| local.contains(&(f.kind.clone(), id.clone()))) {
                stats.present += 1;
            } else {
                chunk_bytes += f.raw.as_ref().map_or(0, Vec::len);
                chunk.push(f);
            }
        }
        let verdicts: Vec<Result<Kind, String>> = chunk.par_iter().with_min_len(64).map(|f| check_fetched(f, max_line)).collect();
        for (f, v) in chunk.into_iter().zip(verdicts) {
            let kind = match v {
                Ok(k) => k,
                Err(reason) => {
                    stats.refuse(f.rel(), f.line, format!("{} {}: {reason}", f.kind, f.id()));
                    continue;
                }
            };
            let (Some(id), Some(rel), Some(raw)) = (f.id, f.rel, f.raw) else { unreachable!("check_fetched refuses a record without them") };
            let dest = destination(kind, &rel, &f.host);
            if kind == Kind::Isa {
                write_manifest(layout, &dest, &id, &raw, &mut stats, &mut files);
                continue;
            }
            if !kind.is_jsonl() {
                write_document(layout, kind, &dest, &raw, &mut stats, &mut files);
                continue;
            }
            if cur.as_ref().is_some_and(|c| c.rel != dest || c.bytes > 8 << 20) {
                flush(layout, cur.take().unwrap(), &mut stats, &mut files);
            }
            let c = cur.get_or_insert_with(|| Lines { rel: dest, kind, lines: Vec::new(), bytes: 0 });
            c.bytes += raw.len() + 1;
            c.lines.push((id, raw));
        }
        if !done {
            progress(&Progress { records: stats.records, elapsed_ms: t0.elapsed().as_millis() as u64, ..Progress::default() });
        }
    }
    if let Some(c) = cur.take() {
        flush(layout, c, &mut stats, &mut files);
    }
    drop(it);
    tx.rollback().map_err(err("end"))?;
    stats.files_written = files.len();
    stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(stats)
}

impl PullStats {
    fn refuse(&mut self, source: &str, line: u64, reason: String) {
        self.refused += 1;
        if self.refused_list.len() < LISTED {
            self.refused_list.push(Skipped { source: source.to_string(), line, reason });
        }
    }
}

/// Append a file's pulled lines; a file that cannot be written has its lines refused.
fn flush(layout: &Layout, c: Lines, stats: &mut PullStats, files: &mut HashSet<String>) {
    let path = layout.root.join(&c.rel);
    // Rows and ledger entries carry their id in the line: the append skips any a concurrent
    // writer put in the file meanwhile. Samples are keyed by the index check alone.
    let lines: Vec<(Option<&str>, &[u8])> = c.lines.iter().map(|(id, raw)| ((c.kind != Kind::EvalSamples).then_some(id.as_str()), raw.as_slice())).collect();
    let done = match katlas_corpus::append_lines_dedup(&path, &lines, katlas_corpus::Fsync::Batch) {
        Ok(d) => d,
        Err(e) => {
            for _ in &c.lines {
                stats.refuse(&c.rel, 0, format!("not written: {e}"));
            }
            return;
        }
    };
    stats.written += done.written as u64;
    stats.present += done.already_present as u64;
    if done.written > 0 {
        *stats.written_by_kind.entry(c.kind.as_str().into()).or_default() += done.written as u64;
        files.insert(c.rel);
    }
}

/// Another host's ISA manifest: at its own path when that is free here, else beside it under
/// a name with its md5 (`isa/build.json` from another host becomes `isa/build-0123456789ab.json`).
fn write_manifest(layout: &Layout, rel: &str, md5: &str, raw: &[u8], stats: &mut PullStats, files: &mut HashSet<String>) {
    let taken = match std::fs::read(layout.root.join(rel)) {
        Ok(have) => have != raw,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return stats.refuse(rel, 0, format!("not written: {e}")),
    };
    if !taken {
        return write_document(layout, Kind::Isa, rel, raw, stats, files);
    }
    let stem = rel.strip_suffix(".json").unwrap_or(rel);
    write_document(layout, Kind::Isa, &format!("{stem}-{}.json", &md5[..12.min(md5.len())]), raw, stats, files)
}

/// Write a pulled document where none is; one that cannot be written is refused.
fn write_document(layout: &Layout, kind: Kind, rel: &str, raw: &[u8], stats: &mut PullStats, files: &mut HashSet<String>) {
    let path = layout.root.join(rel);
    match std::fs::read(&path) {
        Ok(have) if have == raw => stats.present += 1,
        Ok(_) => {
            stats.conflicts += 1;
            if stats.conflict_list.len() < LISTED {
                stats.conflict_list.push(Skipped { source: rel.into(), line: 0, reason: "the project holds other bytes at this path (left as it is)".into() });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match katlas_fs::write_atomic(&path, raw) {
            Ok(()) => {
                stats.written += 1;
                *stats.written_by_kind.entry(kind.as_str().into()).or_default() += 1;
                files.insert(rel.into());
            }
            Err(e) => stats.refuse(rel, 0, format!("not written: {e}")),
        },
        Err(e) => stats.refuse(rel, 0, format!("not written: {e}")),
    }
}

/// Rows fetched from the store's cursor at a time.
const FETCH_ROWS: usize = 1000;

/// Run one SQL statement on the store: a plain read ([`crate::query::plain_read`], checked
/// before anything is sent: a superuser's `COPY … TO PROGRAM` runs even in a read-only
/// transaction), in a read-only transaction, through a cursor (which takes only a `SELECT`
/// or `VALUES`), fetched a thousand rows at a time into a bounded result. Values keep their
/// types: integers, floating point and `numeric` (PostgreSQL's SUM and AVG of integers) come
/// back as JSON numbers, booleans as booleans, `bytea` as hex, everything else as its text.
pub fn query(store: &mut Store, sql: &str) -> Result<QueryResult, TeamError> {
    let name = store.name.clone();
    crate::query::plain_read(sql).map_err(|reason| TeamError::Store { store: name.clone(), reason })?;
    store.check_store()?;
    let sqlerr = |e: postgres::Error| TeamError::Sql { store: name.clone(), what: "SQL", reason: pg_reason(&e) };
    let mut tx = store.client.build_transaction().read_only(true).start().map_err(sqlerr)?;
    // Preparing proves one statement (the extended protocol takes no more) and gives the
    // column types; the cursor's rows then come through the simple protocol, as text whatever
    // their type.
    let st = tx.prepare(sql).map_err(sqlerr)?;
    let types: Vec<Type> = st.columns().iter().map(|c| c.type_().clone()).collect();
    let columns: Vec<String> = st.columns().iter().map(|c| c.name().to_string()).collect();
    tx.execute(&format!("DECLARE katlas_query NO SCROLL CURSOR FOR {sql}"), &[]).map_err(sqlerr)?;
    let mut rows = crate::query::Bounded::default();
    loop {
        let mut got = 0;
        for m in tx.simple_query(&format!("FETCH FORWARD {FETCH_ROWS} FROM katlas_query")).map_err(sqlerr)? {
            if let postgres::SimpleQueryMessage::Row(r) = m {
                got += 1;
                rows.push((0..types.len()).map(|i| json_value(r.get(i), &types[i])).collect())
                    .map_err(|reason| TeamError::Store { store: name.clone(), reason })?;
            }
        }
        if got < FETCH_ROWS {
            break;
        }
    }
    tx.rollback().map_err(sqlerr)?;
    Ok(QueryResult { columns, rows: rows.into_rows() })
}

/// One record as the store holds it, with the host that pushed it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub id: String,
    pub raw: Vec<u8>,
    pub pushed_by: Option<String>,
}

/// The records of one kind whose id starts with `id_prefix`, in id order (at most `limit`).
pub fn records_with_prefix(store: &mut Store, kind: Kind, id_prefix: &str, limit: i64) -> Result<Vec<Stored>, TeamError> {
    store.check_store()?;
    let name = store.name.clone();
    let like = format!("{}%", id_prefix.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
    let rows = store
        .client
        .query("SELECT id, raw, pushed_by FROM records WHERE kind = $1 AND id LIKE $2 ORDER BY id LIMIT $3", &[&kind.as_str(), &like, &limit])
        .map_err(|e| TeamError::Sql { store: name, what: "read records", reason: pg_reason(&e) })?;
    Ok(rows.into_iter().map(|r| Stored { id: r.get(0), raw: r.get(1), pushed_by: r.get(2) }).collect())
}

fn json_value(text: Option<&str>, ty: &Type) -> serde_json::Value {
    use serde_json::Value;
    let Some(s) = text else { return Value::Null };
    let num = |s: &str| s.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number).unwrap_or(Value::Null);
    let t = ty.clone();
    if [Type::INT2, Type::INT4, Type::INT8, Type::OID, Type::NUMERIC].contains(&t) {
        s.parse::<i64>().map(Value::from).unwrap_or_else(|_| num(s))
    } else if [Type::FLOAT4, Type::FLOAT8].contains(&t) {
        num(s)
    } else if t == Type::BOOL {
        Value::Bool(s == "t")
    } else if t == Type::BYTEA {
        Value::String(s.strip_prefix("\\x").unwrap_or(s).to_string())
    } else {
        Value::String(s.to_string())
    }
}

/// An unreachable server is the environment; a refused statement or a bad URL is the input.
impl katlas_fs::class::Classify for TeamError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            TeamError::Sql { what: "connect", .. } => katlas_fs::class::Class::Environment,
            TeamError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            TeamError::Index(e) => katlas_fs::class::Classify::class(e),
            _ => katlas_fs::class::Class::Input,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_holding_a_credential_is_never_pushed() {
        let line = br#"{"schema":"katlas.ledger.v1","id":"L1","identity":{"env":{"KATLAS_STORE_URL":"postgres://katlas:hunter2@db/katlas"}}}"#;
        match parse_record(Kind::Ledger, "ledger.jsonl", 1, line) {
            Parsed::Bad(reason) => assert!(reason.contains("credential"), "{reason}"),
            _ => panic!("a record with a store password was accepted for push"),
        }
        // The same record as katlas now writes it (redacted) is judged on its content alone.
        let clean = katlas_identity::redact_secrets(std::str::from_utf8(line).unwrap()).into_owned();
        assert!(!matches!(parse_record(Kind::Ledger, "ledger.jsonl", 1, clean.as_bytes()), Parsed::Bad(r) if r.contains("credential")));
    }

    #[test]
    fn store_sources_stay_inside_the_layout() {
        assert!(source_ok(Kind::Rows, "corpus/box-a-2026-05-14.jsonl"));
        assert!(source_ok(Kind::Ledger, "ledger.jsonl"));
        assert!(source_ok(Kind::EvalResult, "evals/e1/result.json"));
        assert!(source_ok(Kind::EvalSamples, "tasks/t1/evals/e1/samples.jsonl"));
        assert!(source_ok(Kind::EvalResult, "fleet/f1/gfx1100/1/result.json"), "a fleet target's eval");
        assert!(!source_ok(Kind::EvalResult, "fleet/f1/result.json"));
        assert!(source_ok(Kind::FleetJob, "fleet/f1/gfx1100/1/job.json"), "a gate or collect fleet target's job");
        assert!(!source_ok(Kind::FleetJob, "evals/e1/job.json"), "only a fleet target writes one");
        assert!(source_ok(Kind::Isa, "isa/scan-1.json"));
        for bad in ["corpus/../../x.jsonl", "/etc/passwd", "corpus/a/b.jsonl", "corpus/.hidden.jsonl", "ledger.jsonl/x", "corpus/x.txt", "evals/../result.json"]
        {
            assert!(!source_ok(Kind::Rows, bad) && !source_ok(Kind::EvalResult, bad), "{bad}");
        }
        assert!(!source_ok(Kind::Ledger, "corpus/ledger.jsonl"));
        assert!(!source_ok(Kind::EvalResult, "evals/e1/x/result.json"));
        // A name no file system takes, or one that breaks every later listing.
        assert!(!source_ok(Kind::Rows, &format!("corpus/{}.jsonl", "a".repeat(300))));
        assert!(!source_ok(Kind::EvalSamples, "tasks/t\u{1b}[2J/evals/e1/samples.jsonl"));
        assert!(!source_ok(Kind::EvalResult, "evals/e\n1/result.json"));
        assert!(!source_ok(Kind::Rows, "pulled/box-b/corpus/x.jsonl"), "a store never names the pulled tree");
    }

    #[test]
    fn other_hosts_ledgers_and_evals_go_apart_by_host() {
        assert_eq!(destination(Kind::EvalSamples, "tasks/t/evals/e/samples.jsonl", "box-b"), "pulled/box-b/tasks/t/evals/e/samples.jsonl");
        assert_eq!(destination(Kind::EvalResult, "evals/e/result.json", "box-b"), "pulled/box-b/evals/e/result.json");
        assert_eq!(destination(Kind::Ledger, "ledger.jsonl", "box-b"), "pulled/box-b/ledger.jsonl");
        assert_eq!(destination(Kind::Rows, "corpus/box-b-2026-05-14.jsonl", "box-b"), "corpus/pulled@box-b@box-b-2026-05-14.jsonl");
        // A teammate naming a file after this host still lands in a file of their own.
        assert_eq!(destination(Kind::Rows, "corpus/box-a-2026-05-14.jsonl", "box-b"), "corpus/pulled@box-b@box-a-2026-05-14.jsonl");
        assert_eq!(host_dir(Some("../../etc")), "_.._etc");
        assert_eq!(host_dir(Some("..")), "unknown-host");
        assert_eq!(host_dir(None), "unknown-host");
        assert_eq!(host_dir(Some("a/b\u{7}c")), "a_b_c");
        assert_eq!(host_dir(Some(&"h".repeat(500))).len(), 64);
    }

    #[test]
    fn urls_are_named_without_their_password() {
        let r = redacted("postgres://alice:s3cret@db.example:5433/katlas");
        assert_eq!(r, "postgres://alice@db.example:5433/katlas");
        assert!(!redacted("host=/tmp/pg user=bob password=hunter2 dbname=k").contains("hunter2"));
    }

    #[test]
    fn numeric_text_keeps_its_type() {
        assert_eq!(json_value(Some("12345"), &Type::NUMERIC), serde_json::json!(12345));
        assert_eq!(json_value(Some("2.5"), &Type::NUMERIC), serde_json::json!(2.5));
        assert_eq!(json_value(Some("NaN"), &Type::FLOAT8), serde_json::Value::Null);
        assert_eq!(json_value(Some("t"), &Type::BOOL), serde_json::json!(true));
        assert_eq!(json_value(None, &Type::TEXT), serde_json::Value::Null);
    }
}
