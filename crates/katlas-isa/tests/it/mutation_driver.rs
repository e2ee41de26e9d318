//! The hostile-input suite's mutation driver for every code-object container katlas reads
//! (issue 15): 10,000 mutated inputs per container format (AMD HSACO ELF, clang offload
//! bundle, compressed CCOB with zstd and zlib, HIP fat binary, host object with an embedded
//! bundle, NVIDIA cubins for sm_80/sm_90/sm_90a, a CUDA fatbin), built from the committed
//! fixtures, through `katlas_isa::scan_bytes` — the native readers (ELF, notes, msgpack,
//! kernel descriptors, `.nv.info`, decompression). No input may panic, take 5 s, or push the
//! peak RSS past 1 GiB; a failure names the format, the input's number and saves it.

use katlas_testkit::mutate::{assert_peak_rss, drive_all, Job};
use std::path::Path;

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
    let jobs = formats
        .iter()
        .map(|&f| {
            let seed = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            let (objects, _) = katlas_isa::scan_bytes(f, seed.clone());
            assert!(!objects.is_empty(), "{f}: the unmutated fixture must read");
            Job {
                name: f.to_string(),
                saved_as: format!("isa-{f}"),
                seeds: vec![seed],
                read: Box::new(move |input| {
                    let _ = katlas_isa::scan_bytes(f, input.to_vec());
                }),
            }
        })
        .collect();
    assert_peak_rss(&drive_all(jobs));
}
