//! The hipfire presets (`hipfire-ar`, `hipfire-dflash`) end to end through `collect`, against
//! stand-ins for hipfire's programs that print what the real ones print, to the streams the real
//! ones use.
//!
//! The text is produced here by the `eprintln!`/`println!` calls of
//! `fixtures/hipfire-tree/crates/hipfire-runtime/examples/bench_qwen35_mq4.rs` and
//! `dflash_spec_demo.rs`, copied with their format strings unchanged (a local `eprintln!` macro
//! collects what the program writes to stderr, `println!` what it writes to stdout); only the
//! measured numbers are made up. The stand-in is a shell script that replays that text to the
//! same streams, choosing the profiled or plain variant by `HIPFIRE_PROFILE` as the programs do.
//! Expected values are read back from the generated text with plain string splitting, not with
//! the parsers.

use katlas_collect::collect::{collect, CollectOptions};
use katlas_model::{Row, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn rows(p: &Path) -> Vec<Row> {
    let r = katlas_corpus::read_jsonl::<Row>(p, Some("katlas.row.v1")).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    r.records.into_iter().map(|l| l.record).collect()
}

/// What one program run writes: its stderr and its stdout.
#[derive(Default)]
struct Streams {
    err: String,
    out: String,
}

/// A project directory (no katlas.toml, so the preset is what `spec::load` finds) holding a
/// stand-in `bin` that replays `plain` or, under `HIPFIRE_PROFILE=1`, `profiled`, and records
/// its argv.
struct StandIn {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl StandIn {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let bin = d.join("stand-in.sh");
        // Interleaving: everything on stderr, then the generated text on stdout; the order across
        // the two streams is not what the parsers rely on.
        std::fs::write(
            &bin,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{d}/argv'\nif [ \"$HIPFIRE_PROFILE\" = 1 ]; then m=profiled; else m=plain; fi\ncat '{d}'/$m.stderr >&2\ncat '{d}'/$m.stdout\n",
                d = d.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(d.join("model.hfq"), b"not a model").unwrap();
        StandIn { dir, bin }
    }

    /// What the stand-in prints: `plain`, or `profiled` under HIPFIRE_PROFILE=1.
    fn replay(&self, plain: &Streams, profiled: &Streams) {
        for (tag, s) in [("plain", plain), ("profiled", profiled)] {
            std::fs::write(self.dir.path().join(format!("{tag}.stderr")), &s.err).unwrap();
            std::fs::write(self.dir.path().join(format!("{tag}.stdout")), &s.out).unwrap();
        }
    }

    fn path(&self, f: &str) -> String {
        self.dir.path().join(f).display().to_string()
    }

    fn argv(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("argv")).unwrap().lines().map(str::to_string).collect()
    }

    /// Collect `preset` (loaded by name, as `katlas collect NAME` does) with `binary` set to the stand-in.
    fn collect(&self, preset: &str, set: &[(&str, &str)], profile: bool) -> (katlas_collect::collect::CollectReport, Vec<Row>) {
        let project = katlas_project::Project::open(self.dir.path()).unwrap();
        let ls = katlas_collect::spec::load(&project, preset).unwrap();
        assert_eq!(ls.source, format!("preset:{preset}"));
        let mut o = CollectOptions::new(self.dir.path());
        o.skip_devices = true;
        o.kill_grace = Duration::from_millis(300);
        o.runs = Some(1);
        o.profile = profile;
        let out = self.dir.path().join("rows.jsonl");
        let _ = std::fs::remove_file(&out);
        o.output = Some(out);
        o.set.insert("binary".into(), self.bin.display().to_string());
        for (k, v) in set {
            o.set.insert(k.to_string(), v.to_string());
        }
        let rep = collect(&ls, &o).unwrap();
        let rows = rows(o.output.as_ref().unwrap());
        (rep, rows)
    }
}

/// `KEY=VALUE` pairs of the line starting with `tag` (the last one), split by hand.
fn summary_pairs(text: &str, tag: &str) -> BTreeMap<String, f64> {
    let line = text.lines().rfind(|l| l.split_whitespace().next() == Some(tag)).unwrap_or_else(|| panic!("no {tag} line"));
    line.split_whitespace().skip(1).map(|t| t.split_once('=').unwrap()).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect()
}

/// Kernel names of the table under the header line starting with `header`, split by hand:
/// the rows between the header and `TOTAL`, the name being what stands before the `Nx` column.
fn table_kernels(text: &str, header: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "no {header} table");
    lines
        .take_while(|l| !l.trim_start().starts_with("TOTAL"))
        .map(|l| {
            let toks: Vec<&str> = l.split_whitespace().collect();
            let calls = toks.iter().position(|t| t.ends_with('x') && t[..t.len() - 1].chars().all(|c| c.is_ascii_digit())).unwrap();
            toks[..calls].join(" ")
        })
        .collect()
}

