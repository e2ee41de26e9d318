//! Dispatch provenance: for a hot kernel, which source files in the project
//! define it and which host code dispatches it, ranked, every candidate with
//! its score and the reasons for it.
//!
//! Arch awareness follows hipfire's tag convention (a preset, not an
//! assumption): `name.gfx1201.hip` (chip tag) beats `name.gfx12.hip` (family
//! tag) beats `name.hip` (base); a file tagged for another chip or family is
//! not a candidate. Families come from the architecture table
//! (`katlas-arch`: an atom's `family` and `also_families`), never from a
//! prefix of the arch name (gfx1151 is `gfx115`, not `gfx11`).

use crate::names::{base_function, demangle, name_variants};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub const PROVENANCE_SCHEMA: &str = "katlas.provenance.v1";

#[derive(Debug, Clone)]
pub struct ProvenanceOptions {
    /// Directories holding kernel sources (absolute or relative to `root`).
    pub kernel_roots: Vec<PathBuf>,
    /// Directories holding host code that dispatches kernels.
    pub dispatch_roots: Vec<PathBuf>,
    pub root: PathBuf,
    /// Target arch atom (`gfx1201`, `sm_90`).
    pub arch: Option<String>,
    /// Families of the arch (from the arch table), most specific first.
    pub families: Vec<String>,
    pub source_exts: Vec<String>,
    pub dispatch_exts: Vec<String>,
    /// Files larger than this are skipped (generated tables, blobs).
    pub max_file_bytes: u64,
    /// At most this many dispatch references per kernel.
    pub max_refs: usize,
}

impl ProvenanceOptions {
    pub fn new(root: &Path) -> Self {
        Self {
            kernel_roots: vec![PathBuf::from("kernels"), PathBuf::from("src")],
            dispatch_roots: vec![PathBuf::from("src")],
            root: root.to_path_buf(),
            arch: None,
            families: Vec::new(),
            source_exts: ["hip", "cu", "cuh", "h", "hpp", "cl", "s", "ll", "py"].iter().map(|s| s.to_string()).collect(),
            dispatch_exts: ["rs", "cpp", "cc", "cxx", "c", "h", "hpp", "hip", "cu", "cuh", "py", "toml"].iter().map(|s| s.to_string()).collect(),
            max_file_bytes: 4 << 20,
            max_refs: 20,
        }
    }

    /// Set the arch and take its families from the architecture table.
    pub fn with_arch(mut self, db: &katlas_arch::ArchDb, arch: &str) -> Self {
        self.arch = Some(arch.to_string());
        self.families = families_of(db, arch);
        self
    }
}

