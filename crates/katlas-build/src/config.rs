//! The `[build]` and `[reach]` sections of `katlas.toml`, resolved against the project into
//! [`Settings`]: the matrix (validated against the arch table), kernel roots, dispatch roots.

use crate::error::{BuildError, Result};
use katlas_arch::{ArchDb, Atom};
use katlas_collect::loads::{parse_patterns, FamilyRule, LoadPattern, Selector};
use katlas_project::Project;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The matrix when `[build] matrix` is not set: one atom per shipping family we target.
pub const DEFAULT_MATRIX: &[&str] = &["gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201", "sm_80", "sm_90"];

/// `[build]` in katlas.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildConfig {
    /// Arch atoms every change must compile for.
    pub matrix: Option<Vec<String>>,
    /// Kernel source directories (default: `[project] kernel_roots`, or `kernels/src` with the
    /// hipfire preset, else the default roots provenance and suggest read; see [`RootsFrom`]).
    pub kernel_roots: Option<Vec<String>>,
    /// Extra include directories searched after the including file's own directory.
    #[serde(default)]
    pub include_dirs: Vec<String>,
    /// File extensions compiled as HIP (default `["hip"]`).
    pub hip_extensions: Option<Vec<String>>,
    /// File extensions compiled as CUDA (default `["cu"]`).
    pub cuda_extensions: Option<Vec<String>>,
    /// `auto` (hipcc when present, else clang), `clang`, `hipcc`, or a path.
    pub hip_compiler: Option<String>,
    /// `auto` (nvcc when present, else NVRTC), `nvrtc`, `nvcc`, or a path.
    pub cuda_compiler: Option<String>,
    /// libnvrtc.so (or its folder) for CUDA without nvcc; default: `KATLAS_NVRTC`, else the
    /// standard places of [`crate::nvrtc::candidates`] (pip's wheel, a CUDA toolkit, the loader path).
    pub nvrtc: Option<String>,
    /// Flags appended to every HIP compile (after `-O3 -std=c++17`).
    #[serde(default)]
    pub hip_flags: Vec<String>,
    /// Flags appended to every CUDA compile.
    #[serde(default)]
    pub cuda_flags: Vec<String>,
    /// `replace` (default, hipfire: a tagged file replaces the base for its atoms) or
    /// `add` (a tagged file is compiled beside the base for its atoms).
    pub tags: Option<String>,
    /// Source paths (relative to the project root) never compiled.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Parallel compiles (default: available cores).
    pub jobs: Option<usize>,
    /// Seconds one compile may take before it is killed (default 900, or `KATLAS_BUILD_TIMEOUT`).
    pub timeout_s: Option<u64>,
    /// Per-atom include/exclude rules (`[[build.rule]]`): which atoms a kernel is compiled for.
    /// The hipfire preset adds compile-kernels.sh's rules after these.
    #[serde(default)]
    pub rule: Vec<AtomRule>,
    /// HIP headers + device bitcode for a bare clang: a ROCm-like root (`include/hip/hip_runtime.h`)
    /// or a folder holding one as `usr/`; default `KATLAS_HIP_HEADERS`, else the standard places
    /// of [`crate::compiler::HipHeaders::find`] (a ROCm install, Debian's packages).
    pub hip_headers: Option<String>,
}

