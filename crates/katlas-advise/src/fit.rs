//! The fit view: each hot kernel against its hardware.
//!
//! Inputs are any of: a row (profile), an ISA manifest, a product. Every number in the
//! view says where it came from; a rule that could not decide for lack of evidence is
//! listed under `missing` with the evidence that would decide it.

use crate::expr::{eval_all, render_template, Facts, Signals, Val};
use crate::isa::{CodeObject, IsaManifest, Kernel as IsaKernel};
use crate::names::{match_level, MatchLevel};
use crate::rules::{FindingKind, QuantIntent, RuleScope, Rules};
use crate::signals::evidence_for;
use katlas_arch::{ArchDb, Atom, KernelResources, Product, Vendor};
use katlas_model::{KernelSample, OpClass, Row};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What the fit view is built from.
pub struct FitInput<'a> {
    pub row: Option<&'a Row>,
    pub isa: Option<&'a IsaManifest>,
    /// `--product`: a product name or alias from the arch database.
    pub product: Option<&'a str>,
    /// `--arch`: the arch atom when neither row nor product says it.
    pub arch: Option<&'a str>,
    pub db: &'a ArchDb,
    pub rules: &'a Rules,
    /// Where the row came from, for the header (`corpus id …`, `file:line`, `ncu-csv FILE`).
    pub row_source: Option<String>,
}

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
    /// `dram counters`, `bytes per call`, `reported by workload`.
    pub bw_source: Option<String>,
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

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct OccupancyFit {
    pub achieved: u32,
    pub max: u32,
    pub unit: String,
    pub limiter: String,
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

/// Product choice with the reason it was chosen.
fn resolve_product<'a>(
    db: &'a ArchDb,
    explicit: Option<&str>,
    row: Option<&Row>,
    atom: Option<&str>,
    notes: &mut Vec<String>,
    candidates: &mut Vec<&'a Product>,
) -> Result<Option<(&'a Product, String)>, String> {
    if let Some(p) = explicit {
        return match db.product(p) {
            Some(prod) => Ok(Some((prod, "--product".into()))),
            None => {
                let known: Vec<String> = db.products().map(|p| p.name.clone()).collect();
                Err(format!("--product `{p}`: not in the arch database (known: {})", known.join(", ")))
            }
        };
    }
    if let Some(r) = row {
        for d in &r.identity.devices {
            if let Some(name) = &d.product {
                if let Some(prod) = db.product(name) {
                    return Ok(Some((prod, format!("row device `{name}`"))));
                }
                notes.push(format!("row device product `{name}` is not in the arch database"));
            }
        }
        // The profiler's own record of the device (a torch trace's deviceProperties, rocprofv3's
        // agent), for a row collected where nvidia-smi/rocm-smi gave none, or imported.
        if let Some(name) = r.route.as_ref().and_then(|rt| rt.attributes.get("device")).and_then(|v| v.as_str()) {
            if let Some(prod) = db.product(name) {
                return Ok(Some((prod, format!("profiled device `{name}`"))));
            }
            notes.push(format!("profiled device `{name}` is not in the arch database"));
        }
    }
    let Some(atom) = atom else { return Ok(None) };
    let cands = db.products_for_atom(atom);
    // The device's memory size tells boards of one atom apart (24 GB 7900 XTX, 20 GB 7900 XT, 48 GB W7900).
    if cands.len() > 1 {
        for d in row.map(|r| r.identity.devices.as_slice()).unwrap_or_default() {
            let Some(mib) = d.memory_mib else { continue };
            let gb = mib as f64 / 1024.0;
            let fits: Vec<&&Product> = cands.iter().filter(|p| p.memory_gb.as_ref().is_some_and(|m| (gb - m.value).abs() <= 0.1 * m.value)).collect();
            if let [one] = fits.as_slice() {
                return Ok(Some((**one, format!("row device memory {} GiB: the only {atom} board of that size", crate::expr::fmt_num(gb, Some(1))))));
            }
        }
    }
    match cands.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one, format!("only product of {atom} in the arch database")))),
        many => {
            // Several boards: the bandwidth ceiling is still determined when they share it.
            let bw = many[0].best_bw_gbps().0;
            if many.iter().all(|p| (p.best_bw_gbps().0 - bw).abs() < 1e-6) {
                let names: Vec<&str> = many.iter().map(|p| p.name.as_str()).collect();
                Ok(Some((
                    many[0],
                    format!("assumed: all {} products of {atom} ({}) share the {bw} GB/s ceiling; pass --product for rates", many.len(), names.join(", ")),
                )))
            } else {
                let names: Vec<&str> = many.iter().map(|p| p.name.as_str()).collect();
                notes.push(format!(
                    "{} products use {atom} with different ceilings ({}): read for each below; pass --product for one",
                    many.len(),
                    names.join(", ")
                ));
                candidates.extend(many.iter().copied());
                Ok(None)
            }
        }
    }
}

/// Profile samples merged by name (profilers list one line per launch or per name).
pub(crate) fn merge_samples(samples: &[KernelSample]) -> Vec<KernelSample> {
    let mut out: Vec<KernelSample> = Vec::new();
    for s in samples {
        let calls = s.calls.max(1);
        let total = if s.total_us > 0.0 { s.total_us } else { s.avg_us.unwrap_or(0.0) * calls as f64 };
        match out.iter_mut().find(|o| o.name == s.name) {
            Some(o) => {
                let ocalls = o.calls.max(1);
                // Bytes/flops are per call: weight by calls.
                o.bytes = weighted(o.bytes, ocalls, s.bytes, calls);
                o.flops = weighted(o.flops, ocalls, s.flops, calls);
                o.calls = ocalls + calls;
                o.total_us += total;
                o.avg_us = (o.total_us > 0.0).then(|| o.total_us / o.calls as f64);
                o.share_pct = match (o.share_pct, s.share_pct) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
                // Counters are per-launch means: merge as a call-weighted mean.
                for (k, v) in &s.counters {
                    let mine = o.counters.get(k).copied();
                    if let Some(m) = weighted(mine, ocalls, Some(*v), calls) {
                        o.counters.insert(k.clone(), m);
                    }
                }
                o.achieved_gbps = None;
            }
            None => {
                let mut c = s.clone();
                c.calls = calls;
                c.total_us = total;
                out.push(c);
            }
        }
    }
    out
}

