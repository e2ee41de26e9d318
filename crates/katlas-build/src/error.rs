//! Errors with the exit code they map to (2 bad input, 3 missing environment).

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Bad configuration or arguments: names the file, line and key where known.
    #[error("{0}")]
    BadInput(String),
    /// A compiler (or git) the work needs is not installed.
    #[error("{0}")]
    MissingEnv(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl BuildError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        BuildError::Io { path: path.display().to_string(), source }
    }
    /// Exit code of the README's contract: 2 bad input, 3 missing environment.
    pub fn exit_code(&self) -> u8 {
        match self {
            BuildError::MissingEnv(_) => 3,
            _ => 2,
        }
    }
}

pub type Result<T> = std::result::Result<T, BuildError>;
