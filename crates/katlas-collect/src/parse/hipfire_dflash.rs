//! hipfire DFlash (speculative decode) demo output (`dflash_spec_demo`: every
//! line below is written to stderr; stdout carries only the generated text).
//!
//! Keys on the `cycles:` line sit mid-line (`accepted: 237` after
//! `committed: 256`), so the line is tokenised into `key: value` / `key=value`
//! pairs instead of matched with one anchored pattern. Keys of the
//! `=== BENCH METRICS ===` block are authoritative: `decode_tau` wins over the
//! rounded `τ=` of the cycles line.
//!
//! Without the block, the same keys standing alone on a line (`decode_tok_s:
//! 192.69`, `decode_tau: 13.2727`, `ttft_ms: 142.18`, `cycles: 18`,
//! `accepted: 239`, as in hipfire's own collector tests) are read as well, as
//! hipfire's `scripts/kernel_atlas.py` does; `decode_tau` is also `tau`, and
//! `decode_tok_s` falls back to the rate of the `emitted:` line.
//!
//! Under `HIPFIRE_PROFILE=1` the demo prints `=== PROFILE (N kernel calls over
//! M cycles, X ms total kernel time) ===` and a table (`kernel calls total_ms
//! us/call % MB`, kernels under 0.5 % left out by the demo); it becomes the
//! kernel table of the parser's `phase` (default `decode_dflash`).

use super::{for_each_line, parse_number, ParseError, ParseOutput, ParserOptions};
use katlas_model::{KernelSample, Metric};
use regex::Regex;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::OnceLock;

struct Res {
    emitted: Regex,
    profile: Regex,
    row: Regex,
    prompt_tokens: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    const N: &str = r"[-\d.eE+]+";
    R.get_or_init(|| Res {
        emitted: Regex::new(r"^emitted:\s+(?P<tok>\d+)\s+tokens\s+in\s+(?P<s>[-\d.eE+]+)s(?:\s+\((?P<rate>[-\d.eE+]+)\s*tok/s\))?").unwrap(),
        // `\n=== PROFILE ({} kernel calls over {} cycles, {:.1}ms total kernel time) ===`
        profile: Regex::new(&format!(
            r"^===\s*PROFILE\s*\((?P<calls>\d+) kernel calls over (?P<cycles>\d+) cycles,\s*(?P<ms>{N})ms total kernel time\)\s*===$"
        ))
        .unwrap(),
        // `  {kern:50} {n:>6} {:>10.2} {:>10.0} {:>6.1}% {:>10.1}`: name, calls, total_ms, us/call, %, MB
        row: Regex::new(&format!(r"^\s*(?P<name>\S.*?)\s+(?P<calls>\d+)\s+(?P<ms>{N})\s+(?P<per>{N})\s+(?P<pct>{N})%\s+(?P<mb>{N})\s*$")).unwrap(),
        // `prompt tokens ({}): …`
        prompt_tokens: Regex::new(r"^prompt tokens \((?P<n>\d+)\):").unwrap(),
    })
}

/// Keys the demo prints as `key: value` lines: the BENCH METRICS vocabulary,
/// read outside the block too (hipfire's collector reads them anywhere).
const METRIC_LINE_KEYS: &[&str] = &[
    "prompt_tokens",
    "pflash_source_tokens",
    "pflash_kept_tokens",
    "pflash_compress_ms",
    "pflash_ratio",
    "prefill_secs",
    "prefill_tok_s",
    "ttft_ms",
    "decode_tokens_emitted",
    "decode_secs",
    "decode_tok_s",
    "decode_tau",
    "decode_accept_rate",
    "vram_used_mb",
    "vram_total_mb",
    "accepted",
    "committed",
];

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

fn num(s: &str, source: &str, n: u64, key: &str) -> Result<f64, ParseError> {
    parse_number(s).ok_or_else(|| ParseError::key(source, n, key, format!("not a number: {s:?}")))
}

pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let re = res();
    let mut out = ParseOutput::new("hipfire-dflash", source);
    let profile_phase = opts.phase.clone().unwrap_or_else(|| "decode_dflash".into());
    let mut in_metrics = false;
    let mut in_profile = false;
    let mut authoritative = BTreeMap::new();
    let mut loose = BTreeMap::new();
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        // `gpu: gfx1100`, the demo's own line: the arch where the host's probe finds no GPU.
        if let Some(a) = t.strip_prefix("gpu:").map(str::trim).filter(|a| super::hipfire_bench::is_arch_atom(a)) {
            out.route.insert("arch".into(), json!(a));
            return Ok(());
        }
        if t.starts_with("=== BENCH METRICS") {
            in_metrics = true;
            in_profile = false;
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
        if let Some(c) = re.profile.captures(t) {
            let p = out.phase_mut(&profile_phase);
            p.kernels.clear();
            p.launches = Some(num(&c["calls"], source, n, "kernel_calls")? as u64);
            p.reported_total_us = Some(num(&c["ms"], source, n, "total_kernel_ms")? * 1000.0);
            p.metrics.insert("profile_cycles".into(), Metric::new(num(&c["cycles"], source, n, "profile_cycles")?, Some("cycles")));
            in_profile = true;
            return Ok(());
        }
        if in_profile {
            // The column heads, then rows; the first other line ends the table.
            if t.starts_with("kernel ") && t.ends_with(" MB") {
                return Ok(());
            }
            if let Some(c) = re.row.captures(line) {
                let calls = num(&c["calls"], source, n, "calls")? as u64;
                let total_us = num(&c["ms"], source, n, "total_ms")? * 1000.0;
                let mb = num(&c["mb"], source, n, "mb")?;
                let mut k = KernelSample {
                    name: c["name"].trim().to_string(),
                    calls,
                    total_us,
                    avg_us: Some(num(&c["per"], source, n, "us_per_call")?),
                    share_pct: Some(num(&c["pct"], source, n, "pct")?),
                    ..Default::default()
                };
                if calls > 0 {
                    k.bytes = Some(mb * 1e6 / calls as f64);
                }
                if total_us > 0.0 {
                    // MB / ms = GB/s (decimal).
                    k.achieved_gbps = Some(mb / (total_us / 1000.0));
                }
                out.phase_mut(&profile_phase).kernels.push(k);
                return Ok(());
            }
            in_profile = false;
        }
        if let Some(rest) = t.strip_prefix("[dflash]") {
            for (k, v) in mid_line_pairs(rest) {
                let key = if k == "kv" { "kv_mode".to_string() } else { k };
                out.route.insert(key, json!(v));
            }
            return Ok(());
        }
        if let Some(c) = re.emitted.captures(t) {
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
                let x = num(&v, source, n, &k)?;
                out.metrics.insert(k.clone(), Metric::from_key(&k, x));
            }
            return Ok(());
        }
        if let Some((k, v)) = t.split_once(':') {
            if METRIC_LINE_KEYS.contains(&k) {
                if let Some(x) = parse_number(v) {
                    loose.insert(k.to_string(), x);
                    return Ok(());
                }
            }
        }
        if let Some(c) = re.prompt_tokens.captures(t) {
            let v = num(&c["n"], source, n, "prompt_tokens")?;
            out.metrics.entry("prompt_tokens".into()).or_insert(Metric::new(v, Some("tokens")));
            return Ok(());
        }
        if let Some(rest) = t.strip_prefix("prompt:") {
            if let Some(tok) = rest.split_whitespace().next().and_then(parse_number) {
                out.metrics.entry("prompt_tokens".into()).or_insert(Metric::new(tok, Some("tokens")));
            }
        }
        Ok(())
    })?;
    if authoritative.is_empty() && loose.is_empty() {
        out.warnings.push(format!("{source}: no BENCH METRICS block and no decode_tok_s/decode_tau lines"));
    }
    // Lines outside the block first; the block wins.
    let mut keyed = loose;
    keyed.extend(authoritative);
    for (k, v) in &keyed {
        out.metrics.insert(k.clone(), Metric::from_key(k, *v));
    }
    // Authoritative spellings of derived keys.
    for (auth, derived) in [("decode_tau", "tau"), ("decode_tokens_emitted", "emitted_tokens")] {
        if let Some(v) = keyed.get(auth) {
            let unit = out.metrics.get(derived).and_then(|m| m.unit.clone());
            out.metrics.insert(derived.into(), Metric { value: *v, unit });
        }
    }
    // The demo's decode_tok_s is emitted / decode time, the rate the `emitted:` line prints.
    if !out.metrics.contains_key("decode_tok_s") {
        if let Some(v) = out.metric("emitted_tok_s") {
            out.metrics.insert("decode_tok_s".into(), Metric::new(v, Some("tok/s")));
            out.warnings.push(format!("{source}: no decode_tok_s line; taken from the `emitted:` rate"));
        }
    }
    for p in &mut out.phases {
        p.finish();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse, Input};

    /// hipfire's own collector test input (its test of authoritative metric lines).
    #[test]
    fn metric_lines_without_block_as_the_peer_reads_them() {
        let o = parse("hipfire-dflash", Input::Text { text: katlas_testkit::hipfire_streams::PEER_DFLASH_SAMPLE, source: "s" }).unwrap();
        // The peer's assertions, under the same names (the preset requires decode_tok_s, accepted, tau).
        assert_eq!(o.metric("decode_tok_s"), Some(192.69));
        assert_eq!(o.metric("tau"), Some(13.2727));
        assert_eq!(o.metric("ttft_ms"), Some(142.18));
        assert_eq!(o.metric("cycles"), Some(18.0));
        assert_eq!(o.metric("accepted"), Some(239.0));
        assert_eq!(o.metric("emitted_tokens"), Some(256.0));
        assert_eq!(o.metric("elapsed_s"), Some(1.45));
        assert_eq!(o.metrics["ttft_ms"].unit.as_deref(), Some("ms"));
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    }

    #[test]
    fn block_wins_over_loose_lines_and_emitted_rate_is_the_fallback() {
        let text = "decode_tok_s: 1.0\n=== BENCH METRICS ===\ndecode_tok_s: 2.5\n=====================\n";
        let o = parse("hipfire-dflash", Input::Text { text, source: "s" }).unwrap();
        assert_eq!(o.metric("decode_tok_s"), Some(2.5));
        let o = parse("hipfire-dflash", Input::Text { text: "emitted: 10 tokens in 0.50s  (20.00 tok/s)\n", source: "s" }).unwrap();
        assert_eq!(o.metric("decode_tok_s"), Some(20.0));
    }

    #[test]
    fn profile_table_is_the_decode_dflash_kernels() {
        // Format strings of dflash_spec_demo.rs (HIPFIRE_PROFILE=1).
        let mut text = String::from("\n=== PROFILE (1234 kernel calls over 5 cycles, 321.5ms total kernel time) ===\n");
        text += &format!("  {:50} {:>6} {:>10} {:>10} {:>7} {:>10}\n", "kernel", "calls", "total_ms", "us/call", "%", "MB");
        text += &format!("  {:50} {:>6} {:>10.2} {:>10.0} {:>6.1}% {:>10.1}\n", "gemm_hfq4g256_residual_wmma", 320, 200.25, 625.8, 62.3, 4096.0);
        text += &format!("  {:50} {:>6} {:>10.2} {:>10.0} {:>6.1}% {:>10.1}\n", "attention_dflash_q8_0", 80, 21.0, 262.5, 6.5, 12.5);
        text += "[cycle 6] pos=200 seed=5 committed=[1, 2] bonus=3 accepted=4 τ=4.000\n";
        let o = parse("hipfire-dflash", Input::Text { text: &text, source: "s" }).unwrap();
        let p = o.phase("decode_dflash").unwrap();
        assert_eq!(p.kernels.len(), 2);
        assert_eq!(p.launches, Some(1234));
        assert_eq!(p.reported_total_us, Some(321_500.0));
        assert_eq!(p.metrics["profile_cycles"].value, 5.0);
        let k = &p.kernels[0];
        assert_eq!((k.name.as_str(), k.calls, k.total_us, k.share_pct), ("gemm_hfq4g256_residual_wmma", 320, 200_250.0, Some(62.3)));
        assert_eq!(k.bytes, Some(4096.0e6 / 320.0));
    }
}
