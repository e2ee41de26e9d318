//! The `katlas.isa.v1` manifest: what `katlas isa scan` writes and the fit view reads.
//! Field names are a contract (documented in docs/isa.md); add fields, never rename.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "katlas.isa.v1";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct IsaManifest {
    /// Always `katlas.isa.v1`.
    pub schema: String,
    /// UTC time of the scan, RFC 3339.
    pub created_at: String,
    pub tool: String,
    pub tool_version: String,
    /// `--arch` filter when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch_filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_filter: Option<String>,
    pub inputs: Vec<InputFile>,
    pub objects: Vec<CodeObject>,
    /// Problems that did not stop the scan: unreadable files, corrupt containers, failed tools.
    pub errors: Vec<ScanError>,
    /// Disassemblers looked for and what became of them.
    pub disassemblers: Vec<ToolStatus>,
    pub summary: Summary,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Summary {
    pub files: u64,
    pub bytes: u64,
    pub objects: u64,
    pub kernels: u64,
    pub errors: u64,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct InputFile {
    pub path: String,
    pub size: u64,
    /// What the content was recognised as: `amdgpu-elf`, `cubin`, `offload-bundle`, `ccob`,
    /// `fatbin`, `host-elf`, `ptx` or `unrecognised`.
    pub kind: String,
    pub objects: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ScanError {
    pub path: String,
    /// Container chain down to where the error happened.
    pub chain: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ToolStatus {
    /// `amd` or `nvidia`.
    #[schemars(with = "String")]
    pub vendor: Vendor,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `used`, `found`, `absent`, `disabled`.
    pub status: String,
}

/// The one vendor type, katlas-arch's (its schema is the `Vendor` this manifest's always was).
pub use katlas_arch::Vendor;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct CodeObject {
    /// Top-level file the object came from.
    pub path: String,
    /// Container chain, outermost first, e.g. `["libx.so", ".hip_fatbin", "bundle[hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-]", "elf"]`.
    pub chain: Vec<String>,
    /// `chain` joined with ` › `.
    pub chain_text: String,
    /// md5 of the object's (decompressed) bytes.
    pub md5: String,
    pub size: u64,
    pub vendor: Vendor,
    /// `amdgpu-elf`, `cubin` or `ptx`.
    pub format: String,
    /// Full target: `amdgcn-amd-amdhsa--gfx90a:xnack-` or `sm_90a`.
    pub target: String,
    /// Architecture atom without features: `gfx90a`, `sm_90a`.
    pub arch: String,
    /// Target features such as `xnack-`, `sramecc+`.
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amd: Option<AmdObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvObject>,
    pub kernels: Vec<Kernel>,
    /// For PTX: `.entry` names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ptx_entries: Vec<String>,
    /// How the instruction mix was obtained: `disassembled:<tool>`, `disabled`, `absent:<tool>`, `failed:<why>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub mix_status: Option<MixStatus>,
    /// Problems with this object that still left a record (e.g. one bad note among good ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct AmdObject {
    /// 4, 5 or 6 (from EI_ABIVERSION).
    pub code_object_version: u32,
    pub e_flags: u32,
    /// `amdhsa.version` of the metadata.
    #[serde(default)]
    pub metadata_version: Vec<u64>,
    /// Number of NT_AMDGPU_METADATA notes read.
    pub metadata_notes: u32,
    /// True for generic targets such as `gfx11-generic`.
    pub generic_target: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NvObject {
    /// EI_ABIVERSION: 7 (CUDA 12 layout) or 8 (CUDA 13 layout).
    pub abi_version: u8,
    pub e_flags: u32,
    /// SM number from e_flags, e.g. 90.
    pub sm: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_sm: Option<u32>,
    /// `sm_90a`-style architecture-specific target (from `.nv.compat`, the ptxas `-arch` option
    /// or the fatbin entry's flags): runs on that exact compute capability only.
    pub accelerator: bool,
    /// `sm_100f`-style family-specific target (CUDA 12.9+; from the ptxas `-arch` option or the
    /// fatbin entry's flags): runs on the devices of the family (see `katlas arch`).
    #[serde(default)]
    pub family_specific: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_options: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_api_version: Option<u32>,
    /// Fatbin entry compression (`raw`, `lz4`, `zstd`) when the cubin came from a fatbin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fatbin_compression: Option<String>,
}

/// Resource numbers common to both vendors; vendor blocks hold the rest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Resources {
    /// AMD: `.vgpr_count`; NVIDIA: registers per thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpr: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sgpr: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agpr: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpr_spill: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sgpr_spill: Option<u32>,
    /// Static LDS / shared memory per workgroup in bytes (NVIDIA: including the sm_90+ reserve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lds_bytes: Option<u64>,
    /// Scratch / local memory per work-item in bytes (AMD private segment; NVIDIA stack frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernarg_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_workgroup_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reqd_workgroup_size: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_stack: Option<bool>,
    /// NVIDIA: spill bytes from a ptxas `-v` log (`--ptxas-log`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_store_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_load_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barriers: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub symbol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    pub resources: Resources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amd: Option<AmdKernel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvKernel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<InstructionMix>,
    /// Shared between the kernels of an object whose resources are the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub occupancy: Option<Shared<katlas_arch::Occupancy>>,
    /// Why `occupancy` is missing, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupancy_note: Option<String>,
    /// Launch facts from Triton's `<name>.json` beside the code object (Triton and inductor
    /// caches); occupancy uses its block size and dynamic shared memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton: Option<TritonLaunch>,
}

/// A Triton kernel's launch configuration, as its cache's metadata JSON gives it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TritonLaunch {
    /// The `<name>.json` read.
    pub metadata_path: String,
    /// The `@triton.jit` function's name (inductor: `triton_poi_…`, `triton_red_…`).
    pub name: String,
    pub num_warps: u32,
    /// Lanes per warp (NVIDIA 32) or wave (AMD 64 or 32).
    pub warp_size: u32,
    /// Threads per block (workgroup): num_warps × warp_size.
    pub block_size: u32,
    /// Dynamic shared memory (LDS) per block the launcher requests, bytes (`shared`).
    pub shared_dynamic_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_stages: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ctas: Option<u32>,
    /// `cuda` or `hip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Target architecture (`sm_90`, `gfx942`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Source file and line of the kernel (`<name>.source`'s first location).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct AmdKernel {
    /// Every field of the kernel's metadata map except `.args` (see `args`), MessagePack converted
    /// to JSON, keys as written (`.vgpr_count`).
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub metadata: Metadata,
    pub args: Vec<KernelArg>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<KernelDescriptor>,
    /// Disagreements between the descriptor and the metadata (empty when they agree).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub descriptor_mismatches: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct KernelArg {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_name: Option<String>,
    pub value_kind: String,
    pub offset: u64,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_space: Option<String>,
    /// `.access` or, when absent, `.actual_access`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// Every other field of the argument's metadata map, keys as written (`.value_type`, `.is_const` ...).
    #[serde(default, skip_serializing_if = "FieldMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub extra: FieldMap,
}

/// Metadata keys LLVM writes for kernels: these are shared, not allocated per kernel.
pub const KNOWN_KEYS: &[&str] = &[
    ".agpr_count",
    ".device_enqueue_symbol",
    ".group_segment_fixed_size",
    ".kernarg_segment_align",
    ".kernarg_segment_size",
    ".kind",
    ".language",
    ".language_version",
    ".max_flat_workgroup_size",
    ".name",
    ".private_segment_fixed_size",
    ".reqd_workgroup_size",
    ".sgpr_count",
    ".sgpr_spill_count",
    ".symbol",
    ".uniform_work_group_size",
    ".uses_dynamic_stack",
    ".vec_type_hint",
    ".vgpr_count",
    ".vgpr_spill_count",
    ".wavefront_size",
    ".workgroup_processor_mode",
    ".workgroup_size_hint",
];

/// A metadata map: fields in the order written, a repeated key keeping its first place and its
/// last value (as in the JSON object it serialises to). A small vector with shared key names
/// instead of a hashed map with an allocated name per field: 88k kernels × ~16 fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata(Vec<(std::borrow::Cow<'static, str>, serde_json::Value)>);

impl Metadata {
    pub fn new() -> Metadata {
        Metadata(Vec::new())
    }

    pub fn with_capacity(n: usize) -> Metadata {
        Metadata(Vec::with_capacity(n))
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == key)
    }

    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.position(key).map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Inserts, or replaces the value of an existing key in place. Linear in the number of
    /// fields: build large maps through `serde_json::Map` and `From` instead.
    pub fn insert(&mut self, key: &str, value: serde_json::Value) {
        match self.position(key) {
            Some(i) => self.0[i].1 = value,
            None => self.push_new(key, value),
        }
    }

    fn push_new(&mut self, key: &str, value: serde_json::Value) {
        let k = match KNOWN_KEYS.binary_search(&key) {
            Ok(i) => std::borrow::Cow::Borrowed(KNOWN_KEYS[i]),
            Err(_) => std::borrow::Cow::Owned(key.to_string()),
        };
        self.0.push((k, value));
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Metadata {
    fn from(m: serde_json::Map<String, serde_json::Value>) -> Metadata {
        // keys of a map are unique already
        let mut out = Metadata::with_capacity(m.len());
        for (k, v) in m {
            out.push_new(&k, v);
        }
        out
    }
}

impl Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k.as_ref(), v)))
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Metadata, D::Error> {
        serde_json::Map::<String, serde_json::Value>::deserialize(d).map(Metadata::from)
    }
}

