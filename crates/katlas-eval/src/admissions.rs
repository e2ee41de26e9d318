//! hipfire's admissions registry (`admissions.yml`, schema v2): which exact
//! (GPU, quant, KV, sequence length, route) fixtures are admitted.
//!
//! Validation: `schema_version: 2`, the fail-closed policy, required record
//! fields, no wildcards anywhere, no inferred rows. A query is admitted only
//! by a record whose every route field equals the query's; an empty or
//! missing registry admits nothing.

use crate::error::EvalError;
use serde::Serialize;
use serde_norway::Value;
use std::path::Path;

/// Route fields a record pins; the query must match every one.
pub const ROUTE_FIELDS: &[&str] = &["gpu", "weight_quant", "kv_cache", "max_seq", "decode_mode", "pp", "tp", "transport"];
const REQUIRED: &[&str] = &["id", "status", "artifact", "arch_id"];
const ARTIFACT_REQUIRED: &[&str] = &["byte_size", "md5", "md5_role", "identity"];

#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub id: String,
    pub status: String,
    /// Route fields as strings (numbers rendered without decoration).
    pub fields: Vec<(String, String)>,
    pub excluded_gpus: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub records: Vec<Record>,
    pub errors: Vec<String>,
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn is_wildcard(s: &str) -> bool {
    let t = s.trim().to_ascii_lowercase();
    t.contains('*') || t.contains('?') || matches!(t.as_str(), "any" | "all" | "") || t.contains('|') || t.starts_with('^') || t.ends_with('$')
}

/// Walk every string scalar of a value with its dotted path.
fn strings<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(s) => out.push((path, s)),
        Value::Sequence(xs) => {
            for (i, x) in xs.iter().enumerate() {
                strings(x, format!("{path}[{i}]"), out);
            }
        }
        Value::Mapping(m) => {
            for (k, x) in m {
                let k = scalar(k).unwrap_or_default();
                strings(x, if path.is_empty() { k } else { format!("{path}.{k}") }, out);
            }
        }
        _ => {}
    }
}

/// The deepest nesting an admissions file may have. A real registry is four or five
/// levels deep (records, a record, artifact, identity); the YAML reader's time grows
/// with the square of the depth (a 100,000-deep file took 29 s), so deeper input is
/// refused before it is parsed.
pub const MAX_DEPTH: usize = 64;

