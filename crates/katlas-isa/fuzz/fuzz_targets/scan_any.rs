#![no_main]
// Whole pipeline: content detection and every nested container.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = katlas_isa::scan_bytes("fuzz", data.to_vec());
});
