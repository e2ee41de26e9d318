//! hipfire's ISA manifest (`hipfire.kernel_atlas.isa.v0`, written by `collect_isa_manifest`
//! and `inspect_isa_object` in `scripts/kernel_atlas.py`) as a `katlas.isa.v1` document, so
//! `katlas fit --isa` reads either.
//!
//! hipfire's shape: `{schema, captured_at_utc, arch, object_count, kernel_count,
//! instruction_count, objects: [{path, md5, bundle_targets, bundle_target, amdhsa_target,
//! kernels: [{name, symbol, vgpr_count, sgpr_count, vgpr_spill_count, sgpr_spill_count,
//! group_segment_fixed_size, private_segment_fixed_size, kernarg_segment_size,
//! max_flat_workgroup_size, wavefront_size, …}], instruction_summary: {instruction_count,
//! kernel_symbols, opcode_counts, category_counts}, tool_errors}]}`.
//!
//! What changes on the way:
//! - kernel fields take katlas's names (`vgpr_count` → `resources.vgpr`,
//!   `group_segment_fixed_size` → `lds_bytes`, `private_segment_fixed_size` → `scratch_bytes`,
//!   `wavefront_size` → `wave_size`, `max_flat_workgroup_size` → `max_workgroup_size`, …);
//! - the arch atom comes from `amdhsa_target` (`amdgcn-amd-amdhsa--gfx1100` → `gfx1100`), else
//!   the bundle target, else the manifest's `arch`;
//! - hipfire counts instructions per object, not per kernel: an object with one kernel gives
//!   that kernel the mix; with several, no kernel gets one (the object-level counts would
//!   be wrong for each) and `mix_status` says why;
//! - categories take katlas's names: hipfire's `vmem` splits into `vmem_store` (opcodes with
//!   `_store`/`_atomic`) and `vmem_load` (the rest) using the opcode counts, `export` is
//!   katlas's `other`; the other names (`matrix`, `dot`, `valu`, `salu`, `smem`, `lds`,
//!   `branch`, `wait`, `other`) are shared.

use serde_json::{json, Map, Value};

pub const HIPFIRE_ISA_V0: &str = "hipfire.kernel_atlas.isa.v0";
/// The katlas manifest schema the conversion produces.
pub const KATLAS_ISA_V1: &str = "katlas.isa.v1";

/// hipfire kernel field → katlas `resources` field.
const RESOURCES: [(&str, &str); 8] = [
    ("vgpr_count", "vgpr"),
    ("sgpr_count", "sgpr"),
    ("vgpr_spill_count", "vgpr_spill"),
    ("sgpr_spill_count", "sgpr_spill"),
    ("group_segment_fixed_size", "lds_bytes"),
    ("private_segment_fixed_size", "scratch_bytes"),
    ("wavefront_size", "wave_size"),
    ("max_flat_workgroup_size", "max_workgroup_size"),
];

/// Whether a JSON document is a hipfire ISA manifest.
pub fn is_isa_v0(doc: &Value) -> bool {
    doc.get("schema").and_then(Value::as_str) == Some(HIPFIRE_ISA_V0)
}

/// The atom of a target triple or bundle id: `amdgcn-amd-amdhsa--gfx90a:xnack-` → `gfx90a`.
fn atom_of(target: &str) -> Option<String> {
    let tail = target.rsplit("--").next()?;
    let atom = tail.split(':').next()?.trim();
    (atom.starts_with("gfx") || atom.starts_with("sm_")).then(|| atom.to_string())
}

fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// Convert a hipfire ISA manifest; an error names the first field that is not the shape
/// hipfire writes (`objects[2].kernels`).
pub fn to_katlas_isa(doc: &Value) -> Result<Value, String> {
    if !is_isa_v0(doc) {
        return Err(format!("field `schema`: expected `{HIPFIRE_ISA_V0}`"));
    }
    let manifest_arch = field(doc, "arch").and_then(Value::as_str).filter(|a| *a != "unknown");
    let objects = match field(doc, "objects") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err("field `objects`: expected an array".into()),
    };
    let mut out = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let at = |f: &str| format!("objects[{i}].{f}");
        if !o.is_object() {
            return Err(format!("field `objects[{i}]`: expected an object"));
        }
        let path = field(o, "path").and_then(Value::as_str).unwrap_or_default().to_string();
        let bundle = field(o, "bundle_target").and_then(Value::as_str);
        let arch = field(o, "amdhsa_target")
            .and_then(Value::as_str)
            .and_then(atom_of)
            .or_else(|| bundle.and_then(atom_of))
            .or_else(|| manifest_arch.map(str::to_string))
            .unwrap_or_default();
        let summary = field(o, "instruction_summary").cloned().unwrap_or_else(|| json!({}));
        let counts = |f: &str| -> Result<Map<String, Value>, String> {
            match field(&summary, f) {
                None => Ok(Map::new()),
                Some(Value::Object(m)) => Ok(m.clone()),
                Some(_) => Err(format!("field `{}`: expected an object", at(&format!("instruction_summary.{f}")))),
            }
        };
        let opcodes = counts("opcode_counts")?;
        let categories = katlas_categories(&counts("category_counts")?, &opcodes);
        let total = field(&summary, "instruction_count").and_then(Value::as_u64).unwrap_or(0);
        let mut kernels: Vec<Value> = match field(o, "kernels") {
            None => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(format!("field `{}`: expected an array", at("kernels"))),
        };
        if kernels.is_empty() {
            // No metadata (readobj failed): the disassembly's symbols still name the kernels.
            let symbols = field(&summary, "kernel_symbols").and_then(Value::as_array).cloned().unwrap_or_default();
            kernels = symbols.iter().filter_map(Value::as_str).map(|s| json!({ "name": s.split(".kd").next().unwrap_or(s) })).collect();
        }
        let has_mix = total > 0 || !opcodes.is_empty();
        let tool_errors: Vec<String> =
            field(o, "tool_errors").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
        let mix_status = match (has_mix, kernels.len()) {
            (false, _) if !tool_errors.is_empty() => format!("failed:{}", tool_errors[0]),
            (false, _) => "absent:hipfire instruction_summary is empty".to_string(),
            (true, 1) => "disassembled:llvm-objdump (hipfire kernel_atlas.py)".to_string(),
            (true, n) => format!("object-level:hipfire counts one instruction summary for {n} kernels; no per-kernel mix"),
        };
        let mix = json!({ "total": total.max(categories.values().filter_map(Value::as_u64).sum()), "categories": categories, "opcodes": opcodes });
        let single = kernels.len() == 1;
        let mut ks = Vec::new();
        for (j, k) in kernels.iter().enumerate() {
            let symbol = field(k, "symbol").and_then(Value::as_str).unwrap_or_default().to_string();
            let name = match field(k, "name").and_then(Value::as_str) {
                Some(n) => n.to_string(),
                None if !symbol.is_empty() => symbol.split(".kd").next().unwrap_or(&symbol).to_string(),
                None => return Err(format!("field `{}`: missing (and no symbol)", at(&format!("kernels[{j}].name")))),
            };
            let mut resources = Map::new();
            for (theirs, ours) in RESOURCES {
                // hipfire parses non-integer scalars as strings: only integers are resources.
                if let Some(n) = field(k, theirs).and_then(Value::as_u64) {
                    resources.insert(ours.into(), n.into());
                }
            }
            let mut kernel = json!({ "name": name, "symbol": symbol, "resources": resources });
            if single && has_mix {
                kernel["mix"] = mix.clone();
            }
            ks.push(kernel);
        }
        let chain_text = match bundle {
            Some(b) => format!("{path} › bundle[{b}]"),
            None => path.clone(),
        };
        out.push(json!({
            "path": path,
            "chain_text": chain_text,
            "md5": field(o, "md5").and_then(Value::as_str).unwrap_or_default(),
            "vendor": if arch.starts_with("sm_") { "nvidia" } else { "amd" },
            "arch": arch,
            "kernels": ks,
            "mix_status": mix_status,
        }));
    }
    Ok(json!({
        "schema": KATLAS_ISA_V1,
        "converted_from": HIPFIRE_ISA_V0,
        "created_at": field(doc, "captured_at_utc").cloned().unwrap_or(Value::Null),
        "objects": out,
    }))
}

/// hipfire's category counts under katlas's category names (see the module docs).
fn katlas_categories(theirs: &Map<String, Value>, opcodes: &Map<String, Value>) -> Map<String, Value> {
    let mut out: std::collections::BTreeMap<String, u64> = Default::default();
    for (name, n) in theirs {
        let n = n.as_u64().unwrap_or(0);
        match name.as_str() {
            "vmem" => {
                // hipfire's vmem prefixes (isa_category): global_, buffer_, flat_, scratch_.
                let vmem_op = |op: &str| ["global_", "buffer_", "flat_", "scratch_"].iter().any(|p| op.starts_with(p));
                let stores: u64 =
                    opcodes.iter().filter(|(op, _)| vmem_op(op) && (op.contains("_store") || op.contains("_atomic"))).filter_map(|(_, c)| c.as_u64()).sum();
                let loads: u64 =
                    opcodes.iter().filter(|(op, _)| vmem_op(op) && !op.contains("_store") && !op.contains("_atomic")).filter_map(|(_, c)| c.as_u64()).sum();
                if stores + loads == n {
                    *out.entry("vmem_load".into()).or_default() += loads;
                    *out.entry("vmem_store".into()).or_default() += stores;
                } else {
                    // Counts without their opcodes: which are stores is unknown, so say vmem.
                    *out.entry("vmem".into()).or_default() += n;
                }
            }
            "export" => *out.entry("other".into()).or_default() += n,
            other => *out.entry(other.to_string()).or_default() += n,
        }
    }
    out.into_iter().filter(|(_, n)| *n > 0).map(|(k, n)| (k, Value::from(n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmem_splits_by_opcode() {
        let cats: Map<String, Value> = serde_json::from_value(json!({"vmem": 3, "valu": 2, "export": 1})).unwrap();
        let ops: Map<String, Value> = serde_json::from_value(json!({"global_load_b128": 2, "global_store_b32": 1, "v_add_f32": 2, "exp": 1})).unwrap();
        let k = katlas_categories(&cats, &ops);
        assert_eq!(Value::Object(k), json!({"vmem_load": 2, "vmem_store": 1, "valu": 2, "other": 1}));
    }

    #[test]
    fn atoms_from_targets() {
        assert_eq!(atom_of("amdgcn-amd-amdhsa--gfx1100").as_deref(), Some("gfx1100"));
        assert_eq!(atom_of("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-").as_deref(), Some("gfx90a"));
        assert_eq!(atom_of("host-x86_64-unknown-linux"), None);
    }
}
