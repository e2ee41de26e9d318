//! hipfire's own records (issue 13, item 4), read and written the way hipfire itself does:
//!
//! - rows written by hipfire's Rust Atlas (`crates/hipfire-atlas`, `AtlasRow`) import, with
//!   their string-valued metrics kept as row params;
//! - hipfire's ISA manifest (`hipfire.kernel_atlas.isa.v0`, written by `kernel_atlas.py`)
//!   is read by `katlas fit --isa`;
//! - `katlas corpus export --format hipfire-v0` gives back the v0 rows it imported, and
//!   hipfire's own `kernel_atlas.py` reads the export as it reads the originals;
//! - `katlas isa scan --export hipfire-v0` uses the category names hipfire reads;
//! - provenance on the real tree with `preset = "hipfire"` alone, katlas and the peer's
//!   `collect_dispatch_manifest` on the same names, both held to what hipfire's source says: the
//!   preset's roots, the `*_for_arch` arms' chip lists, profiler labels followed to the kernel
//!   their code launches;
//! - `katlas collect hipfire-ar` on the bench's real output stream, exported as v0, against
//!   hipfire's own `collect-ar` on the same stream: hipfire's `render-fit` and `suggest` read
//!   both alike (phase, quant, arch, the phase's metric, op roles, ISA lanes), and a bench that
//!   panics in its gen phase keeps its prefill numbers.
//!
//! The peer is the snapshot in `fixtures/hipfire-tree/` (MIT). python3 runs its script
//! (`scripts/test-all` installs python3; no GPU or ROCm is needed: the ISA tools it calls are
//! stand-ins printing real `llvm-readobj --notes` / `llvm-objdump -d` text).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::cli;
use cli::{fixture, json, katlas, leaves, ok, repo};

use katlas_testkit::hipfire_tree;

use katlas_testkit::hipfire_streams;

