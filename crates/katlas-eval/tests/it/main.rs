//! The integration tests of katlas-eval, one binary: each file beside this one is a module
//! (`cargo test -p katlas-eval --test it MODULE::` runs one file's tests).

mod support {
    pub mod evals;
    pub mod real;
}
mod hostile_eval;
mod protocol;
mod real_proof;
mod statistics;