/// An atom's family tags: its `family` then `also_families`; empty for an unknown atom.
pub fn families_of(db: &katlas_arch::ArchDb, arch: &str) -> Vec<String> {
    match db.atom(arch) {
        Some(a) => {
            let mut f = vec![a.family.clone()];
            f.extend(a.also_families.iter().cloned());
            f
        }
        None => Vec::new(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SourceCandidate {
    pub path: String,
    pub score: f64,
    /// `chip`, `family` or `base`.
    pub tag_kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The name variant the file matched.
    pub matched: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_line: Option<u64>,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DispatchRef {
    pub path: String,
    pub line: u64,
    pub text: String,
    pub score: f64,
    pub matched: String,
    pub reasons: Vec<String>,
    /// Environment variables read near the reference (knobs that may switch this dispatch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_knobs: Vec<String>,
}

/// `katlas.provenance.v1`: one kernel's sources and dispatch sites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelProvenance {
    pub schema: String,
    pub kernel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    pub base_name: String,
    pub variants: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    pub families: Vec<String>,
    pub sources: Vec<SourceCandidate>,
    pub dispatch: Vec<DispatchRef>,
    /// Union of the env knobs of all dispatch references.
    pub env_knobs: Vec<String>,
}

struct Re {
    env: Regex,
}

fn re() -> &'static Re {
    static R: OnceLock<Re> = OnceLock::new();
    R.get_or_init(|| Re {
        env: Regex::new(r#"(?:getenv|env::var(?:_os)?|environ(?:\.get)?|os\.getenv|env_flag|env_var|std::env::var)\s*[\(\[]\s*"([A-Z][A-Z0-9_]{2,})""#)
            .unwrap(),
    })
}

fn files_under(root: &Path, dirs: &[PathBuf], exts: &[String], max: u64) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    for d in dirs {
        let d = if d.is_absolute() { d.clone() } else { root.join(d) };
        for e in walkdir::WalkDir::new(&d).follow_links(false).into_iter().filter_map(Result::ok) {
            let p = e.path();
            if !e.file_type().is_file() {
                continue;
            }
            if p.components().any(|c| matches!(c.as_os_str().to_str(), Some("target" | ".git" | ".katlas" | "node_modules" | ".cache"))) {
                continue;
            }
            let ext_ok = p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.iter().any(|e| e.eq_ignore_ascii_case(x)));
            if ext_ok && e.metadata().map(|m| m.len() <= max).unwrap_or(false) {
                seen.insert(p.to_path_buf());
            }
        }
    }
    seen.into_iter().collect()
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// Definition of `name` as a kernel in `text`: line of `__global__ … name(` or
/// `extern "C" … name(` (HIP/CUDA), `def name(` (Triton/Python).
fn definition_line(text: &str, name: &str) -> Option<u64> {
    let pat =
        Regex::new(&format!(r"(?:__global__|__launch_bounds__|extern\s+.C.|@triton\.jit|def)[^;{{]*?\b{}\s*(?:<[^;{{]*?>)?\s*\(", regex::escape(name))).ok()?;
    let m = pat.find(text)?;
    Some(text[..m.start()].matches('\n').count() as u64 + 1)
}

/// Rank source files and dispatch references for one kernel name.
pub fn locate(kernel: &str, opts: &ProvenanceOptions) -> KernelProvenance {
    let dem = demangle(kernel);
    let base = base_function(dem.as_deref().unwrap_or(kernel));
    let variants = name_variants(&base);
    let sources = rank_sources(&variants, opts);
    let (dispatch, knobs) = dispatch_refs(&variants, opts);
    KernelProvenance {
        schema: PROVENANCE_SCHEMA.into(),
        kernel: kernel.into(),
        demangled: dem,
        base_name: base,
        variants,
        arch: opts.arch.clone(),
        families: opts.families.clone(),
        sources,
        dispatch,
        env_knobs: knobs,
    }
}

fn rank_sources(variants: &[String], opts: &ProvenanceOptions) -> Vec<SourceCandidate> {
    let mut out = Vec::new();
    for path in files_under(&opts.root, &opts.kernel_roots, &opts.source_exts, opts.max_file_bytes) {
        let fname = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parts: Vec<&str> = fname.split('.').collect();
        // name.ext or name.tag.ext
        let (stem, tag) = match parts.len() {
            0 | 1 => continue,
            2 => (parts[0], None),
            _ => (parts[0], Some(parts[1..parts.len() - 1].join("."))),
        };
        let mut reasons = Vec::new();
        let mut score = 0.0;
        let (tag_kind, tag_ok) = match &tag {
            None => ("base", true),
            Some(t) if opts.arch.as_deref() == Some(t.as_str()) => ("chip", true),
            Some(t) if opts.families.iter().any(|f| f == t) => ("family", true),
            Some(t) if looks_like_arch_tag(t) => ("other-arch", false),
            Some(_) => ("base", true),
        };
        if !tag_ok {
            continue; // built for another chip or family
        }
        let name_hit = variants.iter().position(|v| v == stem);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let def = variants.iter().enumerate().find_map(|(i, v)| definition_line(&text, v).map(|l| (i, v.clone(), l)));
        if name_hit.is_none() && def.is_none() {
            continue;
        }
        let matched = match (name_hit, &def) {
            (Some(i), _) => {
                score += 100.0 - 10.0 * i as f64;
                reasons.push(if i == 0 {
                    format!("file name is the kernel name `{}`", variants[0])
                } else {
                    format!("file name is name variant `{}` (suffix peeled)", variants[i])
                });
                variants[i].clone()
            }
            (None, Some((_, v, _))) => v.clone(),
            _ => unreachable!(),
        };
        match tag_kind {
            "chip" => {
                score += 50.0;
                reasons.push(format!("chip tag `{}` is the target arch", tag.as_deref().unwrap_or("")));
            }
            "family" => {
                score += 30.0;
                reasons.push(format!("family tag `{}`: family of {} in the arch table", tag.as_deref().unwrap_or(""), opts.arch.as_deref().unwrap_or("?")));
            }
            _ => reasons.push("base file (no arch tag)".into()),
        }
        let mut definition_line_no = None;
        if let Some((i, v, l)) = def {
            score += 40.0 - 5.0 * i as f64;
            definition_line_no = Some(l);
            reasons.push(format!("defines kernel `{v}` at line {l}"));
        } else {
            reasons.push("no kernel definition found in the file (an include or wrapper?)".into());
        }
        out.push(SourceCandidate {
            path: rel(&opts.root, &path),
            score,
            tag_kind: tag_kind.into(),
            tag,
            matched,
            definition_line: definition_line_no,
            reasons,
        });
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)));
    out
}

