//! `katlas build` on the hipfire-like fixture and on the lab's kernels: the default matrix with
//! clang-22 and NVRTC, compiler errors per atom, the cache, --touched, the ISA manifest and diff.
//! These tests need clang-22 + lld-22 and NVRTC (scripts/fetch-build-tools); without them they fail.

use crate::common;
use common::*;
use katlas_build::compiler::{HipHeaders, HIP_COMPILER_HINT};
use katlas_build::nvrtc;
use katlas_build::touched::{changed_files, touched_atoms};
use katlas_build::{run_build, BuildOptions, BuildReport, JobStatus};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

fn build(dir: &Path, arch: Option<&[&str]>, opts: &BuildOptions) -> BuildReport {
    run_build(&settings(dir, arch), opts, None).unwrap()
}

fn job<'a>(r: &'a BuildReport, atom: &str, file: &str) -> &'a katlas_build::JobResult {
    r.jobs.iter().find(|j| j.atom == atom && j.file.ends_with(file)).unwrap_or_else(|| panic!("no job {atom} {file}"))
}

fn no_mix() -> BuildOptions {
    BuildOptions { mix: false, ..Default::default() }
}

#[test]
fn fixture_compiles_default_matrix_then_caches_by_content_includes_and_flags() {
    require_compilers();
    let d = fixture_project();
    let root = d.path();
    let r = build(root, None, &no_mix());
    let failed: Vec<_> = r.jobs.iter().filter(|j| j.status == JobStatus::Failed).collect();
    assert!(failed.is_empty(), "failures: {failed:#?}");
    assert_eq!(r.atoms, ["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201", "sm_80", "sm_90"]);
    // 7 HIP atoms x (gemv, rmsnorm, silu, attn) + gemv_prefetch for gfx1201 + 2 CUDA atoms x rmsnorm.
    assert_eq!(r.jobs.len(), 7 * 4 + 1 + 2);
    assert_eq!(r.summary.compiled, r.jobs.len());
    assert_eq!(r.compilers.iter().map(|c| c.kind.as_str()).collect::<Vec<_>>(), ["clang", "nvrtc"]);
    assert!(r.compilers.iter().all(|c| c.md5.is_some()), "compiler identity has the binary's md5: {:?}", r.compilers);
    for j in &r.jobs {
        let out = root.join(j.output.as_ref().unwrap());
        assert!(out.is_file(), "{out:?}");
        let log = std::fs::read_to_string(root.join(&j.log)).unwrap();
        assert!(log.starts_with("$ "), "log starts with the command: {log}");
    }
    assert_eq!(job(&r, "gfx1100", "gemv.gfx11.hip").via, "family");
    assert_eq!(job(&r, "gfx1151", "/gemv.hip").via, "base");
    assert_eq!(job(&r, "sm_90", "rmsnorm.sm_90.cu").via, "chip");
    // NVRTC's ptxas report stays in the per-atom log.
    let log = std::fs::read_to_string(root.join(&job(&r, "sm_90", "rmsnorm.sm_90.cu").log)).unwrap();
    assert!(log.contains("registers"), "{log}");

    // The manifest holds one code object per job, each for its own atom.
    let m: katlas_isa::IsaManifest = serde_json::from_slice(&std::fs::read(root.join(r.manifest.as_ref().unwrap())).unwrap()).unwrap();
    assert_eq!(m.objects.len(), r.jobs.len(), "{:#?}", m.errors);
    let obj = m.objects.iter().find(|o| o.path.ends_with("gfx1100/gemv.gfx11.hsaco")).unwrap();
    assert_eq!(obj.arch, "gfx1100");
    assert!(obj.kernels.iter().any(|k| k.name == "gemv"));
    let cu = m.objects.iter().find(|o| o.path.ends_with("sm_90/rmsnorm.sm_90.cubin")).unwrap();
    assert_eq!(cu.arch, "sm_90");
    assert!(r.isa_diff.is_none(), "no previous build, no diff");

    // Second run: everything from the cache, and the ISA diff says nothing changed.
    let r2 = build(root, None, &no_mix());
    assert_eq!(r2.summary.cached, r2.jobs.len(), "{:#?}", r2.summary);
    let diff = r2.isa_diff.as_ref().expect("diff against the previous build");
    assert!(diff.kernels.is_empty() && diff.added.is_empty() && diff.removed.is_empty(), "{diff:#?}");

    // A header edit invalidates exactly the sources that include it.
    let h = root.join("kernels/src/gemv_common.h");
    std::fs::write(&h, std::fs::read_to_string(&h).unwrap() + "\n// touched\n").unwrap();
    let r3 = build(root, None, &no_mix());
    for j in &r3.jobs {
        let gemv = j.kernel == "gemv" || j.kernel == "gemv_prefetch";
        assert_eq!(j.status, if gemv { JobStatus::Compiled } else { JobStatus::Cached }, "{} {}", j.atom, j.file);
    }

    // A resource change shows in the ISA diff: more threads -> more LDS for the gfx1100 gemv.
    let f = root.join("kernels/src/gemv.gfx11.hip");
    std::fs::write(&f, std::fs::read_to_string(&f).unwrap().replace("gemv_body<128, 4>", "gemv_body<512, 4>")).unwrap();
    let r4 = build(root, Some(&["gfx1100"]), &no_mix());
    assert_eq!(r4.atoms, ["gfx1100"]);
    let diff = r4.isa_diff.as_ref().unwrap();
    let k = diff.kernels.iter().find(|k| k.arch == "gfx1100" && k.name == "gemv").expect("gemv changed");
    let lds = k.resources.iter().find(|x| x.field == "lds_bytes").expect("LDS delta");
    assert_eq!((lds.a, lds.b), (Some(512), Some(2048)));
    assert!(diff.removed.is_empty(), "objects of atoms not rebuilt are not 'removed': {diff:#?}");
    // The combined manifest still holds every atom's objects.
    let m: katlas_isa::IsaManifest = serde_json::from_slice(&std::fs::read(root.join(".katlas/build/manifest.json")).unwrap()).unwrap();
    assert_eq!(m.objects.len(), r.jobs.len());

    // Flags are part of the key: a new HIP flag recompiles every HIP job, CUDA stays cached.
    let cfg = root.join("katlas.toml");
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap() + "hip_flags = [\"-DFIXTURE_FLAG=1\"]\n").unwrap();
    let r5 = build(root, None, &no_mix());
    for j in &r5.jobs {
        assert_eq!(j.status, if j.lang == "hip" { JobStatus::Compiled } else { JobStatus::Cached }, "{} {}", j.atom, j.file);
    }
}

