//! Real-process experiments for docs/PERF.md: the fresh-process runner and the
//! verdict code against `katlas-eval-spin` (real CPU work).
//!
//! `real_experiments SPIN_PATH [TRIALS] [ITERS]`
use katlas_eval::protocol::{Order, Runner, Settings, Side};
use katlas_eval::verdict::{JudgeConfig, Plan};
use katlas_model::ledger::{Goal, Verdict};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let spin = args.get(1).expect("path of katlas-eval-spin").clone();
    let trials: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let iters: String = args.get(3).cloned().unwrap_or_else(|| "20000000".into());
    let tmp = std::env::temp_dir().join(format!("katlas-real-{}", std::process::id()));
    println!("| scenario | plan | trials | improved | regressed | no_change | inconclusive | unstable | runs/side | median CV | wall s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, factor) in [("A/A", 1.0), ("5% slower", 1.05), ("10% faster", 1.0 / 1.10), ("3% faster", 1.0 / 1.03)] {
        for (pname, plan) in [("auto 3..20 (default)", Plan::default_adaptive()), ("auto 3..11", Plan::adaptive(3, 11)), ("fixed 10", Plan::fixed(10))] {
            let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
            let mut runs = 0u32;
            let mut cvs = Vec::new();
            let t0 = Instant::now();
            for t in 0..trials {
                let dir = tmp.join(format!("{name}-{pname}-{t}").replace([' ', '/', '%', '.'], "_"));
                let side = |label: &str, f: f64| Side {
                    label: label.into(),
                    name: label.into(),
                    argv: vec![spin.clone(), "--iters".into(), iters.clone(), "--factor".into(), f.to_string()],
                    env: BTreeMap::new(),
                    cwd: std::env::temp_dir(),
                };
                let sides = vec![side("A", 1.0), side("B", factor)];
                let st = Settings {
                    metric: "elapsed_ms".into(),
                    parser: "kv".into(),
                    warmups: 1,
                    plan: plan.clone(),
                    order: Order::Abba,
                    seed: t as u64,
                    settle: None,
                    timeout: Duration::from_secs(60),
                    judge: JudgeConfig { goal: Goal::Minimize, seed: t as u64, ..JudgeConfig::default() },
                    telemetry: false,
                    strip_env: vec![],
                };
                let r = Runner { dir, eval_id: format!("{t}"), sides: &sides, settings: &st, progress: None };
                let o = r.run().expect("eval runs");
                let v = o.verdict();
                *counts.entry(v.as_str()).or_default() += 1;
                runs += o.protocol.n_per_side[0];
                cvs.push(katlas_eval::stats::cv(&o.values[0]));
                let _ = v == Verdict::Improved;
            }
            let c = |k: &str| counts.get(k).copied().unwrap_or(0);
            println!(
                "| {name} | {pname} | {trials} | {} | {} | {} | {} | {} | {:.2} | {:.2}% | {:.0} |",
                c("improved"),
                c("regressed"),
                c("no_change"),
                c("inconclusive"),
                c("unstable"),
                runs as f64 / trials as f64,
                katlas_eval::stats::median(&cvs) * 100.0,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
