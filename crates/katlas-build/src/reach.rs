//! `katlas reach`: what the matrix actually compiles and what host code actually loads.

use crate::config::{Settings, TagMode};
use crate::error::Result;
use crate::host_refs::{find_ref, scan_host, source_entries};
use crate::resolve::{resolve, Resolution};
use crate::sources::{discover, Lang, Source, TagKind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

pub const REACH_SCHEMA: &str = "katlas.reach.v1";

/// A kernel source no matrix atom compiles.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Unreached {
    pub file: String,
    pub kernel: String,
    pub tag: Option<String>,
    pub tag_kind: Option<TagKind>,
    pub reason: String,
}

/// A source the build compiles that no host code references.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Undispatched {
    pub file: String,
    pub kernel: String,
    /// Atoms that compile it.
    pub atoms: Vec<String>,
    /// Names looked for: the module name and the entry points it defines.
    pub names: Vec<String>,
}

/// Evidence that a compiled source is loaded: which name, where.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Dispatched {
    pub file: String,
    pub kernel: String,
    pub name: String,
    pub at: String,
}

/// Members of one family that compile different files for one kernel.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Divergence {
    pub family: String,
    pub kernel: String,
    pub files: BTreeMap<String, String>,
}

/// A family-tagged file that a name-prefix rule (hipfire's first-five-characters) would send
/// to atoms the table keeps out of that family.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PrefixTrap {
    pub file: String,
    pub tag: String,
    pub atoms: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct ReachSummary {
    pub atoms: usize,
    pub sources: usize,
    pub resolutions: usize,
    pub unreached: usize,
    pub undispatched: usize,
    pub divergent: usize,
    pub host_files: usize,
}

/// `katlas.reach.v1`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReachReport {
    pub schema: String,
    pub matrix: Vec<String>,
    pub tag_mode: TagMode,
    pub kernel_roots: Vec<String>,
    pub dispatch_roots: Vec<String>,
    pub resolutions: Vec<Resolution>,
    pub unreached: Vec<Unreached>,
    pub undispatched: Vec<Undispatched>,
    pub dispatched: Vec<Dispatched>,
    pub divergent_families: Vec<Divergence>,
    pub prefix_traps: Vec<PrefixTrap>,
    /// What could not be checked, and why.
    pub notes: Vec<String>,
    pub summary: ReachSummary,
}

impl ReachReport {
    /// Unreached tagged files or undispatched sources: a failed gate (exit 1).
    pub fn has_problems(&self) -> bool {
        !self.unreached.is_empty() || !self.undispatched.is_empty()
    }
}

