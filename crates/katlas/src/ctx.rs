//! Shared command context, error type and exit codes.

use katlas_corpus::Layout;
use katlas_fs::class::{Class, Classify};
use katlas_project::Project;
use std::cell::OnceCell;
use std::fmt::Display;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit codes of the contract in docs/cli.md ("Exit codes"), where each is listed with when it
/// is returned; crates/katlas/tests/it/exit_contract.rs fails when a code returned here is not
/// listed there.
#[allow(dead_code)]
pub mod exit {
    pub const OK: u8 = 0;
    pub const NEGATIVE: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const MISSING_ENV: u8 = 3;
    /// Ctrl-C (or SIGTERM) stopped a command that keeps what it measured (`collect`,
    /// `fleet wait`): 128 + SIGINT, what a shell reports for a process Ctrl-C killed.
    pub const INTERRUPTED: u8 = 130;
}

/// An error that knows its exit code. The message names file, line and field
/// where there is one.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    /// The one mapping of a failure's class (katlas_fs::class) to an exit code.
    pub fn of_class(class: Class, m: impl Display) -> Self {
        let code = match class {
            Class::Input => exit::BAD_INPUT,
            Class::Environment => exit::MISSING_ENV,
        };
        Self { code, message: m.to_string() }
    }
    pub fn bad_input(m: impl Display) -> Self {
        Self::of_class(Class::Input, m)
    }
    pub fn missing_env(m: impl Display) -> Self {
        Self::of_class(Class::Environment, m)
    }
    /// An I/O failure on `path`: named with the path, classed by its OS error (a refused
    /// write is the environment, whatever the file).
    pub fn io(path: &Path, e: std::io::Error) -> Self {
        Self::of_class(e.class(), format!("{}: {e}", path.display()))
    }
    pub fn negative(m: impl Display) -> Self {
        Self { code: exit::NEGATIVE, message: m.to_string() }
    }
    pub fn report(&self) -> ExitCode {
        eprintln!("katlas: error: {}", self.message);
        ExitCode::from(self.code)
    }
}

/// Every crate's error (and `std::io::Error`) says its class; `?` turns it into its exit code.
impl<E: Classify + Display> From<E> for CliError {
    fn from(e: E) -> Self {
        Self::of_class(e.class(), e)
    }
}

pub type CmdResult = Result<ExitCode, CliError>;

pub struct Ctx {
    explicit_project: Option<PathBuf>,
    project: OnceCell<Result<Project, katlas_project::ProjectError>>,
    pub cwd: PathBuf,
    /// Colour only on a terminal and never with NO_COLOR set.
    pub color: bool,
    /// `--yes`: run untrusted repository commands (still shown).
    pub yes: bool,
}

impl Ctx {
    pub fn new(explicit_project: Option<PathBuf>) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            explicit_project,
            project: OnceCell::new(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            color: !no_color && std::io::stdout().is_terminal(),
            yes: false,
        }
    }

    /// The project, discovered on first use; a malformed katlas.toml is bad input.
    pub fn project(&self) -> Result<&Project, CliError> {
        self.project.get_or_init(|| Project::discover(&self.cwd, self.explicit_project.as_deref())).as_ref().map_err(|e| CliError::of_class(e.class(), e))
    }

    /// `--project` as given, resolved against the current directory.
    pub fn explicit_root(&self) -> Option<PathBuf> {
        self.explicit_project.as_deref().map(|p| self.resolve(p))
    }

    pub fn layout(&self) -> Result<Layout, CliError> {
        Ok(Layout::for_project(&self.project()?.root))
    }

    /// A user path, resolved against the current directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}
