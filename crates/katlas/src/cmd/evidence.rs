//! Where a command's evidence comes from, read one way for every command: the ROW that `fit`,
//! `suggest`, `task` and `report` take (a corpus id or prefix, `latest`, a rows file, or a
//! profiler file with `--parse`) with the ISA beside it, and the rows `corpus ls|show|validate|
//! export` and `provenance` read from the project corpus or `--file` paths.

use crate::ctx::{CliError, Ctx};
use crate::output::say_err;
use katlas_advise::isa::IsaManifest;
use katlas_advise::{build_fit, FitInput, FitView, Rules};
use katlas_arch::ArchDb;
use katlas_corpus::{read_all, ReadReport};
use katlas_model::{Device, Origin, Row, ROW_SCHEMA};
use std::path::{Path, PathBuf};

/// Where the evidence comes from (fit, suggest, task and report).
#[derive(Debug, Clone, clap::Args)]
pub struct EvidenceArgs {
    /// A row id (or unique prefix) in the corpus, `latest` (the corpus's newest row; with
    /// --workload/--phase the newest of those), a JSON/JSONL file of rows (katlas.row.v1 or
    /// hipfire.kernel_atlas.v0), or with --parse a profiler file.
    #[arg(value_name = "ROW")]
    pub row: Option<String>,
    /// Parse ROW as a profiler file with this collect parser (ncu-csv, torch-trace,
    /// rocprofv3, rocpd, hipfire-bench …).
    #[arg(long, value_name = "PARSER")]
    pub parse: Option<String>,
    /// Pick the row (or parsed phase) of this phase; with ROW `latest`, the newest row of it.
    #[arg(long)]
    pub phase: Option<String>,
    /// Pick the N-th matching row of a file (1-based).
    #[arg(long, value_name = "N")]
    pub index: Option<usize>,
    /// ISA manifest: katlas.isa.v1 from `katlas isa scan`, or hipfire's hipfire.kernel_atlas.isa.v0.
    #[arg(long, value_name = "MANIFEST")]
    pub isa: Option<PathBuf>,
    /// Product to judge against ("NVIDIA H200", "Radeon RX 7900 XTX"); default: the row's device,
    /// else the products of the row's arch when they share one bandwidth ceiling.
    #[arg(long, value_name = "NAME")]
    pub product: Option<String>,
    /// Arch atom when neither row nor product names one (ISA-only fits).
    #[arg(long, value_name = "ATOM")]
    pub arch: Option<String>,
    /// Workload name for a parsed profiler file (default: the file name); with ROW `latest`,
    /// the newest row of this workload.
    #[arg(long)]
    pub workload: Option<String>,
}

/// Everything a fit needs, loaded.
pub struct Loaded {
    pub row: Option<Row>,
    pub rules: Rules,
    pub db: ArchDb,
    pub fit: FitView,
}

fn bad(m: impl std::fmt::Display) -> CliError {
    CliError::bad_input(m)
}

/// Rows of a rows file (katlas-corpus's reader, the one `corpus import` uses), each
/// `(line, row)`; lines that are not rows are warnings, and a file with none is an error.
fn rows_of_file(path: &Path) -> Result<Vec<(u64, Row)>, CliError> {
    let got = katlas_corpus::import::read_rows(path)?;
    for e in &got.errors {
        say_err!("katlas: warning: skipped {e}");
    }
    if got.rows.is_empty() {
        return Err(bad(format!("{}: no usable rows{}", path.display(), got.errors.first().map(|e| format!(" ({e})")).unwrap_or_default())));
    }
    Ok(got.rows)
}

fn pick(rows: Vec<(String, Row)>, a: &EvidenceArgs, what: &str) -> Result<(String, Row), CliError> {
    let total = rows.len();
    let mut cands: Vec<(String, Row)> = match &a.phase {
        Some(p) => rows.into_iter().filter(|(_, r)| r.phase.eq_ignore_ascii_case(p)).collect(),
        None => rows,
    };
    if cands.is_empty() {
        return Err(bad(format!("{what}: no row of phase `{}` among {total}", a.phase.as_deref().unwrap_or("?"))));
    }
    if let Some(i) = a.index {
        if i == 0 || i > cands.len() {
            return Err(bad(format!("--index {i}: {what} has {} matching rows (1-based)", cands.len())));
        }
        return Ok(cands.swap_remove(i - 1));
    }
    if cands.len() == 1 {
        return Ok(cands.swap_remove(0));
    }
    // Several: the first profiled, ok row, and say so.
    let n = cands.len();
    let pos = cands.iter().position(|(_, r)| !r.kernels.is_empty() && r.status == katlas_model::Status::Ok).unwrap_or(0);
    let (src, row) = cands.swap_remove(pos);
    say_err!("katlas: note: {what} has {n} matching rows; using {src} (pick with --phase/--index)");
    Ok((src, row))
}

