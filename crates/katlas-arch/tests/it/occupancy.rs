//! Occupancy against vendor-documented tables and vendor tool output.
//!
//! Expected values are written from the vendors' tables (or worked by hand from the
//! documented rules, shown in the comments), never taken from this crate's output.

use katlas_arch::{occupancy, occupancy_with, total_vgprs, ArchDb, Atom, KernelResources, Limiter, Occupancy, OccupancyOptions};

fn atom(name: &str) -> &'static Atom {
    ArchDb::builtin().atom(name).unwrap_or_else(|| panic!("atom {name}"))
}

fn amd(vgprs: u32, wave: u32, wg: u32) -> KernelResources {
    KernelResources { vgprs: Some(vgprs), sgprs: Some(16), wave_size: Some(wave), workgroup_size: Some(wg), ..Default::default() }
}

fn nv(threads: u32, regs: u32, shared: u64) -> KernelResources {
    KernelResources { regs_per_thread: Some(regs), shared_bytes: shared, workgroup_size: Some(threads), ..Default::default() }
}

/// Waves per SIMD, what limits them, and how many workgroups are resident per what unit.
fn residency(o: &Occupancy) -> (u32, Limiter, u32, &str) {
    (o.achieved, o.limiter, o.groups, o.group_unit.as_str())
}

/// Waves per SIMD by VGPRs from a vendor table: rows of (highest register count, waves),
/// lowest first, the last row open-ended.
fn waves(table: &[(u32, u32)], v: u32) -> u32 {
    table.iter().find(|(top, _)| v <= *top).expect("the last row covers every count").1
}

/// GCN / Vega (gfx906): AMD's GCN occupancy table (256 VGPRs per lane per SIMD, 4-register
/// granules, 10 wave slots), as printed in AMD's "GCN ISA" performance notes and
/// CodeXL/Radeon GPU Analyzer occupancy view.
const GCN: &[(u32, u32)] = &[(24, 10), (28, 9), (32, 8), (36, 7), (40, 6), (48, 5), (64, 4), (84, 3), (128, 2), (u32::MAX, 1)];

/// CDNA2/CDNA3 (gfx90a, gfx942) unified 512-register file, 8-register granules,
/// 8 wave slots: AMD Instinct MI200/MI300 occupancy table (AMD ROCm docs,
/// "MI200/MI300 ... VGPR and AGPR: waves per SIMD by total registers").
const CDNA_UNIFIED: &[(u32, u32)] = &[(64, 8), (72, 7), (80, 6), (96, 5), (128, 4), (168, 3), (256, 2), (u32::MAX, 1)];

/// RDNA3 Navi31/32, RDNA3.5 Strix Halo and RDNA4 (1536 VGPRs wave32, allocation in
/// blocks of 24, 16 wave slots): AMD GPUOpen "Occupancy explained" RDNA3 table.
const RDNA_1536_WAVE32: &[(u32, u32)] = &[(96, 16), (120, 12), (144, 10), (168, 9), (192, 8), (216, 7), (240, 6), (u32::MAX, 5)];

/// RDNA2 and RDNA3 Navi33/Phoenix, RDNA3.5 Strix Point (1024 VGPRs wave32,
/// blocks of 16, 16 wave slots): AMD GPUOpen "Occupancy explained" RDNA2 table.
const RDNA_1024_WAVE32: &[(u32, u32)] = &[(64, 16), (80, 12), (96, 10), (112, 9), (128, 8), (144, 7), (160, 6), (192, 5), (u32::MAX, 4)];

#[test]
fn gcn_vgpr_table_gfx906() {
    for v in 1..=256 {
        let o = occupancy(atom("gfx906"), &amd(v, 64, 64)).unwrap();
        assert_eq!(o.achieved, waves(GCN, v), "gfx906 {v} VGPRs");
        assert_eq!(o.max, 10);
        assert_eq!(o.unit, "waves/SIMD");
        if waves(GCN, v) < 10 {
            assert_eq!(o.limiter, Limiter::Vgpr, "{v}");
        } else {
            assert_eq!(o.limiter, Limiter::WaveSlots, "{v}");
        }
    }
}

