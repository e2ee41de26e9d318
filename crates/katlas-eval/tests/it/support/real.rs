//! Real-process evals of `katlas-eval-spin`, shared by the suite's load-proof test
//! (`tests/it/real_proof.rs`) and the power benchmark (`benches/real_power.rs`), which include
//! this file with `#[path]`.

use katlas_eval::protocol::{Order, Runner, Settings, Side};
use katlas_eval::verdict::{JudgeConfig, Plan};
use katlas_model::ledger::{Goal, Verdict};
use std::collections::BTreeMap;
use std::time::Duration;

/// The worker; `KATLAS_EVAL_SPIN` names another copy (the bench binary run on a machine
/// without this build tree).
pub fn spin() -> String {
    std::env::var("KATLAS_EVAL_SPIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_katlas-eval-spin").to_string())
}
pub const ITERS: &str = "2000000";

pub struct Tally {
    pub verdicts: BTreeMap<&'static str, u32>,
    pub runs: u32,
    pub cvs: Vec<f64>,
    pub evals: u32,
}

impl Tally {
    pub fn get(&self, v: &str) -> u32 {
        self.verdicts.get(v).copied().unwrap_or(0)
    }
    pub fn runs_per_side(&self) -> f64 {
        self.runs as f64 / self.evals as f64
    }
}

#[allow(dead_code)] // the test reads fewer fields than the benchmark
pub fn evals(dir: &std::path::Path, tag: &str, factor: f64, jitter: f64, plan: &Plan, warmups: u32, n: u32) -> Tally {
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
            // As `katlas eval` judges by default: --min-effect 5% (futility stops on).
            judge: JudgeConfig { goal: Goal::Minimize, seed: i as u64, min_effect: Some(0.05), ..JudgeConfig::default() },
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