fn peer_script() -> PathBuf {
    fixture("hipfire-tree/scripts/kernel_atlas.py")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn lines(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// Rows exactly as hipfire's Rust Atlas writes them: `serde_json::to_string(&AtlasRow)`
/// (crates/hipfire-atlas/src/schema.rs). `AtlasRow` serialises its fields in declaration
/// order — `schema`, `phase`, `workload_kind`, `model_size`, `quant`, `shape_bucket` (all
/// `String`, `""` when unset), `run_index` (`Option<u32>`, no `skip_serializing_if`, so
/// `null`), `metrics` and `artifacts` (`BTreeMap<String, Value>`, sorted) — then its
/// `#[serde(flatten)] extra` map; numbers are serde_json's (`f64` shortest round-trip, `u64`
/// as integers) and nested objects sorted (hipfire's serde_json has no `preserve_order`).
/// There is no `workload`, `captured_at_utc`, provenance or status.
///
/// 1. `bench_qwen35_mq4 --emit-atlas` (crates/hipfire-runtime/examples/bench_qwen35_mq4.rs,
///    lines 208-238): the prefill row with `HIPFIRE_PROFILE=1` — `set_metric_f64` for the
///    rates and times, `set_metric_u64` for `prefill_tokens`, `prefill_runs`, `model_bytes`,
///    `set_metric_str` for `kv_mode`, `arch`, `model_path`, `set_extra("captured_at_unix_s")`.
/// 2. The same bench's decode row (lines 358-378).
/// 3. and 4. `hipfire-atlas parse-bench fixtures/hipfire/bench_ar_profile.txt` (parse.rs,
///    `bench_rows_from_output`): `workload_kind` `ar`, `shape_bucket` `parsed_bench`,
///    `artifacts.profile_kernels` with `classify_kernel_op`'s `op`.
/// 5. `hipfire-atlas parse-dflash fixtures/hipfire/dflash_demo.txt` (`dflash_row_from_output`).
///
/// Each line is the byte-for-byte output of those functions, built from the snapshot
/// (fixtures/hipfire-tree, commit e038111) with the values shown (bench rows: 128-token
/// prefill in 89.6 ms of which 80 ms kernels, gfx1100, KV mode asym3).
const RUST_ROWS: [&str; 5] = [
    r#"{"schema":"hipfire.kernel_atlas.v0","phase":"prefill","workload_kind":"bench_qwen35_mq4","model_size":"","quant":"","shape_bucket":"","run_index":null,"metrics":{"arch":"gfx1100","cold_overhead_pct":10.714285714285708,"kv_mode":"asym3","model_bytes":5368709120,"model_path":"/models/qwen3.5-9b.mq4","prefill_kernel_ms":80.0,"prefill_runs":1,"prefill_tok_s":1428.5714285714287,"prefill_tok_s_kernel":1600.0,"prefill_tokens":128,"prefill_wall_ms":89.6,"startup_overhead_ms":9.599999999999994},"artifacts":{},"captured_at_unix_s":1779095564}"#,
    r#"{"schema":"hipfire.kernel_atlas.v0","phase":"decode_ar","workload_kind":"bench_qwen35_mq4","model_size":"","quant":"","shape_bucket":"","run_index":null,"metrics":{"arch":"gfx1100","avg_ms":16.26,"bw_gib_s":307.5,"gen_tok_s":61.5,"gen_tokens":100,"kv_mode":"asym3","max_ms":18.0,"min_ms":15.9,"model_bytes":5368709120,"model_path":"/models/qwen3.5-9b.mq4","p50_ms":16.2,"p90_ms":16.9,"p99_ms":17.4},"artifacts":{}}"#,
    r#"{"schema":"hipfire.kernel_atlas.v0","phase":"prefill","workload_kind":"ar","model_size":"","quant":"","shape_bucket":"parsed_bench","run_index":null,"metrics":{"cold_overhead_pct":12.1,"prefill_kernel_ms":194.9,"prefill_tok_s":577.3,"prefill_tok_s_kernel":656.7,"prefill_wall_ms":182.23},"artifacts":{"profile_kernels":[{"avg_us":1912.0,"calls":32,"gib_s":402.7,"name":"gemm_qkvza_hfq4g256_wmma","op":{"family":"linear","phase_hint":"prefill","role":"gemm"},"pct":31.4,"total_ms":61.2},{"avg_us":1528.0,"calls":32,"gib_s":611.0,"name":"gemm_gate_up_hfq4g256_wmma","op":{"family":"mlp","phase_hint":"prefill/decode","role":"gate_up_projection"},"pct":25.1,"total_ms":48.9},{"avg_us":627.0,"calls":64,"gib_s":574.2,"name":"gemm_hfq4g256_residual_wmma","op":{"family":"linear","phase_hint":"prefill","role":"residual_gemm"},"pct":20.6,"total_ms":40.1},{"avg_us":547.0,"calls":32,"gib_s":88.1,"name":"attention_flash_asym3","op":{"family":"attention","phase_hint":"prefill/decode","role":"flash_attention"},"pct":9.0,"total_ms":17.5},{"avg_us":97.0,"calls":65,"gib_s":140.8,"name":"fused_rmsnorm_mq_rotate","op":{"family":"position","phase_hint":"prefill/decode","role":"rope_rotate"},"pct":3.2,"total_ms":6.3}]}}"#,
    r#"{"schema":"hipfire.kernel_atlas.v0","phase":"decode_ar","workload_kind":"ar","model_size":"","quant":"","shape_bucket":"parsed_bench","run_index":null,"metrics":{"avg_ms":27.62,"bw_gib_s":542.8,"gen_tok_s":36.2,"p50_ms":27.58},"artifacts":{"profile_kernels":[{"avg_us":156.0,"calls":3200,"gib_s":577.4,"name":"gemv_hfq4g256_residual","op":{"family":"linear","phase_hint":"decode","role":"residual_gemv"},"pct":36.9,"total_ms":498.1},{"avg_us":188.0,"calls":1600,"gib_s":551.2,"name":"fused_qkvza_hfq4g256","op":{"family":"attention","phase_hint":"prefill/decode","role":"qkvza_projection"},"pct":22.3,"total_ms":301.5},{"avg_us":180.0,"calls":1600,"gib_s":562.9,"name":"fused_gate_up_hfq4g256","op":{"family":"mlp","phase_hint":"prefill/decode","role":"gate_up_projection"},"pct":21.3,"total_ms":288.0},{"avg_us":60.0,"calls":1600,"gib_s":49.6,"name":"attention_flash_asym3","op":{"family":"attention","phase_hint":"prefill/decode","role":"flash_attention"},"pct":7.1,"total_ms":96.2},{"avg_us":15.0,"calls":800,"gib_s":12.3,"name":"fused_qk_l2_norm_scale_f32","op":{"family":"norm","phase_hint":"prefill/decode","role":"normalization"},"pct":0.9,"total_ms":11.9},{"avg_us":820.0,"calls":50,"gib_s":601.2,"name":"gemv_hfq4g256_multirow_default_r2","op":{"family":"linear","phase_hint":"decode","role":"multirow_gemv"},"pct":3.0,"total_ms":41.0}]}}"#,
    r#"{"schema":"hipfire.kernel_atlas.v0","phase":"decode_dflash","workload_kind":"dflash","model_size":"","quant":"","shape_bucket":"parsed_dflash","run_index":null,"metrics":{"cycles":19,"decode_tok_s":199.69,"elapsed_s":1.38,"emitted_tokens":256,"tau":12.4737,"ttft_ms":139.7},"artifacts":{}}"#,
];

/// hipfire's ISA manifest as `kernel_atlas.py` writes it: `maybe_build_isa_artifact` →
/// `json.dumps(collect_isa_manifest(...), indent=2, sort_keys=True)`, each object from
/// `inspect_isa_object` (kernel fields from `parse_isa_metadata`, counts from
/// `parse_disassembly_stats`), over two objects whose `llvm-readobj --notes` and
/// `llvm-objdump -d` text is in [`OBJECTS`]. One object holds one kernel, the other two
/// (hipfire counts instructions per object). The `other: 1` / `"obj": 1` of the first is
/// hipfire's own: its disassembly parser counts objdump's `obj/…: file format` header line.
/// [`peer_isa_manifest`] regenerates this file with the script itself.
const PEER_ISA: &str = r#"
{
  "arch": "gfx1201",
  "captured_at_utc": "2026-12-01T10:16:37Z",
  "instruction_count": 20,
  "kernel_count": 3,
  "object_count": 2,
  "objects": [
    {
      "amdhsa_target": "amdgcn-amd-amdhsa--gfx1201",
      "bundle_target": null,
      "bundle_targets": [],
      "instruction_summary": {
        "category_counts": {
          "branch": 1,
          "dot": 1,
          "lds": 1,
          "other": 1,
          "salu": 1,
          "smem": 1,
          "valu": 2,
          "vmem": 4,
          "wait": 1
        },
        "instruction_count": 13,
        "kernel_symbols": [
          "gemv_hfq4g256_residual"
        ],
        "opcode_counts": {
          "ds_store_b32": 1,
          "global_load_b128": 2,
          "global_load_b32": 1,
          "global_store_b32": 1,
          "obj": 1,
          "s_cbranch_scc1": 1,
          "s_endpgm": 1,
          "s_load_b128": 1,
          "s_waitcnt": 1,
          "v_add_f32_e32": 1,
          "v_dot2_f32_f16": 1,
          "v_fma_f32": 1
        }
      },
      "kernels": [
        {
          "group_segment_fixed_size": 512,
          "kernarg_segment_size": 36,
          "max_flat_workgroup_size": 256,
          "name": "gemv_hfq4g256_residual",
          "private_segment_fixed_size": 0,
          "sgpr_count": 52,
          "sgpr_spill_count": 0,
          "symbol": "gemv_hfq4g256_residual.kd",
          "uses_dynamic_stack": false,
          "vgpr_count": 158,
          "vgpr_spill_count": 0,
          "wavefront_size": 32,
          "workgroup_processor_mode": true
        }
      ],
      "md5": "6b33fc73f01fd24cf24e8ee277067335",
      "path": "obj/gemv_hfq4g256_residual.hsaco",
      "tool_errors": []
    },
    {
      "amdhsa_target": "amdgcn-amd-amdhsa--gfx1201",
      "bundle_target": null,
      "bundle_targets": [],
      "instruction_summary": {
        "category_counts": {
          "salu": 2,
          "valu": 2,
          "vmem": 3
        },
        "instruction_count": 7,
        "kernel_symbols": [
          "fused_qkvza_hfq4g256",
          "fused_rmsnorm_mq_rotate"
        ],
        "opcode_counts": {
          "global_load_b128": 1,
          "global_load_b32": 1,
          "global_store_b32": 1,
          "s_endpgm": 2,
          "v_fma_f32": 1,
          "v_mul_f32_e32": 1
        }
      },
      "kernels": [
        {
          "group_segment_fixed_size": 0,
          "kernarg_segment_size": 40,
          "max_flat_workgroup_size": 128,
          "name": "fused_qkvza_hfq4g256",
          "private_segment_fixed_size": 0,
          "sgpr_count": 40,
          "sgpr_spill_count": 0,
          "symbol": "fused_qkvza_hfq4g256.kd",
          "vgpr_count": 96,
          "vgpr_spill_count": 0,
          "wavefront_size": 32
        },
        {
          "group_segment_fixed_size": 0,
          "kernarg_segment_size": 24,
          "max_flat_workgroup_size": 256,
          "name": "fused_rmsnorm_mq_rotate",
          "private_segment_fixed_size": 16,
          "sgpr_count": 24,
          "sgpr_spill_count": 0,
          "symbol": "fused_rmsnorm_mq_rotate.kd",
          "vgpr_count": 32,
          "vgpr_spill_count": 2,
          "wavefront_size": 32
        }
      ],
      "md5": "14a0721ca7a00ac5374bc250be3e480d",
      "path": "obj/fused.hsaco",
      "tool_errors": []
    }
  ],
  "schema": "hipfire.kernel_atlas.isa.v0"
}
"#;

/// (object, `llvm-readobj --notes` text, `llvm-objdump -d --no-show-raw-insn` text).
const OBJECTS: [(&str, &str, &str); 2] = [
    (
        "obj/gemv_hfq4g256_residual.hsaco",
        "Displaying notes found in: .note
  Owner                Data size \tDescription
  AMDGPU               0x00000a4c\tNT_AMDGPU_METADATA (AMDGPU Metadata)
    AMDGPU Metadata: ---
amdhsa.kernels:
  - .group_segment_fixed_size: 512
    .kernarg_segment_size: 36
    .max_flat_workgroup_size: 256
    .name:           gemv_hfq4g256_residual
    .private_segment_fixed_size: 0
    .sgpr_count:     52
    .sgpr_spill_count: 0
    .symbol:         gemv_hfq4g256_residual.kd
    .uses_dynamic_stack: false
    .vgpr_count:     158
    .vgpr_spill_count: 0
    .wavefront_size: 32
    .workgroup_processor_mode: true
amdhsa.target:   amdgcn-amd-amdhsa--gfx1201
amdhsa.version:
  - 1
  - 2
...
",
        "
obj/gemv_hfq4g256_residual.hsaco:\tfile format elf64-amdgpu

Disassembly of section .text:

0000000000001700 <gemv_hfq4g256_residual>:
\ts_load_b128 s[4:7], s[0:1], 0x18
\ts_waitcnt lgkmcnt(0)
\tglobal_load_b128 v[4:7], v[0:1], off
\tglobal_load_b128 v[8:11], v[0:1], off offset:16
\tglobal_load_b32 v12, v[0:1], off offset:32
\tv_dot2_f32_f16 v0, v1, v2, v0
\tv_fma_f32 v0, v1, v2, v0
\tv_add_f32_e32 v0, v1, v2
\tds_store_b32 v0, v1
\tglobal_store_b32 v[0:1], v2, off
\ts_cbranch_scc1 42
\ts_endpgm
",
    ),
    (
        "obj/fused.hsaco",
        "    AMDGPU Metadata: ---
amdhsa.kernels:
  - .group_segment_fixed_size: 0
    .kernarg_segment_size: 40
    .max_flat_workgroup_size: 128
    .name:           fused_qkvza_hfq4g256
    .private_segment_fixed_size: 0
    .sgpr_count:     40
    .sgpr_spill_count: 0
    .symbol:         fused_qkvza_hfq4g256.kd
    .vgpr_count:     96
    .vgpr_spill_count: 0
    .wavefront_size: 32
  - .group_segment_fixed_size: 0
    .kernarg_segment_size: 24
    .max_flat_workgroup_size: 256
    .name:           fused_rmsnorm_mq_rotate
    .private_segment_fixed_size: 16
    .sgpr_count:     24
    .sgpr_spill_count: 0
    .symbol:         fused_rmsnorm_mq_rotate.kd
    .vgpr_count:     32
    .vgpr_spill_count: 2
    .wavefront_size: 32
amdhsa.target:   amdgcn-amd-amdhsa--gfx1201
...
",
        "0000000000001000 <fused_qkvza_hfq4g256>:
\tglobal_load_b128 v[4:7], v[0:1], off
\tv_fma_f32 v0, v1, v2, v0
\ts_endpgm
0000000000001100 <fused_rmsnorm_mq_rotate>:
\tglobal_load_b32 v4, v[0:1], off
\tv_mul_f32_e32 v0, v1, v2
\tglobal_store_b32 v[0:1], v0, off
\ts_endpgm
",
    ),
];

/// Run python3 with `args` in `dir`; python3 is part of the suite's environment.
fn python(dir: &Path, args: &[&str], path_prefix: Option<&Path>) -> Output {
    let mut c = Command::new("python3");
    c.args(args).current_dir(dir).env("PYTHONDONTWRITEBYTECODE", "1");
    if let Some(p) = path_prefix {
        c.env("PATH", format!("{}:{}", p.display(), std::env::var("PATH").unwrap_or_default()));
    }
    c.output().expect("python3 runs (scripts/test-all installs it): the peer's kernel_atlas.py is the reference here")
}

/// Stand-ins for llvm-readobj / llvm-objdump / clang-offload-bundler that print the text of
/// [`OBJECTS`] for the object named last on their command line.
fn fake_rocm_tools(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for (name, ext) in [("llvm-readobj", "notes"), ("llvm-objdump", "dis")] {
        let p = tools.join(name);
        std::fs::write(&p, format!("#!/bin/sh\nfor a in \"$@\"; do p=$a; done\ncat \"${{p%.hsaco}}.{ext}\"\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let b = tools.join("clang-offload-bundler");
    std::fs::write(&b, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("obj")).unwrap();
    for (i, (obj, notes, dis)) in OBJECTS.iter().enumerate() {
        std::fs::write(dir.join(obj), format!("fake{}\n", i + 1)).unwrap();
        let stem = obj.trim_end_matches(".hsaco");
        std::fs::write(dir.join(format!("{stem}.notes")), notes).unwrap();
        std::fs::write(dir.join(format!("{stem}.dis")), dis).unwrap();
    }
    tools
}

/// The peer's ISA manifest written by the peer: `maybe_build_isa_artifact` with `--isa-file`
/// for both objects and `--isa-output`, exactly as `collect-ar`/`collect-dflash` call it.
fn peer_isa_manifest(dir: &Path) -> PathBuf {
    let tools = fake_rocm_tools(dir);
    let out = dir.join("peer_isa.json");
    let code = format!(
        "import argparse, importlib.util\n\
         spec = importlib.util.spec_from_file_location('kernel_atlas', {script:?})\n\
         ka = importlib.util.module_from_spec(spec); spec.loader.exec_module(ka)\n\
         args = argparse.Namespace(isa_file=[{a:?}, {b:?}], isa_dir=[], isa_filter=None, isa_limit=None, isa_output={out:?})\n\
         print(ka.maybe_build_isa_artifact(args, 'gfx1201'))\n",
        script = s(&peer_script()),
        a = OBJECTS[0].0,
        b = OBJECTS[1].0,
        out = s(&out),
    );
    ok(&python(dir, &["-c", &code], Some(&tools)));
    out
}

/// Two JSON values equal, except that a float may differ in its last bit: the workspace's
/// serde_json parses without its `float_roundtrip` feature, so a 17-digit float read from
/// a file (import, then the corpus) can come back one ULP off. Returns whether it was exact.
fn same(a: &Value, b: &Value, at: &str) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            let mut exact = true;
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => exact &= same(p, q, &format!("{at}.{k}")),
                    (p, q) => panic!("{at}.{k}: {p:?} vs {q:?}"),
                }
            }
            exact
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths");
            x.iter().zip(y).enumerate().fold(true, |e, (i, (p, q))| same(p, q, &format!("{at}[{i}]")) & e)
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (p, q) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(p == q || (p.signum() == q.signum() && (p.to_bits() as i64 - q.to_bits() as i64).abs() <= 1), "{at}: {p} vs {q}");
            p == q
        }
        _ => {
            assert_eq!(a, b, "{at}");
            true
        }
    }
}

