//! hipfire's `hipfire.kernel_atlas.v0` rows ↔ `katlas.row.v1`.
//!
//! Two writers produce v0 rows: the Python Atlas (`scripts/kernel_atlas.py`, full rows with
//! `workload`, provenance, env and status) and the Rust `hipfire-atlas` crate
//! (`AtlasRow`, written by `bench_qwen35_mq4 --emit-atlas` and `hipfire-atlas parse-bench`):
//! no `workload`, `captured_at_utc`, provenance or status, `run_index` often `null`, and
//! string-valued metrics (`kv_mode`, `arch`, `model_path`). Both import.
//!
//! The converter takes fields out of the source object as it maps them;
//! whatever remains, at any depth, is kept under `extra` by its dotted path,
//! so no field is ever lost:
//!
//! - a mapped field whose value is `null` keeps that `null` under `extra` (katlas's model
//!   would otherwise read it as absent);
//! - string-valued metrics become row `params` (the run's string attributes); a string under
//!   a key whose suffix names a unit (`gen_tok_s`, `avg_ms`) is refused as a bad number;
//!   booleans, arrays and objects under metrics are kept under `extra` as `metrics.<key>`;
//! - what the model cannot say about the source's spelling is noted under
//!   `extra["katlas.v0_source"]`: `absent` lists the dotted paths katlas filled in that the
//!   source lacked (a derived `workload`, `captured_at_utc`, `status` …) and `integers` the
//!   numbers the source wrote as integers that katlas holds as `f64`.
//!
//! [`export::export_v0`] writes a row back as a v0 document; for an imported row it gives back
//! the source document (same fields, same values, same JSON number kinds).

pub mod export;
pub mod isa;

use crate::identity::{Device, FileDigest};
use crate::row::{format_unix_utc, unit_for_metric_key, KernelSample, Metric, OpClass, Origin, Route, Row, RunError, Status};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub use export::export_v0;

pub const HIPFIRE_V0: &str = "hipfire.kernel_atlas.v0";

/// Key under a row's `extra` noting what katlas's model cannot hold about the v0 source
/// (`{"absent": [dotted paths], "integers": [dotted paths]}`).
pub const V0_SOURCE_KEY: &str = "katlas.v0_source";

/// 1 GiB/s in GB/s.
pub(crate) const GIB_TO_GB: f64 = 1.073_741_824;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ImportError {
    #[error("not a JSON object")]
    NotObject,
    #[error("field `schema`: expected \"{HIPFIRE_V0}\", found {0}")]
    WrongSchema(String),
    #[error("field `{field}`: {reason}")]
    Field { field: String, reason: String },
}

fn field_err(field: &str, reason: impl Into<String>) -> ImportError {
    ImportError::Field { field: field.into(), reason: reason.into() }
}

/// A string field; a `null` is recorded in `nulls` under `null_key`.
fn take_str(m: &mut Map<String, Value>, key: &str, path: &str, nulls: &mut BTreeMap<String, Value>, null_key: &str) -> Result<Option<String>, ImportError> {
    match m.remove(key) {
        None => Ok(None),
        Some(Value::Null) => {
            nulls.insert(null_key.to_string(), Value::Null);
            Ok(None)
        }
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(field_err(&join(path, key), format!("expected a string, found {other}"))),
    }
}

/// A number field; a `null` is recorded in `nulls` under `null_key`. The flag says the
/// source wrote it as an integer.
fn take_num(
    m: &mut Map<String, Value>,
    key: &str,
    path: &str,
    nulls: &mut BTreeMap<String, Value>,
    null_key: &str,
) -> Result<Option<(f64, bool)>, ImportError> {
    match m.remove(key) {
        None => Ok(None),
        Some(Value::Null) => {
            nulls.insert(null_key.to_string(), Value::Null);
            Ok(None)
        }
        Some(Value::Number(n)) => Ok(n.as_f64().map(|x| (x, !n.is_f64()))),
        Some(other) => Err(field_err(&join(path, key), format!("expected a number, found {other}"))),
    }
}

