//! Fit and suggest on the real H200 Llama decode trace (fixtures/h200), read the way a kernel
//! engineer reads it (issue 17): the phase's timeline first, library kernels get caller-side
//! levers only, short names unique, the default text short.

use crate::common;

use katlas_advise::fit::FitView;
use katlas_advise::suggest::{suggest, SuggestOptions, SuggestionQueue};
use katlas_advise::{build_fit, FitInput, Rules};
use katlas_arch::ArchDb;
use katlas_model::{Device, Origin, Row};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// A row from a torch trace, built the way `katlas fit --parse torch-trace` builds it.
pub fn trace_row(path: &Path) -> Row {
    trace_phase_row(path, None)
}

/// The row of one phase, as `katlas fit --parse torch-trace FILE --phase P` builds it (the
/// first phase with kernels without one).
fn trace_phase_row(path: &Path, phase: Option<&str>) -> Row {
    let opts = katlas_collect::parse::ParserOptions { phase: phase.map(str::to_string), ..Default::default() };
    let out = katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(path), &opts).unwrap();
    let t = match phase {
        Some(p) => out.phases.iter().find(|t| t.phase == p).expect("the phase asked for"),
        None => out.phases.iter().find(|t| !t.kernels.is_empty()).expect("a phase with kernels"),
    };
    let mut row = Row::new("llama_decode", t.phase.clone());
    row.origin = Some(Origin { kind: "parse".into(), file: Some(path.display().to_string()), parsers: vec!["torch-trace".into()], ..Default::default() });
    row.metrics.extend(out.metrics.clone());
    row.metrics.extend(t.metrics.clone());
    row.kernels = t.kernels.clone();
    katlas_collect::ops::OpRules::builtin().classify_all(&mut row.kernels);
    let arch = out.route.get("arch").and_then(|v| v.as_str()).map(str::to_string);
    row.arch = arch.clone();
    row.identity.devices.push(Device {
        index: 0,
        vendor: "nvidia".into(),
        product: out.route.get("device").and_then(|v| v.as_str()).map(str::to_string),
        arch,
        ..Default::default()
    });
    row
}

pub fn llama() -> Row {
    trace_row(&common::shared().join("h200/torch_llama_decode_trace.json.gz"))
}

fn fit_of(row: &Row, rules: &Rules) -> FitView {
    build_fit(&FitInput { row: Some(row), isa: None, product: Some("NVIDIA H200"), arch: None, db: ArchDb::builtin(), rules, row_source: None }).unwrap()
}

fn queue_of(fit: &FitView, row: &Row, rules: &Rules) -> SuggestionQueue {
    suggest(fit, Some(row), ArchDb::builtin(), rules, &SuggestOptions { ledger: None, provenance: &[], max: None })
}

#[test]
fn the_llama_decode_trace_leads_with_launch_bound_and_graph_capture() {
    let rules = Rules::builtin().unwrap();
    let row = llama();
    let fit = fit_of(&row, &rules);
    let lead = fit.likely_limit.first().expect("a likely limit");
    assert_eq!(lead.rule, "host_bound", "{}", lead.text);
    assert!(lead.kernel.is_none(), "the phase's finding, not a kernel's");
    // 14.6 ms of kernels in a 720 ms window; median gap 30.7 us (python over the same JSON).
    assert!(lead.text.contains("busy 2.0%") && lead.text.contains("median gap of 30.7 us"), "{}", lead.text);
    assert!(lead.text.contains("376 per step") && lead.text.contains("8.2 us of host time per launch"), "{}", lead.text);
    let busy = match fit.phase.signals.get("gpu_busy_pct") {
        Some(katlas_advise::expr::Val::Num(n)) => *n,
        other => panic!("{other:?}"),
    };
    assert!((busy - 2.025).abs() < 0.01, "{busy}");

    let q = queue_of(&fit, &row, &rules);
    let first = &q.suggestions[0];
    assert!(matches!(first.lever.as_str(), "graph_capture" | "torch_compile"), "{:?}", q.suggestions.iter().map(|s| &s.lever).collect::<Vec<_>>());
    assert!(first.evidence.iter().any(|e| e.contains("[host_bound]") && e.contains("30.7 us")), "{:?}", first.evidence);
    let top3: Vec<&str> = q.suggestions.iter().take(3).map(|s| s.lever.as_str()).collect();
    assert!(top3.contains(&"graph_capture") && top3.contains(&"torch_compile"), "{top3:?}");
    // The eval judges the step time, not a gap statistic.
    assert_eq!(first.eval.metric.as_deref(), Some("step_us"));
}

#[test]
fn a_busy_phase_is_not_called_launch_bound() {
    let rules = Rules::builtin().unwrap();
    let mut row = llama();
    // The same kernels back to back: busy most of the window.
    row.metrics.insert("gpu_busy_pct".into(), katlas_model::Metric::new(93.0, Some("%")));
    let fit = fit_of(&row, &rules);
    assert!(fit.likely_limit.iter().all(|f| f.rule != "host_bound"));
    let q = queue_of(&fit, &row, &rules);
    assert!(q.suggestions.iter().all(|s| s.lever != "torch_compile" && s.lever != "fewer_launches"));
}

/// Words of a source-level step: editing a kernel's code or its compile flags.
const SOURCE_STEPS: &[&str] =
    &["__launch_bounds__", "-maxrregcount", "Double-buffer", "rows-per-wave", "matrix intrinsic", "-mwavefrontsize64", "16-byte vectors"];

