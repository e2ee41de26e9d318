//! The embedded data loads, validates and answers lookups; overrides patch it and
//! malformed overrides are reported with file, line and key.

use katlas_arch::{ArchDb, ArchError, Vendor};
use std::fs;

const AMD_ATOMS: &[&str] = &[
    "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1010", "gfx1011", "gfx1012", "gfx1013", "gfx1030", "gfx1031", "gfx1032",
    "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1200", "gfx1201",
];
const NV_ATOMS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"];

fn names(v: Vec<&katlas_arch::Atom>) -> Vec<String> {
    v.into_iter().map(|a| a.name.clone()).collect()
}

#[test]
fn builtin_loads_with_every_required_atom() {
    let db = ArchDb::load(None).expect("builtin data must load");
    for name in AMD_ATOMS.iter().chain(NV_ATOMS) {
        let a = db.atom(name).unwrap_or_else(|| panic!("atom {name} missing"));
        assert_eq!(&a.name, name);
    }
    assert!(db.atoms().all(|a| (a.vendor == Vendor::Amd) == a.amd.is_some()));
    assert!(db.atoms().all(|a| (a.vendor == Vendor::Nvidia) == a.nvidia.is_some()));
    // builtin() is the same data, parsed once.
    assert_eq!(ArchDb::builtin().atoms().count(), db.atoms().count());
    assert!(std::ptr::eq(ArchDb::builtin(), ArchDb::builtin()));
}

#[test]
fn every_number_has_a_source() {
    let db = ArchDb::builtin();
    for a in db.atoms() {
        assert!(!a.source.trim().is_empty(), "atom {} has no source", a.name);
        for (k, s) in &a.sources {
            assert!(!s.trim().is_empty(), "atom {} key {k} has an empty source", a.name);
        }
    }
    for p in db.products() {
        let mut all = vec![("units", p.units.source.as_str()), ("peak_bw_gbps", p.peak_bw_gbps.source.as_str())];
        for (k, v) in [("boost_clock_mhz", &p.boost_clock_mhz), ("memory_gb", &p.memory_gb), ("llc_mib", &p.llc_mib)] {
            if let Some(v) = v {
                all.push((k, v.source.as_str()));
            }
        }
        for (k, v) in &p.peak_rates {
            all.push((k.as_str(), v.source.as_str()));
            assert!(!v.measured, "{} {k}: datasheet rates are not measured", p.name);
        }
        for (k, s) in all {
            assert!(!s.trim().is_empty(), "product {} value {k} has no source", p.name);
        }
    }
}

#[test]
fn products_reference_existing_atoms_of_their_vendor() {
    let db = ArchDb::builtin();
    assert!(db.products().count() >= 20);
    for p in db.products() {
        let a = db.atom(&p.atom).unwrap_or_else(|| panic!("{}: atom {} missing", p.name, p.atom));
        assert_eq!(a.vendor, p.vendor, "{}", p.name);
        assert!(p.units.value > 0 && p.peak_bw_gbps.value > 0.0);
    }
    for (product, atom) in [
        ("Radeon RX 7900 XTX", "gfx1100"),
        ("Radeon RX 9070 XT", "gfx1201"),
        ("Radeon Pro W7900", "gfx1100"),
        ("Instinct MI300X", "gfx942"),
        ("Instinct MI250X", "gfx90a"),
        ("Instinct MI100", "gfx908"),
        ("Radeon VII", "gfx906"),
        ("Radeon RX 6900 XT", "gfx1030"),
        ("Ryzen AI Max+ 395 / Radeon 8060S", "gfx1151"),
        ("NVIDIA H200", "sm_90"),
        ("NVIDIA H100 SXM", "sm_90"),
        ("NVIDIA A100 SXM 80GB", "sm_80"),
        ("NVIDIA RTX 4090", "sm_89"),
        ("NVIDIA L40S", "sm_89"),
    ] {
        let p = db.product(product).unwrap_or_else(|| panic!("product {product} missing"));
        assert_eq!(p.atom, atom, "{product}");
        assert!(db.products_for_atom(atom).iter().any(|q| q.name == p.name));
    }
}

