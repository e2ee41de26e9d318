//! The integration tests of katlas-lab, one binary: each file beside this one is a module
//! (`cargo test -p katlas-lab --test it MODULE::` runs one file's tests).

mod cli;
mod formats;
