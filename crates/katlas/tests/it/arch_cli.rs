//! `katlas arch` through the real binary.

use crate::support::cli::{json, katlas};

#[test]
fn arch_ls_show_and_occupancy() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let ls = json(&katlas(d, &["arch", "ls", "--format", "json"]));
    assert_eq!(ls["schema"], "katlas.arch.v1");
    assert!(ls["atoms"].as_array().unwrap().len() >= 30);
    let fam = json(&katlas(d, &["arch", "ls", "--family", "gfx11", "--format", "json"]));
    let names: Vec<&str> = fam["atoms"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]);

    let a = json(&katlas(d, &["arch", "show", "gfx942:sramecc+:xnack-", "--format", "json"]));
    assert_eq!((a["kind"].as_str(), a["atom"]["name"].as_str()), (Some("atom"), Some("gfx942")));
    assert!(a["products"].as_array().unwrap().iter().any(|p| p["name"] == "Instinct MI300X"));

    let p = json(&katlas(d, &["arch", "show", "NVIDIA H200", "--format", "json"]));
    assert_eq!(p["product"]["measured_bw_gbps"]["value"], 4171.1);

    let o = json(&katlas(d, &["arch", "occupancy", "sm_90", "--regs", "64", "--block", "128", "--format", "json"]));
    assert_eq!(o["occupancy"]["achieved"], 32);
    assert_eq!(o["occupancy"]["limiter"], "registers");

    let text = katlas(d, &["arch", "occupancy", "gfx1100", "--vgprs", "128", "--block", "256"]);
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).starts_with("gfx1100: 10 / 16 waves/SIMD"));

    let bad = katlas(d, &["arch", "show", "gfx9999"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = katlas(d, &["arch", "occupancy", "gfx1100", "--vgprs", "300"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn arch_reads_project_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let rules = d.join(".katlas/rules/arch");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("apu.toml"), "[[atom]]\nname = \"gfx1151\"\nalso_families = [\"gfx11\"]\n").unwrap();
    let fam = json(&katlas(d, &["--project", d.to_str().unwrap(), "arch", "ls", "--family", "gfx11", "--format", "json"]));
    assert!(fam["atoms"].as_array().unwrap().iter().any(|a| a["name"] == "gfx1151"));

    std::fs::write(rules.join("zz-bad.toml"), "[[product]]\nname = \"NVIDIA H200\"\nunits = \"many\"\n").unwrap();
    let o = katlas(d, &["--project", d.to_str().unwrap(), "arch", "ls"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("zz-bad.toml:3") && err.contains("units"), "{err}");
}
