//! The statistical power of `katlas eval` on real processes (a benchmark, not a test: its
//! numbers depend on how loaded the machine is; results in docs/PERF.md, "Real processes").
//! `katlas-eval-spin` does real CPU work scaled by a factor, each sample a fresh process,
//! through the same runner and verdict code as `katlas eval`; the metric is the worker's own
//! thread CPU time (`cpu_ms`). Run: `cargo bench -p katlas-eval --bench real_power [-- SCALE [JITTER]]`
//! (SCALE 1 = the 200 A/A and 50 evals per effect; 0.2 for a quick look. JITTER, default
//! 0.02, is the log-normal CV of each run's work on top of the process's own noise: the sample CV
//! the evals see is what the table's "median CV" column measures).

#[path = "../tests/support/real.rs"]
mod real;
use katlas_eval::verdict::Plan;
use real::{evals, Tally};
use std::time::Instant;

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
    let nums: Vec<f64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let scale = nums.first().copied().unwrap_or(1.0);
    let jitter = nums.get(1).copied().unwrap_or(0.02);
    let n = |k: u32| ((k as f64 * scale).round() as u32).max(1);
    let d = tempfile::tempdir().unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());
    println!("work jitter (log-normal CV per run): {:.1}%", jitter * 100.0);
    println!("| scenario | plan | evals | improved | regressed | no_change | inconclusive | unstable | runs/side | median CV | wall s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let timed = |name: &str, plan_name: &str, factor: f64, plan: Plan, warmups: u32, k: u32| {
        let t0 = Instant::now();
        let t = evals(d.path(), &format!("{name}-{plan_name}").replace(' ', "_"), factor, jitter, &plan, warmups, n(k));
        row(name, plan_name, &t, t0.elapsed().as_secs_f64());
        t
    };
    timed("A/A", "fixed 5, no warmup", 1.0, Plan::fixed(5), 0, 200);
    timed("A/A", "auto 3..20 (default)", 1.0, Plan::default_adaptive(), 1, 200);
    let mut runs = Vec::new();
    for (name, factor) in [("3% slower", 1.03), ("5% slower", 1.05), ("10% slower", 1.10)] {
        let a = timed(name, "auto 3..20 (default)", factor, Plan::default_adaptive(), 1, 50);
        let f = timed(name, "fixed 10", factor, Plan::fixed(10), 1, 50);
        runs.push((name, a, f));
    }
    // Runs per side to a verdict per effect, the default plan beside fixed N=10 at the CV
    // measured in the same run (the power each reached beside it: "at the same error rates").
    println!("\n| effect | default: found, runs/side | fixed 10: found, runs/side | runs ratio | median CV (default / fixed) |");
    println!("|---|---|---|---|---|");
    for (name, a, f) in &runs {
        println!(
            "| {name} | {}/{}, {:.2} | {}/{}, {:.2} | {:.0}% | {:.2}% / {:.2}% |",
            a.get("regressed"),
            a.evals,
            a.runs_per_side(),
            f.get("regressed"),
            f.evals,
            f.runs_per_side(),
            100.0 * a.runs_per_side() / f.runs_per_side(),
            100.0 * katlas_eval::stats::median(&a.cvs),
            100.0 * katlas_eval::stats::median(&f.cvs)
        );
    }
    let (auto, fixed): (f64, f64) = runs.iter().fold((0.0, 0.0), |(x, y), r| (x + r.1.runs_per_side(), y + r.2.runs_per_side()));
    println!(
        "\nexpected runs/side to a verdict over the three effects: default plan {:.2} vs fixed N=10 {:.2} ({:.0}%; goal <= 60% with no fewer found)",
        auto / 3.0,
        fixed / 3.0,
        100.0 * auto / fixed
    );
    println!("load average at end: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}
