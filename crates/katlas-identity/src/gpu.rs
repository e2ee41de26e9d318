//! GPU inventory mapped to arch atoms.
//!
//! Sources, first that answers wins per vendor: `nvidia-smi` for NVIDIA;
//! `rocminfo`, then `amdgpu-arch`, then the KFD topology in sysfs for AMD.
//! `KATLAS_ARCH` overrides the atom of every device (a machine where the
//! probe is wrong, or a container without sysfs).

use crate::tool_output;
use katlas_model::Device;

pub fn devices() -> Vec<Device> {
    let mut out = nvidia_smi_output().map(|t| parse_nvidia_smi(&t)).unwrap_or_default();
    let mut amd = tool_output("rocminfo", &[]).map(|t| parse_rocminfo(&t)).unwrap_or_default();
    if amd.is_empty() {
        amd = tool_output("amdgpu-arch", &[]).map(|t| parse_amdgpu_arch(&t)).unwrap_or_default();
    }
    if amd.is_empty() {
        amd = kfd_devices(std::path::Path::new("/sys/class/kfd/kfd/topology/nodes"));
    }
    out.extend(amd);
    for (i, d) in out.iter_mut().enumerate() {
        d.index = i as u32;
    }
    apply_override(&mut out, std::env::var("KATLAS_ARCH").ok().as_deref());
    out
}

pub fn apply_override(devices: &mut Vec<Device>, atom: Option<&str>) {
    let Some(atom) = atom.map(str::trim).filter(|a| !a.is_empty()) else { return };
    if devices.is_empty() {
        devices.push(Device { index: 0, vendor: if atom.starts_with("gfx") { "amd" } else { "nvidia" }.into(), ..Default::default() });
    }
    for d in devices {
        d.arch = Some(atom.to_string());
        d.arch_source = Some("override (KATLAS_ARCH)".into());
    }
}

fn nvidia_smi_output() -> Option<String> {
    tool_output("nvidia-smi", &["--query-gpu=index,name,compute_cap,driver_version,memory.total,uuid", "--format=csv,noheader,nounits"])
}

/// `compute_cap` "9.0" → `sm_90`.
pub fn sm_atom(compute_cap: &str) -> Option<String> {
    let (maj, min) = compute_cap.trim().split_once('.')?;
    let maj: u32 = maj.parse().ok()?;
    let min: u32 = min.parse().ok()?;
    Some(format!("sm_{maj}{min}"))
}

pub fn parse_nvidia_smi(text: &str) -> Vec<Device> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 6 {
                return None;
            }
            let arch = sm_atom(f[2]);
            Some(Device {
                index: f[0].parse().unwrap_or(0),
                vendor: "nvidia".into(),
                product: Some(f[1].to_string()),
                arch_source: arch.as_ref().map(|_| "nvidia-smi".to_string()),
                arch,
                driver: Some(f[3].to_string()),
                memory_mib: f[4].parse().ok(),
                uuid: Some(f[5].to_string()),
            })
        })
        .collect()
}

pub fn parse_rocminfo(text: &str) -> Vec<Device> {
    let mut out = Vec::new();
    // Agents are separated by lines of asterisks; each has key: value lines.
    for block in text.split("*******") {
        let get = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        if get("Device Type").as_deref() != Some("GPU") {
            continue;
        }
        let Some(name) = get("Name").filter(|n| n.starts_with("gfx")) else { continue };
        out.push(Device {
            index: out.len() as u32,
            vendor: "amd".into(),
            product: get("Marketing Name").filter(|s| !s.is_empty()),
            arch: Some(name),
            arch_source: Some("rocminfo".into()),
            uuid: get("Uuid").filter(|u| u.starts_with("GPU-")),
            ..Default::default()
        });
    }
    out
}

