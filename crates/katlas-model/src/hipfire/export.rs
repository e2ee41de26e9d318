//! `katlas.row.v1` → `hipfire.kernel_atlas.v0`: the inverse of [`super::import_v0`].
//!
//! The document has the shape hipfire's Python Atlas writes (`base_metadata` plus the
//! phase fields of `ar_rows_from_metrics`/`dflash_row_from_metrics` in
//! `scripts/kernel_atlas.py`): `schema`, `workload`, `phase`, `captured_at_utc`, `run_index`,
//! `status`, `metrics` and `artifacts` always; `workload_kind`, `shape_bucket`, `arch`,
//! `quant`, `hostname`, `git_sha`, `command`, `model`, `provenance`, `variant.env` and
//! `stderr_tail` when the row has them (never `null` for an unknown string: hipfire's Rust
//! `AtlasRow` refuses a `null` `workload_kind`, `quant` or `shape_bucket`).
//!
//! For a row imported from v0 the export gives the source document back: the fields the
//! importer mapped are written from the row, the ones it kept under `extra` are put back at
//! their dotted paths, `extra["katlas.v0_source"]` says which mapped fields the source lacked
//! (not written) and which numbers it wrote as integers. Row params (string attributes) go
//! back among the metrics as strings, as hipfire's Rust writer records them.
//!
//! A row katlas measured itself is written as hipfire's rules read it: its AR `decode` phase is
//! hipfire's `decode_ar`, and metrics of the run's other phase (hipfire's SUMMARY line lands on
//! katlas's prefill and decode rows alike) go under `katlas_other_phase_metrics`, so hipfire
//! picks the phase's own rate.
//!
//! Keys are sorted at every level, as `json.dumps(row, sort_keys=True)` writes them.

use super::{GIB_TO_GB, HIPFIRE_V0, V0_SOURCE_KEY};
use crate::row::{KernelSample, Row, Status};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The v0 document of one row.
pub fn export_v0(row: &Row) -> Value {
    let notes = row.extra.get(V0_SOURCE_KEY);
    let list = |key: &str| -> HashSet<&str> {
        notes.and_then(|n| n.get(key)).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
    };
    let absent = list("absent");
    let integers = list("integers");
    let imported = row.origin.as_ref().and_then(|o| o.schema.as_deref()) == Some(HIPFIRE_V0);
    let mut doc = Map::new();
    let mut put = |key: &str, v: Value| {
        if !absent.contains(key) {
            doc.insert(key.to_string(), v);
        }
    };

    put("schema", HIPFIRE_V0.into());
    put("workload", row.workload.clone().into());
    put("phase", if imported { row.phase.clone() } else { peer_phase(row) }.into());
    put("captured_at_utc", row.captured_at.clone().into());
    put("run_index", row.run_index.into());
    if let Some(v) = &row.workload_kind {
        put("workload_kind", v.clone().into());
    }
    if let Some(v) = &row.shape_bucket {
        put("shape_bucket", v.clone().into());
    }
    if let Some(v) = row.arch.as_deref().or_else(|| row.identity.arch()) {
        put("arch", v.into());
    }
    if let Some(v) = &row.quant {
        put("quant", v.clone().into());
    }
    if !row.command.is_empty() {
        put("command", row.command.clone().into());
    }
    if let Some(h) = &row.identity.host.hostname {
        put("hostname", h.clone().into());
    }
    let src = &row.identity.source;
    if let Some(sha) = src.commit.as_ref().or(src.commit_short.as_ref()) {
        put("git_sha", sha.clone().into());
    }

    let mut prov = Map::new();
    if let Some(b) = &row.identity.binary {
        if let Some(p) = &b.path {
            prov.insert("binary_path".into(), p.clone().into());
        }
        if let Some(m) = &b.md5 {
            prov.insert("binary_md5".into(), m.clone().into());
        }
    }
    if let Some(d) = src.dirty {
        prov.insert("git_dirty".into(), d.into());
    }
    if let Some(d) = &src.diff_md5 {
        prov.insert("diff_md5".into(), d.clone().into());
    }
    if !prov.is_empty() {
        put("provenance", Value::Object(prov));
    }
    if let Some(md) = &row.identity.model {
        let mut model = Map::new();
        if let Some(p) = &md.path {
            model.insert("path".into(), p.clone().into());
        }
        if let Some(m) = &md.md5 {
            model.insert("md5".into(), m.clone().into());
        }
        if !model.is_empty() {
            put("model", Value::Object(model));
        }
    }
    if !row.variant.env.is_empty() {
        let env: Map<String, Value> = row.variant.env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        put("variant", serde_json::json!({ "env": env }));
    }

    let mut metrics = Map::new();
    let mut elsewhere = Map::new();
    for (k, m) in &row.metrics {
        let v = number(m.value, integers.contains(format!("metrics.{k}").as_str()));
        // hipfire judges a row by the first of gen_tok_s, decode_tok_s, prefill_tok_s among its
        // metrics (`preferred_metric_for_row`): the other phase's numbers a katlas row carries
        // (hipfire's SUMMARY is on both rows) stay beside them, where its rules do not look.
        if !imported && other_phase(row, k) {
            elsewhere.insert(k.clone(), v);
        } else {
            metrics.insert(k.clone(), v);
        }
    }
    if !elsewhere.is_empty() {
        put(OTHER_PHASE_KEY, Value::Object(elsewhere));
    }
    for (k, v) in &row.params {
        metrics.entry(k.clone()).or_insert_with(|| Value::String(v.clone()));
    }
    put("metrics", Value::Object(metrics));

    let mut artifacts: Map<String, Value> = row.artifacts.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if !row.kernels.is_empty() {
        let list: Vec<Value> = row.kernels.iter().enumerate().map(|(i, k)| kernel(i, k, &absent, &integers, imported)).collect();
        artifacts.insert("profile_kernels".into(), Value::Array(list));
    }
    if let Some(route) = &row.route {
        let mut r: Map<String, Value> = route.attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if !imported {
            r.entry("route_confidence").or_insert_with(|| route.basis.clone().into());
        }
        artifacts.insert("runtime_route".into(), Value::Object(r));
    }
    if let Some(p) = &row.identity.prompt {
        if !artifacts.contains_key("prompt_file") {
            if let Some(path) = &p.path {
                artifacts.insert("prompt_file".into(), path.clone().into());
                artifacts.insert("prompt_md5".into(), p.md5.clone().into());
            }
        }
    }
    put("artifacts", Value::Object(artifacts));

    put("status", if row.status == Status::Error { "error" } else { "ok" }.into());
    if let Some(t) = row.error.as_ref().and_then(|e| e.stderr_tail.as_ref().or(e.message.as_ref())) {
        put("stderr_tail", t.clone().into());
    }
    if row.pass != "measured" {
        // hipfire has no warmup rows; say so rather than pass one off as a measurement.
        put("pass", row.pass.clone().into());
    }

    for (k, v) in &row.extra {
        if k != V0_SOURCE_KEY {
            overlay_row(&mut doc, k, v.clone());
        }
    }
    sorted(Value::Object(doc))
}

