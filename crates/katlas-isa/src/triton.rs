//! Triton's launch metadata. A Triton cache (`$TRITON_CACHE_DIR/<hash>/`, also where
//! torch.compile's inductor kernels land) keeps beside each `<name>.cubin` (NVIDIA) or
//! `<name>.hsaco` (AMD) a `<name>.json` with what the launcher passes to the driver: the block
//! is `num_warps` warps (waves) of `warp_size` lanes and `shared` bytes of dynamic shared
//! memory (LDS). The code object alone has neither (its static shared memory is the sm_90
//! reserve or 0), so occupancy without them is a guess.

use crate::manifest::TritonLaunch;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The fields katlas reads; Triton writes many more (kept out: they do not change a launch).
#[derive(Debug, Deserialize)]
struct Json {
    name: String,
    num_warps: u32,
    #[serde(default)]
    shared: u64,
    #[serde(default)]
    num_stages: Option<u32>,
    #[serde(default)]
    num_ctas: Option<u32>,
    #[serde(default)]
    warp_size: Option<u32>,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    triton_version: Option<String>,
    #[serde(default)]
    hash: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Target {
    backend: String,
    arch: serde_json::Value,
    #[serde(default)]
    warp_size: Option<u32>,
}

/// The metadata file of a code object in a Triton cache, if it has one: `<stem>.json` beside a
/// `.cubin` or `.hsaco`.
pub fn metadata_path(object: &Path) -> Option<PathBuf> {
    let ext = object.extension()?.to_str()?;
    if ext != "cubin" && ext != "hsaco" {
        return None;
    }
    let json = object.with_extension("json");
    json.is_file().then_some(json)
}

/// Reads `<stem>.json` (and the kernel's source location from `<stem>.source`, Triton's
/// TTIR with MLIR locations, when present). Errors name the file and the field.
pub fn read(json_path: &Path) -> Result<TritonLaunch, String> {
    let text = std::fs::read(json_path).map_err(|e| format!("{}: {e}", json_path.display()))?;
    parse(&text, json_path)
}

pub fn parse(text: &[u8], json_path: &Path) -> Result<TritonLaunch, String> {
    let j: Json = serde_json::from_slice(text).map_err(|e| format!("{}: not Triton launch metadata: {e}", json_path.display()))?;
    let (backend, arch, target_warp) = match &j.target {
        Some(t) => (Some(t.backend.clone()), Some(arch_name(&t.backend, &t.arch)), t.warp_size),
        None => (None, None, None),
    };
    // Triton ≥ 3.2 writes warp_size; the target's copy and the backend's default cover older caches
    let warp_size = j.warp_size.or(target_warp).unwrap_or(if backend.as_deref() == Some("hip") { 64 } else { 32 });
    if j.num_warps == 0 || warp_size == 0 {
        return Err(format!("{}: num_warps {} × warp_size {warp_size} is not a block", json_path.display(), j.num_warps));
    }
    let source = std::fs::read_to_string(json_path.with_extension("source")).ok().and_then(|s| source_location(&s));
    Ok(TritonLaunch {
        metadata_path: json_path.display().to_string(),
        name: j.name,
        num_warps: j.num_warps,
        warp_size,
        block_size: j.num_warps.saturating_mul(warp_size),
        shared_dynamic_bytes: j.shared,
        num_stages: j.num_stages,
        num_ctas: j.num_ctas,
        backend,
        arch,
        triton_version: j.triton_version,
        hash: j.hash,
        source,
    })
}

/// `cuda` + 90 -> `sm_90`; `hip` + "gfx942" -> `gfx942`.
fn arch_name(backend: &str, arch: &serde_json::Value) -> String {
    match (backend, arch) {
        ("cuda", serde_json::Value::Number(n)) => format!("sm_{n}"),
        (_, serde_json::Value::String(s)) => s.split(':').next().unwrap_or(s).to_string(),
        (_, v) => v.to_string(),
    }
}

/// The `@jit` function's file and line: the first `#loc = loc("<file>":<line>:<col>)` of the
/// `.source` dump.
pub fn source_location(ttir: &str) -> Option<String> {
    let line = ttir.lines().take(64).find(|l| l.starts_with("#loc = loc(\""))?;
    let rest = line.strip_prefix("#loc = loc(\"")?;
    let (file, tail) = rest.split_once('"')?;
    let line_no = tail.strip_prefix(':')?.split(':').next()?;
    Some(format!("{file}:{line_no}"))
}
