//! `katlas parse` and `katlas collect` end to end through the binary.

use std::process::Command;

use crate::support::cli::{fixture, KATLAS};

/// The binary in the test environment (`crate::support::cli`); callers set the directory.
fn katlas() -> Command {
    let mut c = Command::new(KATLAS);
    // Trust prompts are tested in untrusted_repo.rs.
    katlas_testkit::cli::isolate(&mut c).env("KATLAS_YES", "1");
    c
}

#[test]
fn parse_prints_json_and_rows() {
    let out = katlas().args(["parse", "hipfire-bench"]).arg(fixture("hipfire/bench_ar_profile.txt")).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "katlas.parse.v1");
    assert_eq!(v["metrics"]["startup_overhead_ms"]["value"], -3.41);
    assert_eq!(v["phases"][1]["kernels"][0]["op"]["family"], "linear");
    let out = katlas().args(["parse", "hipfire-dflash"]).arg(fixture("hipfire/dflash_demo.txt")).args(["--rows", "dflash"]).output().unwrap();
    assert!(out.status.success());
    let row: serde_json::Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(row["schema"], "katlas.row.v1");
    assert_eq!(row["metrics"]["accepted"]["value"], 237.0);
    let bad = katlas().args(["parse", "nope", "x"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn collect_writes_rows_and_reports_errors() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("katlas.toml"), "[workload.w]\ncommand = \"case {m} in ok) echo tok_s=3;; segv) kill -SEGV $$;; esac\"\nparsers = ['kv']\nrequired = ['tok_s']\n[workload.w.matrix]\nm = ['ok', 'segv']\n").unwrap();
    let out = katlas().current_dir(d.path()).args(["collect", "w", "--format", "json", "--output", "rows.jsonl"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["rows_ok"], 1);
    assert_eq!(rep["rows_error"], 1);
    let rows = std::fs::read_to_string(d.path().join("rows.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 2);
    let list = katlas().current_dir(d.path()).args(["collect", "--list", "--format", "json"]).output().unwrap();
    let names: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert!(names.as_array().unwrap().iter().any(|n| n["name"] == "hipfire-ar"));
    let bad = katlas().current_dir(d.path()).args(["collect", "w", "--set", "zz=1"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("zz"));
}

#[test]
fn provenance_ranks_chip_then_family_then_base() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("katlas.toml"), "[project]\nkernel_roots = ['kernels/src']\ndispatch_roots = ['host']\n").unwrap();
    std::fs::create_dir_all(d.path().join("kernels/src")).unwrap();
    std::fs::create_dir_all(d.path().join("host")).unwrap();
    for f in ["gemv_q4.hip", "gemv_q4.gfx12.hip", "gemv_q4.gfx1201.hip", "gemv_q4.gfx1100.hip"] {
        std::fs::write(d.path().join("kernels/src").join(f), "extern \"C\" __global__ void gemv_q4(float* y) {}\n").unwrap();
    }
    std::fs::write(d.path().join("host/run.rs"), "let on = std::env::var(\"HIPFIRE_Q4\");\nlet f = m.function(\"gemv_q4\");\n").unwrap();
    let out = katlas().current_dir(d.path()).args(["provenance", "gemv_q4_r2", "--arch", "gfx1201", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths: Vec<&str> = v[0]["sources"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["kernels/src/gemv_q4.gfx1201.hip", "kernels/src/gemv_q4.gfx12.hip", "kernels/src/gemv_q4.hip"]);
    assert_eq!(v[0]["dispatch"][0]["path"], "host/run.rs");
    assert_eq!(v[0]["env_knobs"][0], "HIPFIRE_Q4");
    let bad = katlas().current_dir(d.path()).args(["provenance", "x", "--arch", "gfx9999"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// A profiled Python workload runs with katlas's Triton launch recorder first on PYTHONPATH (the
/// user's own sitecustomize.py still runs after it), and the launch records it leaves beside
/// the trace give the trace's Triton kernels their bytes. Triton is not installed here, so the
/// workload stands in for the recorder by copying the records a real H200 run wrote.
#[test]
fn profiled_python_workloads_record_triton_launches_beside_the_trace() {
    let d = tempfile::tempdir().unwrap();
    let fix = fixture("triton-h200/liger-decode");
    let user_site = d.path().join("user-site");
    std::fs::create_dir_all(&user_site).unwrap();
    std::fs::write(user_site.join("sitecustomize.py"), "import os\nos.environ['USER_SITE_RAN'] = '1'\n").unwrap();
    std::fs::write(
        d.path().join("wl.py"),
        format!(
            "import os, shutil, sys, sitecustomize\n\
             print('hook=' + sitecustomize.__file__)\n\
             print('user_site_ran=' + os.environ.get('USER_SITE_RAN', '0'))\n\
             print('decode_tok_s=40')\n\
             shutil.copy({trace:?}, os.path.join(sys.argv[1], 'trace.json.gz'))\n\
             shutil.copy({rec:?}, os.environ['KATLAS_TRITON_LAUNCHES'])\n",
            trace = fix.join("trace.json.gz").display().to_string(),
            rec = fix.join("launches.jsonl").display().to_string(),
        ),
    )
    .unwrap();
    std::fs::write(
        d.path().join("katlas.toml"),
        format!(
            "[workload.py]\ncommand = ['python3', 'wl.py', '{{run_dir}}']\nphases = ['prefill', 'decode']\nparsers = ['kv']\nenv = {{ PYTHONPATH = '{}' }}\n\
             [workload.py.profile]\ntriton_launches = true\nparsers = [{{ name = 'torch-trace', file = '{{run_dir}}/trace.json.gz', phases = ['prefill', 'decode'] }}]\n",
            user_site.display()
        ),
    )
    .unwrap();
    let out = katlas().current_dir(d.path()).args(["collect", "py", "--profile", "--format", "json", "--output", "rows.jsonl"]).output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let runs: Vec<_> = std::fs::read_dir(d.path().join(".katlas/runs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let stdout = std::fs::read_to_string(runs[0].join("stdout")).unwrap();
    let hook = runs[0].join("katlas-python/sitecustomize.py");
    assert!(stdout.contains(&format!("hook={}", hook.display())), "{stdout}");
    assert!(stdout.contains("user_site_ran=1"), "the user's own sitecustomize.py must still run: {stdout}");
    assert!(runs[0].join("triton-launches.jsonl").is_file());
    let rows = std::fs::read_to_string(d.path().join("rows.jsonl")).unwrap();
    let mut seen = 0;
    for line in rows.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(row["variant"]["instrumentation"].as_array().unwrap().iter().any(|n| n == "KATLAS_TRITON_LAUNCHES"), "{row}");
        for k in row["kernels"].as_array().into_iter().flatten().filter(|k| k["name"] == "_rms_norm_forward_kernel") {
            assert_eq!(k["extra"]["bytes_source"], "launch operands", "{k}");
            assert!(k["bytes"].as_f64().unwrap() > 0.0, "{k}");
            assert_eq!(k["extra"]["triton"]["num_warps"], 8, "{k}");
            seen += 1;
        }
    }
    assert!(seen >= 2, "rms_norm of prefill and decode with launch bytes: {rows}");
}
