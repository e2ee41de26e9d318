//! Show the commands a run takes from the repository's files, and run them only
//! when the user has trusted those files (`katlas trust`, or `--yes` for one run).
//! The store and its rules: `katlas_project::trust`.

use crate::ctx::{CliError, Ctx};
use crate::output::printable;
use katlas_fs::class::Classify;
use katlas_project::trust::{CommandSource, TrustStore};
use std::path::Path;

/// A source for `commands` read from `file`, whose bytes are read now (trust is
/// judged on what is on disk when the run starts).
pub fn source_of(file: &Path, commands: Vec<(String, String)>) -> Result<CommandSource, CliError> {
    let content = std::fs::read(file).map_err(|e| CliError::io(file, e))?;
    Ok(CommandSource { file: file.to_path_buf(), content, commands })
}

/// Print every command from `sources` to stderr, then refuse (exit 2, nothing run)
/// unless each file is trusted with its current content or `--yes` was given.
pub fn authorize(ctx: &Ctx, sources: &[CommandSource]) -> Result<(), CliError> {
    let sources: Vec<&CommandSource> = sources.iter().filter(|s| !s.commands.is_empty()).collect();
    if sources.is_empty() {
        return Ok(());
    }
    let store = match TrustStore::load() {
        Ok(s) => Some(s),
        Err(_) if ctx.yes => None,
        Err(e) => return Err(CliError::of_class(e.class(), format!("trust store: {e}"))),
    };
    let mut untrusted = Vec::new();
    for s in &sources {
        let trusted = store.as_ref().is_some_and(|st| st.is_trusted(&s.file, &s.content));
        let how = match (trusted, ctx.yes, store.as_ref().and_then(|st| st.entry(&s.file))) {
            (true, _, _) => "trusted",
            (false, true, _) => "not trusted; running because of --yes",
            (false, false, Some(_)) => "CHANGED since you trusted it",
            (false, false, None) => "NOT trusted",
        };
        eprintln!("katlas: commands from {} ({how}, sha256 {}):", printable(&shown(ctx, &s.file)), &s.digest()[..12]);
        for (what, c) in &s.commands {
            eprintln!("  {what}: {}", printable(c));
        }
        if !trusted {
            untrusted.push(shown(ctx, &s.file));
        }
    }
    if untrusted.is_empty() || ctx.yes {
        return Ok(());
    }
    let files = untrusted.join(" ");
    Err(CliError::bad_input(format!(
        "{} not trusted, so nothing was run. Review the commands above, then run `katlas trust {files}` (trust holds until the file changes), or pass --yes to run them this once.",
        printable(&files)
    )))
}

/// A path as the user would type it: relative to the current directory when inside it.
pub fn shown(ctx: &Ctx, p: &Path) -> String {
    let cwd = std::fs::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    abs.strip_prefix(&cwd).map(|r| r.display().to_string()).unwrap_or_else(|_| p.display().to_string())
}

/// Record a file katlas has just written at the user's command (a task packet, a fleet's job
/// script), whose commands are printed with it, as trusted: it is the user's own, not a file
/// a repository shipped. Best effort: on failure the user is asked when it runs.
pub fn trust_written(ctx: &Ctx, file: &Path) {
    let saved = TrustStore::load().and_then(|mut store| {
        let content = std::fs::read(file).map_err(|source| katlas_project::ProjectError::Io { path: file.to_path_buf(), source })?;
        store.trust(file, &content, &katlas_model::row::now_rfc3339());
        store.save()
    });
    match saved {
        Ok(()) => eprintln!("katlas: trusted {}, which katlas wrote (`katlas trust --revoke` undoes it)", printable(&shown(ctx, file))),
        Err(e) => eprintln!("katlas: warning: trust store: {e}; running it will ask for `katlas trust`"),
    }
}
