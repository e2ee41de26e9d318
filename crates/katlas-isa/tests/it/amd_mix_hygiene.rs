//! Issue 16.8: alignment padding after a kernel's last `s_endpgm` (`s_code_end`, `s_nop`) is not
//! part of the kernel, and flat-scratch spills have their own categories. Our own HIP fixtures,
//! native decoder and llvm-objdump alike (the two paths share the rule).

use katlas_isa::{scan, DisasmMode, ScanOptions};
use std::path::Path;

fn mixes(mode: DisasmMode) -> Vec<(String, String, katlas_isa::manifest::InstructionMix)> {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let m = scan(&[fx.join("kernels.hipfb"), fx.join("kernels.gfx1201.hsaco")], ScanOptions { disasm: mode, ..Default::default() }).unwrap();
    m.objects.iter().flat_map(|o| o.kernels.iter().map(move |k| (o.arch.clone(), k.name.clone(), k.mix.clone().expect("mix")))).collect()
}

#[test]
fn padding_after_the_last_endpgm_is_not_counted() {
    for mode in [DisasmMode::Auto, DisasmMode::External] {
        let all = mixes(mode);
        assert!(all.len() >= 24);
        for (arch, name, mix) in &all {
            assert!(!mix.opcodes.contains_key("s_code_end"), "{mode:?} {arch} {name}: s_code_end counted");
            assert!(mix.opcodes.get("s_endpgm").copied().unwrap_or(0) > 0, "{arch} {name}");
            if name == "saxpy" {
                // a saxpy is loads, a multiply-add and a store: "other" was 66.7% with the padding
                let other = mix.categories.get("other").copied().unwrap_or(0) as f64 / mix.total as f64;
                assert!(other < 0.2, "{mode:?} {arch} saxpy: other {:.1}% of {}: {:?}", 100.0 * other, mix.total, mix.opcodes);
            }
        }
        // the spilling kernel's flat-scratch traffic is its own category where the target uses it
        let spill = all.iter().find(|(a, n, _)| a == "gfx1201" && n == "vgpr_spill").expect("gfx1201 vgpr_spill");
        assert!(spill.2.categories.get("scratch_store").copied().unwrap_or(0) > 0, "{:?}", spill.2.categories);
        assert!(spill.2.categories.get("scratch_load").copied().unwrap_or(0) > 0, "{:?}", spill.2.categories);
    }
}
