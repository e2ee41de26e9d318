//! Occupancy per kernel, computed by `katlas-arch` from its architecture table (data, not
//! code); this module only maps manifest resources onto its inputs.

use crate::manifest::{CodeObject, Kernel, Shared, Vendor};
use katlas_arch::{occupancy, ArchDb, KernelResources, Occupancy};

fn resources(vendor: Vendor, k: &Kernel) -> KernelResources {
    let r = &k.resources;
    // a Triton launch's block is known; otherwise the kernel's own bounds
    let wg = k.triton.as_ref().map(|t| t.block_size).or(r.reqd_workgroup_size.map(|t| t.iter().product::<u32>())).or(r.max_workgroup_size);
    let dynamic = k.triton.as_ref().map(|t| t.shared_dynamic_bytes).unwrap_or(0);
    let wave = k.triton.as_ref().map(|t| t.warp_size);
    match vendor {
        Vendor::Amd => KernelResources {
            vgprs: r.vgpr,
            agprs: r.agpr,
            sgprs: r.sgpr,
            lds_bytes: r.lds_bytes.unwrap_or(0) + dynamic,
            scratch_bytes_per_lane: r.scratch_bytes.unwrap_or(0),
            wave_size: wave.or(r.wave_size),
            workgroup_size: wg,
            ..Default::default()
        },
        Vendor::Nvidia => {
            let nv = k.nvidia.as_ref();
            // katlas-arch adds the runtime's per-block reservation itself
            let shared = nv.map(|n| n.shared_static_bytes.saturating_sub(n.shared_reserved_bytes)).unwrap_or(0) + dynamic;
            KernelResources { regs_per_thread: r.vgpr, shared_bytes: shared, wave_size: Some(32), workgroup_size: wg, ..Default::default() }
        }
    }
}

pub fn attach(obj: &mut CodeObject) {
    if obj.format == "ptx" {
        return;
    }
    let db = ArchDb::builtin();
    let Some(atom) = db.atom(&obj.arch) else {
        for k in &mut obj.kernels {
            k.occupancy = None;
            k.occupancy_note = Some(format!("architecture {} is not in the katlas-arch table", obj.arch));
        }
        return;
    };
    // kernels of one object often have the same resources: one result, shared
    let mut seen: Vec<(KernelResources, Result<Shared<Occupancy>, String>)> = Vec::new();
    for k in &mut obj.kernels {
        let r = resources(obj.vendor, k);
        let res = match seen.iter().find(|(s, _)| *s == r) {
            Some((_, res)) => res.clone(),
            None => {
                let res = occupancy(atom, &r).map_err(|e| e.to_string()).map(Shared::new);
                seen.push((r, res.clone()));
                res
            }
        };
        match res {
            Ok(o) => {
                k.occupancy = Some(o);
                k.occupancy_note = None;
            }
            Err(e) => {
                k.occupancy = None;
                k.occupancy_note = Some(e);
            }
        }
    }
}
