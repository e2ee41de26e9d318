//! Kernel descriptors (`<kernel>.kd`, 64 bytes, layout in LLVM's AMDGPUUsage "Kernel
//! Descriptor"), decoded and compared with the metadata as a cross-check.

use crate::blob::{sub, u16le, u32le};
use crate::elf::{symbols, Elf};
use crate::manifest::{Kernel, KernelDescriptor};
use object::read::elf::SectionHeader;

const W: &str = "kernel descriptor";

fn gfx_major(arch: &str) -> u32 {
    let digits: String = arch.trim_start_matches("gfx").chars().take_while(|c| c.is_ascii_digit()).collect();
    // gfx906 -> 9, gfx1030 -> 10, gfx1201 -> 12; generic targets gfx9-generic -> 9
    match digits.len() {
        0 => 0,
        // a bare major (gfx9, forged or generic): a 1-digit slice of 2 would panic
        1 | 2 => digits.parse().unwrap_or(0),
        3 => digits[..1].parse().unwrap_or(0),
        _ => digits[..2].parse().unwrap_or(0),
    }
}

/// True for targets with the unified VGPR/AGPR file (gfx90a, gfx942, gfx950).
pub fn unified_agprs(arch: &str) -> bool {
    matches!(arch, "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic")
}

/// VGPR encoding granule of `compute_pgm_rsrc1.GRANULATED_WORKITEM_VGPR_COUNT`.
pub fn vgpr_encoding_granule(arch: &str, wave32: bool) -> u32 {
    if unified_agprs(arch) {
        8
    } else if gfx_major(arch) >= 10 {
        if wave32 {
            8
        } else {
            4
        }
    } else {
        4
    }
}

pub fn decode(d: &[u8], arch: &str) -> crate::error::Result<KernelDescriptor> {
    let kd = sub(d, 0, 64, W)?;
    let rsrc3 = u32le(kd, 44, W)?;
    let rsrc1 = u32le(kd, 48, W)?;
    let rsrc2 = u32le(kd, 52, W)?;
    let props = u16le(kd, 56, W)?;
    let wave32 = props & (1 << 10) != 0;
    let gv = rsrc1 & 0x3f;
    let gs = (rsrc1 >> 6) & 0xf;
    let granule = vgpr_encoding_granule(arch, wave32);
    Ok(KernelDescriptor {
        group_segment_fixed_size: u32le(kd, 0, W)?,
        private_segment_fixed_size: u32le(kd, 4, W)?,
        kernarg_size: u32le(kd, 8, W)?,
        compute_pgm_rsrc1: rsrc1,
        compute_pgm_rsrc2: rsrc2,
        compute_pgm_rsrc3: rsrc3,
        kernel_code_properties: props,
        granulated_workitem_vgpr_count: gv,
        granulated_wavefront_sgpr_count: gs,
        vgpr_alloc: (gv + 1) * granule,
        // gfx10+ no longer encode SGPRs (field reserved, always allocated in full)
        sgpr_alloc: (gfx_major(arch) < 10).then_some((gs + 1) * 8),
        enable_private_segment: rsrc2 & 1 != 0,
        wave32,
        uses_dynamic_stack: props & (1 << 11) != 0,
        accum_offset: unified_agprs(arch).then_some(((rsrc3 & 0x3f) + 1) * 4),
    })
}

/// Finds each kernel's `.kd` symbol, decodes it and records disagreements with the metadata.
pub fn attach(elf: &Elf<'_>, arch: &str, kernels: &mut [Kernel], warnings: &mut Vec<String>) {
    let syms = match symbols(elf, W) {
        Ok(s) => s,
        Err(e) => {
            warnings.push(format!("no symbol table for kernel descriptors: {e}"));
            return;
        }
    };
    let mut by_name = std::collections::HashMap::with_capacity(syms.len());
    for s in &syms {
        if s.name.ends_with(".kd") {
            by_name.insert(s.name, s);
        }
    }
    for k in kernels.iter_mut() {
        let kd_name = if k.symbol.ends_with(".kd") { k.symbol.clone() } else { format!("{}.kd", k.name) };
        let Some(sym) = by_name.get(kd_name.as_str()) else {
            warnings.push(format!("{}: descriptor symbol {kd_name} not found", k.name));
            continue;
        };
        let Some(sh) = elf.section(sym.shndx as usize) else {
            warnings.push(format!("{}: descriptor symbol in section {} which does not exist", k.name, sym.shndx));
            continue;
        };
        let addr = sh.sh_addr(elf.endian);
        let off = sh.sh_offset(elf.endian);
        let Some(file_off) = sym.value.checked_sub(addr).and_then(|d| d.checked_add(off)) else {
            warnings.push(format!("{}: descriptor address {:#x} outside its section", k.name, sym.value));
            continue;
        };
        match decode(&elf.data[file_off.min(elf.data.len() as u64) as usize..], arch) {
            Ok(kd) => {
                let mm = cross_check(k, &kd, arch);
                if let Some(a) = k.amd.as_mut() {
                    a.descriptor = Some(kd);
                    a.descriptor_mismatches = mm;
                }
            }
            Err(e) => warnings.push(format!("{}: {e}", k.name)),
        }
    }
}

fn cross_check(k: &Kernel, kd: &KernelDescriptor, arch: &str) -> Vec<String> {
    let r = &k.resources;
    let mut out = Vec::new();
    let mut eq = |field: &str, meta: Option<u64>, desc: u64| {
        if let Some(m) = meta {
            if m != desc {
                out.push(format!("{field}: metadata {m}, descriptor {desc}"));
            }
        }
    };
    eq("group_segment_fixed_size", r.lds_bytes, kd.group_segment_fixed_size as u64);
    eq("private_segment_fixed_size", r.scratch_bytes, kd.private_segment_fixed_size as u64);
    // hand-written (Tensile) assembly leaves the descriptor's kernarg size at 0: "not recorded"
    if kd.kernarg_size != 0 {
        eq("kernarg_size", r.kernarg_bytes, kd.kernarg_size as u64);
    }
    if let Some(w) = r.wave_size {
        if (w == 32) != kd.wave32 {
            out.push(format!("wavefront_size: metadata {w}, descriptor wave32={}", kd.wave32));
        }
    }
    if let Some(v) = r.vgpr {
        // unified register file: AGPRs start at accum_offset and count towards the allocation
        let need = match (kd.accum_offset, r.agpr) {
            (Some(off), Some(a)) if a > 0 => off + a,
            _ => v,
        }
        .max(1);
        let g = vgpr_encoding_granule(arch, kd.wave32);
        // unified file without `.agpr_count` (hand-written Tensile metadata): the AGPR block
        // is unknown, so only an allocation below the VGPR count is a disagreement
        let agprs_unknown = kd.accum_offset.is_some() && r.agpr.is_none();
        if kd.vgpr_alloc < need || (!agprs_unknown && kd.vgpr_alloc >= need + g) {
            out.push(format!("vgprs: metadata needs {need}, descriptor allocates {} (granule {g})", kd.vgpr_alloc));
        }
    }
    out
}
