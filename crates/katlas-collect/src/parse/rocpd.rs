//! rocprofv3's rocpd output, the default since ROCm 7: one SQLite database per profiled
//! process (`HOST/PID_results.db`), read as rocprofiler-sdk defines it (`rocpd_tables.sql`,
//! schema version 3) into the same kernel table as the rocprofv3 CSV path: the same launch
//! facts ([`Launch`]), the same bytes from counters ([`KernelBytes`], `data/amd_counters.toml`)
//! and the timeline facts of [`timeline`].
//!
//! Every table name carries the process's suffix (`_` and its UUID with `_` for `-`), and the
//! unsuffixed names are views over them. A view is SQL the file brings with it, so only plain
//! tables are read, each by one scan of the columns used; the joins are done here:
//!
//! - `rocpd_kernel_dispatch`: a row per dispatch: `start`/`end` (ns), `grid_size_*` and
//!   `workgroup_size_*` (work-items), `group_segment_size` (LDS bytes), `private_segment_size`
//!   (scratch bytes), `kernel_id`, `agent_id`, `event_id`.
//! - `rocpd_info_kernel_symbol`: `display_name` (else `kernel_name`), `arch_vgpr_count`,
//!   `sgpr_count`, `accum_vgpr_count`.
//! - `rocpd_info_agent`: `name` (`gfx942`) is the arch, `product_name` the device, `extdata`
//!   (JSON) the CU count and wave size.
//! - `rocpd_info_pmc` + `rocpd_pmc_event`: counter values per dispatch event, summed over the
//!   counter's instances (as the CSV counter collection and rocpd's `counters_collection` view do).
//! - `rocpd_string` + `rocpd_event` + `rocpd_region`: marker (roctx) ranges are the regions whose
//!   event category is `MARKER_*`, named by the event's `extdata.message`. Ranges named in the
//!   `phases` option delimit phases as GPU annotations do for `torch-trace`: a kernel belongs
//!   to the range that contains its start, kernels outside them to `unannotated`.
//!
//! Several databases (processes) read together add up in one view. The database is untrusted:
//! it is opened read-only, immutable (no journal, WAL or lock file is touched) and without
//! following a symbolic link; triggers never run on reads, and views, virtual tables and
//! generated columns (SQL the file brings) are not read. A table yields at most one row per
//! [`MIN_ROW_BYTES`] of file (a b-tree whose pages repeat yields more), a value at most
//! `KATLAS_MAX_LINE_BYTES`, and the whole read at most [`STEPS_BASE`] + [`STEPS_PER_BYTE`] per
//! byte of SQLite steps. A row with a bad value is
//! a warning naming file, table, row and column, and is skipped; a missing table or column is
//! an error naming them.

use super::input::Limits;
use super::rocprof::{kernel_name, phase_name, Launch};
use super::rocprof_dir::{no_bytes_warning, KernelBytes};
use super::timeline;
use super::{ParseError, ParseOutput, ParserOptions};
use crate::amd_counters::{self, Family};
use crate::summary::PhaseAcc;
use katlas_model::Metric;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// Per-table row warnings shown before they are only counted.
const SHOWN: u64 = 20;
/// Fewest bytes one table row takes in a database file (cell pointer, payload size, rowid,
/// record header): a table that yields more rows than its file can hold repeats pages.
pub const MIN_ROW_BYTES: u64 = 4;
/// SQLite virtual-machine steps a read may take: this many for the schema and small tables…
pub const STEPS_BASE: u64 = 20_000_000;
/// …plus this many per byte of database (a scan takes a few steps per column and row).
pub const STEPS_PER_BYTE: u64 = 64;
/// Steps between two checks of the budget.
const CHECK_EVERY: i32 = 1000;

const DISPATCH: &str = "rocpd_kernel_dispatch";
const SYMBOL: &str = "rocpd_info_kernel_symbol";
const AGENT: &str = "rocpd_info_agent";
const PMC_INFO: &str = "rocpd_info_pmc";
const PMC_EVENT: &str = "rocpd_pmc_event";
const STRING: &str = "rocpd_string";
const EVENT: &str = "rocpd_event";
const REGION: &str = "rocpd_region";

/// The registry's stream entry: SQLite reads a database file in place, so a stream is refused.
pub fn parse_stream(_r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    Err(ParseError::new(source, None, "rocpd reads SQLite databases in place: give the .db file (or a directory of them), not a stream"))
}

