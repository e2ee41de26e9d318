//! The integration tests of katlas-build, one binary: each file beside this one is a module
//! (`cargo test -p katlas-build --test it MODULE::` runs one file's tests).

mod build_hipfire;
mod build_matrix;
mod common;
mod reach_hipfire;
mod reach_lint;
