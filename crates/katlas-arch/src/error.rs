use serde::Serialize;

/// Errors of the architecture database and the occupancy math.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArchError {
    /// A data file is malformed or inconsistent; names the file, line and key.
    #[error("{file}:{line}: key `{key}`: {message}")]
    Data {
        /// Data file (builtin `data/arch/<name>.toml` or an override path).
        file: String,
        /// 1-based line (0 when the problem has no single line).
        line: usize,
        /// Key path (`atom[gfx1100].amd.max_waves_per_simd`, `units` ...).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// An override directory or file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// Path that failed.
        path: String,
        /// OS error text.
        message: String,
    },
    /// The atom name is not in the database.
    #[error("unknown architecture atom `{0}`")]
    UnknownAtom(String),
    /// Kernel resources cannot be judged on this atom (bad wave size, over a hard limit...).
    #[error("occupancy on {atom}: {message}")]
    Occupancy {
        /// Atom name.
        atom: String,
        /// What is wrong with the resources.
        message: String,
    },
}

/// The arch database and the atoms given to it are input; nothing here reaches a tool.
impl katlas_fs::class::Classify for ArchError {
    fn class(&self) -> katlas_fs::class::Class {
        katlas_fs::class::Class::Input
    }
}
