//! The runner end to end: error rows for hangs, crashes and missing metrics
//! beside intact good rows; one run per matrix combination; full output kept.

use katlas_collect::collect::{collect, CollectOptions};
use katlas_collect::spec::load_file;
use katlas_model::{Row, Status};
use std::path::Path;
use std::time::Duration;

fn setup(spec: &str) -> (tempfile::TempDir, CollectOptions, katlas_collect::spec::LoadedSpec) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("w.toml");
    std::fs::write(&f, spec).unwrap();
    let ls = load_file(&f, None).unwrap();
    let mut o = CollectOptions::new(d.path());
    o.skip_devices = true;
    o.kill_grace = Duration::from_millis(300);
    o.output = Some(d.path().join("rows.jsonl"));
    (d, o, ls)
}

fn rows(p: &Path) -> Vec<Row> {
    let r = katlas_corpus::read_jsonl::<Row>(p, Some("katlas.row.v1")).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    r.records.into_iter().map(|l| l.record).collect()
}

#[test]
fn hang_and_segfault_leave_error_rows_and_others_survive() {
    let spec = r#"
command = "case {mode} in ok*) echo 'noise'; echo 'tok_s=12.5'; echo 'lat_ms: 3';; hang) echo before-hang; sleep 60;; segv) echo dying >&2; kill -SEGV $$;; nometric) echo nothing;; esac"
parsers = [{ name = "kv", keys = ["tok_s", "lat_ms"] }]
required = ["tok_s"]
timeout_s = 1.0
phases = ["decode"]
[matrix]
mode = ["ok1", "hang", "segv", "nometric", "ok2"]
"#;
    let (_d, o, ls) = setup(spec);
    let rep = collect(&ls, &o).unwrap();
    assert_eq!(rep.runs, 5);
    assert_eq!((rep.rows_ok, rep.rows_error), (2, 3));
    let rows = rows(o.output.as_ref().unwrap());
    assert_eq!(rows.len(), 5);
    let by = |m: &str| rows.iter().find(|r| r.params["mode"] == m).unwrap();
    for m in ["ok1", "ok2"] {
        let r = by(m);
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.metric("tok_s"), Some(12.5));
        assert_eq!(r.metric("lat_ms"), Some(3.0));
        assert_eq!(r.phase, "decode");
        assert!(r.identity.policy.as_ref().unwrap().fresh_process);
        assert_eq!(r.command[0], "sh");
    }
    let hang = by("hang");
    assert_eq!(hang.status, Status::Error);
    let e = hang.error.as_ref().unwrap();
    assert!(e.timed_out, "{e:?}");
    assert_eq!(e.stdout_tail.as_deref(), Some("before-hang\n"));
    let segv = by("segv").error.as_ref().unwrap();
    assert_eq!(segv.signal, Some(11));
    assert!(segv.message.as_ref().unwrap().contains("SIGSEGV"));
    assert_eq!(segv.stderr_tail.as_deref(), Some("dying\n"));
    let nm = by("nometric").error.as_ref().unwrap();
    assert_eq!(nm.message.as_deref(), Some("missing metric tok_s"));
    assert_eq!(nm.exit_code, Some(0));
    // Full output and meta under .katlas/runs/<id>/.
    let run_dir = o.project_root.join(by("ok1").origin.as_ref().unwrap().run_dir.as_ref().unwrap());
    assert_eq!(std::fs::read_to_string(run_dir.join("stdout")).unwrap(), "noise\ntok_s=12.5\nlat_ms: 3\n");
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(run_dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["schema"], "katlas.run-meta.v1");
    assert_eq!(meta["outcome"]["exit_code"], 0);
}

