//! `katlas fit` on real inputs: occupancy from the one resource mapping (issue 19.3), products
//! shared by an atom (17.8), two profiles compared (17.11), a Proton tree against the torch trace
//! of the same program.

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::support::cli;
use cli::{fixture, json, katlas, ok, repo};

fn scan(dir: &Path, input: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    ok(&katlas(dir, &["isa", "scan", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--no-cache", "--disasm", "never"]));
    out
}

fn fit_kernel<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["kernels"].as_array().unwrap().iter().find(|k| k["name"] == name).unwrap_or_else(|| panic!("kernel {name} in the fit: {v}"))
}

/// The Triton matmul of the H200 cache: fit's occupancy is the driver's
/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` answer (fixtures/h200/triton-occupancy.jsonl),
/// with its 98,304 B of dynamic shared memory bounding the blocks as the driver counts them.
#[test]
fn fit_occupancy_of_a_triton_kernel_is_the_drivers() {
    let d = tempfile::tempdir().unwrap();
    let m = scan(d.path(), &fixture("h200/triton-cache"), "triton.json");
    let v = json(&katlas(d.path(), &["fit", "--isa", m.to_str().unwrap(), "--arch", "sm_90", "--format", "json"]));
    let oracle = std::fs::read_to_string(fixture("h200/triton-occupancy.jsonl")).unwrap();
    let mut checked = 0;
    for line in oracle.lines().filter(|l| !l.trim().is_empty()) {
        let want: Value = serde_json::from_str(line).unwrap();
        let k = fit_kernel(&v, want["kernel"].as_str().unwrap());
        let o = &k["occupancy"];
        assert_eq!(o["groups"], want["blocks_per_sm"], "{o}");
        assert_eq!(o["achieved"], want["warps_per_sm"], "{o}");
        assert_eq!(o["group_unit"], "blocks/SM");
        let dynamic = want["dyn_shared"].as_u64().unwrap();
        assert_eq!(o["bounds"]["shared_memory"].as_u64(), Some(233472 / (dynamic + 1024)), "shared memory bound from the dynamic bytes: {o}");
        checked += 1;
    }
    assert!(checked > 0);
}

/// A cubin kernel with static shared memory (sm_90 `smem_reduce`: 1 KiB of its own plus the
/// toolchain's 1 KiB reserve in `.nv.shared`): the reserve is counted once, and fit's
/// occupancy is the one the manifest carries (one mapping, in katlas-arch).
#[test]
fn fit_occupancy_counts_the_shared_reserve_once() {
    let d = tempfile::tempdir().unwrap();
    let cubin = repo().join("crates/katlas-isa/tests/fixtures/kernels.sm_90.cubin");
    let m = scan(d.path(), &cubin, "sm90.json");
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    let mk = manifest["objects"][0]["kernels"].as_array().unwrap().iter().find(|k| k["name"] == "smem_reduce").unwrap().clone();
    assert_eq!(mk["nvidia"]["shared_static_bytes"], 2048, "{mk}");
    assert_eq!(mk["nvidia"]["shared_reserved_bytes"], 1024);
    let v = json(&katlas(d.path(), &["fit", "--isa", m.to_str().unwrap(), "--arch", "sm_90", "--format", "json"]));
    let o = &fit_kernel(&v, "smem_reduce")["occupancy"];
    let notes: Vec<&str> = o["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.starts_with("shared memory per block 2048 B = 1024 B + 1024 B runtime reservation")), "{notes:?}");
    let mo = &mk["occupancy"];
    assert_eq!(o["achieved"], mo["achieved"]);
    assert_eq!(o["groups"], mo["groups"]);
    assert_eq!(o["notes"], mo["notes"], "fit and the manifest read the kernel the same way");
    assert_eq!(o["bounds"]["shared_memory"].as_u64(), Some(233472 / 2048));
}

/// hipfire's bench output on gfx1100 names no board, and the three gfx1100 boards have
/// different ceilings: the fit reads the row against each (never "no limit rule could decide").
#[test]
fn fit_of_an_ambiguous_atom_reads_each_board() {
    let d = tempfile::tempdir().unwrap();
    let bench = fixture("hipfire/bench_ar_profile.txt");
    let args = ["fit", "--parse", "hipfire-bench", bench.to_str().unwrap(), "--phase", "prefill"];
    let v = json(&katlas(d.path(), &[&args[..], &["--format", "json"]].concat()));
    assert!(v["header"]["product"].is_null());
    let readings = v["product_readings"].as_array().unwrap();
    let boards: Vec<&str> = readings.iter().map(|r| r["product"].as_str().unwrap()).collect();
    assert_eq!(boards, ["Radeon RX 7900 XTX", "Radeon RX 7900 XT", "Radeon Pro W7900"]);
    for (r, ceiling) in readings.iter().zip([960.0, 800.0, 864.0]) {
        assert_eq!(r["bw_ceiling_gbps"].as_f64(), Some(ceiling));
        let head = &r["likely_limit"][0];
        assert_eq!(head["kernel"], "gemm_qkvza_hfq4g256_wmma", "{r}");
        assert_eq!(head["rule"], "under_memory");
        // 402.7 GiB/s reported = 432.4 GB/s against each board's ceiling
        let (name, pct) = (&r["bw_pct"][0][0], r["bw_pct"][0][1].as_f64().unwrap());
        assert_eq!(name, "gemm_qkvza_hfq4g256_wmma");
        assert!((pct - 100.0 * 432.39 / ceiling).abs() < 0.1, "{pct}");
    }
    for fmt in ["text", "markdown"] {
        let t = ok(&katlas(d.path(), &[&args[..], &["--format", fmt]].concat()));
        assert!(!t.contains("no limit rule could decide"), "{t}");
        assert!(t.contains("Radeon RX 7900 XT (800 GB/s): gemm_qkvza_hfq4g256_wmma: memory under-used"), "{t}");
        assert!(t.contains("gemm_qkvza_hfq4g256_wmma: 45.0-54.0% of peak bandwidth across the 3 boards"), "{t}");
    }
    // With --product there is one reading.
    let one = json(&katlas(d.path(), &[&args[..], &["--product", "Radeon RX 7900 XT", "--format", "json"]].concat()));
    assert!(one.get("product_readings").is_none());
    assert_eq!(one["likely_limit"][0]["rule"], "under_memory");
}

/// A device that names its memory size picks the one board of the atom with that much.
#[test]
fn fit_picks_the_board_by_the_devices_memory() {
    let d = tempfile::tempdir().unwrap();
    let bench = fixture("hipfire/bench_ar_profile.txt");
    let rows = ok(&katlas(d.path(), &["parse", "hipfire-bench", bench.to_str().unwrap(), "--rows", "bench"]));
    let mut row: Value = serde_json::from_str(rows.lines().find(|l| l.contains("\"decode\"")).unwrap()).unwrap();
    row["identity"]["devices"] = serde_json::json!([{"index": 0, "vendor": "amd", "arch": "gfx1100", "memory_mib": 49136}]);
    let f = d.path().join("row.json");
    std::fs::write(&f, row.to_string()).unwrap();
    let v = json(&katlas(d.path(), &["fit", f.to_str().unwrap(), "--format", "json"]));
    assert_eq!(v["header"]["product"], "Radeon Pro W7900", "{}", v["header"]);
    assert!(v["header"]["product_source"].as_str().unwrap().contains("memory 48.0 GiB"));
    assert!(v.get("product_readings").is_none());
}

/// The row of hipfire's own test that makes its Atlas say "Fuse or batch low-byte transform
/// around fused_rmsnorm_mq_rotate" (fixtures/hipfire-tree/tests/test_kernel_atlas.py,
/// `test_build_suggestion_queue_emits_multiple_ranked_experiments`), with the ops its
/// `annotate_profile_kernels` gives these names (scripts/kernel_atlas.py `classify_kernel_op`)
/// and the schema its rows are written with.
const HIPFIRE_TRANSFORM_ROW: &str = r#"{"schema": "hipfire.kernel_atlas.v0", "arch": "gfx1201", "hostname": "hiptrx", "workload": "qwen3.5-27b", "quant": "mq4", "phase": "decode_ar",
 "shape_bucket": "decode_ar_pp32_gen50", "metrics": {"gen_tok_s": 35.2, "bw_gib_s": 491.0}, "command": ["bench"],
 "variant": {"env": {"HIPFIRE_KV_MODE": "asym3", "HIPFIRE_PROFILE": "1", "HIPFIRE_PROFILE_DECODE": "1"}},
 "artifacts": {"profile_kernels": [
  {"name": "gemv_hfq4g256_residual", "pct": 36.3, "calls": 3200, "op": {"family": "linear", "role": "residual_gemv", "phase_hint": "decode"}},
  {"name": "fused_qkvza_hfq4g256", "pct": 18.3, "calls": 1200, "op": {"family": "attention", "role": "qkvza_projection", "phase_hint": "prefill/decode"}},
  {"name": "fused_rmsnorm_mq_rotate", "pct": 10.2, "calls": 3200, "op": {"family": "position", "role": "rope_rotate", "phase_hint": "prefill/decode"}},
  {"name": "mq_rotate_x", "pct": 2.0, "calls": 3200, "op": {"family": "position", "role": "rope_rotate", "phase_hint": "prefill/decode"}}]}}"#;

#[test]
fn small_transform_beside_a_hot_kernel_is_a_fusion_candidate() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("row.json");
    std::fs::write(&f, HIPFIRE_TRANSFORM_ROW.replace('\n', "")).unwrap();
    let fit = json(&katlas(d.path(), &["fit", f.to_str().unwrap(), "--format", "json"]));
    let k = fit_kernel(&fit, "fused_rmsnorm_mq_rotate");
    let found = k["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "small_transform_fusion").unwrap_or_else(|| panic!("{k}"));
    assert_eq!(found["kind"], "left");
    let text = found["text"].as_str().unwrap();
    assert!(text.contains("a small transform (op position.rope_rotate) at 10.2% of the phase next to fused_qkvza_hfq4g256 (18.3%)"), "{text}");
    assert!(text.contains("batch its 3200 per-layer calls"), "{text}");
    // Heavy kernels are not transforms; a transform under 5% is stopped (Amdahl), not fused.
    for other in ["gemv_hfq4g256_residual", "fused_qkvza_hfq4g256", "mq_rotate_x"] {
        assert!(fit_kernel(&fit, other)["findings"].as_array().unwrap().iter().all(|f| f["rule"] != "small_transform_fusion"), "{other}");
    }
    let q = json(&katlas(d.path(), &["suggest", f.to_str().unwrap(), "--format", "json"]));
    let s = q["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["lever"] == "fusion" && s["kernel"] == "fused_rmsnorm_mq_rotate")
        .unwrap_or_else(|| panic!("{q}"));
    assert_eq!(s["fit_rules"], serde_json::json!(["small_transform_fusion"]));
    assert!(
        s["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("[small_transform_fusion] fused_rmsnorm_mq_rotate: a small transform")),
        "{s}"
    );
    // The real atlas row holds the same kernel at 3.2%: below the Amdahl floor, no fusion.
    let rows = fixture("hipfire/atlas_rows_v0.jsonl");
    let v = json(&katlas(d.path(), &["fit", rows.to_str().unwrap(), "--phase", "decode_ar", "--format", "json"]));
    assert!(v["left_on_table"].as_array().unwrap().iter().all(|f| f["rule"] != "small_transform_fusion"));
}

/// The second row of the same hipfire test file (`test_build_suggestion_queue_demotes_rejected_history`):
/// the same workload, host and shape a run later, without `mq_rotate_x` and at 35.3 tok/s.
const HIPFIRE_LATER_ROW: &str = r#"{"schema": "hipfire.kernel_atlas.v0", "arch": "gfx1201", "hostname": "hiptrx", "workload": "qwen3.5-27b", "quant": "mq4", "phase": "decode_ar",
 "shape_bucket": "decode_ar_pp32_gen50", "metrics": {"gen_tok_s": 35.3}, "command": ["bench"], "variant": {"env": {"HIPFIRE_KV_MODE": "asym3"}},
 "artifacts": {"profile_kernels": [
  {"name": "gemv_hfq4g256_residual", "pct": 36.3, "calls": 3200, "op": {"family": "linear", "role": "residual_gemv", "phase_hint": "decode"}},
  {"name": "fused_qkvza_hfq4g256", "pct": 18.3, "calls": 1200, "op": {"family": "attention", "role": "qkvza_projection", "phase_hint": "prefill/decode"}},
  {"name": "fused_rmsnorm_mq_rotate", "pct": 10.2, "calls": 3200, "op": {"family": "position", "role": "rope_rotate", "phase_hint": "prefill/decode"}}]}}"#;

#[test]
fn fit_baseline_compares_two_hipfire_rows() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("before.json"), d.path().join("after.json"));
    std::fs::write(&a, HIPFIRE_TRANSFORM_ROW.replace('\n', "")).unwrap();
    std::fs::write(&b, HIPFIRE_LATER_ROW.replace('\n', "")).unwrap();
    let args = ["fit", b.to_str().unwrap(), "--baseline", a.to_str().unwrap()];
    let v = json(&katlas(d.path(), &[&args[..], &["--format", "json"]].concat()));
    assert_eq!(v["schema"], "katlas.fit-compare.v1");
    assert_eq!(v["lead"], "decode_ar: gen_tok_s +0.3% (35.2 \u{2192} 35.3); 1 kernel vanished (mq_rotate_x)");
    assert!(v["warnings"].as_array().unwrap().is_empty(), "same host, product and binary: {v}");
    let ks = v["kernels"].as_array().unwrap();
    assert_eq!(ks.len(), 4);
    let gone = ks.iter().find(|k| k["name"] == "mq_rotate_x").unwrap();
    assert_eq!(gone["status"], "vanished");
    assert_eq!(gone["calls"], serde_json::json!([3200, null]));
    let gemv = ks.iter().find(|k| k["name"] == "gemv_hfq4g256_residual").unwrap();
    assert_eq!(gemv["status"], "both");
    assert_eq!(gemv["share_change_pts"].as_f64(), Some(0.0));
    assert!(v["gpu_time_change_pct"].is_null(), "shares only: no GPU time");
    let text = ok(&katlas(d.path(), &args));
    assert!(text.starts_with("decode_ar: gen_tok_s +0.3%"), "the lead comes first: {text}");
    assert!(text.contains("mq_rotate_x") && text.contains("vanished"));
    let md = ok(&katlas(d.path(), &[&args[..], &["--format", "markdown"]].concat()));
    assert!(md.contains("| mq_rotate_x | vanished |"), "{md}");
}

#[test]
fn fit_baseline_refuses_rows_of_another_shape() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("later.json");
    std::fs::write(&a, HIPFIRE_LATER_ROW.replace('\n', "")).unwrap();
    // hipfire's real atlas row: the same model and phase at pp128, on another host.
    let rows = fixture("hipfire/atlas_rows_v0.jsonl");
    let o = katlas(d.path(), &["fit", rows.to_str().unwrap(), "--phase", "decode_ar", "--baseline", a.to_str().unwrap()]);
    assert_eq!(cli::code(&o), 2);
    assert!(cli::stderr(&o).contains("not comparable: shape_bucket differs (decode_ar_pp32_gen50 vs decode_ar_pp128_gen50)"), "{}", cli::stderr(&o));
    // The gfx1100 bench against itself is comparable, with kernel times (498.1 ms of the GEMV).
    let bench = fixture("hipfire/bench_ar_profile.txt");
    let same = json(&katlas(
        d.path(),
        &["fit", "--parse", "hipfire-bench", bench.to_str().unwrap(), "--phase", "decode", "--baseline", bench.to_str().unwrap(), "--format", "json"],
    ));
    assert_eq!(same["gpu_time_change_pct"].as_f64(), Some(0.0));
    assert!(same["lead"].as_str().unwrap().starts_with("decode: GPU time unchanged"), "{}", same["lead"]);
    let gemv = same["kernels"].as_array().unwrap().iter().find(|k| k["name"] == "gemv_hfq4g256_residual").unwrap();
    assert_eq!(gemv["total_us"], serde_json::json!([498100.0, 498100.0]));
}

/// A real row `katlas collect liger-rmsnorm --profile` wrote on the H200 (liger-kernel's Triton
/// RMSNorm, 32768 x 4096 bf16): fit reads the kernel at the bandwidth ceiling from its launch
/// operands alone, with its Triton launch facts, and says each caveat once.
#[test]
fn a_triton_kernel_at_the_ceiling_is_read_from_its_launch_operands_and_caveats_are_said_once() {
    let d = tempfile::tempdir().unwrap();
    let row = fixture("triton-h200/liger-rmsnorm-op-row.jsonl");
    let args = ["fit", row.to_str().unwrap(), "--phase", "prefill", "--product", "NVIDIA H200"];
    let v = json(&katlas(d.path(), &[&args[..], &["--format", "json"]].concat()));
    let k = fit_kernel(&v, "_rms_norm_forward_kernel");
    let pct = k["throughput"]["bw_pct_of_peak"].as_f64().unwrap();
    assert!((95.0..105.0).contains(&pct), "{k}");
    assert_eq!(k["throughput"]["bytes_source"], "launch operands", "{k}");
    assert_eq!(k["triton"]["num_warps"], 8, "{k}");
    let text = ok(&katlas(d.path(), &args));
    let caveats: Vec<&str> = text.lines().filter(|l| l.contains("caveat:")).collect();
    assert!(!caveats.is_empty(), "{text}");
    for c in &caveats {
        assert_eq!(caveats.iter().filter(|x| *x == c).count(), 1, "said twice: {c}\n{text}");
    }
}

/// A kernel table of `katlas parse … --format json`: name → (calls, total us).
fn parsed_phase(v: &Value, phase: &str) -> Vec<(String, u64, f64)> {
    let p = v["phases"].as_array().unwrap().iter().find(|p| p["phase"] == phase).unwrap_or_else(|| panic!("phase {phase}: {v}"));
    p["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["name"].as_str().unwrap().to_string(), k["calls"].as_u64().unwrap(), k["total_us"].as_f64().unwrap()))
        .collect()
}

/// `fit --parse proton` on the real Proton tree of an H200 run (flash-linear-attention's
/// GatedDeltaNet, `prefill` and `decode` as Proton scopes) and the torch-trace parser on the
/// torch.profiler trace of the same program and arguments (fixtures/proton-h200). Proton names
/// C++ kernels by their mangled symbols, the trace by CUPTI's demangled signatures: each
/// Proton kernel joins exactly one trace kernel through `names::match_level`, at `exact` for
/// Triton and cuBLAS names and `demangled` for the mangled ATen and cublasLt ones.
///
/// The two profiles come from two processes (both profilers sit on CUPTI's activity API, so
/// one run cannot carry both), and the 1% a single run would allow does not hold between two.
/// Measured on these files: launches per kernel and phase are equal; per phase the GPU time
/// differs by 0.8% (prefill) and 1.2% (decode); kernels with at least 5% of their phase in
/// both profiles differ by at most 1.8% (nvjet 64x64 splitK, prefill; most under 1%); the
/// small autotuned Triton kernels differ by up to 36% (layer_norm_fwd_kernel1 in decode:
/// 2.28 vs 1.68 us a launch; also layer_norm_gated_fwd_kernel, swiglu_fwd_kernel,
/// causal_conv1d_update_kernel), enough to swap places below the top three. So the test holds:
/// every kernel's launches exactly, the top three of each phase in order, the fit's hot
/// kernels' launches, 2.5% for the kernels of at least 5%, 2% per phase, and 40% for any
/// kernel (a unit slip would be a factor of 1000).
#[test]
fn proton_tree_and_torch_trace_of_one_program_agree() {
    use katlas_advise::names::{match_level, MatchLevel};
    let d = tempfile::tempdir().unwrap();
    let hatchet = fixture("proton-h200/fla-decode.hatchet");
    let trace = fixture("proton-h200/fla-decode-torch-trace.json.gz");
    let (hatchet, trace) = (hatchet.to_str().unwrap(), trace.to_str().unwrap());
    let tv = json(&katlas(d.path(), &["parse", "torch-trace", trace, "--phases", "prefill,decode", "--format", "json"]));
    let pv = json(&katlas(d.path(), &["parse", "proton", hatchet, "--format", "json"]));
    for phase in ["prefill", "decode"] {
        let (p, t) = (parsed_phase(&pv, phase), parsed_phase(&tv, phase));
        assert_eq!(p.len(), t.len(), "{phase}: kernel count");
        // Proton name → the trace's kernel of that name.
        let mut joined: Vec<(&str, &(String, u64, f64))> = Vec::new();
        for (name, calls, us) in &p {
            let hits: Vec<(&(String, u64, f64), MatchLevel)> = t.iter().filter_map(|k| match_level(&k.0, &[name]).map(|l| (k, l))).collect();
            assert_eq!(hits.len(), 1, "{phase}: {name} joins {:?}", hits.iter().map(|h| &h.0 .0).collect::<Vec<_>>());
            let (k, level) = hits[0];
            assert_eq!(level, if name.starts_with("_Z") { MatchLevel::Demangled } else { MatchLevel::Exact }, "{phase}: {name}");
            assert_eq!(*calls, k.1, "{phase}: {name} launches");
            let rel = (us - k.2).abs() / k.2;
            assert!(rel < 0.40, "{phase}: {name}: {us} vs {} us", k.2);
            let (tp, tt) = (p.iter().map(|k| k.2).sum::<f64>(), t.iter().map(|k| k.2).sum::<f64>());
            if us / tp >= 0.05 && k.2 / tt >= 0.05 {
                assert!(rel < 0.025, "{phase}: {name}: {us} vs {} us", k.2);
            }
            joined.push((name, k));
        }
        let (tp, tt) = (p.iter().map(|k| k.2).sum::<f64>(), t.iter().map(|k| k.2).sum::<f64>());
        assert!((tp - tt).abs() / tt < 0.02, "{phase}: {tp} vs {tt} us");
        // The hot kernels: fit's view of the Proton tree, hottest first, is the trace's top three.
        let fit = json(&katlas(d.path(), &["fit", "--parse", "proton", hatchet, "--phase", phase, "--format", "json"]));
        assert_eq!(fit["header"]["phase"], phase);
        assert_eq!(fit["header"]["arch"], "sm_90");
        let hot: Vec<&str> = fit["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
        let mut by_time = t.clone();
        by_time.sort_by(|a, b| b.2.total_cmp(&a.2));
        let trace_of = |n: &str| joined.iter().find(|j| j.0 == n).map(|j| j.1 .0.as_str()).unwrap();
        let top: Vec<&str> = hot[..3].iter().map(|n| trace_of(n)).collect();
        assert_eq!(top, by_time[..3].iter().map(|k| k.0.as_str()).collect::<Vec<_>>(), "{phase}: the three hottest");
        for k in fit["kernels"].as_array().unwrap() {
            let name = k["name"].as_str().unwrap();
            let traced = t.iter().find(|x| x.0 == trace_of(name)).unwrap();
            assert_eq!(k["calls"].as_u64(), Some(traced.1), "{phase}: {name}");
        }
    }
}

/// An Nsight Compute report read through NVIDIA's own reader (the ncu-report wheel fetched by
/// scripts/fetch-py-packages) against `ncu --import REPORT --csv --page raw --print-units base`
/// of the same report, both made on the H200 (fixtures/ncu-rep-h200): every kernel's launches,
/// times, DRAM bytes, registers, shared memory, launch geometry and every counter are equal
/// (the CSV prints two decimals), and `fit` on either gives the same hot kernels, times and
/// bandwidth. The source counters of the second report add up to NVIDIA's own source page
/// (`--page source --print-source sass`) of that report.
#[test]
fn an_nsight_compute_report_reads_as_its_own_csv_import() {
    let d = tempfile::tempdir().unwrap();
    let site = cli::py_site();
    let reader = [("KATLAS_NCU_REPORT_DIR", site.as_os_str())];
    for name in ["liger-decode-triton", "rmsnorm-source"] {
        let rep = fixture(&format!("ncu-rep-h200/{name}.ncu-rep"));
        let csv = fixture(&format!("ncu-rep-h200/{name}.raw.csv"));
        let (rep, csv) = (rep.to_str().unwrap(), csv.to_str().unwrap());
        let r = json(&cli::katlas_env(d.path(), &["parse", "ncu-rep", rep, "--format", "json"], &reader));
        let c = json(&katlas(d.path(), &["parse", "ncu-csv", csv, "--format", "json"]));
        assert_eq!(r["route"], c["route"], "{name}: device and arch");
        assert_eq!(r["route"]["arch"], "sm_90");
        let (rk, ck) = (r["phases"][0]["kernels"].as_array().unwrap(), c["phases"][0]["kernels"].as_array().unwrap());
        assert_eq!(rk.len(), ck.len(), "{name}: kernels");
        assert!(!rk.is_empty());
        for k in rk {
            let kn = k["name"].as_str().unwrap();
            let kc = ck.iter().find(|x| x["name"] == kn).unwrap_or_else(|| panic!("{name}: {kn} in the CSV"));
            for key in ["calls", "registers", "shared_bytes", "block", "grid"] {
                assert_eq!(k[key], kc[key], "{name}: {kn}: {key}");
            }
            for key in ["total_us", "bytes", "achieved_gbps"] {
                let (a, b) = (k[key].as_f64().unwrap(), kc[key].as_f64().unwrap());
                assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{name}: {kn}: {key} {a} vs {b}");
            }
            let (cr, cc) = (k["counters"].as_object().unwrap(), kc["counters"].as_object().unwrap());
            assert!(cr.len() > 300, "{name}: {kn}: {} counters", cr.len());
            assert_eq!(cr.keys().collect::<Vec<_>>(), cc.keys().collect::<Vec<_>>(), "{name}: {kn}: counter names");
            for (m, v) in cr {
                let (a, b) = (v.as_f64().unwrap(), cc[m].as_f64().unwrap());
                assert!((a - b).abs() <= 0.006_f64.max(1e-6 * b.abs()), "{name}: {kn}: {m}: {a} vs {b}");
            }
        }
        let fr = json(&cli::katlas_env(d.path(), &["fit", "--parse", "ncu-rep", rep, "--product", "NVIDIA H200", "--format", "json"], &reader));
        let fc = json(&katlas(d.path(), &["fit", "--parse", "ncu-csv", csv, "--product", "NVIDIA H200", "--format", "json"]));
        let hot = |v: &Value| -> Vec<(String, String, String)> {
            v["kernels"].as_array().unwrap().iter().map(|k| (k["name"].to_string(), k["total_us"].to_string(), k["achieved_gbps"].to_string())).collect()
        };
        assert_eq!(hot(&fr), hot(&fc), "{name}: fit's hot kernels");
        assert!(!hot(&fr).is_empty());
    }
    // Source counters: the report's per-PC instructions and samples, summed per source line,
    // total what NVIDIA's source page of the same report lists per SASS instruction.
    let r =
        json(&cli::katlas_env(d.path(), &["parse", "ncu-rep", fixture("ncu-rep-h200/rmsnorm-source.ncu-rep").to_str().unwrap(), "--format", "json"], &reader));
    let k = &r["phases"][0]["kernels"][0];
    let (mut inst, mut samples, mut launches) = (0.0, 0.0, 0);
    let page = std::fs::read_to_string(fixture("ncu-rep-h200/rmsnorm-source.source.csv")).unwrap();
    let mut rd = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(page.as_bytes());
    let mut header: Vec<String> = Vec::new();
    for rec in rd.records() {
        let rec = rec.unwrap();
        match rec.get(0) {
            Some("Kernel Name") => launches += 1,
            Some("Address") => header = rec.iter().map(str::to_string).collect(),
            _ if rec.len() == header.len() => {
                let col = |n: &str| rec[header.iter().position(|h| h == n).unwrap()].replace(',', "").parse::<f64>().unwrap();
                inst += col("Instructions Executed");
                samples += col("# Samples");
            }
            _ => {}
        }
    }
    assert_eq!(k["calls"].as_u64(), Some(launches));
    assert_eq!(k["extra"]["source_totals"]["inst_executed"].as_f64(), Some(inst), "{k}");
    assert_eq!(k["extra"]["source_totals"]["pc_samples"].as_f64(), Some(samples), "{k}");
    let lines = k["extra"]["source_lines"]["lines"].as_array().unwrap();
    assert!(lines.len() >= 3, "{k}");
    assert!(lines.iter().any(|l| l["file"].as_str().unwrap().ends_with("liger_kernel/ops/rms_norm.py")), "{lines:?}");
    let top: f64 = lines.iter().map(|l| l["inst_executed"].as_f64().unwrap()).sum();
    assert!(top > 0.0 && top <= inst, "{top} of {inst}");
    // Two PC samples rank nothing: the lines go by instructions executed.
    assert_eq!(k["extra"]["source_lines"]["ranked_by"], "inst_executed");
    let counts: Vec<f64> = lines.iter().map(|l| l["inst_executed"].as_f64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
}

/// Without NVIDIA's reader a report cannot be read: exit 3 (the environment) with the install
/// hint, never a crash or an empty table; a file that is no report is bad input (exit 2), and
/// a report cut short keeps the launches before the cut.
#[test]
fn an_nsight_compute_report_without_a_reader_or_whole_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let rep = fixture("ncu-rep-h200/liger-decode-triton.ncu-rep");
    let none = std::ffi::OsStr::new("");
    let bare = [("PYTHONPATH", none), ("PYTHONNOUSERSITE", std::ffi::OsStr::new("1")), ("PATH", std::ffi::OsStr::new("/usr/bin:/bin"))];
    let o = cli::katlas_env(d.path(), &["parse", "ncu-rep", rep.to_str().unwrap()], &bare);
    assert_eq!(cli::code(&o), 3, "{}", cli::stderr(&o));
    let e = cli::stderr(&o);
    assert!(e.contains("liger-decode-triton.ncu-rep") && e.contains("pip install ncu-report") && e.contains("KATLAS_NCU_REPORT_DIR"), "{e}");
    let o = cli::katlas_env(d.path(), &["fit", "--parse", "ncu-rep", rep.to_str().unwrap()], &bare);
    assert_eq!(cli::code(&o), 3, "{}", cli::stderr(&o));

    let site = cli::py_site();
    let reader = [("KATLAS_NCU_REPORT_DIR", site.as_os_str())];
    let junk = d.path().join("junk.ncu-rep");
    std::fs::write(&junk, (0..5000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<u8>>()).unwrap();
    let o = cli::katlas_env(d.path(), &["parse", "ncu-rep", junk.to_str().unwrap()], &reader);
    assert_eq!(cli::code(&o), 2, "{}", cli::stderr(&o));
    assert!(cli::stderr(&o).contains("junk.ncu-rep") && cli::stderr(&o).contains("no kernel launch"), "{}", cli::stderr(&o));

    let whole = std::fs::read(&rep).unwrap();
    let cut = d.path().join("cut.ncu-rep");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let full = json(&cli::katlas_env(d.path(), &["parse", "ncu-rep", rep.to_str().unwrap(), "--format", "json"], &reader));
    let o = cli::katlas_env(d.path(), &["parse", "ncu-rep", cut.to_str().unwrap(), "--format", "json"], &reader);
    let part = json(&o);
    let calls = |v: &Value| v["phases"][0]["kernels"].as_array().unwrap().iter().map(|k| k["calls"].as_u64().unwrap()).sum::<u64>();
    assert!(calls(&part) > 0 && calls(&part) < calls(&full), "{} of {}", calls(&part), calls(&full));
    assert!(cli::stderr(&o).contains("cut short"), "{}", cli::stderr(&o));
}
