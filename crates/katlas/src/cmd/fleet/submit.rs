//! Submitting a fleet: the targets, one job script each (shown and trusted before `sbatch`
//! sees it), and the job side's own directories and push.

use super::{section, slurm, FleetSection, WaitOpts};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::printable;
use katlas_collect::spec::shell_quote;
use katlas_corpus::Layout;
use katlas_model::fleet::{ExpectedIdentity, FleetCommand, FleetJob, FleetRecord, FleetTarget, FLEET_SCHEMA};
use katlas_project::trust::CommandSource;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where a command runs: here (default) or on a cluster's nodes.
#[derive(Debug, Default, clap::Args)]
pub struct FleetArgs {
    /// Run this command on a cluster through its scheduler (`slurm`): one `sbatch` job per
    /// target, each running it on its node and pushing its result to the team store; then the
    /// cross-target table (an eval's ends in the allowlist decision).
    #[arg(long, value_name = "SCHEDULER", value_parser = ["slurm"])]
    pub on: Option<String>,
    /// A target: this Slurm partition (repeatable).
    #[arg(long = "partition", value_name = "PARTITION", requires = "on")]
    pub partitions: Vec<String>,
    /// A target: nodes with this feature, `sbatch --constraint` (repeatable).
    #[arg(long = "constraint", value_name = "FEATURE", requires = "on")]
    pub constraints: Vec<String>,
    /// A target named in `[fleet.target.NAME]` (repeatable; default with none of
    /// --partition/--constraint/--target: every configured target).
    #[arg(long = "target", value_name = "NAME", requires = "on")]
    pub targets: Vec<String>,
    /// Submit and return; `katlas fleet wait ID` follows the jobs later.
    #[arg(long, requires = "on")]
    pub no_wait: bool,
    #[command(flatten)]
    pub wait: WaitOpts,
    /// Run as fleet FLEET's target TARGET (what the job scripts katlas writes pass).
    #[arg(long, value_name = "FLEET/TARGET", hide = true, conflicts_with = "on")]
    pub fleet_target: Option<String>,
}

/// A fleet, target or partition name that is safe as a directory, a job name and an
/// `#SBATCH` value.
pub fn plain_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && !s.starts_with(['.', '-']) && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// One `#SBATCH` value: no whitespace, newline or shell metacharacter to smuggle a second option.
fn sbatch_value(what: &str, v: &str) -> Result<(), CliError> {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control() || "'\"`$\\;".contains(c)) {
        return Err(CliError::bad_input(format!("{what} `{}`: one option without spaces, quotes or shell characters", printable(v))));
    }
    Ok(())
}

struct Planned {
    name: String,
    partition: Option<String>,
    constraint: Option<String>,
    /// The arch atom of the target's nodes (`[fleet.target.NAME] arch`).
    arch: Option<String>,
    sbatch_args: Vec<String>,
}

