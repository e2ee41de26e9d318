//! The fit view's types: what `katlas fit --format json` writes (`katlas.fit.v1`) and what
//! suggest, task, render and the report read.

use crate::expr::{Facts, Val};
use crate::names::MatchLevel;
use crate::rules::{FindingKind, QuantIntent};
use katlas_arch::Limiter;
use katlas_model::OpClass;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FitView {
    /// Always `katlas.fit.v1`.
    pub schema: String,
    pub header: Header,
    pub evidence: Evidence,
    pub scope: Scope,
    /// The phase as a whole: its timeline signals and the findings of `scope = "phase"` rules.
    #[serde(default)]
    pub phase: PhaseFit,
    pub kernels: Vec<KernelFit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant: Option<QuantIntent>,
    /// Row metrics (tok/s, ms …) as recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runtime: BTreeMap<String, f64>,
    /// What bounds the phase, hottest kernel first; the first entry is the headline.
    pub likely_limit: Vec<Finding>,
    pub left_on_table: Vec<Finding>,
    /// Kernels not worth tuning (Amdahl) and other stop signs.
    pub stops: Vec<Finding>,
    pub caveats: Vec<Finding>,
    /// Rules files in force.
    pub rules_files: Vec<String>,
    /// When no product was chosen and the atom's boards have different ceilings: the reading
    /// against each candidate board (`--product` picks one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub product_readings: Vec<ProductReading>,
}

/// The fit read against one candidate product of an ambiguous atom.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ProductReading {
    pub product: String,
    pub bw_ceiling_gbps: Option<f64>,
    /// What bounds the phase on this board (the view's `likely_limit` with this product).
    pub likely_limit: Vec<Finding>,
    /// Hot kernels' bandwidth as % of this board's ceiling, by short name (hottest first).
    pub bw_pct: Vec<(String, f64)>,
}