/// One rocpd database, or every `*.db` rocpd database in a directory (four levels down, so
/// `HOST/PID_results.db` under an output directory is found).
pub fn parse(path: &Path, opts: &ParserOptions, limits: &Limits) -> Result<ParseOutput, ParseError> {
    parse_files(&[path.to_path_buf()], opts, limits)
}

/// Several databases (one per process) or directories of them, read as one view.
pub fn parse_files(paths: &[PathBuf], opts: &ParserOptions, limits: &Limits) -> Result<ParseOutput, ParseError> {
    let shown = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" + ");
    let mut out = ParseOutput::new("rocpd", &shown);
    let mut dbs = Vec::new();
    for p in paths {
        let s = p.display().to_string();
        let meta = std::fs::symlink_metadata(p).map_err(|e| ParseError::new(&s, None, katlas_corpus::input::describe(&e)))?;
        let is_dir = meta.is_dir() || (meta.file_type().is_symlink() && std::fs::metadata(p).is_ok_and(|m| m.is_dir()));
        if !is_dir {
            if meta.file_type().is_symlink() {
                return Err(ParseError::new(&s, None, "a symbolic link: give the database's own path (links are not followed)"));
            }
            katlas_corpus::input::open_regular(p).map_err(|e| ParseError::new(&s, None, e.to_string()))?;
            match Db::open(p, limits) {
                Ok(db) => dbs.push(db),
                Err(Open::NotRocpd(e) | Open::Failed(e)) => return Err(e),
            }
            continue;
        }
        let mut found = 0;
        for e in walkdir::WalkDir::new(p).max_depth(4).follow_links(false).sort_by_file_name().into_iter() {
            let e = match e {
                Ok(e) => e,
                Err(err) => {
                    out.warnings.push(format!("{s}: {err}; skipped"));
                    continue;
                }
            };
            if !e.file_name().to_string_lossy().ends_with(".db") || e.file_type().is_dir() {
                continue;
            }
            let f = e.path().display().to_string();
            if !e.file_type().is_file() {
                out.warnings.push(format!("{f}: not a regular file (links are not followed); skipped"));
                continue;
            }
            match Db::open(e.path(), limits) {
                Ok(db) => {
                    dbs.push(db);
                    found += 1;
                }
                Err(Open::NotRocpd(err)) => out.warnings.push(format!("{err}; skipped")),
                Err(Open::Failed(err)) => return Err(err),
            }
        }
        if found == 0 {
            return Err(ParseError::new(&s, None, "no rocpd database (*.db with a rocpd_kernel_dispatch table) in this directory or below"));
        }
    }
    read_all(&mut out, &dbs, opts)?;
    Ok(out)
}

enum Open {
    /// Not a rocpd database (skipped when a directory walk found it).
    NotRocpd(ParseError),
    Failed(ParseError),
}

/// An open database and the rocpd tables it has.
struct Db {
    conn: Connection,
    file: String,
    len: u64,
    /// Table-name suffixes of the rocpd table sets (one per process writing into the file).
    suffixes: Vec<String>,
    tables: BTreeSet<String>,
    max_rows: u64,
}

