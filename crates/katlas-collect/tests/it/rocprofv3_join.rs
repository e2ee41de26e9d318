//! The `rocprofv3` directory parser: kernel_trace.csv + counter_collection.csv (+ agent_info.csv)
//! joined per dispatch, bytes from `data/amd_counters.toml`, on the real rocprofv3 files in
//! `fixtures/rocprofv3/` (documentation data) and `fixtures/rocprofv3-mi300a/` (an MI300A run),
//! and on hostile variants of them.

use katlas_collect::parse::{parse, Input, ParseOutput};
use katlas_model::KernelSample;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use katlas_testkit::fixture;

fn kernel<'a>(o: &'a ParseOutput, prefix: &str) -> &'a KernelSample {
    o.phases[0].kernels.iter().find(|k| k.name.starts_with(prefix)).unwrap_or_else(|| panic!("no kernel {prefix} in {:?}", o.phases[0].kernels))
}

/// Rows of a rocprofv3 CSV as (line, column -> value), read with the csv crate.
fn rows(path: &Path) -> Vec<(u64, BTreeMap<String, String>)> {
    let mut rd = csv::Reader::from_path(path).unwrap();
    let h: Vec<String> = rd.headers().unwrap().iter().map(str::to_string).collect();
    rd.records().map(|r| r.unwrap()).map(|r| (r.position().unwrap().line(), h.iter().cloned().zip(r.iter().map(str::to_string)).collect())).collect()
}

/// Per-kernel total of End - Start (µs) in a kernel trace, computed apart from the parser.
fn trace_totals(path: &Path) -> BTreeMap<String, (u64, f64)> {
    let mut t: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for (_, r) in rows(path) {
        let d = r["End_Timestamp"].parse::<u64>().unwrap() - r["Start_Timestamp"].parse::<u64>().unwrap();
        let e = t.entry(r["Kernel_Name"].clone()).or_default();
        e.0 += 1;
        e.1 += d as f64 / 1000.0;
    }
    t
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
}

const COUNTER_HEADER: &str = "\"Correlation_Id\",\"Dispatch_Id\",\"Agent_Id\",\"Queue_Id\",\"Process_Id\",\"Thread_Id\",\"Grid_Size\",\"Kernel_Id\",\"Kernel_Name\",\"Workgroup_Size\",\"LDS_Block_Size\",\"Scratch_Size\",\"VGPR_Count\",\"SGPR_Count\",\"Counter_Name\",\"Counter_Value\"\n";

