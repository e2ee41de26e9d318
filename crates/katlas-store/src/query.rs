//! `katlas query`: one SQL statement against the index (or the team store), and its result
//! in text, JSON, CSV or Markdown.

use serde_json::Value;

/// A query's result: column names and rows of JSON scalars (`null`, numbers, strings).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// A result stops growing past this many rows or bytes (a runaway recursive CTE would grow
/// it until the machine runs out of memory); the query then fails saying how to narrow it.
pub const MAX_RESULT_ROWS: usize = 1_000_000;
pub const MAX_RESULT_BYTES: usize = 256 << 20;

/// Rows of a result as they come, refused past [`MAX_RESULT_ROWS`] or [`MAX_RESULT_BYTES`].
#[derive(Default)]
pub struct Bounded {
    rows: Vec<Vec<Value>>,
    bytes: usize,
}

impl Bounded {
    pub fn push(&mut self, row: Vec<Value>) -> Result<(), String> {
        // What a cell holds beside its text, roughly: enough to bound memory, not to measure it.
        self.bytes += row.iter().map(|v| 32 + if let Value::String(s) = v { s.len() } else { 0 }).sum::<usize>();
        self.rows.push(row);
        if self.rows.len() > MAX_RESULT_ROWS || self.bytes > MAX_RESULT_BYTES {
            return Err(format!(
                "the result passed {MAX_RESULT_ROWS} rows or {} MiB: narrow it (WHERE, LIMIT, an aggregate), or write a whole table to a file with `katlas export`",
                MAX_RESULT_BYTES >> 20
            ));
        }
        Ok(())
    }
    pub fn into_rows(self) -> Vec<Vec<Value>> {
        self.rows
    }
}

/// Words that only other statements hold (a data-modifying `WITH`, `COPY … TO PROGRAM`):
/// refused wherever they stand outside strings and comments.
const STATEMENT_WORDS: &[&str] = &[
    "COPY",
    "INSERT",
    "UPDATE",
    "DELETE",
    "MERGE",
    "CREATE",
    "DROP",
    "ALTER",
    "TRUNCATE",
    "GRANT",
    "REVOKE",
    "VACUUM",
    "ATTACH",
    "DETACH",
    "PRAGMA",
    "REINDEX",
    "CALL",
    "DO",
    "LOCK",
    "LISTEN",
    "NOTIFY",
    "SET",
    "RESET",
    "PREPARE",
    "EXECUTE",
    "DEALLOCATE",
    "DECLARE",
];

/// Functions of either engine that reach files, programs, other servers or server state:
/// refused as words and as quoted names (`"lo_export"(…)` calls one too).
const FUNCTIONS: &[&str] = &[
    "LOAD_EXTENSION",
    "LO_EXPORT",
    "LO_IMPORT",
    "LO_FROM_BYTEA",
    "LO_PUT",
    "LO_UNLINK",
    "LO_CREATE",
    "LO_CREAT",
    "LOWRITE",
    "LO_TRUNCATE",
    "PG_READ_FILE",
    "PG_READ_BINARY_FILE",
    "PG_LS_DIR",
    "PG_STAT_FILE",
    "PG_LS_LOGDIR",
    "PG_LS_WALDIR",
    "PG_LS_TMPDIR",
    "PG_LS_ARCHIVE_STATUSDIR",
    "PG_FILE_WRITE",
    "PG_FILE_UNLINK",
    "PG_FILE_RENAME",
    "PG_FILE_SYNC",
    "PG_TERMINATE_BACKEND",
    "PG_CANCEL_BACKEND",
    "PG_RELOAD_CONF",
    "PG_ROTATE_LOGFILE",
    "PG_PROMOTE",
    "PG_SWITCH_WAL",
    "PG_CREATE_RESTORE_POINT",
    "PG_LOGICAL_EMIT_MESSAGE",
    "SET_CONFIG",
    "NEXTVAL",
    "SETVAL",
    "DBLINK",
    "DBLINK_EXEC",
    "DBLINK_CONNECT",
    "DBLINK_CONNECT_U",
    "DBLINK_SEND_QUERY",
    "PG_NOTIFY",
    "QUERY_TO_XML",
    "CURSOR_TO_XML",
    "QUERY_TO_XML_AND_XMLSCHEMA",
    "TABLE_TO_XML",
    "PG_IMPORT_SYSTEM_COLLATIONS",
    "PG_ADVISORY_LOCK",
    "PG_ADVISORY_XACT_LOCK",
];

fn not_a_read(w: &str) -> String {
    format!("SQL: `{w}` is not allowed: a query is one SELECT, WITH … SELECT or VALUES, and only reads")
}

