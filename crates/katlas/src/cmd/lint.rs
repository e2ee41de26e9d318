//! `katlas lint dispatch`: the perf-variant allowlist against the ledger and the source.

use crate::cmd::build::settings;
use crate::ctx::{CmdResult, Ctx};
use crate::output::{paint, print_json, table, Format, FormatArg};
use katlas_build::Severity;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum LintCmd {
    /// Check [[perf_allowlist]] rows against the ledger, shadowing and `// perf:` dispatch branches.
    Dispatch(DispatchArgs),
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// Atoms to check instead of the matrix (comma separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub arch: Option<Vec<String>>,
    /// Ledger to read evidence from (default: .katlas/ledger.jsonl).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(c: &LintCmd, ctx: &Ctx) -> CmdResult {
    match c {
        LintCmd::Dispatch(a) => dispatch(a, ctx),
    }
}

fn dispatch(a: &DispatchArgs, ctx: &Ctx) -> CmdResult {
    let s = settings(ctx, a.arch.as_deref())?;
    let ledger = a.ledger.as_ref().map(|p| ctx.resolve(p));
    let r = katlas_build::lint_dispatch(ctx.project()?, &s, ledger.as_deref())?;
    let code = if r.has_errors() { ExitCode::from(1) } else { ExitCode::SUCCESS };
    if a.format.format == Format::Json {
        print_json(&r);
        return Ok(code);
    }
    for f in &r.findings {
        let sev = match f.severity {
            Severity::Error => paint(ctx.color, "31", "error"),
            Severity::Warning => paint(ctx.color, "33", "warning"),
            Severity::Info => "info".into(),
        };
        println!("{}: {sev}[{}]: {}", f.at.as_deref().unwrap_or(&r.ledger), f.code, f.message);
    }
    if !r.effective.is_empty() {
        let mut by_kernel: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for e in &r.effective {
            let cell = match e.row {
                Some(i) => format!("{}{} (row {i})", e.variant, if e.measured { "" } else { " [unmeasured]" }),
                None => "default".to_string(),
            };
            by_kernel.entry(e.kernel.as_str()).or_default().push(cell);
        }
        let mut header = vec!["kernel"];
        header.extend(r.matrix.iter().map(String::as_str));
        let mut t = table(a.format.format, &header);
        for (k, cells) in by_kernel {
            let mut row = vec![k.to_string()];
            row.extend(cells);
            t.add_row(row);
        }
        println!("\nvariant each atom runs (first matching row; no row = portable default):\n{t}");
    }
    let s = &r.summary;
    println!("{} row(s), {} ledger entr(ies), {} annotation(s): {} error(s), {} warning(s)", s.rows, s.ledger_entries, s.annotations, s.errors, s.warnings);
    Ok(code)
}