#[test]
fn gcn_sgpr_steps_gfx906() {
    // GCN3/Vega ISA occupancy by SGPRs (800 per SIMD): <=80 -> 10, <=88 -> 9,
    // <=100 -> 8, more -> 7 (LLVM getOccupancyWithNumSGPRs mirrors the same table).
    for (s, w) in [(80, 10), (81, 9), (88, 9), (89, 8), (100, 8), (102, 7), (108, 7)] {
        let r = KernelResources { sgprs: Some(s), ..amd(16, 64, 64) };
        let o = occupancy(atom("gfx906"), &r).unwrap();
        assert_eq!(o.achieved, w, "{s} SGPRs");
        if w < 10 {
            assert_eq!(o.limiter, Limiter::Sgpr);
        }
    }
    // SGPRs never limit on gfx10+.
    let r = KernelResources { sgprs: Some(106), ..amd(16, 32, 64) };
    assert_eq!(occupancy(atom("gfx1100"), &r).unwrap().achieved, 16);
}

#[test]
fn gcn_lds_and_workgroup_slots_gfx906() {
    // 64 KiB LDS per CU, 4 SIMDs. 256 threads = 4 waves per workgroup.
    // 32 KiB -> 2 workgroups -> 8 waves / 4 SIMDs = 2 waves/SIMD.
    let r = KernelResources { lds_bytes: 32 * 1024, ..amd(16, 64, 256) };
    let o = occupancy(atom("gfx906"), &r).unwrap();
    assert_eq!(residency(&o), (2, Limiter::Lds, 2, "workgroups/CU"));
    // 20 KiB -> 3 workgroups -> 12 waves -> 3 waves/SIMD.
    let r = KernelResources { lds_bytes: 20 * 1024, ..amd(16, 64, 256) };
    assert_eq!(occupancy(atom("gfx906"), &r).unwrap().achieved, 3);
    // 20000 B rounds to 20480 B (512 B granule): still 3 workgroups.
    let r = KernelResources { lds_bytes: 20000, ..amd(16, 64, 256) };
    let o = occupancy(atom("gfx906"), &r).unwrap();
    assert_eq!(o.achieved, 3);
    assert!(o.notes.iter().any(|n| n.contains("20480")));
    // GCN: at most 16 workgroups per CU (barrier resources). 128-thread workgroups
    // (2 waves) -> 16 x 2 = 32 waves / 4 SIMDs = 8 waves/SIMD even with few registers.
    let o = occupancy(atom("gfx906"), &amd(16, 64, 128)).unwrap();
    assert_eq!((o.achieved, o.limiter, o.groups), (8, Limiter::Workgroup, 16));
    // Single-wave workgroups use no barrier: all 40 slots.
    assert_eq!(occupancy(atom("gfx906"), &amd(16, 64, 64)).unwrap().achieved, 10);
    // LDS over the per-workgroup maximum is an error.
    let r = KernelResources { lds_bytes: 65 * 1024, ..amd(16, 64, 256) };
    assert!(occupancy(atom("gfx906"), &r).is_err());
}

#[test]
fn separate_agpr_file_gfx908() {
    // MI100: 256 arch VGPRs and a separate 256-entry AGPR file per lane; LLVM's
    // .vgpr_count = max(arch, acc). 128 AGPRs -> 256/128 = 2 waves, bounded by AGPRs.
    let r = KernelResources { agprs: Some(128), ..amd(128, 64, 256) };
    let o = occupancy(atom("gfx908"), &r).unwrap();
    assert_eq!((o.achieved, o.limiter), (2, Limiter::Agpr));
    // 200 arch VGPRs, 64 AGPRs: the VGPR file bounds, 1 wave.
    let r = KernelResources { agprs: Some(64), ..amd(200, 64, 256) };
    let o = occupancy(atom("gfx908"), &r).unwrap();
    assert_eq!((o.achieved, o.limiter), (1, Limiter::Vgpr));
    assert_eq!(total_vgprs(atom("gfx908"), 90, 6), 90);
    for v in 1..=256 {
        assert_eq!(occupancy(atom("gfx908"), &amd(v, 64, 64)).unwrap().achieved, waves(GCN, v), "gfx908 {v}");
    }
}

