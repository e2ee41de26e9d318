//! Generic `key=value` and `key: value` lines.
//!
//! With `keys` given only those are taken and a non-number value for one is
//! an error naming it; without, every pair whose value is a number is a
//! metric. The last occurrence of a key wins.

use super::hipfire_dflash::mid_line_pairs;
use super::{for_each_line, parse_number, ParseError, ParseOutput, ParserOptions};
use katlas_model::Metric;
use std::io::BufRead;

pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("kv", source);
    for_each_line(r, source, |n, line| {
        let mut pairs = mid_line_pairs(line);
        // `key: value with spaces` as a whole line.
        if pairs.is_empty() {
            if let Some((k, v)) = line.split_once(':') {
                let k = k.trim();
                if !k.is_empty() && !k.contains(char::is_whitespace) {
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

#[cfg(test)]
mod tests {
    use crate::parse::{parse_with, Input, ParserOptions};

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
