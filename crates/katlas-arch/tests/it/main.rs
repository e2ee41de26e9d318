//! The integration tests of katlas-arch, one binary: each file beside this one is a module
//! (`cargo test -p katlas-arch --test it MODULE::` runs one file's tests).

mod data;
mod llvm_oracle;
mod occupancy;
