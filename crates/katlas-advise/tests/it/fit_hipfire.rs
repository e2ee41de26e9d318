use crate::common;

use katlas_advise::fit::ScopeKind;
use katlas_advise::isa::IsaManifest;
use katlas_advise::names::MatchLevel;
use katlas_advise::{build_fit, render, FitInput, Rules};
use katlas_arch::ArchDb;

#[test]
fn decode_row_unmatched_hot_kernels_and_likely_limit() {
    let row = common::decode_row();
    let dir = tempfile::tempdir().unwrap();
    // One variant of the hot GEMV is in the manifest; the other hot names are not.
    let m = common::write_manifest(dir.path(), &[("gemv_hfq4g256_residual_r4", 96, 0, 0), ("unrelated_kernel", 32, 0, 0)]);
    let isa = IsaManifest::read(&m).unwrap();
    let rules = Rules::builtin().unwrap();
    let fit =
        build_fit(&FitInput { row: Some(&row), isa: Some(&isa), product: None, arch: None, db: ArchDb::builtin(), rules: &rules, row_source: None }).unwrap();
    println!("{}", render::fit_text(&fit));
    assert_eq!(fit.header.arch.as_deref(), Some("gfx1201"));
    assert_eq!(fit.scope.kind, ScopeKind::ProfileMatched);
    assert_eq!(fit.scope.matched.len(), 1);
    assert_eq!(fit.scope.matched[0].how, MatchLevel::Variant);
    // Never widened: the gfx1100 object's fused_qkvza does not count for a gfx1201 row.
    assert_eq!(fit.scope.unmatched_hot, vec!["fused_qkvza_hfq4g256", "fused_rmsnorm_mq_rotate"]);
    assert!(!fit.likely_limit.is_empty());
    let head = &fit.likely_limit[0];
    assert_eq!(head.kernel.as_deref(), Some("gemv_hfq4g256_residual"));
    assert!(!head.numbers.is_empty(), "limit carries its numbers");
    assert!(fit.stops.iter().any(|f| f.rule == "amdahl" && f.kernel.as_deref() == Some("fused_rmsnorm_mq_rotate")));
    let text = render::fit_text(&fit);
    assert!(text.contains("unmatched hot") && text.contains("fused_qkvza_hfq4g256"));
}
