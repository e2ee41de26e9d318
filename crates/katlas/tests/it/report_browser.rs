//! `katlas report` opened in a real headless Chromium (Debian's `chromium`, installed by
//! scripts/test-all), driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
//! the page loads with no console error, no exception, no request but its own file, no dialog;
//! every plot and every mark in it has a non-empty box; and a kernel named
//! `<script>alert(1)</script>` is text on the page, never an element.
//!
//! The project is real: rows collected from the H200 torch.profiler trace fixture over three
//! git commits (the host's `nvidia-smi` answers as the H200 box did), the hipfire fixture rows
//! with the hostile kernel name, and an eval run for real whose ledger entry names it.

use crate::support::cli;

use cli::{fixture, git, katlas, ok};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const HOSTILE: &str = "<script>alert(1)</script>";
/// Generous for a loaded two-core box; a healthy run takes a few seconds.
const DEADLINE: Duration = Duration::from_secs(60);

/// A DevTools session over the pipe: commands on Chromium's fd 3, answers and events on fd 4,
/// each message a JSON text ended by NUL.
struct Browser {
    child: Child,
    to: std::io::PipeWriter,
    from: Receiver<Value>,
    next_id: u64,
    events: Vec<Value>,
    deadline: Instant,
    stderr: PathBuf,
}

impl Browser {
    fn start(profile: &Path) -> Browser {
        assert!(
            Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing: the report test needs Debian's chromium (scripts/test-all installs it: apt-get install chromium)"
        );
        let (cmd_r, cmd_w) = std::io::pipe().expect("pipe");
        let (ev_r, ev_w) = std::io::pipe().expect("pipe");
        let (a, b) = (cmd_r.as_raw_fd(), ev_w.as_raw_fd());
        let stderr = profile.with_extension("stderr.log");
        let mut cmd = Command::new(CHROMIUM);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap());
        // SAFETY: only async-signal-safe calls between fork and exec. The pipe ends are moved
        // above 10 first so that dup2 onto 3 and 4 never closes the other one, and the copies
        // on 3/4 lose close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                let a2 = libc::fcntl(a, libc::F_DUPFD, 10);
                let b2 = libc::fcntl(b, libc::F_DUPFD, 10);
                if a2 < 0 || b2 < 0 || libc::dup2(a2, 3) < 0 || libc::dup2(b2, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("{CHROMIUM}: {e}"));
        drop((cmd_r, ev_w));
        let (tx, from) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(ev_r);
            let mut buf = Vec::new();
            while r.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        Browser { child, to: cmd_w, from, next_id: 0, events: Vec::new(), deadline: Instant::now() + DEADLINE, stderr }
    }

    fn recv(&mut self) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.from.recv_timeout(left) {
            Ok(v) => v,
            Err(e) => panic!("chromium: no answer ({e}); its stderr:\n{}", std::fs::read_to_string(&self.stderr).unwrap_or_default()),
        }
    }

    /// Send a command and wait for its answer, keeping the events that arrive meanwhile.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        loop {
            let m = self.recv();
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn wait_event(&mut self, method: &str) {
        let mut seen = self.events.iter().any(|e| e["method"] == method);
        while !seen {
            let m = self.recv();
            seen = m["method"] == method;
            self.events.push(m);
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the page showed: the self-check's answer and every event of the load.
struct Visit {
    check: Value,
    events: Vec<Value>,
}

/// Runs in the page once it has loaded: boxes of each plot and mark, the page's text, its
/// script elements, and the alerts (window.alert replaced before any page script could run).
const CHECK: &str = r#"JSON.stringify({
  plots: [...document.querySelectorAll('svg.plot')].map(s => {
    const b = s.getBBox(), r = s.getBoundingClientRect();
    const marks = [...s.querySelectorAll('.mark')].map(m => { const x = m.getBBox(); return x.width + x.height; });
    return { id: s.id, bbox: [b.width, b.height], screen: [r.width, r.height], marks: marks.length, empty_marks: marks.filter(v => !(v > 0)).length };
  }),
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  empty: [...document.querySelectorAll('.empty')].map(e => e.textContent),
  text: document.body.innerText,
  scripts: document.scripts.length,
  alerts: window.__alerts,
  title: document.title
})"#;