#[test]
fn library_kernels_get_caller_side_levers_only() {
    let rules = Rules::builtin().unwrap();
    let row = llama();
    let fit = fit_of(&row, &rules);
    let lib: Vec<&str> =
        fit.kernels.iter().filter(|k| k.signals.get("library_kernel") == Some(&katlas_advise::expr::Val::Bool(true))).map(|k| k.name.as_str()).collect();
    // Every hot kernel of this eager decode is cuBLAS (nvjet), ATen or cuDNN.
    assert_eq!(lib.len(), fit.kernels.len(), "{:?}", fit.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    let q = suggest(&fit, Some(&row), ArchDb::builtin(), &rules, &SuggestOptions { ledger: None, provenance: &[], max: Some(100) });
    assert!(!q.suggestions.is_empty());
    for s in &q.suggestions {
        for step in &s.candidate_steps {
            assert!(!SOURCE_STEPS.iter().any(|w| step.contains(w)), "{} on {:?}: source-level step `{step}`", s.lever, s.kernel);
        }
        if s.kernel.is_some() {
            assert!(matches!(s.lever.as_str(), "fusion" | "library_call"), "{} on {:?}", s.lever, s.kernel);
        }
    }
    // cuBLAS's GEMV, hipBLASLt and Tensile names are library kernels too.
    let p = &rules.fit.settings.library_prefixes;
    for n in [
        "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>(float)",
        "Cijk_Alik_Bljk_HHS_BH_MT64x64",
        "hipblasltKernel_x",
        "cudnn_generated_fort_native_sdpa_sm80",
    ] {
        assert!(katlas_advise::fit::is_library_kernel(p, n), "{n}");
    }
    assert!(!katlas_advise::fit::is_library_kernel(p, "gemv_hfq4g256_residual"));
}

#[test]
fn env_that_cannot_change_a_route_is_no_sweep() {
    let rules = Rules::builtin().unwrap();
    let mut row = llama();
    row.variant.env.insert("PYTHONUNBUFFERED".into(), "1".into());
    row.variant.env.insert("CUDA_VISIBLE_DEVICES".into(), "0".into());
    let fit = fit_of(&row, &rules);
    let q = queue_of(&fit, &row, &rules);
    assert!(q.suggestions.iter().all(|s| s.lever != "env_sweep"), "{:?}", q.suggestions.iter().map(|s| &s.lever).collect::<Vec<_>>());
    // A cuBLASLt knob can change the route of cuBLAS's kernels: it is a knob there.
    row.variant.env.insert("CUBLASLT_WORKSPACE_SIZE".into(), "0".into());
    let fit = fit_of(&row, &rules);
    let nvjet = fit.kernels.iter().find(|k| k.name.starts_with("nvjet_")).expect("an nvjet kernel in the trace");
    assert_eq!(nvjet.signals.get("route_knob_list"), Some(&katlas_advise::expr::Val::Str("CUBLASLT_WORKSPACE_SIZE=0".into())));
}

/// The H200 collect of llama-decode (docs/GPU.md): the workload's own env sets
/// CUBLAS_WORKSPACE_CONFIG, and suggest proposed an env sweep on all 8 hot kernels, ATen and
/// cuDNN ones included, ranked above graph capture on a 4.7%-busy GPU. A cuBLAS knob reaches
/// cuBLAS kernels only, and the launch-bound levers still lead.
#[test]
fn a_library_knob_reaches_only_that_librarys_kernels() {
    let rules = Rules::builtin().unwrap();
    let mut row = llama();
    row.variant.env.insert("CUBLAS_WORKSPACE_CONFIG".into(), ":4096:8".into());
    let fit = fit_of(&row, &rules);
    let knob = |k: &katlas_advise::fit::KernelFit| k.signals.contains_key("route_knob_list");
    assert!(fit.kernels.iter().any(|k| k.name.starts_with("nvjet_") && knob(k)));
    for k in fit.kernels.iter().filter(|k| k.name.contains("at::native") || k.name.starts_with("cudnn")) {
        assert!(!knob(k), "{} got a cuBLAS knob", k.name);
    }
    let q = queue_of(&fit, &row, &rules);
    let levers: Vec<&str> = q.suggestions.iter().map(|s| s.lever.as_str()).collect();
    assert!(matches!(levers[0], "graph_capture" | "torch_compile"), "{levers:?}");
    for s in q.suggestions.iter().filter(|s| s.lever == "env_sweep") {
        assert!(s.kernel.as_deref().is_some_and(|k| k.starts_with("nvjet_") || k.contains("gemv")), "env sweep on {:?}", s.kernel);
    }
}

#[test]
fn short_names_are_unique_and_readable_on_the_whole_trace() {
    // Every kernel of the trace (65 names), not only the hot ones: a view of any size is unique.
    let row = llama();
    let names: Vec<&str> = row.kernels.iter().map(|k| k.name.as_str()).collect();
    let shorts = katlas_advise::names::short_names(&names);
    let set: std::collections::BTreeSet<&String> = shorts.iter().collect();
    assert_eq!(set.len(), shorts.len(), "{shorts:#?}");
    for s in &shorts {
        assert!(!s.ends_with("::") && !s.contains("anonymous") && !s.is_empty() && s.chars().count() <= 64, "{s}");
    }
    assert!(shorts.iter().any(|s| s.starts_with("CatArrayBatchedCopy_vectorized")), "{shorts:#?}");
    assert!(shorts.iter().any(|s| s.contains("MulFunctor")) && shorts.iter().any(|s| s.contains("neg_kernel_cuda")), "{shorts:#?}");

    let rules = Rules::builtin().unwrap();
    let fit = fit_of(&row, &rules);
    let hot: std::collections::BTreeSet<&str> = fit.kernels.iter().map(|k| k.short_name.as_str()).collect();
    assert_eq!(hot.len(), fit.kernels.len());
    // Rule texts quote the short name.
    let f = fit
        .kernels
        .iter()
        .flat_map(|k| &k.findings)
        .find(|f| f.kernel.as_deref().is_some_and(|k| k.starts_with("void at::native")))
        .expect("a finding on an ATen kernel");
    assert!(!f.text.contains("void at::native"), "{}", f.text);
}

#[test]
fn the_default_text_is_short_and_leads_with_the_phase() {
    let rules = Rules::builtin().unwrap();
    let fit = fit_of(&llama(), &rules);
    for (what, out) in [("text", katlas_advise::render::fit_text(&fit)), ("markdown", katlas_advise::render::fit_markdown(&fit))] {
        let lines = out.lines().count();
        assert!(lines <= 60, "{what}: {lines} lines\n{out}");
        // The first finding printed is the phase's.
        let first = out.lines().find(|l| l.contains("[rule ")).unwrap();
        assert!(first.contains("likely limit") && first.contains("launch/CPU-bound"), "{what}: {first}");
        // A rule that holds on most kernels is said once, not on every kernel.
        for rule in ["grid_underfill", "low_occupancy", "idle_both", "idle_memory"] {
            let n = out.matches(&format!("rule {rule}")).count();
            assert!(n <= 1, "{what}: {rule} said {n} times\n{out}");
        }
        // Every hot kernel is listed by its short name.
        for k in &fit.kernels {
            assert!(out.contains(&k.short_name), "{what}: {}", k.short_name);
        }
        assert!(!out.contains("void at::native"), "{what}: full signatures belong to --verbose");
    }
    // --verbose keeps every per-kernel finding.
    let verbose = katlas_advise::render::fit_text_verbose(&fit);
    assert!(verbose.matches("[rule low_occupancy").count() >= 5 && verbose.contains("void at::native::elementwise_kernel"), "{verbose}");
}

#[test]
fn gemv_and_gemm_kernels_show_bandwidth_from_shapes() {
    let rules = Rules::builtin().unwrap();
    let row = llama();
    let fit = fit_of(&row, &rules);
    let gemms: Vec<_> = fit.kernels.iter().filter(|k| k.name.starts_with("nvjet_")).collect();
    assert!(gemms.len() >= 3);
    for k in &gemms {
        let t = &k.throughput;
        assert_eq!(t.bw_source.as_deref(), Some("from shapes"), "{}", k.name);
        let pct = t.bw_pct_of_peak.unwrap();
        assert!(pct > 1.0 && pct < 100.0, "{}: {pct}%", k.name);
        assert!(t.compute_pct_of_peak.is_some() && t.tflops.is_some(), "{}", k.name);
    }
    // The hottest GEMV: x[1,2048] W[2048,3840] bf16 per call (15.74 MB) in 6.85 us = 2298 GB/s.
    let top = &gemms[0];
    assert!((top.throughput.bw_gbps.unwrap() - 2298.0).abs() < 5.0, "{:?}", top.throughput);
    let text = katlas_advise::render::fit_text(&fit);
    assert!(text.contains("% of peak (from shapes)"), "{text}");
    // The trace records its shapes; the parser says so.
    let out = katlas_collect::parse_with(
        "torch-trace",
        katlas_collect::Input::File(&common::shared().join("h200/torch_llama_decode_trace.json.gz")),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(out.artifacts.get("record_shapes"), Some(&serde_json::json!(true)));
}

/// The same trace read as if it had no step markers (`steps`, `launches_per_step`, `step_us`
/// absent, as the parser leaves them) and no host launch calls: the host_bound finding still
/// leads, without the per-step and host clauses and without an unfilled placeholder.
#[test]
fn host_bound_without_step_markers_prints_no_placeholder() {
    let rules = Rules::builtin().unwrap();
    let mut row = llama();
    for k in ["steps", "launches_per_step", "step_us", "host_launch_us"] {
        assert!(row.metrics.remove(k).is_some(), "the trace has {k}");
    }
    let fit = fit_of(&row, &rules);
    let lead = fit.likely_limit.first().expect("a likely limit");
    assert_eq!(lead.rule, "host_bound");
    assert!(!lead.text.contains('{') && !lead.text.contains("per step") && !lead.text.contains("host time"), "{}", lead.text);
    assert!(lead.text.contains("median gap of 30.7 us") && lead.text.ends_with("launches: the GPU waits on the host"), "{}", lead.text);
    for f in fit.phase.findings.iter().chain(fit.kernels.iter().flat_map(|k| &k.findings)) {
        assert!(!f.text.contains('{') && !f.text.contains("unknown"), "[{}] {}", f.rule, f.text);
    }
}

/// On the H200 the rule texts speak NVIDIA's words (issue 16): warps per SM sub-partition, not
/// waves per SIMD; the missing-ISA line names shared memory, not LDS or wave size.
#[test]
fn nvidia_findings_say_warps_and_shared_memory() {
    let rules = Rules::builtin().unwrap();
    let fit = fit_of(&llama(), &rules);
    let findings: Vec<_> = fit.kernels.iter().flat_map(|k| &k.findings).collect();
    let occ = findings.iter().find(|f| f.rule == "low_occupancy").expect("low_occupancy fires on the trace's kernels");
    assert!(occ.text.contains("warps per SM sub-partition"), "{}", occ.text);
    let under = findings.iter().find(|f| f.rule == "grid_underfill").expect("grid_underfill fires");
    assert!(under.text.contains("SM sub-partitions") && under.text.contains("warps for"), "{}", under.text);
    for f in findings {
        assert!(!f.text.contains("SIMD") && !f.text.contains("waves"), "[{}] {}", f.rule, f.text);
        // the source line is what the fit read quotes for a rule common to several kernels
        assert!(!f.source.contains("SIMD") && !f.source.contains("wave") && !f.source.contains("VALU"), "[{}] {}", f.rule, f.source);
    }
    for out in [katlas_advise::render::fit_text(&fit), katlas_advise::render::fit_text_verbose(&fit), katlas_advise::render::fit_markdown(&fit)] {
        for word in ["SIMD", "VGPR", "VALU", "LDS", "waves per"] {
            assert!(!out.contains(word), "`{word}` in an sm_90 fit:\n{out}");
        }
    }
    let isa = fit.evidence.missing.iter().find(|m| m.evidence.starts_with("an ISA manifest (`katlas isa scan`)")).unwrap();
    assert!(isa.evidence.contains("shared memory") && !isa.evidence.contains("LDS") && !isa.evidence.contains("wave size"), "{}", isa.evidence);
}

/// A row whose identity names no device (collected where nvidia-smi gave none, or imported)
/// still has the profiler's own record of it: the trace's deviceProperties picks the product.
#[test]
fn the_traces_own_device_names_the_product() {
    let rules = Rules::builtin().unwrap();
    let mut row = llama();
    let device = row.identity.devices.remove(0).product.expect("the trace names its device");
    let mut route = row.route.clone().unwrap_or_default();
    route.attributes.insert("device".into(), serde_json::json!(device));
    row.route = Some(route);
    let fit = build_fit(&FitInput { row: Some(&row), isa: None, product: None, arch: None, db: ArchDb::builtin(), rules: &rules, row_source: None }).unwrap();
    assert_eq!(fit.header.product.as_deref(), Some("NVIDIA H200"));
    assert!(fit.header.product_source.as_deref().is_some_and(|s| s.contains("profiled device")), "{:?}", fit.header.product_source);
}

const TRITON_WORKLOADS: [&str; 4] = ["liger-decode", "liger-prefill", "fla-decode", "fla-prefill"];

fn triton_dir(w: &str) -> std::path::PathBuf {
    common::shared().join("triton-h200").join(w)
}

fn extra_str<'a>(k: &'a katlas_model::KernelSample, key: &str) -> Option<&'a str> {
    k.extra.get(key).and_then(|v| v.as_str())
}

