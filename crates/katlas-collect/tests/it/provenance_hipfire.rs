//! Provenance on the real hipfire tree (fixtures/hipfire-tree, MIT): what katlas says must be
//! what hipfire's runtime does. The options are hipfire's runtime model as the `hipfire`
//! project preset sets it (crates/katlas-build/src/config.rs, HIPFIRE_REACH_PRESET; the CLI
//! test crates/katlas/tests/it/provenance_hipfire_cli.rs checks the preset itself).

use katlas_arch::ArchDb;
use katlas_collect::loads::{FamilyRule, LoadPattern, Selector};
use katlas_collect::provenance::{KernelProvenance, ProvenanceIndex, ProvenanceOptions};
use std::collections::BTreeSet;
use std::sync::OnceLock;

use hipfire_tree::{for_arch_files, labels_without_kernel, tree};
use katlas_testkit::hipfire_tree;

fn hipfire_options() -> ProvenanceOptions {
    let mut o = ProvenanceOptions::new(&tree());
    o.kernel_roots = vec!["kernels/src".into()];
    o.dispatch_roots = vec!["crates".into()];
    o.family_rule = FamilyRule::Prefix(5);
    o.load_patterns = ["ensure_kernel(\"{name}\", _, \"{name}\")", "include_str!(\"{file}\")"].iter().map(|p| LoadPattern::parse(p).unwrap()).collect();
    o.profile_patterns = vec![LoadPattern::parse("begin_timer(_, _, \"{name}\")").unwrap()];
    o.selectors = vec![Selector {
        kernel: "gemv_hfq4g256".into(),
        function: Some("gemv_hfq4g256_for_arch".into()),
        archs: vec!["gfx1030".into(), "gfx1031".into()],
        knob: Some("HIPFIRE_RDNA2_VARIANT".into()),
        default: Some("1".into()),
        file: None,
        files: (1..=5).map(|v| (v.to_string(), format!("gemv_hfq4g256.gfx1030.v{v}.hip"))).collect(),
        ..Default::default()
    }];
    o.selector_functions = vec!["*_for_arch".into()];
    o
}

fn index(arch: &str) -> ProvenanceIndex {
    ProvenanceIndex::build(&hipfire_options().with_arch(ArchDb::builtin(), arch))
}

