//! Issue 8 through the real binary: `katlas build`, `katlas reach`, `katlas lint dispatch` on
//! the hipfire-like fixture of crates/katlas-build. The build tests need clang-22 + lld-22 and
//! NVRTC (scripts/fetch-build-tools); without them they fail with that instruction.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn nvrtc() -> Option<PathBuf> {
    std::env::var_os("KATLAS_NVRTC")
        .map(PathBuf::from)
        .or_else(|| Some(repo().join(".cache/nvrtc/x/nvidia/cu13/lib")).filter(|p| p.join("libnvrtc.so.13").is_file()))
}

fn require_compilers() -> PathBuf {
    let clang = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join("clang-22").is_file())).unwrap_or(false);
    assert!(clang, "clang-22 is not installed: run `scripts/fetch-build-tools` (apt-get install -y clang-22 lld-22 llvm-22)");
    nvrtc().expect("NVRTC is missing: run `scripts/fetch-build-tools` (scripts/fetch-nvrtc) or set KATLAS_NVRTC")
}

fn katlas(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_katlas"));
    // Trust prompts are tested in untrusted_repo.rs.
    c.args(args).current_dir(dir).env("NO_COLOR", "1").env("KATLAS_YES", "1").env("KATLAS_CONFIG_DIR", "/nonexistent/katlas-test-config");
    if let Some(n) = nvrtc() {
        c.env("KATLAS_NVRTC", n);
    }
    c.output().expect("run katlas")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fixture() -> tempfile::TempDir {
    let src = repo().join("crates/katlas-build/tests/fixtures/hipfire-like");
    let d = tempfile::tempdir().unwrap();
    for e in walkdir(&src) {
        let rel = e.strip_prefix(&src).unwrap();
        let dst = d.path().join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(&e, &dst).unwrap();
    }
    let _ = std::fs::remove_dir_all(d.path().join(".katlas/build"));
    d
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walkdir(&p));
        } else {
            v.push(p);
        }
    }
    v
}

#[test]
fn build_reports_each_atoms_compiler_error_and_exits_1() {
    require_compilers();
    let d = fixture();
    std::fs::write(
        d.path().join("kernels/src/broken.hip"),
        "#include \"prelude.h\"\nextern \"C\" __global__ void broken(float* y) { y[tid()] = planted_error; }\n",
    )
    .unwrap();
    let o = katlas(d.path(), &["build", "--no-mix"]);
    assert_eq!(o.status.code(), Some(1), "{}\n{}", out(&o), err(&o));
    let text = out(&o);
    for atom in ["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201"] {
        let head = format!("error: kernels/src/broken.hip failed for {atom}");
        let at = text.find(&head).unwrap_or_else(|| panic!("no error block for {atom}:\n{text}"));
        let block = &text[at..];
        assert!(block.contains("use of undeclared identifier 'planted_error'"), "{block}");
        assert!(block.contains(&format!("compiling for {atom}")), "clang's own words name the atom: {block}");
    }
    assert!(text.contains("7 failed (atoms: gfx906 gfx90a gfx942 gfx1030 gfx1100 gfx1151 gfx1201)"), "{text}");
    // JSON: the agent contract.
    let o = katlas(d.path(), &["build", "--no-mix", "--format", "json", "--arch", "gfx1100,sm_90"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "katlas.build.v1");
    assert_eq!(v["atoms"], serde_json::json!(["gfx1100", "sm_90"]));
    let jobs = v["jobs"].as_array().unwrap();
    let bad = jobs.iter().find(|j| j["status"] == "failed").unwrap();
    assert_eq!(bad["atom"], "gfx1100");
    assert!(bad["message"].as_str().unwrap().contains("planted_error"));
    assert!(jobs.iter().filter(|j| j["status"] == "cached").count() >= 4, "second run hits the cache");
}

#[test]
fn build_without_a_compiler_exits_3_and_bad_arch_exits_2() {
    let d = fixture();
    let cfg = d.path().join("katlas.toml");
    let text = std::fs::read_to_string(&cfg).unwrap().replace("hip_compiler = \"clang\"", "hip_compiler = \"/nonexistent/clang-99\"");
    std::fs::write(&cfg, text).unwrap();
    let o = katlas(d.path(), &["build", "--arch", "gfx1100"]);
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert!(err(&o).contains("no HIP compiler") && err(&o).contains("gfx1100"), "{}", err(&o));
    let o = katlas(d.path(), &["build", "--arch", "gfx11"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("`gfx11` is not an arch atom"), "{}", err(&o));
    let o = katlas(d.path(), &["build", "--arch", "gfx1100", "--touched", "HEAD"]);
    assert_eq!(o.status.code(), Some(2), "--arch and --touched conflict");
}

#[test]
fn reach_names_the_planted_files_and_exits_1() {
    let d = fixture();
    let o = katlas(d.path(), &["reach"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let t = out(&o);
    assert!(t.contains("kernels/src/attn.gfx1152.hip: chip tag gfx1152 is not in the matrix"), "{t}");
    assert!(t.contains("kernels/src/gemv_prefetch.gfx1201.hip (for gfx1201)"), "{t}");
    let o = katlas(d.path(), &["reach", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "katlas.reach.v1");
    assert_eq!(v["unreached"][0]["file"], "kernels/src/attn.gfx1152.hip");
    assert_eq!(v["undispatched"][0]["file"], "kernels/src/gemv_prefetch.gfx1201.hip");
    // Remove the planted problems: reach passes.
    std::fs::remove_file(d.path().join("kernels/src/attn.gfx1152.hip")).unwrap();
    std::fs::remove_file(d.path().join("kernels/src/gemv_prefetch.gfx1201.hip")).unwrap();
    let o = katlas(d.path(), &["reach"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

#[test]
fn lint_dispatch_flags_capability_variant_and_missing_evidence() {
    let d = fixture();
    let o = katlas(d.path(), &["lint", "dispatch"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let t = out(&o);
    assert!(t.contains("perf-allowlist.toml:13: error[unmeasured-capability-variant]"), "{t}");
    assert!(t.contains("perf-allowlist.toml:20: error[no-evidence]"), "{t}");
    assert!(t.contains("perf-allowlist.toml:28: error[evidence-missing]"), "{t}");
    assert!(t.contains("error[shadowed]"), "{t}");
    let o = katlas(d.path(), &["lint", "dispatch", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "katlas.lint.dispatch.v1");
    assert_eq!(v["summary"]["errors"], 5);
    // Keep only the clean rows (1 and 6): the lint passes.
    let clean =
        "[[perf_allowlist]]\nkernel = \"gemv\"\narch = \"gfx1100\"\nvariant = \"wide\"\nmeasured = true\nevidence = [\"01JFIXTUREGEMVGFX1100WIDE\"]\n\n\
                 [[perf_allowlist]]\nkernel = \"attn\"\narch = \"cdna3\"\nvariant = \"split\"\nmeasured = true\nevidence = [\"01JFIXTUREATTNGFX942SPLIT\"]\n\n\
                 [[perf_allowlist]]\nkernel = \"gemv\"\narch = \"gfx1201\"\nvariant = \"wmma\"\n\n\
                 [[perf_allowlist]]\nkernel = \"silu\"\narch = \"gfx1201\"\nvariant = \"fast\"\n";
    std::fs::write(d.path().join("perf-allowlist.toml"), clean).unwrap();
    let o = katlas(d.path(), &["lint", "dispatch"]);
    assert_eq!(o.status.code(), Some(0), "unmeasured atom rows are warnings:\n{}", out(&o));
    assert!(out(&o).contains("warning[unmeasured-variant]"), "{}", out(&o));
}
