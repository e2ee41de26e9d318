//! Export to hipfire's `hipfire.kernel_atlas.isa.v0` document shape, so tools written for
//! hipfire's atlas can read a katlas scan. The shape (top-level counts, per-object
//! `bundle_targets`/`amdhsa_target`/`instruction_summary`, and the 13 kernel fields hipfire
//! keeps) follows hipfire's `kernel_atlas` script; katlas fills it from its own parse.
//!
//! Category counts are hipfire's (its `isa_category`), so its fit view lanes and rules count
//! what its own manifest would: an AMD object's opcodes are classed by hipfire's rule
//! ([`peer_isa_category`]), which differs from katlas's split — every `s_` opcode that is no
//! scalar load, branch or `s_waitcnt` is its `salu` (`s_code_end` padding, `s_delay_alu`,
//! `s_clause`, `s_nop`, `s_endpgm`, gfx12's `s_wait_*`), any opcode holding `dot` is `dot`.
//! Without opcode counts (or for NVIDIA) katlas's categories are renamed ([`peer_category`]):
//! `vmem_load` and `vmem_store` are hipfire's one `vmem`. katlas's own split is kept beside them
//! as `katlas_category_counts`, which hipfire ignores.

use crate::manifest::{CodeObject, IsaManifest, MixStatus, Vendor};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "hipfire.kernel_atlas.isa.v0";

/// The category names hipfire's `isa_category` gives (`scripts/kernel_atlas.py`).
pub const PEER_CATEGORIES: [&str; 11] = ["matrix", "dot", "vmem", "smem", "lds", "branch", "wait", "salu", "valu", "export", "other"];

/// hipfire's name for a katlas category (the categories of `category::amd_category` and
/// `category::sass_category`); a name hipfire has no counterpart for is its `other`.
pub fn peer_category(katlas: &str) -> &'static str {
    match katlas {
        "vmem_load" | "vmem_store" | "vmem" | "scratch_load" | "scratch_store" => "vmem",
        "matrix" => "matrix",
        "dot" => "dot",
        "smem" => "smem",
        "lds" => "lds",
        "branch" => "branch",
        "wait" => "wait",
        "salu" => "salu",
        "valu" => "valu",
        "export" => "export",
        _ => "other",
    }
}

/// hipfire's `isa_category(opcode)` (scripts/kernel_atlas.py), rule for rule and in its order.
pub fn peer_isa_category(op: &str) -> &'static str {
    if op.contains("mfma") || op.contains("wmma") {
        "matrix"
    } else if op.contains("dot") {
        "dot"
    } else if ["global_", "buffer_", "flat_", "scratch_"].iter().any(|p| op.starts_with(p)) {
        "vmem"
    } else if op.starts_with("s_load") || op.starts_with("s_buffer") {
        "smem"
    } else if op.starts_with("ds_") {
        "lds"
    } else if op.starts_with("s_cbranch") || op.starts_with("s_branch") || op.ends_with("branch") {
        "branch"
    } else if op.starts_with("s_waitcnt") {
        "wait"
    } else if op.starts_with("s_") {
        "salu"
    } else if op.starts_with("v_") {
        "valu"
    } else if op.starts_with("exp") {
        "export"
    } else {
        "other"
    }
}

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
    let mut katlas_categories: BTreeMap<String, u64> = BTreeMap::new();
    let mut total = 0u64;
    let mut symbols = Vec::new();
    for k in &o.kernels {
        if let Some(m) = &k.mix {
            total += m.total;
            symbols.push(k.name.clone());
            for (a, b) in &m.opcodes {
                *opcodes.entry(a.to_string()).or_default() += b;
            }
            // Every instruction has its opcode counted: class them as hipfire's script would.
            let by_opcode = o.vendor == Vendor::Amd && !m.opcodes.is_empty() && m.opcodes.values().sum::<u64>() == m.total;
            if by_opcode {
                for (a, b) in &m.opcodes {
                    *categories.entry(peer_isa_category(a).to_string()).or_default() += b;
                }
            }
            for (a, b) in &m.categories {
                if !by_opcode {
                    *categories.entry(peer_category(a).to_string()).or_default() += b;
                }
                *katlas_categories.entry(a.to_string()).or_default() += b;
            }
        }
    }
    let bundle_target = o.chain.iter().find_map(|c| c.strip_prefix("bundle[").and_then(|s| s.strip_suffix(']')).map(str::to_string));
    let mut tool_errors: Vec<String> = o.warnings.clone();
    if let Some(s @ (MixStatus::Failed(_) | MixStatus::Absent(_))) = &o.mix_status {
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
            "katlas_category_counts": katlas_categories,
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
