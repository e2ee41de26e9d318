//! hipfire AR bench output (`bench_qwen35_mq4`, all of it written to stderr).
//!
//! Profile table rows are read from the right (`calls`x, ms, per-call, %, GiB/s
//! are fixed columns), so whatever stands left of them is the kernel name:
//! templates, `::` and spaces survive.
//!
//! Phases follow hipfire's own collector (`scripts/kernel_atlas.py`):
//! `=== PROFILE (N launches, X ms wall) ===` is the prefill table (the bench
//! profiles only prefill under `HIPFIRE_PROFILE=1`), `=== DECODE PROFILE (…) ===`
//! the decode one. A header may name its phase itself
//! (`=== PROFILE (prefill pp128, …) ===`, phase and shape bucket).
//!
//! The lines the bench prints after a table (`total: 185.6ms`, `tok/s: …`,
//! `total: … over N tokens`, `per-token ms:` and its `min=… p50=… …` line,
//! `tok/s (gen):`, `effective BW:`) belong to the format. They are read into
//! the phase of the section they stand in (`=== prefill (…) ===` or
//! `=== gen (…) ===`), under the names the bench gives its own atlas rows
//! (`gen_tokens`, `min_ms`, `p90_ms`, `p99_ms`, `max_ms`, …), and a value that
//! `SUMMARY` or `PREFILL_SUMMARY` also gives is taken from there.

use super::{for_each_line, parse_number, ParseError, ParseOutput, ParserOptions};
use katlas_model::{KernelSample, Metric};
use regex::Regex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
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
    gen_total: Regex,
    prefill_total: Regex,
    warmup_total: Regex,
    median: Regex,
    prefill_run: Regex,
    bw: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    const N: &str = r"[-\d.eE+]+";
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
        // `  total: {gen_total_ms:.1}ms over {n} tokens`
        gen_total: Regex::new(&format!(r"^total:\s+(?P<ms>{N})ms over (?P<n>\d+) tokens$")).unwrap(),
        // `  total: {prefill_ms:.1}ms`
        prefill_total: Regex::new(&format!(r"^total:\s+(?P<ms>{N})ms$")).unwrap(),
        // `  total: {warmup_ms:.1}ms  avg: {:.2}ms/tok` (untimed warmup)
        warmup_total: Regex::new(&format!(r"^total:\s+{N}ms\s+avg:\s+{N}ms/tok$")).unwrap(),
        // `  median: {median_ms:.1}ms  {:.1} tok/s`
        median: Regex::new(&format!(r"^median:\s+(?P<ms>{N})ms\s+(?P<rate>{N}) tok/s$")).unwrap(),
        // `  run {:>2}: {:.1}ms  {:.1} tok/s`
        prefill_run: Regex::new(&format!(r"^run\s+\d+:\s+{N}ms\s+{N} tok/s$")).unwrap(),
        // `  effective BW: {bw_gbps:.1} GiB/s (model {:.2} GiB × {gen_tok_s:.1} tok/s)`
        bw: Regex::new(&format!(r"^effective BW:\s+(?P<bw>{N}) GiB/s")).unwrap(),
    })
}

