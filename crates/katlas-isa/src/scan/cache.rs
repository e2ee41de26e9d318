//! Per-object results kept across runs (on disk, keyed by md5) and within one (the mix memo).

use super::Ctx;
use crate::manifest::*;
use crate::mix::{self, DisasmMode};
use std::path::PathBuf;
use std::sync::Arc;

/// What disassembling an object added to it, kept for its duplicates in the same scan: the
/// mixes alone, not a second copy of every kernel record (which doubled the memory of a
/// `--mix` scan of rocSPARSE).
pub(super) struct MixMemo {
    status: Option<MixStatus>,
    warnings: Vec<String>,
    mixes: Vec<Option<InstructionMix>>,
}

impl MixMemo {
    pub(super) fn of(o: &CodeObject) -> MixMemo {
        MixMemo { status: o.mix_status.clone(), warnings: o.warnings.clone(), mixes: o.kernels.iter().map(|k| k.mix.clone()).collect() }
    }

    /// Equal bytes parse to the same kernels in the same order.
    pub(super) fn apply(&self, o: &mut CodeObject) {
        o.mix_status = self.status.clone();
        o.warnings = self.warnings.clone();
        for (k, m) in o.kernels.iter_mut().zip(&self.mixes) {
            k.mix = m.clone();
        }
    }
}

const CACHE_VERSION: &str = "isa-v1";

/// Only disassembled objects are cached: reading a metadata-only entry back costs about what
/// parsing the object again does (rocSPARSE: 777 JSON files written for nothing).
fn cache_path(ctx: &Ctx, md5: &str, mix: bool) -> Option<PathBuf> {
    if !mix {
        return None;
    }
    let dir = ctx.opts.cache_dir.as_ref()?;
    Some(dir.join(CACHE_VERSION).join(format!("{md5}{}.json", if mix { "-mix" } else { "" })))
}

pub(super) fn disk_get(ctx: &Ctx, md5: &str, mix: bool) -> Option<Arc<CodeObject>> {
    let p = cache_path(ctx, md5, mix)?;
    let text = std::fs::read(&p).ok()?;
    let o: CodeObject = serde_json::from_slice(&text).ok()?;
    // a cached "tool absent" result is not reused once a tool is there
    // --disasm objdump (External) wants the external tool's counts, not a cached native result
    let reusable = match &o.mix_status {
        Some(MixStatus::Disassembled(tool)) => !(ctx.opts.disasm == DisasmMode::External && tool == mix::NATIVE_AMD),
        _ => false,
    };
    if mix && !reusable {
        return None;
    }
    Some(Arc::new(o))
}

pub(super) fn disk_put(ctx: &Ctx, o: &CodeObject, mix: bool) {
    let Some(p) = cache_path(ctx, &o.md5, mix) else {
        return;
    };
    if let Ok(bytes) = serde_json::to_vec(o) {
        // Atomic, so concurrent scans never read half a file.
        let _ = katlas_fs::write_atomic(&p, &bytes);
    }
}
