//! `katlas reach`: what the matrix actually compiles and what host code actually loads.

use crate::config::{Settings, TagMode};
use crate::error::Result;
use crate::host_refs::{host_files, source_entries};
use crate::resolve::{resolve, Resolution, Via};
use crate::sources::{discover, groups, Lang, Source, TagKind};
use loads::{rule_family_hazard, ArgKind, FamilyRule, HostIndex, LoadSite, Mentions};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The runtime model (load patterns, family rule, selectors) and the host-code index are
/// katlas-collect's, so `katlas reach` and `katlas provenance` read host code identically.
pub use katlas_collect::loads;

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
    /// `file:line` of the load (the line holding the name's literal), or of the reference.
    pub at: String,
    /// The load call (`ensure_kernel`, `include_str!`), or `reference` when no load pattern
    /// applies and any mention of the name counts.
    pub via: String,
    /// Where a `"{file}"` load pattern embeds this very file.
    pub embedded_at: Option<String>,
}

/// A matrix atom for which the project's runtime family rule (`[reach] family_rule`) and the
/// arch table disagree on a kernel's file.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FamilyHazard {
    pub atom: String,
    pub kernel: String,
    /// The family tag involved.
    pub tag: String,
    /// What the runtime's rule takes for the atom (`-`: nothing).
    pub runtime_file: String,
    /// What `katlas build` compiles for it (the table; `-`: nothing).
    pub compiled: String,
    pub reason: String,
    /// False for an atom of the arch table outside the matrix: the build compiles nothing for
    /// it, but the runtime would take this file on it.
    pub in_matrix: bool,
}