fn unreached_reason(s: &Settings, src: &Source) -> String {
    let lang_atoms: Vec<&String> = s.matrix.iter().filter(|a| Lang::for_vendor(s.atom(a).vendor) == src.lang).collect();
    match (src.tag.as_deref(), src.tag_kind) {
        (_, Some(TagKind::Unknown)) => format!("tag `{}` is neither an atom nor a family of the arch table", src.tag.as_deref().unwrap_or("")),
        (Some(t), Some(TagKind::Chip)) => {
            let a = s.db.atom(t).expect("chip tags are atoms");
            if Lang::for_vendor(a.vendor) != src.lang {
                format!("chip tag {t} is a {} atom but the file is {}", a.vendor.as_str(), src.lang.as_str())
            } else {
                format!("chip tag {t} is not in the matrix ({})", s.matrix.join(" "))
            }
        }
        (Some(t), Some(TagKind::Family)) => {
            let members: Vec<&String> = lang_atoms
                .iter()
                .copied()
                .filter(|a| {
                    let at = s.atom(a);
                    at.family == t || at.also_families.iter().any(|f| f == t)
                })
                .collect();
            if members.is_empty() {
                let all: Vec<String> = s.db.family_members(t).iter().map(|a| a.name.clone()).collect();
                format!("no matrix atom is in family {t} (members: {})", all.join(" "))
            } else {
                format!("every matrix member of {t} ({}) takes a chip-tagged file", members.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
            }
        }
        _ => {
            if lang_atoms.is_empty() {
                format!("no matrix atom compiles {}", src.lang.as_str())
            } else {
                "every matrix atom takes a tagged file".to_string()
            }
        }
    }
}

pub fn reach(s: &Settings) -> Result<ReachReport> {
    let sources = discover(s, &s.kernel_roots)?;
    let resolutions = resolve(s, &sources, &s.matrix);
    let resolved: BTreeMap<&str, Vec<&str>> = resolutions.iter().fold(BTreeMap::new(), |mut m, r| {
        m.entry(r.file.as_str()).or_insert_with(Vec::new).push(r.atom.as_str());
        m
    });
    let unreached: Vec<Unreached> = sources
        .iter()
        .filter(|x| !resolved.contains_key(x.file.as_str()))
        .map(|x| Unreached { file: x.file.clone(), kernel: x.kernel.clone(), tag: x.tag.clone(), tag_kind: x.tag_kind, reason: unreached_reason(s, x) })
        .collect();

    let mut notes = Vec::new();
    let mut undispatched = Vec::new();
    let mut dispatched = Vec::new();
    let mut host_files = 0;
    if s.dispatch_roots.is_empty() {
        notes.push(format!(
            "no dispatch roots ([project] dispatch_roots or [reach] dispatch_roots in {}): compiled-but-never-dispatched not checked",
            s.config_file.display()
        ));
    } else {
        for r in &s.dispatch_roots {
            if !r.is_dir() {
                notes.push(format!("dispatch root {} is not a directory", s.rel(r)));
            }
        }
        let skip: BTreeSet<PathBuf> = sources.iter().map(|x| x.path.clone()).collect();
        let host = scan_host(s, &skip);
        host_files = host.files.len();
        if host.files.is_empty() {
            notes.push("no host files found under the dispatch roots".into());
        }
        for src in sources.iter().filter(|x| resolved.contains_key(x.file.as_str())) {
            let mut names: Vec<String> = vec![src.kernel.clone()];
            names.extend(source_entries(&src.path, &s.include_dirs, &s.kernel_macros));
            names.dedup();
            if s.allow_undispatched.iter().any(|a| *a == src.kernel || *a == src.file) {
                continue;
            }
            match names.iter().find_map(|n| find_ref(&host.tokens, n).map(|(t, at)| (t.to_string(), at.to_string()))) {
                Some((name, at)) => dispatched.push(Dispatched { file: src.file.clone(), kernel: src.kernel.clone(), name, at }),
                None => undispatched.push(Undispatched {
                    file: src.file.clone(),
                    kernel: src.kernel.clone(),
                    atoms: resolved[src.file.as_str()].iter().map(|a| a.to_string()).collect(),
                    names,
                }),
            }
        }
    }

    // Families (from the table) whose matrix members compile different files for a kernel.
    let mut divergent_families = Vec::new();
    let mut fams: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for a in &s.matrix {
        fams.entry(s.atom(a).family.as_str()).or_default().push(a);
    }
    let groups: BTreeSet<&str> = resolutions.iter().map(|r| r.group.as_str()).collect();
    for (fam, members) in &fams {
        if members.len() < 2 {
            continue;
        }
        for g in &groups {
            let files: BTreeMap<String, String> = members
                .iter()
                .map(|a| {
                    let mut f: Vec<&str> = resolutions.iter().filter(|r| r.group == *g && &r.atom == *a).map(|r| r.file.as_str()).collect();
                    f.sort();
                    ((*a).clone(), if f.is_empty() { "-".to_string() } else { f.join(" + ") })
                })
                .collect();
            let distinct: BTreeSet<&String> = files.values().collect();
            if distinct.len() > 1 {
                let kernel = g.rsplit('/').next().unwrap_or(g).to_string();
                divergent_families.push(Divergence { family: fam.to_string(), kernel, files });
            }
        }
    }

    let mut prefix_traps = Vec::new();
    for src in sources.iter().filter(|x| x.tag_kind == Some(TagKind::Family)) {
        let t = src.tag.as_deref().unwrap_or("");
        let atoms: Vec<String> = s
            .matrix
            .iter()
            .filter(|a| a.starts_with(t))
            .filter(|a| {
                let at = s.atom(a);
                at.family != t && !at.also_families.iter().any(|f| f == t)
            })
            .cloned()
            .collect();
        if !atoms.is_empty() {
            prefix_traps.push(PrefixTrap { file: src.file.clone(), tag: t.to_string(), atoms });
        }
    }

    let summary = ReachSummary {
        atoms: s.matrix.len(),
        sources: sources.len(),
        resolutions: resolutions.len(),
        unreached: unreached.len(),
        undispatched: undispatched.len(),
        divergent: divergent_families.len(),
        host_files,
    };
    Ok(ReachReport {
        schema: REACH_SCHEMA.into(),
        matrix: s.matrix.clone(),
        tag_mode: s.tag_mode,
        kernel_roots: s.kernel_roots.iter().map(|p| s.rel(p)).collect(),
        dispatch_roots: s.dispatch_roots.iter().map(|p| s.rel(p)).collect(),
        resolutions,
        unreached,
        undispatched,
        dispatched,
        divergent_families,
        prefix_traps,
        notes,
        summary,
    })
}
