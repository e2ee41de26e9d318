//! `katlas store push|pull`: the team store on PostgreSQL (docs/store.md). `katlas query
//! --store` runs its SQL there (cmd/query.rs).

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, Format, FormatArg};
use katlas_store::team::{self, Progress, Skipped, Store};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum StoreCmd {
    /// Send every record of .katlas/ (rows, ledger, evals, samples, ISA manifests) the store lacks.
    Push(StoreArgs),
    /// Write every record of the store this project lacks into .katlas/, byte for byte.
    Pull(StoreArgs),
}

#[derive(Debug, clap::Args)]
pub struct UrlArg {
    /// PostgreSQL URL or key=value string (default: $KATLAS_STORE_URL, else [store] url in katlas.toml).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub url: UrlArg,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    url: Option<String>,
}

/// The store URL: `--url`, else `KATLAS_STORE_URL`, else `[store] url` of katlas.toml once
/// that file is trusted.
pub fn url(a: &UrlArg, ctx: &Ctx) -> Result<String, CliError> {
    if let Some(u) = &a.url {
        return Ok(u.clone());
    }
    if let Some(u) = std::env::var("KATLAS_STORE_URL").ok().filter(|u| !u.is_empty()) {
        return Ok(u);
    }
    let p = ctx.project()?;
    match p.section::<StoreSection>(&["store"])?.and_then(|s| s.url) {
        // A cloned repository's katlas.toml choosing where this host's records go is trusted
        // as its commands are.
        Some(u) => {
            crate::trust::authorize(ctx, &[p.config_commands(vec![("[store] url".into(), katlas_identity::redact_secrets(&u).into_owned())])])?;
            Ok(u)
        }
        None => Err(CliError::bad_input("no team store named: give --url postgres://…, set KATLAS_STORE_URL, or [store] url in katlas.toml")),
    }
}

pub fn connect(a: &UrlArg, ctx: &Ctx) -> Result<Store, CliError> {
    Store::connect(&url(a, ctx)?).map_err(CliError::from)
}

/// Runs a push or pull with its progress on stderr (the progress line of every long command,
/// updated after each transaction): records so far and their rate, and for a push the share of
/// the project's bytes read.
fn with_progress<T>(verb: &'static str, f: impl FnOnce(&mut dyn FnMut(&Progress)) -> T) -> T {
    let bar = crate::output::progress_bar();
    let mut on = |p: &Progress| {
        if p.bytes_total > 0 {
            bar.set_length(p.bytes_total);
            bar.set_position(p.bytes);
        }
        let rate = p.records as f64 / (p.elapsed_ms.max(1) as f64 / 1e3);
        bar.set_message(format!("store {verb}: {} records, {rate:.0} records/s", p.records));
    };
    let out = f(&mut on);
    bar.finish_and_clear();
    out
}

fn list(title: &str, items: &[Skipped], total: u64) {
    if total == 0 {
        return;
    }
    println!("{title}: {total}");
    for s in items {
        let at = if s.line > 0 { format!("{}:{}", s.source, s.line) } else { s.source.clone() };
        println!("  {}: {}", crate::output::printable(&at), crate::output::printable(&s.reason));
    }
    if total as usize > items.len() {
        println!("  … and {} more", total as usize - items.len());
    }
}

fn kinds(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return String::new();
    }
    format!(" ({})", m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", "))
}

pub fn run(c: &StoreCmd, ctx: &Ctx) -> CmdResult {
    match c {
        StoreCmd::Push(a) => {
            let layout = ctx.layout()?;
            let mut store = connect(&a.url, ctx)?;
            let host = katlas_identity::host::host_identity().hostname;
            let s = with_progress("push", |on| team::push(&mut store, &layout, host.as_deref(), on))?;
            if a.format.format == Format::Json {
                print_json(&s);
            } else {
                println!(
                    "pushed {} new records{} to {}: {} already there, {} read from {} files in {} transactions, {:.1} s ({:.0} records/s)",
                    s.new,
                    kinds(&s.new_by_kind),
                    s.store,
                    s.present + s.conflicts,
                    s.records,
                    s.sources,
                    s.transactions,
                    s.elapsed_ms as f64 / 1e3,
                    s.records_per_s
                );
                list("not pushed (no record)", &s.skipped_list, s.skipped);
                list("kept the store's version", &s.conflict_list, s.conflicts);
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCmd::Pull(a) => {
            let layout = ctx.layout()?;
            let mut store = connect(&a.url, ctx)?;
            // A pull reads the project's ids from its index: a rebuild it needs shows its
            // progress here (the pull's own refresh then finds the index current).
            crate::cmd::index::open_index(&layout)?;
            let s = with_progress("pull", |on| team::pull(&mut store, &layout, on))?;
            if a.format.format == Format::Json {
                print_json(&s);
            } else {
                println!(
                    "pulled {} new records{} from {} into {} files: {} already here, {} in the store, {:.1} s",
                    s.written,
                    kinds(&s.written_by_kind),
                    s.store,
                    s.files_written,
                    s.present,
                    s.records,
                    s.elapsed_ms as f64 / 1e3
                );
                list("left as they are (other bytes here)", &s.conflict_list, s.conflicts);
                list("refused from the store", &s.refused_list, s.refused);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
