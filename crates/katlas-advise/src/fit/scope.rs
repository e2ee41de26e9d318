//! Context and scope: the product the kernels are judged against, and which ISA kernel a
//! profile name joins (lowest match level first, never widened to other arches).

use crate::isa::{CodeObject, IsaManifest, Kernel as IsaKernel};
use crate::names::{match_level, MatchLevel};
use crate::rules::Rules;
use katlas_arch::{ArchDb, Product};
use katlas_model::Row;

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

/// Product choice with the reason it was chosen.
pub(super) fn resolve_product<'a>(
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

pub(super) fn object_label(o: &CodeObject) -> String {
    if o.chain_text.is_empty() {
        o.path.clone()
    } else {
        o.chain_text.clone()
    }
}

pub(super) type Pair<'a> = (&'a CodeObject, &'a IsaKernel);

/// The best ISA match of a profile name: lowest level, then the first in manifest order.
pub(super) fn best_match<'a>(name: &str, demangled: Option<&str>, isa: &[Pair<'a>]) -> Option<(MatchLevel, Pair<'a>, Vec<String>)> {
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

/// The arch atom the kernels are read against and where it came from: `--arch`, the row, the
/// product, then a manifest with a single arch.
pub(super) fn choose_arch(input: &FitInput) -> (Option<String>, Option<String>) {
    if let Some(a) = input.arch {
        return (Some(a.to_string()), Some("--arch".into()));
    }
    if let Some(a) = input.row.and_then(|r| r.arch.clone().or_else(|| r.identity.arch().map(str::to_string))) {
        return (Some(a), Some("row".into()));
    }
    if let Some(p) = input.product.and_then(|p| input.db.product(p)) {
        return (Some(p.atom.clone()), Some("product".into()));
    }
    if let Some(m) = input.isa {
        if let [one] = m.arches().as_slice() {
            return (Some(one.clone()), Some("ISA manifest (single arch)".into()));
        }
    }
    (None, None)
}

/// The ISA kernels a profile name of `atom` may join: the atom's own objects and those of its
/// variants; every kernel when no arch is known.
pub(super) fn isa_for_arch<'a>(db: &ArchDb, all: &[Pair<'a>], atom: Option<&str>) -> Vec<Pair<'a>> {
    match atom {
        Some(a) => all
            .iter()
            .copied()
            .filter(|(o, _)| katlas_arch::canonical_atom(&o.arch) == a || db.atom(&o.arch).and_then(|x| x.variant_of.clone()).as_deref() == Some(a))
            .collect(),
        None => all.to_vec(),
    }
}
