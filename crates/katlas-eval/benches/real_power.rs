//! The statistical power of `katlas eval` on real processes (a benchmark, not a test: its
//! numbers depend on how loaded the machine is; results in docs/PERF.md, "Real processes").
//! `katlas-eval-spin` does real CPU work scaled by a factor, each sample a fresh process,
//! through the same runner and verdict code as `katlas eval`; the metric is the worker's own
//! thread CPU time (`cpu_ms`). Run: `cargo bench -p katlas-eval --bench real_power [-- SCALE]`
//! (SCALE 1 = the 200 A/A and 50 evals per effect; 0.2 for a quick look).

use katlas_eval::protocol::{Order, Runner, Settings, Side};
use katlas_eval::verdict::{JudgeConfig, Plan};
use katlas_model::ledger::{Goal, Verdict};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The worker; `KATLAS_EVAL_SPIN` names another copy (the bench binary run on a machine
/// without this build tree).
fn spin() -> String {
    std::env::var("KATLAS_EVAL_SPIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_katlas-eval-spin").to_string())
}
const ITERS: &str = "2000000";

struct Tally {
    verdicts: BTreeMap<&'static str, u32>,
    runs: u32,
    cvs: Vec<f64>,
    evals: u32,
}

impl Tally {
    fn get(&self, v: &str) -> u32 {
        self.verdicts.get(v).copied().unwrap_or(0)
    }
    fn runs_per_side(&self) -> f64 {
        self.runs as f64 / self.evals as f64
    }
}

fn evals(dir: &std::path::Path, tag: &str, factor: f64, jitter: f64, plan: &Plan, warmups: u32, n: u32) -> Tally {
    let mut t = Tally { verdicts: BTreeMap::new(), runs: 0, cvs: Vec::new(), evals: n };
    for i in 0..n {
        let side = |label: &str, f: f64| Side {
            label: label.into(),
            name: label.into(),
            argv: vec![spin(), "--iters".into(), ITERS.into(), "--factor".into(), f.to_string(), "--jitter".into(), jitter.to_string()],
            env: BTreeMap::new(),
            cwd: std::env::temp_dir(),
        };
        let sides = vec![side("A", 1.0), side("B", factor)];
        let st = Settings {
            metric: "cpu_ms".into(),
            parser: "kv".into(),
            warmups,
            plan: plan.clone(),
            order: Order::Abba,
            seed: i as u64,
            settle: None,
            timeout: Duration::from_secs(60),
            judge: JudgeConfig { goal: Goal::Minimize, seed: i as u64, ..JudgeConfig::default() },
            telemetry: false,
            strip_env: vec![],
        };
        let r = Runner { dir: dir.join(format!("{tag}-{i}")), eval_id: format!("{tag}-{i}"), sides: &sides, settings: &st, progress: None };
        let o = r.run().expect("eval runs");
        let v = match o.verdict() {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no_change",
            Verdict::Unstable => "unstable",
            _ => "inconclusive",
        };
        *t.verdicts.entry(v).or_default() += 1;
        t.runs += o.protocol.n_per_side[0];
        t.cvs.push(katlas_eval::stats::robust_cv(&o.values[0]));
    }
    t
}

fn row(name: &str, plan: &str, t: &Tally, secs: f64) {
    let cv = katlas_eval::stats::median(&t.cvs);
    println!(
        "| {name} | {plan} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2}% | {:.0} |",
        t.evals,
        t.get("improved"),
        t.get("regressed"),
        t.get("no_change"),
        t.get("inconclusive"),
        t.get("unstable"),
        t.runs_per_side(),
        cv * 100.0,
        secs
    );
}

fn main() {
    let scale: f64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1.0);
    let n = |k: u32| ((k as f64 * scale).round() as u32).max(1);
    let d = tempfile::tempdir().unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());
    println!("| scenario | plan | evals | improved | regressed | no_change | inconclusive | unstable | runs/side | median CV | wall s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let timed = |name: &str, plan_name: &str, factor: f64, plan: Plan, warmups: u32, k: u32| {
        let t0 = Instant::now();
        let t = evals(d.path(), &format!("{name}-{plan_name}").replace(' ', "_"), factor, 0.02, &plan, warmups, n(k));
        row(name, plan_name, &t, t0.elapsed().as_secs_f64());
        t
    };
    timed("A/A", "fixed 5, no warmup", 1.0, Plan::fixed(5), 0, 200);
    timed("A/A", "auto 3..20 (default)", 1.0, Plan::default_adaptive(), 1, 200);
    let mut runs = Vec::new();
    for (name, factor) in [("3% slower", 1.03), ("5% slower", 1.05), ("10% slower", 1.10)] {
        let a = timed(name, "auto 3..20 (default)", factor, Plan::default_adaptive(), 1, 50);
        let f = timed(name, "fixed 10", factor, Plan::fixed(10), 1, 50);
        runs.push((name, a.runs_per_side(), f.runs_per_side()));
    }
    let (auto, fixed): (f64, f64) = runs.iter().fold((0.0, 0.0), |(a, f), r| (a + r.1, f + r.2));
    println!(
        "\nexpected runs/side to a verdict over the three effects: default plan {:.2} vs fixed N=10 {:.2} ({:.0}%)",
        auto / 3.0,
        fixed / 3.0,
        100.0 * auto / fixed
    );
    println!("load average at end: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}
