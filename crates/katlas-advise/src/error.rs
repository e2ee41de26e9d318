use thiserror::Error;

#[derive(Debug, Error)]
pub enum AdviseError {
    /// A rules file (embedded or override) that does not parse; names file, line and key.
    #[error("{file}:{line}: {message}")]
    Rules { file: String, line: usize, message: String },
    /// An input document (row, manifest, ledger) that cannot be used.
    #[error("{path}: {message}")]
    Input { path: String, message: String },
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl AdviseError {
    pub fn input(path: impl Into<String>, message: impl Into<String>) -> Self {
        AdviseError::Input { path: path.into(), message: message.into() }
    }
    pub fn io(path: &std::path::Path, e: std::io::Error) -> Self {
        AdviseError::Io { path: path.display().to_string(), source: e }
    }
}

impl katlas_fs::class::Classify for AdviseError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            AdviseError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            _ => katlas_fs::class::Class::Input,
        }
    }
}