/// A counter_collection.csv in rocprofv3's 2024 column set for every dispatch of the MI300A
/// trace (keyed by its Correlation_Id, as that trace has no Dispatch_Id), one row per counter.
fn mi300a_counters(counters: &dyn Fn(u64) -> Vec<(&'static str, f64)>) -> String {
    let mut s = COUNTER_HEADER.to_string();
    for (_, r) in rows(&fixture("rocprofv3-mi300a/omp_kernel_trace.csv")) {
        let corr: u64 = r["Correlation_Id"].parse().unwrap();
        let grid: u64 = r["Grid_Size_X"].parse().unwrap();
        for (name, v) in counters(corr) {
            s += &format!(
                "{corr},{corr},{},{},4242,4242,{grid},{},\"{}\",{},{},0,32,24,\"{name}\",{v}\n",
                r["Agent_Id"], r["Queue_Id"], r["Kernel_Id"], r["Kernel_Name"], r["Workgroup_Size_X"], r["Group_Segment_Size"]
            );
        }
    }
    s
}

/// gfx942 raw counters of one dispatch, and the bytes rocprofiler-sdk's FETCH_SIZE and
/// WRITE_SIZE definitions give for them (x 1024).
fn cdna3(corr: u64) -> (Vec<(&'static str, f64)>, f64, f64) {
    let (rd, bubble, rd32, wr, wr64) = (40_000.0 * corr as f64, 10_000.0, 2_000.0, 20_000.0 * corr as f64, 5_000.0);
    let read = bubble * 128.0 + (rd - bubble - rd32) * 64.0 + rd32 * 32.0;
    let write = (wr - wr64) * 32.0 + wr64 * 64.0;
    (vec![("TCC_EA0_RDREQ", rd), ("TCC_BUBBLE", bubble), ("TCC_EA0_RDREQ_32B", rd32), ("TCC_EA0_WRREQ", wr), ("TCC_EA0_WRREQ_64B", wr64)], read, write)
}

#[test]
fn docs_directory_joins_times_counters_resources_and_the_agent() {
    let dir = fixture("rocprofv3");
    let o = parse("rocprofv3", Input::File(&dir)).unwrap();
    assert_eq!(o.parser, "rocprofv3");
    // Times from the trace, per kernel, as the file has them.
    let totals = trace_totals(&dir.join("kernel_trace.csv"));
    for (name, (calls, total)) in &totals {
        let k = o.phases[0].kernel(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(k.calls, *calls, "{name}");
        assert!((k.total_us - total).abs() < 1e-6, "{name}: {} vs {total}", k.total_us);
        // Resources only the counter file has (the 2024 trace has no VGPR/SGPR columns).
        assert_eq!(k.registers, Some(8), "{name}");
        assert_eq!(k.extra["sgpr"], 16, "{name}");
        assert_eq!(k.counters["SQ_WAVES"], 16384.0, "{name}");
        assert!(k.bytes.is_none(), "SQ_WAVES gives no bytes");
    }
    // The counters file alone reports no time; joined, the same kernel has it.
    let alone = parse("rocprofv3-counters", Input::File(&dir.join("counter_collection.csv"))).unwrap();
    let add = "void addition_kernel<float>(float*, float const*, float const*, int, int)";
    assert_eq!(alone.phases[0].kernel(add).unwrap().total_us, 0.0);
    assert!((kernel(&o, "void addition_kernel").total_us - totals[add].1).abs() < 1e-6);
    // The product and arch come from agent_info.csv (Agent_Id 1 = Node_Id 1, the GPU).
    assert_eq!(o.route["arch"], "gfx900");
    assert_eq!(o.route["device"], "Radeon RX Vega");
    let j = &o.artifacts["rocprofv3_join"][0];
    assert_eq!(j["key"], "Dispatch_Id");
    assert_eq!((j["joined"].as_u64(), j["trace_only"].as_u64(), j["counters_only"].as_u64(), j["mismatched"].as_u64()), (Some(7), Some(0), Some(0), Some(0)));
    // No byte counters: said once, naming what was collected and what to collect.
    let w: Vec<&String> = o.warnings.iter().filter(|w| w.contains("no counters give bytes")).collect();
    assert_eq!(w.len(), 1, "{:?}", o.warnings);
    assert!(w[0].contains("SQ_WAVES") && w[0].contains("FETCH_SIZE and WRITE_SIZE"), "{}", w[0]);
    // A file of the directory stands for the directory.
    let via_file = parse("rocprofv3", Input::File(&dir.join("kernel_trace.csv"))).unwrap();
    assert_eq!(via_file.phases[0].kernels, o.phases[0].kernels);
}

#[test]
fn mi300a_trace_and_gfx942_counters_give_bytes_bandwidth_and_the_product() {
    let d = tempfile::tempdir().unwrap();
    copy(&fixture("rocprofv3-mi300a/omp_agent_info.csv"), &d.path().join("omp_agent_info.csv"));
    copy(&fixture("rocprofv3-mi300a/omp_kernel_trace.csv"), &d.path().join("omp_kernel_trace.csv"));
    std::fs::write(d.path().join("omp_counter_collection.csv"), mi300a_counters(&|c| cdna3(c).0)).unwrap();
    let o = parse("rocprofv3", Input::File(d.path())).unwrap();
    assert_eq!(o.route["arch"], "gfx942");
    assert_eq!(o.route["device"], "AMD Instinct MI300A");
    // The trace has no Dispatch_Id (ROCm 6.2 column set): the join is on Correlation_Id.
    let j = &o.artifacts["rocprofv3_join"][0];
    assert_eq!(j["key"], "Correlation_Id");
    assert_eq!(j["joined"], 9);
    // Expected per kernel, from the trace and the counter definitions, apart from the parser.
    let trace = rows(&d.path().join("omp_kernel_trace.csv"));
    let mut want: BTreeMap<String, (f64, f64, f64, u64)> = BTreeMap::new();
    for (_, r) in &trace {
        let corr: u64 = r["Correlation_Id"].parse().unwrap();
        let (_, rd, wr) = cdna3(corr);
        let us = (r["End_Timestamp"].parse::<u64>().unwrap() - r["Start_Timestamp"].parse::<u64>().unwrap()) as f64 / 1000.0;
        let e = want.entry(r["Kernel_Name"].clone()).or_default();
        *e = (e.0 + rd, e.1 + wr, e.2 + us, e.3 + 1);
    }
    for (name, (rd, wr, us, n)) in &want {
        let k = o.phases[0].kernel(name).unwrap();
        let n = *n as f64;
        let bytes = (rd + wr) / n;
        assert!((k.bytes.unwrap() - bytes).abs() < 1e-6, "{name}");
        assert!((k.extra["bytes_read"].as_f64().unwrap() - rd / n).abs() < 1e-6, "{name}");
        assert!((k.extra["bytes_write"].as_f64().unwrap() - wr / n).abs() < 1e-6, "{name}");
        assert!((k.achieved_gbps.unwrap() - bytes / (us / n) / 1000.0).abs() < 1e-9, "{name}");
        assert_eq!(k.extra["bytes_source"], "counters");
        assert!(k.extra["bytes_counters"].as_str().unwrap().contains("cdna3 TCC_EA0_RDREQ"), "{name}");
        assert_eq!(k.registers, Some(32), "VGPR_Count from the counter file");
    }
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

#[test]
fn passes_in_pmc_directories_combine_fetch_and_write_size() {
    // `rocprofv3 -i input.txt --kernel-trace`: one run per pass, each in pmc_N with its trace.
    let d = tempfile::tempdir().unwrap();
    copy(&fixture("rocprofv3-mi300a/omp_agent_info.csv"), &d.path().join("omp_agent_info.csv"));
    for (pass, counter) in [("pmc_1", "FETCH_SIZE"), ("pmc_2", "WRITE_SIZE")] {
        let p = d.path().join(pass);
        std::fs::create_dir(&p).unwrap();
        copy(&fixture("rocprofv3-mi300a/omp_kernel_trace.csv"), &p.join("omp_kernel_trace.csv"));
        let kib = if counter == "FETCH_SIZE" { 512.0 } else { 128.0 };
        std::fs::write(p.join("omp_counter_collection.csv"), mi300a_counters(&|_| vec![(counter, kib)])).unwrap();
    }
    let o = parse("rocprofv3", Input::File(d.path())).unwrap();
    assert_eq!(o.artifacts["rocprofv3_join"].as_array().unwrap().len(), 2);
    let k = kernel(&o, "__omp_offloading_32_2f3c6__QMnorm");
    assert_eq!(k.calls, 6, "3 dispatches in each of the two passes");
    assert_eq!(k.bytes, Some((512.0 + 128.0) * 1024.0));
    assert_eq!(k.extra["bytes_counters"], "FETCH_SIZE + WRITE_SIZE");
}

/// A copy of the docs fixture directory with its files rewritten by `edit(name, text)`.
fn docs_variant(edit: &dyn Fn(&str, String) -> String) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for f in ["kernel_trace.csv", "counter_collection.csv", "agent_info.csv"] {
        let text = std::fs::read_to_string(fixture("rocprofv3").join(f)).unwrap();
        std::fs::write(d.path().join(f), edit(f, text)).unwrap();
    }
    d
}

#[test]
fn mismatched_dispatches_stay_visible_as_warning_lines() {
    // The trace loses dispatch 13 and gains a dispatch 99 the counters do not have.
    let d = docs_variant(&|f, t| {
        if f != "kernel_trace.csv" {
            return t;
        }
        t.lines().map(|l| if l.contains(",13,16,") { l.replace(",13,16,", ",99,16,") } else { l.to_string() }).collect::<Vec<_>>().join("\n") + "\n"
    });
    let o = parse("rocprofv3", Input::File(d.path())).unwrap();
    let j = &o.artifacts["rocprofv3_join"][0];
    assert_eq!((j["joined"].as_u64(), j["trace_only"].as_u64(), j["counters_only"].as_u64()), (Some(6), Some(1), Some(1)));
    let trace = d.path().join("kernel_trace.csv").display().to_string();
    let counters = d.path().join("counter_collection.csv").display().to_string();
    assert!(o.warnings.iter().any(|w| w.starts_with(&format!("{trace}:6: dispatch 99")) && w.contains("has no counters")), "{:?}", o.warnings);
    assert!(o.warnings.iter().any(|w| w.starts_with(&format!("{counters}:6: Dispatch_Id 13")) && w.contains("not in the kernel trace")), "{:?}", o.warnings);
    // Nothing dropped: 4 timed additions + the untimed counter dispatch.
    let k = kernel(&o, "void addition_kernel");
    assert_eq!(k.calls, 5);
    assert_eq!(k.extra["untimed_calls"], 1);
}

#[test]
fn kernel_disagreement_keeps_the_time_and_reports_the_counters() {
    let d = docs_variant(&|f, t| if f == "kernel_trace.csv" { t.replace(",3,18,\"multiply_kernel", ",3,18,\"divide_kernel") } else { t });
    let o = parse("rocprofv3", Input::File(d.path())).unwrap();
    assert_eq!(o.artifacts["rocprofv3_join"][0]["mismatched"], 1);
    let w = o.warnings.iter().find(|w| w.contains("Dispatch_Id 3")).unwrap_or_else(|| panic!("{:?}", o.warnings));
    assert!(w.contains("kernel_trace.csv:8:") && w.contains("counter_collection.csv:7") && w.contains("not used"), "{w}");
    let k = kernel(&o, "divide_kernel");
    assert_eq!(k.calls, 1);
    assert!(k.total_us > 0.0 && k.counters.is_empty());
}

#[test]
fn missing_columns_and_bad_fields_name_file_line_and_field() {
    // Counter file without Counter_Value.
    let d = docs_variant(&|f, t| if f == "counter_collection.csv" { t.replace(",\"Counter_Value\"", ",\"Value\"") } else { t });
    let e = parse("rocprofv3", Input::File(d.path())).unwrap_err().to_string();
    assert_eq!(e, format!("{}:1: key `Counter_Value`: missing: not a counter collection", d.path().join("counter_collection.csv").display()));
    // A trace neither file can be joined with.
    let d = docs_variant(&|f, t| if f == "kernel_trace.csv" { t.replace("\"Dispatch_Id\"", "\"D\"").replace("\"Correlation_Id\"", "\"C\"") } else { t });
    let e = parse("rocprofv3", Input::File(d.path())).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:1: key `Dispatch_Id`: missing here or in", d.path().join("kernel_trace.csv").display())), "{e}");
    // agent_info without Node_Id.
    let d = docs_variant(&|f, t| if f == "agent_info.csv" { t.replacen("\"Node_Id\"", "\"Node\"", 1) } else { t });
    let e = parse("rocprofv3", Input::File(d.path())).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:1: key `Node_Id`", d.path().join("agent_info.csv").display())), "{e}");
    // A dispatch id that is not a number, and an agent agent_info does not list: warnings, the rest kept.
    let d = docs_variant(&|f, t| match f {
        "counter_collection.csv" => t.replacen("\n2,2,1,1,", "\n2,two,1,1,", 1),
        "kernel_trace.csv" => t.replacen("\"KERNEL_DISPATCH\",1,2,69,5,", "\"KERNEL_DISPATCH\",7,2,69,5,", 1),
        _ => t,
    });
    let o = parse("rocprofv3", Input::File(d.path())).unwrap();
    let counters = d.path().join("counter_collection.csv").display().to_string();
    assert!(o.warnings.contains(&format!("{counters}:3: key `Dispatch_Id`: not a number; row skipped")), "{:?}", o.warnings);
    assert!(o.warnings.iter().any(|w| w.contains("Agent_Id 7 is not a GPU of agent_info.csv")), "{:?}", o.warnings);
    assert_eq!(o.artifacts["rocprofv3_join"][0]["trace_only"], 1, "dispatch 2 lost its counter row, not its time");
    assert_eq!(o.route["device"], "Radeon RX Vega");
}

#[test]
fn an_empty_directory_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let e = parse("rocprofv3", Input::File(d.path())).unwrap_err().to_string();
    assert!(e.contains("no rocprofv3 *kernel_trace.csv or *counter_collection.csv"), "{e}");
}

// --- rocpd databases -------------------------------------------------------------------------
//
// No rocpd database from a real run can be fetched at test time, so these tests are
// format-only: `scripts/rocpd-from-csv.py` writes a database by rocprofiler-sdk's documented
// schema from the real MI300A rocprofv3 CSV run in fixtures/, and the rocpd view of it must be
// the CSV view of the same run.

/// `scripts/rocpd-from-csv.py DIR OUT [args]`: the rocpd database of a rocprofv3 CSV run.
fn rocpd_from(dir: &Path, out: &Path, args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rocpd-from-csv.py");
    let o = std::process::Command::new("python3").arg(script).arg(dir).arg(out).args(args).output().expect("python3 runs rocpd-from-csv.py");
    assert!(o.status.success(), "rocpd-from-csv.py: {}", String::from_utf8_lossy(&o.stderr));
}

/// The MI300A run with a gfx942 counter collection beside it, as a CSV directory and as rocpd.
fn mi300a_run_with_counters(d: &Path) -> (PathBuf, PathBuf) {
    let csv_dir = d.join("omp_output");
    std::fs::create_dir(&csv_dir).unwrap();
    copy(&fixture("rocprofv3-mi300a/omp_agent_info.csv"), &csv_dir.join("omp_agent_info.csv"));
    copy(&fixture("rocprofv3-mi300a/omp_kernel_trace.csv"), &csv_dir.join("omp_kernel_trace.csv"));
    std::fs::write(csv_dir.join("omp_counter_collection.csv"), mi300a_counters(&|c| cdna3(c).0)).unwrap();
    let db = d.join("omp_results.db");
    rocpd_from(&csv_dir, &db, &[]);
    (csv_dir, db)
}

/// The same kernel table: names in the same order (hottest first), calls, times, launch facts,
/// counters and bytes.
fn assert_same_kernels(csv: &ParseOutput, db: &ParseOutput) {
    let (a, b) = (&csv.phases[0].kernels, &db.phases[0].kernels);
    assert_eq!(a.iter().map(|k| &k.name).collect::<Vec<_>>(), b.iter().map(|k| &k.name).collect::<Vec<_>>());
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
    for (x, y) in a.iter().zip(b) {
        let n = &x.name;
        assert_eq!(x.calls, y.calls, "{n}");
        assert!(close(x.total_us, y.total_us), "{n}: {} vs {}", x.total_us, y.total_us);
        for (p, q) in [(x.avg_us, y.avg_us), (x.median_us, y.median_us), (x.min_us, y.min_us), (x.max_us, y.max_us), (x.share_pct, y.share_pct)] {
            assert!(close(p.unwrap(), q.unwrap()), "{n}: {p:?} vs {q:?}");
        }
        assert_eq!((x.block, x.grid, x.shared_bytes, x.registers), (y.block, y.grid, y.shared_bytes, y.registers), "{n}");
        for key in ["grid_workitems", "sgpr", "accum_vgpr", "scratch_bytes", "bytes_source", "bytes_counters"] {
            assert_eq!(x.extra.get(key), y.extra.get(key), "{n}: {key}");
        }
        assert_eq!(x.counters, y.counters, "{n}");
        assert_eq!(x.bytes, y.bytes, "{n}");
        assert_eq!(x.achieved_gbps, y.achieved_gbps, "{n}");
    }
}

#[test]
fn rocpd_format_only_db_of_the_mi300a_run_reads_as_its_csv_directory() {
    let d = tempfile::tempdir().unwrap();
    let (csv_dir, db) = mi300a_run_with_counters(d.path());
    let csv = parse("rocprofv3", Input::File(&csv_dir)).unwrap();
    let o = parse("rocpd", Input::File(&db)).unwrap();
    assert_eq!(o.parser, "rocpd");
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    assert_same_kernels(&csv, &o);
    // Bytes really came from the gfx942 formula (not absent on both sides).
    let k = kernel(&o, "__omp_offloading_32_2f3c6__QMnorm");
    assert!(k.bytes.unwrap() > 0.0 && k.extra["bytes_counters"].as_str().unwrap().contains("cdna3 TCC_EA0_RDREQ"));
    assert_eq!(k.registers, Some(32), "arch VGPRs of the kernel symbol");
    assert_eq!(k.shared_bytes, Some(4360));
    // The device, and the CU count and wave size agent_info gave (in rocpd's agent extdata).
    for key in ["arch", "device"] {
        assert_eq!(o.route[key], csv.route[key], "{key}");
    }
    assert_eq!((o.route["cu_count"].as_u64(), o.route["wave_size"].as_u64()), (Some(228), Some(64)));
    // Timeline facts, computed here from the CSV rows apart from the parser: the nine
    // dispatches run one after another on agent 4.
    let spans: Vec<(u64, u64)> =
        rows(&csv_dir.join("omp_kernel_trace.csv")).iter().map(|(_, r)| (r["Start_Timestamp"].parse().unwrap(), r["End_Timestamp"].parse().unwrap())).collect();
    let busy: u64 = spans.iter().map(|(s, e)| e - s).sum();
    let window = spans.last().unwrap().1 - spans[0].0;
    let mut gaps: Vec<u64> = spans.windows(2).map(|w| w[1].0 - w[0].1).collect();
    gaps.sort();
    let m = &o.phases[0].metrics;
    assert_eq!(m["launches"].value, 9.0);
    assert!((m["gpu_busy_us"].value - busy as f64 / 1000.0).abs() < 1e-6);
    assert!((m["timeline_window_us"].value - window as f64 / 1000.0).abs() < 1e-6);
    assert!((m["gpu_busy_pct"].value - 100.0 * busy as f64 / window as f64).abs() < 1e-9);
    assert!((m["gap_median_us"].value - gaps[3] as f64 / 1000.0).abs() < 1e-6, "nearest-rank median of 8 gaps");
    assert_eq!(o.metric("kernel_dispatches"), Some(9.0));
    let f = &o.artifacts["rocpd"][0];
    assert_eq!((f["dispatches"].as_u64(), f["skipped"].as_u64(), f["with_counters"].as_u64()), (Some(9), Some(0), Some(9)));
    assert_eq!(f["pids"], serde_json::json!([4242]));
}

#[test]
fn rocpd_format_only_several_process_databases_add_up_like_several_csv_runs() {
    let d = tempfile::tempdir().unwrap();
    let (csv_dir, db) = mi300a_run_with_counters(d.path());
    // A second process: the same run shifted by one second, in a file of its own, as rocprofv3
    // writes one database per process (`HOST/PID_results.db`).
    let out = d.path().join("rocpd");
    std::fs::create_dir_all(out.join("host")).unwrap();
    std::fs::rename(&db, out.join("host/4242_results.db")).unwrap();
    rocpd_from(&csv_dir, &out.join("host/4343_results.db"), &["--pid", "4343", "--shift-ns", "1000000000"]);
    // The CSV side: the same two runs as two file prefixes of one directory.
    let two = d.path().join("two");
    std::fs::create_dir(&two).unwrap();
    for p in ["a_", "b_"] {
        for f in ["kernel_trace.csv", "counter_collection.csv"] {
            copy(&csv_dir.join(format!("omp_{f}")), &two.join(format!("{p}{f}")));
        }
    }
    copy(&csv_dir.join("omp_agent_info.csv"), &two.join("omp_agent_info.csv"));
    let csv = parse("rocprofv3", Input::File(&two)).unwrap();
    let dir = parse("rocpd", Input::File(&out)).unwrap();
    assert_same_kernels(&csv, &dir);
    assert_eq!(kernel(&dir, "__omp_offloading_32_2f3c6__QMnorm").calls, 6);
    assert_eq!(dir.artifacts["rocpd"].as_array().unwrap().len(), 2);
    // The two files named one by one give the same view.
    let files = [out.join("host/4242_results.db"), out.join("host/4343_results.db")];
    let listed = katlas_collect::parse::rocpd::parse_files(&files, &Default::default(), &Default::default()).unwrap();
    assert_eq!(listed.phases, dir.phases);
    // One GPU (agent 4 in both processes): its timeline covers both, 18 launches, and the
    // second process's dispatches a second later leave one long gap.
    let m = &dir.phases[0].metrics;
    assert_eq!(m["launches"].value, 18.0);
    assert!(m["timeline_window_us"].value > 1_000_000.0);
    assert!(dir.warnings.is_empty(), "{:?}", dir.warnings);
}

#[test]
fn rocpd_format_only_marker_ranges_delimit_phases() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    copy(&fixture("rocprofv3-mi300a/omp_agent_info.csv"), &dir.join("omp_agent_info.csv"));
    copy(&fixture("rocprofv3-mi300a/omp_kernel_trace.csv"), &dir.join("omp_kernel_trace.csv"));
    let trace = rows(&dir.join("omp_kernel_trace.csv"));
    let ts = |i: usize, c: &str| trace[i].1[c].parse::<u64>().unwrap();
    // roctx ranges as rocprofv3's marker_api_trace.csv has them: `setup` around the first four
    // dispatches, `iterate` from the fifth to the end, `tiny` around no kernel.
    let mut m = String::from("\"Domain\",\"Function\",\"Process_Id\",\"Thread_Id\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n");
    m += &format!("\"MARKER_CORE_RANGE_API\",\"setup\",4242,4242,900,{},{}\n", ts(0, "Start_Timestamp") - 10, ts(3, "End_Timestamp") + 10);
    m += &format!("\"MARKER_CORE_RANGE_API\",\"iterate\",4242,4242,901,{},{}\n", ts(4, "Start_Timestamp") - 10, ts(8, "End_Timestamp") + 10);
    m += &format!("\"MARKER_CORE_RANGE_API\",\"tiny\",4242,4242,902,{},{}\n", ts(3, "End_Timestamp") + 20, ts(3, "End_Timestamp") + 30);
    std::fs::write(dir.join("omp_marker_api_trace.csv"), m).unwrap();
    let db = d.path().join("m.db");
    rocpd_from(&dir, &db, &[]);
    let opts = |p: &[&str]| katlas_collect::parse::ParserOptions { phases: p.iter().map(|s| s.to_string()).collect(), ..Default::default() };
    let run = katlas_collect::parse::parse_with("rocpd", Input::File(&db), &opts(&[])).unwrap();
    assert_eq!(run.phases.len(), 1);
    assert_eq!(run.phases[0].phase, "run");
    assert_eq!(run.artifacts["rocpd_markers"]["setup"]["ranges"], 1);
    assert_eq!(run.artifacts["rocpd_markers"]["tiny"]["ranges"], 1);
    let o = katlas_collect::parse::parse_with("rocpd", Input::File(&db), &opts(&["iterate"])).unwrap();
    let iterate = o.phase("iterate").unwrap();
    let rest = o.phase("unannotated").unwrap();
    assert_eq!((iterate.launches, rest.launches), (Some(5), Some(4)));
    assert_eq!(iterate.kernel("__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26").unwrap().calls, 2);
    assert_eq!(iterate.metrics["launches"].value, 5.0, "each phase has its own timeline");
    let both = katlas_collect::parse::parse_with("rocpd", Input::File(&db), &opts(&["setup", "iterate"])).unwrap();
    assert_eq!(both.phases.iter().map(|p| (p.phase.as_str(), p.launches.unwrap())).collect::<Vec<_>>(), vec![("setup", 4), ("iterate", 5)]);
    let none = katlas_collect::parse::parse_with("rocpd", Input::File(&db), &opts(&["decode"])).unwrap();
    assert_eq!(none.phases[0].phase, "run");
    assert!(none.warnings.iter().any(|w| w.contains("none of the phases named (decode)") && w.contains("iterate (1)")), "{:?}", none.warnings);
}
