//! The hostile-input suite's mutation driver for every code-object container katlas reads
//! (issue 15): 10,000 mutated inputs per container format (AMD HSACO ELF, clang offload
//! bundle, compressed CCOB with zstd and zlib, HIP fat binary, host object with an embedded
//! bundle, NVIDIA cubins for sm_80/sm_90/sm_90a, a CUDA fatbin), built from the committed
//! fixtures, through `katlas_isa::scan_bytes` — the native readers (ELF, notes, msgpack,
//! kernel descriptors, `.nv.info`, decompression). No input may panic, take 5 s, or push the
//! peak RSS past 1 GiB; a failure names the format, the input's number and saves it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const INPUTS: usize = 10_000;
const HANG: Duration = Duration::from_secs(5);
const RSS_LIMIT_KB: u64 = 1 << 20;

/// Inputs that panicked, by number.
type Failures = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

use katlas_testkit::mutate::{catch_quietly, mutate, peak_rss_kb, Rng};

fn save_failure(format: &str, n: usize, data: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mutation-failures");
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("isa-{format}-{n}.bin"));
    let _ = std::fs::write(&p, data);
    p
}

#[test]
#[ignore = "heavy: 10,000 mutated inputs per format; scripts/test-all runs it (cargo test -- --ignored)"]
fn every_container_survives_10000_hostile_inputs() {
    // Alone in its process: the peak RSS is the whole process's.
    if !katlas_testkit::own_process!(every_container_survives_10000_hostile_inputs) {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let formats = [
        "kernels.gfx1201.hsaco",
        "kernels.ccob",
        "kernels.zlib.ccob",
        "kernels.hipfb",
        "kernels.host.o",
        "kernels.sm_80.cubin",
        "kernels.sm_90.cubin",
        "kernels.sm_90a.cubin",
        "kernels.fatbin",
    ];
    let mut report = Vec::new();
    for f in formats {
        let seed = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let (objects, _) = katlas_isa::scan_bytes(f, seed.clone());
        assert!(!objects.is_empty(), "{f}: the unmutated fixture must read");
        let done = Arc::new(AtomicUsize::new(0));
        let panics: Failures = Arc::default();
        let current: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (d, p, c) = (done.clone(), panics.clone(), current.clone());
        let name = f.to_string();
        let worker = std::thread::spawn(move || {
            let mut rng = Rng(0x6b61_746c_6173 ^ name.len() as u64);
            for i in 0..INPUTS {
                let input = mutate(&seed, &mut rng);
                *c.lock().unwrap() = input.clone();
                let r = catch_quietly(|| {
                    let _ = katlas_isa::scan_bytes(&name, input.clone());
                });
                if r.is_err() {
                    p.lock().unwrap().push((i, input));
                }
                d.store(i + 1, Ordering::SeqCst);
            }
        });
        let t0 = Instant::now();
        let (mut last, mut since) = (0, Instant::now());
        while done.load(Ordering::SeqCst) < INPUTS {
            std::thread::sleep(Duration::from_millis(20));
            let now = done.load(Ordering::SeqCst);
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() > HANG {
                let p = save_failure(f, now, &current.lock().unwrap());
                panic!("{f}: input #{now} did not finish in {HANG:?} (saved to {})", p.display());
            }
        }
        worker.join().unwrap();
        let panics = panics.lock().unwrap();
        if let Some((i, data)) = panics.first() {
            let p = save_failure(f, *i, data);
            panic!("{f}: {} of {INPUTS} inputs panicked; first #{i} (saved to {})", panics.len(), p.display());
        }
        report.push(format!("{f}: {INPUTS} inputs, 0 panics, 0 hangs, {:.1} s", t0.elapsed().as_secs_f64()));
    }
    for r in &report {
        eprintln!("{r}");
    }
    let rss = peak_rss_kb();
    eprintln!("peak RSS {} MiB", rss / 1024);
    assert!(rss < RSS_LIMIT_KB, "peak RSS {} MiB breaches the 1 GiB bound", rss / 1024);
}