/// Why `sql` is not one plain read (one `SELECT`, `WITH … SELECT` or `VALUES`), checked on its
/// words before any engine sees it. Strings, quoted names, comments and PostgreSQL's
/// dollar-quoted and `E''` strings are skipped as the engines read them; a quoted name is
/// still checked against the functions above (`"lo_export"(…)` calls it).
pub fn plain_read(sql: &str) -> Result<(), String> {
    // PostgreSQL nests block comments and SQLite does not: text that one engine reads as a
    // comment and the other as SQL is checked as SQL.
    scan(sql, true)?;
    scan(sql, false)
}

fn scan(sql: &str, nested_comments: bool) -> Result<(), String> {
    let b = sql.as_bytes();
    let mut words: Vec<String> = Vec::new();
    let mut after_semicolon = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') && (nested_comments || depth == 0) {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            if depth != 0 {
                return Err("SQL: a comment that does not end".into());
            }
            continue;
        }
        if after_semicolon {
            return Err("SQL: one statement only (text after `;`)".into());
        }
        if c == b';' {
            after_semicolon = true;
            i += 1;
            continue;
        }
        if c == b'\'' {
            // `E'…'` (PostgreSQL) takes backslash escapes: the word before it was that `E`.
            let escapes = words.last().is_some_and(|w| w == "E") && i > 0 && matches!(b[i - 1], b'E' | b'e');
            if escapes {
                words.pop();
            }
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err("SQL: a string that does not end".into()),
                    Some(b'\\') if escapes => i += 2,
                    Some(b'\'') if b.get(i + 1) == Some(&b'\'') => i += 2,
                    Some(b'\'') => break,
                    _ => i += 1,
                }
            }
            i += 1;
            continue;
        }
        // SQLite's `[name]` and `` `name` `` are read as words: checked, never skipped.
        if c == b'"' {
            i += 1;
            let from = i;
            loop {
                match b.get(i) {
                    None => return Err("SQL: a quoted name that does not end".into()),
                    Some(b'"') if b.get(i + 1) == Some(&b'"') => i += 2,
                    Some(b'"') => break,
                    _ => i += 1,
                }
            }
            let name = String::from_utf8_lossy(&b[from..i]).to_ascii_uppercase();
            if FUNCTIONS.contains(&name.as_str()) {
                return Err(not_a_read(&name));
            }
            words.push(String::new());
            i += 1;
            continue;
        }
        if c == b'$' {
            // `$1` is a parameter; `$tag$…$tag$` (tag possibly empty) a string.
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            if b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) || b.get(j) != Some(&b'$') {
                i += 1;
                continue;
            }
            let tag = &b[i..=j];
            let body = j + 1;
            match b[body..].windows(tag.len()).position(|w| w == tag) {
                Some(p) => i = body + p + tag.len(),
                None => return Err("SQL: a dollar-quoted string that does not end".into()),
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80) {
                i += 1;
            }
            let w = String::from_utf8_lossy(&b[start..i]).to_ascii_uppercase();
            if STATEMENT_WORDS.contains(&w.as_str()) || FUNCTIONS.contains(&w.as_str()) {
                return Err(not_a_read(&w));
            }
            words.push(w);
            continue;
        }
        if c == b'(' && words.is_empty() {
            i += 1;
            continue;
        }
        if words.is_empty() {
            return Err("SQL: a query is one SELECT, WITH … SELECT or VALUES statement".into());
        }
        // Operators, numbers, punctuation: not words.
        words.push(String::new());
        i += 1;
    }
    match words.first().map(String::as_str) {
        Some("SELECT" | "WITH" | "VALUES") => Ok(()),
        Some(w) if !w.is_empty() => Err(not_a_read(w)),
        _ => Err("SQL: a query is one SELECT, WITH … SELECT or VALUES statement".into()),
    }
}

/// Run `sql` (one plain read: [`plain_read`]) on a read-only SQLite connection.
pub fn sqlite(conn: &rusqlite::Connection, sql: &str) -> Result<QueryResult, String> {
    plain_read(sql)?;
    let mut st = conn.prepare(sql).map_err(|e| format!("SQL: {e}"))?;
    // What SQLite itself says of the statement, before it runs (`VACUUM INTO` would create its
    // file on the first step even on a read-only connection).
    if !st.readonly() {
        return Err("SQL: the statement writes; a query only reads".into());
    }
    let columns: Vec<String> = st.column_names().iter().map(|c| c.to_string()).collect();
    let n = columns.len();
    let mut rows = Bounded::default();
    let mut q = st.query([]).map_err(|e| format!("SQL: {e}"))?;
    while let Some(r) = q.next().map_err(|e| format!("SQL: {e}"))? {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            use rusqlite::types::ValueRef;
            out.push(match r.get_ref(i).map_err(|e| format!("SQL: {e}"))? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(v) => Value::from(v),
                ValueRef::Real(v) => serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null),
                ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
            });
        }
        rows.push(out)?;
    }
    Ok(QueryResult { columns, rows: rows.into_rows() })
}

