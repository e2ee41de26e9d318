//! Team-store benchmark (benches/store.sh runs it against a cluster it starts; results in
//! docs/PERF.md, "Team store").
//!
//! Writes HOSTS projects of ROWS/HOSTS rows each (the real H200 rows of lab/results/, each
//! copied with a new id and its project's host name), then times:
//! - the peer: `index::rebuild` of every project (the same parsing and extraction into the
//!   local SQLite index, no server);
//! - `team::push` of one project alone, then of all the others at once (one thread and
//!   connection each), then a re-push that finds everything present;
//! - `team::pull` of everything into an empty project;
//! - the `kernel_stats` view on the store against the pulled project's local index.
//!
//! Usage: cargo run --release -p katlas-store --example bench_team -- URL ROWS HOSTS DIR

use katlas_corpus::Layout;
use katlas_store::{index, query, team};
use std::time::Instant;

const H200_ROWS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../lab/results/h200-2026-11-30-loop/corpus.jsonl");

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let url = a.get(1).expect("URL").clone();
    let rows: usize = a.get(2).and_then(|x| x.parse().ok()).unwrap_or(16_000);
    let hosts: usize = a.get(3).and_then(|x| x.parse().ok()).unwrap_or(16);
    let dir = std::path::PathBuf::from(a.get(4).expect("DIR"));
    let _ = std::fs::remove_dir_all(&dir);
    let real: Vec<serde_json::Value> = std::fs::read_to_string(H200_ROWS).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let per = rows / hosts;
    let mut layouts = Vec::new();
    let mut bytes = 0usize;
    for h in 0..hosts {
        let host = format!("box-{h:02}");
        let l = Layout::for_project(&dir.join(&host));
        std::fs::create_dir_all(l.corpus_dir()).unwrap();
        let mut out = String::new();
        for i in 0..per {
            let mut v = real[i % real.len()].clone();
            v["id"] = format!("{host}-{i:07}-{}", v["id"].as_str().unwrap()).into();
            v["identity"]["host"]["hostname"] = host.clone().into();
            out.push_str(&serde_json::to_string(&v).unwrap());
            out.push('\n');
        }
        bytes += out.len();
        std::fs::write(l.corpus_file(&host, "2026-11-30"), out).unwrap();
        layouts.push(l);
    }
    println!("{} rows in {hosts} projects, {:.1} MB", per * hosts, bytes as f64 / 1e6);
    let t = Instant::now();
    for l in &layouts {
        index::rebuild(l).unwrap();
    }
    let peer = t.elapsed().as_secs_f64();
    println!("peer: index rebuild of every project: {peer:.3} s = {:.0} rows/s", (per * hosts) as f64 / peer);

    let push = |l: &Layout| {
        let mut s = team::Store::connect(&url).unwrap();
        team::push(&mut s, l, Some("bench"), &mut |_| {}).unwrap()
    };
    let t = Instant::now();
    let s = push(&layouts[0]);
    let one = t.elapsed().as_secs_f64();
    println!("push, 1 host alone: {} new in {one:.3} s = {:.0} rows/s", s.new, s.new as f64 / one);
    let t = Instant::now();
    let news: u64 =
        std::thread::scope(|sc| layouts[1..].iter().map(|l| sc.spawn(move || push(l).new)).collect::<Vec<_>>().into_iter().map(|j| j.join().unwrap()).sum());
    let all = t.elapsed().as_secs_f64();
    println!("push, {} hosts at once: {news} new in {all:.3} s = {:.0} rows/s", hosts - 1, news as f64 / all);
    let t = Instant::now();
    let s = push(&layouts[0]);
    let again = t.elapsed().as_secs_f64();
    println!("re-push, 1 host: {} new, {} present in {again:.3} s = {:.0} rows/s", s.new, s.present, s.present as f64 / again);

    let empty = Layout::for_project(&dir.join("pulled"));
    std::fs::create_dir_all(&empty.root).unwrap();
    let t = Instant::now();
    let mut st = team::Store::connect(&url).unwrap();
    let p = team::pull(&mut st, &empty, &mut |_| {}).unwrap();
    let pull = t.elapsed().as_secs_f64();
    println!("pull into an empty project: {} written in {pull:.3} s = {:.0} rows/s", p.written, p.written as f64 / pull);

    let sql = "SELECT name, workload, phase, arch, samples, calls, total_us FROM kernel_stats ORDER BY name, workload, phase, arch";
    let (conn, _) = index::open(&empty).unwrap();
    let ms = |f: &mut dyn FnMut() -> usize| {
        let mut v: Vec<f64> = (0..5)
            .map(|_| {
                let t = Instant::now();
                assert!(f() > 0);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        v.sort_by(f64::total_cmp);
        v[2]
    };
    let local = ms(&mut || query::sqlite(&conn, sql).unwrap().rows.len());
    let remote = ms(&mut || team::query(&mut st, sql).unwrap().rows.len());
    println!("kernel_stats, median of 5: local index {local:.2} ms, store {remote:.2} ms");
}
