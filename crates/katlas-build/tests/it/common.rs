//! Shared helpers: copy a fixture into a temp project, and require the compilers.
#![allow(dead_code)]

use katlas_build::Settings;
use katlas_project::Project;
use std::path::{Path, PathBuf};

pub use katlas_testkit::repo_root;

pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hipfire-like")
}

pub fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dst = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A fresh copy of the hipfire-like fixture.
pub fn fixture_project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), d.path());
    let _ = std::fs::remove_dir_all(d.path().join(".katlas/build"));
    d
}

/// libnvrtc from scripts/fetch-nvrtc (or KATLAS_NVRTC).
pub fn nvrtc_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KATLAS_NVRTC") {
        return Some(PathBuf::from(p));
    }
    let p = repo_root().join(".cache/nvrtc/x/nvidia/cu13/lib/libnvrtc.so.13");
    p.is_file().then_some(p)
}

/// The tests that compile need clang-22 + ld.lld and NVRTC; without them they fail, loudly.
pub fn require_compilers() -> PathBuf {
    require_clang();
    nvrtc_path().unwrap_or_else(|| {
        panic!("NVRTC is missing: this test compiles CUDA through NVRTC. Run `scripts/fetch-build-tools` (scripts/fetch-nvrtc) or set KATLAS_NVRTC")
    })
}

/// clang-22 and its ld.lld, asserted present.
pub fn require_clang() {
    let clang = katlas_build::compiler::which("clang-22");
    assert!(
        clang.is_some(),
        "clang-22 is not installed: this test compiles HIP for the default matrix. Run `scripts/fetch-build-tools` \
         (apt-get install -y clang-22 lld-22 llvm-22) first"
    );
    let real = std::fs::canonicalize(clang.unwrap()).unwrap();
    assert!(
        real.parent().unwrap().join("ld.lld").is_file() || katlas_build::compiler::which("ld.lld").is_some(),
        "ld.lld (lld-22) is not installed: run `scripts/fetch-build-tools` (apt-get install -y lld-22)"
    );
}

pub fn settings(dir: &Path, arch: Option<&[&str]>) -> Settings {
    let p = Project::open(dir).unwrap();
    let arch: Option<Vec<String>> = arch.map(|v| v.iter().map(|s| s.to_string()).collect());
    let mut s = Settings::load(&p, arch.as_deref()).unwrap();
    if s.nvrtc.is_none() {
        s.nvrtc = nvrtc_path();
    }
    s
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
