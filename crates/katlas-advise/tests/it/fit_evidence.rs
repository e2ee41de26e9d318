//! Rules fire only on their evidence (issue 17.5): the one-token GEMV rule needs M = 1 from
//! shapes, or a profiled GEMV/projection of an unbatched decode phase.

use crate::common;

use katlas_advise::isa::IsaManifest;
use katlas_advise::{build_fit, FitInput, Rules};
use katlas_arch::ArchDb;
use katlas_model::{KernelSample, OpClass, Row};

fn fit(row: Option<&Row>, isa: Option<&IsaManifest>, arch: Option<&str>, rules: &Rules) -> katlas_advise::FitView {
    build_fit(&FitInput { row, isa, product: None, arch, db: ArchDb::builtin(), rules, row_source: None }).unwrap()
}

fn fired(v: &katlas_advise::FitView, rule: &str) -> Vec<String> {
    v.kernels.iter().filter(|k| k.findings.iter().any(|f| f.rule == rule)).map(|k| k.name.clone()).collect()
}

#[test]
fn gemv_roofline_needs_one_token_evidence() {
    let rules = Rules::builtin().unwrap();
    // hipfire's decode row: the residual GEMV and the QKV projection are one-token GEMVs.
    let row = common::decode_row();
    let v = fit(Some(&row), None, None, &rules);
    assert_eq!(fired(&v, "gemv_roofline"), vec!["gemv_hfq4g256_residual", "fused_qkvza_hfq4g256"]);
    let f = v.kernels[0].findings.iter().find(|f| f.rule == "gemv_roofline").unwrap();
    assert!(f.text.contains("decode phase `decode_ar`"), "{}", f.text);

    // DFlash batched verify: WMMA GEMMs in a decode phase are not one-token GEMVs.
    let mut dflash = row.clone();
    dflash.phase = "decode_dflash".into();
    for k in &mut dflash.kernels {
        k.name = format!("{}_wmma_verify", k.name.replace("gemv", "gemm"));
    }
    assert!(fired(&fit(Some(&dflash), None, None, &rules), "gemv_roofline").is_empty());

    // ISA-only decode fit: no launch, no shapes: nothing to say it is a GEMV.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("isa.json");
    std::fs::write(&p, common::manifest_json(&[("gemv_hfq4g256_residual", 64, 0, 0), ("gemm_hfq4g256_wmma", 96, 0, 0)]).to_string()).unwrap();
    let m = IsaManifest::read(&p).unwrap();
    let mut no_profile = row.clone();
    no_profile.kernels.clear();
    let v = fit(Some(&no_profile), Some(&m), Some("gfx1201"), &rules);
    assert!(!v.kernels.is_empty());
    assert!(fired(&v, "gemv_roofline").is_empty(), "{:?}", fired(&v, "gemv_roofline"));

    // Shapes decide over names and phase: M = 64 is no GEMV even in decode; M = 1 is one in any phase.
    let mut shaped = row.clone();
    let mut k = KernelSample { name: "gemv_hfq4g256_residual".into(), calls: 10, total_us: 100.0, ..Default::default() };
    k.op = Some(OpClass { family: "linear".into(), role: "gemv".into(), ..Default::default() });
    k.extra.insert("shapes_m_max".into(), serde_json::json!(64.0));
    k.extra.insert("shapes_m1_calls".into(), serde_json::json!(0));
    shaped.kernels = vec![k.clone()];
    assert!(fired(&fit(Some(&shaped), None, None, &rules), "gemv_roofline").is_empty());
    k.extra.insert("shapes_m_max".into(), serde_json::json!(1.0));
    k.extra.insert("shapes_m1_calls".into(), serde_json::json!(10));
    shaped.kernels = vec![k];
    shaped.phase = "run".into();
    let v = fit(Some(&shaped), None, None, &rules);
    assert_eq!(fired(&v, "gemv_roofline"), vec!["gemv_hfq4g256_residual"]);
    assert!(v.kernels[0].findings.iter().any(|f| f.text.contains("M = 1 from shapes on all 10 calls")));
}

/// `katlas isa scan` of the committed CUDA fatbin (sm_80, sm_90, sm_90a; no disassembler):
/// its entries carry registers but no spill counts.
fn fatbin_manifest(dir: &std::path::Path) -> IsaManifest {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../katlas-isa/tests/fixtures/kernels.fatbin");
    let opts = katlas_isa::ScanOptions { disasm: katlas_isa::DisasmMode::Never, ..Default::default() };
    let mut m = katlas_isa::scan(&[src], opts).unwrap_or_else(|e| panic!("scan: {e:?}"));
    let p = dir.join("isa.json");
    let mut f = std::fs::File::create(&p).unwrap();
    katlas_isa::write_pretty(&mut m, &mut f).unwrap();
    IsaManifest::read(&p).unwrap()
}

#[test]
fn a_matched_isa_entry_is_never_missing() {
    let rules = Rules::builtin().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = fatbin_manifest(d.path());
    let mut row = Row::new("w", "decode");
    row.arch = Some("sm_90".into());
    row.kernels = vec![KernelSample { name: "saxpy".into(), calls: 10, total_us: 100.0, ..Default::default() }];
    let v = fit(Some(&row), Some(&m), None, &rules);
    assert_eq!(v.scope.matched.len(), 1, "{:?}", v.scope);
    let missing: Vec<&str> = v.evidence.missing.iter().map(|m| m.evidence.as_str()).collect();
    assert!(!missing.iter().any(|e| e.starts_with("an ISA manifest entry")), "1/1 matched, yet: {missing:?}");
    // What the entry lacks is said as the entry's field, on that entry.
    let spills = missing.iter().find(|e| e.starts_with("`spills` for saxpy")).unwrap_or_else(|| panic!("{missing:?}"));
    assert!(spills.contains("sm_90") && spills.contains("does not record it"), "{spills}");
    let text = katlas_advise::render::fit_text(&v);
    assert!(text.contains("1/1 hot names matched") && !text.contains("an ISA manifest entry for the kernel"), "{text}");

    // The name is in the manifest for other arches only: the scope says whose, and that is why
    // the entry is missing for this one.
    row.arch = Some("sm_89".into());
    let v = fit(Some(&row), Some(&m), None, &rules);
    assert!(v.scope.matched.is_empty());
    let note = v.scope.notes.iter().find(|n| n.starts_with("saxpy: the ISA manifest has it")).unwrap_or_else(|| panic!("{:?}", v.scope.notes));
    assert!(note.contains("only, not sm_89") && note.contains("sm_80"), "{note}");
}