/// `file:` URI of a path: every byte outside the unreserved set percent-encoded, so `?`, `#`
/// and `%` in a name stay part of it.
fn uri(path: &Path) -> std::io::Result<String> {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let abs = std::path::absolute(path)?;
    let mut s = String::from("file://");
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s.push_str("?mode=ro&immutable=1");
    Ok(s)
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// A value for a message: at most 40 characters, control characters escaped.
fn show(b: &[u8]) -> String {
    let t = String::from_utf8_lossy(&b[..b.len().min(40)]).escape_debug().to_string();
    if b.len() > 40 {
        format!("{t}…")
    } else {
        t
    }
}

impl Db {
    fn open(path: &Path, limits: &Limits) -> Result<Db, Open> {
        let file = path.display().to_string();
        let fail = |m: String| Open::Failed(ParseError::new(&file, None, m));
        let mut f = katlas_corpus::input::open_regular(path).map_err(|e| fail(e.to_string()))?;
        let len = f.metadata().map_err(|e| fail(e.to_string()))?.len();
        let mut head = [0u8; 16];
        let n = f.read(&mut head).map_err(|e| fail(e.to_string()))?;
        drop(f);
        if n >= 2 && head[..2] == [0x1f, 0x8b] {
            return Err(Open::NotRocpd(ParseError::new(&file, None, "gzip-compressed: decompress it first (SQLite reads a database in place)")));
        }
        if n < 16 || &head != b"SQLite format 3\0" {
            return Err(Open::NotRocpd(ParseError::new(&file, None, "not an SQLite database (no `SQLite format 3` header)")));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let u = uri(path).map_err(|e| fail(e.to_string()))?;
        let conn = Connection::open_with_flags(&u, flags).map_err(|e| fail(format!("SQLite: {e}")))?;
        use rusqlite::limits::Limit;
        let max_value = i32::try_from(limits.max_line).unwrap_or(i32::MAX).max(1);
        let _ = conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, max_value);
        let _ = conn.set_limit(Limit::SQLITE_LIMIT_EXPR_DEPTH, 256);
        let _ = conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0);
        let budget = (STEPS_BASE.saturating_add(STEPS_PER_BYTE.saturating_mul(len))) / CHECK_EVERY as u64;
        let mut checks = 0u64;
        conn.progress_handler(
            CHECK_EVERY,
            Some(move || {
                checks += 1;
                checks > budget
            }),
        );
        let mut db = Db { conn, file, len, suffixes: Vec::new(), tables: BTreeSet::new(), max_rows: len / MIN_ROW_BYTES + 16 };
        for (k, v) in [("trusted_schema", "OFF"), ("cell_size_check", "ON"), ("query_only", "ON"), ("mmap_size", "0"), ("cache_size", "-16384")] {
            db.conn.execute_batch(&format!("PRAGMA {k} = {v}")).map_err(|e| Open::Failed(db.sql_err("sqlite_schema", e)))?;
        }
        db.read_schema().map_err(Open::Failed)?;
        if db.suffixes.is_empty() {
            return Err(Open::NotRocpd(ParseError::new(&db.file, None, format!("no {DISPATCH} table: not a rocpd database"))));
        }
        Ok(db)
    }

    fn err(&self, table: &str, column: Option<&str>, message: impl Into<String>) -> ParseError {
        let key = match column {
            Some(c) => format!("{table}.{c}"),
            None => table.to_string(),
        };
        ParseError { key: Some(key), ..ParseError::new(&self.file, None, message) }
    }

    fn sql_err(&self, table: &str, e: rusqlite::Error) -> ParseError {
        let interrupted = matches!(&e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::OperationInterrupted);
        if interrupted {
            let steps = STEPS_BASE.saturating_add(STEPS_PER_BYTE.saturating_mul(self.len));
            return self.err(
                table,
                None,
                format!("reading stopped after {steps} SQLite steps, more than a {}-byte database needs: the file is corrupt", self.len),
            );
        }
        self.err(table, None, format!("SQLite: {e}"))
    }

    /// Plain tables (views and virtual tables are SQL the file brings: never read).
    fn read_schema(&mut self) -> Result<(), ParseError> {
        let mut names = BTreeSet::new();
        {
            let mut stmt = self.conn.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table'").map_err(|e| self.sql_err("sqlite_schema", e))?;
            let mut rows = stmt.query([]).map_err(|e| self.sql_err("sqlite_schema", e))?;
            let mut n = 0u64;
            while let Some(r) = rows.next().map_err(|e| self.sql_err("sqlite_schema", e))? {
                n += 1;
                if n > self.max_rows {
                    return Err(self.too_many("sqlite_schema"));
                }
                let (Ok(ValueRef::Text(name)), sql) = (r.get_ref(0), r.get_ref(1)) else { continue };
                let virtual_table = matches!(sql, Ok(ValueRef::Text(s)) if s.len() >= 20 && s[..20].eq_ignore_ascii_case(b"CREATE VIRTUAL TABLE"));
                if !virtual_table {
                    names.insert(String::from_utf8_lossy(name).to_string());
                }
            }
        }
        let ok = |s: &str| s.is_empty() || (s.len() > 1 && s.starts_with('_') && s[1..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        self.suffixes = names.iter().filter_map(|n| n.strip_prefix(DISPATCH)).filter(|s| ok(s)).map(str::to_string).collect();
        self.tables = names;
        Ok(())
    }

    fn too_many(&self, table: &str) -> ParseError {
        self.err(table, None, format!("more than {} rows, more than a {}-byte file can hold: the database is corrupt", self.max_rows, self.len))
    }

    fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    fn columns(&self, table: &str) -> Result<HashSet<String>, ParseError> {
        let mut stmt = self.conn.prepare(&format!("PRAGMA table_xinfo({})", quote(table))).map_err(|e| self.sql_err(table, e))?;
        let mut rows = stmt.query([]).map_err(|e| self.sql_err(table, e))?;
        let mut cols = HashSet::new();
        while let Some(r) = rows.next().map_err(|e| self.sql_err(table, e))? {
            let Ok(ValueRef::Text(n)) = r.get_ref(1) else { continue };
            let name = String::from_utf8_lossy(n).to_ascii_lowercase();
            // A generated column is computed by SQL the file brings, row by row: never read.
            if matches!(r.get_ref(6), Ok(ValueRef::Integer(2 | 3))) {
                return Err(self.err(table, Some(&name), "a generated column (computed by SQL in the file): not read"));
            }
            cols.insert(name);
            if cols.len() > 4096 {
                return Err(self.err(table, None, "more than 4096 columns"));
            }
        }
        Ok(cols)
    }

    /// Scan `table` for the columns of `want` it has (`required` ones must be there); a row
    /// `f` refuses is a warning naming the row and is skipped. Returns the rows read.
    fn scan(
        &self,
        table: &str,
        want: &[&str],
        required: &[&str],
        warnings: &mut Vec<String>,
        mut f: impl FnMut(&RowView<'_, '_>) -> Result<(), String>,
    ) -> Result<u64, ParseError> {
        let have = self.columns(table)?;
        if have.is_empty() {
            return Err(self.err(table, None, "missing"));
        }
        for c in required {
            if !have.contains(*c) {
                return Err(self.err(table, Some(c), "column missing"));
            }
        }
        let cols: Vec<&str> = want.iter().copied().filter(|c| have.contains(*c)).collect();
        let list = if cols.is_empty() { "NULL".to_string() } else { cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ") };
        let mut stmt = self.conn.prepare(&format!("SELECT {list} FROM {}", quote(table))).map_err(|e| self.sql_err(table, e))?;
        let mut rows = stmt.query([]).map_err(|e| self.sql_err(table, e))?;
        let (mut n, mut skipped) = (0u64, 0u64);
        while let Some(row) = rows.next().map_err(|e| self.sql_err(table, e))? {
            n += 1;
            if n > self.max_rows {
                return Err(self.too_many(table));
            }
            let v = RowView { row, cols: &cols, n };
            if let Err(m) = f(&v) {
                skipped += 1;
                if skipped <= SHOWN {
                    warnings.push(format!("{}: table `{table}` row {}: {m}; row skipped", self.file, v.id()));
                }
            }
        }
        if skipped > SHOWN {
            warnings.push(format!("{}: table `{table}`: {skipped} rows skipped in all", self.file));
        }
        Ok(n)
    }
}

/// One row of a scan, read by column name; an absent column reads as NULL.
struct RowView<'a, 'b> {
    row: &'a rusqlite::Row<'b>,
    cols: &'a [&'a str],
    n: u64,
}

impl RowView<'_, '_> {
    fn get(&self, col: &str) -> ValueRef<'_> {
        self.cols.iter().position(|c| *c == col).and_then(|i| self.row.get_ref(i).ok()).unwrap_or(ValueRef::Null)
    }

    /// `id N` when the row has an integer id, else its place in the scan.
    fn id(&self) -> String {
        match self.get("id") {
            ValueRef::Integer(i) => format!("id {i}"),
            _ => format!("#{}", self.n),
        }
    }

    fn int(&self, col: &str) -> Result<Option<i64>, String> {
        match self.get(col) {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(i) => Ok(Some(i)),
            ValueRef::Real(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(Some(f as i64)),
            ValueRef::Real(f) => Err(format!("column `{col}`: {f} is not an integer")),
            ValueRef::Text(t) => Err(format!("column `{col}`: text `{}` is not an integer", show(t))),
            ValueRef::Blob(b) => Err(format!("column `{col}`: a {}-byte blob is not an integer", b.len())),
        }
    }

    fn uint(&self, col: &str) -> Result<Option<u64>, String> {
        match self.int(col)? {
            Some(i) if i < 0 => Err(format!("column `{col}`: {i} is negative")),
            x => Ok(x.map(|i| i as u64)),
        }
    }

    fn need(&self, col: &str) -> Result<i64, String> {
        self.int(col)?.ok_or_else(|| format!("column `{col}`: NULL"))
    }

    fn u32(&self, col: &str) -> Result<Option<u32>, String> {
        match self.uint(col)? {
            Some(x) => u32::try_from(x).map(Some).map_err(|_| format!("column `{col}`: {x} does not fit 32 bits")),
            None => Ok(None),
        }
    }

    fn real(&self, col: &str) -> Result<Option<f64>, String> {
        match self.get(col) {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(i) => Ok(Some(i as f64)),
            ValueRef::Real(f) if f.is_finite() => Ok(Some(f)),
            ValueRef::Real(f) => Err(format!("column `{col}`: {f} is not a finite number")),
            ValueRef::Text(t) => Err(format!("column `{col}`: text `{}` is not a number", show(t))),
            ValueRef::Blob(b) => Err(format!("column `{col}`: a {}-byte blob is not a number", b.len())),
        }
    }

    fn text(&self, col: &str) -> Result<Option<String>, String> {
        match self.get(col) {
            ValueRef::Null => Ok(None),
            ValueRef::Text(t) => Ok(Some(String::from_utf8_lossy(t).to_string())),
            ValueRef::Integer(i) => Ok(Some(i.to_string())),
            ValueRef::Real(f) => Ok(Some(f.to_string())),
            ValueRef::Blob(b) => Err(format!("column `{col}`: a {}-byte blob is not text", b.len())),
        }
    }
}

#[derive(Debug, Clone)]
struct Agent {
    arch: String,
    product: Option<String>,
    cu_count: Option<u64>,
    wave_size: Option<u64>,
    gpu: bool,
}

struct Symbol {
    name: String,
    vgpr: Option<u32>,
    sgpr: Option<u64>,
    agpr: Option<u64>,
    lds: Option<u64>,
    scratch: Option<u64>,
}

/// What one table set (one process's tables in one file) holds besides its dispatches.
struct Set {
    suffix: String,
    agents: HashMap<i64, Agent>,
    symbols: HashMap<i64, Symbol>,
    /// Counters per dispatch event, summed over instances.
    counters: HashMap<i64, BTreeMap<String, f64>>,
    counter_names: BTreeSet<String>,
    /// Marker ranges: start, end (ns), name.
    ranges: Vec<(i64, i64, String)>,
}

fn read_set(db: &Db, suffix: &str, warnings: &mut Vec<String>) -> Result<Set, ParseError> {
    let t = |base: &str| format!("{base}{suffix}");
    let mut set = Set {
        suffix: suffix.to_string(),
        agents: HashMap::new(),
        symbols: HashMap::new(),
        counters: HashMap::new(),
        counter_names: BTreeSet::new(),
        ranges: Vec::new(),
    };
    if !db.has(&t(SYMBOL)) {
        return Err(db.err(&t(SYMBOL), None, format!("table missing: the kernel names of {} cannot be read", t(DISPATCH))));
    }
    db.scan(
        &t(SYMBOL),
        &["id", "kernel_name", "display_name", "arch_vgpr_count", "sgpr_count", "accum_vgpr_count", "group_segment_size", "private_segment_size"],
        &["id"],
        warnings,
        |r| {
            let id = r.need("id")?;
            let name = r.text("display_name")?.filter(|n| !n.trim().is_empty()).or(r.text("kernel_name")?.filter(|n| !n.trim().is_empty()));
            let name = name.ok_or("columns `display_name` and `kernel_name`: no name")?;
            let sym = Symbol {
                name: kernel_name(&name).to_string(),
                vgpr: r.u32("arch_vgpr_count")?,
                sgpr: r.uint("sgpr_count")?,
                agpr: r.uint("accum_vgpr_count")?,
                lds: r.uint("group_segment_size")?,
                scratch: r.uint("private_segment_size")?,
            };
            set.symbols.insert(id, sym);
            Ok(())
        },
    )?;
    if db.has(&t(AGENT)) {
        db.scan(&t(AGENT), &["id", "type", "name", "product_name", "extdata"], &["id", "name"], warnings, |r| {
            let id = r.need("id")?;
            let arch = r.text("name")?.unwrap_or_default();
            let kind = r.text("type")?;
            let ext: Option<Value> = r.text("extdata")?.and_then(|x| serde_json::from_str(&x).ok());
            let num = |k: &str| ext.as_ref().and_then(|e| e.get(k)).and_then(Value::as_u64).filter(|v| *v > 0);
            let gpu = kind.as_deref().map_or(arch.starts_with("gfx"), |k| k == "GPU");
            let product = r.text("product_name")?.filter(|p| !p.trim().is_empty());
            set.agents.insert(id, Agent { arch, product, cu_count: num("cu_count"), wave_size: num("wave_front_size"), gpu });
            Ok(())
        })?;
    }
    if db.has(&t(PMC_INFO)) && db.has(&t(PMC_EVENT)) {
        let mut names: HashMap<i64, String> = HashMap::new();
        db.scan(&t(PMC_INFO), &["id", "name"], &["id", "name"], warnings, |r| {
            let id = r.need("id")?;
            let n = r.text("name")?.filter(|n| !n.is_empty()).ok_or("column `name`: empty")?;
            names.insert(id, n);
            Ok(())
        })?;
        let info = t(PMC_INFO);
        db.scan(&t(PMC_EVENT), &["id", "event_id", "pmc_id", "value"], &["event_id", "pmc_id", "value"], warnings, |r| {
            let event = r.need("event_id")?;
            let pmc = r.need("pmc_id")?;
            let v = r.real("value")?.ok_or("column `value`: NULL")?;
            let name = names.get(&pmc).ok_or_else(|| format!("column `pmc_id`: {pmc} is not in {info}"))?;
            *set.counters.entry(event).or_default().entry(name.clone()).or_insert(0.0) += v;
            set.counter_names.insert(name.clone());
            Ok(())
        })?;
    }
    if db.has(&t(STRING)) && db.has(&t(EVENT)) && db.has(&t(REGION)) {
        read_markers(db, suffix, &mut set, warnings)?;
    }
    Ok(set)
}

/// Marker ranges: regions whose event's category is `MARKER_*`.
fn read_markers(db: &Db, suffix: &str, set: &mut Set, warnings: &mut Vec<String>) -> Result<(), ParseError> {
    let t = |base: &str| format!("{base}{suffix}");
    let mut strings: HashMap<i64, String> = HashMap::new();
    db.scan(&t(STRING), &["id", "string"], &["id", "string"], warnings, |r| {
        if let Some(s) = r.text("string")? {
            strings.insert(r.need("id")?, s);
        }
        Ok(())
    })?;
    let categories: HashSet<i64> = strings.iter().filter(|(_, s)| s.starts_with("MARKER_")).map(|(i, _)| *i).collect();
    if categories.is_empty() {
        return Ok(());
    }
    let mut events: HashMap<i64, Option<String>> = HashMap::new();
    db.scan(&t(EVENT), &["id", "category_id", "extdata"], &["id", "category_id"], warnings, |r| {
        let Some(c) = r.int("category_id")? else { return Ok(()) };
        if categories.contains(&c) {
            let msg = r
                .text("extdata")?
                .and_then(|x| serde_json::from_str::<Value>(&x).ok())
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string));
            events.insert(r.need("id")?, msg.filter(|m| !m.is_empty()));
        }
        Ok(())
    })?;
    db.scan(&t(REGION), &["id", "start", "end", "name_id", "event_id"], &["start", "end", "event_id"], warnings, |r| {
        let Some(msg) = r.int("event_id")?.and_then(|e| events.get(&e)) else { return Ok(()) };
        let (start, end) = (r.need("start")?, r.need("end")?);
        if end < start {
            return Err("column `end`: before `start`".into());
        }
        let name = msg.clone().or_else(|| r.int("name_id").ok().flatten().and_then(|i| strings.get(&i).cloned())).ok_or("no marker message or name")?;
        set.ranges.push((start, end, name));
        Ok(())
    })?;
    set.ranges.sort_by_key(|r| r.0);
    Ok(())
}