pub fn parse_amdgpu_arch(text: &str) -> Vec<Device> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("gfx"))
        .enumerate()
        .map(|(i, l)| Device {
            index: i as u32,
            vendor: "amd".into(),
            arch: Some(l.to_string()),
            arch_source: Some("amdgpu-arch".into()),
            ..Default::default()
        })
        .collect()
}

/// KFD's `gfx_target_version` is major*10000 + minor*100 + stepping, and the
/// gfx name writes minor and stepping in hex (90010 → gfx90a).
pub fn gfx_from_target_version(v: u64) -> Option<String> {
    if v == 0 {
        return None;
    }
    let (major, minor, step) = (v / 10000, (v / 100) % 100, v % 100);
    (minor < 16 && step < 16).then(|| format!("gfx{major}{minor:x}{step:x}"))
}

pub fn kfd_devices(nodes: &std::path::Path) -> Vec<Device> {
    let Ok(rd) = std::fs::read_dir(nodes) else { return Vec::new() };
    let mut nodes: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    nodes.sort();
    let mut out = Vec::new();
    for n in nodes {
        let Ok(props) = std::fs::read_to_string(n.join("properties")) else { continue };
        let tv = props.lines().find_map(|l| l.strip_prefix("gfx_target_version ")).and_then(|v| v.trim().parse().ok());
        if let Some(atom) = tv.and_then(gfx_from_target_version) {
            out.push(Device {
                index: out.len() as u32,
                vendor: "amd".into(),
                arch: Some(atom),
                arch_source: Some("kfd-topology".into()),
                ..Default::default()
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_rows() {
        let d = parse_nvidia_smi("0, NVIDIA H200, 9.0, 580.95.05, 143771, GPU-abc\n1, NVIDIA A100-SXM4-80GB, 8.0, 580.95.05, 81920, GPU-def\n");
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].arch.as_deref(), Some("sm_90"));
        assert_eq!(d[0].product.as_deref(), Some("NVIDIA H200"));
        assert_eq!(d[0].memory_mib, Some(143771));
        assert_eq!(d[1].arch.as_deref(), Some("sm_80"));
        assert_eq!(sm_atom("12.0").as_deref(), Some("sm_120"));
    }

    #[test]
    fn rocminfo_agents() {
        let text = "*******\nAgent 1\n*******\n  Name:                    AMD Ryzen 9 7950X\n  Marketing Name:          AMD Ryzen 9\n  Device Type:             CPU\n*******\nAgent 2\n*******\n  Name:                    gfx1100\n  Uuid:                    GPU-7fc8\n  Marketing Name:          Radeon RX 7900 XTX\n  Device Type:             GPU\n";
        let d = parse_rocminfo(text);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].arch.as_deref(), Some("gfx1100"));
        assert_eq!(d[0].product.as_deref(), Some("Radeon RX 7900 XTX"));
    }

    #[test]
    fn kfd_versions_and_topology() {
        assert_eq!(gfx_from_target_version(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_from_target_version(110000).as_deref(), Some("gfx1100"));
        assert_eq!(gfx_from_target_version(120001).as_deref(), Some("gfx1201"));
        assert_eq!(gfx_from_target_version(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_from_target_version(0), None);
        let dir = tempfile::tempdir().unwrap();
        for (n, v) in [("0", 0), ("1", 110501)] {
            std::fs::create_dir_all(dir.path().join(n)).unwrap();
            std::fs::write(dir.path().join(n).join("properties"), format!("cpu_cores_count 16\ngfx_target_version {v}\n")).unwrap();
        }
        let d = kfd_devices(dir.path());
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].arch.as_deref(), Some("gfx1151"));
    }

    #[test]
    fn override_applies() {
        let mut d = parse_amdgpu_arch("gfx1100\n");
        apply_override(&mut d, Some("gfx1101"));
        assert_eq!(d[0].arch.as_deref(), Some("gfx1101"));
        let mut none = Vec::new();
        apply_override(&mut none, Some("sm_90"));
        assert_eq!(none[0].vendor, "nvidia");
    }
}