/// An object field. `null` and `{}` are kept whole under `extra[null_key]` (the exporter
/// writes a mapped object only when it has something in it); `None` when there is nothing to map.
fn take_obj(
    m: &mut Map<String, Value>,
    key: &str,
    path: &str,
    extra: &mut BTreeMap<String, Value>,
    null_key: &str,
) -> Result<Option<Map<String, Value>>, ImportError> {
    match m.remove(key) {
        None => Ok(None),
        Some(Value::Null) => {
            extra.insert(null_key.to_string(), Value::Null);
            Ok(None)
        }
        Some(Value::Object(o)) if o.is_empty() => {
            extra.insert(null_key.to_string(), Value::Object(o));
            Ok(None)
        }
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(other) => Err(field_err(&join(path, key), format!("expected an object, found {other}"))),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Put every remaining field of `m` under `extra` at `path.key`.
fn keep_rest(extra: &mut BTreeMap<String, Value>, path: &str, m: Map<String, Value>) {
    for (k, v) in m {
        extra.insert(join(path, &k), v);
    }
}

/// The spelling notes collected while converting (see [`V0_SOURCE_KEY`]).
#[derive(Default)]
struct Notes {
    absent: Vec<String>,
    integers: Vec<String>,
}

impl Notes {
    fn mark_absent(&mut self, path: impl Into<String>) {
        self.absent.push(path.into());
    }
    fn number(&mut self, path: impl Into<String>, v: Option<(f64, bool)>) -> Option<f64> {
        let (x, int) = v?;
        if int {
            self.integers.push(path.into());
        }
        Some(x)
    }
}

/// The workload of a row that names none (hipfire's Rust `AtlasRow` has no `workload`):
/// the model file's stem (`/models/qwen3.5-9b.mq4` → `qwen3.5-9b`, as the Python Atlas names
/// workloads after models), else `workload_kind`, else `hipfire`.
fn derived_workload(m: &Map<String, Value>) -> String {
    let model_path = m
        .get("metrics")
        .and_then(|x| x.get("model_path"))
        .or_else(|| m.get("model").and_then(|x| x.get("path")))
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    if let Some(stem) = model_path.and_then(|p| std::path::Path::new(p).file_stem()).map(|s| s.to_string_lossy().to_string()) {
        return stem;
    }
    match m.get("workload_kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() => k.to_string(),
        _ => "hipfire".into(),
    }
}

/// Convert one v0 document. `origin_file`/`line` are recorded on the row.
pub fn import_v0(doc: Value, origin_file: Option<&str>, line: Option<u64>) -> Result<Row, ImportError> {
    let Value::Object(mut m) = doc else { return Err(ImportError::NotObject) };
    match m.remove("schema") {
        Some(Value::String(s)) if s == HIPFIRE_V0 => {}
        Some(other) => return Err(ImportError::WrongSchema(other.to_string())),
        None => return Err(ImportError::WrongSchema("nothing".into())),
    }
    let mut notes = Notes::default();
    let mut extra: BTreeMap<String, Value> = BTreeMap::new();
    // String attributes the Rust writer puts among the metrics (`set_metric_str`).
    let metric_str = |key: &str| m.get("metrics").and_then(|x| x.get(key)).and_then(Value::as_str).map(str::to_string);
    let metric_arch = metric_str("arch");
    let metric_model = metric_str("model_path");
    let metric_model_bytes = m.get("metrics").and_then(|x| x.get("model_bytes")).and_then(Value::as_u64);

    let workload = match take_str(&mut m, "workload", "", &mut extra, "workload")? {
        Some(w) => w,
        None => {
            notes.mark_absent("workload");
            derived_workload(&m)
        }
    };
    let phase = take_str(&mut m, "phase", "", &mut extra, "phase")?.ok_or_else(|| field_err("phase", "missing"))?;
    let mut row = Row::new(workload, phase);
    row.extra = extra;
    let extra = &mut row.extra;
    row.origin = Some(Origin { kind: "import".into(), schema: Some(HIPFIRE_V0.into()), file: origin_file.map(str::to_string), line, ..Default::default() });
    row.workload_kind = take_str(&mut m, "workload_kind", "", extra, "workload_kind")?;
    row.shape_bucket = take_str(&mut m, "shape_bucket", "", extra, "shape_bucket")?;
    row.arch = take_str(&mut m, "arch", "", extra, "arch")?;
    row.quant = take_str(&mut m, "quant", "", extra, "quant")?;
    match take_str(&mut m, "captured_at_utc", "", extra, "captured_at_utc")? {
        Some(t) => row.captured_at = t,
        None => {
            notes.mark_absent("captured_at_utc");
            // The Rust writer's prefill row carries a Unix time instead (kept under extra).
            if let Some(t) = m.get("captured_at_unix_s").and_then(Value::as_i64).and_then(format_unix_utc) {
                row.captured_at = t;
            }
        }
    }
    match take_num(&mut m, "run_index", "", extra, "run_index")? {
        // `null` (the Rust writer's `Option<u32>` unset) or absent: katlas's default, 1.
        None => notes.mark_absent("run_index"),
        Some((ri, _)) => {
            if ri < 0.0 || ri.fract() != 0.0 || ri > u32::MAX as f64 {
                return Err(field_err("run_index", format!("expected a non-negative integer, found {ri}")));
            }
            row.run_index = ri as u32;
        }
    }
    match m.remove("command") {
        None => {}
        Some(Value::Null) => {
            extra.insert("command".into(), Value::Null);
        }
        Some(Value::Array(a)) if a.is_empty() => {
            extra.insert("command".into(), Value::Array(a));
        }
        Some(Value::Array(a)) => {
            for (i, v) in a.into_iter().enumerate() {
                match v {
                    Value::String(s) => row.command.push(s),
                    other => return Err(field_err(&format!("command[{i}]"), format!("expected a string, found {other}"))),
                }
            }
        }
        Some(Value::String(s)) => {
            // A shell string: katlas's argv runs it through sh; the string is kept as written.
            row.command = vec!["sh".into(), "-c".into(), s.clone()];
            extra.insert("command".into(), Value::String(s));
        }
        Some(other) => return Err(field_err("command", format!("expected an array, found {other}"))),
    }

    let mut arch_source = "hipfire row";
    if row.arch.is_none() {
        if let Some(a) = metric_arch {
            // The Rust writer records the arch only as `metrics.arch`.
            notes.mark_absent("arch");
            arch_source = "hipfire row metrics.arch";
            row.arch = Some(a);
        }
    }
    if let Some(arch) = &row.arch {
        row.identity.devices.push(Device {
            index: 0,
            vendor: if arch.starts_with("gfx") { "amd" } else { "nvidia" }.into(),
            arch: Some(arch.clone()),
            arch_source: Some(arch_source.into()),
            ..Default::default()
        });
    }
    row.identity.host.hostname = take_str(&mut m, "hostname", "", extra, "hostname")?;
    if let Some(sha) = take_str(&mut m, "git_sha", "", extra, "git_sha")? {
        // hipfire records the short form; a full hash fills both.
        if sha.len() == 40 {
            row.identity.source.commit_short = Some(sha[..7].to_string());
            row.identity.source.commit = Some(sha);
        } else {
            row.identity.source.commit_short = Some(sha);
        }
    }

    if let Some(mut prov) = take_obj(&mut m, "provenance", "", extra, "provenance")? {
        row.identity.source.dirty = match prov.remove("git_dirty") {
            None => None,
            Some(Value::Null) => {
                extra.insert("provenance.git_dirty".into(), Value::Null);
                None
            }
            Some(Value::Bool(b)) => Some(b),
            Some(other) => return Err(field_err("provenance.git_dirty", format!("expected a boolean, found {other}"))),
        };
        row.identity.source.diff_md5 = take_str(&mut prov, "diff_md5", "provenance", extra, "provenance.diff_md5")?;
        let bin_md5 = take_str(&mut prov, "binary_md5", "provenance", extra, "provenance.binary_md5")?;
        let bin_path = take_str(&mut prov, "binary_path", "provenance", extra, "provenance.binary_path")?;
        if bin_md5.is_some() || bin_path.is_some() {
            row.identity.binary = Some(FileDigest { path: bin_path, md5: bin_md5, ..Default::default() });
        }
        keep_rest(extra, "provenance", prov);
    }

    if let Some(mut model) = take_obj(&mut m, "model", "", extra, "model")? {
        let model_md5 = take_str(&mut model, "md5", "model", extra, "model.md5")?;
        let model_path = take_str(&mut model, "path", "model", extra, "model.path")?;
        if model_md5.is_some() || model_path.is_some() {
            row.identity.model = Some(FileDigest { path: model_path, md5: model_md5, ..Default::default() });
        }
        keep_rest(extra, "model", model);
    }
    if row.identity.model.is_none() {
        if let Some(p) = metric_model {
            // The Rust writer records the model only as `metrics.model_path`/`model_bytes`.
            notes.mark_absent("model");
            row.identity.model = Some(FileDigest { path: Some(p), size: metric_model_bytes, ..Default::default() });
        }
    }

    if let Some(mut variant) = take_obj(&mut m, "variant", "", extra, "variant")? {
        if let Some(env) = take_obj(&mut variant, "env", "variant", extra, "variant.env")? {
            for (k, v) in env {
                let s = match &v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => (if *b { "1" } else { "0" }).to_string(),
                    other => return Err(field_err(&format!("variant.env.{k}"), format!("expected a string, found {other}"))),
                };
                if !v.is_string() {
                    // katlas's env is strings; the value is kept as written.
                    extra.insert(format!("variant.env.{k}"), v);
                }
                if k.starts_with("HIPFIRE_PROFILE") {
                    row.variant.instrumentation.push(k.clone());
                }
                row.variant.env.insert(k, s);
            }
        }
        keep_rest(extra, "variant", variant);
    }

    match m.remove("metrics") {
        None => notes.mark_absent("metrics"),
        Some(Value::Null) => {
            notes.mark_absent("metrics");
            extra.insert("metrics".into(), Value::Null);
        }
        Some(Value::Object(metrics)) => {
            for (k, v) in metrics {
                let path = format!("metrics.{k}");
                let unit = unit_for_metric_key(&k);
                match v {
                    Value::Number(n) => {
                        let x = n.as_f64().ok_or_else(|| field_err(&path, "not representable"))?;
                        if !n.is_f64() {
                            notes.integers.push(path);
                        }
                        row.metrics.insert(k.clone(), Metric::from_key(&k, x));
                    }
                    Value::Null => {
                        extra.insert(path, Value::Null);
                    }
                    // A unit-bearing name holds a number: a string there is a bad value.
                    other if unit.is_some() => return Err(field_err(&path, format!("expected a number, found {other}"))),
                    // hipfire's Rust writer: `set_metric_str("kv_mode", …)`, `arch`, `model_path`.
                    Value::String(s) => {
                        row.params.insert(k, s);
                    }
                    other => {
                        extra.insert(path, other);
                    }
                }
            }
        }
        Some(other) => return Err(field_err("metrics", format!("expected an object, found {other}"))),
    }

    match m.remove("artifacts") {
        None => notes.mark_absent("artifacts"),
        Some(Value::Null) => {
            notes.mark_absent("artifacts");
            extra.insert("artifacts".into(), Value::Null);
        }
        Some(Value::Object(mut artifacts)) => {
            // An empty or null list stays in the artefacts as written.
            match artifacts.get("profile_kernels") {
                Some(Value::Array(list)) if !list.is_empty() => {
                    let Some(Value::Array(list)) = artifacts.remove("profile_kernels") else { unreachable!() };
                    for (i, item) in list.into_iter().enumerate() {
                        let k = import_kernel(item, &format!("artifacts.profile_kernels[{i}]"), &mut notes)?;
                        row.kernels.push(k);
                    }
                }
                None | Some(Value::Null) | Some(Value::Array(_)) => {}
                Some(_) => return Err(field_err("artifacts.profile_kernels", "expected an array")),
            }
            match artifacts.get("runtime_route") {
                Some(Value::Object(o)) if !o.is_empty() => {
                    let Some(Value::Object(route_obj)) = artifacts.remove("runtime_route") else { unreachable!() };
                    // hipfire derives its route from flags and KV policy unless it says otherwise.
                    let basis = match route_obj.get("route_confidence").and_then(Value::as_str) {
                        Some("observed") => "observed",
                        _ => "inferred",
                    };
                    let mut route = Route { basis: basis.into(), ..Default::default() };
                    route.attributes = route_obj.into_iter().collect();
                    route.kernels_seen = row.kernels.iter().map(|k| k.name.clone()).collect();
                    route.env_requested = row.variant.env.clone();
                    row.route = Some(route);
                }
                None | Some(Value::Null) | Some(Value::Object(_)) => {}
                Some(other) => return Err(field_err("artifacts.runtime_route", format!("expected an object, found {other}"))),
            }
            if let (Some(Value::String(p)), md5) = (artifacts.get("prompt_file").cloned(), artifacts.get("prompt_md5")) {
                row.identity.prompt = Some(FileDigest { path: Some(p), md5: md5.and_then(Value::as_str).map(str::to_string), ..Default::default() });
            }
            // The rest of the artefacts (DFlash draft/target, KV mode, prompt, ISA and dispatch
            // manifests) are kept whole.
            row.artifacts = artifacts.into_iter().collect();
        }
        Some(other) => return Err(field_err("artifacts", format!("expected an object, found {other}"))),
    }

    let status = match m.remove("status") {
        None => {
            notes.mark_absent("status");
            None
        }
        Some(Value::Null) => {
            notes.mark_absent("status");
            extra.insert("status".into(), Value::Null);
            None
        }
        Some(Value::String(s)) => Some(s),
        Some(other) => return Err(field_err("status", format!("expected \"ok\" or \"error\", found {other}"))),
    };
    let stderr_tail = take_str(&mut m, "stderr_tail", "", extra, "stderr_tail")?;
    row.status = match status.as_deref() {
        Some("ok") | None => Status::Ok,
        Some("error") => Status::Error,
        Some(other) => return Err(field_err("status", format!("expected \"ok\" or \"error\", found \"{other}\""))),
    };
    if row.status == Status::Error || stderr_tail.is_some() {
        row.error = Some(RunError { stderr_tail, ..Default::default() });
    }
    keep_rest(extra, "", m);
    if !notes.absent.is_empty() || !notes.integers.is_empty() {
        let mut n = Map::new();
        if !notes.absent.is_empty() {
            n.insert("absent".into(), notes.absent.into());
        }
        if !notes.integers.is_empty() {
            n.insert("integers".into(), notes.integers.into());
        }
        extra.insert(V0_SOURCE_KEY.into(), Value::Object(n));
    }
    Ok(row)
}

fn import_kernel(item: Value, path: &str, notes: &mut Notes) -> Result<KernelSample, ImportError> {
    let Value::Object(mut k) = item else { return Err(field_err(path, "expected an object")) };
    let mut x: BTreeMap<String, Value> = BTreeMap::new();
    let name = take_str(&mut k, "name", path, &mut x, "name")?.ok_or_else(|| field_err(&join(path, "name"), "missing"))?;
    let mut s = KernelSample { name, ..Default::default() };
    match take_num(&mut k, "calls", path, &mut x, "calls")? {
        Some((c, _)) => s.calls = c.max(0.0) as u64,
        None => notes.mark_absent(join(path, "calls")),
    }
    match k.remove("total_ms") {
        Some(Value::Number(n)) => {
            s.total_us = n.as_f64().unwrap_or(0.0) * 1000.0;
            // Keep the reported figure exactly as hipfire printed it.
            x.insert("total_ms".into(), Value::Number(n));
        }
        Some(Value::Null) => {
            x.insert("total_ms".into(), Value::Null);
        }
        None => notes.mark_absent(join(path, "total_ms")),
        Some(other) => return Err(field_err(&join(path, "total_ms"), format!("expected a number, found {other}"))),
    }
    let avg = take_num(&mut k, "avg_us", path, &mut x, "avg_us")?;
    s.avg_us = notes.number(join(path, "avg_us"), avg);
    let pct = take_num(&mut k, "pct", path, &mut x, "pct")?;
    s.share_pct = notes.number(join(path, "pct"), pct);
    match k.remove("gib_s") {
        Some(Value::Number(n)) => {
            s.achieved_gbps = n.as_f64().map(|g| g * GIB_TO_GB);
            // Keep the reported figure exactly as hipfire printed it.
            x.insert("gib_s".into(), Value::Number(n));
        }
        Some(Value::Null) => {
            x.insert("gib_s".into(), Value::Null);
        }
        None => {}
        Some(other) => return Err(field_err(&join(path, "gib_s"), format!("expected a number, found {other}"))),
    }
    let op_path = join(path, "op");
    if let Some(mut op) = take_obj(&mut k, "op", path, &mut x, "op")? {
        let mut part = |op: &mut Map<String, Value>, key: &str, x: &mut BTreeMap<String, Value>| -> Result<String, ImportError> {
            match take_str(op, key, &op_path, x, &format!("op.{key}"))? {
                Some(v) => Ok(v),
                None => {
                    notes.mark_absent(join(&op_path, key));
                    Ok(String::new())
                }
            }
        };
        let family = part(&mut op, "family", &mut x)?;
        let role = part(&mut op, "role", &mut x)?;
        let phase_hint = take_str(&mut op, "phase_hint", &op_path, &mut x, "op.phase_hint")?;
        s.op = Some(OpClass { family, role, phase_hint, rule: Some("hipfire".into()) });
        for (kk, v) in op {
            x.insert(format!("op.{kk}"), v);
        }
    }
    for (kk, v) in k {
        x.insert(kk, v);
    }
    s.extra = x;
    Ok(s)
}

/// Whether a JSON document looks like a hipfire v0 row.
pub fn is_v0(doc: &Value) -> bool {
    doc.get("schema").and_then(Value::as_str) == Some(HIPFIRE_V0)
}

impl katlas_fs::class::Classify for ImportError {
    fn class(&self) -> katlas_fs::class::Class {
        katlas_fs::class::Class::Input
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_schema_named() {
        let e = import_v0(json!({"schema": "x"}), None, None).unwrap_err();
        assert!(e.to_string().contains("schema"));
    }

    #[test]
    fn bad_metric_names_field() {
        let e = import_v0(json!({"schema": HIPFIRE_V0, "workload": "w", "phase": "p", "metrics": {"gen_tok_s": "fast"}}), None, None).unwrap_err();
        assert!(e.to_string().contains("metrics.gen_tok_s"), "{e}");
    }

    #[test]
    fn unknown_fields_kept() {
        let r = import_v0(
            json!({"schema": HIPFIRE_V0, "workload": "w", "phase": "p", "new_thing": {"a": 1},
                   "provenance": {"extra_digest": "abc"}}),
            None,
            None,
        )
        .unwrap();
        assert_eq!(r.extra["new_thing"], json!({"a": 1}));
        assert_eq!(r.extra["provenance.extra_digest"], json!("abc"));
    }
}
