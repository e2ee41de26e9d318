//! The `katlas-lab` binary end to end: the CPU backend, its rows and metric lines, exit codes,
//! and the two compile paths (NVRTC to sm_90 cubins, clang-22 to AMD code objects) read back
//! with katlas-isa.

use katlas_model::row::Row;
use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_katlas-lab"))
}

use katlas_testkit::repo_root;

fn metric_keys(line: &str) -> Vec<String> {
    line.split_whitespace().skip(2).filter_map(|kv| kv.split_once('=')).map(|(k, _)| k.to_string()).collect()
}

#[test]
fn cpu_backend_runs_the_workload_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.jsonl");
    let out = bin()
        .args(["--backend", "cpu", "--kernel", "gemv_hfq4g256$|rmsnorm", "--shapes", "64x512", "--samples", "3", "--format", "collect", "--rows-out"])
        .arg(&rows)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let metrics: Vec<&str> = stdout.lines().filter(|l| l.starts_with("KATLAS_METRIC ")).collect();
    let json: Vec<Row> = stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).expect("a katlas.row.v1 line")).collect();
    // 1 shape: the GEMV in scalar, par and r4; rmsnorm in scalar and par (no multi-row form)
    assert_eq!(metrics.len(), 5, "{stdout}");
    assert_eq!(json.len(), 5);
    for r in &json {
        assert_eq!(r.schema, "katlas.row.v1");
        assert_eq!(r.workload, "lab-decode");
        assert_eq!(r.shape_bucket.as_deref(), Some("64x512"));
        let k = &r.kernels[0];
        assert!(k.bytes.unwrap() > 0.0 && k.flops.unwrap() > 0.0 && k.median_us.unwrap() > 0.0);
        assert!(r.metric("copy_pct").is_some() && r.metric("achieved_gbps").unwrap() > 0.0);
        assert!(r.metric("max_rel").unwrap() < 1e-3);
        // CPU time per call, the demo's metric: present and positive on every CPU row
        assert!(r.metric("cpu_min_us").unwrap() > 0.0 && r.metric("cpu_median_us").unwrap() >= r.metric("cpu_min_us").unwrap());
    }
    // 4-bit GEMV bytes: packed weights + scales + x + y
    let g = json.iter().find(|r| r.params["kernel"] == "gemv_hfq4g256").unwrap();
    assert_eq!(g.kernels[0].bytes.unwrap(), (64 * 2 * 136 + 512 * 4 + 64 * 4) as f64);
    let file: Vec<Row> = std::fs::read_to_string(&rows).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(file.len(), 5);
}

