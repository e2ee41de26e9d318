//! `katlas`: a thin clap layer over the stage crates.

mod cmd;
mod ctx;
mod output;
mod trust;

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
    /// Run commands from the repository's files (katlas.toml, workload files, task packets)
    /// without their being trusted (`katlas trust`); they are still shown first. For scripts and CI.
    #[arg(long, global = true, env = "KATLAS_YES", value_parser = clap::builder::BoolishValueParser::new())]
    yes: bool,
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
    /// The architecture database: atoms, products, occupancy.
    #[command(subcommand)]
    Arch(cmd::arch::ArchCmd),
    /// Code objects read natively: scan (manifest), show one kernel, diff two builds.
    #[command(subcommand)]
    Isa(cmd::isa::IsaCmd),
    /// Fit view: each hot kernel against its hardware, with the rules that fired.
    Fit(cmd::fit::FitArgs),
    /// Ranked one-lever experiments for a row, remembering the ledger.
    Suggest(cmd::suggest::SuggestArgs),
    /// Write a task packet (task.json + TASK.md) for one experiment.
    Task(Box<cmd::task::TaskArgs>),
    /// Run a workload in fresh processes; one row per (run, phase) into the corpus.
    Collect(cmd::collect::CollectArgs),
    /// Print what a parser extracts from a saved output or profiler file.
    Parse(cmd::parse::ParseArgs),
    /// Ranked source files and dispatch sites of hot kernels (arch-aware chip/family tags).
    Provenance(cmd::provenance::ProvenanceArgs),
    /// Compile kernel sources for every arch atom of the matrix (cached, parallel, logs per atom).
    Build(cmd::build::BuildArgs),
    /// Which file each atom compiles; tagged files no atom reaches; kernels never dispatched.
    Reach(cmd::reach::ReachArgs),
    /// Static checks: `lint dispatch` checks the perf-variant allowlist against the ledger.
    #[command(subcommand)]
    Lint(cmd::lint::LintCmd),
    /// Judge a candidate against its baseline: interleaved fresh-process runs, statistics, verdict, ledger.
    Eval(Box<cmd::eval::EvalArgs>),
    /// Fresh-process comparison of git refs (each built in its own worktree), CIs relative to the first.
    Ab(cmd::eval::AbArgs),
    /// The ledger of every verdict: ls and show with filters.
    #[command(subcommand)]
    Ledger(cmd::ledger::LedgerCmd),
    /// Speed floors per arch (hipfire speed-baselines or katlas TOML); fails closed.
    Gate(cmd::gate::GateArgs),
    /// hipfire admissions registry: validate (check) and exact-match lookups (query).
    #[command(subcommand)]
    Admissions(cmd::admissions::AdmissionsCmd),
    /// Print (or --run) the correctness route of a claim class; unknown claims are blocked.
    Route(cmd::route::RouteArgs),
    /// Compare two tensor dumps; bad cells histogrammed by row mod 16, column and lane.
    CheckNumeric(cmd::check_numeric::CheckNumericArgs),
    /// The SQLite query index over .katlas/ (rebuilt from the files, never trusted over them).
    #[command(subcommand)]
    Index(cmd::query::IndexCmd),
    /// Run one SQL statement over the index's tables and views (docs/corpus.md, "Query index").
    Query(cmd::query::QueryArgs),
    /// A metric's history by commit, day or host, with the change points in it and where they entered.
    Trend(cmd::trend::TrendArgs),
    /// A table of the query index as CSV or Parquet (rows, kernels, ledger, samples …).
    Export(cmd::export::ExportArgs),
    /// One self-contained HTML page: fit view, rooflines, kernel shares, trends, evals, ledger.
    Report(cmd::report::ReportArgs),
    /// The team store on PostgreSQL: push this host's records, pull everyone's (docs/store.md).
    #[command(subcommand)]
    Store(cmd::store::StoreCmd),
    /// Review and trust the commands a repository's files would run (by content digest, like direnv's allow).
    Trust(cmd::trust::TrustArgs),
}

