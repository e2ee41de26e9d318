//! Export to hipfire's `hipfire.kernel_atlas.isa.v0` document shape, so tools written for
//! hipfire's atlas can read a katlas scan. The shape (top-level counts, per-object
//! `bundle_targets`/`amdhsa_target`/`instruction_summary`, and the 13 kernel fields hipfire
//! keeps) follows hipfire's `kernel_atlas` script; katlas fills it from its own parse.

use crate::manifest::{CodeObject, IsaManifest, Vendor};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "hipfire.kernel_atlas.isa.v0";

/// The kernel fields hipfire keeps, in its own names.
pub const KERNEL_FIELDS: [&str; 13] = [
    "name",
    "symbol",
    "group_segment_fixed_size",
    "private_segment_fixed_size",
    "kernarg_segment_size",
    "max_flat_workgroup_size",
    "sgpr_count",
    "sgpr_spill_count",
    "vgpr_count",
    "vgpr_spill_count",
    "wavefront_size",
    "workgroup_processor_mode",
    "uses_dynamic_stack",
];

fn object(o: &CodeObject) -> Value {
    let kernels: Vec<Value> = o
        .kernels
        .iter()
        .map(|k| {
            let mut m = Map::new();
            for f in KERNEL_FIELDS {
                let v = match (f, &k.amd) {
                    ("name", _) => Some(json!(k.name)),
                    ("symbol", _) => Some(json!(k.symbol)),
                    (_, Some(a)) => a.metadata.get(&format!(".{f}")).cloned(),
                    // NVIDIA objects: map the nearest equivalents
                    ("vgpr_count", None) => k.resources.vgpr.map(|x| json!(x)),
                    ("group_segment_fixed_size", None) => k.resources.lds_bytes.map(|x| json!(x)),
                    ("private_segment_fixed_size", None) => k.resources.scratch_bytes.map(|x| json!(x)),
                    ("kernarg_segment_size", None) => k.resources.kernarg_bytes.map(|x| json!(x)),
                    ("max_flat_workgroup_size", None) => k.resources.max_workgroup_size.map(|x| json!(x)),
                    ("wavefront_size", None) => k.resources.wave_size.map(|x| json!(x)),
                    _ => None,
                };
                if let Some(v) = v {
                    m.insert(f.to_string(), v);
                }
            }
            Value::Object(m)
        })
        .collect();
    let mut opcodes: BTreeMap<String, u64> = BTreeMap::new();
    let mut categories: BTreeMap<String, u64> = BTreeMap::new();
    let mut total = 0u64;
    let mut symbols = Vec::new();
    for k in &o.kernels {
        if let Some(m) = &k.mix {
            total += m.total;
            symbols.push(k.name.clone());
            for (a, b) in &m.opcodes {
                *opcodes.entry(a.to_string()).or_default() += b;
            }
            for (a, b) in &m.categories {
                *categories.entry(a.to_string()).or_default() += b;
            }
        }
    }
    let bundle_target = o.chain.iter().find_map(|c| c.strip_prefix("bundle[").and_then(|s| s.strip_suffix(']')).map(str::to_string));
    let mut tool_errors: Vec<String> = o.warnings.clone();
    if let Some(s) = o.mix_status.as_deref().filter(|s| s.starts_with("failed") || s.starts_with("absent")) {
        tool_errors.push(s.to_string());
    }
    json!({
        "path": o.path,
        "md5": o.md5,
        "bundle_targets": bundle_target.iter().collect::<Vec<_>>(),
        "bundle_target": bundle_target,
        "amdhsa_target": if o.vendor == Vendor::Amd { json!(o.target) } else { Value::Null },
        "kernels": kernels,
        "instruction_summary": {
            "instruction_count": total,
            "kernel_symbols": symbols,
            "opcode_counts": opcodes,
            "category_counts": categories,
        },
        "tool_errors": tool_errors,
        "katlas_chain": o.chain_text,
    })
}

pub fn export(m: &IsaManifest) -> Value {
    let objects: Vec<Value> = m.objects.iter().filter(|o| o.format != "ptx").map(object).collect();
    let kernel_count: usize = objects.iter().map(|o| o["kernels"].as_array().map_or(0, Vec::len)).sum();
    let instruction_count: u64 = objects.iter().map(|o| o["instruction_summary"]["instruction_count"].as_u64().unwrap_or(0)).sum();
    json!({
        "schema": SCHEMA,
        "captured_at_utc": m.created_at,
        "arch": m.arch_filter,
        "object_count": objects.len(),
        "kernel_count": kernel_count,
        "instruction_count": instruction_count,
        "objects": objects,
    })
}
