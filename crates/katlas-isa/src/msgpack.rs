//! MessagePack for the AMDGPU metadata notes: a pre-pass that rejects containers whose
//! declared element counts exceed the bytes left (so decoding never allocates from a forged
//! length), a zero-copy [`Reader`] that walks the checked document in place and converts only
//! what the manifest keeps (straight to JSON, without an intermediate value tree), and the
//! `rmpv`-based [`decode`] + [`to_json`] it replaced, kept as the reference the tests compare
//! the reader with.

use crate::error::{IsaError, Result};
use std::borrow::Cow;

const W: &str = "AMDGPU metadata (MessagePack)";
const MAX_DEPTH: u32 = 64;
/// `rmpv::decode::Error::DepthLimitExceeded` as rmpv words it, so the reader refuses a deep
/// document with the reference decoder's error without shipping rmpv
/// (`deep_nesting_is_refused_like_rmpv` compares the two).
pub const DEPTH_LIMIT_EXCEEDED: &str = "depth limit exceeded";

fn need(d: &[u8], pos: usize, n: u64) -> Result<()> {
    if (d.len() - pos.min(d.len())) as u64 >= n {
        Ok(())
    } else {
        Err(IsaError::Truncated { what: W, offset: pos as u64, need: n, have: (d.len() - pos.min(d.len())) as u64 })
    }
}

fn be(d: &[u8], pos: usize, n: usize) -> Result<u64> {
    need(d, pos, n as u64)?;
    Ok(d[pos..pos + n].iter().fold(0u64, |a, b| (a << 8) | *b as u64))
}

/// Walks one value starting at `pos`; returns the position after it. `rmpv_deep` is set when
/// a value lies deeper than `rmpv` (as [`decode`] calls it) would read: containers, strings,
/// binaries and extensions below level 31, other scalars below level 32 (rmpv spends one depth
/// unit per value and one more per container body or byte payload, from 65).
fn skip(d: &[u8], pos: usize, depth: u32, rmpv_deep: &mut bool) -> Result<usize> {
    if depth > MAX_DEPTH {
        return Err(IsaError::malformed(W, "nesting deeper than 64"));
    }
    need(d, pos, 1)?;
    let m = d[pos];
    let p = pos + 1;
    let scalar = matches!(m, 0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 | 0xca..=0xd3);
    if depth > if scalar { 32 } else { 31 } {
        *rmpv_deep = true;
    }
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
        0xc1 => return Err(IsaError::malformed(W, format!("reserved marker 0xc1 at offset {pos}"))),
    };
    let mut q = p + hdr;
    need(d, q, payload)?;
    q += payload as usize;
    // every element takes at least one byte
    need(d, q, elems)?;
    for _ in 0..elems {
        q = skip(d, q, depth + 1, rmpv_deep)?;
    }
    Ok(q)
}

/// Checks one document before [`Reader`] walks it: every declared length fits in the bytes
/// left, and the nesting is one `rmpv` reads too, so the reader accepts exactly what
/// [`decode`] accepts, with the same error.
pub fn check(d: &[u8]) -> Result<()> {
    let mut deep = false;
    skip(d, 0, 0, &mut deep)?;
    if deep {
        return Err(IsaError::malformed(W, DEPTH_LIMIT_EXCEEDED.to_string()));
    }
    Ok(())
}

/// Decodes one MessagePack document after checking its structure.
#[cfg(feature = "oracle")]
pub fn decode(d: &[u8]) -> Result<rmpv::Value> {
    let mut deep = false;
    skip(d, 0, 0, &mut deep)?;
    let mut r = d;
    rmpv::decode::read_value_with_max_depth(&mut r, MAX_DEPTH as usize + 1).map_err(|e| IsaError::malformed(W, e.to_string()))
}

#[cfg(feature = "oracle")]
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
        V::F32(f) => serde_json::Number::from_f64(*f as f64).map(J::Number).unwrap_or(J::Null),
        V::F64(f) => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or(J::Null),
        V::String(s) => J::String(s.as_str().map(str::to_string).unwrap_or_else(|| String::from_utf8_lossy(s.as_bytes()).into_owned())),
        V::Binary(b) => J::String(hex::encode(b)),
        V::Array(a) => J::Array(a.iter().map(to_json).collect()),
        V::Map(m) => J::Object(m.iter().map(|(k, v)| (key_string(k), to_json(v))).collect()),
        V::Ext(t, b) => J::String(format!("ext{t}:{}", hex::encode(b))),
    }
}