#[test]
fn families_and_classes_are_consistent() {
    let db = ArchDb::builtin();
    // The hipfire family tag `gfx11` reaches the RDNA3 chips, not the RDNA 3.5 APUs.
    assert_eq!(names(db.family_members("gfx11")), ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]);
    assert_eq!(names(db.family_members("gfx115")), ["gfx1150", "gfx1151", "gfx1152"]);
    assert_eq!(names(db.family_members("gfx12")), ["gfx1200", "gfx1201"]);
    assert!(names(db.family_members("gfx9")).contains(&"gfx942".to_string()));
    assert_eq!(names(db.family_members("sm_9x")), ["sm_90", "sm_90a"]);
    // A chip tag resolves to itself.
    assert_eq!(names(db.family_members("gfx1151")), ["gfx1151"]);
    assert!(db.family_members("gfx13").is_empty());
    // Classes.
    assert_eq!(db.atom("gfx1151").unwrap().class, "rdna3p5");
    assert_eq!(db.atom("gfx1100").unwrap().class, "rdna3_dgpu");
    assert_eq!(db.atom("gfx1201").unwrap().class, "rdna4");
    assert_eq!(db.atom("gfx942").unwrap().class, "cdna3");
    assert_eq!(db.atom("gfx950").unwrap().class, "cdna4");
    assert_eq!(db.atom("sm_90").unwrap().class, "hopper");
    for a in db.atoms() {
        let fam = db.family_members(&a.family);
        assert!(fam.iter().all(|m| m.vendor == a.vendor), "family {} mixes vendors", a.family);
        assert!(a.wave_sizes.contains(&a.default_wave_size));
    }
    // Capabilities that decide legality of levers.
    let has = |atom: &str, cap: &str| db.atom(atom).unwrap().has_cap(cap);
    assert!(has("gfx1100", "wmma") && !has("gfx1100", "swmmac") && !has("gfx1100", "mfma"));
    assert!(has("gfx1201", "swmmac"));
    assert!(has("gfx942", "mfma") && has("gfx908", "mfma") && !has("gfx906", "mfma"));
    assert!(has("sm_90a", "wgmma") && !has("sm_90", "wgmma") && has("sm_90", "tma"));
    assert!(db.atom("gfx950").unwrap().matrix["mfma"].contains(&"fp4".to_string()));
    assert!(db.atom("gfx1201").unwrap().matrix["wmma"].contains(&"fp8".to_string()));
    assert!(!db.atom("gfx1100").unwrap().matrix["wmma"].contains(&"fp8".to_string()));
    assert_eq!(db.atom("sm_90a").unwrap().variant_of.as_deref(), Some("sm_90"));
    assert_eq!(db.atom("sm_90").unwrap().variant_of, None);
}

#[test]
fn register_files_follow_llvm() {
    let db = ArchDb::builtin();
    let w32 = |n: &str| db.atom(n).unwrap().amd.as_ref().unwrap().vgpr_wave32.clone().map(|f| (f.total, f.granule));
    let w64 = |n: &str| db.atom(n).unwrap().amd.as_ref().unwrap().vgpr_wave64.clone().map(|f| (f.total, f.granule));
    // LLVM getTotalNumVGPRs / getVGPRAllocGranule.
    for n in ["gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201"] {
        assert_eq!(w32(n), Some((1536, 24)), "{n}");
        assert_eq!(w64(n), Some((768, 12)), "{n}");
    }
    for n in ["gfx1102", "gfx1103", "gfx1150", "gfx1152", "gfx1030", "gfx1031", "gfx1032"] {
        assert_eq!(w32(n), Some((1024, 16)), "{n}");
        assert_eq!(w64(n), Some((512, 8)), "{n}");
    }
    for n in ["gfx1010", "gfx1011", "gfx1012", "gfx1013"] {
        assert_eq!(w32(n), Some((1024, 8)), "{n}");
    }
    for n in ["gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"] {
        assert_eq!(w64(n), Some((512, 8)), "{n}");
        assert_eq!(w32(n), None, "{n}");
    }
    assert_eq!(w64("gfx906"), Some((256, 4)));
    assert_eq!(db.atom("gfx950").unwrap().amd.as_ref().unwrap().lds_bytes_per_cu, 160 * 1024);
}