#[test]
fn matrix_gives_one_run_per_combination_and_warmups() {
    let spec = r#"
command = ["sh", "-c", "echo v=$(({a} * 10)) b={b} ix={run_index}"]
parsers = ["kv"]
runs = 2
warmup = 1
shape_bucket = "a{a}"
[matrix]
a = [1, 2]
b = ["x", "y"]
"#;
    let (_d, o, ls) = setup(spec);
    let rep = collect(&ls, &o).unwrap();
    assert_eq!(rep.runs, 4 * 3);
    let rows = rows(o.output.as_ref().unwrap());
    let measured: Vec<&Row> = rows.iter().filter(|r| r.pass == "measured").collect();
    assert_eq!(measured.len(), 8);
    assert_eq!(rows.iter().filter(|r| r.pass == "warmup").count(), 4);
    let mut combos: Vec<(String, String, u32)> = measured.iter().map(|r| (r.params["a"].clone(), r.params["b"].clone(), r.run_index)).collect();
    combos.sort();
    combos.dedup();
    assert_eq!(combos.len(), 8, "each (a, b, run_index) once");
    for r in &measured {
        let a: f64 = r.params["a"].parse().unwrap();
        assert_eq!(r.metric("v"), Some(a * 10.0));
        assert_eq!(r.metric("ix"), Some(r.run_index as f64));
        assert_eq!(r.shape_bucket.as_deref(), Some(format!("a{}", r.params["a"]).as_str()));
        assert_eq!(r.phase, "run");
    }
}

#[test]
fn profile_switches_are_recorded_as_instrumentation() {
    let spec = r#"
command = ["sh", "-c", "echo x=$PROF y=$MODE"]
parsers = ["kv"]
env = { MODE = "{m}" }
[params]
m = "fast"
[inputs]
binary = "w.toml"
prompt = "prompt-{m}.txt"
[profile]
env = { PROF = "1" }
"#;
    let (d, mut o, ls) = setup(spec);
    std::fs::write(d.path().join("prompt-fast.txt"), "hello").unwrap();
    o.profile = true;
    collect(&ls, &o).unwrap();
    let rows = rows(o.output.as_ref().unwrap());
    let r = &rows[0];
    let md5 = |b: &[u8]| katlas_model::digest::md5_hex(b);
    assert_eq!(r.identity.binary.as_ref().unwrap().md5.as_deref(), Some(md5(spec.as_bytes()).as_str()));
    assert_eq!(r.identity.prompt.as_ref().unwrap().md5.as_deref(), Some(md5(b"hello").as_str()));
    assert_eq!(r.metric("x"), Some(1.0));
    assert_eq!(r.variant.env["MODE"], "fast");
    assert_eq!(r.variant.env["PROF"], "1");
    assert_eq!(r.variant.instrumentation, vec!["PROF".to_string()]);
}

#[test]
fn profiler_file_parsed_into_observed_route() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/rocprofv3/kernel_trace.csv");
    assert!(fixture.exists(), "fixture {} missing", fixture.display());
    let spec = format!(
        r#"
command = ["sh", "-c", "cp {fixture} {{run_dir}}/kt.csv && echo tok_s=5"]
parsers = ["kv", {{ name = "rocprofv3-kernel-trace", file = "{{run_dir}}/kt.csv" }}]
phases = ["decode"]
env = {{ HIP_FORCE = "1" }}
"#,
        fixture = fixture.display()
    );
    let (_d, o, ls) = setup(&spec);
    collect(&ls, &o).unwrap();
    let rows = rows(o.output.as_ref().unwrap());
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.kernels.len(), 3);
    assert!(r.kernels.iter().all(|k| k.op.is_some()));
    let route = r.route.as_ref().unwrap();
    assert_eq!(route.basis, "observed");
    assert_eq!(route.kernels_seen.len(), 3);
    assert_eq!(route.env_requested["HIP_FORCE"], "1");
    assert_eq!(r.kernels[0].block, Some([64, 1, 1]));
}

#[test]
fn workload_printed_rows_are_stamped() {
    let mut row = katlas_model::Row::new("lab-decode", "decode");
    row.params.insert("kernel".into(), "gemv_hfq4g256".into());
    row.metrics.insert("median_us".into(), katlas_model::Metric::new(12.5, Some("us")));
    row.kernels.push(katlas_model::KernelSample { name: "gemv_hfq4g256_r4".into(), calls: 10, total_us: 125.0, ..Default::default() });
    let line = serde_json::to_string(&row).unwrap();
    let spec = "command = ['sh', '-c', 'echo KATLAS_METRIC x=1; cat rows.txt; echo {{\"schema\": \"katlas.row.v1\", \"bad\": 1}}']\nparsers = ['katlas-rows']\nrequired = ['median_us']\n";
    let (d, o, ls) = setup(spec);
    std::fs::write(d.path().join("rows.txt"), format!("{line}\n{line}\n")).unwrap();
    let rep = collect(&ls, &o).unwrap();
    assert_eq!((rep.rows_ok, rep.rows_error), (2, 0));
    let rows = rows(o.output.as_ref().unwrap());
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.workload, "lab-decode");
        assert_eq!(r.metric("median_us"), Some(12.5));
        assert_eq!(r.params["kernel"], "gemv_hfq4g256");
        assert_eq!(r.command[0], "sh");
        assert_eq!(r.origin.as_ref().unwrap().kind, "collect");
        assert_eq!(r.kernels[0].op.as_ref().unwrap().role, "gemv");
        assert_eq!(r.route.as_ref().unwrap().kernels_seen, ["gemv_hfq4g256_r4"]);
    }
    assert_ne!(rows[0].id, rows[1].id);
    assert_eq!(rows[0].extra["source_row_id"], serde_json::json!(row.id));
}