/// A GPU as the view counts it: agents with the same id and arch in several processes' files
/// are one device (an agent's id is its node id).
type GpuKey = (i64, String);

#[derive(Default)]
struct View {
    phases: Vec<(String, PhaseAcc, KernelBytes)>,
    intervals: HashMap<(usize, GpuKey), Vec<(f64, f64)>>,
    gpus: BTreeMap<GpuKey, (u64, Agent)>,
    base_ns: Option<i64>,
    dispatches: u64,
}

impl View {
    fn slot(&mut self, name: &str) -> usize {
        match self.phases.iter().position(|p| p.0 == name) {
            Some(i) => i,
            None => {
                self.phases.push((name.to_string(), PhaseAcc::default(), KernelBytes::default()));
                self.phases.len() - 1
            }
        }
    }
}

fn read_all(out: &mut ParseOutput, dbs: &[Db], opts: &ParserOptions) -> Result<(), ParseError> {
    let mut sets: Vec<Vec<Set>> = Vec::new();
    for db in dbs {
        let mut v = Vec::new();
        for s in &db.suffixes {
            v.push(read_set(db, s, &mut out.warnings)?);
        }
        sets.push(v);
    }
    // Marker ranges seen, and those that delimit phases.
    let mut markers: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for s in sets.iter().flatten() {
        for (a, b, n) in &s.ranges {
            let e = markers.entry(n.clone()).or_default();
            e.0 += 1;
            e.1 += (*b as f64 - *a as f64) / 1000.0;
        }
    }
    let named = |n: &str| opts.phases.iter().any(|p| p == n);
    let any_named = markers.keys().any(|n| named(n));
    if !opts.phases.is_empty() && !any_named {
        let seen = markers.iter().map(|(n, (c, _))| format!("{n} ({c})")).collect::<Vec<_>>().join(", ");
        out.warnings.push(format!(
            "none of the phases named ({}) is a marker range in {}; marker ranges: {}",
            opts.phases.join(", "),
            out.source.clone().unwrap_or_default(),
            if seen.is_empty() { "none (add --marker-trace to the rocprofv3 run)".to_string() } else { seen }
        ));
    }
    let unphased = if any_named { "unannotated".to_string() } else { phase_name(opts) };
    let mut view = View::default();
    let mut files = Vec::new();
    for (db, sets) in dbs.iter().zip(sets.iter_mut()) {
        for set in sets.iter_mut() {
            files.push(read_dispatches(db, set, &mut view, &named, &unphased, &mut out.warnings)?);
        }
    }
    // The device: the GPU most dispatches ran on; the timeline is that GPU's.
    let busiest = view.gpus.iter().max_by_key(|(_, (n, _))| *n).map(|(k, (n, a))| (k.clone(), *n, a.clone()));
    if let Some((key, n, a)) = &busiest {
        out.route.insert("arch".into(), json!(a.arch));
        if let Some(p) = &a.product {
            out.route.insert("device".into(), json!(p));
        }
        if let Some(c) = a.cu_count {
            out.route.insert("cu_count".into(), json!(c));
        }
        if let Some(w) = a.wave_size {
            out.route.insert("wave_size".into(), json!(w));
        }
        let others: Vec<String> =
            view.gpus.iter().filter(|(k, _)| *k != key).map(|(k, (c, o))| format!("agent {} {} ({c})", k.0, o.product.as_deref().unwrap_or(&o.arch))).collect();
        if !others.is_empty() {
            out.warnings.push(format!(
                "dispatches ran on {} GPUs; the view names agent {} ({}, {n} dispatches) and its timeline is that GPU's (also: {})",
                others.len() + 1,
                key.0,
                a.product.as_deref().unwrap_or(&a.arch),
                others.join(", ")
            ));
        }
    }
    let View { phases, mut intervals, dispatches, .. } = view;
    for (i, (name, acc, bytes)) in phases.into_iter().enumerate() {
        let mut t = acc.finish(&name);
        bytes.apply(&mut t);
        if let Some((key, _, _)) = &busiest {
            if let Some(v) = intervals.get_mut(&(i, key.clone())) {
                let n = v.len() as u64;
                if let Some(b) = timeline::busy(v) {
                    t.metrics.extend(timeline::metrics(&b, n, None, None));
                }
            }
        }
        out.phases.push(t);
    }
    if out.phases.is_empty() {
        out.phases.push(PhaseAcc::default().finish(&unphased));
        out.warnings.push(format!("{}: no kernel dispatches (run rocprofv3 with --kernel-trace)", out.source.clone().unwrap_or_default()));
    }
    out.metrics.insert("kernel_dispatches".into(), Metric::new(dispatches as f64, Some("dispatches")));
    out.artifacts.insert("rocpd".into(), json!(files));
    if !markers.is_empty() {
        let m: BTreeMap<&String, Value> = markers.iter().map(|(n, (c, us))| (n, json!({"ranges": c, "total_us": us}))).collect();
        out.artifacts.insert("rocpd_markers".into(), json!(m));
    }
    Ok(())
}

