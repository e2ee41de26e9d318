//! Scheduling the md5 of leaf code objects: many at once in SIMD lanes, before a walk that
//! needs them or beside one that does not.

use super::{detect, Ctx, Found, Kind};
use crate::blob::{md5_hex, Blob};
use crate::bundle;
use crate::md5_lanes;
use std::collections::HashMap;
use std::sync::Mutex;

/// Where a blob's bytes lie: owner buffer, start, end.
type BlobKey = (usize, usize, usize);

/// md5 digests of leaf objects, computed many at once: md5 is serial within one object, so
/// objects share SIMD lanes instead ([`md5_lanes`]; rocSPARSE's 777 objects, 1.3 GB, were a
/// third of the scan's CPU time hashed one by one). Digests are keyed by where the bytes lie.
///
/// When nothing needs an object's digest before parsing it (no mix memo, no disk cache), the
/// hashing runs beside the parsing instead of before it: the leaves are registered as pending,
/// [`leaf`](super::walk) leaves their `md5` empty and notes the key in [`Found::deferred`], and the container
/// that started the hashing fills the digests in once both are done ([`with_digests`]).
#[derive(Default)]
pub(super) struct Md5Ahead {
    map: Mutex<HashMap<BlobKey, [u8; 16]>>,
    pending: Mutex<std::collections::HashSet<BlobKey>>,
}

/// Digests computed ahead for one container walk; dropped with it.
pub(super) struct AheadScope<'a> {
    ahead: &'a Md5Ahead,
    keys: Vec<BlobKey>,
}

impl Drop for AheadScope<'_> {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        if let Ok(mut m) = self.ahead.map.lock() {
            for k in &self.keys {
                m.remove(k);
            }
        }
    }
}

impl Md5Ahead {
    /// The code objects directly inside `containers` (entries of uncompressed offload bundles)
    /// with no digest computed or pending.
    fn leaves<'b>(&self, containers: impl Iterator<Item = &'b Blob>) -> Vec<Blob> {
        let mut leaves = Vec::new();
        let known = self.map.lock().ok();
        let pending = self.pending.lock().ok();
        let unknown = |k: &BlobKey| known.as_ref().is_none_or(|m| !m.contains_key(k)) && pending.as_ref().is_none_or(|p| !p.contains(k));
        for c in containers {
            let d = c.bytes();
            if detect(d) != Kind::Bundle {
                continue;
            }
            let Ok(b) = bundle::parse_bundle(d) else {
                continue;
            };
            for e in b.entries.iter().filter(|e| e.size > 0) {
                let Ok(child) = c.slice(e.offset..e.offset + e.size, "offload bundle entry") else {
                    continue;
                };
                let leaf = matches!(detect(child.bytes()), Kind::AmdElf | Kind::Cubin);
                if leaf && unknown(&child.key()) {
                    leaves.push(child);
                }
            }
        }
        leaves
    }

    /// Hashes `leaves` now; their digests live as long as the returned scope.
    pub(super) fn compute(&self, leaves: &[Blob]) -> AheadScope<'_> {
        let mut keys = Vec::new();
        if leaves.len() >= 2 {
            let msgs: Vec<&[u8]> = leaves.iter().map(Blob::bytes).collect();
            let digests = md5_lanes::md5_many_par(&msgs);
            if let Ok(mut m) = self.map.lock() {
                for (b, h) in leaves.iter().zip(digests) {
                    m.insert(b.key(), h);
                    keys.push(b.key());
                }
            }
        }
        AheadScope { ahead: self, keys }
    }

    /// The digest of `b` as hex: computed ahead, or now; None when it is pending (being
    /// computed beside the parse; the caller defers it).
    pub(super) fn md5_hex(&self, b: &Blob) -> Option<String> {
        let k = b.key();
        if let Some(h) = self.map.lock().ok().and_then(|m| m.get(&k).copied()) {
            return Some(hex::encode(h));
        }
        if self.pending.lock().is_ok_and(|p| p.contains(&k)) {
            return None;
        }
        Some(md5_hex(b.bytes()))
    }
}

/// Walks the children of `containers` with `walk`, hashing their leaf code objects many at a
/// time: before the walk when the walk needs the digests (cache keys), else beside it.
pub(super) fn with_digests<'b>(ctx: &Ctx, containers: impl Iterator<Item = &'b Blob>, walk: impl FnOnce() -> Found + Send) -> Found {
    let leaves = ctx.ahead.leaves(containers);
    if !ctx.defer_digests() || leaves.len() < 2 {
        let _scope = ctx.ahead.compute(&leaves);
        return walk();
    }
    let keys: Vec<BlobKey> = leaves.iter().map(Blob::key).collect();
    if let Ok(mut p) = ctx.ahead.pending.lock() {
        p.extend(keys.iter().copied());
    }
    let (digests, mut found) = rayon::join(
        || {
            let msgs: Vec<&[u8]> = leaves.iter().map(Blob::bytes).collect();
            md5_lanes::md5_many_par(&msgs)
        },
        walk,
    );
    if let Ok(mut p) = ctx.ahead.pending.lock() {
        for k in &keys {
            p.remove(k);
        }
    }
    let mine: HashMap<BlobKey, [u8; 16]> = keys.into_iter().zip(digests).collect();
    let objects = &mut found.objects;
    found.deferred.retain(|(i, b)| match mine.get(&b.key()) {
        Some(h) => {
            objects[*i].md5 = hex::encode(h);
            false
        }
        None => true,
    });
    found
}
