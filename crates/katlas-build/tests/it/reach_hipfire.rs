//! `katlas reach` on the real hipfire tree (fixtures/hipfire-tree, MIT) with the `hipfire`
//! preset: the runtime's family rule, kernel loads as dispatch evidence, line numbers that hold
//! the load they cite, chip files nothing embeds.

use katlas_build::{reach, ReachReport, Settings};
use katlas_project::Project;
use std::collections::HashMap;
use std::path::Path;

use katlas_testkit::hipfire_tree::tree;

/// kernels/, crates/ and scripts/ of the tree in a temp project with `config`.
fn project(config: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for sub in ["kernels", "crates", "scripts"] {
        let from = tree().join(sub);
        for e in walkdir::WalkDir::new(&from) {
            let e = e.unwrap();
            let dst = d.path().join(sub).join(e.path().strip_prefix(&from).unwrap());
            if e.file_type().is_dir() {
                std::fs::create_dir_all(&dst).unwrap();
            } else {
                std::fs::copy(e.path(), &dst).unwrap();
            }
        }
    }
    std::fs::write(d.path().join("katlas.toml"), config).unwrap();
    d
}

/// katlas' default matrix minus NVIDIA, explicit: the hazard needs gfx1151 in it (hipfire's own
/// compile-kernels.sh list has no gfx1151).
const MATRIX: &[&str] = &["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201"];

const HIPFIRE: &str = "[project]\npreset = \"hipfire\"\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"crates\"]\n";

fn run(d: &Path, matrix: Option<&[&str]>) -> ReachReport {
    let m: Option<Vec<String>> = matrix.map(|m| m.iter().map(|s| s.to_string()).collect());
    let s = Settings::load(&Project::open(d).unwrap(), m.as_deref()).unwrap();
    reach(&s).unwrap()
}

fn line_at(root: &Path, at: &str, cache: &mut HashMap<String, Vec<String>>) -> (Vec<String>, usize) {
    let (f, l) = at.rsplit_once(':').unwrap();
    let lines = cache.entry(f.to_string()).or_insert_with(|| std::fs::read_to_string(root.join(f)).unwrap().lines().map(str::to_string).collect()).clone();
    (lines, l.parse().unwrap())
}

/// Issue 13.5 (1): the preset's runtime rule is hipfire's first-five-characters rule; reach
/// keeps the table's compile plan and names gfx1151 taking the gfx11 file as a hazard.
#[test]
fn prefix_rule_hazard_gfx1151_takes_the_gfx11_file() {
    let d = project(HIPFIRE);
    let r = run(d.path(), Some(MATRIX));
    assert_eq!(r.family_rule, "prefix5");
    let h: Vec<_> = r.family_hazards.iter().filter(|h| h.kernel == "gemv_hfp4g32_dot2" && h.in_matrix).collect();
    assert_eq!(h.len(), 1, "{:#?}", r.family_hazards);
    assert_eq!((h[0].atom.as_str(), h[0].tag.as_str()), ("gfx1151", "gfx11"));
    assert_eq!(h[0].runtime_file, "kernels/src/gemv_hfp4g32_dot2.gfx11.hip");
    assert_eq!(h[0].compiled, "-", "the table compiles nothing of it for gfx1151");
    assert!(h[0].reason.contains("gfx1151 (rdna3p5, APU)") && h[0].reason.contains("[rdna3_dgpu, dGPU]"), "{}", h[0].reason);
    assert_eq!(r.summary.hazards, r.family_hazards.len());
    // katlas build still compiles by the table.
    assert!(!r.resolutions.iter().any(|x| x.atom == "gfx1151" && x.kernel == "gemv_hfp4g32_dot2"));
    assert!(h[0].in_matrix);
    // hipfire's own matrix (compile-kernels.sh's ARCHS) has no RDNA 3.5 atom; the runtime would
    // still take the gfx11 file on each of them, and reach says so.
    let r = run(d.path(), None);
    assert!(!r.matrix.contains(&"gfx1151".to_string()), "{:?}", r.matrix);
    let h: Vec<(&str, bool)> = r.family_hazards.iter().map(|h| (h.atom.as_str(), h.in_matrix)).collect();
    assert_eq!(h, [("gfx1150", false), ("gfx1151", false), ("gfx1152", false)], "{:#?}", r.family_hazards);
    assert!(r.family_hazards.iter().all(|h| h.runtime_file == "kernels/src/gemv_hfp4g32_dot2.gfx11.hip"));
    // A project without the preset keeps the table and reports no hazard.
    let plain = project("[project]\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"crates\"]\n");
    let r = run(plain.path(), Some(MATRIX));
    assert_eq!(r.family_rule, "table");
    assert!(r.family_hazards.is_empty());
    assert_eq!(r.prefix_traps.len(), 1);
}

