//! `katlas fit`, `katlas suggest`, `katlas task` on the shared fixtures (issue 5 checks).

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::cli;
use cli::{fixture, json, katlas_cmd, ok, py_site, repo, KATLAS};

/// Without `KATLAS_YES` and with a user config in the project: `katlas task` trusts the task it
/// writes, and the task's eval command must then run as written.
fn katlas(dir: &Path, args: &[&str]) -> Output {
    katlas_cmd(dir).args(args).env("KATLAS_CONFIG_DIR", dir.join(".katlas/test-user-config")).output().expect("katlas runs")
}

fn isa_fixture() -> PathBuf {
    let p = repo().join("crates/katlas-isa/tests/fixtures/kernels.gfx1201.hsaco");
    assert!(p.exists(), "ISA fixture {} is required (committed by katlas-isa)", p.display());
    p
}

/// A git project with `.katlas/` and the hipfire rows copied in.
fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    std::fs::copy(fixture("hipfire/atlas_rows_v0.jsonl"), p.join("rows.jsonl")).unwrap();
    std::fs::write(p.join(".gitignore"), ".katlas/\n").unwrap();
    let git = |args: &[&str]| {
        let st = Command::new("git").args(args).current_dir(p).output().expect("git runs (required by katlas eval)");
        assert!(st.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&st.stderr));
    };
    git(&["init", "-q", "."]);
    git(&["-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"]);
    git(&["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "fixture"]);
    d
}

fn scan_isa(dir: &Path) -> PathBuf {
    let out = dir.join("isa.json");
    ok(&katlas(dir, &["isa", "scan", isa_fixture().to_str().unwrap(), "-o", out.to_str().unwrap(), "--no-cache", "--disasm", "never"]));
    out
}

#[test]
fn fit_decode_row_names_unmatched_hot_kernels_and_likely_limit() {
    let d = project();
    let isa = scan_isa(d.path());
    let v = json(&katlas(d.path(), &["fit", "rows.jsonl", "--phase", "decode_ar", "--isa", isa.to_str().unwrap(), "--format", "json"]));
    assert_eq!(v["schema"], "katlas.fit.v1");
    assert_eq!(v["header"]["arch"], "gfx1201");
    assert_eq!(v["header"]["phase"], "decode_ar");
    assert_eq!(v["scope"]["kind"], "profile-unmatched");
    let unmatched: Vec<&str> = v["scope"]["unmatched_hot"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(unmatched, ["gemv_hfq4g256_residual", "fused_qkvza_hfq4g256", "fused_rmsnorm_mq_rotate"]);
    // Never widened to all objects: no hot kernel carries an ISA match.
    assert!(v["kernels"].as_array().unwrap().iter().all(|k| k.get("isa").is_none()));
    let head = &v["likely_limit"][0];
    assert_eq!(head["kernel"], "gemv_hfq4g256_residual");
    assert!(head["rule"].as_str().is_some_and(|r| !r.is_empty()));
    assert!(head["numbers"].as_object().is_some_and(|n| !n.is_empty()), "{head}");
    assert!(v["stops"].as_array().unwrap().iter().any(|f| f["rule"] == "amdahl"));

    let text = ok(&katlas(d.path(), &["fit", "rows.jsonl", "--phase", "decode_ar", "--isa", isa.to_str().unwrap()]));
    assert!(text.contains("unmatched hot") && text.contains("fused_qkvza_hfq4g256"), "{text}");
    assert!(text.contains("likely limit") && text.contains("[rule "), "{text}");
    for fmt in ["markdown", "html"] {
        let o = ok(&katlas(d.path(), &["fit", "rows.jsonl", "--phase", "decode_ar", "--format", fmt]));
        assert!(o.contains("gemv_hfq4g256_residual"));
    }
}

#[test]
fn fit_h200_ncu_reports_percent_of_peak_from_counters() {
    let d = tempfile::tempdir().unwrap();
    let csv = fixture("h200/ncu_llama_raw.csv");
    let v = json(&katlas(d.path(), &["fit", "--parse", "ncu-csv", csv.to_str().unwrap(), "--product", "NVIDIA H200", "--format", "json"]));
    assert_eq!(v["header"]["product"], "NVIDIA H200");
    assert_eq!(v["header"]["arch"], "sm_90");
    assert_eq!(v["header"]["bw_ceiling_label"], "measured");
    let ks = v["kernels"].as_array().unwrap();
    let with_pct: Vec<&Value> = ks.iter().filter(|k| k["throughput"]["bw_source"] == "dram counters").collect();
    assert!(!with_pct.is_empty(), "some kernel has DRAM-counter bandwidth");
    for k in &with_pct {
        let bw = k["throughput"]["bw_gbps"].as_f64().unwrap();
        let pct = k["throughput"]["bw_pct_of_peak"].as_f64().unwrap();
        assert!((pct - 100.0 * bw / 4171.1).abs() < 0.01, "{k}");
    }
    // The device string in the CSV picks the same product without --product.
    let v2 = json(&katlas(d.path(), &["fit", "--parse", "ncu-csv", csv.to_str().unwrap(), "--format", "json"]));
    assert_eq!(v2["header"]["product"], "NVIDIA H200");
}

#[test]
fn fit_h200_torch_trace_runs_with_the_h200() {
    let d = tempfile::tempdir().unwrap();
    let tr = fixture("h200/torch_llama_decode_trace.json.gz");
    let v = json(&katlas(d.path(), &["fit", "--parse", "torch-trace", tr.to_str().unwrap(), "--product", "NVIDIA H200", "--format", "json"]));
    assert_eq!(v["header"]["product"], "NVIDIA H200");
    assert!(!v["kernels"].as_array().unwrap().is_empty());
    // The trace recorded shapes: the GEMVs' bytes come from them, labelled so (issue 17.2).
    let top = &v["kernels"][0];
    assert_eq!(top["throughput"]["bw_source"], "from shapes", "{top}");
    assert!(top["throughput"]["bw_pct_of_peak"].as_f64().is_some_and(|p| p > 1.0 && p < 100.0), "{top}");
    // The phase's timeline leads.
    assert_eq!(v["likely_limit"][0]["rule"], "host_bound");
}

#[test]
fn bad_input_exits_2() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(katlas(d.path(), &["fit"]).status.code(), Some(2));
    assert_eq!(katlas(d.path(), &["fit", "no-such-file.jsonl"]).status.code(), Some(2));
    std::fs::write(d.path().join("bad.jsonl"), "{\"schema\": \"nope\"}\n").unwrap();
    let o = katlas(d.path(), &["fit", "bad.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.jsonl:1"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = katlas(d.path(), &["fit", "--parse", "ncu-csv", fixture("h200/ncu_llama_raw.csv").to_str().unwrap(), "--product", "NVIDIA Z9000"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `latest` as ROW: the corpus's newest row by capture time, not by where it was written; narrowed
/// by --workload/--phase; one resolver for fit, suggest and task. An empty corpus is exit 2 naming it.
#[test]
fn latest_is_the_newest_corpus_row() {
    let d = project();
    let p = d.path();
    let o = katlas(p, &["fit", "latest"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    let corpus = p.join(".katlas/corpus");
    assert!(err.contains("`latest`") && err.contains("no rows") && err.contains(&corpus.display().to_string()), "{err}");
    // The hipfire rows newest first, so the newest row is the first one written.
    let text = std::fs::read_to_string(p.join("rows.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse();
    std::fs::write(p.join("reversed.jsonl"), lines.join("\n") + "\n").unwrap();
    ok(&katlas(p, &["corpus", "import", "reversed.jsonl"]));
    let rows = json(&katlas(p, &["corpus", "ls", "--format", "json"]))["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 3);
    let newest = |f: &dyn Fn(&Value) -> bool| -> String {
        let r = rows.iter().filter(|r| f(r)).max_by_key(|r| r["captured_at"].as_str().unwrap().to_string()).unwrap();
        r["id"].as_str().unwrap().to_string()
    };
    let header = |args: &[&str]| json(&katlas(p, args))["header"].clone();
    let h = header(&["fit", "latest", "--format", "json"]);
    assert_eq!(h["row_id"].as_str().unwrap(), newest(&|_| true));
    assert!(h["row_source"].as_str().unwrap().ends_with(":1"), "{h}");
    let h = header(&["fit", "latest", "--phase", "decode_ar", "--format", "json"]);
    assert_eq!(h["row_id"].as_str().unwrap(), newest(&|r| r["phase"] == "decode_ar"));
    let h = header(&["fit", "latest", "--workload", "qwen3.5-27b", "--format", "json"]);
    assert_eq!(h["row_id"].as_str().unwrap(), newest(&|r| r["workload"] == "qwen3.5-27b"));
    let decode = newest(&|r| r["phase"] == "decode_ar");
    let t = json(&katlas(p, &["task", "latest", "--phase", "decode_ar", "--format", "json"]));
    assert_eq!(t["origin"]["row_id"].as_str().unwrap(), decode);
    assert_eq!(t["kernel"], "gemv_hfq4g256_residual");
    let q = json(&katlas(p, &["suggest", "latest", "--phase", "decode_ar", "--format", "json"]));
    assert!(q.to_string().contains(&decode), "suggest names the row it read");
    let o = katlas(p, &["fit", "latest", "--workload", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("workload `nope`") && err.contains("3 rows"), "{err}");
}

fn ledger_line(lever: &str, kernel: &str, verdict: &str, disposition: Value) -> String {
    let v = serde_json::json!({
        "schema": "katlas.ledger.v1", "id": format!("led-{verdict}"), "recorded_at": "2026-11-30T10:00:00Z",
        "lever": lever, "kernel": kernel, "arch": "gfx1201", "phase": "decode_ar",
        "shape": "decode_ar_pp128_gen50", "quant": "mq4", "metric": "gen_tok_s", "goal": "maximize",
        "baseline": {"label": "A"}, "candidate": {"label": "B"},
        "protocol": {"order": "abba", "n_per_side": [10, 10], "max_per_side": 30, "warmups": 1, "seed": 1},
        "samples": {"path": "x/samples.jsonl"}, "verdict": verdict, "noise_threshold": 0.01,
        "disposition": disposition,
    });
    format!("{v}\n")
}

#[test]
fn suggest_four_lever_types_and_ledger_memory() {
    let d = project();
    let p = d.path();
    let q = json(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    assert_eq!(q["schema"], "katlas.suggestions.v1");
    let sugg = q["suggestions"].as_array().unwrap();
    let types: BTreeSet<&str> = sugg.iter().map(|s| s["lever"].as_str().unwrap()).collect();
    assert!(types.len() >= 4, "{types:?}");
    let top = &sugg[0];
    let (lever, kernel, id) = (top["lever"].as_str().unwrap(), top["kernel"].as_str().unwrap(), top["id"].as_str().unwrap());
    for s in sugg {
        assert!(s["hypothesis"].as_str().unwrap().starts_with("On gfx1201/"));
        assert!(!s["eval"]["env"].as_object().unwrap().contains_key("HIPFIRE_PROFILE_DECODE"));
    }

    // Inconclusive on the same target: shown, not counted.
    let ledger = p.join(".katlas/ledger.jsonl");
    std::fs::write(&ledger, ledger_line(lever, kernel, "inconclusive", serde_json::json!({"kind": "revisit-if", "condition": "more samples"}))).unwrap();
    let q = json(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    let s = q["suggestions"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap();
    assert_eq!(s["rank"], 1);
    assert_eq!(s["history"]["status"], "seen");
    assert_eq!(s["history"]["attempts"][0]["verdict"], "inconclusive");

    // no_change on the same target: drops below the others and shows the verdict.
    std::fs::write(&ledger, ledger_line(lever, kernel, "no_change", serde_json::json!({"kind": "reject"}))).unwrap();
    let q = json(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    let all = q["suggestions"].as_array().unwrap();
    let s = all.iter().find(|s| s["id"] == id).unwrap();
    assert_eq!(s["rank"].as_u64().unwrap() as usize, all.len(), "demoted below the others");
    assert_eq!(s["history"]["status"], "demoted");
    assert_eq!(s["history"]["attempts"][0]["verdict"], "no_change");
    let md = ok(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "markdown"]));
    assert!(md.contains("prior verdict no_change"), "{md}");
}

/// The fenced command under `## Next` in TASK.md.
fn next_command(md: &str) -> String {
    let after = md.split("## Next").nth(1).expect("TASK.md has a Next section");
    let body = after.split("```sh").nth(1).expect("fenced command");
    body.split("```").next().unwrap().trim().to_string()
}

fn run_as_written(dir: &Path, cmd: &str) -> Output {
    let bin = PathBuf::from(KATLAS);
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    katlas_testkit::cli::isolate(&mut Command::new("sh"))
        .args(["-c", cmd])
        .current_dir(dir)
        .env("PATH", path)
        .env("KATLAS_CONFIG_DIR", dir.join(".katlas/test-user-config"))
        .output()
        .unwrap()
}

#[test]
fn task_rank_1_writes_task_md_whose_eval_command_runs() {
    let d = project();
    let p = d.path();
    ok(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar"]));
    // Benchmark replaced by a runnable stand-in; everything else comes from the row.
    let md = ok(&katlas(p, &["task", "--rank", "1", "--bench", "echo gen_tok_s=41.8", "--parser", "kv", "--correctness", "true"]));
    let cmd = next_command(&md);
    assert!(cmd.starts_with("katlas eval "), "{cmd}");
    let id = cmd.trim_start_matches("katlas eval ").trim();
    let tdir = p.join(".katlas/tasks").join(id);
    let task: Value = serde_json::from_str(&std::fs::read_to_string(tdir.join("task.json")).unwrap()).unwrap();
    assert_eq!(task["schema"], "katlas.task.v1");
    assert_eq!(task["origin"]["rank"], 1);
    assert_eq!(task["bench"]["metric"], "gen_tok_s");
    assert!(task["baseline"]["git_ref"].as_str().is_some_and(|r| r.len() == 40));
    assert_eq!(std::fs::read_to_string(tdir.join("TASK.md")).unwrap(), md);
    for section in
        ["## Objective", "## Hypothesis", "## Evidence", "## Baseline", "## Allowed files", "## Build", "## Benchmark", "## Correctness", "## Constraints"]
    {
        assert!(md.contains(section), "{section} in TASK.md");
    }
    let o = run_as_written(p, &cmd);
    let code = o.status.code();
    assert!(
        matches!(code, Some(0) | Some(1)),
        "eval gives a verdict (exit {code:?})\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let evals = tdir.join("evals");
    assert!(std::fs::read_dir(&evals).unwrap().any(|e| e.unwrap().path().join("result.json").exists()), "eval wrote its result");

    // The plain packet (the row's own benchmark command) is accepted as written too; the
    // hipfire binary is not on this machine, which is missing environment (3), not bad input.
    let md = ok(&katlas(p, &["task", "--rank", "1"]));
    let o = run_as_written(p, &next_command(&md));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("bench_qwen35_mq4"), "{err}");
}

#[test]
fn task_from_op_keeps_shapes_whole() {
    let d = project();
    let p = d.path();
    let o = katlas(
        p,
        &[
            "task",
            "--from-op",
            "--name",
            "q_proj",
            "--op",
            "aten::mm",
            "--shape",
            "1,2048,4096",
            "--shape",
            "4096,4096",
            "--dtype",
            "bf16",
            "--eval-command",
            "python bench_mm.py",
            "--correctness",
            "python check_mm.py",
            "--format",
            "json",
        ],
    );
    let t = json(&o);
    assert_eq!(t["op"]["shapes"], serde_json::json!(["1,2048,4096", "4096,4096"]));
    assert_eq!(t["op"]["dtype"], "bf16");
    assert_eq!(t["bench"]["command"], serde_json::json!(["sh", "-c", "python bench_mm.py"]));
    assert_eq!(t["correctness"][0]["command"], "python check_mm.py");
    assert!(t["next"].as_str().unwrap().starts_with("katlas eval "));
    let bad = katlas(p, &["task", "--from-op", "--name", "x", "--op", "aten::mm", "--shape", "1,two", "--eval-command", "true"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn task_from_row_targets_hottest_kernel() {
    let d = project();
    let p = d.path();
    let t = json(&katlas(p, &["task", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    assert_eq!(t["origin"]["kind"], "row");
    assert_eq!(t["kernel"], "gemv_hfq4g256_residual");
    assert_eq!(t["bench"]["parser"], "hipfire-bench");
    assert!(t["bench"]["stripped_env"].as_array().unwrap().iter().any(|e| e == "HIPFIRE_PROFILE_DECODE"));
}

#[test]
fn allowed_files_come_from_dispatch_provenance() {
    let d = project();
    let p = d.path();
    std::fs::create_dir_all(p.join("kernels/src")).unwrap();
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::write(
        p.join("kernels/src/gemv_hfq4g256_residual.gfx12.hip"),
        "extern \"C\" __global__ void gemv_hfq4g256_residual(const float* w, float* y) {}\n",
    )
    .unwrap();
    std::fs::write(p.join("kernels/src/gemv_hfq4g256_residual.gfx11.hip"), "extern \"C\" __global__ void gemv_hfq4g256_residual(float* y) {}\n").unwrap();
    std::fs::write(
        p.join("src/dispatch.rs"),
        "fn run() {\n    let rows = std::env::var(\"HIPFIRE_GEMV_ROWS\");\n    launch(\"gemv_hfq4g256_residual\", rows);\n}\n",
    )
    .unwrap();
    std::fs::write(p.join("katlas.toml"), "[project]\nkernel_roots = [\"kernels/src\"]\ndispatch_roots = [\"src\"]\n").unwrap();
    let q = json(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    let s = q["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kernel"] == "gemv_hfq4g256_residual" && s["lever"] == "env_sweep")
        .expect("env sweep on the GEMV");
    assert_eq!(s["allowed_files_source"], "dispatch provenance");
    let files: Vec<&str> = s["allowed_files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files.first(), Some(&"kernels/src/gemv_hfq4g256_residual.gfx12.hip"), "{files:?}");
    assert!(!files.iter().any(|f| f.contains("gfx11")), "another family's file is not allowed: {files:?}");
    assert!(files.contains(&"src/dispatch.rs"), "{files:?}");
    assert!(s["evidence"].to_string().contains("HIPFIRE_GEMV_ROWS"), "{}", s["evidence"]);
}

#[test]
fn project_rules_override_and_corpus_ids() {
    let d = project();
    let p = d.path();
    // A project rule: Amdahl at 25% stops the 23.1% projection too.
    let fit_toml = std::fs::read_to_string(repo().join("data/fit.toml")).unwrap().replace("share_pct < 5", "share_pct < 25");
    std::fs::create_dir_all(p.join(".katlas/rules")).unwrap();
    std::fs::write(p.join(".katlas/rules/fit.toml"), fit_toml).unwrap();
    let q = json(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    let stopped: Vec<&str> = q["stopped"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert!(stopped.contains(&"fused_qkvza_hfq4g256"), "{stopped:?}");
    // A broken override names its file and line.
    std::fs::write(p.join(".katlas/rules/levers.toml"), "schema = \"katlas.rules.levers.v1\"\n[settings]\nmax_suggestions = \"many\"\n").unwrap();
    let o = katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("levers.toml:3"), "{err}");
    std::fs::remove_file(p.join(".katlas/rules/levers.toml")).unwrap();

    // Rows by corpus id prefix.
    ok(&katlas(p, &["corpus", "import", "rows.jsonl"]));
    let ls = json(&katlas(p, &["corpus", "ls", "--phase", "decode_ar", "--format", "json"]));
    let id = ls["rows"].as_array().and_then(|a| a.first()).and_then(|r| r["id"].as_str()).map(str::to_string).expect("imported decode row");
    // ls and export filter rows alike: every kept row has the phase asked for, and export keeps
    // the rows ls lists.
    let phases = |args: &[&str]| -> Vec<String> {
        json(&katlas(p, args))["rows"].as_array().expect("rows").iter().map(|r| r["phase"].as_str().unwrap_or_default().to_string()).collect()
    };
    let ar = phases(&["corpus", "ls", "--phase", "decode_ar", "--format", "json"]);
    assert!(!ar.is_empty() && ar.iter().all(|x| x == "decode_ar"), "{ar:?}");
    assert!(phases(&["corpus", "ls", "--format", "json"]).len() > ar.len());
    let exported = ok(&katlas(p, &["corpus", "export", "--format", "hipfire-v0", "--phase", "decode_ar"]));
    assert_eq!(exported.lines().count(), ar.len(), "{exported}");
    assert!(phases(&["corpus", "ls", "--phase", "decode_ar", "--status", "error", "--format", "json"]).is_empty());
    let v = json(&katlas(p, &["fit", &id[..10], "--format", "json"]));
    assert_eq!(v["header"]["row_id"], id.as_str());
    assert!(v["header"]["row_source"].as_str().unwrap().starts_with("corpus "));
    // --index picks among a file's rows.
    let v = json(&katlas(p, &["fit", "rows.jsonl", "--index", "2", "--format", "json"]));
    assert_eq!(v["header"]["phase"], "decode_dflash");
}

#[test]
fn project_rules_add_and_disable_by_id() {
    let d = project();
    let p = d.path();
    let rules = "disable = [\"amdahl\"]\n\n[[rule]]\nid = \"local_stop\"\nkind = \"stop\"\nwhen = [\"share_pct < 5\"]\ntext = \"{kernel}: below the project's 5% floor\"\nsource = \"project\"\n";
    std::fs::create_dir_all(p.join(".katlas/rules")).unwrap();
    std::fs::write(p.join(".katlas/rules/fit.toml"), rules).unwrap();
    let v = json(&katlas(p, &["fit", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    let stops: Vec<&str> = v["stops"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap()).collect();
    assert!(stops.contains(&"local_stop"), "the project's rule fires: {stops:?}");
    assert!(!stops.contains(&"amdahl"), "the disabled rule does not: {stops:?}");
    assert!(v["likely_limit"][0]["rule"].as_str().is_some_and(|r| !r.is_empty()), "built-in limit rules still apply: {}", v["likely_limit"]);
    // An id the built-in file does not have is an error naming the project file and line.
    std::fs::write(p.join(".katlas/rules/fit.toml"), "# local\ndisable = [\"amdhal\"]\n").unwrap();
    let o = katlas(p, &["fit", "rows.jsonl", "--phase", "decode_ar"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fit.toml:2") && err.contains("amdhal"), "{err}");
}

#[test]
fn task_by_suggestion_id_and_errors() {
    let d = project();
    let p = d.path();
    // Without a queue or ROW: a clear error.
    let o = katlas(p, &["task", "--rank", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("katlas suggest"), "{}", String::from_utf8_lossy(&o.stderr));
    let q = json(&katlas(p, &["suggest", "rows.jsonl", "--phase", "decode_ar", "--format", "json"]));
    let second = &q["suggestions"][1];
    let t = json(&katlas(p, &["task", "--id", second["id"].as_str().unwrap(), "--format", "json"]));
    assert_eq!(t["origin"]["suggestion_id"], second["id"]);
    assert_eq!(t["lever"], second["lever"]);
    assert_eq!(t["hypothesis"], second["hypothesis"]);
    // With the ROW given again, the queue is rebuilt and the same rank is the same suggestion.
    let t2 = json(&katlas(p, &["task", "rows.jsonl", "--phase", "decode_ar", "--rank", "2", "--format", "json"]));
    assert_eq!(t2["origin"]["suggestion_id"], second["id"]);
    let o = katlas(p, &["task", "--rank", "99"]);
    assert_eq!(o.status.code(), Some(2));
    let o = katlas(p, &["task", "rows.jsonl", "--phase", "decode_ar", "--kernel", "nope"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `katlas task --package liger_kernel` on the real liger-kernel sources: the copy goes to
/// third_party/python, and once committed the allowed file is the jit function's file.
#[test]
fn task_package_copy_of_liger_kernel_allows_the_jit_file() {
    let site = py_site();
    let d = project();
    let p = d.path();
    let run = || {
        let o = katlas_cmd(p)
            .args(["task", "--from-op", "--name", "rms", "--op", "liger_kernel.rms_norm", "--shape", "4096,4096", "--eval-command", "python3 bench.py"])
            .args(["--kernel", "_rms_norm_forward_kernel", "--package", "liger_kernel", "--format", "json"])
            .env("KATLAS_CONFIG_DIR", p.join(".katlas/test-user-config"))
            .env("PYTHONPATH", &site)
            .output()
            .expect("katlas runs");
        o
    };
    let o = run();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("git add third_party/python/liger_kernel && git commit") && err.contains("liger_kernel 0.8.5"), "{err}");
    let git = |args: &[&str]| assert!(Command::new("git").args(args).current_dir(p).status().unwrap().success());
    git(&["add", "third_party/python/liger_kernel"]);
    git(&["commit", "-qm", "vendor liger_kernel"]);
    let t = json(&run());
    assert_eq!(t["allowed_files"], serde_json::json!(["third_party/python/liger_kernel/ops/rms_norm.py"]));
    assert_eq!(t["package"]["kernel_file"], "third_party/python/liger_kernel/ops/rms_norm.py");
    assert_eq!(t["package"]["kernel_line"], 68);

    // A repository that ships its vendor directory as a link out of the project gets no copy there.
    let d = project();
    let p = d.path();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), p.join("third_party")).unwrap();
    let o = katlas_cmd(p)
        .args(["task", "--from-op", "--name", "rms", "--op", "liger_kernel.rms_norm", "--shape", "4096,4096", "--eval-command", "python3 bench.py"])
        .args(["--kernel", "_rms_norm_forward_kernel", "--package", "liger_kernel"])
        .env("KATLAS_CONFIG_DIR", p.join(".katlas/test-user-config"))
        .env("PYTHONPATH", &site)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing copied through the link");
}