/// `[reach]` in katlas.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReachConfig {
    /// Host code directories (default: `[project] dispatch_roots`).
    pub dispatch_roots: Option<Vec<String>>,
    /// Host file extensions scanned for dispatch references.
    pub extensions: Option<Vec<String>>,
    /// Macros that declare a kernel entry point besides `__global__` (e.g. `LAB_KERNEL`).
    #[serde(default)]
    pub kernel_macros: Vec<String>,
    /// Kernels knowingly compiled without a dispatch (tests, tools): not reported.
    #[serde(default)]
    pub allow_undispatched: Vec<String>,
    /// How the project's runtime maps an arch to the family tag it takes: `table` (the arch
    /// table's `family`/`also_families`, the default) or `prefixN` (the first N characters of
    /// the arch name; the hipfire preset: `prefix5`). `katlas build` compiles by the table;
    /// reach reports where the runtime's rule disagrees (`family_hazards`), provenance follows
    /// the runtime's rule.
    pub family_rule: Option<String>,
    /// What counts as a kernel load in host code: `callee(ARG, …)` with ARG `_`, `"{name}"`
    /// (a kernel name literal) or `"{file}"` (a kernel source path literal, relative to the
    /// host file); the hipfire preset: `ensure_kernel("{name}", _, "{name}")`,
    /// `include_str!("{file}")`. Unset: any reference to the name counts.
    pub load_patterns: Option<Vec<String>>,
    /// Calls whose `"{name}"` literal is a kernel name the project's profiler records
    /// (`katlas provenance --all-profiled`); hipfire: `begin_timer(_, _, "{name}")`.
    pub profile_patterns: Option<Vec<String>>,
    /// Run-time variant selectors (`[[reach.selectors]]`): `kernel`, `archs` (`["*"]` with
    /// `except`: every other atom), and `file` or `knob` + `default` + `files` (knob value ->
    /// file name); `function` names where.
    pub selectors: Option<Vec<Selector>>,
    /// Functions whose arch `match` picks a kernel's source, as name globs (hipfire:
    /// `*_for_arch`): each arm `"gfx1100" | "gfx1151" => (SRC_CONST, …)` whose constant is
    /// `include_str!`'d from a file is a selector (the default arm `_`: every atom no arm lists).
    pub selector_functions: Option<Vec<String>>,
}

/// The hipfire preset's runtime model (`[project] preset = "hipfire"`): what its runtime does,
/// read from compile-kernels.sh (`arch_family="${arch:0:5}"`), dispatch.rs (`ensure_kernel`),
/// kernels.rs (`include_str!`, `gemv_hfq4g256_for_arch`) and profile.rs (`begin_timer`).
/// Keys set in `[reach]` win.
pub const HIPFIRE_REACH_PRESET: &str = r#"
family_rule = "prefix5"
load_patterns = ['ensure_kernel("{name}", _, "{name}")', 'include_str!("{file}")']
profile_patterns = ['begin_timer(_, _, "{name}")']
selector_functions = ["*_for_arch"]

[[selectors]]
kernel = "gemv_hfq4g256"
function = "gemv_hfq4g256_for_arch"
archs = ["gfx1030", "gfx1031"]
knob = "HIPFIRE_RDNA2_VARIANT"
default = "1"
files = { "1" = "gemv_hfq4g256.gfx1030.v1.hip", "2" = "gemv_hfq4g256.gfx1030.v2.hip", "3" = "gemv_hfq4g256.gfx1030.v3.hip", "4" = "gemv_hfq4g256.gfx1030.v4.hip", "5" = "gemv_hfq4g256.gfx1030.v5.hip" }
"#;

/// `[reach]` with the project preset's keys filled in where the file leaves them unset, the
/// runtime-model keys validated (`katlas.toml: reach.family_rule: …`).
pub fn reach_config(project: &Project) -> Result<ReachConfig> {
    let mut reach: ReachConfig = project.section(&["reach"]).map_err(cfg_err)?.unwrap_or_default();
    if project.config.project.preset.as_deref() == Some("hipfire") {
        let p: ReachConfig = toml::from_str(HIPFIRE_REACH_PRESET).expect("the hipfire preset parses");
        reach.family_rule = reach.family_rule.or(p.family_rule);
        reach.load_patterns = reach.load_patterns.or(p.load_patterns);
        reach.profile_patterns = reach.profile_patterns.or(p.profile_patterns);
        reach.selectors = reach.selectors.or(p.selectors);
        reach.selector_functions = reach.selector_functions.or(p.selector_functions);
    }
    let shown = project.config_file().display().to_string();
    if let Some(r) = &reach.family_rule {
        FamilyRule::parse(r).map_err(|e| BuildError::BadInput(format!("{shown}: reach.family_rule: {e}")))?;
    }
    for (key, v) in [("load_patterns", &reach.load_patterns), ("profile_patterns", &reach.profile_patterns)] {
        parse_patterns(v.as_deref().unwrap_or_default()).map_err(|e| BuildError::BadInput(format!("{shown}: reach.{key}: {e}")))?;
    }
    for s in reach.selectors.iter().flatten() {
        s.validate().map_err(|e| BuildError::BadInput(format!("{shown}: reach.selectors: {e}")))?;
    }
    for g in reach.selector_functions.iter().flatten() {
        if g.is_empty() || g == "*" || !g.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*') {
            return Err(BuildError::BadInput(format!("{shown}: reach.selector_functions: `{g}` is not a function name glob (letters, digits, _ and *)")));
        }
    }
    Ok(reach)
}