fn targets(a: &FleetArgs, cfg: &FleetSection) -> Result<Vec<Planned>, CliError> {
    let mut out: Vec<Planned> = Vec::new();
    let named = |n: &String| -> Result<Planned, CliError> {
        let t = cfg.target.get(n).ok_or_else(|| {
            let known: Vec<&String> = cfg.target.keys().collect();
            CliError::bad_input(format!(
                "--target {}: no [fleet.target.{}] in katlas.toml (configured: {})",
                printable(n),
                printable(n),
                if known.is_empty() { "none".into() } else { known.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ") }
            ))
        })?;
        Ok(Planned {
            name: n.clone(),
            partition: t.partition.clone(),
            constraint: t.constraint.clone(),
            arch: t.arch.clone(),
            sbatch_args: t.sbatch_args.clone(),
        })
    };
    for n in &a.targets {
        out.push(named(n)?);
    }
    for p in &a.partitions {
        out.push(Planned { name: p.clone(), partition: Some(p.clone()), constraint: None, arch: None, sbatch_args: vec![] });
    }
    for c in &a.constraints {
        out.push(Planned { name: c.clone(), partition: None, constraint: Some(c.clone()), arch: None, sbatch_args: vec![] });
    }
    if out.is_empty() {
        for n in cfg.target.keys() {
            out.push(named(n)?);
        }
    }
    if out.is_empty() {
        return Err(CliError::bad_input("no targets: give --partition P, --constraint FEATURE or --target NAME (a [fleet.target.NAME] of katlas.toml)"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in &out {
        if !plain_name(&t.name) {
            return Err(CliError::bad_input(format!("target `{}`: a name of letters, digits, `.`, `_` and `-`", printable(&t.name))));
        }
        if !seen.insert(t.name.clone()) {
            return Err(CliError::bad_input(format!("target `{}` given twice", t.name)));
        }
        for v in t.partition.iter().chain(&t.constraint).chain(&t.arch).chain(&t.sbatch_args).chain(&cfg.sbatch_args).chain(&cfg.time_limit) {
            sbatch_value(&format!("target {}", t.name), v)?;
        }
    }
    Ok(out)
}

/// The command line this process was given, without the options that only the submitting
/// side reads: every target runs the same command with the same plan and seed.
fn forwarded_args() -> Vec<String> {
    const WITH_VALUE: &[&str] = &["--on", "--partition", "--constraint", "--target", "--resubmit", "--poll"];
    let mut out = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == "--no-wait" || WITH_VALUE.iter().any(|o| a.starts_with(&format!("{o}="))) {
            continue;
        }
        if WITH_VALUE.contains(&a.as_str()) {
            it.next();
            continue;
        }
        out.push(a);
    }
    out
}

pub fn job_dir(layout: &Layout, fleet: &str, target: &str) -> PathBuf {
    super::fleet_dir(layout).join(fleet).join(target)
}

pub fn job_log(layout: &Layout, fleet: &str, target: &str, job: &str) -> PathBuf {
    job_dir(layout, fleet, target).join(format!("slurm-{job}.out"))
}

/// `args` are the katlas command line every target runs; `extra` what this target adds to it.
#[allow(clippy::too_many_arguments)]
fn script_text(
    fleet: &str,
    command: FleetCommand,
    t: &Planned,
    cfg: &FleetSection,
    katlas: &str,
    args: &[String],
    extra: &[String],
    log_dir: &Path,
    cwd: &Path,
) -> String {
    let mut s = String::from("#!/bin/sh\n");
    s += &format!("# katlas fleet {fleet}, target {}: this {command} on the node Slurm picks, its result pushed\n", t.name);
    s += &format!("# to the team store. Written by `katlas {command} --on slurm`; trusted by content.\n");
    s += &format!("#SBATCH --job-name=katlas-{fleet}-{}\n", t.name);
    if let Some(p) = &t.partition {
        s += &format!("#SBATCH --partition={p}\n");
    }
    if let Some(c) = &t.constraint {
        s += &format!("#SBATCH --constraint={c}\n");
    }
    if let Some(tl) = &cfg.time_limit {
        s += &format!("#SBATCH --time={tl}\n");
    }
    s += &format!("#SBATCH --output={}/slurm-%j.out\n", log_dir.display());
    s += &format!("#SBATCH --chdir={}\n", cwd.display());
    for a in cfg.sbatch_args.iter().chain(&t.sbatch_args) {
        s += &format!("#SBATCH {a}\n");
    }
    let argv: Vec<String> = std::iter::once(katlas.to_string())
        .chain(args.iter().cloned())
        .chain(extra.iter().cloned())
        .chain(["--fleet-target".to_string(), format!("{fleet}/{}", t.name)])
        .collect();
    s += &argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
    s += "\nrc=$?\n# 0 and 1 are results (improved or not, passed or not); 2 and up are errors the job reports.\n[ \"$rc\" -le 1 ] && exit 0\nexit \"$rc\"\n";
    s
}

/// What `katlas trust` shows of a job script: its `#SBATCH` options and its command lines.
pub fn script_commands(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && (!l.starts_with('#') || l.starts_with("#SBATCH")))
        .enumerate()
        .map(|(i, l)| (if l.starts_with("#SBATCH") { "sbatch option".to_string() } else { format!("line {}", i + 1) }, l.to_string()))
        .collect()
}

fn config_sources(ctx: &Ctx, cfg: &FleetSection) -> Result<CommandSource, CliError> {
    let mut shown: Vec<(String, String)> = cfg.sbatch_args.iter().map(|a| ("[fleet] sbatch_args".to_string(), a.clone())).collect();
    if let Some(k) = &cfg.katlas {
        shown.push(("[fleet] katlas".into(), k.clone()));
    }
    for (n, t) in &cfg.target {
        shown.extend(t.sbatch_args.iter().map(|a| (format!("[fleet.target.{n}] sbatch_args"), a.clone())));
    }
    Ok(ctx.project()?.config_commands(shown))
}

fn new_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{}-{:04x}", chrono::Utc::now().format("%Y%m%d-%H%M%S"), (nanos ^ std::process::id()) & 0xffff)
}

/// What a fleet submits: the command its targets run and what the table shows of it.
pub struct Submission<'a> {
    pub command: FleetCommand,
    pub fleet: &'a FleetArgs,
    /// What the command judges or reads (an eval's metric), for the table.
    pub metric: String,
    pub lever: Option<String>,
    pub kernel: Option<String>,
    /// `--arch` was typed: it goes to every target as typed.
    pub arch_given: bool,
    pub format: crate::output::Format,
}

