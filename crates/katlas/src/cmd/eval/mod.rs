//! `katlas eval` and `katlas ab`: the fresh-process A/B protocol.

use crate::ctx::{exit, CliError, CmdResult, Ctx};
use crate::output::{paint, print_json, table, Format, FormatArg};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use katlas_eval::config::EvalConfig;
use katlas_eval::eval::{run_eval, CaptureContext, EvalReport, EvalSpec, Meta, SideInput, SolSpec};
use katlas_eval::plan::{self, Band};
use katlas_eval::protocol::{Order, Settings};
use katlas_eval::routes::RouteSpec;
use katlas_eval::verdict::{JudgeConfig, Plan};
use katlas_eval::worktree;
use katlas_model::ledger::{Disposition, Goal, Verdict};
use katlas_model::task::Task;
use katlas_model::ExperimentKey;
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod ab;
mod report;
pub use ab::{run_ab, AbArgs};
use report::print_report;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GoalArg {
    Maximize,
    Minimize,
}

/// Protocol knobs shared by `eval` and `ab`.
#[derive(Debug, clap::Args)]
pub struct ProtocolArgs {
    /// Metric to read from each run's output.
    #[arg(long)]
    pub metric: Option<String>,
    /// Whether larger (maximize, default) or smaller (minimize) is better.
    #[arg(long, value_enum)]
    pub goal: Option<GoalArg>,
    /// Output parser (katlas-collect registry name).
    #[arg(long)]
    pub parser: Option<String>,
    /// Shell command that runs one sample (for git-ref sides, --variant and --aa).
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    /// Executable to hash per side for the stale-binary check, relative to each side's
    /// directory (default: the command's program when it is compiled, not a script).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Shell command that builds a git-ref side inside its worktree.
    #[arg(long, value_name = "CMD")]
    pub build: Option<String>,
    /// Fixed number of measured runs per side (turns adaptive mode off).
    #[arg(long, short = 'n')]
    pub runs: Option<u32>,
    /// Adaptive sequential mode (the default without --runs): sample until the interval
    /// clears or sits inside the noise band, or the budget ends.
    #[arg(long, conflicts_with = "runs")]
    pub auto: bool,
    /// Adaptive budget: at most this many measured runs per side [default: 20].
    #[arg(long)]
    pub max_runs: Option<u32>,
    /// Adaptive: first look after this many runs per side [default: 3].
    #[arg(long)]
    pub min_runs: Option<u32>,
    /// Warmup runs per side, discarded [default: 1].
    #[arg(long)]
    pub warmups: Option<u32>,
    /// How each block orders the sides [default: abba].
    #[arg(long, value_parser = order_parser())]
    pub order: Option<Order>,
    /// Seed of the order shuffle and the bootstrap.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Shell command run before each block (clock warmup, cool-down).
    #[arg(long, value_name = "CMD")]
    pub settle: Option<String>,
    /// Relative noise threshold (0.01 = 1%); default: the --aa calibration, else 1%.
    #[arg(long)]
    pub threshold: Option<f64>,
    /// The smallest change you care about (0.05 = 5%); `no_change` against a wider noise
    /// band is `inconclusive` [default: 0.05].
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// Family-wise error rate over all looks [default: 0.05].
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Robust CV beyond which a side is unstable [default: 0.10].
    #[arg(long)]
    pub cv_limit: Option<f64>,
    /// Half-vs-half drift beyond which a side is unstable [default: 0.03].
    #[arg(long)]
    pub drift_limit: Option<f64>,
    /// Per-sample timeout, seconds [default: 600].
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Env names that only switch on instrumentation; stripped from every side.
    #[arg(long = "strip-env", value_name = "NAME")]
    pub strip_env: Vec<String>,
    /// Record GPU clocks and temperature per sample (nvidia-smi, hwmon) when readable [default: true].
    #[arg(long, action = clap::ArgAction::Set)]
    pub telemetry: Option<bool>,
    /// Allow sides from different hosts (the verdict says so).
    #[arg(long)]
    pub cross_host: bool,
    /// Do not append to the ledger.
    #[arg(long)]
    pub no_ledger: bool,
    /// Start a new eval directory instead of resuming an interrupted one.
    #[arg(long)]
    pub fresh: bool,
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Task id (`.katlas/tasks/<id>/task.json`): baseline ref, build, bench, allowed files, routes.
    pub task: Option<String>,
    /// Baseline: a git ref (built in its own worktree) or a shell command.
    #[arg(long, value_name = "CMD|REF")]
    pub baseline: Option<String>,
    /// Candidate: a git ref or a shell command (default with a ref baseline: the working tree).
    #[arg(long, value_name = "CMD|REF")]
    pub candidate: Option<String>,
    /// Env variant of one binary: `--variant KEY=A --variant KEY=B`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub variant: Vec<String>,
    /// Run the baseline against itself to calibrate the noise threshold.
    #[arg(long)]
    pub aa: bool,
    #[command(flatten)]
    pub protocol: ProtocolArgs,
    /// Correctness route claim classes to run on the candidate (`[route.CLAIM]`).
    #[arg(long = "claim", value_name = "CLAIM")]
    pub claims: Vec<String>,
    /// Allowed files (globs) for the candidate's diff against the baseline.
    #[arg(long = "allowed", value_name = "GLOB")]
    pub allowed: Vec<String>,
    /// Bytes moved per run (speed-of-light check).
    #[arg(long)]
    pub bytes: Option<f64>,
    /// Metric key holding bytes moved per run.
    #[arg(long)]
    pub bytes_key: Option<String>,
    /// Time metric key for the speed-of-light check (default: the metric, when it is a time).
    #[arg(long)]
    pub time_key: Option<String>,
    /// Bandwidth ceiling, GB/s (default: the arch database's product, see --product).
    #[arg(long)]
    pub peak_gbps: Option<f64>,
    /// Product name in the arch database for the ceiling (default: the detected GPU).
    #[arg(long)]
    pub product: Option<String>,
    /// Verdict that counts as success for the exit code (default: improved).
    #[arg(long, value_name = "VERDICT", value_parser = verdict_parser())]
    pub expect: Option<Verdict>,
    /// Lever the candidate applies, as in `katlas suggest --catalog` (ledger note).
    #[arg(long)]
    pub lever: Option<String>,
    /// Kernel the candidate changes (ledger note).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Workload phase the command measures, e.g. `decode` (ledger note).
    #[arg(long)]
    pub phase: Option<String>,
    /// Problem shape the command measures (ledger note).
    #[arg(long)]
    pub shape: Option<String>,
    /// Weight quantisation the command runs (ledger note).
    #[arg(long)]
    pub quant: Option<String>,
    /// What the change should do and why, stated before the runs (ledger note).
    #[arg(long)]
    pub hypothesis: Option<String>,
    /// Why it is faster or slower, as understood (ledger note).
    #[arg(long)]
    pub mechanism: Option<String>,
    /// promote, reject, opt-in or `revisit-if: CONDITION` (default: from the verdict).
    #[arg(long, value_parser = str::parse::<Disposition>)]
    pub disposition: Option<Disposition>,
    #[command(flatten)]
    pub fleet: crate::cmd::fleet::FleetArgs,
    #[command(flatten)]
    pub format: FormatArg,
}

