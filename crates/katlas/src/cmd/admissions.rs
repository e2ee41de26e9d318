//! `katlas admissions check|query`: hipfire's admissions registry (schema v2).

use crate::ctx::{exit, CliError, CmdResult, Ctx};
use crate::output::{print_json, Format, FormatArg};
use katlas_eval::admissions::{parse, query, Query, Registry};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum AdmissionsCmd {
    /// Validate a registry: schema v2, required fields, no wildcards, no inferred rows.
    Check(CheckArgs),
    /// Is this exact route admitted? Only an exact match of every field admits.
    Query(QueryArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Registry file (hipfire's admissions.yml).
    pub file: PathBuf,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// Registry file (default: admissions.yml at the project root).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// GPU arch atom of the route (`gfx1201`).
    #[arg(long)]
    pub gpu: String,
    /// Weight quantisation.
    #[arg(long)]
    pub quant: String,
    /// KV cache mode.
    #[arg(long)]
    pub kv: String,
    /// Maximum sequence length, tokens.
    #[arg(long)]
    pub max_seq: u64,
    /// Decode mode (`plain_AR`); a record that pins it admits only a query giving it.
    #[arg(long)]
    pub decode_mode: Option<String>,
    /// Pipeline-parallel degree; a record that pins it admits only a query giving it.
    #[arg(long)]
    pub pp: Option<u32>,
    /// Tensor-parallel degree; a record that pins it admits only a query giving it.
    #[arg(long)]
    pub tp: Option<u32>,
    /// Transport between devices (`HIP`); a record that pins it admits only a query giving it.
    #[arg(long)]
    pub transport: Option<String>,
    #[command(flatten)]
    pub format: FormatArg,
}

fn load(path: &Path) -> Result<Registry, CliError> {
    if !path.exists() {
        return Ok(Registry::default());
    }
    let text = katlas_corpus::input::read_text(path).map_err(CliError::bad_input)?;
    Ok(parse(path, &text)?)
}

pub fn run(c: &AdmissionsCmd, ctx: &Ctx) -> CmdResult {
    match c {
        AdmissionsCmd::Check(a) => {
            let path = ctx.resolve(&a.file);
            if let Some(why) = katlas_corpus::input::unreadable(&path) {
                return Err(CliError::bad_input(format!("{}: {why}", path.display())));
            }
            let reg = load(&path)?;
            if a.format.format == Format::Json {
                print_json(&serde_json::json!({
                    "schema": "katlas.admissions_check.v1",
                    "file": path.display().to_string(),
                    "valid": reg.errors.is_empty(),
                    "records": reg.records.iter().map(|r| &r.id).collect::<Vec<_>>(),
                    "errors": reg.errors,
                }));
            } else {
                for e in &reg.errors {
                    println!("error: {e}");
                }
                println!("{}: {} valid record(s), {} error(s)", path.display(), reg.records.len(), reg.errors.len());
            }
            Ok(ExitCode::from(if reg.errors.is_empty() { exit::OK } else { exit::BAD_INPUT }))
        }
        AdmissionsCmd::Query(a) => {
            let path = match &a.file {
                Some(f) => ctx.resolve(f),
                None => ctx.project()?.root.join("admissions.yml"),
            };
            let reg = load(&path)?;
            for e in &reg.errors {
                eprintln!("katlas: warning: {e} (record not considered)");
            }
            let mut fields = vec![
                ("gpu".to_string(), a.gpu.clone()),
                ("weight_quant".to_string(), a.quant.clone()),
                ("kv_cache".to_string(), a.kv.clone()),
                ("max_seq".to_string(), a.max_seq.to_string()),
            ];
            if let Some(v) = &a.decode_mode {
                fields.push(("decode_mode".into(), v.clone()));
            }
            if let Some(v) = a.pp {
                fields.push(("pp".into(), v.to_string()));
            }
            if let Some(v) = a.tp {
                fields.push(("tp".into(), v.to_string()));
            }
            if let Some(v) = &a.transport {
                fields.push(("transport".into(), v.clone()));
            }
            let ans = query(&reg, &Query { fields });
            if a.format.format == Format::Json {
                print_json(&ans);
            } else if ans.admitted {
                println!("admitted by {}", ans.record.as_deref().unwrap_or("?"));
            } else {
                println!("not admitted ({})", path.display());
                for r in &ans.reasons {
                    println!("  - {r}");
                }
            }
            Ok(ExitCode::from(if ans.admitted { exit::OK } else { exit::NEGATIVE }))
        }
    }
}
