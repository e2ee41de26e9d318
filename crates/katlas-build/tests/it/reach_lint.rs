//! Reach and the allowlist lint on the hipfire-like fixture (no compiler needed).

use crate::common;
use common::*;
use katlas_build::{lint_dispatch, reach, Severity};
use katlas_project::Project;

#[test]
fn resolution_follows_the_table_not_name_prefixes() {
    let d = fixture_project();
    let s = settings(d.path(), None);
    let r = reach(&s).unwrap();
    let file_of =
        |atom: &str, kernel: &str| -> Vec<String> { r.resolutions.iter().filter(|x| x.atom == atom && x.kernel == kernel).map(|x| x.file.clone()).collect() };
    assert_eq!(file_of("gfx1100", "gemv"), ["kernels/src/gemv.gfx11.hip"]);
    // RDNA 3.5 is family gfx115 in the table: the gfx11 family file does not reach it.
    assert_eq!(file_of("gfx1151", "gemv"), ["kernels/src/gemv.hip"]);
    assert_eq!(file_of("gfx1201", "gemv"), ["kernels/src/gemv.gfx1201.hip"]);
    for a in ["gfx906", "gfx90a", "gfx942"] {
        assert_eq!(file_of(a, "rmsnorm"), ["kernels/src/rmsnorm.gfx9.hip"], "{a}");
    }
    assert_eq!(file_of("gfx1030", "rmsnorm"), ["kernels/src/rmsnorm.hip"]);
    assert_eq!(file_of("sm_80", "rmsnorm"), ["kernels/src/rmsnorm.cu"]);
    assert_eq!(file_of("sm_90", "rmsnorm"), ["kernels/src/rmsnorm.sm_90.cu"]);
    assert!(file_of("sm_90", "gemv").is_empty(), "HIP-only kernels never go to NVIDIA atoms");
    assert_eq!(file_of("gfx1201", "gemv_prefetch"), ["kernels/src/gemv_prefetch.gfx1201.hip"]);
    assert!(file_of("gfx1100", "gemv_prefetch").is_empty());
    // The prefix rule would have sent gemv.gfx11.hip to gfx1151.
    let trap = r.prefix_traps.iter().find(|t| t.file.ends_with("gemv.gfx11.hip")).expect("prefix trap reported");
    assert_eq!(trap.atoms, ["gfx1151"]);
}

#[test]
fn reach_reports_planted_unreached_file_and_undispatched_kernel() {
    let d = fixture_project();
    let r = reach(&settings(d.path(), None)).unwrap();
    assert!(r.has_problems());
    let unreached: Vec<&str> = r.unreached.iter().map(|u| u.file.as_str()).collect();
    assert_eq!(unreached, ["kernels/src/attn.gfx1152.hip"], "{:#?}", r.unreached);
    assert!(r.unreached[0].reason.contains("gfx1152 is not in the matrix"), "{}", r.unreached[0].reason);
    let und: Vec<&str> = r.undispatched.iter().map(|u| u.file.as_str()).collect();
    assert_eq!(und, ["kernels/src/gemv_prefetch.gfx1201.hip"], "{:#?}", r.undispatched);
    assert_eq!(r.undispatched[0].atoms, ["gfx1201"]);
    assert!(r.undispatched[0].names.contains(&"gemv_prefetch_rdna4".to_string()));
    // The others are loaded, and the report says where.
    for k in ["gemv", "rmsnorm", "silu", "attn"] {
        let hit = r.dispatched.iter().find(|x| x.kernel == k).unwrap_or_else(|| panic!("{k} not dispatched"));
        assert!(hit.at.starts_with("crates/engine/src/dispatch.rs:"), "{hit:?}");
    }
    assert_eq!(r.summary.host_files, 1);
}

