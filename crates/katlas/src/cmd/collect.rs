//! `katlas collect WORKLOAD`: run a workload spec in fresh processes and
//! append one row per (run, phase) to the corpus.

use crate::cmd::fleet::job;
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, table, Format, FormatArg};
use katlas_collect::collect::{collect, CollectOptions};
use katlas_collect::ops::OpRules;
use katlas_collect::spec;
use katlas_model::fleet::FleetCommand;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// Workload name: `[workload.NAME]` in katlas.toml, `workloads/NAME.toml`, or a preset.
    #[arg(required_unless_present_any = ["list", "spec"])]
    pub workload: Option<String>,
    /// Read the spec from this TOML file instead.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// Set a parameter (repeatable); overrides params and pins a matrix key.
    #[arg(long = "set", value_name = "K=V")]
    pub set: Vec<String>,
    /// Measured runs per combination (overrides the spec).
    #[arg(long)]
    pub runs: Option<u32>,
    /// Fresh-process warmup runs per combination (overrides the spec).
    #[arg(long)]
    pub warmup: Option<u32>,
    /// Apply the spec's profiling switches ([profile]); recorded as instrumentation.
    #[arg(long)]
    pub profile: bool,
    /// Write every code object the CUDA driver loads into the run directory (a CUPTI injection
    /// library, katlas-capture), so `fit` reads the ISA of what ran — cuBLASLt's run-time nvjet
    /// kernels included — with no scan command. NVIDIA only; needs CUPTI on the machine.
    #[arg(long)]
    pub capture_modules: bool,
    /// Append rows here instead of .katlas/corpus/<host>-<day>.jsonl.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// List the workloads this project can run.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub fleet: crate::cmd::fleet::FleetArgs,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(args: &CollectArgs, ctx: &Ctx) -> CmdResult {
    let project = ctx.project()?;
    if args.list {
        let all = spec::available(project);
        match args.format.format {
            Format::Json => print_json(&all.iter().map(|(n, s)| serde_json::json!({"name": n, "source": s})).collect::<Vec<_>>()),
            f => {
                let mut t = table(f, &["workload", "source"]);
                for (n, s) in all {
                    t.add_row(vec![n, s]);
                }
                println!("{t}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let ls = match &args.spec {
        Some(f) => spec::load_file(&ctx.resolve(f), args.workload.as_deref())?,
        None => spec::load(project, args.workload.as_deref().expect("clap requires it"))?,
    };
    if !ls.source.starts_with("preset:") {
        let show = |c: &spec::CommandSpec| match c {
            spec::CommandSpec::Shell(s) => s.clone(),
            spec::CommandSpec::Argv(v) => v.join(" "),
        };
        // With the command, all else that decides what it runs: env (`LD_PRELOAD` runs code),
        // the working directory, and the profiling command, arguments and env.
        let w = &ls.name;
        let mut cmds = vec![(format!("workload {w} command"), show(&ls.spec.command))];
        cmds.extend(ls.spec.env.iter().map(|(k, v)| (format!("workload {w} env {k}"), v.clone())));
        cmds.extend(ls.spec.cwd.iter().map(|c| (format!("workload {w} cwd"), c.clone())));
        if let Some(p) = ls.spec.profile.as_ref().filter(|_| args.profile) {
            cmds.extend(p.command.iter().map(|pc| (format!("workload {w} profile.command"), show(pc))));
            cmds.extend((!p.args.is_empty()).then(|| (format!("workload {w} profile.args"), p.args.join(" "))));
            cmds.extend(p.env.iter().map(|(k, v)| (format!("workload {w} profile.env {k}"), v.clone())));
        }
        let file = std::path::Path::new(&ls.source);
        let src = if project.config_path.as_deref() == Some(file) { project.config_commands(cmds) } else { crate::trust::source_of(file, cmds)? };
        crate::trust::authorize(ctx, &[src])?;
    }
    if (args.fleet.on.is_some() || args.fleet.fleet_target.is_some()) && (args.list || args.output.is_some()) {
        return Err(CliError::bad_input("--list and --output run here: a fleet's collect writes each target's rows to its own corpus file"));
    }
    if args.fleet.on.is_some() {
        // The workload's commands were shown and trusted above, here, where a person answers;
        // the jobs on the nodes find them trusted.
        return crate::cmd::fleet::submit_command(
            crate::cmd::fleet::Submission {
                command: FleetCommand::Collect,
                fleet: &args.fleet,
                metric: format!("workload {}", ls.name),
                lever: None,
                kernel: None,
                arch_given: false,
                format: args.format.format,
            },
            ctx,
        );
    }
    let attempt = match args.fleet.fleet_target.as_deref().map(|s| job::begin(ctx, s)).transpose()? {
        Some(None) => return Ok(ExitCode::SUCCESS),
        Some(Some(at)) => Some(at),
        None => None,
    };
    let mut set = BTreeMap::new();
    for kv in &args.set {
        let (k, v) = kv.split_once('=').ok_or_else(|| CliError::bad_input(format!("--set {kv}: expected KEY=VALUE")))?;
        set.insert(k.trim().to_string(), v.to_string());
    }
    let layout = ctx.layout()?;
    let mut opts = CollectOptions::new(&project.root);
    opts.ops = OpRules::with_project(&layout.rules_dir())?;
    opts.layout = layout;
    opts.set = set;
    opts.runs = args.runs;
    opts.warmup = args.warmup;
    opts.profile = args.profile;
    if args.capture_modules {
        opts.capture_lib = Some(capture_lib()?);
    }
    opts.output = match &attempt {
        Some(at) => Some(at.rows_file(ctx)?),
        None => args.output.as_ref().map(|p| ctx.resolve(p)),
    };
    opts.progress = std::io::stderr().is_terminal();
    katlas_proc::install_interrupt_handler();
    let rep = collect(&ls, &opts)?;
    if args.capture_modules {
        capture_report(&opts.layout.runs_dir(), &rep);
    }
    match args.format.format {
        Format::Json => print_json(&rep),
        f => {
            let mut t = table(f, &["run", "pass", "#", "params", "phase", "status", "metrics", "kernels", "error"]);
            for r in &rep.rows {
                t.add_row(vec![
                    r.run_id.clone(),
                    r.pass.clone(),
                    r.run_index.to_string(),
                    r.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
                    r.phase.clone(),
                    format!("{:?}", r.status).to_lowercase(),
                    r.metrics.to_string(),
                    r.kernels.to_string(),
                    r.message.clone().unwrap_or_default(),
                ]);
            }
            println!("{t}");
            for u in &rep.unfinished {
                println!("unfinished run (katlas was killed while it ran; no rows): {}", crate::output::printable(&u.display().to_string()));
            }
            println!(
                "{}: {} runs, {} ok rows, {} error rows -> {}{}",
                rep.workload,
                rep.runs,
                rep.rows_ok,
                rep.rows_error,
                rep.output.display(),
                if rep.interrupted { " (interrupted: rows measured so far are kept)" } else { "" }
            );
        }
    }
    if rep.interrupted {
        return Ok(ExitCode::from(crate::ctx::exit::INTERRUPTED));
    }
    if let Some(at) = &attempt {
        let found = job::Found {
            passed: rep.rows_error == 0 && rep.rows_ok > 0,
            summary: format!("{}: {} runs, {} ok rows, {} error rows", rep.workload, rep.runs, rep.rows_ok, rep.rows_error),
            arch: None,
            reasons: rep.rows.iter().filter_map(|r| r.message.clone()).take(5).collect(),
            gate: None,
            rows: Some((rep.output.clone(), rep.rows_ok as u64, rep.rows_error as u64)),
        };
        job::finish(ctx, at, FleetCommand::Collect, found)?;
    }
    Ok(if rep.rows_error > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `$KATLAS_CAPTURE_LIB`, else `libkatlas_capture.so` beside the katlas executable (where
/// `cargo build` and the release archive put it).
fn capture_lib() -> Result<PathBuf, CliError> {
    let lib = match std::env::var_os("KATLAS_CAPTURE_LIB") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().map_err(CliError::missing_env)?.with_file_name("libkatlas_capture.so"),
    };
    if !lib.is_file() {
        return Err(CliError::missing_env(format!(
            "--capture-modules: {} not found (build it with `cargo build -p katlas-capture`, or set KATLAS_CAPTURE_LIB)",
            lib.display()
        )));
    }
    Ok(lib)
}

/// One line per capturing run on what the capture did: modules written, or why none were. With
/// `--profile` the capture ran in its own unmeasured run per combo (the workload's CUPTI
/// profiler keeps CUPTI in the profiled runs), and the line says which run that was.
fn capture_report(runs: &std::path::Path, rep: &katlas_collect::collect::CollectReport) {
    let split = !rep.capture_runs.is_empty();
    let mut ids: Vec<String> = rep.capture_runs.iter().map(|c| c.run_id.clone()).collect();
    if !split {
        let mut seen = std::collections::BTreeSet::new();
        ids = rep.rows.iter().filter(|r| seen.insert(r.run_id.clone())).map(|r| r.run_id.clone()).collect();
    }
    for c in rep.capture_runs.iter().filter(|c| c.failure.is_some()) {
        eprintln!("katlas: capture run {} failed: {}", c.run_id, crate::output::printable(c.failure.as_deref().unwrap_or_default()));
    }
    let what = if split { "capture run" } else { "run" };
    for id in ids {
        let log = std::fs::read_to_string(runs.join(&id).join("modules/modules.jsonl")).unwrap_or_default();
        let modules = log.lines().filter(|l| l.contains("\"module_id\"")).count();
        let error = log.lines().find(|l| l.contains("\"error\""));
        let also = if split { " (an unmeasured run without the profiler; each profiled run links its modules/)" } else { "" };
        match (modules, error) {
            (_, Some(e)) => eprintln!("katlas: {what} {id}: module capture failed: {}", crate::output::printable(e)),
            (0, None) => {
                eprintln!(
                    "katlas: {what} {id}: no module was captured (the workload loaded no CUDA code, or the driver never read CUDA_INJECTION64_PATH){also}"
                )
            }
            (n, None) => eprintln!("katlas: {what} {id}: {n} module load(s) captured{also}"),
        }
    }
}
