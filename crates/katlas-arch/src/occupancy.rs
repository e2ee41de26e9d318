//! Theoretical occupancy from a kernel's resources.
//!
//! AMD follows LLVM's AMDGPU occupancy model (AMDGPUBaseInfo
//! `getNumWavesPerEUWithNumVGPRs`, `getOccupancyWithNumSGPRs`, `getMaxWorkGroupsPerCU`;
//! AMDGPUSubtarget `getOccupancyWithLocalMemSize`), so results agree with the compiler's
//! `Occupancy` remark; limits that LLVM leaves out (LDS granule) are applied and noted.
//! NVIDIA follows the CUDA occupancy calculator (`cuda_occupancy.h`): registers
//! allocated per warp in units of 256 and split across the SM's sub-partitions, shared
//! memory with the runtime's per-block reservation, warp and block slots.

use crate::error::ArchError;
use crate::model::{AgprMode, Atom, Vendor};
use serde::{Deserialize, Serialize};

/// Resources of one compiled kernel. AMD fields follow the code-object metadata:
/// `vgprs` is `.vgpr_count`, which LLVM already reports as the total register use
/// (on gfx90a+ `alignTo(arch, 4) + agprs`, on gfx908 `max(arch, agprs)`; see
/// [`total_vgprs`] to build it from separate counts), `agprs` is `.agpr_count`,
/// `sgprs` is `.sgpr_count` (includes VCC, flat scratch and XNACK SGPRs).
/// Construct with `..Default::default()` so new fields do not break callers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelResources {
    /// AMD: `.vgpr_count` (total, AGPRs included as LLVM counts them).
    pub vgprs: Option<u32>,
    /// AMD: `.agpr_count`.
    pub agprs: Option<u32>,
    /// AMD: `.sgpr_count`.
    pub sgprs: Option<u32>,
    /// AMD: `.group_segment_fixed_size` plus dynamic LDS, bytes per workgroup.
    pub lds_bytes: u64,
    /// AMD: `.private_segment_fixed_size`, bytes per lane.
    pub scratch_bytes_per_lane: u64,
    /// Wave (warp) size; None = the atom's default.
    pub wave_size: Option<u32>,
    /// Threads per workgroup/block; None = unknown, 256 is assumed and said so.
    /// Pass `.max_flat_workgroup_size` or the launch's block size when known.
    pub workgroup_size: Option<u32>,
    /// NVIDIA: registers per thread (`EIATTR_REGCOUNT`).
    pub regs_per_thread: Option<u32>,
    /// NVIDIA: static + dynamic shared memory per block, bytes (without the runtime's
    /// reservation, which is added here).
    pub shared_bytes: u64,
}

/// A kernel's resources as its code object states them (the `katlas.isa.v1` manifest's
/// fields), before the vendor-specific reading. [`KernelResources::from_object`] is the one
/// mapping from these to occupancy inputs: katlas-isa's per-kernel occupancy and the fit
/// view both use it, so the two can never disagree on what a kernel holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectResources {
    /// Whose code object it is (decides which fields occupancy reads).
    pub vendor: Vendor,
    /// AMD `.vgpr_count`; NVIDIA registers per thread.
    pub registers: Option<u32>,
    /// AMD `.agpr_count`.
    pub agprs: Option<u32>,
    /// AMD `.sgpr_count`.
    pub sgprs: Option<u32>,
    /// Static LDS / shared memory as the object stores it (NVIDIA sm_90+: the size of
    /// `.nv.shared.<fn>`, which already holds the toolchain's 1 KiB reserve).
    pub static_shared_bytes: u64,
    /// The part of `static_shared_bytes` the toolchain reserved for the runtime (NVIDIA
    /// sm_90+). Occupancy adds the runtime's per-block reservation itself, so it is taken
    /// out here rather than counted twice.
    pub reserved_in_static: u64,
    /// Dynamic shared memory / LDS of the launch (Triton's `shared`), bytes per block.
    pub dynamic_shared_bytes: u64,
    /// AMD private segment bytes per lane (NVIDIA's stack does not bound occupancy).
    pub scratch_bytes_per_lane: u64,
    /// Wave/warp size; None = the atom's default (NVIDIA: 32).
    pub wave_size: Option<u32>,
    /// Threads per workgroup/block of the launch, or the kernel's own bound.
    pub workgroup_size: Option<u32>,
}