/// A cell as text: strings bare, numbers as JSON writes them, `null` empty.
pub fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn to_csv(r: &QueryResult) -> Result<String, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&r.columns).map_err(|e| e.to_string())?;
    for row in &r.rows {
        w.write_record(row.iter().map(cell_text)).map_err(|e| e.to_string())?;
    }
    String::from_utf8(w.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// Markdown table; `|` and newlines in cells are escaped so a name cannot break the table.
pub fn to_markdown(r: &QueryResult) -> String {
    let esc = |s: String| s.replace('\\', "\\\\").replace('|', "\\|").replace(['\n', '\r'], " ");
    let mut s = format!("| {} |\n|{}|\n", r.columns.iter().map(|c| esc(c.clone())).collect::<Vec<_>>().join(" | "), vec!["---"; r.columns.len()].join("|"));
    for row in &r.rows {
        s.push_str(&format!("| {} |\n", row.iter().map(|v| esc(cell_text(v))).collect::<Vec<_>>().join(" | ")));
    }
    s
}

/// JSON: `{"columns": [...], "rows": [{column: value}]}`.
pub fn to_json(r: &QueryResult) -> Value {
    let rows: Vec<Value> = r.rows.iter().map(|row| Value::Object(r.columns.iter().cloned().zip(row.iter().cloned()).collect())).collect();
    serde_json::json!({ "columns": r.columns, "rows": rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_plain_read_passes() {
        for ok in [
            "SELECT 1",
            "  select name, 'COPY; DELETE' AS s FROM rows -- DROP\n;",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "VALUES (1)",
            "(SELECT 1) UNION (SELECT 2)",
            "SELECT $$ COPY x TO PROGRAM 'y' $$, $t$ ; DROP $t$, \"select\" FROM rows",
            "SELECT E'it\\'s; VACUUM' AS s",
            "SELECT 'a''b', x FROM t /* DELETE */ ORDER BY 1 FETCH FIRST 2 ROWS ONLY",
        ] {
            assert_eq!(plain_read(ok), Ok(()), "{ok}");
        }
        for bad in [
            "VACUUM INTO '/tmp/x'",
            "vacuum",
            "ATTACH DATABASE '/tmp/x' AS y",
            "PRAGMA query_only = 0",
            "COPY (SELECT 1) TO PROGRAM 'touch /tmp/x'",
            "copy rows TO '/tmp/x'",
            "SELECT 1; COPY rows TO '/tmp/x'",
            "SELECT 1; SELECT 2",
            "WITH d AS (DELETE FROM rows RETURNING *) SELECT * FROM d",
            "SELECT lo_export(1, '/tmp/x')",
            "SELECT pg_catalog.\"lo_export\"(1, '/tmp/x')",
            "SELECT pg_read_file('/etc/passwd')",
            "SELECT set_config('a', 'b', false)",
            "EXPLAIN ANALYZE DELETE FROM rows",
            "INSERT INTO rows DEFAULT VALUES",
            "SELECT 'unterminated",
            "SELECT 1 /* never ends",
            // SQLite ends the comment at the first `*/`: the rest is a statement there.
            "SELECT 1 /* /* */ ; VACUUM INTO '/tmp/x' /* */ */",
            "SELECT 'it\\'; COPY rows TO ''/tmp/x'' --'",
            "",
            "-- only a comment",
        ] {
            assert!(plain_read(bad).is_err(), "{bad}");
        }
        assert!(plain_read("COPY rows TO '/x'").unwrap_err().contains("COPY"));
    }

    /// `VACUUM INTO` on the index's read-only connection created an empty file at any path
    /// before failing; now it is refused before it runs, and SQLite's own verdict on the
    /// statement (not read-only) would refuse it too.
    #[test]
    fn vacuum_into_creates_nothing() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("i.sqlite");
        rusqlite::Connection::open(&db).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
        let conn = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let target = d.path().join("copy.sqlite");
        let sql = format!("VACUUM INTO '{}'", target.display());
        assert!(sqlite(&conn, &sql).is_err());
        assert!(!conn.prepare(&sql).unwrap().readonly(), "SQLite says it writes");
        assert!(!target.exists());
        assert_eq!(sqlite(&conn, "SELECT COUNT(*) AS n FROM t").unwrap().rows, vec![vec![Value::from(0)]]);
    }

    #[test]
    fn a_runaway_result_stops_with_a_message() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let e = sqlite(&conn, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c").unwrap_err();
        assert!(e.contains("1000000 rows") && e.contains("LIMIT"), "{e}");
        let e = sqlite(&conn, "WITH RECURSIVE c(x, s) AS (SELECT 1, zeroblob(1 << 20) UNION ALL SELECT x + 1, s FROM c) SELECT x, s FROM c").unwrap_err();
        assert!(e.contains("MiB"), "{e}");
        assert_eq!(sqlite(&conn, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5) SELECT x FROM c").unwrap().rows.len(), 5);
    }
}
