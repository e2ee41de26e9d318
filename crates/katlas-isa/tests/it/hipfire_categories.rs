//! The instruction categories the hipfire export writes are the ones hipfire's own
//! `kernel_atlas.py` produces and reads (read from the repository's snapshot of the script).

use katlas_isa::hipfire::{export, peer_category, PEER_CATEGORIES};
use katlas_isa::manifest::{CodeObject, InstructionMix, IsaManifest};
use katlas_isa::oracle::{amd_category, sass_category};
use std::collections::BTreeSet;

/// hipfire's script, from the repository's snapshot of it.
fn peer_script() -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hipfire-tree/scripts/kernel_atlas.py");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (the repository's fixtures/ are required)", p.display()))
}

/// The body of `def NAME(...)` in the script, up to the next top-level `def`.
fn function<'a>(script: &'a str, name: &str) -> &'a str {
    let start = script.find(&format!("\ndef {name}(")).unwrap_or_else(|| panic!("kernel_atlas.py has no def {name}"));
    let rest = &script[start + 1..];
    let end = rest[1..].find("\ndef ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

/// Quoted names after `marker` in `text` (`return "vmem"`, `categories.get("vmem"`).
fn quoted_after(text: &str, marker: &str) -> BTreeSet<String> {
    text.match_indices(marker).filter_map(|(i, _)| text[i + marker.len()..].split('"').next().map(str::to_string)).collect()
}

/// Every opcode class katlas's categorisers produce, AMD and NVIDIA.
fn every_katlas_category() -> BTreeSet<&'static str> {
    let amd = [
        "v_mfma_f32_16x16x16f16",
        "v_wmma_f32_16x16x16_f16",
        "v_dot2_f32_f16",
        "ds_read_b32",
        "global_load_dwordx4",
        "global_store_dword",
        "buffer_atomic_add",
        "image_sample",
        "s_load_dwordx2",
        "s_cbranch_scc1",
        "s_waitcnt",
        "s_wait_loadcnt",
        "s_barrier",
        "s_nop",
        "s_endpgm",
        "s_mov_b32",
        "v_add_f32",
        "exp",
        "tbuffer_load_format_x",
        "scratch_store_dword",
    ];
    let nv = ["HMMA", "IDP4A", "LDG", "STG", "LDC", "LDS", "BRA", "BAR", "NOP", "UIADD3", "FFMA"];
    amd.iter().map(|o| amd_category(o)).chain(nv.iter().map(|o| sass_category(o))).collect()
}

#[test]
fn exported_categories_are_the_peers() {
    let script = peer_script();
    // kernel_atlas.py `isa_category` (the names its manifests hold) and
    // `observed_category_counts` (the names its fit view and rules read).
    let produced = quoted_after(function(&script, "isa_category"), "return \"");
    let read = quoted_after(function(&script, "observed_category_counts"), "categories.get(\"");
    assert!(read.contains("vmem") && produced.contains("vmem"), "peer script changed: produced {produced:?}, read {read:?}");
    assert_eq!(produced, PEER_CATEGORIES.iter().map(|s| s.to_string()).collect(), "PEER_CATEGORIES no longer matches isa_category");

    // A kernel whose mix holds every category katlas ever writes.
    let cats = every_katlas_category();
    assert!(cats.contains("vmem_load") && cats.contains("vmem_store"), "{cats:?}");
    let mut m: IsaManifest = serde_json::from_value(serde_json::json!({
        "schema": "katlas.isa.v1", "created_at": "2026-01-01T00:00:00Z", "tool": "katlas", "tool_version": "0", "inputs": [],
        "objects": [], "errors": [], "disassemblers": [], "summary": {"files": 0, "bytes": 0, "objects": 0, "kernels": 0, "errors": 0, "elapsed_ms": 0}
    }))
    .unwrap_or_else(|e| panic!("minimal manifest: {e}"));
    let mut o: CodeObject = serde_json::from_value(serde_json::json!({
        "path": "k.hsaco", "chain": ["k.hsaco", "elf"], "chain_text": "k.hsaco › elf", "md5": "0", "size": 0, "vendor": "amd",
        "format": "amdgpu-elf", "target": "amdgcn-amd-amdhsa--gfx1100", "arch": "gfx1100", "kernels": [
            {"name": "k", "symbol": "k.kd", "resources": {}}
        ]
    }))
    .unwrap_or_else(|e| panic!("minimal object: {e}"));
    let mut mix = InstructionMix::default();
    for (i, c) in cats.iter().enumerate() {
        mix.categories.insert(std::borrow::Cow::Borrowed(*c), i as u64 + 1);
        mix.total += i as u64 + 1;
    }
    o.kernels[0].mix = Some(mix);
    m.objects.push(o);
    let h = export(&m);
    let summary = &h["objects"][0]["instruction_summary"];
    let exported: BTreeSet<String> = summary["category_counts"].as_object().unwrap().keys().cloned().collect();
    for c in &exported {
        assert!(produced.contains(c), "exported category `{c}` is not one of hipfire's ({produced:?})");
    }
    // Every katlas category but `other` lands on a name the peer's fit view reads.
    for c in cats.iter().filter(|c| **c != "other") {
        assert!(read.contains(peer_category(c)), "katlas `{c}` → `{}`, which observed_category_counts never reads", peer_category(c));
    }
    // hipfire's vmem also holds the flat-scratch traffic katlas counts apart
    let ours = |c: &str| summary["katlas_category_counts"][c].as_u64().unwrap_or(0);
    let vmem = ours("vmem_load") + ours("vmem_store") + ours("scratch_load") + ours("scratch_store");
    assert_eq!(summary["category_counts"]["vmem"].as_u64(), Some(vmem), "{summary}");
    let sum: u64 = summary["category_counts"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(sum, summary["instruction_count"].as_u64().unwrap(), "renaming neither drops nor doubles a count");

    // With every opcode counted, hipfire's own rule classes them: the padding, delays and
    // clauses katlas files under `other`/`salu` are all hipfire's `salu`.
    let ops = ["s_code_end", "s_delay_alu", "s_clause", "s_nop", "s_endpgm", "s_wait_loadcnt", "s_waitcnt", "v_dot2_f32_f16", "global_load_b128", "s_load_b64"];
    let mut mix = InstructionMix::default();
    for (i, op) in ops.iter().enumerate() {
        mix.opcodes.insert(std::borrow::Cow::Borrowed(*op), i as u64 + 1);
        *mix.categories.entry(std::borrow::Cow::Borrowed(amd_category(op))).or_default() += i as u64 + 1;
        mix.total += i as u64 + 1;
    }
    m.objects[0].kernels[0].mix = Some(mix);
    let h = export(&m);
    let c = &h["objects"][0]["instruction_summary"]["category_counts"];
    assert_eq!(c["salu"], 1 + 2 + 3 + 4 + 5 + 6, "{c}");
    assert_eq!((c["wait"].as_u64(), c["dot"].as_u64(), c["vmem"].as_u64(), c["smem"].as_u64()), (Some(7), Some(8), Some(9), Some(10)), "{c}");
    assert!(c.get("other").is_none(), "{c}");
}
