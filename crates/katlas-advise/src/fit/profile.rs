//! Profile samples as the view reads them: merged by name, and where their bytes come from.

use katlas_model::KernelSample;

/// Profile samples merged by name (profilers list one line per launch or per name).
pub(crate) fn merge_samples(samples: &[KernelSample]) -> Vec<KernelSample> {
    let mut out: Vec<KernelSample> = Vec::new();
    for s in samples {
        let calls = s.calls.max(1);
        let total = if s.total_us > 0.0 { s.total_us } else { s.avg_us.unwrap_or(0.0) * calls as f64 };
        match out.iter_mut().find(|o| o.name == s.name) {
            Some(o) => {
                let ocalls = o.calls.max(1);
                // Bytes/flops are per call: weight by calls.
                o.bytes = weighted(o.bytes, ocalls, s.bytes, calls);
                o.flops = weighted(o.flops, ocalls, s.flops, calls);
                o.calls = ocalls + calls;
                o.total_us += total;
                o.avg_us = (o.total_us > 0.0).then(|| o.total_us / o.calls as f64);
                o.share_pct = match (o.share_pct, s.share_pct) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
                // Counters are per-launch means: merge as a call-weighted mean.
                for (k, v) in &s.counters {
                    let mine = o.counters.get(k).copied();
                    if let Some(m) = weighted(mine, ocalls, Some(*v), calls) {
                        o.counters.insert(k.clone(), m);
                    }
                }
                o.achieved_gbps = None;
            }
            None => {
                let mut c = s.clone();
                c.calls = calls;
                c.total_us = total;
                out.push(c);
            }
        }
    }
    out
}

pub(super) fn weighted(a: Option<f64>, na: u64, b: Option<f64>, nb: u64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some((x * na as f64 + y * nb as f64) / (na + nb) as f64),
        _ => None,
    }
}

/// Whether a sample's bytes come from DRAM counters (ncu `dram__bytes_*`, rocprof
/// `FETCH_SIZE`/`WRITE_SIZE`, the rocprofv3 parser's TCC/GL2C formulas) rather than a
/// workload's own estimate.
pub(super) fn bytes_from_counters(s: &KernelSample) -> bool {
    s.extra.get("bytes_source").and_then(|v| v.as_str()) == Some("counters")
        || s.counters.keys().any(|k| k.starts_with("dram__bytes") || k == "FETCH_SIZE" || k == "WRITE_SIZE")
}

/// Where a sample's per-call bytes come from, as the view labels them.
pub(super) fn bytes_label(s: &KernelSample) -> String {
    if bytes_from_counters(s) {
        "dram counters".into()
    } else if from_shapes(s) {
        "from shapes".into()
    } else {
        match bytes_source(s) {
            // Operand estimates say so: an estimate of what moved, not a measurement. Through the
            // kernel's loads and stores it models DRAM with cold caches; each tensor once is a
            // lower bound of what the kernel touches.
            Some(src) if src.contains("loads/stores") => format!("{src}, cold-cache estimate"),
            Some(src) if src.contains("operands") => format!("{src}, lower bound"),
            _ => "bytes per call".into(),
        }
    }
}

/// The parser's `bytes_source` of a sample.
pub(super) fn bytes_source(s: &KernelSample) -> Option<&str> {
    s.extra.get("bytes_source").and_then(|v| v.as_str())
}

/// Bytes and FLOPs derived from the launching op's shapes (`data/shapes.toml`), not measured.
pub(super) fn from_shapes(s: &KernelSample) -> bool {
    s.extra.get("bytes_source").and_then(|v| v.as_str()) == Some("shapes")
}
