//! NVIDIA fatbin containers (magic 0xBA55ED50), as found in `.nv_fatbin` sections and
//! standalone `.fatbin` files. The layout is not published; field positions follow what
//! `cuobjdump` shows for the same files (tested against it). Written by hand: no crate reads it.

use crate::blob::{sub, u16le, u32le, u64le};
use crate::decompress;
use crate::error::{IsaError, Result};

pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const W: &str = "fatbin";

pub const KIND_PTX: u16 = 1;
pub const KIND_ELF: u16 = 2;
/// Bit 0 (`0x1`) marks a 64-bit entry; every entry the scan meets is one, so it is not read.
pub const FLAG_LZ4: u64 = 0x2000;
pub const FLAG_ZSTD: u64 = 0x8000;
/// Entry compiled for an architecture-specific target (`sm_90a`): cuobjdump prints the `a`.
pub const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
/// Entry compiled for a family-specific target (`sm_120f`, CUDA 12.9+): cuobjdump prints the `f`.
pub const FLAG_FAMILY_SPECIFIC: u64 = 0x20_0000;

#[derive(Debug, Clone)]
pub struct FatbinEntry {
    pub kind: u16,
    pub sm: u32,
    pub flags: u64,
    /// Header fields the scan does not use, kept for the readers' diagnostics (`{:?}`) and fuzzing.
    #[cfg_attr(not(feature = "oracle"), allow(dead_code))]
    pub version: (u16, u16),
    /// Offset of the payload inside the container.
    pub payload_offset: u64,
    pub payload_size: u64,
    pub compressed_size: u64,
    pub uncompressed_size: u64,
    #[cfg_attr(not(feature = "oracle"), allow(dead_code))]
    pub name: Option<String>,
}

impl FatbinEntry {
    pub fn compression(&self) -> &'static str {
        if self.flags & FLAG_ZSTD != 0 {
            "zstd"
        } else if self.flags & FLAG_LZ4 != 0 {
            "lz4"
        } else {
            "raw"
        }
    }

    /// `a`, `f` or nothing, from the entry's flags.
    pub fn arch_suffix(&self) -> &'static str {
        if self.flags & FLAG_ARCH_SPECIFIC != 0 {
            "a"
        } else if self.flags & FLAG_FAMILY_SPECIFIC != 0 {
            "f"
        } else {
            ""
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            KIND_PTX => "ptx",
            KIND_ELF => "elf",
            _ => "unknown",
        }
    }
}

/// One container: header size and the entries; `extent` is the end of its last entry.
#[derive(Debug, Clone)]
pub struct Fatbin {
    pub entries: Vec<FatbinEntry>,
    pub extent: u64,
}

pub fn is_fatbin(d: &[u8]) -> bool {
    d.len() >= 4 && u32::from_le_bytes([d[0], d[1], d[2], d[3]]) == FATBIN_MAGIC
}

pub fn parse(d: &[u8]) -> Result<Fatbin> {
    if !is_fatbin(d) {
        return Err(IsaError::malformed(W, "missing 0xBA55ED50 magic"));
    }
    let hsize = u16le(d, 6, W)? as u64;
    let fat_size = u64le(d, 8, W)?;
    if hsize < 16 {
        return Err(IsaError::malformed(W, format!("header size {hsize}")));
    }
    let end = hsize.checked_add(fat_size).filter(|e| *e <= d.len() as u64).ok_or(IsaError::Truncated {
        what: W,
        offset: hsize,
        need: fat_size,
        have: (d.len() as u64).saturating_sub(hsize),
    })?;
    let mut off = hsize;
    let mut entries = Vec::new();
    while off + 16 <= end {
        let kind = u16le(d, off, W)?;
        let eh = u32le(d, off + 4, W)? as u64;
        let psize = u64le(d, off + 8, W)?;
        if eh < 16 {
            return Err(IsaError::malformed(W, format!("entry at {off}: header size {eh}")));
        }
        let pstart = off + eh;
        let pend = pstart
            .checked_add(psize)
            .filter(|e| *e <= end)
            .ok_or_else(|| IsaError::malformed(W, format!("entry at {off}: payload {pstart}+{psize} runs past the container end {end}")))?;
        // Fields beyond the first 16 bytes are read only when the entry header holds them.
        let field32 = |rel: u64| {
            if rel + 4 <= eh {
                u32le(d, off + rel, W).ok()
            } else {
                None
            }
        };
        let field16 = |rel: u64| {
            if rel + 2 <= eh {
                u16le(d, off + rel, W).ok()
            } else {
                None
            }
        };
        let field64 = |rel: u64| {
            if rel + 8 <= eh {
                u64le(d, off + rel, W).ok()
            } else {
                None
            }
        };
        let compressed_size = field32(16).unwrap_or(0) as u64;
        let minor = field16(24).unwrap_or(0);
        let major = field16(26).unwrap_or(0);
        let sm = field32(28).unwrap_or(0);
        let name_off = field32(32).unwrap_or(0) as u64;
        let name_len = field32(36).unwrap_or(0) as u64;
        let flags = field64(40).unwrap_or(0);
        let uncompressed_size = field64(56).unwrap_or(0);
        let name = if name_len > 0 && name_len < 4096 {
            sub(d, off + name_off, name_len, W).ok().map(|b| String::from_utf8_lossy(b).trim_end_matches('\0').to_string())
        } else {
            None
        };
        let _ = minor;
        entries.push(FatbinEntry {
            kind,
            sm,
            flags,
            version: (major, minor),
            payload_offset: pstart,
            payload_size: psize,
            compressed_size,
            uncompressed_size,
            name,
        });
        off = pend;
    }
    Ok(Fatbin { entries, extent: end })
}

/// The entry's payload, decompressed when flagged.
pub fn entry_payload(d: &[u8], e: &FatbinEntry) -> Result<Vec<u8>> {
    let raw = sub(d, e.payload_offset, e.payload_size, W)?;
    match e.compression() {
        "raw" => Ok(raw.to_vec()),
        c => {
            // the padded payload is longer than the compressed stream
            let clen = if e.compressed_size > 0 && e.compressed_size <= e.payload_size { e.compressed_size } else { e.payload_size };
            let data = &raw[..clen as usize];
            let out = if c == "lz4" { decompress::lz4_block(data, e.uncompressed_size, W)? } else { decompress::zstd(data, e.uncompressed_size, W)? };
            if out.len() as u64 != e.uncompressed_size {
                return Err(IsaError::malformed(W, format!("{c} entry decompressed to {} bytes, header says {}", out.len(), e.uncompressed_size)));
            }
            Ok(out)
        }
    }
}

/// Walks a region holding fatbin containers one after another (8-byte aligned).
pub fn split_containers(d: &[u8]) -> (Vec<(u64, Fatbin)>, Vec<IsaError>) {
    let mut out = Vec::new();
    let mut errs = Vec::new();
    let mut pos = 0u64;
    while pos + 16 <= d.len() as u64 {
        let rest = &d[pos as usize..];
        if !is_fatbin(rest) {
            pos += 8;
            continue;
        }
        match parse(rest) {
            Ok(f) => {
                let ext = f.extent.max(16);
                out.push((pos, f));
                pos = (pos + ext + 7) & !7;
            }
            Err(e) => {
                errs.push(e);
                pos += 8;
            }
        }
    }
    (out, errs)
}
