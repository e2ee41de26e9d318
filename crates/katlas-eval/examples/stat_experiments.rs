//! Prints the statistical experiments of docs/PERF.md (seeded; same numbers every run).
use katlas_eval::sim::{experiment, Scenario};
use katlas_eval::verdict::{JudgeConfig, Plan};

fn main() {
    let cfg = JudgeConfig::default();
    let args: Vec<String> = std::env::args().collect();
    let trials: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let rows: Vec<(&str, Scenario, Plan)> = vec![
        ("A/A cv2% fixed10", Scenario::new(0.0, 0.02), Plan::fixed(10)),
        ("A/A cv2% auto3..30", Scenario::new(0.0, 0.02), Plan::adaptive(3, 30)),
        ("-5% cv2% fixed10", Scenario::new(-0.05, 0.02), Plan::fixed(10)),
        ("-5% cv2% auto3..30", Scenario::new(-0.05, 0.02), Plan::adaptive(3, 30)),
        ("+10% cv2% fixed10", Scenario::new(0.10, 0.02), Plan::fixed(10)),
        ("+10% cv2% auto3..30", Scenario::new(0.10, 0.02), Plan::adaptive(3, 30)),
        ("+3% cv2% fixed10", Scenario::new(0.03, 0.02), Plan::fixed(10)),
        ("+3% cv2% auto3..30", Scenario::new(0.03, 0.02), Plan::adaptive(3, 30)),
        // Equal spend: what a fixed protocol gets right with the runs adaptive mode used.
        ("+3% cv2% fixed24", Scenario::new(0.03, 0.02), Plan::fixed(24)),
        ("+3% cv2% fixed30", Scenario::new(0.03, 0.02), Plan::fixed(30)),
        ("+3% cv1% fixed10", Scenario::new(0.03, 0.01), Plan::fixed(10)),
        ("+3% cv1% auto3..30", Scenario::new(0.03, 0.01), Plan::adaptive(3, 30)),
    ];
    println!("| scenario | looks | trials | improved | regressed | no_change | inconclusive | unstable | runs/side |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, sc, plan) in rows {
        let e = experiment(sc, &plan, &cfg, trials, 1);
        println!(
            "| {name} | {:?} | {} | {} | {} | {} | {} | {} | {:.2} |",
            plan.looks, e.trials, e.improved, e.regressed, e.no_change, e.inconclusive, e.unstable, e.mean_runs_per_side
        );
    }
}
