//! Converter from hipfire's `hipfire.kernel_atlas.v0` rows to `katlas.row.v1`.
//!
//! The converter takes fields out of the source object as it maps them;
//! whatever remains, at any depth, is kept under `extra` by its dotted path,
//! so no field is ever lost.

use crate::identity::{Device, FileDigest};
use crate::row::{KernelSample, Metric, OpClass, Origin, Route, Row, RunError, Status};
use serde_json::{Map, Value};

pub const HIPFIRE_V0: &str = "hipfire.kernel_atlas.v0";

/// 1 GiB/s in GB/s.
const GIB_TO_GB: f64 = 1.073_741_824;

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

fn take_str(m: &mut Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, ImportError> {
    match m.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(field_err(&join(path, key), format!("expected a string, found {other}"))),
    }
}

fn take_f64(m: &mut Map<String, Value>, key: &str, path: &str) -> Result<Option<f64>, ImportError> {
    match m.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(field_err(&join(path, key), format!("expected a number, found {other}"))),
    }
}

fn take_obj(m: &mut Map<String, Value>, key: &str, path: &str) -> Result<Map<String, Value>, ImportError> {
    match m.remove(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o),
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
fn keep_rest(extra: &mut std::collections::BTreeMap<String, Value>, path: &str, m: Map<String, Value>) {
    for (k, v) in m {
        extra.insert(join(path, &k), v);
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
    let workload = take_str(&mut m, "workload", "")?.ok_or_else(|| field_err("workload", "missing"))?;
    let phase = take_str(&mut m, "phase", "")?.ok_or_else(|| field_err("phase", "missing"))?;
    let mut row = Row::new(workload, phase);
    row.origin = Some(Origin { kind: "import".into(), schema: Some(HIPFIRE_V0.into()), file: origin_file.map(str::to_string), line, ..Default::default() });
    row.workload_kind = take_str(&mut m, "workload_kind", "")?;
    row.shape_bucket = take_str(&mut m, "shape_bucket", "")?;
    row.arch = take_str(&mut m, "arch", "")?;
    row.quant = take_str(&mut m, "quant", "")?;
    if let Some(t) = take_str(&mut m, "captured_at_utc", "")? {
        row.captured_at = t;
    }
    if let Some(ri) = take_f64(&mut m, "run_index", "")? {
        if ri < 0.0 || ri.fract() != 0.0 || ri > u32::MAX as f64 {
            return Err(field_err("run_index", format!("expected a non-negative integer, found {ri}")));
        }
        row.run_index = ri as u32;
    }
    match m.remove("command") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for (i, v) in a.into_iter().enumerate() {
                match v {
                    Value::String(s) => row.command.push(s),
                    other => return Err(field_err(&format!("command[{i}]"), format!("expected a string, found {other}"))),
                }
            }
        }
        Some(Value::String(s)) => row.command = vec!["sh".into(), "-c".into(), s],
        Some(other) => return Err(field_err("command", format!("expected an array, found {other}"))),
    }

    if let Some(arch) = &row.arch {
        row.identity.devices.push(Device {
            index: 0,
            vendor: if arch.starts_with("gfx") { "amd" } else { "nvidia" }.into(),
            arch: Some(arch.clone()),
            arch_source: Some("hipfire row".into()),
            ..Default::default()
        });
    }
    row.identity.host.hostname = take_str(&mut m, "hostname", "")?;
    if let Some(sha) = take_str(&mut m, "git_sha", "")? {
        // hipfire records the short form; a full hash fills both.
        if sha.len() == 40 {
            row.identity.source.commit_short = Some(sha[..7].to_string());
            row.identity.source.commit = Some(sha);
        } else {
            row.identity.source.commit_short = Some(sha);
        }
    }

    let mut prov = take_obj(&mut m, "provenance", "")?;
    row.identity.source.dirty = match prov.remove("git_dirty") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(b),
        Some(other) => return Err(field_err("provenance.git_dirty", format!("expected a boolean, found {other}"))),
    };
    row.identity.source.diff_md5 = take_str(&mut prov, "diff_md5", "provenance")?;
    let bin_md5 = take_str(&mut prov, "binary_md5", "provenance")?;
    let bin_path = take_str(&mut prov, "binary_path", "provenance")?;
    if bin_md5.is_some() || bin_path.is_some() {
        row.identity.binary = Some(FileDigest { path: bin_path, md5: bin_md5, ..Default::default() });
    }
    keep_rest(&mut row.extra, "provenance", prov);

    let mut model = take_obj(&mut m, "model", "")?;
    let model_md5 = take_str(&mut model, "md5", "model")?;
    let model_path = take_str(&mut model, "path", "model")?;
    if model_md5.is_some() || model_path.is_some() {
        row.identity.model = Some(FileDigest { path: model_path, md5: model_md5, ..Default::default() });
    }
    keep_rest(&mut row.extra, "model", model);

    let mut variant = take_obj(&mut m, "variant", "")?;
    for (k, v) in take_obj(&mut variant, "env", "variant")? {
        let s = match v {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => (if b { "1" } else { "0" }).to_string(),
            other => return Err(field_err(&format!("variant.env.{k}"), format!("expected a string, found {other}"))),
        };
        if k.starts_with("HIPFIRE_PROFILE") {
            row.variant.instrumentation.push(k.clone());
        }
        row.variant.env.insert(k, s);
    }
    keep_rest(&mut row.extra, "variant", variant);

    for (k, v) in take_obj(&mut m, "metrics", "")? {
        match v {
            Value::Number(n) => {
                let x = n.as_f64().ok_or_else(|| field_err(&format!("metrics.{k}"), "not representable"))?;
                row.metrics.insert(k.clone(), Metric::from_key(&k, x));
            }
            Value::Null => {
                row.extra.insert(format!("metrics.{k}"), Value::Null);
            }
            other => return Err(field_err(&format!("metrics.{k}"), format!("expected a number, found {other}"))),
        }
    }

    let mut artifacts = take_obj(&mut m, "artifacts", "")?;
    if let Some(pk) = artifacts.remove("profile_kernels") {
        let Value::Array(list) = pk else {
            return Err(field_err("artifacts.profile_kernels", "expected an array"));
        };
        for (i, item) in list.into_iter().enumerate() {
            row.kernels.push(import_kernel(item, &format!("artifacts.profile_kernels[{i}]"))?);
        }
    }
    let mut route_obj = take_obj(&mut artifacts, "runtime_route", "artifacts")?;
    if !route_obj.is_empty() {
        // hipfire derives its route from flags and KV policy unless it says otherwise.
        let basis = match route_obj.get("route_confidence").and_then(Value::as_str) {
            Some("observed") => "observed",
            _ => "inferred",
        };
        let mut route = Route { basis: basis.into(), ..Default::default() };
        route.attributes = std::mem::take(&mut route_obj).into_iter().collect();
        route.kernels_seen = row.kernels.iter().map(|k| k.name.clone()).collect();
        route.env_requested = row.variant.env.clone();
        row.route = Some(route);
    }
    if let (Some(Value::String(p)), md5) = (artifacts.get("prompt_file").cloned(), artifacts.get("prompt_md5")) {
        row.identity.prompt = Some(FileDigest { path: Some(p), md5: md5.and_then(Value::as_str).map(str::to_string), ..Default::default() });
    }
    // The rest of the artefacts (DFlash draft/target, KV mode, prompt) are kept whole.
    row.artifacts = artifacts.into_iter().collect();

    let status = take_str(&mut m, "status", "")?;
    let stderr_tail = take_str(&mut m, "stderr_tail", "")?;
    row.status = match status.as_deref() {
        Some("ok") | None => Status::Ok,
        Some("error") => Status::Error,
        Some(other) => return Err(field_err("status", format!("expected \"ok\" or \"error\", found \"{other}\""))),
    };
    if row.status == Status::Error || stderr_tail.is_some() {
        row.error = Some(RunError { stderr_tail, ..Default::default() });
    }
    keep_rest(&mut row.extra, "", m);
    Ok(row)
}