fn visit(page: &Path, profile: &Path) -> Visit {
    let mut b = Browser::start(profile);
    let targets = b.call(None, "Target.getTargets", json!({}));
    let target = targets["targetInfos"].as_array().unwrap().iter().find(|t| t["type"] == "page").expect("a page target")["targetId"].clone();
    let s = b.call(None, "Target.attachToTarget", json!({"targetId": target, "flatten": true}))["sessionId"].as_str().unwrap().to_string();
    let s = Some(s.as_str());
    for d in ["Runtime.enable", "Log.enable", "Page.enable", "Network.enable"] {
        b.call(s, d, json!({}));
    }
    b.call(s, "Page.addScriptToEvaluateOnNewDocument", json!({"source": "window.__alerts = []; window.alert = m => window.__alerts.push(String(m));"}));
    let url = format!("file://{}", page.display());
    b.call(s, "Page.navigate", json!({"url": url}));
    b.wait_event("Page.loadEventFired");
    let r = b.call(s, "Runtime.evaluate", json!({"expression": CHECK, "returnByValue": true}));
    let check: Value = serde_json::from_str(r["result"]["value"].as_str().unwrap_or_else(|| panic!("self-check failed: {r}"))).unwrap();
    let _ = b.call(None, "Browser.close", json!({}));
    Visit { check, events: std::mem::take(&mut b.events) }
}

/// Console errors, exceptions, dialogs and requests for anything but the page itself.
fn problems(v: &Visit, page_url: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in &v.events {
        let p = &e["params"];
        match e["method"].as_str().unwrap_or("") {
            "Log.entryAdded" if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) => out.push(format!("log: {}", p["entry"])),
            "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "warning" | "assert")) => out.push(format!("console: {}", p["args"])),
            "Runtime.exceptionThrown" => out.push(format!("exception: {}", p["exceptionDetails"])),
            "Page.javascriptDialogOpening" => out.push(format!("dialog: {}", p["message"])),
            "Network.requestWillBeSent" if p["request"]["url"] != page_url => out.push(format!("request: {}", p["request"]["url"])),
            _ => {}
        }
    }
    out
}

fn run_with_path(dir: &Path, bin: &Path, args: &[&str]) {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let o = cli::katlas_cmd(dir).args(args).env("PATH", path).env("KATLAS_YES", "1").output().unwrap();
    ok(&o);
}