#[test]
fn sm90_limits_match_ncu_device_attributes() {
    // device__attribute_* of an H200 from fixtures/h200/ncu_llama_raw.csv
    // (ncu 2025.3, CUDA 13.0), copied here.
    let nv = ArchDb::builtin().atom("sm_90").unwrap().nvidia.clone().unwrap();
    assert_eq!(nv.max_blocks_per_sm, 32); // max_blocks_per_multiprocessor
    assert_eq!(nv.regs_per_sm, 65_536); // max_registers_per_multiprocessor
    assert_eq!(nv.max_regs_per_block, 65_536); // max_registers_per_block
    assert_eq!(nv.max_regs_per_thread, 255); // max_registers_per_thread
    assert_eq!(nv.smem_per_block_default, 49_152); // max_shared_memory_per_block
    assert_eq!(nv.smem_per_block_optin, 232_448); // max_shared_memory_per_block_optin
    assert_eq!(nv.smem_per_sm, 233_472); // max_shared_memory_per_multiprocessor
    assert_eq!(nv.max_threads_per_block, 1_024); // max_threads_per_block
    assert_eq!(nv.max_threads_per_sm, 2_048); // max_threads_per_multiprocessor
    assert_eq!(nv.max_warps_per_sm, 64); // max_warps_per_multiprocessor
    assert_eq!(nv.smem_reserved_per_block, 1_024); // reserved_shared_memory_per_block
    assert_eq!(nv.max_warps_per_sm / nv.sub_partitions, 16); // max_warps_per_scheduler
    let h200 = ArchDb::builtin().product("NVIDIA H200").unwrap();
    assert_eq!(h200.units.value, 132); // multiprocessor_count
}

#[test]
fn atom_lookup_accepts_tool_spellings() {
    let db = ArchDb::builtin();
    for (spelling, atom) in [
        ("gfx90a", "gfx90a"),
        ("gfx90a:xnack-", "gfx90a"),
        ("gfx942:sramecc+:xnack-", "gfx942"),
        ("hipv4-amdgcn-amd-amdhsa--gfx1100", "gfx1100"),
        ("sm_90a", "sm_90a"),
        ("sm90", "sm_90"),
        ("9.0", "sm_90"),
        ("8.9", "sm_89"),
        ("12.0", "sm_120"),
        ("compute_80", "sm_80"),
    ] {
        assert_eq!(db.atom(spelling).map(|a| a.name.as_str()), Some(atom), "{spelling}");
    }
    // Accelerator suffixes not in the table share the base atom's resources.
    assert_eq!(db.atom("sm_89a").map(|a| a.name.as_str()), Some("sm_89"));
    assert_eq!(db.atom("sm_86f").map(|a| a.name.as_str()), Some("sm_86"));
    assert!(db.atom("sm_75a").is_none());
    assert!(db.atom("gfx1300").is_none());
    assert!(db.atom("").is_none());
}

#[test]
fn product_lookup_matches_vendor_strings_without_widening() {
    let db = ArchDb::builtin();
    let name = |s: &str| db.product(s).map(|p| p.name.clone());
    assert_eq!(name("NVIDIA H200").as_deref(), Some("NVIDIA H200"));
    assert_eq!(name("NVIDIA H200 NVL").as_deref(), Some("NVIDIA H200 NVL"));
    assert_eq!(name("NVIDIA H100 80GB HBM3").as_deref(), Some("NVIDIA H100 SXM"));
    assert_eq!(name("NVIDIA H100 PCIe").as_deref(), Some("NVIDIA H100 PCIe"));
    assert_eq!(name("NVIDIA A100-SXM4-80GB").as_deref(), Some("NVIDIA A100 SXM 80GB"));
    assert_eq!(name("NVIDIA A100-SXM4-40GB").as_deref(), Some("NVIDIA A100 SXM 40GB"));
    assert_eq!(name("NVIDIA GeForce RTX 4090").as_deref(), Some("NVIDIA RTX 4090"));
    assert_eq!(name("AMD Radeon RX 7900 XTX").as_deref(), Some("Radeon RX 7900 XTX"));
    assert_eq!(name("amd radeon rx 7900 xt").as_deref(), Some("Radeon RX 7900 XT"));
    assert_eq!(name("AMD Radeon PRO W7900").as_deref(), Some("Radeon Pro W7900"));
    assert_eq!(name("AMD Instinct MI300X").as_deref(), Some("Instinct MI300X"));
    assert_eq!(name("AMD Radeon 8060S").as_deref(), Some("Ryzen AI Max+ 395 / Radeon 8060S"));
    // Different boards with different specs are never folded into a known one.
    assert_eq!(name("NVIDIA GeForce RTX 4090 D"), None);
    assert_eq!(name("NVIDIA H100 NVL"), None);
    assert_eq!(name("AMD Radeon Graphics"), None);
    assert_eq!(name(""), None);
}

