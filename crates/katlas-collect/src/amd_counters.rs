//! AMD hardware counters to bytes moved to and from video memory, per arch family. The
//! formulas are data (`data/amd_counters.toml`, copied from rocprofiler-sdk's counter
//! definitions); this module reads them and sums one dispatch's counters with them.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const BUILTIN: &str = include_str!("../../../data/amd_counters.toml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Read,
    Write,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterBytes {
    pub schema: String,
    pub derived: Vec<Derived>,
    pub family: Vec<Family>,
}

/// A derived counter rocprofv3 already summed (`FETCH_SIZE`, in KiB).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Derived {
    pub direction: Direction,
    pub names: Vec<String>,
    pub bytes_per_unit: f64,
}

/// Raw counters of one arch family and the bytes each event stands for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    pub name: String,
    pub archs: Vec<String>,
    pub read: Vec<Term>,
    pub write: Vec<Term>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    pub counter: String,
    pub bytes: f64,
}

pub fn table() -> &'static CounterBytes {
    static T: OnceLock<CounterBytes> = OnceLock::new();
    T.get_or_init(|| toml::from_str(BUILTIN).expect("data/amd_counters.toml"))
}

/// A counter's value under its name or its `_sum` spelling (the CSV sums over instances).
fn value(counters: &BTreeMap<String, f64>, name: &str) -> Option<f64> {
    counters.get(name).or_else(|| counters.get(&format!("{name}_sum"))).copied()
}

fn has(names: &dyn Fn(&str) -> bool, name: &str) -> bool {
    names(name) || names(&format!("{name}_sum"))
}

/// Bytes of one direction and the counters they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Bytes {
    pub bytes: f64,
    pub from: String,
}

impl Family {
    fn terms(&self, d: Direction) -> &[Term] {
        match d {
            Direction::Read => &self.read,
            Direction::Write => &self.write,
        }
    }

    /// Whether every counter of both directions is among `names`.
    pub fn complete(&self, names: &dyn Fn(&str) -> bool) -> bool {
        self.read.iter().chain(&self.write).all(|t| has(names, &t.counter))
    }

    /// The counters of this family missing from `names`.
    pub fn missing(&self, names: &dyn Fn(&str) -> bool) -> Vec<String> {
        self.read.iter().chain(&self.write).filter(|t| !has(names, &t.counter)).map(|t| t.counter.clone()).collect()
    }
}

/// Gfx name without target features (`gfx90a:sramecc+:xnack-` -> `gfx90a`).
fn bare_arch(arch: &str) -> &str {
    arch.split(':').next().unwrap_or(arch).trim()
}

impl CounterBytes {
    pub fn family_for_arch(&self, arch: &str) -> Option<&Family> {
        let a = bare_arch(arch);
        self.family.iter().find(|f| f.archs.iter().any(|x| x.eq_ignore_ascii_case(a)))
    }

    /// With no arch known: the one family whose counters are all in the file.
    pub fn family_by_counters(&self, names: &dyn Fn(&str) -> bool) -> Option<&Family> {
        let mut hits = self.family.iter().filter(|f| f.complete(names));
        let first = hits.next()?;
        hits.next().is_none().then_some(first)
    }

    /// Whether any counter named in the table (derived or raw) is among `names`.
    pub fn knows_any(&self, names: &dyn Fn(&str) -> bool) -> bool {
        self.derived.iter().flat_map(|d| &d.names).any(|n| names(n))
            || self.family.iter().flat_map(|f| f.read.iter().chain(&f.write)).any(|t| has(names, &t.counter))
    }

