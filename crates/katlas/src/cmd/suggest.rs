//! `katlas suggest`: a ranked queue of one-lever experiments that remembers the ledger.

use super::fit::{load, EvidenceArgs};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, Format};
use katlas_advise::history::Ledger;
use katlas_advise::suggest::{provenance_from_row, suggest, KernelProvenance, SuggestOptions, SuggestionQueue};
use katlas_advise::{levers, render, FitView};
use katlas_model::Row;
use serde::{Deserialize, Serialize};
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
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// The last queue shown, so `katlas task --rank N` hands out exactly what was seen.
#[derive(Debug, Serialize, Deserialize)]
pub struct LastQueue {
    pub schema: String,
    pub queue: SuggestionQueue,
    pub fit: FitView,
    pub row: Option<Row>,
    pub provenance: Vec<KernelProvenance>,
}

pub const LAST_SCHEMA: &str = "katlas.suggest.last.v1";

pub fn last_path(ctx: &Ctx) -> Result<PathBuf, CliError> {
    Ok(ctx.layout()?.suggest_last())
}

/// Build the queue for the evidence in `args` (also used by `katlas task`).
pub fn build(evidence: &EvidenceArgs, ledger: Option<&PathBuf>, max: Option<usize>, ctx: &Ctx) -> Result<LastQueue, CliError> {
    let l = load(evidence, ctx)?;
    let ledger_path = match ledger {
        Some(p) => Some(ctx.resolve(p)),
        None => ctx.layout().ok().map(|x| x.ledger()),
    };
    let led = match &ledger_path {
        Some(p) => Some(Ledger::read(p).map_err(CliError::bad_input)?),
        None => None,
    };
    if let Some(led) = &led {
        for e in &led.errors {
            eprintln!("katlas: warning: ledger line skipped: {e}");
        }
    }
    let mut provenance = l.row.as_ref().map(provenance_from_row).unwrap_or_default();
    provenance.extend(locate_sources(&l.fit, &l.db, ctx));
    let queue = suggest(&l.fit, l.row.as_ref(), &l.db, &l.rules, &SuggestOptions { ledger: led.as_ref(), provenance: &provenance, max });
    Ok(LastQueue { schema: LAST_SCHEMA.into(), queue, fit: l.fit, row: l.row, provenance })
}

/// Dispatch provenance of the fit's live hot kernels from the project's sources
/// (`[project] kernel_roots` / `dispatch_roots`, collect's ranking): the allowed files.
pub fn locate_sources(fit: &FitView, db: &katlas_arch::ArchDb, ctx: &Ctx) -> Vec<KernelProvenance> {
    let Ok(project) = ctx.project() else { return vec![] };
    let mut opts = katlas_collect::provenance::ProvenanceOptions::new(&project.root);
    let pc = &project.config.project;
    if !pc.kernel_roots.is_empty() {
        opts.kernel_roots = pc.kernel_roots.iter().map(PathBuf::from).collect();
    }
    if !pc.dispatch_roots.is_empty() {
        opts.dispatch_roots = pc.dispatch_roots.iter().map(PathBuf::from).collect();
    }
    if let Some(a) = &fit.header.arch {
        opts = opts.with_arch(db, a);
    }
    fit.kernels
        .iter()
        .filter(|k| !k.stopped())
        .map(|k| {
            let p = katlas_collect::provenance::locate(&k.name, &opts);
            KernelProvenance {
                kernel: k.name.clone(),
                sources: p.sources.iter().map(|c| c.path.clone()).collect(),
                dispatch_refs: p.dispatch.iter().map(|d| format!("{}:{}", d.path, d.line)).collect(),
                env_controls: p.env_knobs.clone(),
            }
        })
        .filter(|p| !(p.sources.is_empty() && p.dispatch_refs.is_empty()))
        .collect()
}

pub fn run(args: &SuggestArgs, ctx: &Ctx) -> CmdResult {
    if args.catalog {
        let rules = katlas_advise::Rules::load(ctx.layout().ok().map(|l| l.rules_dir()).as_deref()).map_err(CliError::bad_input)?;
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