#[cfg(feature = "oracle")]
pub fn key_string(k: &rmpv::Value) -> String {
    match k {
        rmpv::Value::String(s) => s.as_str().map(str::to_string).unwrap_or_else(|| String::from_utf8_lossy(s.as_bytes()).into_owned()),
        other => other.to_string(),
    }
}

#[cfg(feature = "oracle")]
pub fn map_get<'a>(m: &'a [(rmpv::Value, rmpv::Value)], key: &str) -> Option<&'a rmpv::Value> {
    m.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
}

/// `String::from_utf8_lossy`, with the common valid case checked by the faster `from_utf8`.
fn lossy(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// One item read in place: scalars with their value, strings and binaries borrowing the
/// document, containers with their element count (the elements follow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item<'a> {
    Nil,
    Bool(bool),
    Uint(u64),
    Int(i64),
    F32(f32),
    F64(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Ext(i8, &'a [u8]),
    Array(usize),
    Map(usize),
}

impl<'a> Item<'a> {
    /// The string as the JSON conversion gives it (invalid UTF-8 replaced).
    pub fn str_lossy(&self) -> Option<Cow<'a, str>> {
        match *self {
            Item::Str(b) => Some(lossy(b)),
            _ => None,
        }
    }

    /// `as_u64` of the JSON conversion: non-negative integers only.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Item::Uint(u) => Some(u),
            Item::Int(i) => u64::try_from(i).ok(),
            _ => None,
        }
    }
}