#[test]
fn reach_sees_a_reference_once_host_code_loads_the_kernel() {
    let d = fixture_project();
    let p = d.path().join("crates/engine/src/prefetch.rs");
    write(&p, "pub fn load(g: &crate::Gpu) { g.launch(\"gemv_prefetch\", \"gemv_prefetch_rdna4\", 1); }\n");
    let r = reach(&settings(d.path(), None)).unwrap();
    assert!(r.undispatched.is_empty(), "{:#?}", r.undispatched);
    // Allowlisting a tool-only kernel also silences it.
    std::fs::remove_file(&p).unwrap();
    let cfg = d.path().join("katlas.toml");
    let text = std::fs::read_to_string(&cfg).unwrap() + "\n[reach]\nallow_undispatched = [\"gemv_prefetch\"]\n";
    std::fs::write(&cfg, text).unwrap();
    assert!(reach(&settings(d.path(), None)).unwrap().undispatched.is_empty());
}

#[test]
fn reach_reports_divergent_family_members() {
    let d = fixture_project();
    let r = reach(&settings(d.path(), Some(&["gfx1200", "gfx1201"]))).unwrap();
    let dv = r.divergent_families.iter().find(|x| x.kernel == "gemv").expect("gfx12 diverges on gemv");
    assert_eq!(dv.family, "gfx12");
    assert_eq!(dv.files["gfx1200"], "kernels/src/gemv.hip");
    assert_eq!(dv.files["gfx1201"], "kernels/src/gemv.gfx1201.hip");
    // With only gfx1200 in the matrix the chip-tagged gfx1201 files reach nothing.
    let r = reach(&settings(d.path(), Some(&["gfx1200"]))).unwrap();
    assert!(r.unreached.iter().any(|u| u.file.ends_with("gemv.gfx1201.hip")));
}

#[test]
fn unknown_tags_and_bad_matrix_are_named() {
    let d = fixture_project();
    write(&d.path().join("kernels/src/silu.gfx1299.hip"), "// tag the table does not know\n");
    let r = reach(&settings(d.path(), None)).unwrap();
    let u = r.unreached.iter().find(|u| u.file.ends_with("silu.gfx1299.hip")).expect("unknown tag reported");
    assert!(u.reason.contains("neither an atom nor a family"), "{}", u.reason);
    let p = Project::open(d.path()).unwrap();
    let e = katlas_build::Settings::load(&p, Some(&["gfx11".to_string()])).unwrap_err();
    assert!(e.to_string().contains("`gfx11` is not an arch atom") && e.to_string().contains("family"), "{e}");
    std::fs::write(d.path().join("katlas.toml"), "[build]\nmatrix = [\"gfx1100\", \"sm_99\"]\n").unwrap();
    let p = Project::open(d.path()).unwrap();
    let e = katlas_build::Settings::load(&p, None).unwrap_err();
    assert!(e.to_string().contains("build.matrix") && e.to_string().contains("sm_99"), "{e}");
    std::fs::write(d.path().join("katlas.toml"), "[build]\nmatrx = [\"gfx1100\"]\n").unwrap();
    let e = katlas_build::Settings::load(&Project::open(d.path()).unwrap(), None).unwrap_err();
    assert!(e.to_string().contains("katlas.toml:2") || e.to_string().contains("matrx"), "{e}");
}

fn codes_of_row(r: &katlas_build::LintReport, row: usize) -> Vec<&str> {
    r.findings.iter().filter(|f| f.row == Some(row) && f.severity == Severity::Error).map(|f| f.code.as_str()).collect()
}

