//! `isa diff A B`: per-kernel resource and instruction-mix deltas between two manifests —
//! the "did spills rise, did matrix ops disappear" check before measuring a candidate.

use crate::manifest::{IsaManifest, Kernel};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub const SCHEMA: &str = "katlas.isa.diff.v1";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct IsaDiff {
    pub schema: String,
    pub a: String,
    pub b: String,
    pub kernels: Vec<KernelDiff>,
    /// Kernels only in A / only in B, as `arch:name`.
    pub removed: Vec<String>,
    pub added: Vec<String>,
    /// Count of kernels whose spills rose or whose matrix instructions fell.
    pub regressions: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Delta {
    pub field: String,
    pub a: Option<i64>,
    pub b: Option<i64>,
    pub delta: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct KernelDiff {
    pub arch: String,
    pub name: String,
    pub resources: Vec<Delta>,
    pub mix: Vec<Delta>,
    /// Human flags such as `spills rose`, `matrix ops disappeared`.
    pub flags: Vec<String>,
}

fn key(arch: &str, k: &Kernel) -> (String, String) {
    (arch.to_string(), k.name.clone())
}

fn resource_values(k: &Kernel) -> BTreeMap<&'static str, Option<i64>> {
    let r = &k.resources;
    let f = |x: Option<u32>| x.map(i64::from);
    let g = |x: Option<u64>| x.map(|v| v as i64);
    BTreeMap::from([
        ("vgpr", f(r.vgpr)),
        ("sgpr", f(r.sgpr)),
        ("agpr", f(r.agpr)),
        ("vgpr_spill", f(r.vgpr_spill)),
        ("sgpr_spill", f(r.sgpr_spill)),
        ("lds_bytes", g(r.lds_bytes)),
        ("scratch_bytes", g(r.scratch_bytes)),
        ("spill_store_bytes", g(r.spill_store_bytes)),
        ("spill_load_bytes", g(r.spill_load_bytes)),
        ("wave_size", f(r.wave_size)),
        ("barriers", f(r.barriers)),
    ])
}

pub fn diff(a: &IsaManifest, b: &IsaManifest, a_name: &str, b_name: &str) -> IsaDiff {
    let index = |m: &IsaManifest| {
        let mut out: BTreeMap<(String, String), Kernel> = BTreeMap::new();
        for o in &m.objects {
            for k in &o.kernels {
                out.entry(key(&o.arch, k)).or_insert_with(|| k.clone());
            }
        }
        out
    };
    let ia = index(a);
    let ib = index(b);
    let mut kernels = Vec::new();
    let mut regressions = 0;
    for (k, ka) in &ia {
        let Some(kb) = ib.get(k) else { continue };
        let (ra, rb) = (resource_values(ka), resource_values(kb));
        let mut resources = Vec::new();
        for (field, va) in &ra {
            let vb = rb.get(field).copied().flatten();
            if *va != vb {
                resources.push(Delta { field: field.to_string(), a: *va, b: vb, delta: vb.unwrap_or(0) - va.unwrap_or(0) });
            }
        }
        let mut mix = Vec::new();
        if let (Some(ma), Some(mb)) = (&ka.mix, &kb.mix) {
            let cats: BTreeSet<&str> = ma.categories.keys().chain(mb.categories.keys()).map(|c| c.as_ref()).collect();
            for c in cats {
                let x = ma.categories.get(c).copied().unwrap_or(0) as i64;
                let y = mb.categories.get(c).copied().unwrap_or(0) as i64;
                if x != y {
                    mix.push(Delta { field: c.to_string(), a: Some(x), b: Some(y), delta: y - x });
                }
            }
            if ma.total != mb.total {
                mix.push(Delta { field: "total".into(), a: Some(ma.total as i64), b: Some(mb.total as i64), delta: mb.total as i64 - ma.total as i64 });
            }
        }
        let mut flags = Vec::new();
        let rose = |d: &Delta| d.delta > 0;
        if resources.iter().any(|d| d.field.contains("spill") && rose(d)) {
            flags.push("spills rose".to_string());
        }
        if resources.iter().any(|d| d.field == "scratch_bytes" && rose(d)) {
            flags.push("scratch rose".to_string());
        }
        if let Some(d) = mix.iter().find(|d| d.field == "matrix" && d.delta < 0) {
            flags.push(if d.b == Some(0) { "matrix ops disappeared".into() } else { "matrix ops fell".into() });
        }
        if !flags.is_empty() {
            regressions += 1;
        }
        if !resources.is_empty() || !mix.is_empty() {
            kernels.push(KernelDiff { arch: k.0.clone(), name: k.1.clone(), resources, mix, flags });
        }
    }
    let removed = ia.keys().filter(|k| !ib.contains_key(*k)).map(|(a, n)| format!("{a}:{n}")).collect();
    let added = ib.keys().filter(|k| !ia.contains_key(*k)).map(|(a, n)| format!("{a}:{n}")).collect();
    IsaDiff { schema: SCHEMA.into(), a: a_name.into(), b: b_name.into(), kernels, removed, added, regressions }
}
