//! The integration tests of katlas-identity, one binary: each file beside this one is a module
//! (`cargo test -p katlas-identity --test it MODULE::` runs one file's tests).

mod source_digest;
