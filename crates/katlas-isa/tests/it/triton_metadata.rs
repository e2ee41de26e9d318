//! A Triton kernel's launch metadata (`<kernel>.json` in the cache) and the source line its TTIR
//! names.

use katlas_isa::oracle::triton::{parse, source_location};
use std::path::Path;

#[test]
fn amd_target_defaults_to_its_wave_size() {
    // the fields Triton's HIP backend writes (target.arch is the gfx name with features)
    let t = br#"{"name":"k","num_warps":4,"shared":8192,"target":{"backend":"hip","arch":"gfx942:sramecc+:xnack-"}}"#;
    let m = parse(t, Path::new("/nonexistent/k.json")).unwrap();
    assert_eq!((m.block_size, m.warp_size, m.arch.as_deref(), m.shared_dynamic_bytes), (256, 64, Some("gfx942"), 8192));
}

#[test]
fn bad_metadata_names_the_file() {
    let e = parse(br#"{"name":"k"}"#, Path::new("/x/k.json")).unwrap_err();
    assert!(e.contains("/x/k.json") && e.contains("num_warps"), "{e}");
    let e = parse(br#"{"name":"k","num_warps":0}"#, Path::new("/x/k.json")).unwrap_err();
    assert!(e.contains("not a block"), "{e}");
}

#[test]
fn source_location_from_ttir() {
    assert_eq!(source_location("#loc = loc(\"/tmp/tmm.py\":3:0)\n#loc1 = loc(unknown)").as_deref(), Some("/tmp/tmm.py:3"));
    assert_eq!(source_location("module {}"), None);
}
