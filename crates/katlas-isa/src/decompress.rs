//! Decompression with limits. Sizes declared in container headers are untrusted: output
//! grows only as real data is decoded, and stops at the declared size or the global cap.

use crate::error::{IsaError, Result};
use std::io::Read;

/// Largest decompressed object we accept (the largest real one seen is well under 1 GiB).
pub const MAX_DECOMPRESSED: u64 = 4 << 30;

/// Initial capacity never exceeds a small multiple of the input, whatever a header claims.
fn initial_capacity(declared: u64, input: usize) -> usize {
    declared.min(input as u64 * 8).min(MAX_DECOMPRESSED) as usize
}

fn read_capped(mut r: impl Read, declared: u64, input: usize, what: &'static str) -> Result<Vec<u8>> {
    let limit = declared.min(MAX_DECOMPRESSED);
    let mut out = Vec::with_capacity(initial_capacity(declared, input));
    // one byte past the limit tells "exactly the declared size" from "more than declared"
    r.by_ref().take(limit + 1).read_to_end(&mut out).map_err(|e| IsaError::malformed(what, format!("decompression failed: {e}")))?;
    if out.len() as u64 > limit {
        return Err(IsaError::TooLarge { what, detail: format!("decompressed data exceeds the declared {declared} bytes") });
    }
    Ok(out)
}

pub fn zstd(data: &[u8], declared: u64, what: &'static str) -> Result<Vec<u8>> {
    // When the frame states the size the container declares, decode in one call into a buffer of
    // that size (the streaming reader's copies were a tenth of a cuBLASLt scan); the output can
    // never pass the buffer. Anything else takes the capped streaming path, whose error names it.
    if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(data) {
        if n == declared && declared <= MAX_DECOMPRESSED {
            let mut out = Vec::with_capacity(declared as usize);
            if let Ok(written) = with_zstd_context(|d| d.decompress_to_buffer(data, &mut out)) {
                if written as u64 == declared {
                    return Ok(out);
                }
            }
        }
    }
    let dec = zstd::stream::read::Decoder::with_buffer(data).map_err(|e| IsaError::malformed(what, format!("zstd: {e}")))?;
    read_capped(dec, declared, data.len(), what)
}

/// Runs `f` with this thread's zstd context: a scan decodes thousands of frames, and a fresh
/// context per frame allocated and initialised its tables each time.
fn with_zstd_context<T>(f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> std::io::Result<T>) -> std::io::Result<T> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|c| {
        let mut c = c.try_borrow_mut().map_err(std::io::Error::other)?;
        if c.is_none() {
            *c = Some(zstd::bulk::Decompressor::new()?);
        }
        match c.as_mut() {
            Some(d) => f(d),
            None => Err(std::io::Error::other("no zstd context")),
        }
    })
}

pub fn zlib(data: &[u8], declared: u64, what: &'static str) -> Result<Vec<u8>> {
    read_capped(flate2::read::ZlibDecoder::new(data), declared, data.len(), what)
}

/// Raw LZ4 block (no frame) of known decompressed size, as in fatbin entries.
pub fn lz4_block(data: &[u8], declared: u64, what: &'static str) -> Result<Vec<u8>> {
    // LZ4 cannot expand by more than 255x: a larger claim is a corrupt header.
    let max_possible = (data.len() as u64).saturating_mul(255).saturating_add(16);
    if declared > max_possible || declared > MAX_DECOMPRESSED {
        return Err(IsaError::TooLarge { what, detail: format!("declared LZ4 output {declared} bytes from {} input bytes", data.len()) });
    }
    let mut out = vec![0u8; declared as usize];
    let n = lz4_flex::block::decompress_into(data, &mut out).map_err(|e| IsaError::malformed(what, format!("lz4: {e}")))?;
    out.truncate(n);
    Ok(out)
}
