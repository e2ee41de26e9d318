//! The TOML shape of `data/arch/*.toml` and its resolution into the public types.
//!
//! Every field of a raw record is optional so that one record can `inherit` another
//! and a project override can patch single keys; required keys are checked after
//! inheritance, naming file, line and key.

use crate::error::ArchError;
use crate::model::*;
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(default)]
    pub atom: Vec<RawAtom>,
    #[serde(default)]
    pub product: Vec<RawProduct>,
    #[serde(default)]
    pub measured: Vec<RawMeasured>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAtom {
    pub name: Spanned<String>,
    pub inherit: Option<String>,
    pub vendor: Option<Vendor>,
    pub family: Option<String>,
    pub also_families: Option<Vec<String>>,
    pub class: Option<String>,
    pub codenames: Option<Vec<String>>,
    pub variant_of: Option<String>,
    pub runs_on: Option<Vec<String>>,
    pub wave_sizes: Option<Vec<u32>>,
    pub default_wave_size: Option<u32>,
    pub caps: Option<Vec<String>>,
    pub matrix: Option<BTreeMap<String, Vec<String>>>,
    pub dot: Option<Vec<String>>,
    pub amd: Option<RawAmd>,
    pub nvidia: Option<RawNv>,
    pub source: Option<String>,
    pub sources: Option<BTreeMap<String, String>>,
    pub notes: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAmd {
    pub simds_per_cu: Option<u32>,
    pub cus_per_wgp: Option<u32>,
    pub wgp_mode_default: Option<bool>,
    pub max_waves_per_simd: Option<u32>,
    pub vgpr_wave32: Option<VgprFile>,
    pub vgpr_wave64: Option<VgprFile>,
    pub agpr_mode: Option<AgprMode>,
    pub agprs_per_wave: Option<u32>,
    pub agpr_align: Option<u32>,
    pub sgprs_per_wave: Option<u32>,
    pub sgprs_per_simd: Option<u32>,
    pub sgpr_granule: Option<u32>,
    pub sgpr_waves: Option<Vec<[u32; 2]>>,
    pub sgpr_waves_floor: Option<u32>,
    pub lds_bytes_per_cu: Option<u64>,
    pub lds_bytes_per_wgp: Option<u64>,
    pub lds_max_per_workgroup: Option<u64>,
    pub lds_granule: Option<u64>,
    pub max_workgroups_per_cu: Option<u32>,
    pub max_workgroups_per_wgp: Option<u32>,
    pub max_workgroup_size: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNv {
    pub compute_capability: Option<String>,
    pub max_warps_per_sm: Option<u32>,
    pub max_threads_per_sm: Option<u32>,
    pub max_blocks_per_sm: Option<u32>,
    pub max_threads_per_block: Option<u32>,
    pub regs_per_sm: Option<u32>,
    pub max_regs_per_block: Option<u32>,
    pub max_regs_per_thread: Option<u32>,
    pub reg_alloc_unit: Option<u32>,
    pub sub_partitions: Option<u32>,
    pub smem_per_sm: Option<u64>,
    pub smem_per_block_optin: Option<u64>,
    pub smem_per_block_default: Option<u64>,
    pub smem_reserved_per_block: Option<u64>,
    pub smem_granule: Option<u64>,
    pub smem_carveouts_kib: Option<Vec<u32>>,
}

/// A number, or a number with its own source.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a number, or a table { value = <number>, source = \"...\" }")]
pub(crate) enum RawNum {
    Plain(f64),
    Sourced {
        value: f64,
        source: String,
        #[serde(default)]
        measured: bool,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProduct {
    pub name: Spanned<String>,
    pub vendor: Option<Vendor>,
    pub atom: Option<String>,
    pub aliases: Option<Vec<String>>,
    pub units: Option<RawNum>,
    pub boost_clock_mhz: Option<RawNum>,
    pub memory_gb: Option<RawNum>,
    pub memory_type: Option<String>,
    pub peak_bw_gbps: Option<RawNum>,
    pub peak_rates: Option<BTreeMap<String, RawNum>>,
    pub llc_mib: Option<RawNum>,
    pub l2_resident_mib: Option<RawNum>,
    pub notes: Option<Vec<String>>,
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMeasured {
    pub product: Spanned<String>,
    /// What was measured; only `copy_bw_gbps` is understood today.
    pub quantity: String,
    pub value: f64,
    pub source: String,
    pub file: String,
    pub date: String,
    pub method: String,
}

/// A raw record with the file it was read from (for error messages).
#[derive(Debug, Clone)]
pub(crate) struct Located<T> {
    pub file: String,
    pub text_line: usize,
    pub item: T,
}

/// 1-based line of byte offset `pos` in `text`.
pub(crate) fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Parses one data file; errors name the file, the line and the key on that line.
pub(crate) fn parse_file(file: &str, text: &str) -> Result<RawFile, ArchError> {
    toml::from_str::<RawFile>(text).map_err(|e| {
        let (line, key) = match e.span() {
            Some(span) => {
                let line = line_of(text, span.start);
                let line_text = text.lines().nth(line - 1).unwrap_or("");
                let key = line_text.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_string()).unwrap_or_else(|| line_text.trim().to_string());
                (line, key)
            }
            None => (0, String::new()),
        };
        ArchError::Data { file: file.to_string(), line, key, message: e.message().trim().to_string() }
    })
}

macro_rules! patch {
    ($dst:expr, $src:expr; $($f:ident),* $(,)?) => {
        $( if $src.$f.is_some() { $dst.$f = $src.$f.clone(); } )*
    };
}

impl RawAmd {
    fn patch(&mut self, o: &RawAmd) {
        patch!(self, o; simds_per_cu, cus_per_wgp, wgp_mode_default, max_waves_per_simd,
            vgpr_wave32, vgpr_wave64, agpr_mode, agprs_per_wave, agpr_align, sgprs_per_wave,
            sgprs_per_simd, sgpr_granule, sgpr_waves, sgpr_waves_floor, lds_bytes_per_cu,
            lds_bytes_per_wgp, lds_max_per_workgroup, lds_granule, max_workgroups_per_cu,
            max_workgroups_per_wgp, max_workgroup_size);
    }
}

impl RawNv {
    fn patch(&mut self, o: &RawNv) {
        patch!(self, o; compute_capability, max_warps_per_sm, max_threads_per_sm,
            max_blocks_per_sm, max_threads_per_block, regs_per_sm, max_regs_per_block,
            max_regs_per_thread, reg_alloc_unit, sub_partitions, smem_per_sm,
            smem_per_block_optin, smem_per_block_default, smem_reserved_per_block,
            smem_granule, smem_carveouts_kib);
    }
}

impl RawAtom {
    /// Applies the keys `o` sets over `self` (nested vendor tables key by key).
    pub(crate) fn patch(&mut self, o: &RawAtom) {
        patch!(self, o; inherit, vendor, family, also_families, class, codenames, variant_of, runs_on, wave_sizes,
            default_wave_size, caps, matrix, dot, source, notes);
        if let Some(s) = &o.sources {
            self.sources.get_or_insert_with(BTreeMap::new).extend(s.clone());
        }
        match (&mut self.amd, &o.amd) {
            (Some(a), Some(b)) => a.patch(b),
            (None, Some(b)) => self.amd = Some(b.clone()),
            _ => {}
        }
        match (&mut self.nvidia, &o.nvidia) {
            (Some(a), Some(b)) => a.patch(b),
            (None, Some(b)) => self.nvidia = Some(b.clone()),
            _ => {}
        }
    }
}

impl RawProduct {
    /// Applies the keys `o` sets over `self`; peak rates merge entry by entry.
    pub(crate) fn patch(&mut self, o: &RawProduct) {
        patch!(self, o; vendor, atom, aliases, units, boost_clock_mhz, memory_gb,
            memory_type, peak_bw_gbps, llc_mib, l2_resident_mib, notes, source);
        if let Some(r) = &o.peak_rates {
            self.peak_rates.get_or_insert_with(BTreeMap::new).extend(r.clone());
        }
    }
}

struct Ctx<'a> {
    file: &'a str,
    line: usize,
    what: String,
}

impl Ctx<'_> {
    fn err(&self, key: &str, message: impl Into<String>) -> ArchError {
        ArchError::Data { file: self.file.to_string(), line: self.line, key: format!("{}.{key}", self.what), message: message.into() }
    }
    fn req<T: Clone>(&self, v: &Option<T>, key: &str) -> Result<T, ArchError> {
        v.clone().ok_or_else(|| self.err(key, "missing required key"))
    }
}

/// Turns a fully inherited raw atom into an [`Atom`], checking required keys.
pub(crate) fn resolve_atom(loc: &Located<RawAtom>) -> Result<Atom, ArchError> {
    let r = &loc.item;
    let name = r.name.get_ref().clone();
    let c = Ctx { file: &loc.file, line: loc.text_line, what: format!("atom[{name}]") };
    let vendor = c.req(&r.vendor, "vendor")?;
    let family = c.req(&r.family, "family")?;
    let class = c.req(&r.class, "class")?;
    let wave_sizes = c.req(&r.wave_sizes, "wave_sizes")?;
    let default_wave_size = c.req(&r.default_wave_size, "default_wave_size")?;
    let amd = match (vendor, &r.amd) {
        (Vendor::Amd, Some(a)) => Some(resolve_amd(a, &c)?),
        (Vendor::Amd, None) => return Err(c.err("amd", "AMD atom without [amd] limits")),
        (Vendor::Nvidia, Some(_)) => return Err(c.err("amd", "NVIDIA atom with [amd] limits")),
        _ => None,
    };
    let nvidia = match (vendor, &r.nvidia) {
        (Vendor::Nvidia, Some(n)) => Some(resolve_nv(n, &c)?),
        (Vendor::Nvidia, None) => return Err(c.err("nvidia", "NVIDIA atom without [nvidia] limits")),
        (Vendor::Amd, Some(_)) => return Err(c.err("nvidia", "AMD atom with [nvidia] limits")),
        _ => None,
    };
    let source = c.req(&r.source, "source")?;
    if source.trim().is_empty() {
        return Err(c.err("source", "empty source"));
    }
    Ok(Atom {
        name,
        vendor,
        family,
        also_families: r.also_families.clone().unwrap_or_default(),
        class,
        codenames: r.codenames.clone().unwrap_or_default(),
        variant_of: r.variant_of.clone(),
        runs_on: r.runs_on.clone().unwrap_or_default(),
        wave_sizes,
        default_wave_size,
        caps: r.caps.clone().unwrap_or_default(),
        matrix: r.matrix.clone().unwrap_or_default(),
        dot: r.dot.clone().unwrap_or_default(),
        amd,
        nvidia,
        source,
        sources: r.sources.clone().unwrap_or_default(),
        notes: r.notes.clone().unwrap_or_default(),
    })
}

fn resolve_amd(a: &RawAmd, c: &Ctx) -> Result<AmdLimits, ArchError> {
    Ok(AmdLimits {
        simds_per_cu: c.req(&a.simds_per_cu, "amd.simds_per_cu")?,
        cus_per_wgp: c.req(&a.cus_per_wgp, "amd.cus_per_wgp")?,
        wgp_mode_default: c.req(&a.wgp_mode_default, "amd.wgp_mode_default")?,
        max_waves_per_simd: c.req(&a.max_waves_per_simd, "amd.max_waves_per_simd")?,
        vgpr_wave32: a.vgpr_wave32.clone(),
        vgpr_wave64: a.vgpr_wave64.clone(),
        agpr_mode: c.req(&a.agpr_mode, "amd.agpr_mode")?,
        agprs_per_wave: a.agprs_per_wave.unwrap_or(0),
        agpr_align: a.agpr_align.unwrap_or(1),
        sgprs_per_wave: c.req(&a.sgprs_per_wave, "amd.sgprs_per_wave")?,
        sgprs_per_simd: a.sgprs_per_simd.unwrap_or(0),
        sgpr_granule: c.req(&a.sgpr_granule, "amd.sgpr_granule")?,
        sgpr_waves: a.sgpr_waves.clone().unwrap_or_default(),
        sgpr_waves_floor: a.sgpr_waves_floor.unwrap_or(0),
        lds_bytes_per_cu: c.req(&a.lds_bytes_per_cu, "amd.lds_bytes_per_cu")?,
        lds_bytes_per_wgp: c.req(&a.lds_bytes_per_wgp, "amd.lds_bytes_per_wgp")?,
        lds_max_per_workgroup: c.req(&a.lds_max_per_workgroup, "amd.lds_max_per_workgroup")?,
        lds_granule: c.req(&a.lds_granule, "amd.lds_granule")?,
        max_workgroups_per_cu: c.req(&a.max_workgroups_per_cu, "amd.max_workgroups_per_cu")?,
        max_workgroups_per_wgp: c.req(&a.max_workgroups_per_wgp, "amd.max_workgroups_per_wgp")?,
        max_workgroup_size: c.req(&a.max_workgroup_size, "amd.max_workgroup_size")?,
    })
}

fn resolve_nv(n: &RawNv, c: &Ctx) -> Result<NvLimits, ArchError> {
    Ok(NvLimits {
        compute_capability: c.req(&n.compute_capability, "nvidia.compute_capability")?,
        max_warps_per_sm: c.req(&n.max_warps_per_sm, "nvidia.max_warps_per_sm")?,
        max_threads_per_sm: c.req(&n.max_threads_per_sm, "nvidia.max_threads_per_sm")?,
        max_blocks_per_sm: c.req(&n.max_blocks_per_sm, "nvidia.max_blocks_per_sm")?,
        max_threads_per_block: c.req(&n.max_threads_per_block, "nvidia.max_threads_per_block")?,
        regs_per_sm: c.req(&n.regs_per_sm, "nvidia.regs_per_sm")?,
        max_regs_per_block: c.req(&n.max_regs_per_block, "nvidia.max_regs_per_block")?,
        max_regs_per_thread: c.req(&n.max_regs_per_thread, "nvidia.max_regs_per_thread")?,
        reg_alloc_unit: c.req(&n.reg_alloc_unit, "nvidia.reg_alloc_unit")?,
        sub_partitions: c.req(&n.sub_partitions, "nvidia.sub_partitions")?,
        smem_per_sm: c.req(&n.smem_per_sm, "nvidia.smem_per_sm")?,
        smem_per_block_optin: c.req(&n.smem_per_block_optin, "nvidia.smem_per_block_optin")?,
        smem_per_block_default: c.req(&n.smem_per_block_default, "nvidia.smem_per_block_default")?,
        smem_reserved_per_block: c.req(&n.smem_reserved_per_block, "nvidia.smem_reserved_per_block")?,
        smem_granule: c.req(&n.smem_granule, "nvidia.smem_granule")?,
        smem_carveouts_kib: n.smem_carveouts_kib.clone().unwrap_or_default(),
    })
}

fn sourced(v: &RawNum, default_source: &Option<String>, c: &Ctx, key: &str) -> Result<Sourced<f64>, ArchError> {
    match v {
        RawNum::Plain(x) => match default_source {
            Some(s) if !s.trim().is_empty() => Ok(Sourced { value: *x, source: s.clone(), measured: false }),
            _ => Err(c.err(key, "number without a source (give `source` on the product or {value, source})")),
        },
        RawNum::Sourced { value, source, measured } => {
            if source.trim().is_empty() {
                return Err(c.err(key, "empty source"));
            }
            Ok(Sourced { value: *value, source: source.clone(), measured: *measured })
        }
    }
}

/// Turns a raw product into a [`Product`], checking required keys and sources.
pub(crate) fn resolve_product(loc: &Located<RawProduct>) -> Result<Product, ArchError> {
    let r = &loc.item;
    let name = r.name.get_ref().clone();
    let c = Ctx { file: &loc.file, line: loc.text_line, what: format!("product[{name}]") };
    let src = &r.source;
    let opt = |v: &Option<RawNum>, key: &str| -> Result<Option<Sourced<f64>>, ArchError> { v.as_ref().map(|v| sourced(v, src, &c, key)).transpose() };
    let units = sourced(&c.req(&r.units, "units")?, src, &c, "units")?;
    if units.value < 1.0 || units.value.fract() != 0.0 || units.value > u32::MAX as f64 {
        return Err(c.err("units", format!("unit count must be a positive integer, got {}", units.value)));
    }
    let peak_bw = sourced(&c.req(&r.peak_bw_gbps, "peak_bw_gbps")?, src, &c, "peak_bw_gbps")?;
    let mut peak_rates = BTreeMap::new();
    for (k, v) in r.peak_rates.clone().unwrap_or_default() {
        let s = sourced(&v, src, &c, &format!("peak_rates.{k}"))?;
        if !(s.value.is_finite() && s.value > 0.0) {
            return Err(c.err(&format!("peak_rates.{k}"), "rate must be > 0"));
        }
        peak_rates.insert(k, s);
    }
    if !(peak_bw.value.is_finite() && peak_bw.value > 0.0) {
        return Err(c.err("peak_bw_gbps", "bandwidth must be > 0"));
    }
    Ok(Product {
        name,
        vendor: c.req(&r.vendor, "vendor")?,
        atom: c.req(&r.atom, "atom")?,
        aliases: r.aliases.clone().unwrap_or_default(),
        units: Sourced { value: units.value as u32, source: units.source, measured: units.measured },
        boost_clock_mhz: opt(&r.boost_clock_mhz, "boost_clock_mhz")?,
        memory_gb: opt(&r.memory_gb, "memory_gb")?,
        memory_type: r.memory_type.clone(),
        peak_bw_gbps: peak_bw,
        measured_bw_gbps: None,
        peak_rates,
        llc_mib: opt(&r.llc_mib, "llc_mib")?,
        l2_resident_mib: opt(&r.l2_resident_mib, "l2_resident_mib")?,
        notes: r.notes.clone().unwrap_or_default(),
        source: src.clone().unwrap_or_default(),
    })
}
