//! Loading, patching, validating and querying the database.

use crate::error::ArchError;
use crate::model::*;
use crate::names::{canonical_atom, is_filler, tokens};
use crate::raw::{self, line_of, Located, RawAtom, RawProduct};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The embedded data files: (path relative to the repository root, contents).
pub const BUILTIN_FILES: &[(&str, &str)] = &[
    ("data/arch/amd.toml", include_str!("../../../data/arch/amd.toml")),
    ("data/arch/nvidia.toml", include_str!("../../../data/arch/nvidia.toml")),
    ("data/arch/products-amd.toml", include_str!("../../../data/arch/products-amd.toml")),
    ("data/arch/products-nvidia.toml", include_str!("../../../data/arch/products-nvidia.toml")),
    ("data/arch/measured.toml", include_str!("../../../data/arch/measured.toml")),
];

/// The architecture database: atoms and products, builtin data plus project overrides.
#[derive(Debug, Clone, Serialize)]
pub struct ArchDb {
    schema: &'static str,
    atoms: Vec<Atom>,
    products: Vec<Product>,
    /// Files the database was built from, in load order.
    files: Vec<String>,
}

#[derive(Default)]
struct Collected {
    atoms: Vec<Located<RawAtom>>,
    products: Vec<Located<RawProduct>>,
    measured: Vec<Located<raw::RawMeasured>>,
}

impl Collected {
    /// Adds one file's records; `patching` files may patch records of the same name.
    fn add(&mut self, file: &str, text: &str, patching: bool) -> Result<(), ArchError> {
        let parsed = raw::parse_file(file, text)?;
        if let Some(s) = &parsed.schema {
            if s != crate::SCHEMA {
                return Err(ArchError::Data {
                    file: file.into(),
                    line: 1,
                    key: "schema".into(),
                    message: format!("expected `{}`, found `{s}`", crate::SCHEMA),
                });
            }
        }
        for a in parsed.atom {
            let line = line_of(text, a.name.span().start);
            let name = canonical_atom(a.name.get_ref());
            if name != *a.name.get_ref() {
                return Err(data_err(file, line, "atom.name", format!("`{}` is not canonical (write `{name}`)", a.name.get_ref())));
            }
            merge(&mut self.atoms, a, &name, |x| x.name.get_ref(), RawAtom::patch, (file, line), patching, "atom")?;
        }
        for p in parsed.product {
            let line = line_of(text, p.name.span().start);
            let name = p.name.get_ref().clone();
            merge(&mut self.products, p, &name, |x| x.name.get_ref(), RawProduct::patch, (file, line), patching, "product")?;
        }
        for m in parsed.measured {
            let line = line_of(text, m.product.span().start);
            self.measured.push(Located { file: file.into(), text_line: line, item: m });
        }
        Ok(())
    }
}

/// Add `item` (named `name`) to `list`. A patching file patches the record of
/// the same name; otherwise a second record of one name is an error naming
/// both places.
#[allow(clippy::too_many_arguments)]
fn merge<T>(
    list: &mut Vec<Located<T>>,
    item: T,
    name: &str,
    name_of: impl Fn(&T) -> &String,
    patch: fn(&mut T, &T),
    (file, line): (&str, usize),
    patching: bool,
    kind: &str,
) -> Result<(), ArchError> {
    match list.iter_mut().find(|x| name_of(&x.item) == name) {
        Some(prev) if patching => {
            patch(&mut prev.item, &item);
            prev.file = file.into();
            prev.text_line = line;
            Ok(())
        }
        Some(prev) => Err(data_err(file, line, &format!("{kind}.name"), format!("duplicate {kind} `{name}` (first at {}:{})", prev.file, prev.text_line))),
        None => {
            list.push(Located { file: file.into(), text_line: line, item });
            Ok(())
        }
    }
}

fn data_err(file: &str, line: usize, key: &str, message: impl Into<String>) -> ArchError {
    ArchError::Data { file: file.into(), line, key: key.into(), message: message.into() }
}

