//! Index benchmark (benches/index.sh runs it; results in docs/PERF.md).
//!
//! Writes N rows (the real hipfire rows of fixtures/, each copied with a new id, capture time
//! and jittered numbers) into a scratch project, then times:
//! - `index::rebuild` (rows/s), against the peer: reading the same files with katlas's
//!   JSONL reader (`katlas_corpus::read_all`, what `katlas corpus ls` does);
//! - a per-kernel aggregate with a fresh index (open + staleness check + query), against the
//!   peer: the same aggregate computed by reading the JSONL files.
//!
//! Usage: cargo run --release -p katlas-store --example bench_index -- ROWS DIR [REPS [rebuild-only]]

use katlas_corpus::{append_jsonl, Fsync, Layout};
use katlas_model::Row;
use std::collections::HashMap;
use std::time::Instant;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hipfire/atlas_rows_v0.jsonl");
const AGG: &str = "SELECT name, COUNT(*) AS samples, SUM(calls) AS calls, SUM(total_us) AS total_us, AVG(share_pct) AS share FROM kernels GROUP BY name ORDER BY total_us DESC";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let dir = std::path::PathBuf::from(args.get(2).expect("DIR"));
    let reps: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(5);
    let layout = Layout::for_project(&dir);
    // KATLAS_BENCH_FIXTURE: where the rows are on a machine the binary was carried to.
    let fixture = std::env::var("KATLAS_BENCH_FIXTURE").unwrap_or_else(|_| FIXTURE.to_string());
    let base: Vec<Row> = std::fs::read_to_string(&fixture)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| katlas_model::hipfire::import_v0(serde_json::from_str(l).unwrap(), None, None).unwrap())
        .collect();
    let marker = layout.corpus_dir().join(format!(".bench-{n}"));
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(layout.corpus_dir());
        std::fs::create_dir_all(layout.corpus_dir()).unwrap();
        // One file per (host, day), 10,000 rows each, as a long-running team corpus has.
        let mut batch = Vec::with_capacity(10_000);
        for i in 0..n {
            let mut r = base[i % base.len()].clone();
            r.id = format!("{:032x}", i as u128 * 0x9e37_79b9_7f4a_7c15);
            let day = i / 10_000;
            r.captured_at = katlas_model::row::format_unix_utc(1_767_225_600 + (day * 86_400 + i % 10_000) as i64).expect("a 2026 time");
            let jitter = 1.0 + ((i * 7919) % 1000) as f64 / 50_000.0;
            for m in r.metrics.values_mut() {
                m.value *= jitter;
            }
            for k in &mut r.kernels {
                k.total_us *= jitter;
            }
            batch.push(r);
            if batch.len() == 10_000 || i + 1 == n {
                let host = format!("box-{}", day % 4);
                append_jsonl(&layout.corpus_file(&host, &format!("d{day:05}")), &batch, Fsync::Never).unwrap();
                batch.clear();
            }
        }
        std::fs::write(&marker, b"").unwrap();
    }
    let bytes: u64 = katlas_corpus::jsonl_files(&layout.corpus_dir()).unwrap().iter().map(|p| p.metadata().unwrap().len()).sum();
    println!("rows {n}, corpus {:.1} MB", bytes as f64 / 1e6);

    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut rebuild = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let s = katlas_store::index::rebuild(&layout).unwrap();
        assert_eq!(s.records, n as u64);
        rebuild.push(t.elapsed().as_secs_f64());
    }
    let rb = median(rebuild.clone());
    println!("index rebuild: median {rb:.3} s of {reps} ({:.0} rows/s); runs {rebuild:.3?}", n as f64 / rb);
    if args.get(4).is_some_and(|a| a == "rebuild-only") {
        return;
    }
    let mut peer = Vec::new();
    for _ in 0..reps.min(3) {
        let t = Instant::now();
        let rep = katlas_corpus::read_all::<Row>(&layout.corpus_dir(), Some(katlas_model::ROW_SCHEMA)).unwrap();
        assert_eq!(rep.records.len(), n);
        peer.push(t.elapsed().as_secs_f64());
    }
    let pr = median(peer);
    println!("peer, JSONL read (katlas_corpus::read_all): median {pr:.3} s ({:.0} rows/s); rebuild/read = {:.2}", n as f64 / pr, rb / pr);

    let mut q = Vec::new();
    let mut groups = 0;
    for _ in 0..reps.max(5) {
        let t = Instant::now();
        let (conn, s) = katlas_store::index::open(&layout).unwrap();
        assert!(!s.rebuilt && s.sources_read == 0);
        let r = katlas_store::query::sqlite(&conn, AGG).unwrap();
        groups = r.rows.len();
        q.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let qm = median(q.clone());
    println!("per-kernel aggregate (open + freshness check + query): median {qm:.2} ms, {groups} kernels; runs {q:.2?}");
    let mut pq = Vec::new();
    for _ in 0..reps.min(3) {
        let t = Instant::now();
        let rep = katlas_corpus::read_all::<Row>(&layout.corpus_dir(), Some(katlas_model::ROW_SCHEMA)).unwrap();
        let mut agg: HashMap<&str, (u64, f64)> = HashMap::new();
        for r in &rep.records {
            for k in &r.record.kernels {
                let e = agg.entry(k.name.as_str()).or_default();
                e.0 += k.calls;
                e.1 += k.total_us;
            }
        }
        assert_eq!(agg.len(), groups);
        pq.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let pqm = median(pq);
    println!("peer, the same aggregate from the JSONL files: median {pqm:.1} ms; index is {:.0}x faster", pqm / qm);
}