/// A small map of JSON fields kept sorted by key: it serialises exactly as a
/// `BTreeMap<String, Value>` would, without the B-tree's fixed node (a kilobyte per argument
/// that carries one `.access` field, 88k kernels × 21 arguments in rocSPARSE).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldMap(Vec<(String, serde_json::Value)>);

impl FieldMap {
    pub fn new() -> FieldMap {
        FieldMap(Vec::new())
    }

    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok().map(|i| &self.0[i].1)
    }

    /// Inserts or replaces (the last value for a key wins, as in a map).
    pub fn insert(&mut self, key: String, value: serde_json::Value) {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Fields in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &serde_json::Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }
}

impl FromIterator<(String, serde_json::Value)> for FieldMap {
    fn from_iter<I: IntoIterator<Item = (String, serde_json::Value)>>(it: I) -> FieldMap {
        let mut m = FieldMap::new();
        for (k, v) in it {
            m.insert(k, v);
        }
        m
    }
}

impl Serialize for FieldMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de> Deserialize<'de> for FieldMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FieldMap, D::Error> {
        let m = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
        Ok(FieldMap(m.into_iter().collect()))
    }
}

/// A value shared between records (`Arc`), serialised as the value itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared<T>(pub std::sync::Arc<T>);

impl<T> Shared<T> {
    pub fn new(v: T) -> Shared<T> {
        Shared(std::sync::Arc::new(v))
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Shared<T>, D::Error> {
        T::deserialize(d).map(Shared::new)
    }
}

/// The 64-byte `amd_kernel_code_t` successor (`<name>.kd`), decoded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub compute_pgm_rsrc3: u32,
    pub kernel_code_properties: u16,
    pub granulated_workitem_vgpr_count: u32,
    pub granulated_wavefront_sgpr_count: u32,
    /// VGPRs implied by the granulated count: (g+1) x encoding granule.
    pub vgpr_alloc: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sgpr_alloc: Option<u32>,
    pub enable_private_segment: bool,
    pub wave32: bool,
    pub uses_dynamic_stack: bool,
    /// gfx90a/gfx942: first AGPR in the unified register file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accum_offset: Option<u32>,
}