/// Text equal, numbers compared as in [`same`].
fn same_text(a: &str, b: &str, what: &str) {
    let (x, y): (Vec<&str>, Vec<&str>) = (a.split_whitespace().collect(), b.split_whitespace().collect());
    assert_eq!(x.len(), y.len(), "{what}:\n{a}\n---\n{b}");
    for (p, q) in x.iter().zip(&y) {
        match (p.parse::<f64>(), q.parse::<f64>()) {
            (Ok(m), Ok(n)) if p.contains('.') && q.contains('.') => {
                same(&serde_json::json!(m), &serde_json::json!(n), what);
            }
            _ => assert_eq!(p, q, "{what}:\n{a}\n---\n{b}"),
        }
    }
}

/// The row fields hipfire's `kernel_atlas.py` reads (line numbers in the snapshot):
/// `arch` (1255, 1692, 2068), `workload` (1256, 1695, 2069), `quant` (1257, 1694),
/// `phase` (1230, 1258, 1693, 2001), `shape_bucket` (1259, 1696), `metrics` (1260, 2002; the
/// whole map is copied into a task's baseline, 2097), `artifacts` (`profile_kernels` 1125,
/// 1198, 1697, 2014, each entry copied whole into the task, 2092; `isa` 2533; `dispatch`
/// 1263, 1689, 2021, 2544), `variant` (its `env`, 1362, 2064), `command` (1367, 2098),
/// `hostname` (1932, 2085), `model_size` (2088) and `provenance` (copied whole, 2107).
/// `history_matches_target` (1594) reads arch, workload, phase, shape_bucket and quant again.
const PEER_READS: [&str; 12] =
    ["arch", "workload", "quant", "phase", "shape_bucket", "metrics", "artifacts", "variant", "command", "hostname", "model_size", "provenance"];

