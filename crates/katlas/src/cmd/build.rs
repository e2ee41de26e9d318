//! `katlas build`: compile the arch matrix (see docs/build.md).

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{paint, print_json, table, Format, FormatArg};
use katlas_build::{BuildOptions, JobResult, JobStatus, Settings};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Atoms to build instead of the matrix (comma separated: gfx1100,sm_90).
    #[arg(long, value_name = "LIST", value_delimiter = ',', conflicts_with = "touched")]
    pub arch: Option<Vec<String>>,
    /// Build every matrix atom that can reach a file changed since REV (git diff --name-only REV, plus untracked files).
    #[arg(long, value_name = "REV")]
    pub touched: Option<String>,
    /// Parallel compiles (default: [build] jobs, else all cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Skip disassembly (no instruction mix in the manifest; faster).
    #[arg(long)]
    pub no_mix: bool,
    /// Only sources at or under these paths (default: every kernel root).
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn settings(ctx: &Ctx, arch: Option<&[String]>) -> Result<Settings, CliError> {
    Settings::load(ctx.project()?, arch).map_err(CliError::from)
}

/// What `[build]` makes katlas execute or load: a compiler path, an NVRTC library
/// (dlopened), or extra flags (which can load plugins). Named compilers are not
/// commands from the file.
fn build_commands(ctx: &Ctx) -> Result<katlas_project::trust::CommandSource, CliError> {
    let project = ctx.project()?;
    let cfg: katlas_build::config::BuildConfig = project.section(&["build"])?.unwrap_or_default();
    let mut cmds = Vec::new();
    let named = ["auto", "clang", "hipcc", "nvcc", "nvrtc"];
    for (key, v) in [("hip_compiler", &cfg.hip_compiler), ("cuda_compiler", &cfg.cuda_compiler)] {
        if let Some(c) = v.as_ref().filter(|c| !named.contains(&c.as_str())) {
            cmds.push((format!("[build] {key}"), c.clone()));
        }
    }
    if let Some(n) = &cfg.nvrtc {
        cmds.push(("[build] nvrtc (loaded)".into(), n.clone()));
    }
    for (key, v) in [("hip_flags", &cfg.hip_flags), ("cuda_flags", &cfg.cuda_flags)] {
        if !v.is_empty() {
            cmds.push((format!("[build] {key}"), v.join(" ")));
        }
    }
    Ok(project.config_commands(cmds))
}

