//! The `rocprofv3` directory parser: kernel_trace.csv + counter_collection.csv (+ agent_info.csv)
//! joined per dispatch, bytes from `data/amd_counters.toml`, on the real rocprofv3 files in
//! `fixtures/rocprofv3/` (documentation data) and `fixtures/rocprofv3-mi300a/` (an MI300A run),
//! and on hostile variants of them.

use katlas_collect::parse::{parse, Input, ParseOutput};
use katlas_model::KernelSample;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(rel)
}

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
