//! Each fit rule family fires on evidence built for it, and triggers its levers.

use crate::common;

use katlas_advise::fit::ScopeKind;
use katlas_advise::isa::IsaManifest;
use katlas_advise::names::MatchLevel;
use katlas_advise::suggest::{suggest, SuggestOptions};
use katlas_advise::{build_fit, FitInput, FitView, Rules};
use katlas_arch::{ArchDb, Limiter};
use katlas_model::{KernelSample, OpClass, Row};

fn sample(name: &str, calls: u64, total_us: f64, family: &str, role: &str) -> KernelSample {
    KernelSample {
        name: name.into(),
        calls,
        total_us,
        op: Some(OpClass { family: family.into(), role: role.into(), phase_hint: None, rule: None }),
        ..Default::default()
    }
}

fn fit(row: &Row, isa: Option<&IsaManifest>, product: Option<&str>) -> FitView {
    let rules = Rules::builtin().unwrap();
    build_fit(&FitInput { row: Some(row), isa, product, arch: None, db: ArchDb::builtin(), rules: &rules, row_source: None }).unwrap()
}

fn rules_of(f: &FitView, kernel: &str) -> Vec<String> {
    f.kernels.iter().find(|k| k.name == kernel).unwrap().findings.iter().map(|x| x.rule.clone()).collect()
}

fn levers(f: &FitView, row: &Row) -> Vec<(String, Option<String>)> {
    let rules = Rules::builtin().unwrap();
    let q = suggest(f, Some(row), ArchDb::builtin(), &rules, &SuggestOptions { ledger: None, provenance: &[], max: Some(50) });
    q.suggestions.into_iter().map(|s| (s.lever, s.kernel)).collect()
}

#[test]
fn prefill_gemm_without_matrix_ops_on_matrix_arch() {
    let mut row = Row::new("w", "prefill");
    row.arch = Some("gfx1100".into());
    row.kernels.push(sample("gemm_q4_prefill", 10, 9000.0, "linear", "gemm"));
    row.kernels.push(sample("other", 10, 1000.0, "elementwise", "add"));
    let d = tempfile::tempdir().unwrap();
    let mut m = common::manifest_json(&[]);
    m["objects"][0]["arch"] = "gfx1100".into();
    m["objects"][0]["kernels"] = common::manifest_json(&[("gemm_q4_prefill_default", 128, 0, 8192)])["objects"][0]["kernels"].clone();
    let p = d.path().join("isa.json");
    std::fs::write(&p, m.to_string()).unwrap();
    let isa = IsaManifest::read(&p).unwrap();
    let f = fit(&row, Some(&isa), Some("Radeon RX 7900 XTX"));
    assert_eq!(f.scope.matched[0].how, MatchLevel::Variant);
    let r = rules_of(&f, "gemm_q4_prefill");
    assert!(r.contains(&"no_matrix_prefill_gemm".to_string()), "{r:?}");
    let k = &f.kernels[0];
    assert_eq!(k.matrix.used_ops, Some(0));
    assert!(!k.matrix.available.is_empty());
    assert!(k.occupancy.is_some());
    assert!(levers(&f, &row).contains(&("matrix_path".into(), Some("gemm_q4_prefill".into()))));
}

#[test]
fn launch_bound_kernels_trigger_fusion_and_graph_capture() {
    let mut row = Row::new("w", "decode");
    row.arch = Some("sm_90".into());
    row.kernels.push(sample("tiny_norm", 5000, 5000.0 * 3.0, "norm", "rmsnorm"));
    row.kernels.push(sample("big", 100, 20000.0, "linear", "gemv"));
    let f = fit(&row, None, Some("NVIDIA H200"));
    let r = rules_of(&f, "tiny_norm");
    assert!(r.contains(&"launch_bound".to_string()), "{r:?}");
    let ls = levers(&f, &row);
    assert!(ls.contains(&("fusion".into(), Some("tiny_norm".into()))), "{ls:?}");
    assert!(ls.contains(&("graph_capture".into(), None)), "{ls:?}");
    // With graph capture already on, it is not legal to propose it.
    let mut row2 = row.clone();
    row2.route = Some(katlas_model::Route {
        basis: "reported".into(),
        attributes: [("graph_enabled".to_string(), serde_json::json!(true))].into_iter().collect(),
        ..Default::default()
    });
    let f2 = fit(&row2, None, Some("NVIDIA H200"));
    assert!(!levers(&f2, &row2).iter().any(|(l, _)| l == "graph_capture"));
}