pub fn submit_command(sub: Submission, ctx: &Ctx) -> CmdResult {
    let f = sub.fleet;
    let layout = ctx.layout()?;
    let cfg = section(ctx)?;
    let planned = targets(f, &cfg)?;
    // The jobs report through the store: a fleet that cannot reach it would measure for nothing.
    let mut store = super::connect(ctx)?;
    store.ensure_schema()?;
    crate::trust::authorize(ctx, &[config_sources(ctx, &cfg)?])?;
    let katlas = match &cfg.katlas {
        Some(k) => k.clone(),
        None => std::env::current_exe().map_err(|e| CliError::missing_env(format!("this katlas's path: {e}; set [fleet] katlas")))?.display().to_string(),
    };
    let mut opts = crate::cmd::identity::options_for(ctx)?;
    opts.skip_devices = true;
    let here = katlas_identity::capture(&opts);
    let expected = ExpectedIdentity { source: here.source, env: here.env, binaries: Default::default() };
    let id = new_id();
    let args = forwarded_args();
    let cwd = std::fs::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    let mut rec = FleetRecord {
        schema: FLEET_SCHEMA.into(),
        id: id.clone(),
        scheduler: "slurm".into(),
        command: sub.command,
        created_at: katlas_model::row::now_rfc3339(),
        submitted_from: here.host.hostname.clone(),
        // The record keeps the command line as every record does, credentials redacted; the
        // job scripts need it whole (they are command files, shown and trusted like a task).
        eval_args: katlas_identity::redact_argv(&args),
        metric: sub.metric.clone(),
        lever: sub.lever.clone(),
        kernel: sub.kernel.clone(),
        expected,
        targets: Vec::new(),
    };
    let root = layout.root.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut scripts = Vec::new();
    for t in &planned {
        let dir = job_dir(&layout, &id, &t.name);
        katlas_fs::create_dir_all(&dir)?;
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let script = dir.join("job.sh");
        // A gate judges its target's arch: the one `[fleet.target.NAME] arch` names, unless
        // `--arch` was typed (then every target is judged against that arch's floors).
        let extra: Vec<String> = match (&t.arch, sub.command) {
            (Some(arch), FleetCommand::Gate) if !sub.arch_given => vec!["--arch".into(), arch.clone()],
            _ => vec![],
        };
        katlas_fs::write_atomic(&script, script_text(&id, sub.command, t, &cfg, &katlas, &args, &extra, &dir, &cwd).as_bytes())?;
        let rel = script.strip_prefix(std::fs::canonicalize(&root).unwrap_or(root.clone())).map(Path::to_path_buf).unwrap_or(script.clone());
        rec.targets.push(FleetTarget {
            name: t.name.clone(),
            partition: t.partition.clone(),
            constraint: t.constraint.clone(),
            script: rel.display().to_string(),
            jobs: vec![],
        });
        scripts.push(script);
    }
    super::save(&layout, &rec)?;
    // The scripts are this command's own, made from what was typed and the trusted [fleet]:
    // recorded as trusted, then shown with their digests before anything is submitted.
    for s in &scripts {
        crate::trust::trust_written(ctx, s);
    }
    crate::trust::authorize(ctx, &script_sources(&scripts)?)?;
    for (k, s) in scripts.iter().enumerate() {
        let job = slurm::sbatch(s, &cwd)?;
        let t = &mut rec.targets[k];
        eprintln!(
            "katlas fleet {id}: {}: submitted job {job}{}",
            t.name,
            t.partition.as_deref().map(|p| format!(" to partition {p}")).or(t.constraint.as_deref().map(|c| format!(" to nodes with {c}"))).unwrap_or_default()
        );
        t.jobs.push(FleetJob { job_id: job, submitted_at: katlas_model::row::now_rfc3339(), state: Some("PENDING".into()), node: None });
        super::save(&layout, &rec)?;
    }
    println!("fleet {id}: {} job(s) submitted; follow: katlas fleet wait {id}; stop: katlas fleet cancel {id}", rec.targets.len());
    if f.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    super::wait(ctx, &id, &f.wait, sub.format)
}

