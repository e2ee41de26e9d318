#![no_main]
// NVIDIA fatbin containers with raw, LZ4 and zstd entries.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = 0xBA55_ED50u32.to_le_bytes().to_vec();
    d.extend_from_slice(data);
    if let Ok(f) = katlas_isa::oracle::nv::fatbin::parse(&d) {
        for e in &f.entries {
            let _ = katlas_isa::oracle::nv::fatbin::entry_payload(&d, e);
        }
    }
    let _ = katlas_isa::oracle::nv::fatbin::split_containers(&d);
});
