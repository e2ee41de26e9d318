//! Rows from a file a user names: `katlas corpus import FILE` and `katlas fit FILE` (and every
//! command that takes a rows file) read it here, one way.
//!
//! A file is one JSON document (an object, or an array of them) or JSON lines; each row is
//! `katlas.row.v1` or hipfire's `hipfire.kernel_atlas.v0` (converted). The file is read line by
//! line, no line held past `KATLAS_MAX_LINE_BYTES`, a whole document only under
//! `KATLAS_MAX_INPUT_BYTES`; a line that is too long, not UTF-8, not JSON or not a row is a
//! [`LineError`] naming file and line, and the rows beside it are kept. A hipfire row's id is
//! the md5 of its document, so reading (or importing) the same file twice gives the same ids.

use crate::input::{open_regular, read_line_capped, Limits, LineRead, BOM, MAX_INPUT_ENV, MAX_LINE_ENV};
use crate::{LineError, StoreError};
use katlas_model::{digest::md5_hex, hipfire, Row, ROW_SCHEMA};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// The rows of a file, each with its line (1 for the items of a whole-file document), and the
/// lines and documents that are not rows.
#[derive(Debug, Default)]
pub struct RowsFile {
    pub rows: Vec<(u64, Row)>,
    pub errors: Vec<LineError>,
}

/// Read the rows of `path`. Only failing to open or read the file (or malformed limits) is an
/// error; everything about one line or document is in [`RowsFile::errors`].
pub fn read_rows(path: &Path) -> Result<RowsFile, StoreError> {
    let (docs, mut errors) = documents(path)?;
    let mut rows = Vec::with_capacity(docs.len());
    for (line, text) in docs {
        match row_of(&text, path, line) {
            Ok(r) => rows.push((line, r)),
            Err(reason) => errors.push(LineError { file: path.into(), line, reason }),
        }
    }
    Ok(RowsFile { rows, errors })
}

/// Documents in a file, each with its line number (1 for a whole-file document's items).
type Documents = (Vec<(u64, String)>, Vec<LineError>);

fn documents(path: &Path) -> Result<Documents, StoreError> {
    let io = |source: std::io::Error| StoreError::Io { path: path.into(), source };
    let limits = Limits::from_env().map_err(StoreError::Limits)?;
    let f = open_regular(path).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    let mut r = BufReader::new(f);
    // A leading byte order mark is not part of the JSON.
    let start = if r.fill_buf().map_err(io)?.starts_with(BOM) { 3 } else { 0 };
    r.consume(start as usize);
    let mut errors = Vec::new();
    // The first non-blank line decides: `[` starts one document; `{` does too
    // when that line is not a whole value by itself but the file is; else JSON lines.
    let mut buf = Vec::new();
    let first = loop {
        match read_line_capped(&mut r, &mut buf, limits.max_line).map_err(io)? {
            LineRead::Eof | LineRead::TooLong { .. } => break None,
            LineRead::Line if buf.trim_ascii().is_empty() => continue,
            LineRead::Line => break Some(buf.trim_ascii().to_vec()),
        }
    };
    let whole = match first.as_deref() {
        Some([b'[', ..]) => true,
        Some(line @ [b'{', ..]) => serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err(),
        _ => false,
    };
    if whole {
        r.seek(SeekFrom::Start(start)).map_err(io)?;
        let starts_array = first.as_deref().is_some_and(|l| l.starts_with(b"["));
        if size > limits.max_input {
            if starts_array {
                let reason = format!("document of {size} bytes is larger than the {}-byte limit ({MAX_INPUT_ENV})", limits.max_input);
                errors.push(LineError { file: path.into(), line: 1, reason });
                return Ok((Vec::new(), errors));
            }
        } else {
            match serde_json::from_reader::<_, Value>((&mut r).take(limits.max_input)) {
                Ok(Value::Array(items)) => return Ok((items.into_iter().map(|v| (1, v.to_string())).collect(), errors)),
                Ok(v) => return Ok((vec![(1, v.to_string())], errors)),
                Err(e) if starts_array => {
                    errors.push(LineError { file: path.into(), line: e.line() as u64, reason: format!("invalid JSON document: {e}") });
                    return Ok((Vec::new(), errors));
                }
                // Not one document: JSON lines.
                Err(_) => {}
            }
        }
    }
    r.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut docs = Vec::new();
    let mut lineno = 0u64;
    loop {
        let got = read_line_capped(&mut r, &mut buf, limits.max_line).map_err(io)?;
        let reason = match got {
            LineRead::Eof => break,
            LineRead::TooLong { len } => Some(format!("line of {len} bytes is longer than the {}-byte limit ({MAX_LINE_ENV}); skipped", limits.max_line)),
            LineRead::Line => match std::str::from_utf8(&buf) {
                Ok(t) => {
                    let t = t.trim();
                    if !t.is_empty() {
                        docs.push((lineno + 1, t.to_string()));
                    }
                    None
                }
                Err(e) => Some(format!("not UTF-8: {e}")),
            },
        };
        lineno += 1;
        if let Some(reason) = reason {
            errors.push(LineError { file: path.into(), line: lineno, reason });
        }
    }
    Ok((docs, errors))
}