pub const DEFAULT_HOST_EXTENSIONS: &[&str] = &["rs", "c", "cc", "cpp", "cxx", "h", "hh", "hpp", "hxx", "py", "go", "zig", "swift", "js", "ts"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TagMode {
    Replace,
    Add,
}

/// Where the kernel roots came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RootsFrom {
    /// `[build] kernel_roots`.
    Build,
    /// `[project] kernel_roots`.
    Project,
    /// The preset's (hipfire: `kernels/src`).
    Preset,
    /// None configured (what `katlas init` writes): the default roots provenance and suggest
    /// read, `kernels/`, `src/` and the project's top-level Python packages, those that exist.
    Discovered,
}

impl RootsFrom {
    /// Where the roots came from, for a message.
    pub fn describe(self) -> &'static str {
        match self {
            RootsFrom::Build => "[build] kernel_roots",
            RootsFrom::Project => "[project] kernel_roots",
            RootsFrom::Preset => "preset \"hipfire\"",
            RootsFrom::Discovered => "found: no kernel_roots configured; the defaults provenance and suggest read: kernels/, src/, top-level Python packages",
        }
    }
}

/// The default kernel roots when none is configured: provenance's own defaults
/// ([`katlas_collect::provenance::ProvenanceOptions::new`]), so build, reach, provenance and
/// suggest read the same sources; only those that exist, since a missing default is no error.
pub fn default_kernel_roots(root: &Path) -> Vec<PathBuf> {
    katlas_collect::provenance::ProvenanceOptions::new(root).kernel_roots.into_iter().map(|p| root.join(p)).filter(|p| p.is_dir()).collect()
}

/// Everything the build, reach and lint stages need, resolved and validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub root: PathBuf,
    pub config_file: PathBuf,
    pub db: ArchDb,
    /// Matrix atoms (canonical names, table order of the config).
    pub matrix: Vec<String>,
    pub kernel_roots: Vec<PathBuf>,
    pub kernel_roots_from: RootsFrom,
    pub include_dirs: Vec<PathBuf>,
    pub hip_extensions: Vec<String>,
    pub cuda_extensions: Vec<String>,
    pub hip_compiler: String,
    pub cuda_compiler: String,
    pub nvrtc: Option<PathBuf>,
    pub hip_flags: Vec<String>,
    pub cuda_flags: Vec<String>,
    pub tag_mode: TagMode,
    pub exclude: Vec<String>,
    pub jobs: Option<usize>,
    pub timeout_s: u64,
    /// `[[build.rule]]`s, then the preset's (validated; atom names canonical).
    pub rules: Vec<AtomRule>,
    /// `[build] hip_headers` (resolved against the root) or `KATLAS_HIP_HEADERS`; `None`: look
    /// in the standard places (see [`crate::compiler::HipHeaders::find`]).
    pub hip_headers: Option<PathBuf>,
    pub dispatch_roots: Vec<PathBuf>,
    pub host_extensions: Vec<String>,
    pub kernel_macros: Vec<String>,
    pub allow_undispatched: Vec<String>,
    /// The runtime's family rule (`[reach] family_rule`).
    pub family_rule: FamilyRule,
    /// What counts as a kernel load (`[reach] load_patterns`); empty: any reference.
    pub load_patterns: Vec<LoadPattern>,
    pub profile_patterns: Vec<LoadPattern>,
    pub selectors: Vec<Selector>,
    /// `[reach] selector_functions`.
    pub selector_functions: Vec<String>,
}

