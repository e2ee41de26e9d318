//! `katlas-rows`: workloads that print whole `katlas.row.v1` rows as JSON
//! lines (the lab binary does, one per kernel case). Other lines are ignored;
//! a line that claims the schema but does not validate is a warning naming
//! the line and field, and the rows beside it are kept.

use super::{for_each_line, ParseError, ParseOutput, ParserOptions};
use katlas_model::{Row, ROW_SCHEMA};
use std::io::BufRead;

pub fn parse(r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("katlas-rows", source);
    let needle = format!("\"{ROW_SCHEMA}\"");
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        if !t.starts_with('{') || !t.contains(&needle) {
            return Ok(());
        }
        let v: serde_json::Value = match serde_json::from_str(t) {
            Ok(v) => v,
            Err(e) => {
                out.warnings.push(format!("{source}:{n}: invalid JSON: {e}"));
                return Ok(());
            }
        };
        match serde_path_to_error::deserialize::<_, Row>(v) {
            Ok(row) => out.rows.push(row),
            Err(e) => out.warnings.push(format!("{source}:{n}: field `{}`: {}", e.path(), e.inner())),
        }
        Ok(())
    })?;
    if out.rows.is_empty() {
        out.warnings.push(format!("{source}: no {ROW_SCHEMA} line"));
    }
    Ok(out)
}