#[test]
fn spills_and_occupancy_from_isa_only() {
    let d = tempfile::tempdir().unwrap();
    let mut m = common::manifest_json(&[("spilly", 128, 12, 65536), ("fine", 32, 0, 0)]);
    // 128-lane workgroups with 64 KiB of LDS each: 2 per WGP = 2 waves per SIMD.
    m["objects"][0]["kernels"][0]["resources"]["max_workgroup_size"] = 128.into();
    let p = d.path().join("isa.json");
    std::fs::write(&p, m.to_string()).unwrap();
    let isa = IsaManifest::read(&p).unwrap();
    let rules = Rules::builtin().unwrap();
    let f = build_fit(&FitInput { row: None, isa: Some(&isa), product: None, arch: Some("gfx1201"), db: ArchDb::builtin(), rules: &rules, row_source: None })
        .unwrap();
    assert_eq!(f.scope.kind, ScopeKind::IsaOnly);
    // The gfx1100 object is not this arch: only the two gfx1201 kernels.
    assert_eq!(f.kernels.len(), 2);
    let spilly = f.kernels.iter().find(|k| k.name == "spilly").unwrap();
    let r: Vec<&str> = spilly.findings.iter().map(|x| x.rule.as_str()).collect();
    assert!(r.contains(&"spills"), "{r:?}");
    // The rule emits the `spills` flag the lever triggers on; the count stays a number beside it.
    assert_eq!(spilly.signals.get("spills"), Some(&katlas_advise::expr::Val::Num(12.0)));
    assert!(spilly.emitted.contains("spills") && spilly.emitted.contains("low_occupancy"), "{:?}", spilly.emitted);
    assert!(r.contains(&"low_occupancy"), "64 KiB of LDS per 128-lane workgroup leaves few waves: {r:?}");
    assert_eq!(spilly.occupancy.as_ref().unwrap().limiter, Limiter::Lds);
    assert!(f.evidence.missing.iter().any(|m| m.evidence.starts_with("a profile")), "says the profile is missing");
    let q = suggest(&f, None, ArchDb::builtin(), &rules, &SuggestOptions { ledger: None, provenance: &[], max: None });
    assert_eq!(q.suggestions[0].lever, "compiler_levers");
    assert_eq!(q.suggestions[0].kernel.as_deref(), Some("spilly"));
}

#[test]
fn grid_underfill_and_k_split_on_gemm_only() {
    let mut row = Row::new("w", "decode");
    row.arch = Some("sm_90".into());
    let mut g = sample("my_gemv", 100, 10000.0, "linear", "gemv");
    g.grid = Some([16, 1, 1]);
    g.block = Some([128, 1, 1]);
    let mut e = sample("my_copy", 100, 8000.0, "memory", "copy");
    e.grid = Some([16, 1, 1]);
    e.block = Some([128, 1, 1]);
    row.kernels = vec![g, e];
    let f = fit(&row, None, Some("NVIDIA H200"));
    assert!(rules_of(&f, "my_gemv").contains(&"grid_underfill".to_string()));
    let launch = f.kernels[0].launch.as_ref().unwrap();
    assert_eq!(launch.simds, 132.0 * 4.0);
    let ls = levers(&f, &row);
    assert!(ls.contains(&("k_split".into(), Some("my_gemv".into()))), "{ls:?}");
    assert!(!ls.contains(&("k_split".into(), Some("my_copy".into()))), "no K to split in a copy: {ls:?}");
}

