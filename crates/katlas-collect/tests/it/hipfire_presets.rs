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
use std::path::{Path, PathBuf};
use std::time::Duration;

use hipfire_streams::*;
use katlas_testkit::hipfire_streams;

fn rows(p: &Path) -> Vec<Row> {
    let r = katlas_corpus::read_jsonl::<Row>(p, Some("katlas.row.v1")).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    r.records.into_iter().map(|l| l.record).collect()
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
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{d}/argv'\nif [ \"$HIPFIRE_PROFILE\" = 1 ]; then m=profiled; else m=plain; fi\ncat '{d}'/$m.stderr >&2\ncat '{d}'/$m.stdout\nexit $(cat '{d}/status' 2>/dev/null || echo 0)\n",
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

    /// The exit status the stand-in ends with (a panic: 101).
    fn exit_with(&self, status: i32) {
        std::fs::write(self.dir.path().join("status"), status.to_string()).unwrap();
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

/// The bench panics in its graph-captured warmup after PREFILL_SUMMARY (the case the bench's
/// own comment gives for printing it early): the prefill row is an error row that keeps the
/// prefill numbers; the decode row is an error row with none. The bench's `GPU:` line gives
/// both rows their arch on a host whose probe finds no GPU.
#[test]
fn a_panic_in_the_gen_phase_keeps_the_prefill_summary_on_the_error_row() {
    let s = StandIn::new();
    let model = s.path("model.hfq");
    let (plain, profiled) = (bench_qwen35_mq4_gen_panic(&model, false), bench_qwen35_mq4_gen_panic(&model, true));
    assert!(profiled.err.contains("PREFILL_SUMMARY") && !profiled.err.contains("\nSUMMARY") && profiled.err.contains("panicked at"));
    s.replay(&plain, &profiled);
    s.exit_with(PANIC_EXIT);
    for profile in [false, true] {
        let (rep, rows) = s.collect("hipfire-ar", &[("model", &model)], profile);
        assert_eq!((rep.rows_ok, rep.rows_error), (0, 2));
        let by = |p: &str| rows.iter().find(|r| r.phase == p).unwrap_or_else(|| panic!("no {p} row"));
        let (pre, dec) = (by("prefill"), by("decode"));
        for r in [pre, dec] {
            assert_eq!(r.status, Status::Error);
            let e = r.error.as_ref().unwrap();
            assert_eq!(e.exit_code, Some(PANIC_EXIT));
            assert!(e.stderr_tail.as_deref().unwrap_or("").contains("panicked at crates/hipfire-runtime/src/llama.rs:4325:51"), "{e:?}");
            assert_eq!(r.arch.as_deref(), Some("gfx1100"), "the bench's GPU: line");
        }
        let text = if profile { &profiled.err } else { &plain.err };
        let prefill_summary = summary_pairs(text, "PREFILL_SUMMARY");
        assert_eq!(prefill_summary.len(), if profile { 6 } else { 2 });
        for (k, v) in &prefill_summary {
            assert_eq!(pre.metric(k), Some(*v), "prefill error row: PREFILL_SUMMARY {k}");
        }
        assert!(dec.metrics.is_empty(), "{:?}", dec.metrics);
        assert!(!pre.metrics.contains_key("gen_tok_s") && !pre.metrics.contains_key("graph_blob_count"), "no whole-run number from a run that died");
    }
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
