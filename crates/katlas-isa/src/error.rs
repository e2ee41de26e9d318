//! Errors of the code-object readers. Every variant names what was being read so a bad
//! object can be reported beside the good ones without aborting the scan.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IsaError {
    #[error("{what}: truncated (need {need} bytes at offset {offset}, have {have})")]
    Truncated { what: &'static str, offset: u64, need: u64, have: u64 },
    #[error("{what}: malformed: {detail}")]
    Malformed { what: &'static str, detail: String },
    #[error("{what}: unsupported: {detail}")]
    Unsupported { what: &'static str, detail: String },
    #[error("{what}: size limit exceeded: {detail}")]
    TooLarge { what: &'static str, detail: String },
    #[error("{0}")]
    Io(String),
}

impl IsaError {
    pub fn malformed(what: &'static str, detail: impl Into<String>) -> Self {
        IsaError::Malformed { what, detail: detail.into() }
    }
    pub fn unsupported(what: &'static str, detail: impl Into<String>) -> Self {
        IsaError::Unsupported { what, detail: detail.into() }
    }
}

pub type Result<T> = std::result::Result<T, IsaError>;

/// A code object that cannot be read is the input's fault; the scan goes on beside it.
impl katlas_fs::class::Classify for IsaError {
    fn class(&self) -> katlas_fs::class::Class {
        katlas_fs::class::Class::Input
    }
}
