//! `katlas provenance` and `katlas reach` through the binary on the real hipfire tree
//! (fixtures/hipfire-tree, MIT) with `preset = "hipfire"`: the preset carries hipfire's runtime
//! model (family rule prefix5, ensure_kernel/include_str! loads, the RDNA2 variant selector,
//! begin_timer profile names).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use crate::support::cli;
use cli::{copy_tree, katlas, py_site};

/// kernels/, crates/ and scripts/ of the tree in a temp project with the hipfire preset.
fn project() -> tempfile::TempDir {
    project_with("[project]\npreset = \"hipfire\"\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"crates\"]\n")
}

/// The same tree with `config` as its katlas.toml.
fn project_with(config: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    katlas_testkit::hipfire_tree::copy_sources(d.path());
    std::fs::write(d.path().join("katlas.toml"), config).unwrap();
    d
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn preset_family_rule_reaches_gfx1151_and_both_commands_flag_the_hazard() {
    let d = project();
    let o = katlas(d.path(), &["provenance", "gemv_hfp4g32_dot2_gfx11", "--arch", "gfx1151"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = out(&o);
    assert!(t.contains("families gfx11 by family rule prefix5"), "{t}");
    assert!(t.contains("kernels/src/gemv_hfp4g32_dot2.gfx11.hip"), "{t}");
    assert!(t.lines().any(|l| l.trim_start().starts_with("hazard: kernels/src/gemv_hfp4g32_dot2.gfx11.hip: gfx1151 (rdna3p5, APU) takes a gfx11 file")), "{t}");
    let o = katlas(d.path(), &["reach", "--arch", "gfx906,gfx1030,gfx1100,gfx1151,gfx1201"]);
    assert_eq!(o.status.code(), Some(1), "two base files are never loaded, two chip files never embedded");
    let t = out(&o);
    let hazard = t
        .lines()
        .find(|l| l.trim_start().starts_with("gfx1151 gemv_hfp4g32_dot2: the runtime takes kernels/src/gemv_hfp4g32_dot2.gfx11.hip"))
        .unwrap_or_else(|| panic!("hazard line in {t}"));
    assert!(hazard.contains("katlas build compiles nothing") && hazard.contains("[rdna3_dgpu, dGPU]"), "{hazard}");
    assert!(t.contains("kernels/src/gemv_hfq4g256.gfx1201.hip: compiled for gfx1201, but no load pattern embeds it"), "{t}");
    // hipfire's own matrix (no gfx1151): the hazard is still there, outside the matrix.
    let t = out(&katlas(d.path(), &["reach"]));
    assert!(
        t.lines()
            .any(|l| l.trim_start().starts_with("gfx1151 gemv_hfp4g32_dot2: the runtime takes kernels/src/gemv_hfp4g32_dot2.gfx11.hip (not in the matrix")),
        "{t}"
    );
}

/// `preset = "hipfire"` alone names hipfire's roots for every command: provenance cites the
/// loads under crates/ and agrees with reach that gemv_hfq4g256.gfx1201.hip never loads (the
/// runtime's `gemv_hfq4g256_for_arch` takes the base file on gfx1201), `--all-profiled` finds the
/// profiler's names, and suggest's allowed files are what the runtime loads.
#[test]
fn the_preset_alone_gives_every_command_its_roots() {
    let d = project_with("[project]\npreset = \"hipfire\"\n");
    let v: Value = serde_json::from_slice(&katlas(d.path(), &["provenance", "gemv_hfq4g256", "--arch", "gfx1201", "--format", "json"]).stdout).unwrap();
    let p = &v[0];
    assert_eq!(p["sources"][0]["path"], "kernels/src/gemv_hfq4g256.hip", "{p}");
    assert!(p["sources"][0]["embedded_at"][0].as_str().unwrap().starts_with("crates/rdna-compute/src/kernels.rs:"), "{p}");
    let chip = p["sources"].as_array().unwrap().iter().find(|s| s["path"] == "kernels/src/gemv_hfq4g256.gfx1201.hip").expect("the chip file is listed");
    assert!(chip["score"].as_f64().unwrap() < 0.0 && chip["reasons"].to_string().contains("the runtime never loads it"), "{chip}");
    assert!(!p["dispatch"].as_array().unwrap().is_empty() && p["dispatch"].as_array().unwrap().iter().all(|r| r["kind"] == "load"), "{p}");
    // reach, on the same preset, says the same file is never embedded.
    let r: Value = serde_json::from_slice(&katlas(d.path(), &["reach", "--arch", "gfx1201", "--format", "json"]).stdout).unwrap();
    let u = r["unreached"].as_array().unwrap().iter().find(|u| u["file"] == "kernels/src/gemv_hfq4g256.gfx1201.hip").expect("reach: unreached");
    assert!(u["reason"].as_str().unwrap().contains("the runtime takes kernels/src/gemv_hfq4g256.hip"), "{u}");
    assert_eq!(r["dispatch_roots"], serde_json::json!(["crates"]));

    let o = katlas(d.path(), &["provenance", "--all-profiled", "--arch", "gfx1100", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v.as_array().unwrap().len(), 158);
    assert!(v.as_array().unwrap().iter().filter(|p| !p["dispatch"].as_array().unwrap().is_empty()).count() > 120);

    // suggest: a gfx1201 decode row whose hot GEMV is gemv_hfq4g256.
    let row = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hipfire/atlas_rows_v0.jsonl")).unwrap();
    let row = row.lines().next().unwrap().replace("\"gemv_hfq4g256_residual\"", "\"gemv_hfq4g256\"");
    std::fs::write(d.path().join("rows.jsonl"), row + "\n").unwrap();
    let o = katlas(d.path(), &["suggest", "rows.jsonl", "--format", "json"]);
    let q: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let s = q["suggestions"].as_array().unwrap().iter().find(|s| s["kernel"] == "gemv_hfq4g256").expect("a suggestion on the GEMV");
    assert_eq!(s["allowed_files_source"], "dispatch provenance", "{s}");
    let files: Vec<&str> = s["allowed_files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files.first(), Some(&"kernels/src/gemv_hfq4g256.hip"), "{files:?}");
    assert!(!files.iter().any(|f| f.contains(".gfx1201.")), "a file the runtime never loads is not to be changed: {files:?}");
    assert!(files.contains(&"crates/rdna-compute/src/dispatch.rs"), "{files:?}");
}

#[test]
fn the_rdna2_selector_names_its_knob() {
    let d = project();
    let o = katlas(d.path(), &["provenance", "gemv_hfq4g256", "--arch", "gfx1030", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["sources"][0]["path"], "kernels/src/gemv_hfq4g256.gfx1030.v1.hip");
    assert_eq!(v[0]["sources"][1]["selected_by"], "gemv_hfq4g256_for_arch: HIPFIRE_RDNA2_VARIANT=2");
    assert!(v[0]["env_knobs"].as_array().unwrap().iter().any(|k| k == "HIPFIRE_RDNA2_VARIANT"));
    let o = katlas(d.path(), &["provenance", "gemv_hfq4g256", "--arch", "gfx1151"]);
    let t = out(&o);
    assert!(t.contains("note: variant selector: gemv_hfq4g256_for_arch picks gemv_hfq4g256's source on gfx1030 gfx1031 by HIPFIRE_RDNA2_VARIANT"), "{t}");
    assert!(!t.contains("gfx1030.v1.hip ┆ chip"), "{t}");
    let o = katlas(d.path(), &["provenance", "gemv_hfq4g256", "--arch", "gfx1151", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&str> = v[0]["sources"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["kernels/src/gemv_hfq4g256.hip"]);
    assert!(v[0]["dispatch"].as_array().unwrap().iter().all(|r| r["kind"] == "load"));
}

/// All 158 names hipfire's profiler records, in one run over one index.
#[test]
fn all_profiled_kernels_in_one_run() {
    let d = project();
    let t = std::time::Instant::now();
    let o = katlas(d.path(), &["provenance", "--all-profiled", "--arch", "gfx1100", "--format", "json"]);
    let took = t.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|p| p["kernel"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 158);
    assert!(names.contains(&"gemv_hfq4g256") && names.contains(&"gated_delta_net_q8"), "{names:?}");
    // Many names on the command line give the same answers, in order.
    let some: Vec<&str> = names.iter().copied().take(40).collect();
    let mut args = vec!["provenance", "--arch", "gfx1100", "--format", "json"];
    args.extend(&some);
    let o = katlas(d.path(), &args);
    let w: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(w.as_array().unwrap()[..], v.as_array().unwrap()[..40]);
    // A debug build; release timings: benches/provenance.sh.
    assert!(took.as_secs_f64() < 10.0, "{took:?}");
    // Without profile patterns --all-profiled is bad input.
    std::fs::write(d.path().join("katlas.toml"), "[project]\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"crates\"]\n").unwrap();
    let o = katlas(d.path(), &["provenance", "--all-profiled"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("profile patterns"));
}

#[test]
fn a_bad_runtime_model_key_is_bad_input() {
    let d = project();
    std::fs::write(d.path().join("katlas.toml"), "[project]\npreset = \"hipfire\"\n\n[reach]\nfamily_rule = \"first5\"\n").unwrap();
    let o = katlas(d.path(), &["provenance", "add"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("reach.family_rule") && e.contains("first5"), "{e}");
}

// --- Python kernel projects: liger-kernel 0.8.5 and flash-linear-attention 0.5.2 -------------

/// Every Triton kernel the four H200 workloads launched: name -> (file under site-packages,
/// `def` line, first decorator line), as Python reported them at launch.
fn launched_triton_kernels() -> BTreeMap<String, (String, u64, u64)> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/triton-h200/triton_kernels.json");
    let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for kernels in v.as_object().unwrap().values() {
        for (name, k) in kernels.as_object().unwrap() {
            out.insert(name.clone(), (k["file"].as_str().unwrap().to_string(), k["def_line"].as_u64().unwrap(), k["first_line"].as_u64().unwrap()));
        }
    }
    out
}

/// `katlas provenance` of every launched name; asserts at least 95 % resolve to the file, the
/// `def` line and the first decorator line the run reported, listing the misses.
fn assert_resolves(out: &Output, strip: &str) -> Vec<Value> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = launched_triton_kernels();
    let mut misses = Vec::new();
    for p in v.as_array().unwrap() {
        let name = p["kernel"].as_str().unwrap();
        let (file, def_line, first_line) = &want[name];
        let top = &p["sources"][0];
        let got = (
            top["path"].as_str().map(|s| s.strip_prefix(strip).unwrap_or(s).to_string()),
            top["definition_line"].as_u64(),
            top["triton"]["first_line"].as_u64(),
        );
        if got != (Some(file.clone()), Some(*def_line), Some(*first_line)) {
            misses.push(format!("{name}: want {file}:{def_line} (decorator {first_line}), got {got:?}"));
        }
    }
    assert_eq!(v.as_array().unwrap().len(), want.len());
    let found = want.len() - misses.len();
    eprintln!("resolved {found}/{}; misses: {misses:#?}", want.len());
    assert!(found * 100 >= want.len() * 95, "resolved {found}/{}: {misses:#?}", want.len());
    v.as_array().unwrap().clone()
}

#[test]
fn triton_kernels_resolve_in_a_project_holding_liger_and_fla_sources() {
    let site = py_site();
    let d = tempfile::tempdir().unwrap();
    // No katlas.toml: the project's own top-level packages are its roots.
    copy_tree(&site.join("liger_kernel"), &d.path().join("liger_kernel"));
    copy_tree(&site.join("fla"), &d.path().join("fla"));
    let names: Vec<String> = launched_triton_kernels().into_keys().collect();
    let mut args = vec!["provenance", "--arch", "sm_90", "--format", "json"];
    args.extend(names.iter().map(String::as_str));
    let v = assert_resolves(&katlas(d.path(), &args), "");
    let by = |n: &str| v.iter().find(|p| p["kernel"] == n).unwrap().clone();
    // fla's Ascend backend defines the same name: it ranks below, and the note names both.
    let l2 = by("l2norm_fwd_kernel");
    assert_eq!(l2["sources"][1]["path"], "fla/modules/backends/triton_ascend/l2norm.py");
    assert!(l2["sources"][1]["reasons"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("a backend for ascend")), "{l2}");
    assert!(l2["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("fla/modules/backends/triton_ascend/l2norm.py:64")), "{l2}");
    // Its autotune: a comprehension, recorded as its template and loops, with the literal key.
    let at = &l2["sources"][0]["triton"]["autotune"];
    assert_eq!(at["key"], serde_json::json!(["D", "NB"]));
    assert_eq!(at["computed"], "for num_warps in [1, 2, 4, 8, 16] for BT in BT_LIST");
    assert_eq!(at["configs"][0]["kwargs"]["num_warps"], "num_warps");
    // A literal config list is read whole.
    let o = by("chunk_fwd_kernel_o");
    let tk = &o["sources"][0]["triton"];
    assert_eq!(tk["decorators"], serde_json::json!(["triton.heuristics", "fla_cache_autotune", "triton.jit"]));
    assert!(tk["autotune"]["computed"].is_null(), "{tk}");
    let cfgs = tk["autotune"]["configs"].as_array().unwrap();
    assert_eq!(cfgs.len(), 3, "{tk}");
    assert_eq!(cfgs[0]["params"], serde_json::json!({"BK": "128", "BV": "128"}));
    assert_eq!(cfgs[0]["kwargs"], serde_json::json!({"num_warps": "8", "num_stages": "3"}));
    // Two non-backend files define it: the one more modules import ranks first, the note says so.
    assert_eq!(o["sources"][1]["path"], "fla/ops/gated_delta_product/chunk_deltaproduct_o.py");
    assert!(o["notes"][0].as_str().unwrap().starts_with("2 files define Triton kernel `chunk_fwd_kernel_o`"), "{o}");
    // The launch site `kernel[grid](…)` is the dispatch, not the `def`.
    assert!(l2["dispatch"][0]["text"].as_str().unwrap().starts_with("l2norm_fwd_kernel[grid]("), "{l2}");
    assert_eq!(l2["dispatch"][0]["path"], "fla/modules/l2norm.py");
}

#[test]
fn triton_kernels_resolve_through_installed_packages() {
    let site = py_site();
    let d = tempfile::tempdir().unwrap();
    let names: Vec<String> = launched_triton_kernels().into_keys().collect();
    let run = |d: &Path, extra: &[&str], names: &[String]| {
        let mut c = cli::katlas_cmd(d);
        c.args(["provenance", "--arch", "sm_90", "--format", "json"]).args(extra).args(names);
        c.env("KATLAS_YES", "1").env("PYTHONPATH", &site);
        c.output().unwrap()
    };
    let strip = format!("{}/", site.display());
    assert_resolves(&run(d.path(), &["--package", "liger_kernel", "--package", "fla"], &names), &strip);
    // The same through [provenance] packages.
    std::fs::write(d.path().join("katlas.toml"), "[provenance]\npackages = [\"liger_kernel\", \"fla\"]\n").unwrap();
    assert_resolves(&run(d.path(), &[], &names), &strip);
    // A package the interpreter does not find, or a missing interpreter, is bad input naming it.
    let o = run(d.path(), &["--package", "no_such_kernels_pkg"], &names[..1]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("package `no_such_kernels_pkg` not found by python interpreter `python3`"), "{e}");
    std::fs::write(d.path().join("katlas.toml"), "[provenance]\npackages = [\"fla\"]\npython = \"/nonexistent/bin/python9\"\n").unwrap();
    let o = run(d.path(), &[], &names[..1]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("python interpreter `/nonexistent/bin/python9`"), "{e}");
}
