//! `katlas report [--out FILE] [--row ID]`: one self-contained HTML page of the project's
//! evidence (docs/report.md). The fits are built exactly as `katlas fit ROW` builds them.

use crate::cmd::evidence::{load, EvidenceArgs, Loaded};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::say_err;
use katlas_report::roofline::Roofline;
use katlas_report::{data, ChosenFit, Report, Section};
use std::path::PathBuf;
use std::process::ExitCode;

/// Kernels placed on each roofline, metrics plotted, evals and ledger entries shown.
const HOT_KERNELS: usize = 12;
const TRENDS: usize = 12;
const EVALS: usize = 20;
const LEDGER: usize = 200;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Output file (written beside it and renamed into place; default .katlas/report.html);
    /// `-` writes the page to stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Row of the fit view (id or unique prefix); default: the newest ok row with kernels.
    #[arg(long)]
    pub row: Option<String>,
}

fn fit_of(id: &str, ctx: &Ctx) -> Result<Loaded, CliError> {
    let ev = EvidenceArgs { row: Some(id.to_string()), parse: None, phase: None, index: None, isa: None, product: None, arch: None, workload: None };
    load(&ev, ctx)
}

fn roofline_of(l: &Loaded, device: &str) -> Roofline {
    let product = l.fit.header.product.as_deref().and_then(|p| l.db.product(p));
    Roofline::of(&l.fit, product, device, HOT_KERNELS)
}

pub fn run(a: &ReportArgs, ctx: &Ctx) -> CmdResult {
    let layout = ctx.layout()?;
    let conn = crate::cmd::index::open_index(&layout)?;
    let (rows, bad_lines) = data::counts(&conn).map_err(CliError::bad_input)?;
    let chosen = data::choose_row(&conn, a.row.as_deref()).map_err(CliError::bad_input)?;

    let no_rows = "No rows in the corpus (.katlas/corpus/): `katlas collect` or `katlas corpus import` adds them.";
    let mut loaded: Option<Loaded> = None;
    let fit = match &chosen {
        None => Err(no_rows.to_string()),
        Some(c) => match fit_of(&c.id, ctx) {
            Ok(l) => {
                let f = ChosenFit { row_id: c.id.clone(), how: c.how.clone(), fit: l.fit.clone() };
                loaded = Some(l);
                Ok(f)
            }
            // The rest of the page is still worth having: say why this part is missing.
            Err(e) if a.row.is_none() => Err(format!("The fit of row {} failed: {}", c.id, e.message)),
            Err(e) => return Err(e),
        },
    };

    // A roofline per product: the chosen row's first, then each other device's newest profiled row.
    let mut roofs: Vec<Roofline> = Vec::new();
    if let (Some(l), Some(c)) = (&loaded, &chosen) {
        if !l.fit.kernels.is_empty() {
            roofs.push(roofline_of(l, l.fit.header.arch.as_deref().unwrap_or(&c.id)));
        }
    }
    for (device, id) in data::rows_per_device(&conn).map_err(CliError::bad_input)? {
        if chosen.as_ref().is_some_and(|c| c.id == id) {
            continue;
        }
        let r = match fit_of(&id, ctx) {
            Ok(l) => roofline_of(&l, &device),
            Err(e) => {
                say_err!("katlas: warning: report: the fit of row {id} failed: {}", e.message);
                continue;
            }
        };
        if !roofs.iter().any(|x| x.device == r.device) {
            roofs.push(r);
        }
    }
    let roof_total = roofs.len();
    let rooflines =
        Section::new(roofs, roof_total, if rows == 0 { no_rows } else { "No ok row has kernels: nothing to place on a roofline (collect with --profile)." });

    let trends = match &chosen {
        None => Section::new(Vec::new(), 0, no_rows),
        Some(c) => {
            let (w, p, names) = data::row_metrics(&conn, &c.id).map_err(CliError::bad_input)?;
            let mut ts = data::trends(&conn, &w, &p, &names).map_err(CliError::bad_input)?;
            // Metrics that changed first, then those that vary at all, then the longest histories.
            let varies = |t: &katlas_store::trend::Trend| t.noise.is_some_and(|n| n > 0.0) || t.groups.windows(2).any(|g| g[0].median != g[1].median);
            ts.sort_by_key(|t| (t.change_points.is_empty(), !varies(t), std::cmp::Reverse(t.groups.len())));
            let total = ts.len();
            ts.truncate(TRENDS);
            let why = if names.is_empty() {
                format!("Row {} has no metrics, so there is nothing to trend.", c.id)
            } else {
                format!("No measured ok row of workload {w} phase {p} has the row's metrics (the row may be a warmup or an error row).")
            };
            Section::new(ts, total, why)
        }
    };
    let (ev, ev_total) = data::evals(&conn, EVALS).map_err(CliError::bad_input)?;
    let evals = Section::new(ev, ev_total, "No eval recorded (`katlas eval` writes .katlas/evals/).");
    let (le, le_total) = data::ledger(&conn, LEDGER).map_err(CliError::bad_input)?;
    let ledger = Section::new(le, le_total, "No ledger entry (.katlas/ledger.jsonl): every `katlas eval` verdict lands there.");

    let project = ctx.project()?.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "project".into());
    let report = Report { project, generated_at: katlas_model::row::now_rfc3339(), rows, bad_lines, fit, rooflines, trends, evals, ledger };
    let html = katlas_report::render(&report);
    let out = match &a.out {
        Some(p) if p.as_os_str() == "-" => {
            use std::io::Write;
            std::io::stdout().lock().write_all(html.as_bytes())?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(p) => ctx.resolve(p),
        None => layout.root.join("report.html"),
    };
    katlas_fs::write_atomic(&out, html.as_bytes()).map_err(|e| CliError::io(&out, e))?;
    let s = &report;
    eprintln!(
        "report written to {}: fit of {}, {} rooflines, {} trends, {} evals, {} ledger entries",
        out.display(),
        s.fit.as_ref().map(|f| f.row_id.as_str()).unwrap_or("no row"),
        s.rooflines.items.len(),
        s.trends.items.len(),
        s.evals.total,
        s.ledger.total
    );
    Ok(ExitCode::SUCCESS)
}
