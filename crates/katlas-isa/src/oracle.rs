//! What the tests and fuzz targets reach below the public API: the readers they check against
//! vendor tools (llvm-readobj, llvm-objdump, cuobjdump) and against the implementations they
//! replaced, the native-decoder oracle, and a scan that keeps every object's bytes. Not API.

use crate::manifest::{CodeObject, ScanError};
use crate::mix::DisasmMode;
use crate::scan::{self, ScanOptions};

mod amd_decoder;

pub use crate::category::{amd_category, sass_category};
pub use crate::manifest::KNOWN_KEYS;
pub use crate::manifest_write::BATCH;
pub use crate::mix::{run_limited, ToolLimits};
pub use amd_decoder::{check_object, sample, ArchTotals, ObjectCheck};
pub use katlas_names::demangle_uncached;

pub mod amd {
    pub use crate::amd::{code_object_version, decode, descriptor, kernel_code_ranges, parse, split_target, target_from_flags, AmdParsed};
}

pub mod elf {
    pub use crate::elf::{Elf, ELFOSABI_AMDGPU_HSA, EM_AMDGPU};
}

pub mod msgpack {
    pub use crate::msgpack::{check, decode, key_string, map_get, to_json, Item, Reader, DEPTH_LIMIT_EXCEEDED};
}

pub mod bundle {
    pub use crate::blob::Blob;
    pub use crate::bundle::{decompress_ccob, parse_bundle, split_records, BUNDLE_MAGIC, CCOB_MAGIC};
}

/// The md5 of many messages at once (SIMD lanes), beside the one-message md5.
pub mod md5 {
    pub use crate::md5_lanes::{md5, md5_many_par, md5_many_with, Backend};
}

pub mod triton {
    pub use crate::triton::{parse, source_location};
}

pub mod nv {
    pub use crate::nv::{cubin, fatbin};
}

/// Objects, errors, and each object's bytes keyed by its chain text.
pub type ScanWithBytes = (Vec<CodeObject>, Vec<ScanError>, std::collections::HashMap<String, crate::blob::Blob>);

/// Scans one file and also returns every code object's bytes (keyed by chain text), for
/// checking objects against external tools. No disassembly.
pub fn scan_file_with_bytes(path: &std::path::Path) -> std::io::Result<ScanWithBytes> {
    let mut ctx = scan::Ctx::new(ScanOptions { disasm: DisasmMode::Never, ..Default::default() }).expect("no ptxas log: cannot fail");
    ctx.keep_bytes = Some(std::sync::Mutex::new(Default::default()));
    let file = std::fs::File::open(path)?;
    let blob = crate::blob::Blob::map_file(&file)?;
    let (_, found) = scan::scan_blob(&ctx, &path.display().to_string(), blob);
    let bytes = ctx.keep_bytes.take().and_then(|m| m.into_inner().ok()).unwrap_or_default();
    Ok((found.objects, found.errors, bytes))
}
