//! `katlas store push|pull` and `katlas query --store` against a real PostgreSQL server: each
//! test starts a throwaway cluster (Debian's `postgresql` package, installed by
//! scripts/test-all) under a temp dir on a unix socket there, and stops it when done.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::cli::katlas_cmd;
use crate::support::pg::Pg;

/// Real rows captured on an H200 by `lab/scripts/h200-loop.sh` (full identity: host, GPU, binary).
const H200_ROWS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../lab/results/h200-2026-11-30-loop/corpus.jsonl");
const HIPFIRE_ROWS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hipfire/atlas_rows_v0.jsonl");
const TRITON_CACHE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h200/triton-cache");

/// `katlas ARGS` in `dir` in the test environment (no team store of the developer's): a test
/// sets `KATLAS_STORE_URL` to its own cluster.
fn katlas(dir: &Path, args: &[&str]) -> Command {
    let mut c = katlas_cmd(dir);
    c.args(args).env("KATLAS_YES", "1");
    c
}

fn ok(o: Output) -> Output {
    assert_eq!(o.status.code(), Some(0), "stdout: {}\nstderr: {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    o
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn run(dir: &Path, args: &[&str]) -> serde_json::Value {
    json(&ok(katlas(dir, args).output().unwrap()))
}

fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".katlas/corpus")).unwrap();
    d
}

/// The real H200 rows, `n` of them in turn, as one host's corpus file: ids, host and capture
/// times made this host's, every other byte of identity and measurement as captured.
fn host_rows(host: &str, product: Option<&str>, n: usize) -> String {
    let real: Vec<serde_json::Value> = std::fs::read_to_string(H200_ROWS).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut out = String::new();
    for i in 0..n {
        let mut v = real[i % real.len()].clone();
        v["id"] = format!("{host}-{i:05}-{}", v["id"].as_str().unwrap()).into();
        v["identity"]["host"]["hostname"] = host.into();
        v["captured_at"] = format!("2026-11-30T{:02}:{:02}:{:02}Z", i / 3600, (i / 60) % 60, i % 60).into();
        if let Some(p) = product {
            for d in v["identity"]["devices"].as_array_mut().unwrap() {
                d["product"] = p.into();
            }
        }
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    }
    out
}

fn count(dir: &Path, url: &str, sql: &str) -> i64 {
    run(dir, &["query", "--url", url, sql, "--format", "json"])["rows"][0]["n"].as_i64().unwrap()
}

/// The record files under `.katlas/` (what the index and the store read), by path relative to it.
fn record_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    record_files_at(dir, true)
}

/// [`record_files`]; with `as_pushed` false, pulled files under `pulled/HOST/` are left out.
fn record_files_at(dir: &Path, as_pushed: bool) -> std::collections::BTreeMap<String, Vec<u8>> {
    let root = dir.join(".katlas");
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
                // Another host's ledger and evals, as a pull keeps them: by the path they were pushed from.
                let rel = match rel.strip_prefix("pulled/") {
                    Some(r) if as_pushed => r.split_once('/').unwrap().1.to_string(),
                    Some(_) => continue,
                    None => rel,
                };
                // Another host's rows, in a corpus file of that host's (`corpus/pulled@HOST@NAME`).
                let rel = match rel.strip_prefix("corpus/pulled@") {
                    Some(r) if as_pushed => format!("corpus/{}", r.split_once('@').unwrap().1),
                    Some(_) => continue,
                    None => rel,
                };
                let parts: Vec<&str> = rel.split('/').collect();
                let record = match parts.as_slice() {
                    ["corpus", f] => f.ends_with(".jsonl"),
                    ["ledger.jsonl"] => true,
                    ["isa", f] => f.ends_with(".json"),
                    ["evals", _, f] | ["tasks", _, "evals", _, f] => *f == "result.json" || *f == "samples.jsonl",
                    _ => false,
                };
                if record {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
    }
    out
}

