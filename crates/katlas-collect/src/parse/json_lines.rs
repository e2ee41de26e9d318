//! JSON objects, one a line, that carry a marker key (other output lines are
//! ignored). Numbers become metrics (nested objects by dotted path), a string
//! `phase` routes the record's metrics to that phase, a `kernels` array of
//! kernel samples fills the phase's table, other strings are artifacts.

use super::{for_each_line, ParseError, ParseOutput, ParserOptions};
use katlas_model::{KernelSample, Metric};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io::BufRead;

fn flatten(prefix: &str, m: &Map<String, Value>, nums: &mut BTreeMap<String, f64>, strs: &mut BTreeMap<String, Value>) {
    for (k, v) in m {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Value::Number(n) => {
                if let Some(x) = n.as_f64() {
                    nums.insert(key, x);
                }
            }
            Value::Object(o) => flatten(&key, o, nums, strs),
            Value::Null => {}
            other => {
                strs.insert(key, other.clone());
            }
        }
    }
}

pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let marker = opts.marker.as_deref().unwrap_or("katlas");
    let mut out = ParseOutput::new("json-lines", source);
    let mut records = 0u64;
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        if !t.starts_with('{') || !t.contains(&format!("\"{marker}\"")) {
            return Ok(());
        }
        let v: Value = match serde_json::from_str(t) {
            Ok(v) => v,
            Err(e) => {
                out.warnings.push(format!("{source}:{n}: invalid JSON in a `{marker}` line: {e}"));
                return Ok(());
            }
        };
        let Value::Object(mut m) = v else { return Ok(()) };
        if !m.contains_key(marker) {
            return Ok(());
        }
        records += 1;
        m.remove(marker);
        // Records without `phase` are whole-run metrics; only their kernels need a phase.
        let phase = match m.remove("phase") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        if let Some(k) = m.remove("kernels") {
            let ks: Vec<KernelSample> = serde_json::from_value(k).map_err(|e| ParseError::key(source, n, "kernels", e.to_string()))?;
            let p = out.phase_mut(phase.as_deref().or(opts.phase.as_deref()).unwrap_or("run"));
            p.kernels.extend(ks);
        }
        let mut nums = BTreeMap::new();
        let mut strs = BTreeMap::new();
        flatten("", &m, &mut nums, &mut strs);
        let target = match &phase {
            Some(p) => &mut out.phase_mut(p).metrics,
            None => &mut out.metrics,
        };
        for (k, x) in nums {
            target.insert(k.clone(), Metric::from_key(&k, x));
        }
        out.artifacts.extend(strs);
        Ok(())
    })?;
    for p in &mut out.phases {
        p.kernels.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        p.finish();
    }
    if records == 0 {
        out.warnings.push(format!("{source}: no line carries the marker key `{marker}`"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_with, Input, ParserOptions};

    #[test]
    fn marker_lines_only() {
        let text = "hello\n{\"other\":1}\n{\"lab\":1,\"phase\":\"decode\",\"tok_s\":5,\"cfg\":{\"n\":2},\"arch\":\"sm_90\",\"kernels\":[{\"name\":\"k\",\"calls\":2,\"total_us\":4.0}]}\n{\"lab\":1, broken\n";
        let opts = ParserOptions { marker: Some("lab".into()), ..Default::default() };
        let o = parse_with("json-lines", Input::Text { text, source: "s" }, &opts).unwrap();
        let p = o.phase("decode").unwrap();
        assert_eq!(p.metrics["tok_s"].value, 5.0);
        assert_eq!(p.metrics["cfg.n"].value, 2.0);
        assert_eq!(p.kernels[0].avg_us, Some(2.0));
        assert_eq!(o.artifacts["arch"], "sm_90");
        assert_eq!(o.warnings.len(), 1);
        assert!(o.warnings[0].starts_with("s:4:"), "{:?}", o.warnings);
    }
}
