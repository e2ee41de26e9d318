use crate::ctx::{CliError, CmdResult, Ctx};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Print only this schema (e.g. katlas.row.v1); default lists them.
    pub name: Option<String>,
    /// Write every schema to DIR/<name>.json (the committed copies live in docs/schema).
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    pub write: Option<PathBuf>,
    /// Compare every schema with DIR/<name>.json; exit 1 when any differs.
    #[arg(long, value_name = "DIR")]
    pub check: Option<PathBuf>,
}

/// Every record schema katlas produces, from all stage crates.
pub fn all() -> Vec<katlas_model::SchemaDoc> {
    let mut docs = katlas_model::schemas();
    docs.extend(katlas_advise::schemas().into_iter().map(|(name, schema)| katlas_model::SchemaDoc { name, schema }));
    docs.extend(katlas_build::schemas());
    let doc = |name, schema: serde_json::Value| katlas_model::SchemaDoc { name, schema };
    docs.push(doc(katlas_isa::SCHEMA, katlas_isa::manifest::json_schema()));
    docs.push(doc(katlas_isa::diff::SCHEMA, to_value(schemars::schema_for!(katlas_isa::diff::IsaDiff))));
    docs.push(doc(katlas_collect::parse::PARSE_SCHEMA, to_value(schemars::schema_for!(katlas_collect::parse::ParseOutput))));
    docs.push(doc(katlas_collect::provenance::PROVENANCE_SCHEMA, to_value(schemars::schema_for!(katlas_collect::provenance::KernelProvenance))));
    docs.sort_by_key(|d| d.name);
    docs
}

fn to_value(s: schemars::Schema) -> serde_json::Value {
    serde_json::to_value(s).expect("schema serialises")
}

pub fn run(args: &SchemaArgs, ctx: &Ctx) -> CmdResult {
    let docs = all();
    if let Some(dir) = &args.write {
        let dir = ctx.resolve(dir);
        std::fs::create_dir_all(&dir)?;
        for d in &docs {
            let p = dir.join(format!("{}.json", d.name));
            std::fs::write(&p, katlas_model::schema::render(&d.schema))?;
            println!("wrote {}", p.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = &args.check {
        let dir = ctx.resolve(dir);
        let mut drift = Vec::new();
        for d in &docs {
            let p = dir.join(format!("{}.json", d.name));
            let committed = std::fs::read_to_string(&p).unwrap_or_default();
            if committed != katlas_model::schema::render(&d.schema) {
                drift.push(p.display().to_string());
            }
        }
        if drift.is_empty() {
            println!("{} schemas match {}", docs.len(), dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        return Err(CliError::negative(format!("schemas drifted from code: {} (run `katlas schema --write docs/schema`)", drift.join(", "))));
    }
    match &args.name {
        Some(n) => {
            let d = docs.iter().find(|d| d.name == n).ok_or_else(|| CliError::bad_input(format!("unknown schema `{n}`; known: {}", names(&docs))))?;
            print!("{}", katlas_model::schema::render(&d.schema));
        }
        None => println!("{}", names(&docs).replace(", ", "\n")),
    }
    Ok(ExitCode::SUCCESS)
}

fn names(docs: &[katlas_model::SchemaDoc]) -> String {
    docs.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}