/// [`NvKernel::regcount_source`] values.
pub const REGCOUNT_FROM_EIATTR: &str = "eiattr_regcount";
pub const REGCOUNT_FROM_SECTION: &str = "text_section_info";

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NvKernel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regcount: Option<u32>,
    /// Where `regcount` was read: `eiattr_regcount` (the `.nv.info` attribute) or
    /// `text_section_info` (bits 24..31 of the `.text.<fn>` section header's sh_info, in cubins
    /// without the attribute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regcount_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_stack_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stack_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reqntid: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reg_count: Option<u32>,
    /// EIATTR_PARAM_CBANK: offset and size of the parameters in constant bank 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_cbank_offset: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_cbank_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbank_param_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_barriers: Option<u32>,
    /// Size of `.nv.shared.<fn>` (what cuobjdump reports as SHARED).
    pub shared_static_bytes: u64,
    /// Part of that the sm_90+ toolchain reserves for itself (`EIATTR_RESERVED_SMEM_0_SIZE`
    /// or `.nv.shared.reserved.*`); user shared memory is the difference.
    pub shared_reserved_bytes: u64,
    /// Size of `.nv.constant0.<fn>`.
    pub constant0_bytes: u64,
    /// Size of `.nv.local.<fn>` when present.
    pub local_bytes: u64,
    /// Number of parameters (EIATTR_KPARAM_INFO entries).
    pub params: u32,
    /// Attributes we read but do not name, as `0xNN`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct InstructionMix {
    pub total: u64,
    /// Counts per category: matrix, dot, valu, salu, vmem_load, vmem_store, smem, lds, branch, wait, other.
    pub categories: BTreeMap<Name, u64>,
    /// Counts per opcode mnemonic.
    pub opcodes: BTreeMap<Name, u64>,
}

