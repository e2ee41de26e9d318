//! `katlas check-numeric A B`: tensor dumps compared cell by cell, bad cells histogrammed.

use crate::ctx::{exit, CliError, CmdResult, Ctx};
use crate::output::{print_json, Format, FormatArg};
use katlas_eval::numeric::{compare, pattern, read, DType};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CheckNumericArgs {
    /// Candidate dump (raw little-endian or .npy).
    pub a: PathBuf,
    /// Reference dump.
    pub b: PathBuf,
    /// Relative tolerance: a cell is bad when |a - b| > atol + rtol * |b|.
    #[arg(long, default_value_t = 1e-3)]
    pub rtol: f64,
    /// Absolute tolerance (see --rtol).
    #[arg(long, default_value_t = 1e-5)]
    pub atol: f64,
    /// ROWS,COLS (default: a .npy shape, or one row).
    #[arg(long)]
    pub dims: Option<String>,
    /// Element type of raw dumps: f32, f16, bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Lanes per wave for the lane histogram (32 or 64).
    #[arg(long, default_value_t = 32)]
    pub lanes: usize,
    #[command(flatten)]
    pub format: FormatArg,
}

fn hist(h: &[usize]) -> String {
    h.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| format!("{i}:{c}")).collect::<Vec<_>>().join(" ")
}

pub fn run(a: &CheckNumericArgs, ctx: &Ctx) -> CmdResult {
    let dtype: DType = a.dtype.parse().map_err(CliError::bad_input)?;
    let ta = read(&ctx.resolve(&a.a), dtype)?;
    let tb = read(&ctx.resolve(&a.b), dtype)?;
    let (rows, cols) = match &a.dims {
        Some(d) => {
            let (r, c) = d.split_once(',').ok_or_else(|| CliError::bad_input(format!("--dims {d}: expected ROWS,COLS")))?;
            let p = |s: &str| s.trim().parse::<usize>().map_err(|_| CliError::bad_input(format!("--dims {d}: `{s}` is not a number")));
            (p(r)?, p(c)?)
        }
        None => match ta.shape.as_deref().or(tb.shape.as_deref()) {
            Some([r, c]) => (*r, *c),
            Some(s) if !s.is_empty() => (s[..s.len() - 1].iter().product(), s[s.len() - 1]),
            _ => (1, ta.values.len()),
        },
    };
    let rep = compare(&ta.values, &tb.values, rows, cols, a.rtol, a.atol, a.lanes)?;
    if a.format.format == Format::Json {
        print_json(&rep);
    } else {
        println!(
            "{} of {} cells bad ({}x{}, rtol {}, atol {}); max abs err {:.3e}, max rel err {:.3e}{}",
            rep.bad,
            rep.cells,
            rows,
            cols,
            a.rtol,
            a.atol,
            rep.max_abs_err,
            rep.max_rel_err,
            rep.worst.map(|(r, c)| format!(" at ({r}, {c})")).unwrap_or_default()
        );
        if rep.bad > 0 {
            println!("by row mod 16: {}", hist(&rep.by_row_mod16));
            println!("by lane (col mod {}): {}", rep.by_lane.len(), hist(&rep.by_lane));
            println!("by column: {}", hist(&rep.by_col));
            for p in pattern(&rep) {
                println!("pattern: {p}");
            }
            for (r, c, x, y) in &rep.examples {
                println!("  ({r}, {c}): {x} vs {y}");
            }
        }
    }
    Ok(ExitCode::from(if rep.bad == 0 { exit::OK } else { exit::NEGATIVE }))
}
