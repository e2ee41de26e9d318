//! The integration tests of katlas-isa, one binary: each file beside this one is a module
//! (`cargo test -p katlas-isa --test it MODULE::` runs one file's tests).

mod amd_mix_hygiene;
mod amd_mix_vs_llvm_objdump;
mod amd_vs_llvm_readobj;
mod common;
mod fuzz_regressions;
mod hostile_fallback;
mod manifest_golden;
mod metadata_reader;
mod mutation_driver;
mod mutations;
mod nvidia_vs_cuobjdump;
mod own_fixtures;
mod support {
    pub mod mix_tally;
}
mod triton_cache;
