//! Every AMD kernel katlas reads from third-party libraries (Debian rocSPARSE, rocRAND,
//! hipBLASLt) and from our own fixtures is compared, field by field, with what
//! `llvm-readobj-22 --notes` prints for the same code object. Any mismatch is listed.

use crate::common;

use katlas_isa::manifest::Vendor;
use rayon::prelude::*;
use serde_json::Value as J;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Default, Debug)]
struct YKernel {
    fields: BTreeMap<String, String>,
    args: Vec<BTreeMap<String, String>>,
}

#[derive(Default, Debug)]
struct YDoc {
    target: Option<String>,
    kernels: Vec<YKernel>,
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return v[1..v.len() - 1].replace("''", "'");
    }
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        return v[1..v.len() - 1].replace("\\\"", "\"").replace("\\\\", "\\");
    }
    v.to_string()
}

fn kv(s: &str) -> (String, String) {
    match s.split_once(':') {
        Some((k, v)) => {
            let v = v.trim();
            // flow-style lists (`[ 256, 1, 1 ]`, `[]`) compare as comma-joined scalars
            if let Some(inner) = v.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                let items: Vec<String> = inner.split(',').map(unquote).filter(|x| !x.is_empty()).collect();
                return (k.trim().to_string(), if items.is_empty() { "[]".into() } else { items.join(",") });
            }
            (k.trim().to_string(), unquote(v))
        }
        None => (s.trim().to_string(), String::new()),
    }
}

/// Parses the YAML that llvm-readobj prints for NT_AMDGPU_METADATA notes (one doc per note).
fn parse_readobj(text: &str) -> Vec<YDoc> {
    let mut docs = Vec::new();
    let mut cur: Option<YDoc> = None;
    let mut list_key: Option<String> = None;
    for line in text.lines() {
        if line.trim_end().ends_with("AMDGPU Metadata: ---") {
            if let Some(d) = cur.take() {
                docs.push(d);
            }
            cur = Some(YDoc::default());
            continue;
        }
        let Some(doc) = cur.as_mut() else { continue };
        if line == "..." {
            docs.push(cur.take().unwrap());
            continue;
        }
        if let Some(t) = line.strip_prefix("amdhsa.target:") {
            doc.target = Some(unquote(t));
        } else if let Some(rest) = line.strip_prefix("  - ").filter(|r| r.starts_with('.')) {
            let mut k = YKernel::default();
            let (key, val) = kv(rest);
            list_key = if val.is_empty() { Some(key.clone()) } else { None };
            if !(val.is_empty() || key == ".args" && val == "[]") {
                k.fields.insert(key, val);
            }
            doc.kernels.push(k);
        } else if let Some(rest) = line.strip_prefix("    .") {
            let (key, val) = kv(&format!(".{rest}"));
            let Some(k) = doc.kernels.last_mut() else {
                continue;
            };
            if key == ".args" && val == "[]" {
                list_key = None;
            } else if val.is_empty() {
                list_key = Some(key);
            } else {
                list_key = None;
                k.fields.insert(key, val);
            }
        } else if let Some(rest) = line.strip_prefix("      - ") {
            let Some(k) = doc.kernels.last_mut() else {
                continue;
            };
            match list_key.as_deref() {
                Some(".args") => {
                    let (key, val) = kv(rest);
                    k.args.push(BTreeMap::from([(key, val)]));
                }
                Some(lk) => {
                    let e = k.fields.entry(lk.to_string()).or_default();
                    if !e.is_empty() {
                        e.push(',');
                    }
                    e.push_str(&unquote(rest));
                }
                None => {}
            }
        } else if let Some(rest) = line.strip_prefix("        .") {
            if let Some(a) = doc.kernels.last_mut().and_then(|k| k.args.last_mut()) {
                let (key, val) = kv(&format!(".{rest}"));
                a.insert(key, val);
            }
        }
    }
    docs.extend(cur);
    docs
}

fn render(v: &J) -> Option<String> {
    match v {
        J::String(s) => Some(s.clone()),
        J::Number(n) => Some(n.to_string()),
        J::Bool(b) => Some(b.to_string()),
        J::Array(a) if a.is_empty() => Some("[]".into()),
        J::Array(a) => Some(a.iter().filter_map(render).collect::<Vec<_>>().join(",")),
        _ => None,
    }
}

