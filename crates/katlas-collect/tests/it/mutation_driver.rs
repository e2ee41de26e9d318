//! The hostile-input suite's mutation driver for every output and profiler parser
//! (issue 15): 10,000 mutated inputs per parser, made from real samples (hipfire outputs,
//! rocprofv3 CSVs, an ncu CSV, a torch trace slice, a Proton tree and trace slice, rows), each under a time bound
//! (no input may take 5 s) and the whole run under a memory bound (peak RSS < 1 GiB).
//! Any panic, hang or breach fails the test naming the parser, the input's number and seed,
//! and leaves the input in `target/mutation-failures/` to reproduce. A new parser in the
//! registry (`katlas_collect::parse::PARSERS`) is driven without editing this file.

use katlas_collect::parse::{parse_with, Input, ParserOptions, PARSERS};
use katlas_testkit::mutate::{assert_peak_rss, drive_all, Job};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    katlas_testkit::repo_root().join("fixtures")
}

/// Real samples for each parser, cut to a few KiB so 10,000 mutations stay quick.
fn seeds(parser: &str) -> Vec<Vec<u8>> {
    let read = |rel: &str| std::fs::read(fixtures().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let cut = |mut v: Vec<u8>, n: usize| {
        v.truncate(n);
        v
    };
    let torch = {
        use std::io::Read;
        let f = std::fs::File::open(fixtures().join("h200/torch_llama_decode_trace.json.gz")).unwrap();
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(f).take(6_000).read_to_end(&mut s).unwrap();
        // A valid document: the first events of the real trace, closed.
        let text = String::from_utf8_lossy(&s);
        let last = text.rfind("}, {").or_else(|| text.rfind("},{")).unwrap_or(text.len());
        format!("{}}}]}}", &text[..last]).into_bytes()
    };
    let mut all = vec![
        read("hipfire/bench_ar_profile.txt"),
        read("hipfire/dflash_demo.txt"),
        read("rocprofv3/kernel_trace.csv"),
        read("rocprofv3/counter_collection.csv"),
        cut(read("h200/ncu_llama_raw.csv"), 8_000),
        cut(read("hipfire/atlas_rows_v0.jsonl"), 4_000),
        torch,
    ];
    // Only Proton's own list grows: the other parsers keep the inputs they always had.
    if parser == "proton" {
        all.push(read("proton-h200/fla-decode.hatchet"));
        // Its trace output (`data="trace"`): the first events of the real file, closed.
        use std::io::Read;
        let f = std::fs::File::open(fixtures().join("proton-h200/fla-decode-trace.chrome_trace.gz")).unwrap();
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(f).take(4_000).read_to_end(&mut s).unwrap();
        let text = String::from_utf8_lossy(&s);
        let last = text.rfind("},{\"args\"").unwrap_or(text.len());
        all.push(format!("{}}}]}}\n", &text[..last]).into_bytes());
    }
    // The parser's own format first, so most mutations reach deep into it.
    let own = match parser {
        "hipfire-bench" => 0,
        "hipfire-dflash" => 1,
        "rocprofv3-kernel-trace" | "rocprof-v1" | "rocprofv3" => 2,
        "rocprofv3-counters" => 3,
        "ncu-csv" => 4,
        "json-lines" | "katlas-rows" | "kv" => 5,
        "torch-trace" => 6,
        "proton" => 7,
        _ => 0,
    };
    all.swap(0, own);
    all
}

#[test]
#[ignore = "heavy: 10,000 mutated inputs per parser; scripts/test-all runs it (cargo test -- --ignored)"]
fn every_parser_survives_10000_hostile_inputs() {
    // Alone in its process: the peak RSS is the whole process's.
    if !katlas_testkit::own_process!(every_parser_survives_10000_hostile_inputs) {
        return;
    }
    let jobs = PARSERS
        .iter()
        .map(|(name, _, _)| {
            let parser = name.to_string();
            Job {
                name: name.to_string(),
                saved_as: name.to_string(),
                seeds: seeds(name),
                read: Box::new(move |input| {
                    let mut cur = std::io::Cursor::new(input);
                    let _ = parse_with(&parser, Input::Reader { reader: &mut cur, source: "mutated" }, &ParserOptions::default());
                }),
            }
        })
        .collect();
    assert_peak_rss(&drive_all(jobs));
}