/// `hipfire_atlas::AtlasRow` with its serde attributes (schema.rs): `load_rows` must take our
/// export too (a `null` where it wants a `String` would fail it).
#[allow(dead_code)]
#[derive(serde::Deserialize)]
struct AtlasRow {
    #[serde(default)]
    schema: String,
    #[serde(default)]
    phase: String,
    #[serde(default)]
    workload_kind: String,
    #[serde(default)]
    model_size: String,
    #[serde(default)]
    quant: String,
    #[serde(default)]
    shape_bucket: String,
    #[serde(default)]
    run_index: Option<u32>,
    #[serde(default)]
    metrics: std::collections::BTreeMap<String, Value>,
    #[serde(default)]
    artifacts: std::collections::BTreeMap<String, Value>,
    #[serde(flatten)]
    extra: std::collections::BTreeMap<String, Value>,
}

fn write_rust_rows(dir: &Path) -> PathBuf {
    let p = dir.join("rust_rows.jsonl");
    std::fs::write(&p, RUST_ROWS.join("\n") + "\n").unwrap();
    p
}

/// Every number of `a` is, at the same path of `b`, a number of the same kind (integer or float).
fn same_kinds(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.iter().for_each(|(k, v)| same_kinds(v, &y[k], &format!("{at}.{k}"))),
        (Value::Array(x), Value::Array(y)) => x.iter().zip(y).enumerate().for_each(|(i, (p, q))| same_kinds(p, q, &format!("{at}[{i}]"))),
        (Value::Number(x), Value::Number(y)) => assert_eq!(x.is_f64(), y.is_f64(), "{at}: {x} vs {y}"),
        _ => {}
    }
}

#[test]
fn rust_atlas_rows_import_with_their_string_metrics() {
    let d = tempfile::tempdir().unwrap();
    let src = write_rust_rows(d.path());
    let out = json(&katlas(d.path(), &["corpus", "import", s(&src), "--strict", "--output", "c.jsonl", "--format", "json"]));
    assert_eq!(out["imported"], 5, "{out}");
    let rows = out["rows"].as_array().unwrap();

    let prefill = &rows[0];
    // No `workload` in AtlasRow: the model file names it, as the Python Atlas names workloads.
    assert_eq!(prefill["workload"], "qwen3.5-9b");
    assert_eq!(prefill["workload_kind"], "bench_qwen35_mq4");
    assert_eq!(prefill["phase"], "prefill");
    // String metrics are the run's string attributes: row params, never dropped.
    assert_eq!(prefill["params"], serde_json::json!({"arch": "gfx1100", "kv_mode": "asym3", "model_path": "/models/qwen3.5-9b.mq4"}));
    // … and what katlas reads from them: the arch, the model, the capture time.
    assert_eq!(prefill["arch"], "gfx1100");
    assert_eq!(prefill["identity"]["devices"][0]["arch_source"], "hipfire row metrics.arch");
    assert_eq!(prefill["identity"]["model"]["path"], "/models/qwen3.5-9b.mq4");
    assert_eq!(prefill["identity"]["model"]["size"], 5_368_709_120u64);
    assert_eq!(prefill["captured_at"], "2026-05-18T09:12:44Z");
    assert_eq!(prefill["metrics"]["prefill_tokens"]["value"], 128.0);
    assert_eq!(prefill["metrics"]["prefill_tok_s_kernel"]["value"], 1600.0);
    assert_eq!(prefill["extra"]["captured_at_unix_s"], 1779095564);
    assert!(prefill["metrics"].get("kv_mode").is_none(), "a string is not a number");

    assert_eq!(rows[1]["params"]["kv_mode"], "asym3");
    assert_eq!(rows[1]["metrics"]["gen_tok_s"]["value"], 61.5);
    assert_eq!(rows[1]["metrics"]["gen_tok_s"]["unit"], "tok/s");
    // parse-bench rows: kernels with the op hipfire classified.
    assert_eq!(rows[3]["workload"], "ar");
    assert_eq!(rows[3]["kernels"].as_array().unwrap().len(), 6);
    assert_eq!(rows[3]["kernels"][0]["name"], "gemv_hfq4g256_residual");
    assert_eq!(rows[3]["kernels"][0]["op"]["role"], "residual_gemv");
    assert_eq!(rows[4]["phase"], "decode_dflash");
    assert_eq!(rows[4]["metrics"]["tau"]["value"], 12.4737);

    // Nothing lost: every leaf value of each source row is somewhere in its katlas row.
    for (line, row) in RUST_ROWS.iter().zip(rows) {
        let (have, want) = (leaves(row), leaves(&serde_json::from_str(line).unwrap()));
        for w in want.iter().filter(|w| !w.is_null() && w.as_str() != Some("")) {
            let found = have.iter().any(|h| h == w || matches!((h.as_f64(), w.as_f64()), (Some(a), Some(b)) if a == b));
            assert!(found, "value {w} of the AtlasRow is missing from the katlas row {row}");
        }
    }

    // The corpus lists them, and fit reads the bench decode row straight from the file:
    // its arch is the one the Rust writer put among the metrics.
    let ls = json(&katlas(d.path(), &["corpus", "ls", "--file", "c.jsonl", "--strict", "--format", "json"]));
    assert_eq!(ls["rows"].as_array().unwrap().len(), 5);
    let fit = json(&katlas(d.path(), &["fit", s(&src), "--index", "2", "--format", "json"]));
    assert_eq!(fit["header"]["arch"], "gfx1100", "{}", fit["header"]);
    assert_eq!(fit["header"]["phase"], "decode_ar");
}

