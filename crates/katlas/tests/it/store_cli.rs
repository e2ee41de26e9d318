//! `katlas index|query|trend|export|report|store` end to end, on rows imported from the real
//! hipfire fixture and evals run for real.

use crate::support::cli::{katlas, KATLAS};
use std::path::Path;
use std::process::{Command, Output};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hipfire/atlas_rows_v0.jsonl");

fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas")).unwrap();
    d
}

fn ok(o: Output) -> Output {
    assert_eq!(o.status.code(), Some(0), "stdout: {}\nstderr: {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn imported() -> tempfile::TempDir {
    let d = project();
    ok(katlas(d.path(), &["corpus", "import", FIXTURE]));
    d
}

#[test]
fn query_answers_from_the_index_in_every_format_and_cannot_write() {
    let d = imported();
    let p = d.path();
    let rows = json(&ok(katlas(p, &["corpus", "ls", "--format", "json"])))["rows"].as_array().unwrap().len();
    let o = ok(katlas(p, &["query", "SELECT COUNT(*) AS n FROM rows", "--format", "json"]));
    assert_eq!(json(&o)["rows"][0]["n"], rows, "index built on first use from the files");
    assert!(p.join(".katlas/index.sqlite").exists());
    let sql = "SELECT name, SUM(calls) AS calls FROM kernels WHERE name = 'gemv_hfq4g256_residual' GROUP BY name";
    let j = json(&ok(katlas(p, &["query", sql, "--format", "json"])));
    assert_eq!(j["columns"], serde_json::json!(["name", "calls"]));
    let calls = j["rows"][0]["calls"].as_i64().unwrap();
    assert!(calls > 0);
    let csv = stdout(&ok(katlas(p, &["query", sql, "--format", "csv"])));
    assert_eq!(csv, format!("name,calls\ngemv_hfq4g256_residual,{calls}\n"));
    let md = stdout(&ok(katlas(p, &["query", sql, "--format", "markdown"])));
    assert_eq!(md, format!("| name | calls |\n|---|---|\n| gemv_hfq4g256_residual | {calls} |\n"));
    let text = stdout(&ok(katlas(p, &["query", sql])));
    assert!(text.contains("gemv_hfq4g256_residual") && text.contains("1 row"), "{text}");
    // A statement that writes is refused: the index is read-only for queries.
    let o = katlas(p, &["query", "DELETE FROM rows"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only reads"), "{}", String::from_utf8_lossy(&o.stderr));
    // Nor does anything else that reaches a file: `VACUUM INTO` created an empty file at any
    // writable path before it failed, `ATTACH` names one too.
    let target = p.join("copy.sqlite");
    for sql in [format!("VACUUM INTO '{}'", target.display()), format!("ATTACH DATABASE '{}' AS x", target.display()), "PRAGMA query_only = 0".into()] {
        let o = katlas(p, &["query", &sql]);
        assert_eq!(o.status.code(), Some(2), "{sql}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("only reads"), "{sql}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(!target.exists(), "{sql} created {}", target.display());
    }
    assert_eq!(json(&ok(katlas(p, &["query", "SELECT COUNT(*) AS n FROM rows", "--format", "json"])))["rows"][0]["n"], rows);
    // Bad SQL is bad input (2) with SQLite's reason.
    let o = katlas(p, &["query", "SELECT nope FROM rows"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such column"), "{}", String::from_utf8_lossy(&o.stderr));
    // Appending through katlas (another import) shows up in the next query.
    let mut extra = String::new();
    for l in std::fs::read_to_string(FIXTURE).unwrap().lines().filter(|l| !l.trim().is_empty()) {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["run_index"] = serde_json::json!(99);
        extra.push_str(&v.to_string());
        extra.push('\n');
    }
    std::fs::write(p.join("more.jsonl"), extra).unwrap();
    ok(katlas(p, &["corpus", "import", "more.jsonl"]));
    let n = json(&ok(katlas(p, &["query", "SELECT COUNT(*) AS n FROM rows", "--format", "json"])))["rows"][0]["n"].as_u64().unwrap();
    assert_eq!(n as usize, 2 * rows);
    let r = json(&ok(katlas(p, &["index", "rebuild", "--format", "json"])));
    assert_eq!(r["rebuilt"], true);
    assert_eq!(r["records"].as_u64().unwrap() as usize, 2 * rows);
}

#[test]
fn evals_samples_and_the_ledger_are_indexed() {
    let d = project();
    let p = d.path();
    ok(katlas(p, &["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=120", "--metric", "tok_s", "-n", "4", "--telemetry", "false"]));
    let j = json(&ok(katlas(p, &["query", "SELECT verdict, metric, relative_change FROM ledger", "--format", "json"])));
    assert_eq!(j["rows"][0]["verdict"], "improved");
    assert!((j["rows"][0]["relative_change"].as_f64().unwrap() - 0.2).abs() < 1e-9);
    let j =
        json(&ok(katlas(p, &["query", "SELECT side, COUNT(*) AS n, AVG(value) AS mean FROM eval_samples GROUP BY side ORDER BY side", "--format", "json"])));
    assert_eq!(j["rows"][0]["n"], 4);
    assert_eq!(j["rows"][0]["mean"], 100.0);
    assert_eq!(j["rows"][1]["mean"], 120.0);
    let j = json(&ok(katlas(
        p,
        &["query", "SELECT e.verdict, s.label, s.n FROM evals e JOIN eval_sides s ON s.eval_id = e.eval_id ORDER BY s.idx", "--format", "json"],
    )));
    assert_eq!(j["rows"].as_array().unwrap().len(), 2);
    assert_eq!(j["rows"][1]["n"], 4);
}

#[test]
fn isa_manifests_of_real_cubins_are_indexed_by_object_and_kernel() {
    let d = project();
    let p = d.path();
    let cubins = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h200/triton-cache");
    ok(katlas(p, &["isa", "scan", cubins]));
    let j = json(&ok(katlas(
        p,
        &[
            "query",
            "SELECT o.arch, o.vendor, k.name, k.vgpr FROM isa_kernels k JOIN isa_objects o ON o.manifest = k.manifest AND o.idx = k.object_idx ORDER BY k.name",
            "--format",
            "json",
        ],
    )));
    let rows = j["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"matmul_kernel"), "{names:?}");
    assert!(rows.iter().all(|r| r["vendor"] == "nvidia" && r["arch"].as_str().unwrap().starts_with("sm_9")), "{rows:?}");
    assert!(rows.iter().all(|r| r["vgpr"].as_i64().unwrap() > 0), "registers per thread are read: {rows:?}");
}

/// 12 commits × 4 runs on box-a, gen_tok_s ≈ 100 (±1%, fixed pattern), −5% from commit 7 on;
/// two variants of vram_bytes; then the same commit 11 on box-b.
fn history(p: &Path) {
    let mut rows = Vec::new();
    let jitter = [0.99, 1.01, 1.0, 0.995, 1.005, 1.0];
    for c in 0..12u64 {
        for r in 0..4u64 {
            let mut row = katlas_model::Row::new("qwen3.5-9b", "decode");
            row.captured_at = katlas_model::row::format_unix_utc(1_767_225_600 + (c * 3600 + r * 60) as i64).expect("a 2026 time");
            row.identity.source.commit = Some(format!("{:040x}", 0xabc000 + c));
            row.identity.host.hostname = Some("box-a".into());
            let level = if c >= 7 { 95.0 } else { 100.0 };
            let v = level * jitter[((c * 4 + r) % 6) as usize];
            row.metrics.insert("gen_tok_s".into(), katlas_model::Metric::new(v, Some("tok/s")));
            let kv = if r % 2 == 0 { "asym3" } else { "q8" };
            row.variant.knobs.insert("HIPFIRE_KV_MODE".into(), kv.into());
            row.metrics.insert("vram_bytes".into(), katlas_model::Metric::new(if kv == "q8" { 9e9 } else { 6e9 }, Some("B")));
            row.kernels.push(katlas_model::KernelSample { name: "gemv".into(), calls: 10, total_us: 1000.0 / v * 100.0, ..Default::default() });
            rows.push(row);
        }
    }
    let mut other = rows[rows.len() - 4..].to_vec();
    for r in &mut other {
        r.id = katlas_model::row::new_id();
        r.identity.host.hostname = Some("box-b".into());
    }
    rows.extend(other);
    let text: String = rows.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
    std::fs::write(p.join("history.jsonl"), text).unwrap();
    ok(katlas(p, &["corpus", "import", "history.jsonl"]));
}

#[test]
fn trend_names_the_commit_where_the_step_entered() {
    let d = project();
    let p = d.path();
    history(p);
    let j = json(&ok(katlas(p, &["trend", "gen_tok_s", "--workload", "qwen3.5-9b", "--format", "json"])));
    let cps = j["change_points"].as_array().unwrap();
    assert_eq!(cps.len(), 1, "{j}");
    assert_eq!(cps[0]["key"], format!("{:040x}", 0xabc000 + 7));
    assert!((cps[0]["relative_change"].as_f64().unwrap() + 0.05).abs() < 0.01);
    let text = stdout(&ok(katlas(p, &["trend", "gen_tok_s"])));
    assert!(text.starts_with(&format!("gen_tok_s: -5.0% entered at commit {:040x}", 0xabc000 + 7)), "{text}");
    // By host: box-b ran only the slow commit, box-a's history is mixed; nothing claimed from one group pair.
    let j = json(&ok(katlas(p, &["trend", "gen_tok_s", "--by", "host", "--format", "json"])));
    assert_eq!(j["groups"].as_array().unwrap().len(), 2);
    let o = katlas(p, &["trend", "no_such_metric"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn compare_and_pareto_over_groups_of_rows() {
    let d = project();
    let p = d.path();
    history(p);
    let a = format!("commit_sha={:040x}", 0xabc000 + 6);
    let b = format!("commit_sha={:040x}", 0xabc000 + 7);
    let j = json(&ok(katlas(p, &["corpus", "compare", &a, &b, "--format", "json"])));
    assert_eq!((j["rows_a"].as_u64(), j["rows_b"].as_u64()), (Some(4), Some(4)));
    let m = j["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "gen_tok_s").unwrap().clone();
    assert!((m["relative_change"].as_f64().unwrap() + 0.05).abs() < 0.01, "{m}");
    let ci = m["ci"].as_array().unwrap();
    assert!(ci[1].as_f64().unwrap() < 0.0, "the interval excludes no change: {m}");
    assert!(j["warnings"].as_array().unwrap().is_empty());
    assert!(j["kernels"][0]["relative_change"].as_f64().unwrap() > 0.04, "the kernel got slower: {j}");
    // Same commit on two hosts: compared, and flagged cross-host.
    let c11 = format!("{:040x}", 0xabc000 + 11);
    let j = json(&ok(katlas(p, &["corpus", "compare", &format!("commit_sha={c11},host=box-a"), &format!("commit_sha={c11},host=box-b"), "--format", "json"])));
    assert!(j["warnings"][0].as_str().unwrap().starts_with("cross-host"), "{j}");
    // A selector that matches nothing, an unknown column: bad input.
    assert_eq!(katlas(p, &["corpus", "compare", "host=nowhere", &a]).status.code(), Some(2));
    assert_eq!(katlas(p, &["corpus", "compare", "colour=red", &a]).status.code(), Some(2));
    // Pareto: asym3 uses less VRAM, q8 gives more tok/s? Both variants have the same tok/s
    // pattern here except the jitter, so the front holds asym3 (lower VRAM) at least.
    let j = json(&ok(katlas(p, &["corpus", "pareto", "gen_tok_s", "vram_bytes:min", "--format", "json"])));
    let pts = j["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    let asym = pts.iter().find(|p| p["variant"] == "HIPFIRE_KV_MODE=asym3").unwrap();
    assert_eq!(asym["front"], true);
    let q8 = pts.iter().find(|p| p["variant"] == "HIPFIRE_KV_MODE=q8").unwrap();
    assert_eq!(q8["front"], q8["x"].as_f64() > asym["x"].as_f64(), "q8 is on the front only if it is faster: {j}");
    assert_eq!(katlas(p, &["corpus", "pareto", "gen_tok_s", "vram_bytes"]).status.code(), Some(2), "direction of vram_bytes unknown");
}

#[test]
fn export_writes_csv_and_parquet_of_a_table() {
    let d = imported();
    let p = d.path();
    let csv = stdout(&ok(katlas(p, &["export", "--format", "csv", "--table", "kernels", "--out", "-"])));
    let q = stdout(&ok(katlas(p, &["query", "SELECT * FROM kernels ORDER BY row_id, idx", "--format", "csv"])));
    assert_eq!(csv.lines().count(), q.lines().count());
    assert!(csv.starts_with("row_id,idx,name,demangled,calls,total_us"), "{csv}");
    ok(katlas(p, &["export", "--format", "parquet", "--table", "rows", "--out", "rows.parquet"]));
    let b = std::fs::read(p.join("rows.parquet")).unwrap();
    assert!(b.starts_with(b"PAR1") && b.ends_with(b"PAR1"), "a Parquet file");
    assert_eq!(katlas(p, &["export", "--format", "csv", "--table", "sources", "--out", "-"]).status.code(), Some(2));
}

/// A rebuild draws its progress on a terminal's stderr (through `script`, which gives the
/// command a pseudo-terminal) and nothing on a pipe; stdout's summary is the same either way.
#[test]
fn a_rebuild_shows_progress_on_a_terminal_only() {
    let d = imported();
    let p = d.path();
    let piped = ok(katlas(p, &["index", "rebuild"]));
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(!err.contains("files") && !err.contains('\u{1b}') && !err.contains('\r'), "no progress on a pipe: {err:?}");
    let line = format!("{KATLAS} --project {} index rebuild", p.display());
    let tty = katlas_testkit::cli::isolate(&mut Command::new("script")).args(["-qec", &line, "/dev/null"]).current_dir(p).output().unwrap();
    assert_eq!(tty.status.code(), Some(0), "{}", String::from_utf8_lossy(&tty.stdout));
    // script merges the command's stdout and stderr into its own stdout.
    let screen = String::from_utf8_lossy(&tty.stdout);
    assert!(screen.contains("index: 1/1 files, "), "progress drawn on the terminal: {screen:?}");
    assert!(screen.contains("index: building indexes"), "{screen:?}");
    assert!(screen.contains("index rebuilt (asked for): 1 of 1 source files read"), "{screen:?}");
}

/// A clone that ships `.katlas` as a link (or a link where SQLite writes its journal) gets no
/// index, lock, journal or temporary file in the link's target: every command that brings the
/// index up to date refuses, naming the link.
#[test]
fn the_index_is_never_written_through_a_link() {
    let d = tempfile::tempdir().unwrap();
    let (p, outside) = (d.path().join("clone"), d.path().join("home"));
    std::fs::create_dir_all(outside.join("corpus")).unwrap();
    std::fs::create_dir_all(&p).unwrap();
    let src = imported();
    for e in std::fs::read_dir(src.path().join(".katlas/corpus")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), outside.join("corpus").join(e.file_name())).unwrap();
    }
    std::os::unix::fs::symlink(&outside, p.join(".katlas")).unwrap();
    let before: Vec<_> = walk(&outside);
    for args in [
        &["query", "SELECT COUNT(*) FROM rows"][..],
        &["index", "rebuild"],
        &["index", "refresh"],
        &["export", "--format", "csv", "--table", "rows", "--out", "-"],
        &["report", "--out", "r.html"],
    ] {
        let o = katlas(&p, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link"), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(walk(&outside), before, "{args:?} wrote into the link's target");
    }

    // A journal SQLite would open beside the index, linked to a file outside.
    let q = imported();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    ok(katlas(q.path(), &["index", "rebuild"]));
    std::os::unix::fs::symlink(&victim, q.path().join(".katlas/index.sqlite-journal")).unwrap();
    let mut extra = String::new();
    for l in std::fs::read_to_string(FIXTURE).unwrap().lines().filter(|l| !l.trim().is_empty()) {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["run_index"] = serde_json::json!(98);
        extra.push_str(&format!("{v}\n"));
    }
    std::fs::write(q.path().join("more.jsonl"), extra).unwrap();
    ok(katlas(q.path(), &["corpus", "import", "more.jsonl"]));
    let _ = katlas(q.path(), &["query", "SELECT COUNT(*) FROM rows"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

/// Every file under `dir` with its bytes.
fn walk(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

/// `katlas index rebuild` that was killed leaves its new index and segments behind; the next
/// rebuild (which holds the writer lock, so no other rebuild is writing them) removes them.
#[test]
fn temporary_files_of_a_killed_rebuild_are_removed() {
    let d = imported();
    let k = d.path().join(".katlas");
    for stale in ["index.sqlite.tmp-999999", "index.sqlite.tmp-999999.seg0", "index.sqlite.tmp-999998.seg3"] {
        std::fs::write(k.join(stale), "left by a killed rebuild").unwrap();
    }
    ok(katlas(d.path(), &["index", "rebuild"]));
    let left: Vec<String> =
        std::fs::read_dir(&k).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".tmp-")).collect();
    assert!(left.is_empty(), "{left:?}");
}
