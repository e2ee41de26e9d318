//! hipfire AR bench output.
//!
//! Profile table rows are read from the right (`calls`x, ms, per-call, %, GiB/s
//! are fixed columns), so whatever stands left of them is the kernel name:
//! templates, `::` and spaces survive.

use super::{for_each_line, parse_number, ParseError, ParseOutput, ParserOptions};
use katlas_model::{KernelSample, Metric};
use regex::Regex;
use serde_json::{json, Value};
use std::io::BufRead;
use std::sync::OnceLock;

struct Res {
    header: Regex,
    row: Regex,
    total: Regex,
    coverage: Regex,
    cov_total: Regex,
    blind_row: Regex,
    graph: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    R.get_or_init(|| Res {
        header: Regex::new(r"^===\s*(?:(\w+)\s+)?PROFILE\s*(?:\((.*)\))?\s*===\s*$").unwrap(),
        row: Regex::new(
            r"^\s*(?P<name>\S.*?)\s+(?P<calls>\d+)x\s+(?P<total>[-\d.eE+]+)ms\s+\((?P<per>[-\d.eE+]+)(?:µs|us)/call\)\s+(?P<pct>[-\d.eE+]+)%(?:\s+(?P<bw>[-\d.eE+]+)\s*GiB/s)?\s*$",
        )
        .unwrap(),
        total: Regex::new(r"^\s*TOTAL\b.*?\s(?P<total>[-\d.eE+]+)ms\s*$").unwrap(),
        coverage: Regex::new(r"^===\s*ROCPROF COVERAGE\s*\((?P<pct>[-\d.eE+]+)%\)\s*===").unwrap(),
        cov_total: Regex::new(r"^\s*(?P<what>rocprof|internal|blindspot) total:\s+(?P<ms>[-\d.eE+]+)ms\s+\((?P<n>\d+)\s").unwrap(),
        blind_row: Regex::new(r"^\s*(?P<name>\S.*?)\s+(?P<calls>\d+)x\s+(?P<total>[-\d.eE+]+)ms\s+(?P<pct>[-\d.eE+]+)%\s*$").unwrap(),
        graph: Regex::new(r"\[hipGraph\]\s+captured\s+(?P<n>\d+)\s+blobs").unwrap(),
    })
}

#[derive(PartialEq)]
enum Block {
    None,
    Profile(String),
    Coverage,
    Blindspots,
}

/// Coverage bands: at or above 90% fine; below 90% investigate; below 75% escalate.
pub fn coverage_band(pct: f64) -> &'static str {
    if pct >= 90.0 {
        "ok"
    } else if pct >= 75.0 {
        "investigate"
    } else {
        "escalate"
    }
}

fn num(s: &str, source: &str, line: u64, key: &str) -> Result<f64, ParseError> {
    parse_number(s).ok_or_else(|| ParseError::key(source, line, key, format!("not a number: {s:?}")))
}

/// `KEY=VALUE` pairs after a summary tag; every value must be a number.
fn summary_pairs(rest: &str, source: &str, line: u64, tag: &str) -> Result<Vec<(String, f64)>, ParseError> {
    let mut out = Vec::new();
    for tok in rest.split_whitespace() {
        let Some((k, v)) = tok.split_once('=') else {
            return Err(ParseError::new(source, Some(line), format!("{tag}: expected key=value, found {tok:?}")));
        };
        let v = parse_number(v).ok_or_else(|| ParseError::key(source, line, k, format!("{tag}: not a number: {v:?}")))?;
        out.push((k.to_string(), v));
    }
    Ok(out)
}