#[test]
fn lint_flags_planted_rows_and_passes_measured_ones() {
    let d = fixture_project();
    let s = settings(d.path(), None);
    let r = lint_dispatch(&Project::open(d.path()).unwrap(), &s, None).unwrap();
    assert!(r.has_errors());
    assert_eq!(r.summary.rows, 7);
    assert_eq!(r.summary.ledger_entries, 2);
    assert!(codes_of_row(&r, 1).is_empty(), "{:#?}", r.findings);
    assert_eq!(codes_of_row(&r, 2), ["unmeasured-capability-variant"]);
    assert_eq!(codes_of_row(&r, 3), ["no-evidence"]);
    assert_eq!(codes_of_row(&r, 4), ["evidence-missing"]);
    assert_eq!(codes_of_row(&r, 5), ["evidence-arch"]);
    assert!(codes_of_row(&r, 6).is_empty(), "{:#?}", r.findings);
    assert_eq!(codes_of_row(&r, 7), ["shadowed"]);
    let row2 = r.findings.iter().find(|f| f.row == Some(2)).unwrap();
    assert_eq!(row2.at.as_deref(), Some("perf-allowlist.toml:13"));
    assert!(row2.message.contains("capability"), "{}", row2.message);
    // gfx1100 (wmma) reached by row 1 first; gfx1201 (wmma) by the capability row; gfx906 none.
    let eff = |k: &str, a: &str| r.effective.iter().find(|e| e.kernel == k && e.atom == a).unwrap().variant.clone();
    assert_eq!(eff("gemv", "gfx1100"), "wide");
    assert_eq!(eff("gemv", "gfx1201"), "wmma");
    assert_eq!(eff("gemv", "gfx906"), "default");
    assert_eq!(eff("attn", "gfx942"), "split");
    assert!(r.findings.iter().all(|f| f.code != "ledger-line"), "fixture ledger parses: {:#?}", r.findings);
    // The gate annotations of crates/engine/src/dispatch.rs are read.
    assert_eq!(r.annotations.iter().filter(|a| a.kind == "perf").count(), 3);
    assert_eq!(r.annotations.iter().filter(|a| a.kind == "correctness").count(), 1);
}

#[test]
fn lint_flags_perf_branch_without_row_and_wrong_verdict() {
    let d = fixture_project();
    write(
        &d.path().join("crates/engine/src/extra.rs"),
        "fn pick(a: &str) { match a {\n  // perf: kernel=rmsnorm variant=turbo\n  \"gfx1030\" => turbo(),\n  // perf: faster on big chips\n  _ => plain(),\n} }\n",
    );
    // The ledger entry behind row 6 turns into a rejection.
    let ledger = d.path().join(".katlas/ledger.jsonl");
    let text = std::fs::read_to_string(&ledger).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[1] = lines[1].replace("\"improved\"", "\"regressed\"").replace("\"promote\"", "\"reject\"");
    lines.push("{not json".into());
    std::fs::write(&ledger, lines.join("\n") + "\n").unwrap();
    let r = lint_dispatch(&Project::open(d.path()).unwrap(), &settings(d.path(), None), None).unwrap();
    let f = r.findings.iter().find(|f| f.code == "perf-branch-without-row").expect("perf branch flagged");
    assert_eq!(f.at.as_deref(), Some("crates/engine/src/extra.rs:2"));
    assert!(f.message.contains("\"gfx1030\" => turbo()"), "{}", f.message);
    assert!(r.findings.iter().any(|f| f.code == "annotation-incomplete" && f.at.as_deref() == Some("crates/engine/src/extra.rs:4")));
    assert!(codes_of_row(&r, 6).contains(&"evidence-verdict"), "{:#?}", r.findings);
    let bad = r.findings.iter().find(|f| f.code == "ledger-line").expect("bad ledger line reported, good ones kept");
    assert!(bad.message.contains("ledger.jsonl:3"), "{}", bad.message);
    assert_eq!(r.summary.ledger_entries, 2);
}