#[test]
fn bad_manifests_name_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("trunc.json");
    std::fs::write(&p, "{\n  \"schema\": \"katlas.isa.v1\",\n  \"objects\": [\n").unwrap();
    let e = IsaManifest::read(&p).unwrap_err().to_string();
    assert!(e.contains("trunc.json") && e.contains("line 4"), "{e}");
    let p = d.path().join("other.json");
    std::fs::write(&p, "{\"schema\": \"katlas.row.v1\"}").unwrap();
    let e = IsaManifest::read(&p).unwrap_err().to_string();
    assert!(e.contains("other.json") && e.contains("schema") && e.contains("katlas.row.v1"), "{e}");
    let p = d.path().join("badfield.json");
    std::fs::write(&p, "{\"schema\": \"katlas.isa.v1\", \"objects\": [{\"kernels\": [{\"name\": 3}]}]}").unwrap();
    let e = IsaManifest::read(&p).unwrap_err().to_string();
    assert!(e.contains("badfield.json") && e.contains("objects[0].kernels[0].name"), "{e}");
}

/// The decode lab's GEMV collected on its CPU backend (tests/fixtures/lab_cpu_row.sh).
fn lab_cpu_row() -> Row {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab_cpu_row.jsonl");
    serde_json::from_str(std::fs::read_to_string(&p).unwrap().lines().next().unwrap()).unwrap()
}

#[test]
fn one_kernel_gets_one_lead_limit_class() {
    // The CPU GEMV reads 0% of the H200's bandwidth (latency-bound, measured) while its op class
    // alone says a one-token GEMV is memory-bound: the measurement leads, the class is a caveat.
    let row = lab_cpu_row();
    let v = fit(&row, None, Some("NVIDIA H200"));
    let rules = Rules::builtin().unwrap();
    let class = |f: &katlas_advise::fit::Finding, what: &str| rules.fit.rules.iter().any(|r| r.id == f.rule && r.emits.iter().any(|e| e == what));
    let k = &v.kernels[0];
    let limits: Vec<_> = k.findings.iter().filter(|f| f.kind == katlas_advise::rules::FindingKind::Limit).collect();
    assert!(limits.iter().any(|f| class(f, "latency_bound")), "{limits:?}");
    assert!(!limits.iter().any(|f| class(f, "memory_bound")), "two lead classes: {limits:?}");
    let roof = k.findings.iter().find(|f| f.rule == "gemv_roofline").expect("the roofline reading stays");
    assert_eq!(roof.kind, katlas_advise::rules::FindingKind::Caveat);
    assert!(roof.text.contains("secondary") && roof.text.contains("lead limit is latency"), "{}", roof.text);
    assert!(!v.likely_limit.iter().any(|f| f.rule == "gemv_roofline"));
    // JSON says what the text says.
    let json = serde_json::to_value(&v).unwrap();
    let lead_rules: Vec<&str> = json["likely_limit"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap()).collect();
    assert!(!lead_rules.contains(&"gemv_roofline") && lead_rules.contains(&"idle_both"), "{lead_rules:?}");
    for text in [katlas_advise::render::fit_text(&v), katlas_advise::render::fit_text_verbose(&v)] {
        let limit_lines: Vec<&str> =
            text.lines().filter(|l| l.contains("likely limit") || l.trim_start().starts_with("- limit:") || l.contains("also:")).collect();
        assert!(limit_lines.iter().all(|l| !l.contains("memory-bound")), "{limit_lines:?}");
        assert!(limit_lines.iter().any(|l| l.contains("latency-bound")), "{limit_lines:?}");
    }
    // A GEMV that does reach the ceiling keeps memory-bound as its lead (hipfire's decode row).
    let hip = common::decode_row();
    let v = fit(&hip, None, None);
    let k = v.kernels.iter().find(|k| k.name == "gemv_hfq4g256_residual").unwrap();
    assert!(k.findings.iter().any(|f| f.rule == "gemv_roofline" && f.kind == katlas_advise::rules::FindingKind::Limit));
}

