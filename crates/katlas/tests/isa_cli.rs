//! `katlas isa` through the real binary, on katlas-isa's committed fixtures.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../katlas-isa/tests/fixtures")
}

fn katlas(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_katlas")).args(args).current_dir(dir).env("NO_COLOR", "1").output().expect("run katlas")
}

#[test]
fn isa_scan_show_diff_and_export() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let fx = fixtures();
    let bundle = fx.join("kernels.hipfb");
    let out = d.join("m.json");
    let o = katlas(d, &["isa", "scan", bundle.to_str().unwrap(), "--disasm", "never", "--output", out.to_str().unwrap(), "--format", "json", "--no-cache"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(m["schema"], "katlas.isa.v1");
    assert_eq!(m["summary"]["objects"], 6);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written["summary"]["kernels"], 24);

    let s = katlas(d, &["isa", "show", "vgpr_spill", "--manifest", out.to_str().unwrap(), "--arch", "gfx90a", "--format", "json"]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let v: Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(v[0]["kernel"]["resources"]["vgpr_spill"], 40);
    let missing = katlas(d, &["isa", "show", "no_such_kernel", "--manifest", out.to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));

    // a candidate with more spills is flagged (exit 1); identical manifests are not
    let mut cand = written.clone();
    for obj in cand["objects"].as_array_mut().unwrap() {
        for k in obj["kernels"].as_array_mut().unwrap() {
            if k["name"] == "vgpr_spill" {
                let v = k["resources"]["vgpr_spill"].as_u64().unwrap();
                k["resources"]["vgpr_spill"] = (v + 3).into();
            }
        }
    }
    let b = d.join("b.json");
    std::fs::write(&b, serde_json::to_string(&cand).unwrap()).unwrap();
    let same = katlas(d, &["isa", "diff", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0), "{}", String::from_utf8_lossy(&same.stderr));
    let worse = katlas(d, &["isa", "diff", out.to_str().unwrap(), b.to_str().unwrap(), "--format", "json"]);
    assert_eq!(worse.status.code(), Some(1));
    let dj: Value = serde_json::from_slice(&worse.stdout).unwrap();
    assert_eq!(dj["regressions"], 6);

    let h = d.join("h.json");
    let e = katlas(d, &["isa", "scan", bundle.to_str().unwrap(), "--disasm", "never", "--export", "hipfire-v0", "--output", h.to_str().unwrap(), "--no-cache"]);
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let hj: Value = serde_json::from_str(&std::fs::read_to_string(&h).unwrap()).unwrap();
    assert_eq!(hj["schema"], "hipfire.kernel_atlas.isa.v0");
    assert_eq!(hj["object_count"], 6);

    let bad = katlas(d, &["isa", "scan", bundle.to_str().unwrap(), "--filter", "(", "--no-cache"]);
    assert_eq!(bad.status.code(), Some(2));
    let garbage = d.join("garbage.bin");
    std::fs::write(&garbage, b"CCOB\x03\x00\x01\x00\xff\xff\xff\xff\xff\xff\xff\xff").unwrap();
    let g = katlas(d, &["isa", "scan", garbage.to_str().unwrap(), "--no-cache"]);
    assert_eq!(g.status.code(), Some(2), "nothing readable is bad input");
    assert!(String::from_utf8_lossy(&g.stderr).contains("CCOB"), "{}", String::from_utf8_lossy(&g.stderr));
}