fn weighted(a: Option<f64>, na: u64, b: Option<f64>, nb: u64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some((x * na as f64 + y * nb as f64) / (na + nb) as f64),
        _ => None,
    }
}

/// Whether a sample's bytes come from DRAM counters (ncu `dram__bytes_*`, rocprof
/// `FETCH_SIZE`/`WRITE_SIZE`, the rocprofv3 parser's TCC/GL2C formulas) rather than a
/// workload's own estimate.
fn bytes_from_counters(s: &KernelSample) -> bool {
    s.extra.get("bytes_source").and_then(|v| v.as_str()) == Some("counters")
        || s.counters.keys().any(|k| k.starts_with("dram__bytes") || k == "FETCH_SIZE" || k == "WRITE_SIZE")
}

/// Where a sample's per-call bytes come from, as the view labels them.
fn bytes_label(s: &KernelSample) -> &'static str {
    if bytes_from_counters(s) {
        "dram counters"
    } else if from_shapes(s) {
        "from shapes"
    } else {
        "bytes per call"
    }
}

/// Bytes and FLOPs derived from the launching op's shapes (`data/shapes.toml`), not measured.
fn from_shapes(s: &KernelSample) -> bool {
    s.extra.get("bytes_source").and_then(|v| v.as_str()) == Some("shapes")
}

fn phase_kind(phase: &str) -> (bool, bool) {
    let p = phase.to_ascii_lowercase();
    (p.contains("prefill") || p.starts_with("pp"), p.contains("decode") || p == "ar" || p.contains("gen"))
}

fn is_gemm_like(name: &str, op: Option<&OpClass>) -> bool {
    let n = name.to_ascii_lowercase();
    let words = ["gemm", "gemv", "matmul", "mm_", "linear", "projection", "qkv", "cublas", "cutlass", "sgemm", "hgemm"];
    let in_op = op.map(|o| {
        let f = o.family.to_ascii_lowercase();
        let r = o.role.to_ascii_lowercase();
        f == "linear" || f == "gemm" || f == "matmul" || words.iter().any(|w| r.contains(w))
    });
    in_op.unwrap_or(false) || words.iter().any(|w| n.contains(w))
}

/// A vendor/framework library kernel: a prefix of `prefixes` starts its name or its base name.
pub fn is_library_kernel(prefixes: &[String], name: &str) -> bool {
    let base = crate::names::base_name(name);
    prefixes.iter().any(|p| name.starts_with(p.as_str()) || base.starts_with(p.as_str()))
}

/// Whether an env name of the row can change a kernel's route (`[settings] route_env_prefixes`,
/// or recorded in the row's route env), and is not device selection or logging.
fn is_route_env(st: &crate::rules::FitSettings, r: &Row, k: &str) -> bool {
    if st.not_route_env.iter().any(|n| n.strip_suffix('*').map_or(n == k, |p| k.starts_with(p))) {
        return false;
    }
    r.identity.env.contains_key(k) || st.route_env_prefixes.iter().any(|p| k.starts_with(p.as_str()))
}

/// Whether a route knob can reroute this kernel: a library's knob (`[settings] route_env_reach`)
/// only that library's kernels, any other knob every kernel.
fn knob_reaches(st: &crate::rules::FitSettings, env: &str, kernel: &str) -> bool {
    match st.route_env_reach.iter().find(|r| env.starts_with(r.env.as_str())) {
        Some(r) => is_library_kernel(&r.kernels, kernel),
        None => true,
    }
}

/// Why a kernel is a one-token GEMV, or `None` when nothing says so: M = 1 on every call from
/// the launching op's shapes (a larger M says it is not), else a profiled kernel of a decode
/// phase whose op is a GEMV or projection, in no batched phase and with no matrix-tile name
/// (`[settings] batched_words`: DFlash verify, WMMA/MFMA GEMMs). An ISA-only kernel has no
/// launch to judge.
fn gemv_evidence(
    st: &crate::rules::FitSettings,
    name: &str,
    op: Option<&OpClass>,
    sample: Option<&KernelSample>,
    phase: Option<&str>,
    decode_gemm: bool,
) -> Option<String> {
    let x = sample?;
    let num = |k: &str| x.extra.get(k).and_then(|v| v.as_f64());
    if let Some(m) = num("shapes_m_max") {
        let m1 = num("shapes_m1_calls").unwrap_or(0.0);
        return (m == 1.0 && m1 >= x.calls as f64).then(|| format!("M = 1 from shapes on all {} calls", x.calls));
    }
    if !decode_gemm {
        return None;
    }
    let lname = name.to_ascii_lowercase();
    let lphase = phase.unwrap_or("").to_ascii_lowercase();
    if st.batched_words.iter().any(|w| lname.contains(w.as_str()) || lphase.contains(w.as_str())) {
        return None;
    }
    let role = op.map(|o| o.role.to_ascii_lowercase()).unwrap_or_default();
    let gemv_op = role.contains("gemv") || role.contains("projection") || lname.contains("gemv") || lname.contains("matvec");
    gemv_op.then(|| format!("decode phase `{}`, op {}, profiled", phase.unwrap_or("?"), if role.is_empty() { "gemv by name".to_string() } else { role }))
}

fn is_projection(name: &str, op: Option<&OpClass>) -> bool {
    let n = name.to_ascii_lowercase();
    op.map(|o| o.role.contains("projection")).unwrap_or(false) || n.contains("qkv") || n.contains("proj")
}

/// Arch-level signals: capabilities decide legality of levers.
pub fn arch_signals(atom: Option<&Atom>, s: &mut Signals) {
    let Some(a) = atom else { return };
    s.insert("arch".into(), Val::Str(a.name.clone()));
    s.insert("arch_class".into(), Val::Str(a.class.clone()));
    s.insert("arch_family".into(), Val::Str(a.family.clone()));
    s.insert("vendor".into(), Val::Str(a.vendor.as_str().into()));
    s.insert("caps".into(), Val::List(a.caps.clone()));
    s.insert("wave_sizes".into(), Val::List(a.wave_sizes.iter().map(|w| w.to_string()).collect()));
    s.insert("wave_size_choices".into(), Val::Num(a.wave_sizes.len() as f64));
    s.insert("matrix_capable".into(), Val::Bool(!a.matrix.is_empty()));
    let units: Vec<String> = a.matrix.keys().cloned().collect();
    s.insert("matrix_units".into(), Val::Str(if units.is_empty() { "none".into() } else { units.join(", ") }));
}

