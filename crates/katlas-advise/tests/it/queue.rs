//! The queue and allowed-files join as a library call (what `katlas suggest` and `katlas
//! task` print): the project's sources give each suggestion its files, and the saved queue
//! hands out exactly the suggestion that was shown.

use crate::common;

use katlas_advise::queue::{build_queue, LastQueue, QueueInput, LAST_SCHEMA};
use katlas_advise::{build_fit, FitInput, Rules};
use katlas_arch::ArchDb;
use katlas_collect::provenance::ProvenanceOptions;

const GEMV: &str = "gemv_hfq4g256_residual";

/// A project tree with the GEMV's gfx12 and gfx11 sources and a dispatch site with an env knob.
fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join("kernels/src")).unwrap();
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::write(p.join(format!("kernels/src/{GEMV}.gfx12.hip")), format!("extern \"C\" __global__ void {GEMV}(const float* w, float* y) {{}}\n")).unwrap();
    std::fs::write(p.join(format!("kernels/src/{GEMV}.gfx11.hip")), format!("extern \"C\" __global__ void {GEMV}(float* y) {{}}\n")).unwrap();
    std::fs::write(
        p.join("src/dispatch.rs"),
        format!("fn run() {{\n    let rows = std::env::var(\"HIPFIRE_GEMV_ROWS\");\n    launch(\"{GEMV}\", rows);\n}}\n"),
    )
    .unwrap();
    d
}

fn queue(sources: Option<&ProvenanceOptions>) -> LastQueue {
    let row = common::decode_row();
    let rules = Rules::builtin().unwrap();
    let db = ArchDb::builtin();
    let fit = build_fit(&FitInput { row: Some(&row), isa: None, product: None, arch: None, db, rules: &rules, row_source: None }).unwrap();
    build_queue(QueueInput { fit, row: Some(row), db, rules: &rules, ledger: None, sources, max: None })
}

#[test]
fn project_sources_are_the_allowed_files() {
    let d = project();
    let mut opts = ProvenanceOptions::new(d.path());
    (opts.kernel_roots, opts.dispatch_roots) = (vec!["kernels/src".into()], vec!["src".into()]);
    let last = queue(Some(&opts));
    assert_eq!(last.schema, LAST_SCHEMA);
    let s = last.queue.suggestions.iter().find(|s| s.kernel.as_deref() == Some(GEMV) && s.lever == "env_sweep").expect("env sweep on the GEMV");
    assert_eq!(s.allowed_files_source, "dispatch provenance");
    assert_eq!(s.allowed_files.first().map(String::as_str), Some(format!("kernels/src/{GEMV}.gfx12.hip").as_str()), "{:?}", s.allowed_files);
    assert!(!s.allowed_files.iter().any(|f| f.contains("gfx11")), "another family's file is not allowed: {:?}", s.allowed_files);
    assert!(s.allowed_files.iter().any(|f| f == "src/dispatch.rs"), "{:?}", s.allowed_files);
    // The task packet reads the same join back from the saved queue.
    let prov = last.provenance_of(s).expect("the GEMV's provenance");
    assert!(prov.env_controls.iter().any(|e| e == "HIPFIRE_GEMV_ROWS"), "{prov:?}");

    // Outside a project nothing names the files.
    let bare = queue(None);
    let s = bare.queue.suggestions.iter().find(|s| s.kernel.as_deref() == Some(GEMV) && s.lever == "env_sweep").expect("env sweep on the GEMV");
    assert!(s.allowed_files.is_empty(), "{:?}", s.allowed_files);
    assert!(s.allowed_files_source.starts_with("none known"), "{}", s.allowed_files_source);
}

#[test]
fn saved_queue_hands_out_what_was_shown() {
    let last = queue(None);
    let text = serde_json::to_string(&last).unwrap();
    let back = LastQueue::from_json(&text).unwrap();
    let second = &last.queue.suggestions[1];
    assert_eq!(back.pick(Some(2), None).unwrap().id, second.id);
    assert_eq!(back.pick(None, Some(&second.id)).unwrap().rank, 2);
    let n = last.queue.suggestions.len();
    assert_eq!(back.pick(Some(n + 1), None).unwrap_err(), format!("--rank {}: the queue has {n} suggestions", n + 1));
    assert_eq!(back.pick(None, Some("sug-nope")).unwrap_err(), "--id sug-nope: not in the queue");

    let old = text.replacen(LAST_SCHEMA, "katlas.suggest.last.v0", 1);
    assert_eq!(LastQueue::from_json(&old).unwrap_err(), format!("schema `katlas.suggest.last.v0`, expected {LAST_SCHEMA}"));
    assert!(LastQueue::from_json("{").unwrap_err().ends_with("(run `katlas suggest` again)"));
}
