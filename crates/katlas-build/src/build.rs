//! `katlas build`: compile every (kernel, atom) of the matrix in parallel through a content
//! cache, keep each compiler log per (file, atom), scan the outputs into a `katlas.isa.v1`
//! manifest and diff it against the previous build's.
//!
//! Layout under `.katlas/build/`: `cache/<key>/{object,log.txt}` (key = md5 of compiler
//! identity, flags, atom, source and every transitively included file), `out/<atom>/<name>.{hsaco,cubin}`,
//! `logs/<atom>/<name>.log`, `manifest.json` (all current outputs) and `last.json` (this report).

use crate::compiler::{Compiler, CompilerId, Kind, HIP_HEADERS_HINT};
use crate::config::{RootsFrom, Settings};
use crate::error::{BuildError, Result};
use crate::includes::includes;
use crate::resolve::{resolve, Resolution};
use crate::sources::{discover, Lang, Source};
use crate::touched::{changed_files, touched_atoms, Touched};
use katlas_isa::diff::IsaDiff;
use katlas_isa::IsaManifest;
use katlas_model::digest::{md5_hex, Md5Builder};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

pub const BUILD_SCHEMA: &str = "katlas.build.v1";
/// Bumped when the cache layout or key recipe changes.
const CACHE_VERSION: &str = "katlas.build.cache.v1";

#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// `--touched REV`.
    pub touched: Option<String>,
    /// Restrict to sources at or under these paths.
    pub paths: Vec<PathBuf>,
    /// Parallel compiles (default: `[build] jobs`, else the machine's cores).
    pub jobs: Option<usize>,
    /// Disassemble outputs for the instruction mix (needs llvm-objdump / nvdisasm).
    pub mix: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Compiled,
    Cached,
    Failed,
    /// Not compiled: its language's compiler (or, for a bare clang and a source that includes
    /// `hip/…`, the HIP headers) is not installed. `message` says what to install.
    MissingToolchain,
}

/// One (file, atom) compile.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobResult {
    pub atom: String,
    pub kernel: String,
    /// Source file, project-relative.
    pub file: String,
    /// How the atom reached the file: `chip`, `family`, `base`.
    pub via: String,
    pub lang: String,
    pub status: JobStatus,
    /// Code object, project-relative (absent on failure or a missing toolchain).
    #[serde(default)]
    pub output: Option<String>,
    /// The compiler log of this (file, atom), project-relative.
    pub log: String,
    /// Cache key (md5; empty for a missing toolchain).
    pub key: String,
    pub duration_ms: u64,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// On failure: everything the compiler said (the log without the command line); for a
    /// missing toolchain: what is missing and how to install it.
    #[serde(default)]
    pub message: Option<String>,
}

/// One toolchain this build lacked, with the jobs it kept from compiling.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MissingToolchain {
    /// `hip` or `cuda`.
    pub lang: String,
    /// `compiler`, or `hip_headers` (a bare clang without HIP headers, for sources that include `hip/…`).
    pub what: String,
    /// Atoms with jobs left uncompiled.
    pub atoms: Vec<String>,
    pub jobs: usize,
    /// What is missing, where katlas looked, and what to install or configure.
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BuildSummary {
    pub jobs: usize,
    pub compiled: usize,
    pub cached: usize,
    pub failed: usize,
    /// Atoms with at least one failed compile.
    pub failed_atoms: Vec<String>,
    /// Jobs not compiled for a missing toolchain.
    #[serde(default)]
    pub missing_toolchain: usize,
    /// Atoms with at least one job not compiled for a missing toolchain.
    #[serde(default)]
    pub missing_atoms: Vec<String>,
    pub elapsed_ms: u64,
}

/// `katlas.build.v1`: what one `katlas build` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BuildReport {
    pub schema: String,
    pub created_at: String,
    /// The configured matrix.
    pub matrix: Vec<String>,
    /// Atoms this build compiled for.
    pub atoms: Vec<String>,
    /// The kernel roots read, project-relative.
    #[serde(default)]
    pub kernel_roots: Vec<String>,
    /// Where they came from (`discovered`: none configured, the defaults provenance uses).
    #[serde(default)]
    pub kernel_roots_from: Option<RootsFrom>,
    #[serde(default)]
    pub touched: Option<Touched>,
    pub compilers: Vec<CompilerId>,
    /// Toolchains not found, with the jobs they kept from compiling (those jobs are
    /// `missing_toolchain`; every other job was compiled).
    #[serde(default)]
    pub missing_toolchains: Vec<MissingToolchain>,
    pub jobs: Vec<JobResult>,
    pub summary: BuildSummary,
    /// The `katlas.isa.v1` manifest of all current outputs, project-relative.
    #[serde(default)]
    pub manifest: Option<String>,
    /// Per-kernel resource and mix changes against the previous build (same outputs only).
    #[serde(default)]
    pub isa_diff: Option<IsaDiff>,
    /// Problems scanning the outputs (they never hide compile results).
    #[serde(default)]
    pub isa_errors: Vec<String>,
}

