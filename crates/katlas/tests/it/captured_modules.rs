//! `fit` on a row whose run captured the code objects it loaded (`collect --capture-modules`
//! writes them under `<run_dir>/modules/`): the ISA comes from those cubins with no scan command,
//! and an nvjet kernel no library file holds is explained, not left blank.
//!
//! The captured module here is a real cubin the H200's driver loaded (the Triton matmul of
//! fixtures/h200/triton-cache, built by scripts/device/triton-cache.sh): 107 registers/thread
//! by the driver's own cuFuncGetAttribute (fixtures/h200/triton-occupancy.jsonl).

use katlas_model::row::KernelSample;
use katlas_model::{Origin, Row};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli;
use cli::katlas;

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}\n{}\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn triton_cubin() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h200/triton-cache");
    let hit = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path().join("matmul_kernel.cubin")).find(|p| p.exists());
    hit.unwrap_or_else(|| panic!("fixture matmul_kernel.cubin under {}", d.display()))
}

/// A project with one row of `kernels`, its run directory `.katlas/runs/r1`.
fn project(kernels: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join(".katlas/runs/r1");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(d.path().join("katlas.toml"), "").unwrap();
    let mut r = Row::new("torch-decode".to_string(), "decode");
    r.origin = Some(Origin { kind: "collect".into(), run_dir: Some(".katlas/runs/r1".into()), ..Default::default() });
    r.kernels = kernels.iter().map(|n| KernelSample { name: n.to_string(), calls: 10, total_us: 100.0, ..Default::default() }).collect();
    std::fs::write(d.path().join("rows.jsonl"), format!("{}\n", serde_json::to_string(&r).unwrap())).unwrap();
    (d, run)
}

fn notes(fit: &Value) -> Vec<String> {
    fit["scope"]["notes"].as_array().map(|a| a.iter().map(|n| n.as_str().unwrap().to_string()).collect()).unwrap_or_default()
}

#[test]
fn fit_reads_the_modules_the_run_loaded_without_a_scan_command() {
    let (d, run) = project(&["matmul_kernel"]);
    let fit = |d: &Path| json(&katlas(d, &["fit", "rows.jsonl", "--arch", "sm_90", "--format", "json"]));

    // Before anything was captured: no ISA, the kernel's registers unknown.
    let before = fit(d.path());
    assert_eq!(before["scope"]["kind"], "profile-only", "{}", before["scope"]);

    std::fs::create_dir_all(run.join("modules")).unwrap();
    std::fs::copy(triton_cubin(), run.join("modules/0123456789abcdef.cubin")).unwrap();
    let after = fit(d.path());
    assert_eq!(after["scope"]["kind"], "profile-matched", "{}", after["scope"]);
    let k = after["kernels"].as_array().unwrap().iter().find(|k| k.to_string().contains("matmul_kernel")).expect("matmul_kernel in the fit");
    assert!(k.to_string().contains("107"), "registers/thread from the captured cubin: {k}");
    assert!(notes(&after).iter().any(|n| n.starts_with("ISA from the 1 code object(s) the run loaded")), "{:?}", notes(&after));
    assert!(run.join("isa.json").is_file(), "the scan is kept beside the modules");

    // A second fit reads the kept manifest; a newer module is rescanned.
    let kept = std::fs::metadata(run.join("isa.json")).unwrap().modified().unwrap();
    fit(d.path());
    assert_eq!(std::fs::metadata(run.join("isa.json")).unwrap().modified().unwrap(), kept);
}

#[test]
fn an_nvjet_kernel_without_isa_says_why() {
    let (d, run) = project(&["nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT", "matmul_kernel"]);
    // ISA from library files (here: a manifest scanned from a file), which can never hold nvjet.
    let m = d.path().join("libs.json");
    let o = katlas(d.path(), &["isa", "scan", triton_cubin().to_str().unwrap(), "--output", m.to_str().unwrap(), "--no-cache"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fit = json(&katlas(d.path(), &["fit", "rows.jsonl", "--arch", "sm_90", "--isa", "libs.json", "--format", "json"]));
    let n = notes(&fit);
    let why = n.iter().find(|l| l.starts_with("nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT: no ISA")).unwrap_or_else(|| panic!("{n:?}"));
    assert!(why.contains("generates nvjet kernels at run time") && why.contains("--capture-modules"), "{why}");
    // matmul_kernel was found, so only the nvjet kernel gets the note.
    assert_eq!(n.iter().filter(|l| l.contains(": no ISA:")).count(), 1, "{n:?}");
    drop(run);
}

#[test]
fn nvidia_kernels_are_read_in_nvidia_words() {
    let (d, run) = project(&["matmul_kernel"]);
    std::fs::create_dir_all(run.join("modules")).unwrap();
    std::fs::copy(triton_cubin(), run.join("modules/0123456789abcdef.cubin")).unwrap();
    for (fmt, extra) in [("text", None), ("text", Some("--verbose")), ("markdown", None), ("markdown", Some("--verbose")), ("html", None)] {
        let mut args = vec!["fit", "rows.jsonl", "--arch", "sm_90", "--format", fmt];
        args.extend(extra);
        let o = katlas(d.path(), &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        for amd in ["VGPR", "SGPR", "LDS", "wave size", "waves on", "per SIMD"] {
            assert!(!out.contains(amd), "{fmt} {extra:?} says `{amd}` of an sm_90 kernel:\n{out}");
        }
        assert!(out.contains("registers/thread") || out.contains("/thread  spill"), "{fmt} {extra:?}:\n{out}");
    }
}
