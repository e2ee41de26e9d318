//! Occupancy per kernel, computed by `katlas-arch` from its architecture table (data, not
//! code); this module only maps manifest resources onto its inputs.

use crate::manifest::{CodeObject, Kernel, Shared, Vendor};
use katlas_arch::{occupancy, ArchDb, KernelResources, ObjectResources, Occupancy};

fn resources(vendor: Vendor, k: &Kernel) -> KernelResources {
    let r = &k.resources;
    let t = k.triton.as_ref();
    // a Triton launch's block is known; otherwise the kernel's own bounds
    let wg = t.map(|t| t.block_size).or(r.reqd_workgroup_size.map(|t| t.iter().product::<u32>())).or(r.max_workgroup_size);
    KernelResources::from_object(&ObjectResources {
        vendor,
        registers: r.vgpr,
        agprs: r.agpr,
        sgprs: r.sgpr,
        // NVIDIA: the size of `.nv.shared.<fn>`, reserve included (the vendor block holds it)
        static_shared_bytes: match vendor {
            Vendor::Amd => r.lds_bytes.unwrap_or(0),
            Vendor::Nvidia => k.nvidia.as_ref().map(|n| n.shared_static_bytes).or(r.lds_bytes).unwrap_or(0),
        },
        reserved_in_static: k.nvidia.as_ref().map(|n| n.shared_reserved_bytes).unwrap_or(0),
        dynamic_shared_bytes: t.map(|t| t.shared_dynamic_bytes).unwrap_or(0),
        scratch_bytes_per_lane: if vendor == Vendor::Amd { r.scratch_bytes.unwrap_or(0) } else { 0 },
        wave_size: t.map(|t| t.warp_size).or(r.wave_size),
        workgroup_size: wg,
    })
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
