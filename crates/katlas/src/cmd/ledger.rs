//! `katlas ledger ls|show`: every verdict, wins and rejections alike.

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, say_err, say_line, table, Format, FormatArg};
use clap::builder::PossibleValuesParser;
use katlas_eval::ledger::{find, read, Filter};
use katlas_model::ledger::{gain_text, Disposition, LedgerEntry, Verdict};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum LedgerCmd {
    /// List ledger entries, newest last, with filters.
    Ls(LsArgs),
    /// Show one entry whole, by id (or unique id prefix).
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Only entries with this verdict.
    #[arg(long, value_parser = crate::cmd::eval::verdict_parser())]
    pub verdict: Option<Verdict>,
    /// Only entries of this lever (exact name, as in `katlas suggest --catalog`).
    #[arg(long)]
    pub lever: Option<String>,
    /// Kernel name substring.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Only entries of this arch atom (`sm_90`, `gfx1100`).
    #[arg(long)]
    pub arch: Option<String>,
    /// Only entries of this task id.
    #[arg(long)]
    pub task: Option<String>,
    /// Only entries judged on this metric (exact name).
    #[arg(long)]
    pub metric: Option<String>,
    /// Only entries with this kind of disposition (a revisit-if matches whatever its condition).
    #[arg(long, value_parser = disposition_kinds())]
    pub disposition: Option<String>,
    /// Entries recorded at or after this RFC 3339 time (or date).
    #[arg(long)]
    pub since: Option<String>,
    /// Ledger file (default: the project's .katlas/ledger.jsonl).
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Entry id or a unique prefix of one.
    pub id: String,
    /// Ledger file (default: the project's .katlas/ledger.jsonl).
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

/// The names `--disposition` takes: each disposition's kind, as the ledger filter compares it.
fn disposition_kinds() -> PossibleValuesParser {
    let every = [Disposition::Promote, Disposition::Reject, Disposition::OptIn, Disposition::RevisitIf { condition: String::new() }];
    PossibleValuesParser::new(every.map(|d| d.kind()))
}

fn load(ctx: &Ctx, file: &Option<PathBuf>) -> Result<Vec<LedgerEntry>, CliError> {
    let path = match file {
        Some(f) => ctx.resolve(f),
        None => ctx.layout()?.ledger(),
    };
    let rep = read(&path)?;
    for e in &rep.errors {
        say_err!("katlas: warning: {e}");
    }
    Ok(rep.records.into_iter().map(|l| l.record).collect())
}

pub fn run(c: &LedgerCmd, ctx: &Ctx) -> CmdResult {
    match c {
        LedgerCmd::Ls(a) => ls(a, ctx),
        LedgerCmd::Show(a) => show(a, ctx),
    }
}

fn ls(a: &LsArgs, ctx: &Ctx) -> CmdResult {
    let f = Filter {
        verdict: a.verdict,
        lever: a.lever.clone(),
        kernel: a.kernel.clone(),
        arch: a.arch.clone(),
        task: a.task.clone(),
        metric: a.metric.clone(),
        disposition: a.disposition.clone(),
        since: a.since.clone(),
    };
    let entries: Vec<LedgerEntry> = load(ctx, &a.file)?.into_iter().filter(|e| f.matches(e)).collect();
    if a.format.format == Format::Json {
        print_json(&entries);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t =
        table(a.format.format, &["id", "recorded", "task", "compared", "lever", "kernel", "arch", "metric", "verdict", "gain", "gain interval", "disposition"]);
    for e in &entries {
        let fx = e.effect.as_ref();
        t.add_row(vec![
            e.id[..12.min(e.id.len())].to_string(),
            e.recorded_at.clone(),
            e.task_id.clone().unwrap_or_else(|| "-".into()),
            katlas_eval::words::compared(e),
            e.lever.clone().unwrap_or_else(|| "-".into()),
            e.key.kernel.clone().unwrap_or_else(|| "-".into()),
            e.key.arch.clone().unwrap_or_else(|| "-".into()),
            e.metric.clone(),
            e.verdict.to_string(),
            fx.map(|x| gain_text(x.gain)).unwrap_or_else(|| "-".into()),
            fx.map(|x| katlas_eval::words::gain_interval_text(x, e.goal)).unwrap_or_else(|| "-".into()),
            e.disposition.to_string(),
        ]);
    }
    println!("{t}");
    say_line!("{} entr{}", entries.len(), if entries.len() == 1 { "y" } else { "ies" });
    Ok(ExitCode::SUCCESS)
}

fn show(a: &ShowArgs, ctx: &Ctx) -> CmdResult {
    let entries = load(ctx, &a.file)?;
    let e = find(&entries, &a.id)?;
    if a.format.format == Format::Json {
        print_json(e);
        return Ok(ExitCode::SUCCESS);
    }
    // The finding first, in the words `katlas eval` used for it.
    say_line!("{}", katlas_eval::words::entry_headline(e));
    say_line!("id:          {}", e.id);
    say_line!("recorded:    {}", e.recorded_at);
    say_line!("task/eval:   {} / {}", e.task_id.as_deref().unwrap_or("-"), e.eval_id.as_deref().unwrap_or("-"));
    say_line!("compared:    {}", katlas_eval::words::compared(e));
    say_line!("lever:       {}   kernel: {}", e.lever.as_deref().unwrap_or("-"), e.key.kernel.as_deref().unwrap_or("-"));
    say_line!(
        "arch:        {}   phase: {}   shape: {}   quant: {}",
        e.key.arch.as_deref().unwrap_or("-"),
        e.key.phase.as_deref().unwrap_or("-"),
        e.key.shape.as_deref().unwrap_or("-"),
        e.key.quant.as_deref().unwrap_or("-")
    );
    if let Some(h) = &e.hypothesis {
        say_line!("hypothesis:  {h}");
    }
    say_line!("metric:      {} ({})", e.metric, katlas_eval::words::goal_words(e.goal));
    let unit = katlas_eval::words::unit_suffix(&e.metric);
    for s in [&e.baseline, &e.candidate] {
        say_line!(
            "side:        {} n={} median={} robust CV={} ref={} binary md5={}",
            s.label,
            s.summary.n,
            s.summary.median.map(|m| format!("{m:.4}{unit}")).unwrap_or_else(|| "-".into()),
            s.summary.cv.map(|c| format!("{:.2}%", c * 100.0)).unwrap_or_else(|| "-".into()),
            s.git_ref.as_deref().unwrap_or("-"),
            s.identity.binary.as_ref().and_then(|b| b.md5.as_deref()).unwrap_or("-")
        );
    }
    say_line!(
        "protocol:    {} order, n/side {:?}, {} warmup(s), seed {}{}",
        e.protocol.order,
        e.protocol.n_per_side,
        e.protocol.warmups,
        e.protocol.seed,
        if e.protocol.adaptive { ", adaptive" } else { "" }
    );
    say_line!("samples:     {} (md5 {})", e.samples.path, e.samples.md5.as_deref().unwrap_or("-"));
    if let Some(x) = &e.effect {
        // One sign convention with `eval` and `ledger ls`: the gain and its interval, + = better.
        let (better, worse) = katlas_eval::words::better_worse(&e.metric);
        say_line!(
            "gain:        {} (+ = {better}, - = {worse}), interval {}, Mann-Whitney p = {}; {} changed {:+.2}%",
            gain_text(x.gain),
            katlas_eval::words::gain_interval_text(x, e.goal),
            x.p_value.map(|p| format!("{p:.4}")).unwrap_or_else(|| "-".into()),
            e.metric,
            x.relative_change * 100.0,
        );
    }
    say_line!("threshold:   ±{:.2}%", e.noise_threshold * 100.0);
    say_line!("verdict:     {}{}", e.verdict, if e.cross_host { " (cross-host)" } else { "" });
    for r in &e.reasons {
        say_line!("  - {r}");
    }
    for c in &e.correctness {
        say_line!("correctness: {} `{}`: {}", c.claim, c.check, c.outcome);
    }
    if let Some(m) = &e.mechanism {
        say_line!("mechanism:   {m}");
    }
    say_line!("disposition: {}", e.disposition);
    for n in katlas_eval::words::entry_notes(e) {
        say_line!("next: {n}");
    }
    Ok(ExitCode::SUCCESS)
}
