//! The manifest of our committed fixtures must not change when the scan is made faster: every
//! object's JSON (container chain, md5, target, every metadata field, arguments, descriptor,
//! resources, warnings) is compared byte for byte with `tests/golden/objects.json`,
//! written by the scan before the in-place MessagePack reader, the multi-lane md5 and the
//! compact argument fields. `occupancy` is left out: it comes from katlas-arch's tables, which
//! change on their own schedule (their tests cover it).
//!
//! A deliberate change to the output is recorded with `KATLAS_BLESS=1 cargo test -p katlas-isa
//! --test it manifest_golden` and reviewed in the diff of the golden file.

use crate::common;

use katlas_isa::{scan, DisasmMode, ScanOptions};
use serde_json::Value as J;

fn strip(mut v: J) -> J {
    if let Some(ks) = v.get_mut("kernels").and_then(J::as_array_mut) {
        for k in ks {
            if let Some(o) = k.as_object_mut() {
                o.remove("occupancy");
                o.remove("occupancy_note");
            }
        }
    }
    v
}

fn current() -> String {
    let dir = common::own_fixtures();
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("fixtures dir").filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let m = scan(std::slice::from_ref(&f), ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("scan");
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        for o in m.objects {
            let mut v = serde_json::to_value(&o).expect("object to JSON");
            v["path"] = J::from(name);
            out.push(strip(v));
        }
        for e in m.errors {
            out.push(serde_json::json!({"error": e.message, "file": name, "chain": e.chain}));
        }
    }
    let mut text = serde_json::to_string_pretty(&out).expect("JSON");
    text.push('\n');
    text
}

#[test]
fn committed_fixtures_give_the_golden_manifest() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/objects.json");
    let got = current();
    if std::env::var_os("KATLAS_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("golden dir");
        std::fs::write(&path, &got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (KATLAS_BLESS=1 writes it)", path.display()));
    if got != want {
        let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        let show = |t: &str| t.lines().skip(line.saturating_sub(3)).take(7).collect::<Vec<_>>().join("\n");
        panic!("manifest differs from {} at line {}:\n--- golden\n{}\n--- now\n{}", path.display(), line + 1, show(&want), show(&got));
    }
    assert!(got.matches("\"md5\"").count() >= 18, "objects missing");
}
