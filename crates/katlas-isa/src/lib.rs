//! katlas-isa: native readers for GPU code objects.
//!
//! Reads AMD HSA code objects (v4-v6) and NVIDIA cubins directly, and opens the containers
//! they travel in: clang offload bundles, compressed bundles (CCOB v2/v3), host ELF files
//! with `.hip_fatbin` / `.nv_fatbin`, and fatbin containers (raw, LZ4, zstd entries).
//! Per kernel it reports resources (registers, spills, LDS/shared, scratch, wave size ...),
//! decodes AMD kernel descriptors as a cross-check, and, when a disassembler is installed,
//! the instruction mix. Output is the `katlas.isa.v1` manifest ([`manifest::IsaManifest`]).
//!
//! Parsers never panic on bad input and never allocate from unchecked length fields: every
//! length is checked against the bytes that remain before use.

//! The public surface is the scan ([`scan`], [`scan_bytes`], [`ScanOptions`]), the manifest it
//! returns ([`manifest`], the `katlas.isa.v1` contract, and its writers [`write_compact`] /
//! [`write_pretty`]), the manifest diff ([`diff`], `katlas.isa.diff.v1`) and the hipfire export
//! ([`hipfire`]). The readers themselves are private; `oracle` opens the ones the tests and fuzz
//! targets check against vendor tools (feature `oracle`).

mod amd;
mod blob;
mod bundle;
mod category;
mod decompress;
pub mod diff;
mod elf;
mod error;
pub mod hipfire;
pub mod manifest;
mod manifest_write;
mod md5_lanes;
mod mix;
mod msgpack;
mod nv;
mod occupancy;
#[cfg(feature = "oracle")]
#[doc(hidden)]
pub mod oracle;
mod scan;
mod triton;

pub use error::IsaError;
pub use manifest::{CodeObject, IsaManifest, Kernel, SCHEMA};
pub use manifest_write::{write_compact, write_pretty};
pub use mix::{DisasmMode, Disassemblers, Tool};
pub use scan::{scan, ScanFailure, ScanOptions};

/// Scans an in-memory buffer (a file's bytes) without disassembly: the entry point for
/// fuzzing and mutation tests.
pub fn scan_bytes(name: &str, data: Vec<u8>) -> (Vec<CodeObject>, Vec<manifest::ScanError>) {
    let ctx = scan::Ctx::new(ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("no ptxas log: cannot fail");
    let (_, found) = scan::scan_blob(&ctx, name, blob::Blob::from_vec(data));
    (found.objects, found.errors)
}
