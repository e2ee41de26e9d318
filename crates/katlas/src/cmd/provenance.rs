//! `katlas provenance`: for each hot kernel, ranked source files and dispatch
//! references in the project (arch-aware, as the project's runtime resolves them: its
//! family rule, load patterns and variant selectors from `[reach]` or the preset), every
//! candidate with score and reasons. The tree is read once for all kernels asked.

use crate::cmd::evidence::{load_rows, Source};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, say_line, table, Format, FormatArg};
use katlas_collect::loads::{parse_patterns, FamilyRule, Selector};
use katlas_collect::provenance::{ProvenanceIndex, ProvenanceOptions};
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
    /// Every kernel name the project's profiler records (`[reach] profile_patterns`; hipfire:
    /// the `begin_timer(…, "NAME", …)` literals).
    #[arg(long)]
    pub all_profiled: bool,
    /// Target arch atom for chip/family tags (default: the row's arch).
    #[arg(long)]
    pub arch: Option<String>,
    /// Kernel source roots (default: katlas.toml [project] kernel_roots, else the preset's
    /// (hipfire: kernels/src), else kernels/, src/ and the project's top-level Python packages).
    #[arg(long = "kernel-root", value_name = "DIR")]
    pub kernel_roots: Vec<PathBuf>,
    /// Dispatch (host code) roots (default: [project] dispatch_roots, else the preset's
    /// (hipfire: crates), else src/ and the project's top-level Python packages).
    #[arg(long = "dispatch-root", value_name = "DIR")]
    pub dispatch_roots: Vec<PathBuf>,
    /// An installed Python package, by import name (`liger_kernel`), whose sources join both
    /// roots; found by the workload's interpreter ([provenance] python, default python3). Adds
    /// to [provenance] packages.
    #[arg(long = "package", value_name = "NAME")]
    pub packages: Vec<String>,
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
    if kernels.is_empty() && !args.all_profiled {
        return Err(CliError::bad_input("give kernel names, --row ID or --all-profiled"));
    }
    let mut opts = project_options(project)?;
    if args.all_profiled && opts.profile_patterns.is_empty() {
        return Err(CliError::bad_input("--all-profiled: no profile patterns ([reach] profile_patterns, or preset = \"hipfire\")"));
    }
    if !args.kernel_roots.is_empty() {
        opts.kernel_roots = args.kernel_roots.iter().map(|p| ctx.resolve(p)).collect();
    }
    if !args.dispatch_roots.is_empty() {
        opts.dispatch_roots = args.dispatch_roots.iter().map(|p| ctx.resolve(p)).collect();
    }
    let pc = &project.config.provenance;
    let mut packages = pc.packages.clone();
    packages.extend(args.packages.iter().filter(|p| !pc.packages.contains(p)).cloned());
    if !packages.is_empty() {
        let python = python(ctx)?;
        for dir in katlas_collect::provenance::python::find_packages(&python, &packages, &project.root).map_err(CliError::bad_input)? {
            opts.kernel_roots.push(dir.clone());
            opts.dispatch_roots.push(dir);
        }
    }
    if let Some(a) = &arch {
        let db = katlas_arch::ArchDb::load(Some(&katlas_corpus::Layout::for_project(&project.root).arch_rules_dir()))?;
        if db.atom(a).is_none() {
            return Err(CliError::bad_input(format!("--arch {a}: not an atom of the arch table (katlas arch ls)")));
        }
        opts = opts.with_arch(&db, a);
    }
    let index = ProvenanceIndex::build(&opts);
    if args.all_profiled {
        let names = index.profiled_names();
        if names.is_empty() {
            let patterns: Vec<&str> = opts.profile_patterns.iter().map(|p| p.text.as_str()).collect();
            return Err(CliError::bad_input(format!(
                "--all-profiled: no profile pattern ({}) matches under the dispatch roots {:?}",
                patterns.join(", "),
                opts.dispatch_roots
            )));
        }
        for k in names {
            if !kernels.contains(&k) {
                kernels.push(k);
            }
        }
    }
    let found: Vec<_> = kernels.iter().map(|k| index.locate(k)).collect();
    match args.format.format {
        Format::Json => print_json(&found),
        f => {
            for p in &found {
                say_line!(
                    "{} (base `{}`, variants {}; arch {}, families {}{})",
                    p.kernel,
                    p.base_name,
                    p.variants.join(", "),
                    p.arch.as_deref().unwrap_or("-"),
                    if p.families.is_empty() { "-".into() } else { p.families.join(", ") },
                    if p.family_rule == "table" || p.family_rule.is_empty() { String::new() } else { format!(" by family rule {}", p.family_rule) }
                );
                if !p.launches.is_empty() {
                    say_line!("  a profiler label: its timed code launches {}", p.launches.join(", "));
                }
                let mut t = table(f, &["score", "source", "tag", "reasons"]);
                for s in &p.sources {
                    t.add_row(vec![format!("{:.0}", s.score), s.path.clone(), s.tag_kind.clone(), s.reasons.join("; ")]);
                }
                if !p.sources.is_empty() {
                    println!("{t}");
                } else {
                    say_line!("  no source candidates under {:?}", opts.kernel_roots);
                }
                for s in p.sources.iter().filter(|s| s.hazard.is_some()) {
                    say_line!("  hazard: {}: {}", s.path, s.hazard.as_deref().unwrap_or(""));
                }
                let mut d = table(f, &["score", "dispatch", "line", "kind", "text", "env knobs"]);
                for r in &p.dispatch {
                    let kind = match &r.via {
                        Some(v) => format!("{} {v}", r.kind),
                        None => r.kind.clone(),
                    };
                    d.add_row(vec![format!("{:.0}", r.score), r.path.clone(), r.line.to_string(), kind, r.text.clone(), r.env_knobs.join(", ")]);
                }
                if !p.dispatch.is_empty() {
                    println!("{d}");
                }
                if !p.env_knobs.is_empty() {
                    say_line!("  env knobs: {}", p.env_knobs.join(", "));
                }
                for n in &p.notes {
                    say_line!("  note: {n}");
                }
                println!();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The project's provenance options, arch not yet set: its roots (`[project]`, else the preset's,
/// else provenance's defaults) and its runtime model (`[reach]`, else the preset's). `katlas
/// provenance`, `suggest` and `task` all start here, so they answer as `katlas reach` does.
pub(crate) fn project_options(project: &katlas_project::Project) -> Result<ProvenanceOptions, CliError> {
    let mut opts = ProvenanceOptions::new(&project.root);
    let rc = katlas_build::config::reach_config(project).map_err(|e| CliError::bad_input(e.to_string()))?;
    if let Some(r) = &rc.family_rule {
        opts.family_rule = FamilyRule::parse(r).map_err(CliError::bad_input)?;
    }
    opts.load_patterns = parse_patterns(rc.load_patterns.as_deref().unwrap_or_default()).map_err(CliError::bad_input)?;
    opts.profile_patterns = parse_patterns(rc.profile_patterns.as_deref().unwrap_or_default()).map_err(CliError::bad_input)?;
    for sel in rc.selectors.iter().flatten() {
        // katlas-build compiles the same `loads.rs`: the two Selector types have one shape.
        let v = serde_json::to_value(sel).map_err(CliError::bad_input)?;
        opts.selectors.push(serde_json::from_value::<Selector>(v).map_err(CliError::bad_input)?);
    }
    opts.selector_functions = rc.selector_functions.unwrap_or_default();
    let cfg = &project.config.project;
    let kernel_roots = cfg.effective_kernel_roots();
    if !kernel_roots.is_empty() {
        opts.kernel_roots = kernel_roots.iter().map(PathBuf::from).collect();
    }
    let dispatch_roots = cfg.effective_dispatch_roots();
    if !dispatch_roots.is_empty() {
        opts.dispatch_roots = dispatch_roots.iter().map(PathBuf::from).collect();
    }
    Ok(opts)
}

/// The interpreter of `[provenance] python` (default `python3`), which finds installed packages.
/// It is a command katlas runs: one named by katlas.toml needs trust. A relative path
/// (`.venv/bin/python`) is the project's; a bare name is looked up on PATH.
pub(crate) fn python(ctx: &Ctx) -> Result<String, CliError> {
    let project = ctx.project()?;
    let pc = &project.config.provenance;
    if let Some(p) = &pc.python {
        crate::trust::authorize(ctx, &[project.config_commands(vec![("[provenance] python".into(), p.clone())])])?;
    }
    Ok(match pc.python.as_deref() {
        Some(p) if p.contains('/') && std::path::Path::new(p).is_relative() => project.root.join(p).display().to_string(),
        Some(p) => p.to_string(),
        None => "python3".into(),
    })
}