/// The 158 kernel names hipfire's profiler records: the third argument of every
/// `begin_timer(…)` call under crates/ that is a string literal (found here independently of
/// katlas' lexer).
fn profiled() -> &'static Vec<String> {
    static N: OnceLock<Vec<String>> = OnceLock::new();
    N.get_or_init(|| {
        let call = regex::Regex::new(r#"(?s)begin_timer\s*\(([^;]*?)\)\s*;"#).unwrap();
        let lit = regex::Regex::new(r#""([^"\\]*)""#).unwrap();
        let mut names = BTreeSet::new();
        for e in walkdir::WalkDir::new(tree().join("crates")).into_iter().flatten() {
            if e.path().extension().is_some_and(|x| x == "rs") {
                let t = std::fs::read_to_string(e.path()).unwrap();
                for c in call.captures_iter(&t) {
                    let lits: Vec<&str> = lit.captures_iter(&c[1]).map(|m| m.get(1).unwrap().as_str()).collect();
                    if lits.len() >= 2 {
                        names.insert(lits[1].to_string());
                    }
                }
            }
        }
        names.into_iter().collect()
    })
}

fn lines_of(rel: &str) -> Vec<String> {
    std::fs::read_to_string(tree().join(rel)).unwrap().lines().map(str::to_string).collect()
}

fn paths(p: &KernelProvenance) -> Vec<&str> {
    p.sources.iter().map(|s| s.path.as_str()).collect()
}

/// Issue 13.5 (1): hipfire takes family tags by the first five characters of the arch, so
/// gemv_hfp4g32_dot2.gfx11.hip reaches gfx1151; provenance says so, and flags the hazard.
#[test]
fn prefix_family_rule_sends_the_gfx11_file_to_gfx1151_as_a_hazard() {
    let p = index("gfx1151").locate("gemv_hfp4g32_dot2_gfx11");
    assert_eq!(p.families, ["gfx11"]);
    assert_eq!(p.family_rule, "prefix5");
    assert_eq!(paths(&p), ["kernels/src/gemv_hfp4g32_dot2.gfx11.hip"], "{:#?}", p.sources);
    let s = &p.sources[0];
    assert_eq!(s.tag_kind, "family");
    let h = s.hazard.as_deref().expect("hazard");
    assert!(h.contains("gfx1151 (rdna3p5, APU)") && h.contains("table family is gfx115") && h.contains("gfx1100 gfx1101 gfx1102 [rdna3_dgpu, dGPU]"), "{h}");
    assert!(s.embedded_at.iter().any(|a| a.starts_with("crates/rdna-compute/src/kernels.rs:")), "{:?}", s.embedded_at);
    assert_eq!(p.dispatch[0].via.as_deref(), Some("ensure_kernel"));
    // On gfx1100 the same file is no hazard: the table agrees.
    let p = index("gfx1100").locate("gemv_hfp4g32_dot2_gfx11");
    assert_eq!(paths(&p), ["kernels/src/gemv_hfp4g32_dot2.gfx11.hip"]);
    assert!(p.sources[0].hazard.is_none());
    // katlas' own default (the table) keeps it off the APU.
    let mut o = hipfire_options();
    o.family_rule = FamilyRule::Table;
    let p = ProvenanceIndex::build(&o.with_arch(ArchDb::builtin(), "gfx1151")).locate("gemv_hfp4g32_dot2_gfx11");
    assert!(p.sources.is_empty(), "{:#?}", p.sources);
}

/// Issue 13.5 (2): gemv_hfq4g256_for_arch loads .gfx1030.v1.hip on gfx1030 (v2–v5 by
/// HIPFIRE_RDNA2_VARIANT) and the base file elsewhere; no file tagged for another chip ranks first.
#[test]
fn the_rdna2_variant_selector_is_modelled_and_other_chips_never_rank_first() {
    let p = index("gfx1030").locate("gemv_hfq4g256");
    let want: Vec<String> =
        (1..=5).map(|v| format!("kernels/src/gemv_hfq4g256.gfx1030.v{v}.hip")).chain(["kernels/src/gemv_hfq4g256.hip".to_string()]).collect();
    assert_eq!(paths(&p), want.iter().map(String::as_str).collect::<Vec<_>>(), "{:#?}", p.sources);
    assert_eq!(p.sources[0].selected_by.as_deref(), Some("gemv_hfq4g256_for_arch: HIPFIRE_RDNA2_VARIANT=1 (default)"));
    assert_eq!(p.sources[3].selected_by.as_deref(), Some("gemv_hfq4g256_for_arch: HIPFIRE_RDNA2_VARIANT=4"));
    assert!(p.sources[5].reasons.iter().any(|r| r.contains("not loaded on gfx1030") && r.contains("HIPFIRE_RDNA2_VARIANT")), "{:?}", p.sources[5].reasons);
    assert!(p.env_knobs.contains(&"HIPFIRE_RDNA2_VARIANT".to_string()), "{:?}", p.env_knobs);

    let p = index("gfx1151").locate("gemv_hfq4g256");
    assert_eq!(paths(&p), ["kernels/src/gemv_hfq4g256.hip"], "{:#?}", p.sources);
    assert!(p.notes.iter().any(|n| n.contains("HIPFIRE_RDNA2_VARIANT") && n.contains("not on gfx1151")), "{:?}", p.notes);
    for r in &p.dispatch {
        assert_eq!(r.kind, "load");
        let line = &lines_of(&r.path)[r.line as usize - 1];
        assert!(!line.trim_start().starts_with("//"), "a comment is no dispatch: {}:{} {line}", r.path, r.line);
    }

    // Over every profiled kernel and the archs hipfire ships: the first source is never tagged
    // for another chip unless a selector loads it there.
    let db = ArchDb::builtin();
    for arch in ["gfx906", "gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1200", "gfx1201"] {
        let idx = index(arch);
        for k in profiled() {
            let p = idx.locate(k);
            let Some(first) = p.sources.first() else { continue };
            let chip = first.tag.as_deref().and_then(|t| t.split('.').next()).filter(|t| db.atom(t).is_some());
            if let Some(c) = chip {
                assert!(c == arch || first.selected_by.is_some(), "{k} on {arch}: {} ranks first", first.path);
            }
        }
    }
}

/// The arms' chip lists are the runtime's: on gfx1151 the five MQ3-Lloyd kernels whose arms list
/// `"gfx1151"` run the `.gfx1100.hip` file; gemv_hfq4g256's default arm gives gfx1201 the base
/// file. Over every `*_for_arch` function and the archs hipfire ships, the first source is the
/// file the function returns.
#[test]
fn for_arch_match_arms_pick_the_source() {
    let p = index("gfx1151").locate("gemv_mq3g256_lloyd");
    assert_eq!(p.sources[0].path, "kernels/src/gemv_mq3g256_lloyd.gfx1100.hip", "{:#?}", p.sources);
    assert_eq!(p.sources[0].tag_kind, "other-arch");
    let by = p.sources[0].selected_by.as_deref().unwrap();
    assert!(by.starts_with("gemv_mq3g256_lloyd_for_arch (crates/rdna-compute/src/kernels.rs:"), "{by}");
    let base = &p.sources[1];
    assert!(base.reasons.iter().any(|r| r.contains("not loaded on gfx1151: gemv_mq3g256_lloyd_for_arch")), "{base:?}");
    let p = index("gfx1201").locate("gemv_hfq4g256");
    assert_eq!(p.sources[0].path, "kernels/src/gemv_hfq4g256.hip");
    assert!(p.sources[0].reasons.iter().any(|r| r.contains("loads this on gfx1201 (its default arm)")), "{:?}", p.sources[0].reasons);

    let mut checked = 0;
    for arch in ["gfx906", "gfx1010", "gfx1030", "gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201"] {
        let idx = index(arch);
        let truth = for_arch_files(arch);
        for (kernel, (file, line)) in &truth {
            let p = idx.locate(kernel);
            assert_eq!(p.sources.first().map(|s| s.path.as_str()), Some(file.as_str()), "{kernel} on {arch}: {:#?}", p.sources);
            let by = p.sources[0].selected_by.as_deref().unwrap_or("");
            // The configured RDNA2 knob selector speaks for gfx1030; elsewhere the arm itself.
            assert!(by.ends_with(&format!("kernels.rs:{line})")) || by.contains("HIPFIRE_RDNA2_VARIANT"), "{kernel} on {arch}: {by}");
            checked += 1;
        }
        if arch == "gfx1151" {
            let five: Vec<&str> = truth.iter().filter(|(_, (f, _))| f.ends_with(".gfx1100.hip")).map(|(k, _)| k.as_str()).collect();
            for k in
                ["gemv_mq3g256_lloyd", "gemv_mq3g256_lloyd_residual", "fused_gate_up_mq3g256_lloyd", "fused_qkv_mq3g256_lloyd", "fused_qkvza_mq3g256_lloyd"]
            {
                assert!(five.contains(&k), "{k}: {five:?}");
            }
        }
    }
    assert!(checked > 100, "{checked}");
}

/// A profiler label that no kernel bears (`embedding_lookup_hfq4g256`, `rmsnorm_batched`) is
/// followed from its timer to the load nearest before it in the same function: the kernels it
/// launches, whose sources and loads are the answer. A timed rocBLAS call loads nothing.
#[test]
fn profiler_labels_lead_to_the_kernel_their_code_launches() {
    let labels = labels_without_kernel();
    assert!(labels.len() >= 20, "{:?}", labels.keys().collect::<Vec<_>>());
    let idx = index("gfx1100");
    let mut with_source = 0;
    for (label, sites) in &labels {
        let p = idx.locate(label);
        let mut want: Vec<&str> = sites.iter().flat_map(|s| s.loaded.iter().map(String::as_str)).collect();
        want.sort();
        want.dedup();
        let mut got: Vec<&str> = p.launches.iter().map(String::as_str).collect();
        got.sort();
        assert_eq!(got, want, "{label}: {:?}", p.notes);
        for s in sites {
            let at = format!("timer at {}:{}", s.file, s.line);
            assert!(p.notes.iter().any(|n| n.contains(&at) && n.contains(&format!("fn `{}`", s.function))), "{label}: {:?}", p.notes);
        }
        if want.is_empty() {
            assert!(p.sources.is_empty() && p.dispatch.is_empty(), "{label}: {:#?}", p.sources);
            continue;
        }
        // Arch-specific kernels (`_gfx12`) have no file for gfx1100; every other one does.
        if want.iter().all(|n| n.ends_with("_gfx12")) {
            continue;
        }
        let first = p.sources.first().unwrap_or_else(|| panic!("{label}: no source for {want:?}"));
        let text = std::fs::read_to_string(tree().join(&first.path)).unwrap();
        assert!(
            want.iter().any(|n| text.contains(&format!("void {n}(")) || first.path.ends_with(&format!("/{n}.hip"))),
            "{label}: {} for {want:?}",
            first.path
        );
        assert!(first.reasons.iter().any(|r| r.starts_with(&format!("launched under profiler label `{label}`"))), "{first:?}");
        assert!(!p.dispatch.is_empty() && p.dispatch.iter().all(|d| d.kind == "load" && want.contains(&d.matched.as_str())), "{label}: {:?}", p.dispatch);
        with_source += 1;
    }
    assert!(with_source >= 15, "{with_source}");
    let p = idx.locate("embedding_lookup_hfq4g256");
    assert_eq!(p.launches, ["embedding_hfq4g256"]);
    assert_eq!(p.sources[0].path, "kernels/src/embedding_hfq4g256.hip");
    let p = idx.locate("rmsnorm_batched");
    assert_eq!(p.sources[0].path, "kernels/src/rmsnorm.hip");
    let p = idx.locate("gemm_hfq4g256_rocblas");
    assert!(p.launches.is_empty() && p.notes.iter().any(|n| n.contains("loads none by a literal name before the timer")), "{:?}", p.notes);
    // A kernel's own name is never taken for a label.
    assert!(idx.locate("rmsnorm").launches.is_empty());
}

/// Issue 13.5 (3): dispatch evidence is a kernel load. `add.hip` is loaded by
/// `ensure_kernel("add", …)` in dispatch.rs, not "dispatched" by the pointer method `.add(offset)`.
#[test]
fn dispatch_evidence_is_a_load_not_a_mention() {
    let p = index("gfx1100").locate("add");
    assert!(!p.dispatch.is_empty());
    for r in &p.dispatch {
        assert_eq!((r.kind.as_str(), r.via.as_deref()), ("load", Some("ensure_kernel")), "{r:?}");
        assert!(!r.path.ends_with("ffi.rs"), "{r:?}");
    }
    let r = &p.dispatch[0];
    assert_eq!(r.path, "crates/rdna-compute/src/dispatch.rs");
    assert!(lines_of(&r.path)[r.line as usize - 1].contains("ensure_kernel(\"add\","), "{r:?}");
    assert_eq!(paths(&p), ["kernels/src/add.hip"]);
}

/// Issue 13.5 (4): for every dispatch reference and embed katlas reports for the profiled
/// kernels, the cited file:line holds the load it cites.
#[test]
fn every_cited_line_holds_its_load() {
    let mut checked = 0;
    let mut texts: std::collections::HashMap<String, Vec<String>> = Default::default();
    for arch in ["gfx1030", "gfx1100", "gfx1151", "gfx1201"] {
        let idx = index(arch);
        for k in profiled() {
            let p = idx.locate(k);
            for r in &p.dispatch {
                let lines = texts.entry(r.path.clone()).or_insert_with(|| lines_of(&r.path));
                let line = &lines[r.line as usize - 1];
                assert!(line.contains(&format!("\"{}\"", r.matched)), "{k}: {}:{} does not hold \"{}\": {line}", r.path, r.line, r.matched);
                let call = r.call_line.expect("a load has its call line") as usize;
                assert!(call <= r.line as usize && r.line as usize - call <= 8, "{r:?}");
                assert!(lines[call - 1].contains("ensure_kernel"), "{k}: {}:{call} is not the call: {}", r.path, lines[call - 1]);
                checked += 1;
            }
            for s in &p.sources {
                let name = s.path.rsplit('/').next().unwrap();
                for at in &s.embedded_at {
                    let (f, l) = at.rsplit_once(':').unwrap();
                    let lines = texts.entry(f.to_string()).or_insert_with(|| lines_of(f));
                    let line = &lines[l.parse::<usize>().unwrap() - 1];
                    assert!(line.contains(&format!("/{name}\"")), "{k}: {at} does not embed {name}: {line}");
                    let from = l.parse::<usize>().unwrap().saturating_sub(3);
                    assert!(lines[from..l.parse::<usize>().unwrap()].iter().any(|x| x.contains("include_str!")), "{k}: {at}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 500, "{checked} citations checked");
}

/// Issue 13.5 (5): chip files no `include_str!` embeds never load: the embedded base ranks
/// first and the chip file says why it does not.
#[test]
fn unembedded_chip_files_rank_below_what_the_runtime_embeds() {
    for (arch, kernel, chip) in [
        ("gfx1201", "gemv_hfq4g256", "kernels/src/gemv_hfq4g256.gfx1201.hip"),
        ("gfx1201", "gemv_hfq6g256", "kernels/src/gemv_hfq6g256.gfx1201.hip"),
        ("gfx1200", "gated_delta_net_q8", "kernels/src/gated_delta_net_q8.gfx1200.hip"),
    ] {
        let p = index(arch).locate(kernel);
        assert_eq!(p.sources[0].path, format!("kernels/src/{kernel}.hip"), "{kernel} on {arch}: {:#?}", p.sources);
        let c = p.sources.iter().find(|s| s.path == chip).unwrap_or_else(|| panic!("{chip} listed"));
        assert!(c.embedded_at.is_empty() && c.reasons.iter().any(|r| r.contains("no load pattern embeds this file")), "{c:?}");
    }
}

/// Issue 13.5 (6): the tree is read once for any number of kernels; the profiler's 158 names
/// come from the same pass.
#[test]
fn one_index_reads_the_tree_once_for_all_profiled_kernels() {
    let t = std::time::Instant::now();
    let idx = index("gfx1100");
    let names = idx.profiled_names();
    assert_eq!(&names, profiled());
    assert_eq!(names.len(), 158);
    let found: Vec<KernelProvenance> = names.iter().map(|k| idx.locate(k)).collect();
    let took = t.elapsed();
    assert_eq!(idx.stats.reads, idx.stats.kernel_files + idx.stats.host_files, "{:?}", idx.stats);
    assert!(idx.stats.kernel_files >= 340 && idx.stats.host_files >= 250, "{:?}", idx.stats);
    assert!(found.iter().filter(|p| !p.dispatch.is_empty()).count() > 120);
    // Generous for a debug build on a busy machine; the release figure is benches/provenance.sh's.
    assert!(took.as_secs_f64() < 10.0, "{took:?}");
}
