//! The scan: recognise files by content, open nested containers, parse every code object,
//! in parallel, with a content-digest cache. Errors become records beside the good objects.

use crate::blob::{md5_hex, Blob};
use crate::bundle::{self, BUNDLE_MAGIC, CCOB_MAGIC};
use crate::elf::{Elf, EM_AMDGPU, EM_CUDA};
use crate::error::IsaError;
use crate::manifest::*;
use crate::md5_lanes;
use crate::mix::{self, DisasmMode, Disassemblers};
use crate::nv::{cubin, fatbin, ptx, ptxas_log};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// What content a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    AmdElf,
    Cubin,
    HostElf,
    Bundle,
    Ccob,
    Fatbin,
    Ptx,
    Unrecognised,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::AmdElf => "amdgpu-elf",
            Kind::Cubin => "cubin",
            Kind::HostElf => "host-elf",
            Kind::Bundle => "offload-bundle",
            Kind::Ccob => "ccob",
            Kind::Fatbin => "fatbin",
            Kind::Ptx => "ptx",
            Kind::Unrecognised => "unrecognised",
        }
    }
}

pub fn detect(d: &[u8]) -> Kind {
    if d.starts_with(b"\x7fELF") {
        if d.len() < 20 {
            return Kind::Unrecognised;
        }
        let le = d[5] != 2;
        let m = if le { u16::from_le_bytes([d[18], d[19]]) } else { u16::from_be_bytes([d[18], d[19]]) };
        return match m {
            EM_AMDGPU => Kind::AmdElf,
            EM_CUDA => Kind::Cubin,
            _ => Kind::HostElf,
        };
    }
    if d.starts_with(BUNDLE_MAGIC) {
        return Kind::Bundle;
    }
    if d.starts_with(CCOB_MAGIC) {
        return Kind::Ccob;
    }
    if fatbin::is_fatbin(d) {
        return Kind::Fatbin;
    }
    if ptx::looks_like_ptx(d) {
        return Kind::Ptx;
    }
    Kind::Unrecognised
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

/// Where a blob's bytes lie: owner buffer, start, end.
type BlobKey = (usize, usize, usize);

/// md5 digests of leaf objects, computed many at once: md5 is serial within one object, so
/// objects share SIMD lanes instead ([`md5_lanes`]; rocSPARSE's 777 objects, 1.3 GB, were a
/// third of the scan's CPU time hashed one by one). Digests are keyed by where the bytes lie.
///
/// When nothing needs an object's digest before parsing it (no mix memo, no disk cache), the
/// hashing runs beside the parsing instead of before it: the leaves are registered as pending,
/// [`leaf`] leaves their `md5` empty and notes the key in [`Found::deferred`], and the container
/// that started the hashing fills the digests in once both are done ([`with_digests`]).
#[derive(Default)]
struct Md5Ahead {
    map: Mutex<HashMap<BlobKey, [u8; 16]>>,
    pending: Mutex<std::collections::HashSet<BlobKey>>,
}

/// Digests computed ahead for one container walk; dropped with it.
struct AheadScope<'a> {
    ahead: &'a Md5Ahead,
    keys: Vec<BlobKey>,
}

impl Drop for AheadScope<'_> {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        if let Ok(mut m) = self.ahead.map.lock() {
            for k in &self.keys {
                m.remove(k);
            }
        }
    }
}