fn simds_of(atom: &Atom, product: &Product) -> f64 {
    let units = product.units.value as f64;
    match atom.vendor {
        Vendor::Amd => units * atom.amd.as_ref().map(|a| a.simds_per_cu).unwrap_or(2) as f64,
        Vendor::Nvidia => units * atom.nvidia.as_ref().map(|n| n.sub_partitions).unwrap_or(4) as f64,
    }
}

fn mix_signals(k: &IsaKernel, s: &mut Signals) -> (Vec<MixBar>, Option<u64>) {
    let Some(mix) = &k.mix else { return (vec![], None) };
    let total = mix.total.max(mix.categories.values().sum::<u64>());
    if total == 0 {
        return (vec![], None);
    }
    let cat = |c: &str| mix.categories.get(c).copied().unwrap_or(0);
    let matrix = cat("matrix");
    let valu = cat("valu") + cat("dot");
    let loads: u64 = mix.opcodes.iter().filter(|(op, _)| is_vmem_load(op)).map(|(_, n)| *n).sum();
    let wide: u64 = mix.opcodes.iter().filter(|(op, _)| is_vmem_load(op) && is_wide(op)).map(|(_, n)| *n).sum();
    s.insert("mix_total".into(), Val::Num(total as f64));
    s.insert("matrix_ops".into(), Val::Num(matrix as f64));
    s.insert("valu_frac".into(), Val::Num(valu as f64 / total as f64));
    s.insert("valu_frac_pct".into(), Val::Num(100.0 * valu as f64 / total as f64));
    let vm = cat("vmem_load").max(loads);
    s.insert("vmem_loads".into(), Val::Num(vm as f64));
    if loads > 0 {
        s.insert("vmem_wide_frac".into(), Val::Num(wide as f64 / loads as f64));
        s.insert("vmem_wide_frac_pct".into(), Val::Num(100.0 * wide as f64 / loads as f64));
    }
    let mut bars: Vec<MixBar> =
        mix.categories.iter().filter(|(_, n)| **n > 0).map(|(c, n)| MixBar { category: c.clone(), count: *n, fraction: *n as f64 / total as f64 }).collect();
    bars.sort_by(|a, b| b.count.cmp(&a.count).then(a.category.cmp(&b.category)));
    (bars, Some(matrix))
}

fn is_vmem_load(op: &str) -> bool {
    let o = op.to_ascii_lowercase();
    o.starts_with("global_load") || o.starts_with("buffer_load") || o.starts_with("flat_load") || o.starts_with("ldg")
}

fn is_wide(op: &str) -> bool {
    let o = op.to_ascii_lowercase();
    o.contains("dwordx4") || o.contains("b128") || o.contains(".128")
}

/// A transform (elementwise, norm, rotation: `[settings] elementwise_families` /
/// `reduction_families`, or the name says so) whose calls are small: bytes per call and time
/// per call, where known, under `[settings] small_transform_max_bytes` / `_max_us`. The
/// reason says what judged it.
fn is_transform(st: &crate::rules::FitSettings, x: &KernelSample) -> Option<String> {
    let lname = x.name.to_ascii_lowercase();
    if let Some(o) = &x.op {
        let f = o.family.to_ascii_lowercase();
        if st.elementwise_families.contains(&f) || st.reduction_families.contains(&f) {
            return Some(format!("op {}.{}", o.family, o.role));
        }
    }
    ["elementwise", "norm", "rotate", "rope", "reduce"].iter().find(|w| lname.contains(*w)).map(|w| format!("`{w}` in the name"))
}

fn small_transform(st: &crate::rules::FitSettings, x: &KernelSample) -> (bool, Option<String>) {
    let Some(what) = is_transform(st, x) else { return (false, None) };
    let mut why = vec![what];
    if let Some(b) = x.bytes {
        if b > st.small_transform_max_bytes {
            return (false, None);
        }
        why.push(format!("{} KB per call", crate::expr::fmt_num(b / 1e3, Some(0))));
    }
    if let Some(a) = x.avg_us.filter(|a| *a > 0.0) {
        if a > st.small_transform_max_us {
            return (false, None);
        }
        why.push(format!("{} us per call", crate::expr::fmt_num(a, Some(1))));
    }
    (true, Some(why.join(", ")))
}

/// For each small transform of the phase, the kernel next to it in the phase's kernel list
/// (the profiler's or timeline's order) that is not itself a transform: what it would fuse into.
fn fusion_neighbours(st: &crate::rules::FitSettings, list: &[KernelSample]) -> BTreeMap<String, (String, f64)> {
    let heavy: Vec<bool> = list.iter().map(|x| is_transform(st, x).is_none()).collect();
    let mut out = BTreeMap::new();
    for (i, x) in list.iter().enumerate() {
        if heavy[i] {
            continue;
        }
        let near = (1..list.len()).flat_map(|d| [i.checked_sub(d), Some(i + d)]).flatten().find(|&j| j < list.len() && heavy[j]);
        if let Some(j) = near {
            out.insert(x.name.clone(), (crate::names::short_names(&[list[j].name.as_str()]).remove(0), list[j].share_pct.unwrap_or(0.0)));
        }
    }
    out
}

struct KernelCtx<'a> {
    atom: Option<&'a Atom>,
    product: Option<&'a Product>,
    phase: Option<&'a str>,
    row: Option<&'a Row>,
    /// Phase signals and what the phase rules emitted: every kernel sees them.
    phase_signals: &'a Signals,
    phase_flags: &'a BTreeSet<String>,
}