#[test]
fn a_string_under_a_unit_metric_is_still_refused() {
    let d = tempfile::tempdir().unwrap();
    let bad = RUST_ROWS[1].replace(r#""gen_tok_s":61.5"#, r#""gen_tok_s":"fast""#);
    assert_ne!(bad, RUST_ROWS[1]);
    std::fs::write(d.path().join("bad.jsonl"), bad + "\n").unwrap();
    let o = katlas(d.path(), &["corpus", "import", "bad.jsonl", "--strict", "--output", "c.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("metrics.gen_tok_s") && err.contains("expected a number"), "{err}");
}

fn check_fit_with_peer_isa(dir: &Path, isa: &Path) {
    let rows = fixture("hipfire/atlas_rows_v0.jsonl");
    let v = json(&katlas(dir, &["fit", s(&rows), "--phase", "decode_ar", "--isa", s(isa), "--format", "json"]));
    assert_eq!(v["scope"]["kind"], "profile-matched", "{}", v["scope"]);
    assert_eq!(v["scope"]["isa_arches"], serde_json::json!(["gfx1201"]));
    let matched: Vec<&str> = v["scope"]["matched"].as_array().unwrap().iter().map(|m| m["isa_kernel"].as_str().unwrap()).collect();
    assert_eq!(matched, ["gemv_hfq4g256_residual", "fused_qkvza_hfq4g256", "fused_rmsnorm_mq_rotate"]);
    let k = &v["kernels"][0];
    assert_eq!(k["name"], "gemv_hfq4g256_residual");
    // hipfire's kernel fields under katlas's names.
    for (key, want) in [("vgpr", 158), ("sgpr", 52), ("lds_bytes", 512), ("scratch_bytes", 0), ("wave_size", 32), ("max_workgroup_size", 256)] {
        assert_eq!(k["isa"][key], want, "{key}: {}", k["isa"]);
    }
    assert!(k["occupancy"].is_object(), "resources give an occupancy: {k}");
    // The one-kernel object's instruction counts are that kernel's, vmem split by opcode.
    let mix: std::collections::BTreeMap<String, u64> =
        k["mix"].as_array().unwrap().iter().map(|b| (b["category"].as_str().unwrap().to_string(), b["count"].as_u64().unwrap())).collect();
    assert_eq!(mix.get("vmem_load"), Some(&3), "{mix:?}");
    assert_eq!(mix.get("vmem_store"), Some(&1), "{mix:?}");
    assert_eq!(mix.get("dot"), Some(&1), "{mix:?}");
    assert!(!mix.contains_key("vmem"), "{mix:?}");
    // Two kernels in one object: their object's counts are neither's, and fit says so.
    let rms = &v["kernels"][2];
    assert_eq!(rms["isa"]["vgpr"], 32);
    assert_eq!(rms["isa"]["spills"], 2.0);
    assert_eq!(rms["isa"]["scratch_bytes"], 16);
    assert!(rms["isa"]["mix_status"].as_str().unwrap().starts_with("object-level:"), "{}", rms["isa"]);
    assert!(rms["mix"].as_array().is_none_or(|m| m.is_empty()), "{}", rms["mix"]);
}

#[test]
fn fit_reads_hipfires_isa_manifest() {
    let d = tempfile::tempdir().unwrap();
    let isa = d.path().join("peer_isa.json");
    std::fs::write(&isa, PEER_ISA.trim_start()).unwrap();
    check_fit_with_peer_isa(d.path(), &isa);
    // Text output too (what a user runs).
    let rows = fixture("hipfire/atlas_rows_v0.jsonl");
    let text = ok(&katlas(d.path(), &["fit", s(&rows), "--phase", "decode_ar", "--isa", s(&isa)]));
    assert!(text.contains("VGPR 158  SGPR 52"), "{text}");

    // The same manifest written by the peer's own code now, not a copy of it.
    let fresh = peer_isa_manifest(d.path());
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&fresh).unwrap()).unwrap();
    let mut kept: Value = serde_json::from_str(PEER_ISA).unwrap();
    kept["captured_at_utc"] = written["captured_at_utc"].clone();
    assert_eq!(written, kept, "PEER_ISA is what kernel_atlas.py writes for these objects");
    check_fit_with_peer_isa(d.path(), &fresh);

    // A manifest of neither schema is named.
    std::fs::write(d.path().join("other.json"), r#"{"schema": "x.v9", "objects": []}"#).unwrap();
    let o = katlas(d.path(), &["fit", s(&rows), "--isa", "other.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("hipfire.kernel_atlas.isa.v0"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The converter alone is exact: v0 → Row → v0 gives the same JSON value, numbers of the
/// same kind (integer or float) and value.
#[test]
fn import_then_export_is_the_identity_on_v0() {
    let fixture_rows = std::fs::read_to_string(fixture("hipfire/atlas_rows_v0.jsonl")).unwrap();
    for line in fixture_rows.lines().filter(|l| !l.trim().is_empty()).chain(RUST_ROWS) {
        let src: Value = serde_json::from_str(line).unwrap();
        let row = katlas_model::hipfire::import_v0(src.clone(), Some("rows.jsonl"), Some(1)).unwrap();
        let back = katlas_model::hipfire::export_v0(&row);
        assert_eq!(back, src, "round trip of {line}");
        for k in PEER_READS {
            assert_eq!(back.get(k), src.get(k), "{k}");
        }
        // Integers stay integers (Python prints 50 and 50.0 differently).
        same_kinds(&src, &back, "");
    }
    // A row katlas measured itself exports too, in the Python Atlas's units.
    let mut r = katlas_model::Row::new("qwen3.5-9b", "decode_ar");
    r.arch = Some("gfx1100".into());
    r.metrics.insert("gen_tok_s".into(), katlas_model::Metric::from_key("gen_tok_s", 61.5));
    r.params.insert("kv_mode".into(), "asym3".into());
    r.kernels.push(katlas_model::KernelSample {
        name: "gemv".into(),
        calls: 10,
        total_us: 1500.0,
        share_pct: Some(40.0),
        achieved_gbps: Some(1.073741824 * 500.0),
        ..Default::default()
    });
    let v = katlas_model::hipfire::export_v0(&r);
    assert_eq!(v["schema"], "hipfire.kernel_atlas.v0");
    assert_eq!(v["metrics"], serde_json::json!({"gen_tok_s": 61.5, "kv_mode": "asym3"}));
    let k = &v["artifacts"]["profile_kernels"][0];
    assert!((k["gib_s"].as_f64().unwrap() - 500.0).abs() < 1e-9, "GB/s back to GiB/s: {k}");
    let mut k = k.clone();
    k.as_object_mut().unwrap().remove("gib_s");
    // hipfire's own op class of the name (classify_kernel_op), which its rules read.
    let op = serde_json::json!({"family": "linear", "role": "gemv", "phase_hint": "decode"});
    assert_eq!(k, serde_json::json!({"name": "gemv", "calls": 10, "total_ms": 1.5, "pct": 40.0, "op": op}));
    assert_eq!(v["status"], "ok");
    assert!(v.get("workload_kind").is_none() && v.get("quant").is_none(), "unknown strings are absent, never null: {v}");
    let _: AtlasRow = serde_json::from_value(v).expect("hipfire-atlas reads it");
}

#[test]
fn corpus_export_gives_back_v0_and_the_peer_reads_it_as_the_original() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let isa = dir.join("peer_isa.json");
    std::fs::write(&isa, PEER_ISA.trim_start()).unwrap();
    let sources = [fixture("hipfire/atlas_rows_v0.jsonl"), write_rust_rows(dir)];
    for (n, src) in sources.iter().enumerate() {
        let corpus = format!("corpus{n}.jsonl");
        ok(&katlas(dir, &["corpus", "import", s(src), "--strict", "--output", &corpus]));
        let out = format!("export{n}.jsonl");
        let said = ok(&katlas(dir, &["corpus", "export", "--file", &corpus, "--strict", "--format", "hipfire-v0", "--output", &out]));
        let original = lines(&std::fs::read_to_string(src).unwrap());
        assert!(said.contains(&format!("{} row(s) exported", original.len())), "{said}");
        let text = std::fs::read_to_string(dir.join(&out)).unwrap();
        let exported = lines(&text);
        assert_eq!(exported.len(), original.len());
        // stdout gives the same lines.
        assert_eq!(ok(&katlas(dir, &["corpus", "export", "--file", &corpus, "--format", "hipfire-v0"])), text);
        for (i, (a, b)) in original.iter().zip(&exported).enumerate() {
            // The whole document, so every field the peer reads (PEER_READS) among them.
            same(a, b, &format!("{}:{}", src.display(), i + 1));
            for k in PEER_READS {
                assert_eq!(a.get(k).is_some(), b.get(k).is_some(), "{k} present in one only");
            }
            let _: AtlasRow = serde_json::from_value(b.clone()).unwrap_or_else(|e| panic!("hipfire-atlas load_rows refuses line {}: {e}", i + 1));
        }
        // Keys sorted, as json.dumps(sort_keys=True) writes them.
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        }

        // hipfire's own script on the export gives what it gives on the original.
        let script = s(&peer_script()).to_string();
        for i in 0..original.len() {
            let idx = i.to_string();
            let run = |file: &Path, args: &[&str], cwd: &Path| -> String {
                std::fs::create_dir_all(cwd).unwrap();
                let mut a = vec![script.as_str()];
                a.extend_from_slice(args);
                a.extend_from_slice(&["--row", s(file), "--row-index", &idx, "--isa", s(&isa)]);
                ok(&python(cwd, &a, None))
            };
            let orig = dir.join(format!("orig{n}.jsonl"));
            std::fs::copy(src, &orig).unwrap();
            let exp = dir.join(&out);
            let (fa, fb) = (run(&orig, &["render-fit"], dir), run(&exp, &["render-fit"], dir));
            assert!(fa.starts_with("ISA FIT VIEW"), "{fa}");
            same_text(&fa, &fb, &format!("render-fit row {i}"));
            let sa: Value = serde_json::from_str(&run(&orig, &["suggest"], &dir.join("s"))).unwrap();
            let sb: Value = serde_json::from_str(&run(&exp, &["suggest"], &dir.join("s"))).unwrap();
            let drop_time = |mut v: Value, key: &str| {
                v.as_object_mut().unwrap().remove(key);
                v
            };
            same(&drop_time(sa, "captured_at_utc"), &drop_time(sb, "captured_at_utc"), &format!("suggest row {i}"));
            let task = |file: &Path, tag: &str| -> Value {
                let out_dir = dir.join(format!("task-{n}-{i}-{tag}"));
                run(file, &["task", "--output-dir", s(&out_dir)], dir);
                drop_time(serde_json::from_str(&std::fs::read_to_string(out_dir.join("task.json")).unwrap()).unwrap(), "created_at_utc")
            };
            same(&task(&orig, "a"), &task(&exp, "b"), &format!("task row {i}"));
        }
    }
}

#[test]
fn isa_export_uses_the_category_names_hipfire_reads() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let hsaco = repo().join("crates/katlas-isa/tests/fixtures/kernels.gfx1201.hsaco");
    assert!(hsaco.exists(), "ISA fixture {} is required (committed by katlas-isa)", hsaco.display());
    // The native decoder gives the mix (no ROCm needed).
    ok(&katlas(dir, &["isa", "scan", s(&hsaco), "--no-cache", "-o", "isa.json"]));
    ok(&katlas(dir, &["isa", "scan", s(&hsaco), "--no-cache", "--export", "hipfire-v0", "-o", "h.json"]));
    let h: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("h.json")).unwrap()).unwrap();
    let summary = &h["objects"][0]["instruction_summary"];
    let ours = summary["katlas_category_counts"].as_object().expect("katlas's own split kept beside hipfire's");
    // hipfire's vmem holds the flat-scratch spills katlas counts apart (scratch_load/_store)
    let cat = |c: &str| ours.get(c).and_then(Value::as_u64).unwrap_or(0);
    let vmem = cat("vmem_load") + cat("vmem_store") + cat("scratch_load") + cat("scratch_store");
    assert!(vmem > 0);
    assert_eq!(summary["category_counts"]["vmem"].as_u64(), Some(vmem), "{summary}");

    // The names hipfire's isa_category returns, read from the script.
    let script = std::fs::read_to_string(peer_script()).unwrap();
    let body = &script[script.find("\ndef isa_category(").unwrap()..];
    let body = &body[..body[1..].find("\ndef ").unwrap()];
    let peer: std::collections::BTreeSet<&str> = body.match_indices("return \"").map(|(i, m)| body[i + m.len()..].split('"').next().unwrap()).collect();
    for c in summary["category_counts"].as_object().unwrap().keys() {
        assert!(peer.contains(c.as_str()), "category `{c}` is not one hipfire writes or reads ({peer:?})");
    }

    // hipfire's fit view now sees the vmem lane of our export (it was always 0).
    let row = dir.join("row.json");
    std::fs::write(&row, r#"{"schema": "hipfire.kernel_atlas.v0", "arch": "gfx1201", "workload": "w", "phase": "decode_ar", "metrics": {}}"#).unwrap();
    let view = ok(&python(dir, &[s(&peer_script()), "render-fit", "--row", s(&row), "--isa", "h.json"], None));
    let lane = view.lines().find(|l| l.starts_with("vmem ")).unwrap_or_else(|| panic!("{view}"));
    assert!(lane.trim_end().ends_with(&format!(" {vmem}")), "{lane}\n{view}");

    // And katlas reads the hipfire export back.
    let v = json(&katlas(dir, &["fit", "--isa", "h.json", "--arch", "gfx1201", "--format", "json"]));
    assert_eq!(v["scope"]["kind"], "isa-only", "{}", v["scope"]);
    assert_eq!(v["kernels"].as_array().unwrap().len(), 4);
    let names: Vec<&str> = v["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"saxpy"), "{names:?}");
}

// --- provenance on the real tree ------------------------------------------------------------

/// kernels/, crates/ and scripts/ of the tree in a temp project whose katlas.toml is the preset
/// alone: the roots are the preset's.
fn preset_only_project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    hipfire_tree::copy_sources(d.path());
    std::fs::write(d.path().join("katlas.toml"), "[project]\npreset = \"hipfire\"\n").unwrap();
    d
}

/// The peer's first source file for each name on `arch`: `collect_dispatch_manifest`, the
/// function its `collect-ar`/`collect-dflash` call for the profiled names.
fn peer_first_sources(dir: &Path, names: &[&str], arch: &str) -> Vec<Option<String>> {
    let code = format!(
        "import json, sys\nsys.path.insert(0, 'scripts')\nimport kernel_atlas as k\n\
         m = k.collect_dispatch_manifest(root='.', kernel_names={names:?}, arch={arch:?})\n\
         print(json.dumps([(e['source_files'][0]['path'] if e['source_files'] else None) for e in m['entries']]))\n"
    );
    serde_json::from_str(&ok(&python(dir, &["-c", &code], None))).unwrap()
}

/// katlas's answer for each name on `arch`.
fn katlas_provenance(dir: &Path, names: &[&str], arch: &str) -> Vec<Value> {
    let mut args = vec!["provenance", "--arch", arch, "--format", "json"];
    args.extend(names);
    json(&katlas(dir, &args)).as_array().unwrap().clone()
}

/// Where the truth is a file: katlas names it first on every name; the peer on `peer_right`.
fn score(dir: &Path, arch: &str, truth: &[(&str, String)]) -> (usize, usize, Vec<Value>) {
    let names: Vec<&str> = truth.iter().map(|t| t.0).collect();
    let ours = katlas_provenance(dir, &names, arch);
    let peer = peer_first_sources(dir, &names, arch);
    let mut peer_right = 0;
    for ((name, want), (k, p)) in truth.iter().zip(ours.iter().zip(&peer)) {
        assert_eq!(k["sources"][0]["path"].as_str(), Some(want.as_str()), "katlas, {name} on {arch}: {}", k["sources"]);
        peer_right += usize::from(p.as_deref() == Some(want.as_str()));
    }
    (truth.len(), peer_right, ours)
}

/// What hipfire's runtime takes, read from its source: with the preset alone katlas names it on
/// every name asked; the peer misses the default arm (gfx1201 is given the chip file nothing
/// embeds), the arms listing gfx1151, and labels that are not kernel names.
#[test]
fn provenance_follows_the_runtime_where_the_peer_guesses_by_file_name() {
    let d = preset_only_project();
    let dir = d.path();

    // The preset's roots: gemv_hfq4g256 on gfx1201 is the default arm's base file, cited by its
    // ensure_kernel load under crates/; the peer ranks the `.gfx1201.hip` stem first.
    let on_1201 = hipfire_tree::for_arch_files("gfx1201");
    let base = on_1201["gemv_hfq4g256"].0.clone();
    assert_eq!(base, "kernels/src/gemv_hfq4g256.hip");
    let (n, peer_right, ours) = score(dir, "gfx1201", &[("gemv_hfq4g256", base)]);
    assert_eq!((n, peer_right), (1, 0), "the peer takes gemv_hfq4g256.gfx1201.hip");
    assert!(ours[0]["dispatch"].as_array().unwrap().iter().any(|r| r["via"] == "ensure_kernel"), "{}", ours[0]["dispatch"]);
    let all = json(&katlas(dir, &["provenance", "--all-profiled", "--arch", "gfx1201", "--format", "json"]));
    assert_eq!(all.as_array().unwrap().len(), 158);

    // The arms' chip lists: on gfx1151 the arms of five MQ3-Lloyd kernels list gfx1151.
    let on_1151 = hipfire_tree::for_arch_files("gfx1151");
    let five: Vec<(&str, String)> =
        ["gemv_mq3g256_lloyd", "gemv_mq3g256_lloyd_residual", "fused_gate_up_mq3g256_lloyd", "fused_qkv_mq3g256_lloyd", "fused_qkvza_mq3g256_lloyd"]
            .iter()
            .map(|k| (*k, on_1151[*k].0.clone()))
            .collect();
    assert!(five.iter().all(|(k, f)| *f == format!("kernels/src/{k}.gfx1100.hip")), "{five:?}");
    let (n, peer_right, _) = score(dir, "gfx1151", &five);
    assert_eq!((n, peer_right), (5, 0), "the peer ranks the base file (exact stem) above the gfx1100 file");

    // Profiler labels: the kernel the timed code loads.
    let labels = hipfire_tree::labels_without_kernel();
    let truth: Vec<(&str, String)> = labels
        .iter()
        .filter_map(|(label, sites)| {
            let name = sites.iter().flat_map(|s| s.loaded.iter()).find(|n| !n.ends_with("_gfx12"))?;
            let file = format!("kernels/src/{name}.hip");
            hipfire_tree::tree().join(&file).is_file().then_some((label.as_str(), file))
        })
        .collect();
    assert!(truth.iter().any(|t| t.0 == "embedding_lookup_hfq4g256" && t.1 == "kernels/src/embedding_hfq4g256.hip"), "{truth:?}");
    assert!(truth.len() >= 15, "{truth:?}");
    let (n, peer_right, ours) = score(dir, "gfx1100", &truth);
    assert!(peer_right < n / 2, "the peer is right on {peer_right} of {n} labels");
    for k in &ours {
        assert!(!k["launches"].as_array().unwrap().is_empty(), "{k}");
    }
    eprintln!("labels: katlas {n}/{n}, peer {peer_right}/{n}");
}

// --- katlas's hipfire-ar rows through hipfire's own Atlas ---------------------------------------

/// A stand-in for `bench_qwen35_mq4` in `dir`: writes `err` to stderr, then exits `status`.
fn stand_in_bench(dir: &Path, err: &str, status: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(dir.join("bench.stderr"), err).unwrap();
    let p = dir.join("bench_qwen35_mq4");
    std::fs::write(&p, format!("#!/bin/sh\ncat '{}' >&2\nexit {status}\n", dir.join("bench.stderr").display())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `katlas collect hipfire-ar --profile` with `bench` (one run), exported as v0: the rows.
fn katlas_ar_export(dir: &Path, bench: &Path, model: &Path) -> Vec<Value> {
    let o = katlas(
        dir,
        &[
            "collect",
            "hipfire-ar",
            "--profile",
            "--runs",
            "1",
            "--set",
            &format!("binary={}", s(bench)),
            "--set",
            &format!("model={}", s(model)),
            "--output",
            "rows.jsonl",
        ],
    );
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&o.stderr));
    ok(&katlas(dir, &["corpus", "export", "--file", "rows.jsonl", "--format", "hipfire-v0", "--output", "export.jsonl"]));
    lines(&std::fs::read_to_string(dir.join("export.jsonl")).unwrap())
}

/// hipfire's own `collect-ar` of `bench` (profiled both phases, graph on, as the katlas preset
/// runs it): its rows. `arch` is what a hipfire user passes on a host without a GPU.
fn peer_collect_ar(dir: &Path, bench: &Path, model: &Path, arch: &str) -> Vec<Value> {
    let out = dir.join("peer_rows.jsonl");
    let _ = std::fs::remove_file(&out);
    let script = peer_script();
    let args = [
        s(&script),
        "collect-ar",
        "--bench",
        s(bench),
        "--model",
        s(model),
        "--prefill",
        "128",
        "--gen",
        "50",
        "--graph",
        "--profile-prefill",
        "--profile-decode",
        "--arch",
        arch,
        "--output",
        s(&out),
    ];
    ok(&python(dir, &args, None));
    lines(&std::fs::read_to_string(&out).unwrap())
}

/// hipfire's `SUBCOMMAND --row FILE --row-index I --isa ISA` on one row.
fn peer_on_row(dir: &Path, sub: &str, row: &Value, isa: &Path, tag: &str) -> String {
    let f = dir.join(format!("row-{tag}.jsonl"));
    std::fs::write(&f, format!("{row}\n")).unwrap();
    ok(&python(dir, &[s(&peer_script()), sub, "--row", s(&f), "--row-index", "0", "--isa", s(isa)], None))
}

/// hipfire's ISA export of the committed gfx1201 object (the native decoder; no ROCm).
fn exported_isa(dir: &Path) -> PathBuf {
    let hsaco = repo().join("crates/katlas-isa/tests/fixtures/kernels.gfx1201.hsaco");
    ok(&katlas(dir, &["isa", "scan", s(&hsaco), "--no-cache", "--export", "hipfire-v0", "-o", "h.json"]));
    dir.join("h.json")
}

/// What hipfire's suggest decides from a row: the metric, the target it reads, its fit read and
/// every suggestion's title, lever, score and risk.
fn decisions(v: &Value) -> Value {
    let picks: Vec<Value> =
        v["suggestions"].as_array().unwrap().iter().map(|x| serde_json::json!([x["title"], x["lever_type"], x["score"], x["risk"]])).collect();
    serde_json::json!({
        "metric": v["metric"],
        "target": {"arch": v["target"]["arch"], "phase": v["target"]["phase"], "quant": v["target"]["quant"]},
        "fit_read": v["fit_read"],
        "suggestions": picks,
    })
}

/// The bench's real stderr, collected by katlas on a host with no GPU and exported as v0, reads
/// in hipfire's Atlas as hipfire's own `collect-ar` rows of the same run do: the same phases
/// (`decode_ar`), quant, arch (the bench's `GPU:` line; hipfire itself needs `--arch`), metric
/// per phase (`prefill_tok_s` for prefill), fit read, suggestions and fit view.
#[test]
fn collected_rows_read_in_hipfires_atlas_as_its_own() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let model = dir.join("qwen3.5-9b.mq4");
    std::fs::write(&model, b"not a model").unwrap();
    let text = hipfire_streams::bench_qwen35_mq4(s(&model), true).err;
    assert!(text.contains("\nGPU: gfx1100\n"));
    let bench = stand_in_bench(dir, &text, 0);
    let ours = katlas_ar_export(dir, &bench, &model);
    let peer = peer_collect_ar(dir, &bench, &model, "gfx1100");
    let isa = exported_isa(dir);
    assert_eq!((ours.len(), peer.len()), (2, 2));
    let phases: Vec<&str> = ours.iter().map(|r| r["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["prefill", "decode_ar"], "hipfire's phase names");
    for (a, b) in ours.iter().zip(&peer) {
        assert_eq!(a["phase"], b["phase"]);
        assert_eq!(a["quant"], "mq4");
        assert_eq!(a["quant"], b["quant"]);
        assert_eq!(a["arch"], "gfx1100", "the bench's GPU: line");
        let _: AtlasRow = serde_json::from_value(a.clone()).expect("hipfire-atlas reads it");
    }
    // The prefill row's run also printed the decode rate; hipfire's rules never see it there.
    assert!(ours[0]["metrics"].get("gen_tok_s").is_none() && ours[0]["katlas_other_phase_metrics"]["gen_tok_s"].is_number(), "{}", ours[0]);
    for (i, (a, b)) in ours.iter().zip(&peer).enumerate() {
        let tag = a["phase"].as_str().unwrap();
        let (sa, sb): (Value, Value) = (
            serde_json::from_str(&peer_on_row(dir, "suggest", a, &isa, &format!("k{i}"))).unwrap(),
            serde_json::from_str(&peer_on_row(dir, "suggest", b, &isa, &format!("p{i}"))).unwrap(),
        );
        assert_eq!(decisions(&sa), decisions(&sb), "{tag}: hipfire's suggest on katlas's row vs on its own");
        assert_eq!(sa["metric"], if i == 0 { "prefill_tok_s" } else { "gen_tok_s" });
        let (va, vb) = (peer_on_row(dir, "render-fit", a, &isa, &format!("k{i}")), peer_on_row(dir, "render-fit", b, &isa, &format!("p{i}")));
        let (la, lb): (Vec<&str>, Vec<&str>) = (va.lines().collect(), vb.lines().collect());
        assert_eq!(la.len(), lb.len(), "{va}\n---\n{vb}");
        for (x, y) in la.iter().zip(&lb) {
            if x.contains(" | ") {
                // `arch | workload | quant | phase | shape`: the workload and shape are named by
                // each collector; arch, quant and phase are what the rules read.
                let (fx, fy): (Vec<&str>, Vec<&str>) = (x.split(" | ").collect(), y.split(" | ").collect());
                assert_eq!((fx[0], fx[2], fx[3]), (fy[0], fy[2], fy[3]), "{x}\n{y}");
            } else {
                same_text(x, y, &format!("render-fit {tag}"));
            }
        }
        if i == 1 {
            assert!(va.contains("likely limit      memory/launch, not matrix throughput"), "{va}");
        }
    }
}

/// The ISA export's categories are hipfire's own `isa_category` of each opcode: the script run
/// on the exported opcode counts gives back the exported category counts, and its fit view's
/// salu/control lane counts them all (katlas's `other`, s_code_end padding among it, included).
#[test]
fn isa_export_categories_are_hipfires_isa_category_of_each_opcode() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let isa = exported_isa(dir);
    let h: Value = serde_json::from_str(&std::fs::read_to_string(&isa).unwrap()).unwrap();
    let code = format!(
        "import json, collections, importlib.util\n\
         spec = importlib.util.spec_from_file_location('kernel_atlas', {script:?})\n\
         ka = importlib.util.module_from_spec(spec); spec.loader.exec_module(ka)\n\
         h = json.load(open({isa:?}))\n\
         out = []\n\
         for o in h['objects']:\n    c = collections.Counter()\n    for op, n in o['instruction_summary']['opcode_counts'].items():\n        c[ka.isa_category(op)] += n\n    out.append(dict(c))\n\
         print(json.dumps(out))\n",
        script = s(&peer_script()),
        isa = s(&isa),
    );
    let peer: Vec<Value> = serde_json::from_str(&ok(&python(dir, &["-c", &code], None))).unwrap();
    let objects = h["objects"].as_array().unwrap();
    assert_eq!(objects.len(), peer.len());
    let mut salu_control = 0;
    for (o, p) in objects.iter().zip(&peer) {
        let ours = &o["instruction_summary"]["category_counts"];
        assert_eq!(ours, p, "{}", o["path"]);
        let katlas_other = o["instruction_summary"]["katlas_category_counts"]["other"].as_u64().unwrap_or(0);
        assert!(katlas_other == 0 || ours.get("other").is_none(), "katlas's `other` opcodes are hipfire's salu here: {ours}");
        salu_control += ["salu", "branch", "wait", "smem"].iter().map(|c| ours[*c].as_u64().unwrap_or(0)).sum::<u64>();
    }
    let row = dir.join("row.json");
    std::fs::write(&row, r#"{"schema": "hipfire.kernel_atlas.v0", "arch": "gfx1201", "workload": "w", "phase": "decode_ar", "metrics": {}}"#).unwrap();
    let view = ok(&python(dir, &[s(&peer_script()), "render-fit", "--row", s(&row), "--isa", s(&isa)], None));
    let lane = view.lines().find(|l| l.starts_with("salu/control ")).unwrap_or_else(|| panic!("{view}"));
    assert!(lane.trim_end().ends_with(&format!(" {salu_control}")), "{lane}\n{view}");
}

/// A bench that panics in its gen phase (the argmax-on-NaN panic the bench's own comment names)
/// has printed PREFILL_SUMMARY: katlas keeps those numbers on the prefill error row, exported
/// with `status: error`; hipfire's own collector writes one error row with no metric.
#[test]
fn a_gen_panic_keeps_the_prefill_numbers_hipfire_drops() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let model = dir.join("qwen3.5-9b.mq4");
    std::fs::write(&model, b"not a model").unwrap();
    let text = hipfire_streams::bench_qwen35_mq4_gen_panic(s(&model), true).err;
    let bench = stand_in_bench(dir, &text, hipfire_streams::PANIC_EXIT);
    let ours = katlas_ar_export(dir, &bench, &model);
    let peer = peer_collect_ar(dir, &bench, &model, "gfx1100");
    assert_eq!(peer.len(), 1, "hipfire: one base row for a failed run");
    assert_eq!((peer[0]["status"].as_str(), peer[0].get("metrics")), (Some("error"), None), "{}", peer[0]);
    let pre = ours.iter().find(|r| r["phase"] == "prefill").unwrap();
    assert_eq!(pre["status"], "error");
    let line = text.lines().find(|l| l.starts_with("PREFILL_SUMMARY")).unwrap();
    let mut n = 0;
    for (k, v) in line.split_whitespace().skip(1).map(|t| t.split_once('=').unwrap()) {
        assert_eq!(pre["metrics"][k].as_f64(), Some(v.parse::<f64>().unwrap()), "{k}: {}", pre["metrics"]);
        n += 1;
    }
    assert_eq!(n, 6);
    assert!(pre["stderr_tail"].as_str().unwrap().contains("panicked at"), "{pre}");
    let dec = ours.iter().find(|r| r["phase"] == "decode_ar").unwrap();
    assert_eq!((dec["status"].as_str(), dec["metrics"].as_object().map(|m| m.values().filter(|v| v.is_number()).count())), (Some("error"), Some(0)));
}