#[derive(PartialEq)]
enum Block {
    None,
    /// A profile table of this phase, open until its `TOTAL` line.
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

/// Metrics read from the lines around the tables, per phase; `SUMMARY` and
/// `PREFILL_SUMMARY` win over them.
#[derive(Default)]
struct SectionMetrics(BTreeMap<String, BTreeMap<String, Metric>>);

impl SectionMetrics {
    fn put(&mut self, out: &mut ParseOutput, phase: &str, key: &str, v: f64, unit: Option<&str>) {
        out.phase_mut(phase);
        self.0.entry(phase.into()).or_default().insert(key.into(), Metric::new(v, unit));
    }
}

/// A line the bench prints inside a prefill or gen section (after a table or
/// without one). `Ok(true)` when the line is one of them.
fn section_line(t: &str, section: Option<&str>, source: &str, n: u64, out: &mut ParseOutput, sm: &mut SectionMetrics) -> Result<bool, ParseError> {
    let re = res();
    if let Some(c) = re.gen_total.captures(t) {
        sm.put(out, "decode", "gen_total_ms", num(&c["ms"], source, n, "gen_total_ms")?, Some("ms"));
        sm.put(out, "decode", "gen_tokens", num(&c["n"], source, n, "gen_tokens")?, Some("tokens"));
        return Ok(true);
    }
    if let Some(c) = re.prefill_total.captures(t) {
        if section == Some("prefill") {
            sm.put(out, "prefill", "prefill_wall_ms", num(&c["ms"], source, n, "prefill_wall_ms")?, Some("ms"));
        }
        return Ok(true);
    }
    if let Some(c) = re.median.captures(t) {
        if section == Some("prefill") {
            sm.put(out, "prefill", "prefill_median_ms", num(&c["ms"], source, n, "prefill_median_ms")?, Some("ms"));
            sm.put(out, "prefill", "prefill_median_tok_s", num(&c["rate"], source, n, "prefill_median_tok_s")?, Some("tok/s"));
        }
        return Ok(true);
    }
    if let Some(v) = t.strip_prefix("tok/s (gen):") {
        sm.put(out, "decode", "gen_tok_s", num(v.trim(), source, n, "gen_tok_s")?, Some("tok/s"));
        return Ok(true);
    }
    if let Some(v) = t.strip_prefix("tok/s:") {
        if section == Some("prefill") {
            sm.put(out, "prefill", "prefill_tok_s", num(v.trim(), source, n, "prefill_tok_s")?, Some("tok/s"));
        }
        return Ok(true);
    }
    if let Some(c) = re.bw.captures(t) {
        sm.put(out, "decode", "bw_gib_s", num(&c["bw"], source, n, "bw_gib_s")?, Some("GiB/s"));
        return Ok(true);
    }
    // `    min={min_ms:.2}  p50={p50_ms:.2}  avg={avg_ms:.2}  p90=…  p99=…  max=…`
    if t.starts_with("min=") && t.contains(" max=") {
        for tok in t.split_whitespace() {
            let Some((k, v)) = tok.split_once('=') else { continue };
            let key = format!("{k}_ms");
            let v = num(v, source, n, &key)?;
            sm.put(out, "decode", &key, v, Some("ms"));
        }
        return Ok(true);
    }
    Ok(t == "per-token ms:" || t.starts_with("NOTE:") || re.warmup_total.is_match(t) || re.prefill_run.is_match(t))
}

/// `gfx1100`, `gfx90a`, `gfx1151`: an AMD arch name as `rdna_compute::Gpu::arch` holds it.
pub(crate) fn is_arch_atom(s: &str) -> bool {
    s.strip_prefix("gfx").is_some_and(|r| !r.is_empty() && r.len() <= 5 && r.bytes().all(|c| c.is_ascii_alphanumeric()))
}

pub fn parse(r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let re = res();
    let mut out = ParseOutput::new("hipfire-bench", source);
    let mut block = Block::None;
    let mut section: Option<String> = None;
    let mut sm = SectionMetrics::default();
    let mut blindspots: Vec<Value> = Vec::new();
    let mut coverage: serde_json::Map<String, Value> = serde_json::Map::new();
    let mut last_summary: Option<Vec<(String, f64)>> = None;
    let mut last_prefill_summary: Option<Vec<(String, f64)>> = None;
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        if let Some(c) = re.graph.captures(line) {
            let v = num(&c["n"], source, n, "graph_blob_count")?;
            out.route.insert("graph_blob_count".into(), json!(v as u64));
            out.metrics.insert("graph_blob_count".into(), Metric::new(v, Some("blobs")));
            return Ok(());
        }
        // `GPU: gfx1100` (`gpu.arch`, before the weights load): the arch the bench ran on, which
        // the row keeps where the host's own probe finds no GPU.
        if let Some(a) = t.strip_prefix("GPU:").map(str::trim).filter(|a| is_arch_atom(a)) {
            out.route.insert("arch".into(), json!(a));
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
                // The last PREFILL_SUMMARY line is the one that counts.
                last_prefill_summary = Some(summary_pairs(rest, source, n, "PREFILL_SUMMARY")?);
                out.phase_mut("prefill");
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
            section = None;
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
                } else if i == 0 && part.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    // `prefill pp128`: the table names its phase (and shape bucket).
                    let mut w = part.split_whitespace();
                    if phase.is_none() {
                        phase = w.next().map(str::to_string);
                    }
                    shape = w.next().map(str::to_string);
                }
            }
            // A bare `=== PROFILE (…) ===` is the bench's prefill profile (HIPFIRE_PROFILE=1).
            let phase = phase.unwrap_or_else(|| "prefill".into());
            let p = out.phase_mut(&phase);
            p.kernels.clear();
            p.launches = launches;
            p.wall_ms = wall;
            p.reported_total_us = None;
            if let Some(s) = shape {
                out.artifacts.insert(format!("{phase}_shape"), json!(s));
            }
            section = Some(phase.clone());
            block = Block::Profile(phase);
            return Ok(());
        }
        if t.starts_with("===") {
            block = Block::None;
            // `=== prefill (N tokens) ===`, `=== gen (N tokens — timed) ===`; others
            // (`warmup`, `warm-up prefill`, `DPM warmup`) are no measured phase.
            let head = t.trim_start_matches('=').trim_start();
            section = if head.starts_with("prefill") {
                Some("prefill".into())
            } else if head.starts_with("gen ") || head.starts_with("gen(") {
                Some("decode".into())
            } else {
                None
            };
            return Ok(());
        }
        let open_table = if let Block::Profile(p) = &block { Some(p.clone()) } else { None };
        match (&block, open_table) {
            (_, Some(phase)) => {
                if let Some(c) = re.total.captures(line) {
                    let v = num(&c["total"], source, n, "TOTAL")?;
                    out.phase_mut(&phase).reported_total_us = Some(v * 1000.0);
                    // TOTAL closes the table; the section's own lines follow.
                    block = Block::None;
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
                    out.phase_mut(&phase).kernels.push(k);
                } else if t.is_empty() {
                } else if section_line(t, section.as_deref(), source, n, &mut out, &mut sm)? {
                    // A table without its TOTAL line, then the section goes on.
                    block = Block::None;
                } else {
                    out.warnings.push(format!("{source}:{n}: not a profile row: {t:?}"));
                }
            }
            (Block::Coverage | Block::Blindspots, None) => {
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
            _ => {
                section_line(t, section.as_deref(), source, n, &mut out, &mut sm)?;
            }
        }
        Ok(())
    })?;
    // Section lines first; the summaries' spelling of the same value wins.
    let summary_keys: Vec<&str> = last_summary.iter().flatten().chain(last_prefill_summary.iter().flatten()).map(|(k, _)| k.as_str()).collect();
    for (phase, metrics) in sm.0 {
        let p = out.phase_mut(&phase);
        for (k, m) in metrics {
            if !summary_keys.contains(&k.as_str()) {
                p.metrics.insert(k, m);
            }
        }
    }
    if let Some(pairs) = &last_prefill_summary {
        let p = out.phase_mut("prefill");
        for (k, v) in pairs {
            p.metrics.insert(k.clone(), Metric::from_key(k, *v));
        }
    }
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

    /// hipfire's own collector test input, verbatim (fixtures/hipfire-tree/tests/test_kernel_atlas.py,
    /// `test_parse_bench_profile_sections_extracts_prefill_and_decode_kernels`).
    const PEER_PROFILE_SAMPLE: &str = "