/// A row from a parser's output: the chosen phase's kernel table and metrics.
fn row_from_parse(parser: &str, path: &Path, a: &EvidenceArgs, ctx: &Ctx) -> Result<(String, Row), CliError> {
    // A trace's Triton launch records and cache are read from beside it (`ParserOptions::with_triton_beside`).
    let opts = katlas_collect::ParserOptions { phase: a.phase.clone(), ..Default::default() };
    let out = katlas_collect::parse_with(parser, katlas_collect::Input::File(path), &opts)?;
    for w in &out.warnings {
        say_err!("katlas: warning: {w}");
    }
    let table = match &a.phase {
        Some(p) => out.phases.iter().find(|t| &t.phase == p).or_else(|| out.phases.iter().find(|t| !t.kernels.is_empty())),
        None => out.phases.iter().find(|t| !t.kernels.is_empty()),
    };
    let workload = a.workload.clone().unwrap_or_else(|| {
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "profile".into());
        name.split('.').next().unwrap_or(&name).to_string()
    });
    let phase = table.map(|t| t.phase.clone()).or(a.phase.clone()).unwrap_or_else(|| "run".into());
    let mut row = Row::new(workload, phase);
    row.origin = Some(Origin { kind: "parse".into(), file: Some(path.display().to_string()), parsers: vec![parser.into()], ..Default::default() });
    for (k, m) in &out.metrics {
        row.metrics.insert(k.clone(), m.clone());
    }
    if let Some(t) = table {
        row.kernels = t.kernels.clone();
        for (k, m) in &t.metrics {
            row.metrics.insert(k.clone(), m.clone());
        }
    }
    let rules_dir = ctx.layout().ok().map(|l| l.rules_dir());
    let ops = match rules_dir.as_deref() {
        Some(d) => katlas_collect::ops::OpRules::with_project(d).map_err(|e| bad(e.to_string()))?,
        None => katlas_collect::ops::OpRules::builtin(),
    };
    let missing_op: Vec<usize> = row.kernels.iter().enumerate().filter(|(_, k)| k.op.is_none()).map(|(i, _)| i).collect();
    if !missing_op.is_empty() {
        ops.classify_all(&mut row.kernels);
    }
    let arch = out.route.get("arch").and_then(|v| v.as_str()).map(str::to_string);
    let product = out.route.get("device").and_then(|v| v.as_str()).map(str::to_string);
    row.arch = arch.clone();
    if arch.is_some() || product.is_some() {
        let vendor = arch.as_deref().and_then(katlas_arch::Vendor::of_arch).map_or("unknown", katlas_arch::Vendor::as_str);
        row.identity.devices.push(Device {
            index: 0,
            vendor: vendor.into(),
            product,
            arch,
            arch_source: Some(format!("{parser} output")),
            ..Default::default()
        });
    }
    Ok((format!("{parser} {}", path.display()), row))
}

/// The row the user named, with a description of where it came from.
pub fn load_row(a: &EvidenceArgs, ctx: &Ctx) -> Result<Option<(String, Row)>, CliError> {
    let Some(spec) = &a.row else {
        if a.parse.is_some() {
            return Err(bad("--parse needs a profiler file as ROW"));
        }
        return Ok(None);
    };
    if let Some(parser) = &a.parse {
        let p = ctx.resolve(Path::new(spec));
        if let Some(why) = katlas_corpus::input::unreadable(&p) {
            return Err(bad(format!("{}: {why}", p.display())));
        }
        return row_from_parse(parser, &p, a, ctx).map(Some);
    }
    if spec == LATEST {
        return newest_row(a, ctx).map(Some);
    }
    let p = ctx.resolve(Path::new(spec));
    if p.is_file() {
        let rows = rows_of_file(&p)?;
        let shown = p.display().to_string();
        let rows: Vec<(String, Row)> = rows.into_iter().map(|(l, r)| (format!("{shown}:{l}"), r)).collect();
        return pick(rows, a, &shown).map(Some);
    }
    // A path that is there but leads nowhere (a link loop, a link to nothing) is not an id.
    if std::fs::symlink_metadata(&p).is_ok() {
        if let Some(why) = katlas_corpus::input::unreadable(&p) {
            return Err(bad(format!("{}: {why}", p.display())));
        }
    }
    // A corpus id or prefix.
    let layout = ctx.layout()?;
    let dir = layout.corpus_dir();
    if !dir.exists() {
        return Err(bad(format!("`{spec}` is neither a file nor a row id (no corpus at {})", dir.display())));
    }
    let rep = katlas_corpus::read_all::<Row>(&dir, Some(ROW_SCHEMA))?;
    let hits: Vec<(String, Row)> = rep
        .records
        .into_iter()
        .filter(|l| l.record.id.starts_with(spec.as_str()))
        .map(|l| (format!("corpus {}:{}", l.file.display(), l.line), l.record))
        .collect();
    match hits.len() {
        0 => Err(bad(format!("`{spec}` is neither a file nor a row id in {}", dir.display()))),
        1 => Ok(hits.into_iter().next()),
        n => Err(bad(format!("row id prefix `{spec}` matches {n} rows: give more characters"))),
    }
}

