//! Shared helpers for tests that need the fetched third-party fixtures and vendor tools.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn own_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The third-party fixture cache; a missing cache fails the test (it is not a skip).
pub fn fetched() -> PathBuf {
    let p = std::env::var_os("KATLAS_FIXTURES").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cache/fixtures"));
    assert!(p.join("deb").is_dir() && p.join("pypi").is_dir(), "third-party fixtures missing under {}: run scripts/fetch-fixtures first", p.display());
    p
}

pub fn fetched_file(rel: &str) -> PathBuf {
    let p = fetched().join(rel);
    assert!(p.exists(), "fixture {} missing: run scripts/fetch-fixtures", p.display());
    p
}

/// A tool from PATH, /usr/lib/llvm-22/bin or the fixture cache; missing fails the test.
pub fn tool(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect();
    dirs.push(PathBuf::from("/usr/lib/llvm-22/bin"));
    if let Some(f) = std::env::var_os("KATLAS_FIXTURES").map(PathBuf::from).or_else(|| Some(repo_root().join(".cache/fixtures"))) {
        dirs.push(f.join("pypi/cuobjdump/nvidia/cu13/bin"));
        dirs.push(f.join("pypi/nvdisasm/nvidia/cu13/bin"));
    }
    for d in dirs {
        let p = d.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("tool {name} not found: run scripts/fetch-fixtures (it installs clang-22/llvm-22 and fetches the CUDA tool wheels)");
}
