//! katlas-build: the compile matrix, dispatch reach and the perf-variant allowlist.
//!
//! - [`sources`] finds kernel sources and reads their chip/family tags against the
//!   architecture table (never by name prefix), [`resolve`] picks the file each matrix
//!   atom compiles for each kernel (chip tag > family tag > base).
//! - [`build`] compiles the matrix in parallel with a content cache keyed by source,
//!   transitive `#include "..."`s, flags and compiler identity; logs stay per (file, atom);
//!   the outputs are scanned into a `katlas.isa.v1` manifest and diffed against the last one.
//! - [`reach`] reports which file each atom resolves to, tagged files no atom reaches,
//!   kernels compiled but never referenced by host code, and families that diverge.
//! - [`lint`] checks the perf-variant allowlist (`[[perf_allowlist]]`) against the ledger.

pub mod allowlist;
pub mod build;
pub mod compiler;
pub mod config;
pub mod error;
pub mod host_refs;
pub mod includes;
pub mod lint;
pub mod nvrtc;
pub mod reach;
pub mod resolve;
pub mod sources;
pub mod touched;

pub use build::{run_build, BuildOptions, BuildReport, JobResult, JobStatus, BUILD_SCHEMA};
pub use config::{BuildConfig, ReachConfig, Settings, DEFAULT_MATRIX};
pub use error::BuildError;
pub use lint::{lint_dispatch, Finding, LintReport, Severity, LINT_SCHEMA};
pub use reach::{reach, ReachReport, REACH_SCHEMA};

/// JSON Schemas of this crate's records, for `katlas schema` (the CLI aggregates them).
pub fn schemas() -> Vec<katlas_model::SchemaDoc> {
    fn doc<T: schemars::JsonSchema>(name: &'static str) -> katlas_model::SchemaDoc {
        katlas_model::SchemaDoc { name, schema: serde_json::to_value(schemars::schema_for!(T)).expect("schema serialises") }
    }
    vec![doc::<BuildReport>(BUILD_SCHEMA), doc::<ReachReport>(REACH_SCHEMA), doc::<LintReport>(LINT_SCHEMA)]
}
