//! `katlas.row.v1`: one measured run of one phase of one workload.

use crate::identity::Identity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub const ROW_SCHEMA: &str = "katlas.row.v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Always `katlas.row.v1`.
    pub schema: String,
    /// Unique row id (random, assigned at capture or import).
    pub id: String,
    /// RFC 3339 UTC capture time.
    pub captured_at: String,
    pub workload: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_kind: Option<String>,
    /// Phase of the workload this row measures (`prefill`, `decode`, `decode_ar` …).
    pub phase: String,
    /// Shape bucket used to match comparable evidence (`pp128_gen50`, `4096x4096`).
    #[serde(default)]
    pub shape_bucket: Option<String>,
    /// 1-based index of the run within its collection.
    #[serde(default)]
    pub run_index: u32,
    /// `measured` or `warmup`.
    #[serde(default = "default_pass")]
    pub pass: String,
    /// Arch atom the row ran on (`gfx1201`, `sm_90`).
    #[serde(default)]
    pub arch: Option<String>,
    /// Quantisation of the weights, when the workload has one (`mq4`, `hfq4g256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant: Option<String>,
    /// Parameter-matrix values of this run (`prefill = 128`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// The argv that ran, when a process ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default)]
    pub identity: Identity,
    #[serde(default)]
    pub variant: Variant,
    /// Named numbers with units.
    #[serde(default)]
    pub metrics: BTreeMap<String, Metric>,
    /// Per-kernel samples of this phase, hottest first when known.
    #[serde(default)]
    pub kernels: Vec<KernelSample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// Other run artefacts (draft model, KV mode, profiler files) kept whole.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifacts: BTreeMap<String, Value>,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// Where the row came from (collector, import, lab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// Fields the importer did not map, kept under their original dotted paths.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
}

