//! The scan: recognise files by content, open nested containers, parse every code object,
//! in parallel, with a content-digest cache. Errors become records beside the good objects.

use crate::blob::{md5_hex, Blob};
use crate::manifest::*;
use crate::mix::{DisasmMode, Disassemblers};
use crate::nv::ptxas_log;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod cache;
mod detect;
mod digests;
mod walk;

use cache::MixMemo;
pub use detect::{detect, Kind};
use digests::Md5Ahead;
pub use walk::explore;

pub const SEP: &str = " › ";
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Keep only kernels whose name (or demangled name) matches.
    pub filter: Option<regex::Regex>,
    /// Keep only objects of this architecture atom (`gfx90a`, `sm_90`; `sm_90` also matches `sm_90a`).
    pub arch: Option<String>,
    pub jobs: Option<usize>,
    pub disasm: DisasmMode,
    pub ptxas_log: Option<PathBuf>,
    /// Directory for per-object results keyed by md5 (reused across runs).
    pub cache_dir: Option<PathBuf>,
    /// Disassemblers to use instead of looking them up (tests; embedding tools).
    pub disassemblers: Option<Disassemblers>,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions { filter: None, arch: None, jobs: None, disasm: DisasmMode::Auto, ptxas_log: None, cache_dir: None, disassemblers: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanFailure {
    #[error("--disasm always: no disassembler found for {0} (install llvm-22 for AMD, nvidia-cuda-nvdisasm for NVIDIA)")]
    MissingDisassembler(String),
    #[error("{0}")]
    BadInput(String),
}

/// Shared, read-only state of one scan.
pub struct Ctx {
    pub opts: ScanOptions,
    pub tools: Disassemblers,
    pub ptxas: HashMap<(String, String), ptxas_log::PtxasFunction>,
    memo: Mutex<HashMap<String, Arc<MixMemo>>>,
    /// When set, every object's bytes are kept by chain text (tests compare them with vendor tools).
    pub keep_bytes: Option<Mutex<HashMap<String, Blob>>>,
    ahead: Md5Ahead,
}

impl Ctx {
    pub fn new(opts: ScanOptions) -> Result<Ctx, ScanFailure> {
        let tools = match (&opts.disassemblers, opts.disasm) {
            (_, DisasmMode::Never) => Disassemblers::default(),
            (Some(t), _) => t.clone(),
            (None, _) => Disassemblers::discover(),
        };
        let ptxas = match &opts.ptxas_log {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| ScanFailure::BadInput(format!("{}: {e}", p.display())))?;
                ptxas_log::parse(&text)
            }
            None => HashMap::new(),
        };
        Ok(Ctx { opts, tools, ptxas, memo: Mutex::new(HashMap::new()), keep_bytes: None, ahead: Md5Ahead::default() })
    }

    /// True when no object's digest is needed before it is parsed (it keys the mix memo and
    /// the disk cache, which hold disassembled objects only), so hashing may run beside parsing.
    fn defer_digests(&self) -> bool {
        self.opts.disasm == DisasmMode::Never
    }
}

#[derive(Default)]
pub struct Found {
    pub objects: Vec<CodeObject>,
    pub errors: Vec<ScanError>,
    /// Objects (index into `objects`) whose md5 is still being computed, with their bytes.
    deferred: Vec<(usize, Blob)>,
}

impl Found {
    fn merge(mut self, o: Found) -> Found {
        let base = self.objects.len();
        self.deferred.extend(o.deferred.into_iter().map(|(i, k)| (i + base, k)));
        self.objects.extend(o.objects);
        self.errors.extend(o.errors);
        self
    }
    fn error(path: &str, chain: &[String], e: impl std::fmt::Display) -> Found {
        Found { objects: vec![], errors: vec![ScanError { path: path.to_string(), chain: chain.join(SEP), message: e.to_string() }], deferred: vec![] }
    }
}

fn push(chain: &[String], s: impl Into<String>) -> Vec<String> {
    let mut c = chain.to_vec();
    c.push(s.into());
    c
}

/// Files under `paths` (directories walked recursively, symlinks inside them skipped so a
/// library and its soname link are read once).
pub fn collect_files(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<ScanError>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if p.is_dir() {
            for e in walkdir::WalkDir::new(p).follow_links(false).sort_by_file_name() {
                match e {
                    Ok(e) if e.file_type().is_file() => files.push(e.into_path()),
                    Ok(_) => {}
                    Err(e) => errors.push(ScanError { path: p.display().to_string(), chain: String::new(), message: e.to_string() }),
                }
            }
        } else if p.exists() {
            files.push(p.clone());
        } else {
            errors.push(ScanError { path: p.display().to_string(), chain: String::new(), message: "no such file or directory".into() });
        }
    }
    (files, errors)
}

/// Gives the kernel its Triton launch facts and recomputes its occupancy with them.
fn attach_triton(json: &Path, found: &mut Found) {
    let meta = match crate::triton::read(json) {
        Ok(m) => m,
        Err(e) => {
            found.errors.push(ScanError { path: json.display().to_string(), chain: String::new(), message: e });
            return;
        }
    };
    let mut hit = false;
    for o in &mut found.objects {
        let mut here = false;
        for k in o.kernels.iter_mut().filter(|k| k.name == meta.name) {
            k.triton = Some(meta.clone());
            here = true;
        }
        if here {
            crate::occupancy::attach(o);
            hit = true;
        }
    }
    if !hit && !found.objects.is_empty() {
        found.errors.push(ScanError {
            path: json.display().to_string(),
            chain: String::new(),
            message: format!("Triton metadata names kernel {}, which the code object beside it does not have", meta.name),
        });
    }
}

