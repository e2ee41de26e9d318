//! What a buffer holds, from its first bytes.

use crate::bundle::{BUNDLE_MAGIC, CCOB_MAGIC};
use crate::elf::{EM_AMDGPU, EM_CUDA};
use crate::nv::{fatbin, ptx};

/// What content a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    AmdElf,
    Cubin,
    HostElf,
    Bundle,
    Ccob,
    Fatbin,
    Ptx,
    Unrecognised,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::AmdElf => "amdgpu-elf",
            Kind::Cubin => "cubin",
            Kind::HostElf => "host-elf",
            Kind::Bundle => "offload-bundle",
            Kind::Ccob => "ccob",
            Kind::Fatbin => "fatbin",
            Kind::Ptx => "ptx",
            Kind::Unrecognised => "unrecognised",
        }
    }
}

pub fn detect(d: &[u8]) -> Kind {
    if d.starts_with(b"\x7fELF") {
        if d.len() < 20 {
            return Kind::Unrecognised;
        }
        let le = d[5] != 2;
        let m = if le { u16::from_le_bytes([d[18], d[19]]) } else { u16::from_be_bytes([d[18], d[19]]) };
        return match m {
            EM_AMDGPU => Kind::AmdElf,
            EM_CUDA => Kind::Cubin,
            _ => Kind::HostElf,
        };
    }
    if d.starts_with(BUNDLE_MAGIC) {
        return Kind::Bundle;
    }
    if d.starts_with(CCOB_MAGIC) {
        return Kind::Ccob;
    }
    if fatbin::is_fatbin(d) {
        return Kind::Fatbin;
    }
    if ptx::looks_like_ptx(d) {
        return Kind::Ptx;
    }
    Kind::Unrecognised
}
