//! `katlas`: a thin clap layer over the stage crates.

mod cmd;
mod ctx;
mod output;
mod trust;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ctx::{CliError, CmdResult, Ctx};
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
3 missing environment (tool, GPU, compiler, a full or read-only disk); 130 interrupted (Ctrl-C)."
)]
struct Cli {
    /// Project root, for a command that reads a project (the same as the command's own
    /// --project; `katlas init`: where to create it).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Run commands from the repository's files untrusted, for a command that runs them (the
    /// same as the command's own --yes).
    #[arg(long)]
    yes: bool,
    #[command(subcommand)]
    command: Command,
}

// `--project` and `--yes` belong to the commands that use them, so `katlas init --help` and
// `katlas schema --help` do not offer options that would do nothing. The wrappers below add
// them to a command's own arguments; `katlas --project P CMD` and `katlas --yes CMD` (before
// the command) still work for a command that takes them.

/// `--project`: the commands that read a project.
#[derive(Debug, Clone, clap::Args)]
struct ProjectArg {
    /// Project root (default: walk up from the current directory to katlas.toml, .katlas/ or .git).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
}

/// `--yes`: the commands that run commands from the repository's files.
#[derive(Debug, Clone, clap::Args)]
struct YesArg {
    /// Run commands from the repository's files (katlas.toml, workload files, task packets)
    /// without their being trusted (`katlas trust`); they are still shown first. For scripts and CI.
    #[arg(long, env = "KATLAS_YES", value_parser = clap::builder::BoolishValueParser::new())]
    yes: bool,
}

/// A command that reads a project.
#[derive(Debug, clap::Args)]
struct InProject<T: clap::Args> {
    #[command(flatten)]
    args: T,
    #[command(flatten)]
    project: ProjectArg,
}

/// A command that reads a project and runs commands from its files.
#[derive(Debug, clap::Args)]
struct Runs<T: clap::Args> {
    #[command(flatten)]
    args: T,
    #[command(flatten)]
    project: ProjectArg,
    #[command(flatten)]
    yes: YesArg,
}

/// A group whose subcommands read a project: `--project` before or after the subcommand.
#[derive(Debug, clap::Args)]
struct Group<S: clap::Subcommand> {
    #[command(subcommand)]
    cmd: S,
    /// Project root (default: walk up from the current directory to katlas.toml, .katlas/ or .git).
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
}

