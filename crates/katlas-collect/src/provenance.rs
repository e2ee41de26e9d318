//! Dispatch provenance: for a hot kernel, which source files in the project
//! define it and which host code loads it, ranked, every candidate with its
//! score and the reasons for it — as the project's runtime resolves it.
//!
//! Arch awareness follows hipfire's tag convention (a preset, not an
//! assumption): `name.gfx1201.hip` (chip tag) beats `name.gfx12.hip` (family
//! tag) beats `name.hip` (base); a file tagged for another chip or family is
//! not a candidate (`name.gfx1030.v1.hip` is tagged for gfx1030). Which family
//! tag an arch takes is the project's family rule ([`FamilyRule`]): the arch
//! table by default (`katlas-arch`: an atom's `family` and `also_families`, so
//! gfx1151 is `gfx115`), or a name prefix where the runtime uses one (hipfire:
//! the first five characters, so gfx1151 takes `gfx11` files — reported as a
//! hazard when the table disagrees). Run-time variant selectors ([`Selector`])
//! outrank the tag rules on the atoms they cover.
//!
//! Dispatch evidence is a kernel load matching the project's load patterns
//! ([`LoadPattern`]: hipfire's `ensure_kernel("…")` and `include_str!("…/name.hip")`);
//! a project without patterns falls back to references (identifiers and string
//! words in code, never comments). [`ProvenanceIndex`] reads the tree once and
//! answers any number of kernels.
//!
//! Python kernel projects ([`python`]): a Triton kernel's trace name is its `@triton.jit`
//! function's name, found with its decorators and autotune configs; `torch.library` custom ops
//! ([`torch_ops`]) resolve by their `ns::name`; CUDA sources inside `load_inline` strings and
//! files passed to `cpp_extension.load` are kernel sources. Installed packages join the roots by
//! import name ([`python::find_package`]).

mod pysyntax;
pub mod python;
pub mod torch_ops;

use crate::loads::{rule_family_hazard, ArgKind, FamilyRule, HostIndex, LoadPattern, LoadSite, Mentions, Selector};
use katlas_arch::{Vendor, Via};
use katlas_names::{bare_name, demangle, name_variants};
use python::{PyFile, TritonKernel};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use torch_ops::CustomOp;

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
    /// Family tags the arch takes under `family_rule`, most specific first.
    pub families: Vec<String>,
    pub source_exts: Vec<String>,
    pub dispatch_exts: Vec<String>,
    /// Files larger than this are skipped (generated tables, blobs).
    pub max_file_bytes: u64,
    /// At most this many dispatch references per kernel.
    pub max_refs: usize,
    /// How the project's runtime maps the arch to a family tag (set before [`Self::with_arch`]).
    pub family_rule: FamilyRule,
    /// The arch table's families of the arch (they differ from `families` under a prefix rule).
    pub table_families: Vec<String>,
    /// Family tag -> why taking it is a hazard (the rule gives it, the table does not).
    pub family_hazards: BTreeMap<String, String>,
    /// What counts as a kernel load; empty: any reference counts.
    pub load_patterns: Vec<LoadPattern>,
    /// Calls that record a kernel name in the project's profiler (`--all-profiled`).
    pub profile_patterns: Vec<LoadPattern>,
    /// Run-time variant selectors.
    pub selectors: Vec<Selector>,
    /// Functions whose arch `match` picks a kernel's source (globs, `*_for_arch`): each arm is
    /// read from the host code as a selector ([`HostIndex::arch_selectors`]), after `selectors`.
    pub selector_functions: Vec<String>,
}

/// The project's own top-level Python packages (directories holding `__init__.py`), sorted.
fn top_level_packages(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.path().join("__init__.py").is_file())
        .map(|e| PathBuf::from(e.file_name()))
        .filter(|p| p != Path::new("src") && p != Path::new("kernels"))
        .collect();
    out.sort();
    out
}

impl ProvenanceOptions {
    /// Default roots: `kernels/` and `src/` for kernel sources, `src/` for host code, and the
    /// project's top-level Python packages (`liger_kernel/`, `fla/`) for both.
    pub fn new(root: &Path) -> Self {
        let packages = top_level_packages(root);
        Self {
            kernel_roots: [PathBuf::from("kernels"), PathBuf::from("src")].into_iter().chain(packages.iter().cloned()).collect(),
            dispatch_roots: std::iter::once(PathBuf::from("src")).chain(packages).collect(),
            root: root.to_path_buf(),
            arch: None,
            families: Vec::new(),
            source_exts: ["hip", "cu", "cuh", "h", "hpp", "cl", "s", "ll", "py"].iter().map(|s| s.to_string()).collect(),
            dispatch_exts: ["rs", "cpp", "cc", "cxx", "c", "h", "hpp", "hip", "cu", "cuh", "py", "toml"].iter().map(|s| s.to_string()).collect(),
            max_file_bytes: 4 << 20,
            max_refs: 20,
            family_rule: FamilyRule::Table,
            table_families: Vec::new(),
            family_hazards: BTreeMap::new(),
            load_patterns: Vec::new(),
            profile_patterns: Vec::new(),
            selectors: Vec::new(),
            selector_functions: Vec::new(),
        }
    }

    /// Set the arch; its family tags follow `family_rule` (the table's families by default),
    /// and every family tag the rule gives but the table does not is recorded as a hazard.
    pub fn with_arch(mut self, db: &katlas_arch::ArchDb, arch: &str) -> Self {
        self.arch = Some(arch.to_string());
        self.table_families = db.family_tags(arch, FamilyRule::Table);
        self.families = db.family_tags(arch, self.family_rule);
        self.family_hazards = self.families.iter().filter_map(|f| rule_family_hazard(db, arch, f).map(|h| (f.clone(), h))).collect();
        self
    }
}

