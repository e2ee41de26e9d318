//! 8 writer processes × 2,000 appends must leave exactly 16,000 valid rows.
//!
//! The test re-executes its own binary as the writer processes (selected by
//! an environment variable), so each writer is a real separate process
//! contending on the same file through the library's append path.

use katlas_corpus::{append_jsonl, read_jsonl, Fsync};
use katlas_model::{KernelSample, Metric, Row, ROW_SCHEMA};
use std::process::Command;

const WRITERS: usize = 8;
const APPENDS: usize = 2_000;

fn writer(path: &str, id: usize) {
    for i in 0..APPENDS {
        let mut row = Row::new(format!("writer-{id}"), "decode");
        row.run_index = i as u32;
        row.metrics.insert("gen_tok_s".into(), Metric::from_key("gen_tok_s", i as f64));
        // A long kernel name makes each line several KB, well past PIPE_BUF,
        // so interleaving would show if the lock did not hold.
        row.kernels.push(KernelSample { name: format!("k{id}_{}", "x".repeat(4096)), calls: i as u64, ..Default::default() });
        append_jsonl(std::path::Path::new(path), &[row], Fsync::Never).expect("append");
    }
}

#[test]
fn eight_writers_two_thousand_appends_each() {
    if let (Ok(path), Ok(id)) = (std::env::var("KATLAS_TEST_WRITER_PATH"), std::env::var("KATLAS_TEST_WRITER_ID")) {
        writer(&path, id.parse().unwrap());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corpus.jsonl");
    let exe = std::env::current_exe().unwrap();
    let name = katlas_testkit::process::test_name(module_path!(), "eight_writers_two_thousand_appends_each");
    let children: Vec<_> = (0..WRITERS)
        .map(|id| {
            Command::new(&exe)
                .args(["--exact", &name, "--nocapture", "--test-threads=1"])
                .env("KATLAS_TEST_WRITER_PATH", &path)
                .env("KATLAS_TEST_WRITER_ID", id.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("spawn writer")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a writer process failed");
    }
    let report = read_jsonl::<Row>(&path, Some(ROW_SCHEMA)).unwrap();
    assert!(report.errors.is_empty(), "bad lines: {:?}", &report.errors[..report.errors.len().min(3)]);
    assert_eq!(report.records.len(), WRITERS * APPENDS);
    for id in 0..WRITERS {
        let mine: Vec<u32> = report.records.iter().filter(|r| r.record.workload == format!("writer-{id}")).map(|r| r.record.run_index).collect();
        assert_eq!(mine.len(), APPENDS, "writer {id} lost rows");
        // One writer's appends land in its own order.
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "writer {id} rows out of order");
    }
}
