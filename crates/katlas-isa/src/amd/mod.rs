//! AMD GPU code objects (`EM_AMDGPU`, HSA code object v4-v6): metadata notes and kernel descriptors.

pub mod decode;
pub mod descriptor;

use crate::elf::{Elf, ELFOSABI_AMDGPU_HSA, EM_AMDGPU};
use crate::error::{IsaError, Result};
use crate::manifest::{AmdKernel, AmdObject, Kernel, KernelArg, Metadata, Resources};
use crate::msgpack::{self, Item};
use serde_json::Value as J;

const W: &str = "AMDGPU code object";
const NT_AMDGPU_METADATA: u32 = 32;

pub struct AmdParsed {
    pub target: String,
    pub arch: String,
    pub features: Vec<String>,
    pub info: AmdObject,
    pub kernels: Vec<Kernel>,
    pub warnings: Vec<String>,
}

/// Splits `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-` into (`gfx90a`, [`sramecc+`, `xnack-`]).
pub fn split_target(target: &str) -> (String, Vec<String>) {
    let proc_part = target.rsplit("--").next().unwrap_or(target);
    let mut it = proc_part.split(':');
    let arch = it.next().unwrap_or("").to_string();
    (arch, it.map(str::to_string).collect())
}

pub fn code_object_version(abi_version: u8) -> Result<u32> {
    match abi_version {
        0 => Err(IsaError::unsupported(W, "code object v2 (EI_ABIVERSION 0); only v4, v5 and v6 are read")),
        1 => Err(IsaError::unsupported(W, "code object v3 (EI_ABIVERSION 1); only v4, v5 and v6 are read")),
        2..=4 => Ok(abi_version as u32 + 2),
        v => Err(IsaError::unsupported(W, format!("EI_ABIVERSION {v} (newer than code object v6)"))),
    }
}

fn u(v: Option<&J>) -> Option<u64> {
    v.and_then(J::as_u64)
}

fn u32f(v: Option<&J>) -> Option<u32> {
    u(v).and_then(|x| u32::try_from(x).ok())
}

fn triple3(v: Option<&J>) -> Option<[u32; 3]> {
    let a = v?.as_array()?;
    if a.len() != 3 {
        return None;
    }
    Some([u32f(a.first())?, u32f(a.get(1))?, u32f(a.get(2))?])
}

pub fn parse(data: &[u8]) -> Result<AmdParsed> {
    let elf = Elf::parse(data, W)?;
    if elf.machine() != EM_AMDGPU {
        return Err(IsaError::malformed(W, format!("e_machine {} is not EM_AMDGPU", elf.machine())));
    }
    if elf.os_abi() != ELFOSABI_AMDGPU_HSA {
        return Err(IsaError::unsupported(W, format!("EI_OSABI {} (only AMDGPU_HSA, 64, is read)", elf.os_abi())));
    }
    let co = code_object_version(elf.abi_version())?;
    let mut warnings = Vec::new();
    let mut target: Option<String> = None;
    let mut version = Vec::new();
    let mut notes = 0u32;
    let mut kernels = Vec::new();
    for (name, ty, desc) in elf.notes(W)? {
        if name != b"AMDGPU" || ty != NT_AMDGPU_METADATA {
            continue;
        }
        notes += 1;
        let note = match msgpack::check(desc).and_then(|()| read_note(desc)) {
            Ok(n) => n,
            Err(e) => {
                warnings.push(format!("metadata note {notes}: {e}"));
                continue;
            }
        };
        let Some(note) = note else {
            warnings.push(format!("metadata note {notes}: not a map"));
            continue;
        };
        if let Some(t) = note.target {
            target.get_or_insert(t);
        }
        if version.is_empty() {
            if let Some(v) = note.version {
                version = v;
            }
        }
        kernels.reserve(note.kernels.len());
        for (i, k) in note.kernels.into_iter().enumerate() {
            match k {
                Ok(k) => kernels.push(k),
                Err(e) => warnings.push(format!("metadata note {notes}, kernel {i}: {e}")),
            }
        }
    }
    if notes == 0 {
        return Err(IsaError::malformed(W, "no NT_AMDGPU_METADATA note"));
    }
    // Tensile's assembled objects carry no amdhsa.target: the ELF header says the same.
    let target = match target {
        Some(t) => t,
        None => target_from_flags(elf.flags())
            .ok_or_else(|| IsaError::malformed(W, format!("metadata has no amdhsa.target and e_flags {:#x} name no known processor", elf.flags())))?,
    };
    let (arch, features) = split_target(&target);
    descriptor::attach(&elf, &arch, &mut kernels, &mut warnings);
    let generic_target = arch.ends_with("-generic");
    Ok(AmdParsed {
        target,
        arch,
        features,
        info: AmdObject { code_object_version: co, e_flags: elf.flags(), metadata_version: version, metadata_notes: notes, generic_target },
        kernels,
        warnings,
    })
}

