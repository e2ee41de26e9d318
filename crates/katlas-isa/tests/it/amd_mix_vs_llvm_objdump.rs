//! The native AMDGPU decoder's per-kernel instruction mix must equal the one from
//! `llvm-objdump-22 -d` (split at symbol labels) for every kernel compared: our own fixtures
//! in full, rocRAND (trixie v4, sid v6), hipBLASLt and rocSPARSE on a deterministic sample of
//! objects per architecture (the full run: `cargo run --release -p katlas-isa --example
//! mix_oracle -- PATH...`, see docs/isa.md). Any mismatch is listed with the kernel and the
//! first instruction where the two part ways.

use crate::common;
use crate::support::mix_tally::Tally;

use katlas_isa::manifest::Vendor;
use katlas_isa::oracle::{check_object, sample, ArchTotals};
use katlas_isa::Tool;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn objdump() -> Tool {
    Tool { name: "llvm-objdump".into(), path: common::tool("llvm-objdump-22"), version: None }
}

/// Compares the sampled AMD objects of `files`; fails listing every refusal and mismatch.
fn check(label: &str, files: &[PathBuf], per_arch: usize) -> BTreeMap<String, ArchTotals> {
    let tool = objdump();
    let mut objects = Vec::new();
    let mut keep = Vec::new();
    for f in files {
        let (objs, errors, bytes) = katlas_isa::oracle::scan_file_with_bytes(f).expect("scan");
        assert!(errors.is_empty(), "{}: scan errors {:?}", f.display(), errors);
        for o in objs.into_iter().filter(|o| o.vendor == Vendor::Amd) {
            let b = bytes.get(&o.chain_text).expect("object bytes kept").clone();
            objects.push((o.arch.clone(), (o, b)));
        }
        keep.push(bytes);
    }
    let chosen = sample(objects, per_arch);
    let results: Vec<_> = chosen
        .par_iter()
        .map(|(arch, (o, b))| {
            let names: Vec<String> = o.kernels.iter().map(|k| k.name.clone()).collect();
            (arch.clone(), o.chain_text.clone(), check_object(&tool, arch, b.bytes(), &names))
        })
        .collect();
    let mut tally = Tally::default();
    for (arch, chain, r) in results {
        tally.add(&arch, &chain, r);
    }
    let Tally { totals, disagreements: bad } = tally;
    for (arch, t) in &totals {
        eprintln!(
            "{label} {arch}: {} objects, {} kernels, {} instructions, {} refused, {} kernels mismatched",
            t.objects, t.kernels, t.instructions, t.refused, t.mismatched_kernels
        );
    }
    assert!(!totals.is_empty(), "{label}: no AMD objects");
    assert!(bad.is_empty(), "{label}: {} disagreements with llvm-objdump:\n{}", bad.len(), bad.iter().take(40).cloned().collect::<Vec<_>>().join("\n"));
    assert!(totals.values().all(|t| t.instructions > 0), "{label}: an architecture had no instructions");
    totals
}

#[test]
fn own_fixtures_native_mix_equals_llvm_objdump() {
    let d = common::own_fixtures();
    let files: Vec<PathBuf> = ["kernels.hipfb", "kernels.ccob", "kernels.gfx1201.hsaco", "kernels.host.o"].iter().map(|f| d.join(f)).collect();
    let t = check("own fixtures", &files, 0);
    for arch in ["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201"] {
        assert!(t.contains_key(arch), "own fixtures lack {arch}");
    }
}