/// A group whose subcommands read a project and run commands from its files.
#[derive(Debug, clap::Args)]
struct RunGroup<S: clap::Subcommand> {
    #[command(subcommand)]
    cmd: S,
    /// Project root (default: walk up from the current directory to katlas.toml, .katlas/ or .git).
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Run commands from the repository's files (katlas.toml, workload files, task packets)
    /// without their being trusted (`katlas trust`); they are still shown first. For scripts and CI.
    #[arg(long, global = true, env = "KATLAS_YES", value_parser = clap::builder::BoolishValueParser::new())]
    yes: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Write a commented katlas.toml and the .katlas/ directory.
    Init(cmd::init::InitArgs),
    /// Print the identity katlas stamps on every row (source, binary, host, GPUs, toolkits, env).
    Identity(InProject<cmd::identity::IdentityArgs>),
    /// The evidence corpus: list, show, validate and import rows.
    Corpus(Group<cmd::corpus::CorpusCmd>),
    /// Print or write the JSON Schemas of katlas records.
    Schema(cmd::schema::SchemaArgs),
    /// The architecture database: atoms, products, occupancy.
    Arch(Group<cmd::arch::ArchCmd>),
    /// Code objects read natively: scan (manifest), show one kernel, diff two builds.
    Isa(Group<cmd::isa::IsaCmd>),
    /// Fit view: each hot kernel against its hardware, with the rules that fired.
    Fit(InProject<cmd::fit::FitArgs>),
    /// Ranked one-lever experiments for a row, remembering the ledger.
    Suggest(InProject<cmd::suggest::SuggestArgs>),
    /// Write a task packet (task.json + TASK.md) for one experiment.
    Task(Runs<Box<cmd::task::TaskArgs>>),
    /// Run a workload in fresh processes; one row per (run, phase) into the corpus.
    Collect(Runs<cmd::collect::CollectArgs>),
    /// Print what a parser extracts from a saved output or profiler file.
    Parse(InProject<cmd::parse::ParseArgs>),
    /// Ranked source files and dispatch sites of hot kernels (arch-aware chip/family tags).
    Provenance(Runs<cmd::provenance::ProvenanceArgs>),
    /// Compile kernel sources for every arch atom of the matrix (cached, parallel, logs per atom).
    Build(Runs<cmd::build::BuildArgs>),
    /// Which file each atom compiles; tagged files no atom reaches; kernels never dispatched.
    Reach(InProject<cmd::reach::ReachArgs>),
    /// Static checks: `lint dispatch` checks the perf-variant allowlist against the ledger.
    Lint(Group<cmd::lint::LintCmd>),
    /// Judge a candidate against its baseline: interleaved fresh-process runs, statistics, verdict, ledger.
    Eval(Runs<Box<cmd::eval::EvalArgs>>),
    /// Evals sent to a Slurm cluster (`eval --on slurm`): ls, status, wait (resubmits a died job), cancel.
    Fleet(RunGroup<cmd::fleet::FleetCmd>),
    /// Fresh-process comparison of git refs (each built in its own worktree), CIs relative to the first.
    Ab(InProject<cmd::eval::AbArgs>),
    /// The ledger of every verdict: ls and show with filters.
    Ledger(Group<cmd::ledger::LedgerCmd>),
    /// Speed floors per arch (hipfire speed-baselines or katlas TOML); fails closed.
    Gate(Runs<cmd::gate::GateArgs>),
    /// hipfire admissions registry: validate (check) and exact-match lookups (query).
    Admissions(Group<cmd::admissions::AdmissionsCmd>),
    /// Print (or --run) the correctness route of a claim class; unknown claims are blocked.
    Route(Runs<cmd::route::RouteArgs>),
    /// Compare two tensor dumps; bad cells histogrammed by row mod 16, column and lane.
    CheckNumeric(cmd::check_numeric::CheckNumericArgs),
    /// The SQLite query index over .katlas/ (rebuilt from the files, never trusted over them).
    Index(Group<cmd::query::IndexCmd>),
    /// Run one SQL statement over the index's tables and views (docs/corpus.md, "Query index").
    Query(Runs<cmd::query::QueryArgs>),
    /// A metric's history by commit, day or host, with the change points in it and where they entered.
    Trend(InProject<cmd::trend::TrendArgs>),
    /// A table of the query index as CSV or Parquet (rows, kernels, ledger, samples …).
    Export(InProject<cmd::export::ExportArgs>),
    /// One self-contained HTML page: fit view, rooflines, kernel shares, trends, evals, ledger.
    Report(InProject<cmd::report::ReportArgs>),
    /// The team store on PostgreSQL: push this host's records, pull everyone's (docs/store.md).
    Store(RunGroup<cmd::store::StoreCmd>),
    /// Review and trust the commands a repository's files would run (by content digest, like direnv's allow).
    Trust(InProject<cmd::trust::TrustArgs>),
}

/// Clap's own usage errors in katlas's voice (`katlas: error: …`, exit 2); help and version
/// print as clap prints them.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind::*;
    if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
        if let Err(w) = e.print() {
            // `katlas --help > /dev/full` fails as any other report that cannot be written does.
            return CliError::missing_env(format!("failed printing to stdout: {w}")).report();
        }
        return ExitCode::from(if e.use_stderr() { ctx::exit::BAD_INPUT } else { 0 });
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("katlas: error: {text}");
    ExitCode::from(ctx::exit::BAD_INPUT)
}

/// What a command takes of `--project` and `--yes`.
trait Options {
    /// `Some(its --project)` when the command reads a project; `None` when it takes no such option.
    fn project(&self) -> Option<Option<&PathBuf>> {
        None
    }
    /// `Some(its --yes)` when the command runs commands from the repository's files.
    fn yes(&self) -> Option<bool> {
        None
    }
}

/// A command that reads no project and runs nothing from one (`schema`, `check-numeric`).
struct NoOptions;
impl Options for NoOptions {}

/// `katlas init [DIR]` creates the project in DIR: it is the project root the context holds
/// (`katlas --project DIR init` is the same).
impl Options for cmd::init::InitArgs {
    fn project(&self) -> Option<Option<&PathBuf>> {
        Some(self.dir.as_ref())
    }
}
impl<T: clap::Args> Options for InProject<T> {
    fn project(&self) -> Option<Option<&PathBuf>> {
        Some(self.project.project.as_ref())
    }
}
impl<T: clap::Args> Options for Runs<T> {
    fn project(&self) -> Option<Option<&PathBuf>> {
        Some(self.project.project.as_ref())
    }
    fn yes(&self) -> Option<bool> {
        Some(self.yes.yes)
    }
}
impl<S: clap::Subcommand> Options for Group<S> {
    fn project(&self) -> Option<Option<&PathBuf>> {
        Some(self.project.as_ref())
    }
}
impl<S: clap::Subcommand> Options for RunGroup<S> {
    fn project(&self) -> Option<Option<&PathBuf>> {
        Some(self.project.as_ref())
    }
    fn yes(&self) -> Option<bool> {
        Some(self.yes)
    }
}

