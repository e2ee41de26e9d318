//! The integration tests of katlas-collect, one binary: each file beside this one is a module
//! (`cargo test -p katlas-collect --test it MODULE::` runs one file's tests).

mod collect;
mod fixtures;
mod hipfire_peer_parse;
mod hipfire_presets;
mod hostile_env;
mod hostile_limits;
mod hostile_torch_trace;
mod interrupt;
mod mutation_driver;
mod provenance_hipfire;
mod rocprofv3_join;
