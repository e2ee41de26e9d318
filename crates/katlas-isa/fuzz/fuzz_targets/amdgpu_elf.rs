#![no_main]
// AMD code objects: ELF, notes, MessagePack metadata, kernel descriptors.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = katlas_isa::oracle::amd::parse(data);
});
