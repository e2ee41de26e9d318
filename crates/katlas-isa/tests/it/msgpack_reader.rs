//! The msgpack reader's words match rmpv's, the decoder it replaced: map keys of every kind, and
//! the depth limit's error.

use katlas_isa::oracle::msgpack::{check, decode, key_string, Item, Reader, DEPTH_LIMIT_EXCEEDED};

/// A map key of every kind is named as `rmpv` displays it.
#[test]
fn non_string_keys_read_as_rmpv_displays_them() {
    let keys: &[&[u8]] = &[
        &[0xc0],
        &[0xc3],
        &[0x05],
        &[0xd0, 0xfb],
        &[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        &[0xca, 0x3f, 0xc0, 0x00, 0x00],
        &[0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1],
        &[0xc4, 0x02, 0x01, 0xff],
        &[0xa3, b'a', b'"', b'\n'],
        &[0xa2, 0xff, 0xfe],
        &[0xd4, 0x07, 0x2a],
        &[0x92, 0x01, 0xa1, b'x'],
        &[0x82, 0x01, 0xc0, 0xa1, b'k', 0x90],
    ];
    for key in keys {
        let mut doc = vec![0x81];
        doc.extend_from_slice(key);
        doc.push(0x01);
        check(&doc).expect("a well-formed document");
        let mut r = Reader::new(&doc);
        assert_eq!(r.item().unwrap(), Item::Map(1));
        let got = r.key().unwrap().into_owned();
        let want = match decode(&doc).unwrap() {
            rmpv::Value::Map(m) => key_string(&m[0].0),
            other => panic!("{other}"),
        };
        assert_eq!(got, want, "key bytes {key:02x?}");
    }
}

#[test]
fn too_deep_is_rmpvs_error() {
    let mut doc = vec![0x91u8; 40];
    doc.push(0x01);
    let want = decode(&doc).map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(check(&doc).map_err(|e| e.to_string()), want);
    assert!(want.unwrap_err().ends_with(DEPTH_LIMIT_EXCEEDED), "rmpv's wording, word for word");
}
