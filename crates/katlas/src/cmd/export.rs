//! `katlas export --format csv|parquet --table T --out F`: a table of the query index as a file
//! (docs/corpus.md, "Export").

use crate::ctx::{CliError, CmdResult, Ctx};
use katlas_fs::class::Classify;
use katlas_store::export;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Csv,
    Parquet,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// File format of the table.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// rows, metrics, kernels, ledger, evals, eval_sides, samples, isa_objects, isa_kernels or errors.
    #[arg(long)]
    pub table: String,
    /// Output file (replaced when complete); `-` writes CSV to stdout.
    #[arg(long)]
    pub out: std::path::PathBuf,
}

pub fn run(a: &ExportArgs, ctx: &Ctx) -> CmdResult {
    let t = export::table(&a.table)?;
    let conn = crate::cmd::index::open_index(&ctx.layout()?)?;
    if a.out.as_os_str() == "-" {
        if a.format == ExportFormat::Parquet {
            return Err(CliError::bad_input("--out -: Parquet goes to a file"));
        }
        export::csv(&conn, t, std::io::stdout().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = ctx.resolve(&a.out);
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    let f = std::fs::File::create(&tmp).map_err(|e| CliError::io(&tmp, e))?;
    let w = std::io::BufWriter::new(f);
    let n = match a.format {
        ExportFormat::Csv => export::csv(&conn, t, w),
        ExportFormat::Parquet => export::parquet(&conn, t, w),
    };
    let n = match n {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(CliError::of_class(e.class(), format!("{}: {e}", out.display())));
        }
    };
    std::fs::rename(&tmp, &out).map_err(|e| CliError::io(&out, e))?;
    eprintln!("{n} {} rows written to {}", t.name, out.display());
    Ok(ExitCode::SUCCESS)
}
