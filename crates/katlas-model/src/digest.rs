//! md5 digests: the ecosystem's convention for row identity and pinned prompts.

use md5::{Digest, Md5};
use std::io::{self, Read};

/// Lowercase hex md5 of a byte slice.
pub fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(Md5::digest(bytes))
}

/// Streaming md5 of a reader, so multi-GB model files never sit in memory.
pub fn md5_reader<R: Read>(mut reader: R) -> io::Result<String> {
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Incremental md5 for digests built from several parts.
#[derive(Default)]
pub struct Md5Builder(Md5);

impl Md5Builder {
    pub fn new() -> Self {
        Self(Md5::new())
    }
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(bytes);
        self
    }
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(md5_reader(&b"The quick brown fox jumps over the lazy dog"[..]).unwrap(), "9e107d9d372bb6826bd81d3542a419d6");
        let mut b = Md5Builder::new();
        b.update(b"The quick brown fox ").update(b"jumps over the lazy dog");
        assert_eq!(b.finish(), "9e107d9d372bb6826bd81d3542a419d6");
    }
}