const TYPED_ARG_FIELDS: [&str; 6] = [".name", ".type_name", ".value_kind", ".offset", ".size", ".address_space"];

/// What one metadata note gives (None from [`read_note`]: the document is not a map).
struct Note {
    target: Option<String>,
    version: Option<Vec<u64>>,
    kernels: Vec<Result<Kernel>>,
}

/// Reads one checked metadata document in place. The top-level keys are looked up by their
/// first occurrence; a kernel that is not a map or has no name becomes a warning beside the
/// good ones.
fn read_note(desc: &[u8]) -> Result<Option<Note>> {
    let mut r = msgpack::Reader::new(desc);
    let Item::Map(n) = r.item()? else {
        return Ok(None);
    };
    let mut note = Note { target: None, version: None, kernels: Vec::new() };
    let (mut seen_target, mut seen_version, mut seen_kernels) = (false, false, false);
    for _ in 0..n {
        let key = r.key()?;
        let it = r.item()?;
        match (&*key, it) {
            ("amdhsa.target", _) if !seen_target => {
                seen_target = true;
                if let Item::Str(b) = it {
                    note.target = std::str::from_utf8(b).ok().map(str::to_string);
                }
                r.skip_body(it)?;
            }
            ("amdhsa.version", _) if !seen_version => {
                seen_version = true;
                if let Item::Array(len) = it {
                    let mut v = Vec::with_capacity(len.min(16));
                    for _ in 0..len {
                        let e = r.item()?;
                        if let Some(x) = e.as_u64() {
                            v.push(x);
                        }
                        r.skip_body(e)?;
                    }
                    note.version = Some(v);
                } else {
                    r.skip_body(it)?;
                }
            }
            ("amdhsa.kernels", Item::Array(len)) if !seen_kernels => {
                seen_kernels = true;
                note.kernels.reserve(len.min(1 << 16));
                for _ in 0..len {
                    note.kernels.push(kernel_from_metadata(&mut r)?);
                }
            }
            ("amdhsa.kernels", _) if !seen_kernels => {
                seen_kernels = true;
                r.skip_body(it)?;
            }
            _ => r.skip_body(it)?,
        }
    }
    Ok(Some(note))
}

/// One kernel's metadata map; the reader ends after it. The outer error is a broken document
/// (the note is dropped), the inner one a kernel that cannot be reported (a warning).
fn kernel_from_metadata(r: &mut msgpack::Reader<'_>) -> Result<Result<Kernel>> {
    let it = r.item()?;
    let Item::Map(n) = it else {
        r.skip_body(it)?;
        return Ok(Err(IsaError::malformed(W, "kernel metadata is not a map")));
    };
    // `.args` (its first occurrence) goes to the typed `args` list; everything else is kept
    // verbatim. Real kernels have a few dozen fields; a forged map with thousands goes through
    // a hashed map so that repeated keys stay linear to resolve.
    let mut meta = Metadata::with_capacity(n.min(64));
    let mut big = (n > 64).then(serde_json::Map::new);
    let mut args = None;
    for _ in 0..n {
        let key = r.key()?;
        if key == ".args" {
            match args {
                None => args = Some(args_from_metadata(r)?),
                Some(_) => r.skip()?,
            }
            continue;
        }
        let v = r.json()?;
        match big.as_mut() {
            Some(m) => {
                m.insert(key.into_owned(), v);
            }
            None => meta.insert(&key, v),
        }
    }
    if let Some(m) = big {
        meta = Metadata::from(m);
    }
    let args = args.unwrap_or_default();
    let Some(name) = meta.get(".name").and_then(J::as_str).map(str::to_string) else {
        return Ok(Err(IsaError::malformed(W, "kernel without .name")));
    };
    let symbol = meta.get(".symbol").and_then(J::as_str).unwrap_or(&name).to_string();
    let resources = Resources {
        vgpr: u32f(meta.get(".vgpr_count")),
        sgpr: u32f(meta.get(".sgpr_count")),
        agpr: u32f(meta.get(".agpr_count")),
        vgpr_spill: u32f(meta.get(".vgpr_spill_count")),
        sgpr_spill: u32f(meta.get(".sgpr_spill_count")),
        lds_bytes: u(meta.get(".group_segment_fixed_size")),
        scratch_bytes: u(meta.get(".private_segment_fixed_size")),
        kernarg_bytes: u(meta.get(".kernarg_segment_size")),
        wave_size: u32f(meta.get(".wavefront_size")),
        max_workgroup_size: u32f(meta.get(".max_flat_workgroup_size")),
        reqd_workgroup_size: triple3(meta.get(".reqd_workgroup_size")),
        dynamic_stack: meta.get(".uses_dynamic_stack").and_then(J::as_bool),
        ..Default::default()
    };
    Ok(Ok(Kernel {
        demangled: katlas_names::demangle(&name),
        name,
        symbol,
        resources,
        amd: Some(AmdKernel { metadata: meta, args, descriptor: None, descriptor_mismatches: vec![] }),
        nvidia: None,
        mix: None,
        occupancy: None,
        occupancy_note: None,
        triton: None,
    }))
}