#[test]
fn rocrand_native_mix_equals_llvm_objdump() {
    let trixie = common::fetched_file("deb/trixie/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    let sid = common::fetched_file("deb/sid/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    // trixie: all 10 objects (one per arch); sid: 2 of the 15 objects per arch
    check("rocRAND trixie (v4)", &[trixie], 0);
    check("rocRAND sid (v6)", &[sid], 2);
}

#[test]
fn hipblaslt_native_mix_equals_llvm_objdump() {
    let dir = common::fetched_file("deb/sid/libhipblaslt1/usr/lib/x86_64-linux-gnu/hipblaslt/library");
    let mut hsaco: Vec<PathBuf> = Vec::new();
    let mut co: Vec<PathBuf> = Vec::new();
    for e in std::fs::read_dir(&dir).expect("library dir").flatten() {
        let p = e.path();
        let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if n.starts_with("Kernels.so-000-gfx") {
            hsaco.push(p);
        } else if n.ends_with(".co") {
            co.push(p);
        }
    }
    hsaco.sort();
    co.sort();
    assert!(hsaco.len() >= 8, "expected Kernels.so-000-gfx*.hsaco, found {}", hsaco.len());
    // the raw hsaco files are large (10 MB, ~1,300 kernels each): a few of them
    let few: Vec<PathBuf> = hsaco
        .iter()
        .filter(|p| {
            let n = p.to_string_lossy();
            ["gfx908.", "gfx90a.", "gfx1100.", "gfx1151.", "gfx1201."].iter().any(|a| n.contains(a))
        })
        .cloned()
        .collect();
    check("hipBLASLt Kernels.so-000-gfx*.hsaco", &few, 0);
    // TensileLibrary_*.co: every 25th file, 3 objects per arch
    let co: Vec<PathBuf> = co.into_iter().step_by(25).collect();
    check("hipBLASLt TensileLibrary_*.co", &co, 3);
}

#[test]
fn rocsparse_native_mix_equals_llvm_objdump_on_a_sample() {
    let f = common::fetched_file("deb/bookworm/librocsparse0/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    // 777 objects, 88k kernels: 2 objects per arch here; the full comparison is the
    // mix_oracle example's job
    check("rocSPARSE (bookworm)", &[f], 2);
}

#[test]
fn decoder_refuses_garbage_without_panicking() {
    use katlas_isa::oracle::amd::decode::Decoder;
    for arch in ["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201"] {
        let d = Decoder::for_arch(arch).unwrap_or_else(|| panic!("no table for {arch}"));
        // every 32-bit prefix pattern, with and without following bytes: an answer or an error
        let mut seed = 0x9e3779b97f4a7c15u64;
        for i in 0..200_000u32 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let bytes = seed.to_le_bytes();
            let len = (i % 9) as usize;
            let code = [&bytes[..], &[0u8; 8][..]].concat();
            if let Ok((size, m)) = d.decode(&code[..len.min(code.len())], 0) {
                assert!(size >= 4 && size <= len && !m.is_empty(), "{arch}: {size} {m}");
            }
        }
    }
    // a known word decodes; an unknown opcode is an error naming the word
    let d = Decoder::for_arch("gfx900").unwrap();
    assert_eq!(d.decode(&0xBF810000u32.to_le_bytes(), 0).unwrap(), (4, "s_endpgm"));
    assert!(Decoder::for_arch("gfx600").is_none());
}

fn scan_one(path: &std::path::Path, opts: katlas_isa::ScanOptions) -> katlas_isa::IsaManifest {
    katlas_isa::scan(&[path.to_path_buf()], opts).expect("scan")
}

#[test]
fn auto_mix_is_native_without_any_external_tool() {
    // no llvm-objdump at all: the AMD mix still comes, from the built-in decoder
    let opts = katlas_isa::ScanOptions { disasm: katlas_isa::DisasmMode::Always, disassemblers: Some(Default::default()), ..Default::default() };
    let m = scan_one(&common::own_fixtures().join("kernels.hipfb"), opts);
    assert!(!m.objects.is_empty());
    for o in &m.objects {
        assert_eq!(o.mix_status.as_ref().map(|m| m.to_string()).as_deref(), Some("disassembled:katlas-amdgpu"), "{}", o.chain_text);
        for k in &o.kernels {
            let mix = k.mix.as_ref().expect("mix");
            assert!(mix.total > 0 && mix.total == mix.categories.values().sum::<u64>());
        }
    }
    let native = m.disassemblers.iter().find(|d| d.name == "katlas-amdgpu").expect("listed");
    assert_eq!(native.status, "used");
    assert!(native.version.as_deref().unwrap_or("").contains("LLVM 22"), "{:?}", native.version);
}

#[test]
fn an_object_the_decoder_refuses_falls_back_to_llvm_objdump() {
    let src = common::own_fixtures().join("kernels.gfx1201.hsaco");
    let mut bytes = std::fs::read(&src).unwrap();
    let ranges = katlas_isa::oracle::amd::kernel_code_ranges(&bytes).unwrap();
    let (name, off, _) = ranges.iter().find(|r| r.0 == "saxpy").expect("saxpy").clone();
    // an encoding no gfx12 table has, as the kernel's first word
    bytes[off as usize..off as usize + 4].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("patched.hsaco");
    std::fs::write(&path, &bytes).unwrap();
    let err = katlas_isa::oracle::amd::decode::object_mix(&bytes, "gfx1201").unwrap_err();
    assert!(err.contains(&name) && err.contains("0xffffffff"), "{err}");
    let m = scan_one(
        &path,
        katlas_isa::ScanOptions {
            disasm: katlas_isa::DisasmMode::Auto,
            disassemblers: Some(katlas_isa::Disassemblers { amd: Some(objdump()), ..Default::default() }),
            ..Default::default()
        },
    );
    let o = &m.objects[0];
    assert_eq!(o.mix_status.as_ref().map(|m| m.to_string()).as_deref(), Some("disassembled:llvm-objdump"));
    assert!(o.warnings.iter().any(|w| w.contains("native AMDGPU decoder refused") && w.contains("0xffffffff")), "{:?}", o.warnings);
    assert!(o.kernels.iter().all(|k| k.mix.as_ref().is_some_and(|m| m.total > 0)));
    // --disasm objdump never uses the native decoder
    let ext = scan_one(
        &src,
        katlas_isa::ScanOptions {
            disasm: katlas_isa::DisasmMode::External,
            disassemblers: Some(katlas_isa::Disassemblers { amd: Some(objdump()), ..Default::default() }),
            ..Default::default()
        },
    );
    assert_eq!(ext.objects[0].mix_status.as_ref().map(|m| m.to_string()).as_deref(), Some("disassembled:llvm-objdump"));
}
