//! Rules fire only on their evidence (issue 17.5): the one-token GEMV rule needs M = 1 from
//! shapes, or a profiled GEMV/projection of an unbatched decode phase.

mod common;

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
