#![no_main]
// The MessagePack pre-check in front of rmpv.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = katlas_isa::msgpack::decode(data);
});