fn script_sources(scripts: &[PathBuf]) -> Result<Vec<CommandSource>, CliError> {
    scripts
        .iter()
        .map(|s| {
            let content = std::fs::read(s).map_err(|e| CliError::io(s, e))?;
            Ok(CommandSource { file: s.clone(), commands: script_commands(&String::from_utf8_lossy(&content)), content })
        })
        .collect()
}

/// Submit `target`'s script again, once it is still the script that was trusted.
pub fn resubmit(ctx: &Ctx, layout: &Layout, rec: &mut FleetRecord, target: &str) -> Result<String, CliError> {
    let script = job_dir(layout, &rec.id, target).join("job.sh");
    crate::trust::authorize(ctx, &script_sources(std::slice::from_ref(&script))?)?;
    let cwd = std::fs::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    let job = slurm::sbatch(&script, &cwd)?;
    let t = rec.targets.iter_mut().find(|t| t.name == target).expect("target of this fleet");
    t.jobs.push(FleetJob { job_id: job.clone(), submitted_at: katlas_model::row::now_rfc3339(), state: Some("PENDING".into()), node: None });
    super::save(layout, rec)?;
    Ok(job)
}

/// The job side: the eval directory parent, eval id prefix and worktree directory of fleet
/// `FLEET/TARGET`.
pub fn fleet_target_dirs(layout: &Layout, spec: &str) -> Result<(PathBuf, String, PathBuf), CliError> {
    let (fleet, target) = spec
        .split_once('/')
        .filter(|(f, t)| plain_name(f) && plain_name(t))
        .ok_or_else(|| CliError::bad_input(format!("--fleet-target `{}`: FLEET/TARGET", printable(spec))))?;
    let dir = job_dir(layout, fleet, target);
    if !super::record_path(layout, fleet).is_file() {
        return Err(CliError::bad_input(format!("--fleet-target {spec}: no fleet {fleet} under {}", super::fleet_dir(layout).display())));
    }
    Ok((dir, format!("fleet/{fleet}/{target}"), layout.root.join("worktrees").join(format!("fleet-{fleet}-{target}"))))
}

/// Push a fleet target's finished eval (result and samples) to the team store.
pub fn push_target(ctx: &Ctx, eval_dir: &Path) -> Result<(), CliError> {
    let dir = eval_dir.to_path_buf();
    push_files(ctx, "eval", move |p| p.parent() == Some(dir.as_path()))
}

/// Push the project's files that `keep` picks (a fleet target's own) to the team store.
pub fn push_files(ctx: &Ctx, what: &str, keep: impl Fn(&Path) -> bool) -> Result<(), CliError> {
    let layout = ctx.layout()?;
    let mut store = super::connect(ctx)?;
    let host = katlas_identity::host::host_identity().hostname;
    let keep = move |s: &katlas_store::sources::Source| keep(&s.path);
    let st = katlas_store::team::push_only(&mut store, &layout, host.as_deref(), &keep, &mut |_| {})?;
    eprintln!("katlas: pushed this target's {what} to {}: {} new record(s), {} already there", st.store, st.new, st.present + st.conflicts);
    Ok(())
}
