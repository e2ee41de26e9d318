//! NVIDIA cubins (`EM_CUDA`): `.nv.info` attributes, per-function sections, notes and
//! `.nv.compat`. Attribute codes follow the EIATTR numbering that `cuobjdump -elf` prints
//! (checked against it in the tests). Written by hand: no crate reads these sections.

use crate::blob::{u16le, u32le};
use crate::elf::{symbols, Elf, EM_CUDA};
use crate::error::{IsaError, Result};
use crate::manifest::{Kernel, NvKernel, NvObject, Resources, REGCOUNT_FROM_EIATTR, REGCOUNT_FROM_SECTION};
use object::read::elf::SectionHeader;
use std::collections::HashMap;

const W: &str = "cubin";

pub const EIATTR_PARAM_CBANK: u8 = 0x0a;
pub const EIATTR_MAX_THREADS: u8 = 0x05;
pub const EIATTR_REQNTID: u8 = 0x10;
pub const EIATTR_FRAME_SIZE: u8 = 0x11;
pub const EIATTR_MIN_STACK_SIZE: u8 = 0x12;
pub const EIATTR_KPARAM_INFO: u8 = 0x17;
pub const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
pub const EIATTR_MAXREG_COUNT: u8 = 0x1b;
pub const EIATTR_MAX_STACK_SIZE: u8 = 0x23;
pub const EIATTR_REGCOUNT: u8 = 0x2f;
pub const EIATTR_CUDA_API_VERSION: u8 = 0x37;
pub const EIATTR_NUM_BARRIERS: u8 = 0x4c;
pub const EIATTR_RESERVED_SMEM_0_SIZE: u8 = 0x42;
const EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET: u8 = 0x09;
const STO_CUDA_ENTRY: u8 = 0x10;

const EIFMT_NVAL: u8 = 1;
const EIFMT_BVAL: u8 = 2;
const EIFMT_HVAL: u8 = 3;
const EIFMT_SVAL: u8 = 4;

#[derive(Debug, Clone)]
pub struct Attr<'a> {
    pub format: u8,
    pub attr: u8,
    /// The 16-bit value of NVAL/BVAL/HVAL entries.
    pub value: u16,
    /// The payload of SVAL entries.
    pub data: &'a [u8],
}

/// Iterates `.nv.info`-style records: {u8 format, u8 attribute, u16 value-or-size, [data]}.
pub fn attributes(d: &[u8]) -> Result<Vec<Attr<'_>>> {
    let mut out = Vec::new();
    let mut p = 0u64;
    while p + 4 <= d.len() as u64 {
        let format = d[p as usize];
        let attr = d[p as usize + 1];
        let value = u16le(d, p + 2, "nv.info")?;
        match format {
            EIFMT_SVAL => {
                let data = crate::blob::sub(d, p + 4, value as u64, "nv.info")?;
                out.push(Attr { format, attr, value, data });
                p += 4 + value as u64;
            }
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => {
                out.push(Attr { format, attr, value, data: &[] });
                p += 4;
            }
            f => return Err(IsaError::malformed("nv.info", format!("unknown record format {f} at offset {p}"))),
        }
    }
    Ok(out)
}

pub struct NvParsed {
    pub target: String,
    pub arch: String,
    pub info: NvObject,
    pub kernels: Vec<Kernel>,
    pub warnings: Vec<String>,
}

fn cstr_at(d: &[u8], off: usize) -> Option<String> {
    let s = d.get(off..)?;
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Some(String::from_utf8_lossy(&s[..end]).trim().to_string())
}

/// `.note.nv.tkinfo`: six u32 (version, object name, tool name, tool version, branch, options
/// as offsets into the string table that follows).
fn tkinfo(desc: &[u8]) -> Option<(String, String, String)> {
    let strings = desc.get(24..)?;
    let off = |i: u64| u32le(desc, i * 4, W).ok().map(|x| x as usize);
    Some((cstr_at(strings, off(2)?)?, cstr_at(strings, off(3)?)?, cstr_at(strings, off(5)?)?))
}