#[test]
fn allowlist_in_katlas_toml_with_lines_and_bad_rows_named() {
    let d = fixture_project();
    std::fs::remove_file(d.path().join("perf-allowlist.toml")).unwrap();
    let cfg = d.path().join("katlas.toml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{base}\n[[perf_allowlist]]\nkernel = \"gemv\"\narch = \"rdna3_dgpu\"\nvariant = \"wide\"\n\n[[perf_allowlist]]\nkernel = \"gemv\"\narch = \"gfx13\"\nvariant = \"x\"\n"),
    )
    .unwrap();
    let r = lint_dispatch(&Project::open(d.path()).unwrap(), &settings(d.path(), None), None).unwrap();
    let class_row = r.findings.iter().find(|f| f.row == Some(1)).unwrap();
    assert_eq!(class_row.code, "unmeasured-capability-variant");
    let line = base.lines().count() + 2;
    assert_eq!(class_row.at.as_deref(), Some(format!("katlas.toml:{line}").as_str()));
    assert!(r.findings.iter().any(|f| f.row == Some(2) && f.code == "unknown-arch"));
    // A misspelt key is bad input naming file, line and key.
    std::fs::write(&cfg, format!("{base}\n[[perf_allowlist]]\nkernel = \"gemv\"\nvarient = \"x\"\n")).unwrap();
    let p = Project::open(d.path()).unwrap();
    let e = lint_dispatch(&p, &settings(d.path(), None), None).unwrap_err();
    assert!(e.to_string().contains("varient"), "{e}");
    assert_eq!(katlas_fs::class::Classify::class(&e), katlas_fs::class::Class::Input);
}

#[test]
fn a_project_arch_override_moves_the_family_boundary() {
    let d = fixture_project();
    write(&d.path().join(".katlas/rules/arch/apu.toml"), "[[atom]]\nname = \"gfx1151\"\nalso_families = [\"gfx11\"]\n");
    let r = reach(&settings(d.path(), None)).unwrap();
    let f: Vec<&str> = r.resolutions.iter().filter(|x| x.atom == "gfx1151" && x.kernel == "gemv").map(|x| x.file.as_str()).collect();
    assert_eq!(f, ["kernels/src/gemv.gfx11.hip"]);
    assert!(r.prefix_traps.is_empty());
}

#[test]
fn malformed_allowlist_file_is_bad_input_with_its_line() {
    let d = fixture_project();
    let f = d.path().join("perf-allowlist.toml");
    std::fs::write(&f, "[[perf_allowlist]]\nkernel = \"gemv\"\nvariant = \"x\"\nmeasured = \"yes\"\n").unwrap();
    let p = Project::open(d.path()).unwrap();
    let e = lint_dispatch(&p, &settings(d.path(), None), None).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("perf-allowlist.toml:4") && m.contains("measured"), "{m}");
    assert_eq!(katlas_fs::class::Classify::class(&e), katlas_fs::class::Class::Input);
    std::fs::write(&f, "[[perf_allowlist]\nkernel = \n").unwrap();
    let e = lint_dispatch(&p, &settings(d.path(), None), None).unwrap_err();
    assert!(e.to_string().contains("perf-allowlist.toml"), "{e}");
}

/// The lab as a project: every kernel source compiles for some atom and is loaded by
/// crates/katlas-lab (its host code names each module).
#[test]
fn lab_sources_are_all_reached_and_dispatched() {
    let d = tempfile::tempdir().unwrap();
    let root = repo_root();
    write(
        &d.path().join("katlas.toml"),
        &format!(
            "[project]\nkernel_roots = [{:?}]\ndispatch_roots = [{:?}]\n\n[build]\ntags = \"add\"\n\n[reach]\nkernel_macros = [\"LAB_KERNEL\"]\n",
            root.join("lab/kernels").display().to_string(),
            root.join("crates/katlas-lab/src").display().to_string()
        ),
    );
    let r = reach(&settings(d.path(), None)).unwrap();
    assert!(r.summary.sources >= 15, "{:#?}", r.summary);
    assert!(r.unreached.is_empty(), "{:#?}", r.unreached);
    assert!(r.undispatched.is_empty(), "{:#?}", r.undispatched);
    let sm90: Vec<&str> = r.resolutions.iter().filter(|x| x.atom == "sm_90" && x.kernel == "gemv_hfq4").map(|x| x.file.as_str()).collect();
    assert_eq!(sm90.len(), 2, "base and chip file both compile for sm_90 in add mode: {sm90:?}");
}

