//! `katlas isa` through the real binary, on katlas-isa's committed fixtures.

use serde_json::Value;
use std::path::PathBuf;

use crate::support::cli::{fixture, katlas, katlas_cmd, repo};

fn fixtures() -> PathBuf {
    repo().join("crates/katlas-isa/tests/fixtures")
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

/// NVIDIA rows speak NVIDIA: registers/thread, shared memory, warps/SM; never AMD's VGPR, LDS
/// or waves per SIMD (issue 16.5). Over our NVRTC cubins, the fatbin and the real H200 Triton
/// cache, in text and markdown, for `isa scan` and `isa show` of every kernel, with the
/// instruction mix (nvdisasm from the fixture cache) so its categories are checked too.
#[test]
fn nvidia_rows_use_nvidia_words() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let fx = fixtures();
    let triton = fixture("h200/triton-cache");
    let nvdisasm = katlas_testkit::fetched().join("pypi/nvdisasm/nvidia/cu13/bin");
    assert!(nvdisasm.join("nvdisasm").is_file(), "nvdisasm missing under {}: run scripts/fetch-fixtures", nvdisasm.display());
    let path = format!("{}:{}", nvdisasm.display(), std::env::var("PATH").unwrap_or_default());
    let run = |args: &[&str]| {
        let o = katlas_cmd(d).args(args).env("PATH", &path).output().expect("run katlas");
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let amd_words = |text: &str, what: &str| {
        for line in text.lines() {
            let l = line.to_ascii_lowercase();
            // words, not substrings ("value" is no `valu`); `lds_bytes` counts as `lds`
            for t in l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|t| !t.is_empty()) {
                for w in ["vgpr", "sgpr", "agpr", "lds", "simd", "wave", "waves", "vmem", "valu", "salu"] {
                    assert!(t != w && !t.starts_with(&format!("{w}_")), "{what}: AMD word `{w}` in an NVIDIA line:\n{line}");
                }
            }
        }
    };
    let m = d.join("m.json");
    let inputs: Vec<PathBuf> =
        ["kernels.sm_80.cubin", "kernels.sm_90.cubin", "kernels.sm_90a.cubin", "kernels.fatbin"].iter().map(|f| fx.join(f)).chain([triton]).collect();
    let mut args: Vec<&str> = vec!["isa", "scan", "--disasm", "auto", "--no-cache", "--output", m.to_str().unwrap()];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let mut shown = 0;
    for fmt in ["text", "markdown"] {
        let mut a = args.clone();
        a.extend(["--format", fmt]);
        let text = run(&a);
        assert!(text.contains("registers/thread") && text.contains("warps/SM"), "{fmt} scan:\n{text}");
        assert!(text.contains("98304") && text.contains("triton 8 warps"), "the Triton matmul's dynamic shared memory and block:\n{text}");
        amd_words(&text, &format!("isa scan --format {fmt}"));
        let manifest: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
        for o in manifest["objects"].as_array().unwrap() {
            for k in o["kernels"].as_array().unwrap() {
                let name = k["name"].as_str().unwrap();
                let show = run(&["isa", "show", name, "--manifest", m.to_str().unwrap(), "--arch", o["arch"].as_str().unwrap(), "--format", fmt]);
                assert!(show.contains("registers/thread") && show.contains("shared memory static"), "{show}");
                amd_words(&show, &format!("isa show {name} --format {fmt}"));
                shown += 1;
            }
        }
    }
    assert!(shown >= 2 * 14, "{shown} kernels shown");
}