fn import_kernel(item: Value, path: &str) -> Result<KernelSample, ImportError> {
    let Value::Object(mut k) = item else { return Err(field_err(path, "expected an object")) };
    let name = take_str(&mut k, "name", path)?.ok_or_else(|| field_err(&join(path, "name"), "missing"))?;
    let mut s = KernelSample { name, ..Default::default() };
    s.calls = take_f64(&mut k, "calls", path)?.map(|c| c.max(0.0) as u64).unwrap_or(0);
    s.total_us = take_f64(&mut k, "total_ms", path)?.map(|t| t * 1000.0).unwrap_or(0.0);
    s.avg_us = take_f64(&mut k, "avg_us", path)?;
    s.share_pct = take_f64(&mut k, "pct", path)?;
    if let Some(g) = take_f64(&mut k, "gib_s", path)? {
        s.achieved_gbps = Some(g * GIB_TO_GB);
        // Keep the reported figure exactly as hipfire printed it.
        s.extra.insert("gib_s".into(), serde_json::json!(g));
    }
    let mut op = take_obj(&mut k, "op", path)?;
    if !op.is_empty() {
        let family = take_str(&mut op, "family", &join(path, "op"))?.unwrap_or_default();
        let role = take_str(&mut op, "role", &join(path, "op"))?.unwrap_or_default();
        let phase_hint = take_str(&mut op, "phase_hint", &join(path, "op"))?;
        s.op = Some(OpClass { family, role, phase_hint, rule: Some("hipfire".into()) });
        for (kk, v) in op {
            s.extra.insert(format!("op.{kk}"), v);
        }
    }
    for (kk, v) in k {
        s.extra.insert(kk, v);
    }
    Ok(s)
}

/// Whether a JSON document looks like a hipfire v0 row.
pub fn is_v0(doc: &Value) -> bool {
    doc.get("schema").and_then(Value::as_str) == Some(HIPFIRE_V0)
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
