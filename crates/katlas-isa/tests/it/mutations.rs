//! Robustness: ≥10,000 seeded truncations and bit flips of every container format must give
//! a result or an error, never a panic, and never an allocation far beyond the input.

use crate::common;

use rand::{Rng, SeedableRng};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Records the largest single allocation so a length field taken on trust shows up. It is the
/// allocator of the crate's whole test binary (one atomic max per allocation); only the mutation
/// test reads it, in a process of its own.
struct Watch;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LARGEST.fetch_max(n, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Watch = Watch;

fn fatbin_with(cubin: &[u8], flag: u64) -> Vec<u8> {
    let (payload, csize) = match flag {
        0x2000 => {
            let c = lz4_flex::block::compress(cubin);
            let n = c.len();
            (c, n)
        }
        0x8000 => {
            let c = zstd::bulk::compress(cubin, 3).unwrap();
            let n = c.len();
            (c, n)
        }
        _ => (cubin.to_vec(), 0),
    };
    let mut p = payload;
    p.resize(p.len().div_ceil(8) * 8, 0);
    let mut e = Vec::new();
    e.extend(2u16.to_le_bytes());
    e.extend(0x101u16.to_le_bytes());
    e.extend(64u32.to_le_bytes());
    e.extend((p.len() as u64).to_le_bytes());
    e.extend((csize as u32).to_le_bytes());
    e.extend(0u32.to_le_bytes());
    e.extend(8u16.to_le_bytes());
    e.extend(1u16.to_le_bytes());
    e.extend(80u32.to_le_bytes());
    e.extend(0u32.to_le_bytes());
    e.extend(0u32.to_le_bytes());
    e.extend((0x11 | flag).to_le_bytes());
    e.extend(0u64.to_le_bytes());
    e.extend((if flag != 0 { cubin.len() as u64 } else { 0 }).to_le_bytes());
    e.extend(p);
    let mut f = Vec::new();
    f.extend(0xBA55_ED50u32.to_le_bytes());
    f.extend(1u16.to_le_bytes());
    f.extend(16u16.to_le_bytes());
    f.extend((e.len() as u64).to_le_bytes());
    f.extend(e);
    f
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let d = common::own_fixtures();
    let mut out: Vec<(String, Vec<u8>)> =
        ["kernels.ccob", "kernels.zlib.ccob", "kernels.gfx1201.hsaco", "kernels.host.o", "kernels.sm_90a.cubin", "kernels.hipfb"]
            .iter()
            .map(|f| (f.to_string(), std::fs::read(d.join(f)).expect("own fixture (scripts/build-isa-fixtures)")))
            .collect();
    let cubin = std::fs::read(d.join("kernels.sm_80.cubin")).unwrap();
    out.push(("raw.fatbin".into(), fatbin_with(&cubin, 0)));
    out.push(("lz4.fatbin".into(), fatbin_with(&cubin, 0x2000)));
    out.push(("zstd.fatbin".into(), fatbin_with(&cubin, 0x8000)));
    // every seed must parse cleanly before it is mutated
    for (n, b) in &out {
        let (objs, errs) = katlas_isa::scan_bytes(n, b.clone());
        assert!(!objs.is_empty() && errs.is_empty(), "seed {n}: {errs:?}");
    }
    out
}

#[test]
#[ignore = "heavy: 10,000 mutated inputs; scripts/test-all runs it (cargo test -- --ignored)"]
fn ten_thousand_mutations_never_panic_or_overallocate() {
    // Alone in its process: the largest allocation is counted over the whole process.
    if !katlas_testkit::own_process!(ten_thousand_mutations_never_panic_or_overallocate) {
        return;
    }
    let seeds = seeds();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6b61_746c_6173);
    let per_seed = 10_000usize.div_ceil(seeds.len()) + 1;
    let mut panics = Vec::new();
    let (mut ok, mut err, mut total) = (0usize, 0usize, 0usize);
    let mut worst_ratio = 0f64;
    for (name, seed) in &seeds {
        for i in 0..per_seed {
            let mut m = seed.clone();
            let how = match i % 4 {
                0 => {
                    let cut = rng.random_range(0..m.len());
                    m.truncate(cut);
                    format!("truncate to {cut}")
                }
                1 => {
                    let flips = rng.random_range(1..=8);
                    for _ in 0..flips {
                        let at = rng.random_range(0..m.len());
                        m[at] ^= 1 << rng.random_range(0..8);
                    }
                    format!("{flips} bit flips")
                }
                2 => {
                    // hit the headers, where lengths and offsets live
                    let at = rng.random_range(0..m.len().min(256));
                    m[at] = rng.random();
                    format!("header byte {at}")
                }
                _ => {
                    // a forged 32/64-bit length somewhere in the first 4 KiB
                    let at = rng.random_range(0..m.len().min(4096).saturating_sub(8).max(1));
                    let v: u64 = if rng.random() { u64::MAX >> rng.random_range(0..40) } else { rng.random_range(0..1 << 20) };
                    let n = (m.len() - at).min(8);
                    m[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
                    format!("forged length at {at}")
                }
            };
            let len = m.len().max(1);
            LARGEST.store(0, Ordering::Relaxed);
            total += 1;
            match katlas_testkit::mutate::catch_quietly(|| katlas_isa::scan_bytes(name, m)) {
                Ok((objs, errs)) => {
                    if errs.is_empty() && !objs.is_empty() {
                        ok += 1
                    } else {
                        err += 1
                    }
                    for e in &errs {
                        assert!(!e.message.is_empty());
                    }
                }
                Err(p) => {
                    let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                    panics.push(format!("{name} ({how}): {msg}"));
                }
            }
            // decompressed objects are legitimately larger than their input; a forged length is not
            let largest = LARGEST.load(Ordering::Relaxed);
            worst_ratio = worst_ratio.max(largest as f64 / len as f64);
            assert!(largest < 64 << 20, "{name} ({how}): allocation of {largest} bytes for a {len}-byte input");
        }
    }
    eprintln!("{total} mutations: {ok} parsed cleanly, {err} gave errors, {} panics; largest allocation/input ratio {worst_ratio:.1}", panics.len());
    assert!(total >= 10_000);
    assert!(panics.is_empty(), "{} panics:\n{}", panics.len(), panics.join("\n"));
}