/// An atom on which a run-time selector (an arm of a `*_for_arch` match, or a
/// `[[reach.selectors]]` entry) loads a file that `katlas build` does not compile for it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SelectorHazard {
    pub atom: String,
    pub kernel: String,
    /// The selecting function (`gemv_mq3g256_lloyd_for_arch`).
    pub selector: String,
    /// `file:line` of the arm, when read from the host code.
    pub at: Option<String>,
    /// What the runtime loads on the atom (a knob's default choice).
    pub runtime_file: String,
    /// What `katlas build` compiles for it (the table; `-`: nothing).
    pub compiled: String,
    /// False for an atom outside the matrix that the selector names.
    pub in_matrix: bool,
    pub reason: String,
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
    pub hazards: usize,
    #[serde(default)]
    pub selector_hazards: usize,
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
    /// The runtime's family rule (`table`, `prefix5`).
    pub family_rule: String,
    /// Atoms the runtime's family rule sends a file the arch table would not (or the reverse).
    pub family_hazards: Vec<FamilyHazard>,
    /// Atoms on which a run-time selector loads a file the build does not compile for them.
    pub selector_hazards: Vec<SelectorHazard>,
    /// The load patterns dispatch evidence came from; empty: any reference counted.
    pub load_patterns: Vec<String>,
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
    let mut unreached: Vec<Unreached> = sources
        .iter()
        .filter(|x| !resolved.contains_key(x.file.as_str()))
        .map(|x| Unreached { file: x.file.clone(), kernel: x.kernel.clone(), tag: x.tag.clone(), tag_kind: x.tag_kind, reason: unreached_reason(s, x) })
        .collect();

    let mut notes = Vec::new();
    let mut undispatched = Vec::new();
    let mut dispatched = Vec::new();
    let mut host_files_n = 0;
    let mut load_patterns: Vec<String> = Vec::new();
    let mut selectors = s.selectors.clone();
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
        let files = host_files(s, &skip);
        host_files_n = files.len();
        if files.is_empty() {
            notes.push("no host files found under the dispatch roots".into());
        }
        let patterns = &s.load_patterns;
        let mut host =
            HostIndex::scan_with(&files, patterns, if patterns.is_empty() { Mentions::First } else { Mentions::None }, false, &s.root, &s.selector_functions);
        selectors.extend(host.arch_selectors());
        let (mut name_mode, mut embed_mode) = (host.has_kind(ArgKind::Name), host.has_kind(ArgKind::File));
        if !patterns.is_empty() && !name_mode && !embed_mode {
            notes.push(format!(
                "no load pattern ({}) matches under the dispatch roots: any reference to a kernel's name counts as dispatched",
                patterns.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join(", ")
            ));
            host = HostIndex::scan(&files, &[], Mentions::First, false, &s.root);
            (name_mode, embed_mode) = (false, false);
        }
        if name_mode || embed_mode {
            load_patterns = patterns.iter().map(|p| p.text.clone()).collect();
        }
        let call = |l: &LoadSite| patterns[l.pattern as usize].call();
        let embed_calls =
            patterns.iter().filter(|p| p.has(ArgKind::File)).map(|p| p.call()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", ");
        let embeds = |file: &str| -> Option<String> { host.embeds_of(file).first().map(|l| host.at(l.file, l.line)) };
        for src in sources.iter().filter(|x| resolved.contains_key(x.file.as_str())) {
            let mut names: Vec<String> = vec![src.kernel.clone()];
            names.extend(source_entries(&src.path, &s.include_dirs, &s.kernel_macros));
            names.dedup();
            if s.allow_undispatched.iter().any(|a| *a == src.kernel || *a == src.file) {
                continue;
            }
            // (name, at, via)
            let named: Option<(String, String, String)> = if name_mode || embed_mode {
                names.iter().find_map(|n| host.first_name_load(n).map(|l| (l.value.clone(), host.at(l.file, l.line), call(l))))
            } else {
                names.iter().find_map(|n| host.first_mention(n).map(|(t, m)| (t.to_string(), host.at(m.file, m.line), "reference".to_string())))
            };
            let embedded = if embed_mode { embeds(&src.file) } else { None };
            let atoms: Vec<String> = resolved[src.file.as_str()].iter().map(|a| a.to_string()).collect();
            if embed_mode && embedded.is_none() {
                // A sibling of the same kernel is embedded: the runtime takes that one (for the
                // atom: its chip file, else a family file, else the base).
                let emb: Vec<(&Source, String)> = sources
                    .iter()
                    .filter(|o| o.group == src.group && o.file != src.file && o.lang == src.lang)
                    .filter_map(|o| embeds(&o.file).map(|at| (o, at)))
                    .collect();
                let a = s.atom(&atoms[0]);
                let fams: Vec<String> = [FamilyRule::Table, s.family_rule].iter().flat_map(|r| s.db.family_tags(&a.name, *r)).collect();
                let fam_ok = |t: &str| fams.iter().any(|f| f == t);
                let sib = emb
                    .iter()
                    .find(|(o, _)| o.tag.as_deref() == Some(a.name.as_str()))
                    .or_else(|| emb.iter().find(|(o, _)| o.tag.as_deref().is_some_and(fam_ok)))
                    .or_else(|| emb.iter().find(|(o, _)| o.tag.is_none()))
                    .or(emb.first())
                    .map(|(o, at)| (o.file.clone(), at.clone()));
                if let Some((sib, at)) = sib {
                    let loaded = named.as_ref().map(|(n, a, _)| format!(", loading `{n}` at {a}")).unwrap_or_default();
                    unreached.push(Unreached {
                        file: src.file.clone(),
                        kernel: src.kernel.clone(),
                        tag: src.tag.clone(),
                        tag_kind: src.tag_kind,
                        reason: format!(
                            "compiled for {}, but no load pattern embeds it ({embed_calls}): the runtime takes {sib} (embedded at {at}){loaded}",
                            atoms.join(" ")
                        ),
                    });
                    continue;
                }
            }
            match (named, embedded) {
                (Some((name, at, via)), embedded_at) => {
                    dispatched.push(Dispatched { file: src.file.clone(), kernel: src.kernel.clone(), name, at, via, embedded_at })
                }
                (None, Some(at)) => {
                    let l = host.embeds_of(&src.file)[0];
                    dispatched.push(Dispatched {
                        file: src.file.clone(),
                        kernel: src.kernel.clone(),
                        name: l.value.clone(),
                        at: at.clone(),
                        via: call(l),
                        embedded_at: Some(at),
                    })
                }
                (None, None) => undispatched.push(Undispatched { file: src.file.clone(), kernel: src.kernel.clone(), atoms, names }),
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

    let family_hazards = family_hazards(s, &sources, &resolutions);
    let selector_hazards = selector_hazards(s, &sources, &resolutions, &selectors);

    let summary = ReachSummary {
        atoms: s.matrix.len(),
        sources: sources.len(),
        resolutions: resolutions.len(),
        unreached: unreached.len(),
        undispatched: undispatched.len(),
        divergent: divergent_families.len(),
        host_files: host_files_n,
        hazards: family_hazards.len(),
        selector_hazards: selector_hazards.len(),
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
        family_rule: s.family_rule.name(),
        family_hazards,
        selector_hazards,
        load_patterns,
        notes,
        summary,
    })
}