/// Where the export keeps a row's metrics of the other phase of its run.
pub const OTHER_PHASE_KEY: &str = "katlas_other_phase_metrics";

/// The keys of the bench's `SUMMARY` line (bench_qwen35_mq4.rs) by the phase hipfire's own rows
/// give them (its `--emit-atlas` rows, kernel_atlas.py `ar_rows_from_metrics`); katlas's
/// `hipfire-bench` rows carry the whole line on both phases.
const BENCH_DECODE_KEYS: [&str; 4] = ["gen_tok_s", "bw_gib_s", "avg_ms", "p50_ms"];
const BENCH_PREFILL_KEYS: [&str; 5] = ["prefill_tok_s", "prefill_tok_s_kernel", "prefill_kernel_ms", "startup_overhead_ms", "cold_overhead_pct"];

/// A metric of the row's run that measures its other phase.
fn other_phase(row: &Row, key: &str) -> bool {
    if crate::row::other_phase_metric(&row.phase, key) {
        return true;
    }
    let bench = row.origin.as_ref().is_some_and(|o| o.parsers.iter().any(|p| p == "hipfire-bench"));
    bench
        && match crate::row::PhaseKind::of(&row.phase) {
            crate::row::PhaseKind::Prefill => BENCH_DECODE_KEYS.contains(&key),
            crate::row::PhaseKind::Decode => BENCH_PREFILL_KEYS.contains(&key),
            crate::row::PhaseKind::Other => false,
        }
}

/// hipfire's phase name for a katlas row's: its rules and renderer test for `decode_ar`
/// (`decode_dflash` for DFlash) where katlas's AR workloads say `decode`.
fn peer_phase(row: &Row) -> String {
    match row.phase.as_str() {
        "decode" if row.workload_kind.as_deref() == Some("dflash") => "decode_dflash".into(),
        "decode" => "decode_ar".into(),
        p => p.to_string(),
    }
}