/// Scans one file already in memory (used by tests and fuzzing as well as `scan`).
pub fn scan_blob(ctx: &Ctx, path: &str, blob: Blob) -> (Kind, Found) {
    let kind = detect(blob.bytes());
    let name = Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.to_string());
    let mut found = explore(ctx, path, blob, vec![name], 0);
    // every deferred digest is filled by the container that deferred it; hash any left over
    // rather than report an object without one
    for (i, b) in std::mem::take(&mut found.deferred) {
        found.objects[i].md5 = md5_hex(b.bytes());
    }
    (kind, found)
}

/// A scan builds its records on every worker thread at once (about 1 GB for rocSPARSE's 88k
/// kernels). glibc grows each thread's heap 128 KiB at a time, one `mprotect` per step, and each
/// step takes the address-space lock that the other threads' page faults need: a fifth of the
/// scan's time went there. A 64 MiB step makes that a few dozen calls; untouched pages cost no
/// memory. Decompressed fatbin entries (up to ~17 MB each, 1.4 GB in all for cuBLASLt) are
/// likewise kept on the heap rather than mapped and unmapped one by one: on 16 cores each fresh
/// map's page faults and each unmap's TLB shootdown stalled the other threads (the same scan
/// took 0.91 s instead of 1.04 s with glibc's mmap threshold at 256 MiB, docs/PERF.md).
/// Process-wide and permanent, which suits the CLI this serves.
fn grow_heap_in_large_steps() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: mallopt only changes allocator parameters; it is thread-safe.
        ONCE.call_once(|| unsafe {
            libc::mallopt(libc::M_TOP_PAD, 64 << 20);
            libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        });
    }
}

pub fn scan(paths: &[PathBuf], opts: ScanOptions) -> Result<IsaManifest, ScanFailure> {
    let started = std::time::Instant::now();
    grow_heap_in_large_steps();
    let mode = opts.disasm;
    let jobs = opts.jobs;
    let ctx = Ctx::new(opts)?;
    let (files, mut errors) = collect_files(paths);
    let run = || {
        files
            .par_iter()
            .map(|f| {
                let path = f.display().to_string();
                let file = match std::fs::File::open(f) {
                    Ok(x) => x,
                    Err(e) => return (InputFile { path: path.clone(), size: 0, kind: "unreadable".into(), objects: 0 }, Found::error(&path, &[], e)),
                };
                let blob = match Blob::map_file(&file) {
                    Ok(b) => b,
                    Err(e) => return (InputFile { path: path.clone(), size: 0, kind: "unreadable".into(), objects: 0 }, Found::error(&path, &[], e)),
                };
                let size = blob.len() as u64;
                let (kind, mut found) = scan_blob(&ctx, &path, blob);
                if let Some(json) = crate::triton::metadata_path(f) {
                    attach_triton(&json, &mut found);
                }
                (InputFile { path, size, kind: kind.name().into(), objects: found.objects.len() as u64 }, found)
            })
            .collect::<Vec<_>>()
    };
    let results = match jobs {
        Some(n) if n > 0 => match rayon::ThreadPoolBuilder::new().num_threads(n).build() {
            Ok(pool) => pool.install(run),
            Err(e) => return Err(ScanFailure::BadInput(format!("--jobs {n}: {e}"))),
        },
        _ => run(),
    };
    let mut inputs = Vec::new();
    let mut objects = Vec::new();
    for (i, f) in results {
        inputs.push(i);
        objects.extend(f.objects);
        errors.extend(f.errors);
    }
    // --disasm always: a vendor whose objects were found must have had its disassembler
    if mode == DisasmMode::Always {
        if let Some(o) = objects.iter().find(|o| matches!(o.mix_status, Some(MixStatus::Absent(_)))) {
            let which = if o.vendor == Vendor::Amd { "AMD (llvm-objdump)" } else { "NVIDIA (nvdisasm or cuobjdump)" };
            return Err(ScanFailure::MissingDisassembler(which.into()));
        }
    }
    let mut disassemblers = ctx.tools.status(mode);
    for t in &mut disassemblers {
        let used = objects.iter().any(|o| matches!(&o.mix_status, Some(MixStatus::Disassembled(n)) if *n == t.name));
        if used {
            t.status = "used".into();
        }
    }
    let summary = Summary {
        files: inputs.len() as u64,
        bytes: inputs.iter().map(|i| i.size).sum(),
        objects: objects.len() as u64,
        kernels: objects.iter().map(|o| o.kernels.len() as u64).sum(),
        errors: errors.len() as u64,
        elapsed_ms: started.elapsed().as_millis() as u64,
    };
    Ok(IsaManifest {
        schema: SCHEMA.into(),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        tool: "katlas".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        arch_filter: ctx.opts.arch.clone(),
        name_filter: ctx.opts.filter.as_ref().map(|r| r.as_str().to_string()),
        inputs,
        objects,
        errors,
        disassemblers,
        summary,
    })
}
