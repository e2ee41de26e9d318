//! `katlas provenance` and `katlas reach` through the binary on the real hipfire tree
//! (fixtures/hipfire-tree, MIT) with `preset = "hipfire"`: the preset carries hipfire's runtime
//! model (family rule prefix5, ensure_kernel/include_str! loads, the RDNA2 variant selector,
//! begin_timer profile names).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

#[path = "support/cli.rs"]
mod cli;
use cli::katlas;

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hipfire-tree").canonicalize().unwrap()
}

/// kernels/, crates/ and scripts/ of the tree in a temp project with the hipfire preset.
fn project() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let d = tempfile::tempdir().unwrap();
    for sub in ["kernels", "crates", "scripts"] {
        copy(&tree().join(sub), &d.path().join(sub));
    }
    std::fs::write(d.path().join("katlas.toml"), "[project]\npreset = \"hipfire\"\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"crates\"]\n").unwrap();
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