/// Every workload file shipped in the repository (workloads/*.toml) loads and validates,
/// the lab's `lab-decode` included, through the same lookup `katlas collect NAME` uses.
#[test]
fn repo_workloads_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let project = katlas_project::Project::open(&root).unwrap();
    let names: Vec<String> = katlas_collect::spec::available(&project).into_iter().map(|(n, _)| n).collect();
    for want in ["lab-decode", "llama-decode", "llama-decode-ncu", "hipfire-ar", "hipfire-dflash"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        let ls = katlas_collect::spec::load(&project, want).unwrap_or_else(|e| panic!("{want}: {e}"));
        assert!(!ls.spec.parsers.is_empty(), "{want}");
        let combos = katlas_collect::spec::combinations(&ls.spec, &Default::default()).unwrap();
        assert!(!combos.is_empty());
    }
}

#[test]
fn secrets_in_spec_env_and_child_output_never_reach_rows() {
    // A spec that sets a token for its child, and a child that prints its environment
    // and then fails: neither the row, the route, meta.json nor the error tail may
    // carry the value (issue 15, secret filter).
    let spec = r#"
command = "env; echo using $HIPFIRE_SPEC_TOKEN; echo DB_PASSWORD=hunter2-$(echo secret); exit 3"
parsers = ["kv"]
[env]
HIPFIRE_SPEC_TOKEN = "tok-0123456789abcdef"
HIPFIRE_AUTH_HEADER = "Bearer abcdefghijkl"
HIPFIRE_GRAPH = "1"
"#;
    let (d, o, ls) = setup(spec);
    collect(&ls, &o).unwrap();
    let text = std::fs::read_to_string(o.output.as_ref().unwrap()).unwrap();
    let mut metas = String::new();
    for e in walk(&d.path().join(".katlas/runs")) {
        if e.ends_with("meta.json") {
            metas.push_str(&std::fs::read_to_string(&e).unwrap());
        }
    }
    assert!(!metas.is_empty(), "meta.json written");
    for leak in ["tok-0123456789abcdef", "abcdefghijkl", "hunter2-secret"] {
        assert!(!text.contains(leak), "{leak} in the rows: {text}");
        assert!(!metas.contains(leak), "{leak} in meta.json");
    }
    let r = &rows(o.output.as_ref().unwrap())[0];
    assert_eq!(r.variant.env["HIPFIRE_SPEC_TOKEN"], katlas_identity::REDACTED);
    assert_eq!(r.variant.env["HIPFIRE_GRAPH"], "1", "ordinary knobs are kept");
    let tail = r.error.as_ref().unwrap().stdout_tail.as_deref().unwrap();
    assert!(tail.contains("HIPFIRE_GRAPH=1") && tail.contains("<redacted>"), "{tail}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_profiled_row_keeps_the_plain_command_for_measurement() {
    // The trap of issue 14: a task from a `--profile` row timed the profiled program
    // (`--trace .katlas/runs/<id>/trace.json`) and overwrote the old run's trace.
    let spec = r#"
command = ["python3", "-c", "print('tok_s=1')", "--prompt", "128"]
parsers = ["kv"]
[profile]
env = { TRACE = "1" }
args = ["--trace", "{run_dir}/trace.json"]
"#;
    let (_d, mut o, ls) = setup(spec);
    o.profile = true;
    collect(&ls, &o).unwrap();
    let r = &rows(o.output.as_ref().unwrap())[0];
    assert!(r.command.iter().any(|a| a == "--trace"), "{:?}", r.command);
    assert_eq!(r.variant.plain_command, vec!["python3", "-c", "print('tok_s=1')", "--prompt", "128"]);
    // Without --profile nothing is recorded: the command is already plain.
    o.profile = false;
    let out = o.output.clone().unwrap();
    std::fs::remove_file(&out).unwrap();
    collect(&ls, &o).unwrap();
    assert!(rows(&out)[0].variant.plain_command.is_empty());
}

#[test]
fn rocpd_parser_reads_the_databases_the_run_wrote_under_its_directory() {
    // The command stands in for `rocprofv3 --output-format rocpd -d {run_dir}/rocpd -- app`: it
    // writes a database (format-only, from the real MI300A CSV run) where rocprofv3 would.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let spec = format!(
        r#"
command = ["python3", "{}", "{}", "{{run_dir}}/rocpd/host/4242_results.db"]
parsers = ["rocpd"]
phases = ["solve"]
"#,
        root.join("scripts/rocpd-from-csv.py").display(),
        root.join("fixtures/rocprofv3-mi300a").display()
    );
    let (_d, o, ls) = setup(&spec);
    std::fs::create_dir_all(o.project_root.join(".katlas")).unwrap();
    let rep = collect(&ls, &o).unwrap();
    assert_eq!((rep.rows_ok, rep.rows_error), (1, 0), "{rep:?}");
    let r = &rows(o.output.as_ref().unwrap())[0];
    assert_eq!(r.phase, "solve");
    assert_eq!(r.kernels.iter().map(|k| k.calls).sum::<u64>(), 9);
    assert_eq!(r.arch.as_deref(), Some("gfx942"));
    assert_eq!(r.metric("launches"), Some(9.0));
}

