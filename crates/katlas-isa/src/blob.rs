//! Shared byte buffers (a memory map or a decompressed copy) and a bounds-checked reader.
//! Containers nest (a `.so` holds bundles holding ELF objects), so children are cheap
//! sub-ranges of their parent's buffer rather than copies.

use crate::error::{IsaError, Result};
use std::ops::Range;
use std::sync::Arc;

enum Owner {
    Map(memmap2::Mmap),
    Vec(Vec<u8>),
}

impl Owner {
    fn bytes(&self) -> &[u8] {
        match self {
            Owner::Map(m) => m,
            Owner::Vec(v) => v,
        }
    }
}

/// A read-only view into a shared buffer.
#[derive(Clone)]
pub struct Blob {
    owner: Arc<Owner>,
    start: usize,
    end: usize,
}

impl Blob {
    pub fn from_vec(v: Vec<u8>) -> Blob {
        let end = v.len();
        Blob { owner: Arc::new(Owner::Vec(v)), start: 0, end }
    }

    /// Maps a file read-only. The file must not be modified while the scan runs
    /// (the usual contract of memory-mapped readers such as `object`'s examples).
    pub fn map_file(file: &std::fs::File) -> std::io::Result<Blob> {
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(Blob::from_vec(Vec::new()));
        }
        // SAFETY: read-only private mapping; concurrent truncation by another process
        // would fault, which is the documented limitation of mapping input files.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        let end = map.len();
        Ok(Blob { owner: Arc::new(Owner::Map(map)), start: 0, end })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.owner.bytes()[self.start..self.end]
    }

    /// Where the bytes lie (owner buffer, start, end): equal keys mean equal bytes while the
    /// owner is alive.
    pub fn key(&self) -> (usize, usize, usize) {
        (Arc::as_ptr(&self.owner) as usize, self.start, self.end)
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    #[cfg(feature = "oracle")]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// A sub-range, checked against this view.
    pub fn slice(&self, r: Range<u64>, what: &'static str) -> Result<Blob> {
        let len = self.len() as u64;
        if r.start > r.end || r.end > len {
            return Err(IsaError::Truncated { what, offset: r.start, need: r.end.saturating_sub(r.start), have: len.saturating_sub(r.start.min(len)) });
        }
        Ok(Blob { owner: self.owner.clone(), start: self.start + r.start as usize, end: self.start + r.end as usize })
    }
}

/// Little-endian bounds-checked reads.
pub fn sub<'a>(d: &'a [u8], off: u64, len: u64, what: &'static str) -> Result<&'a [u8]> {
    let end = off.checked_add(len);
    match end {
        Some(e) if e <= d.len() as u64 => Ok(&d[off as usize..e as usize]),
        _ => Err(IsaError::Truncated { what, offset: off, need: len, have: (d.len() as u64).saturating_sub(off) }),
    }
}

pub fn u16le(d: &[u8], off: u64, what: &'static str) -> Result<u16> {
    Ok(u16::from_le_bytes(sub(d, off, 2, what)?.try_into().unwrap_or_default()))
}

pub fn u32le(d: &[u8], off: u64, what: &'static str) -> Result<u32> {
    Ok(u32::from_le_bytes(sub(d, off, 4, what)?.try_into().unwrap_or_default()))
}

pub fn u64le(d: &[u8], off: u64, what: &'static str) -> Result<u64> {
    Ok(u64::from_le_bytes(sub(d, off, 8, what)?.try_into().unwrap_or_default()))
}

/// Finds `needle` in `hay` starting at `from` (SIMD search through `memchr`).
pub fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from >= hay.len() {
        return None;
    }
    memchr::memmem::find(&hay[from..], needle).map(|i| i + from)
}

pub fn md5_hex(d: &[u8]) -> String {
    use md5::{Digest, Md5};
    hex::encode(Md5::digest(d))
}
