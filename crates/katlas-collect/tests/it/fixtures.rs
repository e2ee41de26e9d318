//! Parsers against the shared real / format-faithful samples (`fixtures/` at the repository root).
//! Expected totals are computed here independently of the parsers (plain
//! string splitting), so a parser bug cannot hide behind its own arithmetic.

use katlas_collect::parse::{parse, parse_with, Input, ParserOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;

use katlas_testkit::fixture;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn hipfire_bench_ar_profile() {
    let o = parse("hipfire-bench", Input::File(&fixture("hipfire/bench_ar_profile.txt"))).unwrap();
    assert_eq!(o.metric("startup_overhead_ms"), Some(-3.41));
    assert_eq!(o.metric("gen_tok_s"), Some(36.2));
    assert_eq!(o.metric("cold_overhead_pct"), Some(12.1));
    assert_eq!(o.metrics["avg_ms"].unit.as_deref(), Some("ms"));
    let pre = o.phase("prefill").expect("prefill table");
    let names: Vec<&str> = pre.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        ["gemm_qkvza_hfq4g256_wmma", "gemm_gate_up_hfq4g256_wmma", "gemm_hfq4g256_residual_wmma", "attention_flash_asym3", "fused_rmsnorm_mq_rotate"]
    );
    assert_eq!(pre.reported_total_us, Some(194_900.0));
    assert_eq!(pre.launches, Some(1432));
    assert_eq!(pre.wall_ms, Some(221.7));
    assert_eq!(pre.kernels[0].calls, 32);
    assert_eq!(pre.kernels[0].share_pct, Some(31.4));
    assert_eq!(pre.metrics["prefill_tok_s"].value, 702.4);
    let dec = o.phase("decode").expect("decode table");
    assert_eq!(dec.kernels.len(), 6);
    assert!(dec.kernels.iter().all(|k| k.name != "TOTAL (serialized)" && !k.name.starts_with("TOTAL")));
    assert_eq!(dec.reported_total_us, Some(1_236_700.0));
    let r2 = dec.kernel("gemv_hfq4g256_multirow_default_r2").unwrap();
    assert_eq!((r2.calls, r2.total_us, r2.avg_us), (50, 41_000.0, Some(820.0)));
    assert!(close(r2.achieved_gbps.unwrap(), 601.2 * 1.073741824));
    assert_eq!(o.metric("rocprof_coverage_pct"), Some(84.1));
    assert_eq!(o.metric("rocprof_blindspots"), Some(3.0));
    assert!(o.tags.contains(&"BLINDSPOT".to_string()));
    let cov = &o.artifacts["rocprof_coverage"];
    assert_eq!(cov["band"], "investigate");
    assert_eq!(cov["blindspots"].as_array().unwrap().len(), 3);
    assert_eq!(cov["blindspots"][0]["name"], "kv_cache_write_asym3");
    assert_eq!(cov["blindspots"][0]["calls"], 1600);
    assert_eq!(cov["rocprof_kernels"], 41);
    assert_eq!(o.route["graph_blob_count"], 388);
    assert_eq!(o.metric("graph_blob_count"), Some(388.0));
    assert_eq!(o.route["kv_mode"], "asym3");
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

#[test]
fn hipfire_dflash_demo() {
    let o = parse("hipfire-dflash", Input::File(&fixture("hipfire/dflash_demo.txt"))).unwrap();
    assert_eq!(o.metric("accepted"), Some(237.0));
    assert_eq!(o.metric("committed"), Some(256.0));
    assert_eq!(o.metric("cycles"), Some(19.0));
    assert_eq!(o.metric("tau"), Some(12.4737), "authoritative decode_tau wins over the rounded τ=");
    assert_eq!(o.metric("decode_tok_s"), Some(199.69));
    assert_eq!(o.metric("emitted_tok_s"), Some(185.51));
    assert_eq!(o.metric("mean_committed"), Some(13.474));
    assert_eq!(o.metric("vram_total_mb"), Some(32752.0));
    assert_eq!(o.route["kv_mode"], "q8");
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

/// Independent CSV split for the simple rocprof fixtures (quoted fields with commas inside).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut q = false;
    for c in line.chars() {
        match c {
            '"' => q = !q,
            ',' if !q => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

fn table(path: &PathBuf) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = split_csv(lines.next().unwrap());
    (header, lines.map(split_csv).collect())
}

#[test]
fn rocprofv3_kernel_trace_totals_match_file() {
    let path = fixture("rocprofv3/kernel_trace.csv");
    let (h, rows) = table(&path);
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let mut want: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in &rows {
        let d = r[col("End_Timestamp")].parse::<u64>().unwrap() - r[col("Start_Timestamp")].parse::<u64>().unwrap();
        let e = want.entry(r[col("Kernel_Name")].clone()).or_default();
        e.0 += 1;
        e.1 += d;
    }
    let opts = ParserOptions { phase: Some("decode".into()), ..Default::default() };
    let o = parse_with("rocprofv3-kernel-trace", Input::File(&path), &opts).unwrap();
    let t = o.phase("decode").unwrap();
    assert_eq!(t.kernels.len(), want.len());
    let mut grand = 0u64;
    for (name, (calls, ns)) in &want {
        let k = t.kernel(name).unwrap_or_else(|| panic!("kernel {name} missing"));
        assert_eq!(k.calls, *calls, "{name}");
        assert!(close(k.total_us, *ns as f64 / 1000.0), "{name}: {} vs {}", k.total_us, *ns as f64 / 1000.0);
        grand += ns;
    }
    assert!(close(t.gpu_time_us, grand as f64 / 1000.0));
    let add = t.kernel("void addition_kernel<float>(float*, float const*, float const*, int, int)").unwrap();
    assert_eq!(add.block, Some([64, 1, 1]));
    assert_eq!(add.grid, Some([16, 1024, 1]), "grid in workgroups (1024/64, 1024/1)");
    assert_eq!(add.extra["grid_workitems"], serde_json::json!([1024, 1024, 1]));
    assert_eq!(add.shared_bytes, Some(0));
    let shares: f64 = t.kernels.iter().map(|k| k.share_pct.unwrap()).sum();
    assert!(close(shares, 100.0));
    let med = add.median_us.unwrap();
    assert!(add.min_us.unwrap() <= med && med <= add.max_us.unwrap());
}

/// The 2026 column set (Stream_Id, LDS_Block_Size, Scratch_Size, VGPR counts) read by header name.
#[test]
fn rocprofv3_2026_column_set() {
    let text = "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Stream_Id\",\"Thread_Id\",\"Dispatch_Id\",\"Kernel_Id\",\"Kernel_Name\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\",\"LDS_Block_Size\",\"Scratch_Size\",\"VGPR_Count\",\"Accum_VGPR_Count\",\"SGPR_Count\",\"Workgroup_Size_X\",\"Workgroup_Size_Y\",\"Workgroup_Size_Z\",\"Grid_Size_X\",\"Grid_Size_Y\",\"Grid_Size_Z\"\n\
\"KERNEL_DISPATCH\",1,1,0,7,1,3,\"gemv_hfq4g256_residual\",11,1000,4000,2048,0,64,0,24,256,1,1,65536,1,1\n\
\"KERNEL_DISPATCH\",1,1,0,7,2,3,\"gemv_hfq4g256_residual\",12,5000,6000,2048,0,64,0,24,256,1,1,65536,1,1\n\
\"KERNEL_DISPATCH\",1,1,0,7,3,4,\"argmax_f32\",13,7000,7500,0,0,16,0,16,64,1,1,64,1,1\n";
    let o = parse("rocprofv3-kernel-trace", Input::Text { text, source: "t.csv" }).unwrap();
    let t = &o.phases[0];
    let g = t.kernel("gemv_hfq4g256_residual").unwrap();
    assert_eq!((g.calls, g.total_us, g.median_us), (2, 4.0, Some(2.0)));
    assert_eq!(g.shared_bytes, Some(2048));
    assert_eq!(g.registers, Some(64));
    assert_eq!(g.grid, Some([256, 1, 1]));
    assert_eq!(t.kernels[0].name, "gemv_hfq4g256_residual");
}

#[test]
fn rocprofv3_bad_rows_kept_apart() {
    let text = "\"Kind\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"KERNEL_DISPATCH\",\"a\",10,20\n\"KERNEL_DISPATCH\",\"a\",30,oops\n\"KERNEL_DISPATCH\",\"a\",50,40\n\"KERNEL_DISPATCH\",\"b\",1,3\n";
    let o = parse("rocprofv3-kernel-trace", Input::Text { text, source: "t.csv" }).unwrap();
    assert_eq!(o.phases[0].kernel("a").unwrap().calls, 1);
    assert_eq!(o.phases[0].kernel("b").unwrap().calls, 1);
    assert_eq!(o.warnings.len(), 2, "{:?}", o.warnings);
    assert!(o.warnings[0].starts_with("t.csv:3:"), "{:?}", o.warnings);
    let e = parse("rocprofv3-kernel-trace", Input::Text { text: "\"Kind\",\"Kernel_Name\"\n", source: "x.csv" }).unwrap_err();
    assert!(e.to_string().starts_with("x.csv:1:"), "{e}");
}

#[test]
fn rocprofv3_counters_totals_match_file() {
    for f in ["rocprofv3/counter_collection.csv", "rocprofv3/kernel_names.csv"] {
        let path = fixture(f);
        let (h, rows) = table(&path);
        let col = |n: &str| h.iter().position(|x| x == n).unwrap();
        let mut want: BTreeMap<String, (std::collections::BTreeSet<String>, f64)> = BTreeMap::new();
        for r in &rows {
            let e = want.entry(r[col("Kernel_Name")].clone()).or_default();
            e.0.insert(r[col("Dispatch_Id")].clone());
            e.1 += r[col("Counter_Value")].parse::<f64>().unwrap();
        }
        let o = parse("rocprofv3-counters", Input::File(&path)).unwrap();
        let t = &o.phases[0];
        assert_eq!(t.kernels.len(), want.len(), "{f}");
        for (name, (dispatches, total)) in &want {
            let k = t.kernel(name).unwrap();
            assert_eq!(k.calls, dispatches.len() as u64, "{f} {name}");
            assert!(close(k.counters["SQ_WAVES"] * k.calls as f64, *total), "{f} {name}");
            assert_eq!(k.registers, Some(rows.iter().find(|r| &r[col("Kernel_Name")] == name).unwrap()[col("VGPR_Count")].parse().unwrap()));
        }
    }
}

#[test]
fn rocprof_v1_results_csv() {
    // Format-faithful rocprof v1 results.csv (fixed columns, then counters).
    let text = "\"Index\",\"KernelName\",\"gpu-id\",\"queue-id\",\"queue-index\",\"pid\",\"tid\",\"grd\",\"wgr\",\"lds\",\"scr\",\"arch_vgpr\",\"accum_vgpr\",\"sgpr\",\"wave_size\",\"sig\",\"obj\",\"DispatchNs\",\"BeginNs\",\"EndNs\",\"CompleteNs\",\"FETCH_SIZE\",\"WRITE_SIZE\"\n\
0,\"_Z15vectoradd_floatPfPKfS1_ii.kd\",0,0,0,100,100,1048576,256,0,0,8,0,16,64,\"0x0\",\"0x1\",100,200,1200,1300,4096,2048\n\
1,\"_Z15vectoradd_floatPfPKfS1_ii.kd\",0,0,1,100,100,1048576,256,0,0,8,0,16,64,\"0x0\",\"0x1\",1400,1500,3500,3600,4096,1024\n";
    let o = parse("rocprof-v1", Input::Text { text, source: "results.csv" }).unwrap();
    let k = &o.phases[0].kernels[0];
    assert_eq!(k.name, "_Z15vectoradd_floatPfPKfS1_ii");
    assert_eq!((k.calls, k.total_us), (2, 3.0));
    assert_eq!(k.counters["WRITE_SIZE"], 1536.0);
    assert_eq!(k.grid, Some([4096, 1, 1]));
    assert_eq!(k.block, Some([256, 1, 1]));
}

#[test]
fn ncu_raw_totals_match_file() {
    let path = fixture("h200/ncu_llama_raw.csv");
    // Independent read with the csv crate's plain reader.
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("\"ID\",").unwrap();
    let mut rd = csv::ReaderBuilder::new().from_reader(&text.as_bytes()[start..]);
    let h = rd.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    assert_eq!(&recs[0][col("gpu__time_duration.sum")], "ns");
    let n = |s: &str| s.replace(',', "").parse::<f64>().unwrap();
    let mut want: BTreeMap<String, (u64, f64, f64)> = BTreeMap::new();
    for r in &recs[1..] {
        let e = want.entry(r[col("Kernel Name")].to_string()).or_default();
        e.0 += 1;
        e.1 += n(&r[col("gpu__time_duration.sum")]);
        e.2 += n(&r[col("dram__bytes_read.sum")]) + n(&r[col("dram__bytes_write.sum")]);
    }
    let o = parse("ncu-csv", Input::File(&path)).unwrap();
    let t = &o.phases[0];
    assert_eq!(t.kernels.len(), want.len());
    assert_eq!(t.launches, Some(60));
    let mut grand = 0.0;
    for (name, (calls, ns, bytes)) in &want {
        let k = t.kernel(name).unwrap();
        assert_eq!(k.calls, *calls, "{name}");
        assert!(close(k.total_us, ns / 1000.0), "{name}: {} vs {}", k.total_us, ns / 1000.0);
        assert!(close(k.bytes.unwrap() * *calls as f64, *bytes), "{name}");
        assert!(close(k.counters["gpu__time_duration.sum"] * *calls as f64, *ns), "{name}");
        assert!(close(k.counters["dram__bytes_read.sum"] + k.counters["dram__bytes_write.sum"], k.bytes.unwrap()));
        assert!(close(k.achieved_gbps.unwrap(), bytes / ns), "{name}: bytes/ns = GB/s");
        assert!(!k.counters.keys().any(|c| c.starts_with("device__attribute")));
        grand += ns;
    }
    assert!(close(t.gpu_time_us, grand / 1000.0));
    let gemm = t.kernels.iter().find(|k| k.name.starts_with("nvjet_sm90")).unwrap();
    assert_eq!(gemm.calls, 3);
    assert!(gemm.block.is_some() && gemm.grid.is_some() && gemm.registers.is_some() && gemm.shared_bytes.is_some());
    assert_eq!(o.route["device"], "NVIDIA H200");
    assert_eq!(o.route["arch"], "sm_90");
}

#[test]
fn ncu_preamble_and_program_output_skipped() {
    let text = "hello from the program\n==PROF== Connected\n\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"dram__bytes_write.sum\"\n\"\",\"\",\"\",\"\",\"usecond\",\"Kbyte\",\"Kbyte\"\n\"0\",\"k<int, 2>(int)\",\"(128, 1, 1)\",\"(4, 2, 1)\",\"1.50\",\"3,000\",\"1\"\n\"1\",\"k<int, 2>(int)\",\"(128, 1, 1)\",\"(4, 2, 1)\",\"2.50\",\"1,000\",\"0\"\n";
    let o = parse("ncu-csv", Input::Text { text, source: "n.csv" }).unwrap();
    let k = &o.phases[0].kernels[0];
    assert_eq!(k.name, "k<int, 2>(int)");
    assert_eq!((k.calls, k.total_us), (2, 4.0));
    assert_eq!(k.counters["dram__bytes_read.sum"], 2_000_000.0, "Kbyte normalised to bytes, mean per launch");
    assert_eq!(k.bytes, Some(2_000_500.0));
    assert!(close(k.achieved_gbps.unwrap(), 4_001_000.0 / 4000.0));
    assert_eq!(k.grid, Some([4, 2, 1]));
    let e = parse("ncu-csv", Input::Text { text: "==PROF== nothing\n", source: "n.csv" }).unwrap_err();
    assert!(e.to_string().contains("not `ncu --csv --page raw`"), "{e}");
}

#[test]
fn torch_trace_gz_kernels() {
    let path = fixture("h200/torch_llama_decode_trace.json.gz");
    // Independent count: decompress and walk the DOM (small fixture only).
    let mut s = String::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()).read_to_string(&mut s).unwrap();
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    let mut want: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["cat"] == "kernel" && e["ph"] == "X" {
            let w = want.entry(e["name"].as_str().unwrap().to_string()).or_default();
            w.0 += 1;
            w.1 += e["dur"].as_f64().unwrap();
        }
    }
    let o = parse("torch-trace", Input::File(&path)).unwrap();
    let t = &o.phases[0];
    assert_eq!(t.phase, "run");
    assert_eq!(t.kernels.len(), want.len());
    let total_calls: u64 = want.values().map(|w| w.0).sum();
    assert_eq!(total_calls, 6024);
    assert_eq!(t.launches, Some(total_calls));
    for (name, (calls, dur)) in &want {
        let k = t.kernel(name).unwrap();
        assert_eq!(k.calls, *calls);
        assert!((k.total_us - dur).abs() < 1e-3 * dur.max(1.0), "{name}: {} vs {dur}", k.total_us);
    }
    let fill = t.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, 1ul> >(int, at::native::FillFunctor<bool>, std::array<char*, 1ul>)").unwrap();
    assert_eq!(fill.block, Some([128, 1, 1]));
    assert_eq!(fill.grid, Some([1, 1, 1]));
    assert_eq!(fill.registers, Some(16));
    assert_eq!(fill.shared_bytes, Some(0));
    assert_eq!(o.route["device"], "NVIDIA H200");
    assert_eq!(o.route["arch"], "sm_90");
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

#[test]
fn torch_trace_phases_and_bad_events() {
    let text = r#"{"traceEvents": [
 {"ph": "X", "cat": "gpu_user_annotation", "name": "prefill", "ts": 0, "dur": 100},
 {"ph": "X", "cat": "gpu_user_annotation", "name": "decode", "ts": 200, "dur": 100},
 {"ph": "X", "cat": "kernel", "name": "k\"q", "ts": 10, "dur": 5, "args": {"grid": [2,1,1], "block": [64,1,1]}},
 {"ph": "X", "cat": "kernel", "name": "k\"q", "ts": 210, "dur": 7},
 {"ph": "X", "cat": "kernel", "name": "late", "ts": 400, "dur": 1},
 {"ph": "X", "cat": "kernel", "name": "bad", "ts": "x", "dur": 1},
 {"ph": "X", "cat": "kernel", "name": "nodur", "ts": 1}
], "deviceProperties": [{"name": "Fake GPU"}]}"#;
    let opts = ParserOptions { phases: vec!["prefill".into(), "decode".into()], ..Default::default() };
    let o = parse_with("torch-trace", Input::Text { text, source: "t.json" }, &opts).unwrap();
    assert_eq!(o.phase("prefill").unwrap().kernels[0].total_us, 5.0);
    assert_eq!(o.phase("prefill").unwrap().kernels[0].name, "k\"q");
    assert_eq!(o.phase("decode").unwrap().kernels[0].total_us, 7.0);
    assert_eq!(o.phase("unannotated").unwrap().kernels[0].name, "late");
    assert_eq!(o.warnings.len(), 2, "{:?}", o.warnings);
    assert!(o.warnings[0].starts_with("t.json:7:"), "{:?}", o.warnings);
    assert_eq!(o.route["device"], "Fake GPU");
    let e = parse("torch-trace", Input::Text { text: &text[..200], source: "cut.json" }).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
}