/// The phase's timeline signals from the row's metrics, and the framework that ran it.
fn phase_signals(row: Option<&Row>) -> Signals {
    let mut s = Signals::new();
    let Some(r) = row else { return s };
    for k in crate::signals::timeline_metrics() {
        if let Some(m) = r.metrics.get(k) {
            s.insert(k.into(), Val::Num(m.value));
        }
    }
    if let Some(w) = r.metrics.get("timeline_window_us") {
        s.insert("timeline_window_ms".into(), Val::Num(w.value / 1e3));
    }
    let torch = r.origin.as_ref().is_some_and(|o| o.parsers.iter().any(|p| p == "torch-trace")) || r.metrics.contains_key("trace_events");
    s.insert("framework".into(), Val::Str(if torch { "torch" } else { "other" }.into()));
    s
}

/// Findings of `rules` that hold on `s`, the signals they emit, and the unknown conditions
/// (`signal@rule`) of those that could not decide.
fn eval_rules<'r>(rules: impl Iterator<Item = &'r crate::rules::FitRule>, facts: Facts, kernel: Option<&str>) -> (Vec<Finding>, Vec<String>, Vec<Unknown>) {
    let s = facts.values;
    let (mut findings, mut emitted, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for r in rules {
        let (truth, unk) = eval_all(&r.when, &facts);
        match truth {
            Some(true) => {
                let mut numbers = BTreeMap::new();
                let nvidia = matches!(s.get("vendor"), Some(Val::Str(v)) if v == "nvidia");
                let text = r.text_nvidia.as_ref().filter(|_| nvidia).unwrap_or(&r.text);
                for n in r.when.iter().map(|c| c.signal.clone()).chain(crate::expr::template_names(text)) {
                    if n == "kernel" {
                        continue;
                    }
                    if let Some(v) = s.get(&n) {
                        numbers.insert(n, v.clone());
                    }
                }
                findings.push(Finding {
                    rule: r.id.clone(),
                    kind: r.kind,
                    kernel: kernel.map(str::to_string),
                    text: render_template(text, s),
                    numbers,
                    when: r.when.iter().map(|c| c.text.clone()).collect(),
                    source: r.source_nvidia.as_ref().filter(|_| nvidia).unwrap_or(&r.source).clone(),
                });
                emitted.extend(r.emits.iter().cloned());
            }
            Some(false) => {}
            None => unknown.extend(unk.into_iter().map(|signal| Unknown { signal, rule: r.id.clone() })),
        }
    }
    (findings, emitted, unknown)
}

pub fn build_fit(input: &FitInput) -> Result<FitView, crate::AdviseError> {
    let rules = input.rules;
    let db = input.db;
    let row = input.row;
    let mut scope_notes = Vec::new();

    // Arch atom: explicit, row, product, then a manifest with a single arch.
    let mut arch_source = None;
    let mut arch = input.arch.map(|a| {
        arch_source = Some("--arch".to_string());
        a.to_string()
    });
    if arch.is_none() {
        if let Some(r) = row {
            arch = r.arch.clone().or_else(|| r.identity.arch().map(str::to_string));
            if arch.is_some() {
                arch_source = Some("row".into());
            }
        }
    }
    if arch.is_none() {
        if let Some(p) = input.product.and_then(|p| db.product(p)) {
            arch = Some(p.atom.clone());
            arch_source = Some("product".into());
        }
    }
    if arch.is_none() {
        if let Some(m) = input.isa {
            if let [one] = m.arches().as_slice() {
                arch = Some(one.clone());
                arch_source = Some("ISA manifest (single arch)".into());
            }
        }
    }
    let atom = arch.as_deref().and_then(|a| db.atom(a));
    if let (Some(a), None) = (&arch, atom) {
        scope_notes.push(format!("arch `{a}` is not in the arch database: no capability or occupancy reads"));
    }
    let atom_name = atom.map(|a| a.name.clone()).or(arch.clone());

    let mut candidates = Vec::new();
    let product = resolve_product(db, input.product, row, atom_name.as_deref(), &mut scope_notes, &mut candidates).map_err(crate::AdviseError::Usage)?;
    if let (Some((p, _)), Some(a)) = (&product, atom) {
        if katlas_arch::canonical_atom(&p.atom) != a.name && a.variant_of.as_deref() != Some(p.atom.as_str()) {
            scope_notes.push(format!("product {} is {} but the evidence is {}", p.name, p.atom, a.name));
        }
    }
    let prod = product.as_ref().map(|(p, _)| *p);

    let mut header = Header {
        arch: atom_name.clone(),
        arch_class: atom.map(|a| a.class.clone()),
        arch_source,
        product: prod.map(|p| p.name.clone()),
        product_source: product.as_ref().map(|(_, s)| s.clone()),
        bw_ceiling_gbps: prod.map(|p| p.best_bw_gbps().0),
        bw_ceiling_label: prod.map(|p| p.best_bw_gbps().1.to_string()),
        row_source: input.row_source.clone(),
        isa_manifest: input.isa.map(|m| m.path.clone()),
        ..Default::default()
    };
    if let Some(r) = row {
        header.workload = Some(r.workload.clone());
        header.phase = Some(r.phase.clone());
        header.shape = r.shape_bucket.clone();
        header.quant = r.quant.clone();
        header.row_id = Some(r.id.clone());
    }

    // ISA kernels usable for this arch.
    let isa_all: Vec<(&CodeObject, &IsaKernel)> = input.isa.map(|m| m.kernels().collect()).unwrap_or_default();
    let isa_for_arch: Vec<(&CodeObject, &IsaKernel)> = match &atom_name {
        Some(a) => isa_all
            .iter()
            .copied()
            .filter(|(o, _)| katlas_arch::canonical_atom(&o.arch) == *a || db.atom(&o.arch).and_then(|x| x.variant_of.clone()).as_deref() == Some(a.as_str()))
            .collect(),
        None => isa_all.clone(),
    };
    let isa_arches = input.isa.map(|m| m.arches()).unwrap_or_default();
    if input.isa.is_some() && isa_for_arch.is_empty() {
        scope_notes.push(format!(
            "the ISA manifest has no code objects for {} (it has: {}); resources stay unknown",
            atom_name.as_deref().unwrap_or("the row's arch"),
            if isa_arches.is_empty() { "none".into() } else { isa_arches.join(", ") }
        ));
    }

    // The phase first: its timeline decides before any one kernel does.
    let mut psig = phase_signals(row);
    arch_signals(atom, &mut psig);
    let no_flags = BTreeSet::new();
    let (phase_findings, phase_emitted, phase_unknown) =
        eval_rules(rules.fit.rules.iter().filter(|r| r.scope == RuleScope::Phase), Facts { values: &psig, flags: &no_flags }, None);
    let pflags: BTreeSet<String> = phase_emitted.into_iter().collect();
    let ctx = KernelCtx { atom, product: prod, phase: row.map(|r| r.phase.as_str()), row, phase_signals: &psig, phase_flags: &pflags };
    let mut kernels = Vec::new();
    let mut scope = Scope { isa_kernels: isa_all.len(), isa_kernels_for_arch: isa_for_arch.len(), isa_arches, ..Default::default() };

    let profile: Vec<KernelSample> = row.map(|r| merge_samples(&r.kernels)).unwrap_or_default();
    if !profile.is_empty() {
        let mut hot = profile;
        let total: f64 = hot.iter().map(|k| k.total_us).sum();
        for k in &mut hot {
            if k.share_pct.is_none() && total > 0.0 {
                k.share_pct = Some(100.0 * k.total_us / total);
            }
            // Counter-only profiles carry no times: the average is unknown, not zero.
            if k.total_us <= 0.0 && k.avg_us.is_some_and(|a| a <= 0.0) {
                k.avg_us = None;
            }
            if k.avg_us.is_none() && k.calls > 0 && k.total_us > 0.0 {
                k.avg_us = Some(k.total_us / k.calls as f64);
            }
        }
        let neighbours = fusion_neighbours(&rules.fit.settings, &hot);
        hot.sort_by(|a, b| b.share_pct.unwrap_or(0.0).total_cmp(&a.share_pct.unwrap_or(0.0)).then(b.total_us.total_cmp(&a.total_us)));
        scope.profile_names = hot.len();
        hot.truncate(rules.fit.settings.hot_limit);
        let shorts = crate::names::short_names(&hot.iter().map(|k| k.name.as_str()).collect::<Vec<_>>());
        for (s, short) in hot.iter().zip(&shorts) {
            let m = if input.isa.is_some() { best_match(&s.name, s.demangled.as_deref(), &isa_for_arch) } else { None };
            match &m {
                Some((lvl, (o, k), also)) => scope.matched.push(ScopeMatch {
                    profile: s.name.clone(),
                    isa_kernel: k.name.clone(),
                    how: *lvl,
                    object: object_label(o),
                    also: also.clone(),
                }),
                None if input.isa.is_some() => scope.unmatched_hot.push(s.name.clone()),
                None => {}
            }
            let isa = m.map(|(lvl, pair, _)| (lvl, pair));
            kernels.push(fit_kernel(&ctx, rules, Some(s), isa, short, neighbours.get(&s.name)));
        }
        scope.kind = match (input.isa.is_some(), scope.matched.is_empty()) {
            (false, _) => ScopeKind::ProfileOnly,
            (true, false) => ScopeKind::ProfileMatched,
            (true, true) => ScopeKind::ProfileUnmatched,
        };
    } else if input.isa.is_some() {
        scope.kind = ScopeKind::IsaOnly;
        if atom.is_none() && scope.isa_arches.len() > 1 {
            scope_notes.push(format!(
                "the manifest holds several arches ({}): each kernel is read against its own; pass --arch to pick one",
                scope.isa_arches.join(", ")
            ));
        }
        let shown: Vec<&(&CodeObject, &IsaKernel)> = isa_for_arch.iter().take(rules.fit.settings.isa_only_limit).collect();
        let shorts = crate::names::short_names(&shown.iter().map(|(_, k)| k.name.as_str()).collect::<Vec<_>>());
        for ((o, k), short) in shown.into_iter().zip(&shorts) {
            // Without a chosen arch, each object is judged against its own atom.
            let own = KernelCtx {
                atom: ctx.atom.or_else(|| db.atom(&o.arch)),
                product: ctx.product,
                phase: ctx.phase,
                row: ctx.row,
                phase_signals: ctx.phase_signals,
                phase_flags: ctx.phase_flags,
            };
            kernels.push(fit_kernel(&own, rules, None, Some((MatchLevel::Exact, (*o, *k))), short, None));
        }
        if isa_for_arch.len() > rules.fit.settings.isa_only_limit {
            scope_notes.push(format!("{} of {} ISA kernels shown (isa_only_limit)", rules.fit.settings.isa_only_limit, isa_for_arch.len()));
        }
    } else {
        scope.kind = ScopeKind::Empty;
    }
    scope.notes = scope_notes;

    // Row-level findings, hottest kernel first.
    let mut likely = Vec::new();
    let mut left = Vec::new();
    let mut stops = Vec::new();
    let mut caveats = Vec::new();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &phase_findings {
        match f.kind {
            FindingKind::Limit => likely.push(f.clone()),
            FindingKind::Left => left.push(f.clone()),
            FindingKind::Stop => stops.push(f.clone()),
            FindingKind::Caveat => caveats.push(f.clone()),
        }
    }
    // Phase rules wait on a trace's timeline only when there is a profile to have one.
    if row.is_some_and(|r| !r.kernels.is_empty()) {
        for u in &phase_unknown {
            missing.entry(evidence_for(&u.signal).to_string()).or_default().insert(u.rule.clone());
        }
    }
    for k in &kernels {
        let stopped = k.stopped();
        for f in &k.findings {
            match f.kind {
                FindingKind::Limit if !stopped => likely.push(f.clone()),
                FindingKind::Left if !stopped => left.push(f.clone()),
                FindingKind::Stop => stops.push(f.clone()),
                FindingKind::Caveat => caveats.push(f.clone()),
                FindingKind::Limit | FindingKind::Left => {}
            }
        }
        for u in &k.unknown {
            missing.entry(evidence_for(&u.signal).to_string()).or_default().insert(u.rule.clone());
        }
    }
    let mut evidence = Evidence {
        profile: row.map(|r| !r.kernels.is_empty()).unwrap_or(false),
        isa: input.isa.is_some(),
        throughput: kernels.iter().any(|k| k.throughput.bw_gbps.is_some() || k.throughput.tflops.is_some()),
        product: prod.is_some(),
        missing: missing.into_iter().map(|(evidence, rules)| Missing { evidence, rules: rules.into_iter().filter(|r| !r.is_empty()).collect() }).collect(),
    };
    if !evidence.profile {
        evidence
            .missing
            .insert(0, Missing { evidence: "a profile (per-kernel calls and times): without it no kernel can be called hot".into(), rules: vec![] });
    }
    if !evidence.isa {
        evidence.missing.push(Missing {
            evidence: format!(
                "an ISA manifest (`katlas isa scan`): {}",
                if atom.is_some_and(|a| a.vendor == Vendor::Nvidia) {
                    "registers/thread, spills, shared memory, instruction mix"
                } else {
                    "registers, spills, LDS, wave size, instruction mix"
                }
            ),
            rules: vec![],
        });
    }
    if !evidence.product {
        evidence.missing.push(Missing { evidence: "a product (`--product`): bandwidth and rate ceilings for % of peak".into(), rules: vec![] });
    }

    let quant = row.and_then(|r| r.quant.as_deref()).and_then(|q| input.rules.quant_for(q)).cloned();
    let runtime = row.map(|r| r.metrics.iter().map(|(k, m)| (k.clone(), m.value)).collect()).unwrap_or_default();

    let product_readings = candidates
        .iter()
        .map(|p| {
            let one = FitInput {
                row: input.row,
                isa: input.isa,
                product: Some(p.name.as_str()),
                arch: input.arch,
                db: input.db,
                rules: input.rules,
                row_source: None,
            };
            build_fit(&one).map(|v| ProductReading {
                product: p.name.clone(),
                bw_ceiling_gbps: v.header.bw_ceiling_gbps,
                likely_limit: v.likely_limit,
                bw_pct: v.kernels.iter().filter_map(|k| k.throughput.bw_pct_of_peak.map(|x| (k.short_name.clone(), x))).collect(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;

    Ok(FitView {
        schema: crate::FIT_SCHEMA.into(),
        header,
        evidence,
        scope,
        phase: PhaseFit {
            signals: psig
                .into_iter()
                .filter(|(k, _)| {
                    crate::signals::get(k).is_some_and(|d| matches!(d.from, crate::signals::Source::Timeline | crate::signals::Source::Host))
                        || k == "framework"
                })
                .collect(),
            findings: phase_findings,
        },
        kernels,
        quant,
        runtime,
        likely_limit: likely,
        left_on_table: left,
        stops,
        caveats,
        rules_files: vec![rules.fit.file.clone(), rules.quant_file.clone()],
        product_readings,
    })
}

fn object_label(o: &CodeObject) -> String {
    if o.chain_text.is_empty() {
        o.path.clone()
    } else {
        o.chain_text.clone()
    }
}

type Pair<'a> = (&'a CodeObject, &'a IsaKernel);

/// The best ISA match of a profile name: lowest level, then the first in manifest order.
fn best_match<'a>(name: &str, demangled: Option<&str>, isa: &[Pair<'a>]) -> Option<(MatchLevel, Pair<'a>, Vec<String>)> {
    let mut best: Option<(MatchLevel, Pair<'a>)> = None;
    let mut also = Vec::new();
    for pair in isa {
        let names = pair.1.names();
        let lvl = [Some(name), demangled].into_iter().flatten().filter_map(|n| match_level(n, &names)).min();
        let Some(lvl) = lvl else { continue };
        match &best {
            Some((b, _)) if *b < lvl => {}
            Some((b, _)) if *b == lvl => also.push(pair.1.name.clone()),
            _ => {
                also.clear();
                best = Some((lvl, *pair));
            }
        }
    }
    best.map(|(l, p)| {
        also.retain(|n| *n != p.1.name);
        also.sort();
        also.dedup();
        (l, p, also)
    })
}

fn fit_kernel(
    ctx: &KernelCtx,
    rules: &Rules,
    sample: Option<&KernelSample>,
    isa: Option<(MatchLevel, Pair)>,
    short: &str,
    neighbour: Option<&(String, f64)>,
) -> KernelFit {
    let mut s = ctx.phase_signals.clone();
    arch_signals(ctx.atom, &mut s);
    let name = sample.map(|x| x.name.clone()).or_else(|| isa.map(|(_, (_, k))| k.name.clone())).unwrap_or_default();
    // Rule texts quote the view's short name (the full name stays on the kernel and its findings).
    s.insert("kernel".into(), Val::Str(short.to_string()));
    let mut kf = KernelFit { name: name.clone(), short_name: short.to_string(), ..Default::default() };

    // Phase and op.
    let op = sample.and_then(|x| x.op.clone());
    if let Some(p) = ctx.phase {
        let (pre, dec) = phase_kind(p);
        s.insert("phase".into(), Val::Str(p.into()));
        s.insert("phase_prefill".into(), Val::Bool(pre));
        s.insert("phase_decode".into(), Val::Bool(dec));
        let gemm = is_gemm_like(&name, op.as_ref());
        s.insert("is_gemm".into(), Val::Bool(gemm));
        let ev = gemv_evidence(&rules.fit.settings, &name, op.as_ref(), sample, Some(p), gemm && dec && !pre);
        s.insert("decode_gemv".into(), Val::Bool(ev.is_some()));
        if let Some(e) = ev {
            s.insert("gemv_evidence".into(), Val::Str(e));
        }
        s.insert("projection".into(), Val::Bool(is_projection(&name, op.as_ref())));
    } else {
        let gemm = is_gemm_like(&name, op.as_ref());
        s.insert("is_gemm".into(), Val::Bool(gemm));
        // Without a phase only shapes can say a GEMM is one token.
        let ev = gemv_evidence(&rules.fit.settings, &name, op.as_ref(), sample, None, false);
        s.insert("decode_gemv".into(), Val::Bool(ev.is_some()));
        if let Some(e) = ev {
            s.insert("gemv_evidence".into(), Val::Str(e));
        }
    }
    if let Some(o) = &op {
        s.insert("op_family".into(), Val::Str(o.family.clone()));
        s.insert("op_role".into(), Val::Str(o.role.clone()));
    }
    let st = &rules.fit.settings;
    let fam = op.as_ref().map(|o| o.family.to_ascii_lowercase());
    let lname = name.to_ascii_lowercase();
    let in_fams = |list: &[String]| fam.as_ref().is_some_and(|f| list.iter().any(|x| x == f));
    s.insert("is_elementwise".into(), Val::Bool(in_fams(&st.elementwise_families) || lname.contains("elementwise")));
    s.insert("is_reduction".into(), Val::Bool(in_fams(&st.reduction_families) || lname.contains("reduce")));
    s.insert("library_kernel".into(), Val::Bool(is_library_kernel(&st.library_prefixes, &name)));
    if let Some(x) = sample {
        let (small, why) = small_transform(st, x);
        s.insert("small_transform".into(), Val::Bool(small));
        if let Some(w) = why {
            s.insert("transform_evidence".into(), Val::Str(w));
        }
    }
    if let Some((n, share)) = neighbour {
        s.insert("fusion_neighbour".into(), Val::Str(n.clone()));
        s.insert("fusion_neighbour_share_pct".into(), Val::Num(*share));
    }
    kf.op = op;

    if let Some(r) = ctx.row {
        let graph = r.route.as_ref().and_then(|rt| rt.attributes.get("graph_enabled")).and_then(|v| v.as_bool());
        if let Some(g) = graph {
            s.insert("graph_enabled".into(), Val::Bool(g));
        }
        // Only env that can change a route is a knob (PYTHONUNBUFFERED=1 is not).
        let knobs: Vec<String> = r
            .variant
            .env
            .iter()
            .filter(|(k, _)| !r.variant.instrumentation.contains(k) && is_route_env(st, r, k) && knob_reaches(st, k, &name))
            .chain(r.variant.knobs.iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        s.insert("route_knobs".into(), Val::Bool(!knobs.is_empty()));
        if !knobs.is_empty() {
            s.insert("route_knob_list".into(), Val::Str(knobs.join(", ")));
        }
    }

    // Profile numbers.
    if let Some(x) = sample {
        kf.demangled = x.demangled.clone();
        kf.share_pct = x.share_pct;
        kf.calls = Some(x.calls);
        kf.avg_us = x.avg_us;
        kf.total_us = Some(x.total_us);
        if let Some(v) = x.share_pct {
            s.insert("share_pct".into(), Val::Num(v));
        }
        s.insert("calls".into(), Val::Num(x.calls as f64));
        if let Some(v) = x.avg_us {
            s.insert("avg_us".into(), Val::Num(v));
        }
        s.insert("total_us".into(), Val::Num(x.total_us));

        // Bandwidth: counters, bytes per call, then what the workload reported.
        // `bytes` is per call (collect parsers: per-launch mean of the DRAM counters).
        let bw = if let (Some(b), Some(avg)) = (x.bytes, x.avg_us.filter(|a| *a > 0.0)) {
            Some((b / avg / 1e3, bytes_label(x)))
        } else {
            x.achieved_gbps.map(|g| (g, "reported by workload"))
        };
        if let Some((gbps, src)) = bw {
            kf.throughput.bw_gbps = Some(gbps);
            kf.throughput.bw_source = Some(src.into());
            s.insert("bw_gbps".into(), Val::Num(gbps));
            s.insert("bw_source".into(), Val::Str(src.into()));
            if let Some(p) = ctx.product {
                let (peak, label) = p.best_bw_gbps();
                let pct = 100.0 * gbps / peak;
                kf.throughput.bw_pct_of_peak = Some(pct);
                kf.throughput.bw_band = rules.fit.band(pct).map(|b| b.name.clone());
                s.insert("bw_pct".into(), Val::Num(pct));
                s.insert("bw_peak_gbps".into(), Val::Num(peak));
                s.insert("bw_peak_label".into(), Val::Str(label.into()));
                if let Some(share) = x.share_pct {
                    s.insert("headroom_pct".into(), Val::Num(share * (1.0 - pct.min(100.0) / 100.0)));
                }
            }
        }
        if let (Some(f), Some(avg)) = (x.flops, x.avg_us.filter(|a| *a > 0.0)) {
            let tflops = f / avg / 1e6;
            kf.throughput.tflops = Some(tflops);
            s.insert("tflops".into(), Val::Num(tflops));
            if let Some(p) = ctx.product {
                let key = ["bf16_matrix", "fp16_matrix", "fp32"].into_iter().find(|k| p.peak_rate(k).is_some());
                if let Some(k) = key {
                    let peak = p.peak_rate(k).unwrap_or(1.0);
                    let pct = 100.0 * tflops / peak;
                    kf.throughput.compute_pct_of_peak = Some(pct);
                    kf.throughput.compute_band = rules.fit.band(pct).map(|b| b.name.clone());
                    s.insert("compute_pct".into(), Val::Num(pct));
                    s.insert("compute_peak".into(), Val::Num(peak));
                    s.insert("compute_peak_key".into(), Val::Str(k.into()));
                    let how = if from_shapes(x) { ", from shapes" } else { "" };
                    s.insert("compute_source".into(), Val::Str(format!("{} TFLOP/s of {peak} TFLOP/s {k}{how}", crate::expr::fmt_num(tflops, Some(1)))));
                }
            }
        }
        // Nsight Compute's own speed-of-light percentages, when the capture has them.
        let ctr = |k: &str| x.counters.get(k).copied();
        if !s.contains_key("compute_pct") {
            if let Some(pct) = ctr("sm__throughput.avg.pct_of_peak_sustained_elapsed") {
                kf.throughput.compute_pct_of_peak = Some(pct);
                kf.throughput.compute_band = rules.fit.band(pct).map(|b| b.name.clone());
                s.insert("compute_pct".into(), Val::Num(pct));
                s.insert("compute_source".into(), Val::Str("ncu sm__throughput".into()));
            }
        }
        if let Some(pct) = ctr("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") {
            kf.throughput.memory_sol_pct = Some(pct);
            s.insert("memory_sol_pct".into(), Val::Num(pct));
        }
        if let Some(pct) = ctr("sm__warps_active.avg.pct_of_peak_sustained_active") {
            kf.achieved_occupancy_pct = Some(pct);
            s.insert("achieved_occupancy_pct".into(), Val::Num(pct));
        }
        // Launch geometry: waves against SIMDs.
        if let (Some(g), Some(b), Some(atom), Some(p)) = (x.grid, x.block, ctx.atom, ctx.product) {
            let wave = atom.default_wave_size.max(1) as f64;
            let threads = (b[0].max(1) * b[1].max(1) * b[2].max(1)) as f64;
            let groups = (g[0].max(1) as f64) * (g[1].max(1) as f64) * (g[2].max(1) as f64);
            let waves = groups * (threads / wave).ceil();
            let simds = simds_of(atom, p);
            let wps = waves / simds;
            kf.launch = Some(LaunchFit { grid: g, block: b, waves, simds, waves_per_simd: wps });
            s.insert("launch_waves".into(), Val::Num(waves));
            s.insert("simds".into(), Val::Num(simds));
            s.insert("launch_waves_per_simd".into(), Val::Num(wps));
        }
    }

    // ISA resources.
    let launch_block = sample.and_then(|x| x.block).map(|b| b[0].max(1) * b[1].max(1) * b[2].max(1));
    let mut res = KernelResources::default();
    let mut occ_source = None;
    if let Some((lvl, (o, k))) = isa {
        let r = &k.resources;
        let spills = k.spills();
        kf.isa = Some(IsaFit {
            kernel: k.name.clone(),
            object: object_label(o),
            arch: o.arch.clone(),
            how: lvl,
            vgpr: r.vgpr,
            sgpr: r.sgpr,
            agpr: r.agpr,
            spills,
            scratch_bytes: r.scratch_bytes,
            lds_bytes: r.lds_bytes,
            wave_size: r.wave_size,
            max_workgroup_size: r.max_workgroup_size,
            mix_status: o.mix_status.clone(),
        });
        for (key, v) in [("vgpr", r.vgpr), ("sgpr", r.sgpr), ("agpr", r.agpr), ("wave_size", r.wave_size)] {
            if let Some(v) = v {
                s.insert(key.into(), Val::Num(v as f64));
            }
        }
        if let Some(v) = spills {
            s.insert("spills".into(), Val::Num(v));
        }
        s.insert("scratch_bytes".into(), Val::Num(r.scratch_bytes.unwrap_or(0) as f64));
        if let Some(v) = r.lds_bytes {
            s.insert("lds_bytes".into(), Val::Num(v as f64));
        }
        let (bars, matrix) = mix_signals(k, &mut s);
        kf.mix = bars;
        kf.matrix.used_ops = matrix;
        let vendor = if o.vendor == "nvidia" { Vendor::Nvidia } else { Vendor::Amd };
        res = k.occupancy_resources(vendor, launch_block);
        occ_source = Some("isa manifest + arch db");
    } else if let Some(x) = sample {
        // Profilers that report launch resources (ncu) give occupancy without a manifest.
        if x.registers.is_some() {
            res.regs_per_thread = x.registers;
            res.vgprs = x.registers;
            res.shared_bytes = x.shared_bytes.unwrap_or(0);
            res.lds_bytes = x.shared_bytes.unwrap_or(0);
            occ_source = Some("profiler launch data + arch db");
        }
    }
    if launch_block.is_some() {
        res.workgroup_size = launch_block;
    }
    if let (Some(atom), Some(src)) = (ctx.atom, occ_source) {
        if atom.vendor == Vendor::Nvidia && res.vgprs.is_some() && res.regs_per_thread.is_none() {
            res.regs_per_thread = res.vgprs;
        }
        if atom.vendor == Vendor::Nvidia {
            res.vgprs = None;
            res.sgprs = None;
        } else {
            res.regs_per_thread = None;
        }
        match katlas_arch::occupancy(atom, &res) {
            Ok(o) => {
                let limiter = serde_json::to_value(o.limiter).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
                // AMD reports waves/SIMD; NVIDIA warps/SM: per sub-partition it is comparable.
                let per_simd = match atom.vendor {
                    Vendor::Amd => o.achieved as f64,
                    Vendor::Nvidia => o.achieved as f64 / atom.nvidia.as_ref().map(|n| n.sub_partitions).unwrap_or(4).max(1) as f64,
                };
                s.insert("occupancy_waves".into(), Val::Num(per_simd));
                s.insert(
                    "occupancy_max".into(),
                    Val::Num(match atom.vendor {
                        Vendor::Amd => o.max as f64,
                        Vendor::Nvidia => o.max as f64 / atom.nvidia.as_ref().map(|n| n.sub_partitions).unwrap_or(4).max(1) as f64,
                    }),
                );
                s.insert("occupancy_pct".into(), Val::Num(100.0 * o.fraction));
                s.insert("occupancy_limiter".into(), Val::Str(limiter.clone()));
                kf.occupancy = Some(OccupancyFit {
                    achieved: o.achieved,
                    max: o.max,
                    unit: o.unit,
                    limiter,
                    source: src.into(),
                    groups: o.groups,
                    group_unit: o.group_unit,
                    bounds: o.per_limit_groups.iter().map(|(l, n)| (l.name().to_string(), *n)).collect(),
                    notes: o.notes,
                });
            }
            Err(e) => {
                kf.occupancy = None;
                s.insert("occupancy_error".into(), Val::Str(e.to_string()));
            }
        }
    }
    if let Some(a) = ctx.atom {
        kf.matrix.available = a.matrix.iter().map(|(u, t)| format!("{u}: {}", t.join(", "))).collect();
    }

    // Rules.
    let mut flags = ctx.phase_flags.clone();
    let (findings, emitted, unknown) =
        eval_rules(rules.fit.rules.iter().filter(|r| r.scope == RuleScope::Kernel), Facts { values: &s, flags: &flags }, Some(&name));
    kf.findings = findings;
    flags.extend(emitted);
    kf.emitted = flags;
    kf.unknown = unknown;
    kf.signals = s;
    kf
}