/// The JSON reports carry exactly the fields their generated schemas declare.
#[test]
fn reports_match_their_json_schemas() {
    let docs = katlas_build::schemas();
    let names: Vec<&str> = docs.iter().map(|d| d.name).collect();
    assert_eq!(names, ["katlas.build.v1", "katlas.reach.v1", "katlas.lint.dispatch.v1"]);
    let d = fixture_project();
    let s = settings(d.path(), None);
    let reach_json = serde_json::to_value(reach(&s).unwrap()).unwrap();
    let lint_json = serde_json::to_value(lint_dispatch(&Project::open(d.path()).unwrap(), &s, None).unwrap()).unwrap();
    for (doc, v) in [(&docs[1], reach_json), (&docs[2], lint_json)] {
        let props = doc.schema["properties"].as_object().unwrap_or_else(|| panic!("{} has properties", doc.name));
        let mut want: Vec<&String> = props.keys().collect();
        let mut got: Vec<&String> = v.as_object().unwrap().keys().collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{}", doc.name);
        assert_eq!(v["schema"], doc.name);
    }
    let build_props = docs[0].schema["properties"].as_object().unwrap();
    for k in [
        "schema",
        "matrix",
        "atoms",
        "kernel_roots",
        "kernel_roots_from",
        "touched",
        "compilers",
        "missing_toolchains",
        "jobs",
        "summary",
        "manifest",
        "isa_diff",
        "isa_errors",
    ] {
        assert!(build_props.contains_key(k), "katlas.build.v1 declares {k}");
    }
}

#[test]
fn evidence_whose_candidate_ran_elsewhere_is_flagged() {
    let d = fixture_project();
    let ledger = d.path().join(".katlas/ledger.jsonl");
    let text = std::fs::read_to_string(&ledger).unwrap();
    let mut lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    lines[0]["candidate"]["identity"] = serde_json::json!({"devices": [{"index": 0, "vendor": "amd", "arch": "gfx1101"}]});
    std::fs::write(&ledger, lines.iter().map(|v| v.to_string() + "\n").collect::<String>()).unwrap();
    let r = lint_dispatch(&Project::open(d.path()).unwrap(), &settings(d.path(), None), None).unwrap();
    assert!(r.findings.iter().all(|f| f.code != "ledger-line"), "{:#?}", r.findings);
    let f = r.findings.iter().find(|f| f.row == Some(1)).expect("row 1 now flagged");
    assert_eq!(f.code, "evidence-arch");
    assert!(f.message.contains("says arch gfx1100 but its candidate ran on gfx1101"), "{}", f.message);
}

/// A project that itself lies under a directory named `target` (a CI workspace, a build farm's
/// checkout) is linted like any other: only `target/` *inside* the project is build output.
/// The lint's host scan used to test every component of the absolute path and read no host file.
#[test]
fn lint_reads_host_files_of_a_project_under_a_target_directory() {
    let plain = fixture_project();
    let outer = tempfile::tempdir().unwrap();
    let nested = outer.path().join("target/checkout");
    copy_dir(&fixture_dir(), &nested);
    let _ = std::fs::remove_dir_all(nested.join(".katlas/build"));
    type Annotations = Vec<(String, String, usize)>;
    type Findings = Vec<(String, Option<String>)>;
    let lint = |dir: &std::path::Path| -> (Annotations, Findings) {
        let r = lint_dispatch(&Project::open(dir).unwrap(), &settings(dir, None), None).unwrap();
        let mut a: Annotations = r.annotations.iter().map(|x| (x.kind.clone(), x.file.clone(), x.line)).collect();
        let mut f: Findings = r.findings.iter().map(|x| (x.code.clone(), x.at.clone())).collect();
        a.sort();
        f.sort();
        (a, f)
    };
    let want = lint(plain.path());
    assert_eq!(want.0.iter().filter(|(k, f, _)| k == "perf" && f == "crates/engine/src/dispatch.rs").count(), 3, "{:#?}", want.0);
    assert_eq!(lint(&nested), want);
    assert_eq!(reach(&settings(&nested, None)).unwrap().summary.host_files, 1);
}