impl ArchDb {
    /// The embedded database, parsed once. The embedded data is validated by the crate's
    /// tests; should it ever fail to load, this returns an empty database rather than panic.
    pub fn builtin() -> &'static ArchDb {
        static DB: OnceLock<ArchDb> = OnceLock::new();
        DB.get_or_init(|| ArchDb::load(None).unwrap_or_else(|_| ArchDb { schema: crate::SCHEMA, atoms: vec![], products: vec![], files: vec![] }))
    }

    /// Builtin data patched by project overrides. `overrides` is a directory whose
    /// `*.toml` files are read in name order (a missing directory means no overrides) or
    /// a single `.toml` file. A record whose name exists patches only the keys it sets;
    /// a new name adds a record. Errors name the file, line and key.
    pub fn load(overrides: Option<&Path>) -> Result<ArchDb, ArchError> {
        let mut c = Collected::default();
        let mut files = Vec::new();
        for (file, text) in BUILTIN_FILES {
            c.add(file, text, false)?;
            files.push(file.to_string());
        }
        if let Some(path) = overrides {
            for f in override_files(path)? {
                let shown = f.display().to_string();
                let text = std::fs::read_to_string(&f).map_err(|e| ArchError::Io { path: shown.clone(), message: e.to_string() })?;
                c.add(&shown, &text, true)?;
                files.push(shown);
            }
        }
        Self::build(c, files)
    }

    /// Database from explicit file contents only (no builtin data): for tests and tools.
    pub fn from_sources(sources: &[(&str, &str)]) -> Result<ArchDb, ArchError> {
        let mut c = Collected::default();
        for (file, text) in sources {
            c.add(file, text, false)?;
        }
        Self::build(c, sources.iter().map(|(f, _)| f.to_string()).collect())
    }

    fn build(c: Collected, files: Vec<String>) -> Result<ArchDb, ArchError> {
        let mut atoms = Vec::with_capacity(c.atoms.len());
        for loc in &c.atoms {
            let merged = inherit_chain(&c.atoms, loc)?;
            atoms.push(raw::resolve_atom(&merged)?);
        }
        let mut products = Vec::with_capacity(c.products.len());
        for loc in &c.products {
            products.push((loc, raw::resolve_product(loc)?));
        }
        for m in &c.measured {
            let name = m.item.product.get_ref();
            let Some((_, p)) = products.iter_mut().find(|(_, p)| &p.name == name) else {
                return Err(data_err(&m.file, m.text_line, "measured.product", format!("unknown product `{name}`")));
            };
            match m.item.quantity.as_str() {
                "copy_bw_gbps" => {
                    if !(m.item.value.is_finite() && m.item.value > 0.0) {
                        return Err(data_err(&m.file, m.text_line, "measured.value", "must be > 0"));
                    }
                    p.measured_bw_gbps = Some(Sourced {
                        value: m.item.value,
                        source: format!("{}; file {}; {}; {}", m.item.source, m.item.file, m.item.date, m.item.method),
                        measured: true,
                    });
                }
                other => return Err(data_err(&m.file, m.text_line, "measured.quantity", format!("unknown quantity `{other}` (known: copy_bw_gbps)"))),
            }
        }
        let db = ArchDb { schema: crate::SCHEMA, atoms, products: Vec::new(), files };
        let mut db = db;
        for (loc, p) in &products {
            db.validate_product(loc, p)?;
        }
        db.products = products.into_iter().map(|(_, p)| p).collect();
        for (loc, a) in c.atoms.iter().zip(db.atoms.iter()) {
            db.validate_atom(loc, a)?;
        }
        db.validate_classes()?;
        Ok(db)
    }

    fn validate_atom(&self, loc: &Located<RawAtom>, a: &Atom) -> Result<(), ArchError> {
        let e = |key: &str, msg: String| data_err(&loc.file, loc.text_line, &format!("atom[{}].{key}", a.name), msg);
        if !a.wave_sizes.contains(&a.default_wave_size) {
            return Err(e("default_wave_size", format!("{} not in wave_sizes {:?}", a.default_wave_size, a.wave_sizes)));
        }
        if let Some(v) = &a.variant_of {
            match self.atom(v) {
                Some(base) if base.vendor == a.vendor && base.name != a.name => {}
                _ => return Err(e("variant_of", format!("`{v}` is not another atom of the same vendor"))),
            }
        }
        for r in &a.runs_on {
            match self.atoms.iter().find(|x| x.name == *r) {
                Some(d) if d.vendor == a.vendor => {}
                _ => return Err(e("runs_on", format!("`{r}` is not an atom of the same vendor"))),
            }
        }
        if let Some(amd) = &a.amd {
            for w in &a.wave_sizes {
                match amd.vgpr(*w) {
                    Some(f) if f.granule > 0 && f.total >= f.granule && f.max_per_wave > 0 => {}
                    Some(_) => return Err(e(&format!("amd.vgpr_wave{w}"), "granule, total and max_per_wave must be > 0, total >= granule".into())),
                    None => return Err(e(&format!("amd.vgpr_wave{w}"), format!("wave size {w} is supported but has no VGPR file"))),
                }
            }
            let nonzero = [
                ("amd.simds_per_cu", amd.simds_per_cu as u64),
                ("amd.cus_per_wgp", amd.cus_per_wgp as u64),
                ("amd.max_waves_per_simd", amd.max_waves_per_simd as u64),
                ("amd.sgpr_granule", amd.sgpr_granule as u64),
                ("amd.lds_bytes_per_cu", amd.lds_bytes_per_cu),
                ("amd.lds_granule", amd.lds_granule),
                ("amd.max_workgroup_size", amd.max_workgroup_size as u64),
                ("amd.max_workgroups_per_cu", amd.max_workgroups_per_cu as u64),
                ("amd.agpr_align", amd.agpr_align as u64),
            ];
            for (k, v) in nonzero {
                if v == 0 {
                    return Err(e(k, "must be > 0".into()));
                }
            }
            if amd.agpr_mode != AgprMode::None && amd.agprs_per_wave == 0 {
                return Err(e("amd.agprs_per_wave", "AGPR mode set but no AGPRs".into()));
            }
            if !amd.sgpr_waves.windows(2).all(|w| w[0][0] < w[1][0] && w[0][1] >= w[1][1]) {
                return Err(e("amd.sgpr_waves", "steps must ascend in SGPRs and not ascend in waves".into()));
            }
            if !amd.sgpr_waves.is_empty() && amd.sgpr_waves_floor == 0 {
                return Err(e("amd.sgpr_waves_floor", "needed when sgpr_waves is given".into()));
            }
        }
        if let Some(nv) = &a.nvidia {
            if nv.max_warps_per_sm * 32 != nv.max_threads_per_sm {
                return Err(e("nvidia.max_threads_per_sm", "must be 32 x max_warps_per_sm".into()));
            }
            if nv.smem_per_block_optin > nv.smem_per_sm || nv.reg_alloc_unit == 0 || nv.sub_partitions == 0 || nv.smem_granule == 0 {
                return Err(e("nvidia", "inconsistent shared memory or register allocation limits".into()));
            }
            if let Some(&max) = nv.smem_carveouts_kib.iter().max() {
                if max as u64 * 1024 != nv.smem_per_sm {
                    return Err(e("nvidia.smem_carveouts_kib", "largest carveout must equal smem_per_sm".into()));
                }
            }
        }
        Ok(())
    }

    fn validate_product(&self, loc: &Located<RawProduct>, p: &Product) -> Result<(), ArchError> {
        let e = |key: &str, msg: String| data_err(&loc.file, loc.text_line, &format!("product[{}].{key}", p.name), msg);
        match self.atom(&p.atom) {
            None => return Err(e("atom", format!("unknown atom `{}`", p.atom))),
            Some(a) if a.vendor != p.vendor => return Err(e("vendor", format!("atom `{}` is {}", a.name, a.vendor.as_str()))),
            Some(a) if a.name != p.atom => return Err(e("atom", format!("write the canonical name `{}`", a.name))),
            _ => {}
        }
        if tokens(&p.name).iter().all(|t| is_filler(t)) {
            return Err(e("name", "name has no distinguishing word".into()));
        }
        Ok(())
    }

    /// A class belongs to one vendor; a family to one vendor.
    fn validate_classes(&self) -> Result<(), ArchError> {
        let mut class_vendor: BTreeMap<&str, (Vendor, &str)> = BTreeMap::new();
        let mut family_vendor: BTreeMap<&str, (Vendor, &str)> = BTreeMap::new();
        for a in &self.atoms {
            for (map, key, what) in [(&mut class_vendor, a.class.as_str(), "class"), (&mut family_vendor, a.family.as_str(), "family")] {
                let (v, first) = *map.entry(key).or_insert((a.vendor, a.name.as_str()));
                if v != a.vendor {
                    return Err(data_err(
                        "data/arch",
                        0,
                        &format!("atom[{}].{what}", a.name),
                        format!("{what} `{key}` also used by {first} of another vendor"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Atom by any common spelling: `gfx90a`, `gfx90a:xnack-`, bundle target ids,
    /// `sm_90a`, `sm90`, `compute_90`, `9.0`. Target-id features are stripped.
    /// An accelerator suffix the table does not list (`sm_120a`, `sm_100f`) falls back to
    /// the base atom, whose resources it shares.
    pub fn atom(&self, name: &str) -> Option<&Atom> {
        let key = canonical_atom(name);
        if let Some(a) = self.atoms.iter().find(|a| a.name == key) {
            return Some(a);
        }
        let base = key.strip_prefix("sm_").and_then(|n| n.strip_suffix(['a', 'f']))?;
        self.atoms.iter().find(|a| a.name.strip_prefix("sm_") == Some(base))
    }

    /// All atoms in data order.
    pub fn atoms(&self) -> impl Iterator<Item = &Atom> {
        self.atoms.iter()
    }

    /// All products in data order.
    pub fn products(&self) -> impl Iterator<Item = &Product> {
        self.products.iter()
    }

    /// Product by a vendor string from nvidia-smi, rocminfo or ncu ("NVIDIA H200",
    /// "AMD Radeon RX 7900 XTX", "NVIDIA A100-SXM4-80GB"). Matching is by word set,
    /// ignoring case, punctuation and vendor filler words ("AMD", "NVIDIA", "Radeon",
    /// "GeForce", "Instinct", "Pro"...); the distinguishing words must match a product
    /// name or alias exactly, so "NVIDIA H200 NVL" never falls back to "NVIDIA H200".
    pub fn product(&self, name: &str) -> Option<&Product> {
        let want = key_words(name);
        if want.is_empty() {
            return None;
        }
        self.products.iter().find(|p| std::iter::once(&p.name).chain(p.aliases.iter()).any(|n| key_words(n) == want))
    }

    /// Products whose chip compiles for `atom` (any spelling of the atom).
    pub fn products_for_atom(&self, atom: &str) -> Vec<&Product> {
        let key = canonical_atom(atom);
        self.products.iter().filter(|p| p.atom == key).collect()
    }

    /// Atoms answering to a family tag (`gfx11` -> gfx1100..gfx1103), including atoms
    /// that declare the tag in `also_families`. A full atom name returns that atom.
    pub fn family_members(&self, family: &str) -> Vec<&Atom> {
        let f = family.trim().to_ascii_lowercase();
        let members: Vec<&Atom> = self.atoms.iter().filter(|a| a.family == f || a.also_families.contains(&f)).collect();
        if members.is_empty() {
            return self.atom(&f).into_iter().collect();
        }
        members
    }

    /// Families known to the database.
    pub fn families(&self) -> BTreeSet<&str> {
        self.atoms.iter().map(|a| a.family.as_str()).collect()
    }

    /// Files the database was built from, in load order.
    pub fn files(&self) -> &[String] {
        &self.files
    }
}

fn key_words(s: &str) -> BTreeSet<String> {
    tokens(s).into_iter().filter(|t| !is_filler(t)).collect()
}

fn override_files(path: &Path) -> Result<Vec<PathBuf>, ArchError> {
    let io = |e: std::io::Error| ArchError::Io { path: path.display().to_string(), message: e.to_string() };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(io(e)),
        Ok(m) if m.is_file() => Ok(vec![path.to_path_buf()]),
        Ok(_) => {
            let mut v = Vec::new();
            for entry in std::fs::read_dir(path).map_err(io)? {
                let p = entry.map_err(io)?.path();
                if p.extension().is_some_and(|x| x == "toml") {
                    v.push(p);
                }
            }
            v.sort();
            Ok(v)
        }
    }
}

/// Applies `inherit` parents (outermost first) under the record's own keys.
fn inherit_chain(all: &[Located<RawAtom>], loc: &Located<RawAtom>) -> Result<Located<RawAtom>, ArchError> {
    let mut chain = vec![loc];
    let mut cur = loc;
    while let Some(parent) = &cur.item.inherit {
        let Some(p) = all.iter().find(|x| x.item.name.get_ref() == parent) else {
            return Err(data_err(&cur.file, cur.text_line, &format!("atom[{}].inherit", cur.item.name.get_ref()), format!("unknown atom `{parent}`")));
        };
        if chain.iter().any(|c| std::ptr::eq(*c, p)) || chain.len() > 16 {
            return Err(data_err(&cur.file, cur.text_line, &format!("atom[{}].inherit", cur.item.name.get_ref()), "inheritance cycle"));
        }
        chain.push(p);
        cur = p;
    }
    let mut merged = chain.pop().expect("chain has the record itself").item.clone();
    while let Some(next) = chain.pop() {
        merged.patch(&next.item);
        merged.name = next.item.name.clone();
    }
    // Variants and inheritance never pass a parent's `variant_of` down silently.
    if loc.item.variant_of.is_none() {
        merged.variant_of = None;
    }
    // which devices run the code is said per target, never inherited
    if loc.item.runs_on.is_none() {
        merged.runs_on = None;
    }
    Ok(Located { file: loc.file.clone(), text_line: loc.text_line, item: merged })
}