/// One document as a row: `katlas.row.v1` as it is, hipfire v0 converted with its md5 as id.
fn row_of(text: &str, file: &Path, line: u64) -> Result<Row, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    if hipfire::is_v0(&v) {
        let mut row = hipfire::import_v0(v, Some(&file.display().to_string()), Some(line)).map_err(|e| e.to_string())?;
        // Deterministic id: re-importing the same document is a no-op.
        row.id = md5_hex(format!("{}\0{text}", hipfire::HIPFIRE_V0).as_bytes());
        return Ok(row);
    }
    match v.get("schema").and_then(Value::as_str) {
        Some(ROW_SCHEMA) => serde_path_to_error::deserialize(v).map_err(|e| format!("field `{}`: {}", e.path(), e.inner())),
        Some(other) => Err(format!("field `schema`: unsupported schema \"{other}\" (expected {ROW_SCHEMA} or {})", hipfire::HIPFIRE_V0)),
        None => Err("field `schema`: missing".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hipfire_doc(phase: &str) -> String {
        serde_json::json!({"schema": hipfire::HIPFIRE_V0, "workload": "w", "phase": phase, "kernels": []}).to_string()
    }

    #[test]
    fn every_form_reads_the_same_rows_with_the_same_ids() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (hipfire_doc("decode"), hipfire_doc("prefill"));
        let lines = d.path().join("rows.jsonl");
        std::fs::write(&lines, format!("{a}\n\n{b}\n")).unwrap();
        let array = d.path().join("rows.json");
        std::fs::write(&array, format!("[\n{a},\n{b}\n]\n")).unwrap();
        let got = read_rows(&lines).unwrap();
        assert!(got.errors.is_empty(), "{:?}", got.errors);
        assert_eq!(got.rows.iter().map(|(l, r)| (*l, r.phase.as_str())).collect::<Vec<_>>(), [(1, "decode"), (3, "prefill")]);
        // Stable ids: a second read (or the array form of the same documents) gives the same ones.
        let again = read_rows(&lines).unwrap();
        assert_eq!(got.rows[0].1.id, again.rows[0].1.id);
        let arr = read_rows(&array).unwrap();
        assert_eq!(arr.rows.iter().map(|(_, r)| &r.id).collect::<Vec<_>>(), got.rows.iter().map(|(_, r)| &r.id).collect::<Vec<_>>());
    }

    #[test]
    fn bad_lines_are_errors_beside_the_good_rows() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("mixed.jsonl");
        std::fs::write(&p, format!("{}\n{{\"schema\": \"nope\"}}\nnot json\n", hipfire_doc("decode"))).unwrap();
        let got = read_rows(&p).unwrap();
        assert_eq!(got.rows.len(), 1);
        let shown: Vec<String> = got.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert!(
            shown[0].ends_with("mixed.jsonl:2: field `schema`: unsupported schema \"nope\" (expected katlas.row.v1 or hipfire.kernel_atlas.v0)"),
            "{shown:?}"
        );
        assert!(shown[1].contains("mixed.jsonl:3: invalid JSON"), "{shown:?}");
    }
}
