//! The integration tests of katlas-isa, one binary: each file beside this one is a module
//! (`cargo test -p katlas-isa --test it MODULE::` runs one file's tests).

mod amd_mix_hygiene;
mod amd_mix_vs_llvm_objdump;
mod amd_vs_llvm_readobj;
mod common;
mod fuzz_regressions;
mod hipfire_categories;
mod hostile_fallback;
mod manifest_golden;
mod manifest_serde;
mod md5_lanes;
mod metadata_reader;
mod msgpack_reader;
mod mutation_driver;
mod mutations;
mod nvidia_vs_cuobjdump;
mod own_fixtures;
mod triton_cache;
mod triton_metadata;
mod support {
    pub mod mix_tally;
}