#[test]
fn broken_kernel_shows_its_compiler_error_for_every_atom() {
    require_compilers();
    let d = fixture_project();
    let root = d.path();
    write(&root.join("kernels/src/broken.hip"), "#include \"prelude.h\"\nextern \"C\" __global__ void broken(float* y) { y[tid()] = undefined_symbol_hip; }\n");
    write(&root.join("kernels/src/broken.cu"), "extern \"C\" __global__ void broken(float* y) { y[threadIdx.x] = undefined_symbol_cuda; }\n");
    let r = build(root, None, &no_mix());
    let failed: Vec<_> = r.jobs.iter().filter(|j| j.status == JobStatus::Failed).collect();
    assert_eq!(failed.len(), 9, "broken.* fails once per atom: {failed:#?}");
    assert_eq!(r.summary.failed_atoms, r.atoms);
    for j in &failed {
        let want = if j.lang == "hip" { "undefined_symbol_hip" } else { "undefined_symbol_cuda" };
        let msg = j.message.as_deref().unwrap();
        assert!(msg.contains(want) && msg.contains("error"), "{} {}: {msg}", j.atom, j.file);
        assert!(j.file.ends_with(if j.lang == "hip" { "broken.hip" } else { "broken.cu" }));
        let log = std::fs::read_to_string(root.join(&j.log)).unwrap();
        assert!(log.contains(want), "the log keeps the compiler's words: {log}");
        assert!(j.output.is_none());
        if j.lang == "hip" {
            assert!(msg.contains("broken.hip:2"), "clang names file and line: {msg}");
        }
    }
    // Everything else still built.
    assert_eq!(r.summary.compiled, r.jobs.len() - 9);
    // Fixing it compiles only what changed.
    write(&root.join("kernels/src/broken.hip"), "#include \"prelude.h\"\nextern \"C\" __global__ void broken(float* y) { y[tid()] = 1.0f; }\n");
    let r2 = build(root, Some(&["gfx1100", "sm_80"]), &no_mix());
    assert_eq!(job(&r2, "gfx1100", "broken.hip").status, JobStatus::Compiled);
    assert_eq!(job(&r2, "sm_80", "broken.cu").status, JobStatus::Failed);
    assert_eq!(job(&r2, "gfx1100", "silu.hip").status, JobStatus::Cached);
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git must be installed");
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn touched_selects_the_atoms_that_reach_a_change() {
    let d = fixture_project();
    let root = d.path();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    let s = settings(root, None);
    let sources = katlas_build::sources::discover(&s, &s.kernel_roots).unwrap();
    let atoms = |s: &katlas_build::Settings| touched_atoms(s, &sources, "HEAD", &changed_files(&s.root, "HEAD").unwrap()).atoms;
    assert!(atoms(&s).is_empty());
    // A family-tagged file: only gfx1100, never the RDNA 3.5 APU.
    let f = root.join("kernels/src/gemv.gfx11.hip");
    std::fs::write(&f, std::fs::read_to_string(&f).unwrap() + "// edit\n").unwrap();
    assert_eq!(atoms(&s), ["gfx1100"]);
    git(root, &["checkout", "-q", "--", "."]);
    // A header every HIP gemv includes: every HIP atom.
    let h = root.join("kernels/src/gemv_common.h");
    std::fs::write(&h, std::fs::read_to_string(&h).unwrap() + "// edit\n").unwrap();
    assert_eq!(atoms(&s), ["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201"]);
    git(root, &["checkout", "-q", "--", "."]);
    // The gfx9 family file, then a CUDA chip file, then a new untracked family file.
    let g = root.join("kernels/src/rmsnorm.gfx9.hip");
    std::fs::write(&g, std::fs::read_to_string(&g).unwrap() + "// edit\n").unwrap();
    assert_eq!(atoms(&s), ["gfx906", "gfx90a", "gfx942"]);
    git(root, &["checkout", "-q", "--", "."]);
    write(&root.join("kernels/src/silu.gfx12.hip"), "#include \"prelude.h\"\n");
    let sources2 = katlas_build::sources::discover(&s, &s.kernel_roots).unwrap();
    assert_eq!(touched_atoms(&s, &sources2, "HEAD", &changed_files(root, "HEAD").unwrap()).atoms, ["gfx1201"]);
    std::fs::remove_file(root.join("kernels/src/silu.gfx12.hip")).unwrap();
    // A deleted chip file still touches its atom.
    std::fs::remove_file(root.join("kernels/src/rmsnorm.sm_90.cu")).unwrap();
    let sources3 = katlas_build::sources::discover(&s, &s.kernel_roots).unwrap();
    assert_eq!(touched_atoms(&s, &sources3, "HEAD", &changed_files(root, "HEAD").unwrap()).atoms, ["sm_90"]);
    // A bad revision is bad input naming git's complaint.
    let e = changed_files(root, "no-such-rev").unwrap_err();
    assert_eq!(katlas_fs::class::Classify::class(&e), katlas_fs::class::Class::Input);
    assert!(e.to_string().contains("no-such-rev"), "{e}");
}

#[test]
fn touched_build_compiles_only_touched_atoms() {
    require_compilers();
    let d = fixture_project();
    let root = d.path();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    let f = root.join("kernels/src/rmsnorm.sm_90.cu");
    std::fs::write(&f, std::fs::read_to_string(&f).unwrap() + "// edit\n").unwrap();
    let r = build(root, None, &BuildOptions { touched: Some("HEAD".into()), mix: false, ..Default::default() });
    assert_eq!(r.atoms, ["sm_90"]);
    assert_eq!(r.jobs.len(), 1);
    assert_eq!(r.jobs[0].file, "kernels/src/rmsnorm.sm_90.cu");
    assert_eq!(r.touched.as_ref().unwrap().reasons["sm_90"], ["kernels/src/rmsnorm.sm_90.cu"]);
}

/// The lab's own kernels (CUDA + HIP twins) over the default matrix. The lab compiles a chip
/// file beside the base (`gemv_hfq4.sm_90.cu` adds kernels for sm_90), so it uses `tags = "add"`.
#[test]
fn lab_kernels_compile_for_the_default_matrix() {
    require_compilers();
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_dir(&repo_root().join("lab/kernels"), &root.join("lab/kernels"));
    write(&root.join("katlas.toml"), "[project]\nkernel_roots = [\"lab/kernels\"]\n\n[build]\nhip_compiler = \"clang\"\ntags = \"add\"\n");
    let r = build(root, None, &no_mix());
    let failed: Vec<_> = r.jobs.iter().filter(|j| j.status == JobStatus::Failed).collect();
    assert!(failed.is_empty(), "lab kernels failed: {failed:#?}");
    let hip = std::fs::read_dir(root.join("lab/kernels")).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "hip")).count();
    let cu_base = std::fs::read_dir(root.join("lab/kernels"))
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name().to_string_lossy().into_owned();
            n.ends_with(".cu") && n.matches('.').count() == 1
        })
        .count();
    assert_eq!(r.jobs.len(), hip * 7 + cu_base * 2 + 1, "every HIP twin x 7 gfx atoms, every .cu x 2 sm atoms, + the sm_90 file");
    assert_eq!(job(&r, "sm_90", "gemv_hfq4.sm_90.cu").via, "chip");
    assert!(r.jobs.iter().all(|j| !(j.atom == "sm_80" && j.file.ends_with("sm_90.cu"))));
    let m: katlas_isa::IsaManifest = serde_json::from_slice(&std::fs::read(root.join(".katlas/build/manifest.json")).unwrap()).unwrap();
    assert_eq!(m.objects.len(), r.jobs.len());
    for atom in &r.atoms {
        assert!(m.objects.iter().any(|o| &o.arch == atom && o.kernels.iter().any(|k| k.name.contains("rmsnorm"))), "rmsnorm kernels in the {atom} objects");
    }
    // The lab's best kernels of each HIP twin, in every AMD atom's object of that twin.
    for atom in r.atoms.iter().filter(|a| a.starts_with("gfx")) {
        for (stem, must) in
            [("gemv_hfq4", "gemv_hfq4g256_xsu_g4w8"), ("gemv_bf16", "gemv_bf16_r1"), ("attn_decode", "attn_decode_split"), ("rope", "rope_exact")]
        {
            let file = format!("lab/kernels/{stem}.hip");
            let out = job(&r, atom, &file).output.as_deref().unwrap_or_else(|| panic!("{file} on {atom}: no object"));
            let o = m.objects.iter().find(|o| &o.arch == atom && o.path.ends_with(out)).unwrap_or_else(|| panic!("no object for {file} on {atom}"));
            assert!(o.kernels.iter().any(|k| k.name == must), "{must} not in the {atom} object of {file}");
        }
    }
}