fn cfg_err(e: katlas_project::ConfigError) -> BuildError {
    BuildError::BadInput(e.to_string())
}

impl Settings {
    /// Read `[build]`/`[reach]` from the project. `matrix_override` is `--arch LIST`.
    pub fn load(project: &Project, matrix_override: Option<&[String]>) -> Result<Settings> {
        let build: BuildConfig = project.section(&["build"]).map_err(cfg_err)?.unwrap_or_default();
        let reach = reach_config(project)?;
        let db = ArchDb::load(Some(&katlas_corpus::Layout::for_project(&project.root).arch_rules_dir())).map_err(|e| BuildError::BadInput(e.to_string()))?;
        let config_file = project.config_file();
        let shown = config_file.display().to_string();
        let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
        let hipfire = project.config.project.preset.as_deref() == Some("hipfire");
        let script = root.join(HIPFIRE_SCRIPT);
        let (names, from): (Vec<String>, String) = match (matrix_override, &build.matrix) {
            (Some(m), _) => (m.to_vec(), "--arch".into()),
            (None, Some(m)) => (m.clone(), format!("{shown}: build.matrix")),
            (None, None) if hipfire && script.is_file() => {
                let text = std::fs::read_to_string(&script).map_err(|e| BuildError::io(&script, e))?;
                let archs = hipfire_script_archs(&text).ok_or_else(|| {
                    BuildError::BadInput(format!(
                        "{}: preset \"hipfire\": no default `ARCHS=(...)` list found; set [build] matrix in {shown}",
                        script.display()
                    ))
                })?;
                (archs, format!("{} (preset \"hipfire\")", script.display()))
            }
            (None, None) => (DEFAULT_MATRIX.iter().map(|s| s.to_string()).collect(), "default matrix".into()),
        };
        let matrix = validate_matrix(&db, &names, &from)?;
        let mut rules = build.rule.clone();
        if hipfire {
            let p: BuildConfig = toml::from_str(HIPFIRE_BUILD_PRESET).expect("the hipfire build preset parses");
            rules.extend(p.rule);
        }
        for (i, r) in rules.iter_mut().enumerate() {
            let at = if i < build.rule.len() { format!("{shown}: build.rule[{i}]") } else { "preset \"hipfire\": build.rule".into() };
            r.validate(&db, &at)?;
        }
        let rel = |v: &[String]| v.iter().map(|s| root.join(s)).collect::<Vec<_>>();
        // An empty list (what `katlas init` writes) configures nothing.
        let configured = project.config.project.effective_kernel_roots();
        let (kernel_roots, kernel_roots_from) = match &build.kernel_roots {
            Some(r) if !r.is_empty() => (rel(r), RootsFrom::Build),
            _ if !configured.is_empty() => {
                (rel(&configured), if project.config.project.kernel_roots.is_empty() { RootsFrom::Preset } else { RootsFrom::Project })
            }
            _ => (default_kernel_roots(&root), RootsFrom::Discovered),
        };
        let dispatch_roots = match &reach.dispatch_roots {
            Some(r) => rel(r),
            None => rel(&project.config.project.effective_dispatch_roots()),
        };
        let tag_mode = match build.tags.as_deref() {
            None | Some("replace") => TagMode::Replace,
            Some("add") => TagMode::Add,
            Some(o) => return Err(BuildError::BadInput(format!("{shown}: build.tags: unknown mode `{o}` (expected `replace` or `add`)"))),
        };
        if build.jobs == Some(0) {
            return Err(BuildError::BadInput(format!("{shown}: build.jobs: must be at least 1")));
        }
        Ok(Settings {
            config_file,
            db,
            matrix,
            kernel_roots,
            kernel_roots_from,
            include_dirs: rel(&build.include_dirs),
            hip_extensions: build.hip_extensions.unwrap_or_else(|| vec!["hip".into()]),
            cuda_extensions: build.cuda_extensions.unwrap_or_else(|| vec!["cu".into()]),
            hip_compiler: build.hip_compiler.unwrap_or_else(|| "auto".into()),
            cuda_compiler: build.cuda_compiler.unwrap_or_else(|| "auto".into()),
            nvrtc: build.nvrtc.map(|p| root.join(p)),
            hip_flags: build.hip_flags,
            cuda_flags: build.cuda_flags,
            tag_mode,
            exclude: build.exclude,
            jobs: build.jobs,
            timeout_s: build.timeout_s.or_else(|| std::env::var("KATLAS_BUILD_TIMEOUT").ok().and_then(|v| v.parse().ok())).unwrap_or(900).max(1),
            rules,
            hip_headers: build
                .hip_headers
                .map(|p| root.join(p))
                .or_else(|| std::env::var_os("KATLAS_HIP_HEADERS").filter(|v| !v.is_empty()).map(PathBuf::from)),
            dispatch_roots,
            host_extensions: reach.extensions.unwrap_or_else(|| DEFAULT_HOST_EXTENSIONS.iter().map(|s| s.to_string()).collect()),
            kernel_macros: reach.kernel_macros,
            allow_undispatched: reach.allow_undispatched,
            family_rule: reach.family_rule.as_deref().map(FamilyRule::parse).transpose().map_err(BuildError::BadInput)?.unwrap_or_default(),
            load_patterns: parse_patterns(reach.load_patterns.as_deref().unwrap_or_default()).map_err(BuildError::BadInput)?,
            profile_patterns: parse_patterns(reach.profile_patterns.as_deref().unwrap_or_default()).map_err(BuildError::BadInput)?,
            selectors: reach.selectors.unwrap_or_default(),
            selector_functions: reach.selector_functions.unwrap_or_default(),
            root,
        })
    }