#[test]
fn measured_bandwidth_overrides_datasheet() {
    let db = ArchDb::builtin();
    let h200 = db.product("NVIDIA H200").unwrap();
    assert_eq!(h200.peak_bw_gbps.value, 4800.0);
    assert!(!h200.peak_bw_gbps.measured);
    let m = h200.measured_bw_gbps.as_ref().expect("H200 has a measured copy bandwidth");
    assert!(m.measured);
    // fixtures/h200/anchors.json copy_GBps = 4171.102293588255
    assert!((m.value - 4171.1).abs() < 0.05);
    assert!(m.source.contains("anchors.json") && m.source.contains("2026-11-30"));
    assert_eq!(h200.best_bw_gbps(), (4171.1, "measured"));
    let h100 = db.product("NVIDIA H100 SXM").unwrap();
    assert_eq!(h100.best_bw_gbps(), (3350.0, "datasheet"));
    // The NVL board was not measured: the measurement does not leak to it.
    assert!(db.product("NVIDIA H200 NVL").unwrap().measured_bw_gbps.is_none());
}

#[test]
fn json_dump_has_stable_fields() {
    let db = ArchDb::builtin();
    let v = serde_json::to_value(db.atom("gfx1100").unwrap()).unwrap();
    assert_eq!(v["vendor"], "amd");
    assert_eq!(v["amd"]["vgpr_wave32"]["total"], 1536);
    let p = serde_json::to_value(db.product("NVIDIA H200").unwrap()).unwrap();
    assert_eq!(p["measured_bw_gbps"]["measured"], true);
    assert_eq!(p["peak_rates"]["bf16_matrix"]["value"], 989.5);
    let whole = serde_json::to_value(db).unwrap();
    assert_eq!(whole["schema"], "katlas.arch.v1");
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

#[test]
fn override_patches_one_value_and_keeps_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".katlas/rules/arch");
    fs::create_dir_all(&dir).unwrap();
    write(
        &dir,
        "local.toml",
        r#"
[[atom]]
name = "gfx1151"
also_families = ["gfx11"]

[[atom]]
name = "gfx1100"
sources = { "amd.max_waves_per_simd" = "local experiment" }
[atom.amd]
max_waves_per_simd = 12

[[product]]
name = "Radeon RX 7900 XTX"
peak_bw_gbps = { value = 900, source = "our board, memory downclocked" }
[product.peak_rates]
fp32 = { value = 50, source = "our board" }

[[product]]
name = "Lab Board"
vendor = "amd"
atom = "gfx1100"
units = 48
peak_bw_gbps = 480
source = "lab notes"
"#,
    );
    let db = ArchDb::load(Some(&dir)).unwrap();
    let a = db.atom("gfx1100").unwrap();
    assert_eq!(a.amd.as_ref().unwrap().max_waves_per_simd, 12);
    assert_eq!(a.amd.as_ref().unwrap().vgpr_wave32.as_ref().unwrap().total, 1536, "untouched keys stay");
    assert_eq!(a.source_of("amd.max_waves_per_simd"), "local experiment");
    // Atoms that inherit from the patched one see the patch too.
    assert_eq!(db.atom("gfx1101").unwrap().amd.as_ref().unwrap().max_waves_per_simd, 12);
    assert_eq!(ArchDb::builtin().atom("gfx1100").unwrap().amd.as_ref().unwrap().max_waves_per_simd, 16);
    // Declared family membership.
    assert!(names(db.family_members("gfx11")).contains(&"gfx1151".to_string()));
    let p = db.product("AMD Radeon RX 7900 XTX").unwrap();
    assert_eq!(p.peak_bw_gbps.value, 900.0);
    assert_eq!(p.peak_rates["fp32"].value, 50.0);
    assert_eq!(p.peak_rates["fp16_matrix"].value, 122.8, "rates merge entry by entry");
    assert_eq!(p.units.value, 96);
    assert_eq!(db.product("Lab Board").unwrap().units.source, "lab notes");
    assert!(db.files().iter().any(|f| f.ends_with("local.toml")));
    // A missing override directory means no overrides.
    assert!(ArchDb::load(Some(&tmp.path().join("nope"))).is_ok());
}

fn data_err(r: Result<ArchDb, ArchError>) -> (String, usize, String, String) {
    let Err(e) = r else { panic!("expected a data error, the data loaded") };
    match e {
        ArchError::Data { file, line, key, message } => (file, line, key, message),
        other => panic!("expected a data error, got {other:?}"),
    }
}

