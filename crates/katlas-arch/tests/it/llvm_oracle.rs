//! AMD occupancy against the compiler's own verdict.
//!
//! Kernels with known register, LDS and workgroup use (inline-asm clobbers pin the
//! register counts) are compiled by LLVM's `llc` (clang-22/llvm-22 from Debian
//! bookworm-security, installed by `scripts/fetch-fixtures`) for each atom; LLVM prints
//! `; Occupancy: N` per kernel and writes the code-object metadata (`.vgpr_count`,
//! `.agpr_count`, `.sgpr_count`, `.group_segment_fixed_size`, `.wavefront_size`).
//! `occupancy()` fed with that metadata must agree with LLVM on every kernel.
//!
//! Needs `llc-22` (or `KATLAS_LLC=/path/to/llc`); without it the test fails, naming the fix.

use katlas_arch::{occupancy_with, ArchDb, KernelResources, OccupancyOptions};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

fn llc() -> PathBuf {
    if let Some(p) = std::env::var_os("KATLAS_LLC") {
        return PathBuf::from(p);
    }
    for c in ["llc-22", "/usr/lib/llvm-22/bin/llc"] {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return PathBuf::from(c);
        }
    }
    panic!("llc-22 not found: run scripts/fetch-fixtures (installs clang-22 lld-22 llvm-22) or set KATLAS_LLC");
}

/// One kernel to generate: registers to clobber, LDS bytes, workgroup size.
struct Kernel {
    vgprs: u32,
    agprs: u32,
    sgprs: u32,
    lds: u32,
    wg: u32,
}

fn module(kernels: &[Kernel]) -> String {
    let mut m = String::new();
    let mut wgs: Vec<u32> = kernels.iter().map(|k| k.wg).collect();
    wgs.sort();
    wgs.dedup();
    for (i, k) in kernels.iter().enumerate() {
        let mut clobbers = Vec::new();
        if k.vgprs > 0 {
            clobbers.push(format!("~{{v{}}}", k.vgprs - 1));
        }
        if k.agprs > 0 {
            clobbers.push(format!("~{{a{}}}", k.agprs - 1));
        }
        if k.sgprs > 0 {
            clobbers.push(format!("~{{s{}}}", k.sgprs - 1));
        }
        let attr = wgs.iter().position(|w| *w == k.wg).unwrap();
        if k.lds > 0 {
            let n = k.lds / 4;
            writeln!(m, "@lds{i} = internal addrspace(3) global [{n} x i32] poison, align 4").unwrap();
            writeln!(m, "define amdgpu_kernel void @k{i}(i32 %i) #{attr} {{").unwrap();
            writeln!(m, "  %p = getelementptr [{n} x i32], ptr addrspace(3) @lds{i}, i32 0, i32 %i").unwrap();
            writeln!(m, "  store volatile i32 1, ptr addrspace(3) %p").unwrap();
        } else {
            writeln!(m, "define amdgpu_kernel void @k{i}() #{attr} {{").unwrap();
        }
        if !clobbers.is_empty() {
            writeln!(m, "  call void asm sideeffect \"\", \"{}\"()", clobbers.join(",")).unwrap();
        }
        writeln!(m, "  ret void\n}}").unwrap();
    }
    for (i, w) in wgs.iter().enumerate() {
        writeln!(m, "attributes #{i} = {{ \"amdgpu-flat-work-group-size\"=\"{w},{w}\" }}").unwrap();
    }
    m
}

/// Per kernel: LLVM's `; Occupancy:` and the metadata fields.
fn compile(cpu: &str, mattr: &str, src: &str) -> BTreeMap<String, (u32, BTreeMap<String, u64>)> {
    let dir = tempfile::tempdir().unwrap();
    let ll = dir.path().join("k.ll");
    std::fs::write(&ll, src).unwrap();
    let mut cmd = Command::new(llc());
    cmd.args(["-mtriple=amdgcn-amd-amdhsa", &format!("-mcpu={cpu}"), "-o", "-"]);
    if !mattr.is_empty() {
        cmd.arg(format!("-mattr={mattr}"));
    }
    let out = cmd.arg(&ll).output().expect("run llc");
    assert!(out.status.success(), "llc {cpu} {mattr}: {}", String::from_utf8_lossy(&out.stderr));
    let asm = String::from_utf8(out.stdout).unwrap();
    let mut occ = BTreeMap::new();
    let mut current = None;
    for line in asm.lines() {
        if let Some((label, _)) = line.split_once(':') {
            if label.starts_with('k') && label[1..].chars().all(|c| c.is_ascii_digit()) && !label.is_empty() {
                current = Some(label.to_string());
            }
        }
        if let (Some(k), Some(v)) = (&current, line.strip_prefix("; Occupancy: ")) {
            occ.insert(k.clone(), v.trim().parse::<u32>().unwrap());
        }
    }
    let meta = asm.split(".amdgpu_metadata").nth(1).expect("metadata block");
    let mut kernels: Vec<BTreeMap<String, String>> = Vec::new();
    for line in meta.lines() {
        let (fields, new) = if let Some(rest) = line.strip_prefix("  - .") {
            (rest, true)
        } else if let Some(rest) = line.strip_prefix("    .") {
            (rest, false)
        } else {
            continue;
        };
        if new {
            kernels.push(BTreeMap::new());
        }
        if let (Some(k), Some((key, val))) = (kernels.last_mut(), fields.split_once(':')) {
            k.insert(key.trim().to_string(), val.trim().to_string());
        }
    }
    let mut res = BTreeMap::new();
    for k in kernels {
        let Some(name) = k.get("name") else { continue };
        let nums = k.iter().filter_map(|(key, v)| v.parse::<u64>().ok().map(|n| (key.clone(), n))).collect();
        let o = *occ.get(name).unwrap_or_else(|| panic!("no Occupancy remark for {name}"));
        res.insert(name.clone(), (o, nums));
    }
    res
}

