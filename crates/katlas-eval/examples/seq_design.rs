//! Sweep of sequential designs (look spacing, budget, efficacy and futility spending, beta)
//! against fixed N=10 on simulated log-normal noise: A/A false calls, power and runs per
//! side for 3%, 5% and 10% effects. Seeded. `cargo run --release -p katlas-eval --example
//! seq_design -- TRIALS CV`.
use katlas_eval::sim::{experiment, Scenario};
use katlas_eval::spending::Curve;
use katlas_eval::verdict::{JudgeConfig, Plan};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trials: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let cv: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.02);
    let cfg = JudgeConfig { min_effect: Some(0.05), ..JudgeConfig::default() };
    let fixed = Plan::fixed(10);
    let row = |name: &str, plan: &Plan, cfg: &JudgeConfig| {
        let aa = experiment(Scenario::new(0.0, cv), plan, cfg, trials, 1);
        let aa0 = experiment(Scenario::new(0.0, cv), plan, &JudgeConfig { threshold: 0.0, ..cfg.clone() }, trials, 2);
        let mut cells = vec![format!("{}/{}", aa.improved + aa.regressed, aa0.improved + aa0.regressed), format!("{:.2}", aa.mean_runs_per_side)];
        let mut runs = 0.0;
        for e in [0.03, 0.05, 0.10] {
            let x = experiment(Scenario::new(e, cv), plan, cfg, trials, 3);
            cells.push(format!("{} ({} nc) {:.2}", x.improved, x.no_change, x.mean_runs_per_side));
            runs += x.mean_runs_per_side;
        }
        println!("| {name} | {} | {:.2} |", cells.join(" | "), runs / 3.0);
    };
    println!("cv {cv}, {trials} trials; cells: improved (no_change) runs/side");
    println!("| design | A/A calls (band 1%/0%) | A/A runs | 3% | 5% | 10% | mean runs |");
    row("fixed 10", &fixed, &JudgeConfig { beta: 0.0, ..cfg.clone() });
    let spec: Vec<(u32, u32, f64, f64, f64, f64, f64)> = std::env::var("DESIGNS")
        .unwrap_or_else(|_| "1,20,0.5,1.5,0.05,0.5,1.5".into())
        .split(';')
        .map(|d| {
            let v: Vec<f64> = d.split(',').map(|x| x.parse().unwrap()).collect();
            (v[0] as u32, v[1] as u32, v[2], v[3], v[4], v[5], v[6])
        })
        .collect();
    for (step, max, ef, er, beta, ff, fr) in spec {
        let mut p = Plan::adaptive_every(3, max, step);
        p.efficacy = Curve { first_share: ef, rho: er };
        p.futility = Curve { first_share: ff, rho: fr };
        let c = JudgeConfig { beta, ..cfg.clone() };
        row(&format!("step {step} max {max} eff({ef},{er}) beta {beta} fut({ff},{fr})"), &p, &c);
    }
}
