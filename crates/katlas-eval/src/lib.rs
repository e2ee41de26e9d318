//! katlas-eval: the measurement protocol, statistics and verdicts, correctness
//! routes, ledger, speed gates and admissions.

pub mod admissions;
pub mod config;
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