=== PROFILE (96 launches, 10.0ms wall) ===
  gemm_hfq4g256_residual                         24x  3.6ms  (150µs/call)  36.0%  900.0 GiB/s
  fused_qkvza_hfq4g256                            8x  1.8ms  (225µs/call)  18.0%  700.0 GiB/s
  TOTAL (serialized)                                10.0ms

=== DECODE PROFILE (64 launches, 5.0ms wall) ===
  gemv_hfq4g256_multirow_r4                      24x  2.5ms  (104µs/call)  50.0%  400.0 GiB/s
  fused_qk_l2_norm_scale_f32                      8x  0.5ms  (62µs/call)  10.0%  10.0 GiB/s
  TOTAL (serialized)                                 5.0ms
";

    #[test]
    fn bare_profile_header_is_prefill_as_the_peer_reads_it() {
        let o = parse("hipfire-bench", Input::Text { text: PEER_PROFILE_SAMPLE, source: "s" }).unwrap();
        let names = |p: &str| o.phase(p).unwrap().kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
        assert_eq!(names("prefill"), ["gemm_hfq4g256_residual", "fused_qkvza_hfq4g256"]);
        assert_eq!(names("decode"), ["gemv_hfq4g256_multirow_r4", "fused_qk_l2_norm_scale_f32"]);
        let pre = o.phase("prefill").unwrap();
        assert_eq!((pre.kernels[0].calls, pre.kernels[0].total_us, pre.kernels[0].share_pct), (24, 3600.0, Some(36.0)));
        assert_eq!((pre.launches, pre.wall_ms, pre.reported_total_us), (Some(96), Some(10.0), Some(10_000.0)));
        assert!(o.phase("profile").is_none());
        assert_eq!(o.warnings, ["s: no SUMMARY line"]);
    }

    #[test]
    fn lines_after_the_tables_are_metrics_not_warnings() {
        // bench_qwen35_mq4.rs format strings, one table each, as the bench prints them.
        let text = "\n=== prefill (128 tokens) ===\n\n=== PROFILE (3 launches, 185.6ms wall) ===\n  k1                                                3x  1.0ms  (333µs/call)  100.0%  1.0 GiB/s\n  TOTAL (serialized)                                      1.0ms\n  median: 185.0ms  691.9 tok/s\n  total: 185.6ms\n  tok/s: 689.6\n  NOTE: first prefill run includes kernel JIT compile cost\n\n=== warmup (5 tokens — untimed, lets JIT settle) ===\n  total: 160.2ms  avg: 32.04ms/tok\n\n=== gen (2 tokens — timed) ===\n  total: 55.8ms over 2 tokens\n  per-token ms:\n    min=27.41  p50=27.89  avg=27.65  p90=27.89  p99=27.41  max=27.89\n  tok/s (gen): 35.9\n  effective BW: 183.7 GiB/s (model 5.12 GiB × 35.9 tok/s)\n\nSUMMARY  gen_tok_s=35.8\n";
        let o = parse("hipfire-bench", Input::Text { text, source: "s" }).unwrap();
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
        let pre = &o.phase("prefill").unwrap().metrics;
        assert_eq!((pre["prefill_wall_ms"].value, pre["prefill_tok_s"].value, pre["prefill_median_ms"].value), (185.6, 689.6, 185.0));
        let dec = &o.phase("decode").unwrap().metrics;
        assert_eq!((dec["gen_total_ms"].value, dec["gen_tokens"].value, dec["p90_ms"].value, dec["max_ms"].value), (55.8, 2.0, 27.89, 27.89));
        assert_eq!(dec["bw_gib_s"].value, 183.7);
        assert!(!dec.contains_key("gen_tok_s"), "SUMMARY's gen_tok_s is the one kept");
        assert_eq!(o.metric("gen_tok_s"), Some(35.8));
    }

    #[test]
    fn bands() {
        assert_eq!(coverage_band(95.0), "ok");
        assert_eq!(coverage_band(84.1), "investigate");
        assert_eq!(coverage_band(70.0), "escalate");
    }
}
