//! `katlas fit --parse rocprofv3 DIR`: a rocprofv3 output directory (the real MI300A trace and
//! agent info in fixtures/, with a counter collection of gfx942 TCC_EA0 counters beside them)
//! gives each kernel bytes and % of peak bandwidth from counters, the product from agent_info.

use crate::support::cli;
use cli::{fixture, json, katlas, ok, repo};
use std::path::Path;

/// The MI300A run in `DIR/omp_output` with a gfx942 counter collection beside it.
fn mi300a_with_counters(dir: &Path) {
    let out = dir.join("omp_output");
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
}

#[test]
fn fit_of_a_rocprofv3_directory_shows_bandwidth_from_counters_and_the_inferred_product() {
    let d = tempfile::tempdir().unwrap();
    mi300a_with_counters(d.path());
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

/// Format-only (no rocpd database of a real run can be fetched at test time): the database
/// `scripts/rocpd-from-csv.py` writes from the same run gives the same fit as its CSV directory.
#[test]
fn fit_of_a_rocpd_database_format_only_matches_the_csv_directory_of_the_same_run() {
    let d = tempfile::tempdir().unwrap();
    mi300a_with_counters(d.path());
    let py = std::process::Command::new("python3")
        .arg(repo().join("scripts/rocpd-from-csv.py"))
        .arg(d.path().join("omp_output"))
        .arg(d.path().join("omp_results.db"))
        .output()
        .expect("python3 runs rocpd-from-csv.py");
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    let csv = json(&katlas(d.path(), &["fit", "--parse", "rocprofv3", "omp_output", "--format", "json"]));
    let db = json(&katlas(d.path(), &["fit", "--parse", "rocpd", "omp_results.db", "--format", "json"]));
    for key in ["product", "arch", "bw_ceiling_gbps"] {
        assert_eq!(db["header"][key], csv["header"][key], "{key}");
    }
    let (a, b) = (csv["kernels"].as_array().unwrap(), db["kernels"].as_array().unwrap());
    let names = |v: &[serde_json::Value]| v.iter().map(|k| k["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "the same hot kernels in the same order");
    for (x, y) in a.iter().zip(b) {
        let (p, q) = (x["avg_us"].as_f64().unwrap(), y["avg_us"].as_f64().unwrap());
        assert!((p - q).abs() <= 0.01 * p, "{}: {p} vs {q} us", x["name"]);
        assert_eq!(x["throughput"]["bw_source"], y["throughput"]["bw_source"]);
        let (p, q) = (x["throughput"]["bw_gbps"].as_f64().unwrap(), y["throughput"]["bw_gbps"].as_f64().unwrap());
        assert!((p - q).abs() <= 0.01 * p, "{}: {p} vs {q} GB/s", x["name"]);
    }
    // `katlas parse rocpd` takes the databases of several processes at once.
    let two = ok(&katlas(d.path(), &["parse", "rocpd", "omp_results.db", "omp_results.db", "--format", "json"]));
    let v: serde_json::Value = serde_json::from_str(&two).unwrap();
    assert_eq!(v["phases"][0]["launches"], 18);
    let refused = katlas(d.path(), &["parse", "kv", "a.txt", "b.txt"]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("only rocpd reads several"));
}