/// The chip lists of the `*_for_arch` arms are the runtime's: on gfx1151 five MQ3-Lloyd kernels
/// (and gemv_hfp4g32, whose arm lists gfx1150 and gfx1151 too) load their `.gfx1100.hip` file,
/// which katlas build never compiles for gfx1151; reach names each, in the matrix or out of it.
#[test]
fn for_arch_arms_load_gfx1100_files_on_gfx1151() {
    let five = [
        "fused_gate_up_mq3g256_lloyd",
        "fused_qkv_mq3g256_lloyd",
        "fused_qkvza_mq3g256_lloyd",
        "gemv_hfp4g32",
        "gemv_mq3g256_lloyd",
        "gemv_mq3g256_lloyd_residual",
    ];
    let d = project("[project]\npreset = \"hipfire\"\n");
    for (matrix, in_matrix) in [(Some(MATRIX), true), (None, false)] {
        let r = run(d.path(), matrix);
        let mut on_1151: Vec<&str> =
            r.selector_hazards.iter().filter(|h| h.atom == "gfx1151" && h.runtime_file.ends_with(".gfx1100.hip")).map(|h| h.kernel.as_str()).collect();
        on_1151.sort();
        assert_eq!(on_1151, five, "{:#?}", r.selector_hazards);
        for h in r.selector_hazards.iter().filter(|h| h.atom == "gfx1151" && five.contains(&h.kernel.as_str())) {
            assert_eq!(h.runtime_file, format!("kernels/src/{}.gfx1100.hip", h.kernel));
            assert_eq!(h.compiled, format!("kernels/src/{}.hip", h.kernel), "the table gives gfx1151 the base file");
            assert_eq!(h.in_matrix, in_matrix);
            assert_eq!(h.selector, format!("{}_for_arch", h.kernel));
            let at = h.at.as_deref().unwrap();
            let (lines, l) = line_at(d.path(), at, &mut HashMap::new());
            assert!(lines[l - 1].contains("\"gfx1151\""), "{at}: {}", lines[l - 1]);
        }
        assert_eq!(r.summary.selector_hazards, r.selector_hazards.len());
        // gemv_hfq4g256's default arm: gfx1201 loads the base file, the build compiles the chip file.
        if in_matrix {
            let h = r.selector_hazards.iter().find(|h| h.atom == "gfx1201" && h.kernel == "gemv_hfq4g256").expect("gfx1201 default arm");
            assert_eq!((h.runtime_file.as_str(), h.compiled.as_str()), ("kernels/src/gemv_hfq4g256.hip", "kernels/src/gemv_hfq4g256.gfx1201.hip"));
            assert!(h.reason.contains("default arm"), "{}", h.reason);
        }
    }
    // Without selector functions the arms are not read.
    std::fs::write(d.path().join("katlas.toml"), "[project]\npreset = \"hipfire\"\n[reach]\nselector_functions = []\n").unwrap();
    assert!(run(d.path(), Some(MATRIX)).selector_hazards.iter().all(|h| h.selector == "gemv_hfq4g256_for_arch" && h.at.is_none()));
    std::fs::write(d.path().join("katlas.toml"), "[project]\npreset = \"hipfire\"\n[reach]\nselector_functions = [\"for arch\"]\n").unwrap();
    let e = Settings::load(&Project::open(d.path()).unwrap(), None).unwrap_err().to_string();
    assert!(e.contains("reach.selector_functions") && e.contains("for arch"), "{e}");
}

/// Issue 13.5 (3) and (4): `dispatched` cites a kernel load (add.hip: `ensure_kernel("add", …)`
/// in dispatch.rs, not `.add(offset)` in ffi.rs), and every cited line holds the load it cites.
#[test]
fn dispatched_cites_loads_at_their_real_lines() {
    let d = project(HIPFIRE);
    let r = run(d.path(), None);
    assert_eq!(r.load_patterns, ["ensure_kernel(\"{name}\", _, \"{name}\")", "include_str!(\"{file}\")"]);
    let add = r.dispatched.iter().find(|x| x.file == "kernels/src/add.hip").unwrap();
    let mut cache = HashMap::new();
    let (lines, l) = line_at(d.path(), &add.at, &mut cache);
    assert!(add.at.starts_with("crates/rdna-compute/src/dispatch.rs:"), "{add:?}");
    assert!(lines[l - 1].contains("self.ensure_kernel(\"add\","), "{add:?}: {}", lines[l - 1]);
    assert_eq!(add.via, "ensure_kernel");
    assert!(add.embedded_at.as_deref().is_some_and(|e| e.starts_with("crates/rdna-compute/src/kernels.rs:")), "{add:?}");
    assert!(r.dispatched.len() > 300, "{}", r.dispatched.len());
    for x in &r.dispatched {
        let (lines, l) = line_at(d.path(), &x.at, &mut cache);
        let line = &lines[l - 1];
        match x.via.as_str() {
            "ensure_kernel" => {
                assert!(line.contains(&format!("\"{}\"", x.name)), "{x:?}: {line}");
                assert!(lines[l.saturating_sub(8)..l].iter().any(|s| s.contains("ensure_kernel(")), "{x:?}: no call above");
            }
            "include_str!" => {
                assert!(line.contains(&format!("\"{}\"", x.name)) && lines[l.saturating_sub(3)..l].iter().any(|s| s.contains("include_str!")), "{x:?}: {line}")
            }
            v => panic!("{x:?}: via {v}"),
        }
        if let Some(e) = &x.embedded_at {
            let (lines, l) = line_at(d.path(), e, &mut cache);
            let name = x.file.rsplit('/').next().unwrap();
            assert!(lines[l - 1].contains(&format!("/{name}\"")), "{x:?}: {}", lines[l - 1]);
        }
    }
}

