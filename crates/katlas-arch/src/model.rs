//! Public types of the architecture database: atoms (one ISA target such as
//! `gfx1100` or `sm_90`), products (one marketed board such as "NVIDIA H200")
//! and numbers that carry their provenance.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// GPU vendor of an atom, a product or a code object: AMD (HIP, gfx targets) or NVIDIA (CUDA,
// sm targets). katlas-isa's manifest carries it too (`vendor` in katlas.isa.v1, whose schema
// names the type `Vendor`); plain comments, not doc comments, since a doc comment would enter
// that schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Amd,
    Nvidia,
}

impl Vendor {
    /// Lower-case name as written in the data files.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Amd => "amd",
            Vendor::Nvidia => "nvidia",
        }
    }

    /// The vendor an arch name belongs to by its spelling (`gfx…` AMD, `sm_…` or `sm` and a
    /// digit NVIDIA), for names the table may not hold; `None` for any other name.
    pub fn of_arch(arch: &str) -> Option<Vendor> {
        if arch.starts_with("gfx") {
            Some(Vendor::Amd)
        } else if arch.starts_with("sm_") || arch.strip_prefix("sm").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) {
            Some(Vendor::Nvidia)
        } else {
            None
        }
    }
}

/// A value with the document it comes from. `measured` values come from our own
/// measurements and override datasheet values where both exist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sourced<T> {
    /// The number.
    pub value: T,
    /// Where the number comes from (datasheet name, doc section, measurement file).
    pub source: String,
    /// True when the number was measured by us, not read from a vendor document.
    #[serde(default)]
    pub measured: bool,
}

/// One ISA target (the unit a code object is compiled for): `gfx90a`, `sm_90a`, ...
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Atom {
    /// Canonical name: `gfx1100`, `sm_90`, `sm_90a`.
    pub name: String,
    /// Vendor.
    pub vendor: Vendor,
    /// Family tag used by chip/family file tags (`gfx9`, `gfx11`, `gfx115`, `sm_9x` ...).
    /// See docs/arch.md for the family decisions (RDNA 3.5 is not in `gfx11`).
    pub family: String,
    /// Further family tags this atom answers to, declared explicitly in the data
    /// (empty for the RDNA 3.5 APUs: `gfx11` does not reach them unless an override says so).
    pub also_families: Vec<String>,
    /// Micro-architecture class (`cdna3`, `rdna3_dgpu`, `rdna3p5`, `hopper` ...).
    pub class: String,
    /// Chip code names and other spellings (`Navi 31`, `GH100`).
    pub codenames: Vec<String>,
    /// For accelerator variants (`sm_90a`): the base atom (`sm_90`).
    pub variant_of: Option<String>,
    /// NVIDIA `a`/`f` targets: the atoms whose devices may run code built for this one
    /// (`sm_90a`: `sm_90` only; `sm_100f`: the family, `sm_100` and `sm_103`). Empty for plain
    /// targets (a cubin runs on its compute capability and later minors of the same major).
    #[serde(default)]
    pub runs_on: Vec<String>,
    /// Supported wave (warp) sizes.
    pub wave_sizes: Vec<u32>,
    /// Wave size compilers use by default (HIP: 32 on gfx10+, 64 on gfx9).
    pub default_wave_size: u32,
    /// Capability flags (`mfma`, `wmma`, `swmmac`, `dot`, `hmma`, `wgmma`, `tma` ...).
    pub caps: Vec<String>,
    /// Matrix unit -> data types it multiplies (`mfma` -> [`f16`, `bf16`, ...]).
    pub matrix: BTreeMap<String, Vec<String>>,
    /// Data types of packed dot-product instructions (AMD `v_dot*`).
    pub dot: Vec<String>,
    /// AMD resource limits (present iff vendor is AMD).
    pub amd: Option<AmdLimits>,
    /// NVIDIA resource limits (present iff vendor is NVIDIA).
    pub nvidia: Option<NvLimits>,
    /// Source of the atom's numbers.
    pub source: String,
    /// Per-key sources where a value comes from a different document than `source`
    /// (key is the field path, e.g. `amd.lds_bytes_per_cu`).
    pub sources: BTreeMap<String, String>,
    /// Free-text notes (deprecations, decisions).
    pub notes: Vec<String>,
}

impl Atom {
    /// True when the atom declares capability `cap`.
    pub fn has_cap(&self, cap: &str) -> bool {
        self.caps.iter().any(|c| c == cap)
    }

