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

pub mod amd;
pub mod blob;
pub mod bundle;
pub mod category;
pub mod decompress;
pub mod demangle;
pub mod diff;
pub mod elf;
pub mod error;
pub mod hipfire;
pub mod manifest;
pub mod manifest_write;
pub mod md5_lanes;
pub mod mix;
pub mod msgpack;
pub mod nv;
pub mod occupancy;
pub mod scan;
pub mod triton;

pub use error::IsaError;
pub use manifest::{CodeObject, IsaManifest, Kernel, SCHEMA};
pub use mix::DisasmMode;
pub use scan::{scan, ScanFailure, ScanOptions};

/// Scans an in-memory buffer (a file's bytes) without disassembly: the entry point for
/// fuzzing and mutation tests.
pub fn scan_bytes(name: &str, data: Vec<u8>) -> (Vec<CodeObject>, Vec<manifest::ScanError>) {
    let ctx = scan::Ctx::new(ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("no ptxas log: cannot fail");
    let (_, found) = scan::scan_blob(&ctx, name, blob::Blob::from_vec(data));
    (found.objects, found.errors)
}

/// Scans one file and also returns every code object's bytes (keyed by chain text), for
/// checking objects against external tools. No disassembly.
/// Objects, errors, and each object's bytes keyed by its chain text.
pub type ScanWithBytes = (Vec<CodeObject>, Vec<manifest::ScanError>, std::collections::HashMap<String, blob::Blob>);

pub fn scan_file_with_bytes(path: &std::path::Path) -> std::io::Result<ScanWithBytes> {
    let mut ctx = scan::Ctx::new(ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("no ptxas log: cannot fail");
    ctx.keep_bytes = Some(std::sync::Mutex::new(Default::default()));
    let file = std::fs::File::open(path)?;
    let blob = blob::Blob::map_file(&file)?;
    let (_, found) = scan::scan_blob(&ctx, &path.display().to_string(), blob);
    let bytes = ctx.keep_bytes.take().and_then(|m| m.into_inner().ok()).unwrap_or_default();
    Ok((found.objects, found.errors, bytes))
}
