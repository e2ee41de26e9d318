//! Whose fault a failure is, which is what katlas's exit code tells a script (docs/cli.md,
//! "Exit codes"): the input's (a file, flag, config or row to fix: 2) or the environment's (a
//! tool, GPU, reader or store that is not there, or a write the system refused: 3). Every
//! crate's error type says its class here; the CLI maps a class to a code in one place.

use std::io;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Bad input or usage: what the user gave must change.
    Input,
    /// Missing environment: what the machine lacks or refused must change.
    Environment,
}

/// The class of a failure.
pub trait Classify {
    fn class(&self) -> Class;
}

/// A file system that refuses a write (no space left, a quota, a read-only mount, a file over
/// the size limit) is the environment whichever write met it; any other I/O failure is the
/// path's, which the user gave.
impl Classify for io::Error {
    fn class(&self) -> Class {
        use io::ErrorKind::*;
        match self.kind() {
            StorageFull | QuotaExceeded | ReadOnlyFilesystem | FileTooLarge => Class::Environment,
            _ => Class::Input,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_write_is_the_environment_and_a_missing_file_the_input() {
        for errno in [libc::ENOSPC, libc::EDQUOT, libc::EROFS, libc::EFBIG] {
            assert_eq!(io::Error::from_raw_os_error(errno).class(), Class::Environment, "errno {errno}");
        }
        assert_eq!(io::Error::from_raw_os_error(libc::ENOENT).class(), Class::Input);
        assert_eq!(io::Error::from_raw_os_error(libc::EACCES).class(), Class::Input);
    }
}