/// `kernel_roots = []`, as `katlas init` writes it: build and reach read the roots provenance and
/// suggest read (`kernels/`, `src/`, the top-level Python packages), those that exist, and say
/// so. A default root that also holds the host code (`src/`) still counts as host code.
#[test]
fn empty_kernel_roots_use_provenances_defaults() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    write(&root.join("katlas.toml"), katlas_project::INIT_TEMPLATE);
    write(&root.join("kernels/add.hip"), "#include \"prelude.h\"\nextern \"C\" __global__ void add_one(float* y) { y[tid()] += 1.0f; }\n");
    write(&root.join("kernels/prelude.h"), "#define __global__ __attribute__((global))\nstatic inline int tid() { return 0; }\n");
    write(&root.join("src/engine.rs"), "fn run() { launch(\"add_one\"); launch(\"scale\"); }\n");
    write(&root.join("src/scale.cu"), "extern \"C\" __global__ void scale(float* y) { y[threadIdx.x] *= 2.0f; }\n");
    write(&root.join("mypkg/__init__.py"), "");
    write(&root.join("docs/notes.cu"), "this is not a kernel root\n");
    let s = settings(&root, None);
    assert_eq!(s.kernel_roots, [root.join("kernels"), root.join("src"), root.join("mypkg")]);
    assert_eq!(s.kernel_roots_from, katlas_build::config::RootsFrom::Discovered);
    let want: Vec<_> = katlas_collect::provenance::ProvenanceOptions::new(&root).kernel_roots.iter().map(|p| root.join(p)).collect();
    assert_eq!(s.kernel_roots, want, "the same roots provenance reads");
    assert!(s.kernel_roots_note().starts_with("kernel roots: kernels, src, mypkg (found: no kernel_roots configured"), "{}", s.kernel_roots_note());
    let files: Vec<String> = katlas_build::sources::discover(&s, &s.kernel_roots).unwrap().into_iter().map(|x| x.file).collect();
    assert_eq!(files, ["kernels/add.hip", "src/scale.cu"]);

    // With src/ as the dispatch root too, its host code is scanned: both kernels are loaded.
    let cfg = root.join("katlas.toml");
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap().replace("dispatch_roots = []", "dispatch_roots = [\"src\"]")).unwrap();
    let r = reach(&settings(&root, None)).unwrap();
    assert_eq!(r.kernel_roots, ["kernels", "src", "mypkg"]);
    assert!(r.undispatched.is_empty(), "{:#?}", r.undispatched);
    assert_eq!(r.summary.sources, 2, "{:#?}", r.summary);

    // Configured roots win and say where they came from.
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap().replace("kernel_roots = []", "kernel_roots = [\"kernels\"]")).unwrap();
    let s = settings(&root, None);
    assert_eq!((s.kernel_roots.clone(), s.kernel_roots_from), (vec![root.join("kernels")], katlas_build::config::RootsFrom::Project));
    // No default root at all: the error says which defaults were looked for.
    let bare = tempfile::tempdir().unwrap();
    write(&bare.path().join("katlas.toml"), katlas_project::INIT_TEMPLATE);
    let s = settings(bare.path(), None);
    let e = katlas_build::sources::discover(&s, &s.kernel_roots).unwrap_err().to_string();
    assert!(e.contains("no kernel roots") && e.contains("kernels/, src/"), "{e}");
}
