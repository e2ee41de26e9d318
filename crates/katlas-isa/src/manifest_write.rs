//! Writes a manifest as JSON, the objects serialised in parallel. rocSPARSE's manifest is
//! 274 MB of compact JSON (524 MB pretty); one serde_json writer took longer than the scan
//! itself. The bytes are exactly those of `serde_json::to_writer` / `to_writer_pretty`
//! (tested), so readers see no change.

use crate::manifest::IsaManifest;
use rayon::prelude::*;
use std::io::{self, Write};

/// Objects serialised per parallel batch: bounds the memory held in serialised text.
pub const BATCH: usize = 256;

/// Compact JSON of `m`, as `serde_json::to_writer` writes it.
pub fn write_compact<W: Write>(m: &mut IsaManifest, w: &mut W) -> io::Result<()> {
    write(m, w, false)
}

/// Pretty JSON of `m` (no trailing newline), as `serde_json::to_writer_pretty` writes it.
pub fn write_pretty<W: Write>(m: &mut IsaManifest, w: &mut W) -> io::Result<()> {
    write(m, w, true)
}

fn write<W: Write>(m: &mut IsaManifest, w: &mut W, pretty: bool) -> io::Result<()> {
    let objects = std::mem::take(&mut m.objects);
    let skeleton = if pretty { serde_json::to_string_pretty(&*m) } else { serde_json::to_string(&*m) };
    m.objects = objects;
    let skeleton = skeleton.map_err(io::Error::other)?;
    // the one top-level key (pretty: at one level of indentation): unique in the text, since
    // string values escape their quotes
    let (mark, open, first_sep, sep, close): (&str, &[u8], &[u8], &[u8], &[u8]) = if pretty {
        ("\n  \"objects\": []", b"\n  \"objects\": [", b"\n    ", b",\n    ", b"\n  ]")
    } else {
        ("\"objects\":[]", b"\"objects\":[", b"", b",", b"]")
    };
    let Some(at) = skeleton.find(mark) else {
        return Err(io::Error::other("manifest skeleton without an objects key"));
    };
    if m.objects.is_empty() {
        return w.write_all(skeleton.as_bytes());
    }
    w.write_all(&skeleton.as_bytes()[..at])?;
    w.write_all(open)?;
    let mut first = true;
    for batch in m.objects.chunks(BATCH) {
        let texts: Vec<io::Result<Vec<u8>>> = batch
            .par_iter()
            .map(|o| {
                let mut buf = Vec::with_capacity(4096);
                if pretty {
                    serde_json::to_writer_pretty(&mut buf, o).map_err(io::Error::other)?;
                    Ok(indent(&buf, b"    "))
                } else {
                    serde_json::to_writer(&mut buf, o).map_err(io::Error::other)?;
                    Ok(buf)
                }
            })
            .collect();
        for t in texts {
            w.write_all(if first { first_sep } else { sep })?;
            first = false;
            w.write_all(&t?)?;
        }
    }
    w.write_all(close)?;
    w.write_all(&skeleton.as_bytes()[at + mark.len()..])
}

/// `text` with `pad` after every line break (JSON strings escape their own line breaks, so
/// every raw one is formatting).
fn indent(text: &[u8], pad: &[u8]) -> Vec<u8> {
    let breaks = memchr::memchr_iter(b'\n', text).count();
    let mut out = Vec::with_capacity(text.len() + breaks * pad.len());
    let mut from = 0;
    for i in memchr::memchr_iter(b'\n', text) {
        out.extend_from_slice(&text[from..=i]);
        out.extend_from_slice(pad);
        from = i + 1;
    }
    out.extend_from_slice(&text[from..]);
    out
}
