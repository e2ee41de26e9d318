//! `katlas eval --on slurm` and `katlas fleet ls|status|wait|cancel`: one eval judged on
//! several machines of a cluster. Each target is one Slurm job (`sbatch`, never a scheduler of
//! katlas's own) running the ordinary fresh-process eval on its node and pushing its samples
//! and verdict to the team store; the submitting side follows the jobs, resubmits a target
//! whose job died, and ends in the cross-target table and the allowlist decision.

pub mod job;
mod slurm;
mod submit;

use crate::cmd::store::UrlArg;
use crate::ctx::{exit, CliError, CmdResult, Ctx};
use crate::output::{print_json, printable, FormatArg};
use katlas_corpus::Layout;
use katlas_model::fleet::{FleetCommand, FleetJobResult, FleetRecord};
use katlas_model::ledger::{EvalResult, FleetOutcome, Verdict};
use katlas_store::sources::Kind;
use katlas_store::team::{self, Store};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub use submit::{fleet_target_dirs, push_target, submit_command, FleetArgs, Submission};

/// How long the submitting side follows its jobs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WaitOpts {
    /// Resubmit a target whose job ended without a result at most this many times
    /// [default: `[fleet] resubmit`, else 1].
    #[arg(long, value_name = "N")]
    pub resubmit: Option<u32>,
    /// Seconds between looks at the scheduler and the store [default: `[fleet] poll_s`, else 10].
    #[arg(long, value_name = "SECONDS")]
    pub poll: Option<f64>,
}

#[derive(Debug, clap::Subcommand)]
pub enum FleetCmd {
    /// Every fleet of this project, newest last, with its targets' job states.
    Ls(FormatArg),
    /// One look: each target's job state and verdict so far (no resubmission, no decision).
    Status(FleetIdArgs),
    /// Follow the jobs to the end: progress per target, a died job resubmitted, then the
    /// cross-target table, the allowlist decision and its ledger entry.
    Wait(FleetWaitArgs),
    /// Cancel the fleet's live jobs (`scancel`); finished targets keep their results.
    Cancel(FleetIdArgs),
}

#[derive(Debug, clap::Args)]
pub struct FleetIdArgs {
    /// Fleet id (`.katlas/fleet/<id>`), or `latest`.
    pub id: String,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct FleetWaitArgs {
    /// Fleet id (`.katlas/fleet/<id>`), or `latest`.
    pub id: String,
    #[command(flatten)]
    pub wait: WaitOpts,
    #[command(flatten)]
    pub format: FormatArg,
}

/// `[fleet]` of katlas.toml.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSection {
    /// `slurm` (the only one).
    pub scheduler: Option<String>,
    /// Extra `#SBATCH` options of every job (`--account=…`, `--gres=gpu:1`, `--exclusive`).
    #[serde(default)]
    pub sbatch_args: Vec<String>,
    /// `--time` of every job (Slurm's forms: `30`, `1:00:00`).
    pub time_limit: Option<String>,
    /// Path of katlas on the nodes (default: this katlas, which a shared file system serves).
    pub katlas: Option<String>,
    pub poll_s: Option<f64>,
    pub resubmit: Option<u32>,
    /// Named targets: `[fleet.target.gfx1100] partition = "mi300", constraint = "gfx942"`.
    #[serde(default)]
    pub target: BTreeMap<String, TargetSection>,
}

#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSection {
    pub partition: Option<String>,
    pub constraint: Option<String>,
    /// Arch atom of the target's nodes: the baseline file `katlas gate` judges there when
    /// `--arch` is not typed (else the node's detected GPU).
    pub arch: Option<String>,
    #[serde(default)]
    pub sbatch_args: Vec<String>,
}

pub fn section(ctx: &Ctx) -> Result<FleetSection, CliError> {
    let cfg: FleetSection = ctx.project()?.section(&["fleet"])?.unwrap_or_default();
    if let Some(s) = cfg.scheduler.as_deref().filter(|s| *s != "slurm") {
        return Err(CliError::bad_input(format!("[fleet] scheduler = `{}`: katlas sends fleet work to `slurm` only", printable(s))));
    }
    Ok(cfg)
}

