//! Through the real binary: `katlas build`, `katlas reach`, `katlas lint dispatch` on the
//! hipfire-like fixture of crates/katlas-build, and `katlas build` on a fresh `katlas init` project. The build tests need clang-22 + lld-22 and
//! NVRTC (scripts/fetch-build-tools); without them they fail with that instruction.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli::{katlas_cmd, repo};

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
    katlas_nvrtc(dir, args, nvrtc().as_deref())
}

/// `katlas` with KATLAS_NVRTC set to `nvrtc`, or unset.
fn katlas_nvrtc(dir: &Path, args: &[&str], nvrtc: Option<&Path>) -> Output {
    let mut c = katlas_cmd(dir);
    // Trust prompts are tested in untrusted_repo.rs.
    c.args(args).env("KATLAS_YES", "1");
    match nvrtc {
        Some(n) => c.env("KATLAS_NVRTC", n),
        None => c.env_remove("KATLAS_NVRTC"),
    };
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

/// A fresh `katlas init` project (kernel_roots = []) with kernels/ holding one header-less HIP
/// kernel and one CUDA kernel, CUDA through NVRTC.
fn init_project(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let o = katlas(dir, &["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let cfg = dir.join("katlas.toml");
    assert!(std::fs::read_to_string(&cfg).unwrap().contains("kernel_roots = []"));
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap() + "\n[build]\ncuda_compiler = \"nvrtc\"\n").unwrap();
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(
        dir.join("kernels/add.hip"),
        "#define __global__ __attribute__((global))\nextern \"C\" __global__ void add_one(float* y) { y[__builtin_amdgcn_workitem_id_x()] += 1.0f; }\n",
    )
    .unwrap();
    std::fs::write(dir.join("kernels/scale.cu"), "extern \"C\" __global__ void scale(float* y) { y[threadIdx.x] *= 2.0f; }\n").unwrap();
}

#[test]
fn build_on_init_defaults_finds_kernels_and_says_so() {
    require_compilers();
    let d = tempfile::tempdir().unwrap();
    init_project(d.path());
    let o = katlas(d.path(), &["build", "--no-mix", "--arch", "gfx1100,sm_90"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), err(&o));
    let t = out(&o);
    assert!(t.contains("kernel roots: kernels (found: no kernel_roots configured"), "{t}");
    assert!(t.contains("2 job(s): 2 built (2 compiled, 0 cached), 0 failed, 0 skipped for a missing toolchain"), "{t}");
    assert!(d.path().join(".katlas/build/out/gfx1100/add.hsaco").is_file() && d.path().join(".katlas/build/out/sm_90/scale.cubin").is_file());
    let o = katlas(d.path(), &["build", "--no-mix", "--arch", "gfx1100,sm_90", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["kernel_roots"].clone(), v["kernel_roots_from"].clone()), (serde_json::json!(["kernels"]), serde_json::json!("discovered")));
}

#[test]
fn missing_nvrtc_builds_the_hip_atoms_and_names_what_to_install() {
    require_compilers();
    let d = tempfile::tempdir().unwrap();
    init_project(d.path());
    let empty = d.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = katlas_nvrtc(d.path(), &["build", "--no-mix"], Some(&empty));
    assert_eq!(o.status.code(), Some(3), "atoms left uncompiled: exit 3\n{}\n{}", out(&o), err(&o));
    let (t, e) = (out(&o), err(&o));
    assert!(t.contains("9 job(s): 7 built (7 compiled, 0 cached), 0 failed, 2 skipped for a missing toolchain (atoms: sm_80 sm_90)"), "{t}");
    assert!(t.contains("missing toolchain: CUDA compiler: 2 job(s) not compiled, for sm_80 sm_90"), "{t}");
    assert!(e.contains("katlas: error: build incomplete: 7 job(s) built, 2 job(s) not compiled for a missing toolchain (atoms: sm_80 sm_90)"), "{e}");
    for want in ["pip install nvidia-cuda-nvrtc-cu12", "KATLAS_NVRTC", "[build] nvrtc", "CUDA toolkit"] {
        assert!(e.contains(want), "no `{want}` in: {e}");
    }
    assert!(!e.contains("scripts/fetch") && !t.contains("scripts/fetch"), "a user's project has no katlas repo scripts: {e}");
    for atom in ["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201"] {
        assert!(d.path().join(format!(".katlas/build/out/{atom}/add.hsaco")).is_file(), "{atom}");
    }
    let o = katlas_nvrtc(d.path(), &["build", "--no-mix", "--format", "json"], Some(&empty));
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let status = |atom: &str| v["jobs"].as_array().unwrap().iter().find(|j| j["atom"] == atom).unwrap()["status"].clone();
    assert_eq!((status("gfx1100"), status("sm_90")), (serde_json::json!("cached"), serde_json::json!("missing_toolchain")));
    assert_eq!(v["summary"]["missing_toolchain"], 2);
    assert!(v["missing_toolchains"][0]["message"].as_str().unwrap().contains("pip install nvidia-cuda-nvrtc-cu12"), "{v}");
    assert!(err(&o).contains("pip install nvidia-cuda-nvrtc-cu12"), "the hint reaches stderr in JSON mode too");
}

/// A libnvrtc planted in a parent folder's .cache (as in /tmp/.cache) is never loaded.
#[test]
fn nvrtc_in_a_parent_cache_is_not_loaded() {
    let d = tempfile::tempdir().unwrap();
    let planted = d.path().join(".cache/nvrtc/x/nvidia/cu13/lib/libnvrtc.so.13");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::write(&planted, "planted: not a library").unwrap();
    let proj = d.path().join("proj");
    init_project(&proj);
    let o = katlas_nvrtc(&proj, &["build", "--no-mix", "--arch", "sm_90", "--format", "json"], None);
    let all = out(&o) + &err(&o);
    let above = d.path().join(".cache").display().to_string();
    assert!(!all.contains(&above), "the planted file was looked at:\n{all}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {all}"));
    match o.status.code() {
        // NVRTC installed in a standard place on this machine: that one, never the planted one.
        Some(0) => assert!(v["compilers"][0]["path"].as_str().is_some_and(|p| !p.starts_with(&above)), "{v}"),
        Some(3) => assert!(v["missing_toolchains"][0]["message"].as_str().unwrap().contains("pip install nvidia-cuda-nvrtc-cu12"), "{v}"),
        c => panic!("exit {c:?}: {all}"),
    }
}

/// `pip install nvidia-cuda-nvrtc…` into the active Python environment is enough: a venv
/// (`VIRTUAL_ENV`) whose site-packages holds the wheel's nvidia/cu13/lib is found, KATLAS_NVRTC unset.
#[test]
fn nvrtc_of_the_active_python_environment_is_found() {
    let found = require_compilers();
    // KATLAS_NVRTC names the library or its folder.
    let lib = if found.is_dir() { found } else { found.parent().unwrap().to_path_buf() };
    assert!(lib.join("libnvrtc.so.13").is_file(), "{} holds no libnvrtc.so.13 (scripts/fetch-nvrtc fetches the CUDA 13 wheel)", lib.display());
    let d = tempfile::tempdir().unwrap();
    let wheel = d.path().join("venv/lib/python3.12/site-packages/nvidia/cu13/lib");
    std::fs::create_dir_all(&wheel).unwrap();
    for e in std::fs::read_dir(&lib).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path(), wheel.join(e.file_name())).unwrap();
    }
    let proj = d.path().join("proj");
    init_project(&proj);
    let mut c = katlas_cmd(&proj);
    c.args(["build", "--no-mix", "--arch", "sm_90", "--format", "json"])
        .env("KATLAS_YES", "1")
        .env_remove("KATLAS_NVRTC")
        .env("VIRTUAL_ENV", d.path().join("venv"));
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), err(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["compilers"][0]["path"].as_str().unwrap(), wheel.join("libnvrtc.so.13").display().to_string());
    assert_eq!(v["jobs"][0]["status"], "compiled");
}