    /// The first `[[build.rule]]` that keeps `atom` from compiling `kernel` (`file`), if any.
    pub fn blocking_rule(&self, kernel: &str, file: &str, atom: &str) -> Option<&AtomRule> {
        self.rules.iter().find(|r| !r.allows(kernel, file, atom))
    }

    pub fn atom(&self, name: &str) -> &Atom {
        self.db.atom(name).expect("matrix atoms were validated against the table")
    }

    /// `kernel roots: kernels, src (found: …)`: which roots a command read, and why those.
    pub fn kernel_roots_note(&self) -> String {
        let roots: Vec<String> = self.kernel_roots.iter().map(|p| self.rel(p)).collect();
        let shown = if roots.is_empty() { "none".to_string() } else { roots.join(", ") };
        format!("kernel roots: {shown} ({})", self.kernel_roots_from.describe())
    }

    /// Project-relative display path.
    pub fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.root).unwrap_or(p).display().to_string()
    }

    /// The project's `.katlas/` layout.
    pub fn layout(&self) -> katlas_corpus::Layout {
        katlas_corpus::Layout::for_project(&self.root)
    }

    /// Where build state lives: `.katlas/build/`.
    pub fn build_dir(&self) -> PathBuf {
        self.layout().build_dir()
    }
}

/// Canonical atom names for `names`; an unknown or non-atom name (a family, a class) is an error.
pub fn validate_matrix(db: &ArchDb, names: &[String], from: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for n in names.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let canon = katlas_arch::canonical_atom(n);
        match db.atoms().find(|a| a.name == canon) {
            Some(a) => {
                if !out.contains(&a.name) {
                    out.push(a.name.clone())
                }
            }
            None => {
                let members: Vec<&str> = db.family_members(n).iter().map(|a| a.name.as_str()).collect();
                let hint = if members.len() > 1 || db.families().contains(n) {
                    format!(" (`{n}` is a family: list its atoms, e.g. {})", members.join(" "))
                } else {
                    String::new()
                };
                return Err(BuildError::BadInput(format!("{from}: `{n}` is not an arch atom of the table{hint}")));
            }
        }
    }
    if out.is_empty() {
        return Err(BuildError::BadInput(format!("{from}: the matrix is empty")));
    }
    Ok(out)
}