/// Walks a document that passed [`check`]. Every read is still bounds-checked (an error, never
/// a panic), and element counts were bounded by the bytes left during the check, so they are
/// safe capacities.
pub struct Reader<'a> {
    d: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(d: &'a [u8]) -> Reader<'a> {
        Reader { d, pos: 0 }
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        need(self.d, self.pos, n)?;
        let s = &self.d[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64> {
        let v = be(self.d, self.pos, n)?;
        self.pos += n;
        Ok(v)
    }

    /// Reads one item header (and a scalar's payload).
    pub fn item(&mut self) -> Result<Item<'a>> {
        let m = self.take(1)?[0];
        Ok(match m {
            0x00..=0x7f => Item::Uint(m as u64),
            0xe0..=0xff => Item::Int(m as i8 as i64),
            0x80..=0x8f => Item::Map((m & 0x0f) as usize),
            0x90..=0x9f => Item::Array((m & 0x0f) as usize),
            0xa0..=0xbf => Item::Str(self.take((m & 0x1f) as u64)?),
            0xc0 => Item::Nil,
            0xc2 => Item::Bool(false),
            0xc3 => Item::Bool(true),
            0xc4 => {
                let n = self.be(1)?;
                Item::Bin(self.take(n)?)
            }
            0xc5 => {
                let n = self.be(2)?;
                Item::Bin(self.take(n)?)
            }
            0xc6 => {
                let n = self.be(4)?;
                Item::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = self.be(1 << (m - 0xc7))?;
                let t = self.take(1)?[0] as i8;
                Item::Ext(t, self.take(n)?)
            }
            0xca => Item::F32(f32::from_bits(self.be(4)? as u32)),
            0xcb => Item::F64(f64::from_bits(self.be(8)?)),
            0xcc..=0xcf => Item::Uint(self.be(1 << (m - 0xcc))?),
            0xd0 => Item::Int(self.be(1)? as u8 as i8 as i64),
            0xd1 => Item::Int(self.be(2)? as u16 as i16 as i64),
            0xd2 => Item::Int(self.be(4)? as u32 as i32 as i64),
            0xd3 => Item::Int(self.be(8)? as i64),
            0xd4..=0xd8 => {
                let t = self.take(1)?[0] as i8;
                Item::Ext(t, self.take(1 << (m - 0xd4))?)
            }
            0xd9 => {
                let n = self.be(1)?;
                Item::Str(self.take(n)?)
            }
            0xda => {
                let n = self.be(2)?;
                Item::Str(self.take(n)?)
            }
            0xdb => {
                let n = self.be(4)?;
                Item::Str(self.take(n)?)
            }
            0xdc => Item::Array(self.be(2)? as usize),
            0xdd => Item::Array(self.be(4)? as usize),
            0xde => Item::Map(self.be(2)? as usize),
            0xdf => Item::Map(self.be(4)? as usize),
            0xc1 => return Err(IsaError::malformed(W, format!("reserved marker 0xc1 at offset {}", self.pos - 1))),
        })
    }

    /// Skips the elements of a container whose header `it` was just read (nothing for scalars).
    pub fn skip_body(&mut self, it: Item<'a>) -> Result<()> {
        let n = match it {
            Item::Array(n) => n as u64,
            Item::Map(n) => 2 * n as u64,
            _ => 0,
        };
        let mut deep = false;
        for _ in 0..n {
            self.pos = skip(self.d, self.pos, 0, &mut deep)?;
        }
        Ok(())
    }

    /// Skips one whole value.
    pub fn skip(&mut self) -> Result<()> {
        let mut deep = false;
        self.pos = skip(self.d, self.pos, 0, &mut deep)?;
        Ok(())
    }

    /// Reads a map key as the JSON conversion names it: strings as written (invalid UTF-8
    /// replaced), other keys as `rmpv` displays them ([`Reader::display_of`]).
    pub fn key(&mut self) -> Result<Cow<'a, str>> {
        let it = self.item()?;
        if let Item::Str(b) = it {
            return Ok(lossy(b));
        }
        let mut s = String::new();
        self.display_of(it, &mut s)?;
        Ok(Cow::Owned(s))
    }

    /// The value whose header `it` was just read as `rmpv::Value`'s `Display` writes it (nil,
    /// numbers, strings quoted and escaped, invalid UTF-8 and binaries as byte lists,
    /// `[a, b]`, `{k: v}`, `[type, bytes]` for extensions), so the reader names a non-string
    /// key as the reference does without shipping `rmpv`. Depth is bounded by [`check`].
    fn display_of(&mut self, it: Item<'a>, out: &mut String) -> Result<()> {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = match it {
            Item::Nil => write!(out, "nil"),
            Item::Bool(b) => write!(out, "{b}"),
            Item::Uint(u) => write!(out, "{u}"),
            Item::Int(i) => write!(out, "{i}"),
            Item::F32(f) => write!(out, "{f}"),
            Item::F64(f) => write!(out, "{f}"),
            Item::Str(b) => match std::str::from_utf8(b) {
                Ok(s) => write!(out, "{s:?}"),
                Err(_) => write!(out, "{b:?}"),
            },
            Item::Bin(b) => write!(out, "{b:?}"),
            Item::Ext(t, b) => write!(out, "[{t}, {b:?}]"),
            Item::Array(n) => {
                out.push('[');
                for i in 0..n {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let e = self.item()?;
                    self.display_of(e, out)?;
                }
                write!(out, "]")
            }
            Item::Map(n) => {
                out.push('{');
                for i in 0..n {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let k = self.item()?;
                    self.display_of(k, out)?;
                    out.push_str(": ");
                    let v = self.item()?;
                    self.display_of(v, out)?;
                }
                write!(out, "}}")
            }
        };
        Ok(())
    }

    /// Reads one whole value as JSON, exactly as [`to_json`] converts what `rmpv` decodes.
    pub fn json(&mut self) -> Result<serde_json::Value> {
        let it = self.item()?;
        self.json_of(it, 0)
    }

    /// The JSON of a value whose header `it` was just read.
    pub fn json_of(&mut self, it: Item<'a>, depth: u32) -> Result<serde_json::Value> {
        use serde_json::Value as J;
        if depth > MAX_DEPTH {
            return Err(IsaError::malformed(W, "nesting deeper than 64"));
        }
        Ok(match it {
            Item::Nil => J::Null,
            Item::Bool(b) => J::Bool(b),
            Item::Uint(u) => J::from(u),
            Item::Int(i) => J::from(i),
            Item::F32(f) => serde_json::Number::from_f64(f as f64).map(J::Number).unwrap_or(J::Null),
            Item::F64(f) => serde_json::Number::from_f64(f).map(J::Number).unwrap_or(J::Null),
            Item::Str(b) => J::String(lossy(b).into_owned()),
            Item::Bin(b) => J::String(hex::encode(b)),
            Item::Ext(t, b) => J::String(format!("ext{t}:{}", hex::encode(b))),
            Item::Array(n) => {
                let mut a = Vec::with_capacity(n);
                for _ in 0..n {
                    let e = self.item()?;
                    a.push(self.json_of(e, depth + 1)?);
                }
                J::Array(a)
            }
            Item::Map(n) => {
                let mut m = serde_json::Map::with_capacity(n);
                for _ in 0..n {
                    let k = self.key()?;
                    let e = self.item()?;
                    m.insert(k.into_owned(), self.json_of(e, depth + 1)?);
                }
                J::Object(m)
            }
        })
    }
}