impl KernelResources {
    /// Occupancy inputs from a code object's facts (see [`ObjectResources`]).
    pub fn from_object(o: &ObjectResources) -> KernelResources {
        match o.vendor {
            Vendor::Amd => KernelResources {
                vgprs: o.registers,
                agprs: o.agprs,
                sgprs: o.sgprs,
                lds_bytes: o.static_shared_bytes + o.dynamic_shared_bytes,
                scratch_bytes_per_lane: o.scratch_bytes_per_lane,
                wave_size: o.wave_size,
                workgroup_size: o.workgroup_size,
                ..Default::default()
            },
            Vendor::Nvidia => KernelResources {
                regs_per_thread: o.registers,
                shared_bytes: o.static_shared_bytes.saturating_sub(o.reserved_in_static) + o.dynamic_shared_bytes,
                scratch_bytes_per_lane: o.scratch_bytes_per_lane,
                wave_size: Some(o.wave_size.unwrap_or(32)),
                workgroup_size: o.workgroup_size,
                ..Default::default()
            },
        }
    }
}

/// Settings of the launch that change occupancy but are not kernel resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OccupancyOptions {
    /// AMD gfx10+: true when compiled with `-mcumode` (CU mode); None = the atom's default
    /// (HIP builds in WGP mode).
    pub cu_mode: Option<bool>,
    /// NVIDIA: shared-memory carveout in bytes the driver configured; None = the largest
    /// carveout (the most the SM can give, which is what the driver picks when shared
    /// memory would otherwise limit occupancy).
    pub smem_carveout_bytes: Option<u64>,
}

/// The resource that bounds occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    /// AMD vector registers (unified VGPR+AGPR file on gfx90a+).
    Vgpr,
    /// AMD accumulation registers (separate AGPR file of gfx908).
    Agpr,
    /// AMD scalar registers (gfx9 only).
    Sgpr,
    /// AMD LDS per CU/WGP.
    Lds,
    /// AMD workgroup slots (barriers) per CU/WGP.
    Workgroup,
    /// NVIDIA registers per SM.
    Registers,
    /// NVIDIA shared memory per SM.
    SharedMemory,
    /// NVIDIA warp (thread) slots per SM.
    Threads,
    /// NVIDIA resident blocks per SM.
    Blocks,
    /// AMD wave slots per SIMD (the hardware maximum; nothing else limits).
    WaveSlots,
}

impl Limiter {
    /// The name as serialised (`vgpr`, `shared_memory`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Vgpr => "vgpr",
            Limiter::Agpr => "agpr",
            Limiter::Sgpr => "sgpr",
            Limiter::Lds => "lds",
            Limiter::Workgroup => "workgroup",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared_memory",
            Limiter::Threads => "threads",
            Limiter::Blocks => "blocks",
            Limiter::WaveSlots => "wave_slots",
        }
    }
}

/// Theoretical occupancy of one kernel on one atom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    /// `"waves/SIMD"` (AMD) or `"warps/SM"` (NVIDIA).
    pub unit: String,
    /// Resident waves per SIMD or warps per SM.
    pub achieved: u32,
    /// Hardware maximum in the same unit.
    pub max: u32,
    /// achieved / max.
    pub fraction: f64,
    /// The bounding resource.
    pub limiter: Limiter,
    /// Each resource's own bound, in `unit`.
    pub per_limit: Vec<(Limiter, u32)>,
    /// Resident workgroups per CU/WGP (AMD) or blocks per SM (NVIDIA).
    pub groups: u32,
    /// `"workgroups/CU"`, `"workgroups/WGP"` or `"blocks/SM"`.
    pub group_unit: String,
    /// Each resource's own bound in `group_unit`.
    pub per_limit_groups: Vec<(Limiter, u32)>,
    /// Assumptions made and facts worth knowing (unknown inputs, opt-in needed, ...).
    pub notes: Vec<String>,
}

/// Occupancy with default launch settings (see [`OccupancyOptions`]).
pub fn occupancy(atom: &Atom, r: &KernelResources) -> Result<Occupancy, ArchError> {
    occupancy_with(atom, r, &OccupancyOptions::default())
}

/// Occupancy with explicit launch settings.
pub fn occupancy_with(atom: &Atom, r: &KernelResources, o: &OccupancyOptions) -> Result<Occupancy, ArchError> {
    match atom.vendor {
        Vendor::Amd => amd(atom, r, o),
        Vendor::Nvidia => nvidia(atom, r, o),
    }
}

/// `.vgpr_count` as LLVM computes it from architectural VGPRs and AGPRs
/// (getTotalNumVGPRs): unified files align the AGPR block after the arch VGPRs.
pub fn total_vgprs(atom: &Atom, arch_vgprs: u32, agprs: u32) -> u32 {
    match atom.amd.as_ref().map(|a| (a.agpr_mode, a.agpr_align)) {
        Some((AgprMode::Unified, align)) if agprs > 0 => arch_vgprs.div_ceil(align.max(1)) * align.max(1) + agprs,
        _ => arch_vgprs.max(agprs),
    }
}