/// `gfx1201`, `gfx12`, `gfx115`, `sm_90`, `sm_9x`, `sm90a`.
fn looks_like_arch_tag(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    (t.starts_with("gfx") && t.len() > 3 && t[3..].chars().all(|c| c.is_ascii_hexdigit()))
        || (t.starts_with("sm") && t.trim_start_matches("sm").trim_start_matches('_').chars().all(|c| c.is_ascii_alphanumeric()) && t.len() > 2)
}

fn dispatch_refs(variants: &[String], opts: &ProvenanceOptions) -> (Vec<DispatchRef>, Vec<String>) {
    let word: Vec<Regex> = variants.iter().map(|v| Regex::new(&format!(r"\b{}\b", regex::escape(v))).unwrap()).collect();
    let mut refs = Vec::new();
    for path in files_under(&opts.root, &opts.dispatch_roots, &opts.dispatch_exts, opts.max_file_bytes) {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        if !variants.iter().any(|v| text.contains(v.as_str())) {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(vi) = word.iter().position(|w| w.is_match(line)) else { continue };
            let v = &variants[vi];
            // A kernel's own definition is a source, not a dispatch.
            if definition_line(line, v).is_some() && line.contains("__global__") {
                continue;
            }
            let mut score = 10.0 - vi as f64;
            let mut reasons = vec![format!("mentions `{v}`")];
            if line.contains(&format!("\"{v}\"")) {
                score += 20.0;
                reasons.push("as a string literal (loaded by name)".into());
            }
            if line.contains(&format!("{v}<<<"))
                || line.contains(&format!("{v} <<<"))
                || line.contains("hipLaunchKernelGGL")
                || line.contains("cudaLaunchKernel")
                || line.contains("launch")
            {
                score += 30.0;
                reasons.push("launch site".into());
            }
            let lo = i.saturating_sub(10);
            let hi = (i + 11).min(lines.len());
            let mut knobs: BTreeSet<String> = BTreeSet::new();
            for l in &lines[lo..hi] {
                for c in re().env.captures_iter(l) {
                    knobs.insert(c[1].to_string());
                }
            }
            if !knobs.is_empty() {
                score += 5.0;
                reasons.push(format!("env knobs read within 10 lines: {}", knobs.iter().cloned().collect::<Vec<_>>().join(", ")));
            }
            refs.push(DispatchRef {
                path: rel(&opts.root, &path),
                line: i as u64 + 1,
                text: line.trim().chars().take(200).collect(),
                score,
                matched: v.clone(),
                reasons,
                env_knobs: knobs.into_iter().collect(),
            });
        }
    }
    refs.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)).then(a.line.cmp(&b.line)));
    refs.truncate(opts.max_refs);
    let knobs: BTreeSet<String> = refs.iter().flat_map(|r| r.env_knobs.iter().cloned()).collect();
    (refs, knobs.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("kernels/src");
        std::fs::create_dir_all(&k).unwrap();
        let def = |n: &str| format!("#include \"common.h\"\nextern \"C\" __global__ void {n}(const float* x) {{}}\n");
        std::fs::write(k.join("gemv_hfq4g256_multirow.hip"), def("gemv_hfq4g256_multirow")).unwrap();
        std::fs::write(k.join("gemv_hfq4g256_multirow.gfx12.hip"), def("gemv_hfq4g256_multirow")).unwrap();
        std::fs::write(k.join("gemv_hfq4g256_multirow.gfx1201.hip"), def("gemv_hfq4g256_multirow")).unwrap();
        std::fs::write(k.join("gemv_hfq4g256_multirow.gfx1100.hip"), def("gemv_hfq4g256_multirow")).unwrap();
        std::fs::write(k.join("gemv_hfq4g256_multirow.gfx11.hip"), def("gemv_hfq4g256_multirow")).unwrap();
        std::fs::write(k.join("other.hip"), def("something_else")).unwrap();
        let s = d.path().join("src");
        std::fs::create_dir_all(&s).unwrap();
        std::fs::write(
            s.join("dispatch.rs"),
            "fn pick() {\n    let rows = std::env::var(\"HIPFIRE_MULTIROW\").ok();\n    let k = module.function(\"gemv_hfq4g256_multirow\");\n    launch(k, grid);\n}\n// unrelated gemv_hfq4g256_multirow_x\n",
        )
        .unwrap();
        d
    }

    #[test]
    fn chip_beats_family_beats_base_and_other_arch_excluded() {
        let d = project();
        let db = katlas_arch::ArchDb::builtin();
        let opts = ProvenanceOptions::new(d.path()).with_arch(db, "gfx1201");
        assert_eq!(opts.families.first().map(String::as_str), Some("gfx12"));
        let p = locate("gemv_hfq4g256_multirow_default_r2", &opts);
        assert_eq!(p.variants, ["gemv_hfq4g256_multirow_default_r2", "gemv_hfq4g256_multirow_default", "gemv_hfq4g256_multirow"]);
        let paths: Vec<&str> = p.sources.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            ["kernels/src/gemv_hfq4g256_multirow.gfx1201.hip", "kernels/src/gemv_hfq4g256_multirow.gfx12.hip", "kernels/src/gemv_hfq4g256_multirow.hip"]
        );
        assert!(p.sources[0].score > p.sources[1].score && p.sources[1].score > p.sources[2].score);
        assert!(p.sources[1].reasons.iter().any(|r| r.contains("family tag `gfx12`")));
        assert_eq!(p.sources[0].definition_line, Some(2));
        assert_eq!(p.dispatch[0].path, "src/dispatch.rs");
        assert_eq!(p.dispatch[0].line, 3);
        assert_eq!(p.env_knobs, ["HIPFIRE_MULTIROW"]);
        assert!(p.dispatch.iter().all(|r| r.line != 6), "`_x` suffix is another kernel");
    }

    #[test]
    fn family_from_table_not_name_prefix() {
        let d = project();
        let db = katlas_arch::ArchDb::builtin();
        // gfx1151 (RDNA 3.5) is family gfx115 in the table: a gfx11 tag does not apply.
        let opts = ProvenanceOptions::new(d.path()).with_arch(db, "gfx1151");
        assert!(!opts.families.contains(&"gfx11".to_string()), "{:?}", opts.families);
        let p = locate("gemv_hfq4g256_multirow", &opts);
        let paths: Vec<&str> = p.sources.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["kernels/src/gemv_hfq4g256_multirow.hip"]);
        // gfx1100 is gfx11: chip tag first, family tag second.
        let opts = ProvenanceOptions::new(d.path()).with_arch(db, "gfx1100");
        let p = locate("gemv_hfq4g256_multirow", &opts);
        let kinds: Vec<&str> = p.sources.iter().map(|s| s.tag_kind.as_str()).collect();
        assert_eq!(kinds, ["chip", "family", "base"]);
    }

    #[test]
    fn demangled_names_reach_sources() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("kernels")).unwrap();
        std::fs::write(d.path().join("kernels/k.cu"), "template <int N>\n__global__ void scale_kernel(float* x) {}\n").unwrap();
        let p = locate("_Z12scale_kernelILi4EEvPf", &ProvenanceOptions::new(d.path()));
        assert_eq!(p.base_name, "scale_kernel");
        assert_eq!(p.sources[0].path, "kernels/k.cu");
        assert_eq!(p.sources[0].definition_line, Some(2));
    }
}
