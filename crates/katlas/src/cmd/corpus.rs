//! `katlas corpus ls|show|validate|import|export`.

use super::evidence::{load_rows, Source};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{fmt_num, fmt_opt, paint, print_json, table, Format, FormatArg};
use crate::output::{say, say_err};
use katlas_corpus::{append_jsonl_dedup, read_all, Fsync, LineError, Located};
use katlas_model::{hipfire, Row, Status, ROW_SCHEMA};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum CorpusCmd {
    /// List rows (one line each); bad lines are reported on stderr and the rest still listed.
    Ls(LsArgs),
    /// Show one row whole, by id (or unique id prefix).
    Show(ShowArgs),
    /// Check every line of the corpus (or the given files); exit 2 when any line is bad.
    Validate(ValidateArgs),
    /// Import rows: hipfire.kernel_atlas.v0 or katlas.row.v1, as a JSON document or JSONL.
    Import(ImportArgs),
    /// Export rows as JSON lines in another format (hipfire.kernel_atlas.v0 for hipfire's Atlas).
    Export(ExportArgs),
    /// Two rows or groups of rows side by side: metrics with intervals, kernels, identity warnings.
    Compare(super::trend::CompareArgs),
    /// Variants' medians over two metrics and the Pareto front (e.g. `gen_tok_s vram_bytes:min`).
    Pareto(super::trend::ParetoArgs),
}

/// The row filters `corpus ls` and `corpus export` share.
#[derive(Debug, clap::Args)]
pub struct RowFilter {
    /// Only rows of this workload (exact name).
    #[arg(long)]
    pub workload: Option<String>,
    /// Only rows of this phase (exact name, e.g. `decode`).
    #[arg(long)]
    pub phase: Option<String>,
    /// ok or error.
    #[arg(long)]
    pub status: Option<String>,
    /// Only rows of this arch atom (`sm_90`, `gfx1100`).
    #[arg(long)]
    pub arch: Option<String>,
}

impl RowFilter {
    pub fn keeps(&self, r: &Row) -> bool {
        self.workload.as_deref().is_none_or(|w| r.workload == w)
            && self.phase.as_deref().is_none_or(|p| r.phase == p)
            && self.arch.as_deref().is_none_or(|x| r.arch.as_deref() == Some(x))
            && self.status.as_deref().is_none_or(|s| match r.status {
                Status::Ok => s == "ok",
                Status::Error => s == "error",
            })
    }
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    #[command(flatten)]
    pub source: Source,
    #[command(flatten)]
    pub filter: RowFilter,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Row id or a unique prefix of one.
    pub id: String,
    #[command(flatten)]
    pub source: Source,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Files or directories to check (default: the project's .katlas/corpus).
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files to import.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Convert and print, but write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Import nothing if any document is bad.
    #[arg(long)]
    pub strict: bool,
    /// Append to this file instead of the project corpus.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(cmd: &CorpusCmd, ctx: &Ctx) -> CmdResult {
    match cmd {
        CorpusCmd::Ls(a) => ls(a, ctx),
        CorpusCmd::Show(a) => show(a, ctx),
        CorpusCmd::Validate(a) => validate(a, ctx),
        CorpusCmd::Import(a) => import(a, ctx),
        CorpusCmd::Export(a) => export(a, ctx),
        CorpusCmd::Compare(a) => super::trend::run_compare(a, ctx),
        CorpusCmd::Pareto(a) => super::trend::run_pareto(a, ctx),
    }
}

#[derive(Serialize)]
struct RowSummary<'a> {
    id: &'a str,
    file: String,
    line: u64,
    captured_at: &'a str,
    workload: &'a str,
    phase: &'a str,
    shape_bucket: Option<&'a str>,
    run_index: u32,
    arch: Option<&'a str>,
    status: Status,
    metrics: BTreeMap<&'a str, f64>,
    kernels: usize,
}