#[test]
fn ncu_launch_without_a_numeric_duration_is_kept_visible() {
    // Silent wrong values (issue 15): a launch whose duration is `n/a` used to count as a call
    // with no time, lowering the kernel's mean with nothing on the record.
    let text = "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\"\n\"\",\"\",\"\",\"\",\"usecond\"\n\"0\",\"k\",\"(128, 1, 1)\",\"(4, 1, 1)\",\"1.50\"\n\"1\",\"k\",\"(128, 1, 1)\",\"(4, 1, 1)\",\"n/a\"\n";
    let o = parse("ncu-csv", Input::Text { text, source: "n.csv" }).unwrap();
    let k = &o.phases[0].kernels[0];
    assert_eq!(k.calls, 2);
    assert_eq!(k.extra["untimed_calls"], 1, "{:?}", k.extra);
    assert!(o.warnings.iter().any(|w| w.contains("n.csv:4") && w.contains("not a number")), "{:?}", o.warnings);
}

/// The real Proton tree of an H200 run (flash-linear-attention's GatedDeltaNet, `prefill` and
/// `decode` as Proton scopes; fixtures/proton-h200/README.md): every kernel node's `count` and
/// `time (ns)`, summed here by walking the JSON, is the parser's, in the scope's phase, under
/// the name Proton gives (mangled for C++ kernels).
#[test]
fn proton_hatchet_tree_of_a_real_h200_run() {
    let path = fixture("proton-h200/fla-decode.hatchet");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut want: BTreeMap<String, BTreeMap<String, (u64, f64)>> = BTreeMap::new();
    for scope in v[0]["children"].as_array().unwrap() {
        let phase = want.entry(scope["frame"]["name"].as_str().unwrap().to_string()).or_default();
        for k in scope["children"].as_array().unwrap() {
            let w = phase.entry(k["frame"]["name"].as_str().unwrap().to_string()).or_default();
            w.0 += k["metrics"]["count"].as_u64().unwrap();
            w.1 += k["metrics"]["time (ns)"].as_f64().unwrap() / 1000.0;
        }
    }
    assert_eq!(want.keys().collect::<Vec<_>>(), ["decode", "prefill"]);
    let o = parse("proton", Input::File(&path)).unwrap();
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    assert_eq!(o.phases.len(), 2);
    let mut all_us = 0.0;
    for (phase, kernels) in &want {
        let t = o.phase(phase).unwrap();
        assert_eq!(t.kernels.len(), kernels.len(), "{phase}");
        assert_eq!(t.launches, Some(kernels.values().map(|k| k.0).sum()), "{phase}");
        for (name, (calls, us)) in kernels {
            let k = t.kernel(name).unwrap_or_else(|| panic!("{phase}: {name} missing"));
            assert_eq!(k.calls, *calls, "{phase} {name}");
            assert!(close(k.total_us, *us), "{phase} {name}: {} vs {us}", k.total_us);
            assert!(close(k.avg_us.unwrap(), us / *calls as f64));
            // Proton sums launches per node: no per-launch spread to report.
            assert_eq!((k.median_us, k.min_us, k.max_us, k.bytes), (None, None, None, None));
            all_us += us;
        }
        assert!(t.kernels.windows(2).all(|w| w[0].total_us >= w[1].total_us), "{phase}: hottest first");
    }
    assert!(o
        .phase("decode")
        .unwrap()
        .kernel("_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIN3c108BFloat16ENS0_9ArgMaxOpsIfEEjlLi4ELi4EEEEEvT1_")
        .is_some());
    assert_eq!(o.phase("decode").unwrap().kernels[0].name, "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT");
    assert_eq!(o.phase("prefill").unwrap().kernels[0].name, "fused_recurrent_gated_delta_rule_fwd_kernel");
    assert!(close(o.metric("gpu_kernel_us").unwrap(), all_us));
    assert_eq!(o.route["arch"], "sm_90");
    assert_eq!(o.route["device_type"], "CUDA");
    assert_eq!(o.artifacts["proton_devices"]["CUDA"]["0"]["num_sms"], 132);
    // Named phases: only `decode` is one; prefill's kernels are outside it.
    let opts = ParserOptions { phases: vec!["decode".into()], ..Default::default() };
    let o = parse_with("proton", Input::File(&path), &opts).unwrap();
    let names: Vec<&str> = o.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(names, ["decode", "unannotated"]);
    assert_eq!(o.phase("unannotated").unwrap().launches, Some(want["prefill"].values().map(|k| k.0).sum()));
}

