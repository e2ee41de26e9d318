#![no_main]
// The MessagePack pre-check, the rmpv decode behind it, and the in-place reader the metadata
// parser uses: the reader must accept exactly what the check accepts and give the JSON that
// rmpv's value converts to.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let decoded = katlas_isa::oracle::msgpack::decode(data);
    let checked = katlas_isa::oracle::msgpack::check(data);
    assert_eq!(decoded.is_ok(), checked.is_ok());
    if let Ok(v) = decoded {
        let j = katlas_isa::oracle::msgpack::Reader::new(data)
            .json()
            .expect("checked document reads");
        assert_eq!(j, katlas_isa::oracle::msgpack::to_json(&v));
    }
});