#[test]
fn two_variants_print_the_same_metric_keys() {
    let run = |variant: &str| {
        let out = bin()
            .args(["--backend", "cpu", "--kernel", "gemv_hfq4g256$", "--variant", variant, "--shapes", "32x512", "--samples", "2", "--format", "collect"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let s = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = s.lines().find(|l| l.starts_with("KATLAS_METRIC gemv_hfq4g256 ")).unwrap().to_string();
        assert!(line.contains(&format!("variant={variant} ")), "{line}");
        metric_keys(&line)
    };
    assert_eq!(run("scalar"), run("par"));
    assert_eq!(run("scalar"), run("r4"));
}

/// The one-thread multi-row variant exists only where it has a form: a family without one is
/// not silently timed as the scalar code under another name.
#[test]
fn multirow_cpu_variant_is_offered_only_for_the_4bit_gemvs() {
    let out = bin().args(["--backend", "cpu", "--kernel", "rmsnorm", "--variant", "r4", "--shapes", "2x256", "--samples", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let list = String::from_utf8_lossy(&bin().arg("list").output().unwrap().stdout).into_owned();
    let section = |fam: &str| list.split("\n").skip_while(|l| !l.starts_with(fam)).skip(1).take_while(|l| l.starts_with(' ')).collect::<Vec<_>>().join("\n");
    assert!(section("gemv_hfq4g256 ").contains("r4 "), "{list}");
    assert!(!section("rmsnorm").contains("r4 "), "{list}");
}

#[test]
fn missing_cuda_driver_is_a_clear_exit_3() {
    let out = bin().env("KATLAS_CUDA_LIB", "/nonexistent/libcuda.so.1").args(["--backend", "cuda", "--kernel", "rope"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("no CUDA driver"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_exit_2() {
    let out = bin().args(["--backend", "cpu", "--kernel", "gemv_hfq4g256$", "--shapes", "64x300"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("64x300"));
    let out = bin().args(["--backend", "cpu", "--shapes", "64by512"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bin().args(["--backend", "cpu", "--variant", "no_such_variant"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn script(name: &str, arg: Option<&Path>, env: &[(&str, &str)]) -> String {
    let mut c = Command::new(repo_root().join("scripts").join(name));
    if let Some(a) = arg {
        c.arg(a);
    }
    c.envs(env.iter().copied());
    let out = c.output().unwrap_or_else(|e| panic!("scripts/{name} could not run: {e}"));
    assert!(out.status.success(), "scripts/{name} failed ({:?}): {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_string()
}

#[test]
fn cuda_kernels_compile_to_sm90_cubins_with_the_nvrtc_wheel() {
    // scripts/fetch-nvrtc downloads NVIDIA's nvidia-cuda-nvrtc wheel from PyPI into .cache/.
    let lib = script("fetch-nvrtc", None, &[]);
    let dir = tempfile::tempdir().unwrap();
    let out = bin().env("KATLAS_NVRTC", &lib).args(["compile", "--arch", "sm_90", "--out-dir"]).arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let mut kernels = std::collections::BTreeMap::new();
    for (file, _) in katlas_lab::kernels::SOURCES {
        let path = dir.path().join(format!("{file}.sm_90.cubin"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&bytes[..4], b"\x7fELF");
        let (objs, errs) = katlas_isa::scan_bytes(&path.display().to_string(), bytes);
        assert!(errs.is_empty(), "{file}: {errs:?}");
        for o in objs {
            assert_eq!(o.arch, "sm_90", "{file}");
            for k in o.kernels {
                kernels.insert(k.name.clone(), k);
            }
        }
        let log = std::fs::read_to_string(dir.path().join(format!("{file}.sm_90.ptxas.log"))).unwrap();
        assert!(log.contains("registers"), "{file}: ptxas -v report missing");
    }
    // Every variant's function, at every default shape, is in a cubin.
    for v in katlas_lab::kernels::VARIANTS {
        for sh in v.family.default_shapes(true) {
            let (f, _, _) = v.resolve(sh).unwrap();
            assert!(kernels.contains_key(&f), "{f} not in the cubins");
        }
    }
    // The best 4-bit kernels do not spill.
    for f in ["gemv_hfq4g256_xsu_g4w8", "gemv_hfq4g256_xsu_g2w8", "gemv_hfq4g256_xq_g4w8", "gemv_bf16_r1"] {
        let line = stdout.lines().find(|l| l.split_whitespace().nth(1) == Some(f)).unwrap_or_else(|| panic!("{f} missing from:\n{stdout}"));
        assert!(line.contains("spill_stores=0 spill_loads=0"), "{line}");
    }
}

/// The lab's own header-less HIP build (scripts/build-lab-hip) on one target. Every twin on every
/// AMD atom of the default matrix is katlas-build's test (`lab_kernels_compile_for_the_default_matrix`),
/// which looks for the same kernels in each object: compiling the 64-variant gemv_hfq4 for four
/// targets here as well cost a minute of the suite.
#[test]
fn hip_twins_compile_header_less_with_the_labs_script() {
    // Needs clang-22 (apt-get install -y clang-22 lld-22 llvm-22); scripts/build-lab-hip exits 3 without it.
    let dir = tempfile::tempdir().unwrap();
    let arch = "gfx1100";
    script("build-lab-hip", Some(dir.path()), &[("LAB_HIP_ARCHS", arch)]);
    let made = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(
        made,
        std::fs::read_dir(repo_root().join("lab/kernels")).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "hip")).count()
    );
    for (stem, must) in [("gemv_hfq4", "gemv_hfq4g256_xsu_g4w8"), ("gemv_bf16", "gemv_bf16_r1"), ("attn_decode", "attn_decode_split"), ("rope", "rope_exact")] {
        let path = dir.path().join(format!("{stem}.{arch}.hsaco"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (objs, errs) = katlas_isa::scan_bytes(&path.display().to_string(), bytes);
        assert!(errs.is_empty(), "{}: {errs:?}", path.display());
        assert_eq!(objs.len(), 1);
        assert_eq!(objs[0].arch, arch);
        assert!(objs[0].kernels.iter().any(|k| k.name == must), "{must} not in {}", path.display());
    }
}
