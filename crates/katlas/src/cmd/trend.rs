//! `katlas trend METRIC`, `katlas corpus compare A B`, `katlas corpus pareto X Y`: history,
//! side-by-side rows and the Pareto front, from the query index (docs/corpus.md, "History").

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{fmt_num, print_json, printable, table, Format, FormatArg};
use katlas_store::{compare, trend};
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ByArg {
    Commit,
    Day,
    Host,
}

#[derive(Debug, clap::Args)]
pub struct TrendArgs {
    /// Metric name (`gen_tok_s`).
    pub metric: String,
    /// Only rows of this workload (exact name).
    #[arg(long)]
    pub workload: Option<String>,
    /// Only rows of this phase (exact name, e.g. `decode`).
    #[arg(long)]
    pub phase: Option<String>,
    /// Group samples by commit (default), UTC day or host.
    #[arg(long, value_enum, default_value_t = ByArg::Commit)]
    pub by: ByArg,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Row id (or prefix), or `column=value[,column=value…]` over the rows table.
    pub a: String,
    /// The other side, in the same forms as A.
    pub b: String,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ParetoArgs {
    /// First metric; append `:min` or `:max` when its name does not say which way is better.
    pub x: String,
    /// Second metric (e.g. `vram_bytes:min`).
    pub y: String,
    /// Only rows of this workload (exact name).
    #[arg(long)]
    pub workload: Option<String>,
    /// Only rows of this phase (exact name, e.g. `decode`).
    #[arg(long)]
    pub phase: Option<String>,
    #[command(flatten)]
    pub format: FormatArg,
}

fn conn(ctx: &Ctx) -> Result<katlas_store::Connection, CliError> {
    crate::cmd::index::open_index(&ctx.layout()?)
}

pub fn run_trend(a: &TrendArgs, ctx: &Ctx) -> CmdResult {
    let by = match a.by {
        ByArg::Commit => trend::By::Commit,
        ByArg::Day => trend::By::Day,
        ByArg::Host => trend::By::Host,
    };
    let c = conn(ctx)?;
    let samples = trend::load(&c, &a.metric, a.workload.as_deref(), a.phase.as_deref(), by).map_err(CliError::bad_input)?;
    if samples.is_empty() {
        return Err(CliError::bad_input(format!("no measured ok rows have metric `{}`", a.metric)));
    }
    let t = trend::analyse(&a.metric, by, &samples);
    if a.format.format == Format::Json {
        print_json(&t);
        return Ok(ExitCode::SUCCESS);
    }
    let noise =
        t.noise.map(|n| format!("{:.2}% per sample ({})", 100.0 * n, t.noise_basis.unwrap_or(""))).unwrap_or_else(|| "unknown (too few samples)".into());
    if t.change_points.is_empty() {
        println!("{}: no change point over {} {}s ({} samples; noise {noise})", printable(&t.metric), t.groups.len(), t.by, t.samples);
    }
    for cp in &t.change_points {
        println!(
            "{}: {:+.1}% entered at {} {} (after {}; {} → {}, z {:.1} > {:.1}; noise {noise})",
            printable(&t.metric),
            100.0 * cp.relative_change,
            t.by,
            printable(&cp.key),
            printable(&cp.previous),
            fmt_num(cp.before),
            fmt_num(cp.after),
            cp.z.abs(),
            cp.threshold
        );
    }
    let mut tb = table(a.format.format, &[t.by, "first sample", "n", "median", "cv", "change"]);
    for (i, g) in t.groups.iter().enumerate() {
        let mark = t.change_points.iter().find(|c| c.index == i).map(|c| format!("{:+.1}%", 100.0 * c.relative_change)).unwrap_or_default();
        tb.add_row(vec![
            printable(&g.key).into_owned(),
            g.first_at.clone(),
            g.n.to_string(),
            fmt_num(g.median),
            g.cv.map(|c| format!("{:.2}%", 100.0 * c)).unwrap_or("-".into()),
            mark,
        ]);
    }
    println!("{tb}");
    Ok(ExitCode::SUCCESS)
}

pub fn run_compare(a: &CompareArgs, ctx: &Ctx) -> CmdResult {
    let c = conn(ctx)?;
    let r = compare::compare(&c, &a.a, &a.b).map_err(CliError::bad_input)?;
    if a.format.format == Format::Json {
        print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} ({} rows) → {} ({} rows)", printable(&r.a), r.rows_a, printable(&r.b), r.rows_b);
    for w in &r.warnings {
        println!("warning: {}", printable(w));
    }
    let mut t = table(a.format.format, &["metric", "A", "B", "change", "95% CI", "n"]);
    for m in &r.metrics {
        let ci = m.ci.map(|c| format!("[{:+.1}%, {:+.1}%]", 100.0 * c[0], 100.0 * c[1])).unwrap_or("-".into());
        t.add_row(vec![
            printable(&m.metric).into_owned(),
            fmt_num(m.median_a),
            fmt_num(m.median_b),
            format!("{:+.1}%", 100.0 * m.relative_change),
            ci,
            format!("{}/{}", m.n_a, m.n_b),
        ]);
    }
    println!("{t}");
    if !r.kernels.is_empty() {
        let mut t = table(a.format.format, &["kernel", "A µs/row", "B µs/row", "change"]);
        for k in &r.kernels {
            let f = |v: Option<f64>| v.map(fmt_num).unwrap_or("-".into());
            t.add_row(vec![
                printable(&k.name).into_owned(),
                f(k.total_us_a),
                f(k.total_us_b),
                k.relative_change.map(|c| format!("{:+.1}%", 100.0 * c)).unwrap_or("-".into()),
            ]);
        }
        println!("{t}");
    }
    Ok(ExitCode::SUCCESS)
}

fn goal(spec: &str) -> Result<(String, bool), CliError> {
    if let Some(m) = spec.strip_suffix(":max") {
        return Ok((m.to_string(), true));
    }
    if let Some(m) = spec.strip_suffix(":min") {
        return Ok((m.to_string(), false));
    }
    match katlas_model::Goal::infer(spec) {
        Some(g) => Ok((spec.to_string(), g == katlas_model::Goal::Maximize)),
        None => Err(CliError::bad_input(format!("`{spec}`: the name does not say which way is better; write `{spec}:max` or `{spec}:min`"))),
    }
}

pub fn run_pareto(a: &ParetoArgs, ctx: &Ctx) -> CmdResult {
    let (x, mx) = goal(&a.x)?;
    let (y, my) = goal(&a.y)?;
    let c = conn(ctx)?;
    let pts = compare::pareto(&c, &x, &y, (mx, my), a.workload.as_deref(), a.phase.as_deref()).map_err(CliError::bad_input)?;
    if a.format.format == Format::Json {
        print_json(&serde_json::json!({"x": x, "y": y, "maximize_x": mx, "maximize_y": my, "points": pts}));
        return Ok(ExitCode::SUCCESS);
    }
    let front: Vec<&str> = pts.iter().filter(|p| p.front).map(|p| p.variant.as_str()).collect();
    println!(
        "Pareto front of {} variants over {x} ({}) and {y} ({}): {}",
        pts.len(),
        if mx { "higher" } else { "lower" },
        if my { "higher" } else { "lower" },
        printable(&front.join("; "))
    );
    let mut t = table(a.format.format, &["variant", "rows", &x, &y, "front"]);
    for p in &pts {
        t.add_row(vec![printable(&p.variant).into_owned(), p.rows.to_string(), fmt_num(p.x), fmt_num(p.y), if p.front { "yes".into() } else { String::new() }]);
    }
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}
