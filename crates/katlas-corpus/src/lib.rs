//! The katlas store: append-only JSONL files under `.katlas/`.
//!
//! # Append protocol
//! Every append opens the file with `O_APPEND`, takes an exclusive advisory
//! lock (`flock`), serialises all records of the batch into one buffer of
//! whole lines and writes it with the lock held, so concurrent writer
//! processes never interleave inside a line. If a previous writer died
//! mid-line, the batch starts with a newline so its first record is not glued
//! to the torn fragment (the fragment stays as one bad line, reported on read).
//!
//! # fsync policy
//! [`Fsync::Batch`] (the default) calls `fdatasync` once per append call before
//! the lock is released: a record whose append returned is on disk. Bulk
//! importers may use [`Fsync::Never`] and leave flushing to the kernel.
//!
//! # Deduplicating appends
//! [`append_jsonl_dedup`] reads the ids already in the file and appends only
//! the new records in one step under the same exclusive lock, so concurrent
//! importers of the same rows write each row once.
//!
//! # Reads
//! Reading never stops at a bad line: each invalid, torn, non-UTF-8,
//! overlong or wrong-schema line becomes a [`LineError`] (`file:line:
//! reason`) and every other record is still returned. Callers that want
//! strictness check `errors.is_empty()`. Only regular files are read, and no
//! line is held in memory past [`input::Limits::max_line`] bytes
//! (`KATLAS_MAX_LINE_BYTES`, default 64 MiB).

use fs4::fs_std::FileExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub mod import;
pub mod input;
pub mod layout;
pub mod ledger;
use input::{read_line_capped, Limits, LineRead};
pub use layout::Layout;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("serialising record {index}: {source}")]
    Serialize { index: usize, source: serde_json::Error },
    /// A malformed `KATLAS_MAX_LINE_BYTES` / `KATLAS_MAX_INPUT_BYTES`.
    #[error("{0}")]
    Limits(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fsync {
    /// `fdatasync` once per append call, before unlocking.
    #[default]
    Batch,
    /// Leave flushing to the kernel.
    Never,
}

/// Append records as whole JSON lines under an exclusive lock.
pub fn append_jsonl<T: Serialize>(path: &Path, records: &[T], fsync: Fsync) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut buf = Vec::with_capacity(records.len() * 512);
    for (index, r) in records.iter().enumerate() {
        serde_json::to_writer(&mut buf, r).map_err(|source| StoreError::Serialize { index, source })?;
        buf.push(b'\n');
    }
    let f = katlas_fs::open_append(path).map_err(io_err(path))?;
    f.lock_exclusive().map_err(io_err(path))?;
    let result = write_locked(&f, &buf, fsync).map_err(io_err(path));
    // Unlock happens on close as well; an explicit unlock error is not worth reporting.
    let _ = FileExt::unlock(&f);
    result
}

/// Write whole lines at the end of a file whose exclusive lock is held,
/// after a newline if a dead writer left a torn last line.
fn write_locked(mut f: &File, buf: &[u8], fsync: Fsync) -> std::io::Result<()> {
    let len = f.metadata()?.len();
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1))?;
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            f.write_all(b"\n")?;
        }
    }
    f.write_all(buf)?;
    if fsync == Fsync::Batch {
        f.sync_data()?;
    }
    Ok(())
}

/// What [`append_jsonl_dedup`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Appended {
    /// Records written.
    pub written: usize,
    /// Records not written: their id was in the file already, or earlier in the same batch.
    pub already_present: usize,
}