fn compare_object(chain: &str, obj: &katlas_isa::CodeObject, bytes: &[u8], readobj: &Path, dir: &Path, idx: usize) -> (usize, Vec<String>) {
    let f = dir.join(format!("obj{idx}.o"));
    std::fs::write(&f, bytes).expect("write temp object");
    let out = Command::new(readobj).arg("--notes").arg(&f).output().expect("run llvm-readobj");
    let _ = std::fs::remove_file(&f);
    let mut bad = Vec::new();
    if !out.status.success() {
        return (0, vec![format!("{chain}: llvm-readobj failed: {}", String::from_utf8_lossy(&out.stderr))]);
    }
    let docs = parse_readobj(&String::from_utf8_lossy(&out.stdout));
    let theirs: Vec<&YKernel> = docs.iter().flat_map(|d| d.kernels.iter()).collect();
    if let Some(t) = docs.iter().find_map(|d| d.target.clone()) {
        if t != obj.target {
            bad.push(format!("{chain}: target katlas {} readobj {t}", obj.target));
        }
    }
    if theirs.len() != obj.kernels.len() {
        bad.push(format!("{chain}: {} kernels, llvm-readobj {}", obj.kernels.len(), theirs.len()));
    }
    let mut fields = 0;
    for (ours, y) in obj.kernels.iter().zip(theirs.iter()) {
        let amd = ours.amd.as_ref().expect("AMD kernel block");
        for (key, want) in &y.fields {
            fields += 1;
            let got = amd.metadata.get(key).and_then(render);
            if got.as_deref() != Some(want.as_str()) {
                bad.push(format!("{chain} {}: {key} katlas {got:?} readobj {want:?}", ours.name));
            }
        }
        let extra: Vec<_> = amd.metadata.keys().filter(|k| !y.fields.contains_key(*k) && *k != ".args").collect();
        if !extra.is_empty() {
            bad.push(format!("{chain} {}: katlas has fields readobj lacks: {extra:?}", ours.name));
        }
        if y.args.len() != amd.args.len() {
            bad.push(format!("{chain} {}: {} args, readobj {}", ours.name, amd.args.len(), y.args.len()));
        }
        for (i, (a, ya)) in amd.args.iter().zip(y.args.iter()).enumerate() {
            for (key, want) in ya {
                fields += 1;
                let got = match key.as_str() {
                    ".name" => a.name.clone(),
                    ".type_name" => a.type_name.clone(),
                    ".value_kind" => Some(a.value_kind.clone()),
                    ".offset" => Some(a.offset.to_string()),
                    ".size" => Some(a.size.to_string()),
                    ".address_space" => a.address_space.clone(),
                    k => a.extra.get(k).and_then(render),
                };
                if got.as_deref() != Some(want.as_str()) {
                    bad.push(format!("{chain} {} arg {i}: {key} katlas {got:?} readobj {want:?}", ours.name));
                }
            }
        }
        // typed resources must agree with the raw metadata they came from
        let r = &ours.resources;
        let pairs = [
            (".vgpr_count", r.vgpr.map(|x| x.to_string())),
            (".sgpr_count", r.sgpr.map(|x| x.to_string())),
            (".vgpr_spill_count", r.vgpr_spill.map(|x| x.to_string())),
            (".sgpr_spill_count", r.sgpr_spill.map(|x| x.to_string())),
            (".group_segment_fixed_size", r.lds_bytes.map(|x| x.to_string())),
            (".private_segment_fixed_size", r.scratch_bytes.map(|x| x.to_string())),
            (".wavefront_size", r.wave_size.map(|x| x.to_string())),
        ];
        for (key, got) in pairs {
            if y.fields.get(key) != got.as_ref() {
                bad.push(format!("{chain} {}: resources {key} {got:?} readobj {:?}", ours.name, y.fields.get(key)));
            }
        }
    }
    (fields, bad)
}

