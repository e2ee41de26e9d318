//! Prints the statistical experiments of docs/PERF.md (seeded; same numbers every run).
use katlas_eval::sim::{experiment, Scenario};
use katlas_eval::verdict::{JudgeConfig, Plan};

fn main() {
    let cfg = JudgeConfig::default();
    let args: Vec<String> = std::env::args().collect();
    let trials: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let auto = Plan::default_adaptive;
    let a11 = || Plan::adaptive(3, 11);
    let band0 = JudgeConfig { threshold: 0.0, ..cfg.clone() };
    // Real-process-like noise: 1.5% core, a fifth of the runs 3..13% slow.
    let real = |e: f64| Scenario::with_slow_runs(e, 0.015, 0.2);
    let rows: Vec<(&str, Scenario, Plan, JudgeConfig)> = vec![
        ("A/A cv2% fixed10", Scenario::new(0.0, 0.02), Plan::fixed(10), cfg.clone()),
        ("A/A cv2% auto3..20", Scenario::new(0.0, 0.02), auto(), cfg.clone()),
        ("A/A cv2% band 0% fixed10", Scenario::new(0.0, 0.02), Plan::fixed(10), band0.clone()),
        ("A/A cv2% band 0% auto3..20", Scenario::new(0.0, 0.02), auto(), band0.clone()),
        ("A/A cv2% band 0% auto3..11", Scenario::new(0.0, 0.02), a11(), band0.clone()),
        ("A/A cv2% band 0% auto3..30", Scenario::new(0.0, 0.02), Plan::adaptive(3, 30), band0.clone()),
        ("A/A real-like band 0% auto3..20", real(0.0), auto(), band0.clone()),
        ("-5% cv2% fixed10", Scenario::new(-0.05, 0.02), Plan::fixed(10), cfg.clone()),
        ("-5% cv2% auto3..20", Scenario::new(-0.05, 0.02), auto(), cfg.clone()),
        ("-5% real-like fixed10", real(-0.05), Plan::fixed(10), cfg.clone()),
        ("-5% real-like auto3..11", real(-0.05), a11(), cfg.clone()),
        ("-5% real-like auto3..20", real(-0.05), auto(), cfg.clone()),
        ("+10% cv2% fixed10", Scenario::new(0.10, 0.02), Plan::fixed(10), cfg.clone()),
        ("+10% cv2% auto3..20", Scenario::new(0.10, 0.02), auto(), cfg.clone()),
        ("+10% cv2% auto3..11", Scenario::new(0.10, 0.02), a11(), cfg.clone()),
        ("+3% cv2% fixed10", Scenario::new(0.03, 0.02), Plan::fixed(10), cfg.clone()),
        ("+3% cv2% auto3..11", Scenario::new(0.03, 0.02), a11(), cfg.clone()),
        ("+3% cv2% auto3..20", Scenario::new(0.03, 0.02), auto(), cfg.clone()),
        ("+3% cv2% fixed15", Scenario::new(0.03, 0.02), Plan::fixed(15), cfg.clone()),
        ("+3% cv1% fixed10", Scenario::new(0.03, 0.01), Plan::fixed(10), cfg.clone()),
        ("+3% cv1% auto3..11", Scenario::new(0.03, 0.01), a11(), cfg.clone()),
        ("+3% cv1% auto3..20", Scenario::new(0.03, 0.01), auto(), cfg.clone()),
    ];
    for p in [a11(), auto(), Plan::adaptive(3, 30)] {
        let lv: Vec<String> = p.look_alphas(cfg.alpha).iter().map(|a| format!("{a:.4}")).collect();
        println!("plan {:?}: two-sided level per look [{}]", p.looks, lv.join(", "));
    }
    println!();
    println!("| scenario | looks | trials | improved | regressed | no_change | inconclusive | unstable | runs/side |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, sc, plan, cfg) in rows {
        let e = experiment(sc, &plan, &cfg, trials, 1);
        println!(
            "| {name} | {:?} | {} | {} | {} | {} | {} | {} | {:.2} |",
            plan.looks, e.trials, e.improved, e.regressed, e.no_change, e.inconclusive, e.unstable, e.mean_runs_per_side
        );
    }
}
