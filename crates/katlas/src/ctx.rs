//! Shared command context, error type and exit codes.

use katlas_corpus::Layout;
use katlas_project::{Project, ProjectError};
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

/// OS errors of a file system that refuses a write: no space left, a quota, a read-only
/// mount, a file over the size limit.
const REFUSED_WRITE: [i32; 4] = [libc::ENOSPC, libc::EDQUOT, libc::EROFS, libc::EFBIG];

fn refuses_write(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), StorageFull | QuotaExceeded | ReadOnlyFilesystem | FileTooLarge)
}

/// SQLite's own message for `SQLITE_FULL` (the query index on a full disk).
const SQLITE_FULL: &str = "database or disk is full";

/// Whether a message carries a refused write: `std::io::Error` prints an OS error as
/// `… (os error N)`, and the stage crates pass I/O errors on as text (`path: error`, in
/// `StoreError`, `AdviseError::Io`, the trust store, the exporters), so the text is all that
/// reaches the CLI of a full disk met deep in a library.
fn mentions_refused_write(message: &str) -> bool {
    message.contains(SQLITE_FULL) || REFUSED_WRITE.iter().any(|c| message.contains(&format!("(os error {c})")))
}

/// An error that knows its exit code. The message names file, line and field
/// where there is one.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    /// Bad input (2), except that a message carrying a write the file system refused is the
    /// environment (3): a full disk is one class of failure whichever write met it (a report on
    /// stdout, a row appended to the corpus, a file under `.katlas/`).
    pub fn bad_input(m: impl Display) -> Self {
        let message = m.to_string();
        let code = if mentions_refused_write(&message) { exit::MISSING_ENV } else { exit::BAD_INPUT };
        Self { code, message }
    }
    pub fn missing_env(m: impl Display) -> Self {
        Self { code: exit::MISSING_ENV, message: m.to_string() }
    }
    pub fn negative(m: impl Display) -> Self {
        Self { code: exit::NEGATIVE, message: m.to_string() }
    }
    pub fn report(&self) -> ExitCode {
        eprintln!("katlas: error: {}", self.message);
        ExitCode::from(self.code)
    }
}

impl From<ProjectError> for CliError {
    fn from(e: ProjectError) -> Self {
        Self::bad_input(e)
    }
}

impl From<katlas_corpus::StoreError> for CliError {
    fn from(e: katlas_corpus::StoreError) -> Self {
        Self::bad_input(e)
    }
}

impl From<std::io::Error> for CliError {
    /// A full disk or a read-only filesystem is the environment (3), not bad input.
    fn from(e: std::io::Error) -> Self {
        if refuses_write(&e) {
            Self::missing_env(e)
        } else {
            Self::bad_input(e)
        }
    }
}

impl From<katlas_collect::ParseError> for CliError {
    /// A parser whose reader is missing here (an Nsight Compute report without `ncu_report`)
    /// is the environment (3); anything else is the input's fault.
    fn from(e: katlas_collect::ParseError) -> Self {
        if e.missing_env {
            Self::missing_env(e)
        } else {
            Self::bad_input(e)
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        Self::bad_input(format!("{e:#}"))
    }
}

pub type CmdResult = Result<ExitCode, CliError>;

pub struct Ctx {
    explicit_project: Option<PathBuf>,
    project: OnceCell<Result<Project, String>>,
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
        self.project
            .get_or_init(|| Project::discover(&self.cwd, self.explicit_project.as_deref()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(CliError::bad_input)
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