/// A category or mnemonic: borrowed from the static tables when it comes from them (the native
/// decoder, the category list), so that the mix of rocSPARSE's 88k kernels, a few million
/// counts, does not allocate a string per count.
pub type Name = std::borrow::Cow<'static, str>;

pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(IsaManifest)).unwrap_or(serde_json::Value::Null)
}

/// How an object's instruction mix was obtained. Written as one string, `kind:detail`, so the
/// manifest reads as before; a word this version does not know is kept as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MixStatus {
    /// `disassembled:<tool>`: the mix is there, counted by that tool.
    Disassembled(String),
    /// `disabled`: `--disasm never`.
    Disabled,
    /// `absent:<tool>`: no disassembler for the vendor was found.
    Absent(String),
    /// `failed:<why>`: the disassembler ran and failed, or the object was refused.
    Failed(String),
    /// Any other word (a manifest from another version).
    Other(String),
}

impl std::fmt::Display for MixStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MixStatus::Disassembled(t) => write!(f, "disassembled:{t}"),
            MixStatus::Disabled => f.write_str("disabled"),
            MixStatus::Absent(t) => write!(f, "absent:{t}"),
            MixStatus::Failed(why) => write!(f, "failed:{why}"),
            MixStatus::Other(s) => f.write_str(s),
        }
    }
}

impl From<&str> for MixStatus {
    fn from(s: &str) -> Self {
        match s.split_once(':') {
            _ if s == "disabled" => MixStatus::Disabled,
            Some(("disassembled", t)) => MixStatus::Disassembled(t.into()),
            Some(("absent", t)) => MixStatus::Absent(t.into()),
            Some(("failed", why)) => MixStatus::Failed(why.into()),
            _ => MixStatus::Other(s.into()),
        }
    }
}

impl Serialize for MixStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MixStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(MixStatus::from(String::deserialize(d)?.as_str()))
    }
}
