//! The integration tests of katlas-corpus, one binary: each file beside this one is a module
//! (`cargo test -p katlas-corpus --test it MODULE::` runs one file's tests).

mod concurrency;
mod hostile_input;
mod read_errors;