#[test]
fn sixteen_concurrent_pushers_lose_nothing_duplicate_nothing_and_a_pull_reproduces_the_files() {
    let pg = Pg::start();
    let url = pg.url();
    let hosts: Vec<(String, tempfile::TempDir)> = (0..16)
        .map(|i| {
            let host = format!("box-{i:02}");
            let d = project();
            std::fs::write(d.path().join(format!(".katlas/corpus/{host}-2026-11-30.jsonl")), host_rows(&host, None, 1000)).unwrap();
            (host, d)
        })
        .collect();
    // 16 hosts at once, the first one twice: the same records race each other too.
    let push = |d: &Path| {
        katlas(d, &["store", "push", "--format", "json"]).env("KATLAS_STORE_URL", &url).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    };
    let mut children: Vec<_> = hosts.iter().map(|(_, d)| push(d.path())).collect();
    children.push(push(hosts[0].1.path()));
    let stats: Vec<serde_json::Value> = children.into_iter().map(|c| json(&ok(c.wait_with_output().unwrap()))).collect();
    let new: u64 = stats.iter().map(|s| s["new"].as_u64().unwrap()).sum();
    assert_eq!(new, 16_000, "{stats:?}");
    assert!(stats.iter().all(|s| s["records"] == 1000 && s["skipped"] == 0 && s["conflicts"] == 0), "{stats:?}");
    let p0 = hosts[0].1.path();
    assert_eq!(count(p0, &url, "SELECT COUNT(*) AS n FROM rows"), 16_000);
    assert_eq!(count(p0, &url, "SELECT COUNT(DISTINCT id) AS n FROM rows"), 16_000);
    assert_eq!(count(p0, &url, "SELECT COUNT(*) AS n FROM records WHERE kind = 'rows'"), 16_000);
    assert_eq!(count(p0, &url, "SELECT COUNT(DISTINCT host) AS n FROM rows"), 16);
    let kernels_per_host: i64 = run(p0, &["query", "SELECT COUNT(*) AS n FROM kernels", "--format", "json"])["rows"][0]["n"].as_i64().unwrap();
    assert!(kernels_per_host >= 1000);
    assert_eq!(count(p0, &url, "SELECT COUNT(*) AS n FROM kernels"), 16 * kernels_per_host, "each row's kernels once");

    // A re-push from every host at once adds nothing.
    let children: Vec<_> = hosts.iter().map(|(_, d)| push(d.path())).collect();
    for c in children {
        let s = json(&ok(c.wait_with_output().unwrap()));
        assert_eq!((s["new"].as_u64(), s["present"].as_u64()), (Some(0), Some(1000)), "{s}");
    }
    assert_eq!(count(p0, &url, "SELECT COUNT(*) AS n FROM rows"), 16_000);
    assert_eq!(
        pg.psql("SELECT COUNT(*) FROM metrics").trim(),
        (16 * run(p0, &["query", "SELECT COUNT(*) AS n FROM metrics", "--format", "json"])["rows"][0]["n"].as_i64().unwrap()).to_string()
    );

    // A pull into an empty project writes every host's file byte for byte (the URL from katlas.toml).
    let empty = project();
    std::fs::write(empty.path().join("katlas.toml"), format!("[store]\nurl = \"{url}\"\n")).unwrap();
    let s = run(empty.path(), &["store", "pull", "--format", "json"]);
    assert_eq!((s["written"].as_u64(), s["files_written"].as_u64(), s["refused"].as_u64()), (Some(16_000), Some(16), Some(0)), "{s}");
    let pulled = record_files(empty.path());
    for (host, d) in &hosts {
        let rel = format!("corpus/{host}-2026-11-30.jsonl");
        assert!(pulled.get(&rel) == record_files(d.path()).get(&rel), "{rel} differs after the pull");
    }
    assert_eq!(pulled.len(), 16);
    // Pulling again writes nothing; a host pulling gets the other 15 hosts' rows only.
    let s = run(empty.path(), &["store", "pull", "--format", "json"]);
    assert_eq!((s["written"].as_u64(), s["present"].as_u64()), (Some(0), Some(16_000)), "{s}");
    let s = run(p0, &["store", "pull", "--url", &url, "--format", "json"]);
    assert_eq!((s["written"].as_u64(), s["present"].as_u64()), (Some(15_000), Some(1000)), "{s}");
    assert_eq!(record_files(p0), pulled);

    // The same per-kernel aggregate from the store and from the local index of the pull.
    let sql = "SELECT name, workload, phase, arch, samples, calls, total_us, avg_us, share_pct_max FROM kernel_stats ORDER BY name, workload, phase, arch";
    let local = run(empty.path(), &["query", sql, "--format", "json"]);
    let remote = run(empty.path(), &["query", "--store", sql, "--format", "json"]);
    assert_eq!(local["columns"], remote["columns"]);
    let (l, r) = (local["rows"].as_array().unwrap(), remote["rows"].as_array().unwrap());
    assert!(!l.is_empty());
    assert_eq!(l.len(), r.len());
    for (a, b) in l.iter().zip(r) {
        for c in local["columns"].as_array().unwrap() {
            let c = c.as_str().unwrap();
            match (a[c].as_f64(), b[c].as_f64()) {
                // Sums of doubles in another order: equal to 1e-9 relative.
                (Some(x), Some(y)) if a[c].is_f64() || b[c].is_f64() => assert!((x - y).abs() <= 1e-9 * x.abs().max(1.0), "{c}: {a} vs {b}"),
                _ => assert_eq!(a[c], b[c], "{c}"),
            }
        }
    }
}