/// Proton's trace output (`data="trace"`) of the same program as the tree above, a third
/// process (fixtures/proton-h200/README.md), gzipped: `--parse proton` tells it from the tree by
/// its first byte. Every kernel event's `dur`, summed here per outermost scope and name by
/// walking the JSON, is the parser's; so are each phase's busy time, window and gaps, the
/// union of the launches' intervals computed here.
#[test]
fn proton_trace_output_of_a_real_h200_run() {
    use std::io::Read;
    let path = fixture("proton-h200/fla-decode-trace.chrome_trace.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()).read_to_string(&mut text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Per phase: kernel name → durations, and the launches' (start, end) intervals.
    type Phase = (BTreeMap<String, Vec<f64>>, Vec<(f64, f64)>);
    let mut want: BTreeMap<String, Phase> = BTreeMap::new();
    let mut first_seen: Vec<String> = Vec::new();
    for e in v["traceEvents"].as_array().unwrap() {
        let stack: Vec<&str> = e["args"]["call_stack"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        assert_eq!((stack[0], stack.len()), ("ROOT", 3), "{e}");
        let (name, ts, dur) = (e["name"].as_str().unwrap(), e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert_eq!(stack[2], name);
        if !first_seen.iter().any(|p| p == stack[1]) {
            first_seen.push(stack[1].to_string());
        }
        let p = want.entry(stack[1].to_string()).or_default();
        p.0.entry(name.to_string()).or_default().push(dur);
        p.1.push((ts, ts + dur));
    }
    assert_eq!(first_seen, ["prefill", "decode"]);
    let o = parse("proton", Input::File(&path)).unwrap();
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    assert_eq!(o.parser, "proton");
    assert_eq!(o.artifacts["proton_data"], "trace");
    let names: Vec<&str> = o.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(names, first_seen);
    let mut all = (0u64, 0.0);
    for (phase, (kernels, intervals)) in &want {
        let t = o.phase(phase).unwrap();
        assert_eq!(t.kernels.len(), kernels.len(), "{phase}");
        assert_eq!(t.launches, Some(intervals.len() as u64), "{phase}");
        for (name, durs) in kernels {
            let k = t.kernel(name).unwrap_or_else(|| panic!("{phase}: {name} missing"));
            let us: f64 = durs.iter().sum();
            assert_eq!(k.calls, durs.len() as u64, "{phase} {name}");
            assert!(close(k.total_us, us), "{phase} {name}: {} vs {us}", k.total_us);
            // Every launch is in the trace: the spread is the file's (durations kept as f32).
            let (min, max) = durs.iter().fold((f64::MAX, f64::MIN), |(a, b), d| (a.min(*d), b.max(*d)));
            assert!((k.min_us.unwrap() - min).abs() < 1e-4 && (k.max_us.unwrap() - max).abs() < 1e-4, "{phase} {name}");
            all.0 += durs.len() as u64;
            all.1 += us;
        }
        assert!(t.kernels.windows(2).all(|w| w[0].total_us >= w[1].total_us), "{phase}: hottest first");
        // The timeline: the union of the intervals, the window from first start to last end.
        let mut iv = intervals.clone();
        iv.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut busy, mut end, mut gaps) = (0.0, f64::MIN, Vec::new());
        for (s, e) in &iv {
            if end > f64::MIN {
                gaps.push((s - end).max(0.0));
            }
            busy += (e - s.max(end)).max(0.0);
            end = end.max(*e);
        }
        let window = end - iv[0].0;
        let m = |k: &str| t.metrics[k].value;
        assert!(close(m("gpu_busy_us"), busy), "{phase}: {} vs {busy}", m("gpu_busy_us"));
        assert!(close(m("timeline_window_us"), window), "{phase}");
        assert!(close(m("gpu_busy_pct"), 100.0 * busy / window), "{phase}");
        gaps.sort_by(f64::total_cmp);
        assert!(close(m("gap_median_us"), gaps[gaps.len().div_ceil(2) - 1]), "{phase}");
        assert_eq!(m("launches"), intervals.len() as f64, "{phase}");
    }
    assert_eq!(o.metric("kernel_dispatches"), Some(all.0 as f64));
    assert!(close(o.metric("gpu_kernel_us").unwrap(), all.1));
    assert_eq!(o.route["streams"], serde_json::json!([7]));
    assert_eq!(o.phase("decode").unwrap().kernels[0].name, "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT");
    assert!(o
        .phase("decode")
        .unwrap()
        .kernel("_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIN3c108BFloat16ENS0_9ArgMaxOpsIfEEjlLi4ELi4EEEEEvT1_")
        .is_some());
    // Named phases, as for the tree.
    let opts = ParserOptions { phases: vec!["decode".into()], ..Default::default() };
    let o = parse_with("proton", Input::File(&path), &opts).unwrap();
    let names: Vec<&str> = o.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(names, ["unannotated", "decode"]);
    assert_eq!(o.phase("unannotated").unwrap().launches, Some(want["prefill"].1.len() as u64));
}
