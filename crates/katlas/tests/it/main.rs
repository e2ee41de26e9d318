//! The integration tests of katlas, one binary: each file beside this one is a module
//! (`cargo test -p katlas --test it MODULE::` runs one file's tests).

mod support {
    pub mod cli;
    pub mod pg;
    pub mod slurm;
}
mod advise_cli;
mod arch_cli;
mod build_cli;
mod capture_with_profile;
mod captured_modules;
mod closed_set_flags;
mod collect_cli;
mod collect_kill;
mod demo;
mod eval_cli;
mod eval_progress;
mod exit_contract;
mod fit_cli;
mod fleet_slurm;
mod foundation;
mod help_golden;
mod hipfire_peer;
mod hostile_import;
mod input_messages;
mod isa_cli;
mod module_graph;
mod plain_words;
mod provenance_hipfire_cli;
mod report_browser;
mod rocprof_fit;
mod skill_commands;
mod store_cli;
mod store_pg;
mod terminal_escapes;
mod untrusted_repo;
mod verdict_exit_codes;