    /// Source of one value: the per-key source when given, else the atom source.
    pub fn source_of(&self, key: &str) -> &str {
        self.sources.get(key).map(String::as_str).unwrap_or(&self.source)
    }
}

/// Vector register file of one SIMD for one wave size, in LLVM's terms
/// (registers per lane; `total` / rounded use = waves per SIMD).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VgprFile {
    /// Registers per lane available to all waves of a SIMD (LLVM getTotalNumVGPRs).
    pub total: u32,
    /// Allocation granule (LLVM getVGPRAllocGranule).
    pub granule: u32,
    /// Most VGPRs one wave may address (arch VGPRs; AGPRs counted separately).
    pub max_per_wave: u32,
}

/// How AGPRs (accumulation registers of MFMA) are provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgprMode {
    /// No AGPRs.
    None,
    /// Separate AGPR file of the same size as the VGPR file (gfx908).
    Separate,
    /// One file shared by VGPRs and AGPRs; AGPRs start at an aligned offset (gfx90a+).
    Unified,
}

/// AMD per-atom resource limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AmdLimits {
    /// SIMDs per CU (gfx9: 4 SIMD16; RDNA: 2 SIMD32).
    pub simds_per_cu: u32,
    /// CUs per WGP (RDNA: 2; gfx9: 1).
    pub cus_per_wgp: u32,
    /// Whether HIP compiles in WGP mode by default (gfx10+: yes; `-mcumode` switches).
    pub wgp_mode_default: bool,
    /// Wave slots per SIMD (LLVM getMaxWavesPerEU).
    pub max_waves_per_simd: u32,
    /// VGPR file for wave32 (RDNA only).
    pub vgpr_wave32: Option<VgprFile>,
    /// VGPR file for wave64.
    pub vgpr_wave64: Option<VgprFile>,
    /// AGPR arrangement.
    pub agpr_mode: AgprMode,
    /// AGPRs one wave may address (0 without AGPRs).
    pub agprs_per_wave: u32,
    /// Alignment of the AGPR block after the arch VGPRs in a unified file.
    pub agpr_align: u32,
    /// SGPRs one wave may address (includes VCC/flat scratch/XNACK on gfx9).
    pub sgprs_per_wave: u32,
    /// SGPR file per SIMD (gfx9: 800); 0 where SGPRs do not limit occupancy.
    pub sgprs_per_simd: u32,
    /// SGPR allocation granule.
    pub sgpr_granule: u32,
    /// Occupancy steps by SGPR count: `[max_sgprs, waves]`, ascending; empty where SGPRs
    /// never limit (gfx10+). SGPR counts above the last step give `sgpr_waves_floor`.
    pub sgpr_waves: Vec<[u32; 2]>,
    /// Waves per SIMD when SGPRs exceed the last step.
    pub sgpr_waves_floor: u32,
    /// LDS bytes one CU offers its workgroups (CU mode on RDNA).
    pub lds_bytes_per_cu: u64,
    /// LDS bytes one WGP offers in WGP mode (RDNA); equal to per-CU on gfx9.
    pub lds_bytes_per_wgp: u64,
    /// Most LDS one workgroup may allocate.
    pub lds_max_per_workgroup: u64,
    /// LDS allocation granule in bytes.
    pub lds_granule: u64,
    /// Workgroups (with >1 wave) per CU, bounded by barrier resources.
    pub max_workgroups_per_cu: u32,
    /// Workgroups per WGP in WGP mode.
    pub max_workgroups_per_wgp: u32,
    /// Largest flat workgroup size.
    pub max_workgroup_size: u32,
}

impl AmdLimits {
    /// VGPR file for `wave_size`, if that wave size exists on this atom.
    pub fn vgpr(&self, wave_size: u32) -> Option<&VgprFile> {
        match wave_size {
            32 => self.vgpr_wave32.as_ref(),
            64 => self.vgpr_wave64.as_ref(),
            _ => None,
        }
    }
}

