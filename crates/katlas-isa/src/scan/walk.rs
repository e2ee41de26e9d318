//! The walk: containers opened one inside another, every code object parsed where it lies.

use super::cache::{disk_get, disk_put, MixMemo};
use super::digests::with_digests;
use super::{detect, push, Ctx, Found, Kind, MAX_DEPTH, SEP};
use crate::blob::{md5_hex, Blob};
use crate::bundle;
use crate::elf::Elf;
use crate::error::IsaError;
use crate::manifest::*;
use crate::md5_lanes;
use crate::mix::{self, DisasmMode};
use crate::nv::{cubin, fatbin, ptx};
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

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

fn parse_object(ctx: &Ctx, d: &[u8], vendor: Vendor, md5: &str, disassemble: bool) -> Result<CodeObject, IsaError> {
    let blank = |format: &str, target: String, arch: String, kernels: Vec<Kernel>, warnings: Vec<String>| CodeObject {
        path: String::new(),
        chain: vec![],
        chain_text: String::new(),
        md5: md5.to_string(),
        size: d.len() as u64,
        vendor,
        format: format.into(),
        target,
        arch,
        features: vec![],
        amd: None,
        nvidia: None,
        kernels,
        ptx_entries: vec![],
        mix_status: None,
        warnings,
    };
    let mut obj = match vendor {
        Vendor::Amd => {
            let p = crate::amd::parse(d)?;
            CodeObject { features: p.features, amd: Some(p.info), ..blank("amdgpu-elf", p.target, p.arch, p.kernels, p.warnings) }
        }
        Vendor::Nvidia => {
            let p = cubin::parse(d)?;
            CodeObject { nvidia: Some(p.info), ..blank("cubin", p.target, p.arch, p.kernels, p.warnings) }
        }
    };
    if disassemble {
        obj.mix_status = Some(mix::attach(&ctx.tools, ctx.opts.disasm, d, &mut obj));
    }
    Ok(obj)
}