/// Issue 13.5 (4), references mode: without load patterns the first reference of each name is
/// cited, and its line holds the name (the scanner counts lines right past strings continued
/// with a trailing `\`).
#[test]
fn references_mode_lines_are_right_too() {
    let plain = project("[project]\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"crates\"]\n");
    let r = run(plain.path(), None);
    assert!(r.load_patterns.is_empty());
    let word = |line: &str, w: &str| {
        line.match_indices(w).any(|(i, _)| {
            let b = line.as_bytes();
            let ok = |c: Option<&u8>| c.is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
            ok(i.checked_sub(1).and_then(|j| b.get(j))) && ok(b.get(i + w.len()))
        })
    };
    let mut cache = HashMap::new();
    for x in &r.dispatched {
        assert_eq!(x.via, "reference");
        let (lines, l) = line_at(plain.path(), &x.at, &mut cache);
        assert!(word(&lines[l - 1], &x.name), "{x:?}: {}", lines[l - 1]);
    }
}

/// Issue 13.5 (5): chip files no `include_str!` embeds are unreached, naming the file the
/// runtime takes instead; every other tagged file the matrix compiles is embedded.
#[test]
fn chip_files_nothing_embeds_are_unreached() {
    let d = project(HIPFIRE);
    let r = run(d.path(), Some(&["gfx906", "gfx1030", "gfx1100", "gfx1151", "gfx1200", "gfx1201"]));
    let planted = [
        ("kernels/src/gemv_hfq4g256.gfx1201.hip", "kernels/src/gemv_hfq4g256.hip"),
        ("kernels/src/gemv_hfq6g256.gfx1201.hip", "kernels/src/gemv_hfq6g256.hip"),
        ("kernels/src/gated_delta_net_q8.gfx1200.hip", "kernels/src/gated_delta_net_q8.hip"),
    ];
    let mut un: Vec<&str> = r.unreached.iter().map(|u| u.file.as_str()).collect();
    un.sort();
    let mut want: Vec<&str> = planted.iter().map(|p| p.0).collect();
    want.sort();
    assert_eq!(un, want, "{:#?}", r.unreached);
    for (file, runtime) in planted {
        let u = r.unreached.iter().find(|u| u.file == file).unwrap();
        assert!(
            u.reason.contains("no load pattern embeds it (include_str!)") && u.reason.contains(&format!("the runtime takes {runtime} (embedded at")),
            "{}",
            u.reason
        );
        assert!(!r.dispatched.iter().any(|x| x.file == file));
        assert!(!r.undispatched.iter().any(|x| x.file == file));
    }
    for x in r.dispatched.iter().filter(|x| x.file.matches('.').count() > 1) {
        assert!(x.embedded_at.is_some(), "{x:?}");
    }
    let und: Vec<&str> = r.undispatched.iter().map(|u| u.file.as_str()).collect();
    assert_eq!(und, ["kernels/src/gemm_hfq4g256_residual_kt.hip", "kernels/src/gemm_hfq4g256_residual_mw.hip"]);
}

/// The runtime-model keys are validated with the file and key named; `[reach]` wins over the preset.
#[test]
fn runtime_model_keys_are_validated_and_override_the_preset() {
    let d = project(&format!("{HIPFIRE}\n[reach]\nfamily_rule = \"prefixx\"\n"));
    let e = Settings::load(&Project::open(d.path()).unwrap(), None).unwrap_err().to_string();
    assert!(e.contains("reach.family_rule") && e.contains("prefixx"), "{e}");
    std::fs::write(d.path().join("katlas.toml"), format!("{HIPFIRE}\n[reach]\nload_patterns = ['ensure_kernel(name)']\n")).unwrap();
    let e = Settings::load(&Project::open(d.path()).unwrap(), None).unwrap_err().to_string();
    assert!(e.contains("reach.load_patterns") && e.contains("ensure_kernel(name)"), "{e}");
    std::fs::write(d.path().join("katlas.toml"), format!("{HIPFIRE}\n[reach]\nfamily_rule = \"table\"\n")).unwrap();
    let r = run(d.path(), None);
    assert_eq!(r.family_rule, "table");
    assert!(r.family_hazards.is_empty());
    assert!(!r.load_patterns.is_empty(), "the preset's load patterns stay");
}