/// The compiler's identity is part of the key: the same sources through a different compiler
/// binary (here a wrapper script whose bytes change) recompile; a hung compiler is killed.
#[test]
fn compiler_identity_is_in_the_key_and_a_hung_compiler_is_killed() {
    require_compilers();
    let d = fixture_project();
    let root = d.path();
    let wrapper = root.join("tools/myclang");
    write(&wrapper, "#!/bin/sh\n# v1\nexec clang-22 \"$@\"\n");
    std::process::Command::new("chmod").arg("+x").arg(&wrapper).status().unwrap();
    let cfg = root.join("katlas.toml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, base.replace("hip_compiler = \"clang\"", &format!("hip_compiler = {:?}", wrapper.display().to_string()))).unwrap();
    let r1 = build(root, Some(&["gfx1030"]), &no_mix());
    assert_eq!(r1.summary.compiled, 4, "{:#?}", r1.jobs);
    assert_eq!(build(root, Some(&["gfx1030"]), &no_mix()).summary.cached, 4);
    write(&wrapper, "#!/bin/sh\n# v2: another compiler build\nexec clang-22 \"$@\"\n");
    let r3 = build(root, Some(&["gfx1030"]), &no_mix());
    assert_eq!(r3.summary.compiled, 4, "a changed compiler binary invalidates the cache");
    assert_ne!(r1.compilers[0].md5, r3.compilers[0].md5);

    // A compiler that never finishes: killed at KATLAS_BUILD_TIMEOUT, reported, others unaffected.
    let hang = root.join("tools/hangclang");
    write(&hang, "#!/bin/sh\ncase \"$1\" in --version) echo 'hang clang 1.0'; exit 0;; esac\nsleep 600\n");
    std::process::Command::new("chmod").arg("+x").arg(&hang).status().unwrap();
    std::fs::write(&cfg, base.replace("hip_compiler = \"clang\"", &format!("hip_compiler = {:?}", hang.display().to_string()))).unwrap();
    let mut s = settings(root, Some(&["gfx1030"]));
    s.timeout_s = 2;
    let t0 = std::time::Instant::now();
    let r = run_build(&s, &BuildOptions { jobs: Some(4), mix: false, ..Default::default() }, None).unwrap();
    assert!(t0.elapsed().as_secs() < 60, "hung compiles were killed");
    assert_eq!(r.summary.failed, 4);
    for j in &r.jobs {
        assert!(j.message.as_deref().unwrap().contains("killed after 2s"), "{:?}", j.message);
    }
}

