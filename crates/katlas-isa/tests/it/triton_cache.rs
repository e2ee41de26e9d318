//! A real Triton cache from the H200 machine (fixtures/h200/triton-cache: a Triton 3.6 matmul
//! and an inductor rms_norm kernel, built with scripts/device/triton-cache.sh): katlas takes the
//! block size and dynamic shared memory from Triton's JSON, and its occupancy equals the
//! driver's `cuOccupancyMaxActiveBlocksPerMultiprocessor` for those launch facts
//! (fixtures/h200/triton-occupancy.jsonl, measured by the same script).

use katlas_arch::Limiter;
use katlas_isa::{scan, DisasmMode, Kernel, ScanOptions};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    katlas_testkit::fixture("h200")
}

fn scanned() -> katlas_isa::IsaManifest {
    scan(&[fixtures().join("triton-cache")], ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("scan")
}

fn kernel<'a>(m: &'a katlas_isa::IsaManifest, name: &str) -> &'a Kernel {
    m.objects.iter().flat_map(|o| &o.kernels).find(|k| k.name == name).unwrap_or_else(|| panic!("kernel {name} not scanned"))
}

#[test]
fn launch_facts_come_from_tritons_json() {
    let m = scanned();
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    let jsons: Vec<PathBuf> = walk(&fixtures().join("triton-cache"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.file_name().unwrap().to_string_lossy().starts_with("__grp__"))
        .collect();
    assert_eq!(jsons.len(), 2);
    for j in jsons {
        let want: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
        let k = kernel(&m, want["name"].as_str().unwrap());
        let t = k.triton.as_ref().unwrap_or_else(|| panic!("{}: no Triton launch facts", k.name));
        assert_eq!(t.block_size as u64, 32 * want["num_warps"].as_u64().unwrap(), "{}: block = 32 × num_warps", k.name);
        assert_eq!(t.shared_dynamic_bytes, want["shared"].as_u64().unwrap(), "{}: dynamic shared", k.name);
        assert_eq!(t.num_stages.map(u64::from), want["num_stages"].as_u64());
        assert_eq!(t.arch.as_deref(), Some("sm_90"));
        assert!(t.source.as_deref().is_some_and(|s| s.ends_with(".py:3") || s.ends_with(".py:18")), "{:?}", t.source);
    }
}

#[test]
fn occupancy_equals_the_drivers_answer_for_the_launch() {
    let m = scanned();
    let oracle = std::fs::read_to_string(fixtures().join("triton-occupancy.jsonl")).unwrap();
    let mut checked = 0;
    for line in oracle.lines().filter(|l| !l.trim().is_empty()) {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let k = kernel(&m, want["kernel"].as_str().unwrap());
        let nv = k.nvidia.as_ref().unwrap();
        assert_eq!(nv.regcount.map(u64::from), want["num_regs"].as_u64(), "registers/thread vs cuFuncGetAttribute");
        let o = k.occupancy.as_ref().unwrap_or_else(|| panic!("{}: no occupancy ({:?})", k.name, k.occupancy_note));
        assert_eq!(o.groups as u64, want["blocks_per_sm"].as_u64().unwrap(), "{}: blocks/SM vs the driver", k.name);
        assert_eq!(o.achieved as u64, want["warps_per_sm"].as_u64().unwrap(), "{}: warps/SM vs the driver", k.name);
        // the dynamic shared memory is what bounds the matmul's blocks, as the driver counts it
        let by_shared = o.per_limit_groups.iter().find(|(l, _)| *l == Limiter::SharedMemory).map(|(_, n)| *n);
        assert_eq!(by_shared, Some(2), "{}: 233472 B / (98304 + 1024 reserved) per block", k.name);
        checked += 1;
    }
    assert_eq!(checked, 1);
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