#[test]
fn ledger_evals_samples_and_isa_round_trip_and_identity_rules_hold_after_a_pull() {
    let pg = Pg::start();
    let url = pg.url();
    // Host A: the real H200 rows as captured (host `vm`), a real eval (ledger, result.json,
    // samples.jsonl), an ISA manifest of real cubins, and one bad line beside the rows.
    let a = project();
    let pa = a.path();
    let mut rows = std::fs::read_to_string(H200_ROWS).unwrap();
    rows.push_str("{\"schema\": \"katlas.row.v1\", \"id\": 7}\n");
    std::fs::write(pa.join(".katlas/corpus/vm-2026-11-30.jsonl"), &rows).unwrap();
    ok(katlas(pa, &["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=120", "--metric", "tok_s", "-n", "4", "--telemetry", "false"])
        .output()
        .unwrap());
    ok(katlas(pa, &["isa", "scan", TRITON_CACHE]).output().unwrap());
    // Host B: the same kernels on another host with another GPU of the same arch, and
    // hipfire rows of another arch.
    let b = project();
    let pb = b.path();
    std::fs::write(pb.join(".katlas/corpus/box-b-2026-11-30.jsonl"), host_rows("box-b", Some("NVIDIA H100 80GB HBM3"), 8)).unwrap();
    ok(katlas(pb, &["corpus", "import", HIPFIRE_ROWS]).output().unwrap());

    let s = run(pa, &["store", "push", "--url", &url, "--format", "json"]);
    assert_eq!(s["skipped"], 1, "the bad line is counted, not dropped silently: {s}");
    assert_eq!(s["skipped_list"][0]["source"], "corpus/vm-2026-11-30.jsonl");
    assert_eq!(s["skipped_list"][0]["line"], 5);
    let kinds = &s["new_by_kind"];
    assert_eq!(
        (kinds["rows"].as_u64(), kinds["ledger"].as_u64(), kinds["eval_result"].as_u64(), kinds["isa"].as_u64()),
        (Some(4), Some(1), Some(1), Some(1)),
        "{s}"
    );
    assert!(kinds["eval_samples"].as_u64().unwrap() >= 8, "{s}");
    let new_a = s["new"].as_u64().unwrap();
    let text = String::from_utf8(ok(katlas(pb, &["store", "push", "--url", &url]).output().unwrap()).stdout).unwrap();
    assert!(text.starts_with("pushed 11 new records (rows 11) to postgres://postgres@/postgres?host=/"), "{text}");

    // The store answers the index's SQL over ledger, evals, samples and ISA tables.
    let j = run(pa, &["query", "--url", &url, "SELECT verdict, metric, relative_change FROM ledger", "--format", "json"]);
    assert_eq!(j["rows"][0]["verdict"], "improved");
    assert!((j["rows"][0]["relative_change"].as_f64().unwrap() - 0.2).abs() < 1e-9);
    let sql = "SELECT side, COUNT(*) AS n, AVG(value) AS mean FROM eval_samples GROUP BY side ORDER BY side";
    assert_eq!(run(pa, &["query", "--url", &url, sql, "--format", "json"]), run(pa, &["query", sql, "--format", "json"]));
    let sql = "SELECT k.name, k.vgpr, o.arch FROM isa_kernels k JOIN isa_objects o ON o.manifest = k.manifest AND o.idx = k.object_idx ORDER BY k.name, k.vgpr";
    let j = run(pa, &["query", "--url", &url, sql, "--format", "json"]);
    assert!(!j["rows"].as_array().unwrap().is_empty());
    assert_eq!(j, run(pa, &["query", sql, "--format", "json"]));
    // Queries are read-only; bad SQL is bad input with PostgreSQL's reason.
    let o = katlas(pa, &["query", "--url", &url, "DELETE FROM rows"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only reads"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = katlas(pa, &["query", "--url", &url, "SELECT nope FROM rows"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("column \"nope\" does not exist"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(count(pa, &url, "SELECT COUNT(*) AS n FROM rows"), 4 + 11);

    // A third host pulls everything: every file as pushed, byte for byte (the bad line aside).
    let c = project();
    let pc = c.path();
    let s = run(pc, &["store", "pull", "--url", &url, "--format", "json"]);
    assert_eq!(s["written"].as_u64(), Some(new_a + 11), "{s}");
    assert_eq!(s["files_written"].as_u64(), Some(7), "2 corpus files of B, 1 of A, ledger, result, samples, ISA manifest: {s}");
    let (fa, fb, fc) = (record_files(pa), record_files(pb), record_files(pc));
    let want_rows = rows.lines().take(4).map(|l| format!("{l}\n")).collect::<String>();
    assert_eq!(fc["corpus/vm-2026-11-30.jsonl"], want_rows.as_bytes());
    for (rel, bytes) in fa.iter().chain(&fb).filter(|(rel, _)| *rel != "corpus/vm-2026-11-30.jsonl") {
        assert!(fc.get(rel) == Some(bytes), "{rel} differs after the pull");
    }
    assert_eq!(fc.len(), fa.len() + fb.len());
    // Host A's ledger and eval are A's: the third host keeps them apart, by host, and shows them so.
    assert!(!pc.join(".katlas/ledger.jsonl").exists() && !pc.join(".katlas/evals").exists());
    let j = run(pc, &["query", "SELECT source FROM ledger UNION ALL SELECT source FROM evals", "--format", "json"]);
    assert!(j["rows"].as_array().unwrap().iter().all(|r| r["source"].as_str().unwrap().starts_with("pulled/")), "{j}");

    // Identity came back with the rows: the same kernels on another host and GPU are compared
    // with warnings, rows of another arch are refused, as on the hosts that captured them.
    let j = run(pc, &["corpus", "compare", "host=vm", "host=box-b", "--format", "json"]);
    let w = j["warnings"].as_array().unwrap();
    assert!(w.iter().any(|w| w.as_str().unwrap().starts_with("cross-host")), "{j}");
    assert!(w.iter().any(|w| w.as_str().unwrap().contains("different GPU products (NVIDIA H200 vs NVIDIA H100 80GB HBM3)")), "{j}");
    let o = katlas(pc, &["corpus", "compare", "host=vm", "host=box-a"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not comparable"), "{}", String::from_utf8_lossy(&o.stderr));

    // A record another client of the server wrote outside the layout is refused, never written.
    pg.psql("INSERT INTO records (kind, id, source, line, md5, raw) SELECT kind, 'evil-' || id, '../../evil.jsonl', line, md5, raw FROM records WHERE kind = 'rows' LIMIT 1");
    let d = project();
    let s = run(d.path(), &["store", "pull", "--url", &url, "--format", "json"]);
    assert_eq!(s["refused"], 1, "{s}");
    assert!(s["refused_list"][0]["reason"].as_str().unwrap().contains("not a path"), "{s}");
    assert!(!d.path().join("evil.jsonl").exists() && !d.path().parent().unwrap().join("evil.jsonl").exists());
}

#[test]
fn isa_manifests_at_the_same_path_on_two_hosts_both_survive_a_push_and_a_pull() {
    let pg = Pg::start();
    let url = pg.url();
    // `isa/build.json` on two hosts (what `katlas build` writes on each), each a scan of real
    // cubins: all of the Triton cache on A, its matmul kernel alone on B.
    let (a, b) = (project(), project());
    let (pa, pb) = (a.path(), b.path());
    ok(katlas(pa, &["isa", "scan", TRITON_CACHE, "-o", ".katlas/isa/build.json"]).output().unwrap());
    let matmul = format!("{TRITON_CACHE}/KJZIFGNVC3EZPCSNAFTF64CHVZZXBQYEVZBUNYH7U2MGYVBPTNCQ");
    ok(katlas(pb, &["isa", "scan", &matmul, "-o", ".katlas/isa/build.json"]).output().unwrap());
    let ma = std::fs::read(pa.join(".katlas/isa/build.json")).unwrap();
    let mb = std::fs::read(pb.join(".katlas/isa/build.json")).unwrap();
    assert_ne!(ma, mb);
    for p in [pa, pb] {
        let s = run(p, &["store", "push", "--url", &url, "--format", "json"]);
        assert_eq!((s["new_by_kind"]["isa"].as_u64(), s["conflicts"].as_u64()), (Some(1), Some(0)), "each host's manifest is its own record: {s}");
    }
    assert_eq!(count(pa, &url, "SELECT COUNT(*) AS n FROM records WHERE kind = 'isa' AND source = 'isa/build.json'"), 2);
    // Both manifests' objects and kernels are in the store's tables, as each host indexes them.
    let sql = "SELECT manifest, manifest_md5, COUNT(*) AS kernels, SUM(vgpr) AS vgpr FROM isa_kernels GROUP BY manifest, manifest_md5 ORDER BY manifest_md5";
    let store = run(pa, &["query", "--url", &url, sql, "--format", "json"])["rows"].as_array().unwrap().clone();
    let mut local: Vec<serde_json::Value> =
        [pa, pb].iter().flat_map(|p| run(p, &["query", sql, "--format", "json"])["rows"].as_array().unwrap().clone()).collect();
    local.sort_by_key(|r| r["manifest_md5"].as_str().unwrap().to_string());
    assert_eq!(store.len(), 2);
    assert_eq!(store, local);

    // A third host pulls both, byte for byte; host A gets B's beside its own, under B's md5.
    let c = project();
    let s = run(c.path(), &["store", "pull", "--url", &url, "--format", "json"]);
    assert_eq!(s["written_by_kind"]["isa"].as_u64(), Some(2), "{s}");
    let isa: Vec<Vec<u8>> = record_files(c.path()).into_iter().filter(|(rel, _)| rel.starts_with("isa/")).map(|(_, b)| b).collect();
    assert_eq!(isa.len(), 2);
    assert!(isa.contains(&ma) && isa.contains(&mb));
    let s = run(pa, &["store", "pull", "--url", &url, "--format", "json"]);
    assert_eq!((s["written_by_kind"]["isa"].as_u64(), s["conflicts"].as_u64()), (Some(1), Some(0)), "{s}");
    let fa = record_files(pa);
    assert_eq!(fa["isa/build.json"], ma, "A's own manifest is left as it is");
    let (rel, bytes) = fa.iter().find(|(rel, _)| rel.starts_with("isa/build-")).unwrap();
    assert!(rel.ends_with(".json") && rel.len() == "isa/build-".len() + 12 + ".json".len(), "{rel}");
    assert_eq!(bytes, &mb);
    // Nothing is new after that: a re-push from A and a second pull add nothing.
    let s = run(pa, &["store", "push", "--url", &url, "--format", "json"]);
    assert_eq!((s["new"].as_u64(), s["conflicts"].as_u64()), (Some(0), Some(0)), "{s}");
    let s = run(pa, &["store", "pull", "--url", &url, "--format", "json"]);
    assert_eq!(s["written"].as_u64(), Some(0), "{s}");
}

#[test]
fn an_unreachable_store_is_a_missing_environment_and_no_url_is_bad_input() {
    let d = project();
    let o = katlas(d.path(), &["store", "push"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("KATLAS_STORE_URL"), "{}", String::from_utf8_lossy(&o.stderr));
    let dead = tempfile::tempdir().unwrap();
    let url = format!("postgres://postgres:hunter2@/postgres?host={}", dead.path().display());
    let o = katlas(d.path(), &["store", "pull", "--url", &url]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("connect") && !err.contains("hunter2"), "{err}");
}

/// Every message of a command, for asserting on.
fn said(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `katlas query --store` with a superuser's URL (the test cluster's `postgres`): `COPY … TO
/// PROGRAM` and `COPY … TO 'file'` ran on the database host; now nothing but a plain read is
/// sent, and a runaway result stops with a message instead of growing without bound.
#[test]
fn store_queries_never_copy_to_a_program_or_file_and_stay_bounded() {
    let pg = Pg::start();
    let url = pg.url();
    let a = project();
    std::fs::write(a.path().join(".katlas/corpus/box-a-2026-11-30.jsonl"), host_rows("box-a", None, 3)).unwrap();
    run(a.path(), &["store", "push", "--url", &url, "--format", "json"]);
    // The server runs as `postgres` (root runs it so): a marker in its own directory.
    let marker = pg.dir.path().join("pwned");
    let m = marker.display();
    for sql in [
        format!("COPY (SELECT 1) TO PROGRAM 'touch {m}'"),
        format!("copy rows TO '{m}'"),
        format!("SELECT 1; COPY rows TO '{m}'"),
        format!("/* c */ COPY (SELECT 1) TO PROGRAM 'touch {m}'"),
        format!("SELECT lo_export(lo_from_bytea(0, 'x'), '{m}')"),
        format!("WITH x AS (SELECT 1) SELECT * FROM x; COPY (SELECT 1) TO PROGRAM 'touch {m}'"),
    ] {
        let o = katlas(a.path(), &["query", "--url", &url, &sql]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{sql}: {}", said(&o));
        assert!(said(&o).contains("only reads") || said(&o).contains("one statement"), "{sql}: {}", said(&o));
        assert!(!marker.exists(), "{sql} wrote on the database host");
    }
    let o = katlas(a.path(), &["query", "--url", &url, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("1000000 rows"), "{}", said(&o));
    assert_eq!(count(a.path(), &url, "SELECT COUNT(*) AS n FROM rows"), 3);
}

/// A hostile teammate writes to the store directly: samples forged under this host's eval
/// path, a forged eval result and a ledger verdict, a record with a 300-character file name,
/// one with control characters in its name, one over the line cap. The pull writes the good
/// records, refuses the bad ones without failing, writes nothing outside `.katlas/`, changes
/// no local evidence and no local verdict, and the index shows what it wrote as the other
/// host's.
#[test]
fn a_hostile_teammate_never_changes_a_local_verdict_nor_blocks_a_pull() {
    let pg = Pg::start();
    let url = pg.url();
    let a = project();
    let pa = a.path();
    ok(katlas(pa, &["eval", "--baseline", "echo tok_s=100", "--candidate", "echo tok_s=120", "--metric", "tok_s", "-n", "4", "--telemetry", "false"])
        .output()
        .unwrap());
    std::fs::write(pa.join(".katlas/corpus/box-a-2026-11-30.jsonl"), host_rows("box-a", None, 2)).unwrap();
    run(pa, &["store", "push", "--url", &url, "--format", "json"]);
    let before = record_files_at(pa, false);
    let local_verdicts = run(pa, &["query", "SELECT eval_id, verdict FROM ledger ORDER BY id", "--format", "json"]);
    let samples_before = run(pa, &["query", "SELECT COUNT(*) AS n FROM samples", "--format", "json"]);

    let j = "convert_from(raw, 'UTF8')::jsonb";
    let back = |v: &str| format!("convert_to(({v})::text, 'UTF8')");
    // Samples under this host's own eval path, by `mallory`.
    let forged = back(&format!("jsonb_set(jsonb_set({j}, '{{seq}}', to_jsonb(({j}->>'seq')::int + 100)), '{{value}}', to_jsonb(1.0))"));
    pg.psql(&format!(
        "INSERT INTO records (kind, id, source, line, md5, raw, pushed_by) SELECT kind, ({j}->>'eval_id') || '/' || (({j}->>'seq')::int + 100), source, line + 100, 'x', {forged}, 'mallory' FROM records WHERE kind = 'eval_samples'"
    ));
    // A verdict and an eval result of another eval, and the same under a dotted host name.
    let ledger = back(&format!("jsonb_set(jsonb_set({j}, '{{id}}', '\"forged-ledger\"'), '{{verdict}}', '\"regressed\"')"));
    pg.psql(&format!("INSERT INTO records (kind, id, source, line, md5, raw, pushed_by) SELECT kind, 'forged-ledger', source, 9, 'x', {ledger}, '../../mallory' FROM records WHERE kind = 'ledger'"));
    let result = back(&format!("jsonb_set({j}, '{{eval_id}}', '\"forged-eval\"')"));
    pg.psql(&format!(
        "INSERT INTO records (kind, id, source, line, md5, raw, pushed_by) SELECT kind, 'forged-eval', 'evals/forged-eval/result.json', 0, 'x', {result}, 'mallory' FROM records WHERE kind = 'eval_result'"
    ));
    // Rows under this host's own corpus file name, by `mallory`: appended there, they would
    // be pushed again as this host's.
    let forged_row = back(&format!("jsonb_set({j}, '{{id}}', to_jsonb('forged-row-' || line))"));
    pg.psql(&format!(
        "INSERT INTO records (kind, id, source, line, md5, raw, pushed_by) SELECT kind, 'forged-row-' || line, source, line + 100, 'x', {forged_row}, 'mallory' \
         FROM records WHERE kind = 'rows' AND source = 'corpus/box-a-2026-11-30.jsonl'"
    ));
    // A name no file system takes, a name with a terminal escape, a line over the cap.
    let row = |id: &str, raw: &str| back(&format!("jsonb_set({j}, '{{id}}', '\"{id}\"'){raw}"));
    pg.psql(&format!(
        "INSERT INTO records (kind, id, source, line, md5, raw, pushed_by) \
         SELECT kind, 'long-name', 'corpus/' || repeat('a', 300) || '.jsonl', 1, 'x', {}, 'mallory' FROM records WHERE kind = 'rows' AND line = 1 UNION ALL \
         SELECT kind, 'escape-name', E'corpus/x\\x1b[2J.jsonl', 1, 'x', {}, 'mallory' FROM records WHERE kind = 'rows' AND line = 1 UNION ALL \
         SELECT kind, 'too-long', 'corpus/big.jsonl', 1, 'x', {}, 'mallory' FROM records WHERE kind = 'rows' AND line = 1",
        row("long-name", ""),
        row("escape-name", ""),
        row("too-long", " || jsonb_build_object('pad', repeat('x', 3000000))"),
    ));

    let o = ok(katlas(pa, &["store", "pull", "--url", &url, "--format", "json"]).env("KATLAS_MAX_LINE_BYTES", "2000000").output().unwrap());
    let s = json(&o);
    assert_eq!(s["refused"], 3, "{s}");
    let reasons = s["refused_list"].to_string();
    assert!(reasons.contains("line cap") && reasons.contains("control characters"), "{s}");
    assert!(s["written"].as_u64().unwrap() >= 10, "the forged samples, verdict and result are pulled as mallory's: {s}");

    // Nothing of this host's changed; nothing was written outside .katlas/.
    let after = record_files_at(pa, false);
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "no file of this host's added");
    for (rel, bytes) in &before {
        assert!(after.get(rel) == Some(bytes), "{rel} changed");
    }
    let outside: Vec<String> = std::fs::read_dir(pa).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(outside, [".katlas"], "{outside:?}");
    assert!(!pa.join(".katlas/corpus").read_dir().unwrap().any(|e| e.unwrap().file_name().len() > 200));
    let theirs = std::fs::read_to_string(pa.join(".katlas/corpus/pulled@mallory@box-a-2026-11-30.jsonl")).unwrap();
    assert_eq!(theirs.lines().count(), 2, "mallory's rows in a file of mallory's: {theirs}");
    let hosts: Vec<String> = std::fs::read_dir(pa.join(".katlas/pulled")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    assert!(hosts.contains(&"mallory".to_string()) && hosts.iter().all(|h| !h.contains('/') && !h.starts_with('.')), "{hosts:?}");

    // The local verdict and samples are as they were; what was pulled is shown as mallory's.
    let sql = "SELECT eval_id, verdict FROM ledger WHERE source = 'ledger.jsonl' ORDER BY id";
    assert_eq!(run(pa, &["query", sql, "--format", "json"])["rows"], local_verdicts["rows"]);
    let sql = "SELECT COUNT(*) AS n FROM samples WHERE source NOT LIKE 'pulled/%'";
    assert_eq!(run(pa, &["query", sql, "--format", "json"])["rows"], samples_before["rows"]);
    let j = run(pa, &["query", "SELECT DISTINCT source FROM samples WHERE seq >= 100", "--format", "json"]);
    let forged: Vec<&str> = j["rows"].as_array().unwrap().iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert!(!forged.is_empty() && forged.iter().all(|s| s.starts_with("pulled/mallory/")), "{j}");
    let j = run(pa, &["query", "SELECT source FROM ledger WHERE verdict = 'regressed'", "--format", "json"]);
    assert!(j["rows"][0]["source"].as_str().unwrap().starts_with("pulled/"), "{j}");

    // A second pull writes nothing more and still refuses the bad records, without failing.
    let s = json(&ok(katlas(pa, &["store", "pull", "--url", &url, "--format", "json"]).env("KATLAS_MAX_LINE_BYTES", "2000000").output().unwrap()));
    assert_eq!((s["written"].as_u64(), s["refused"].as_u64()), (Some(0), Some(3)), "{s}");
    // Pushing again sends only this host's own records: what was pulled stays the store's as it was.
    let s = run(pa, &["store", "push", "--url", &url, "--format", "json"]);
    assert_eq!(s["new"], 0, "{s}");
    let sources = pg.psql("SELECT DISTINCT source FROM records");
    assert!(!sources.contains("pulled/") && !sources.contains("pulled@"), "{sources}");
}