impl Md5Ahead {
    /// The code objects directly inside `containers` (entries of uncompressed offload bundles)
    /// with no digest computed or pending.
    fn leaves<'b>(&self, containers: impl Iterator<Item = &'b Blob>) -> Vec<Blob> {
        let mut leaves = Vec::new();
        let known = self.map.lock().ok();
        let pending = self.pending.lock().ok();
        let unknown = |k: &BlobKey| known.as_ref().is_none_or(|m| !m.contains_key(k)) && pending.as_ref().is_none_or(|p| !p.contains(k));
        for c in containers {
            let d = c.bytes();
            if detect(d) != Kind::Bundle {
                continue;
            }
            let Ok(b) = bundle::parse_bundle(d) else {
                continue;
            };
            for e in b.entries.iter().filter(|e| e.size > 0) {
                let Ok(child) = c.slice(e.offset..e.offset + e.size, "offload bundle entry") else {
                    continue;
                };
                let leaf = matches!(detect(child.bytes()), Kind::AmdElf | Kind::Cubin);
                if leaf && unknown(&child.key()) {
                    leaves.push(child);
                }
            }
        }
        leaves
    }

    /// Hashes `leaves` now; their digests live as long as the returned scope.
    fn compute(&self, leaves: &[Blob]) -> AheadScope<'_> {
        let mut keys = Vec::new();
        if leaves.len() >= 2 {
            let msgs: Vec<&[u8]> = leaves.iter().map(Blob::bytes).collect();
            let digests = md5_lanes::md5_many_par(&msgs);
            if let Ok(mut m) = self.map.lock() {
                for (b, h) in leaves.iter().zip(digests) {
                    m.insert(b.key(), h);
                    keys.push(b.key());
                }
            }
        }
        AheadScope { ahead: self, keys }
    }

    /// The digest of `b` as hex: computed ahead, or now; None when it is pending (being
    /// computed beside the parse; the caller defers it).
    fn md5_hex(&self, b: &Blob) -> Option<String> {
        let k = b.key();
        if let Some(h) = self.map.lock().ok().and_then(|m| m.get(&k).copied()) {
            return Some(hex::encode(h));
        }
        if self.pending.lock().is_ok_and(|p| p.contains(&k)) {
            return None;
        }
        Some(md5_hex(b.bytes()))
    }
}

/// Walks the children of `containers` with `walk`, hashing their leaf code objects many at a
/// time: before the walk when the walk needs the digests (cache keys), else beside it.
fn with_digests<'b>(ctx: &Ctx, containers: impl Iterator<Item = &'b Blob>, walk: impl FnOnce() -> Found + Send) -> Found {
    let leaves = ctx.ahead.leaves(containers);
    if !ctx.defer_digests() || leaves.len() < 2 {
        let _scope = ctx.ahead.compute(&leaves);
        return walk();
    }
    let keys: Vec<BlobKey> = leaves.iter().map(Blob::key).collect();
    if let Ok(mut p) = ctx.ahead.pending.lock() {
        p.extend(keys.iter().copied());
    }
    let (digests, mut found) = rayon::join(
        || {
            let msgs: Vec<&[u8]> = leaves.iter().map(Blob::bytes).collect();
            md5_lanes::md5_many_par(&msgs)
        },
        walk,
    );
    if let Ok(mut p) = ctx.ahead.pending.lock() {
        for k in &keys {
            p.remove(k);
        }
    }
    let mine: HashMap<BlobKey, [u8; 16]> = keys.into_iter().zip(digests).collect();
    let objects = &mut found.objects;
    found.deferred.retain(|(i, b)| match mine.get(&b.key()) {
        Some(h) => {
            objects[*i].md5 = hex::encode(h);
            false
        }
        None => true,
    });
    found
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

/// Opens whatever `blob` holds and everything nested in it.
pub fn explore(ctx: &Ctx, path: &str, blob: Blob, chain: Vec<String>, depth: usize) -> Found {
    if depth > MAX_DEPTH {
        return Found::error(path, &chain, "containers nested deeper than 8 levels");
    }
    let d = blob.bytes();
    match detect(d) {
        Kind::AmdElf => leaf(ctx, path, &blob, push(&chain, "elf"), Vendor::Amd),
        Kind::Cubin => leaf(ctx, path, &blob, push(&chain, "cubin"), Vendor::Nvidia),
        Kind::Ptx => ptx_leaf(path, d, md5_hex(d), push(&chain, "ptx")),
        Kind::HostElf => host_elf(ctx, path, &blob, chain, depth),
        Kind::Bundle => match bundle::parse_bundle(d) {
            Ok(b) => with_digests(ctx, std::iter::once(&blob), || {
                b.entries
                    .par_iter()
                    .filter(|e| e.size > 0 && !e.triple.starts_with("host-"))
                    .map(|e| {
                        let c = push(&chain, format!("bundle[{}]", e.triple));
                        match blob.slice(e.offset..e.offset + e.size, "offload bundle entry") {
                            Ok(child) => explore(ctx, path, child, c, depth + 1),
                            Err(err) => Found::error(path, &c, err),
                        }
                    })
                    .reduce(Found::default, Found::merge)
            }),
            Err(e) => Found::error(path, &chain, e),
        },
        Kind::Ccob => match bundle::decompress_ccob(d) {
            Ok((h, inner)) => {
                let c = push(&chain, format!("ccob[v{},{}]", h.version, h.method));
                explore(ctx, path, Blob::from_vec(inner), c, depth + 1)
            }
            Err(e) => Found::error(path, &chain, e),
        },
        Kind::Fatbin => fatbin_region(ctx, path, &blob, chain, depth),
        Kind::Unrecognised => Found::default(),
    }
}

fn host_elf(ctx: &Ctx, path: &str, blob: &Blob, chain: Vec<String>, depth: usize) -> Found {
    let d = blob.bytes();
    let elf = match Elf::parse(d, "host ELF") {
        Ok(e) => e,
        Err(e) => return Found::error(path, &chain, e),
    };
    let mut found = Found::default();
    for (_, sh) in elf.iter_sections() {
        let name = String::from_utf8_lossy(elf.section_name(sh)).into_owned();
        let is_hip = name == ".hip_fatbin" || name.starts_with("__CLANG_OFFLOAD_BUNDLE__");
        let is_nv = name == ".nv_fatbin" || name == "__nv_relfatbin";
        if !is_hip && !is_nv {
            continue;
        }
        let c = push(&chain, name.clone());
        let Some(range) = elf.section_range(sh) else {
            found = found.merge(Found::error(path, &c, format!("section {name} lies outside the file")));
            continue;
        };
        let region = match blob.slice(range, "fatbin section") {
            Ok(r) => r,
            Err(e) => {
                found = found.merge(Found::error(path, &c, e));
                continue;
            }
        };
        if is_hip {
            let (records, errs) = bundle::split_records(&region);
            for e in errs {
                found.errors.push(ScanError { path: path.into(), chain: c.join(SEP), message: e.to_string() });
            }
            let many = records.len() > 1;
            let blobs: Vec<Blob> = records.iter().map(|r| r.blob.clone()).collect();
            let sub = with_digests(ctx, blobs.iter(), || {
                records
                    .into_par_iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let cc = if many {
                            let mut cc = chain.clone();
                            cc.push(format!("{name}#{i}"));
                            cc
                        } else {
                            c.clone()
                        };
                        explore(ctx, path, r.blob, cc, depth + 1)
                    })
                    .reduce(Found::default, Found::merge)
            });
            found = found.merge(sub);
        } else {
            found = found.merge(fatbin_region(ctx, path, &region, c, depth + 1));
        }
    }
    found
}

