//! Errors of the compile matrix, each with its class (katlas_fs::class): bad input or a
//! missing environment.

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
}

pub type Result<T> = std::result::Result<T, BuildError>;

impl katlas_fs::class::Classify for BuildError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            BuildError::BadInput(_) => katlas_fs::class::Class::Input,
            BuildError::MissingEnv(_) => katlas_fs::class::Class::Environment,
            BuildError::Io { source, .. } => katlas_fs::class::Classify::class(source),
        }
    }
}
