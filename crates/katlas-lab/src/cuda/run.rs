//! The CUDA backend's measured run: compile, load, measure the copy ceiling and the timing
//! floor, then for every selected (family, shape, variant) check against the oracle and time.
//!
//! Timing: a spin kernel holds the stream while the host queues every sample, so host launch
//! cost stays out; each sample is one launch between two events on rotating input sets that
//! together span several times the L2 (or, with --l2-flush, a memset of twice the L2 before each
//! sample); the median is reported.

use super::device::{Args, Buf, Device, Func};
use super::nvrtc::{self, Compiled};
use super::probe;
use crate::case::{CaseResult, Env, Resource};
use crate::check::{compare, stats};
use crate::kernels::{Family, Variant, SOURCES, VARIANTS};
use crate::workload::{Case, HostBuf, RMS_EPS, ROPE_THETA};
use crate::{Exit, RunOpts};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Compile every source for `arch` (arch-tagged files only for their arch) and write cubins,
/// ptxas logs and a resource summary under `out_dir`. Needs NVRTC, not a driver.
pub fn compile_all(arch: &str, out_dir: &Path, only: Option<&BTreeSet<&str>>) -> Result<Vec<Compiled>, Exit> {
    std::fs::create_dir_all(out_dir).map_err(|e| Exit::input(format!("cannot create {}: {e}", out_dir.display())))?;
    let mut out = Vec::new();
    for (file, src) in SOURCES {
        if crate::kernels::file_arch(file).is_some_and(|a| a != arch) {
            continue;
        }
        if only.is_some_and(|o| !o.contains(file)) {
            continue;
        }
        let t = std::time::Instant::now();
        let c = nvrtc::compile(file, src, arch)?;
        eprintln!("katlas-lab: compiled {file} for {arch} in {:.1}s ({} bytes)", t.elapsed().as_secs_f64(), c.cubin.len());
        let w = |name: String, data: &[u8]| {
            std::fs::write(out_dir.join(&name), data).map_err(|e| Exit::input(format!("cannot write {}: {e}", out_dir.join(&name).display())))
        };
        w(format!("{file}.{arch}.cubin"), &c.cubin)?;
        w(format!("{file}.{arch}.ptxas.log"), c.log.as_bytes())?;
        out.push(c);
    }
    let res: BTreeMap<String, &Vec<Resource>> = out.iter().map(|c| (c.file.clone(), &c.resources)).collect();
    let doc = serde_json::json!({"schema": "katlas.lab.resources.v1", "arch": arch, "files": res});
    std::fs::write(out_dir.join(format!("resources.{arch}.json")), serde_json::to_string_pretty(&doc).unwrap())
        .map_err(|e| Exit::input(format!("cannot write resources: {e}")))?;
    Ok(out)
}

struct Timer<'a> {
    dev: &'a Device,
    spin: Func,
    flush: Option<Buf>,
}

impl Timer<'_> {
    /// Time `samples` calls of `launch(i)` (after `warmup` untimed ones); microseconds each,
    /// plus the whole stream's time per call.
    fn time(&self, warmup: u32, samples: u32, batch: u32, mut launch: impl FnMut(usize) -> Result<(), Exit>) -> Result<(Vec<f64>, f64), Exit> {
        let batch = batch.max(1) as usize;
        let d = self.dev;
        for i in 0..warmup as usize {
            launch(i)?;
        }
        d.sync()?;
        let evs: Vec<_> = (0..samples * 2).map(|_| d.event()).collect::<Result<_, _>>()?;
        let spin_ns = 2_000_000u64 + 30_000 * (samples as u64) * batch as u64;
        d.launch(self.spin, (1, 1), 32, &Args::default().u64(spin_ns))?;
        for i in 0..samples as usize {
            if let Some(f) = &self.flush {
                d.memset(f, (i & 0xFF) as u8)?;
            }
            d.record(&evs[2 * i])?;
            for j in 0..batch {
                launch(warmup as usize + i * batch + j)?;
            }
            d.record(&evs[2 * i + 1])?;
        }
        d.sync()?;
        let mut v = Vec::with_capacity(samples as usize);
        for i in 0..samples as usize {
            v.push(d.elapsed_us(&evs[2 * i], &evs[2 * i + 1])? / batch as f64);
        }
        let whole = d.elapsed_us(&evs[0], &evs[2 * samples as usize - 1])? / (samples as usize * batch) as f64;
        Ok((v, whole))
    }
}