fn check_files(files: &[PathBuf]) -> (usize, usize, usize, usize, Vec<String>) {
    let readobj = common::tool("llvm-readobj-22");
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = std::sync::atomic::AtomicUsize::new(0);
    // files and the objects inside each file are both checked in parallel
    let per_file: Vec<(usize, usize, usize, usize, Vec<String>)> = files
        .par_iter()
        .map(|f| {
            let (objs, errors, bytes) = katlas_isa::oracle::scan_file_with_bytes(f).expect("scan");
            let mut bad: Vec<String> = errors.iter().map(|e| format!("{}: scan error at {}: {}", f.display(), e.chain, e.message)).collect();
            let amd: Vec<_> = objs.iter().filter(|o| o.vendor == Vendor::Amd).collect();
            if amd.is_empty() {
                bad.push(format!("{}: no AMD code objects found", f.display()));
            }
            let results: Vec<(usize, Vec<String>)> = amd
                .par_iter()
                .map(|o| {
                    let b = bytes.get(&o.chain_text).expect("object bytes kept");
                    let idx = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (n, mut bad) = compare_object(&o.chain_text, o, b.bytes(), &readobj, dir.path(), idx);
                    // the digests of a file's objects are computed many at a time (SIMD lanes),
                    // beside the parse: each must still be its own object's md5. A file of one
                    // object is hashed by the md-5 crate itself, which the check would only
                    // compare with itself (hipBLASLt's 727 .co files: a third of this test's CPU).
                    let want = if amd.len() > 1 { hex::encode(<md5::Md5 as md5::Digest>::digest(b.bytes())) } else { o.md5.clone() };
                    if o.md5 != want {
                        bad.push(format!("{}: md5 {} but the bytes hash to {want}", o.chain_text, o.md5));
                    }
                    (n + 1, bad)
                })
                .collect();
            let kernels = amd.iter().map(|o| o.kernels.len()).sum::<usize>();
            let kd = amd.iter().flat_map(|o| &o.kernels).filter(|k| k.amd.as_ref().is_some_and(|a| !a.descriptor_mismatches.is_empty())).count();
            let mut fields = 0;
            for (n, b) in results {
                fields += n;
                bad.extend(b);
            }
            (amd.len(), kernels, fields, kd, bad)
        })
        .collect();
    let mut acc = (0, 0, 0, 0, Vec::new());
    for (o, k, f, kd, b) in per_file {
        acc.0 += o;
        acc.1 += k;
        acc.2 += f;
        acc.3 += kd;
        acc.4.extend(b);
    }
    acc
}

fn report(label: &str, files: &[PathBuf]) {
    let (objects, kernels, fields, kd, bad) = check_files(files);
    eprintln!(
        "{label}: {objects} objects, {kernels} kernels, {fields} fields compared with llvm-readobj, {} mismatches, {kd} descriptor cross-check disagreements",
        bad.len()
    );
    assert!(kernels > 0, "{label}: no kernels");
    assert!(bad.is_empty(), "{label}: {} mismatches with llvm-readobj:\n{}", bad.len(), bad.iter().take(50).cloned().collect::<Vec<_>>().join("\n"));
}

#[test]
fn own_fixtures_agree_with_llvm_readobj() {
    let d = common::own_fixtures();
    let files: Vec<PathBuf> =
        ["kernels.hipfb", "kernels.ccob", "kernels.zlib.ccob", "kernels.gfx1201.hsaco", "kernels.host.o"].iter().map(|f| d.join(f)).collect();
    report("own fixtures", &files);
}

#[test]
fn rocrand_trixie_and_sid_agree_with_llvm_readobj() {
    let files = vec![
        common::fetched_file("deb/trixie/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"),
        common::fetched_file("deb/sid/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"),
    ];
    report("rocRAND (trixie, sid)", &files);
}

#[test]
fn hipblaslt_raw_hsaco_agree_with_llvm_readobj() {
    let dir = common::fetched_file("deb/sid/libhipblaslt1/usr/lib/x86_64-linux-gnu/hipblaslt/library");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("library dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("Kernels.so-000-gfx")))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "expected the Kernels.so-000-gfx*.hsaco files, found {}", files.len());
    report("hipBLASLt Kernels.so-000-gfx*.hsaco", &files);
}

#[test]
fn hipblaslt_tensile_ccob_agree_with_llvm_readobj() {
    let dir = common::fetched_file("deb/sid/libhipblaslt1/usr/lib/x86_64-linux-gnu/hipblaslt/library");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("library dir").filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "co")).collect();
    files.sort();
    assert!(files.len() > 100, "expected hundreds of TensileLibrary_*.co, found {}", files.len());
    report("hipBLASLt TensileLibrary_*.co (CCOB v2)", &files);
}

#[test]
fn rocsparse_bookworm_agrees_with_llvm_readobj() {
    let f = common::fetched_file("deb/bookworm/librocsparse0/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    report("rocSPARSE (bookworm)", &[f]);
}