/// hipcc's command line (`--genco --offload-arch=…`), through a stand-in `hipcc` that checks it
/// and forwards to clang-22 (no ROCm here).
#[test]
fn hipcc_is_driven_with_genco_and_offload_arch() {
    require_compilers();
    let d = fixture_project();
    let root = d.path();
    let hipcc = root.join("rocm/bin/hipcc");
    write(
        &hipcc,
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo 'HIP version: 0.0-standin'; exit 0; fi\n\
         [ \"$1\" = \"--genco\" ] || { echo \"standin hipcc: expected --genco first, got $1\" >&2; exit 9; }\n\
         case \"$2\" in --offload-arch=*) ;; *) echo \"standin hipcc: expected --offload-arch, got $2\" >&2; exit 9;; esac\n\
         shift\nexec clang-22 -x hip --offload-device-only --no-gpu-bundle-output -nogpuinc -nogpulib \"$@\"\n",
    );
    std::process::Command::new("chmod").arg("+x").arg(&hipcc).status().unwrap();
    let cfg = root.join("katlas.toml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, base.replace("hip_compiler = \"clang\"", &format!("hip_compiler = {:?}", hipcc.display().to_string()))).unwrap();
    let r = build(root, Some(&["gfx90a"]), &no_mix());
    assert_eq!(r.compilers[0].kind, "hipcc");
    assert_eq!(r.summary.compiled, 4, "{:#?}", r.jobs);
    let log = std::fs::read_to_string(root.join(&job(&r, "gfx90a", "rmsnorm.gfx9.hip").log)).unwrap();
    assert!(log.contains("--genco --offload-arch=gfx90a"), "{log}");
    let m: katlas_isa::IsaManifest = serde_json::from_slice(&std::fs::read(root.join(".katlas/build/manifest.json")).unwrap()).unwrap();
    assert!(m.objects.iter().all(|o| o.arch == "gfx90a") && m.objects.len() == 4);
}