fn err(atom: &Atom, msg: impl Into<String>) -> ArchError {
    ArchError::Occupancy { atom: atom.name.clone(), message: msg.into() }
}

fn pick(per: &[(Limiter, u32)], order: &[Limiter]) -> (Limiter, u32) {
    let min = per.iter().map(|p| p.1).min().unwrap_or(0);
    for l in order {
        if let Some(p) = per.iter().find(|p| p.0 == *l && p.1 == min) {
            return *p;
        }
    }
    per[0]
}

fn amd(atom: &Atom, r: &KernelResources, o: &OccupancyOptions) -> Result<Occupancy, ArchError> {
    let a = atom.amd.as_ref().ok_or_else(|| err(atom, "no AMD limits in the data"))?;
    let mut notes = Vec::new();
    let wave = r.wave_size.unwrap_or(atom.default_wave_size);
    if r.wave_size.is_none() {
        notes.push(format!("wave size unknown: assumed the default wave{wave}"));
    }
    let vf = a
        .vgpr(wave)
        .filter(|_| atom.wave_sizes.contains(&wave))
        .ok_or_else(|| err(atom, format!("wave size {wave} not supported (supported: {:?})", atom.wave_sizes)))?;
    let wgp = a.cus_per_wgp > 1 && o.cu_mode.map(|c| !c).unwrap_or(a.wgp_mode_default);
    let (eus, lds_total, max_groups, group_unit) = if wgp {
        (a.simds_per_cu * a.cus_per_wgp, a.lds_bytes_per_wgp, a.max_workgroups_per_wgp, "workgroups/WGP")
    } else {
        (a.simds_per_cu, a.lds_bytes_per_cu, a.max_workgroups_per_cu, "workgroups/CU")
    };
    if a.cus_per_wgp > 1 {
        notes.push(if wgp { "WGP mode (HIP default on gfx10+): 4 SIMDs share LDS and workgroup slots".into() } else { "CU mode".to_string() });
    }
    let wg = match r.workgroup_size {
        Some(0) => return Err(err(atom, "workgroup size 0")),
        Some(w) => w,
        None => {
            notes.push("workgroup size unknown: assumed 256 threads".into());
            256
        }
    };
    if wg > a.max_workgroup_size {
        return Err(err(atom, format!("workgroup of {wg} threads exceeds the maximum {}", a.max_workgroup_size)));
    }
    let maxw = a.max_waves_per_simd;
    let n = wg.div_ceil(wave);
    let mut per: Vec<(Limiter, u32)> = Vec::new();

    // Registers: waves per SIMD from the allocation-rounded count (LLVM
    // getNumWavesPerEUWithNumVGPRs: counts below one granule do not limit).
    let by_regs = |count: u32| -> u32 {
        if count < vf.granule {
            return maxw;
        }
        let rounded = count.div_ceil(vf.granule) * vf.granule;
        (vf.total / rounded).clamp(1, maxw)
    };
    let agprs = r.agprs.unwrap_or(0);
    match (r.vgprs, a.agpr_mode) {
        (None, _) => notes.push("VGPR count unknown: registers not judged".into()),
        (Some(v), mode) => {
            let (arch_cap, acc_cap) = match mode {
                AgprMode::Unified => (vf.max_per_wave + a.agprs_per_wave, a.agprs_per_wave),
                _ => (vf.max_per_wave, a.agprs_per_wave),
            };
            if v > arch_cap {
                return Err(err(atom, format!("{v} VGPRs exceed the {arch_cap} a wave{wave} can address")));
            }
            if agprs > acc_cap {
                return Err(err(atom, format!("{agprs} AGPRs exceed the {acc_cap} a wave can address")));
            }
            match mode {
                AgprMode::None => {
                    if agprs > 0 {
                        return Err(err(atom, "AGPRs given but this atom has none"));
                    }
                    per.push((Limiter::Vgpr, by_regs(v)));
                }
                AgprMode::Separate => {
                    // `.vgpr_count` is max(arch, acc): the larger file bounds occupancy.
                    if agprs > v {
                        return Err(err(atom, format!(".vgpr_count {v} is below .agpr_count {agprs}; pass the metadata total")));
                    }
                    if agprs > 0 {
                        per.push((Limiter::Agpr, by_regs(agprs)));
                    }
                    if v > agprs {
                        per.push((Limiter::Vgpr, by_regs(v)));
                    }
                }
                AgprMode::Unified => {
                    if agprs > v {
                        return Err(err(atom, format!(".vgpr_count {v} is below .agpr_count {agprs}; pass the metadata total (arch + AGPRs)")));
                    }
                    if agprs > 0 {
                        notes.push(format!("unified register file: {v} registers of which {agprs} AGPRs"));
                    }
                    per.push((Limiter::Vgpr, by_regs(v)));
                }
            }
        }
    }

    // SGPRs limit only where the data gives steps (gfx9).
    match r.sgprs {
        Some(s) if !a.sgpr_waves.is_empty() => {
            if s > a.sgprs_per_wave {
                return Err(err(atom, format!("{s} SGPRs exceed the {} a wave can address", a.sgprs_per_wave)));
            }
            let w = a.sgpr_waves.iter().find(|st| s <= st[0]).map(|st| st[1]).unwrap_or(a.sgpr_waves_floor);
            per.push((Limiter::Sgpr, w.min(maxw)));
        }
        None if !a.sgpr_waves.is_empty() => notes.push("SGPR count unknown: SGPRs not judged".into()),
        _ => {}
    }

    // Workgroup-granular limits: LDS and barrier slots (LLVM getMaxWorkGroupsPerCU).
    let slots = maxw * eus;
    let barrier_groups = if n == 1 { slots } else { (slots / n).min(max_groups) };
    let to_waves = |groups: u32| -> u32 { (groups * n).div_ceil(eus).min(maxw) };
    let mut per_groups: Vec<(Limiter, u32)> = Vec::new();
    if r.lds_bytes > 0 {
        if r.lds_bytes > a.lds_max_per_workgroup {
            return Err(err(atom, format!("{} bytes of LDS exceed the {} a workgroup may allocate", r.lds_bytes, a.lds_max_per_workgroup)));
        }
        let lds = r.lds_bytes.div_ceil(a.lds_granule) * a.lds_granule;
        if lds != r.lds_bytes {
            notes.push(format!("LDS {} B allocated as {lds} B ({} B granule)", r.lds_bytes, a.lds_granule));
        }
        let g = (lds_total / lds).min(u32::MAX as u64) as u32;
        per_groups.push((Limiter::Lds, g));
        per.push((Limiter::Lds, to_waves(g)));
    }
    per_groups.push((Limiter::Workgroup, barrier_groups));
    per.push((Limiter::Workgroup, to_waves(barrier_groups)));
    per.push((Limiter::WaveSlots, maxw));

    let order = [Limiter::Vgpr, Limiter::Agpr, Limiter::Sgpr, Limiter::Lds, Limiter::Workgroup];
    let (mut limiter, achieved) = pick(&per, &order);
    if achieved >= maxw {
        limiter = Limiter::WaveSlots;
    }
    // Whole workgroups must be resident: the per-wave bound caps the groups too.
    let per_wave_bound =
        per.iter().filter(|p| matches!(p.0, Limiter::Vgpr | Limiter::Agpr | Limiter::Sgpr | Limiter::WaveSlots)).map(|p| p.1).min().unwrap_or(maxw);
    for (l, w) in per.iter().filter(|p| matches!(p.0, Limiter::Vgpr | Limiter::Agpr | Limiter::Sgpr)) {
        per_groups.push((*l, w * eus / n));
    }
    let groups = per_groups.iter().map(|p| p.1).min().unwrap_or(0).min(per_wave_bound * eus / n);
    let achieved = if groups == 0 {
        notes.push(format!("a workgroup of {n} waves does not fit: no workgroup can be resident"));
        0
    } else {
        achieved
    };
    if groups > 0 && (groups * n) % eus != 0 && achieved == to_waves(groups) {
        notes.push(format!("{groups} workgroups of {n} waves over {eus} SIMDs average {:.2} waves/SIMD (LLVM rounds up)", (groups * n) as f64 / eus as f64));
    }
    if r.scratch_bytes_per_lane > 0 {
        notes.push(format!(
            "scratch {} B/lane ({} B/wave): the runtime's scratch pool can cap resident waves (not modelled)",
            r.scratch_bytes_per_lane,
            r.scratch_bytes_per_lane * wave as u64
        ));
    }
    Ok(Occupancy {
        unit: "waves/SIMD".into(),
        achieved,
        max: maxw,
        fraction: achieved as f64 / maxw as f64,
        limiter,
        per_limit: per,
        groups,
        group_unit: group_unit.into(),
        per_limit_groups: per_groups,
        notes,
    })
}