fn default_pass() -> String {
    "measured".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Error,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunError {
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
    /// Human-readable cause (`missing metric decode_tok_s`, `killed by SIGSEGV`).
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub stderr_tail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_tail: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Environment the run was asked to use.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names in `env` that only switch on instrumentation (profiling); eval strips them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instrumentation: Vec<String>,
    /// The command without the profiler's arguments and wrapper, when `command` ran with
    /// them (`katlas collect --profile`): what a measurement must run instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plain_command: Vec<String>,
    /// Declared variant knobs (what an A/B is allowed to differ in).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

impl Metric {
    pub fn new(value: f64, unit: Option<&str>) -> Self {
        Self { value, unit: unit.map(str::to_string) }
    }
    /// A metric whose unit is inferred from hipfire-style key suffixes.
    pub fn from_key(key: &str, value: f64) -> Self {
        Self::new(value, unit_for_metric_key(key))
    }
}

/// Which part of an inference run a phase name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    Prefill,
    Decode,
    Other,
}

impl PhaseKind {
    /// `prefill`, `pp128` → prefill; `decode`, `decode_ar`, `decode_dflash`, `gen…`, `tg…` → decode.
    pub fn of(phase: &str) -> PhaseKind {
        let p = phase.to_ascii_lowercase();
        if p.contains("prefill") || p.starts_with("pp") {
            PhaseKind::Prefill
        } else if p.contains("decode") || p.starts_with("gen") || p.starts_with("tg") {
            PhaseKind::Decode
        } else {
            PhaseKind::Other
        }
    }
}

/// Whether metric `key` measures the other part of the run than `phase`: one bench prints both
/// (hipfire's SUMMARY line lands on its prefill row and its decode row alike), and a prefill row
/// is not judged by `gen_tok_s`, nor a decode row by `prefill_tok_s`.
pub fn other_phase_metric(phase: &str, key: &str) -> bool {
    match PhaseKind::of(phase) {
        PhaseKind::Prefill => key.starts_with("gen_") || key.starts_with("decode_"),
        PhaseKind::Decode => key.starts_with("prefill_"),
        PhaseKind::Other => false,
    }
}

/// Unit implied by a metric key's suffix, following hipfire's naming
/// (`gen_tok_s`, `avg_ms`, `bw_gib_s`). Unknown suffixes give `None`.
pub fn unit_for_metric_key(key: &str) -> Option<&'static str> {
    const SUFFIXES: &[(&str, &str)] = &[
        // Before `_s`: a bare `tok_s` is a rate, not seconds.
        ("tok_s", "tok/s"),
        ("tok_per_s", "tok/s"),
        ("_gib_s", "GiB/s"),
        ("_gb_s", "GB/s"),
        ("_gbps", "GB/s"),
        ("_tflops", "TFLOP/s"),
        ("_ms", "ms"),
        ("_us", "us"),
        ("_ns", "ns"),
        ("_s", "s"),
        ("_pct", "%"),
        ("_bytes", "B"),
        ("_tokens", "tokens"),
    ];
    SUFFIXES.iter().find(|(s, _)| key.ends_with(s)).map(|(_, u)| *u)
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KernelSample {
    /// Name as the profiler or code object gives it (mangled when it is).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    #[serde(default)]
    pub calls: u64,
    /// Total GPU time over all calls, microseconds.
    #[serde(default)]
    pub total_us: f64,
    #[serde(default)]
    pub avg_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_us: Option<f64>,
    /// Share of the phase's GPU time, percent.
    #[serde(default)]
    pub share_pct: Option<f64>,
    /// Bytes moved per call, when known (lab, counters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    /// Floating-point operations per call, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// Achieved bandwidth, GB/s (decimal), as reported or derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<[u32; 3]>,
    /// Shared memory / LDS per block, bytes (static + dynamic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpClass>,
    /// Raw profiler counters by their profiler name (ncu metric names, rocprof counters).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpClass {
    pub family: String,
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_hint: Option<String>,
    /// Name of the classification rule that matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// The kernel route a run took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// `observed` (kernel names seen in the profile), `reported` (printed by the
    /// workload) or `inferred` (derived from flags; weakest).
    pub basis: String,
    /// Route attributes (attention implementation, KV mode, graph blobs …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Value>,
    /// Kernel names seen in this phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels_seen: Vec<String>,
    /// Env the run asked for, to set beside what ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_requested: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// `collect`, `import`, `lab`, `parse`.
    pub kind: String,
    /// Schema of the source document when imported (`hipfire.kernel_atlas.v0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Directory of the run's full output (`.katlas/runs/<id>/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parsers: Vec<String>,
}

impl Row {
    /// A new row with a fresh id and capture time, status ok, nothing measured yet.
    pub fn new(workload: impl Into<String>, phase: impl Into<String>) -> Self {
        Self {
            schema: ROW_SCHEMA.into(),
            id: new_id(),
            captured_at: now_rfc3339(),
            workload: workload.into(),
            workload_kind: None,
            phase: phase.into(),
            shape_bucket: None,
            run_index: 1,
            pass: default_pass(),
            arch: None,
            quant: None,
            params: BTreeMap::new(),
            command: Vec::new(),
            identity: Identity::default(),
            variant: Variant::default(),
            metrics: BTreeMap::new(),
            kernels: Vec::new(),
            route: None,
            artifacts: BTreeMap::new(),
            status: Status::Ok,
            error: None,
            origin: None,
            extra: BTreeMap::new(),
        }
    }

    pub fn metric(&self, key: &str) -> Option<f64> {
        self.metrics.get(key).map(|m| m.value)
    }

    /// Total GPU time of the row's kernels, microseconds.
    pub fn kernel_total_us(&self) -> f64 {
        self.kernels.iter().map(|k| k.total_us).sum()
    }

    /// Fill `share_pct` and `avg_us` where missing, from totals and calls.
    pub fn fill_kernel_shares(&mut self) {
        let total = self.kernel_total_us();
        for k in &mut self.kernels {
            if k.share_pct.is_none() && total > 0.0 {
                k.share_pct = Some(100.0 * k.total_us / total);
            }
            if k.avg_us.is_none() && k.calls > 0 {
                k.avg_us = Some(k.total_us / k.calls as f64);
            }
        }
    }
}

/// A random 128-bit id, hex; ids need uniqueness, not order.
pub fn new_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out = String::with_capacity(32);
    for salt in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(d.as_nanos());
        }
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// Current UTC time as RFC 3339 with seconds precision (`2025-05-14T09:12:44Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A Unix time (seconds) as [`now_rfc3339`] writes times; `None` beyond the years chrono
/// represents (about ±262,000), which no capture time is.
pub fn format_unix_utc(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_from_suffix() {
        assert_eq!(unit_for_metric_key("gen_tok_s"), Some("tok/s"));
        assert_eq!(unit_for_metric_key("tok_s"), Some("tok/s"), "a bare tok_s is a rate, not seconds");
        assert_eq!(unit_for_metric_key("bw_gib_s"), Some("GiB/s"));
        assert_eq!(unit_for_metric_key("avg_ms"), Some("ms"));
        assert_eq!(unit_for_metric_key("elapsed_s"), Some("s"));
        assert_eq!(unit_for_metric_key("tau"), None);
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(format_unix_utc(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix_utc(1_747_213_964).unwrap(), "2025-05-14T09:12:44Z");
        assert_eq!(format_unix_utc(951_782_400).unwrap(), "2000-02-29T00:00:00Z");
        assert_eq!(format_unix_utc(-1).unwrap(), "1969-12-31T23:59:59Z");
        assert_eq!(format_unix_utc(i64::MAX), None);
        let now = now_rfc3339();
        assert!(now.len() == 20 && now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
    }

    #[test]
    fn ids_are_unique() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|i| i.len() == 32));
    }

    #[test]
    fn shares_filled_from_totals() {
        let mut r = Row::new("w", "decode");
        r.kernels.push(KernelSample { name: "a".into(), calls: 4, total_us: 300.0, ..Default::default() });
        r.kernels.push(KernelSample { name: "b".into(), calls: 1, total_us: 100.0, ..Default::default() });
        r.fill_kernel_shares();
        assert_eq!(r.kernels[0].share_pct, Some(75.0));
        assert_eq!(r.kernels[0].avg_us, Some(75.0));
    }

    #[test]
    fn unknown_field_rejected() {
        let mut v = serde_json::to_value(Row::new("w", "p")).unwrap();
        v["bogus"] = serde_json::json!(1);
        let err = serde_json::from_value::<Row>(v).unwrap_err().to_string();
        assert!(err.contains("bogus"), "{err}");
    }
}