/// A verdict's name as a flag's value (`eval --expect`, `ledger ls --verdict`): clap refuses
/// any other word, listing the names, before a command runs. The hyphenated spellings that
/// `Verdict`'s parser also takes (`no-change`) are accepted as aliases.
pub(crate) fn verdict_parser() -> impl TypedValueParser<Value = Verdict> {
    let names = Verdict::ALL.map(|v| {
        let name = PossibleValue::new(v.as_str());
        match v {
            Verdict::NoChange => name.alias("no-change"),
            Verdict::NeedsBaseline => name.alias("needs-baseline"),
            _ => name,
        }
    });
    PossibleValuesParser::new(names).try_map(|s| s.parse::<Verdict>())
}

/// `--order`: clap refuses any other word, listing abba and shuffle.
fn order_parser() -> impl TypedValueParser<Value = Order> {
    PossibleValuesParser::new([Order::Abba, Order::Shuffle].map(Order::as_str)).try_map(|s| s.parse::<Order>())
}

fn goal(g: Option<GoalArg>, metric: &str) -> Goal {
    plan::goal(
        g.map(|g| match g {
            GoalArg::Maximize => Goal::Maximize,
            GoalArg::Minimize => Goal::Minimize,
        }),
        metric,
    )
}

/// `[eval]` of katlas.toml (project defaults under the flags).
/// Worktrees of earlier runs beyond the kept count go before this run prepares its own.
fn prune_worktrees(root: &Path, wt_dir: &Path, keep: Option<usize>) {
    match worktree::prune(root, wt_dir, keep.unwrap_or(8), &[]) {
        Ok(gone) if !gone.is_empty() => eprintln!("katlas: removed {} old worktree(s) from {}", gone.len(), wt_dir.display()),
        Ok(_) => {}
        Err(e) => eprintln!("katlas: warning: cannot prune worktrees: {e}"),
    }
}

