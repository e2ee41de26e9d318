//! The in-place MessagePack reader behind `amd::parse` must give exactly what the `rmpv`
//! decode + JSON conversion it replaced gave: the same kernels (every metadata field, every
//! argument), the same warnings, the same target and version. The replaced path is kept here
//! as the reference and both run over our own fixtures, the fetched rocRAND and hipBLASLt
//! objects, and thousands of corrupted metadata notes.

use crate::common;

use katlas_isa::manifest::{AmdKernel, Kernel, KernelArg, Resources, Vendor};
use katlas_isa::oracle::amd::{self, descriptor};
use katlas_isa::oracle::elf::Elf;
use katlas_isa::oracle::msgpack;
use rand::{Rng, SeedableRng};
use serde_json::Value as J;

const W: &str = "AMDGPU code object";

/// What `amd::parse` returned before the reader: (target, arch, features, info, kernels, warnings) as JSON.
fn reference(data: &[u8]) -> Result<J, String> {
    let elf = Elf::parse(data, W).map_err(|e| e.to_string())?;
    if elf.machine() != katlas_isa::oracle::elf::EM_AMDGPU {
        return Err(format!("{W}: malformed: e_machine {} is not EM_AMDGPU", elf.machine()));
    }
    if elf.os_abi() != katlas_isa::oracle::elf::ELFOSABI_AMDGPU_HSA {
        return Err(format!("{W}: unsupported: EI_OSABI {} (only AMDGPU_HSA, 64, is read)", elf.os_abi()));
    }
    let co = amd::code_object_version(elf.abi_version()).map_err(|e| e.to_string())?;
    let mut warnings = Vec::new();
    let mut target: Option<String> = None;
    let mut version: Vec<u64> = Vec::new();
    let mut notes = 0u32;
    let mut kernels = Vec::new();
    for (name, ty, desc) in elf.notes(W).map_err(|e| e.to_string())? {
        if name != b"AMDGPU" || ty != 32 {
            continue;
        }
        notes += 1;
        let doc = match msgpack::decode(desc) {
            Ok(v) => v,
            Err(e) => {
                warnings.push(format!("metadata note {notes}: {e}"));
                continue;
            }
        };
        let Some(map) = doc.as_map() else {
            warnings.push(format!("metadata note {notes}: not a map"));
            continue;
        };
        if let Some(t) = msgpack::map_get(map, "amdhsa.target").and_then(|v| v.as_str()) {
            target.get_or_insert_with(|| t.to_string());
        }
        if let Some(v) = msgpack::map_get(map, "amdhsa.version").and_then(|v| v.as_array()) {
            if version.is_empty() {
                version = v.iter().filter_map(|x| x.as_u64()).collect();
            }
        }
        if let Some(ks) = msgpack::map_get(map, "amdhsa.kernels").and_then(|v| v.as_array()) {
            for (i, k) in ks.iter().enumerate() {
                match reference_kernel(k) {
                    Ok(k) => kernels.push(k),
                    Err(e) => warnings.push(format!("metadata note {notes}, kernel {i}: {e}")),
                }
            }
        }
    }
    if notes == 0 {
        return Err(format!("{W}: malformed: no NT_AMDGPU_METADATA note"));
    }
    let target = match target {
        Some(t) => t,
        None => amd::target_from_flags(elf.flags())
            .ok_or_else(|| format!("{W}: malformed: metadata has no amdhsa.target and e_flags {:#x} name no known processor", elf.flags()))?,
    };
    let (arch, features) = amd::split_target(&target);
    descriptor::attach(&elf, &arch, &mut kernels, &mut warnings);
    Ok(serde_json::json!({
        "target": target, "arch": arch, "features": features,
        "info": {"code_object_version": co, "e_flags": elf.flags(), "metadata_version": version,
                 "metadata_notes": notes, "generic_target": arch.ends_with("-generic")},
        "kernels": kernels, "warnings": warnings,
    }))
}

/// A metadata value as `T` (an unsigned count, a three-number size), or `None` when it is
/// absent or not one: serde's own reading, not the reader's hand-written accessors.
fn field<T: serde::de::DeserializeOwned>(v: Option<&J>) -> Option<T> {
    serde_json::from_value(v?.clone()).ok()
}

const TYPED_ARG_FIELDS: [&str; 6] = [".name", ".type_name", ".value_kind", ".offset", ".size", ".address_space"];

