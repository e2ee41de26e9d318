//! `katlas fit --parse rocprofv3 DIR`: a rocprofv3 output directory (the real MI300A trace and
//! agent info in fixtures/, with a counter collection of gfx942 TCC_EA0 counters beside them)
//! gives each kernel bytes and % of peak bandwidth from counters, the product from agent_info.

#[path = "support/cli.rs"]
mod cli;
use cli::{fixture, json, katlas};

#[test]
fn fit_of_a_rocprofv3_directory_shows_bandwidth_from_counters_and_the_inferred_product() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("omp_output");
    std::fs::create_dir(&out).unwrap();
    for f in ["omp_agent_info.csv", "omp_kernel_trace.csv"] {
        std::fs::copy(fixture(&format!("rocprofv3-mi300a/{f}")), out.join(f)).unwrap();
    }
    // gfx942 raw counters per dispatch (no FETCH_SIZE: the byte formula comes from
    // data/amd_counters.toml), keyed by the trace's Correlation_Id 1..9.
    let mut cc = String::from("\"Correlation_Id\",\"Dispatch_Id\",\"Agent_Id\",\"Queue_Id\",\"Process_Id\",\"Thread_Id\",\"Grid_Size\",\"Kernel_Id\",\"Kernel_Name\",\"Workgroup_Size\",\"LDS_Block_Size\",\"Scratch_Size\",\"VGPR_Count\",\"SGPR_Count\",\"Counter_Name\",\"Counter_Value\"\n");
    let trace = std::fs::read_to_string(out.join("omp_kernel_trace.csv")).unwrap();
    for line in trace.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (corr, name) = (f[5], f[4]);
        for (c, n) in [("TCC_EA0_RDREQ", 150_000), ("TCC_BUBBLE", 0), ("TCC_EA0_RDREQ_32B", 0), ("TCC_EA0_WRREQ", 90_000), ("TCC_EA0_WRREQ_64B", 0)] {
            cc += &format!("{corr},{corr},4,1,1,1,233472,1,{name},256,0,0,16,16,\"{c}\",{n}\n");
        }
    }
    std::fs::write(out.join("omp_counter_collection.csv"), cc).unwrap();
    let v = json(&katlas(d.path(), &["fit", "--parse", "rocprofv3", "omp_output", "--format", "json"]));
    assert_eq!(v["header"]["product"], "Instinct MI300A", "product from agent_info's Product_Name: {}", v["header"]);
    assert_eq!(v["header"]["arch"], "gfx942");
    let peak = v["header"]["bw_ceiling_gbps"].as_f64().unwrap();
    let ks = v["kernels"].as_array().unwrap();
    assert!(ks.len() >= 4, "{ks:?}");
    for k in ks {
        let t = &k["throughput"];
        assert_eq!(t["bw_source"], "dram counters", "{k}");
        let avg = k["avg_us"].as_f64().unwrap();
        // 64-byte reads and 32-byte writes (rocprofiler-sdk's gfx942 FETCH_SIZE/WRITE_SIZE).
        let gbps = (150_000.0 * 64.0 + 90_000.0 * 32.0) / avg / 1000.0;
        assert!((t["bw_gbps"].as_f64().unwrap() - gbps).abs() < 1e-6, "{k}");
        assert!((t["bw_pct_of_peak"].as_f64().unwrap() - 100.0 * gbps / peak).abs() < 1e-6, "{k}");
    }
}