#[test]
fn unified_register_file_gfx90a_gfx942() {
    for name in ["gfx90a", "gfx942"] {
        for v in 1..=512 {
            let o = occupancy(atom(name), &amd(v, 64, 64)).unwrap();
            assert_eq!(o.achieved, waves(CDNA_UNIFIED, v), "{name} {v} registers");
            assert_eq!(o.max, 8);
        }
    }
    // The AGPR block starts at an arch-VGPR count aligned to 4 (AMDGPUUsage, "gfx90a
    // ... accum_offset"): 90 arch + 6 AGPRs occupy 92 + 6 = 98 registers -> 104 after
    // the 8-register granule -> 512/104 = 4 waves (without the alignment: 96 -> 5).
    let total = total_vgprs(atom("gfx90a"), 90, 6);
    assert_eq!(total, 98);
    let r = KernelResources { agprs: Some(6), ..amd(total, 64, 64) };
    let o = occupancy(atom("gfx90a"), &r).unwrap();
    assert_eq!((o.achieved, o.limiter), (4, Limiter::Vgpr));
    assert_eq!(total_vgprs(atom("gfx942"), 256, 256), 512);
    let r = KernelResources { agprs: Some(256), ..amd(512, 64, 64) };
    assert_eq!(occupancy(atom("gfx942"), &r).unwrap().achieved, 1);
    // A total below the AGPR count is not LLVM's .vgpr_count: rejected.
    let r = KernelResources { agprs: Some(64), ..amd(32, 64, 64) };
    assert!(occupancy(atom("gfx942"), &r).is_err());
}

#[test]
fn cdna3_workgroup_and_lds_gfx942() {
    // 1024-thread workgroup = 16 waves; 64 registers -> 8 waves/SIMD = 32 per CU
    // -> 2 workgroups per CU.
    let o = occupancy(atom("gfx942"), &amd(64, 64, 1024)).unwrap();
    assert_eq!((o.achieved, o.groups), (8, 2));
    // 64 KiB LDS per workgroup: 1 workgroup -> 16 waves / 4 SIMDs = 4 waves/SIMD.
    let r = KernelResources { lds_bytes: 64 * 1024, ..amd(64, 64, 1024) };
    let o = occupancy(atom("gfx942"), &r).unwrap();
    assert_eq!((o.achieved, o.limiter, o.groups), (4, Limiter::Lds, 1));
    // gfx950 has 160 KiB LDS: two 64 KiB workgroups fit -> 8 waves/SIMD.
    let o = occupancy(atom("gfx950"), &r).unwrap();
    assert_eq!((o.achieved, o.groups), (8, 2));
    // wave32 does not exist on CDNA.
    assert!(occupancy(atom("gfx942"), &amd(64, 32, 64)).is_err());
}

#[test]
fn rdna2_gfx1030_wave32_and_wave64() {
    for v in 1..=256 {
        assert_eq!(occupancy(atom("gfx1030"), &amd(v, 32, 32)).unwrap().achieved, waves(RDNA_1024_WAVE32, v), "wave32 {v}");
    }
    // wave64: 512 registers, blocks of 8: 64 -> 8, 72 -> 7, 128 -> 4, 256 -> 2.
    for (v, w) in [(64, 8), (72, 7), (128, 4), (256, 2)] {
        assert_eq!(occupancy(atom("gfx1030"), &amd(v, 64, 64)).unwrap().achieved, w, "wave64 {v}");
    }
    // Wave size defaults to 32 on gfx10+ and says so.
    let r = KernelResources { wave_size: None, ..amd(64, 32, 256) };
    let o = occupancy(atom("gfx1030"), &r).unwrap();
    assert_eq!(o.achieved, 16);
    assert!(o.notes.iter().any(|n| n.contains("wave32")));
}