/// For each kernel a selector covers and each atom it applies to (the matrix, and atoms outside
/// it that a selector names), the file the runtime loads (the first selector that applies; a
/// knob's default) against what the table compiles.
fn selector_hazards(s: &Settings, sources: &[Source], resolutions: &[Resolution], selectors: &[loads::Selector]) -> Vec<SelectorHazard> {
    let mut out = Vec::new();
    let by_group = groups(sources);
    // Atoms outside the matrix: what the table would compile for them, were they in it.
    let outside: Vec<String> = selectors
        .iter()
        .flat_map(|x| x.archs.iter())
        .filter(|a| *a != "*" && !s.matrix.contains(a) && s.db.atom(a).is_some())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let would = resolve(s, sources, &outside);
    for (group, files) in &by_group {
        let kernel = group.rsplit('/').next().unwrap_or(group);
        let sels: Vec<&loads::Selector> = selectors.iter().filter(|x| x.kernel == kernel).collect();
        if sels.is_empty() {
            continue;
        }
        let mut atoms: Vec<(String, bool)> = s.matrix.iter().map(|a| (a.clone(), true)).collect();
        for a in sels.iter().flat_map(|x| x.archs.iter()).filter(|a| *a != "*" && s.db.atom(a).is_some()) {
            if !atoms.iter().any(|(b, _)| b == a) {
                atoms.push((a.clone(), false));
            }
        }
        for (atom, in_matrix) in atoms {
            let Some(sel) = sels.iter().find(|x| x.applies_to(&atom)) else { continue };
            let Some((_, want)) = sel.choices().first().copied() else { continue };
            let Some(src) = files.iter().find(|f| f.file == want || f.file.rsplit('/').next() == Some(want)) else { continue };
            if s.db.atom(&atom).is_none_or(|a| Lang::for_vendor(a.vendor) != src.lang) {
                continue;
            }
            let plan = if in_matrix { resolutions } else { &would };
            let compiled: Vec<&str> = plan.iter().filter(|r| r.group == *group && r.atom == atom).map(|r| r.file.as_str()).collect();
            if compiled.contains(&src.file.as_str()) {
                continue;
            }
            let compiled = if compiled.is_empty() { "-".to_string() } else { compiled.join(" + ") };
            let at = sel.at.clone();
            let arm = match (&at, sel.archs == ["*"]) {
                (Some(a), true) => format!("{}'s default arm ({a})", sel.label()),
                (Some(a), false) => format!("{}'s arm listing {atom} ({a})", sel.label()),
                (None, _) => sel.label(),
            };
            let built = match (in_matrix, compiled.as_str()) {
                (true, "-") => "katlas build compiles nothing of it for the atom".to_string(),
                (true, c) => format!("katlas build compiles {c} for it"),
                (false, "-") => "the atom is not in the matrix, and the tag rules give it nothing of this kernel".to_string(),
                (false, c) => format!("the atom is not in the matrix, and the tag rules give it {c}"),
            };
            out.push(SelectorHazard {
                atom: atom.clone(),
                kernel: kernel.to_string(),
                selector: sel.label(),
                at,
                runtime_file: src.file.clone(),
                compiled,
                in_matrix,
                reason: format!("{arm} loads {} on {atom}, but {built}", src.file),
            });
        }
    }
    out
}