fn read_dispatches(
    db: &Db,
    set: &mut Set,
    view: &mut View,
    named: &dyn Fn(&str) -> bool,
    unphased: &str,
    warnings: &mut Vec<String>,
) -> Result<Value, ParseError> {
    let table = format!("{DISPATCH}{}", set.suffix);
    let sym_table = format!("{SYMBOL}{}", set.suffix);
    let table_counters = amd_counters::table();
    let has = |n: &str| set.counter_names.contains(n);
    let fallback: Option<&'static Family> = table_counters.family_by_counters(&has);
    let ranges: Vec<&(i64, i64, String)> = set.ranges.iter().filter(|r| named(&r.2)).collect();
    let mut unknown_agents: BTreeSet<i64> = BTreeSet::new();
    let (mut taken, mut with_counters, mut any_bytes) = (0u64, 0u64, false);
    let mut pids: BTreeSet<i64> = BTreeSet::new();
    let mut family_seen: Option<&'static Family> = None;
    let want = [
        "id",
        "pid",
        "agent_id",
        "kernel_id",
        "start",
        "end",
        "private_segment_size",
        "group_segment_size",
        "workgroup_size_x",
        "workgroup_size_y",
        "workgroup_size_z",
        "grid_size_x",
        "grid_size_y",
        "grid_size_z",
        "event_id",
    ];
    let rows = db.scan(&table, &want, &["kernel_id", "start", "end"], warnings, |r| {
        let kid = r.need("kernel_id")?;
        let sym = set.symbols.get(&kid).ok_or_else(|| format!("column `kernel_id`: {kid} is not in {sym_table}"))?;
        let start = r.uint("start")?.ok_or("column `start`: NULL")?;
        let end = r.uint("end")?.ok_or("column `end`: NULL")?;
        if end < start {
            return Err("column `end`: before `start`".into());
        }
        let dims = |p: &str| -> Result<Option<[u32; 3]>, String> {
            let Some(x) = r.u32(&format!("{p}_x"))? else { return Ok(None) };
            Ok(Some([x, r.u32(&format!("{p}_y"))?.unwrap_or(1), r.u32(&format!("{p}_z"))?.unwrap_or(1)]))
        };
        let launch = Launch {
            wg: dims("workgroup_size")?,
            grid: dims("grid_size")?,
            lds: r.uint("group_segment_size")?.or(sym.lds),
            vgpr: sym.vgpr,
            sgpr: sym.sgpr,
            agpr: sym.agpr,
            scratch: r.uint("private_segment_size")?.or(sym.scratch),
        };
        let agent_id = r.int("agent_id")?;
        let event = r.int("event_id")?;
        if let Some(p) = r.int("pid")? {
            if pids.len() < 64 {
                pids.insert(p);
            }
        }
        // The kernel's phase: the last named range starting at or before it, if it still covers it.
        let s = start as i64;
        let i = ranges.partition_point(|x| x.0 <= s);
        let phase = if i > 0 && s <= ranges[i - 1].1 { ranges[i - 1].2.as_str() } else { unphased };
        let p = view.slot(phase);
        let dur_us = (end - start) as f64 / 1000.0;
        let agent = agent_id.and_then(|a| set.agents.get(&a));
        let family = agent.and_then(|a| table_counters.family_for_arch(&a.arch)).or(fallback);
        let acc = &mut view.phases[p];
        let k = acc.1.kernel(&sym.name);
        launch.apply(k);
        k.add_duration(dur_us);
        if let Some(c) = event.and_then(|e| set.counters.remove(&e)) {
            for (n, v) in &c {
                k.add_counter(n, *v);
            }
            with_counters += 1;
            family_seen = family_seen.or(family);
            if acc.2.add(&sym.name, &c, family) {
                any_bytes = true;
            }
        }
        match (agent_id, agent) {
            (Some(id), Some(a)) if a.gpu => {
                let key = (id, a.arch.clone());
                view.gpus.entry(key.clone()).or_insert_with(|| (0, a.clone())).0 += 1;
                let base = *view.base_ns.get_or_insert(s);
                let at = (s as i128 - base as i128) as f64 / 1000.0;
                view.intervals.entry((p, key)).or_default().push((at, dur_us));
            }
            (Some(id), None) => {
                unknown_agents.insert(id);
            }
            _ => {}
        }
        view.dispatches += 1;
        taken += 1;
        Ok(())
    })?;
    if !unknown_agents.is_empty() {
        let ids = unknown_agents.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        warnings.push(format!("{}: table `{table}`: agent_id {ids} not in {AGENT}{}: those dispatches have no device", db.file, set.suffix));
    }
    if !set.counters.is_empty() {
        warnings.push(format!("{}: {} counter events of {PMC_EVENT}{} belong to no dispatch of `{table}`; not used", db.file, set.counters.len(), set.suffix));
    }
    if with_counters > 0 && !any_bytes {
        warnings.push(no_bytes_warning(&db.file, &set.counter_names, fallback.or(family_seen)));
    }
    Ok(json!({
        "file": db.file,
        "tables": table,
        "dispatches": taken,
        "skipped": rows - taken,
        "with_counters": with_counters,
        "pids": pids,
        "marker_ranges": set.ranges.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_encodes_every_reserved_byte() {
        let u = uri(Path::new("/tmp/a b?c#d%e/x.db")).unwrap();
        assert_eq!(u, "file:///tmp/a%20b%3Fc%23d%25e/x.db?mode=ro&immutable=1");
    }

    #[test]
    fn shown_values_are_cut_and_escaped() {
        assert_eq!(show(b"a\x1b[31m"), "a\\u{1b}[31m");
        assert_eq!(show(&[b'x'; 50]).chars().count(), 41);
    }
}