/// The kernel events of one name in a trace: (block x, shared memory) of each.
fn trace_launches(trace: &Path, name: &str) -> Vec<(u64, u64)> {
    let mut text = String::new();
    katlas_collect::parse::open_maybe_gz(trace).unwrap().read_to_string(&mut text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"] == name)
        .map(|e| (e["args"]["block"][0].as_u64().unwrap(), e["args"]["shared memory"].as_u64().unwrap()))
        .collect()
}

#[test]
fn every_triton_kernel_of_the_four_h200_workloads_gets_bytes_with_a_named_source_and_pct_of_peak() {
    let rules = Rules::builtin().unwrap();
    for w in TRITON_WORKLOADS {
        let trace = triton_dir(w).join("trace.json.gz");
        let row = trace_row(&trace);
        let triton: Vec<&katlas_model::KernelSample> = row.kernels.iter().filter(|k| k.extra.contains_key("triton")).collect();
        assert!(triton.len() >= 3, "{w}: {} Triton kernels known to the launch records and cache", triton.len());
        for k in &triton {
            let src = extra_str(k, "bytes_source").unwrap_or_else(|| panic!("{w}: {} has no bytes ({:?})", k.name, k.extra.get("bytes_note")));
            assert!(
                src.split('+').all(|s| ["launch operands by loads/stores", "launch operands", "op operands", "shapes"].contains(&s)),
                "{w}: {}: {src}",
                k.name
            );
            assert!(k.bytes.is_some_and(|b| b > 0.0), "{w}: {}", k.name);
            // The join picked the cache entry of the launch configuration the trace ran.
            let t: katlas_collect::parse::triton_join::TritonFacts = serde_json::from_value(k.extra["triton"].clone()).unwrap();
            let entry = t.cache_entry.as_deref().unwrap_or_else(|| panic!("{w}: {}: no cache entry", k.name));
            let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(entry).unwrap()).unwrap();
            let (warps, shared) = (meta["num_warps"].as_u64().unwrap(), meta["shared"].as_u64().unwrap());
            assert_eq!((t.num_warps.map(u64::from), t.shared), (Some(warps), Some(shared)), "{w}: {}", k.name);
            assert!(trace_launches(&trace, &k.name).contains(&(warps * 32, shared)), "{w}: {}: the trace never ran {warps} warps with {shared} B", k.name);
        }
        let fit = fit_of(&row, &rules);
        for kf in fit.kernels.iter().filter(|k| k.triton.is_some()) {
            assert!(kf.throughput.bw_pct_of_peak.is_some(), "{w}: {} % of peak", kf.name);
            let src = kf.throughput.bytes_source.as_deref().unwrap();
            assert!(kf.throughput.bw_source.as_deref().unwrap().starts_with(src), "{w}: {:?}", kf.throughput);
            assert!(kf.signals.contains_key("triton.num_warps"), "{w}: {}", kf.name);
        }
        let text = katlas_advise::render::fit_text(&fit);
        assert!(!text.contains("bandwidth unknown (no byte counts)"), "{w}:\n{text}");
        assert!(text.contains("triton: num_warps"), "{w}:\n{text}");
    }
}

