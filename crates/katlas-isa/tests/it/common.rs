//! Shared helpers for tests that need the fetched third-party fixtures and vendor tools.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub use katlas_testkit::{fetched_file, repo_root};

pub fn own_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
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
