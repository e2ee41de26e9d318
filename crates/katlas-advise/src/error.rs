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
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl AdviseError {
    pub fn input(path: impl Into<String>, message: impl Into<String>) -> Self {
        AdviseError::Input { path: path.into(), message: message.into() }
    }
    pub fn io(path: &std::path::Path, e: std::io::Error) -> Self {
        AdviseError::Io { path: path.display().to_string(), message: e.to_string() }
    }
}
