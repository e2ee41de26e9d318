//! Generic `key=value` and `key: value` lines.
//!
//! With `keys` given only those are taken and a non-number value for one is
//! an error naming it; without, every pair whose value is a number is a
//! metric. The last occurrence of a key wins.
//!
//! Only text that looks like `key=value` output is kv's: a key is a name
//! (a letter, digit or `_`, then letters, digits, `_`, `.`, `-`, `/`), and a
//! line that is a JSON object or array, or carries the json-lines marker
//! `"katlas"`, is skipped whole. Another parser (json-lines, katlas-rows) reads
//! the same stdout in a collect run, and its records are not kv pairs.

use super::hipfire_dflash::mid_line_pairs;
use super::{for_each_line, parse_number, ParseError, ParseOutput, ParserOptions};
use katlas_model::Metric;
use std::io::BufRead;

pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("kv", source);
    for_each_line(r, source, |n, line| {
        if is_json_line(line) {
            return Ok(());
        }
        let mut pairs = mid_line_pairs(line);
        pairs.retain(|(k, _)| is_key(k));
        // `key: value with spaces` as a whole line.
        if pairs.is_empty() {
            if let Some((k, v)) = line.split_once(':') {
                let k = k.trim();
                if is_key(k) {
                    pairs.push((k.to_string(), v.trim().to_string()));
                }
            }
        }
        for (k, v) in pairs {
            let v = v.trim_end_matches([',', ';']);
            if opts.keys.is_empty() {
                if let Some(x) = parse_number(v) {
                    out.metrics.insert(k.clone(), Metric::from_key(&k, x));
                }
            } else if opts.keys.contains(&k) {
                let x = parse_number(v).ok_or_else(|| ParseError::key(source, n, &k, format!("not a number: {v:?}")))?;
                out.metrics.insert(k.clone(), Metric::from_key(&k, x));
            }
        }
        Ok(())
    })?;
    for k in &opts.keys {
        if !out.metrics.contains_key(k) {
            out.warnings.push(format!("{source}: key `{k}` not found"));
        }
    }
    Ok(out)
}

/// `tok_s`, `route.attn`, `tok/s`, `p50-ms`, `τ` (read as `tau`): a name, never a
/// quoted JSON key (`"calls"`), a brace-led fragment (`{"katlas"`) or a flag (`--iters`).
fn is_key(k: &str) -> bool {
    let mut cs = k.chars();
    cs.next().is_some_and(|c| c.is_alphanumeric() || c == '_')
        && cs.all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
        && super::is_metric_name(k)
}

/// A JSON object (or a Python dict printed as one), a JSON array, or a json-lines record
/// however it is prefixed: another parser's line, whose strings may hold `a=1` text.
fn is_json_line(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('{') || (t.starts_with('[') && t.ends_with(']') && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()) || t.contains("\"katlas\"")
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_with, Input, ParserOptions};

    #[test]
    fn json_text_is_not_kv() {
        let text = concat!(
            "tok_s=12.5\n",
            "{\"katlas\": 1, \"kernels\": [{\"name\": \"k\", \"calls\": 3, \"avg_us\": 2.5}]}\n",
            "{\"katlas\": 1, \"note\": \"run b=2 c\", \"calls\": 7}\n",
            "data: {\"katlas\": 1, \"note\": \"d=4 e\"}\n",
            "[\"x y=5 z\", 1]\n",
            "[rank0] lat_ms=3 --iters=10 \"q\"=1 {r=2 'w'=3\n",
            "route.attn=1 tok/s: 41.8 p50-ms=2 τ=0.5\n",
            "\"calls\": 9\n",
        );
        let o = parse_with("kv", Input::Text { text, source: "s" }, &ParserOptions::default()).unwrap();
        let names: Vec<&str> = o.metrics.keys().map(String::as_str).collect();
        assert_eq!(names, ["lat_ms", "p50-ms", "route.attn", "tau", "tok/s", "tok_s"]);
        assert_eq!(o.metric("tok/s"), Some(41.8));
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    }

    #[test]
    fn chosen_keys_and_forms() {
        let text = "tok_s=10 noise\nlatency_ms: 2.5\ntok_s=12\nname: foo\nother=3\n";
        let opts = ParserOptions { keys: vec!["tok_s".into(), "latency_ms".into()], ..Default::default() };
        let o = parse_with("kv", Input::Text { text, source: "s" }, &opts).unwrap();
        assert_eq!(o.metric("tok_s"), Some(12.0));
        assert_eq!(o.metric("latency_ms"), Some(2.5));
        assert_eq!(o.metric("other"), None);
        let all = parse_with("kv", Input::Text { text, source: "s" }, &ParserOptions::default()).unwrap();
        assert_eq!(all.metric("other"), Some(3.0));
        assert!(!all.metrics.contains_key("name"));
    }

    #[test]
    fn chosen_non_number_is_error() {
        let opts = ParserOptions { keys: vec!["x".into()], ..Default::default() };
        let e = parse_with("kv", Input::Text { text: "a\nx=oops\n", source: "f" }, &opts).unwrap_err();
        assert_eq!(e.to_string(), "f:2: key `x`: not a number: \"oops\"");
    }
}