impl BuildReport {
    /// Exit code of the CLI contract: 1 when a compile failed (a finding about the code that
    /// stands whatever gets installed), else 3 when a job was not compiled for a missing
    /// toolchain (the matrix was not checked: missing environment), else 0.
    pub fn exit_code(&self) -> u8 {
        if self.summary.failed > 0 {
            1
        } else if self.summary.missing_toolchain > 0 {
            3
        } else {
            0
        }
    }
}

/// A (file, atom) pair resolution picked but a `[[build.rule]]` keeps from compiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub atom: String,
    pub kernel: String,
    pub file: String,
    /// The rule's `reason`, else its patterns.
    pub reason: String,
}

/// True when the source or a file it includes (quoted) includes a `hip/…` header: it needs
/// real HIP headers, which a bare clang does not have.
pub fn needs_hip_headers(src: &Path, include_dirs: &[PathBuf]) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r#"(?m)^[ \t]*#[ \t]*include[ \t]*[<"]hip/"#).expect("valid regex"));
    let inc = includes(src, include_dirs);
    std::iter::once(src.to_path_buf()).chain(inc.files).any(|f| std::fs::read(&f).is_ok_and(|b| re.is_match(&String::from_utf8_lossy(&b))))
}

struct Planned<'a> {
    /// Index of the resolution: jobs are reported in resolution order.
    idx: usize,
    res: Resolution,
    src: &'a Source,
    compiler: &'a Compiler,
    flags: Vec<String>,
    key: String,
    out: PathBuf,
    log: PathBuf,
}

fn cache_key(s: &Settings, c: &Compiler, atom: &str, flags: &[String], src: &Source) -> String {
    let mut h = Md5Builder::new();
    let line = |h: &mut Md5Builder, t: &str| {
        h.update(t.as_bytes()).update(b"\n");
    };
    line(&mut h, CACHE_VERSION);
    line(&mut h, &serde_json::to_string(&c.id).expect("serialises"));
    line(&mut h, atom);
    for f in flags {
        line(&mut h, &format!("flag {f}"));
    }
    let digest_of = |p: &Path| std::fs::read(p).map(|b| md5_hex(&b)).unwrap_or_else(|e| format!("unreadable: {e}"));
    line(&mut h, &format!("source {} {}", src.file, digest_of(&src.path)));
    let inc = includes(&src.path, &s.include_dirs);
    for f in &inc.files {
        line(&mut h, &format!("include {} {}", s.rel(f), digest_of(f)));
    }
    for m in &inc.missing {
        line(&mut h, &format!("missing {m}"));
    }
    if let Some(hh) = c.hip_headers.as_ref().filter(|_| flags.iter().any(|f| f.starts_with("--rocm-path="))) {
        line(&mut h, &format!("hip headers {}", hh.stamp));
    }
    h.finish()
}

/// Called as each job finishes: (job, done count, total).
pub type Progress = dyn Fn(&JobResult, usize, usize) + Sync;

/// Run one build. `progress` sees each job as it finishes (done count, total).
pub fn run_build(s: &Settings, opts: &BuildOptions, progress: Option<&Progress>) -> Result<BuildReport> {
    run_build_with_skips(s, opts, progress).map(|(r, _)| r)
}