#[test]
fn a_cpu_row_read_against_a_gpu_gets_no_gpu_readings() {
    let row = lab_cpu_row();
    let v = fit(&row, None, Some("NVIDIA H200"));
    assert!(v.measured_on_cpu());
    let note = v.scope.notes.iter().find(|n| n.contains("measured on the CPU")).expect("the CPU note");
    assert!(note.contains("a GPU run") && note.contains("katlas collect lab-decode"), "{note}");
    for text in [katlas_advise::render::fit_text(&v), katlas_advise::render::fit_text_verbose(&v)] {
        let low = text.to_lowercase();
        for gpu in ["gpu time", "wave", "warp", "occupancy", "isa manifest", "launch geometry"] {
            assert!(!low.contains(gpu), "`{gpu}` in a CPU row's read:\n{text}");
        }
    }
    assert!(v.evidence.missing.iter().any(|m| m.evidence.starts_with("a GPU run of the workload")), "{:?}", v.evidence.missing);
    let rules = Rules::builtin().unwrap();
    let q = suggest(&v, Some(&row), ArchDb::builtin(), &rules, &SuggestOptions { ledger: None, provenance: &[], max: Some(50) });
    let evidence: Vec<&String> = q.suggestions.iter().flat_map(|s| &s.evidence).collect();
    assert!(evidence.iter().any(|e| e.contains("100.0% of decode CPU time")), "{evidence:?}");
    assert!(!evidence.iter().any(|e| e.contains("GPU time")), "{evidence:?}");
}

#[test]
fn undecided_reads_say_how_to_add_the_evidence() {
    // No profile: the hipfire row without its kernels.
    let mut row = common::decode_row();
    row.kernels.clear();
    let v = fit(&row, None, None);
    let text = katlas_advise::render::fit_text(&v);
    let head = text.lines().find(|l| l.contains("likely limit")).unwrap();
    for how in ["katlas collect WORKLOAD --profile", "--parse ncu-csv", "json-lines `kernels`"] {
        assert!(head.contains(how), "{head}");
    }
    let missing = v.evidence.missing.iter().find(|m| m.evidence.starts_with("a profile")).unwrap();
    assert!(missing.evidence.contains("katlas collect WORKLOAD --profile"), "{}", missing.evidence);
    // The example record is one the json-lines parser takes: its kernels are kernel samples.
    let (_, tail) = missing.evidence.split_once("e.g. ").unwrap();
    let record = &tail[..tail.find("]}").unwrap() + 2];
    let rec: serde_json::Value = serde_json::from_str(record).unwrap_or_else(|e| panic!("{record}: {e}"));
    assert!(rec.get("katlas").is_some() && rec["phase"] == "decode");
    let ks: Vec<KernelSample> = serde_json::from_value(rec["kernels"].clone()).unwrap();
    assert!(ks[0].calls > 0 && ks[0].total_us > 0.0 && ks[0].bytes.is_some());

    // A profile without bytes or FLOPs: the kernels are hot, no limit rule decides.
    let mut row = Row::new("w", "decode");
    row.arch = Some("sm_90".into());
    row.kernels = vec![sample("my_kernel", 10, 100.0, "misc", "unknown")];
    let v = fit(&row, None, Some("NVIDIA H200"));
    assert!(v.likely_limit.is_empty(), "{:?}", v.likely_limit);
    let text = katlas_advise::render::fit_text(&v);
    let head = text.lines().find(|l| l.contains("likely limit")).unwrap();
    assert!(head.contains("no limit rule could decide") && head.contains("katlas collect WORKLOAD --profile") && head.contains("`bytes`"), "{head}");
}