fn eval_config(ctx: &Ctx) -> Result<EvalConfig, CliError> {
    Ok(ctx.project()?.section::<EvalConfig>(&["eval"])?.unwrap_or_default())
}

fn band(p: &ProtocolArgs, cfg: &EvalConfig, calibrated: Option<katlas_eval::noise::Calibration>) -> Result<Band, CliError> {
    Ok(plan::band(p.threshold, calibrated, cfg.threshold)?)
}

fn settings(p: &ProtocolArgs, cfg: &EvalConfig, metric: String, g: Goal, parser: String, threshold: f64, mut strip: Vec<String>) -> Result<Settings, CliError> {
    // clap has checked the flag; katlas.toml's `[eval] order` is text, checked here.
    let order = match (p.order, &cfg.order) {
        (Some(o), _) => o,
        (None, Some(s)) => s.parse().map_err(|e| CliError::bad_input(format!("katlas.toml: eval.order: {e}")))?,
        (None, None) => Order::Abba,
    };
    let min_effect = p.min_effect.or(cfg.min_effect).unwrap_or(0.05);
    if !(min_effect > 0.0 && min_effect < 1.0) {
        return Err(CliError::bad_input(format!("--min-effect {min_effect}: expected a fraction in (0, 1)")));
    }
    let alpha = p.alpha.or(cfg.alpha).unwrap_or(0.05);
    if !(0.0 < alpha && alpha < 1.0) {
        return Err(CliError::bad_input(format!("--alpha {alpha}: expected a fraction in (0, 1)")));
    }
    let d = JudgeConfig::default();
    let cv_limit = p.cv_limit.or(cfg.cv_limit).unwrap_or(d.cv_limit);
    let drift_limit = p.drift_limit.or(cfg.drift_limit).unwrap_or(d.drift_limit);
    if cv_limit <= 0.0 || drift_limit <= 0.0 {
        return Err(CliError::bad_input("--cv-limit and --drift-limit must be positive fractions"));
    }
    let plan = match p.runs {
        Some(0) => return Err(CliError::bad_input("--runs 0: at least one run per side")),
        Some(n) => Plan::fixed(n),
        None => Plan::adaptive(
            p.min_runs.or(cfg.min_runs).unwrap_or(katlas_eval::verdict::DEFAULT_MIN_RUNS),
            p.max_runs.or(cfg.max_runs).unwrap_or(katlas_eval::verdict::DEFAULT_MAX_RUNS),
        ),
    };
    strip.extend(cfg.strip_env.iter().cloned());
    strip.sort();
    strip.dedup();
    Ok(Settings {
        metric,
        parser,
        warmups: p.warmups.or(cfg.warmups).unwrap_or(1),
        plan,
        order,
        seed: p.seed,
        settle: p.settle.clone().or(cfg.settle.clone()),
        timeout: Duration::from_secs_f64(p.timeout.or(cfg.timeout_s).unwrap_or(600.0).max(0.001)),
        judge: JudgeConfig { threshold, alpha, seed: p.seed, goal: g, cv_limit, drift_limit, min_effect: Some(min_effect), ..d },
        telemetry: p.telemetry.or(cfg.telemetry).unwrap_or(true),
        strip_env: strip,
    })
}

fn noise_file(ctx: &Ctx) -> Result<PathBuf, CliError> {
    Ok(plan::noise_file(&ctx.layout()?.root))
}