/// Under a prefix family rule: for each matrix atom and kernel, the file the runtime takes
/// (chip tag, else the rule's family tag, else the base) against what the table compiles; and
/// for the table's atoms outside the matrix, the family files the rule would send them.
fn family_hazards(s: &Settings, sources: &[Source], resolutions: &[Resolution]) -> Vec<FamilyHazard> {
    let rule = s.family_rule;
    if rule == FamilyRule::Table {
        return Vec::new();
    }
    let mut out = Vec::new();
    let by_group = groups(sources);
    let tags: BTreeSet<&str> = sources.iter().filter_map(|x| x.tag.as_deref()).collect();
    let mut atoms: Vec<(&katlas_arch::Atom, bool)> = s.matrix.iter().map(|a| (s.atom(a), true)).collect();
    atoms.extend(
        s.db.atoms().filter(|a| !s.matrix.contains(&a.name) && rule.prefix_family(&a.name).is_some_and(|f| tags.contains(f.as_str()))).map(|a| (a, false)),
    );
    for (a, in_matrix) in atoms {
        let atom = &a.name;
        let lang = Lang::for_vendor(a.vendor);
        let fam = rule.prefix_family(atom);
        for (group, files) in &by_group {
            let files: Vec<&&Source> = files.iter().filter(|f| f.lang == lang).collect();
            let tagged = |t: &str| files.iter().find(|f| f.tag.as_deref() == Some(t)).map(|f| **f);
            let runtime = tagged(atom).or_else(|| fam.as_deref().and_then(tagged)).or_else(|| files.iter().find(|f| f.tag.is_none()).map(|f| **f));
            let table: Vec<&Resolution> = resolutions.iter().filter(|r| r.group == *group && r.atom == *atom).collect();
            let compiled = if table.is_empty() { "-".to_string() } else { table.iter().map(|r| r.file.as_str()).collect::<Vec<_>>().join(" + ") };
            let kernel = group.rsplit('/').next().unwrap_or(group).to_string();
            let runtime_file = runtime.map(|f| f.file.clone()).unwrap_or_else(|| "-".into());
            // The runtime takes a family file the table does not give the atom.
            if let Some(f) = runtime.filter(|f| f.tag.is_some() && f.tag.as_deref() != Some(atom.as_str())) {
                let tag = f.tag.clone().unwrap_or_default();
                if let Some(h) = rule_family_hazard(&s.db, atom, &tag) {
                    out.push(FamilyHazard {
                        atom: atom.clone(),
                        kernel: kernel.clone(),
                        tag,
                        runtime_file: runtime_file.clone(),
                        compiled: compiled.clone(),
                        reason: h,
                        in_matrix,
                    });
                    continue;
                }
            }
            // The table compiles a family file the runtime's rule never takes for the atom.
            if let Some(r) = table.iter().find(|r| r.via == Via::Family && r.file != runtime_file).filter(|_| in_matrix) {
                let tag = sources.iter().find(|x| x.file == r.file).and_then(|x| x.tag.clone()).unwrap_or_default();
                out.push(FamilyHazard {
                    atom: atom.clone(),
                    kernel,
                    tag: tag.clone(),
                    runtime_file: runtime_file.clone(),
                    compiled: compiled.clone(),
                    reason: format!(
                        "katlas build compiles {} for {atom} (table family {tag}), but the runtime's rule ({}) takes {}: the compiled file never loads there",
                        r.file,
                        rule.describe(),
                        if runtime_file == "-" { "nothing".to_string() } else { runtime_file.clone() }
                    ),
                    in_matrix,
                });
            }
        }
    }
    out
}
