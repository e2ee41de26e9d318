//! `katlas`: a thin clap layer over the stage crates.

mod cmd;
mod ctx;
mod output;

use clap::{Parser, Subcommand};
use ctx::Ctx;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "katlas",
    version,
    about = "Evidence-driven GPU kernel tuning: collect, inspect ISA, fit, suggest, task, eval",
    long_about = "katlas turns GPU kernel tuning into evidence: it records what ran and what it cost, reads the \
compiled code objects, explains each hot kernel against its hardware, proposes one lever at a time, and judges \
candidates against baselines with a fresh-process protocol. Every verdict lands in a ledger.\n\n\
Exit codes: 0 success or positive verdict; 1 negative verdict or failed gate; 2 bad input or usage; \
3 missing environment (tool, GPU, compiler)."
)]
struct Cli {
    /// Project root (default: walk up from the current directory to katlas.toml, .katlas/ or .git).
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a commented katlas.toml and the .katlas/ directory.
    Init(cmd::init::InitArgs),
    /// Print the identity katlas stamps on every row (source, binary, host, GPUs, toolkits, env).
    Identity(cmd::identity::IdentityArgs),
    /// The evidence corpus: list, show, validate and import rows.
    #[command(subcommand)]
    Corpus(cmd::corpus::CorpusCmd),
    /// Print or write the JSON Schemas of katlas records.
    Schema(cmd::schema::SchemaArgs),
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`katlas … | head`) like other Unix tools
    // instead of panicking in println!.
    // SAFETY: resetting a signal disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let ctx = Ctx::new(cli.project.clone());
    let result = match &cli.command {
        Command::Init(a) => cmd::init::run(a, &ctx),
        Command::Identity(a) => cmd::identity::run(a, &ctx),
        Command::Corpus(c) => cmd::corpus::run(c, &ctx),
        Command::Schema(a) => cmd::schema::run(a, &ctx),
    };
    match result {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}
