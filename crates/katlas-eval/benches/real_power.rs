//! The statistical power of `katlas eval` on real processes (a benchmark, not a test: its
//! numbers depend on how loaded the machine is; results in docs/PERF.md, "Real processes").
//! `katlas-eval-spin` does real CPU work scaled by a factor, each sample a fresh process,
//! through the same runner and verdict code as `katlas eval`; the metric is the worker's own
//! thread CPU time (`cpu_ms`). Run: `cargo bench -p katlas-eval --bench real_power [-- SCALE [JITTER]]`
//! (SCALE 1 = the 200 A/A and 50 evals per effect; 0.2 for a quick look. JITTER, default
//! 0.02, is the log-normal CV of each run's work on top of the process's own noise: the sample CV
//! the evals see is what the table's "median CV" column measures).

#[path = "../tests/it/support/real.rs"]
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
    // Each effect under four plans: the default (3..20), the adaptive plan capped at fixed N=10's
    // budget (3..10), and fixed N=10 and N=20. "At the same error rates" pairs each adaptive plan
    // with the fixed N whose power it matches or beats in the same run.
    let plans: [(&str, Plan); 4] = [
        ("auto 3..20 (default)", Plan::default_adaptive()),
        ("auto 3..10", Plan::adaptive(3, 10)),
        ("fixed 10", Plan::fixed(10)),
        ("fixed 20", Plan::fixed(20)),
    ];
    let mut runs: Vec<(&str, Vec<Tally>)> = Vec::new();
    for (name, factor) in [("3% slower", 1.03), ("5% slower", 1.05), ("10% slower", 1.10)] {
        runs.push((name, plans.iter().map(|(pn, p)| timed(name, pn, factor, p.clone(), 1, 50)).collect()));
    }
    println!("\n| effect | {} | median CV |", plans.iter().map(|(pn, _)| format!("{pn}: found, runs/side")).collect::<Vec<_>>().join(" | "));
    println!("|---|{}---|", "---|".repeat(plans.len()));
    for (name, ts) in &runs {
        let cells: Vec<String> = ts.iter().map(|t| format!("{}/{}, {:.2}", t.get("regressed"), t.evals, t.runs_per_side())).collect();
        let cvs: Vec<f64> = ts.iter().flat_map(|t| t.cvs.iter().copied()).collect();
        println!("| {name} | {} | {:.2}% |", cells.join(" | "), 100.0 * katlas_eval::stats::median(&cvs));
    }
    let mean_runs = |i: usize| runs.iter().map(|(_, ts)| ts[i].runs_per_side()).sum::<f64>() / runs.len() as f64;
    let found = |i: usize| runs.iter().map(|(_, ts)| ts[i].get("regressed")).sum::<u32>();
    println!("\nexpected runs/side to a verdict over the three effects, and effects found of {}:", 50 * runs.len());
    for (i, (pn, _)) in plans.iter().enumerate() {
        println!("- {pn}: {:.2} runs/side, {} found", mean_runs(i), found(i));
    }
    for (a, f) in [(0, 2), (1, 2), (0, 3)] {
        println!(
            "- {} / {}: {:.0}% of the runs, {} vs {} found (goal <= 60% with no fewer found)",
            plans[a].0,
            plans[f].0,
            100.0 * mean_runs(a) / mean_runs(f),
            found(a),
            found(f)
        );
    }
    println!("load average at end: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}