pub fn fleet_dir(layout: &Layout) -> PathBuf {
    layout.root.join("fleet")
}

fn record_path(layout: &Layout, id: &str) -> PathBuf {
    fleet_dir(layout).join(id).join("fleet.json")
}

/// The fleet `id` names (`latest`: the newest), refusing anything but one plain directory name.
fn resolve_id(layout: &Layout, id: &str) -> Result<String, CliError> {
    if id == "latest" {
        let mut ids = list_ids(layout);
        return ids
            .pop()
            .ok_or_else(|| CliError::bad_input(format!("no fleet under {}: submit one with `katlas eval … --on slurm`", fleet_dir(layout).display())));
    }
    if !submit::plain_name(id) {
        return Err(CliError::bad_input(format!("fleet id `{}`: one directory name under {}", printable(id), fleet_dir(layout).display())));
    }
    Ok(id.to_string())
}

/// Fleet ids in creation order (their names start with the submission time).
fn list_ids(layout: &Layout) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(fleet_dir(layout))
        .map(|rd| rd.flatten().filter(|e| e.path().join("fleet.json").is_file()).filter_map(|e| e.file_name().to_str().map(str::to_string)).collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

pub fn load(layout: &Layout, id: &str) -> Result<FleetRecord, CliError> {
    let p = record_path(layout, id);
    katlas_fs::check(&p).map_err(|e| CliError::bad_input(e.to_string()))?;
    let text = std::fs::read_to_string(&p).map_err(|e| CliError::io(&p, e))?;
    serde_json::from_str(&text).map_err(|e| CliError::bad_input(format!("{}: line {}, column {}: {e}", p.display(), e.line(), e.column())))
}

pub fn save(layout: &Layout, r: &FleetRecord) -> Result<(), CliError> {
    let mut bytes = serde_json::to_vec_pretty(r).expect("fleet record serialises");
    bytes.push(b'\n');
    Ok(katlas_fs::write_atomic(&record_path(layout, &r.id), &bytes)?)
}

pub fn run(c: &FleetCmd, ctx: &Ctx) -> CmdResult {
    let layout = ctx.layout()?;
    match c {
        FleetCmd::Ls(f) => {
            let recs: Vec<FleetRecord> = list_ids(&layout).iter().map(|id| load(&layout, id)).collect::<Result<_, _>>()?;
            if f.format == crate::output::Format::Json {
                print_json(&recs);
                return Ok(ExitCode::SUCCESS);
            }
            if recs.is_empty() {
                println!("no fleets yet: `katlas eval … --on slurm --partition P` submits one");
            }
            for r in recs {
                let t: Vec<String> = r
                    .targets
                    .iter()
                    .map(|t| {
                        format!(
                            "{} (job {})",
                            t.name,
                            t.jobs.last().map(|j| format!("{} {}", j.job_id, j.state.as_deref().unwrap_or("?"))).unwrap_or_else(|| "none".into())
                        )
                    })
                    .collect();
                println!("{}  {} {}  {}", r.id, r.command, r.metric, t.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        FleetCmd::Status(a) => {
            let id = resolve_id(&layout, &a.id)?;
            let mut store = connect(ctx)?;
            let mut r = load(&layout, &id)?;
            let looks = look(ctx, &layout, &mut store, &mut r)?;
            save(&layout, &r)?;
            let lines: Vec<FleetOutcome> = r.targets.iter().zip(&looks).map(|(t, l)| outcome_of(&r, t, l)).collect();
            if a.format.format == crate::output::Format::Json {
                print_json(&serde_json::json!({"fleet": r, "targets": lines}));
            } else {
                print_table(&r, &lines, None);
            }
            Ok(ExitCode::SUCCESS)
        }
        FleetCmd::Wait(a) => {
            let id = resolve_id(&layout, &a.id)?;
            wait(ctx, &id, &a.wait, a.format.format)
        }
        FleetCmd::Cancel(a) => {
            let id = resolve_id(&layout, &a.id)?;
            let mut r = load(&layout, &id)?;
            let mut live = Vec::new();
            for t in &r.targets {
                if let Some(j) = t.jobs.last() {
                    if slurm::job(&j.job_id, &ctx.cwd)?.is_some_and(|i| i.live()) {
                        live.push(j.job_id.clone());
                    }
                }
            }
            slurm::scancel(&live, &ctx.cwd)?;
            for t in &mut r.targets {
                if let Some(j) = t.jobs.last_mut().filter(|j| live.contains(&j.job_id)) {
                    j.state = Some("CANCELLED".into());
                }
            }
            save(&layout, &r)?;
            println!("fleet {id}: cancelled {} live job(s){}", live.len(), if live.is_empty() { String::new() } else { format!(" ({})", live.join(", ")) });
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn connect(ctx: &Ctx) -> Result<Store, CliError> {
    let url = crate::cmd::store::url(&UrlArg { url: None }, ctx)
        .map_err(|e| CliError { code: e.code, message: format!("{}: a fleet's jobs report their samples and verdicts through the team store", e.message) })?;
    Store::connect(&url).map_err(CliError::from)
}

/// A target's result, from the store.
#[derive(Debug, Clone)]
enum Finished {
    Eval(Box<EvalResult>),
    /// A gate's or collect's job.
    Job(Box<FleetJobResult>),
}

/// What one look found for a target.
#[derive(Debug, Clone)]
enum Look {
    Done(Finished),
    Live(slurm::JobInfo),
    /// The job ended (or was forgotten) without a result in the store.
    Ended {
        job: String,
        state: String,
        log_tail: Option<String>,
    },
    NotSubmitted,
}

/// Whether the store's record `id` holds exactly the result this fleet's job wrote in the
/// project (`fleet/F/T/N/result.json`, on the file system the nodes share). Anyone who can push
/// to the store can push a record under a fleet's id; only the job writes the file.
fn written_by_the_job(layout: &Layout, id: &str, file: &str, raw: &[u8]) -> bool {
    let parts: Vec<&str> = id.split('/').collect();
    let ["fleet", f, t, n] = parts.as_slice() else { return false };
    if !(submit::plain_name(f) && submit::plain_name(t) && n.parse::<u32>().is_ok()) {
        return false;
    }
    let file = submit::job_dir(layout, f, t).join(n).join(file);
    katlas_fs::check(&file).is_ok() && std::fs::read(&file).is_ok_and(|b| b == raw)
}

/// The newest finished result of `target` in the store that its job wrote (another host's
/// evidence: read, never resumed). A record the job's file does not back is reported, not used.
fn stored_result(layout: &Layout, store: &mut Store, command: FleetCommand, fleet: &str, target: &str) -> Result<Option<Finished>, CliError> {
    let (kind, file) = match command {
        FleetCommand::Eval => (Kind::EvalResult, "result.json"),
        FleetCommand::Gate | FleetCommand::Collect => (Kind::FleetJob, "job.json"),
    };
    let recs = team::records_with_prefix(store, kind, &format!("fleet/{fleet}/{target}/"), 1000)?;
    let mut best: Option<(u32, Finished)> = None;
    for rec in recs {
        let n: u32 = rec.id.rsplit('/').next().and_then(|n| n.parse().ok()).unwrap_or(0);
        if !written_by_the_job(layout, &rec.id, file, &rec.raw) {
            eprintln!(
                "katlas: warning: the store's result {} (pushed by {}) is not the file this fleet's job wrote: not used",
                printable(&rec.id),
                printable(rec.pushed_by.as_deref().unwrap_or("unknown"))
            );
            continue;
        }
        let found = match command {
            FleetCommand::Eval => serde_json::from_slice::<EvalResult>(&rec.raw).ok().filter(|r| r.eval_id == rec.id).map(|r| Finished::Eval(Box::new(r))),
            _ => serde_json::from_slice::<FleetJobResult>(&rec.raw).ok().filter(|j| j.id == rec.id && j.command == command).map(|j| Finished::Job(Box::new(j))),
        };
        if let Some(f) = found {
            if best.as_ref().is_none_or(|(m, _)| n > *m) {
                best = Some((n, f));
            }
        }
    }
    Ok(best.map(|(_, r)| r))
}

fn look(ctx: &Ctx, layout: &Layout, store: &mut Store, r: &mut FleetRecord) -> Result<Vec<Look>, CliError> {
    let mut out = Vec::new();
    let fid = r.id.clone();
    let command = r.command;
    for t in &mut r.targets {
        let Some(job) = t.jobs.last_mut() else {
            out.push(Look::NotSubmitted);
            continue;
        };
        // The scheduler first: a job seen ended before the store is read cannot push after it.
        let info = slurm::job(&job.job_id, &ctx.cwd)?;
        if let Some(i) = &info {
            job.state = Some(i.state.clone());
            if i.node.is_some() {
                job.node = i.node.clone();
            }
        }
        if let Some(res) = stored_result(layout, store, command, &fid, &t.name)? {
            out.push(Look::Done(res));
            continue;
        }
        match info {
            Some(i) if i.live() => out.push(Look::Live(i)),
            other => {
                let state = other.map(|i| i.state).unwrap_or_else(|| "gone from the scheduler".into());
                let log = submit::job_log(layout, &fid, &t.name, &job.job_id);
                out.push(Look::Ended { job: job.job_id.clone(), state, log_tail: katlas_proc::tail(&log, 600) });
            }
        }
    }
    Ok(out)
}

fn outcome_of(r: &FleetRecord, t: &katlas_model::fleet::FleetTarget, l: &Look) -> FleetOutcome {
    let job = t.jobs.last().map(|j| j.job_id.as_str());
    match l {
        Look::Done(res) => match res {
            Finished::Eval(e) => katlas_eval::fleet::outcome(&t.name, job, &r.expected, Some(e), ""),
            Finished::Job(j) => katlas_eval::fleet::job_outcome(&t.name, job, &r.expected, Some(j), ""),
        },
        Look::Live(i) => katlas_eval::fleet::outcome(&t.name, job, &r.expected, None, &format!("job {} {}", job.unwrap_or("?"), i.state)),
        Look::Ended { job, state, log_tail } => {
            let tail = log_tail
                .as_deref()
                .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()))
                .map(|l| format!("; its log ends `{}`", printable(l.trim())))
                .unwrap_or_default();
            katlas_eval::fleet::outcome(&t.name, Some(job), &r.expected, None, &format!("job {job} {state} without a result in the store{tail}"))
        }
        Look::NotSubmitted => katlas_eval::fleet::outcome(&t.name, None, &r.expected, None, "not submitted"),
    }
}

/// The newest progress line a running target's command wrote to its job log.
fn progress_line(layout: &Layout, fid: &str, command: FleetCommand, target: &str, job: &str) -> Option<String> {
    let tail = katlas_proc::tail(&submit::job_log(layout, fid, target, job), 4096)?;
    let lead = format!("katlas {command}:");
    tail.lines().rev().find(|l| l.starts_with(&lead)).map(|l| l.trim_start_matches(&lead).trim().to_string())
}

/// Follow the fleet until every target has a result or is out of attempts; then the table,
/// the decision and its ledger entry.
pub fn wait(ctx: &Ctx, id: &str, opts: &WaitOpts, format: crate::output::Format) -> CmdResult {
    let layout = ctx.layout()?;
    let cfg = section(ctx)?;
    let resubmit = opts.resubmit.or(cfg.resubmit).unwrap_or(1);
    let poll = Duration::from_secs_f64(opts.poll.or(cfg.poll_s).unwrap_or(10.0).clamp(0.2, 600.0));
    let mut store = connect(ctx)?;
    let t0 = Instant::now();
    let mut shown: BTreeMap<String, String> = BTreeMap::new();
    katlas_proc::install_interrupt_handler();
    loop {
        let mut r = load(&layout, id)?;
        let looks = look(ctx, &layout, &mut store, &mut r)?;
        let mut pending = 0;
        for (t, l) in r.targets.clone().iter().zip(&looks) {
            let said = match l {
                Look::Done(res) => match res {
                    Finished::Eval(e) => format!("done: {}", e.verdict),
                    Finished::Job(j) => format!("done: {}", j.summary),
                },
                Look::Live(i) => {
                    pending += 1;
                    let job = t.jobs.last().map(|j| j.job_id.as_str()).unwrap_or("?");
                    let on = i.node.as_deref().map(|n| format!(" on {n}")).unwrap_or_default();
                    let why = i.reason.as_deref().filter(|_| i.state == "PENDING").map(|r| format!(" ({r})")).unwrap_or_default();
                    let p = progress_line(&layout, id, r.command, &t.name, job).map(|p| format!(": {p}")).unwrap_or_default();
                    format!("job {job} {}{on}{why}{p}", i.state)
                }
                Look::Ended { job, state, .. } => {
                    let attempts = t.jobs.len() as u32;
                    if attempts <= resubmit {
                        let new = submit::resubmit(ctx, &layout, &mut r, &t.name)?;
                        pending += 1;
                        format!("job {job} {state} without a result: resubmitted as job {new} (attempt {} of {})", attempts + 1, resubmit + 1)
                    } else {
                        format!("job {job} {state} without a result; no resubmission left (--resubmit {resubmit})")
                    }
                }
                Look::NotSubmitted => "not submitted".into(),
            };
            if shown.get(&t.name) != Some(&said) {
                eprintln!("katlas fleet {id}: {:.0} s: {}: {}", t0.elapsed().as_secs_f64(), t.name, printable(&said));
                shown.insert(t.name.clone(), said);
            }
        }
        save(&layout, &r)?;
        if pending == 0 {
            return finish(&layout, &r, &looks, format);
        }
        let until = Instant::now() + poll;
        while Instant::now() < until {
            if katlas_proc::interrupted() {
                eprintln!(
                    "katlas fleet {id}: stopped following; the jobs go on. `katlas fleet wait {id}` picks them up, `katlas fleet cancel {id}` ends them."
                );
                return Ok(ExitCode::from(exit::INTERRUPTED));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn finish(layout: &Layout, r: &FleetRecord, looks: &[Look], format: crate::output::Format) -> CmdResult {
    let mut lines: Vec<FleetOutcome> = r.targets.iter().zip(looks).map(|(t, l)| outcome_of(r, t, l)).collect();
    if r.command != FleetCommand::Eval {
        return finish_jobs(r, &lines, format);
    }
    let results: Vec<&EvalResult> = looks
        .iter()
        .filter_map(|l| match l {
            Look::Done(res) => match res {
                Finished::Eval(e) => Some(e.as_ref()),
                Finished::Job(_) => None,
            },
            _ => None,
        })
        .collect();
    katlas_eval::fleet::binaries_agree(&mut lines, &results);
    let first = results.first().copied();
    let (summary, verdict, disposition) = katlas_eval::fleet::decide(&r.id, &r.scheduler, lines);
    let entry = katlas_eval::fleet::decision_entry(r, first, summary.clone(), verdict, disposition, &katlas_model::row::now_rfc3339());
    let ledger = layout.ledger();
    let added = katlas_corpus::append_jsonl_dedup(&ledger, std::slice::from_ref(&entry), |e| e.id.as_str(), katlas_corpus::Fsync::Batch)?;
    if format == crate::output::Format::Json {
        print_json(&entry);
    } else {
        print_table(r, &summary.targets, Some(&summary));
        if added.written == 0 {
            println!("(the decision was in the ledger already as {})", entry.id);
        } else {
            println!("ledger: {} ({verdict}, {})", entry.id, entry.disposition);
        }
    }
    Ok(ExitCode::from(if verdict == Verdict::Improved { exit::OK } else { exit::NEGATIVE }))
}

/// A gate's or collect's fleet: every target's line and, for a gate, one verdict over them
/// (it fails closed: an unmeasured or `invalid` target fails it). Exit 0 when every target
/// passed.
fn finish_jobs(r: &FleetRecord, lines: &[FleetOutcome], format: crate::output::Format) -> CmdResult {
    let passed = katlas_eval::fleet::all_passed(lines);
    if format == crate::output::Format::Json {
        print_json(&serde_json::json!({"fleet": r.id, "command": r.command, "passed": passed, "targets": lines}));
    } else {
        print_table(r, lines, None);
        let failing: Vec<&str> = lines.iter().filter(|l| l.passed != Some(true)).map(|l| l.target.as_str()).collect();
        match (r.command, failing.is_empty()) {
            (FleetCommand::Gate, true) => println!("gate: PASS on every target"),
            (FleetCommand::Gate, false) => println!("gate: FAIL on {} (a gate fails closed: an unmeasured or invalid target fails it)", failing.join(", ")),
            (_, true) => println!("collect: every target's rows are in the store and in .katlas/corpus/"),
            (_, false) => println!("collect: {} without a complete collect", failing.join(", ")),
        }
    }
    Ok(ExitCode::from(if passed { exit::OK } else { exit::NEGATIVE }))
}

fn print_table(r: &FleetRecord, lines: &[FleetOutcome], decision: Option<&katlas_model::ledger::FleetSummary>) {
    if r.command != FleetCommand::Eval {
        println!("fleet {}: {} across {} target(s)", r.id, r.command, lines.len());
        let mut t = crate::output::table(crate::output::Format::Text, &["target", "arch", "host", "job", "result", "finding"]);
        for o in lines {
            let result = match (o.verdict, o.passed) {
                (Some(Verdict::Invalid), _) => "invalid",
                (_, Some(true)) => "pass",
                (_, Some(false)) => "fail",
                (_, None) => "not measured",
            };
            let finding =
                if o.verdict == Some(Verdict::Invalid) { o.reasons.first().cloned() } else { o.summary.clone().or_else(|| o.reasons.first().cloned()) };
            t.add_row(vec![
                o.target.clone(),
                o.arch.clone().unwrap_or_else(|| "-".into()),
                o.host.clone().unwrap_or_else(|| "-".into()),
                o.job_id.clone().unwrap_or_else(|| "-".into()),
                result.into(),
                finding.unwrap_or_default(),
            ]);
        }
        println!("{t}");
        return;
    }
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|o| {
            let effect = o
                .effect
                .as_ref()
                .filter(|_| o.verdict.is_some_and(|v| v != Verdict::Invalid))
                .map(|e| format!("{:+.1}% {}", e.gain * 100.0, katlas_eval::words::gain_interval_text(e, o.goal.unwrap_or_default())))
                .unwrap_or_default();
            vec![
                o.target.clone(),
                o.arch.clone().unwrap_or_else(|| "-".into()),
                o.host.clone().unwrap_or_else(|| "-".into()),
                o.job_id.clone().unwrap_or_else(|| "-".into()),
                o.verdict.map(|v| v.to_string()).unwrap_or_else(|| "not measured".into()),
                effect,
                o.reasons.first().cloned().unwrap_or_default(),
            ]
        })
        .collect();
    println!("fleet {}: {} across {} target(s)", r.id, r.metric, lines.len());
    let mut t = crate::output::table(crate::output::Format::Text, &["target", "arch", "host", "job", "verdict", "gain", "why"]);
    for row in rows {
        t.add_row(row);
    }
    println!("{t}");
    if let Some(s) = decision {
        let list = if s.allowlist.is_empty() {
            String::new()
        } else {
            format!(": the candidate runs on {}; every other arch keeps the default", s.allowlist.join(", "))
        };
        println!("decision: {}{list}", s.decision);
        if let Some(why) = lines.iter().find(|o| o.verdict == Some(Verdict::Regressed)) {
            println!("  {} regressed: a measured regression anywhere rejects the change as it stands", why.target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_record_counts_only_when_the_jobs_own_file_backs_it() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::for_project(d.path());
        let dir = submit::job_dir(&layout, "f1", "wide").join("1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("result.json"), b"{\"verdict\":\"regressed\"}").unwrap();
        let r = "result.json";
        assert!(written_by_the_job(&layout, "fleet/f1/wide/1", r, b"{\"verdict\":\"regressed\"}"));
        assert!(!written_by_the_job(&layout, "fleet/f1/wide/1", r, b"{\"verdict\":\"improved\"}"), "a forged verdict under the job's id");
        assert!(!written_by_the_job(&layout, "fleet/f1/wide/1", "job.json", b"{\"verdict\":\"regressed\"}"), "another file of the job");
        assert!(!written_by_the_job(&layout, "fleet/f1/wide/2", r, b"{\"verdict\":\"regressed\"}"), "an attempt the job never wrote");
        assert!(!written_by_the_job(&layout, "fleet/f1/../../x/1", r, b""));
        assert!(!written_by_the_job(&layout, "evals/e/1", r, b""));
    }
}