/// The phase read as a whole (a trace's timeline), before any one kernel.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct PhaseFit {
    /// Timeline signals (`gpu_busy_pct`, `gap_median_us` …) and `framework`.
    #[serde(default)]
    pub signals: BTreeMap<String, Val>,
    /// Findings of the phase rules; limit findings also lead `likely_limit`.
    #[serde(default)]
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Header {
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub arch_class: Option<String>,
    #[serde(default)]
    pub arch_source: Option<String>,
    #[serde(default)]
    pub product: Option<String>,
    /// How the product was chosen (`--product`, `row device`, `only product of …`).
    #[serde(default)]
    pub product_source: Option<String>,
    /// Bandwidth ceiling the kernels are judged against, GB/s.
    #[serde(default)]
    pub bw_ceiling_gbps: Option<f64>,
    /// `measured` or `datasheet`.
    #[serde(default)]
    pub bw_ceiling_label: Option<String>,
    #[serde(default)]
    pub workload: Option<String>,
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub shape: Option<String>,
    #[serde(default)]
    pub quant: Option<String>,
    #[serde(default)]
    pub row_id: Option<String>,
    #[serde(default)]
    pub row_source: Option<String>,
    #[serde(default)]
    pub isa_manifest: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    pub profile: bool,
    pub isa: bool,
    /// Byte or FLOP counts (profiler counters, bytes per call, reported bandwidth).
    pub throughput: bool,
    pub product: bool,
    /// Evidence that would let more rules decide, with the rules waiting on it.
    pub missing: Vec<Missing>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Missing {
    pub evidence: String,
    pub rules: Vec<String>,
}

word_enum! {
    /// What the view's kernels were read from.
    #[derive(Default)]
    pub enum ScopeKind {
        /// A profile whose hot names were found in the ISA manifest.
        ProfileMatched = "profile-matched",
        /// A profile and a manifest, no hot name found in the ISA.
        ProfileUnmatched = "profile-unmatched",
        /// A profile, no manifest.
        ProfileOnly = "profile-only",
        /// A manifest, no profile.
        IsaOnly = "isa-only",
        /// Neither.
        #[default]
        Empty = "empty",
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Scope {
    pub kind: ScopeKind,
    pub profile_names: usize,
    pub isa_kernels: usize,
    /// ISA kernels of the row's arch (the only ones a profile name may match).
    pub isa_kernels_for_arch: usize,
    pub isa_arches: Vec<String>,
    pub matched: Vec<ScopeMatch>,
    /// Hot profile names with no ISA kernel: listed, never widened to all objects.
    pub unmatched_hot: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ScopeMatch {
    pub profile: String,
    pub isa_kernel: String,
    pub how: MatchLevel,
    pub object: String,
    /// Other ISA kernels that matched at the same level (variants).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct KernelFit {
    pub name: String,
    /// Readable name, unique within this view (`elementwise_kernel<MulFunctor, bf16>`);
    /// rule texts and suggestions quote it. See `names::short_names`.
    #[serde(default)]
    pub short_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpClass>,
    pub share_pct: Option<f64>,
    pub calls: Option<u64>,
    pub avg_us: Option<f64>,
    pub total_us: Option<f64>,
    pub throughput: Throughput,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isa: Option<IsaFit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupancy: Option<OccupancyFit>,
    /// Measured (profiler) share of the warp/wave slots that were active, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_occupancy_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchFit>,
    /// A Triton kernel's launch facts (num_warps, num_stages, shared, constexprs, the autotune
    /// choice, the cache entry), from katlas's launch records and the Triton cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton: Option<katlas_collect::parse::triton_join::TritonFacts>,
    /// Why the kernel has no bytes, and the command that gets them (a CUDA graph replay has no
    /// op in the trace; a multi-kernel op's operands are not one kernel's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_note: Option<String>,
    /// Instruction mix by category: (category, count, fraction).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<MixBar>,
    pub matrix: MatrixFit,
    /// Every computed signal the rules saw, by name (values; see `emitted` for the flags).
    pub signals: BTreeMap<String, Val>,
    /// Flags the fired rules emitted (the phase's and the kernel's own), which levers trigger
    /// on; kept apart from `signals` so an emitted name never overwrites a value.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub emitted: BTreeSet<String>,
    pub findings: Vec<Finding>,
    /// Conditions that could not decide for want of a signal (not serialised).
    #[serde(skip)]
    pub unknown: Vec<Unknown>,
}

/// A rule condition whose signal was unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown {
    pub signal: String,
    pub rule: String,
}

impl FitView {
    /// The row was measured on the CPU (its arch is `cpu`): GPU readings do not apply to it.
    pub fn measured_on_cpu(&self) -> bool {
        self.header.arch.as_deref().is_some_and(|a| a.eq_ignore_ascii_case("cpu"))
    }
}

impl KernelFit {
    /// What the lever catalog and history read: the values and the emitted flags.
    pub fn facts(&self) -> Facts<'_> {
        Facts { values: &self.signals, flags: &self.emitted }
    }

    /// A stop rule fired on it (Amdahl and any project stop rule): not worth tuning.
    pub fn stopped(&self) -> bool {
        self.findings.iter().any(|f| f.kind == FindingKind::Stop)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Throughput {
    pub bw_gbps: Option<f64>,
    pub bw_pct_of_peak: Option<f64>,
    /// `dram counters`, `launch operands`, `op operands`, `from shapes`, `bytes per call`,
    /// `reported by workload`.
    pub bw_source: Option<String>,
    /// Where per-call bytes came from, as the profile parser said (`counters`, `launch operands`,
    /// `op operands`, `shapes`, several joined by `+` when calls differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_source: Option<String>,
    pub bw_band: Option<String>,
    pub tflops: Option<f64>,
    pub compute_pct_of_peak: Option<f64>,
    pub compute_band: Option<String>,
    /// Nsight Compute's memory speed-of-light percentage (`gpu__compute_memory_throughput`),
    /// which covers every memory unit, not DRAM alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_sol_pct: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct IsaFit {
    pub kernel: String,
    pub object: String,
    pub arch: String,
    pub how: MatchLevel,
    pub vgpr: Option<u32>,
    pub sgpr: Option<u32>,
    pub agpr: Option<u32>,
    pub spills: Option<f64>,
    pub scratch_bytes: Option<u64>,
    pub lds_bytes: Option<u64>,
    pub wave_size: Option<u32>,
    pub max_workgroup_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix_status: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OccupancyFit {
    pub achieved: u32,
    pub max: u32,
    pub unit: String,
    /// The resource that bounds it (`vgpr`, `lds`, `wave_slots`, `registers`, `shared_memory` …).
    #[schemars(with = "String")]
    pub limiter: Limiter,
    /// `isa manifest + arch db`, `profiler launch data + arch db`.
    pub source: String,
    /// Resident workgroups per CU/WGP (AMD) or blocks per SM (NVIDIA): what
    /// `cudaOccupancyMaxActiveBlocksPerMultiprocessor` answers.
    #[serde(default)]
    pub groups: u32,
    /// `workgroups/CU`, `workgroups/WGP` or `blocks/SM`.
    #[serde(default)]
    pub group_unit: String,
    /// Each resource's own bound in `group_unit` (`registers`, `shared_memory`, `lds` …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bounds: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct LaunchFit {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub waves: f64,
    pub simds: f64,
    pub waves_per_simd: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct MixBar {
    pub category: String,
    pub count: u64,
    pub fraction: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct MatrixFit {
    /// Matrix units of the arch and their data types (`wmma: f16, bf16, …`).
    pub available: Vec<String>,
    /// Matrix instructions in the kernel's ISA; `null` when no mix is known.
    pub used_ops: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    pub rule: String,
    pub kind: FindingKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub text: String,
    /// The numbers behind the finding (the signals its conditions and text use).
    pub numbers: BTreeMap<String, Val>,
    pub when: Vec<String>,
    pub source: String,
}
