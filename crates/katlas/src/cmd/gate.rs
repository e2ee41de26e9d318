//! `katlas gate`: speed floors per arch, fail closed.

use crate::cmd::fleet::job;
use crate::ctx::{exit, CliError, CmdResult, Ctx};
use crate::output::{print_json, table, Format, FormatArg};
use katlas_eval::config::GateConfig;
use katlas_eval::gate::{check_with_facts, find, parse, unknown_directions, update, Status};
use katlas_eval::protocol::run_process;
use katlas_model::fleet::FleetCommand;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Arch atom (default: the detected GPU's).
    #[arg(long)]
    pub arch: Option<String>,
    /// Directory of baseline files `<arch>.txt` / `<arch>.toml` (default: tests/speed-baselines).
    #[arg(long)]
    pub baselines: Option<PathBuf>,
    /// Shell command whose output carries the metrics; run N times in fresh processes.
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    /// Runs of the command; the gate judges the median [default: 5].
    #[arg(long, short = 'n')]
    pub runs: Option<u32>,
    /// Output parser for the command's output [default: kv].
    #[arg(long)]
    pub parser: Option<String>,
    /// Saved outputs to read instead of (or besides) running a command, one run each.
    #[arg(long = "from", value_name = "FILE")]
    pub from: Vec<PathBuf>,
    /// Only these floors (otherwise every active floor must be measured).
    #[arg(long = "key", value_name = "METRIC")]
    pub keys: Vec<String>,
    /// Facts about this run that floors' identity pins are checked against (`model_md5=…`);
    /// `arch` and the detected GPU `product` are known without it.
    #[arg(long = "fact", value_name = "KEY=VALUE")]
    pub facts: Vec<String>,
    /// Noise threshold when the file gives no tolerance [default: 0.01].
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Raise floors to the measured medians (never lowers without --allow-lower).
    #[arg(long)]
    pub update: bool,
    /// With --update: also lower floors, recording --reason in the file.
    #[arg(long, requires = "reason")]
    pub allow_lower: bool,
    /// Why floors are lowered (needed by --allow-lower; recorded in the baseline file).
    #[arg(long)]
    pub reason: Option<String>,
    /// Per-run timeout of --command, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub fleet: crate::cmd::fleet::FleetArgs,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(a: &GateArgs, ctx: &Ctx) -> CmdResult {
    let project = ctx.project()?;
    let gcfg: GateConfig = project.section(&["gate"])?.unwrap_or_default();
    let parser = a.parser.clone().or(gcfg.parser.clone()).unwrap_or_else(|| "kv".into());
    let runs = a.runs.or(gcfg.runs).unwrap_or(5);
    let threshold = a.threshold.or(gcfg.threshold).unwrap_or(0.01);
    let command = a.command.clone().or(gcfg.command.clone());
    if let Some(cmd) = command.as_ref().filter(|_| a.command.is_none()) {
        crate::trust::authorize(ctx, &[project.config_commands(vec![("[gate] command".into(), cmd.clone())])])?;
    }
    if a.update && (a.fleet.on.is_some() || a.fleet.fleet_target.is_some()) {
        return Err(CliError::bad_input("--update runs here, not on a fleet: judge with --on slurm, then raise floors from one machine's runs"));
    }
    if a.fleet.on.is_some() {
        return crate::cmd::fleet::submit_command(
            crate::cmd::fleet::Submission {
                command: FleetCommand::Gate,
                fleet: &a.fleet,
                metric: if a.keys.is_empty() { "speed floors".into() } else { format!("speed floors of {}", a.keys.join(", ")) },
                lever: None,
                kernel: None,
                arch_given: a.arch.is_some(),
                format: a.format.format,
            },
            ctx,
        );
    }
    // A fleet target's job judges in its own attempt directory and reports through the store.
    let attempt = match a.fleet.fleet_target.as_deref().map(|s| job::begin(ctx, s)).transpose()? {
        Some(None) => return Ok(ExitCode::SUCCESS),
        Some(Some(at)) => Some(at),
        None => None,
    };
    let arch = match &a.arch {
        Some(x) => x.clone(),
        None => katlas_identity::gpu::devices().into_iter().find_map(|d| d.arch).ok_or_else(|| CliError::missing_env("no GPU detected; give --arch"))?,
    };
    let dir = match (&a.baselines, &gcfg.baselines) {
        (Some(d), _) => ctx.resolve(d),
        (None, Some(d)) => project.root.join(d),
        (None, None) => project.root.join("tests/speed-baselines"),
    };
    let Some(path) = find(&dir, &arch) else {
        let why = format!("no baseline file for {arch} in {} (fail closed)", dir.display());
        eprintln!("katlas: gate: {why}");
        if let Some(at) = &attempt {
            let found = job::Found {
                passed: false,
                summary: format!("gate {arch}: FAIL — {why}"),
                arch: Some(arch.clone()),
                reasons: vec![why],
                gate: None,
                rows: None,
            };
            job::finish(ctx, at, FleetCommand::Gate, found)?;
        }
        return Ok(ExitCode::from(exit::NEGATIVE));
    };
    let text = katlas_corpus::input::read_text(&path).map_err(CliError::bad_input)?;
    let file = parse(&path, &text)?;
    // A key whose direction is unknown cannot be judged: refuse before measuring anything.
    let unknown = unknown_directions(&file, &gcfg.goals, &a.keys);
    if !unknown.is_empty() {
        return Err(CliError::bad_input(format!(
            "{}: no direction for {}: say whether larger or smaller is better with `goal = \"maximize\"|\"minimize\"` in the floor (TOML) or `[gate] goals` in katlas.toml",
            path.display(),
            unknown.join(", ")
        )));
    }
    let mut measured: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut add = |text: &str, source: &str| -> Result<(), CliError> {
        let p = katlas_eval::metric::read_metrics(&parser, text, source)?;
        for (k, v) in p.metrics {
            measured.entry(k).or_default().push(v);
        }
        Ok(())
    };
    for f in &a.from {
        let f = ctx.resolve(f);
        let t = katlas_corpus::input::read_text(&f).map_err(CliError::bad_input)?;
        add(&t, &f.display().to_string())?;
    }
    if let Some(cmd) = &command {
        for i in 0..runs {
            let argv = vec!["sh".to_string(), "-c".to_string(), cmd.clone()];
            let r = run_process(&argv, &BTreeMap::new(), &[], &project.root, Duration::from_secs_f64(a.timeout))?;
            if r.code != Some(0) {
                return Err(CliError::negative(format!(
                    "gate run {} of `{cmd}` failed (exit {:?}): {}",
                    i + 1,
                    r.code,
                    String::from_utf8_lossy(&r.stderr).lines().last().unwrap_or("")
                )));
            }
            add(&String::from_utf8_lossy(&r.stdout), &format!("run {}", i + 1))?;
        }
    }
    let mut facts: BTreeMap<String, String> = BTreeMap::new();
    facts.insert("arch".into(), arch.clone());
    if file.floors.iter().any(|f| f.pins.contains_key("product")) {
        if let Some(p) = katlas_identity::gpu::devices().into_iter().find_map(|d| d.product) {
            facts.insert("product".into(), p);
        }
    }
    for f in &a.facts {
        let (k, v) = f.split_once('=').ok_or_else(|| CliError::bad_input(format!("--fact {f}: expected KEY=VALUE")))?;
        facts.insert(k.trim().into(), v.trim().into());
    }
    let report = check_with_facts(&file, &arch, &measured, threshold, &a.keys, &facts, &gcfg.goals);
    if let Some(at) = &attempt {
        let found = job::Found {
            passed: report.passed,
            summary: headline(&arch, &report),
            arch: Some(arch.clone()),
            reasons: report.reasons.clone(),
            gate: serde_json::to_value(&report).ok(),
            rows: None,
        };
        job::finish(ctx, at, FleetCommand::Gate, found)?;
    }
    if a.format.format == Format::Json {
        print_json(&report);
    } else {
        println!("{}", headline(&arch, &report));
        let mut t = table(a.format.format, &["metric", "better", "floor", "median", "n", "vs floor (+ = better)", "tolerance", "status"]);
        for c in &report.checks {
            let unit = katlas_eval::words::unit_suffix(&c.metric);
            t.add_row(vec![
                c.metric.clone(),
                if c.goal == katlas_model::ledger::Goal::Maximize { "higher" } else { "lower" }.into(),
                format!("{}{unit}", c.floor),
                c.median.map(|m| format!("{m:.4}{unit}")).unwrap_or_else(|| "-".into()),
                c.n.to_string(),
                gain(c).map(|g| format!("{:+.2}%", g * 100.0)).unwrap_or_else(|| "-".into()),
                format!("{:.2}%", c.tolerance * 100.0),
                serde_json::to_value(c.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
            ]);
        }
        println!("{t}");
        for r in &report.reasons {
            println!("  - {r}");
        }
    }
    if a.update {
        if report.checks.iter().all(|c| c.median.is_none() || c.status == Status::Deprecated) {
            return Err(CliError::bad_input("--update: nothing was measured"));
        }
        let today = katlas_model::row::now_rfc3339()[..10].to_string();
        let reason = if a.allow_lower { a.reason.as_deref() } else { None };
        let (text, changes) = update(&file, &report, reason, &today);
        if !changes.is_empty() {
            std::fs::write(&path, text).map_err(|source| katlas_eval::EvalError::Io { path: path.clone(), source })?;
        }
        for c in &changes {
            eprintln!("updated {}: {c}", path.display());
        }
        let lower: Vec<_> = report.checks.iter().filter(|c| c.median.is_some_and(|m| m < c.floor) && c.status != Status::Deprecated).collect();
        if !a.allow_lower && !lower.is_empty() {
            eprintln!("{} floor(s) left unlowered; lowering needs --allow-lower --reason TEXT", lower.len());
        }
    }
    Ok(ExitCode::from(if report.passed { exit::OK } else { exit::NEGATIVE }))
}

/// How much better than its floor a key's median is, in `eval`'s sign convention
/// (+ = better: a rate above its floor, a time below its ceiling).
fn gain(c: &katlas_eval::gate::Check) -> Option<f64> {
    c.shortfall.map(|s| if c.goal == katlas_model::ledger::Goal::Minimize { -s } else { s })
}

/// The gate's finding in one line: `gate sm_90: FAIL — time_ms 72.0% slower than its ceiling 10 ms (tolerance 1.0%); median of 5 runs`.
fn headline(arch: &str, r: &katlas_eval::gate::GateReport) -> String {
    let judged: Vec<_> = r.checks.iter().filter(|c| matches!(c.status, Status::Pass | Status::PassWithinNoise | Status::Fail)).collect();
    let runs = judged.iter().map(|c| c.n).max().unwrap_or(0);
    let how = format!("median of {runs} run{}", if runs == 1 { "" } else { "s" });
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    let failed: Vec<String> = judged
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| {
            let what = if c.goal == katlas_model::ledger::Goal::Maximize { "floor" } else { "ceiling" };
            let g = gain(c).unwrap_or(0.0);
            format!(
                "{} {} than its {what} {}{} (tolerance {:.1}%)",
                c.metric,
                katlas_eval::words::gain_words(g, &c.metric),
                c.floor,
                katlas_eval::words::unit_suffix(&c.metric),
                c.tolerance * 100.0
            )
        })
        .collect();
    if !failed.is_empty() {
        format!("gate {arch}: {verdict} — {}; {how}", failed.join("; "))
    } else if r.passed {
        let within = judged.iter().filter(|c| c.status == Status::PassWithinNoise).count();
        let noise = if within > 0 { format!(" ({within} within tolerance)") } else { String::new() };
        format!("gate {arch}: {verdict} — {} of {} floor(s) held{noise}; {how}", judged.len(), r.checks.len())
    } else {
        format!("gate {arch}: {verdict} — {}", r.reasons.first().map(String::as_str).unwrap_or("nothing was checked"))
    }
}
