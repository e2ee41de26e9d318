//! `katlas query`: one SQL statement against the index (or the team store), and its result
//! in text, JSON, CSV or Markdown.

use serde_json::Value;

/// A query's result: column names and rows of JSON scalars (`null`, numbers, strings).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// Run `sql` on a read-only SQLite connection.
pub fn sqlite(conn: &rusqlite::Connection, sql: &str) -> Result<QueryResult, String> {
    let mut st = conn.prepare(sql).map_err(|e| format!("SQL: {e}"))?;
    let columns: Vec<String> = st.column_names().iter().map(|c| c.to_string()).collect();
    let n = columns.len();
    let mut rows = Vec::new();
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
        rows.push(out);
    }
    Ok(QueryResult { columns, rows })
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