/// [`run_build`], also returning the (file, atom) pairs `[[build.rule]]`s kept from compiling.
pub fn run_build_with_skips(s: &Settings, opts: &BuildOptions, progress: Option<&Progress>) -> Result<(BuildReport, Vec<Skipped>)> {
    let started = Instant::now();
    let paths: Vec<PathBuf> = opts.paths.iter().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())).collect();
    for (p, orig) in paths.iter().zip(&opts.paths) {
        if !p.exists() {
            return Err(BuildError::BadInput(format!("{}: no such file or directory", orig.display())));
        }
    }
    // Configured roots bound PATH; discovered ones do not: a PATH outside them is a root too.
    let mut roots = s.kernel_roots.clone();
    if s.kernel_roots_from == RootsFrom::Discovered {
        for p in &paths {
            if !roots.iter().any(|r| p.starts_with(r)) {
                roots.push(if p.is_dir() { p.clone() } else { p.parent().map(Path::to_path_buf).unwrap_or_default() });
            }
        }
    }
    let sources = discover(s, &roots)?;
    let selected = |src: &Source| paths.is_empty() || paths.iter().any(|p| src.path.starts_with(p));
    if sources.iter().filter(|x| selected(x)).count() == 0 {
        return Err(BuildError::BadInput(format!(
            "no kernel sources (.{} / .{}) under {}",
            s.hip_extensions.join(", ."),
            s.cuda_extensions.join(", ."),
            if paths.is_empty() { &roots } else { &paths }.iter().map(|p| s.rel(p)).collect::<Vec<_>>().join(", ")
        )));
    }
    let touched = match &opts.touched {
        Some(rev) => Some(touched_atoms(s, &sources, rev, &changed_files(&s.root, rev)?)),
        None => None,
    };
    let atoms: Vec<String> = match &touched {
        Some(t) => t.atoms.clone(),
        None => s.matrix.clone(),
    };
    let resolutions: Vec<Resolution> = resolve(s, &sources, &atoms).into_iter().filter(|r| sources.iter().any(|x| x.file == r.file && selected(x))).collect();
    let mut skipped = Vec::new();
    let resolutions: Vec<Resolution> = resolutions
        .into_iter()
        .filter(|r| match s.blocking_rule(&r.kernel, &r.file, &r.atom) {
            None => true,
            Some(rule) => {
                let reason = rule.reason.clone().unwrap_or_else(|| format!("[[build.rule]] files = {:?}", rule.files.list()));
                skipped.push(Skipped { atom: r.atom.clone(), kernel: r.kernel.clone(), file: r.file.clone(), reason });
                false
            }
        })
        .collect();

    let bdir = s.build_dir();
    let cache_dir = bdir.join("cache");
    katlas_fs::create_dir_all(&cache_dir).map_err(|e| BuildError::io(&cache_dir, e))?;
    let need: BTreeSet<Lang> = resolutions.iter().map(|r| r.lang).collect();
    let mut compilers: BTreeMap<Lang, Compiler> = BTreeMap::new();
    // One missing compiler stops only its own language's jobs.
    let mut no_compiler: BTreeMap<Lang, String> = BTreeMap::new();
    for lang in need {
        let c = match lang {
            Lang::Hip => Compiler::hip(s, &cache_dir),
            Lang::Cuda => Compiler::cuda(s, &cache_dir),
        };
        match c {
            Ok(c) => {
                compilers.insert(lang, c);
            }
            Err(e) => {
                no_compiler.insert(lang, e);
            }
        }
    }

    let by_file: BTreeMap<&str, &Source> = sources.iter().map(|x| (x.file.as_str(), x)).collect();
    let mut plan = Vec::new();
    let mut outs: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut wants_headers: BTreeMap<&str, bool> = BTreeMap::new();
    // (resolution index, job) of the jobs a missing toolchain keeps from compiling.
    let mut missing_jobs: Vec<(usize, JobResult)> = Vec::new();
    let mut missing: BTreeMap<(Lang, &'static str), MissingToolchain> = BTreeMap::new();
    for (idx, r) in resolutions.into_iter().enumerate() {
        let src = by_file[r.file.as_str()];
        let dir = src.path.parent().unwrap_or(Path::new("."));
        let ext = match r.lang {
            Lang::Hip => "hsaco",
            Lang::Cuda => "cubin",
        };
        let out = bdir.join("out").join(&r.atom).join(format!("{}.{ext}", src.out_stem));
        if let Some(prev) = outs.insert(out.clone(), src.file.clone()) {
            if prev != src.file {
                return Err(BuildError::BadInput(format!(
                    "{} and {} would both write {}: rename one (kernel roots overlap in file names)",
                    prev,
                    src.file,
                    s.rel(&out)
                )));
            }
            continue;
        }
        let log = bdir.join("logs").join(&r.atom).join(format!("{}.log", src.out_stem));
        let absent = match compilers.get(&r.lang) {
            None => Some(("compiler", no_compiler[&r.lang].clone(), no_compiler[&r.lang].clone())),
            Some(c) => {
                let with_headers =
                    r.lang == Lang::Hip && *wants_headers.entry(src.file.as_str()).or_insert_with(|| needs_hip_headers(&src.path, &s.include_dirs));
                (with_headers && c.kind == Kind::Clang && c.hip_headers.is_none()).then(|| {
                    let clang = c.id.path.as_deref().unwrap_or("clang");
                    let why = match &c.hip_headers_error {
                        Some(e) => format!("{e} (needed by sources that include hip/…)"),
                        None => format!(
                            "no HIP headers: sources that include hip/… need them and {clang} has none of its own; \
                             none found in the project's .cache/hip-headers, $ROCM_PATH, /opt/rocm or /usr; {HIP_HEADERS_HINT}"
                        ),
                    };
                    let job = match &c.hip_headers_error {
                        Some(e) => format!("{} includes hip/… headers; {e}", src.file),
                        None => format!("no HIP headers: {} includes hip/… headers and {clang} has none of its own; {HIP_HEADERS_HINT}", src.file),
                    };
                    ("hip_headers", why, job)
                })
            }
        };
        if let Some((what, group, message)) = absent {
            // out/ holds what this build vouches for: an object it could not rebuild goes.
            let _ = std::fs::remove_file(&out);
            if let Some(d) = log.parent() {
                let _ = katlas_fs::create_dir_all(d);
            }
            let _ = katlas_fs::write_atomic(&log, format!("# not compiled: missing toolchain\n{message}\n").as_bytes());
            let m = missing.entry((r.lang, what)).or_insert_with(|| MissingToolchain {
                lang: r.lang.as_str().into(),
                what: what.into(),
                atoms: Vec::new(),
                jobs: 0,
                message: group,
            });
            m.jobs += 1;
            if !m.atoms.contains(&r.atom) {
                m.atoms.push(r.atom.clone());
            }
            missing_jobs.push((
                idx,
                JobResult {
                    atom: r.atom.clone(),
                    kernel: r.kernel.clone(),
                    file: src.file.clone(),
                    via: r.via.as_str().into(),
                    lang: r.lang.as_str().into(),
                    status: JobStatus::MissingToolchain,
                    output: None,
                    log: s.rel(&log),
                    key: String::new(),
                    duration_ms: 0,
                    exit_code: None,
                    message: Some(message),
                },
            ));
            continue;
        }
        let compiler = &compilers[&r.lang];
        let with_headers = r.lang == Lang::Hip && wants_headers.get(src.file.as_str()).copied().unwrap_or(false);
        debug_assert_eq!(ext, compiler.out_ext());
        let flags = compiler.flags(s, &r.atom, dir, with_headers);
        let key = cache_key(s, compiler, &r.atom, &flags, src);
        plan.push(Planned { idx, res: r, src, compiler, flags, key, out, log });
    }

    let total = plan.len();
    let done = AtomicUsize::new(0);
    let run_one = |p: &Planned| -> JobResult {
        let t0 = Instant::now();
        let mut r = execute(s, p, &cache_dir);
        r.duration_ms = t0.elapsed().as_millis() as u64;
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(cb) = progress {
            cb(&r, n, total);
        }
        r
    };
    let jobs = opts.jobs.or(s.jobs).unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs.max(1)).build().map_err(|e| BuildError::BadInput(format!("--jobs {jobs}: {e}")))?;
    let ran: Vec<(usize, JobResult)> = pool.install(|| plan.par_iter().map(|p| (p.idx, run_one(p))).collect());
    let mut all: Vec<(usize, JobResult)> = ran.into_iter().chain(missing_jobs).collect();
    all.sort_by_key(|(i, _)| *i);
    let results: Vec<JobResult> = all.into_iter().map(|(_, j)| j).collect();

    let atoms_with = |st: JobStatus| -> Vec<String> { atoms.iter().filter(|a| results.iter().any(|r| r.status == st && &r.atom == *a)).cloned().collect() };
    let failed_atoms = atoms_with(JobStatus::Failed);
    let missing_atoms = atoms_with(JobStatus::MissingToolchain);
    let mut missing_toolchains: Vec<MissingToolchain> = missing.into_values().collect();
    for m in &mut missing_toolchains {
        m.atoms = atoms.iter().filter(|a| m.atoms.contains(a)).cloned().collect();
    }
    let mut report = BuildReport {
        schema: BUILD_SCHEMA.into(),
        created_at: katlas_model::row::now_rfc3339(),
        matrix: s.matrix.clone(),
        atoms: atoms.clone(),
        kernel_roots: roots.iter().map(|p| s.rel(p)).collect(),
        kernel_roots_from: Some(s.kernel_roots_from),
        touched,
        compilers: compilers.values().map(|c| c.id.clone()).collect(),
        missing_toolchains,
        summary: BuildSummary {
            jobs: results.len(),
            compiled: results.iter().filter(|r| r.status == JobStatus::Compiled).count(),
            cached: results.iter().filter(|r| r.status == JobStatus::Cached).count(),
            failed: results.iter().filter(|r| r.status == JobStatus::Failed).count(),
            failed_atoms,
            missing_toolchain: results.iter().filter(|r| r.status == JobStatus::MissingToolchain).count(),
            missing_atoms,
            elapsed_ms: 0,
        },
        jobs: results,
        manifest: None,
        isa_diff: None,
        isa_errors: vec![],
    };
    isa_step(s, opts, &plan, &mut report, jobs);
    report.summary.elapsed_ms = started.elapsed().as_millis() as u64;
    let last = bdir.join("last.json");
    write_json(&last, &report)?;
    Ok((report, skipped))
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    katlas_fs::write_atomic(path, &serde_json::to_vec_pretty(v).expect("serialises")).map_err(|e| BuildError::io(path, e))
}