/// The ROW that names the corpus's newest row. Row ids are hex, so it is never an id prefix;
/// a rows file of that name is `./latest`.
pub const LATEST: &str = "latest";

/// `latest`: the corpus row captured last (of `--workload` and `--phase` when given); rows of
/// one second keep the corpus's order, the one written last wins.
fn newest_row(a: &EvidenceArgs, ctx: &Ctx) -> Result<(String, Row), CliError> {
    if a.index.is_some() {
        return Err(bad("--index picks among a file's rows; `latest` is one row (narrow it with --workload and --phase)"));
    }
    let layout = ctx.layout()?;
    let dir = layout.corpus_dir();
    let rep = if dir.exists() { katlas_corpus::read_all::<Row>(&dir, Some(ROW_SCHEMA))? } else { Default::default() };
    let total = rep.records.len();
    let filters: Vec<String> =
        [a.workload.as_ref().map(|w| format!("workload `{w}`")), a.phase.as_ref().map(|p| format!("phase `{p}`"))].into_iter().flatten().collect();
    let newest = rep
        .records
        .into_iter()
        .enumerate()
        .filter(|(_, l)| a.workload.as_ref().is_none_or(|w| &l.record.workload == w))
        .filter(|(_, l)| a.phase.as_ref().is_none_or(|p| l.record.phase.eq_ignore_ascii_case(p)))
        .max_by_key(|(i, l)| (captured_key(&l.record.captured_at), *i));
    let Some((_, l)) = newest else {
        return Err(bad(if total == 0 {
            format!("`latest`: the corpus at {} has no rows (record some with `katlas collect` or `katlas corpus import`)", dir.display())
        } else {
            format!("`latest`: no row of {} among the {total} rows of the corpus at {}", filters.join(", "), dir.display())
        }));
    };
    let r = &l.record;
    say_err!("katlas: note: latest row: {} ({} {}, captured {})", r.id, r.workload, r.phase, r.captured_at);
    Ok((format!("corpus {}:{}", l.file.display(), l.line), l.record))
}

/// A capture time to order rows by: RFC 3339 with any offset or fraction, as UTC; a row
/// whose time does not read as one sorts before every row whose time does.
fn captured_key(t: &str) -> Option<(i64, u32)> {
    let t = chrono::DateTime::parse_from_rfc3339(t.trim()).ok()?;
    Some((t.timestamp(), t.timestamp_subsec_nanos()))
}

pub fn load(a: &EvidenceArgs, ctx: &Ctx) -> Result<Loaded, CliError> {
    if a.row.is_none() && a.isa.is_none() {
        return Err(bad("give a ROW (corpus id, `latest`, rows file, or --parse PARSER FILE) and/or --isa MANIFEST"));
    }
    let rules_dir = ctx.layout().ok().map(|l| l.rules_dir());
    let rules = Rules::load(rules_dir.as_deref()).map_err(bad)?;
    let db = match ctx.project() {
        Ok(p) => ArchDb::load(Some(&katlas_corpus::Layout::for_project(&p.root).arch_rules_dir())).map_err(bad)?,
        Err(_) => ArchDb::builtin().clone(),
    };
    let (row_source, row) = match load_row(a, ctx)? {
        Some((s, r)) => (Some(s), Some(r)),
        None => (None, None),
    };
    let mut notes = Vec::new();
    let isa = match &a.isa {
        Some(p) => Some(IsaManifest::read(&ctx.resolve(p)).map_err(bad)?),
        None => match row.as_ref().and_then(|r| captured_isa(r, ctx, &mut notes).transpose()) {
            Some(m) => Some(m?),
            None => None,
        },
    };
    let mut fit = build_fit(&FitInput {
        row: row.as_ref(),
        isa: isa.as_ref(),
        product: a.product.as_deref(),
        arch: a.arch.as_deref(),
        db: &db,
        rules: &rules,
        row_source: row_source.clone(),
    })
    .map_err(bad)?;
    explain_nvjet(&mut fit, isa.is_some() && notes.is_empty());
    fit.scope.notes.extend(notes);
    Ok(Loaded { row, rules, db, fit })
}