/// A workload read by `kv` with a profile read by `json-lines`: both parsers see the same
/// stdout, and kv must not take the JSON record apart into metrics named `"calls"` or `{"katlas"`.
#[test]
fn kv_beside_json_lines_keeps_to_its_own_lines() {
    let spec = r#"
command = ["cat", "out.txt"]
parsers = ["kv"]
phases = ["decode"]
[profile]
parsers = ["json-lines"]
"#;
    let (d, mut o, ls) = setup(spec);
    let out = concat!(
        "tok_s=12.5\n",
        "lat_ms: 3\n",
        "{\"katlas\": 1, \"kernels\": [{\"name\": \"k\", \"calls\": 3, \"avg_us\": 2.5}]}\n",
        "{\"katlas\": 1, \"avg_us\": 4.5, \"calls\": 7}\n",
        "[1, \"x: 2\"]\n",
        "retry \"calls\": 5 {\"x\"=6\n",
        "{\"katlas\": 1, \"bad key\": 8}\n",
    );
    std::fs::write(d.path().join("out.txt"), out).unwrap();
    o.profile = true;
    let rep = collect(&ls, &o).unwrap();
    assert_eq!((rep.rows_ok, rep.rows_error), (1, 0));
    let rows = rows(o.output.as_ref().unwrap());
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.origin.as_ref().unwrap().parsers, vec!["kv".to_string(), "json-lines".to_string()]);
    let names: Vec<&str> = r.metrics.keys().map(String::as_str).collect();
    // kv's two keys and the json-lines record's two.
    assert_eq!(names, ["avg_us", "calls", "lat_ms", "tok_s"], "{:?}", r.metrics);
    assert_eq!(r.metric("tok_s"), Some(12.5));
    assert_eq!(r.metric("lat_ms"), Some(3.0));
    // The json-lines record's values, not kv's reading of the kernel line (3, 2.5).
    assert_eq!(r.metric("calls"), Some(7.0));
    assert_eq!(r.metric("avg_us"), Some(4.5));
    assert_eq!(r.kernels.len(), 1);
    assert_eq!(r.kernels[0].name, "k");
    // A record's key that is no name is dropped where the row is built, and the row says where it was.
    let warnings = r.artifacts["parse_warnings"].as_array().unwrap();
    let stdout = Path::new(r.origin.as_ref().unwrap().run_dir.as_ref().unwrap()).join("stdout");
    let want = format!("{}:7: parser `json-lines`: metric name \"bad key\" is not a name; dropped", d.path().join(stdout).display());
    assert!(warnings.iter().any(|w| w.as_str() == Some(want.as_str())), "{warnings:?}");
}
