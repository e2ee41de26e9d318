//! The part of a `katlas.isa.v1` manifest the fit view reads.
//!
//! Read through its JSON contract (docs/isa.md) rather than the katlas-isa crate's
//! types so the advisor takes manifests written by any katlas version that keeps the
//! field names: unknown fields are ignored, the ones read here are never renamed.

use crate::error::AdviseError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

pub const ISA_SCHEMA: &str = "katlas.isa.v1";

#[derive(Debug, Clone, Deserialize, Default)]
pub struct IsaManifest {
    pub schema: String,
    #[serde(default)]
    pub objects: Vec<CodeObject>,
    /// Where the manifest was read from (not part of the file).
    #[serde(skip)]
    pub path: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct CodeObject {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub chain_text: String,
    #[serde(default)]
    pub md5: String,
    /// `None` in a manifest that leaves it out (the contract requires it; hand-written ones).
    #[serde(default)]
    pub vendor: Option<katlas_arch::Vendor>,
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub kernels: Vec<Kernel>,
    #[serde(default)]
    pub mix_status: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Kernel {
    pub name: String,
    #[serde(default)]
    pub symbol: String,
    #[serde(default)]
    pub demangled: Option<String>,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default)]
    pub mix: Option<InstructionMix>,
    #[serde(default)]
    pub occupancy: Option<serde_json::Value>,
    #[serde(default)]
    pub occupancy_note: Option<String>,
    /// NVIDIA shared-memory facts (`nvidia.shared_static_bytes`, `nvidia.shared_reserved_bytes`).
    #[serde(default)]
    pub nvidia: Option<NvidiaFacts>,
    /// Triton launch facts from the cache's `<name>.json` (block, dynamic shared memory).
    #[serde(default)]
    pub triton: Option<TritonFacts>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct NvidiaFacts {
    #[serde(default)]
    pub shared_static_bytes: u64,
    #[serde(default)]
    pub shared_reserved_bytes: u64,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct TritonFacts {
    #[serde(default)]
    pub block_size: Option<u32>,
    #[serde(default)]
    pub warp_size: Option<u32>,
    #[serde(default)]
    pub shared_dynamic_bytes: u64,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Resources {
    pub vgpr: Option<u32>,
    pub sgpr: Option<u32>,
    pub agpr: Option<u32>,
    pub vgpr_spill: Option<u32>,
    pub sgpr_spill: Option<u32>,
    pub lds_bytes: Option<u64>,
    pub scratch_bytes: Option<u64>,
    pub wave_size: Option<u32>,
    pub max_workgroup_size: Option<u32>,
    pub reqd_workgroup_size: Option<[u32; 3]>,
    pub spill_store_bytes: Option<u64>,
    pub spill_load_bytes: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct InstructionMix {
    #[serde(default)]
    pub total: u64,
    #[serde(default)]
    pub categories: BTreeMap<String, u64>,
    #[serde(default)]
    pub opcodes: BTreeMap<String, u64>,
}

impl Kernel {
    /// The kernel's resources as katlas-arch's one mapping reads them (occupancy inputs);
    /// `launch_block` (threads per block of the profiled launch) wins over the object's bounds.
    pub fn occupancy_resources(&self, vendor: katlas_arch::Vendor, launch_block: Option<u32>) -> katlas_arch::KernelResources {
        let r = &self.resources;
        let t = self.triton.as_ref();
        let nv = self.nvidia.as_ref();
        katlas_arch::KernelResources::from_object(&katlas_arch::ObjectResources {
            vendor,
            registers: r.vgpr,
            agprs: r.agpr,
            sgprs: r.sgpr,
            static_shared_bytes: nv.map(|n| n.shared_static_bytes).or(r.lds_bytes).unwrap_or(0),
            reserved_in_static: nv.map(|n| n.shared_reserved_bytes).unwrap_or(0),
            dynamic_shared_bytes: t.map(|t| t.shared_dynamic_bytes).unwrap_or(0),
            scratch_bytes_per_lane: if vendor == katlas_arch::Vendor::Amd { r.scratch_bytes.unwrap_or(0) } else { 0 },
            wave_size: t.and_then(|t| t.warp_size).or(r.wave_size),
            workgroup_size: launch_block
                .or(t.and_then(|t| t.block_size))
                .or(r.reqd_workgroup_size.map(|w| w[0] * w[1].max(1) * w[2].max(1)))
                .or(r.max_workgroup_size),
        })
    }

    /// Every spelling the kernel answers to.
    pub fn names(&self) -> Vec<&str> {
        let mut v = vec![self.name.as_str()];
        if !self.symbol.is_empty() {
            v.push(self.symbol.as_str());
        }
        if let Some(d) = &self.demangled {
            v.push(d.as_str());
        }
        v
    }

    /// Registers spilled (VGPR + SGPR), or spill bytes where only those are known (NVIDIA).
    pub fn spills(&self) -> Option<f64> {
        let r = &self.resources;
        match (r.vgpr_spill, r.sgpr_spill) {
            (None, None) => match (r.spill_store_bytes, r.spill_load_bytes) {
                (None, None) => None,
                (a, b) => Some((a.unwrap_or(0) + b.unwrap_or(0)) as f64),
            },
            (a, b) => Some((a.unwrap_or(0) + b.unwrap_or(0)) as f64),
        }
    }
}

impl IsaManifest {
    pub fn read(path: &Path) -> Result<IsaManifest, AdviseError> {
        // A BOM dropped, bad UTF-8 named by line, a link loop said as one.
        let text = katlas_corpus::input::read_text(path).map_err(|m| {
            let shown = path.display().to_string();
            let rest = m.strip_prefix(&shown).unwrap_or(&m);
            let message = match rest.strip_prefix(": ") {
                Some(r) => r.to_string(),
                None => format!("line {}", rest.trim_start_matches(':')),
            };
            AdviseError::Input { path: shown, message }
        })?;
        let shown = path.display().to_string();
        let mut de = serde_json::Deserializer::from_str(&text);
        let mut value: serde_json::Value =
            serde::Deserialize::deserialize(&mut de).map_err(|e| AdviseError::input(&shown, format!("line {} column {}: {e}", e.line(), e.column())))?;
        // hipfire's own manifest (scripts/kernel_atlas.py), converted to the fields read here.
        use katlas_model::hipfire::isa::{is_isa_v0, to_katlas_isa, HIPFIRE_ISA_V0};
        if is_isa_v0(&value) {
            value = to_katlas_isa(&value).map_err(|e| AdviseError::input(&shown, e))?;
        }
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(ISA_SCHEMA) => {}
            Some(other) => return Err(AdviseError::input(&shown, format!("field `schema`: expected `{ISA_SCHEMA}` or `{HIPFIRE_ISA_V0}`, found `{other}`"))),
            None => return Err(AdviseError::input(&shown, format!("field `schema`: missing (expected `{ISA_SCHEMA}` or `{HIPFIRE_ISA_V0}`)"))),
        }
        let mut m: IsaManifest = typed(value, &shown)?;
        m.path = shown;
        Ok(m)
    }

    /// All kernels with their object, optionally only objects of one arch atom.
    pub fn kernels(&self) -> impl Iterator<Item = (&CodeObject, &Kernel)> {
        self.objects.iter().flat_map(|o| o.kernels.iter().map(move |k| (o, k)))
    }

    pub fn arches(&self) -> Vec<String> {
        let mut v: Vec<String> = self.objects.iter().map(|o| o.arch.clone()).collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Typed conversion naming the first bad field by its path (`objects[0].kernels[0].name`).
fn typed(v: serde_json::Value, shown: &str) -> Result<IsaManifest, AdviseError> {
    serde_path_to_error::deserialize(v).map_err(|e| AdviseError::input(shown, format!("field `{}`: {}", e.path(), e.inner())))
}
