#![no_main]
// Uncompressed clang offload bundles; the magic is prepended so inputs reach the entry table.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = katlas_isa::oracle::bundle::BUNDLE_MAGIC.to_vec();
    d.extend_from_slice(data);
    let _ = katlas_isa::oracle::bundle::parse_bundle(&d);
    let _ = katlas_isa::oracle::bundle::split_records(&katlas_isa::oracle::bundle::Blob::from_vec(d));
});
