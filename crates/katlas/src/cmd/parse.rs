//! `katlas parse PARSER FILE`: what a parser extracts from a saved output or
//! profiler file (debug a workload spec; ingest files you already have).

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{fmt_num, fmt_opt, print_json, table, Format, FormatArg};
use crate::output::{say, say_err};
use katlas_collect::collect::rows_from_output;
use katlas_collect::ops::OpRules;
use katlas_collect::parse::{parse_with, Input, ParserOptions, PARSERS};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ParseArgs {
    /// Parser name (`katlas parse --list` lists them).
    #[arg(required_unless_present = "list")]
    pub parser: Option<String>,
    /// File to parse (`.gz` is decompressed on the fly); `-` reads stdin.
    #[arg(required_unless_present = "list")]
    pub file: Option<PathBuf>,
    /// rocpd: more databases (one per process), read with FILE as one view.
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,
    /// List the parsers and exit.
    #[arg(long)]
    pub list: bool,
    /// Phase name for tables without one (profiler files); torch-trace without --phases: the
    /// record_function range of this name is the phase, kernels outside it `unannotated`.
    #[arg(long)]
    pub phase: Option<String>,
    /// torch-trace: GPU annotation names, rocpd: roctx range names, that delimit phases (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub phases: Vec<String>,
    /// torch-trace: katlas's Triton launch records to join (default: `triton-launches.jsonl`
    /// or `launches.jsonl` beside the trace).
    #[arg(long, value_name = "FILE")]
    pub triton_launches: Option<PathBuf>,
    /// torch-trace: the Triton cache to join (default: `triton-cache/` beside the trace).
    #[arg(long, value_name = "DIR")]
    pub triton_cache: Option<PathBuf>,
    /// kv: keys to take (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub keys: Vec<String>,
    /// json-lines: the marker key.
    #[arg(long)]
    pub marker: Option<String>,
    /// Kernels shown per phase in text output.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Print katlas.row.v1 rows (JSONL, one per phase) for WORKLOAD instead, ready for `katlas corpus import`.
    #[arg(long, value_name = "WORKLOAD")]
    pub rows: Option<String>,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(args: &ParseArgs, ctx: &Ctx) -> CmdResult {
    if args.list {
        match args.format.format {
            Format::Json => print_json(&PARSERS.iter().map(|p| serde_json::json!({"name": p.0, "description": p.1})).collect::<Vec<_>>()),
            f => {
                let mut t = table(f, &["parser", "reads"]);
                for p in PARSERS {
                    t.add_row(vec![p.0, p.1]);
                }
                println!("{t}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let parser = args.parser.as_deref().expect("clap requires it");
    let file = args.file.as_ref().expect("clap requires it");
    let opts = ParserOptions {
        keys: args.keys.clone(),
        marker: args.marker.clone(),
        phase: args.phase.clone(),
        phases: args.phases.clone(),
        drop_counters: Vec::new(),
        triton_launches: args.triton_launches.as_ref().map(|p| ctx.resolve(p).display().to_string()),
        triton_cache: args.triton_cache.as_ref().map(|p| ctx.resolve(p).display().to_string()),
    };
    let mut out = if !args.more.is_empty() {
        if parser != "rocpd" {
            return Err(CliError::bad_input(format!("{parser} reads one file; only rocpd reads several (one database per process)")));
        }
        let mut paths = Vec::new();
        for p in std::iter::once(file).chain(&args.more) {
            let path = ctx.resolve(p);
            if let Some(why) = katlas_corpus::input::unreadable(&path) {
                return Err(CliError::bad_input(format!("{}: {why}", path.display())));
            }
            paths.push(path);
        }
        let limits = katlas_collect::parse::Limits::from_env().map_err(CliError::bad_input)?;
        katlas_collect::parse::rocpd::parse_files(&paths, &opts, &limits)
    } else if file.as_os_str() == "-" {
        // Streamed and bounded like a file (gzip detected, line and input caps).
        let mut stdin = std::io::stdin().lock();
        parse_with(parser, Input::Reader { reader: &mut stdin, source: "<stdin>" }, &opts)
    } else {
        let path = ctx.resolve(file);
        if let Some(why) = katlas_corpus::input::unreadable(&path) {
            return Err(CliError::bad_input(format!("{}: {why}", path.display())));
        }
        parse_with(parser, Input::File(&path), &opts)
    }?;
    let ops = match ctx.layout() {
        Ok(l) => OpRules::with_project(&l.rules_dir())?,
        Err(_) => OpRules::builtin(),
    };
    for p in &mut out.phases {
        ops.classify_all(&mut p.kernels);
    }
    for w in &out.warnings {
        say_err!("katlas: warning: {w}");
    }
    if let Some(workload) = &args.rows {
        let src = file.display().to_string();
        for r in rows_from_output(workload, out, &ops, &src) {
            println!("{}", serde_json::to_string(&r).expect("row serialises"));
        }
        return Ok(ExitCode::SUCCESS);
    }
    match args.format.format {
        Format::Json => print_json(&out),
        f => {
            let mut m = table(f, &["metric", "value", "unit"]);
            for (k, v) in &out.metrics {
                m.add_row(vec![k.clone(), fmt_num(v.value), fmt_opt(&v.unit)]);
            }
            say!("{} ({})", out.parser, out.source.clone().unwrap_or_default());
            if !out.metrics.is_empty() {
                say!("{m}");
            }
            for p in &out.phases {
                say!(
                    "\nphase {}: {} kernels, {} launches, GPU time {} us{}",
                    p.phase,
                    p.kernels.len(),
                    fmt_opt(&p.launches),
                    fmt_num(p.gpu_time_us),
                    p.reported_total_us.map(|t| format!(" (reported total {} us)", fmt_num(t))).unwrap_or_default()
                );
                if !p.metrics.is_empty() {
                    let mut pm = table(f, &["phase metric", "value", "unit"]);
                    for (k, v) in &p.metrics {
                        pm.add_row(vec![k.clone(), fmt_num(v.value), fmt_opt(&v.unit)]);
                    }
                    say!("{pm}");
                }
                if p.kernels.is_empty() {
                    continue;
                }
                let mut t = table(f, &["kernel", "op", "calls", "total us", "avg us", "median us", "min us", "max us", "share %", "GB/s"]);
                for k in p.kernels.iter().take(args.top) {
                    let name = k.demangled.as_deref().unwrap_or(&k.name);
                    let short: String = if name.chars().count() > 70 { format!("{}…", name.chars().take(69).collect::<String>()) } else { name.to_string() };
                    let op = k.op.as_ref().map(|o| format!("{}.{}", o.family, o.role)).unwrap_or_default();
                    let o = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "-".into());
                    t.add_row(vec![
                        short,
                        op,
                        k.calls.to_string(),
                        fmt_num(k.total_us),
                        o(k.avg_us),
                        o(k.median_us),
                        o(k.min_us),
                        o(k.max_us),
                        o(k.share_pct),
                        o(k.achieved_gbps),
                    ]);
                }
                println!("{t}");
                if p.kernels.len() > args.top {
                    say!("({} more; --top N or --format json)", p.kernels.len() - args.top);
                }
            }
            if !out.route.is_empty() {
                say!("\nroute: {}", serde_json::to_string(&out.route).unwrap_or_default());
            }
            if !out.tags.is_empty() {
                say!("tags: {}", out.tags.join(", "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