fn summary(r: &Located<Row>) -> RowSummary<'_> {
    let row = &r.record;
    RowSummary {
        id: &row.id,
        file: r.file.display().to_string(),
        line: r.line,
        captured_at: &row.captured_at,
        workload: &row.workload,
        phase: &row.phase,
        shape_bucket: row.shape_bucket.as_deref(),
        run_index: row.run_index,
        arch: row.arch.as_deref(),
        status: row.status,
        metrics: row.metrics.iter().map(|(k, m)| (k.as_str(), m.value)).collect(),
        kernels: row.kernels.len(),
    }
}

fn ls(a: &LsArgs, ctx: &Ctx) -> CmdResult {
    let report = load_rows(&a.source, ctx)?;
    let rows: Vec<&Located<Row>> = report.records.iter().filter(|r| a.filter.keeps(&r.record)).collect();
    match a.format.format {
        Format::Json => {
            #[derive(Serialize)]
            struct Out<'a> {
                rows: Vec<RowSummary<'a>>,
                errors: &'a [LineError],
            }
            print_json(&Out { rows: rows.iter().map(|r| summary(r)).collect(), errors: &report.errors });
        }
        f => {
            let mut t = table(f, &["id", "captured", "workload", "phase", "shape", "run", "arch", "status", "headline", "kernels"]);
            for r in &rows {
                let row = &r.record;
                let status = match row.status {
                    Status::Ok => paint(ctx.color, "32", "ok"),
                    Status::Error => paint(ctx.color, "31", "error"),
                };
                t.add_row(vec![
                    row.id.chars().take(12).collect::<String>(),
                    row.captured_at.clone(),
                    row.workload.clone(),
                    row.phase.clone(),
                    fmt_opt(&row.shape_bucket),
                    row.run_index.to_string(),
                    fmt_opt(&row.arch),
                    status,
                    headline(row),
                    row.kernels.len().to_string(),
                ]);
            }
            println!("{t}");
            say!("{} row(s){}", rows.len(), if report.errors.is_empty() { String::new() } else { format!(", {} bad line(s) skipped", report.errors.len()) });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The metric a reader looks at first: a throughput if there is one.
fn headline(row: &Row) -> String {
    if let Some(e) = &row.error {
        let m = e.message.as_deref().or(e.stderr_tail.as_deref()).unwrap_or("error");
        return m.lines().last().unwrap_or(m).chars().take(48).collect();
    }
    let pick = row
        .metrics
        .iter()
        .find(|(k, _)| k.ends_with("tok_s"))
        .or_else(|| row.metrics.iter().find(|(k, _)| k.ends_with("gbps") || k.ends_with("gib_s")))
        .or_else(|| row.metrics.iter().next());
    match pick {
        Some((k, m)) => format!("{k}={}{}", fmt_num(m.value), m.unit.as_deref().map(|u| format!(" {u}")).unwrap_or_default()),
        None => "-".into(),
    }
}

fn show(a: &ShowArgs, ctx: &Ctx) -> CmdResult {
    let report = load_rows(&a.source, ctx)?;
    let hits: Vec<&Located<Row>> = report.records.iter().filter(|r| r.record.id.starts_with(&a.id)).collect();
    let r = match hits.as_slice() {
        [one] => *one,
        [] => return Err(CliError::bad_input(format!("no row with id `{}`", a.id))),
        many => {
            return Err(CliError::bad_input(format!("id prefix `{}` is ambiguous ({} rows)", a.id, many.len())));
        }
    };
    match a.format.format {
        Format::Json => print_json(&r.record),
        f => print_row(&r.record, &r.file, r.line, f),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_row(row: &Row, file: &Path, line: u64, f: Format) {
    say!("row {}  ({}:{})", row.id, file.display(), line);
    let status = serde_json::to_value(row.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    say!(
        "workload {}  phase {}  shape {}  run {}  arch {}  status {status}",
        row.workload,
        row.phase,
        fmt_opt(&row.shape_bucket),
        row.run_index,
        fmt_opt(&row.arch)
    );
    say!("captured {}", row.captured_at);
    if !row.command.is_empty() {
        say!("command  {}", row.command.join(" "));
    }
    let s = &row.identity.source;
    say!("source   commit {} dirty {} diff_md5 {}", fmt_opt(&s.commit.as_ref().or(s.commit_short.as_ref())), fmt_opt(&s.dirty), fmt_opt(&s.diff_md5));
    if let Some(b) = &row.identity.binary {
        say!("binary   {} {}", fmt_opt(&b.path), fmt_opt(&b.md5));
    }
    if let Some(e) = &row.error {
        say!("error    exit {} signal {} timed_out {} {}", fmt_opt(&e.exit_code), fmt_opt(&e.signal), e.timed_out, fmt_opt(&e.message));
        if let Some(t) = &e.stderr_tail {
            say!("stderr   {}", t.trim_end().replace('\n', "\n         "));
        }
    }
    if !row.variant.env.is_empty() {
        say!("env      {}", row.variant.env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
    }
    if !row.metrics.is_empty() {
        let mut t = table(f, &["metric", "value", "unit"]);
        for (k, m) in &row.metrics {
            t.add_row(vec![k.clone(), fmt_num(m.value), fmt_opt(&m.unit)]);
        }
        println!("{t}");
    }
    if !row.kernels.is_empty() {
        let mut t = table(f, &["kernel", "calls", "total us", "avg us", "share %", "GB/s", "op"]);
        for k in &row.kernels {
            t.add_row(vec![
                k.demangled.clone().unwrap_or_else(|| k.name.clone()),
                k.calls.to_string(),
                fmt_num(k.total_us),
                k.avg_us.map(fmt_num).unwrap_or_else(|| "-".into()),
                k.share_pct.map(fmt_num).unwrap_or_else(|| "-".into()),
                k.achieved_gbps.map(fmt_num).unwrap_or_else(|| "-".into()),
                k.op.as_ref().map(|o| format!("{}.{}", o.family, o.role)).unwrap_or_else(|| "-".into()),
            ]);
        }
        println!("{t}");
    }
    if let Some(route) = &row.route {
        let attrs: Vec<String> = route.attributes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        say!("route ({}) {}", route.basis, attrs.join(" "));
    }
    if !row.extra.is_empty() {
        say!("extra    {}", row.extra.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
    }
}

fn validate(a: &ValidateArgs, ctx: &Ctx) -> CmdResult {
    let source = Source { files: a.paths.clone(), strict: false };
    let report = load_rows(&source, ctx)?;
    #[derive(Serialize)]
    struct Out<'a> {
        valid: usize,
        errors: &'a [LineError],
    }
    match a.format.format {
        Format::Json => print_json(&Out { valid: report.records.len(), errors: &report.errors }),
        _ => {
            // Bad lines were already printed as warnings by load_rows.
            say!("{} valid row(s), {} bad line(s)", report.records.len(), report.errors.len());
        }
    }
    if report.errors.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(crate::ctx::exit::BAD_INPUT))
    }
}

fn import(a: &ImportArgs, ctx: &Ctx) -> CmdResult {
    let mut rows: Vec<Row> = Vec::new();
    let mut errors: Vec<LineError> = Vec::new();
    for f in &a.files {
        let got = katlas_corpus::import::read_rows(&ctx.resolve(f))?;
        rows.extend(got.rows.into_iter().map(|(_, r)| r));
        errors.extend(got.errors);
    }
    for e in &errors {
        say_err!("katlas: {}: {e}", if a.strict { "error" } else { "warning" });
    }
    if a.strict && !errors.is_empty() {
        return Err(CliError::bad_input(format!("{} bad document(s); nothing imported (--strict)", errors.len())));
    }
    let mut written: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut skipped = 0usize;
    if !a.dry_run {
        // Ids already in the corpus's other files are skipped here; each
        // destination file's own ids are checked again, and the new rows
        // appended, in one step under that file's lock (append_jsonl_dedup),
        // so concurrent imports of the same rows write each row once.
        let existing: HashSet<String> = match &a.output {
            Some(_) => HashSet::new(),
            None => {
                let dir = ctx.layout()?.corpus_dir();
                read_all::<Row>(&dir, Some(ROW_SCHEMA)).map(|r| r.records.into_iter().map(|r| r.record.id).collect()).unwrap_or_default()
            }
        };
        let layout = ctx.layout()?;
        let mut batches: BTreeMap<PathBuf, Vec<&Row>> = BTreeMap::new();
        for r in &rows {
            if existing.contains(&r.id) {
                skipped += 1;
                continue;
            }
            let dest = match &a.output {
                Some(o) => ctx.resolve(o),
                None => {
                    let host = r.identity.host.hostname.as_deref().unwrap_or("unknown-host");
                    let day = r.captured_at.get(..10).unwrap_or("undated");
                    layout.corpus_file(host, day)
                }
            };
            batches.entry(dest).or_default().push(r);
        }
        for (dest, batch) in batches {
            let done = append_jsonl_dedup(&dest, &batch, |r| r.id.as_str(), Fsync::Batch)?;
            skipped += done.already_present;
            if done.written > 0 {
                written.insert(dest, done.written);
            }
        }
    }
    match a.format.format {
        Format::Json => {
            #[derive(Serialize)]
            struct Out<'a> {
                imported: usize,
                already_present: usize,
                written: BTreeMap<String, usize>,
                rows: &'a [Row],
                errors: &'a [LineError],
            }
            print_json(&Out {
                imported: written.values().sum(),
                already_present: skipped,
                written: written.iter().map(|(k, v)| (k.display().to_string(), *v)).collect(),
                rows: &rows,
                errors: &errors,
            });
        }
        f => {
            let mut t = table(f, &["id", "workload", "phase", "shape", "status", "kernels", "binary md5", "diff md5"]);
            for r in &rows {
                t.add_row(vec![
                    r.id.chars().take(12).collect::<String>(),
                    r.workload.clone(),
                    r.phase.clone(),
                    fmt_opt(&r.shape_bucket),
                    format!("{:?}", r.status).to_lowercase(),
                    r.kernels.len().to_string(),
                    r.identity.binary.as_ref().and_then(|b| b.md5.clone()).unwrap_or_else(|| "-".into()),
                    fmt_opt(&r.identity.source.diff_md5),
                ]);
            }
            println!("{t}");
            let verb = if a.dry_run { "converted (dry run)" } else { "imported" };
            say!(
                "{} row(s) {verb}, {} already present, {} bad document(s)",
                if a.dry_run { rows.len() } else { written.values().sum() },
                skipped,
                errors.len()
            );
            for (dest, n) in &written {
                say!("  {n} → {}", dest.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// hipfire's `hipfire.kernel_atlas.v0` rows, as its `scripts/kernel_atlas.py` reads them.
    #[value(name = "hipfire-v0")]
    HipfireV0,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Only rows whose id starts with one of these (default: every row).
    pub ids: Vec<String>,
    #[command(flatten)]
    pub source: Source,
    /// Format of the exported rows.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Write the JSON lines to this file (replaced) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub filter: RowFilter,
}

/// Rows as JSON lines in another format: each a document on its own line, keys sorted. A row
/// imported from hipfire v0 comes back as the document it was imported from.
fn export(a: &ExportArgs, ctx: &Ctx) -> CmdResult {
    let report = load_rows(&a.source, ctx)?;
    let rows: Vec<&Row> = report
        .records
        .iter()
        .map(|r| &r.record)
        .filter(|r| a.ids.is_empty() || a.ids.iter().any(|p| r.id.starts_with(p.as_str())))
        .filter(|r| a.filter.keeps(r))
        .collect();
    let mut text = String::new();
    for r in &rows {
        let doc = match a.format {
            ExportFormat::HipfireV0 => hipfire::export_v0(r),
        };
        text.push_str(&serde_json::to_string(&doc).expect("a JSON value serialises"));
        text.push('\n');
    }
    match &a.output {
        Some(o) => {
            let path = ctx.resolve(o);
            katlas_fs::write_atomic(&path, text.as_bytes()).map_err(|e| CliError::io(&path, e))?;
            say!("{} row(s) exported to {}", rows.len(), path.display());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