#[test]
fn malformed_override_names_file_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let bad_type = write(tmp.path(), "bad.toml", "[[atom]]\nname = \"gfx1100\"\n[atom.amd]\nmax_waves_per_simd = \"many\"\n");
    let (file, line, key, msg) = data_err(ArchDb::load(Some(&bad_type)));
    assert!(file.ends_with("bad.toml"), "{file}");
    assert_eq!(line, 4);
    assert_eq!(key, "max_waves_per_simd");
    assert!(msg.contains("invalid type"), "{msg}");

    let unknown = write(tmp.path(), "unknown.toml", "[[product]]\nname = \"NVIDIA H200\"\npeak_bandwidth = 1\n");
    let (file, line, key, msg) = data_err(ArchDb::load(Some(&unknown)));
    assert!(file.ends_with("unknown.toml"));
    assert_eq!((line, key.as_str()), (3, "peak_bandwidth"));
    assert!(msg.contains("unknown field"), "{msg}");

    let missing = write(tmp.path(), "missing.toml", "\n[[atom]]\nname = \"gfx1250\"\nvendor = \"amd\"\nfamily = \"gfx12\"\n");
    let (file, line, key, _) = data_err(ArchDb::load(Some(&missing)));
    assert!(file.ends_with("missing.toml"));
    assert_eq!(line, 3);
    assert_eq!(key, "atom[gfx1250].class");

    let no_source = write(tmp.path(), "nosrc.toml", "[[product]]\nname = \"Lab\"\nvendor = \"amd\"\natom = \"gfx1100\"\nunits = 4\npeak_bw_gbps = 100\n");
    let (_, line, key, msg) = data_err(ArchDb::load(Some(&no_source)));
    assert_eq!((line, key.as_str()), (2, "product[Lab].units"));
    assert!(msg.contains("without a source"), "{msg}");

    let bad_atom =
        write(tmp.path(), "badatom.toml", "[[product]]\nname = \"Lab\"\nvendor = \"amd\"\natom = \"gfx1999\"\nunits = 4\npeak_bw_gbps = 100\nsource = \"x\"\n");
    let (_, _, key, msg) = data_err(ArchDb::load(Some(&bad_atom)));
    assert_eq!(key, "product[Lab].atom");
    assert!(msg.contains("gfx1999"));

    let cycle = write(tmp.path(), "cycle.toml", "[[atom]]\nname = \"gfx1100\"\ninherit = \"gfx1101\"\n");
    let (_, _, key, msg) = data_err(ArchDb::load(Some(&cycle)));
    assert!(key.ends_with(".inherit") && msg.contains("cycle"), "{key} {msg}");

    let syntax = write(tmp.path(), "syntax.toml", "[[atom]]\nname = \"gfx1100\"\nfamily = \n");
    let (_, line, _, _) = data_err(ArchDb::load(Some(&syntax)));
    assert_eq!(line, 3);

    let not_a_number = write(tmp.path(), "nan.toml", "[[product]]\nname = \"NVIDIA H200\"\nunits = \"many\"\n");
    let (_, line, key, msg) = data_err(ArchDb::load(Some(&not_a_number)));
    assert_eq!((line, key.as_str()), (3, "units"));
    assert!(msg.contains("a number, or a table"), "{msg}");

    let measured = write(
        tmp.path(),
        "meas.toml",
        "[[measured]]\nproduct = \"NVIDIA H999\"\nquantity = \"copy_bw_gbps\"\nvalue = 1\nsource = \"s\"\nfile = \"f\"\ndate = \"d\"\nmethod = \"m\"\n",
    );
    let (_, line, key, _) = data_err(ArchDb::load(Some(&measured)));
    assert_eq!((line, key.as_str()), (2, "measured.product"));
}

#[test]
fn builtin_files_reject_duplicates_and_bad_schema() {
    let atom = "[[atom]]\nname = \"sm_80\"\nvendor = \"nvidia\"\n";
    let e = ArchDb::from_sources(&[("a.toml", atom), ("b.toml", atom)]);
    let (file, line, _, msg) = data_err(e);
    assert_eq!((file.as_str(), line), ("b.toml", 2));
    assert!(msg.contains("duplicate"));
    let e = ArchDb::from_sources(&[("s.toml", "schema = \"katlas.arch.v0\"\n")]);
    assert_eq!(data_err(e).2, "schema");
    let e = ArchDb::from_sources(&[("n.toml", "[[atom]]\nname = \"gfx90a:xnack-\"\n")]);
    assert!(data_err(e).3.contains("canonical"));
}