/// The `.args` list, typed. Within one argument map a repeated key counts once, with its last
/// value (as in the JSON object the metadata becomes); anything but a list gives no arguments,
/// anything but a map gives an argument with every field empty.
fn args_from_metadata(r: &mut msgpack::Reader<'_>) -> Result<Vec<KernelArg>> {
    let it = r.item()?;
    let Item::Array(n) = it else {
        r.skip_body(it)?;
        return Ok(Vec::new());
    };
    let mut args = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let it = r.item()?;
        let Item::Map(m) = it else {
            r.skip_body(it)?;
            args.push(KernelArg {
                name: None,
                type_name: None,
                value_kind: String::new(),
                offset: 0,
                size: 0,
                address_space: None,
                access: None,
                extra: Default::default(),
            });
            continue;
        };
        let mut typed: [Option<Item<'_>>; 6] = [None; 6];
        let mut access: Option<Option<String>> = None;
        let mut actual_access: Option<Option<String>> = None;
        let mut extra = crate::manifest::FieldMap::new();
        for _ in 0..m {
            let key = r.key()?;
            if let Some(i) = TYPED_ARG_FIELDS.iter().position(|f| *f == key) {
                let v = r.item()?;
                r.skip_body(v)?;
                typed[i] = Some(v);
                continue;
            }
            let v = r.json()?;
            match &*key {
                ".access" => access = Some(v.as_str().map(str::to_string)),
                ".actual_access" => actual_access = Some(v.as_str().map(str::to_string)),
                _ => {}
            }
            extra.insert(key.into_owned(), v);
        }
        let s = |i: usize| typed[i].and_then(|v| v.str_lossy()).map(|c| c.into_owned());
        let n = |i: usize| typed[i].and_then(|v| v.as_u64()).unwrap_or(0);
        args.push(KernelArg {
            name: s(0),
            type_name: s(1),
            value_kind: s(2).unwrap_or_default(),
            offset: n(3),
            size: n(4),
            address_space: s(5),
            access: access.or(actual_access).flatten(),
            extra,
        });
    }
    Ok(args)
}

/// Function symbols of the object that are kernels: name -> (file offset, size) of their code.
#[cfg(feature = "oracle")]
pub fn kernel_code_ranges(data: &[u8]) -> Result<Vec<(String, u64, u64)>> {
    let elf = Elf::parse(data, W)?;
    let mut out = Vec::new();
    for s in crate::elf::symbols(&elf, W)? {
        if s.st_type == object::elf::STT_FUNC && s.size > 0 {
            if let Some(sh) = elf.section(s.shndx as usize) {
                use object::read::elf::SectionHeader;
                let addr = sh.sh_addr(elf.endian);
                let off = sh.sh_offset(elf.endian);
                if s.value >= addr {
                    out.push((s.name.to_string(), off + (s.value - addr), s.size));
                }
            }
        }
    }
    Ok(out)
}

/// `EF_AMDGPU_MACH_*` values (LLVM's ELF.h) for processors katlas knows.
const MACH: &[(u32, &str)] = &[
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x04a, "gfx1151"),
    (0x04b, "gfx941"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x051, "gfx9-generic"),
    (0x052, "gfx10-1-generic"),
    (0x053, "gfx10-3-generic"),
    (0x054, "gfx11-generic"),
    (0x055, "gfx1152"),
    (0x058, "gfx1153"),
    (0x059, "gfx12-generic"),
    (0x05f, "gfx9-4-generic"),
];

/// Rebuilds a target id from e_flags (code object v4+ layout: mach in bits 0-7,
/// xnack in bits 8-9, sramecc in bits 10-11).
pub fn target_from_flags(flags: u32) -> Option<String> {
    let mach = flags & 0xff;
    let name = MACH.iter().find(|(m, _)| *m == mach)?.1;
    let mut t = format!("amdgcn-amd-amdhsa--{name}");
    match (flags >> 10) & 3 {
        2 => t.push_str(":sramecc-"),
        3 => t.push_str(":sramecc+"),
        _ => {}
    }
    match (flags >> 8) & 3 {
        2 => t.push_str(":xnack-"),
        3 => t.push_str(":xnack+"),
        _ => {}
    }
    Some(t)
}