fn nvidia(atom: &Atom, r: &KernelResources, o: &OccupancyOptions) -> Result<Occupancy, ArchError> {
    let nv = atom.nvidia.as_ref().ok_or_else(|| err(atom, "no NVIDIA limits in the data"))?;
    let mut notes = Vec::new();
    if let Some(w) = r.wave_size {
        if w != 32 {
            return Err(err(atom, format!("warp size is 32, got {w}")));
        }
    }
    let threads = match r.workgroup_size {
        Some(0) => return Err(err(atom, "block size 0")),
        Some(t) => t,
        None => {
            notes.push("block size unknown: assumed 256 threads".into());
            256
        }
    };
    if threads > nv.max_threads_per_block {
        return Err(err(atom, format!("block of {threads} threads exceeds the maximum {}", nv.max_threads_per_block)));
    }
    let wpb = threads.div_ceil(32);
    let mut per_groups: Vec<(Limiter, u32)> = Vec::new();

    match r.regs_per_thread {
        None => notes.push("registers per thread unknown: registers not judged".into()),
        Some(regs) if regs > nv.max_regs_per_thread => {
            return Err(err(atom, format!("{regs} registers per thread exceed the maximum {}", nv.max_regs_per_thread)))
        }
        Some(0) => {}
        Some(regs) => {
            let per_warp = (regs * 32).div_ceil(nv.reg_alloc_unit) * nv.reg_alloc_unit;
            // The hardware checks a block against the per-block limit as if its warps
            // were spread over all sub-partitions (cuda_occupancy.h).
            let assumed = per_warp * wpb.div_ceil(nv.sub_partitions) * nv.sub_partitions;
            let blocks = if assumed > nv.max_regs_per_block || per_warp * wpb > nv.max_regs_per_block {
                notes.push(format!("{regs} registers x {threads} threads exceed the {} registers a block may use: launch fails", nv.max_regs_per_block));
                0
            } else {
                let warps_per_part = (nv.regs_per_sm / nv.sub_partitions) / per_warp;
                warps_per_part * nv.sub_partitions / wpb
            };
            per_groups.push((Limiter::Registers, blocks));
        }
    }

    let carveout = o.smem_carveout_bytes.unwrap_or(nv.smem_per_sm);
    if r.shared_bytes > nv.smem_per_block_optin {
        notes.push(format!("{} B shared memory exceed the {} B a block may use: launch fails", r.shared_bytes, nv.smem_per_block_optin));
        per_groups.push((Limiter::SharedMemory, 0));
    } else {
        if r.shared_bytes > nv.smem_per_block_default {
            notes.push(format!(
                "{} B shared memory need the opt-in above {} B (cudaFuncAttributeMaxDynamicSharedMemorySize)",
                r.shared_bytes, nv.smem_per_block_default
            ));
        }
        let per_block = (r.shared_bytes + nv.smem_reserved_per_block).div_ceil(nv.smem_granule) * nv.smem_granule;
        if nv.smem_reserved_per_block > 0 {
            notes.push(format!(
                "shared memory per block {} B = {} B + {} B runtime reservation, {} B granule",
                per_block, r.shared_bytes, nv.smem_reserved_per_block, nv.smem_granule
            ));
        }
        let blocks = carveout.checked_div(per_block).map_or(u32::MAX, |b| b.min(u32::MAX as u64) as u32);
        per_groups.push((Limiter::SharedMemory, blocks));
    }
    if o.smem_carveout_bytes.is_none() {
        notes.push(format!("shared memory judged against the largest carveout ({} B)", nv.smem_per_sm));
    }
    per_groups.push((Limiter::Blocks, nv.max_blocks_per_sm));
    per_groups.push((Limiter::Threads, nv.max_warps_per_sm / wpb));

    let order = [Limiter::Registers, Limiter::SharedMemory, Limiter::Blocks, Limiter::Threads];
    let (mut limiter, blocks) = pick(&per_groups, &order);
    let warps = (blocks * wpb).min(nv.max_warps_per_sm);
    if warps >= nv.max_warps_per_sm {
        limiter = Limiter::Threads;
    }
    let per = per_groups.iter().map(|(l, b)| (*l, b.saturating_mul(wpb).min(nv.max_warps_per_sm))).collect();
    Ok(Occupancy {
        unit: "warps/SM".into(),
        achieved: warps,
        max: nv.max_warps_per_sm,
        fraction: warps as f64 / nv.max_warps_per_sm as f64,
        limiter,
        per_limit: per,
        groups: blocks,
        group_unit: "blocks/SM".into(),
        per_limit_groups: per_groups,
        notes,
    })
}
