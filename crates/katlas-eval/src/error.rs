//! The error of this crate's readers (tensor dumps, a run's metric output, baseline and
//! admissions files, noise bands, ledger ids) and of its one process runner. Each failure
//! keeps what decides its class (katlas_fs::class): an I/O error its OS error, a parser's
//! refusal its own class, so a full disk met while reading or storing is exit 3 and a
//! malformed file exit 2. The plan's and the protocol's errors carry it whole.

use katlas_fs::class::{Class, Classify};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file that could not be read or written; its OS error decides the class.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// A path katlas will not read through (a link inside `.katlas/`, `..` below it); the
    /// error names the path itself.
    #[error("{0}")]
    Guard(std::io::Error),
    /// What the user gave is wrong: a file's content, a flag, an id.
    #[error("{0}")]
    Input(String),
    /// A run's output its parser refused, or a tool the parser needs that is not here.
    #[error(transparent)]
    Parse(#[from] katlas_collect::ParseError),
    /// No process could be run at all: temporary files, pipes or the process table failed.
    #[error("cannot run `{prog}`: {source}")]
    Run { prog: String, source: std::io::Error },
    /// The program did not start (not found, not executable, no such working directory).
    #[error("cannot start `{prog}`: {why}")]
    Start { prog: String, why: String },
}

impl Classify for EvalError {
    fn class(&self) -> Class {
        match self {
            EvalError::Io { source, .. } | EvalError::Guard(source) => source.class(),
            EvalError::Input(_) => Class::Input,
            EvalError::Parse(e) => e.class(),
            // The machine could not run a process, or lacks the program: the environment.
            EvalError::Run { .. } | EvalError::Start { .. } => Class::Environment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_class_of_what_it_met() {
        let io = |errno| EvalError::Io { path: "noise.json".into(), source: std::io::Error::from_raw_os_error(errno) };
        assert_eq!(io(libc::ENOSPC).class(), Class::Environment, "a full disk is the machine's");
        assert_eq!(io(libc::ENOENT).class(), Class::Input);
        assert_eq!(io(libc::ENOSPC).to_string(), format!("noise.json: {}", std::io::Error::from_raw_os_error(libc::ENOSPC)));
        assert_eq!(EvalError::Input("x".into()).class(), Class::Input);
        assert_eq!(EvalError::Parse(katlas_collect::ParseError::missing_env("t", "no reader")).class(), Class::Environment);
        assert_eq!(EvalError::Parse(katlas_collect::ParseError::new("t", Some(1), "bad")).class(), Class::Input);
        assert_eq!(EvalError::Start { prog: "sh".into(), why: "not found".into() }.class(), Class::Environment);
    }
}
