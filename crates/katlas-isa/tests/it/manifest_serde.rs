//! The manifest's own serialisation: the interned metadata map and the field map read and write
//! like the JSON objects they stand for, mix statuses keep their words, and the batched writers
//! give the bytes serde_json gives.

use katlas_isa::manifest::{FieldMap, Metadata, MixStatus};
use katlas_isa::oracle::{BATCH, KNOWN_KEYS};
use katlas_isa::{scan, write_compact, write_pretty, DisasmMode, ScanOptions};
use std::collections::BTreeMap;

#[test]
fn known_keys_are_sorted_for_binary_search() {
    assert!(KNOWN_KEYS.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn metadata_keeps_first_place_and_last_value_like_a_json_object() {
    let mut m = Metadata::new();
    let mut j = serde_json::Map::new();
    for (k, v) in [(".name", 1), (".x", 2), (".name", 3), (".vgpr_count", 4), (".x", 5)] {
        m.insert(k, v.into());
        j.insert(k.to_string(), v.into());
    }
    assert_eq!(serde_json::to_string(&m).unwrap(), serde_json::to_string(&j).unwrap());
    assert_eq!(m.get(".name"), Some(&3.into()));
    assert_eq!(m.keys().collect::<Vec<_>>(), [".name", ".x", ".vgpr_count"]);
    let back: Metadata = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
    assert_eq!(back, m);
}

#[test]
fn field_map_serialises_like_a_btree_map() {
    let mut f = FieldMap::new();
    let mut b = BTreeMap::new();
    for (k, v) in [(".z", 1), (".access", 2), (".b", 3), (".z", 4)] {
        f.insert(k.to_string(), v.into());
        b.insert(k.to_string(), serde_json::Value::from(v));
    }
    assert_eq!(serde_json::to_string(&f).unwrap(), serde_json::to_string(&b).unwrap());
    assert_eq!(f.get(".z"), Some(&4.into()));
    let back: FieldMap = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    assert_eq!(back, f);
}

#[test]
fn words_round_trip() {
    for w in ["disassembled:katlas-amdgpu", "disabled", "absent:nvdisasm/cuobjdump", "failed:native reader refused the object: x: y", "cached"] {
        let m = MixStatus::from(w);
        assert_eq!(m.to_string(), w);
        assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{w}\""));
        assert_eq!(serde_json::from_str::<MixStatus>(&format!("\"{w}\"")).unwrap(), m);
    }
    assert_eq!(MixStatus::from("absent:llvm-objdump"), MixStatus::Absent("llvm-objdump".into()));
    assert_eq!(MixStatus::from("cached"), MixStatus::Other("cached".into()));
}

fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn bytes_equal_serde_json() {
    let mut m = scan(&[fixtures()], ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("scan");
    assert!(m.objects.len() > 10, "fixtures found: {}", m.objects.len());
    // more objects than one batch, so batch joins are covered too
    let base = m.objects.clone();
    while m.objects.len() <= BATCH {
        m.objects.extend(base.iter().cloned());
    }
    for _ in 0..2 {
        let mut got = Vec::new();
        write_pretty(&mut m, &mut got).unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), serde_json::to_string_pretty(&m).unwrap());
        let mut got = Vec::new();
        write_compact(&mut m, &mut got).unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), serde_json::to_string(&m).unwrap());
        m.objects.clear();
    }
}