#[test]
fn rdna3_gfx1100_and_rdna35_gfx1151() {
    for name in ["gfx1100", "gfx1101", "gfx1151", "gfx1201", "gfx1200"] {
        for v in 1..=256 {
            let o = occupancy(atom(name), &amd(v, 32, 32)).unwrap();
            assert_eq!(o.achieved, waves(RDNA_1536_WAVE32, v), "{name} {v}");
            assert_eq!(o.max, 16);
        }
    }
    for name in ["gfx1102", "gfx1103", "gfx1150", "gfx1152"] {
        for v in 1..=256 {
            assert_eq!(occupancy(atom(name), &amd(v, 32, 32)).unwrap().achieved, waves(RDNA_1024_WAVE32, v), "{name} {v}");
        }
    }
    // RDNA1 (gfx1010): 1024 registers in blocks of 8, 20 wave slots: 48 -> 20, 64 -> 16, 256 -> 4.
    for (v, w) in [(48, 20), (56, 18), (64, 16), (256, 4)] {
        assert_eq!(occupancy(atom("gfx1010"), &amd(v, 32, 32)).unwrap().achieved, w, "gfx1010 {v}");
    }
}

#[test]
fn rdna_lds_in_wgp_and_cu_mode() {
    // gfx1100, 256 threads wave32 = 8 waves, 40 KiB LDS.
    // WGP mode (HIP default): 128 KiB per WGP, 4 SIMDs -> 3 workgroups -> 24 waves -> 6/SIMD.
    // CU mode: 64 KiB per CU, 2 SIMDs -> 1 workgroup -> 8 waves -> 4/SIMD.
    let r = KernelResources { lds_bytes: 40 * 1024, ..amd(64, 32, 256) };
    let o = occupancy(atom("gfx1100"), &r).unwrap();
    assert_eq!(residency(&o), (6, Limiter::Lds, 3, "workgroups/WGP"));
    let cu = OccupancyOptions { cu_mode: Some(true), ..Default::default() };
    let o = occupancy_with(atom("gfx1100"), &r, &cu).unwrap();
    assert_eq!(residency(&o), (4, Limiter::Lds, 1, "workgroups/CU"));
    // gfx1201 is the same; gfx1151 too (RDNA 3.5 WGPs have 128 KiB LDS).
    assert_eq!(occupancy(atom("gfx1201"), &r).unwrap().achieved, 6);
    assert_eq!(occupancy(atom("gfx1151"), &r).unwrap().achieved, 6);
    // Unknown workgroup size: 256 assumed and said so.
    let r = KernelResources { workgroup_size: None, ..r };
    let o = occupancy(atom("gfx1100"), &r).unwrap();
    assert_eq!(o.achieved, 6);
    assert!(o.notes.iter().any(|n| n.contains("assumed 256")));
}

#[test]
fn amd_bad_inputs_are_errors() {
    assert!(occupancy(atom("gfx1100"), &amd(300, 32, 64)).is_err(), "over 256 VGPRs");
    assert!(occupancy(atom("gfx1100"), &amd(64, 32, 2048)).is_err(), "over 1024 threads");
    assert!(occupancy(atom("gfx1100"), &amd(64, 16, 64)).is_err(), "wave16");
    let r = KernelResources { agprs: Some(4), ..amd(64, 32, 64) };
    assert!(occupancy(atom("gfx1100"), &r).is_err(), "AGPRs on RDNA");
    // Unknown VGPRs: not judged, said so.
    let r = KernelResources { vgprs: None, ..amd(64, 32, 64) };
    let o = occupancy(atom("gfx1100"), &r).unwrap();
    assert!(o.notes.iter().any(|n| n.contains("VGPR count unknown")));
}

