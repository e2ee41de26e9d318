//! `katlas trust`: review and allow the commands a repository's files would run.

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, printable, Format, FormatArg};
use crate::trust::shown;
use katlas_project::trust::{sha256_hex, toml_commands, TrustStore};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// Files to trust with their current content (katlas.toml, workloads/*.toml, a task.json).
    /// Without files: list the project's command files, their commands and whether each is trusted.
    pub files: Vec<PathBuf>,
    /// Forget the named files instead.
    #[arg(long)]
    pub revoke: bool,
    #[command(flatten)]
    pub format: FormatArg,
}

/// The commands a katlas file holds, by what they are, with everything else that decides
/// what they run (a task's `bench.env`, a workload's env and cwd: [`toml_commands`]).
pub fn commands_in(file: &Path, text: &str) -> Result<Vec<(String, String)>, String> {
    if file.file_name().is_some_and(|n| n == "task.json") {
        let t: katlas_model::task::Task = serde_json::from_str(text).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut out = Vec::new();
        if let Some(b) = &t.build {
            out.push(("build".to_string(), b.join(" ")));
        }
        out.push(("bench".into(), t.bench.command.join(" ")));
        for (k, v) in &t.bench.env {
            out.push((format!("bench env {k}"), v.clone()));
        }
        for c in &t.correctness {
            out.push((format!("correctness {}", c.claim), c.command.clone()));
        }
        return Ok(out);
    }
    Ok(toml_commands(text))
}

/// katlas.toml, workloads/*.toml and task packets of the project.
fn project_files(ctx: &Ctx) -> Result<Vec<PathBuf>, CliError> {
    let p = ctx.project()?;
    let mut files = vec![p.config_file()];
    for dir in [p.root.join("workloads")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|f| f.extension().is_some_and(|x| x == "toml")).collect();
            v.sort();
            files.extend(v);
        }
    }
    if let Ok(rd) = std::fs::read_dir(ctx.layout()?.tasks_dir()) {
        let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("task.json")).collect();
        v.sort();
        files.extend(v);
    }
    Ok(files.into_iter().filter(|f| f.is_file()).collect())
}

pub fn run(a: &TrustArgs, ctx: &Ctx) -> CmdResult {
    let mut store = TrustStore::load()?;
    if a.files.is_empty() {
        let mut rows = Vec::new();
        for f in project_files(ctx)? {
            let content = std::fs::read(&f).map_err(|e| CliError::io(&f, e))?;
            let cmds = commands_in(&f, &String::from_utf8_lossy(&content)).map_err(CliError::bad_input)?;
            let status = match (store.is_trusted(&f, &content), store.entry(&f)) {
                (true, _) => "trusted",
                (false, Some(_)) => "changed since trusted",
                (false, None) => "not trusted",
            };
            rows.push((shown(ctx, &f), status, cmds));
        }
        if a.format.format == Format::Json {
            let v: Vec<_> = rows
                .iter()
                .map(|(f, s, c)| serde_json::json!({"file": f, "status": s, "commands": c.iter().map(|(w, c)| serde_json::json!({"what": w, "command": c})).collect::<Vec<_>>()}))
                .collect();
            print_json(&serde_json::json!({"store": store.path().display().to_string(), "files": v}));
        } else {
            println!("trust store: {}", store.path().display());
            if rows.is_empty() {
                println!("no command files in this project");
            }
            for (f, s, cmds) in rows {
                println!("{} ({s})", printable(&f));
                if cmds.is_empty() {
                    println!("  (no commands)");
                }
                for (w, c) in cmds {
                    println!("  {w}: {}", printable(&c));
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let now = katlas_model::row::now_rfc3339();
    for f in &a.files {
        let path = ctx.resolve(f);
        if a.revoke {
            let had = store.revoke(&path);
            println!("{} {}", if had { "revoked" } else { "was not trusted:" }, printable(&shown(ctx, &path)));
            continue;
        }
        let content = std::fs::read(&path).map_err(|e| CliError::io(&path, e))?;
        let cmds = commands_in(&path, &String::from_utf8_lossy(&content)).map_err(CliError::bad_input)?;
        let d = store.trust(&path, &content, &now);
        debug_assert_eq!(d, sha256_hex(&content));
        println!("trusted {} (sha256 {}), {} command(s):", printable(&shown(ctx, &path)), &d[..12], cmds.len());
        for (w, c) in cmds {
            println!("  {w}: {}", printable(&c));
        }
    }
    store.save()?;
    Ok(ExitCode::SUCCESS)
}