/// The word in [`SourceCandidate::tag_kind`] for how a candidate file reaches the target arch
/// ([`katlas_arch::tag_reach`]; `None`: built for another chip or family).
fn tag_kind_word(via: Option<Via>) -> &'static str {
    via.map_or("other-arch", Via::as_str)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SourceCandidate {
    pub path: String,
    pub score: f64,
    /// `chip`, `family`, `base`, or `other-arch` (only when a selector picks it).
    pub tag_kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The name variant the file matched.
    pub matched: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_line: Option<u64>,
    pub reasons: Vec<String>,
    /// The run-time selection that loads this file on the arch (`HIPFIRE_RDNA2_VARIANT=2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_by: Option<String>,
    /// The Triton kernel defined at `definition_line` (its decorators and autotune configs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton: Option<TritonKernel>,
    /// The custom op this file defines or registers a kernel for (`ns::name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_op: Option<CustomOp>,
    /// Where a torch extension build compiles this file (`file:line (call)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub built_by: Vec<String>,
    /// Where a load pattern embeds this file (`file:line`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub embedded_at: Vec<String>,
    /// The runtime's family rule sends this file to the arch against the arch table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hazard: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DispatchRef {
    pub path: String,
    /// Line of the kernel name (for a load: its string literal).
    pub line: u64,
    pub text: String,
    pub score: f64,
    pub matched: String,
    pub reasons: Vec<String>,
    /// Environment variables read near the reference (knobs that may switch this dispatch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_knobs: Vec<String>,
    /// `load` (a load pattern matched) or `reference` (the name appears in code).
    #[serde(default)]
    pub kind: String,
    /// The load call (`ensure_kernel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Line of the load call (before `line` when the arguments span lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_line: Option<u64>,
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
    /// The family rule `families` follow (`table`, `prefix5`).
    #[serde(default)]
    pub family_rule: String,
    pub sources: Vec<SourceCandidate>,
    pub dispatch: Vec<DispatchRef>,
    /// Union of the env knobs of all dispatch references and of the selectors that apply.
    pub env_knobs: Vec<String>,
    /// What else bears on the answer: selectors, fallbacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where the custom op of this name is defined, registered and called (`torch.library`,
    /// `TORCH_LIBRARY`, `torch.ops.ns.name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpSite>,
    /// The name is a profiler label no kernel bears (`rmsnorm_batched`): the kernels the code it
    /// times launches, followed from its timer sites; `sources` and `dispatch` are theirs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<String>,
}

/// One site of a custom op, with its file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpSite {
    pub path: String,
    #[serde(flatten)]
    pub op: CustomOp,
}

/// Files under `dirs` (relative to `root` or absolute), each with the root dir it was found under.
fn files_under(root: &Path, dirs: &[PathBuf], exts: &[String], max: u64) -> Vec<(PathBuf, PathBuf)> {
    let mut seen = BTreeMap::new();
    for d in dirs {
        let d = if d.is_absolute() { d.clone() } else { root.join(d) };
        for e in walkdir::WalkDir::new(&d).follow_links(false).into_iter().filter_map(Result::ok) {
            let p = e.path();
            if !e.file_type().is_file() {
                continue;
            }
            // Below the root only: a project that itself lives under `.cache/` or `target/` is scanned.
            let inner = p.strip_prefix(&d).unwrap_or(p);
            if inner.components().any(|c| matches!(c.as_os_str().to_str(), Some("target" | ".git" | ".katlas" | "node_modules" | ".cache" | "__pycache__"))) {
                continue;
            }
            let ext_ok = p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.iter().any(|e| e.eq_ignore_ascii_case(x)));
            if ext_ok && e.metadata().map(|m| m.len() <= max).unwrap_or(false) {
                seen.entry(p.to_path_buf()).or_insert_with(|| d.clone());
            }
        }
    }
    seen.into_iter().map(|(p, d)| (d, p)).collect()
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Kernel definitions in `text`, name -> line: the function named after `__global__`,
/// `__launch_bounds__`, `extern "C"` (HIP/CUDA), `@triton.jit` or `def` (Python), skipping
/// `__attribute__`-style parenthesised qualifiers and template arguments.
fn definitions(text: &str) -> HashMap<String, u64> {
    let b = text.as_bytes();
    let mut out: HashMap<String, u64> = HashMap::new();
    let mut line = 1u64;
    let mut i = 0usize;
    let word_at = |i: usize, w: &[u8]| b[i..].starts_with(w) && (i == 0 || !is_ident(b[i - 1])) && b.get(i + w.len()).is_none_or(|c| !is_ident(*c));
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
            continue;
        }
        let marker = if c == b'_' && (word_at(i, b"__global__") || word_at(i, b"__launch_bounds__")) {
            Some(if b[i + 2] == b'g' { 10 } else { 17 })
        } else if c == b'e' && word_at(i, b"extern") {
            let mut j = i + 6;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            b[j..].starts_with(b"\"C\"").then_some(j + 3 - i)
        } else if c == b'd' && word_at(i, b"def") {
            Some(3)
        } else {
            None
        };
        let Some(len) = marker else {
            i += 1;
            continue;
        };
        if let Some(name) = name_after(text, i + len) {
            out.entry(name).or_insert(line);
        }
        i += len;
    }
    out
}

