//! hipfire DFlash (speculative decode) demo output.
//!
//! Keys on the `cycles:` line sit mid-line (`accepted: 237` after
//! `committed: 256`), so the line is tokenised into `key: value` / `key=value`
//! pairs instead of matched with one anchored pattern. Keys of the
//! `=== BENCH METRICS ===` block are authoritative: `decode_tau` wins over the
//! rounded `τ=` of the cycles line.

use super::{for_each_line, parse_number, ParseError, ParseOutput, ParserOptions};
use katlas_model::Metric;
use regex::Regex;
use serde_json::json;
use std::io::BufRead;
use std::sync::OnceLock;

fn emitted_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^emitted:\s+(?P<tok>\d+)\s+tokens\s+in\s+(?P<s>[-\d.eE+]+)s(?:\s+\((?P<rate>[-\d.eE+]+)\s*tok/s\))?").unwrap())
}

/// Pairs `key: value` and `key=value` anywhere on a line; `τ` is spelled `tau`.
pub(crate) fn mid_line_pairs(line: &str) -> Vec<(String, String)> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        if let Some(k) = t.strip_suffix(':') {
            if i + 1 < toks.len() && !k.is_empty() {
                out.push((canon(k), toks[i + 1].to_string()));
                i += 2;
                continue;
            }
        } else if let Some((k, v)) = t.split_once('=') {
            if !k.is_empty() {
                out.push((canon(k), v.to_string()));
            }
        }
        i += 1;
    }
    out
}

fn canon(k: &str) -> String {
    if k == "τ" {
        "tau".into()
    } else {
        k.to_string()
    }
}

pub fn parse(r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("hipfire-dflash", source);
    let mut in_metrics = false;
    let mut authoritative = std::collections::BTreeMap::new();
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        if t.starts_with("=== BENCH METRICS") {
            in_metrics = true;
            return Ok(());
        }
        if in_metrics {
            if t.starts_with("===") {
                in_metrics = false;
                return Ok(());
            }
            if let Some((k, v)) = t.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                let x = parse_number(v).ok_or_else(|| ParseError::key(source, n, k, format!("BENCH METRICS: not a number: {v:?}")))?;
                authoritative.insert(k.to_string(), x);
            } else if !t.is_empty() {
                out.warnings.push(format!("{source}:{n}: BENCH METRICS line without `key: value`: {t:?}"));
            }
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix("[dflash]") {
            for (k, v) in mid_line_pairs(rest) {
                let key = if k == "kv" { "kv_mode".to_string() } else { k };
                out.route.insert(key, json!(v));
            }
            return Ok(());
        }
        if let Some(c) = emitted_re().captures(t) {
            let get = |name: &str, key: &str| -> Result<Option<f64>, ParseError> {
                c.name(name).map(|m| parse_number(m.as_str()).ok_or_else(|| ParseError::key(source, n, key, "not a number"))).transpose()
            };
            if let Some(v) = get("tok", "emitted_tokens")? {
                out.metrics.insert("emitted_tokens".into(), Metric::new(v, Some("tokens")));
            }
            if let Some(v) = get("s", "elapsed_s")? {
                out.metrics.insert("elapsed_s".into(), Metric::new(v, Some("s")));
            }
            if let Some(v) = get("rate", "emitted_tok_s")? {
                out.metrics.insert("emitted_tok_s".into(), Metric::new(v, Some("tok/s")));
            }
            return Ok(());
        }
        if t.starts_with("cycles:") {
            for (k, v) in mid_line_pairs(t) {
                let x = parse_number(&v).ok_or_else(|| ParseError::key(source, n, &k, format!("not a number: {v:?}")))?;
                out.metrics.insert(k.clone(), Metric::from_key(&k, x));
            }
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix("prompt:") {
            if let Some(tok) = rest.split_whitespace().next().and_then(parse_number) {
                out.metrics.entry("prompt_tokens".into()).or_insert(Metric::new(tok, Some("tokens")));
            }
        }
        Ok(())
    })?;
    for (k, v) in &authoritative {
        out.metrics.insert(k.clone(), Metric::from_key(k, *v));
    }
    // Authoritative spellings of derived keys.
    for (auth, derived) in [("decode_tau", "tau"), ("decode_tokens_emitted", "emitted_tokens")] {
        if let Some(v) = authoritative.get(auth) {
            let unit = out.metrics.get(derived).and_then(|m| m.unit.clone());
            out.metrics.insert(derived.into(), Metric { value: *v, unit });
        }
    }
    if authoritative.is_empty() {
        out.warnings.push(format!("{source}: no BENCH METRICS block"));
    }
    Ok(out)
}