pub fn run(opts: &RunOpts) -> Result<(Env, Vec<CaseResult>), Exit> {
    probe::driver()?;
    probe::nvrtc()?;
    let dev = Device::open(0)?;
    let arch = dev.arch();
    let sel: Vec<&Variant> = VARIANTS.iter().filter(|v| opts.selects(v.family.name(), v.name)).filter(|v| v.arch().is_none_or(|a| a == arch)).collect();
    if sel.is_empty() {
        return Err(Exit::input(format!("no kernel variant for {arch} matches --kernel/--variant (see `katlas-lab list`)")));
    }
    let mut files: BTreeSet<&str> = sel.iter().map(|v| v.file).collect();
    files.insert("util.cu");
    let compiled = compile_all(&arch, &opts.out_dir, Some(&files))?;
    let mut modules = HashMap::new();
    let mut resources: HashMap<String, Resource> = HashMap::new();
    for c in &compiled {
        modules.insert(c.file.clone(), dev.load_module(&c.cubin)?);
        for r in &c.resources {
            resources.insert(r.func.clone(), r.clone());
        }
    }
    let util = modules["util.cu"];
    let spin = dev.function(util, "lab_spin")?;
    let l2 = dev.l2_bytes.max(1 << 20) as usize;
    let flush = if opts.l2_flush { Some(dev.alloc(2 * l2)?) } else { None };
    let timer = Timer { dev: &dev, spin, flush };

    // The copy ceiling: device-to-device copies of 1 GiB, counting bytes read plus written.
    let mut copy_detail = BTreeMap::new();
    {
        let n = (1usize << 30).min(dev.mem_bytes as usize / 8);
        let a = dev.alloc(n)?;
        let b = dev.alloc(n)?;
        dev.memset(&a, 0x5A)?;
        let plain = Timer { dev: &dev, spin, flush: None };
        let (s, _) = plain.time(3, 20, 1, |_| dev.copy(&b, &a, n))?;
        copy_detail.insert("memcpy_dtod_gbps".to_string(), 2.0 * n as f64 / (stats(&s).median * 1e3));
        let cp = dev.function(util, "lab_copy_u4")?;
        let n4 = (n / 16) as i64;
        let grid = dev.sms as u32 * 16;
        let (s, _) = plain.time(3, 20, 1, |_| dev.launch(cp, (grid, 1), 256, &Args::default().ptr(&a).ptr(&b).i64(n4).i64(grid as i64 * 256)))?;
        copy_detail.insert("copy_kernel_gbps".to_string(), 2.0 * n as f64 / (stats(&s).median * 1e3));
        copy_detail.insert("copy_bytes".to_string(), 2.0 * n as f64);
    }
    let copy_gbps = copy_detail["memcpy_dtod_gbps"].max(copy_detail["copy_kernel_gbps"]);
    if opts.read_ceilings {
        read_ceilings(&dev, util, spin, l2, opts.batch, copy_gbps, &mut copy_detail)?;
    }
    let noop = dev.function(util, "lab_noop")?;
    let (s, _) = timer.time(10, 100, 1, |_| dev.launch(noop, (1, 1), 32, &Args::default().i32(0)))?;
    let floor_us = stats(&s).median;
    eprintln!(
        "katlas-lab: {} {arch}, {} SMs, L2 {} MB; copy {:.0} GB/s (memcpy {:.0}, kernel {:.0}); empty-kernel floor {floor_us:.2} us",
        dev.name,
        dev.sms,
        l2 >> 20,
        copy_gbps,
        copy_detail["memcpy_dtod_gbps"],
        copy_detail["copy_kernel_gbps"]
    );

    let env = Env {
        backend: "cuda".into(),
        arch: arch.clone(),
        device: dev.name.clone(),
        driver: Some(format!("{}.{}", dev.driver_version / 1000, (dev.driver_version % 1000) / 10)),
        toolkit: nvrtc::version().map(|(a, b)| format!("{a}.{b}")),
        copy_gbps: Some(copy_gbps),
        copy_detail,
        floor_us: Some(floor_us),
        warmup: opts.warmup,
        samples: opts.samples,
        batch: opts.batch,
        l2: if opts.l2_flush { format!("flush {} MB per sample", (2 * l2) >> 20) } else { "rotate".into() },
        command: opts.command.clone(),
    };

    let rotate = opts.rotate_bytes.unwrap_or(4 * l2);
    let mut results = Vec::new();
    for fam in Family::ALL {
        let vars: Vec<&&Variant> = sel.iter().filter(|v| v.family == fam).collect();
        if vars.is_empty() {
            continue;
        }
        let shapes = opts.shapes.clone().unwrap_or_else(|| fam.default_shapes(true));
        for sh in shapes {
            fam.validate(sh).map_err(|e| Exit::input(format!("{e}")))?;
            let t = std::time::Instant::now();
            let case = Case::new(fam, sh, opts.seed);
            let want = case.oracle();
            let set_bytes = case.input_bytes();
            let nsets = if opts.l2_flush { 1 } else { rotate.div_ceil(set_bytes).clamp(2, 256) };
            let mut sets: Vec<Vec<Buf>> = Vec::with_capacity(nsets);
            let first: Vec<Buf> = case
                .inputs
                .iter()
                .map(|h| match h {
                    HostBuf::U8(v) => dev.upload(v),
                    HostBuf::U16(v) => dev.upload(v),
                    HostBuf::F32(v) => dev.upload(v),
                })
                .collect::<Result<_, _>>()?;
            for _ in 1..nsets {
                let mut s = Vec::new();
                for b in &first {
                    let c = dev.alloc(b.bytes)?;
                    dev.copy(&c, b, b.bytes)?;
                    s.push(c);
                }
                sets.push(s);
            }
            sets.insert(0, first);
            let outs: Vec<Buf> = (0..nsets).map(|_| dev.alloc(case.out_len * 4)).collect::<Result<_, _>>()?;
            let nsplit = attn_splits(&case, dev.sms as usize);
            let scratch = if fam == Family::AttnDecode { Some(dev.alloc(sh.b * nsplit * 130 * 4)?) } else { None };
            dev.sync()?;
            eprintln!(
                "katlas-lab: {} {sh}: inputs and oracle ready in {:.1}s, {nsets} rotating sets of {:.1} MB",
                fam.name(),
                t.elapsed().as_secs_f64(),
                set_bytes as f64 / 1e6
            );
            for v in vars.iter().copied() {
                let m = modules[v.file];
                let (fname, wpb, rt) = v.resolve(sh).map_err(|e| Exit::input(format!("{e}")))?;
                let f = dev.function(m, &fname)?;
                let nblk = match rt {
                    Some(rt) if v.takes_nblk() => {
                        let tiles = sh.a.div_ceil(rt as usize) as u32;
                        if v.persistent() {
                            let per_sm = dev.max_blocks_per_sm(f, wpb * 32).unwrap_or(1).max(1) as u32;
                            let resident = per_sm * dev.sms as u32;
                            if v.balanced() {
                                Some(tiles.div_ceil(tiles.div_ceil(resident)))
                            } else {
                                Some(tiles.min(resident))
                            }
                        } else {
                            Some(tiles)
                        }
                    }
                    _ => None,
                };
                let lc = Launch { f, comb: None, wpb, rt, nblk, nsplit };
                let lc = Launch { comb: if fam == Family::AttnDecode { Some(dev.function(m, "attn_decode_combine")?) } else { None }, ..lc };
                // Check: poison the output (NaN bytes), run on set 0, compare with the oracle.
                dev.memset(&outs[0], 0xFF)?;
                if let Some(s) = &scratch {
                    dev.memset(s, 0xFF)?;
                }
                let (grid, block) = launch(&dev, v, &lc, &case, &sets[0], &outs[0], scratch.as_ref())?;
                let got = dev.download_f32(&outs[0], case.out_len)?;
                let check = compare(&got, &want, case.row_len, v.tolerance());
                let (samples, whole) = timer.time(opts.warmup, opts.samples, opts.batch, |i| {
                    let k = i % nsets;
                    launch(&dev, v, &lc, &case, &sets[k], &outs[k], scratch.as_ref()).map(|_| ())
                })?;
                let st = stats(&samples);
                let r = CaseResult {
                    family: fam,
                    variant: v.name.to_string(),
                    func: fname.clone(),
                    levers: v.levers.to_string(),
                    shape: sh,
                    bytes: fam.bytes(sh),
                    flops: fam.flops(sh),
                    stats: st,
                    stream_us: if opts.l2_flush { None } else { Some(whole) },
                    cpu_time: None,
                    check,
                    resources: resources.get(&fname).cloned(),
                    grid: Some([grid.0, grid.1, 1]),
                    block: Some([block, 1, 1]),
                    rotation_sets: nsets,
                };
                eprintln!("{}", crate::report::metric_line(&env, &r));
                if !r.check.pass {
                    eprintln!("katlas-lab: {}.{} {sh}: {}", fam.name(), v.name, r.check.summary());
                }
                results.push(r);
            }
        }
    }
    Ok((env, results))
}

