#![no_main]
// NVIDIA cubins: .nv.info attributes, notes, .nv.compat.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = katlas_isa::oracle::nv::cubin::parse(data);
    let _ = katlas_isa::oracle::nv::cubin::attributes(data);
});