/// The first line whose nesting passes `max`, by a scan that costs one pass: flow
/// brackets outside quotes and comments, plus block nesting bounded by indentation and
/// the `- `/`? ` indicators that open a level on a line.
fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        let mut rest = &line[indent..];
        let mut block = indent;
        while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("? ")).or_else(|| rest.strip_prefix(": ")) {
            block += 2;
            rest = r.trim_start_matches(' ');
        }
        // Two columns of indentation per level is the shallowest block nesting can be.
        let block = block.div_ceil(2) + 1;
        if block > max {
            return Some(n + 1);
        }
        // A `- ` at the start of a line leaves `prev` a space, so `- [` counts.
        let (mut quote, mut prev) = (None::<char>, ' ');
        for c in rest.chars() {
            match (quote, c) {
                (Some('"'), '\\') if prev == '\\' => {
                    prev = ' ';
                    continue;
                }
                (Some(q), _) if c == q && !(q == '"' && prev == '\\') => quote = None,
                (Some(_), _) => {}
                (None, '#') if prev == ' ' || prev == '\t' => break,
                (None, '"' | '\'') if matches!(prev, ' ' | '[' | '{' | ',' | ':') => quote = Some(c),
                // Only where a value may start: `a[1` in a plain scalar opens nothing.
                (None, '[' | '{') if matches!(prev, ' ' | '\t' | '[' | '{' | ',' | ':') => {
                    flow += 1;
                    if flow + block > max {
                        return Some(n + 1);
                    }
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
    }
    None
}

/// The registry in `text` (read from `path`): records that fail validation are listed in
/// `errors`; a file that cannot be a registry at all is an error.
pub fn parse(path: &Path, text: &str) -> Result<Registry, EvalError> {
    // The text is already read: whatever fails here is the file's content.
    parse_text(path, text).map_err(EvalError::Input)
}

fn parse_text(path: &Path, text: &str) -> Result<Registry, String> {
    if let Some(line) = too_deep(text, MAX_DEPTH) {
        return Err(format!("{}:{line}: nested more than {MAX_DEPTH} levels deep, the most an admissions file may nest; not read", path.display()));
    }
    let doc: Value = serde_norway::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
    let p = path.display();
    let mut reg = Registry::default();
    if matches!(doc, Value::Null) {
        return Ok(reg);
    }
    let Value::Mapping(top) = &doc else { return Err(format!("{p}: top level is not a mapping")) };
    match top.get("schema_version").and_then(scalar) {
        Some(v) if v == "2" => {}
        Some(v) => return Err(format!("{p}: schema_version: {v} is not supported (expected 2)")),
        None => return Err(format!("{p}: schema_version: missing (expected 2)")),
    }
    if let Some(pol) = top.get("policy") {
        for (k, want) in [("inferred_rows", "forbidden"), ("wildcards", "forbidden"), ("mismatch", "fail_closed")] {
            match pol.get(k).and_then(scalar) {
                Some(v) if v == want => {}
                Some(v) => reg.errors.push(format!("{p}: policy.{k}: `{v}` (this registry must say `{want}`)")),
                None => reg.errors.push(format!("{p}: policy.{k}: missing (expected `{want}`)")),
            }
        }
    } else {
        reg.errors.push(format!("{p}: policy: missing"));
    }
    let records = match top.get("records") {
        None | Some(Value::Null) => return Ok(reg),
        Some(Value::Sequence(r)) => r,
        Some(_) => return Err(format!("{p}: records: not a list")),
    };
    for (i, r) in records.iter().enumerate() {
        let at = format!("{p}: records[{i}]");
        let Value::Mapping(m) = r else {
            reg.errors.push(format!("{at}: not a mapping"));
            continue;
        };
        let id = m.get("id").and_then(scalar).unwrap_or_default();
        let at = if id.is_empty() { at } else { format!("{at} ({id})") };
        let mut ok = true;
        for f in REQUIRED.iter().chain(ROUTE_FIELDS) {
            if m.get(*f).is_none_or(|v| matches!(v, Value::Null)) {
                reg.errors.push(format!("{at}: {f}: missing"));
                ok = false;
            }
        }
        if let Some(a) = m.get("artifact") {
            for f in ARTIFACT_REQUIRED {
                if a.get(*f).is_none() {
                    reg.errors.push(format!("{at}: artifact.{f}: missing"));
                    ok = false;
                }
            }
        }
        let mut ss = Vec::new();
        strings(r, String::new(), &mut ss);
        for (field, s) in &ss {
            // Free-text notes may say anything; values that select routes may not be patterns.
            let free = field.ends_with("note") || field.ends_with("identity") || field.ends_with("certification_note");
            if !free && is_wildcard(s) {
                reg.errors.push(format!("{at}: {field}: `{s}` is a wildcard (forbidden)"));
                ok = false;
            }
        }
        let inferred = m.get("inferred").is_some_and(|v| matches!(v, Value::Bool(true)))
            || m.get("status").and_then(scalar).is_some_and(|s| s.contains("inferred"))
            || m.get("source").and_then(scalar).is_some_and(|s| s.contains("inferred"));
        if inferred {
            reg.errors.push(format!("{at}: inferred rows are forbidden"));
            ok = false;
        }
        if !ok {
            continue;
        }
        let fields = ROUTE_FIELDS.iter().map(|f| (f.to_string(), m.get(*f).and_then(scalar).unwrap_or_default())).collect();
        let excluded_gpus = m
            .get("excluded_scope")
            .and_then(|e| e.get("gpus"))
            .and_then(|g| g.as_sequence())
            .map(|s| s.iter().filter_map(scalar).collect())
            .unwrap_or_default();
        reg.records.push(Record { id, status: m.get("status").and_then(scalar).unwrap_or_default(), fields, excluded_gpus });
    }
    Ok(reg)
}

/// A query: route field -> value. Fields the query leaves out cannot match.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Query {
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub schema: &'static str,
    pub admitted: bool,
    pub record: Option<String>,
    /// Why each near record did not admit the query.
    pub reasons: Vec<String>,
}

pub const ADMISSION_SCHEMA: &str = "katlas.admission.v1";