fn kernels(mfma: bool, sgpr_limit: bool) -> Vec<Kernel> {
    let k = |vgprs, agprs, sgprs, lds, wg| Kernel { vgprs, agprs, sgprs, lds, wg };
    let mut v = Vec::new();
    for n in 1..=256 {
        v.push(k(n, 0, 0, 0, 256));
    }
    if mfma {
        for arch in [1, 32, 90, 128, 200, 256] {
            for acc in [1, 6, 64, 128, 256] {
                v.push(k(arch, acc, 0, 0, 256));
            }
        }
    }
    if sgpr_limit {
        for s in [10, 60, 70, 74, 76, 80, 84, 90, 94, 96, 100] {
            v.push(k(8, 0, s, 0, 256));
        }
    }
    for lds in [5120, 10240, 20480, 30720, 40960, 61440, 65536] {
        for wg in [64, 256, 1024] {
            v.push(k(8, 0, 0, lds, wg));
        }
    }
    for wg in [32, 64, 96, 128, 192, 256, 320, 512, 640, 768, 1024] {
        for vg in [8, 24, 32] {
            v.push(k(vg, 0, 0, 0, wg));
        }
    }
    v
}

#[test]
fn amd_occupancy_equals_llvm_remarks() {
    let db = ArchDb::builtin();
    // (cpu, -mattr, CU mode)
    let configs: &[(&str, &str, bool)] = &[
        ("gfx906", "", false),
        ("gfx908", "", false),
        ("gfx90a", "", false),
        ("gfx942", "", false),
        ("gfx950", "", false),
        ("gfx1010", "", false),
        ("gfx1030", "", false),
        ("gfx1030", "+wavefrontsize64", false),
        ("gfx1100", "", false),
        ("gfx1100", "+wavefrontsize64", false),
        ("gfx1100", "+cumode", true),
        ("gfx1102", "", false),
        ("gfx1103", "", false),
        ("gfx1150", "", false),
        ("gfx1151", "", false),
        ("gfx1200", "", false),
        ("gfx1201", "", false),
        ("gfx1201", "+wavefrontsize64", false),
    ];
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for (cpu, mattr, cu_mode) in configs {
        let atom = db.atom(cpu).unwrap();
        let mfma = atom.has_cap("mfma");
        let gen = kernels(mfma, true);
        let results = compile(cpu, mattr, &module(&gen));
        assert_eq!(results.len(), gen.len(), "{cpu}: every kernel compiled and reported");
        for (i, k) in gen.iter().enumerate() {
            let (llvm_occ, meta) = &results[&format!("k{i}")];
            let get = |key: &str| meta.get(key).copied();
            let r = KernelResources {
                vgprs: get("vgpr_count").map(|v| v as u32),
                agprs: get("agpr_count").map(|v| v as u32),
                sgprs: get("sgpr_count").map(|v| v as u32),
                lds_bytes: get("group_segment_fixed_size").unwrap_or(0),
                scratch_bytes_per_lane: get("private_segment_fixed_size").unwrap_or(0),
                wave_size: get("wavefront_size").map(|v| v as u32),
                workgroup_size: Some(k.wg),
                ..Default::default()
            };
            let opts = OccupancyOptions { cu_mode: Some(*cu_mode), ..Default::default() };
            let ours = occupancy_with(atom, &r, &opts).map(|o| o.achieved);
            checked += 1;
            if ours.as_ref().ok() != Some(llvm_occ) {
                mismatches.push(format!(
                    "{cpu}{mattr}: k{i} (clobber v{} a{} s{} lds {} wg {}; metadata {:?}): llvm {llvm_occ}, katlas {ours:?}",
                    k.vgprs, k.agprs, k.sgprs, k.lds, k.wg, r
                ));
            }
        }
    }
    assert!(checked > 5000, "{checked}");
    assert!(mismatches.is_empty(), "{} of {checked} kernels disagree with LLVM:\n{}", mismatches.len(), mismatches.join("\n"));
}
