//! clang offload bundles (`__CLANG_OFFLOAD_BUNDLE__`) and compressed bundles (`CCOB`).
//! Written by hand: the layout is a few fixed little-endian fields (see clang's
//! OffloadBundler.cpp) and no maintained crate reads it.

use crate::blob::{find, sub, u16le, u32le, u64le, Blob};
use crate::decompress;
use crate::error::{IsaError, Result};

pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
pub const CCOB_MAGIC: &[u8] = b"CCOB";

#[derive(Debug, Clone)]
pub struct BundleEntry {
    pub triple: String,
    pub offset: u64,
    pub size: u64,
}

/// Parsed header of an uncompressed bundle; `extent` is where its last entry ends.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub entries: Vec<BundleEntry>,
    pub extent: u64,
}

const W: &str = "offload bundle";

pub fn parse_bundle(d: &[u8]) -> Result<Bundle> {
    if !d.starts_with(BUNDLE_MAGIC) {
        return Err(IsaError::malformed(W, "missing __CLANG_OFFLOAD_BUNDLE__ magic"));
    }
    let n = u64le(d, 24, W)?;
    // each entry header is at least 24 bytes: a count beyond that is corrupt, not a reason to allocate
    if n > (d.len() as u64) / 24 {
        return Err(IsaError::malformed(W, format!("entry count {n} larger than the data allows")));
    }
    let mut off = 32u64;
    let mut entries = Vec::with_capacity(n as usize);
    let mut extent = 0u64;
    for i in 0..n {
        let eo = u64le(d, off, W)?;
        let es = u64le(d, off + 8, W)?;
        let tl = u64le(d, off + 16, W)?;
        let t = sub(d, off + 24, tl, W)?;
        let triple = String::from_utf8_lossy(t).into_owned();
        off += 24 + tl;
        let end = eo
            .checked_add(es)
            .filter(|e| *e <= d.len() as u64)
            .ok_or_else(|| IsaError::malformed(W, format!("entry {i} ({triple}) spans {eo}+{es} beyond the {} bytes available", d.len())))?;
        extent = extent.max(end);
        entries.push(BundleEntry { triple, offset: eo, size: es });
    }
    Ok(Bundle { entries, extent: extent.max(off) })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcobHeader {
    pub version: u16,
    pub method: &'static str,
    pub header_len: u64,
    /// Whole compressed record including header, when the version stores it (v2+).
    pub total_size: Option<u64>,
    pub uncompressed_size: u64,
}

const C: &str = "compressed offload bundle (CCOB)";

pub fn parse_ccob_header(d: &[u8]) -> Result<CcobHeader> {
    if !d.starts_with(CCOB_MAGIC) {
        return Err(IsaError::malformed(C, "missing CCOB magic"));
    }
    let version = u16le(d, 4, C)?;
    let method = match u16le(d, 6, C)? {
        0 => "zlib",
        1 => "zstd",
        m => return Err(IsaError::unsupported(C, format!("compression method {m}"))),
    };
    let (header_len, total_size, uncompressed_size) = match version {
        1 => (20, None, u32le(d, 8, C)? as u64),
        2 => (24, Some(u32le(d, 8, C)? as u64), u32le(d, 12, C)? as u64),
        3 => (32, Some(u64le(d, 8, C)?), u64le(d, 16, C)?),
        v => return Err(IsaError::unsupported(C, format!("version {v}"))),
    };
    if let Some(t) = total_size {
        if t < header_len {
            return Err(IsaError::malformed(C, format!("total size {t} smaller than its header")));
        }
    }
    Ok(CcobHeader { version, method, header_len, total_size, uncompressed_size })
}

/// Decompresses one CCOB record; returns the header and the inner (uncompressed) bundle.
pub fn decompress_ccob(d: &[u8]) -> Result<(CcobHeader, Vec<u8>)> {
    let h = parse_ccob_header(d)?;
    let end = match h.total_size {
        Some(t) => t,
        None => d.len() as u64,
    };
    // v1 has no total size: a record shorter than its header must not wrap the length
    let len = end.checked_sub(h.header_len).ok_or(IsaError::Truncated { what: C, offset: 0, need: h.header_len, have: end })?;
    let payload = sub(d, h.header_len, len, C)?;
    let out = match h.method {
        "zstd" => decompress::zstd(payload, h.uncompressed_size, C)?,
        _ => decompress::zlib(payload, h.uncompressed_size, C)?,
    };
    if out.len() as u64 != h.uncompressed_size {
        return Err(IsaError::malformed(C, format!("decompressed {} bytes, header says {}", out.len(), h.uncompressed_size)));
    }
    Ok((h, out))
}

/// A bundle or CCOB record found inside a section that concatenates them (`.hip_fatbin`).
pub struct Located {
    /// Where the record starts in the region (for a reader's diagnostics; the scan names records by index).
    #[cfg_attr(not(feature = "oracle"), allow(dead_code))]
    pub offset: u64,
    pub blob: Blob,
}

/// Splits a `.hip_fatbin`-like region into its records. Records are laid out one after
/// another with alignment padding; anything unparsable ends the walk with an error.
pub fn split_records(region: &Blob) -> (Vec<Located>, Vec<IsaError>) {
    let d = region.bytes();
    let mut out = Vec::new();
    let mut errs = Vec::new();
    let mut pos = 0usize;
    loop {
        // the CCOB search is bounded by the next bundle so the walk stays linear in the region
        let a = find(d, BUNDLE_MAGIC, pos);
        let b = match a {
            Some(x) => find(&d[..(x + CCOB_MAGIC.len()).min(d.len())], CCOB_MAGIC, pos),
            None => find(d, CCOB_MAGIC, pos),
        };
        let at = match (a, b) {
            (Some(x), Some(y)) => x.min(y),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => break,
        };
        let rest = &d[at..];
        let extent = if rest.starts_with(BUNDLE_MAGIC) {
            parse_bundle(rest).map(|b| b.extent)
        } else {
            parse_ccob_header(rest).and_then(|h| match h.total_size {
                Some(t) if t <= rest.len() as u64 => Ok(t),
                Some(t) => Err(IsaError::Truncated { what: C, offset: at as u64, need: t, have: rest.len() as u64 }),
                // v1 does not store its length: it has to be the last record.
                None => Ok(rest.len() as u64),
            })
        };
        match extent {
            Ok(len) if len > 0 => {
                if let Ok(blob) = region.slice(at as u64..at as u64 + len, W) {
                    out.push(Located { offset: at as u64, blob });
                }
                pos = at + len as usize;
            }
            Ok(_) => pos = at + 1,
            Err(e) => {
                errs.push(e);
                pos = at + 1;
            }
        }
    }
    (out, errs)
}
