//! Itanium C++ demangling through `cpp_demangle`; names that are not mangled give None. A
//! `.kd` suffix (an AMD kernel descriptor's symbol) and the extra leading `_` some toolchains
//! write (`__Z…`) are not part of the mangled name.
//! Recursion limits guard against crafted names that would blow the stack.
//!
//! Results are memoised process-wide: a library carries the same kernels once per target
//! (rocSPARSE: 88k kernels, about 13k distinct names over 7 targets), and demangling long
//! template names was 15% of a scan. The memo is sharded to keep threads apart and bounded
//! (a full shard is emptied) so a long-running process does not grow without limit.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, OnceLock};

const SHARDS: usize = 16;
const SHARD_CAP: usize = 16 * 1024;

/// Mangled name -> demangled name (None: not demangleable).
type Shard = Mutex<HashMap<Box<str>, Option<Box<str>>>>;

struct Memo {
    hasher: RandomState,
    shards: Vec<Shard>,
}

fn memo() -> &'static Memo {
    static M: OnceLock<Memo> = OnceLock::new();
    M.get_or_init(|| Memo { hasher: RandomState::new(), shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect() })
}

/// The demangled form of an Itanium-mangled name; None when it is not one or does not demangle.
pub fn demangle(name: &str) -> Option<String> {
    let name = mangled_part(name)?;
    let m = memo();
    let shard = &m.shards[(m.hasher.hash_one(name) as usize) % SHARDS];
    if let Ok(s) = shard.lock() {
        if let Some(hit) = s.get(name) {
            return hit.as_deref().map(str::to_string);
        }
    }
    let out = demangle_uncached(name);
    if let Ok(mut s) = shard.lock() {
        if s.len() >= SHARD_CAP {
            s.clear();
        }
        s.insert(name.into(), out.as_deref().map(Box::from));
    }
    out
}

fn mangled_part(name: &str) -> Option<&str> {
    let n = name.strip_suffix(".kd").unwrap_or(name);
    let n = n.strip_prefix('_').filter(|r| r.starts_with("_Z")).unwrap_or(n);
    n.starts_with("_Z").then_some(n)
}

/// `cpp_demangle` itself, without the memo.
pub fn demangle_uncached(name: &str) -> Option<String> {
    let name = mangled_part(name)?;
    let parse = cpp_demangle::ParseOptions::default().recursion_limit(96);
    let sym = cpp_demangle::Symbol::new_with_options(name, &parse).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().recursion_limit(96);
    sym.demangle(&opts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_returns_what_cpp_demangle_gives() {
        let names = ["_ZN12rocrand_host6detailL15generate_kernelIjEEvPjm", "_Z3fooi", "_Znotvalid((", "plain_c_kernel"];
        for _ in 0..3 {
            for n in names {
                assert_eq!(demangle(n), demangle_uncached(n), "{n}");
            }
        }
        assert_eq!(demangle("_Z3fooi").as_deref(), Some("foo(int)"));
        assert_eq!(demangle("plain_c_kernel"), None);
        assert_eq!(demangle("__Z3fooi").as_deref(), Some("foo(int)"));
        assert_eq!(demangle("_Z3fooi.kd").as_deref(), Some("foo(int)"));
    }
}
