//! File md5 with a cache keyed by (path, size, mtime, inode).
//!
//! Binaries and models are hashed on every row; re-reading a multi-GB model
//! for each run would dominate collection time. A changed file changes at
//! least one key field, so a stale hit needs an in-place rewrite within the
//! same mtime tick with the same size — accepted, as every build tool does.

use katlas_model::digest::md5_reader;
use katlas_model::FileDigest;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct CacheEntry {
    path: String,
    size: u64,
    mtime_ns: i128,
    inode: u64,
    md5: String,
}

fn key_of(meta: &std::fs::Metadata) -> (u64, i128, u64) {
    use std::os::unix::fs::MetadataExt;
    let mtime_ns = meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128;
    (meta.len(), mtime_ns, meta.ino())
}

/// md5 of `path`, through the cache in `cache_dir` when given. A missing or
/// unreadable file gives a digest with `md5: null` and a note, never an error.
pub fn file_digest(path: &Path, cache_dir: Option<&Path>) -> FileDigest {
    let shown = path.display().to_string();
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let meta = match std::fs::metadata(&abs) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return FileDigest { path: Some(shown), note: Some("not a regular file".into()), ..Default::default() },
        Err(e) => return FileDigest { path: Some(shown), note: Some(format!("unreadable: {e}")), ..Default::default() },
    };
    let (size, mtime_ns, inode) = key_of(&meta);
    let abs_s = abs.display().to_string();
    let cache_file = cache_dir.map(|d| d.join("md5-cache.jsonl"));
    if let Some(cf) = &cache_file {
        if let Ok(text) = std::fs::read_to_string(cf) {
            // Last matching entry wins; the file is append-only.
            let hit = text
                .lines()
                .rev()
                .filter_map(|l| serde_json::from_str::<CacheEntry>(l).ok())
                .find(|e| e.path == abs_s && e.size == size && e.mtime_ns == mtime_ns && e.inode == inode);
            if let Some(e) = hit {
                return FileDigest { path: Some(shown), md5: Some(e.md5), size: Some(size), note: None };
            }
        }
    }
    let md5 = match std::fs::File::open(&abs).and_then(md5_reader) {
        Ok(m) => m,
        Err(e) => return FileDigest { path: Some(shown), size: Some(size), note: Some(format!("unreadable: {e}")), ..Default::default() },
    };
    if let Some(cf) = &cache_file {
        let entry = CacheEntry { path: abs_s, size, mtime_ns, inode, md5: md5.clone() };
        // A cache write failure only costs a re-hash next time.
        let _ = katlas_corpus_append(cf, &entry);
    }
    FileDigest { path: Some(shown), md5: Some(md5), size: Some(size), note: None }
}

fn katlas_corpus_append(path: &Path, entry: &CacheEntry) -> std::io::Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // One write of one whole line in append mode: concurrent writers can't tear it
    // for lines this short (well under PIPE_BUF).
    katlas_fs::open_append(path)?.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_and_cache_follow_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bin");
        let cache = dir.path().join("cache");
        std::fs::write(&f, b"abc").unwrap();
        let a = file_digest(&f, Some(&cache));
        assert_eq!(a.md5.as_deref(), Some("900150983cd24fb0d6963f7d28e17f72"));
        // Cached hit gives the same answer.
        assert_eq!(file_digest(&f, Some(&cache)).md5, a.md5);
        assert_eq!(std::fs::read_to_string(cache.join("md5-cache.jsonl")).unwrap().lines().count(), 1);
        // A rewrite with another size invalidates the entry.
        std::fs::write(&f, b"abcd").unwrap();
        assert_eq!(file_digest(&f, Some(&cache)).md5.as_deref(), Some("e2fc714c4727ee9395f324cd2e7f331f"));
    }

    #[test]
    fn missing_file_is_noted_not_fatal() {
        let d = file_digest(Path::new("/nonexistent/katlas"), None);
        assert!(d.md5.is_none());
        assert!(d.note.unwrap().contains("unreadable"));
    }
}