pub fn run(a: &BuildArgs, ctx: &Ctx) -> CmdResult {
    if a.jobs == Some(0) {
        return Err(CliError::bad_input("--jobs: must be at least 1"));
    }
    let s = settings(ctx, a.arch.as_deref())?;
    crate::trust::authorize(ctx, &[build_commands(ctx)?])?;
    let opts = BuildOptions { touched: a.touched.clone(), paths: a.paths.iter().map(|p| ctx.resolve(p)).collect(), jobs: a.jobs, mix: !a.no_mix };
    let color = ctx.color;
    let progress = move |r: &JobResult, n: usize, total: usize| {
        let st = match r.status {
            JobStatus::Compiled => paint(color, "32", "ok    "),
            JobStatus::Cached => paint(color, "2", "cached"),
            JobStatus::Failed => paint(color, "31", "FAILED"),
            // Never run, so never reported as progress; listed after the build.
            JobStatus::MissingToolchain => paint(color, "33", "MISSING"),
        };
        eprintln!("[{n:>3}/{total}] {st} {:<8} {} ({:.1}s)", r.atom, r.file, r.duration_ms as f64 / 1000.0);
    };
    let (report, skipped) = katlas_build::build::run_build_with_skips(&s, &opts, Some(&progress))?;
    let code = ExitCode::from(report.exit_code());
    if a.format.format == Format::Json {
        print_json(&report);
        missing_note(&report);
        return Ok(code);
    }
    let from = report.kernel_roots_from.unwrap_or(s.kernel_roots_from);
    println!("kernel roots: {} ({})", if report.kernel_roots.is_empty() { "none".into() } else { report.kernel_roots.join(", ") }, from.describe());
    if let Some(t) = &report.touched {
        println!("touched since {}: {} changed file(s); atoms: {}", t.rev, t.changed.len(), if t.atoms.is_empty() { "none".into() } else { t.atoms.join(" ") });
        for (atom, files) in &t.reasons {
            println!("  {atom}: {}", files.join(", "));
        }
    }
    for c in &report.compilers {
        println!("{} compiler: {} {} ({})", c.lang, c.kind, c.path.as_deref().unwrap_or("-"), c.version);
    }
    // Every failure with everything its compiler said, per atom.
    for j in report.jobs.iter().filter(|j| j.status == JobStatus::Failed) {
        println!();
        println!(
            "{}",
            paint(
                color,
                "31",
                &format!("error: {} failed for {} (exit {}; log {})", j.file, j.atom, j.exit_code.map(|c| c.to_string()).unwrap_or("-".into()), j.log)
            )
        );
        for l in j.message.as_deref().unwrap_or("").lines() {
            println!("  {l}");
        }
    }
    // Pairs [[build.rule]]s keep from compiling: one line per rule reason, with counts per atom.
    let mut by_reason: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for k in &skipped {
        *by_reason.entry(k.reason.as_str()).or_default().entry(k.atom.as_str()).or_default() += 1;
    }
    if !by_reason.is_empty() {
        println!();
    }
    for (reason, atoms) in &by_reason {
        let n: usize = atoms.values().sum();
        let per: Vec<String> = atoms.iter().map(|(a, c)| format!("{a} {c}")).collect();
        println!("skipped {n} (file, atom) pair(s) by rule: {reason} ({})", per.join(", "));
    }
    // Jobs a missing toolchain kept from compiling, one line per toolchain; the install hint
    // goes to stderr with the error (missing_note), in JSON mode too.
    for m in &report.missing_toolchains {
        println!();
        let what = if m.what == "hip_headers" { format!("{} headers", m.lang.to_uppercase()) } else { format!("{} compiler", m.lang.to_uppercase()) };
        println!(
            "{}",
            paint(color, "33", &format!("missing toolchain: {what}: {} job(s) not compiled, for {} (what to install: below)", m.jobs, m.atoms.join(" ")))
        );
    }
    let mut per_atom: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    for j in &report.jobs {
        let e = per_atom.entry(j.atom.as_str()).or_default();
        e[match j.status {
            JobStatus::Compiled => 0,
            JobStatus::Cached => 1,
            JobStatus::Failed => 2,
            JobStatus::MissingToolchain => 3,
        }] += 1;
    }
    let mut t = table(a.format.format, &["atom", "compiled", "cached", "failed", "missing toolchain"]);
    for atom in &report.atoms {
        let c = per_atom.get(atom.as_str()).copied().unwrap_or_default();
        t.add_row(vec![atom.clone(), c[0].to_string(), c[1].to_string(), c[2].to_string(), c[3].to_string()]);
    }
    println!();
    println!("{t}");
    if let Some(d) = &report.isa_diff {
        if d.kernels.is_empty() && d.added.is_empty() && d.removed.is_empty() {
            println!("ISA: no resource or mix change against the previous build");
        } else {
            println!("ISA changes against the previous build:");
            for k in &d.kernels {
                let res: Vec<String> = k.resources.iter().map(|x| format!("{} {}→{} ({:+})", x.field, opt(x.a), opt(x.b), x.delta)).collect();
                let mix: Vec<String> = k.mix.iter().map(|x| format!("{} {:+}", x.field, x.delta)).collect();
                let flags = if k.flags.is_empty() { String::new() } else { format!("  [{}]", k.flags.join(", ")) };
                let mut parts = Vec::new();
                if !res.is_empty() {
                    parts.push(res.join(", "));
                }
                if !mix.is_empty() {
                    parts.push(format!("mix {}", mix.join(", ")));
                }
                println!("  {} {}: {}{}", k.arch, k.name, parts.join("; "), flags);
            }
            for x in &d.added {
                println!("  + {x}");
            }
            for x in &d.removed {
                println!("  - {x}");
            }
        }
    }
    for e in &report.isa_errors {
        eprintln!("katlas: warning: {e}");
    }
    if let Some(m) = &report.manifest {
        println!("manifest: {m}");
    }
    let s = &report.summary;
    let atoms = |v: &[String]| if v.is_empty() { String::new() } else { format!(" (atoms: {})", v.join(" ")) };
    println!(
        "{} job(s): {} built ({} compiled, {} cached), {} failed{}, {} skipped for a missing toolchain{} in {:.1}s",
        s.jobs,
        s.compiled + s.cached,
        s.compiled,
        s.cached,
        s.failed,
        atoms(&s.failed_atoms),
        s.missing_toolchain,
        atoms(&s.missing_atoms),
        s.elapsed_ms as f64 / 1000.0
    );
    missing_note(&report);
    Ok(code)
}

/// On stderr, so no build that left atoms uncompiled reads as a clean one (exit 3 unless a
/// compile failed: exit 1 wins).
fn missing_note(report: &katlas_build::BuildReport) {
    let s = &report.summary;
    if s.missing_toolchain == 0 {
        return;
    }
    let built = s.compiled + s.cached;
    let head = if built == 0 { "nothing built".to_string() } else { format!("build incomplete: {built} job(s) built") };
    eprintln!(
        "katlas: error: {head}, {} job(s) not compiled for a missing toolchain (atoms: {}); install what each line below names, or build only the atoms you can with --arch or [build] matrix",
        s.missing_toolchain,
        s.missing_atoms.join(" ")
    );
    for m in &report.missing_toolchains {
        eprintln!("katlas: error: {} (needed for {})", m.message, m.atoms.join(" "));
    }
}

fn opt(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}