    /// Bytes of one direction from one dispatch's counters: a derived counter first, else the
    /// family's raw formula when every one of its counters is there.
    pub fn bytes(&self, counters: &BTreeMap<String, f64>, family: Option<&Family>, d: Direction) -> Option<Bytes> {
        for der in self.derived.iter().filter(|x| x.direction == d) {
            if let Some((n, v)) = der.names.iter().find_map(|n| counters.get(n).map(|v| (n, *v))) {
                return Some(Bytes { bytes: v * der.bytes_per_unit, from: n.clone() });
            }
        }
        let f = family?;
        let terms = f.terms(d);
        let mut sum = 0.0;
        for t in terms {
            sum += value(counters, &t.counter)? * t.bytes;
        }
        Some(Bytes { bytes: sum.max(0.0), from: format!("{} {}", f.name, terms.iter().map(|t| t.counter.as_str()).collect::<Vec<_>>().join("+")) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kv: &[(&str, f64)]) -> BTreeMap<String, f64> {
        kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn table_loads_and_every_family_has_both_directions() {
        let t = table();
        assert_eq!(t.schema, "katlas.amd_counters.v1");
        assert!(t.family.len() >= 3);
        for f in &t.family {
            assert!(!f.read.is_empty() && !f.write.is_empty(), "{}", f.name);
            assert!(!f.archs.is_empty(), "{}", f.name);
        }
        assert_eq!(t.family_for_arch("gfx942").unwrap().name, "cdna3");
        assert_eq!(t.family_for_arch("gfx90a:sramecc+:xnack-").unwrap().name, "gcn5-cdna2");
        assert_eq!(t.family_for_arch("gfx1100").unwrap().name, "rdna1-3");
        assert!(t.family_for_arch("gfx1200").is_none(), "gfx12 has no WRITE_SIZE definition");
    }

    /// The gfx942 FETCH_SIZE/WRITE_SIZE definitions of rocprofiler-sdk, evaluated by hand.
    #[test]
    fn cdna3_formula_matches_the_rocprofiler_definition() {
        let t = table();
        let f = t.family_for_arch("gfx942");
        let (rd, bubble, rd32, wr, wr64) = (1000.0, 300.0, 100.0, 500.0, 200.0);
        let c = m(&[("TCC_EA0_RDREQ", rd), ("TCC_BUBBLE_sum", bubble), ("TCC_EA0_RDREQ_32B", rd32), ("TCC_EA0_WRREQ", wr), ("TCC_EA0_WRREQ_64B", wr64)]);
        let fetch_kib = (bubble * 128.0 + (rd - bubble - rd32) * 64.0 + rd32 * 32.0) / 1024.0;
        let write_kib = ((wr - wr64) * 32.0 + wr64 * 64.0) / 1024.0;
        assert_eq!(t.bytes(&c, f, Direction::Read).unwrap().bytes, fetch_kib * 1024.0);
        assert_eq!(t.bytes(&c, f, Direction::Write).unwrap().bytes, write_kib * 1024.0);
        // A missing counter gives no bytes rather than a partial sum.
        let partial = m(&[("TCC_EA0_RDREQ", rd)]);
        assert!(t.bytes(&partial, f, Direction::Read).is_none());
    }

    #[test]
    fn derived_counters_win_and_are_kib() {
        let t = table();
        let c = m(&[("FETCH_SIZE", 2.0), ("TCC_EA_RDREQ", 1.0), ("TCC_EA_RDREQ_32B", 0.0), ("WriteSize", 0.5)]);
        let f = t.family_for_arch("gfx90a");
        assert_eq!(t.bytes(&c, f, Direction::Read), Some(Bytes { bytes: 2048.0, from: "FETCH_SIZE".into() }));
        assert_eq!(t.bytes(&c, f, Direction::Write).unwrap().bytes, 512.0);
    }

    #[test]
    fn family_by_counters_only_when_unambiguous() {
        let t = table();
        let names = ["GL2C_EA_RDREQ_32B", "GL2C_EA_RDREQ_64B", "GL2C_EA_RDREQ_96B", "GL2C_EA_RDREQ_128B", "GL2C_MC_WRREQ", "GL2C_EA_WRREQ_64B"];
        let has = |n: &str| names.contains(&n);
        assert_eq!(t.family_by_counters(&has).unwrap().name, "rdna1-3");
        assert!(t.family_by_counters(&|n: &str| n == "SQ_WAVES").is_none());
        assert!(!t.knows_any(&|n: &str| n == "SQ_WAVES"));
    }
}