/// Where a hipfire tree keeps its compile script; the preset reads its default arch list.
pub const HIPFIRE_SCRIPT: &str = "scripts/compile-kernels.sh";

/// The hipfire preset's per-atom rules, as compile-kernels.sh applies them to the kernel name
/// before variant resolution (so a tagged file follows its base name's rule).
pub const HIPFIRE_BUILD_PRESET: &str = r#"
[[rule]]
files = ["*_wmma*", "gemv_mq8g256"]
exclude_atoms = ["gfx906"]
reason = "hipfire compile-kernels.sh: unsupported ISA on gfx906 (WMMA, MQ8)"

[[rule]]
files = ["*_gfx906", "*_gfx906_*", "*_dp4a"]
only_atoms = ["gfx906"]
reason = "hipfire compile-kernels.sh: gfx906-only (sdot4 dp4a)"
"#;

/// The default `ARCHS=(...)` of hipfire's compile-kernels.sh (the `else` branch: what it builds
/// when given no arguments).
pub fn hipfire_script_archs(script: &str) -> Option<Vec<String>> {
    let re = regex::Regex::new(r"(?m)^\s*ARCHS=\(([^)$]*)\)").expect("valid regex");
    let caps = re.captures_iter(script).last()?;
    let v: Vec<String> = caps[1].split_whitespace().map(str::to_string).collect();
    (!v.is_empty()).then_some(v)
}

/// One or several glob patterns.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Patterns {
    One(String),
    Many(Vec<String>),
}

impl Patterns {
    pub fn list(&self) -> &[String] {
        match self {
            Patterns::One(s) => std::slice::from_ref(s),
            Patterns::Many(v) => v,
        }
    }
}

/// `[[build.rule]]`: kernels matching `files` are not compiled for `exclude_atoms`, and only for
/// `only_atoms` when that is set. A pattern (`*` any run, `?` one character) matches the kernel
/// name (the file name without tag and extension, what hipfire's script matches), the file
/// name, or the project-relative path.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AtomRule {
    pub files: Patterns,
    #[serde(default)]
    pub exclude_atoms: Vec<String>,
    #[serde(default)]
    pub only_atoms: Vec<String>,
    /// Shown when the rule skips a job.
    #[serde(default)]
    pub reason: Option<String>,
}

impl AtomRule {
    fn validate(&mut self, db: &ArchDb, at: &str) -> Result<()> {
        if self.files.list().is_empty() || self.files.list().iter().any(|p| p.trim().is_empty()) {
            return Err(BuildError::BadInput(format!("{at}.files: needs at least one non-empty pattern")));
        }
        if self.exclude_atoms.is_empty() && self.only_atoms.is_empty() {
            return Err(BuildError::BadInput(format!("{at}: needs exclude_atoms or only_atoms")));
        }
        for (key, list) in [("exclude_atoms", &mut self.exclude_atoms), ("only_atoms", &mut self.only_atoms)] {
            if !list.is_empty() {
                *list = validate_matrix(db, list, &format!("{at}.{key}"))?;
            }
        }
        Ok(())
    }

    /// True when a pattern matches the kernel, the file name or the project-relative path.
    pub fn matches(&self, kernel: &str, file: &str) -> bool {
        let name = Path::new(file).file_name().and_then(|n| n.to_str()).unwrap_or(file);
        self.files.list().iter().any(|p| [kernel, name, file].iter().any(|t| glob_match(p, t)))
    }

    /// Whether this rule lets `atom` compile the kernel (true when the rule does not match).
    pub fn allows(&self, kernel: &str, file: &str, atom: &str) -> bool {
        !self.matches(kernel, file)
            || (!self.exclude_atoms.iter().any(|a| a == atom) && (self.only_atoms.is_empty() || self.only_atoms.iter().any(|a| a == atom)))
    }
}

/// `*` (any run, also empty) and `?` (one character) glob over the whole text.
pub fn glob_match(pat: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pat.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}