/// Read-only ceiling at each 4-bit GEMV shape's byte count: what any kernel that reads those
/// bytes once can reach under the same protocol (rotating regions over 4 x L2, one launch or
/// `batch` launches per event pair). The checksum of one launch is compared with the host's.
fn read_ceilings(
    dev: &Device,
    util: super::device::Module,
    spin: Func,
    l2: usize,
    batch: u32,
    copy_gbps: f64,
    detail: &mut BTreeMap<String, f64>,
) -> Result<(), Exit> {
    // Several read kernels: the ceiling is the best of them at each size.
    // (tag, function, one-shot words per thread or 0 for grid-stride, blocks per SM for grid-stride)
    let mut kernels: Vec<(String, Func, u32, u32)> = Vec::new();
    for (name, u) in [("lab_read_os8", 8u32), ("lab_read_os16", 16)] {
        kernels.push((name.trim_start_matches("lab_read_").to_string(), dev.function(util, name)?, u, 0));
    }
    for name in ["lab_read_gs2p", "lab_read_gs4p", "lab_read_gs8p", "lab_read_gs4s", "lab_read_gs8s"] {
        for per_sm in [4u32, 8, 16] {
            let tag = format!("{}x{per_sm}", name.trim_start_matches("lab_read_"));
            kernels.push((tag, dev.function(util, name)?, 0, per_sm));
        }
    }
    let timer = Timer { dev, spin, flush: None };
    for sh in Family::GemvHfq4.default_shapes(true) {
        let bytes = (Family::GemvHfq4.bytes(sh) as usize).div_ceil(256) * 256;
        let regions = (4 * l2).div_ceil(bytes).max(2);
        let words = bytes / 4 * regions;
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let host: Vec<u32> = (0..words)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 32) as u32
            })
            .collect();
        let buf = dev.upload(&host)?;
        let want = host[..bytes / 4].iter().fold(0u32, |a, &w| a.wrapping_add(w));
        drop(host);
        let n4 = (bytes / 16) as i64;
        let mut best = f64::INFINITY;
        for (tag, f, u, per_sm) in &kernels {
            let (tag, f, u) = (tag.as_str(), *f, *u);
            let sum = dev.upload(&[0u32; 4])?;
            let grid = if u == 0 { dev.sms as u32 * per_sm } else { (n4 as u64).div_ceil(256 * u as u64) as u32 };
            let args = |r: usize| Args::default().raw_ptr(buf.ptr + (r % regions * bytes) as u64).i64(n4).i64(grid as i64 * 256).ptr(&sum);
            dev.launch(f, (grid, 1), 256, &args(0))?;
            let got = dev.download_f32(&sum, 1)?[0].to_bits();
            if got != want {
                return Err(Exit::input(format!("read ceiling {sh} ({tag}): checksum {got:#x} != host {want:#x}")));
            }
            let (v, _) = timer.time(5, 100, batch, |i| dev.launch(f, (grid, 1), 256, &args(i)))?;
            let us = stats(&v).median;
            best = best.min(us);
            detail.insert(format!("read_us_{sh}_{tag}"), us);
        }
        // The same bytes moved by the driver's copy (half read, half written), same protocol.
        let half = bytes / 2;
        let (v, _) = timer.time(5, 100, batch, |i| {
            let r = i % regions;
            dev.copy_within(&buf, r * bytes + half, r * bytes, half)
        })?;
        let copy_us = stats(&v).median;
        let gbps = bytes as f64 / (best * 1e3);
        eprintln!(
            "katlas-lab: read ceiling {sh} ({:.1} MB): best {best:.3} us, {gbps:.0} GB/s = {:.1}% of copy; memcpy of the same bytes {copy_us:.3} us = {:.1}% of copy",
            bytes as f64 / 1e6,
            100.0 * gbps / copy_gbps,
            100.0 * bytes as f64 / (copy_us * 1e3) / copy_gbps
        );
        detail.insert(format!("read_us_{sh}"), best);
        detail.insert(format!("read_gbps_{sh}"), gbps);
        detail.insert(format!("memcpy_same_bytes_us_{sh}"), copy_us);
    }
    Ok(())
}

