//! katlas evidence records.
//!
//! Every record is append-only, carries a `schema` string and serialises to
//! stable JSON (the agent contract). JSON Schemas are generated from these
//! types (`schemas()`) and committed under `docs/schema/`; a test fails when
//! the committed files drift from the code.

pub mod comparable;
pub mod digest;
pub mod fleet;
pub mod hipfire;
pub mod identity;
pub mod key;
pub mod ledger;
pub mod row;
pub mod schema;
pub mod task;
pub mod text;

pub use identity::{Device, FileDigest, HostIdentity, Identity, RunPolicy, SourceIdentity};
pub use key::ExperimentKey;
pub use ledger::{Disposition, EvalResult, EvalSample, Goal, LedgerEntry, Verdict, EVAL_RESULT_SCHEMA, EVAL_SAMPLE_SCHEMA, LEDGER_SCHEMA};
pub use row::{other_phase_metric, unit_for_metric_key, KernelSample, Metric, OpClass, Origin, PhaseKind, Route, Row, RunError, Status, Variant, ROW_SCHEMA};
pub use schema::{schemas, SchemaDoc};