/// The code objects the run loaded, as `collect --capture-modules` wrote them under
/// `<run_dir>/modules/`: scanned once into `<run_dir>/isa.json` (rescanned when a module is newer)
/// and used as the row's ISA when no `--isa` is given.
fn captured_isa(row: &Row, ctx: &Ctx, notes: &mut Vec<String>) -> Result<Option<IsaManifest>, CliError> {
    let (Some(rel), Ok(p)) = (row.origin.as_ref().and_then(|o| o.run_dir.as_deref()), ctx.project()) else {
        return Ok(None);
    };
    let run_dir = p.root.join(rel);
    let modules = run_dir.join("modules");
    let cubins: Vec<PathBuf> = match std::fs::read_dir(&modules) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "cubin")).collect(),
        Err(_) => return Ok(None),
    };
    if cubins.is_empty() {
        notes.push(format!("{}: no module was captured (see modules.jsonl: CUPTI may be missing)", modules.display()));
        return Ok(None);
    }
    let manifest = run_dir.join("isa.json");
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = mtime(&manifest).is_some_and(|t| cubins.iter().all(|c| mtime(c).is_some_and(|c| c <= t)));
    if !fresh {
        let opts = katlas_isa::ScanOptions { cache_dir: ctx.layout().ok().map(|l| l.isa_cache_dir()), ..Default::default() };
        let mut m = katlas_isa::scan(std::slice::from_ref(&modules), opts).map_err(|e| bad(format!("{}: {e}", modules.display())))?;
        let err = |e| CliError::io(&manifest, e);
        let mut buf = Vec::new();
        katlas_isa::write_compact(&mut m, &mut buf).map_err(err)?;
        katlas_fs::write_atomic(&manifest, &buf).map_err(err)?;
    }
    notes.push(format!("ISA from the {} code object(s) the run loaded ({})", cubins.len(), modules.display()));
    IsaManifest::read(&manifest).map(Some).map_err(bad)
}

/// cuBLASLt builds its `nvjet_*` kernels at run time: no library file holds them, so a manifest
/// scanned from libraries can never match them. Say so per kernel instead of leaving it unknown.
fn explain_nvjet(fit: &mut FitView, from_files: bool) {
    let missing: Vec<String> = fit.scope.unmatched_hot.iter().filter(|n| n.starts_with("nvjet_")).cloned().collect();
    for n in missing {
        let why = if from_files {
            "cuBLASLt generates nvjet kernels at run time, so no library file holds them; collect with --capture-modules to read the cubin the driver loaded"
        } else {
            "cuBLASLt generates nvjet kernels at run time; collect with --capture-modules (CUDA + CUPTI) to read the cubin the driver loaded"
        };
        fit.scope.notes.push(format!("{n}: no ISA: {why}"));
    }
}

/// Where `corpus ls|show|validate|export` and `provenance` read rows from.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// Corpus files or directories to read (default: the project's .katlas/corpus).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Treat any bad line as an error (exit 2) instead of a warning.
    #[arg(long)]
    pub strict: bool,
}

/// Read rows from `--file` paths or the project corpus. Bad lines are
/// reported (warning, or error with --strict); good rows always come back.
pub fn load_rows(source: &Source, ctx: &Ctx) -> Result<ReadReport<Row>, CliError> {
    let paths = if source.files.is_empty() {
        // A project that has collected nothing yet has an empty corpus, not an error.
        let dir = ctx.layout()?.corpus_dir();
        if dir.exists() {
            vec![dir]
        } else {
            Vec::new()
        }
    } else {
        source.files.iter().map(|p| ctx.resolve(p)).collect()
    };
    let mut report = ReadReport::default();
    for p in paths {
        if let Some(why) = katlas_corpus::input::unreadable(&p) {
            return Err(CliError::bad_input(format!("{}: {why}", p.display())));
        }
        report.extend(read_all::<Row>(&p, Some(ROW_SCHEMA))?);
    }
    for e in &report.errors {
        say_err!("katlas: {}: {e}", if source.strict { "error" } else { "warning" });
    }
    if source.strict && !report.errors.is_empty() {
        return Err(CliError::bad_input(format!("{} bad line(s) in the corpus (--strict)", report.errors.len())));
    }
    Ok(report)
}