fn execute(s: &Settings, p: &Planned, cache_dir: &Path) -> JobResult {
    let mut jr = JobResult {
        atom: p.res.atom.clone(),
        kernel: p.res.kernel.clone(),
        file: p.src.file.clone(),
        via: p.res.via.as_str().into(),
        lang: p.res.lang.as_str().into(),
        status: JobStatus::Failed,
        output: None,
        log: s.rel(&p.log),
        key: p.key.clone(),
        duration_ms: 0,
        exit_code: None,
        message: None,
    };
    let fail = |jr: &mut JobResult, msg: String| {
        let _ = std::fs::remove_file(&p.out);
        let _ = katlas_fs::write_atomic(&p.log, msg.as_bytes());
        jr.message = Some(msg.split_once('\n').filter(|(first, _)| first.starts_with("$ ")).map(|(_, rest)| rest.to_string()).unwrap_or(msg));
        jr.status = JobStatus::Failed;
    };
    for d in [p.out.parent(), p.log.parent()].into_iter().flatten() {
        if let Err(e) = katlas_fs::create_dir_all(d) {
            fail(&mut jr, format!("{}: {e}\n", d.display()));
            return jr;
        }
    }
    let entry = cache_dir.join(&p.key);
    let object = entry.join("object");
    if object.is_file() {
        let cached_log = std::fs::read_to_string(entry.join("log.txt")).unwrap_or_default();
        let log = format!("# cached: {} (key {})\n{cached_log}", s.rel(&entry), p.key);
        match std::fs::read(&object).and_then(|b| katlas_fs::write_atomic(&p.out, &b)) {
            Ok(()) => {
                let _ = katlas_fs::write_atomic(&p.log, log.as_bytes());
                jr.status = JobStatus::Cached;
                jr.exit_code = Some(0);
                jr.output = Some(s.rel(&p.out));
                return jr;
            }
            Err(e) => {
                fail(&mut jr, format!("cache entry {}: {e}\n", object.display()));
                return jr;
            }
        }
    }
    // Compile into a private directory, then publish it as the cache entry in one rename.
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let tmp = cache_dir.join(format!("{}.tmp-{}-{}", p.key, std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst)));
    if let Err(e) = katlas_fs::create_dir_all(&tmp) {
        fail(&mut jr, format!("{}: {e}\n", tmp.display()));
        return jr;
    }
    let tmp_obj = tmp.join("object");
    let outcome = p.compiler.compile(&p.src.path, &p.src.file, &p.flags, &tmp_obj, s.timeout_s);
    jr.exit_code = outcome.exit_code;
    if !outcome.ok {
        let _ = std::fs::remove_dir_all(&tmp);
        fail(&mut jr, outcome.log);
        return jr;
    }
    let _ = std::fs::write(tmp.join("log.txt"), &outcome.log);
    let _ = katlas_fs::write_atomic(&p.log, outcome.log.as_bytes());
    if let Err(e) = std::fs::read(&tmp_obj).and_then(|b| katlas_fs::write_atomic(&p.out, &b)) {
        let _ = std::fs::remove_dir_all(&tmp);
        fail(&mut jr, format!("{}{}: {e}\n", outcome.log, p.out.display()));
        return jr;
    }
    if std::fs::rename(&tmp, &entry).is_err() {
        // Another build published the same key first: identical inputs, keep theirs.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    jr.status = JobStatus::Compiled;
    jr.output = Some(s.rel(&p.out));
    jr
}

