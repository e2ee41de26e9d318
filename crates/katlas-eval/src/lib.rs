//! katlas-eval: the measurement protocol, statistics and verdicts, correctness
//! routes, ledger, speed gates and admissions.

pub mod admissions;
pub mod config;
pub mod error;
pub mod eval;
pub mod fleet;
pub mod gate;
pub mod guard;
pub mod ledger;
pub mod metric;
pub mod noise;
pub mod numeric;
pub mod own_samples;
pub mod plan;
pub mod protocol;
pub mod routes;
pub mod sandbox;
pub mod sim;
pub mod spending;
pub mod stats;
pub mod tamper;
pub mod telemetry;
pub mod verdict;
pub mod words;
pub mod worktree;

pub use error::EvalError;

/// A judged result with only what a unit test sets; the rest empty.
#[cfg(test)]
pub(crate) fn test_result(
    metric: &str,
    goal: katlas_model::ledger::Goal,
    verdict: katlas_model::ledger::Verdict,
    sides: Vec<katlas_model::ledger::EvalSide>,
) -> katlas_model::ledger::EvalResult {
    katlas_model::ledger::EvalResult {
        schema: katlas_model::EVAL_RESULT_SCHEMA.into(),
        eval_id: "e".into(),
        task_id: None,
        created_at: String::new(),
        metric: metric.into(),
        goal,
        verdict,
        reasons: vec![],
        sides,
        effects: vec![],
        noise_threshold: 0.01,
        protocol: Default::default(),
        samples: Default::default(),
        drift: Default::default(),
        correctness: vec![],
        cross_host: false,
        route_changes: vec![],
        ledger_id: None,
    }
}