fn reference_kernel(k: &rmpv::Value) -> Result<Kernel, String> {
    let Some(kmap) = k.as_map() else {
        return Err(format!("{W}: malformed: kernel metadata is not a map"));
    };
    let meta: serde_json::Map<String, J> =
        kmap.iter().filter(|(key, _)| key.as_str() != Some(".args")).map(|(key, v)| (msgpack::key_string(key), msgpack::to_json(v))).collect();
    let raw_args = msgpack::map_get(kmap, ".args").map(msgpack::to_json);
    let name = meta.get(".name").and_then(J::as_str).ok_or_else(|| format!("{W}: malformed: kernel without .name"))?.to_string();
    let symbol = meta.get(".symbol").and_then(J::as_str).unwrap_or(&name).to_string();
    let args = raw_args
        .as_ref()
        .and_then(J::as_array)
        .map(|a| {
            a.iter()
                .map(|x| KernelArg {
                    name: x.get(".name").and_then(J::as_str).map(str::to_string),
                    type_name: x.get(".type_name").and_then(J::as_str).map(str::to_string),
                    value_kind: x.get(".value_kind").and_then(J::as_str).unwrap_or("").to_string(),
                    offset: field(x.get(".offset")).unwrap_or(0),
                    size: field(x.get(".size")).unwrap_or(0),
                    address_space: x.get(".address_space").and_then(J::as_str).map(str::to_string),
                    access: x.get(".access").or_else(|| x.get(".actual_access")).and_then(J::as_str).map(str::to_string),
                    extra: x
                        .as_object()
                        .map(|o| o.iter().filter(|(k, _)| !TYPED_ARG_FIELDS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut kernel: Kernel = serde_json::from_value(serde_json::json!({
        "name": name, "symbol": symbol, "demangled": katlas_isa::oracle::demangle_uncached(&name), "resources": typed_resources(&meta),
    }))
    .expect("each resource was read alone");
    kernel.amd = Some(AmdKernel { metadata: meta.into(), args, descriptor: None, descriptor_mismatches: vec![] });
    Ok(kernel)
}

/// The metadata key each typed resource comes from, by the resource's name in the manifest.
const RESOURCE_KEYS: [(&str, &str); 12] = [
    ("vgpr", ".vgpr_count"),
    ("sgpr", ".sgpr_count"),
    ("agpr", ".agpr_count"),
    ("vgpr_spill", ".vgpr_spill_count"),
    ("sgpr_spill", ".sgpr_spill_count"),
    ("lds_bytes", ".group_segment_fixed_size"),
    ("scratch_bytes", ".private_segment_fixed_size"),
    ("kernarg_bytes", ".kernarg_segment_size"),
    ("wave_size", ".wavefront_size"),
    ("max_workgroup_size", ".max_flat_workgroup_size"),
    ("reqd_workgroup_size", ".reqd_workgroup_size"),
    ("dynamic_stack", ".uses_dynamic_stack"),
];

/// The typed resources of kernel metadata `meta` as the manifest writes them: each read alone
/// by serde as its field of `Resources`, and left out where the value is not of that field's type.
fn typed_resources(meta: &serde_json::Map<String, J>) -> J {
    let fits = |name: &str, v: &J| serde_json::from_value::<Resources>(serde_json::json!({ name: v })).is_ok();
    let typed: serde_json::Map<String, J> =
        RESOURCE_KEYS.iter().filter_map(|(name, key)| meta.get(*key).filter(|v| fits(name, v)).map(|v| (name.to_string(), v.clone()))).collect();
    typed.into()
}

fn fast(data: &[u8]) -> Result<J, String> {
    let p = amd::parse(data).map_err(|e| e.to_string())?;
    Ok(serde_json::json!({
        "target": p.target, "arch": p.arch, "features": p.features, "info": p.info,
        "kernels": p.kernels, "warnings": p.warnings,
    }))
}

/// Every AMD code object a file holds, with its chain text.
fn amd_objects(path: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let (objs, _, bytes) = katlas_isa::oracle::scan_file_with_bytes(path).expect("readable fixture");
    objs.iter().filter(|o| o.vendor == Vendor::Amd).filter_map(|o| bytes.get(&o.chain_text).map(|b| (o.chain_text.clone(), b.bytes().to_vec()))).collect()
}

fn assert_same(what: &str, data: &[u8]) -> usize {
    let (want, got) = (reference(data), fast(data));
    if want != got {
        let w = serde_json::to_string(&want).unwrap_or_default();
        let g = serde_json::to_string(&got).unwrap_or_default();
        let at = w.bytes().zip(g.bytes()).take_while(|(a, b)| a == b).count();
        panic!(
            "{what}: reader and rmpv reference differ at byte {at}:\n reference …{}\n reader    …{}",
            &w[at.saturating_sub(200)..(at + 200).min(w.len())],
            &g[at.saturating_sub(200)..(at + 200).min(g.len())]
        );
    }
    want.ok().and_then(|j| j["kernels"].as_array().map(Vec::len)).unwrap_or(0)
}

#[test]
fn reader_matches_rmpv_reference_on_own_fixtures() {
    let mut objects = 0;
    let mut kernels = 0;
    for e in std::fs::read_dir(common::own_fixtures()).expect("fixtures dir") {
        let p = e.expect("entry").path();
        if !p.is_file() {
            continue;
        }
        for (chain, data) in amd_objects(&p) {
            kernels += assert_same(&chain, &data);
            objects += 1;
        }
    }
    assert!(objects >= 10 && kernels >= 40, "{objects} objects, {kernels} kernels");
}

#[test]
fn reader_matches_rmpv_reference_on_fetched_libraries() {
    let libs = ["deb/trixie/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1", "deb/sid/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"];
    let mut kernels = 0;
    for l in libs {
        for (chain, data) in amd_objects(&common::fetched_file(l)) {
            kernels += assert_same(&chain, &data);
        }
    }
    // hipBLASLt's hand-written Tensile metadata: a few raw .hsaco files and CCOB .co files
    let dir = common::fetched_file("deb/sid/libhipblaslt1/usr/lib/x86_64-linux-gnu/hipblaslt/library");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("hipblaslt library dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".hsaco") || n.ends_with(".co")
        })
        .collect();
    files.sort();
    let step = (files.len() / 12).max(1);
    for p in files.iter().step_by(step) {
        for (chain, data) in amd_objects(p) {
            kernels += assert_same(&chain, &data);
        }
    }
    assert!(kernels > 6_000, "only {kernels} kernels compared");
}

#[test]
fn reader_matches_rmpv_reference_on_corrupted_notes() {
    let mut objects = Vec::new();
    for e in std::fs::read_dir(common::own_fixtures()).expect("fixtures dir") {
        let p = e.expect("entry").path();
        if p.is_file() {
            objects.extend(amd_objects(&p).into_iter().map(|(_, d)| d));
        }
    }
    assert!(!objects.is_empty());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut cases = 0;
    for (n, obj) in objects.iter().enumerate() {
        // where the metadata notes lie inside the object
        let elf = Elf::parse(obj, W).expect("fixture parses");
        let ranges: Vec<(usize, usize)> = elf
            .notes(W)
            .expect("notes")
            .iter()
            .filter(|(name, ty, _)| *name == b"AMDGPU" && *ty == 32)
            .map(|(_, _, d)| {
                let s = d.as_ptr() as usize - obj.as_ptr() as usize;
                (s, s + d.len())
            })
            .collect();
        assert!(!ranges.is_empty(), "object {n} has no metadata note");
        for _ in 0..400 {
            let mut m = obj.clone();
            let (s, e) = ranges[rng.random_range(0..ranges.len())];
            match rng.random_range(0..4) {
                // flip bits
                0 => {
                    for _ in 0..rng.random_range(1..4) {
                        let i = rng.random_range(s..e);
                        m[i] ^= 1 << rng.random_range(0..8);
                    }
                }
                // a marker byte replaced by an arbitrary one
                1 => {
                    let i = rng.random_range(s..e);
                    m[i] = rng.random();
                }
                // a run of bytes zeroed (shortens strings, empties maps)
                2 => {
                    let i = rng.random_range(s..e);
                    let j = (i + rng.random_range(1..16)).min(e);
                    m[i..j].fill(0);
                }
                // bytes swapped (duplicate keys, reordered fields)
                _ => {
                    let i = rng.random_range(s..e);
                    let j = rng.random_range(s..e);
                    m.swap(i, j);
                }
            }
            assert_same(&format!("object {n} mutation {cases}"), &m);
            cases += 1;
        }
    }
    assert!(cases >= 4_000, "{cases} mutations");
}

#[test]
fn deep_nesting_is_refused_like_rmpv() {
    // arrays nested 40 deep: within the pre-check's 64 levels, beyond what rmpv reads
    for depth in [20usize, 30, 31, 32, 33, 40, 63] {
        for leaf in [&[0x01u8][..], &[0xa1, b'x'][..], &[0x90][..]] {
            let mut doc = vec![0x91u8; depth];
            doc.extend_from_slice(leaf);
            let want = msgpack::decode(&doc).map(|_| ()).map_err(|e| e.to_string());
            let got = msgpack::check(&doc).map_err(|e| e.to_string());
            assert_eq!(got, want, "depth {depth}, leaf {leaf:?}");
            if got.is_ok() {
                let v = msgpack::Reader::new(&doc).json().expect("reads");
                assert_eq!(v, msgpack::to_json(&msgpack::decode(&doc).expect("decodes")));
            }
        }
    }
}