fn no_warnings(r: &Row) {
    assert!(!r.artifacts.contains_key("parse_warnings"), "{}: {:?}", r.phase, r.artifacts.get("parse_warnings"));
}

// ---------------------------------------------------------------------------------------------
// bench_qwen35_mq4

/// Per-kernel profile entries as the bench aggregates them: (name, time_us, calls, bytes).
type Entries = [(&'static str, f64, usize, usize)];

const PREFILL_KERNELS: &Entries = &[
    ("gemm_qkvza_hfq4g256_wmma", 52_310.0, 24, 21_474_836_480),
    ("gemm_gate_up_hfq4g256_wmma", 41_870.0, 32, 25_769_803_776),
    ("gemm_hfq4g256_residual_wmma", 33_440.0, 64, 17_179_869_184),
    // Longer than the `{kern:45}` column: the count follows after one space.
    ("gated_delta_net_chunked_prefill_hfq4g256_gfx1100", 14_220.0, 24, 1_073_741_824),
    ("attention_flash_asym3", 11_930.0, 8, 805_306_368),
    ("fused_rmsnorm_mq_rotate", 6_310.0, 65, 872_415_232),
    ("conv1d_silu_f32", 3_160.0, 24, 201_326_592),
    ("add_inplace_f32", 1_940.0, 455, 0),
];

const DECODE_KERNELS: &Entries = &[
    ("gemv_hfq4g256_residual", 498_100.0, 3200, 301_989_888_000),
    ("fused_qkvza_hfq4g256", 301_500.0, 1600, 178_241_142_784),
    ("fused_gate_up_hfq4g256", 288_000.0, 1600, 174_019_264_512),
    ("attention_flash_asym3", 96_200.0, 1600, 5_124_390_912),
    ("gemv_hfq4g256_multirow_default_r2", 41_000.0, 50, 26_467_721_216),
    ("fused_qk_l2_norm_scale_f32", 11_900.0, 800, 157_286_400),
];

/// Everything `bench_qwen35_mq4` writes for `<model> --prefill 128 --prefill-runs 1 --warmup 5
/// --gen 50` with the preset's env (HIPFIRE_KV_MODE=asym3, HIPFIRE_GRAPH=1,
/// HIPFIRE_DPM_WARMUP_SECS=3); `profile` is HIPFIRE_PROFILE=1 and HIPFIRE_PROFILE_DECODE=1.
/// All of it is stderr: the bench has no `println!`.
fn bench_qwen35_mq4(model_path: &str, profile: bool) -> Streams {
    let mut e = String::new();
    macro_rules! eprintln {
        () => {
            e.push('\n')
        };
        ($($a:tt)*) => {
            writeln!(e, $($a)*).unwrap()
        };
    }
    let (prefill_len, prefill_runs, gen_len, warmup_len) = (128usize, 1usize, 50usize, 5usize);
    let model_bytes: u64 = 5_501_000_000;
    let kv_mode = "asym3";
    let do_profile = profile;
    let do_profile_decode = profile;

    eprintln!("=== bench_qwen35_mq4 ===");
    eprintln!("Model: {model_path}");
    eprintln!("Phases: prefill={prefill_len} prefill_runs={prefill_runs} warmup={warmup_len} gen={gen_len}");
    eprintln!("Config: dim={} layers={} heads={} kv_heads={} vocab={}", 4096, 32, 16, 4, 248320);
    eprintln!("Model size: {:.3} GiB ({} bytes)", model_bytes as f64 / (1024.0 * 1024.0 * 1024.0), model_bytes);
    eprintln!("GPU: {}", "gfx1100");
    eprintln!("Weights loaded in {:.2}s", 2.314);
    eprintln!("KV mode: {kv_mode}");
    let secs: f32 = 3.0;
    eprintln!("\n=== DPM warmup ({secs:.1}s, pre-prefill) ===");
    dpm_warmup(&mut e, secs);
    if do_profile {
        eprintln!("\n=== warm-up prefill (JIT kernels) ===");
        eprintln!("  JIT complete, profiling next pass...");
    }
    eprintln!("\n=== prefill ({prefill_len} tokens) ===");
    let prefill_ms: f64 = 185.6123;
    let mut prefill_kernel_ms: Option<f64> = None;
    if do_profile {
        let launches: usize = PREFILL_KERNELS.iter().map(|k| k.2).sum();
        eprintln!("\n=== PROFILE ({} launches, {:.1}ms wall) ===", launches, prefill_ms);
        let total_us = profile_rows(&mut e, PREFILL_KERNELS);
        prefill_kernel_ms = Some(total_us / 1000.0);
    }
    let prefill_tok_s = prefill_len as f64 / (prefill_ms / 1000.0);
    eprintln!("  total: {prefill_ms:.1}ms");
    eprintln!("  tok/s: {prefill_tok_s:.1}");
    eprintln!("  NOTE: first prefill run includes kernel JIT compile cost");
    eprintln!(
        "PREFILL_SUMMARY  prefill_tok_s={prefill_tok_s:.1}  prefill_wall_ms={prefill_ms:.2}{}",
        split_prefill_summary(prefill_len, prefill_ms, prefill_kernel_ms)
    );

    eprintln!("\n=== warmup ({warmup_len} tokens — untimed, lets JIT settle) ===");
    // qwen35::forward_scratch, first graph capture (HIPFIRE_GRAPH=1).
    eprintln!("[hipGraph] captured {} blobs, instantiated", 388);
    let warmup_ms: f64 = 160.21;
    eprintln!("  total: {warmup_ms:.1}ms  avg: {:.2}ms/tok", warmup_ms / warmup_len as f64);
    dpm_warmup(&mut e, secs);

    eprintln!("\n=== gen ({gen_len} tokens — timed) ===");
    let per_token_ms: Vec<f64> = (0..gen_len).map(|i| 27.41 + ((i * 37) % 50) as f64 * 0.019).collect();
    let gen_total_ms: f64 = per_token_ms.iter().sum::<f64>() + 0.87;
    if do_profile_decode {
        let launches: usize = DECODE_KERNELS.iter().map(|k| k.2).sum();
        eprintln!("\n=== DECODE PROFILE ({} launches, {:.1}ms wall) ===", launches, gen_total_ms);
        profile_rows(&mut e, DECODE_KERNELS);
    }
    let mut sorted = per_token_ms.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = sorted.len();
    let sum: f64 = sorted.iter().sum();
    let avg_ms = sum / n as f64;
    let min_ms = sorted[0];
    let max_ms = sorted[n - 1];
    let p50_ms = sorted[n / 2];
    let p90_ms = sorted[(n * 90) / 100];
    let p99_ms = sorted[(n.saturating_sub(1) * 99) / 100];
    let gen_tok_s = n as f64 / (gen_total_ms / 1000.0);
    let bw_gbps = (model_bytes as f64 * gen_tok_s) / (1024.0 * 1024.0 * 1024.0);
    eprintln!("  total: {gen_total_ms:.1}ms over {n} tokens");
    eprintln!("  per-token ms:");
    eprintln!("    min={min_ms:.2}  p50={p50_ms:.2}  avg={avg_ms:.2}  p90={p90_ms:.2}  p99={p99_ms:.2}  max={max_ms:.2}");
    eprintln!("  tok/s (gen): {gen_tok_s:.1}");
    eprintln!("  effective BW: {bw_gbps:.1} GiB/s (model {:.2} GiB × {gen_tok_s:.1} tok/s)", model_bytes as f64 / (1024.0 * 1024.0 * 1024.0));
    eprintln!();
    eprintln!(
        "SUMMARY  gen_tok_s={gen_tok_s:.1}  bw_gib_s={bw_gbps:.1}  prefill_tok_s={prefill_tok_s:.1}  avg_ms={avg_ms:.2}  p50_ms={p50_ms:.2}{}",
        split_prefill_summary(prefill_len, prefill_ms, prefill_kernel_ms)
    );
    Streams { err: e, out: String::new() }
}

/// rdna_compute `Gpu::dpm_warmup`'s two lines.
fn dpm_warmup(e: &mut String, secs: f32) {
    let (n, elapsed) = (412u64, 3.004f32);
    writeln!(e, "[dpm-warmup] running memset loop for {secs:.1}s to pin GPU at high DPM...").unwrap();
    writeln!(
        e,
        "[dpm-warmup] {n} memsets in {elapsed:.2}s ({:.2} ms/iter, {:.1} GiB/s effective)",
        1000.0 * elapsed / n as f32,
        (n as f64 * 256.0 * 1024.0 * 1024.0) / (1024.0 * 1024.0 * 1024.0) / elapsed as f64
    )
    .unwrap();
}

/// The bench's table body, hottest first, and its TOTAL line; returns total_us.
fn profile_rows(e: &mut String, entries: &Entries) -> f64 {
    let mut kerns: Vec<_> = entries.iter().map(|&(k, us, n, b)| (k, (us, n, b))).collect();
    kerns.sort_by(|a, b| b.1 .0.partial_cmp(&a.1 .0).unwrap());
    let total_us: f64 = kerns.iter().map(|(_, (t, _, _))| t).sum();
    for (kern, (us, n, bytes)) in &kerns {
        let gib_s = if *us > 0.0 { (*bytes as f64 / (1024.0 * 1024.0 * 1024.0)) / (*us / 1_000_000.0) } else { 0.0 };
        writeln!(e, "  {kern:45} {n:5}x  {:.1}ms  ({:.0}µs/call)  {:.1}%  {:.1} GiB/s", us / 1000.0, us / *n as f64, us / total_us * 100.0, gib_s).unwrap();
    }
    writeln!(e, "  {:45} {:5}   {:.1}ms", "TOTAL (serialized)", "", total_us / 1000.0).unwrap();
    total_us
}

fn split_prefill_summary(prefill_len: usize, prefill_ms: f64, prefill_kernel_ms: Option<f64>) -> String {
    if let Some(kernel_ms) = prefill_kernel_ms {
        let prefill_tok_s_kernel = prefill_len as f64 / (kernel_ms / 1000.0);
        let startup_overhead_ms = prefill_ms - kernel_ms;
        let cold_pct = if prefill_ms > 0.0 { (startup_overhead_ms / prefill_ms) * 100.0 } else { 0.0 };
        format!(
            "  prefill_tok_s_kernel={prefill_tok_s_kernel:.1}  prefill_kernel_ms={kernel_ms:.2}  startup_overhead_ms={startup_overhead_ms:.2}  cold_overhead_pct={cold_pct:.1}"
        )
    } else {
        String::new()
    }
}

#[test]
fn hipfire_ar_preset_reads_the_bench_stderr_both_tables_and_every_summary_key() {
    let s = StandIn::new();
    let model = s.path("model.hfq");
    let (plain, profiled) = (bench_qwen35_mq4(&model, false), bench_qwen35_mq4(&model, true));
    // The real header, as a run prints it.
    assert!(profiled.err.contains("\n=== PROFILE (696 launches, 185.6ms wall) ===\n"), "{}", profiled.err);
    s.replay(&plain, &profiled);

    let (rep, rows) = s.collect("hipfire-ar", &[("model", &model)], true);
    assert_eq!(s.argv(), [model.as_str(), "--prefill", "128", "--prefill-runs", "1", "--warmup", "5", "--gen", "50"]);
    assert_eq!((rep.rows_ok, rep.rows_error), (2, 0), "{:?}", rows.iter().map(|r| &r.error).collect::<Vec<_>>());
    let by = |p: &str| rows.iter().find(|r| r.phase == p).unwrap_or_else(|| panic!("no {p} row"));
    let (pre, dec) = (by("prefill"), by("decode"));
    for r in [pre, dec] {
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        no_warnings(r);
    }

    // Every kernel of both tables, on the row of its phase, in the printed order.
    let names = |r: &Row| r.kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
    let want_pre = table_kernels(&profiled.err, "=== PROFILE (");
    let want_dec = table_kernels(&profiled.err, "=== DECODE PROFILE (");
    assert_eq!(want_pre.len(), PREFILL_KERNELS.len());
    assert_eq!(want_dec.len(), DECODE_KERNELS.len());
    assert_eq!(names(pre), want_pre);
    assert_eq!(names(dec), want_dec);
    assert_eq!(pre.metric("kernel_launches"), Some(696.0));
    assert_eq!(pre.artifacts["profile_wall_ms"], 185.6);
    let total_line = |header: &str| -> f64 {
        let l = profiled.err.lines().skip_while(|l| !l.starts_with(header)).find(|l| l.trim_start().starts_with("TOTAL")).unwrap();
        l.split_whitespace().last().unwrap().trim_end_matches("ms").parse::<f64>().unwrap() * 1000.0
    };
    assert_eq!(pre.artifacts["reported_total_us"].as_f64(), Some(total_line("=== PROFILE (")));
    assert_eq!(dec.artifacts["reported_total_us"].as_f64(), Some(total_line("=== DECODE PROFILE (")));
    let long = pre.kernels.iter().find(|k| k.name == "gated_delta_net_chunked_prefill_hfq4g256_gfx1100").unwrap();
    assert_eq!(long.calls, 24);

    // Every SUMMARY key on both rows; every PREFILL_SUMMARY key on the prefill row.
    let summary = summary_pairs(&profiled.err, "SUMMARY");
    let prefill_summary = summary_pairs(&profiled.err, "PREFILL_SUMMARY");
    assert_eq!(summary.len(), 9, "{summary:?}");
    assert_eq!(prefill_summary.len(), 6, "{prefill_summary:?}");
    for r in [pre, dec] {
        for (k, v) in &summary {
            if r.phase == "prefill" && prefill_summary.contains_key(k) {
                continue;
            }
            assert_eq!(r.metric(k), Some(*v), "{} row: SUMMARY {k}", r.phase);
        }
    }
    for (k, v) in &prefill_summary {
        assert_eq!(pre.metric(k), Some(*v), "prefill row: PREFILL_SUMMARY {k}");
    }
    // The per-token line the bench prints after the decode table (p90/p99/min/max are nowhere else).
    let stats: BTreeMap<String, f64> = profiled
        .err
        .lines()
        .find(|l| l.trim_start().starts_with("min="))
        .unwrap()
        .split_whitespace()
        .map(|t| t.split_once('=').unwrap())
        .map(|(k, v)| (format!("{k}_ms"), v.parse().unwrap()))
        .collect();
    for (k, v) in &stats {
        assert_eq!(dec.metric(k), Some(*v), "decode row: per-token {k}");
    }
    assert_eq!(dec.metric("gen_tokens"), Some(50.0));
    assert_eq!(dec.metrics["gen_total_ms"].unit.as_deref(), Some("ms"));
    assert_eq!(pre.metric("graph_blob_count"), Some(388.0));

    // Without --profile: the same metrics, no kernels, still no warnings.
    let (rep, rows) = s.collect("hipfire-ar", &[("model", &model)], false);
    assert_eq!((rep.rows_ok, rep.rows_error), (2, 0));
    let summary = summary_pairs(&plain.err, "SUMMARY");
    for r in &rows {
        assert!(r.kernels.is_empty());
        no_warnings(r);
        assert_eq!(r.metric("gen_tok_s"), summary.get("gen_tok_s").copied());
    }
    let pre = rows.iter().find(|r| r.phase == "prefill").unwrap();
    assert_eq!(pre.metric("prefill_wall_ms"), summary_pairs(&plain.err, "PREFILL_SUMMARY").get("prefill_wall_ms").copied());
    assert_eq!(rows.iter().find(|r| r.phase == "decode").unwrap().metric("p99_ms"), stats.get("p99_ms").copied());
}

// ---------------------------------------------------------------------------------------------
// dflash_spec_demo

const DFLASH_KERNELS: &[(&str, f64, usize, usize)] = &[
    ("gemm_hfq4g256_residual_wmma", 161_200.0, 1920, 98_000_000_000),
    ("gated_delta_net_tape_q8", 58_300.0, 480, 3_900_000_000),
    ("attention_flash_q8_0", 31_700.0, 320, 2_100_000_000),
    ("dflash_draft_gemm_f16", 24_100.0, 300, 9_400_000_000),
    ("fused_rmsnorm_mq_rotate", 6_900.0, 1300, 510_000_000),
    ("argmax_f32", 480.0, 100, 1_000_000),
];

/// Everything `dflash_spec_demo --target T --draft D --prompt-file P --max 256 --ctx 2048
/// --kv-mode q8 --no-chatml` writes on its DFlash path (not `--ar-baseline`); `profile` is
/// HIPFIRE_PROFILE=1. stdout carries only the generated text.
fn dflash_spec_demo(target_path: &str, draft_path: &str, profile: bool) -> Streams {
    let mut e = String::new();
    let mut o = String::new();
    macro_rules! eprintln {
        ($($a:tt)*) => {
            writeln!(e, $($a)*).unwrap()
        };
    }
    macro_rules! println {
        ($($a:tt)*) => {
            writeln!(o, $($a)*).unwrap()
        };
    }
    let max_tokens = 256;
    let block_size = 16usize;
    eprintln!("=== dflash_spec_demo ===");
    eprintln!("target: {target_path}");
    eprintln!("draft:  {draft_path}");
    eprintln!("gpu: {}", "gfx1100");
    let vram = |e: &mut String, label: &str, used_gb: f64, free_gb: f64| writeln!(e, "VRAM @ {label}: used {used_gb:.2} GB, free {free_gb:.2} GB").unwrap();
    vram(&mut e, "init", 0.52, 25.24);
    eprintln!("draft: layers={} hidden={} heads={} kv_heads={} block={} target_layers={:?}", 5, 5120, 32, 8, block_size, [1, 16, 31, 46, 61]);
    eprintln!("kv_mode: {:?}", "Q8".to_string().as_str());
    eprintln!("target loaded in {:.2}s", 9.81);
    vram(&mut e, "after target load", 16.02, 9.74);
    eprintln!("draft loaded in {:.2}s", 1.2);
    vram(&mut e, "after draft load", 18.33, 7.43);
    eprintln!("draft: MQ4 weights detected, FWHT rotation scratch enabled");
    let prompt = "Write a merge sort in Python. Explain each step.\n";
    eprintln!("prompt: {:?}", prompt);
    let prompt_tokens: Vec<u32> = (0..118).map(|i| 1000 + i * 7).collect();
    eprintln!(
        "prompt tokens ({}): {}",
        prompt_tokens.len(),
        if prompt_tokens.len() < 64 { format!("{:?}", prompt_tokens) } else { format!("[{} tokens]", prompt_tokens.len()) }
    );
    eprintln!("seeding target_hidden from prompt ({} tokens)...", prompt_tokens.len());
    let prefill_secs: f64 = 0.0980;
    let prefill_tok_s = prompt_tokens.len() as f64 / prefill_secs.max(1e-9);
    eprintln!("prefill in {:.2}s ({:.1} tok/s)", prefill_secs, prefill_tok_s);
    vram(&mut e, "after_prefill", 18.41, 7.35);
    eprintln!("decoding (max {max_tokens} tokens, block_size {})...", block_size);
    if profile {
        let kerns: Vec<_> = DFLASH_KERNELS.iter().map(|&(k, us, n, b)| (k, (us, n, b))).collect();
        let total_us: f64 = kerns.iter().map(|(_, (t, _, _))| t).sum();
        let calls: usize = kerns.iter().map(|(_, (_, n, _))| n).sum();
        eprintln!("\n=== PROFILE ({} kernel calls over {} cycles, {:.1}ms total kernel time) ===", calls, 5, total_us / 1000.0,);
        eprintln!("  {:50} {:>6} {:>10} {:>10} {:>7} {:>10}", "kernel", "calls", "total_ms", "us/call", "%", "MB",);
        for (kern, (us, n, bytes)) in &kerns {
            if *us / total_us < 0.005 {
                continue;
            } // skip <0.5%
            eprintln!("  {kern:50} {n:>6} {:>10.2} {:>10.0} {:>6.1}% {:>10.1}", us / 1000.0, us / *n as f64, us / total_us * 100.0, *bytes as f64 / 1.0e6,);
        }
    }
    eprintln!("eos");
    // The generated text. A line of it that looks like a metric must not become one.
    let text = "def merge_sort(xs):\n    # decode_tok_s: 1.0 would be a lie here\n    if len(xs) <= 1:\n        return xs\n    mid = len(xs) // 2\n    return merge(merge_sort(xs[:mid]), merge_sort(xs[mid:]))";
    eprintln!("--- OUTPUT ---");
    println!("{text}");
    eprintln!("--------------");
    let (emitted, elapsed) = (256usize, 1.382f64);
    let tok_s = emitted as f64 / elapsed;
    eprintln!("emitted: {} tokens in {:.2}s  ({:.2} tok/s)", emitted, elapsed, tok_s);
    let (cycles, committed, accepted) = (19usize, 256usize, 237usize);
    let tau = accepted as f64 / cycles as f64;
    eprintln!("cycles: {}  committed: {}  accepted: {}  τ={:.3}  mean_committed={:.3}", cycles, committed, accepted, tau, committed as f64 / cycles as f64,);
    let accept_rate = accepted as f32 / (cycles * (block_size - 1)) as f32;
    // The demo's ttft_ms is an Option (None before the first committed token).
    let ttft_ms: Option<f64> = (emitted > 0).then_some(139.70);
    eprintln!("=== BENCH METRICS ===");
    eprintln!("prompt_tokens: {}", prompt_tokens.len());
    eprintln!("prefill_secs: {:.4}", prefill_secs);
    eprintln!("prefill_tok_s: {:.2}", prefill_tok_s);
    eprintln!("ttft_ms: {:.2}", ttft_ms.unwrap_or(0.0));
    eprintln!("decode_tokens_emitted: {}", emitted);
    eprintln!("decode_secs: {:.4}", elapsed);
    eprintln!("decode_tok_s: {:.2}", tok_s);
    eprintln!("decode_tau: {:.4}", tau);
    eprintln!("decode_accept_rate: {:.4}", accept_rate);
    eprintln!("vram_used_mb: {}", 20544);
    eprintln!("vram_total_mb: {}", 32752);
    eprintln!("=====================");
    eprintln!("accept_rate (accepted / (cycles × (B-1))): {accept_rate:.3}");
    let hist = [0u32, 1, 0, 2, 1, 3, 2, 10];
    eprintln!("histogram: {:?}", hist.iter().enumerate().collect::<Vec<_>>());
    eprintln!("DFlash tokens: {:?}", &prompt_tokens[..8]);
    Streams { err: e, out: o }
}

/// hipfire's own collector test input, verbatim: fixtures/hipfire-tree/tests/test_kernel_atlas.py,
/// `test_parse_dflash_summary_prefers_authoritative_metric_lines` (metric lines, no BENCH METRICS block).
const PEER_DFLASH_SAMPLE: &str = "
emitted: 256 tokens in 1.45s (176.55 tok/s)
decode_tok_s: 192.69
decode_tau: 13.2727
ttft_ms: 142.18
cycles: 18
accepted: 239
";

/// `key: value` lines of the BENCH METRICS block, split by hand.
fn bench_metrics(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .skip_while(|l| !l.starts_with("=== BENCH METRICS"))
        .skip(1)
        .take_while(|l| !l.starts_with("==="))
        .map(|l| l.split_once(": ").unwrap())
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

#[test]
fn hipfire_dflash_preset_reads_the_demo_stderr_with_and_without_bench_metrics() {
    let s = StandIn::new();
    let (target, draft, prompt) = (s.path("model.hfq"), s.path("draft.hfq"), s.path("prompt.txt"));
    std::fs::write(&draft, b"draft").unwrap();
    std::fs::write(&prompt, b"Write a merge sort in Python. Explain each step.\n").unwrap();
    let plain = dflash_spec_demo(&target, &draft, false);
    let profiled = dflash_spec_demo(&target, &draft, true);
    s.replay(&plain, &profiled);
    let set = [("target", target.as_str()), ("draft", draft.as_str()), ("prompt", prompt.as_str())];

    // With the BENCH METRICS block (what the demo prints), profiled.
    let (rep, rows) = s.collect("hipfire-dflash", &set, true);
    assert_eq!(s.argv(), ["--target", &target, "--draft", &draft, "--prompt-file", &prompt, "--max", "256", "--ctx", "2048", "--kv-mode", "q8", "--no-chatml"]);
    assert_eq!((rep.rows_ok, rep.rows_error), (1, 0), "{:?}", rows[0].error);
    let r = &rows[0];
    assert_eq!(r.phase, "decode_dflash");
    no_warnings(r);
    let block = bench_metrics(&profiled.err);
    assert_eq!(block.len(), 11);
    for (k, v) in &block {
        assert_eq!(r.metric(k), Some(*v), "BENCH METRICS {k}");
    }
    assert_eq!(r.metric("tau"), block.get("decode_tau").copied());
    assert_eq!((r.metric("accepted"), r.metric("committed"), r.metric("cycles")), (Some(237.0), Some(256.0), Some(19.0)));
    assert_eq!(r.metric("emitted_tokens"), Some(256.0));
    // The demo's per-kernel table (kernels under 0.5 % are left out by the demo itself).
    let names: Vec<&str> = r.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, DFLASH_KERNELS[..5].iter().map(|k| k.0).collect::<Vec<_>>());
    assert_eq!(r.metric("kernel_launches"), Some(DFLASH_KERNELS.iter().map(|k| k.2 as f64).sum()));
    assert_eq!(r.route.as_ref().unwrap().basis, "observed");
    assert_eq!(r.variant.instrumentation, ["HIPFIRE_PROFILE"]);

    // Without --profile: the same metrics, no kernels.
    let (rep, rows) = s.collect("hipfire-dflash", &set, false);
    assert_eq!((rep.rows_ok, rep.rows_error), (1, 0), "{:?}", rows[0].error);
    assert!(rows[0].kernels.is_empty());
    assert_eq!(rows[0].metric("decode_tok_s"), bench_metrics(&plain.err).get("decode_tok_s").copied());
    no_warnings(&rows[0]);

    // Without the block: hipfire's own sample, on stderr, the generated text on stdout.
    s.replay(&Streams { err: PEER_DFLASH_SAMPLE.into(), out: plain.out.clone() }, &profiled);
    let (rep, rows) = s.collect("hipfire-dflash", &set, false);
    assert_eq!((rep.rows_ok, rep.rows_error), (1, 0), "{:?}", rows[0].error);
    let r = &rows[0];
    // The names hipfire's collector gives them (decode_tok_s, tau, ttft_ms, cycles, accepted), which the preset requires.
    for (k, v) in [("decode_tok_s", 192.69), ("tau", 13.2727), ("ttft_ms", 142.18), ("cycles", 18.0), ("accepted", 239.0), ("emitted_tokens", 256.0)] {
        assert_eq!(r.metric(k), Some(v), "{k}");
    }
    no_warnings(r);
}

#[test]
fn a_parsed_phase_no_row_is_written_for_is_an_error_row() {
    // A spec that asks only for decode rows, over bench output that also has a prefill table.
    let d = tempfile::tempdir().unwrap();
    let text = "\n=== PROFILE (696 launches, 185.6ms wall) ===\n  gemm_qkvza_hfq4g256_wmma                         24x  52.3ms  (2180µs/call)  31.0%  382.3 GiB/s\n  TOTAL (serialized)                                    168.7ms\n  total: 185.6ms\nPREFILL_SUMMARY  prefill_tok_s=689.6  prefill_wall_ms=185.61\nSUMMARY  gen_tok_s=35.8  bw_gib_s=183.4  prefill_tok_s=689.6  avg_ms=27.87  p50_ms=27.88\n";
    std::fs::write(d.path().join("out.txt"), text).unwrap();
    std::fs::write(d.path().join("w.toml"), "command = 'cat out.txt >&2'\nparsers = ['hipfire-bench']\nphases = ['decode']\n").unwrap();
    let ls = katlas_collect::spec::load_file(&d.path().join("w.toml"), None).unwrap();
    let mut o = CollectOptions::new(d.path());
    o.skip_devices = true;
    o.output = Some(d.path().join("rows.jsonl"));
    let rep = collect(&ls, &o).unwrap();
    assert_eq!((rep.rows_ok, rep.rows_error), (1, 1));
    let rows = rows(o.output.as_ref().unwrap());
    let dec = rows.iter().find(|r| r.phase == "decode").unwrap();
    assert_eq!(dec.status, Status::Ok);
    assert_eq!(dec.metric("gen_tok_s"), Some(35.8), "no stream named: stderr is read too");
    let lost = rows.iter().find(|r| r.phase == "prefill").unwrap();
    assert_eq!(lost.status, Status::Error);
    let msg = lost.error.as_ref().unwrap().message.as_deref().unwrap();
    assert!(msg.contains("parsed phase `prefill` (1 kernels, 2 metrics") && msg.contains("not among the spec's phases (decode)"), "{msg}");
    let summary_msg = rep.rows.iter().find(|r| r.phase == "prefill").unwrap().message.as_deref().unwrap();
    assert_eq!(summary_msg, msg, "the collect report shows it");
}
