//! `katlas index rebuild|status` and `katlas query "SQL"`: the SQLite query index over the
//! files under `.katlas/` (docs/corpus.md, "Query index"), or the team store with `--store`.

use super::index::{open_index, with_progress};
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, table};
use katlas_store::index;
use katlas_store::query::{self, QueryResult};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum IndexCmd {
    /// Write .katlas/index.sqlite anew from the files.
    Rebuild(IndexArgs),
    /// Bring the index up to date (what every query does first) and say what was read.
    Refresh(IndexArgs),
}

#[derive(Debug, clap::Args)]
pub struct IndexArgs {
    #[command(flatten)]
    pub format: crate::output::FormatArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QueryFormat {
    Text,
    Json,
    Csv,
    Markdown,
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// One SQL statement over the tables and views of docs/corpus.md ("Query index").
    pub sql: String,
    /// Output format of the result set.
    #[arg(long, value_enum, default_value_t = QueryFormat::Text)]
    pub format: QueryFormat,
    /// Run it on the team store (PostgreSQL, docs/store.md) instead of the local index; `--url` implies it.
    #[arg(long)]
    pub store: bool,
    #[command(flatten)]
    pub url: crate::cmd::store::UrlArg,
}

pub fn run_index(c: &IndexCmd, ctx: &Ctx) -> CmdResult {
    let layout = ctx.layout()?;
    let (a, stats) = match c {
        IndexCmd::Rebuild(a) => (a, with_progress(|on| index::rebuild_with(&layout, on))),
        IndexCmd::Refresh(a) => (a, with_progress(|on| index::refresh_with(&layout, on))),
    };
    let stats = stats?;
    if a.format.format == crate::output::Format::Json {
        print_json(&stats);
    } else {
        let what = match &stats.rebuild_reason {
            Some(why) => format!("rebuilt ({why})"),
            None => format!("refreshed ({} appended to)", stats.appended),
        };
        println!(
            "index {what}: {} of {} source files read, {} records, {} bad lines, {} ms ({})",
            stats.sources_read,
            stats.sources,
            stats.records,
            stats.errors,
            stats.elapsed_ms,
            index::index_path(&layout).display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_query(a: &QueryArgs, ctx: &Ctx) -> CmdResult {
    if a.store || a.url.url.is_some() {
        let mut store = crate::cmd::store::connect(&a.url, ctx)?;
        let result = katlas_store::team::query(&mut store, &a.sql)?;
        print_result(&result, a.format)?;
        return Ok(ExitCode::SUCCESS);
    }
    let conn = open_index(&ctx.layout()?)?;
    let result = query::sqlite(&conn, &a.sql).map_err(CliError::bad_input)?;
    print_result(&result, a.format)?;
    Ok(ExitCode::SUCCESS)
}

/// `r` with every text cell and column name passed through `f` (numbers stay numbers).
fn map_text(r: &QueryResult, f: impl Fn(&str) -> String) -> QueryResult {
    let cell = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => serde_json::Value::String(f(s)),
        other => other.clone(),
    };
    QueryResult { columns: r.columns.iter().map(|c| f(c)).collect(), rows: r.rows.iter().map(|row| row.iter().map(cell).collect()).collect() }
}

pub fn print_result(r: &QueryResult, format: QueryFormat) -> Result<(), CliError> {
    use katlas_model::text::csv_safe;
    match format {
        QueryFormat::Json => print_json(&query::to_json(r)),
        // Names come from files: no formula reaches a spreadsheet, no control a terminal.
        QueryFormat::Csv => print!("{}", query::to_csv(&map_text(r, |s| csv_safe(s).into_owned())).map_err(CliError::bad_input)?),
        QueryFormat::Markdown => print!("{}", query::to_markdown(&map_text(r, |s| crate::output::printable(s).into_owned()))),
        QueryFormat::Text => {
            let cols: Vec<&str> = r.columns.iter().map(String::as_str).collect();
            let mut t = table(crate::output::Format::Text, &cols);
            for row in &r.rows {
                t.add_row(row.iter().map(|v| crate::output::printable(&query::cell_text(v)).into_owned()));
            }
            println!("{t}");
            println!("{} row{}", r.rows.len(), if r.rows.len() == 1 { "" } else { "s" });
        }
    }
    Ok(())
}