/// NVIDIA per-atom resource limits (CUDA C Programming Guide, technical specifications
/// per compute capability; CUDA occupancy calculator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLimits {
    /// Compute capability, e.g. `"9.0"`.
    pub compute_capability: String,
    /// Resident warps per SM.
    pub max_warps_per_sm: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// 32-bit registers per block.
    pub max_regs_per_block: u32,
    /// Registers per thread.
    pub max_regs_per_thread: u32,
    /// Register allocation unit per warp (256 registers).
    pub reg_alloc_unit: u32,
    /// SM sub-partitions (warp schedulers) the register file is split across.
    pub sub_partitions: u32,
    /// Largest shared-memory carveout per SM, bytes.
    pub smem_per_sm: u64,
    /// Shared memory one block may use with opt-in, bytes.
    pub smem_per_block_optin: u64,
    /// Shared memory one block may use without opt-in, bytes.
    pub smem_per_block_default: u64,
    /// Shared memory the runtime reserves per block (1 KiB on sm_80+).
    pub smem_reserved_per_block: u64,
    /// Shared memory allocation granule, bytes.
    pub smem_granule: u64,
    /// Supported carveouts in KiB.
    pub smem_carveouts_kib: Vec<u32>,
}

/// One marketed board: unit count, clocks, bandwidth, peak rates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Product {
    /// Marketing name ("NVIDIA H200", "Radeon RX 7900 XTX").
    pub name: String,
    /// Vendor.
    pub vendor: Vendor,
    /// Atom the product's chip compiles for.
    pub atom: String,
    /// Other spellings (nvidia-smi / rocminfo / ncu product strings).
    pub aliases: Vec<String>,
    /// Compute units (AMD CUs) or streaming multiprocessors (NVIDIA SMs).
    pub units: Sourced<u32>,
    /// Boost (peak engine) clock, MHz.
    pub boost_clock_mhz: Option<Sourced<f64>>,
    /// Memory size, GiB as marketed (GB on datasheets).
    pub memory_gb: Option<Sourced<f64>>,
    /// Memory technology ("HBM3e", "GDDR6").
    pub memory_type: Option<String>,
    /// Datasheet peak DRAM bandwidth, GB/s (10^9 bytes/s).
    pub peak_bw_gbps: Sourced<f64>,
    /// Our measured copy bandwidth ceiling, GB/s, when we have one.
    pub measured_bw_gbps: Option<Sourced<f64>>,
    /// Dense peak rates by data type: keys like `fp32`, `fp16_matrix`, `bf16_matrix`,
    /// `fp8_matrix`, `int8_matrix`; values in TFLOP/s (floating point) or TOP/s (integer),
    /// without structured sparsity.
    pub peak_rates: BTreeMap<String, Sourced<f64>>,
    /// Last-level cache (L2 / Infinity Cache), MiB.
    pub llc_mib: Option<Sourced<f64>>,
    /// L2 that holds a kernel's latest traffic when it ends, MiB: the writes among it are still
    /// dirty there (written back later), so not DRAM traffic a counter sees during the kernel.
    pub l2_resident_mib: Option<Sourced<f64>>,
    /// Free-text notes.
    pub notes: Vec<String>,
    /// Source of the product's numbers unless a value carries its own.
    pub source: String,
}

impl Product {
    /// Bandwidth ceiling to judge achieved bandwidth against: the measured value when
    /// present (labelled `"measured"`), else the datasheet peak (`"datasheet"`).
    pub fn best_bw_gbps(&self) -> (f64, &'static str) {
        match &self.measured_bw_gbps {
            Some(m) => (m.value, "measured"),
            None => (self.peak_bw_gbps.value, "datasheet"),
        }
    }

    /// What `units` counts: `"CU"` (AMD) or `"SM"` (NVIDIA).
    pub fn unit_kind(&self) -> &'static str {
        match self.vendor {
            Vendor::Amd => "CU",
            Vendor::Nvidia => "SM",
        }
    }

    /// Dense peak rate for `key` (see `peak_rates`), if known.
    pub fn peak_rate(&self, key: &str) -> Option<f64> {
        self.peak_rates.get(key).map(|s| s.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_of_an_arch_name() {
        assert_eq!(Vendor::of_arch("gfx1201"), Some(Vendor::Amd));
        assert_eq!(Vendor::of_arch("sm_90a"), Some(Vendor::Nvidia));
        assert_eq!(Vendor::of_arch("sm90"), Some(Vendor::Nvidia));
        assert_eq!(Vendor::of_arch("smoke"), None, "a word that starts with sm is no NVIDIA arch");
        assert_eq!(Vendor::of_arch("cpu"), None);
        // One spelling in the data files, the ISA manifest and the CLI.
        assert_eq!(serde_json::to_string(&Vendor::Nvidia).unwrap(), "\"nvidia\"");
        assert_eq!(Vendor::Amd.as_str(), "amd");
    }
}