fn attn_splits(case: &Case, sms: usize) -> usize {
    if case.family != Family::AttnDecode {
        return 1;
    }
    let (s, h) = (case.shape.a, case.shape.b);
    (2 * sms).div_ceil(h).clamp(1, s.div_ceil(64).max(1))
}

/// A resolved launch: the function(s) and the per-shape launch parameters.
struct Launch {
    f: Func,
    comb: Option<Func>,
    wpb: u32,
    rt: Option<u32>,
    /// Blocks of a row-tile launch (fewer than the tiles when persistent).
    nblk: Option<u32>,
    nsplit: usize,
}

fn launch(dev: &Device, v: &Variant, lc: &Launch, case: &Case, ins: &[Buf], out: &Buf, scratch: Option<&Buf>) -> Result<((u32, u32), u32), Exit> {
    let (a, b) = (case.shape.a as i32, case.shape.b as i32);
    let (f, comb, nsplit) = (lc.f, lc.comb, lc.nsplit);
    let rows_grid = |rows_per_block: u32| (case.shape.a as u32).div_ceil(rows_per_block);
    if let Some(rt) = lc.rt {
        let g = (lc.nblk.unwrap_or_else(|| rows_grid(rt)), 1);
        let blk = lc.wpb * 32;
        let mut args = if v.family == Family::GemvHfq4Res {
            Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(&ins[2]).ptr(out).i32(a).i32(b).i32(rt as i32)
        } else {
            Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(out).i32(a).i32(b).i32(rt as i32)
        };
        if let Some(n) = lc.nblk {
            args = args.i32(n as i32);
        }
        dev.launch(f, g, blk, &args)?;
        return Ok((g, blk));
    }
    match v.family {
        Family::GemvHfq4 | Family::GemvBf16 => {
            let g = (rows_grid(v.rows_per_block()), 1);
            let blk = v.wpb * 32;
            dev.launch(f, g, blk, &Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(out).i32(a).i32(b))?;
            Ok((g, blk))
        }
        Family::GemvHfq4Res => {
            let g = (rows_grid(v.rows_per_block()), 1);
            let blk = v.wpb * 32;
            dev.launch(f, g, blk, &Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(&ins[2]).ptr(out).i32(a).i32(b))?;
            Ok((g, blk))
        }
        Family::SwigluHfq4 => {
            let g = (rows_grid(4 * v.r), 1);
            dev.launch(f, g, 128, &Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(&ins[2]).ptr(out).i32(a).i32(b))?;
            Ok((g, 128))
        }
        Family::Rmsnorm => {
            let g = (a as u32, 1);
            dev.launch(f, g, 256, &Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(out).i32(b).f32(RMS_EPS))?;
            Ok((g, 256))
        }
        Family::Rope => {
            let g = (a as u32, 1);
            let args = if v.name == "cache" {
                Args::default().ptr(&ins[0]).ptr(out).ptr(&ins[1]).i32(a).i32(b).i32(case.pos as i32).f32(0.0)
            } else {
                Args::default().ptr(&ins[0]).ptr(out).i32(a).i32(b).i32(case.pos as i32).f32(ROPE_THETA.log2())
            };
            dev.launch(f, g, 128, &args)?;
            Ok((g, 128))
        }
        Family::AttnDecode => {
            let (s, h) = (a, b);
            let chunk = (s as usize).div_ceil(nsplit) as i32;
            let part = scratch.expect("attention needs scratch");
            let g = (h as u32, nsplit as u32);
            let scale = 1.0 / (crate::reference::ATT_D as f32).sqrt();
            dev.launch(
                f,
                g,
                128,
                &Args::default().ptr(&ins[0]).ptr(&ins[1]).ptr(&ins[2]).ptr(part).i32(h).i32(h / 4).i32(s).i32(chunk).i32(nsplit as i32).f32(scale),
            )?;
            dev.launch(comb.expect("combine kernel"), (h as u32, 1), 128, &Args::default().ptr(part).ptr(out).i32(nsplit as i32))?;
            Ok((g, 128))
        }
    }
}