fn cx(ctx: &Ctx) -> Result<CaptureContext, CliError> {
    let project = ctx.project()?;
    let env_prefixes = crate::cmd::identity::recorded_env(&project.config.identity);
    Ok(CaptureContext { cache_dir: Some(ctx.layout()?.cache_dir()), env_prefixes, hash_model: project.config.identity.hash_model, ..Default::default() })
}

type ProgressBox = Box<dyn Fn(katlas_eval::protocol::Event<'_>)>;

/// On a terminal, a bar with elapsed time and an estimate of what is left (runs are
/// planned to the budget; an adaptive eval that stops early finishes sooner). Without a
/// terminal (CI, a pipe, a log file), one line per look: elapsed time, runs so far and the
/// current interval, so a long eval shows it is alive without control characters.
fn progress_fn(metric: &str, goal: Goal) -> Option<ProgressBox> {
    use katlas_eval::protocol::Event;
    if !std::io::stderr().is_terminal() {
        let start = std::time::Instant::now();
        let (better, worse) = katlas_eval::words::better_worse(metric);
        return Some(Box::new(move |ev| {
            let Event::Look { look, runs_per_side, judgements } = ev else { return };
            let parts: Vec<String> = judgements
                .iter()
                .map(|j| match &j.effect {
                    Some(e) => {
                        let [lo, hi] = katlas_eval::words::gain_interval(e, goal);
                        let w = |x: f64| format!("{:+.1}%", x * 100.0);
                        format!("gain {} ({:.1}% interval [{}, {}], + = {better}, - = {worse}) → {}", w(e.gain), e.ci_level * 100.0, w(lo), w(hi), j.verdict)
                    }
                    None => format!("no interval yet → {}", j.verdict),
                })
                .collect();
            eprintln!("katlas eval: {:.1} s, look {look}, {runs_per_side} runs/side: {}", start.elapsed().as_secs_f64(), parts.join("; "));
        }));
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] run {pos}/{len}, ~{eta} left at most: {wide_msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    Some(Box::new(move |ev| {
        let Event::Run { done, planned, what } = ev else { return };
        bar.set_length(planned as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
        if done + 1 >= planned {
            bar.finish_and_clear();
        }
    }))
}

/// Runs the eval with the progress line (or per-look lines without a terminal), leaving the
/// terminal's line clean for the report.
fn run_with_progress(spec: &EvalSpec, ctx: &Ctx, metric: &str, g: Goal) -> Result<EvalReport, CliError> {
    let pf = progress_fn(metric, g);
    let report = run_eval(spec, &cx(ctx)?, pf.as_deref())?;
    if pf.is_some() && std::io::stderr().is_terminal() {
        eprintln!();
    }
    Ok(report)
}

pub fn run(a: &EvalArgs, ctx: &Ctx) -> CmdResult {
    if a.fleet.on.is_some() {
        let metric = a.protocol.metric.clone().unwrap_or_else(|| a.task.as_deref().map(|t| format!("task {t}'s metric")).unwrap_or_default());
        return crate::cmd::fleet::submit_command(
            crate::cmd::fleet::Submission {
                command: katlas_model::fleet::FleetCommand::Eval,
                fleet: &a.fleet,
                metric,
                lever: a.lever.clone(),
                kernel: a.kernel.clone(),
                arch_given: true,
                format: a.format.format,
            },
            ctx,
        );
    }
    let project = ctx.project()?;
    let root = project.root.clone();
    let layout = ctx.layout()?;
    let p = &a.protocol;
    let mut meta = Meta {
        lever: a.lever.clone(),
        key: ExperimentKey { kernel: a.kernel.clone(), phase: a.phase.clone(), shape: a.shape.clone(), quant: a.quant.clone(), ..Default::default() },
        hypothesis: a.hypothesis.clone(),
        mechanism: a.mechanism.clone(),
        disposition: a.disposition.clone(),
        ..Default::default()
    };
    let mut sides: Vec<SideInput>;
    let mut knobs = BTreeSet::new();
    let mut allowed = None;
    let mut correctness: Vec<(String, Option<RouteSpec>)> = Vec::new();
    let mut strip = p.strip_env.clone();
    let ecfg = eval_config(ctx)?;
    // Every command this eval takes from a file is shown, and runs only from trusted files.
    let loaded_task = a.task.as_deref().map(|id| load_task(&layout, id)).transpose()?;
    let mut from_config = Vec::new();
    if p.settle.is_none() {
        if let Some(s) = &ecfg.settle {
            from_config.push(("[eval] settle".to_string(), s.clone()));
        }
    }
    for c in &a.claims {
        let route: Option<RouteSpec> = project.section(&["route", c])?;
        for (i, cmd) in route.iter().flat_map(|r| r.commands.iter()).enumerate() {
            from_config.push((format!("[route.{c}] commands[{i}]"), cmd.clone()));
        }
    }
    let mut sources = vec![project.config_commands(from_config)];
    if let Some((tpath, text, task)) = &loaded_task {
        let commands = super::trust::commands_in(tpath, text).map_err(CliError::bad_input)?;
        debug_assert!(!task.bench.command.is_empty() || commands.len() <= 1);
        sources.push(katlas_project::trust::CommandSource { file: tpath.clone(), content: text.clone().into_bytes(), commands });
    }
    crate::trust::authorize(ctx, &sources)?;
    let mut reference_identity = None;
    let mut triton = None;
    // A fleet target's job keeps its eval, and any worktree, apart from the other targets'
    // (their nodes share this directory).
    let fleet_dirs = a.fleet.fleet_target.as_deref().map(|s| crate::cmd::fleet::fleet_target_dirs(&layout, s)).transpose()?;
    if let Some((parent, _, _)) = &fleet_dirs {
        if let Some(done) = finished_fleet_eval(parent) {
            eprintln!("katlas: {} holds this target's finished eval: pushing it, not measuring again", done.display());
            crate::cmd::fleet::push_target(ctx, &done)?;
            return Ok(ExitCode::from(exit::OK));
        }
    }
    let wt_dir = fleet_dirs.as_ref().map(|d| d.2.clone()).unwrap_or_else(|| layout.root.join("worktrees"));
    prune_worktrees(&root, &wt_dir, ecfg.keep_worktrees);
    let planner = plan::Sides { root: &root, cwd: &ctx.cwd, worktrees: &wt_dir, binary: p.binary.clone() };
    let (metric, parser, g, eval_dir, eval_id);
    if let (Some(task_id), Some((tpath, _, task))) = (&a.task, loaded_task) {
        let tdir = tpath.parent().expect("task.json has a directory").to_path_buf();
        metric = p.metric.clone().unwrap_or(task.bench.metric.clone());
        parser = p.parser.clone().or(task.bench.parser.clone()).or(ecfg.parser.clone()).unwrap_or_else(|| "kv".into());
        g = match p.goal {
            Some(_) => goal(p.goal, &metric),
            None => task.bench.goal,
        };
        strip.extend(task.bench.stripped_env.iter().cloned());
        meta = plan::task_meta(meta, &task);
        (eval_dir, eval_id) = eval_place(fleet_dirs.as_ref(), p.fresh, || (plan::numbered_dir(&tdir.join("evals"), p.fresh), Some(task_id.clone())));
        let Some(ts) = planner.task(&task, &tpath)? else {
            return needs_baseline(a, ctx, &meta, &metric, g, &eval_dir, &eval_id, "the task names no baseline git ref");
        };
        sides = ts.sides;
        if ts.triton.is_some() {
            plan::triton_caches(&mut sides, &eval_dir)?;
        }
        triton = ts.triton;
        allowed = ts.allowed;
        correctness = ts.correctness;
        reference_identity = ts.reference_identity;
    } else {
        metric = p.metric.clone().ok_or_else(|| CliError::bad_input("--metric is required without a task"))?;
        parser = p.parser.clone().or(ecfg.parser.clone()).unwrap_or_else(|| "kv".into());
        g = goal(p.goal, &metric);
        let one_cmd = || -> Result<String, CliError> {
            p.command.clone().or_else(|| a.baseline.clone()).ok_or_else(|| CliError::bad_input("--command (or --baseline CMD) is required"))
        };
        if a.aa {
            sides = planner.aa(&one_cmd()?);
        } else if !a.variant.is_empty() {
            (sides, knobs) = planner.variants(&one_cmd()?, &a.variant)?;
        } else {
            let b = a.baseline.as_deref().ok_or_else(|| CliError::bad_input("--baseline is required (or a TASK, --variant, --aa)"))?;
            (sides, allowed) = planner.pair(b, a.candidate.as_deref(), p.command.as_deref(), p.build.as_deref(), &a.allowed)?;
        }
        (eval_dir, eval_id) = eval_place(fleet_dirs.as_ref(), p.fresh, || {
            (plan::fingerprint_dir(&layout.root.join("evals"), &plan::sides_fingerprint(&sides, &metric, &parser), p.fresh), None)
        });
    }
    for c in &a.claims {
        let route: Option<RouteSpec> = project.section(&["route", c])?;
        correctness.push((c.clone(), route));
    }
    let noise_key = plan::noise_key(&sides, &metric);
    // An A/A calibrates its own band; it is never judged against an older one.
    let band = band(p, &ecfg, if a.aa { None } else { plan::calibration(&noise_file(ctx)?, &noise_key)? })?;
    let mut st = settings(p, &ecfg, metric.clone(), g, parser, band.value, strip)?;
    if a.aa {
        // A calibration measures the noise over the whole plan at the efficacy level; a
        // futility stop would end it early with a narrower, lower-level interval.
        st.judge.beta = 0.0;
    }
    let min_effect = st.judge.min_effect.unwrap_or(0.05);
    let max_band = ecfg.max_band.unwrap_or(katlas_eval::noise::DEFAULT_MAX_BAND);
    plan::check_programs(&sides)?;
    let sol = sol_spec(a, &metric)?;
    let spec = EvalSpec {
        eval_id,
        dir: eval_dir,
        sides,
        settings: st,
        knobs,
        cross_host: p.cross_host,
        reference_identity,
        allowed_files: allowed,
        sol,
        correctness,
        meta,
        ledger_path: (!p.no_ledger).then(|| layout.ledger()),
        protected_ledger: p.no_ledger.then(|| layout.ledger()),
        project_root: root,
        threshold_source: Some(band.source),
        triton,
        aa_max_band: a.aa.then_some(max_band),
    };
    let report = run_with_progress(&spec, ctx, &metric, g)?;
    print_report(&report, a.format.format, ctx.color, min_effect);
    if fleet_dirs.is_some() {
        crate::cmd::fleet::push_target(ctx, &spec.dir)?;
    }
    if a.aa {
        // Exit 0 only when a band was stored: a refused calibration is a negative result.
        let stored = record_aa(ctx, &noise_key, &report, max_band)?;
        return Ok(ExitCode::from(if stored { exit::OK } else { exit::NEGATIVE }));
    }
    let ok = katlas_eval::eval::meets(report.result.verdict, a.expect);
    Ok(ExitCode::from(if ok { exit::OK } else { exit::NEGATIVE }))
}

/// Where this eval's samples go: a fleet target's own numbered directory when the job runs as
/// one (the nodes share the project, so targets never share a directory, a Triton cache
/// included), else the directory `default` picks, its id under `default`'s prefix.
fn eval_place(fleet: Option<&(PathBuf, String, PathBuf)>, fresh: bool, default: impl FnOnce() -> (plan::EvalDir, Option<String>)) -> (PathBuf, String) {
    let (d, prefix) = match fleet {
        Some((parent, prefix, _)) => (plan::numbered_dir(parent, fresh), Some(prefix.clone())),
        None => default(),
    };
    if let Some(n) = &d.passed_over {
        eprintln!("katlas: {n}");
    }
    let id = prefix.map(|p| format!("{p}/{}", d.id)).unwrap_or(d.id);
    (d.path, id)
}

/// The newest eval of a fleet target that has its result (a job that finished measuring and
/// died before its push).
fn finished_fleet_eval(parent: &Path) -> Option<PathBuf> {
    let newest = std::fs::read_dir(parent).ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).max()?;
    let d = parent.join(newest.to_string());
    d.join("result.json").is_file().then_some(d)
}

/// `.katlas/tasks/<id>/task.json`: its path, text and parsed task. An id is one
/// directory name: `..`, `/` or an absolute path would load (and run) a task from
/// outside the project and write its evals there.
fn load_task(layout: &katlas_corpus::Layout, id: &str) -> Result<(PathBuf, String, Task), CliError> {
    let one_name = matches!(Path::new(id).components().collect::<Vec<_>>().as_slice(), [std::path::Component::Normal(_)]);
    if !one_name || id.contains('/') {
        return Err(CliError::bad_input(format!(
            "task id `{}`: a task id names one directory under {} (no `/`, `..` or absolute path)",
            crate::output::printable(id),
            layout.tasks_dir().display()
        )));
    }
    let tpath = layout.tasks_dir().join(id).join("task.json");
    katlas_fs::check(&tpath).map_err(|e| CliError::bad_input(e.to_string()))?;
    let text = std::fs::read_to_string(&tpath).map_err(|e| CliError::io(&tpath, e))?;
    let task: Task = serde_json::from_str(&text).map_err(|e| CliError::bad_input(format!("{}: {e}", tpath.display())))?;
    Ok((tpath, text, task))
}

fn sol_spec(a: &EvalArgs, metric: &str) -> Result<Option<SolSpec>, CliError> {
    if a.bytes.is_none() && a.bytes_key.is_none() {
        return Ok(None);
    }
    let time_key = a.time_key.clone().unwrap_or_else(|| metric.to_string());
    if katlas_eval::guard::seconds_of(&time_key, 1.0).is_none() {
        return Err(CliError::bad_input(format!("speed-of-light check: `{time_key}` is not a time metric (suffix _ms, _us, _ns or _s); give --time-key")));
    }
    let (peak, source) = match (a.peak_gbps, &a.product) {
        (Some(p), _) => (p, "--peak-gbps".to_string()),
        (None, Some(name)) => {
            let db = katlas_arch::ArchDb::builtin();
            let prod = db.product(name).ok_or_else(|| CliError::bad_input(format!("--product {name}: not in the arch database")))?;
            let (bw, kind) = prod.best_bw_gbps();
            (bw, format!("arch db {name} ({kind})"))
        }
        (None, None) => {
            let devs = katlas_identity::gpu::devices();
            let db = katlas_arch::ArchDb::builtin();
            let found = devs.iter().find_map(|d| d.product.as_deref().and_then(|p| db.product(p)).map(|pr| (p_name(d), pr.best_bw_gbps())));
            match found {
                Some((n, (bw, kind))) => (bw, format!("arch db {n} ({kind})")),
                None => return Err(CliError::missing_env("speed-of-light check: no GPU product detected; give --peak-gbps or --product")),
            }
        }
    };
    Ok(Some(SolSpec { bytes: a.bytes, bytes_key: a.bytes_key.clone(), time_key, peak_gbps: peak, peak_source: source, margin: 0.05 }))
}

fn p_name(d: &katlas_model::Device) -> String {
    d.product.clone().unwrap_or_default()
}

#[allow(clippy::too_many_arguments)]
fn needs_baseline(a: &EvalArgs, ctx: &Ctx, meta: &Meta, metric: &str, g: Goal, dir: &Path, eval_id: &str, why: &str) -> CmdResult {
    let entry = plan::needs_baseline_entry(meta, metric, g, dir, eval_id, why, a.protocol.threshold.unwrap_or(0.01));
    if !a.protocol.no_ledger {
        katlas_eval::ledger::append(&ctx.layout()?.ledger(), &entry)?;
    }
    match a.format.format {
        Format::Json => print_json(&entry),
        _ => println!("verdict: needs_baseline ({why})"),
    }
    Ok(ExitCode::from(exit::NEGATIVE))
}

/// Store the A/A's band when it may set one; whether it did.
fn record_aa(ctx: &Ctx, key: &str, r: &EvalReport, max_band: f64) -> Result<bool, CliError> {
    let path = noise_file(ctx)?;
    match plan::record_aa(&path, key, r, max_band, &katlas_model::row::now_rfc3339())? {
        Err(why) => {
            eprintln!("katlas: A/A calibration refused: {why}");
            Ok(false)
        }
        Ok(c) => {
            eprintln!(
                "A/A noise band calibrated: ±{:.2}% at robust CV {:.2}% over {} runs/side (stored in {})",
                c.band * 100.0,
                c.cv.unwrap_or(0.0) * 100.0,
                c.runs_per_side.unwrap_or(0),
                path.display()
            );
            Ok(true)
        }
    }
}