pub fn parse(data: &[u8]) -> Result<NvParsed> {
    let elf = Elf::parse(data, W)?;
    if elf.machine() != EM_CUDA {
        return Err(IsaError::malformed(W, format!("e_machine {} is not EM_CUDA", elf.machine())));
    }
    let flags = elf.flags();
    let abi = elf.abi_version();
    let (sm, virtual_sm) = match abi {
        // CUDA 13 layout: SM in bits 8..16
        8.. => ((flags >> 8) & 0xff, None),
        // CUDA 12 (ABI 7) and older: SM in the low byte, virtual SM in bits 16..24
        _ => (flags & 0xff, Some((flags >> 16) & 0xff).filter(|v| *v != 0)),
    };
    let mut warnings = Vec::new();
    let mut info = NvObject {
        abi_version: abi,
        e_flags: flags,
        sm,
        virtual_sm,
        accelerator: false,
        family_specific: false,
        toolkit: None,
        tool: None,
        tool_options: None,
        cuda_api_version: None,
        fatbin_compression: None,
    };
    for (name, ty, desc) in elf.notes(W)? {
        if name == b"NVIDIA Corp" && ty == 2000 {
            if let Some((tool, version, opts)) = tkinfo(desc) {
                info.tool = Some(tool);
                info.toolkit = Some(version);
                info.tool_options = Some(opts);
            }
        }
    }
    // section lookup by name
    let mut by_name: HashMap<&[u8], usize> = HashMap::new();
    for (i, sh) in elf.iter_sections() {
        by_name.insert(elf.section_name(sh), i);
    }
    let sec_data = |name: &[u8]| -> Option<&[u8]> {
        let i = *by_name.get(name)?;
        elf.section(i).and_then(|sh| elf.section_data(sh, W).ok())
    };
    let sec_size = |name: &[u8]| -> u64 { by_name.get(name).and_then(|i| elf.section(*i)).map(|sh| sh.sh_size(elf.endian)).unwrap_or(0) };
    if let Some(c) = sec_data(b".nv.compat") {
        match attributes(c) {
            Ok(attrs) => info.accelerator = attrs.iter().any(|a| a.attr == EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET && a.value & 0xff != 0),
            Err(e) => warnings.push(format!(".nv.compat: {e}")),
        }
    }
    let syms = symbols(&elf, W)?;
    // global .nv.info: per-function REGCOUNT, FRAME_SIZE, stack sizes keyed by symbol index
    let mut per_sym: HashMap<u32, NvKernel> = HashMap::new();
    if let Some(g) = sec_data(b".nv.info") {
        match attributes(g) {
            Ok(attrs) => {
                for a in attrs {
                    if a.format != EIFMT_SVAL || a.data.len() < 8 {
                        continue;
                    }
                    let sym = u32le(a.data, 0, W)?;
                    let val = u32le(a.data, 4, W)?;
                    let k = per_sym.entry(sym).or_default();
                    match a.attr {
                        EIATTR_REGCOUNT => {
                            k.regcount = Some(val);
                            k.regcount_source = Some(REGCOUNT_FROM_EIATTR.into());
                        }
                        EIATTR_FRAME_SIZE => k.frame_size = Some(val),
                        EIATTR_MIN_STACK_SIZE => k.min_stack_size = Some(val),
                        EIATTR_MAX_STACK_SIZE => k.max_stack_size = Some(val),
                        _ => {}
                    }
                }
            }
            Err(e) => warnings.push(format!(".nv.info: {e}")),
        }
    }
    let has_reserved = by_name.keys().any(|n| n.starts_with(b".nv.shared.reserved")) || syms.iter().any(|s| s.name.starts_with(".nv.reservedSmem"));
    let mut kernels = Vec::new();
    for s in syms.iter().filter(|s| s.st_type == object::elf::STT_FUNC) {
        if s.other & STO_CUDA_ENTRY == 0 {
            continue;
        }
        let mut nk = per_sym.remove(&(s.index as u32)).unwrap_or_default();
        let fname = s.name;
        let key = |prefix: &str| format!("{prefix}{fname}").into_bytes();
        if let Some(d) = sec_data(&key(".nv.info.")) {
            match attributes(d) {
                Ok(attrs) => fill_function_attrs(&mut nk, &attrs, &mut info),
                Err(e) => warnings.push(format!(".nv.info.{fname}: {e}")),
            }
        }
        if nk.regcount.is_none() {
            // Older cubins (sm_70..sm_86 kernels of cuBLASLt, cuDNN) carry no EIATTR_REGCOUNT:
            // the count is in bits 24..31 of sh_info of the function's `.text.<fn>` section
            // (the low bits keep the symbol index), where cuobjdump reads it.
            if let Some(sh) = elf.section(s.shndx as usize).filter(|sh| elf.section_name(sh).starts_with(b".text.")) {
                let regs = sh.sh_info(elf.endian) >> 24;
                if regs > 0 {
                    nk.regcount = Some(regs);
                    nk.regcount_source = Some(REGCOUNT_FROM_SECTION.into());
                }
            }
        }
        nk.shared_static_bytes = sec_size(&key(".nv.shared."));
        nk.constant0_bytes = sec_size(&key(".nv.constant0."));
        nk.local_bytes = sec_size(&key(".nv.local."));
        if nk.shared_reserved_bytes == 0 && has_reserved && sm >= 90 && nk.shared_static_bytes >= 1024 {
            // sm_90+ toolchains place a 1 KiB system reserve at the start of the kernel's shared window
            nk.shared_reserved_bytes = 1024;
        }
        let resources = Resources {
            vgpr: nk.regcount,
            lds_bytes: Some(nk.shared_static_bytes),
            scratch_bytes: nk.frame_size.map(u64::from),
            kernarg_bytes: nk.param_cbank_size.or(nk.cbank_param_size).map(u64::from),
            wave_size: Some(32),
            max_workgroup_size: nk.max_threads.map(|t| t[0].saturating_mul(t[1]).saturating_mul(t[2])),
            reqd_workgroup_size: nk.reqntid,
            barriers: nk.num_barriers,
            ..Default::default()
        };
        kernels.push(Kernel {
            name: fname.to_string(),
            symbol: fname.to_string(),
            demangled: katlas_names::demangle(fname),
            resources,
            amd: None,
            nvidia: Some(nk),
            mix: None,
            occupancy: None,
            occupancy_note: None,
            triton: None,
        });
    }
    // The ELF header and `.nv.compat` do not mark family-specific code (CUDA 13.0: sm_120 and
    // sm_120f cubins have the same e_flags and compat attributes); ptxas's `-arch` option in the
    // tool note does, and cuobjdump takes the suffix from the fatbin entry (see `apply_entry_suffix`).
    match info.tool_options.as_deref().and_then(arch_option_suffix) {
        Some('f') => info.family_specific = true,
        Some('a') => info.accelerator = true,
        _ => {}
    }
    let arch = arch_name(sm, &info);
    Ok(NvParsed { target: arch.clone(), arch, info, kernels, warnings })
}

