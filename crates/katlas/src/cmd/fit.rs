//! `katlas fit`: each hot kernel against its hardware (the evidence it reads is
//! [`super::evidence`]'s, shared with suggest, task and report).

use super::evidence::{load, EvidenceArgs};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::printable_lines;
use clap::ValueEnum;
use katlas_advise::render;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum FitFormat {
    #[default]
    Text,
    Json,
    Markdown,
    /// A standalone HTML page.
    Html,
}

#[derive(Debug, clap::Args)]
pub struct FitArgs {
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Output format; html is a standalone page.
    #[arg(long, value_enum, default_value_t = FitFormat::Text)]
    pub format: FitFormat,
    /// Text and markdown: every kernel's findings, resources and instruction mix (the default
    /// leads with the phase's finding and each top kernel's limit once).
    #[arg(long)]
    pub verbose: bool,
    /// Compare against this baseline row (same forms as ROW, read with the same --parse and
    /// --phase): per-kernel time, calls, share and bandwidth deltas, kernels that appeared or
    /// vanished. Rows of another workload, phase, shape or arch are refused; another host,
    /// product or binary is a warning.
    #[arg(long, value_name = "ROW")]
    pub baseline: Option<String>,
}

pub fn run(args: &FitArgs, ctx: &Ctx) -> CmdResult {
    if let Some(b) = &args.baseline {
        return run_compare(args, b, ctx);
    }
    let l = load(&args.evidence, ctx)?;
    match args.format {
        FitFormat::Json => crate::output::print_json(&l.fit),
        FitFormat::Markdown if args.verbose => print!("{}", printable_lines(&render::fit_markdown_verbose(&l.fit))),
        FitFormat::Markdown => print!("{}", printable_lines(&render::fit_markdown(&l.fit))),
        FitFormat::Html => print!("{}", katlas_report::fit_page(&l.fit)),
        FitFormat::Text if args.verbose => print!("{}", printable_lines(&render::fit_text_verbose(&l.fit))),
        FitFormat::Text => print!("{}", printable_lines(&render::fit_text(&l.fit))),
    }
    Ok(ExitCode::SUCCESS)
}

/// `fit ROW --baseline ROW2`: both rows read the same way, then compared.
fn run_compare(args: &FitArgs, baseline: &str, ctx: &Ctx) -> CmdResult {
    let cand = load(&args.evidence, ctx)?;
    let base_args = EvidenceArgs { row: Some(baseline.to_string()), ..args.evidence.clone() };
    let base = load(&base_args, ctx)?;
    let (Some(rb), Some(ra)) = (cand.row.as_ref(), base.row.as_ref()) else {
        return Err(CliError::bad_input("--baseline compares two profiles: give ROW and --baseline ROW2"));
    };
    let c = katlas_advise::compare::compare((ra, &base.fit, base.fit.header.row_source.as_deref()), (rb, &cand.fit, cand.fit.header.row_source.as_deref()))
        .map_err(|e| CliError::bad_input(format!("--baseline {baseline}: {e}")))?;
    match args.format {
        FitFormat::Json => crate::output::print_json(&c),
        FitFormat::Markdown | FitFormat::Html => print!("{}", printable_lines(&katlas_advise::compare::compare_doc(&c, true))),
        FitFormat::Text => print!("{}", printable_lines(&katlas_advise::compare::compare_doc(&c, false))),
    }
    Ok(ExitCode::SUCCESS)
}
