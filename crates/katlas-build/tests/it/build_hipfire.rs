//! `katlas build` on the real hipfire tree (fixtures/hipfire-tree, MIT) with `preset = "hipfire"`
//! (issue 13, item 6): the preset's matrix, dispatch roots and per-atom rules against what
//! hipfire's own scripts/compile-kernels.sh says and does; HIP headers from
//! scripts/fetch-hip-headers; a subset of real kernels compiled for hipfire's matrix with the
//! `__builtin_amdgcn_sdot4` failures reported per atom.

use katlas_build::build::{run_build_with_skips, Skipped};
use katlas_build::compiler::{HipHeaders, FETCH_HIP_HEADERS, HIP_HEADERS_HINT};
use katlas_build::{BuildOptions, JobStatus, Settings};
use katlas_project::Project;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use katlas_testkit::hipfire_tree::tree;
use katlas_testkit::repo_root;

fn copy_tree(sub: &str, to: &Path) {
    let from = tree().join(sub);
    for e in walkdir::WalkDir::new(&from) {
        let e = e.unwrap();
        let dst = to.join(sub).join(e.path().strip_prefix(&from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// kernels/, scripts/ and crates/ of the tree in a temp project with only the preset set.
fn project(extra: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for sub in ["kernels", "scripts", "crates"] {
        copy_tree(sub, d.path());
    }
    std::fs::write(d.path().join("katlas.toml"), format!("[project]\npreset = \"hipfire\"\n\n[build]\nhip_compiler = \"clang\"\n{extra}")).unwrap();
    d
}

fn script() -> String {
    std::fs::read_to_string(tree().join("scripts/compile-kernels.sh")).unwrap()
}

/// The script's default arch list, parsed here independently of the preset: the `ARCHS=(…)`
/// line of the no-argument branch (`else`).
fn script_archs(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let i = lines.iter().position(|l| l.trim() == "else").expect("the script's `else` branch");
    let l = lines[i + 1].trim();
    let inner = l.strip_prefix("ARCHS=(").and_then(|r| r.strip_suffix(')')).unwrap_or_else(|| panic!("not an ARCHS list: {l}"));
    inner.split_whitespace().map(String::from).collect()
}

/// The script's per-atom rules: `if [ "$arch" =|!= "ATOM" ]; then case "$name" in P1|P2) …`.
/// Returns (op, atom, patterns).
fn script_rules(text: &str) -> Vec<(String, String, Vec<String>)> {
    let re = regex::Regex::new(r#"if \[ "\$arch" (=|!=) "(\w+)" \]; then\s*case "\$name" in\s*([^)\s]+)\)"#).unwrap();
    re.captures_iter(text).map(|c| (c[1].to_string(), c[2].to_string(), c[3].split('|').map(String::from).collect())).collect()
}

/// What compile-kernels.sh itself plans: run it with a stand-in `hipcc` on PATH that records
/// (arch, source) and writes an empty output. Returns (atom, project-relative file) pairs.
fn script_jobs(root: &Path) -> BTreeSet<(String, String)> {
    let bin = root.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let hipcc = bin.join("hipcc");
    std::fs::write(
        &hipcc,
        "#!/bin/sh\narch=; out=; src=\nwhile [ $# -gt 0 ]; do case \"$1\" in --offload-arch=*) arch=${1#--offload-arch=};; -o) out=$2; shift;; \
         *.hip) src=$1;; esac; shift; done\necho \"$arch $src\" >> \"$HIPCC_LOG\"\n: > \"$out\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&hipcc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let log = root.join("hipcc.log");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let o = std::process::Command::new("bash")
        .arg(root.join("scripts/compile-kernels.sh"))
        .env("PATH", path)
        .env("HIPCC_LOG", &log)
        .env("JOBS", "2")
        .output()
        .unwrap();
    assert!(o.status.success(), "compile-kernels.sh with a stand-in hipcc: {}", String::from_utf8_lossy(&o.stdout));
    let prefix = format!("{}/", root.canonicalize().unwrap().display());
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, f) = l.split_once(' ').unwrap();
            let f = std::fs::canonicalize(f).unwrap().display().to_string();
            (a.to_string(), f.strip_prefix(&prefix).unwrap().to_string())
        })
        .collect()
}

/// What katlas plans for the matrix: resolution, then the `[[build.rule]]`s.
fn katlas_jobs(s: &Settings) -> (BTreeSet<(String, String)>, Vec<Skipped>) {
    let sources = katlas_build::sources::discover(s, &s.kernel_roots).unwrap();
    let mut skipped = Vec::new();
    let mut jobs = BTreeSet::new();
    for r in katlas_build::resolve::resolve(s, &sources, &s.matrix) {
        match s.blocking_rule(&r.kernel, &r.file, &r.atom) {
            Some(rule) => skipped.push(Skipped { atom: r.atom, kernel: r.kernel, file: r.file, reason: rule.reason.clone().unwrap_or_default() }),
            None => {
                jobs.insert((r.atom, r.file));
            }
        }
    }
    (jobs, skipped)
}

/// Issue 13.6 (1): the preset carries hipfire's matrix (compile-kernels.sh's default ARCHS),
/// its dispatch roots, and its per-atom rules as `[[build.rule]]`s; with them katlas plans the
/// same (atom, file) jobs as the script itself, apart from hipfire's family rule (reach's
/// business) and variant files that have no base file.
#[test]
fn preset_carries_compile_kernels_matrix_rules_and_plans_the_same_jobs() {
    let text = script();
    let d = project("");
    let s = Settings::load(&Project::open(d.path()).unwrap(), None).unwrap();
    let archs = script_archs(&text);
    assert_eq!(archs.len(), 6, "{archs:?}");
    assert_eq!(s.matrix, archs, "the preset's matrix is compile-kernels.sh's default ARCHS");
    assert_eq!(s.kernel_roots, [s.root.join("kernels/src")]);
    assert_eq!(s.dispatch_roots, [s.root.join("crates")]);

    let rules = script_rules(&text);
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert_eq!(s.rules.len(), rules.len());
    for (op, atom, pats) in &rules {
        let r = s.rules.iter().find(|r| r.files.list() == pats.as_slice()).unwrap_or_else(|| panic!("no preset rule for {pats:?}: {:#?}", s.rules));
        match op.as_str() {
            "=" => assert!(r.exclude_atoms == [atom.clone()] && r.only_atoms.is_empty(), "{r:?}"),
            _ => assert!(r.only_atoms == [atom.clone()] && r.exclude_atoms.is_empty(), "{r:?}"),
        }
    }

    // Behaviour, not only values: the script's own job list (stand-in hipcc) against katlas's plan.
    let theirs = script_jobs(d.path());
    let (ours, skipped) = katlas_jobs(&s);
    assert!(theirs.len() > 1500, "{}", theirs.len());
    assert!(skipped.iter().any(|k| k.atom == "gfx906" && k.kernel == "gemv_mq8g256"));
    assert!(skipped.iter().any(|k| k.atom == "gfx1100" && k.file.ends_with("_dp4a.hip")));
    assert!(!ours.iter().any(|(a, f)| a == "gfx906" && f.contains("_wmma")), "no WMMA kernel for gfx906");
    let only_script: Vec<_> = theirs.difference(&ours).collect();
    let only_katlas: Vec<_> = ours.difference(&theirs).collect();
    // Every difference is a tagged file (the family rule or a missing base), never a rule.
    let tagged = |f: &str| regex::Regex::new(r"\.gfx[0-9a-z]+\.hip$").unwrap().is_match(f);
    let base_of = |f: &str| regex::Regex::new(r"\.gfx[0-9a-z]+\.hip$").unwrap().replace(f, ".hip").to_string();
    for (a, f) in &only_script {
        assert!(
            tagged(f) || ours.contains(&(a.clone(), f.clone())) || only_katlas.iter().any(|(b, g)| b == a && base_of(g) == *f),
            "hipfire compiles {f} for {a}, katlas does not"
        );
    }
    for (a, f) in &only_katlas {
        assert!(tagged(f), "katlas compiles {f} for {a}, hipfire does not");
    }
}

/// `[[build.rule]]` in katlas.toml: validated (unknown atom is bad input naming the key) and
/// applied before the preset's.
#[test]
fn build_rules_are_config_and_validated() {
    let d = project("\n[[build.rule]]\nfiles = \"rmsnorm*\"\nexclude_atoms = [\"gfx1030\"]\n");
    let s = Settings::load(&Project::open(d.path()).unwrap(), None).unwrap();
    assert_eq!(s.rules.len(), 3);
    assert!(s.blocking_rule("rmsnorm", "kernels/src/rmsnorm.hip", "gfx1030").is_some());
    assert!(s.blocking_rule("rmsnorm", "kernels/src/rmsnorm.hip", "gfx1100").is_none());
    let bad = project("\n[[build.rule]]\nfiles = \"x*\"\nonly_atoms = [\"gfx11\"]\n");
    let e = Settings::load(&Project::open(bad.path()).unwrap(), None).unwrap_err().to_string();
    assert!(e.contains("build.rule[0].only_atoms") && e.contains("`gfx11` is not an arch atom"), "{e}");
    let none = project("\n[[build.rule]]\nfiles = \"x*\"\n");
    let e = Settings::load(&Project::open(none.path()).unwrap(), None).unwrap_err().to_string();
    assert!(e.contains("needs exclude_atoms or only_atoms"), "{e}");
}

/// A real HIP source without headers (bare clang): its jobs are `missing_toolchain` with what
/// a user installs (ROCm's HIP SDK, or `[build] hip_headers` / KATLAS_HIP_HEADERS), nothing of
/// it compiled, while a header-less source beside it still builds; exit 3.
#[test]
fn missing_hip_headers_skip_only_the_sources_that_need_them() {
    let clang = katlas_build::compiler::which("clang-22");
    assert!(clang.is_some(), "clang-22 is not installed: run `scripts/fetch-build-tools`");
    let d = project("");
    let p = Project::open(d.path()).unwrap();
    let mut s = Settings::load(&p, Some(&["gfx1100".to_string()])).unwrap();
    s.hip_headers = None; // KATLAS_HIP_HEADERS may be set
    assert!(HipHeaders::find(&s).unwrap().is_none(), "HIP headers installed on this machine (ROCm in /opt/rocm or /usr): this test needs none");
    let own = d.path().join("kernels/src/own_prelude.hip");
    std::fs::write(&own, "#define __global__ __attribute__((global))\nextern \"C\" __global__ void own_prelude(float* y) { y[0] = 1.0f; }\n").unwrap();
    let opts = BuildOptions { paths: vec![d.path().join("kernels/src/add.hip"), own], ..Default::default() };
    let (r, _) = run_build_with_skips(&s, &opts, None).unwrap();
    assert_eq!(r.exit_code(), 3);
    let add = r.jobs.iter().find(|j| j.file == "kernels/src/add.hip").unwrap();
    assert_eq!(add.status, JobStatus::MissingToolchain);
    let m = add.message.as_deref().unwrap();
    assert!(m.contains("kernels/src/add.hip") && m.contains("hip/") && m.contains(HIP_HEADERS_HINT), "{m}");
    assert!(!m.contains(FETCH_HIP_HEADERS), "a user's project has no katlas repo scripts: {m}");
    assert_eq!(r.missing_toolchains.len(), 1);
    assert_eq!((r.missing_toolchains[0].what.as_str(), r.missing_toolchains[0].atoms.clone()), ("hip_headers", vec!["gfx1100".to_string()]));
    assert!(!d.path().join(".katlas/build/out/gfx1100/add.hsaco").exists());
    let own = r.jobs.iter().find(|j| j.file == "kernels/src/own_prelude.hip").unwrap();
    assert_eq!(own.status, JobStatus::Compiled, "{:?}", own.message);

    // An explicit location that holds no headers says so.
    s.hip_headers = Some(d.path().join("nowhere"));
    let (r, _) = run_build_with_skips(&s, &opts, None).unwrap();
    assert_eq!(r.exit_code(), 3);
    let m = &r.missing_toolchains[0].message;
    assert!(m.contains("nowhere") && m.contains("[build] hip_headers") && m.contains(HIP_HEADERS_HINT), "{m}");
}

/// The headers scripts/fetch-hip-headers put in .cache/hip-headers (KATLAS_HIP_HEADERS wins).
fn fetched_headers() -> PathBuf {
    let dir = std::env::var_os("KATLAS_HIP_HEADERS").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cache/hip-headers"));
    if let Err(e) = HipHeaders::at(&dir) {
        panic!("HIP headers are missing ({e}): this test compiles real hipfire kernels with clang-22. Run `{FETCH_HIP_HEADERS}` (needs network to deb.debian.org) or set KATLAS_HIP_HEADERS");
    }
    dir
}

/// Issue 13.6 (3): a handful of real kernels for hipfire's matrix with the fetched headers:
/// exactly the jobs hipfire's script runs for them, all compile except gemv_mq8g256 where the
/// atom lacks dot1-insts (gfx1010, gfx1100, gfx1200, gfx1201: `__builtin_amdgcn_sdot4`), each
/// failure reported with its atom, file and the compiler's message.
#[test]
fn real_kernels_compile_for_hipfire_matrix_and_sdot4_fails_per_atom() {
    let clang = katlas_build::compiler::which("clang-22");
    assert!(clang.is_some(), "clang-22 is not installed: run `scripts/fetch-build-tools`");
    let headers = fetched_headers();
    let d = project("");
    let p = Project::open(d.path()).unwrap();
    let mut s = Settings::load(&p, None).unwrap();
    s.hip_headers = Some(headers);
    let files = ["gemv_mq8g256.hip", "add.hip", "gemm_hfq4g256_wave64_dp4a.hip", "rmsnorm.hip"];
    let src = d.path().canonicalize().unwrap().join("kernels/src");
    let opts = BuildOptions { paths: files.iter().map(|f| src.join(f)).collect(), ..Default::default() };
    let (r, skipped) = run_build_with_skips(&s, &opts, None).unwrap();

    let theirs: BTreeSet<(String, String)> =
        script_jobs(d.path()).into_iter().filter(|(_, f)| files.iter().any(|x| f == &format!("kernels/src/{x}"))).collect();
    let ours: BTreeSet<(String, String)> = r.jobs.iter().map(|j| (j.atom.clone(), j.file.clone())).collect();
    assert_eq!(ours, theirs, "katlas builds exactly the jobs compile-kernels.sh runs for these files");
    assert!(skipped.iter().any(|k| k.atom == "gfx906" && k.file == "kernels/src/gemv_mq8g256.hip"));
    assert_eq!(skipped.iter().filter(|k| k.file.ends_with("_dp4a.hip")).count(), 5, "{skipped:?}");

    let failed: BTreeSet<(&str, &str)> = r.jobs.iter().filter(|j| j.status == JobStatus::Failed).map(|j| (j.atom.as_str(), j.file.as_str())).collect();
    let want: BTreeSet<(&str, &str)> = ["gfx1010", "gfx1100", "gfx1200", "gfx1201"].iter().map(|a| (*a, "kernels/src/gemv_mq8g256.hip")).collect();
    let msgs: Vec<String> =
        r.jobs.iter().filter(|j| j.status == JobStatus::Failed).map(|j| format!("{} {}: {}", j.atom, j.file, j.message.as_deref().unwrap_or(""))).collect();
    assert_eq!(failed, want, "{}", msgs.join("\n"));
    for j in r.jobs.iter().filter(|j| j.status == JobStatus::Failed) {
        let m = j.message.as_deref().unwrap();
        assert!(m.contains("'__builtin_amdgcn_sdot4' needs target feature dot1-insts") && m.contains(&format!("compiling for {}", j.atom)), "{}: {m}", j.atom);
        let log = std::fs::read_to_string(d.path().join(&j.log)).unwrap();
        assert!(log.contains("--rocm-path=") && log.contains("-D__AMDGCN_WAVEFRONT_SIZE=32") && log.contains("dot1-insts"), "{log}");
    }
    assert_eq!(r.summary.failed_atoms, ["gfx1010", "gfx1100", "gfx1200", "gfx1201"]);
    let ok = |a: &str, f: &str| r.jobs.iter().any(|j| j.atom == a && j.file == format!("kernels/src/{f}") && j.status == JobStatus::Compiled);
    assert!(ok("gfx1030", "gemv_mq8g256.hip"), "gfx1030 has dot1-insts");
    assert!(ok("gfx906", "gemm_hfq4g256_wave64_dp4a.hip"));
    for a in &s.matrix {
        assert!(ok(a, "add.hip") && ok(a, "rmsnorm.hip"), "{a}");
    }
    let log906 = std::fs::read_to_string(d.path().join(".katlas/build/logs/gfx906/add.log")).unwrap();
    assert!(log906.contains("-D__AMDGCN_WAVEFRONT_SIZE=64"), "{log906}");
    // The code objects are real: the ISA scan read them.
    assert!(r.manifest.is_some() && r.isa_errors.is_empty(), "{:?}", r.isa_errors);
}