/// The first identifier followed by `(` (template arguments allowed between) after `i`, before
/// any `;`, `{` or `}`; identifiers starting `__` (qualifiers) have their parentheses skipped.
fn name_after(t: &str, mut i: usize) -> Option<String> {
    let b = t.as_bytes();
    let mut steps = 0;
    let skip_parens = |i: &mut usize| {
        let mut depth = 0i32;
        while *i < b.len() {
            match b[*i] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth <= 0 {
                        *i += 1;
                        return;
                    }
                }
                b';' | b'{' => return,
                _ => {}
            }
            *i += 1;
        }
    };
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    ws(&mut i);
    if b.get(i) == Some(&b'(') {
        skip_parens(&mut i); // the marker's own arguments: __launch_bounds__(256)
    }
    while i < b.len() && steps < 64 {
        let c = b[i];
        if matches!(c, b';' | b'{' | b'}') {
            return None;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let st = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            let name = &t[st..i];
            steps += 1;
            let mut j = i;
            ws(&mut j);
            if b.get(j) == Some(&b'<') {
                let mut depth = 0;
                while j < b.len() && !matches!(b[j], b';' | b'{') {
                    match b[j] {
                        b'<' => depth += 1,
                        b'>' => {
                            depth -= 1;
                            if depth == 0 {
                                j += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                ws(&mut j);
            }
            if b.get(j) == Some(&b'(') {
                if name.starts_with("__") {
                    i = j;
                    skip_parens(&mut i);
                    continue;
                }
                return Some(name.to_string());
            }
            continue;
        }
        i += 1;
    }
    None
}

/// One kernel source: its name parts and the kernels it defines.
#[derive(Debug, Clone)]
struct KFile {
    rel: String,
    file_name: String,
    /// `name` of `name.tag.ext`.
    stem: String,
    /// Everything between stem and extension (`gfx1030.v1`).
    tag: Option<String>,
    /// The arch part of the tag (`gfx1030`), when its first component looks like an arch.
    tag_arch: Option<String>,
    /// The rest of the tag after the arch (`v1`).
    tag_rest: Option<String>,
    defs: HashMap<String, u64>,
    /// The directories between its root and the file (vendor backends are told by them).
    dirs: Vec<String>,
    /// A Python file's scan and dotted module.
    py: Option<Box<PyFile>>,
    module: Option<String>,
    /// Custom ops it defines, registers or uses (Python `torch.library`, C++ `TORCH_LIBRARY`).
    ops: Vec<CustomOp>,
    /// CUDA kernels defined inside Python strings (`load_inline` sources).
    string_kernels: BTreeSet<String>,
}

/// The vendor a directory name marks as another accelerator's backend (`triton_ascend`,
/// `xpu`, `rocm`), by its `_`/`-` separated words.
fn dir_vendor(dir: &str) -> Option<&'static str> {
    dir.to_ascii_lowercase().split(['_', '-', '.']).find_map(|w| match w {
        "cuda" | "nvidia" | "cutlass" | "cute" | "cutedsl" | "cutile" => Some("nvidia"),
        "rocm" | "hip" | "amd" | "amdgpu" => Some("amd"),
        "xpu" | "intel" => Some("intel"),
        "ascend" | "npu" => Some("ascend"),
        "mlu" | "cambricon" => Some("cambricon"),
        "musa" => Some("moore-threads"),
        _ => None,
    })
}

/// The vendor of an arch atom (`sm_90` NVIDIA, `gfx1201` AMD), by the name the vendor words
/// of source languages use.
fn arch_vendor(arch: &str) -> Option<&'static str> {
    Vendor::of_arch(arch).map(Vendor::as_str)
}

/// CUDA kernels (`__global__`, `extern "C"`) a Python file defines inside its strings.
fn kernels_in_strings(text: &str, py: &PyFile) -> BTreeSet<String> {
    if !text.contains("__global__") && !text.contains("extern \"C\"") {
        return BTreeSet::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    definitions(text)
        .into_iter()
        .filter(|(n, l)| {
            let at = lines.get((*l as usize).saturating_sub(1)).copied().unwrap_or("");
            (at.contains("__global__") || at.contains("__launch_bounds__") || at.contains("extern \"C\"")) && py.def(n).is_none_or(|d| d.line != *l)
        })
        .map(|(n, _)| n)
        .collect()
}

/// Lexically normalised `base/rel` (`..` and `.` folded; no disk access).
fn join_clean(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// How much one index build read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IndexStats {
    pub kernel_files: usize,
    pub host_files: usize,
    /// File reads (each file at most once, or twice for host files when load patterns matched
    /// nothing and references were indexed instead).
    pub reads: usize,
}

/// The tree read once: kernel sources by name and definition, host code's loads, references
/// and env reads. [`ProvenanceIndex::locate`] answers a kernel without touching the disk.
#[derive(Debug, Clone)]
pub struct ProvenanceIndex {
    opts: ProvenanceOptions,
    kfiles: Vec<KFile>,
    by_stem: HashMap<String, Vec<usize>>,
    by_def: HashMap<String, Vec<usize>>,
    /// Op name (`ns::name` and bare `name`) -> files that define, register or use it.
    by_op: HashMap<String, Vec<usize>>,
    /// Dotted module -> how many indexed Python files import it.
    fan_in: HashMap<String, usize>,
    /// Kernel file rel path -> the extension builds that compile it (`file:line (call)`).
    built_by: HashMap<String, Vec<String>>,
    host: HostIndex,
    /// Patterns `[..n_load]` of the host scan are load patterns, the rest profile patterns.
    n_load: usize,
    load_mode: bool,
    embed_mode: bool,
    notes: Vec<String>,
    pub stats: IndexStats,
}

impl ProvenanceIndex {
    pub fn build(opts: &ProvenanceOptions) -> ProvenanceIndex {
        let mut stats = IndexStats::default();
        let mut kfiles = Vec::new();
        let mut package_roots: HashMap<PathBuf, bool> = HashMap::new();
        for (root_dir, path) in files_under(&opts.root, &opts.kernel_roots, &opts.source_exts, opts.max_file_bytes) {
            let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
            let Some(t) = katlas_arch::FileTag::parse(&file_name) else {
                continue;
            };
            let own = |s: Option<&str>| s.map(str::to_string);
            let (stem, tag, tag_arch, tag_rest) = (t.name.to_string(), own(t.tag), own(t.arch), own(t.rest));
            let bytes = std::fs::read(&path).unwrap_or_default();
            stats.reads += 1;
            let text = String::from_utf8_lossy(&bytes);
            let inner = path.strip_prefix(&root_dir).unwrap_or(&path);
            let dirs: Vec<String> =
                inner.parent().into_iter().flat_map(|p| p.components()).filter_map(|c| c.as_os_str().to_str().map(str::to_string)).collect();
            let (mut defs, mut py, mut module, mut string_kernels) = (HashMap::new(), None, None, BTreeSet::new());
            let mut ops = torch_ops::cpp_ops(&text);
            if path.extension().is_some_and(|e| e == "py") {
                let is_pkg = *package_roots.entry(root_dir.clone()).or_insert_with(|| root_dir.join("__init__.py").is_file());
                module = python::module_name(&root_dir, &path, is_pkg);
                let f = python::scan(&text, module.as_deref(), file_name == "__init__.py");
                string_kernels = kernels_in_strings(&text, &f);
                if !string_kernels.is_empty() {
                    let all = definitions(&text);
                    defs.extend(string_kernels.iter().filter_map(|k| all.get(k).map(|l| (k.clone(), *l))));
                }
                for d in &f.defs {
                    if let Some(best) = f.def(&d.name) {
                        defs.entry(d.name.clone()).or_insert(best.line);
                    }
                }
                ops.extend(f.ops.iter().cloned());
                py = Some(Box::new(f));
            } else {
                defs = definitions(&text);
            }
            kfiles.push(KFile { rel: rel(&opts.root, &path), file_name, stem, tag, tag_arch, tag_rest, defs, dirs, py, module, ops, string_kernels });
        }
        stats.kernel_files = kfiles.len();
        let mut by_stem: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_def: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_op: HashMap<String, Vec<usize>> = HashMap::new();
        let mut fan_in: HashMap<String, usize> = HashMap::new();
        for (i, f) in kfiles.iter().enumerate() {
            by_stem.entry(f.stem.clone()).or_default().push(i);
            for d in f.defs.keys() {
                by_def.entry(d.clone()).or_default().push(i);
            }
            let names: BTreeSet<&str> = f.ops.iter().flat_map(|o| [o.name.as_str(), o.name.rsplit("::").next().unwrap_or("")]).collect();
            for n in names {
                by_op.entry(n.to_string()).or_default().push(i);
            }
            for m in f.py.iter().flat_map(|p| p.imports.iter()) {
                *fan_in.entry(m.clone()).or_default() += 1;
            }
        }
        let by_rel: HashMap<&str, usize> = kfiles.iter().enumerate().map(|(i, f)| (f.rel.as_str(), i)).collect();
        let mut built_by: HashMap<String, Vec<String>> = HashMap::new();
        for f in &kfiles {
            for b in f.py.iter().flat_map(|p| p.builds.iter()) {
                let dir = Path::new(&f.rel).parent().map(|p| opts.root.join(p)).unwrap_or_else(|| opts.root.clone());
                for src in &b.sources {
                    // torch resolves a relative source against the working directory: try the
                    // calling file's directory and the project root.
                    let hit =
                        [join_clean(&dir, src), join_clean(&opts.root, src)].into_iter().map(|p| rel(&opts.root, &p)).find(|r| by_rel.contains_key(r.as_str()));
                    if let Some(r) = hit {
                        built_by.entry(r).or_default().push(format!("{}:{} ({})", f.rel, b.line, b.call));
                    }
                }
            }
        }

        let host_files: Vec<(PathBuf, String)> = files_under(&opts.root, &opts.dispatch_roots, &opts.dispatch_exts, opts.max_file_bytes)
            .into_iter()
            .map(|(_, p)| (p.clone(), rel(&opts.root, &p)))
            .collect();
        let mut patterns = opts.load_patterns.clone();
        patterns.extend(opts.profile_patterns.iter().cloned());
        let n_load = opts.load_patterns.len();
        let mentions = if n_load == 0 { Mentions::All } else { Mentions::None };
        let mut host = HostIndex::scan_with(&host_files, &patterns, mentions, true, &opts.root, &opts.selector_functions);
        stats.reads += host.files_read;
        let mut notes = Vec::new();
        let matched = |h: &HostIndex, k: ArgKind| h.loads.iter().any(|l| (l.pattern as usize) < n_load && l.kind == k);
        let (mut load_mode, mut embed_mode) = (matched(&host, ArgKind::Name), matched(&host, ArgKind::File));
        if n_load > 0 && !load_mode && !embed_mode {
            notes.push(format!(
                "no load pattern ({}) matches under the dispatch roots: any reference to the name counts as dispatch evidence",
                opts.load_patterns.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join(", ")
            ));
            host = HostIndex::scan_with(&host_files, &patterns, Mentions::All, true, &opts.root, &opts.selector_functions);
            stats.reads += host.files_read;
            (load_mode, embed_mode) = (false, false);
        }
        stats.host_files = host.files.len();
        let mut opts = opts.clone();
        opts.selectors.extend(host.arch_selectors());
        ProvenanceIndex { opts, kfiles, by_stem, by_def, by_op, fan_in, built_by, host, n_load, load_mode, embed_mode, notes, stats }
    }

    pub fn options(&self) -> &ProvenanceOptions {
        &self.opts
    }

    /// Kernel names the project's profiler records (literals of the profile patterns), sorted.
    pub fn profiled_names(&self) -> Vec<String> {
        let names: BTreeSet<&str> =
            self.host.loads.iter().filter(|l| l.pattern as usize >= self.n_load && l.kind == ArgKind::Name).map(|l| l.value.as_str()).collect();
        names.into_iter().map(str::to_string).collect()
    }

    /// Rank source files and dispatch references for one kernel name.
    pub fn locate(&self, kernel: &str) -> KernelProvenance {
        let dem = demangle(kernel);
        let base = bare_name(dem.as_deref().unwrap_or(kernel));
        let variants = name_variants(&base);
        let mut notes = self.notes.clone();
        let arch = self.opts.arch.as_deref();
        let sels: Vec<&Selector> = self.opts.selectors.iter().filter(|s| variants.contains(&s.kernel)).collect();
        let mut knobs: BTreeSet<String> = BTreeSet::new();
        for s in &sels {
            match arch {
                Some(a) if s.applies_to(a) => {
                    notes.push(format!("variant selector: {}", s.describe()));
                    knobs.extend(s.knob.iter().cloned());
                }
                // An arm read from the source is one of several: only the one that applies is news.
                _ if s.at.is_some() => {}
                Some(a) => notes.push(format!("variant selector: {}; not on {a}, which takes the tag rules", s.describe())),
                None => notes.push(format!("variant selector: {} (no --arch given)", s.describe())),
            }
        }
        let mut sources = self.rank_sources(kernel, &variants, &sels);
        let mut launches = Vec::new();
        let mut dispatch = self.dispatch_refs(&variants);
        if sources.is_empty() && self.names_no_kernel(&variants) {
            let (names, label_notes) = self.timed_launches(&base);
            notes.extend(label_notes);
            for (n, why) in &names {
                let nv = name_variants(n);
                let nsels: Vec<&Selector> = self.opts.selectors.iter().filter(|s| nv.contains(&s.kernel)).collect();
                for s in nsels.iter().filter(|s| arch.is_some_and(|a| s.applies_to(a))) {
                    notes.push(format!("variant selector: {}", s.describe()));
                    knobs.extend(s.knob.iter().cloned());
                }
                for mut c in self.rank_sources(n, &nv, &nsels) {
                    c.reasons.push(why.clone());
                    match sources.iter_mut().find(|x: &&mut SourceCandidate| x.path == c.path) {
                        Some(x) if x.score >= c.score => {}
                        Some(x) => *x = c,
                        None => sources.push(c),
                    }
                }
                for r in self.dispatch_refs(&nv) {
                    if !dispatch.iter().any(|d| d.path == r.path && d.line == r.line) {
                        dispatch.push(r);
                    }
                }
            }
            sources.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)));
            dispatch.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)).then(a.line.cmp(&b.line)));
            dispatch.truncate(self.opts.max_refs);
            launches = names.into_iter().map(|(n, _)| n).collect();
        }
        let defined: Vec<String> = sources.iter().filter(|s| s.triton.is_some()).map(|s| format!("{}:{}", s.path, s.definition_line.unwrap_or(0))).collect();
        if defined.len() > 1 {
            notes.push(format!(
                "{} files define Triton kernel `{}`: {}; ranked by vendor backend, then by how many indexed modules import each (a trace name alone does not say which ran)",
                defined.len(),
                base,
                defined.join(", ")
            ));
        }
        let ops = self.op_sites(kernel, &variants);
        knobs.extend(dispatch.iter().flat_map(|r| r.env_knobs.iter().cloned()));
        KernelProvenance {
            schema: PROVENANCE_SCHEMA.into(),
            kernel: kernel.into(),
            demangled: dem,
            base_name: base,
            variants,
            arch: self.opts.arch.clone(),
            families: self.opts.families.clone(),
            family_rule: self.opts.family_rule.name(),
            sources,
            dispatch,
            env_knobs: knobs.into_iter().collect(),
            notes,
            ops,
            launches,
        }
    }

    /// No file, definition, custom op or load of any of `variants`: the name is a label (a
    /// profiler's), not a kernel's.
    fn names_no_kernel(&self, variants: &[String]) -> bool {
        variants.iter().all(|v| {
            !self.by_stem.contains_key(v)
                && !self.by_def.contains_key(v)
                && !self.by_op.contains_key(v)
                && !self.host.name_loads(v).iter().any(|l| (l.pattern as usize) < self.n_load)
        })
    }

    /// What the code timed under profiler label `label` launches: at each of the label's
    /// profile-pattern sites, the kernel load nearest before it in the same function (all the
    /// names that call loads: module and function). Each name comes with the reason to show on its
    /// sources; the notes say where each label was followed, or that it led to no load.
    fn timed_launches(&self, label: &str) -> (Vec<(String, String)>, Vec<String>) {
        let (mut out, mut notes): (Vec<(String, String)>, Vec<String>) = (Vec::new(), Vec::new());
        let sites: Vec<&LoadSite> = self.host.name_loads(label).into_iter().filter(|l| l.pattern as usize >= self.n_load).collect();
        for t in sites {
            let timer = self.site_at(t);
            let (start, func) = match self.host.function_at(t.file, t.line) {
                Some((l, name, _)) => (l, format!("fn `{name}`")),
                None => (0, "its file".to_string()),
            };
            let nearest = self
                .host
                .loads
                .iter()
                .filter(|l| l.file == t.file && (l.pattern as usize) < self.n_load && l.kind == ArgKind::Name)
                .filter(|l| l.call_line >= start && l.call_line <= t.line)
                .map(|l| l.call_line)
                .max();
            let Some(call) = nearest else {
                notes.push(format!(
                    "profiler label `{label}` names no kernel, and the code it times ({func}, timer at {timer}) loads none by a literal name before the timer: a library call, or a name built at run time"
                ));
                continue;
            };
            let names: Vec<&LoadSite> = self
                .host
                .loads
                .iter()
                .filter(|l| l.file == t.file && l.call_line == call && (l.pattern as usize) < self.n_load && l.kind == ArgKind::Name)
                .collect();
            let load = self.host.at(t.file, call);
            let listed: Vec<String> = names.iter().map(|l| format!("`{}`", l.value)).collect::<BTreeSet<_>>().into_iter().collect();
            notes.push(format!(
                "profiler label `{label}` names no kernel: the code it times ({func}, timer at {timer}) launches {} (loaded at {load})",
                listed.join(", ")
            ));
            for l in names {
                if !out.iter().any(|(n, _)| *n == l.value) {
                    out.push((l.value.clone(), format!("launched under profiler label `{label}` (timer at {timer}, load at {load})")));
                }
            }
        }
        (out, notes)
    }

    fn site_at(&self, l: &LoadSite) -> String {
        self.host.at(l.file, l.line)
    }

    fn load_calls(&self, k: ArgKind) -> String {
        let calls: BTreeSet<String> = self.opts.load_patterns.iter().filter(|p| p.has(k)).map(|p| p.call()).collect();
        calls.into_iter().collect::<Vec<_>>().join(", ")
    }

    /// Which op sites a kernel name means: a qualified name (`ns::name`, overload dropped)
    /// exactly, a bare name by its variants.
    fn op_matches(kernel: &str, variants: &[String], o: &CustomOp) -> bool {
        match kernel.split_once("::") {
            Some((ns, name)) => o.name == format!("{ns}::{}", name.split('.').next().unwrap_or("")),
            None => variants.iter().any(|v| o.name.rsplit("::").next() == Some(v.as_str())),
        }
    }

    /// Every site of the ops the kernel name means, in path and line order.
    fn op_sites(&self, kernel: &str, variants: &[String]) -> Vec<OpSite> {
        let mut files: BTreeSet<usize> = BTreeSet::new();
        for k in std::iter::once(kernel.split('.').next().unwrap_or(kernel)).chain(variants.iter().map(String::as_str)) {
            files.extend(self.by_op.get(k).into_iter().flatten());
        }
        let mut out: Vec<OpSite> = files
            .into_iter()
            .flat_map(|i| {
                let f = &self.kfiles[i];
                f.ops.iter().filter(|o| Self::op_matches(kernel, variants, o)).map(|o| OpSite { path: f.rel.clone(), op: o.clone() })
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path).then(a.op.line.cmp(&b.op.line)));
        out
    }

    fn rank_sources(&self, kernel: &str, variants: &[String], sels: &[&Selector]) -> Vec<SourceCandidate> {
        let opts = &self.opts;
        let arch = opts.arch.as_deref();
        let active: Vec<&Selector> = sels.iter().copied().filter(|s| arch.is_some_and(|a| s.applies_to(a))).collect();
        let mut cand: BTreeSet<usize> = BTreeSet::new();
        for v in variants {
            cand.extend(self.by_stem.get(v).into_iter().flatten());
            cand.extend(self.by_def.get(v).into_iter().flatten());
        }
        for k in std::iter::once(kernel.split('.').next().unwrap_or(kernel)).chain(variants.iter().map(String::as_str)) {
            cand.extend(self.by_op.get(k).into_iter().flatten());
        }
        let targets = self.target_vendors();
        let mut out = Vec::new();
        for i in cand {
            let f = &self.kfiles[i];
            // The op this file defines or registers a kernel for (a call site is no source).
            let op = f.ops.iter().filter(|o| o.kind != "use" && Self::op_matches(kernel, variants, o)).min_by_key(|o| (!o.defines(), o.line));
            let mut reasons = Vec::new();
            let mut score = 0.0;
            // A selector that loads this very file on the arch.
            let choice = active.iter().find_map(|s| s.choices().iter().position(|(_, file)| *file == f.file_name || *file == f.rel).map(|pos| (*s, pos)));
            // A tagged file with no target arch to meet is another arch's.
            let reach = match arch {
                Some(a) => katlas_arch::tag_reach(f.tag_arch.as_deref(), a, &opts.families),
                None => f.tag_arch.is_none().then_some(Via::Base),
            };
            if reach.is_none() && choice.is_none() {
                continue; // built for another chip or family
            }
            let name_hit = variants.iter().position(|v| *v == f.stem);
            let def = variants.iter().enumerate().find_map(|(i, v)| f.defs.get(v).map(|l| (i, v.clone(), *l)));
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
                (None, None) => match op {
                    Some(o) => o.name.clone(),
                    None => continue,
                },
            };
            let tag_s = f.tag_arch.as_deref().unwrap_or("");
            let mut hazard = None;
            match reach {
                Some(Via::Chip) => match &f.tag_rest {
                    None => {
                        score += 50.0;
                        reasons.push(format!("chip tag `{tag_s}` is the target arch"));
                    }
                    Some(rest) => {
                        score += 45.0;
                        reasons.push(format!("chip tag `{tag_s}` with variant suffix `{rest}`: which variant loads is decided at run time"));
                    }
                },
                Some(Via::Family) => {
                    score += 30.0;
                    let a = arch.unwrap_or("?");
                    reasons.push(match opts.family_rule {
                        FamilyRule::Table => format!("family tag `{tag_s}`: family of {a} in the arch table"),
                        rule => format!("family tag `{tag_s}`: the project's family rule ({}: {}) gives {a} `{tag_s}`", rule.name(), rule.describe()),
                    });
                    if let Some(h) = opts.family_hazards.get(tag_s) {
                        reasons.push(format!("hazard: {h}"));
                        hazard = Some(h.clone());
                    }
                }
                None => reasons.push(format!("tagged for {tag_s}, not {}", arch.unwrap_or("?"))),
                Some(Via::Base) => reasons.push("base file (no arch tag)".into()),
            }
            let mut definition_line = None;
            let mut triton = None;
            match (&def, &f.py) {
                (Some((i, v, l)), Some(py)) if !f.string_kernels.contains(v) => {
                    definition_line = Some(*l);
                    match py.def(v).and_then(|d| d.triton.clone()) {
                        Some(t) => {
                            score += 40.0 - 5.0 * *i as f64;
                            let decos: Vec<String> = t.decorators.iter().map(|d| format!("@{d}")).collect();
                            reasons.push(format!("defines Triton kernel `{v}` at line {l} ({} from line {})", decos.join(" "), t.first_line));
                            triton = Some(t);
                        }
                        None => {
                            score += 10.0 - *i as f64;
                            reasons.push(format!("defines Python function `{v}` at line {l} (no Triton decorator)"));
                        }
                    }
                }
                (Some((i, v, l)), Some(py)) => {
                    score += 40.0 - 5.0 * *i as f64;
                    definition_line = Some(*l);
                    let inline: Vec<String> = py.builds.iter().filter(|b| b.call == "load_inline").map(|b| format!("load_inline at line {}", b.line)).collect();
                    reasons.push(format!(
                        "defines CUDA kernel `{v}` at line {l}, inside a Python string{}",
                        if inline.is_empty() { String::new() } else { format!(" (built by {})", inline.join(", ")) }
                    ));
                }
                (Some((i, v, l)), None) => {
                    score += 40.0 - 5.0 * *i as f64;
                    definition_line = Some(*l);
                    reasons.push(format!("defines kernel `{v}` at line {l}"));
                }
                (None, _) if op.is_some() => {}
                (None, _) => reasons.push("no kernel definition found in the file (an include or wrapper?)".into()),
            }
            if let Some(o) = op {
                let via = o.function.as_deref().map(|f| format!(", function `{f}`")).unwrap_or_default();
                if o.defines() {
                    score += 35.0;
                    reasons.push(format!("defines custom op `{}` at line {} ({}{via})", o.name, o.line, o.kind));
                } else {
                    score += 30.0;
                    reasons.push(format!("registers a kernel for custom op `{}` at line {} ({}{via})", o.name, o.line, o.kind));
                }
                if definition_line.is_none() {
                    definition_line = o.function.as_deref().and_then(|n| f.py.as_ref()?.def(n)).map(|d| d.line).or(Some(o.line));
                }
            }
            if f.py.is_some() {
                // Another accelerator's backend (fla's `backends/triton_ascend/`) defines the same
                // names; the one for this GPU's vendor is the one a run here launches.
                if let Some((d, v)) = f.dirs.iter().find_map(|d| dir_vendor(d).filter(|v| !targets.contains(v)).map(|v| (d, v))) {
                    score -= 60.0;
                    reasons.push(format!("under `{d}/`, a backend for {v} (target: {})", targets.join(" or ")));
                }
                if let Some((m, n)) = f.module.as_ref().and_then(|m| self.fan_in.get(m).map(|n| (m, *n))) {
                    score += n.min(9) as f64;
                    reasons.push(format!("module `{m}` is imported by {n} indexed file{}", if n == 1 { "" } else { "s" }));
                }
            }
            let built_by = self.built_by.get(&f.rel).cloned().unwrap_or_default();
            if !built_by.is_empty() {
                score += 20.0;
                reasons.push(format!("compiled at run time by {}", built_by.join(", ")));
            }
            let mut selected_by = None;
            let a = arch.unwrap_or("?");
            match choice {
                Some((s, pos)) => {
                    let value = s.choices()[pos].0;
                    let how = match (&s.knob, value) {
                        (Some(k), Some(v)) if pos == 0 => format!(" when {k} unset (default {v}) or {k}={v}"),
                        (Some(k), Some(v)) => format!(" when {k}={v}"),
                        _ if s.archs == ["*"] => " (its default arm)".to_string(),
                        _ => String::new(),
                    };
                    score += if pos == 0 { 300.0 } else { 200.0 - pos as f64 };
                    let at = s.at.as_deref().map(|x| format!(" at {x}")).unwrap_or_default();
                    reasons.push(format!("{}{at} loads this on {a}{how}", s.label()));
                    selected_by = Some(match (&s.knob, value) {
                        (Some(k), Some(v)) => format!("{}: {k}={v}{}", s.label(), if pos == 0 { " (default)" } else { "" }),
                        _ => s.at.as_deref().map(|x| format!("{} ({x})", s.label())).unwrap_or_else(|| s.label()),
                    });
                }
                None => {
                    if let Some(s) = active.iter().find(|s| s.kernel == matched) {
                        score -= 100.0;
                        reasons.push(format!(
                            "not loaded on {a}: {} picks {}'s source{}",
                            s.label(),
                            s.kernel,
                            s.knob.as_deref().map(|k| format!(" by {k}")).unwrap_or_default()
                        ));
                    }
                }
            }
            let mut embedded_at = Vec::new();
            if self.embed_mode {
                let sites = self.host.embeds_of(&f.rel);
                let sites: Vec<&LoadSite> = sites.into_iter().filter(|l| (l.pattern as usize) < self.n_load).collect();
                if sites.is_empty() {
                    score -= 200.0;
                    reasons.push(format!("no load pattern embeds this file ({}): the runtime never loads it", self.load_calls(ArgKind::File)));
                } else {
                    embedded_at = sites.iter().map(|l| self.site_at(l)).collect();
                    let call = opts.load_patterns.get(sites[0].pattern as usize).map(|p| p.call()).unwrap_or_default();
                    reasons.push(format!("embedded at {} ({call})", embedded_at.join(", ")));
                }
            }
            out.push(SourceCandidate {
                path: f.rel.clone(),
                score,
                tag_kind: tag_kind_word(reach).into(),
                tag: f.tag.clone(),
                matched,
                definition_line,
                reasons,
                selected_by,
                embedded_at,
                hazard,
                triton,
                custom_op: op.cloned(),
                built_by,
            });
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)));
        out
    }

    /// The vendors a run here targets: the arch's, else the GPU vendors Triton builds for.
    fn target_vendors(&self) -> Vec<&'static str> {
        match self.opts.arch.as_deref().and_then(arch_vendor) {
            Some(v) => vec![v],
            None => vec!["nvidia", "amd"],
        }
    }

    /// A directory of `rel` below its root that holds another vendor's backend (`triton_ascend`).
    fn other_vendor_dir(&self, rel: &str) -> Option<(String, &'static str)> {
        let p = self.opts.root.join(rel);
        let roots = self.opts.dispatch_roots.iter().chain(&self.opts.kernel_roots).map(|r| self.opts.root.join(r));
        let inner = roots.filter_map(|r| p.strip_prefix(&r).ok().map(Path::to_path_buf)).min_by_key(|i| i.components().count())?;
        let targets = self.target_vendors();
        let dirs = inner.parent()?.components().filter_map(|c| c.as_os_str().to_str().map(str::to_string)).collect::<Vec<_>>();
        dirs.into_iter().find_map(|d| dir_vendor(&d).filter(|v| !targets.contains(v)).map(|v| (d, v)))
    }

    fn dispatch_refs(&self, variants: &[String]) -> Vec<DispatchRef> {
        let mut refs = Vec::new();
        if self.load_mode {
            // One reference per load call: (file, call line) -> best variant and its first literal.
            let mut best: BTreeMap<(u32, u32), (usize, &LoadSite)> = BTreeMap::new();
            for (vi, v) in variants.iter().enumerate() {
                for l in self.host.name_loads(v) {
                    if l.pattern as usize >= self.n_load {
                        continue;
                    }
                    let e = best.entry((l.file, l.call_line)).or_insert((vi, l));
                    if (vi, l.line) < (e.0, e.1.line) {
                        *e = (vi, l);
                    }
                }
            }
            for ((file, _), (vi, l)) in best {
                let line = l.line;
                let v = &variants[vi];
                let call = self.opts.load_patterns[l.pattern as usize].call();
                let mut score = 100.0 - 10.0 * vi as f64;
                let mut reasons = vec![if l.call_line == l.line {
                    format!("loads `{v}` by name: {call}(…)")
                } else {
                    format!("loads `{v}` by name: {call}(…) from line {}", l.call_line)
                }];
                let knobs = self.host.knobs_near(file, line, 10);
                if !knobs.is_empty() {
                    score += 5.0;
                    reasons.push(format!("env knobs read within 10 lines: {}", knobs.iter().cloned().collect::<Vec<_>>().join(", ")));
                }
                let hf = &self.host.files[file as usize];
                let text = if l.call_line == line {
                    hf.line_text(line).trim().to_string()
                } else {
                    format!("{} … {}", hf.line_text(l.call_line).trim(), hf.line_text(line).trim())
                };
                refs.push(DispatchRef {
                    path: hf.rel.clone(),
                    line: line as u64,
                    text: text.chars().take(200).collect(),
                    score,
                    matched: v.clone(),
                    reasons,
                    env_knobs: knobs.into_iter().collect(),
                    kind: "load".into(),
                    via: Some(call),
                    call_line: Some(l.call_line as u64),
                });
            }
        } else {
            let mut best: BTreeMap<(u32, u32), usize> = BTreeMap::new();
            for (vi, v) in variants.iter().enumerate() {
                for m in self.host.mentions.get(v).into_iter().flatten() {
                    best.entry((m.file, m.line)).or_insert(vi);
                }
            }
            for ((file, line), vi) in best {
                let v = &variants[vi];
                let hf = &self.host.files[file as usize];
                let text = hf.line_text(line);
                // A kernel's own definition is a source, not a dispatch.
                if text.contains("__global__") && definitions(text).contains_key(v.as_str()) {
                    continue;
                }
                let t = text.trim_start();
                if t.strip_prefix("def ")
                    .or_else(|| t.strip_prefix("async def "))
                    .is_some_and(|r| r.trim_start().strip_prefix(v.as_str()).is_some_and(|r| r.trim_start().starts_with('(')))
                {
                    continue;
                }
                let mut score = 10.0 - vi as f64;
                let mut reasons = vec![format!("mentions `{v}`")];
                if text.contains(&format!("\"{v}\"")) {
                    score += 20.0;
                    reasons.push("as a string literal (loaded by name)".into());
                }
                if text.contains(&format!("{v}[")) && hf.rel.ends_with(".py") {
                    // `kernel[grid](…)`: how a Triton kernel is launched.
                    score += 30.0;
                    reasons.push("Triton launch site (`[grid](…)`)".into());
                } else if text.contains(&format!("{v}<<<"))
                    || text.contains(&format!("{v} <<<"))
                    || text.contains("hipLaunchKernelGGL")
                    || text.contains("cudaLaunchKernel")
                    || text.contains("launch")
                {
                    score += 30.0;
                    reasons.push("launch site".into());
                }
                if let Some((d, v)) = self.other_vendor_dir(&hf.rel) {
                    score -= 30.0;
                    reasons.push(format!("under `{d}/`, a backend for {v}"));
                }
                let knobs = self.host.knobs_near(file, line, 10);
                if !knobs.is_empty() {
                    score += 5.0;
                    reasons.push(format!("env knobs read within 10 lines: {}", knobs.iter().cloned().collect::<Vec<_>>().join(", ")));
                }
                refs.push(DispatchRef {
                    path: hf.rel.clone(),
                    line: line as u64,
                    text: text.trim().chars().take(200).collect(),
                    score,
                    matched: v.clone(),
                    reasons,
                    env_knobs: knobs.into_iter().collect(),
                    kind: "reference".into(),
                    via: None,
                    call_line: None,
                });
            }
        }
        refs.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)).then(a.line.cmp(&b.line)));
        refs.truncate(self.opts.max_refs);
        refs
    }
}

/// Rank source files and dispatch references for one kernel name (reads the tree; for many
/// kernels build one [`ProvenanceIndex`] instead).
pub fn locate(kernel: &str, opts: &ProvenanceOptions) -> KernelProvenance {
    ProvenanceIndex::build(opts).locate(kernel)
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
    fn a_project_below_a_cache_directory_is_scanned() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join(".cache/bench/proj");
        std::fs::create_dir_all(root.join("kernels")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("kernels/k.hip"), "extern \"C\" __global__ void k(float* x) {}\n").unwrap();
        std::fs::write(root.join("src/host.rs"), "load(\"k\");\n").unwrap();
        let p = locate("k", &ProvenanceOptions::new(&root));
        assert_eq!(p.sources[0].path, "kernels/k.hip");
        assert_eq!(p.dispatch[0].path, "src/host.rs");
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
