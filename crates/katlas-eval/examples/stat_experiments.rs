//! Prints the statistical experiments of docs/PERF.md (seeded; same numbers every run): the
//! default plan's levels, and per noise level its A/A false calls, power and runs per side
//! for 3%, 5% and 10% effects beside fixed N=10 (`--min-effect` 5%, band 1%).
//! `cargo run --release -p katlas-eval --example stat_experiments -- TRIALS`.
use katlas_eval::sim::{experiment, Scenario};
use katlas_eval::verdict::{JudgeConfig, Plan};

fn main() {
    let trials: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(400);
    let cfg = JudgeConfig { min_effect: Some(0.05), ..JudgeConfig::default() };
    let auto = Plan::default_adaptive();
    let fmt = |v: Vec<f64>| v.iter().map(|a| format!("{a:.4}")).collect::<Vec<_>>().join(", ");
    println!("default plan looks {:?}", auto.looks);
    println!("efficacy two-sided alpha per look [{}]", fmt(auto.look_alphas(cfg.alpha)));
    println!("futility two-sided alpha per look [{}]", fmt(auto.futility_alphas(cfg.beta)));
    println!();
    println!("| noise | plan | A/A calls (band 1% / 0%) | A/A runs | 3%: found, no_change, runs | 5% | 10% | mean runs 3/5/10% | vs fixed 10 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    type Noise = Box<dyn Fn(f64) -> Scenario>;
    let noises: Vec<(&str, Noise)> = vec![
        ("CV 1%", Box::new(|e| Scenario::new(e, 0.01))),
        ("CV 2%", Box::new(|e| Scenario::new(e, 0.02))),
        ("CV 3%", Box::new(|e| Scenario::new(e, 0.03))),
        ("real-like", Box::new(|e| Scenario::with_slow_runs(e, 0.015, 0.2))),
    ];
    for (noise, sc) in &noises {
        let mut fixed_mean = 0.0;
        for (name, plan) in [("fixed 10", Plan::fixed(10)), ("default 3..20", auto.clone())] {
            let aa = experiment(sc(0.0), &plan, &cfg, trials, 1);
            let aa0 = experiment(sc(0.0), &plan, &JudgeConfig { threshold: 0.0, ..cfg.clone() }, trials, 2);
            let mut cells = Vec::new();
            let mut runs = 0.0;
            for e in [0.03, 0.05, 0.10] {
                let x = experiment(sc(e), &plan, &cfg, trials, 3);
                cells.push(format!("{}, {}, {:.2}", x.improved, x.no_change, x.mean_runs_per_side));
                runs += x.mean_runs_per_side / 3.0;
            }
            if name == "fixed 10" {
                fixed_mean = runs;
            }
            println!(
                "| {noise} | {name} | {} / {} | {:.2} | {} | {:.2} | {:.0}% |",
                aa.improved + aa.regressed,
                aa0.improved + aa0.regressed,
                aa.mean_runs_per_side,
                cells.join(" | "),
                runs,
                100.0 * runs / fixed_mean
            );
        }
    }
}
