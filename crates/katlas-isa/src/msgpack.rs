//! MessagePack helpers around `rmpv`: a pre-pass that rejects containers whose declared
//! element counts exceed the bytes left (so decoding never allocates from a forged length),
//! and a conversion to JSON for the manifest.

use crate::error::{IsaError, Result};

const W: &str = "AMDGPU metadata (MessagePack)";
const MAX_DEPTH: u32 = 64;

fn need(d: &[u8], pos: usize, n: u64) -> Result<()> {
    if (d.len() - pos.min(d.len())) as u64 >= n {
        Ok(())
    } else {
        Err(IsaError::Truncated {
            what: W,
            offset: pos as u64,
            need: n,
            have: (d.len() - pos.min(d.len())) as u64,
        })
    }
}

fn be(d: &[u8], pos: usize, n: usize) -> Result<u64> {
    need(d, pos, n as u64)?;
    Ok(d[pos..pos + n]
        .iter()
        .fold(0u64, |a, b| (a << 8) | *b as u64))
}

/// Walks one value starting at `pos`; returns the position after it.
fn skip(d: &[u8], pos: usize, depth: u32) -> Result<usize> {
    if depth > MAX_DEPTH {
        return Err(IsaError::malformed(W, "nesting deeper than 64"));
    }
    need(d, pos, 1)?;
    let m = d[pos];
    let p = pos + 1;
    let (hdr, payload, elems): (usize, u64, u64) = match m {
        0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0, 0),
        0x80..=0x8f => (0, 0, 2 * (m & 0x0f) as u64),
        0x90..=0x9f => (0, 0, (m & 0x0f) as u64),
        0xa0..=0xbf => (0, (m & 0x1f) as u64, 0),
        0xc4 | 0xd9 => (1, be(d, p, 1)?, 0),
        0xc5 | 0xda => (2, be(d, p, 2)?, 0),
        0xc6 | 0xdb => (4, be(d, p, 4)?, 0),
        0xc7 => (1, be(d, p, 1)? + 1, 0),
        0xc8 => (2, be(d, p, 2)? + 1, 0),
        0xc9 => (4, be(d, p, 4)? + 1, 0),
        0xca => (0, 4, 0),
        0xcb => (0, 8, 0),
        0xcc | 0xd0 => (0, 1, 0),
        0xcd | 0xd1 => (0, 2, 0),
        0xce | 0xd2 => (0, 4, 0),
        0xcf | 0xd3 => (0, 8, 0),
        0xd4 => (0, 2, 0),
        0xd5 => (0, 3, 0),
        0xd6 => (0, 5, 0),
        0xd7 => (0, 9, 0),
        0xd8 => (0, 17, 0),
        0xdc => (2, 0, be(d, p, 2)?),
        0xdd => (4, 0, be(d, p, 4)?),
        0xde => (2, 0, 2 * be(d, p, 2)?),
        0xdf => (4, 0, 2 * be(d, p, 4)?),
        0xc1 => {
            return Err(IsaError::malformed(
                W,
                format!("reserved marker 0xc1 at offset {pos}"),
            ))
        }
    };
    let mut q = p + hdr;
    need(d, q, payload)?;
    q += payload as usize;
    // every element takes at least one byte
    need(d, q, elems)?;
    for _ in 0..elems {
        q = skip(d, q, depth + 1)?;
    }
    Ok(q)
}

/// Decodes one MessagePack document after checking its structure.
pub fn decode(d: &[u8]) -> Result<rmpv::Value> {
    skip(d, 0, 0)?;
    let mut r = d;
    rmpv::decode::read_value_with_max_depth(&mut r, MAX_DEPTH as usize + 1)
        .map_err(|e| IsaError::malformed(W, e.to_string()))
}

pub fn to_json(v: &rmpv::Value) -> serde_json::Value {
    use rmpv::Value as V;
    use serde_json::Value as J;
    match v {
        V::Nil => J::Null,
        V::Boolean(b) => J::Bool(*b),
        V::Integer(i) => {
            if let Some(u) = i.as_u64() {
                J::from(u)
            } else if let Some(s) = i.as_i64() {
                J::from(s)
            } else {
                J::Null
            }
        }
        V::F32(f) => serde_json::Number::from_f64(*f as f64)
            .map(J::Number)
            .unwrap_or(J::Null),
        V::F64(f) => serde_json::Number::from_f64(*f)
            .map(J::Number)
            .unwrap_or(J::Null),
        V::String(s) => J::String(
            s.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(s.as_bytes()).into_owned()),
        ),
        V::Binary(b) => J::String(hex::encode(b)),
        V::Array(a) => J::Array(a.iter().map(to_json).collect()),
        V::Map(m) => J::Object(m.iter().map(|(k, v)| (key_string(k), to_json(v))).collect()),
        V::Ext(t, b) => J::String(format!("ext{t}:{}", hex::encode(b))),
    }
}

pub fn key_string(k: &rmpv::Value) -> String {
    match k {
        rmpv::Value::String(s) => s
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(s.as_bytes()).into_owned()),
        other => other.to_string(),
    }
}

pub fn map_get<'a>(m: &'a [(rmpv::Value, rmpv::Value)], key: &str) -> Option<&'a rmpv::Value> {
    m.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}
