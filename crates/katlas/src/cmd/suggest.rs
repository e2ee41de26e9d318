//! `katlas suggest`: a ranked queue of one-lever experiments that remembers the ledger.

use super::evidence::{load, EvidenceArgs};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, Format};
use katlas_advise::history::Ledger;
use katlas_advise::queue::{build_queue, LastQueue, QueueInput};
use katlas_advise::{levers, render};
use katlas_collect::provenance::ProvenanceOptions;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SuggestArgs {
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Ledger to remember (default: the project's .katlas/ledger.jsonl).
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<PathBuf>,
    /// Most suggestions to list (default: levers.toml settings.max_suggestions).
    #[arg(long, value_name = "N")]
    pub max: Option<usize>,
    /// Print the lever catalog instead of suggestions.
    #[arg(long)]
    pub catalog: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub fn last_path(ctx: &Ctx) -> Result<PathBuf, CliError> {
    Ok(ctx.layout()?.suggest_last())
}

/// The project's provenance options (its roots and runtime model, as `katlas provenance` reads
/// them), for the allowed files; none outside a project.
pub fn source_options(ctx: &Ctx) -> Result<Option<ProvenanceOptions>, CliError> {
    match ctx.project() {
        Ok(p) => super::provenance::project_options(p).map(Some),
        Err(_) => Ok(None),
    }
}

/// Build the queue for the evidence in `args` (also used by `katlas task`).
pub fn build(evidence: &EvidenceArgs, ledger: Option<&PathBuf>, max: Option<usize>, ctx: &Ctx) -> Result<LastQueue, CliError> {
    let l = load(evidence, ctx)?;
    let ledger_path = match ledger {
        Some(p) => Some(ctx.resolve(p)),
        None => ctx.layout().ok().map(|x| x.ledger()),
    };
    let led = match &ledger_path {
        Some(p) => Some(Ledger::read(p)?),
        None => None,
    };
    if let Some(led) = &led {
        for e in &led.errors {
            eprintln!("katlas: warning: ledger line skipped: {e}");
        }
    }
    let sources = source_options(ctx)?;
    Ok(build_queue(QueueInput { fit: l.fit, row: l.row, db: &l.db, rules: &l.rules, ledger: led.as_ref(), sources: sources.as_ref(), max }))
}

pub fn run(args: &SuggestArgs, ctx: &Ctx) -> CmdResult {
    if args.catalog {
        let rules = katlas_advise::Rules::load(ctx.layout().ok().map(|l| l.rules_dir()).as_deref())?;
        print!("{}", levers::catalog_markdown(&rules.levers));
        return Ok(ExitCode::SUCCESS);
    }
    let last = build(&args.evidence, args.ledger.as_ref(), args.max, ctx)?;
    // Remember the queue for `katlas task --rank N` (best effort outside a project).
    if let Ok(p) = last_path(ctx) {
        if let Ok(text) = serde_json::to_string(&last) {
            if let Err(e) = katlas_fs::write_atomic(&p, text.as_bytes()) {
                eprintln!("katlas: warning: {}: {e} (`katlas task --rank` needs the ROW again)", p.display());
            }
        }
    }
    match args.format {
        Format::Json => print_json(&last.queue),
        Format::Markdown => print!("{}", render::queue_markdown(&last.queue)),
        Format::Text => print!("{}", render::queue_text(&last.queue)),
    }
    Ok(ExitCode::SUCCESS)
}
