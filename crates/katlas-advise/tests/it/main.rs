//! The integration tests of katlas-advise, one binary: each file beside this one is a module
//! (`cargo test -p katlas-advise --test it MODULE::` runs one file's tests).

mod catalog;
mod common;
mod fit_evidence;
mod fit_hipfire;
mod fit_rules;
mod fit_torch_trace;
mod profiled_rows;
mod queue;
mod schema_drift;
mod suggest_memory;
mod trace_cubin_join;