/// Scan this build's outputs, merge them into the manifest of all current outputs, and diff
/// against what the previous manifest said about the same outputs.
fn isa_step(s: &Settings, opts: &BuildOptions, plan: &[Planned], report: &mut BuildReport, jobs: usize) {
    let outputs: Vec<PathBuf> = plan.iter().filter(|p| p.out.is_file()).map(|p| p.out.clone()).collect();
    let planned: BTreeSet<String> = plan.iter().map(|p| s.rel(&p.out)).collect();
    let manifest_path = s.build_dir().join("manifest.json");
    let prev: Option<IsaManifest> = match std::fs::read(&manifest_path) {
        Ok(b) => match serde_json::from_slice(&b) {
            Ok(m) => Some(m),
            Err(e) => {
                report.isa_errors.push(format!("{}: previous manifest unreadable ({e}); no diff", s.rel(&manifest_path)));
                None
            }
        },
        Err(_) => None,
    };
    let scan_opts = katlas_isa::ScanOptions {
        jobs: Some(jobs),
        disasm: if opts.mix { katlas_isa::DisasmMode::Auto } else { katlas_isa::DisasmMode::Never },
        cache_dir: Some(s.layout().isa_cache_dir()),
        ..Default::default()
    };
    let mut m = if outputs.is_empty() {
        None
    } else {
        match katlas_isa::scan(&outputs, scan_opts) {
            Ok(m) => Some(m),
            Err(e) => {
                report.isa_errors.push(format!("ISA scan: {e}"));
                None
            }
        }
    };
    let Some(cur) = m.as_mut() else { return };
    let relpath = |p: &str| s.rel(Path::new(p));
    for o in &mut cur.objects {
        o.path = relpath(&o.path);
    }
    for i in &mut cur.inputs {
        i.path = relpath(&i.path);
    }
    for e in &mut cur.errors {
        e.path = relpath(&e.path);
        report.isa_errors.push(format!("{}: {}: {}", e.path, e.chain, e.message));
    }
    if let Some(prev) = &prev {
        let mut before = prev.clone();
        before.objects.retain(|o| planned.contains(&o.path));
        before.inputs.retain(|i| planned.contains(&i.path));
        if !before.objects.is_empty() {
            report.isa_diff = Some(katlas_isa::diff::diff(&before, cur, &format!("previous build ({})", prev.created_at), "this build"));
        }
    }
    // The combined manifest: this build's outputs plus earlier ones that still exist untouched.
    let mut combined = cur.clone();
    if let Some(prev) = prev {
        let keep = |p: &str| !planned.contains(p) && s.root.join(p).is_file();
        combined.objects.extend(prev.objects.into_iter().filter(|o| keep(&o.path)));
        combined.inputs.extend(prev.inputs.into_iter().filter(|i| keep(&i.path)));
        combined.objects.sort_by(|a, b| (&a.path, &a.chain_text).cmp(&(&b.path, &b.chain_text)));
        combined.inputs.sort_by(|a, b| a.path.cmp(&b.path));
        combined.summary.files = combined.inputs.len() as u64;
        combined.summary.objects = combined.objects.len() as u64;
        combined.summary.kernels = combined.objects.iter().map(|o| o.kernels.len() as u64).sum();
        combined.summary.bytes = combined.inputs.iter().map(|i| i.size).sum();
    }
    match write_json(&manifest_path, &combined) {
        Ok(()) => {
            report.manifest = Some(s.rel(&manifest_path));
            let isa_copy = s.layout().build_isa_manifest();
            if let Err(e) = write_json(&isa_copy, &combined) {
                report.isa_errors.push(e.to_string());
            }
        }
        Err(e) => report.isa_errors.push(e.to_string()),
    }
}