/// hipfire's `classify_kernel_op(name)` (scripts/kernel_atlas.py), rule for rule:
/// `(family, role, phase_hint)`. Its suggestion rules test these roles (`qkvza_projection`,
/// `rope_rotate`, `normalization`, `residual_gemv` …), not katlas's op classes.
pub fn peer_kernel_op(name: &str) -> (&'static str, &'static str, &'static str) {
    let l = name.to_lowercase();
    let has = |s: &str| l.contains(s);
    if has("fused_qkvza") {
        ("attention", "qkvza_projection", "prefill/decode")
    } else if has("fused_qkv") {
        ("attention", "qkv_projection", "prefill/decode")
    } else if has("qk_l2_norm") {
        ("attention", "qk_norm_scale", "decode")
    } else if has("attention_flash") || has("flash") {
        ("attention", "flash_attention", "prefill/decode")
    } else if has("kv_cache") {
        ("attention", "kv_cache", "decode")
    } else if has("rope") || has("rotate") {
        ("position", "rope_rotate", "prefill/decode")
    } else if has("rmsnorm") || has("norm") {
        ("norm", "normalization", "prefill/decode")
    } else if has("gate_up") {
        ("mlp", "gate_up_projection", "prefill/decode")
    } else if has("swiglu") {
        ("mlp", "swiglu", "prefill/decode")
    } else if has("gemv") && has("residual") {
        ("linear", "residual_gemv", "decode")
    } else if has("gemv") && has("multirow") {
        ("linear", "multirow_gemv", "decode")
    } else if has("gemv") {
        ("linear", "gemv", "decode")
    } else if has("gemm") && has("residual") {
        ("linear", "residual_gemm", "prefill")
    } else if has("gemm") {
        ("linear", "gemm", "prefill")
    } else {
        ("unknown", "unknown", "unknown")
    }
}

/// One `artifacts.profile_kernels[i]` entry, in the Python Atlas's units (ms, GiB/s, percent).
/// A kernel katlas measured carries hipfire's `op` (what its rules read) and katlas's own
/// classification as `katlas_op`; an imported one its own `op` back.
fn kernel(i: usize, k: &KernelSample, absent: &HashSet<&str>, integers: &HashSet<&str>, imported: bool) -> Value {
    let path = |f: &str| format!("artifacts.profile_kernels[{i}].{f}");
    let has = |set: &HashSet<&str>, f: &str| set.contains(path(f).as_str());
    let mut m = Map::new();
    m.insert("name".into(), k.name.clone().into());
    if !has(absent, "calls") {
        m.insert("calls".into(), k.calls.into());
    }
    // An imported figure is kept as printed under extra; a katlas row's is converted.
    if !k.extra.contains_key("total_ms") && !has(absent, "total_ms") {
        m.insert("total_ms".into(), number(k.total_us / 1000.0, false));
    }
    if let Some(a) = k.avg_us {
        m.insert("avg_us".into(), number(a, has(integers, "avg_us")));
    }
    if let Some(p) = k.share_pct {
        m.insert("pct".into(), number(p, has(integers, "pct")));
    }
    if let (false, Some(g)) = (k.extra.contains_key("gib_s"), k.achieved_gbps) {
        m.insert("gib_s".into(), number(g / GIB_TO_GB, false));
    }
    if let Some(op) = &k.op {
        let mut o = Map::new();
        if !has(absent, "op.family") {
            o.insert("family".into(), op.family.clone().into());
        }
        if !has(absent, "op.role") {
            o.insert("role".into(), op.role.clone().into());
        }
        if let Some(h) = &op.phase_hint {
            o.insert("phase_hint".into(), h.clone().into());
        }
        m.insert(if imported { "op" } else { "katlas_op" }.into(), Value::Object(o));
    }
    if !imported {
        let (family, role, phase_hint) = peer_kernel_op(&k.name);
        m.insert("op".into(), serde_json::json!({ "family": family, "role": role, "phase_hint": phase_hint }));
    }
    for (key, v) in &k.extra {
        match key.strip_prefix("op.") {
            Some(rest) => nested(&mut m, &["op"], rest, v.clone()),
            None => {
                m.insert(key.clone(), v.clone());
            }
        }
    }
    Value::Object(m)
}

/// Put an `extra` entry back at its dotted path: `provenance.K`, `model.K`, `variant.env.K`,
/// `variant.K` and `metrics.K` are nested (the importer's paths); any other key is top-level
/// as written (unknown top-level fields, which may contain dots themselves).
fn overlay_row(doc: &mut Map<String, Value>, key: &str, v: Value) {
    for (prefix, parents) in [
        ("variant.env.", &["variant", "env"][..]),
        ("provenance.", &["provenance"][..]),
        ("model.", &["model"][..]),
        ("variant.", &["variant"][..]),
        ("metrics.", &["metrics"][..]),
    ] {
        if let Some(rest) = key.strip_prefix(prefix) {
            nested(doc, parents, rest, v);
            return;
        }
    }
    doc.insert(key.to_string(), v);
}

fn nested(doc: &mut Map<String, Value>, parents: &[&str], key: &str, v: Value) {
    let mut cur = doc;
    for p in parents {
        let slot = cur.entry(p.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(o) = slot else { unreachable!() };
        cur = o;
    }
    cur.insert(key.to_string(), v);
}

/// A JSON number: an integer where the source wrote one (and the value is whole), else a
/// float; not-a-number is `null`, as serde_json and hipfire's `Value::from(f64)` write it.
fn number(x: f64, integer: bool) -> Value {
    if integer && x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
        return if x >= 0.0 { Value::from(x as u64) } else { Value::from(x as i64) };
    }
    serde_json::Number::from_f64(x).map(Value::Number).unwrap_or(Value::Null)
}

/// Keys sorted at every level.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut pairs: Vec<(String, Value)> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}
