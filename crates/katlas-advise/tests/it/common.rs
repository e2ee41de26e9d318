#![allow(dead_code)]
//! Shared helpers: the hipfire fixture rows and a small ISA manifest.

use katlas_model::Row;
use std::path::PathBuf;

/// The repository's fixtures/.
pub fn shared() -> PathBuf {
    katlas_testkit::repo_root().join("fixtures")
}

/// The profiled decode row of `hipfire/atlas_rows_v0.jsonl` (line 1).
pub fn decode_row() -> Row {
    let p = shared().join("hipfire/atlas_rows_v0.jsonl");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (the repository's fixtures/ are required)", p.display()));
    let line = text.lines().next().expect("first line");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    katlas_model::hipfire::import_v0(v, Some(&p.display().to_string()), Some(1)).unwrap()
}

/// The fit of `row` alone: no ISA manifest, product or arch given, the built-in arch database.
pub fn row_fit(row: &Row, rules: &katlas_advise::Rules) -> katlas_advise::FitView {
    katlas_advise::build_fit(&katlas_advise::FitInput {
        row: Some(row),
        isa: None,
        product: None,
        arch: None,
        db: katlas_arch::ArchDb::builtin(),
        rules,
        row_source: None,
    })
    .unwrap()
}

/// A katlas.isa.v1 manifest with gfx1201 and gfx1100 objects; `names` become gfx1201 kernels.
pub fn manifest_json(names: &[(&str, u32, u32, u32)]) -> serde_json::Value {
    let kernels: Vec<serde_json::Value> = names
        .iter()
        .map(|(n, vgpr, spill, lds)| {
            serde_json::json!({
                "name": n, "symbol": format!("{n}.kd"),
                "resources": {"vgpr": vgpr, "sgpr": 40, "vgpr_spill": spill, "sgpr_spill": 0, "lds_bytes": lds,
                              "scratch_bytes": if *spill > 0 { 64 } else { 0 }, "wave_size": 32, "max_workgroup_size": 256},
                "mix": {"total": 1000, "categories": {"valu": 600, "vmem_load": 100, "salu": 200, "lds": 50, "wait": 50},
                        "opcodes": {"global_load_b32": 80, "global_load_b128": 20, "v_fma_f32": 600}}
            })
        })
        .collect();
    serde_json::json!({
        "schema": "katlas.isa.v1", "created_at": "2026-11-30T00:00:00Z", "tool": "test", "tool_version": "0",
        "inputs": [], "errors": [], "disassemblers": [], "summary": {"files":1,"bytes":1,"objects":2,"kernels":1,"errors":0,"elapsed_ms":0},
        "objects": [
            {"path": "kernels.hsaco", "chain": ["kernels.hsaco"], "chain_text": "kernels.hsaco", "md5": "0", "size": 1,
             "vendor": "amd", "format": "amdgpu-elf", "target": "amdgcn-amd-amdhsa--gfx1201", "arch": "gfx1201", "kernels": kernels},
            {"path": "old.hsaco", "chain": ["old.hsaco"], "chain_text": "old.hsaco", "md5": "1", "size": 1,
             "vendor": "amd", "format": "amdgpu-elf", "target": "amdgcn-amd-amdhsa--gfx1100", "arch": "gfx1100",
             "kernels": [{"name": "fused_qkvza_hfq4g256", "symbol": "fused_qkvza_hfq4g256.kd", "resources": {"vgpr": 64}}]}
        ]
    })
}

pub fn write_manifest(dir: &std::path::Path, names: &[(&str, u32, u32, u32)]) -> PathBuf {
    let p = dir.join("isa.json");
    std::fs::write(&p, serde_json::to_string_pretty(&manifest_json(names)).unwrap()).unwrap();
    p
}