pub fn query(reg: &Registry, q: &Query) -> Answer {
    let mut reasons = Vec::new();
    if reg.records.is_empty() {
        reasons.push("the registry admits nothing (no valid records)".into());
    }
    for r in &reg.records {
        if !r.status.starts_with("admitted") {
            reasons.push(format!("{}: status `{}` is not an admission", r.id, r.status));
            continue;
        }
        let mut diffs = Vec::new();
        for (k, v) in &r.fields {
            match q.fields.iter().find(|(qk, _)| qk == k) {
                None => diffs.push(format!("{k} not given (record pins `{v}`)")),
                Some((_, qv)) if qv != v => diffs.push(format!("{k} `{qv}` != `{v}`")),
                _ => {}
            }
        }
        for (qk, _) in &q.fields {
            if !r.fields.iter().any(|(k, _)| k == qk) {
                diffs.push(format!("{qk} is not a route field"));
            }
        }
        if let Some((_, g)) = q.fields.iter().find(|(k, _)| k == "gpu") {
            if r.excluded_gpus.contains(g) {
                diffs.push(format!("gpu `{g}` is explicitly excluded"));
            }
        }
        if diffs.is_empty() {
            return Answer { schema: ADMISSION_SCHEMA, admitted: true, record: Some(r.id.clone()), reasons: Vec::new() };
        }
        reasons.push(format!("{}: {}", r.id, diffs.join("; ")));
    }
    Answer { schema: ADMISSION_SCHEMA, admitted: false, record: None, reasons }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/data/admissions.yml");

    fn q(pairs: &[(&str, &str)]) -> Query {
        Query { fields: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }

    fn full() -> Vec<(&'static str, &'static str)> {
        vec![
            ("gpu", "gfx1201"),
            ("weight_quant", "mq4"),
            ("kv_cache", "q8"),
            ("max_seq", "2048"),
            ("decode_mode", "plain_AR"),
            ("pp", "1"),
            ("tp", "1"),
            ("transport", "HIP"),
        ]
    }

    #[test]
    fn nesting_past_the_cap_is_refused_at_once_naming_the_file() {
        let path = Path::new("deep/admissions.yml");
        for deep in [
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            "- ".repeat(100_000) + "x\n",
            format!("a: {}1{}\n", "{b: ".repeat(100_000), "}".repeat(100_000)),
        ] {
            let t0 = std::time::Instant::now();
            let e = parse(path, &deep).unwrap_err().to_string();
            assert!(t0.elapsed() < std::time::Duration::from_secs(2), "{:?}", t0.elapsed());
            assert_eq!(e, format!("deep/admissions.yml:1: nested more than {MAX_DEPTH} levels deep, the most an admissions file may nest; not read"));
        }
        // At the cap it is read (and judged on its content), as are real files.
        let ok = format!("schema_version: 2\nx: {}1{}\n", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(parse(path, &ok).is_ok(), "{:?}", parse(path, &ok).err());
        assert!(parse(path, FIXTURE).is_ok());
        assert!(too_deep("note: see [1 and a[2 and '[[[['\n", 2).is_none());
    }

    #[test]
    fn fixture_is_valid_and_exact_match_admits() {
        let reg = parse(Path::new("admissions.yml"), FIXTURE).unwrap();
        assert!(reg.errors.is_empty(), "{:?}", reg.errors);
        assert_eq!(reg.records.len(), 1);
        let a = query(&reg, &q(&full()));
        assert!(a.admitted, "{:?}", a.reasons);
        assert_eq!(a.record.as_deref(), Some("example-350m-mq4-gfx1201-plain-ar"));
        // Any differing or missing field: not admitted.
        let mut other = full();
        other[3] = ("max_seq", "4096");
        assert!(!query(&reg, &q(&other)).admitted);
        let mut gpu = full();
        gpu[0] = ("gpu", "gfx1100");
        let a = query(&reg, &q(&gpu));
        assert!(!a.admitted && a.reasons[0].contains("excluded"), "{:?}", a.reasons);
        assert!(!query(&reg, &q(&full()[..4])).admitted, "unpinned fields are not a match");
    }

    #[test]
    fn empty_or_missing_registry_admits_nothing() {
        let reg = parse(Path::new("a.yml"), "").unwrap();
        assert!(!query(&reg, &q(&full())).admitted);
        let reg =
            parse(Path::new("a.yml"), "schema_version: 2\npolicy: {inferred_rows: forbidden, wildcards: forbidden, mismatch: fail_closed}\nrecords: []\n")
                .unwrap();
        assert!(!query(&reg, &q(&full())).admitted);
    }

    #[test]
    fn validation_errors() {
        assert!(parse(Path::new("a.yml"), "schema_version: 1\n").unwrap_err().to_string().contains("schema_version: 1"));
        let wild = FIXTURE.replace("gpu: gfx1201", "gpu: \"gfx12*\"").replace("max_seq: 2048", "max_seq: any");
        let reg = parse(Path::new("a.yml"), &wild).unwrap();
        assert!(reg.errors.iter().any(|e| e.contains("gpu: `gfx12*` is a wildcard")), "{:?}", reg.errors);
        assert!(reg.errors.iter().any(|e| e.contains("max_seq: `any`")), "{:?}", reg.errors);
        assert!(reg.records.is_empty(), "an invalid record admits nothing");
        let missing = FIXTURE.replace("    kv_cache: q8\n", "");
        let reg = parse(Path::new("a.yml"), &missing).unwrap();
        assert!(reg.errors.iter().any(|e| e.contains("kv_cache: missing")), "{:?}", reg.errors);
        let inferred = FIXTURE.replace("status: admitted_product_route", "status: admitted_product_route\n    inferred: true");
        let reg = parse(Path::new("a.yml"), &inferred).unwrap();
        assert!(reg.errors.iter().any(|e| e.contains("inferred rows are forbidden")), "{:?}", reg.errors);
        let bad = parse(Path::new("a.yml"), "records: [\n").unwrap_err().to_string();
        assert!(bad.starts_with("a.yml"), "{bad}");
    }
}