/// Runs `f` with the context of command `name`: its own --project/--yes, else the ones given
/// before the command; one given before a command that does not take it is a usage error
/// rather than an option silently doing nothing.
fn with(cli: &Cli, name: &str, o: &dyn Options, f: impl FnOnce(&Ctx) -> CmdResult) -> CmdResult {
    let project = match (o.project(), &cli.project) {
        (Some(own), before) => own.or(before.as_ref()).cloned(),
        (None, Some(_)) => return Err(CliError::bad_input(format!("--project: `katlas {name}` reads no project"))),
        (None, None) => None,
    };
    let yes = match o.yes() {
        Some(own) => own || cli.yes,
        None if cli.yes => return Err(CliError::bad_input(format!("--yes: `katlas {name}` runs no command from the repository's files"))),
        None => false,
    };
    let mut ctx = Ctx::new(project);
    ctx.yes = yes;
    f(&ctx)
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
    let parsed = Cli::command().try_get_matches().and_then(|m| Ok((Cli::from_arg_matches(&m)?, m.subcommand_name().unwrap_or_default().to_string())));
    let (cli, name) = match parsed {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let name = name.as_str();
    let result = match &cli.command {
        Command::Init(a) => with(&cli, name, a, |ctx| cmd::init::run(a, ctx)),
        Command::Identity(w) => with(&cli, name, w, |ctx| cmd::identity::run(&w.args, ctx)),
        Command::Corpus(g) => with(&cli, name, g, |ctx| cmd::corpus::run(&g.cmd, ctx)),
        Command::Schema(a) => with(&cli, name, &NoOptions, |ctx| cmd::schema::run(a, ctx)),
        Command::Arch(g) => with(&cli, name, g, |ctx| cmd::arch::run(&g.cmd, ctx)),
        Command::Isa(g) => with(&cli, name, g, |ctx| cmd::isa::run(&g.cmd, ctx)),
        Command::Fit(w) => with(&cli, name, w, |ctx| cmd::fit::run(&w.args, ctx)),
        Command::Suggest(w) => with(&cli, name, w, |ctx| cmd::suggest::run(&w.args, ctx)),
        Command::Task(w) => with(&cli, name, w, |ctx| cmd::task::run(&w.args, ctx)),
        Command::Collect(w) => with(&cli, name, w, |ctx| cmd::collect::run(&w.args, ctx)),
        Command::Parse(w) => with(&cli, name, w, |ctx| cmd::parse::run(&w.args, ctx)),
        Command::Provenance(w) => with(&cli, name, w, |ctx| cmd::provenance::run(&w.args, ctx)),
        Command::Build(w) => with(&cli, name, w, |ctx| cmd::build::run(&w.args, ctx)),
        Command::Reach(w) => with(&cli, name, w, |ctx| cmd::reach::run(&w.args, ctx)),
        Command::Lint(g) => with(&cli, name, g, |ctx| cmd::lint::run(&g.cmd, ctx)),
        Command::Eval(w) => with(&cli, name, w, |ctx| cmd::eval::run(&w.args, ctx)),
        Command::Ab(w) => with(&cli, name, w, |ctx| cmd::eval::run_ab(&w.args, ctx)),
        Command::Fleet(g) => with(&cli, name, g, |ctx| cmd::fleet::run(&g.cmd, ctx)),
        Command::Ledger(g) => with(&cli, name, g, |ctx| cmd::ledger::run(&g.cmd, ctx)),
        Command::Gate(w) => with(&cli, name, w, |ctx| cmd::gate::run(&w.args, ctx)),
        Command::Admissions(g) => with(&cli, name, g, |ctx| cmd::admissions::run(&g.cmd, ctx)),
        Command::Route(w) => with(&cli, name, w, |ctx| cmd::route::run(&w.args, ctx)),
        Command::CheckNumeric(a) => with(&cli, name, &NoOptions, |ctx| cmd::check_numeric::run(a, ctx)),
        Command::Trust(w) => with(&cli, name, w, |ctx| cmd::trust::run(&w.args, ctx)),
        Command::Index(g) => with(&cli, name, g, |ctx| cmd::query::run_index(&g.cmd, ctx)),
        Command::Query(w) => with(&cli, name, w, |ctx| cmd::query::run_query(&w.args, ctx)),
        Command::Trend(w) => with(&cli, name, w, |ctx| cmd::trend::run_trend(&w.args, ctx)),
        Command::Export(w) => with(&cli, name, w, |ctx| cmd::export::run(&w.args, ctx)),
        Command::Report(w) => with(&cli, name, w, |ctx| cmd::report::run(&w.args, ctx)),
        Command::Store(g) => with(&cli, name, g, |ctx| cmd::store::run(&g.cmd, ctx)),
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

    /// `katlas ARGS --help` as the user sees it.
    fn help(args: &[&str]) -> String {
        let e = match Cli::command().try_get_matches_from(["katlas"].iter().chain(args).chain(&["--help"])) {
            Err(e) => e,
            Ok(_) => panic!("{args:?} --help printed no help"),
        };
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{e}");
        e.render().to_string()
    }

    #[test]
    fn project_and_yes_show_only_where_they_mean_something() {
        // Neither reads a project nor runs a file's commands.
        for cmd in ["init", "schema", "check-numeric"] {
            let h = help(&[cmd]);
            assert!(!h.contains("--yes") && !h.contains("--project"), "`katlas {cmd} --help` offers --yes or --project:\n{h}");
        }
        // They run commands from the repository's files and read its project.
        // `query --store` reads the team store's URL from katlas.toml, trusted as commands are.
        for cmd in [&["eval"][..], &["collect"], &["task"], &["build"], &["route"], &["gate"], &["store", "push"], &["query"]] {
            let h = help(cmd);
            assert!(h.contains("--yes") && h.contains("--project"), "`katlas {} --help` lacks --yes or --project:\n{h}", cmd.join(" "));
        }
        // They read a project and run nothing from it.
        for cmd in [&["fit"][..], &["suggest"], &["corpus", "ls"], &["ledger", "ls"], &["index", "rebuild"], &["trust"]] {
            let h = help(cmd);
            assert!(h.contains("--project") && !h.contains("--yes"), "`katlas {} --help`:\n{h}", cmd.join(" "));
        }
    }

    #[test]
    fn project_and_yes_before_the_command_reach_it_or_are_refused() {
        use super::{with, NoOptions, Options};
        use clap::Parser;
        let parse = |args: &[&str]| Cli::try_parse_from(["katlas"].iter().chain(args)).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        // `katlas --project P fit ROW` and `katlas --yes eval …` keep working.
        let cli = parse(&["--project", "/p", "--yes", "eval", "--aa"]);
        let super::Command::Eval(w) = &cli.command else { panic!("eval") };
        let (mut project, mut yes) = (None, false);
        with(&cli, "eval", w, |ctx| {
            (project, yes) = (ctx.explicit_root(), ctx.yes);
            Ok(std::process::ExitCode::SUCCESS)
        })
        .unwrap();
        assert_eq!((project.as_deref(), yes), (Some(std::path::Path::new("/p")), true));
        // The command's own option wins over the one before it.
        let cli = parse(&["--project", "/p", "fit", "ROW", "--project", "/q"]);
        let super::Command::Fit(w) = &cli.command else { panic!("fit") };
        assert_eq!(w.project().flatten().map(|p| p.display().to_string()).as_deref(), Some("/q"));
        // `katlas init DIR` is where init makes the project.
        let cli = parse(&["init", "/new"]);
        let super::Command::Init(a) = &cli.command else { panic!("init") };
        assert_eq!(a.project().flatten().map(|p| p.display().to_string()).as_deref(), Some("/new"));
        // Before a command that does not take it, an option is refused, not silently ignored.
        for (args, name, said) in [
            (&["--yes", "schema"][..], "schema", "--yes: `katlas schema` runs no command"),
            (&["--project", "/p", "schema"], "schema", "--project: `katlas schema` reads no project"),
        ] {
            let cli = parse(args);
            let e = with(&cli, name, &NoOptions, |_| panic!("{args:?} ran")).unwrap_err();
            assert!(e.message.starts_with(said), "{args:?}: {}", e.message);
            assert_eq!(e.code, crate::ctx::exit::BAD_INPUT);
        }
    }
}