/// Datasheet rates must agree with units x clock x the per-unit rate of the
/// micro-architecture (vendor whitepapers: FP32 FLOP per clock per CU/SM; AMD matrix
/// FP16 FLOP per clock per CU, dense). Catches typos in product data.
#[test]
fn product_rates_agree_with_units_and_clocks() {
    let fp32_per_unit = |atom: &str, class: &str| -> Option<f64> {
        Some(match (atom, class) {
            ("sm_80", _) => 128.0,                                                              // GA100: 64 FP32 lanes per SM
            (_, "ampere" | "ada" | "hopper" | "blackwell" | "blackwell_rtx") => 256.0,          // 128 FP32 lanes
            (_, "gcn5" | "cdna1" | "cdna2" | "rdna2") => 128.0,                                 // 64 lanes per CU
            (_, "cdna3" | "cdna4" | "rdna3_dgpu" | "rdna3_apu" | "rdna3p5" | "rdna4") => 256.0, // dual issue / packed
            _ => return None,
        })
    };
    let f16_matrix_per_cu = |class: &str| -> Option<f64> {
        Some(match class {
            "cdna1" | "cdna2" | "rdna4" => 1024.0,
            "cdna3" => 2048.0,
            "cdna4" => 4096.0,
            "rdna3_dgpu" | "rdna3_apu" | "rdna3p5" => 512.0,
            _ => return None,
        })
    };
    let db = ArchDb::builtin();
    let mut checked = 0;
    for p in db.products() {
        let a = db.atom(&p.atom).unwrap();
        let Some(clock) = &p.boost_clock_mhz else {
            continue;
        };
        let units_ghz = p.units.value as f64 * clock.value / 1000.0;
        let close = |got: f64, want: f64| (got - want).abs() / want < 0.012;
        if let (Some(fp32), Some(per)) = (p.peak_rate("fp32"), fp32_per_unit(&a.name, &a.class)) {
            let want = units_ghz * per / 1000.0;
            assert!(close(fp32, want), "{}: fp32 {fp32} TFLOP/s vs {want:.1} from units x clock", p.name);
            checked += 1;
        }
        if a.vendor == Vendor::Amd {
            if let (Some(m), Some(per)) = (p.peak_rate("fp16_matrix"), f16_matrix_per_cu(&a.class)) {
                let want = units_ghz * per / 1000.0;
                assert!(close(m, want), "{}: fp16_matrix {m} vs {want:.1}", p.name);
                checked += 1;
            }
        }
    }
    assert!(checked >= 35, "{checked}");
}

/// Issue 16: what `a` and `f` code may run on. Architecture-specific (`a`): that compute
/// capability only; family-specific (`f`, CUDA 12.9+): every member of the family with the same
/// major and an equal or later minor (NVIDIA's CUDA 12.9 family-specific features note).
#[test]
fn arch_and_family_specific_targets_say_which_devices_run_them() {
    let db = ArchDb::builtin();
    let runs = |a: &str| db.atom(a).map(|x| (x.name.clone(), x.runs_on.clone()));
    assert_eq!(runs("sm_100f"), Some(("sm_100f".into(), vec!["sm_100".into(), "sm_103".into()])));
    assert_eq!(runs("sm_120f"), Some(("sm_120f".into(), vec!["sm_120".into(), "sm_121".into()])));
    assert_eq!(runs("sm_90a"), Some(("sm_90a".into(), vec!["sm_90".into()])));
    assert_eq!(runs("sm_100a"), Some(("sm_100a".into(), vec!["sm_100".into()])));
    assert_eq!(runs("sm_120a"), Some(("sm_120a".into(), vec!["sm_120".into()])));
    // every family member shares the major version, the family tag and the base's resources
    for f in ["sm_100f", "sm_120f"] {
        let a = db.atom(f).unwrap();
        let base = db.atom(a.variant_of.as_deref().unwrap()).unwrap();
        assert_eq!(a.nvidia, base.nvidia, "{f}: resources of its base");
        for d in &a.runs_on {
            let dev = db.atom(d).unwrap();
            assert_eq!(dev.family, base.family, "{f} runs on {d}");
            let major = |x: &katlas_arch::Atom| x.nvidia.as_ref().unwrap().compute_capability.split('.').next().unwrap().to_string();
            assert_eq!(major(dev), major(base));
        }
    }
    // plain targets say nothing: runs_on is not inherited
    assert!(db.atom("sm_100").unwrap().runs_on.is_empty() && db.atom("sm_103").unwrap().runs_on.is_empty());
}