#[test]
fn the_rms_norm_of_liger_decode_shows_its_launch_facts_and_autotune_winners_show_in_fla() {
    let row = trace_row(&triton_dir("liger-decode").join("trace.json.gz"));
    let k = row.kernels.iter().find(|k| k.name == "_rms_norm_forward_kernel").unwrap();
    let t = &k.extra["triton"];
    assert_eq!((t["num_warps"].as_u64(), t["num_stages"].as_u64(), t["shared"].as_u64()), (Some(8), Some(3), Some(32)));
    assert_eq!(t["constexprs"]["BLOCK_SIZE"], 2048);
    assert_eq!(extra_str(k, "bytes_source"), Some("launch operands by loads/stores"));
    let row = trace_row(&triton_dir("fla-decode").join("trace.json.gz"));
    let k = row.kernels.iter().find(|k| k.name == "causal_conv1d_update_kernel").unwrap();
    let a = &k.extra["triton"]["autotune"];
    assert_eq!(a["configs"], 24, "{a}");
    assert_eq!(a["best"]["kwargs"]["BD"], k.extra["triton"]["constexprs"]["BD"], "the winner is what ran");
}

#[test]
fn a_multi_kernel_ops_bytes_are_never_copied_onto_its_kernels() {
    // Without launch records (the trace alone, read from a stream: nothing beside it) the
    // six kernels of ChunkGatedDeltaRuleFunction get no bytes, only why; single-kernel ops
    // (LayerNormFunction) get their operands.
    let path = triton_dir("fla-prefill").join("trace.json.gz");
    let mut f = std::fs::File::open(&path).unwrap();
    let out = katlas_collect::parse_with("torch-trace", katlas_collect::Input::Reader { reader: &mut f, source: "t" }, &Default::default()).unwrap();
    let ks = &out.phases.iter().find(|t| !t.kernels.is_empty()).unwrap().kernels;
    for name in ["chunk_fwd_kernel_o", "recompute_w_u_fwd_kernel", "l2norm_fwd_kernel", "chunk_gated_delta_rule_fwd_kkt_solve_kernel"] {
        let k = ks.iter().find(|k| k.name == name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(k.bytes, None, "{name}");
        let note = extra_str(k, "bytes_note").unwrap_or_default();
        assert!(note.contains("ChunkGatedDeltaRuleFunction") && note.contains("kernels per call"), "{name}: {note}");
    }
    let ln = ks.iter().find(|k| k.name == "layer_norm_fwd_kernel1").unwrap();
    assert_eq!(extra_str(ln, "bytes_source"), Some("op operands"));
    // With the records, chunk_fwd_kernel_o's bytes are its own tensors', not the op's.
    let row = trace_row(&path);
    let k = row.kernels.iter().find(|k| k.name == "chunk_fwd_kernel_o").unwrap();
    assert_eq!(extra_str(k, "bytes_source"), Some("launch operands by loads/stores"));
}

#[test]
fn a_graph_replayed_kernel_gets_one_line_naming_the_counters_command() {
    // The real fla-decode trace, with the launch of causal_conv1d_update_kernel made a
    // cudaGraphLaunch: a replay has no op, and the hook never saw it.
    let src = triton_dir("fla-decode");
    let mut text = String::new();
    katlas_collect::parse::open_maybe_gz(&src.join("trace.json.gz")).unwrap().read_to_string(&mut text).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let evs = v["traceEvents"].as_array_mut().unwrap();
    let corr: std::collections::BTreeSet<i64> =
        evs.iter().filter(|e| e["cat"] == "kernel" && e["name"] == "causal_conv1d_update_kernel").map(|e| e["args"]["correlation"].as_i64().unwrap()).collect();
    for e in evs.iter_mut() {
        if e["cat"] == "cuda_driver" && e["args"]["correlation"].as_i64().is_some_and(|c| corr.contains(&c)) {
            e["cat"] = "cuda_runtime".into();
            e["name"] = "cudaGraphLaunch".into();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    std::fs::copy(src.join("launches.jsonl"), dir.path().join("launches.jsonl")).unwrap();
    let row = trace_row(&dir.path().join("trace.json"));
    let k = row.kernels.iter().find(|k| k.name == "causal_conv1d_update_kernel").unwrap();
    assert_eq!(k.bytes, None);
    let note = extra_str(k, "bytes_note").unwrap();
    assert!(note.starts_with("no op in the trace (CUDA graph replay"), "{note}");
    assert!(note.contains("katlas collect WORKLOAD --profile") && note.contains("ncu"), "{note}");
    assert!(!note.contains('\n'), "one line");
    // The other kernels still join.
    // The other kernels still join (no Triton cache beside the copy: each tensor once).
    let other = row.kernels.iter().find(|k| k.name == "layer_norm_gated_fwd_kernel").unwrap();
    assert_eq!(extra_str(other, "bytes_source"), Some("launch operands"));
    let rules = Rules::builtin().unwrap();
    let fit = fit_of(&row, &rules);
    if let Some(kf) = fit.kernels.iter().find(|k| k.name == "causal_conv1d_update_kernel") {
        let text = katlas_advise::render::fit_text(&fit);
        assert!(kf.bytes_note.is_some() && text.contains("no op in the trace (CUDA graph replay"), "{text}");
    }
}

#[test]
fn bad_launch_record_lines_are_warnings_naming_file_and_line_and_the_good_ones_still_join() {
    let src = triton_dir("liger-decode");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("trace.json.gz"), dir.path().join("trace.json.gz")).unwrap();
    let good = std::fs::read_to_string(src.join("launches.jsonl")).unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(1, "{\"katlas_triton_launch\": 1, \"kernel\": \"x\", \"tensors\": \"not a list\"}");
    lines.insert(0, "{not json");
    std::fs::write(dir.path().join("triton-launches.jsonl"), lines.join("\n")).unwrap();
    let path = dir.path().join("trace.json.gz");
    let out = katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(&path), &Default::default()).unwrap();
    let file = dir.path().join("triton-launches.jsonl").display().to_string();
    assert!(out.warnings.iter().any(|w| w.starts_with(&format!("{file}:1: not JSON"))), "{:?}", out.warnings);
    assert!(out.warnings.iter().any(|w| w.starts_with(&format!("{file}:3: field `tensors`"))), "{:?}", out.warnings);
    let ks = &out.phases.iter().find(|t| !t.kernels.is_empty()).unwrap().kernels;
    let k = ks.iter().find(|k| k.name == "_rms_norm_forward_kernel").unwrap();
    assert_eq!(extra_str(k, "bytes_source"), Some("launch operands"));
}

/// `ncu-by-phase.csv`: per kernel name, the mean DRAM bytes (read + written) of all its launches.
fn ncu_per_launch(path: &Path) -> HashMap<String, f64> {
    let mut sums: HashMap<String, (f64, f64)> = HashMap::new();
    for r in csv::Reader::from_path(path).unwrap().records() {
        let r = r.unwrap();
        let n: f64 = r[3].parse().unwrap();
        let e = sums.entry(r[1].to_string()).or_default();
        e.0 += n;
        e.1 += n * (r[4].parse::<f64>().unwrap() + r[5].parse::<f64>().unwrap());
    }
    sums.into_iter().map(|(k, (n, b))| (k, b / n)).collect()
}

#[test]
fn triton_bytes_through_loads_and_stores_land_within_15_percent_of_ncu_dram_bytes() {
    // The eight hottest Triton kernels of six H200 workloads, bytes per launch over the whole
    // run, against the mean DRAM bytes (read + write) of the same launches under ncu. The old
    // count (each tensor once, reads and writes alike) was within 15% on 9 of 21: decode writes
    // stay in the L2, in-place kernels write what they read, causal_conv1d_states_fwd_kernel
    // reads 4 of its input's 64 rows. liger-wide and fla-narrow have shapes no constant was set
    // on. (Per decode launch of a few KB, ncu's flushed caches add the kernel's code and
    // parameters, a few KB, that no operand count holds: docs/GPU.md.)
    let root = common::shared().join("triton-h200-bytes");
    let (mut within, mut total, mut table) = (0, 0, String::new());
    for w in ["liger-decode", "liger-prefill", "fla-decode", "fla-prefill", "liger-wide", "fla-narrow"] {
        let dir = root.join(w);
        let out = katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(&dir.join("trace.json.gz")), &Default::default()).unwrap();
        let ncu = ncu_per_launch(&dir.join("ncu-by-phase.csv"));
        let mut ks: Vec<&katlas_model::KernelSample> = out.phases.iter().flat_map(|t| &t.kernels).filter(|k| k.extra.contains_key("triton")).collect();
        ks.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        for k in ks.into_iter().take(8) {
            let dram = ncu[&k.name];
            let est = k.bytes.unwrap_or_else(|| panic!("{w} {}: no bytes", k.name));
            let ratio = est / dram;
            total += 1;
            within += usize::from((ratio - 1.0).abs() <= 0.15);
            table.push_str(&format!("{w} {}: katlas {est:.0} ncu {dram:.0} ratio {ratio:.2} ({})\n", k.name, extra_str(k, "bytes_source").unwrap_or("-")));
        }
    }
    assert!(total >= 30, "{total} hot kernels:\n{table}");
    assert!(within * 10 >= total * 9, "{within} of {total} within 15%:\n{table}");
    // The ones the old count missed most: an fp32 state read and written (the write stays in
    // the L2: was 2.03), an in-place rotation (0.70), a 22 KB slice read bounded by the grid
    // (14.0; ncu adds the code fetch of so small a kernel).
    for (w, name, tolerance) in [
        ("fla-decode", "fused_recurrent_gated_delta_rule_fwd_kernel", 0.15),
        ("liger-prefill", "_triton_rope", 0.15),
        ("fla-decode", "causal_conv1d_states_fwd_kernel", 0.25),
    ] {
        let line = table.lines().find(|l| l.starts_with(&format!("{w} {name}:"))).unwrap_or_else(|| panic!("{w} {name}:\n{table}"));
        let ratio: f64 = line.split("ratio ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!((ratio - 1.0).abs() <= tolerance, "{line}");
        assert!(line.ends_with("(launch operands by loads/stores)"), "{line}");
    }
    println!("{within} of {total} within 15%:\n{table}");
}

/// A phase's metrics from a parse with `prefill`/`decode` phases.
fn phase_metric(out: &katlas_collect::ParseOutput, phase: &str, key: &str) -> Option<f64> {
    out.phases.iter().find(|t| t.phase == phase)?.metrics.get(key).map(|m| m.value)
}

#[test]
fn host_launches_are_counted_per_phase_and_a_graph_launch_is_one_launch() {
    let src = common::shared().join("triton-h200-bytes/fla-decode/trace.json.gz");
    let opts = katlas_collect::parse::ParserOptions { phases: vec!["prefill".into(), "decode".into()], ..Default::default() };
    let parse = |path: &Path| katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(path), &opts).unwrap();
    // The real trace: each phase's launch calls are the ones made inside its host range.
    let out = parse(&src);
    let whole = katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(&src), &Default::default()).unwrap();
    let total = whole.phases[0].metrics["host_launch_calls"].value;
    let (pre, dec) = (phase_metric(&out, "prefill", "host_launch_calls").unwrap(), phase_metric(&out, "decode", "host_launch_calls").unwrap());
    assert_eq!(pre + dec, total, "prefill {pre} + decode {dec}");
    assert!(pre < dec && pre > 0.0, "prefill {pre}, decode {dec}");
    // The same decode replayed from CUDA graphs: per decode step one cudaGraphLaunch whose
    // correlation every kernel of the step carries, no other launch call in the step.
    let mut text = String::new();
    katlas_collect::parse::open_maybe_gz(&src).unwrap().read_to_string(&mut text).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let evs = v["traceEvents"].as_array_mut().unwrap();
    let span = |e: &serde_json::Value| (e["ts"].as_f64().unwrap(), e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap());
    let host: Vec<(f64, f64)> = evs.iter().filter(|e| e["cat"] == "user_annotation" && e["name"] == "decode").map(span).collect();
    let gpu: Vec<(f64, f64)> = evs.iter().filter(|e| e["cat"] == "gpu_user_annotation" && e["name"] == "decode").map(span).collect();
    assert_eq!(host.len(), gpu.len());
    let is_launch =
        |e: &serde_json::Value| (e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver") && e["name"].as_str().is_some_and(|n| n.contains("LaunchKernel"));
    let mut graph_corr = vec![None; host.len()];
    let mut drop = Vec::new();
    for (i, e) in evs.iter_mut().enumerate() {
        let Some(step) = host.iter().position(|r| is_launch(e) && r.0 <= e["ts"].as_f64().unwrap() && e["ts"].as_f64().unwrap() <= r.1) else { continue };
        if graph_corr[step].is_none() {
            graph_corr[step] = e["args"]["correlation"].as_i64();
            e["cat"] = "cuda_runtime".into();
            e["name"] = "cudaGraphLaunch".into();
        } else {
            drop.push(i);
        }
    }
    for i in drop.into_iter().rev() {
        evs.remove(i);
    }
    for e in evs.iter_mut().filter(|e| e["cat"] == "kernel") {
        let ts = e["ts"].as_f64().unwrap();
        if let Some(step) = gpu.iter().position(|r| r.0 <= ts && ts <= r.1) {
            e["args"]["correlation"] = graph_corr[step].unwrap().into();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let out = parse(&path);
    let steps = host.len() as f64;
    assert_eq!(phase_metric(&out, "decode", "launches"), Some(steps), "one launch per graph launch");
    assert_eq!(phase_metric(&out, "decode", "graph_launches"), Some(steps));
    assert_eq!(phase_metric(&out, "decode", "host_launch_calls"), Some(steps));
    assert!(phase_metric(&out, "decode", "graph_replayed_kernels").unwrap() > 10.0 * steps);
    // The prefill, launched kernel by kernel, keeps its own count and host time.
    assert_eq!(phase_metric(&out, "prefill", "host_launch_calls"), Some(pre));
    assert_eq!(phase_metric(&out, "prefill", "graph_launches"), None);
}

#[test]
fn a_ttir_that_is_a_link_is_never_read() {
    // A cache entry's `<name>.source` replaced by a link (to a file outside the cache): the
    // kernel falls back to each tensor once instead of reading through the link.
    let src = common::shared().join("triton-h200-bytes/liger-prefill");
    let dir = tempfile::tempdir().unwrap();
    for f in ["trace.json.gz", "launches.jsonl"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let outside = dir.path().join("outside.ttir");
    for e in std::fs::read_dir(src.join("triton-cache")).unwrap().flatten() {
        let to = dir.path().join("triton-cache").join(e.file_name());
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(e.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            if name == "_rms_norm_forward_kernel.source" {
                std::fs::copy(f.path(), &outside).unwrap();
                std::os::unix::fs::symlink(&outside, to.join(&name)).unwrap();
            } else {
                std::fs::copy(f.path(), to.join(&name)).unwrap();
            }
        }
    }
    let row = trace_row(&dir.path().join("trace.json.gz"));
    let k = row.kernels.iter().find(|k| k.name == "_rms_norm_forward_kernel").unwrap();
    assert_eq!(extra_str(k, "bytes_source"), Some("launch operands"));
    let k = row.kernels.iter().find(|k| k.name == "_swiglu_forward_kernel").unwrap();
    assert_eq!(extra_str(k, "bytes_source"), Some("launch operands by loads/stores"));
}

/// One phase's kernel table of a parse, with the demangled names `katlas parse` and `fit` add.
fn phase_table(out: &katlas_collect::ParseOutput, phase: &str) -> Vec<katlas_model::KernelSample> {
    let mut k = out.phase(phase).unwrap_or_else(|| panic!("phase {phase}")).kernels.clone();
    katlas_collect::ops::OpRules::builtin().classify_all(&mut k);
    k
}

/// Indices of a table's kernels, hottest first by its own times.
fn by_time(t: &[katlas_model::KernelSample]) -> Vec<usize> {
    let mut i: Vec<usize> = (0..t.len()).collect();
    i.sort_by(|a, b| t[*b].total_us.total_cmp(&t[*a].total_us));
    i
}

/// Proton's trace output (`data="trace"`), Proton's hatchet tree and the torch.profiler trace of
/// one program and its arguments (flash-linear-attention's GatedDeltaNet on the H200, `prefill`
/// and `decode` as Proton scopes and as `record_function` ranges; fixtures/proton-h200), each
/// from its own process: all three profilers sit on CUPTI's activity API, so one run carries
/// one. The Proton trace names C++ kernels by their mangled symbols like the tree, the torch
/// trace by CUPTI's demangled signatures; each trace kernel joins exactly one kernel of each
/// through `names::match_level` (`exact` for the tree and for Triton and cuBLAS names,
/// `demangled` for the mangled ATen and cublasLt ones).
///
/// Measured on these files before the tolerances were set: launches per kernel and phase are
/// equal in all three. Per phase the GPU time differs by 0.53% (prefill) and 0.71% (decode)
/// from the tree, 0.26% and 0.52% from the torch trace. Kernels with at least 5% of their
/// phase in both differ by at most 1.18% (nvjet 64x8 1x1_h in decode, against either). The
/// small autotuned Triton kernels move most between processes: up to 22.2% against the tree
/// (layer_norm_gated_fwd_kernel in prefill: 16.6 vs 21.4 us) and 30.8% against the torch trace
/// (swiglu_fwd_kernel in decode: 93.5 vs 71.5 us). So the hot kernels agree only up to that
/// noise: the top five of each phase are the torch trace's, in order; the tree's decode top
/// five swaps its fourth and sixth (layer_norm_fwd_kernel1 took 310 us in the tree's process,
/// 260 in the trace's), each of the two within 1.4% of the other profile's fifth. The test
/// holds: launches exactly, 1.5% per phase, 2% for kernels of at least 5%, 40% for any kernel
/// (a unit slip would be a factor of 1000), the top three in order in all three, the top five
/// in order against the torch trace, and against the tree a kernel in only one top five lies
/// within 5% of the other's fifth.
#[test]
fn proton_trace_tree_and_torch_trace_of_one_program_agree() {
    use katlas_advise::names::{match_level, MatchLevel};
    use katlas_collect::{Input, ParserOptions};
    let dir = common::shared().join("proton-h200");
    let parse = |parser: &str, file: &str, phases: &[&str]| {
        let opts = ParserOptions { phases: phases.iter().map(|p| p.to_string()).collect(), ..Default::default() };
        let out = katlas_collect::parse_with(parser, Input::File(&dir.join(file)), &opts).unwrap();
        assert!(out.warnings.is_empty(), "{file}: {:?}", out.warnings);
        out
    };
    let trace_file = "fla-decode-trace.chrome_trace.gz";
    let trace = parse("proton", trace_file, &[]);
    let tree = parse("proton", "fla-decode.hatchet", &[]);
    let torch = parse("torch-trace", "fla-decode-torch-trace.json.gz", &["prefill", "decode"]);
    let rules = Rules::builtin().unwrap();
    for phase in ["prefill", "decode"] {
        let (p, h, t) = (phase_table(&trace, phase), phase_table(&tree, phase), phase_table(&torch, phase));
        assert_eq!((p.len(), p.len()), (h.len(), t.len()), "{phase}: kernel count");
        // For each trace kernel, the one kernel of the other profile that it names.
        let join = |other: &[katlas_model::KernelSample], same_spelling: bool| -> Vec<usize> {
            p.iter()
                .map(|k| {
                    let hits: Vec<(usize, MatchLevel)> =
                        other.iter().enumerate().filter_map(|(i, o)| match_level(&o.name, &[&k.name]).map(|l| (i, l))).collect();
                    assert_eq!(hits.len(), 1, "{phase}: {} joins {:?}", k.name, hits.iter().map(|h| &other[h.0].name).collect::<Vec<_>>());
                    let want = if same_spelling || !k.name.starts_with("_Z") { MatchLevel::Exact } else { MatchLevel::Demangled };
                    assert_eq!(hits[0].1, want, "{phase}: {}", k.name);
                    hits[0].0
                })
                .collect()
        };
        let (to_h, to_t) = (join(&h, true), join(&t, false));
        let total = |v: &[katlas_model::KernelSample]| v.iter().map(|k| k.total_us).sum::<f64>();
        let tp = total(&p);
        for (other, ot, idx) in [("tree", &h, &to_h), ("torch trace", &t, &to_t)] {
            let o_total = total(ot);
            assert!((tp - o_total).abs() / o_total < 0.015, "{phase}: {tp} vs {other} {o_total} us");
            for (i, k) in p.iter().enumerate() {
                let o = &ot[idx[i]];
                let name = &t[to_t[i]].name;
                assert_eq!(k.calls, o.calls, "{phase}: {name}: launches vs the {other}");
                let rel = (k.total_us - o.total_us).abs() / o.total_us;
                assert!(rel < 0.40, "{phase}: {name}: {} vs {} us in the {other}", k.total_us, o.total_us);
                if k.total_us / tp >= 0.05 && o.total_us / o_total >= 0.05 {
                    assert!(rel < 0.02, "{phase}: {name}: {} vs {} us in the {other}", k.total_us, o.total_us);
                }
            }
        }
        // Hot kernels, as trace indices in each profile's own order, named as the torch trace names them.
        let inv = |idx: &[usize], n: usize| -> Vec<usize> { (0..n).map(|j| idx.iter().position(|&x| x == j).unwrap()).collect() };
        let (from_h, from_t) = (inv(&to_h, h.len()), inv(&to_t, t.len()));
        let rank_p = by_time(&p);
        let rank_h: Vec<usize> = by_time(&h).into_iter().map(|j| from_h[j]).collect();
        let rank_t: Vec<usize> = by_time(&t).into_iter().map(|j| from_t[j]).collect();
        let names = |r: &[usize]| r.iter().map(|&i| t[to_t[i]].name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&rank_p[..3]), names(&rank_h[..3]), "{phase}: the three hottest, trace vs tree");
        assert_eq!(names(&rank_p[..5]), names(&rank_t[..5]), "{phase}: the five hottest, trace vs torch trace");
        let time_p = |i: usize| p[i].total_us;
        let time_h = |i: usize| h[to_h[i]].total_us;
        for (mine, theirs, their_time, who) in [(&rank_p, &rank_h, &time_h as &dyn Fn(usize) -> f64, "tree"), (&rank_h, &rank_p, &time_p, "trace")] {
            let fifth = their_time(theirs[4]);
            for &i in mine[..5].iter().filter(|i| !theirs[..5].contains(i)) {
                assert!(their_time(i) >= 0.95 * fifth, "{phase}: {} is hot but {} us in the {who}, whose fifth is {fifth} us", t[to_t[i]].name, their_time(i));
            }
        }
        // `fit --parse proton` on the trace: its hot kernels and the phase's timeline.
        let out = &trace;
        let table = out.phase(phase).unwrap();
        let mut row = Row::new("fla-decode", phase);
        row.origin = Some(Origin { kind: "parse".into(), file: Some(trace_file.into()), parsers: vec!["proton".into()], ..Default::default() });
        row.metrics.extend(out.metrics.clone());
        row.metrics.extend(table.metrics.clone());
        row.kernels = p.clone();
        let fit = fit_of(&row, &rules);
        let hot: Vec<String> = fit.kernels.iter().take(3).map(|k| t[to_t[p.iter().position(|x| x.name == k.name).unwrap()]].name.clone()).collect();
        assert_eq!(hot, names(&rank_t[..3]), "{phase}: fit's three hottest");
        for k in &fit.kernels {
            let i = p.iter().position(|x| x.name == k.name).unwrap();
            assert_eq!(k.calls, Some(t[to_t[i]].calls), "{phase}: {}", k.name);
        }
        match fit.phase.signals.get("gpu_busy_pct") {
            Some(katlas_advise::expr::Val::Num(n)) => assert_eq!(*n, table.metrics["gpu_busy_pct"].value, "{phase}"),
            other => panic!("{phase}: gpu_busy_pct {other:?}"),
        }
    }
}

/// The real graph-replayed decode (fixtures/torch-h200-graph): HF Llama, 4 layers, 16 decode
/// tokens each replayed from one CUDA graph, torch.profiler on an H200.
fn graph_decode() -> (std::path::PathBuf, serde_json::Value) {
    let path = common::shared().join("torch-h200-graph/llama-graph-decode.json.gz");
    let mut text = String::new();
    katlas_collect::parse::open_maybe_gz(&path).unwrap().read_to_string(&mut text).unwrap();
    (path.clone(), serde_json::from_str(&text).unwrap())
}

/// What the trace itself says of its `decode` ranges, read with serde_json alone.
struct DecodeFacts {
    graph_launches: f64,
    /// Kernels of the decode GPU ranges: replayed by a graph launch, launched one by one.
    replayed: f64,
    plain: f64,
    /// Host launch calls inside the decode host ranges (a driver call inside a runtime call on
    /// the same thread is the same launch) and their mean duration.
    host_calls: f64,
    host_us: f64,
    /// The same over the whole trace.
    all_host_us: f64,
    busy_us: f64,
}

fn decode_facts(v: &serde_json::Value) -> DecodeFacts {
    let evs = v["traceEvents"].as_array().unwrap();
    let num = |e: &serde_json::Value, k: &str| e[k].as_f64().unwrap();
    let ranges = |cat: &str| -> Vec<(f64, f64)> {
        evs.iter().filter(|e| e["cat"] == cat && e["name"] == "decode").map(|e| (num(e, "ts"), num(e, "ts") + num(e, "dur"))).collect()
    };
    let (host, gpu) = (ranges("user_annotation"), ranges("gpu_user_annotation"));
    let inside = |rs: &[(f64, f64)], t: f64| rs.iter().any(|r| r.0 <= t && t <= r.1);
    let apis = &katlas_collect::parse::timeline::rules().launch_apis;
    let api = |e: &&serde_json::Value| (e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver") && apis.iter().any(|a| e["name"] == a.as_str());
    let calls: Vec<&serde_json::Value> = evs.iter().filter(api).collect();
    let runtime: Vec<(&serde_json::Value, f64, f64)> =
        calls.iter().filter(|e| e["cat"] == "cuda_runtime").map(|e| (&e["tid"], num(e, "ts"), num(e, "ts") + num(e, "dur"))).collect();
    let own = |e: &&&serde_json::Value| e["cat"] == "cuda_runtime" || !runtime.iter().any(|r| *r.0 == e["tid"] && r.1 <= num(e, "ts") && num(e, "ts") <= r.2);
    let mean = |v: &[&&serde_json::Value]| v.iter().map(|e| num(e, "dur")).sum::<f64>() / v.len() as f64;
    let all: Vec<&&serde_json::Value> = calls.iter().filter(own).collect();
    let mine: Vec<&&serde_json::Value> = all.iter().copied().filter(|e| inside(&host, num(e, "ts"))).collect();
    let graph: Vec<i64> = calls.iter().filter(|e| e["name"] == "cudaGraphLaunch").map(|e| e["args"]["correlation"].as_i64().unwrap()).collect();
    let kernels: Vec<&serde_json::Value> = evs.iter().filter(|e| e["cat"] == "kernel" && inside(&gpu, num(e, "ts"))).collect();
    let replayed = kernels.iter().filter(|k| k["args"]["correlation"].as_i64().is_some_and(|c| graph.contains(&c))).count() as f64;
    let graph_in_decode = calls.iter().filter(|e| e["name"] == "cudaGraphLaunch" && inside(&host, num(e, "ts"))).count() as f64;
    let mut iv: Vec<(f64, f64)> = kernels.iter().map(|k| (num(k, "ts"), num(k, "ts") + num(k, "dur"))).collect();
    iv.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut busy, mut end) = (0.0, f64::MIN);
    for (a, b) in iv {
        busy += (b - a.max(end)).max(0.0);
        end = end.max(b);
    }
    DecodeFacts {
        graph_launches: graph_in_decode,
        replayed,
        plain: kernels.len() as f64 - replayed,
        host_calls: mine.len() as f64,
        host_us: mean(&mine),
        all_host_us: mean(&all),
        busy_us: busy,
    }
}

#[test]
fn the_graph_decodes_launches_and_host_time_are_its_own_and_a_graph_launch_is_one_launch() {
    let (path, v) = graph_decode();
    let want = decode_facts(&v);
    // The recording: 16 tokens, one graph launch each, every step's kernels replayed.
    assert_eq!(want.graph_launches, 16.0);
    assert!(want.replayed >= 100.0 * want.graph_launches, "{} replayed", want.replayed);
    // `--phase decode` (what `katlas fit --parse torch-trace FILE --phase decode` passes) and
    // `--phases prefill,decode` read the same decode: its ranges, not the whole trace.
    let one = katlas_collect::parse::ParserOptions { phase: Some("decode".into()), ..Default::default() };
    let both = katlas_collect::parse::ParserOptions { phases: vec!["prefill".into(), "decode".into()], ..Default::default() };
    for opts in [one, both] {
        let out = katlas_collect::parse_with("torch-trace", katlas_collect::Input::File(&path), &opts).unwrap();
        let m = |k: &str| phase_metric(&out, "decode", k).unwrap_or_else(|| panic!("{:?}: decode has no {k}", opts.phases));
        assert_eq!(m("graph_launches"), want.graph_launches);
        assert_eq!(m("graph_replayed_kernels"), want.replayed);
        // What the host issued: one per graph launch, one per kernel launched on its own.
        assert_eq!(m("launches"), want.graph_launches + want.plain);
        assert_eq!(m("host_launch_calls"), want.host_calls);
        assert_eq!(m("launches"), m("host_launch_calls"), "every launch the GPU shows was issued inside the decode range");
        assert!((m("host_launch_us") - want.host_us).abs() < 1e-6, "{} vs {}", m("host_launch_us"), want.host_us);
        assert!((m("host_launch_us") - want.all_host_us).abs() > 1.0, "the whole trace's host time per launch is not decode's");
        // Timeline facts of the decode alone; the mean is per kernel, not per launch.
        assert!((m("gpu_busy_us") - want.busy_us).abs() < 0.01, "{} vs {}", m("gpu_busy_us"), want.busy_us);
        assert!((m("kernel_avg_us") - want.busy_us / (want.replayed + want.plain)).abs() < 1e-6);
        let decode = out.phases.iter().find(|t| t.phase == "decode").unwrap();
        assert_eq!(decode.kernels.iter().map(|k| k.calls).sum::<u64>() as f64, want.replayed + want.plain);
    }
}

#[test]
fn the_graph_decode_fit_read_says_replays_have_no_op_shapes_and_names_the_counters_command() {
    let (path, v) = graph_decode();
    let want = decode_facts(&v);
    let rules = Rules::builtin().unwrap();
    let fit = fit_of(&trace_phase_row(&path, Some("decode")), &rules);
    let c = fit.caveats.iter().find(|f| f.rule == "graph_replay_no_shapes").expect("the graph caveat in the fit read");
    assert!(c.kernel.is_none(), "the phase's caveat, said once");
    assert_eq!(c.numbers.get("graph_replayed_kernels"), Some(&katlas_advise::expr::Val::Num(want.replayed)));
    assert_eq!(c.numbers.get("graph_launches"), Some(&katlas_advise::expr::Val::Num(want.graph_launches)));
    for words in ["no op shapes", "no bytes or FLOPs from shapes", "katlas collect WORKLOAD --profile", "dram__bytes_read.sum", "--graph-profiling node"] {
        assert!(c.text.contains(words), "`{words}` in {}", c.text);
    }
    let text = katlas_advise::render::fit_text(&fit);
    let read = text.split("HOT KERNELS").next().unwrap();
    assert!(read.contains("[rule graph_replay_no_shapes]") && read.contains("--graph-profiling node"), "{read}");
    // The timeline line counts the graph launches beside the launches.
    assert!(
        read.contains(&format!(
            "{} launches, {} of them graph launches replaying {} kernels",
            want.graph_launches + want.plain,
            want.graph_launches,
            want.replayed
        )),
        "{read}"
    );
    // Each hot kernel says why it has no bandwidth; the caveat says how to get it, once.
    let hot = text.split("HOT KERNELS").nth(1).unwrap();
    assert_eq!(hot.matches("(CUDA graph replay").count(), fit.kernels.len(), "{hot}");
    assert!(!hot.contains("dram__bytes_read"), "{hot}");
}

#[test]
fn occupancy_never_leads_on_a_memory_bound_kernel_whose_bandwidth_is_unknown() {
    let (path, _) = graph_decode();
    let rules = Rules::builtin().unwrap();
    let fit = fit_of(&trace_phase_row(&path, Some("decode")), &rules);
    // The decode is busy most of its window: not launch-bound, so a kernel's limit leads.
    assert!(fit.likely_limit.iter().all(|f| f.rule != "host_bound"));
    let lead = fit.likely_limit.first().expect("a likely limit");
    let top = &fit.kernels[0];
    assert!(top.name.starts_with("nvjet_"), "the hottest kernel is cuBLAS's decode GEMM: {}", top.name);
    assert_eq!(lead.kernel.as_deref(), Some(top.name.as_str()));
    assert_eq!(lead.rule, "bandwidth_unknown", "{}", lead.text);
    assert!(lead.text.contains("bandwidth unknown") && lead.text.contains("decode phase `decode`") && lead.text.contains("ncu"), "{}", lead.text);
    // Occupancy and launch shape hold on it, and still do not lead.
    let rules_on_top: Vec<&str> = top.findings.iter().map(|f| f.rule.as_str()).collect();
    assert!(rules_on_top.contains(&"low_occupancy") && rules_on_top.contains(&"grid_underfill"), "{rules_on_top:?}");
    for k in fit.kernels.iter().filter(|k| k.signals.get("memory_class") == Some(&katlas_advise::expr::Val::Bool(true))) {
        let first = k.findings.iter().find(|f| f.kind == katlas_advise::rules::FindingKind::Limit).unwrap();
        assert_eq!(first.rule, "bandwidth_unknown", "{}", k.name);
    }
    let text = katlas_advise::render::fit_text(&fit);
    let read = text.split("HOT KERNELS").next().unwrap();
    let limit = read.lines().find(|l| l.contains("likely limit")).unwrap();
    assert!(!limit.contains("warps per SM sub-partition") && !limit.contains("the GPU is not filled"), "{limit}");
    assert!(!read.contains("[rule low_occupancy]"), "a kernel that needs bytes shows that, not its occupancy:\n{read}");

    // A memory-bound kernel of an eager trace with its bytes taken away: the one-token GEMV
    // (M = 1 from shapes) leads with bandwidth unknown and the counters command, not occupancy.
    let mut row = llama();
    let gemv = row.kernels.iter_mut().filter(|k| k.name.starts_with("nvjet_sm90_tst_64x8")).max_by(|a, b| a.total_us.total_cmp(&b.total_us)).unwrap();
    gemv.bytes = None;
    gemv.extra.remove("bytes_source");
    let name = gemv.name.clone();
    let fit = fit_of(&row, &rules);
    let k = fit.kernels.iter().find(|k| k.name == name).unwrap();
    let first = k.findings.iter().find(|f| f.kind == katlas_advise::rules::FindingKind::Limit).unwrap();
    assert_eq!(first.rule, "bandwidth_unknown", "{}", first.text);
    assert!(first.text.contains("one-token GEMV: M = 1 from shapes") && first.text.contains("dram__bytes_read.sum"), "{}", first.text);
    assert!(k.findings.iter().any(|f| f.rule == "low_occupancy"));
}
