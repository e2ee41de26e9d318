#![no_main]
// Uncompressed clang offload bundles; the magic is prepended so inputs reach the entry table.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = katlas_isa::bundle::BUNDLE_MAGIC.to_vec();
    d.extend_from_slice(data);
    let _ = katlas_isa::bundle::parse_bundle(&d);
    let _ = katlas_isa::bundle::split_records(&katlas_isa::blob::Blob::from_vec(d));
});
