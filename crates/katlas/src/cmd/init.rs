use crate::ctx::{CliError, CmdResult, Ctx};
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The directory to make a project (default: the current directory).
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Overwrite an existing katlas.toml.
    #[arg(long)]
    pub force: bool,
}

/// The line init adds to the project's `.gitignore`.
const IGNORE_LINE: &str = ".katlas/";

pub fn run(args: &InitArgs, ctx: &Ctx) -> CmdResult {
    // init creates a project where there is none: DIR (the context's project root), else the
    // current directory.
    let root = ctx.explicit_root().unwrap_or_else(|| ctx.cwd.clone());
    let path = root.join(katlas_project::CONFIG_FILE);
    if path.exists() && !args.force {
        return Err(CliError::bad_input(format!("{}: already exists (use --force to overwrite)", path.display())));
    }
    // `katlas init DIR` makes DIR when it is not there yet, as `git init DIR` does.
    katlas_fs::create_dir_all(&root).map_err(|e| CliError::io(&root, e))?;
    katlas_fs::write_atomic(&path, katlas_project::INIT_TEMPLATE.as_bytes()).map_err(|e| CliError::io(&path, e))?;
    let layout = katlas_corpus::Layout::for_project(&root);
    let dot = &layout.root;
    for sub in layout.init_dirs() {
        katlas_fs::create_dir_all(&sub).map_err(|e| CliError::io(dot, e))?;
    }
    println!("wrote {}", path.display());
    println!("created {}/{{corpus,isa,tasks,runs}}", dot.display());
    let gitignore = root.join(".gitignore");
    // The corpus, runs, index and eval worktrees are this host's state: one `git add -A`
    // must not commit them.
    if ignore_dot_dir(&gitignore).map_err(|e| CliError::io(&gitignore, e))? {
        println!("added {IGNORE_LINE} to {}", gitignore.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Appends `.katlas/` to `gitignore` (created when missing) unless a line already ignores
/// the directory; true when it wrote. Appending keeps the user's lines as they are.
fn ignore_dot_dir(gitignore: &Path) -> std::io::Result<bool> {
    // A cloned repository could make .gitignore a link to a file outside it; katlas never
    // writes through one (open_append also opens with O_NOFOLLOW).
    if std::fs::symlink_metadata(gitignore).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(std::io::Error::other(format!("is a symbolic link; katlas does not write through it: add `{IGNORE_LINE}` to it yourself")));
    }
    let mut f = katlas_fs::open_append(gitignore)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let already = text.lines().map(str::trim).any(|l| matches!(l, ".katlas" | ".katlas/" | "/.katlas" | "/.katlas/"));
    if already {
        return Ok(false);
    }
    let sep = if text.is_empty() || text.ends_with('\n') { "" } else { "\n" };
    f.write_all(format!("{sep}{IGNORE_LINE}\n").as_bytes())?;
    Ok(true)
}
