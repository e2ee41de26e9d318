//! `collect --capture-modules --profile` (issue 16): on CUDA 13 the capture library may have to
//! hold CUPTI alone, and torch.profiler then records no kernels. So with a profile the capture
//! gets an unmeasured run of its own per combo, without the profiler; the profiled runs carry no
//! injection and link the capture's `modules/`. The workload here stands in for the driver: when
//! `CUDA_INJECTION64_PATH` is set it writes a module where the library would, and every run logs
//! what it was given (the real library on the H200: docs/GPU.md).

use crate::support::cli;
use cli::*;

const WORKLOAD: &str = r#"#!/bin/sh
# what this run was given: the injection library, and the profiler's flag
echo "inject=${CUDA_INJECTION64_PATH:-none} args=$*" >> "$KATLAS_LOG"
if [ -n "$CUDA_INJECTION64_PATH" ]; then
  mkdir -p "$KATLAS_CAPTURE_DIR"
  printf 'cubin bytes' > "$KATLAS_CAPTURE_DIR/module-1.cubin"
  echo '{"module_id":1,"file":"module-1.cubin"}' >> "$KATLAS_CAPTURE_DIR/modules.jsonl"
fi
echo "tok_s=100"
"#;

#[test]
fn a_profiled_collect_captures_modules_in_a_run_of_its_own() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    git(root, &["init", "-q"]);
    std::fs::write(root.join("w.sh"), WORKLOAD).unwrap();
    let lib = root.join("libkatlas_capture.so");
    std::fs::write(&lib, b"stand-in: the path is what collect passes on").unwrap();
    let log = root.join("runs.log");
    std::fs::write(
        root.join("katlas.toml"),
        format!(
            "[workload.w]\ncommand = ['sh', 'w.sh']\nparsers = ['kv']\nruns = 2\nwarmup = 0\nenv = {{ KATLAS_LOG = '{}' }}\n\n[workload.w.profile]\nargs = ['--trace']\n",
            log.display()
        ),
    )
    .unwrap();
    let o = katlas_cmd(root)
        .args(["collect", "w", "--profile", "--capture-modules", "--format", "json"])
        .env("KATLAS_YES", "1")
        .env("KATLAS_CAPTURE_LIB", &lib)
        .output()
        .unwrap();
    let rep = json(&o);
    let err = stderr(&o);

    // One capture run first, without the profiler's flag; the two profiled runs without injection.
    let runs: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_string).collect();
    let inject = format!("inject={}", lib.display());
    assert_eq!(runs, [format!("{inject} args="), "inject=none args=--trace".into(), "inject=none args=--trace".into()], "{err}");

    // Rows come only from the profiled runs; each one's run directory holds the captured module.
    let caps = rep["capture_runs"].as_array().expect("capture_runs in the report");
    assert_eq!(caps.len(), 1);
    let cap = caps[0]["run_id"].as_str().unwrap();
    let rows = rep["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["pass"], "measured");
        let rid = r["run_id"].as_str().unwrap();
        assert_ne!(rid, cap);
        let module = root.join(".katlas/runs").join(rid).join("modules/module-1.cubin");
        assert_eq!(std::fs::read(&module).unwrap(), b"cubin bytes", "{}", module.display());
        let target = std::fs::read_link(root.join(".katlas/runs").join(rid).join("modules")).unwrap();
        assert_eq!(target, std::path::Path::new("..").join(cap).join("modules"));
    }
    assert!(err.contains(&format!("capture run {cap}: 1 module load(s) captured")), "{err}");
    assert!(!err.contains("may have recorded no kernels"), "{err}");
}