/// One kernel launch from `ncu --page raw` on an H200 (fixtures/h200/
/// ncu_llama_raw.csv, ncu 2025.3, CUDA 13.0): block size, registers per thread,
/// static + dynamic shared memory, the carveout the driver chose
/// (launch__shared_mem_config_size), ncu's launch__occupancy_limit_{registers,
/// shared_mem,warps,blocks} in blocks, and sm__maximum_warps_per_active_cycle_pct.
struct NcuLaunch {
    threads: u32,
    regs: u32,
    shared: u64,
    config: u64,
    limit_regs: u32,
    limit_smem: u32,
    limit_warps: u32,
    limit_blocks: u32,
    /// sm__maximum_warps_per_active_cycle_pct.
    pct: f64,
}

const NCU_H200: &[NcuLaunch] = &[
    NcuLaunch { threads: 256, regs: 56, shared: 0, config: 32768, limit_regs: 4, limit_smem: 32, limit_warps: 8, limit_blocks: 32, pct: 50.0 },
    NcuLaunch { threads: 128, regs: 16, shared: 0, config: 32768, limit_regs: 32, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 128, regs: 40, shared: 0, config: 32768, limit_regs: 12, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 75.0 },
    NcuLaunch { threads: 128, regs: 32, shared: 0, config: 32768, limit_regs: 16, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 128, regs: 22, shared: 0, config: 32768, limit_regs: 21, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 128, regs: 18, shared: 0, config: 32768, limit_regs: 21, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 8, regs: 52, shared: 16, config: 65536, limit_regs: 36, limit_smem: 56, limit_warps: 64, limit_blocks: 32, pct: 50.0 },
    NcuLaunch { threads: 32, regs: 32, shared: 16, config: 65536, limit_regs: 64, limit_smem: 56, limit_warps: 64, limit_blocks: 32, pct: 50.0 },
    NcuLaunch { threads: 128, regs: 26, shared: 0, config: 32768, limit_regs: 16, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 128, regs: 48, shared: 7184, config: 135168, limit_regs: 10, limit_smem: 16, limit_warps: 16, limit_blocks: 32, pct: 62.5 },
    NcuLaunch { threads: 128, regs: 38, shared: 0, config: 32768, limit_regs: 12, limit_smem: 32, limit_warps: 16, limit_blocks: 32, pct: 75.0 },
    NcuLaunch { threads: 128, regs: 80, shared: 25600, config: 167936, limit_regs: 6, limit_smem: 6, limit_warps: 16, limit_blocks: 32, pct: 37.5 },
    NcuLaunch { threads: 512, regs: 29, shared: 0, config: 16384, limit_regs: 4, limit_smem: 16, limit_warps: 4, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 512, regs: 32, shared: 16, config: 16384, limit_regs: 4, limit_smem: 14, limit_warps: 4, limit_blocks: 32, pct: 100.0 },
    NcuLaunch { threads: 384, regs: 168, shared: 164308, config: 167936, limit_regs: 1, limit_smem: 1, limit_warps: 5, limit_blocks: 32, pct: 18.75 },
    NcuLaunch { threads: 512, regs: 25, shared: 0, config: 16384, limit_regs: 4, limit_smem: 16, limit_warps: 4, limit_blocks: 32, pct: 100.0 },
];

#[test]
fn sm90_matches_ncu_occupancy_limits_on_h200() {
    let sm90 = atom("sm_90");
    for (i, l) in NCU_H200.iter().enumerate() {
        let r = nv(l.threads, l.regs, l.shared);
        let with_config = occupancy_with(sm90, &r, &OccupancyOptions { smem_carveout_bytes: Some(l.config), ..Default::default() }).unwrap();
        let got = |lim: Limiter| with_config.per_limit_groups.iter().find(|p| p.0 == lim).map(|p| p.1);
        assert_eq!(got(Limiter::Registers), Some(l.limit_regs), "launch {i} registers");
        assert_eq!(got(Limiter::SharedMemory), Some(l.limit_smem), "launch {i} shared memory");
        assert_eq!(got(Limiter::Threads), Some(l.limit_warps), "launch {i} warps");
        assert_eq!(got(Limiter::Blocks), Some(l.limit_blocks), "launch {i} blocks");
        // Theoretical occupancy with the default (largest) carveout equals ncu's.
        let o = occupancy(sm90, &r).unwrap();
        assert!((o.fraction * 100.0 - l.pct).abs() < 1e-9, "launch {i}: {} vs {}", o.fraction * 100.0, l.pct);
        assert_eq!(o.unit, "warps/SM");
    }
}

