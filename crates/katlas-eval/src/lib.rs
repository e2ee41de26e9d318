//! katlas-eval: the measurement protocol, statistics and verdicts, correctness
//! routes, ledger, speed gates and admissions.

pub mod stats;
pub mod sim;
pub mod verdict;
pub mod spending;
pub mod metric;
pub mod protocol;
pub mod telemetry;
pub mod guard;
pub mod ledger;
pub mod worktree;
pub mod eval;
pub mod routes;
pub mod admissions;
pub mod gate;
pub mod numeric;
pub mod config;