/// `sm_90a`, `sm_120f` or `sm_80`.
pub fn arch_name(sm: u32, info: &NvObject) -> String {
    format!("sm_{sm}{}", arch_suffix(info))
}

fn arch_suffix(info: &NvObject) -> &'static str {
    if info.accelerator {
        "a"
    } else if info.family_specific {
        "f"
    } else {
        ""
    }
}

/// The suffix of ptxas's `-arch sm_NNNx` option (`a` or `f`), if any.
fn arch_option_suffix(options: &str) -> Option<char> {
    let mut words = options.split_whitespace();
    while let Some(w) = words.next() {
        if w == "-arch" || w == "--gpu-name" {
            let a = words.next()?.to_ascii_lowercase();
            let rest = a.strip_prefix("sm_")?;
            return rest.chars().last().filter(|c| *c == 'a' || *c == 'f');
        }
    }
    None
}

/// Marks the object with the suffix its fatbin entry's flags give (what cuobjdump prints);
/// a disagreement with the cubin's own marks is kept as a warning.
pub fn apply_entry_suffix(o: &mut crate::manifest::CodeObject, entry_flags: u64) {
    use crate::nv::fatbin::{FLAG_ARCH_SPECIFIC, FLAG_FAMILY_SPECIFIC};
    let Some(n) = o.nvidia.as_mut() else { return };
    let (a, f) = (entry_flags & FLAG_ARCH_SPECIFIC != 0, entry_flags & FLAG_FAMILY_SPECIFIC != 0);
    if (a || f) && !(n.accelerator || n.family_specific) {
        n.accelerator = a;
        n.family_specific = f && !a;
    } else if (a && !n.accelerator) || (f && !n.family_specific) {
        o.warnings.push(format!("fatbin entry flags {entry_flags:#x} say sm_{}{}, the cubin says {}", n.sm, if a { "a" } else { "f" }, o.arch));
        return;
    }
    let arch = arch_name(n.sm, n);
    if arch != o.arch {
        o.target = arch.clone();
        o.arch = arch;
    }
}

fn xyz(d: &[u8]) -> Option<[u32; 3]> {
    Some([u32le(d, 0, W).ok()?, u32le(d, 4, W).ok()?, u32le(d, 8, W).ok()?])
}

fn fill_function_attrs(k: &mut NvKernel, attrs: &[Attr<'_>], info: &mut NvObject) {
    for a in attrs {
        match a.attr {
            EIATTR_MAX_THREADS => k.max_threads = xyz(a.data),
            EIATTR_REQNTID => k.reqntid = xyz(a.data),
            EIATTR_PARAM_CBANK if a.data.len() >= 8 => {
                k.param_cbank_offset = u16le(a.data, 4, W).ok().map(u32::from);
                k.param_cbank_size = u16le(a.data, 6, W).ok().map(u32::from);
            }
            EIATTR_CBANK_PARAM_SIZE => k.cbank_param_size = Some(a.value as u32),
            EIATTR_MAXREG_COUNT => k.max_reg_count = Some(a.value as u32),
            EIATTR_NUM_BARRIERS => k.num_barriers = Some((a.value & 0xff) as u32),
            EIATTR_KPARAM_INFO => k.params += 1,
            EIATTR_CUDA_API_VERSION => info.cuda_api_version = u32le(a.data, 0, W).ok(),
            EIATTR_RESERVED_SMEM_0_SIZE => {
                k.shared_reserved_bytes = if a.format == EIFMT_SVAL { u32le(a.data, 0, W).unwrap_or(0) as u64 } else { a.value as u64 }
            }
            _ => {
                let s = format!("{:#04x}", a.attr);
                if !k.other_attributes.contains(&s) {
                    k.other_attributes.push(s);
                }
            }
        }
    }
}