/// Append the records whose id is not yet in `path`, in one step under the
/// file's exclusive lock: lock, read the top-level `"id"` of every existing
/// line, drop the records already present (and repeats within the batch),
/// append the rest, unlock. Concurrent callers with the same records
/// therefore write each id once. Unreadable existing lines (invalid JSON, not
/// UTF-8, over the line cap, no `id`) hold no id and are left as they are.
pub fn append_jsonl_dedup<T: Serialize>(path: &Path, records: &[T], id: impl Fn(&T) -> &str, fsync: Fsync) -> Result<Appended, StoreError> {
    if records.is_empty() {
        return Ok(Appended::default());
    }
    // Serialise before locking: the lock is held only for the read and the write.
    let mut lines: Vec<Vec<u8>> = Vec::with_capacity(records.len());
    for (index, r) in records.iter().enumerate() {
        lines.push(serde_json::to_vec(r).map_err(|source| StoreError::Serialize { index, source })?);
    }
    let keyed: Vec<(Option<&str>, &[u8])> = records.iter().zip(&lines).map(|(r, l)| (Some(id(r)), l.as_slice())).collect();
    append_lines_dedup(path, &keyed, fsync)
}

/// [`append_jsonl_dedup`] for lines already serialised (written byte for byte, each followed
/// by a newline): a line with an id is skipped when a line of the file, or an earlier one of
/// the batch, has that top-level `"id"`; a line without one (`None`) is always written.
pub fn append_lines_dedup(path: &Path, lines: &[(Option<&str>, &[u8])], fsync: Fsync) -> Result<Appended, StoreError> {
    if lines.is_empty() {
        return Ok(Appended::default());
    }
    let limits = Limits::from_env().map_err(StoreError::Limits)?;
    let f = katlas_fs::open_append(path).map_err(io_err(path))?;
    let ft = f.metadata().map_err(io_err(path))?.file_type();
    if !ft.is_file() {
        let msg = format!("not a regular file ({}); rows are appended only to regular files", input::file_kind(&ft));
        return Err(StoreError::Io { path: path.into(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, msg) });
    }
    f.lock_exclusive().map_err(io_err(path))?;
    let result = (|| {
        let mut seen = if lines.iter().any(|l| l.0.is_some()) { existing_ids(&f, limits.max_line)? } else { HashSet::new() };
        let mut buf = Vec::new();
        let mut done = Appended::default();
        for (id, line) in lines {
            if id.is_none_or(|id| seen.insert(id.to_string())) {
                buf.extend_from_slice(line);
                buf.push(b'\n');
                done.written += 1;
            } else {
                done.already_present += 1;
            }
        }
        if done.written > 0 {
            write_locked(&f, &buf, fsync)?;
        }
        Ok(done)
    })()
    .map_err(io_err(path));
    let _ = FileExt::unlock(&f);
    result
}

/// The top-level `"id"` strings of the lines of an open file, read from its start.
fn existing_ids(mut f: &File, max_line: usize) -> std::io::Result<HashSet<String>> {
    #[derive(serde::Deserialize)]
    struct Id {
        #[serde(default)]
        id: Option<String>,
    }
    f.seek(SeekFrom::Start(0))?;
    let mut r = BufReader::new(f);
    let mut ids = HashSet::new();
    let mut line = Vec::new();
    loop {
        match read_line_capped(&mut r, &mut line, max_line)? {
            LineRead::Eof => return Ok(ids),
            LineRead::TooLong { .. } => {}
            LineRead::Line => {
                if let Ok(Id { id: Some(id) }) = serde_json::from_slice::<Id>(&line) {
                    ids.insert(id);
                }
            }
        }
    }
}

/// One bad line: `file:line: reason`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LineError {
    pub file: PathBuf,
    pub line: u64,
    pub reason: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.reason)
    }
}

/// A record with the place it was read from.
#[derive(Debug, Clone)]
pub struct Located<T> {
    pub file: PathBuf,
    pub line: u64,
    pub record: T,
}

#[derive(Debug)]
pub struct ReadReport<T> {
    pub records: Vec<Located<T>>,
    pub errors: Vec<LineError>,
}

impl<T> Default for ReadReport<T> {
    fn default() -> Self {
        Self { records: Vec::new(), errors: Vec::new() }
    }
}

impl<T> ReadReport<T> {
    pub fn extend(&mut self, other: ReadReport<T>) {
        self.records.extend(other.records);
        self.errors.extend(other.errors);
    }
}