#[test]
fn sm90_calculator_examples() {
    // CUDA occupancy calculator rules, compute capability 9.0: 128 threads, 64 regs,
    // no shared memory: 64 x 32 = 2048 regs per warp; 16384 regs per sub-partition
    // -> 8 warps each -> 32 warps -> 8 blocks of 4 warps -> 32/64 warps = 50 %.
    let o = occupancy(atom("sm_90"), &nv(128, 64, 0)).unwrap();
    assert_eq!((o.achieved, o.max, o.groups, o.limiter), (32, 64, 8, Limiter::Registers));
    assert!((o.fraction - 0.5).abs() < 1e-12);
    // 32 regs, 256 threads: 1024 regs per warp -> 64 warps by registers; 8 blocks
    // by warp slots -> full occupancy, bounded by warp slots.
    let o = occupancy(atom("sm_90"), &nv(256, 32, 0)).unwrap();
    assert_eq!((o.achieved, o.limiter), (64, Limiter::Threads));
    // 100 KiB dynamic shared: (102400 + 1024) rounded to 128 = 103424 B per block;
    // 233472 / 103424 = 2 blocks of 8 warps = 16 warps = 25 %, bounded by shared memory.
    let o = occupancy(atom("sm_90a"), &nv(256, 32, 100 * 1024)).unwrap();
    assert_eq!((o.achieved, o.groups, o.limiter), (16, 2, Limiter::SharedMemory));
    assert!(o.notes.iter().any(|n| n.contains("opt-in")));
}

#[test]
fn sm80_sm86_sm89_calculator_examples() {
    // sm_80: 256 threads, 40 regs, 48 KiB shared. Registers: 1280 per warp ->
    // 16384/1280 = 12 warps per sub-partition -> 48 warps -> 6 blocks. Shared:
    // 49152 + 1024 = 50176 B -> 167936 / 50176 = 3 blocks -> 24 warps = 37.5 %.
    let o = occupancy(atom("sm_80"), &nv(256, 40, 48 * 1024)).unwrap();
    assert_eq!((o.achieved, o.groups, o.limiter), (24, 3, Limiter::SharedMemory));
    assert!((o.fraction - 0.375).abs() < 1e-12);
    // sm_89: 1024 threads, 32 regs: registers allow 2 blocks, but 48 warp slots hold
    // one 32-warp block -> 32/48 warps.
    let o = occupancy(atom("sm_89"), &nv(1024, 32, 0)).unwrap();
    assert_eq!((o.achieved, o.max, o.limiter), (32, 48, Limiter::Threads));
    // sm_89: 32-thread blocks, 16 regs: 24 resident blocks -> 24/48 warps, bounded by blocks.
    let o = occupancy(atom("sm_89"), &nv(32, 16, 0)).unwrap();
    assert_eq!((o.achieved, o.limiter), (24, Limiter::Blocks));
    // sm_86: 16 resident blocks -> 16/48.
    let o = occupancy(atom("sm_86"), &nv(32, 16, 0)).unwrap();
    assert_eq!((o.achieved, o.limiter), (16, Limiter::Blocks));
    // sm_120: 24 blocks, 48 warps, 100 KiB per SM.
    let o = occupancy(atom("sm_120"), &nv(32, 16, 0)).unwrap();
    assert_eq!((o.achieved, o.max), (24, 48));
}

