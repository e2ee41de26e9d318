use crate::ctx::{CliError, CmdResult, Ctx};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Overwrite an existing katlas.toml.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: &InitArgs, ctx: &Ctx) -> CmdResult {
    // init creates a project where there is none: --project, else the current directory.
    let root = ctx.explicit_root().unwrap_or_else(|| ctx.cwd.clone());
    let path = root.join(katlas_project::CONFIG_FILE);
    if path.exists() && !args.force {
        return Err(CliError::bad_input(format!("{}: already exists (use --force to overwrite)", path.display())));
    }
    std::fs::write(&path, katlas_project::INIT_TEMPLATE).map_err(|e| CliError::bad_input(format!("{}: {e}", path.display())))?;
    let layout = katlas_corpus::Layout::for_project(&root);
    let dot = &layout.root;
    for sub in layout.init_dirs() {
        katlas_fs::create_dir_all(&sub).map_err(|e| CliError::bad_input(format!("{}: {e}", dot.display())))?;
    }
    println!("wrote {}", path.display());
    println!("created {}/{{corpus,isa,tasks,runs}}", dot.display());
    Ok(ExitCode::SUCCESS)
}
