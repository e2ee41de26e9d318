//! `katlas provenance`: for each hot kernel, ranked source files and dispatch
//! references in the project (arch-aware), every candidate with score and reasons.

use crate::cmd::corpus::{load_rows, Source};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, table, Format, FormatArg};
use katlas_collect::provenance::{locate, ProvenanceOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ProvenanceArgs {
    /// Kernel names (mangled or demangled).
    pub kernels: Vec<String>,
    /// Take the hottest kernels of this row (id or unique prefix) instead.
    #[arg(long, value_name = "ID")]
    pub row: Option<String>,
    /// How many of the row's kernels (by GPU time).
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Target arch atom for chip/family tags (default: the row's arch).
    #[arg(long)]
    pub arch: Option<String>,
    /// Kernel source roots (default: katlas.toml [project] kernel_roots, else kernels/ and src/).
    #[arg(long = "kernel-root", value_name = "DIR")]
    pub kernel_roots: Vec<PathBuf>,
    /// Dispatch (host code) roots (default: [project] dispatch_roots, else src/).
    #[arg(long = "dispatch-root", value_name = "DIR")]
    pub dispatch_roots: Vec<PathBuf>,
    #[command(flatten)]
    pub source: Source,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(args: &ProvenanceArgs, ctx: &Ctx) -> CmdResult {
    let project = ctx.project()?;
    let mut kernels = args.kernels.clone();
    let mut arch = args.arch.clone();
    if let Some(id) = &args.row {
        let report = load_rows(&args.source, ctx)?;
        let hits: Vec<_> = report.records.iter().filter(|r| r.record.id.starts_with(id.as_str())).collect();
        let row = match hits.as_slice() {
            [one] => &one.record,
            [] => return Err(CliError::bad_input(format!("--row {id}: no such row"))),
            _ => return Err(CliError::bad_input(format!("--row {id}: {} rows match; give more of the id", hits.len()))),
        };
        let mut ks: Vec<_> = row.kernels.iter().collect();
        ks.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        kernels.extend(ks.iter().take(args.top).map(|k| k.name.clone()));
        arch = arch.or_else(|| row.arch.clone()).or_else(|| row.identity.arch().map(str::to_string));
    }
    if kernels.is_empty() {
        return Err(CliError::bad_input("give kernel names or --row ID"));
    }
    let mut opts = ProvenanceOptions::new(&project.root);
    let cfg = &project.config.project;
    if !args.kernel_roots.is_empty() {
        opts.kernel_roots = args.kernel_roots.iter().map(|p| ctx.resolve(p)).collect();
    } else if !cfg.kernel_roots.is_empty() {
        opts.kernel_roots = cfg.kernel_roots.iter().map(PathBuf::from).collect();
    }
    if !args.dispatch_roots.is_empty() {
        opts.dispatch_roots = args.dispatch_roots.iter().map(|p| ctx.resolve(p)).collect();
    } else if !cfg.dispatch_roots.is_empty() {
        opts.dispatch_roots = cfg.dispatch_roots.iter().map(PathBuf::from).collect();
    }
    if let Some(a) = &arch {
        let db = katlas_arch::ArchDb::load(Some(&katlas_arch::ArchDb::override_dir(&project.root))).map_err(CliError::bad_input)?;
        if db.atom(a).is_none() {
            return Err(CliError::bad_input(format!("--arch {a}: not an atom of the arch table (katlas arch ls)")));
        }
        opts = opts.with_arch(&db, a);
    }
    let found: Vec<_> = kernels.iter().map(|k| locate(k, &opts)).collect();
    match args.format.format {
        Format::Json => print_json(&found),
        f => {
            for p in &found {
                println!(
                    "{} (base `{}`, variants {}; arch {}, families {})",
                    p.kernel,
                    p.base_name,
                    p.variants.join(", "),
                    p.arch.as_deref().unwrap_or("-"),
                    if p.families.is_empty() { "-".into() } else { p.families.join(", ") }
                );
                let mut t = table(f, &["score", "source", "tag", "reasons"]);
                for s in &p.sources {
                    t.add_row(vec![format!("{:.0}", s.score), s.path.clone(), s.tag_kind.clone(), s.reasons.join("; ")]);
                }
                if !p.sources.is_empty() {
                    println!("{t}");
                } else {
                    println!("  no source candidates under {:?}", opts.kernel_roots);
                }
                let mut d = table(f, &["score", "dispatch", "line", "text", "env knobs"]);
                for r in &p.dispatch {
                    d.add_row(vec![format!("{:.0}", r.score), r.path.clone(), r.line.to_string(), r.text.clone(), r.env_knobs.join(", ")]);
                }
                if !p.dispatch.is_empty() {
                    println!("{d}");
                }
                println!();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