/// Read a JSONL file of records whose `schema` field must equal `schema`
/// (when given). Failure to open the file, or a path that is not a regular
/// file, is an error; everything line-level is reported in the result.
/// Lines are capped at `KATLAS_MAX_LINE_BYTES` (default 64 MiB).
pub fn read_jsonl<T: DeserializeOwned>(path: &Path, schema: Option<&str>) -> Result<ReadReport<T>, StoreError> {
    let limits = Limits::from_env().map_err(StoreError::Limits)?;
    read_jsonl_capped(path, schema, limits.max_line)
}

/// [`read_jsonl`] with the line cap given: a line over `max_line` bytes is a
/// [`LineError`], skipped without being held in memory.
pub fn read_jsonl_capped<T: DeserializeOwned>(path: &Path, schema: Option<&str>, max_line: usize) -> Result<ReadReport<T>, StoreError> {
    let f = input::open_regular(path).map_err(io_err(path))?;
    // Shared lock: a reader never sees a batch half-written by a locked writer.
    let locked = f.lock_shared().is_ok();
    let mut report = ReadReport::default();
    let mut reader = BufReader::new(&f);
    let mut line = Vec::new();
    let mut lineno = 0u64;
    loop {
        let got = read_line_capped(&mut reader, &mut line, max_line).map_err(io_err(path))?;
        if got == LineRead::Eof {
            break;
        }
        lineno += 1;
        if let LineRead::TooLong { len } = got {
            let reason = format!("line of {len} bytes is longer than the {max_line}-byte limit ({}); skipped", input::MAX_LINE_ENV);
            report.errors.push(LineError { file: path.into(), line: lineno, reason });
            continue;
        }
        let complete = line.last() == Some(&b'\n');
        let bytes = if lineno == 1 { input::strip_bom_bytes(&line) } else { &line[..] };
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t.trim(),
            Err(e) => {
                report.errors.push(LineError { file: path.into(), line: lineno, reason: format!("not UTF-8: {e}") });
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        match parse_record::<T>(text, schema) {
            Ok(record) => report.records.push(Located { file: path.into(), line: lineno, record }),
            Err(reason) => {
                let reason = if complete { reason } else { format!("torn line at end of file (no newline): {reason}") };
                report.errors.push(LineError { file: path.into(), line: lineno, reason });
            }
        }
    }
    if locked {
        let _ = FileExt::unlock(&f);
    }
    Ok(report)
}

fn parse_record<T: DeserializeOwned>(text: &str, schema: Option<&str>) -> Result<T, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    if let Some(want) = schema {
        match value.get("schema") {
            Some(serde_json::Value::String(s)) if s == want => {}
            Some(serde_json::Value::String(s)) => return Err(format!("field `schema`: expected \"{want}\", found \"{s}\"")),
            Some(other) => return Err(format!("field `schema`: expected \"{want}\", found {other}")),
            None => return Err(format!("field `schema`: missing (expected \"{want}\")")),
        }
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("invalid record: {}", e.inner())
        } else {
            format!("field `{path}`: {}", e.inner())
        }
    })
}

/// Every `*.jsonl` file directly in `dir`, sorted by name; a missing dir is empty.
pub fn jsonl_files(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StoreError::Io { path: dir.into(), source: e }),
    };
    for entry in rd {
        let entry = entry.map_err(io_err(dir))?;
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "jsonl") && p.is_file() {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Read every JSONL file in `dir` (or a single file when `path` is a file).
pub fn read_all<T: DeserializeOwned>(path: &Path, schema: Option<&str>) -> Result<ReadReport<T>, StoreError> {
    let files = if path.is_dir() { jsonl_files(path)? } else { vec![path.to_path_buf()] };
    let mut report = ReadReport::default();
    for f in files {
        report.extend(read_jsonl(&f, schema)?);
    }
    Ok(report)
}

impl katlas_fs::class::Classify for StoreError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            StoreError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            StoreError::Serialize { .. } | StoreError::Limits(_) => katlas_fs::class::Class::Input,
        }
    }
}