/// Clap's own usage errors in katlas's voice (`katlas: error: …`, exit 2); help and version
/// print as clap prints them.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind::*;
    if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { ctx::exit::BAD_INPUT } else { 0 });
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("katlas: error: {text}");
    ExitCode::from(ctx::exit::BAD_INPUT)
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`katlas … | head`) like other Unix tools
    // instead of panicking in println!.
    // SAFETY: resetting a signal disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A report that cannot be written (`> /dev/full`, a closed terminal) is an error with a
    // clean exit code (3: the environment), not a panic. A closed pipe ends quietly (above).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied()).unwrap_or("");
        if msg.starts_with("failed printing to std") {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "katlas: error: {msg}");
            std::process::exit(i32::from(ctx::exit::MISSING_ENV));
        }
        default_hook(info);
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let mut ctx = Ctx::new(cli.project.clone());
    ctx.yes = cli.yes;
    let result = match &cli.command {
        Command::Init(a) => cmd::init::run(a, &ctx),
        Command::Identity(a) => cmd::identity::run(a, &ctx),
        Command::Corpus(c) => cmd::corpus::run(c, &ctx),
        Command::Schema(a) => cmd::schema::run(a, &ctx),
        Command::Arch(c) => cmd::arch::run(c, &ctx),
        Command::Isa(c) => cmd::isa::run(c, &ctx),
        Command::Fit(a) => cmd::fit::run(a, &ctx),
        Command::Suggest(a) => cmd::suggest::run(a, &ctx),
        Command::Task(a) => cmd::task::run(a, &ctx),
        Command::Collect(a) => cmd::collect::run(a, &ctx),
        Command::Parse(a) => cmd::parse::run(a, &ctx),
        Command::Provenance(a) => cmd::provenance::run(a, &ctx),
        Command::Build(a) => cmd::build::run(a, &ctx),
        Command::Reach(a) => cmd::reach::run(a, &ctx),
        Command::Lint(c) => cmd::lint::run(c, &ctx),
        Command::Eval(a) => cmd::eval::run(a, &ctx),
        Command::Ab(a) => cmd::eval::run_ab(a, &ctx),
        Command::Ledger(c) => cmd::ledger::run(c, &ctx),
        Command::Gate(a) => cmd::gate::run(a, &ctx),
        Command::Admissions(c) => cmd::admissions::run(c, &ctx),
        Command::Route(a) => cmd::route::run(a, &ctx),
        Command::CheckNumeric(a) => cmd::check_numeric::run(a, &ctx),
        Command::Trust(a) => cmd::trust::run(a, &ctx),
        Command::Index(c) => cmd::query::run_index(c, &ctx),
        Command::Query(a) => cmd::query::run_query(a, &ctx),
        Command::Trend(a) => cmd::trend::run_trend(a, &ctx),
        Command::Export(a) => cmd::export::run(a, &ctx),
        Command::Report(a) => cmd::report::run(a, &ctx),
        Command::Store(c) => cmd::store::run(c, &ctx),
    };
    match result {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option and positional of every subcommand, with the path of subcommands to it,
    /// that has no help text. clap's own `--help`/`--version` are not ours to describe.
    fn undocumented(cmd: &clap::Command, path: &str, seen: &mut usize, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            *seen += 1;
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let long = arg.get_long_help().map(|h| h.to_string()).unwrap_or_default();
            if help.trim().is_empty() && long.trim().is_empty() {
                let name = match (arg.get_long(), arg.is_positional()) {
                    (Some(l), _) => format!("--{l}"),
                    (None, true) => format!("<{}>", arg.get_value_names().and_then(|v| v.first()).map_or(id.to_string(), |v| v.to_string())),
                    (None, false) => id.to_string(),
                };
                out.push(format!("{path} {name}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            undocumented(sub, &format!("{path} {}", sub.get_name()), seen, out);
        }
    }

    #[test]
    fn every_option_and_argument_has_help() {
        let mut cmd = Cli::command();
        cmd.build();
        let (mut seen, mut missing) = (0, Vec::new());
        undocumented(&cmd, "katlas", &mut seen, &mut missing);
        // The walk must reach the subcommands' own arguments, not only the globals.
        assert!(seen > 200, "only {seen} arguments walked");
        assert!(missing.is_empty(), "{} options or arguments have no help:\n  {}", missing.len(), missing.join("\n  "));
    }
}
