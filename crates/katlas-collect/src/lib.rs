//! katlas-collect: how evidence enters the corpus.
//!
//! - [`parse`]: output and profiler parsers, selected by name.
//! - [`summary`]: per-phase kernel tables.
//! - [`ops`]: op classification of kernel names (rules in `data/ops.toml`).
//! - [`spec`]: workload specs and presets.
//! - runs go through `katlas-proc`, the one process runner.
//! - [`collect`]: spec -> runs -> rows.
//! - [`provenance`]: kernel -> source files and dispatch references.
//! - [`loads`]: the project's runtime model: load patterns, family rule, variant selectors, and
//!   the host-code index they are read from.

pub mod amd_counters;
pub mod collect;
pub mod loads;
pub mod ops;
pub mod parse;
pub mod provenance;
pub mod spec;
pub mod summary;

pub use parse::{parse, parse_with, Input, ParseError, ParseOutput, ParserOptions};
pub use summary::PhaseTable;
