//! Which file each matrix atom compiles for each kernel: chip tag > family tag > base, with
//! families taken from the architecture table (`gfx1151` is in `gfx115`, so `x.gfx11.hip`
//! does not reach it unless the table says `also_families = ["gfx11"]`).

use crate::config::{Settings, TagMode};
use crate::sources::{groups, Lang, Source};
use katlas_arch::FamilyRule;
pub use katlas_arch::Via;
use serde::Serialize;

/// One (atom, file) pair the build compiles.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Resolution {
    pub atom: String,
    pub kernel: String,
    pub group: String,
    pub file: String,
    pub via: Via,
    pub lang: Lang,
    /// The other tagged files the atom could also have taken (ambiguous family tags).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ambiguous_with: Vec<String>,
}

/// True when `src`'s tag reaches `atom` (chip: exact name; family: the atom's declared families).
pub fn tag_reaches(s: &Settings, src: &Source, atom: &str) -> Option<Via> {
    let a = &s.atom(atom).name;
    katlas_arch::tag_reach(src.tag.as_deref(), a, &s.db.family_tags(a, FamilyRule::Table))
}

/// Resolve every kernel for every atom of `atoms`.
pub fn resolve(s: &Settings, sources: &[Source], atoms: &[String]) -> Vec<Resolution> {
    let mut out = Vec::new();
    let by_group = groups(sources);
    for atom in atoms {
        let a = s.atom(atom);
        let lang = Lang::for_vendor(a.vendor);
        for (group, files) in &by_group {
            let cands: Vec<(&Source, Via)> = files.iter().filter(|f| f.lang == lang).filter_map(|f| tag_reaches(s, f, atom).map(|v| (*f, v))).collect();
            let pick = |via: Via| -> Vec<&Source> { cands.iter().filter(|(_, v)| *v == via).map(|(f, _)| *f).collect() };
            let (chip, mut fam, base) = (pick(Via::Chip), pick(Via::Family), pick(Via::Base));
            // The atom's primary family outranks families it only answers to.
            fam.sort_by_key(|f| f.tag.as_deref() != Some(a.family.as_str()));
            let mk = |f: &Source, via: Via, amb: Vec<String>| Resolution {
                atom: atom.clone(),
                kernel: f.kernel.clone(),
                group: group.to_string(),
                file: f.file.clone(),
                via,
                lang,
                ambiguous_with: amb,
            };
            match s.tag_mode {
                TagMode::Replace => {
                    if let Some(f) = chip.first() {
                        out.push(mk(f, Via::Chip, vec![]));
                    } else if let Some(f) = fam.first() {
                        let amb = fam[1..].iter().map(|x| x.file.clone()).collect();
                        out.push(mk(f, Via::Family, amb));
                    } else if let Some(f) = base.first() {
                        out.push(mk(f, Via::Base, vec![]));
                    }
                }
                TagMode::Add => {
                    for f in base {
                        out.push(mk(f, Via::Base, vec![]));
                    }
                    for f in fam {
                        out.push(mk(f, Via::Family, vec![]));
                    }
                    for f in chip {
                        out.push(mk(f, Via::Chip, vec![]));
                    }
                }
            }
        }
    }
    out
}