/// One missing toolchain stops only its own jobs: with NVRTC pointed at an empty folder the HIP
/// atoms still build and each CUDA job is `missing_toolchain` with what to install; with no HIP
/// compiler the CUDA atoms build. Either way the build says so and exits 3, unless a compile
/// failed (exit 1 wins).
#[test]
fn a_missing_compiler_stops_only_its_own_atoms() {
    let nvrtc_lib = require_compilers();
    let d = fixture_project();
    let root = d.path();
    let empty = root.join("no-nvrtc-here");
    std::fs::create_dir_all(&empty).unwrap();
    let mut s = settings(root, None);
    s.cuda_compiler = "nvrtc".into();
    s.nvrtc = Some(empty.clone());
    let r = run_build(&s, &no_mix(), None).unwrap();
    let by = |st: JobStatus, lang: &str| r.jobs.iter().filter(|j| j.status == st && j.lang == lang).count();
    assert_eq!(by(JobStatus::Compiled, "hip"), 7 * 4 + 1, "every HIP job built: {:#?}", r.jobs);
    assert_eq!(by(JobStatus::MissingToolchain, "cuda"), 2);
    assert_eq!((r.summary.compiled, r.summary.missing_toolchain, r.summary.failed), (29, 2, 0));
    assert_eq!(r.summary.missing_atoms, ["sm_80", "sm_90"]);
    assert_eq!(r.exit_code(), 3, "atoms left uncompiled: missing environment, not success");
    assert_eq!(r.compilers.iter().map(|c| c.kind.as_str()).collect::<Vec<_>>(), ["clang"]);
    let m = &r.missing_toolchains[..];
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!((m[0].lang.as_str(), m[0].what.as_str(), m[0].jobs), ("cuda", "compiler", 2));
    assert_eq!(m[0].atoms, ["sm_80", "sm_90"]);
    for j in r.jobs.iter().filter(|j| j.lang == "cuda") {
        let msg = j.message.as_deref().unwrap();
        for want in ["pip install nvidia-cuda-nvrtc-cu12", "KATLAS_NVRTC", "[build] nvrtc", "no-nvrtc-here"] {
            assert!(msg.contains(want), "{} {}: no `{want}` in {msg}", j.atom, j.file);
        }
        assert!(!msg.contains("scripts/fetch"), "a user's project has no katlas repo scripts: {msg}");
        assert!(j.output.is_none() && j.key.is_empty());
        let log = std::fs::read_to_string(root.join(&j.log)).unwrap();
        assert!(log.contains("missing toolchain") && log.contains("pip install nvidia-cuda-nvrtc-cu12"), "{log}");
    }
    let hsaco = root.join(job(&r, "gfx1100", "gemv.gfx11.hip").output.clone().unwrap());
    assert!(hsaco.is_file());
    let m: katlas_isa::IsaManifest = serde_json::from_slice(&std::fs::read(root.join(".katlas/build/manifest.json")).unwrap()).unwrap();
    assert_eq!(m.objects.len(), 29, "the manifest holds what was built");

    // The other way round: no HIP compiler, NVRTC found. A broken CUDA source fails: exit 1
    // wins over the missing toolchain.
    write(&root.join("kernels/src/broken.cu"), "extern \"C\" __global__ void broken(float* y) { y[threadIdx.x] = undefined_symbol_cuda; }\n");
    let mut s = settings(root, None);
    s.hip_compiler = root.join("no/clang-99").display().to_string();
    s.cuda_compiler = "nvrtc".into();
    s.nvrtc = Some(nvrtc_lib);
    let r = run_build(&s, &no_mix(), None).unwrap();
    assert_eq!(r.summary.missing_toolchain, 29);
    assert_eq!(r.summary.missing_atoms, ["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201"]);
    assert_eq!((r.summary.compiled, r.summary.failed), (2, 2), "{:#?}", r.jobs);
    assert_eq!(r.exit_code(), 1);
    let hip = r.jobs.iter().find(|j| j.lang == "hip").unwrap();
    assert_eq!(hip.status, JobStatus::MissingToolchain);
    let msg = hip.message.as_deref().unwrap();
    assert!(msg.contains("no HIP compiler") && msg.contains("clang-99") && msg.contains(HIP_COMPILER_HINT), "{msg}");
    assert!(!hsaco.exists(), "out/ keeps only objects this build vouches for");
    std::fs::remove_file(root.join("kernels/src/broken.cu")).unwrap();
    let r = run_build(&s, &no_mix(), None).unwrap();
    assert_eq!((r.summary.cached, r.summary.missing_toolchain, r.exit_code()), (2, 29, 3));
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

/// NVRTC and HIP headers are looked for in the project and in standard install places, never
/// in a folder above the project: a `.cache/` there (`/tmp/.cache`) is anyone's, and NVRTC is
/// dlopened into katlas. The same files inside the project's own `.cache/` are found.
#[test]
fn nvrtc_and_hip_headers_are_not_looked_for_above_the_project() {
    let d = tempfile::tempdir().unwrap();
    let parent = d.path().canonicalize().unwrap();
    let proj = parent.join("proj");
    write(&proj.join("katlas.toml"), "[project]\nkernel_roots = []\n");
    let plant = |base: &Path| {
        let lib = base.join(".cache/nvrtc/x/nvidia/cu13/lib/libnvrtc.so.13");
        write(&lib, "planted");
        write(&base.join(".cache/hip-headers/usr/include/hip/hip_runtime.h"), "// planted\n");
        write(&base.join(".cache/hip-headers/usr/amdgcn/bitcode/ocml.bc"), "planted");
        lib
    };
    let above = plant(&parent);
    let dirs = nvrtc::candidate_dirs(&proj, &no_env);
    assert!(dirs.iter().all(|c| !c.starts_with(parent.join(".cache"))), "{dirs:#?}");
    assert_ne!(nvrtc::locate(&proj, None, &no_env).unwrap(), Some(above.clone()));
    assert!(HipHeaders::candidate_dirs(&proj, &no_env).iter().all(|c| !c.starts_with(parent.join(".cache"))));
    let mut s = settings(&proj, Some(&["gfx1100"]));
    s.hip_headers = None;
    let found = HipHeaders::find(&s).unwrap();
    assert!(found.as_ref().is_none_or(|h| !h.rocm.starts_with(parent.join(".cache"))), "{found:?}");

    // The project's own .cache is a place katlas's scripts fill: found there.
    let own = plant(&proj);
    assert_eq!(nvrtc::locate(&proj, None, &no_env).unwrap(), Some(own));
    assert_eq!(HipHeaders::find(&s).unwrap().map(|h| h.rocm), Some(proj.join(".cache/hip-headers/usr")));
    // An explicit location wins and must hold the library.
    let e = nvrtc::locate(&proj, Some(&proj.join("empty")), &no_env).unwrap_err();
    assert!(e.contains("[build] nvrtc") && e.contains("pip install nvidia-cuda-nvrtc-cu12"), "{e}");
    let env = |k: &str| (k == "KATLAS_NVRTC").then(|| OsString::from(parent.join(".cache/nvrtc/x/nvidia/cu13/lib")));
    assert_eq!(nvrtc::locate(&proj, None, &env).unwrap(), Some(above), "KATLAS_NVRTC names a folder: its library");
}