fn fatbin_region(ctx: &Ctx, path: &str, region: &Blob, chain: Vec<String>, depth: usize) -> Found {
    let d = region.bytes();
    let (containers, errs) = fatbin::split_containers(d);
    let mut found = Found::default();
    for e in errs {
        found.errors.push(ScanError { path: path.into(), chain: chain.join(SEP), message: e.to_string() });
    }
    let work: Vec<(u64, fatbin::FatbinEntry)> = containers.iter().flat_map(|(base, f)| f.entries.iter().map(|e| (*base, e.clone()))).collect();
    let groups = lane_groups(&work);
    // Groups run largest first, each taken by the next idle worker: no barrier waits for the
    // slowest entry of a batch (the batches of 256 MiB this replaced stopped at three barriers
    // each, and cuBLASLt's 16-core scan stopped scaling at 4 threads), and the small groups
    // left at the end keep every worker busy to the last.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Found)>> = Mutex::new(Vec::with_capacity(work.len()));
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads().min(groups.len()) {
            s.spawn(|_| loop {
                let g = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(members) = groups.get(g) else {
                    break;
                };
                let results = fatbin_group(ctx, path, d, &chain, depth, &work, members);
                if let Ok(mut all) = done.lock() {
                    all.extend(results);
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_default();
    done.sort_unstable_by_key(|(i, _)| *i);
    for (_, f) in done {
        found = found.merge(f);
    }
    found
}

/// Fatbin entries (indices into `work`) dealt largest first into groups of one md5 lane set
/// each, a group holding at most [`GROUP_BYTES`] decompressed (a single larger entry alone):
/// entries of similar size keep the lanes equally busy, and the bytes held at once stay below
/// one group per worker.
fn lane_groups(work: &[(u64, fatbin::FatbinEntry)]) -> Vec<Vec<usize>> {
    const GROUP_BYTES: u64 = 64 << 20;
    let lanes = md5_lanes::group_lanes();
    let size = |i: usize| work[i].1.uncompressed_size.max(work[i].1.payload_size);
    let mut order: Vec<usize> = (0..work.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(size(i)));
    let mut groups: Vec<Vec<usize>> = vec![];
    let mut held = 0u64;
    for i in order {
        match groups.last_mut() {
            Some(g) if g.len() < lanes && held.saturating_add(size(i)) <= GROUP_BYTES => {
                g.push(i);
                held += size(i);
            }
            _ => {
                groups.push(vec![i]);
                held = size(i);
            }
        }
    }
    groups
}

/// Decompresses one group's entries, hashes their code objects together in md5 lanes, and
/// parses them; the decompressed bytes are dropped when the group is done.
fn fatbin_group(
    ctx: &Ctx,
    path: &str,
    d: &[u8],
    chain: &[String],
    depth: usize,
    work: &[(u64, fatbin::FatbinEntry)],
    members: &[usize],
) -> Vec<(usize, Found)> {
    let payloads: Vec<Payload> = members
        .iter()
        .map(|&i| {
            let (base, e) = &work[i];
            let label = format!("fatbin[sm_{}{},{},{}]", e.sm, e.arch_suffix(), e.kind_name(), e.compression());
            Payload { index: i, chain: push(chain, label), entry: e, bytes: fatbin::entry_payload(&d[*base as usize..], e).map(Blob::from_vec) }
        })
        .collect();
    let leaves: Vec<Blob> = payloads
        .iter()
        .filter_map(|p| p.bytes.as_ref().ok().filter(|b| p.entry.kind == fatbin::KIND_PTX || detect(b.bytes()) == Kind::Cubin).cloned())
        .collect();
    let _digests = ctx.ahead.compute(&leaves);
    payloads.into_iter().map(|p| (p.index, fatbin_entry(ctx, path, depth, p))).collect()
}

/// One fatbin entry, decompressed, with where it sits.
struct Payload<'a> {
    index: usize,
    chain: Vec<String>,
    entry: &'a fatbin::FatbinEntry,
    bytes: std::result::Result<Blob, IsaError>,
}

fn fatbin_entry(ctx: &Ctx, path: &str, depth: usize, p: Payload) -> Found {
    let (c, e) = (p.chain, p.entry);
    let b = match p.bytes {
        Ok(b) => b,
        Err(err) => return Found::error(path, &c, err),
    };
    match e.kind {
        fatbin::KIND_ELF => {
            if detect(b.bytes()) == Kind::Cubin {
                let mut f = leaf(ctx, path, &b, push(&c, "cubin"), Vendor::Nvidia);
                f.objects.iter_mut().for_each(|o| {
                    if let Some(n) = o.nvidia.as_mut() {
                        n.fatbin_compression = Some(e.compression().into());
                    }
                    cubin::apply_entry_suffix(o, e.flags);
                });
                f
            } else {
                explore(ctx, path, b, c, depth + 1)
            }
        }
        fatbin::KIND_PTX => {
            let md5 = ctx.ahead.md5_hex(&b).unwrap_or_else(|| md5_hex(b.bytes()));
            ptx_leaf(path, b.bytes(), md5, push(&c, "ptx"))
        }
        k => Found::error(path, &c, format!("fatbin entry kind {k} is not PTX or ELF")),
    }
}

fn ptx_leaf(path: &str, d: &[u8], md5: String, chain: Vec<String>) -> Found {
    // the directives are at the top; the whole text (hundreds of MB in cuBLASLt) is only searched
    let text = String::from_utf8_lossy(&d[..d.len().min(64 << 10)]);
    let target =
        text.lines().find_map(|l| l.trim_start().strip_prefix(".target").map(|t| t.split(',').next().unwrap_or("").trim().to_string())).unwrap_or_default();
    Found {
        objects: vec![CodeObject {
            path: path.into(),
            chain_text: chain.join(SEP),
            chain,
            md5,
            size: d.len() as u64,
            vendor: Vendor::Nvidia,
            format: "ptx".into(),
            arch: target.clone(),
            target,
            features: vec![],
            amd: None,
            nvidia: None,
            kernels: vec![],
            ptx_entries: ptx::entries_in(d),
            mix_status: None,
            warnings: vec![],
        }],
        errors: vec![],
        deferred: vec![],
    }
}

fn arch_matches(want: &str, arch: &str) -> bool {
    arch == want || (want.starts_with("sm_") && arch.strip_suffix(['a', 'f']) == Some(want))
}

/// Parses one code object (cached by md5), applies filters, mix and ptxas numbers.
fn leaf(ctx: &Ctx, path: &str, blob: &Blob, chain: Vec<String>, vendor: Vendor) -> Found {
    let d = blob.bytes();
    let digest = ctx.ahead.md5_hex(blob);
    let deferred = digest.is_none();
    // deferred only without a mix (Ctx::defer_digests), when the memo and the disk cache,
    // which hold disassembled objects only, are not consulted
    let md5 = digest.unwrap_or_default();
    let want_mix = ctx.opts.disasm != DisasmMode::Never;
    let memo_hit = if want_mix { ctx.memo.lock().ok().and_then(|m| m.get(&md5).cloned()) } else { None };
    let cached = match memo_hit {
        None => disk_get(ctx, &md5, want_mix),
        Some(_) => None,
    };
    let mut obj = match (cached, memo_hit) {
        (Some(o), _) => (*o).clone(),
        // the same bytes were disassembled earlier in this scan: parse the metadata again
        // (cheap) and take the mix from then
        (None, Some(memo)) => {
            let mut o = match parse_object(ctx, d, vendor, &md5, false) {
                Ok(o) => o,
                Err(e) => return Found::error(path, &chain, e),
            };
            memo.apply(&mut o);
            o
        }
        (None, None) => {
            let o = match parse_object(ctx, d, vendor, &md5, true) {
                Ok(o) => o,
                Err(e) => return Found::error(path, &chain, e),
            };
            disk_put(ctx, &o, want_mix);
            if want_mix {
                if let Ok(mut m) = ctx.memo.lock() {
                    m.insert(md5.clone(), Arc::new(MixMemo::of(&o)));
                }
            }
            o
        }
    };
    obj.path = path.to_string();
    obj.chain_text = chain.join(SEP);
    obj.chain = chain;
    if let Some(keep) = &ctx.keep_bytes {
        if let Ok(mut k) = keep.lock() {
            k.insert(obj.chain_text.clone(), blob.clone());
        }
    }
    if let Some(a) = &ctx.opts.arch {
        if !arch_matches(a, &obj.arch) {
            return Found::default();
        }
    }
    if let Some(re) = &ctx.opts.filter {
        obj.kernels.retain(|k| re.is_match(&k.name) || k.demangled.as_deref().is_some_and(|d| re.is_match(d)));
        if obj.kernels.is_empty() {
            return Found::default();
        }
    }
    if vendor == Vendor::Nvidia && !ctx.ptxas.is_empty() {
        for k in &mut obj.kernels {
            let hit = ctx.ptxas.get(&(k.name.clone(), obj.arch.clone())).or_else(|| ctx.ptxas.get(&(k.name.clone(), String::new())));
            if let Some(p) = hit {
                k.resources.spill_store_bytes = Some(p.spill_stores);
                k.resources.spill_load_bytes = Some(p.spill_loads);
            }
        }
    }
    crate::occupancy::attach(&mut obj);
    Found { objects: vec![obj], errors: vec![], deferred: if deferred { vec![(0, blob.clone())] } else { vec![] } }
}

/// What disassembling an object added to it, kept for its duplicates in the same scan: the
/// mixes alone, not a second copy of every kernel record (which doubled the memory of a
/// `--mix` scan of rocSPARSE).
struct MixMemo {
    status: Option<String>,
    warnings: Vec<String>,
    mixes: Vec<Option<InstructionMix>>,
}

impl MixMemo {
    fn of(o: &CodeObject) -> MixMemo {
        MixMemo { status: o.mix_status.clone(), warnings: o.warnings.clone(), mixes: o.kernels.iter().map(|k| k.mix.clone()).collect() }
    }

    /// Equal bytes parse to the same kernels in the same order.
    fn apply(&self, o: &mut CodeObject) {
        o.mix_status = self.status.clone();
        o.warnings = self.warnings.clone();
        for (k, m) in o.kernels.iter_mut().zip(&self.mixes) {
            k.mix = m.clone();
        }
    }
}

fn parse_object(ctx: &Ctx, d: &[u8], vendor: Vendor, md5: &str, disassemble: bool) -> Result<CodeObject, IsaError> {
    let mut obj = match vendor {
        Vendor::Amd => {
            let p = crate::amd::parse(d)?;
            CodeObject {
                path: String::new(),
                chain: vec![],
                chain_text: String::new(),
                md5: md5.to_string(),
                size: d.len() as u64,
                vendor,
                format: "amdgpu-elf".into(),
                target: p.target,
                arch: p.arch,
                features: p.features,
                amd: Some(p.info),
                nvidia: None,
                kernels: p.kernels,
                ptx_entries: vec![],
                mix_status: None,
                warnings: p.warnings,
            }
        }
        Vendor::Nvidia => {
            let p = cubin::parse(d)?;
            CodeObject {
                path: String::new(),
                chain: vec![],
                chain_text: String::new(),
                md5: md5.to_string(),
                size: d.len() as u64,
                vendor,
                format: "cubin".into(),
                target: p.target,
                arch: p.arch,
                features: vec![],
                amd: None,
                nvidia: Some(p.info),
                kernels: p.kernels,
                ptx_entries: vec![],
                mix_status: None,
                warnings: p.warnings,
            }
        }
    };
    if disassemble {
        obj.mix_status = Some(mix::attach(&ctx.tools, ctx.opts.disasm, d, &mut obj));
    }
    Ok(obj)
}

const CACHE_VERSION: &str = "isa-v1";

/// Only disassembled objects are cached: reading a metadata-only entry back costs about what
/// parsing the object again does (rocSPARSE: 777 JSON files written for nothing).
fn cache_path(ctx: &Ctx, md5: &str, mix: bool) -> Option<PathBuf> {
    if !mix {
        return None;
    }
    let dir = ctx.opts.cache_dir.as_ref()?;
    Some(dir.join(CACHE_VERSION).join(format!("{md5}{}.json", if mix { "-mix" } else { "" })))
}

fn disk_get(ctx: &Ctx, md5: &str, mix: bool) -> Option<Arc<CodeObject>> {
    let p = cache_path(ctx, md5, mix)?;
    let text = std::fs::read(&p).ok()?;
    let o: CodeObject = serde_json::from_slice(&text).ok()?;
    // a cached "tool absent" result is not reused once a tool is there
    // --disasm objdump (External) wants the external tool's counts, not a cached native result
    let native = format!("disassembled:{}", mix::NATIVE_AMD);
    if mix && o.mix_status.as_deref().is_none_or(|s| !s.starts_with("disassembled") || (ctx.opts.disasm == DisasmMode::External && s == native)) {
        return None;
    }
    Some(Arc::new(o))
}

fn disk_put(ctx: &Ctx, o: &CodeObject, mix: bool) {
    let Some(p) = cache_path(ctx, &o.md5, mix) else {
        return;
    };
    if let Ok(bytes) = serde_json::to_vec(o) {
        // Atomic, so concurrent scans never read half a file.
        let _ = katlas_fs::write_atomic(&p, &bytes);
    }
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
        if let Some(o) = objects.iter().find(|o| o.mix_status.as_deref().is_some_and(|s| s.starts_with("absent:"))) {
            let which = if o.vendor == Vendor::Amd { "AMD (llvm-objdump)" } else { "NVIDIA (nvdisasm or cuobjdump)" };
            return Err(ScanFailure::MissingDisassembler(which.into()));
        }
    }
    let mut disassemblers = ctx.tools.status(mode);
    for t in &mut disassemblers {
        let used = objects.iter().any(|o| o.mix_status.as_deref() == Some(&format!("disassembled:{}", t.name)));
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