pub fn parse(r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let re = res();
    let mut out = ParseOutput::new("hipfire-bench", source);
    let mut block = Block::None;
    let mut blindspots: Vec<Value> = Vec::new();
    let mut coverage: serde_json::Map<String, Value> = serde_json::Map::new();
    let mut last_summary: Option<Vec<(String, f64)>> = None;
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        if let Some(c) = re.graph.captures(line) {
            let v = num(&c["n"], source, n, "graph_blob_count")?;
            out.route.insert("graph_blob_count".into(), json!(v as u64));
            out.metrics.insert("graph_blob_count".into(), Metric::new(v, Some("blobs")));
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix("[hipfire]") {
            for tok in rest.split_whitespace() {
                if let Some((k, v)) = tok.split_once('=') {
                    let key = match k {
                        "kv" => "kv_mode",
                        "graph" => "graph_enabled",
                        other => other,
                    };
                    out.route.insert(key.into(), json!(v));
                }
            }
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix("PREFILL_SUMMARY") {
            if rest.starts_with(char::is_whitespace) || rest.is_empty() {
                let p = out.phase_mut("prefill");
                p.metrics.clear();
                for (k, v) in summary_pairs(rest, source, n, "PREFILL_SUMMARY")? {
                    p.metrics.insert(k.clone(), Metric::from_key(&k, v));
                }
                block = Block::None;
                return Ok(());
            }
        }
        if let Some(rest) = t.strip_prefix("SUMMARY") {
            if rest.starts_with(char::is_whitespace) || rest.is_empty() {
                // The last SUMMARY line is the one that counts.
                last_summary = Some(summary_pairs(rest, source, n, "SUMMARY")?);
                block = Block::None;
                return Ok(());
            }
        }
        if let Some(c) = re.coverage.captures(t) {
            let pct = num(&c["pct"], source, n, "coverage_pct")?;
            coverage.insert("coverage_pct".into(), json!(pct));
            coverage.insert("band".into(), json!(coverage_band(pct)));
            out.metrics.insert("rocprof_coverage_pct".into(), Metric::new(pct, Some("%")));
            block = Block::Coverage;
            return Ok(());
        }
        if let Some(c) = re.header.captures(t) {
            let prefix = c.get(1).map(|m| m.as_str().to_ascii_lowercase());
            let inner = c.get(2).map(|m| m.as_str()).unwrap_or("");
            let mut phase = prefix;
            let mut launches = None;
            let mut wall = None;
            let mut shape = None;
            for (i, part) in inner.split(',').map(str::trim).enumerate() {
                if let Some(x) = part.strip_suffix(" launches") {
                    launches = Some(num(x, source, n, "launches")? as u64);
                } else if let Some(x) = part.strip_suffix("ms wall") {
                    wall = Some(num(x, source, n, "wall_ms")?);
                } else if i == 0 && !part.is_empty() {
                    let mut w = part.split_whitespace();
                    if phase.is_none() {
                        phase = w.next().map(str::to_string);
                    }
                    shape = w.next().map(str::to_string);
                }
            }
            let phase = phase.unwrap_or_else(|| "profile".into());
            let p = out.phase_mut(&phase);
            p.kernels.clear();
            p.launches = launches;
            p.wall_ms = wall;
            p.reported_total_us = None;
            if let Some(s) = shape {
                out.artifacts.insert(format!("{phase}_shape"), json!(s));
            }
            block = Block::Profile(phase);
            return Ok(());
        }
        if t.starts_with("===") {
            block = Block::None;
            return Ok(());
        }
        match &block {
            Block::Profile(phase) => {
                if let Some(c) = re.total.captures(line) {
                    let v = num(&c["total"], source, n, "TOTAL")?;
                    out.phase_mut(&phase.clone()).reported_total_us = Some(v * 1000.0);
                } else if let Some(c) = re.row.captures(line) {
                    let name = c["name"].trim().to_string();
                    let calls = num(&c["calls"], source, n, "calls")? as u64;
                    let total_ms = num(&c["total"], source, n, "total_ms")?;
                    let per = num(&c["per"], source, n, "us_per_call")?;
                    let pct = num(&c["pct"], source, n, "pct")?;
                    let mut k = KernelSample { name, calls, total_us: total_ms * 1000.0, avg_us: Some(per), share_pct: Some(pct), ..Default::default() };
                    if let Some(bw) = c.name("bw") {
                        let gib = num(bw.as_str(), source, n, "gib_s")?;
                        k.achieved_gbps = Some(gib * 1.073_741_824);
                    }
                    out.phase_mut(&phase.clone()).kernels.push(k);
                } else if !t.is_empty() {
                    out.warnings.push(format!("{source}:{n}: not a profile row: {t:?}"));
                }
            }
            Block::Coverage | Block::Blindspots => {
                if let Some(c) = re.cov_total.captures(line) {
                    let what = c["what"].to_string();
                    coverage.insert(format!("{what}_total_ms"), json!(num(&c["ms"], source, n, "total_ms")?));
                    coverage.insert(format!("{what}_kernels"), json!(num(&c["n"], source, n, "kernels")? as u64));
                } else if t.starts_with("BLINDSPOTS") {
                    block = Block::Blindspots;
                } else if t.starts_with("WARNING") || t.starts_with("ESCALATE") {
                    coverage.insert("warning".into(), json!(t));
                } else if block == Block::Blindspots {
                    if let Some(c) = re.blind_row.captures(line) {
                        blindspots.push(json!({
                            "name": c["name"].trim(),
                            "calls": num(&c["calls"], source, n, "calls")? as u64,
                            "total_ms": num(&c["total"], source, n, "total_ms")?,
                            "pct": num(&c["pct"], source, n, "pct")?,
                        }));
                    } else if !t.is_empty() {
                        out.warnings.push(format!("{source}:{n}: not a blindspot row: {t:?}"));
                    }
                }
            }
            Block::None => {}
        }
        Ok(())
    })?;
    for p in &mut out.phases {
        p.finish();
    }
    if !coverage.is_empty() {
        let below = coverage.get("coverage_pct").and_then(Value::as_f64).is_some_and(|p| p < 90.0);
        coverage.insert("blindspots".into(), Value::Array(blindspots.clone()));
        out.metrics.insert("rocprof_blindspots".into(), Metric::new(blindspots.len() as f64, Some("kernels")));
        out.artifacts.insert("rocprof_coverage".into(), Value::Object(coverage));
        if below || !blindspots.is_empty() {
            out.tag("BLINDSPOT");
        }
    }
    match last_summary {
        Some(pairs) => {
            for (k, v) in pairs {
                out.metrics.insert(k.clone(), Metric::from_key(&k, v));
            }
        }
        None => out.warnings.push(format!("{source}: no SUMMARY line")),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse, Input};

    #[test]
    fn summary_non_number_names_key() {
        let e = parse("hipfire-bench", Input::Text { text: "x\nSUMMARY  gen_tok_s=abc avg_ms=1\n", source: "out" }).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.key.as_deref(), Some("gen_tok_s"));
        assert!(e.to_string().contains("gen_tok_s"));
    }

    #[test]
    fn last_summary_wins_and_exponents() {
        let text = "SUMMARY a_ms=1\nSUMMARY b_ms=2.5e1 c=-1E-2\n";
        let o = parse("hipfire-bench", Input::Text { text, source: "s" }).unwrap();
        assert_eq!(o.metric("a_ms"), None);
        assert_eq!(o.metric("b_ms"), Some(25.0));
        assert_eq!(o.metric("c"), Some(-0.01));
    }

    #[test]
    fn weird_kernel_names_survive() {
        let text = "=== DECODE PROFILE (3 launches, 1.0ms wall) ===\n  void ns::gemv<float, 4>(float const*, int) 12x k   2x  0.5ms  (250µs/call)  50.0%\n  TOTAL (serialized)   1.0ms\n";
        let o = parse("hipfire-bench", Input::Text { text, source: "s" }).unwrap();
        let p = o.phase("decode").unwrap();
        assert_eq!(p.kernels[0].name, "void ns::gemv<float, 4>(float const*, int) 12x k");
        assert_eq!(p.kernels[0].calls, 2);
        assert_eq!(p.reported_total_us, Some(1000.0));
    }

    #[test]
    fn bands() {
        assert_eq!(coverage_band(95.0), "ok");
        assert_eq!(coverage_band(84.1), "investigate");
        assert_eq!(coverage_band(70.0), "escalate");
    }
}