/// Three commits × three runs of the H200 trace (gen_tok_s ≈ 100, then ≈ 120 at the third), the
/// hipfire rows with the hostile kernel, and one eval.
fn project(root: &Path) {
    let p = root.join("proj");
    let bin = root.join("bin");
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    // The H200 box's nvidia-smi answer (the identity of the rows' host).
    let smi = bin.join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\necho '0, NVIDIA H200, 9.0, 580.95.05, 143771, GPU-3f1c0e2a-9b7d-4c55-8e11-2a6f0d9c7b41'\n").unwrap();
    std::fs::set_permissions(&smi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(&p, &["init", "-q"]);
    let trace = fixture("h200/torch_llama_decode_trace.json.gz");
    for (i, base) in [100, 100, 120].iter().enumerate() {
        git(&p, &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")]);
        let spec = format!(
            "command = [\"sh\", \"-c\", \"echo gen_tok_s=$(({base} + $$ % 3))\"]\nruns = 3\nwarmup = 0\n\
             parsers = [{{ name = \"kv\", keys = [\"gen_tok_s\"] }}, {{ name = \"torch-trace\", file = \"{}\" }}]\n",
            trace.display()
        );
        std::fs::write(p.join("llama.toml"), spec).unwrap();
        run_with_path(&p, &bin, &["collect", "--spec", "llama.toml"]);
    }
    let rows = std::fs::read_to_string(fixture("hipfire/atlas_rows_v0.jsonl")).unwrap().replace("gemv_hfq4g256_residual", r"<script>alert(1)<\/script>");
    assert!(rows.contains("alert(1)"));
    std::fs::write(p.join("hostile.jsonl"), rows).unwrap();
    ok(&katlas(&p, &["corpus", "import", "hostile.jsonl"]));
    ok(&katlas(
        &p,
        &[
            "eval",
            "--baseline",
            "echo tok_s=$((100 + $$ % 7))",
            "--candidate",
            "echo tok_s=$((112 + $$ % 7))",
            "--metric",
            "tok_s",
            "-n",
            "8",
            "--telemetry",
            "false",
            "--kernel",
            HOSTILE,
            "--lever",
            "\"><img src=x onerror=alert(2)>",
        ],
    ));
}

#[test]
fn report_renders_in_chromium_with_every_plot_and_hostile_names_as_text() {
    let t0 = Instant::now();
    let d = tempfile::tempdir().unwrap();
    project(d.path());
    let p = d.path().join("proj");
    let o = katlas(&p, &["report", "--out", "report.html"]);
    ok(&o);
    let page = p.join("report.html");
    let built = t0.elapsed();

    let v = visit(&page, &d.path().join("profile"));
    let bad = problems(&v, &format!("file://{}", page.display()));
    assert!(bad.is_empty(), "the page loads cleanly:\n{}", bad.join("\n"));
    let c = &v.check;
    assert_eq!(c["scripts"], 0, "no script element on the page");
    assert_eq!(c["alerts"], json!([]), "nothing called alert");
    let text = c["text"].as_str().unwrap();
    assert!(text.contains(HOSTILE), "the hostile kernel name is shown as text");
    assert!(text.contains("\"><img src=x onerror=alert(2)>"), "the hostile lever is shown as text");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(HOSTILE) && html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the hostile name is escaped in the file");
    assert!(!html.contains("<script") && !html.contains("<img"), "the report carries no script or image element at all");

    let sections: Vec<&str> = c["sections"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(sections, ["fit", "shares", "rooflines", "trends", "evals", "ledger"]);
    let plots = c["plots"].as_array().unwrap();
    let ids: Vec<&str> = plots.iter().map(|p| p["id"].as_str().unwrap()).collect();
    for want in ["plot-shares", "plot-roofline-0", "plot-roofline-1", "plot-trend-0", "plot-eval-0"] {
        assert!(ids.contains(&want), "{want} among {ids:?}");
    }
    for p in plots {
        let f = |k: &str, i: usize| p[k][i].as_f64().unwrap();
        assert!(f("bbox", 0) > 0.0 && f("bbox", 1) > 0.0 && f("screen", 0) > 0.0 && f("screen", 1) > 0.0, "plot renders: {p}");
        assert!(p["marks"].as_u64().unwrap() > 0 && p["empty_marks"] == 0, "every mark of the plot renders: {p}");
    }
    // Both products' rooflines, with the H200 trace's kernels placed (bytes and FLOPs from shapes).
    assert!(text.contains("NVIDIA H200") && text.contains("Radeon RX 9070 XT"), "a roofline per product");
    let h200 = plots.iter().find(|p| p["id"] == "plot-roofline-0").unwrap();
    assert!(h200["marks"].as_u64().unwrap() >= 8, "the hot H200 kernels are on its roofline: {h200}");
    assert!(text.contains("no FLOP count (bandwidth only)"), "hipfire's kernels say why they are not placed");
    // The trend of gen_tok_s comes first, with the step at the third commit named.
    let c2 = git(&p, &["rev-parse", "HEAD"]);
    assert!(text.contains(&format!("entered at commit {c2}")), "the change point names the commit: {}", &text[..text.len().min(4000)]);
    assert!(text.contains("verdict improved"), "the eval and its verdict");
    eprintln!("report_browser: project and report {:.1?}, browser check {:.1?}", built, t0.elapsed() - built);
}

#[test]
fn report_of_an_empty_project_says_why_each_section_is_empty() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("proj");
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    ok(&katlas(&p, &["report"]));
    let page = p.join(".katlas/report.html");
    let v = visit(&page, &d.path().join("profile"));
    let bad = problems(&v, &format!("file://{}", page.display()));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let empty: Vec<&str> = v.check["empty"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(empty.len(), 6, "one line per section: {empty:?}");
    assert!(empty[..4].iter().all(|e| e.contains("No rows in the corpus")), "{empty:?}");
    assert!(empty[4].contains("No eval recorded") && empty[5].contains("No ledger entry"), "{empty:?}");
    assert_eq!(v.check["plots"], json!([]));
}

/// The cell under `column` of the CLI table row whose first cell is `label`.
fn cli_cell(out: &str, label: &str, column: &str) -> String {
    let cells = |l: &str| l.trim_matches(|c| c == '│' || c == ' ').split('┆').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let mut rows = out.lines().filter(|l| l.starts_with('│')).map(cells);
    let head = rows.next().unwrap_or_else(|| panic!("no table:\n{out}"));
    let i = head.iter().position(|h| h == column).unwrap_or_else(|| panic!("no column {column} in {head:?}"));
    rows.find(|r| r[0] == label).unwrap_or_else(|| panic!("no row {label}:\n{out}"))[i].clone()
}

/// The rows of the page's ledger table as the browser lays them out (innerText: a tab
/// between cells, a line per row), header first.
fn ledger_table(text: &str) -> Vec<Vec<String>> {
    let at = text.find("recorded\tlever").unwrap_or_else(|| panic!("no ledger table:\n{text}"));
    text[at..].lines().take_while(|l| l.contains('\t')).map(|l| l.split('\t').map(|c| c.trim().to_string()).collect()).collect()
}

#[test]
fn report_shows_an_eval_with_the_cli_gain_sign_numbers_and_level() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("proj");
    std::fs::create_dir_all(p.join(".katlas")).unwrap();
    // A time that falls by a third, for real (the wall-time check sees the runs get shorter):
    // the raw change is negative, the gain positive. `--alpha 0.005` puts a fixed plan's
    // interval at 99.5%, where a report that assumed 95% would mislabel it.
    let side =
        |f: &str, sleep: &str, ms: u32| format!("sleep {sleep}; n=$(cat {f} 2>/dev/null || echo 0); echo $((n+1)) > {f}; echo time_ms=$(({ms} + n % 3))");
    let eval = |extra: &[&str], a: &str, b: &str| {
        let args = [&["eval", "--baseline", a, "--candidate", b, "--metric", "time_ms", "--telemetry", "false", "--warmups", "0"][..], extra].concat();
        ok(&katlas(&p, &args))
    };
    let out = eval(&["-n", "6", "--alpha", "0.005"], &side("a", "0.3", 300), &side("b", "0.2", 200));
    let gain = cli_cell(&out, "candidate", "gain (+ = better)");
    let interval = cli_cell(&out, "candidate", "gain interval");
    assert!(gain.starts_with('+') && interval.starts_with("[+") && interval.ends_with("] at 99.5%"), "{out}");
    ok(&katlas(&p, &["report", "--out", "report.html"]));
    let page = p.join("report.html");
    let v = visit(&page, &d.path().join("profile"));
    let text = v.check["text"].as_str().unwrap();
    assert!(text.contains(&format!("gain {gain} (+ = better), interval {interval}")), "the eval as the CLI printed it:\n{text}");
    let t = ledger_table(text);
    let col = |name: &str| t[0].iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name} in {:?}", t[0]));
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(t[1][col("gain (+ = better)")], gain, "{t:?}");
    // One level for the whole table: the header names it, the cells hold the numbers.
    assert_eq!(t[1][col("99.5% gain interval")], interval.trim_end_matches(" at 99.5%"), "{t:?}");

    // A second eval at the plain 95%: the levels differ, so each row names its own.
    let out95 = eval(&["-n", "4"], &side("c", "0.3", 300), &side("e", "0.2", 200));
    let interval95 = cli_cell(&out95, "candidate", "gain interval");
    assert!(interval95.ends_with(" at 95.0%"), "{out95}");
    ok(&katlas(&p, &["report", "--out", "report.html"]));
    let v = visit(&page, &d.path().join("profile"));
    let t = ledger_table(v.check["text"].as_str().unwrap());
    let i = t[0].iter().position(|h| h == "gain interval (level per row)").unwrap_or_else(|| panic!("{:?}", t[0]));
    let mut cells: Vec<&str> = t[1..].iter().map(|r| r[i].as_str()).collect();
    cells.sort();
    let mut want = vec![interval.as_str(), interval95.as_str()];
    want.sort();
    assert_eq!(cells, want, "{t:?}");
}
