#![no_main]
// Compressed offload bundles (CCOB v1-v3, zlib and zstd).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = katlas_isa::oracle::bundle::CCOB_MAGIC.to_vec();
    d.extend_from_slice(data);
    let _ = katlas_isa::oracle::bundle::decompress_ccob(&d);
});
