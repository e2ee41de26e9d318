//! Inputs that made the cargo-fuzz targets (crates/katlas-isa/fuzz/) panic, rebuilt from the
//! committed fixtures so no fuzzer artefact has to be committed. Each must give Ok or Err.

use crate::common;

/// The fixture with its `amdhsa.target` string replaced in place (same length, so the
/// MessagePack and the ELF stay well-formed).
fn hsaco_with_target(from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut d = std::fs::read(common::own_fixtures().join("kernels.gfx1201.hsaco")).expect("tests/fixtures/kernels.gfx1201.hsaco");
    let at: Vec<usize> = d.windows(from.len()).enumerate().filter(|(_, w)| *w == from).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 1, "target string must occur once in the fixture");
    d[at[0]..at[0] + to.len()].copy_from_slice(to);
    d
}

/// scan_any crash (2026-11-30): a bundle entry whose target read `gfx1-30` made the
/// generation lookup slice two digits out of one (`descriptor.rs`, "end byte index 2").
#[test]
fn one_digit_processor_name_does_not_panic() {
    let d = hsaco_with_target(b"amdgcn-amd-amdhsa--gfx1201", b"amdgcn-amd-amdhsa--gfx1-01");
    let p = katlas_isa::oracle::amd::parse(&d).expect("well-formed object with an unknown processor");
    assert_eq!(p.arch, "gfx1-01");
    assert!(!p.kernels.is_empty());
    // gfx1 is read as generation 1 (< 10), so SGPRs are decoded from the descriptor.
    let kd = p.kernels[0].amd.as_ref().and_then(|a| a.descriptor.as_ref()).expect("descriptor decoded");
    assert!(kd.sgpr_alloc.is_some());
    // The whole pipeline, as the fuzz target drives it.
    let (objects, _errors) = katlas_isa::scan_bytes("regression", d);
    assert_eq!(objects.len(), 1);
}

/// Same path with a bare one-digit major and no suffix at all.
#[test]
fn bare_major_processor_name_does_not_panic() {
    let d = hsaco_with_target(b"--gfx1201", b"--gfx9\0\0\0");
    let _ = katlas_isa::oracle::amd::parse(&d);
    let _ = katlas_isa::scan_bytes("regression", d);
}

/// ccob crash (2026-11-30, fuzzer input already minimal): a version-1 CCOB record (no total
/// size) shorter than its 20-byte header made `end - header_len` underflow.
#[test]
fn ccob_v1_shorter_than_its_header_is_an_error() {
    let d = b"CCOB\x01\x00\x00\x00\x22\x00\x00\x00";
    let e = katlas_isa::oracle::bundle::decompress_ccob(d).expect_err("12 bytes cannot hold a v1 header");
    assert!(e.to_string().contains("CCOB"), "{e}");
    let _ = katlas_isa::scan_bytes("regression", d.to_vec());
}
