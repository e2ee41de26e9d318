//! Transitive `#include "..."` resolution for cache keys and `--touched`: a header edit must
//! invalidate every source that reaches it. Quoted includes only (system headers belong to the
//! compiler identity); the search order is the including file's directory, then include dirs.
//! Conditional includes are followed regardless of `#if`, which can only over-invalidate.

use regex::Regex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Debug, Clone, Default)]
pub struct Includes {
    /// Files reached (canonical paths), not including the source itself.
    pub files: BTreeSet<PathBuf>,
    /// Quoted includes found nowhere (the compiler will say so; the key still records them).
    pub missing: BTreeSet<String>,
}

fn include_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r#"(?m)^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)""#).expect("valid regex"))
}

pub fn includes(source: &Path, include_dirs: &[PathBuf]) -> Includes {
    let mut out = Includes::default();
    let mut stack = vec![source.to_path_buf()];
    let start = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    let mut seen: BTreeSet<PathBuf> = BTreeSet::from([start.clone()]);
    while let Some(f) = stack.pop() {
        let Ok(text) = std::fs::read(&f) else {
            continue;
        };
        let text = String::from_utf8_lossy(&text);
        let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
        for cap in include_re().captures_iter(&text) {
            let name = &cap[1];
            let found = std::iter::once(&dir).chain(include_dirs.iter()).map(|d| d.join(name)).find(|p| p.is_file());
            match found {
                Some(p) => {
                    let p = std::fs::canonicalize(&p).unwrap_or(p);
                    if seen.insert(p.clone()) {
                        out.files.insert(p.clone());
                        stack.push(p);
                    }
                }
                None => {
                    out.missing.insert(name.to_string());
                }
            }
        }
    }
    out
}
