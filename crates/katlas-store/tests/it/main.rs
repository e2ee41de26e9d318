//! The integration tests of katlas-store, one binary: each file beside this one is a module
//! (`cargo test -p katlas-store --test it MODULE::` runs one file's tests).

mod export;
mod index;
mod trend;