#[test]
fn nvidia_unlaunchable_and_bad_inputs() {
    // 255 regs x 1024 threads = 261120 registers > 65536 per block: nothing resident.
    let o = occupancy(atom("sm_90"), &nv(1024, 255, 0)).unwrap();
    assert_eq!((o.achieved, o.limiter), (0, Limiter::Registers));
    // More shared memory than a block may have.
    let o = occupancy(atom("sm_80"), &nv(128, 32, 200 * 1024)).unwrap();
    assert_eq!((o.achieved, o.limiter), (0, Limiter::SharedMemory));
    assert!(occupancy(atom("sm_90"), &nv(2048, 32, 0)).is_err());
    assert!(occupancy(atom("sm_90"), &nv(128, 256, 0)).is_err());
    let r = KernelResources { wave_size: Some(64), ..nv(128, 32, 0) };
    assert!(occupancy(atom("sm_90"), &r).is_err());
    // Unknown block size and registers: assumed / not judged, and said so.
    let o = occupancy(atom("sm_90"), &KernelResources::default()).unwrap();
    assert!(o.notes.iter().any(|n| n.contains("assumed 256")));
    assert!(o.notes.iter().any(|n| n.contains("registers per thread unknown")));
}

#[test]
fn every_atom_computes_a_default_occupancy() {
    for a in ArchDb::builtin().atoms() {
        let r = KernelResources { vgprs: Some(32), sgprs: Some(32), regs_per_thread: Some(32), workgroup_size: Some(256), ..Default::default() };
        let o = occupancy(a, &r).unwrap_or_else(|e| panic!("{}: {e}", a.name));
        assert!(o.achieved > 0 && o.achieved <= o.max, "{}", a.name);
        let json = serde_json::to_value(&o).unwrap();
        assert!(json["limiter"].is_string() && json["per_limit"].is_array());
    }
}

/// The CUDA driver's cuOccupancyMaxActiveBlocksPerMultiprocessor on an H200 (driver
/// 580.159.04, CUDA 13.0) for 16 driver-JIT-compiled kernels (14 to 255 registers,
/// 0 to 48 KiB static shared memory) x 13 block sizes x 14 dynamic shared sizes,
/// recorded by scripts/arch-occupancy-oracle.py into tests/data/cuda_occupancy_h200.json.
#[test]
fn sm90_matches_cuda_driver_occupancy_api() {
    let text = include_str!("../data/cuda_occupancy_h200.json");
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(doc["cc"], "9.0");
    let lim = atom("sm_90").nvidia.clone().unwrap();
    let a = &doc["attributes"];
    assert_eq!(a["max_shared_memory_per_multiprocessor"], lim.smem_per_sm);
    assert_eq!(a["max_shared_memory_per_block_optin"], lim.smem_per_block_optin);
    assert_eq!(a["reserved_shared_memory_per_block"], lim.smem_reserved_per_block);
    assert_eq!(a["max_blocks_per_multiprocessor"], lim.max_blocks_per_sm);
    let fields: Vec<&str> = doc["case_fields"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(fields, ["regs", "static_smem", "local_bytes", "block", "dynamic_smem", "blocks"]);
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() > 2000);
    let mut bad = Vec::new();
    let mut limiters = std::collections::BTreeSet::new();
    for c in cases {
        let v: Vec<u64> = c.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let (regs, stat, block, dynamic, blocks) = (v[0] as u32, v[1], v[3] as u32, v[4], v[5] as u32);
        let o = occupancy(atom("sm_90"), &nv(block, regs, stat + dynamic)).unwrap();
        limiters.insert(format!("{:?}", o.limiter));
        if o.groups != blocks {
            bad.push(format!("regs {regs} static {stat} dyn {dynamic} block {block}: driver {blocks}, katlas {}", o.groups));
        }
    }
    assert!(bad.is_empty(), "{} of {} cases disagree with the driver:\n{}", bad.len(), cases.len(), bad.join("\n"));
    // The sweep exercises every NVIDIA limiter.
    assert_eq!(limiters.len(), 4, "{limiters:?}");
}

#[test]
fn limiter_names_are_the_serialised_names() {
    use katlas_arch::Limiter::*;
    for l in [Vgpr, Agpr, Sgpr, Lds, Workgroup, Registers, SharedMemory, Threads, Blocks, WaveSlots] {
        assert_eq!(serde_json::to_value(l).unwrap(), serde_json::json!(l.name()));
    }
}
