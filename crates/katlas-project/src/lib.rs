//! The user's project: discovery, `katlas.toml`, and where katlas writes.
//!
//! `katlas.toml` is optional. Its top-level sections are fixed (an unknown
//! key is an error naming key and line); the contents of sections owned by
//! other stages (`workload`, `route`, `gate` …) are kept raw here and
//! validated by their owners through [`Project::section`], which reports
//! errors as `katlas.toml:LINE: dotted.key: reason`.

mod locate;
pub mod trust;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

pub use locate::line_of_key;

pub const CONFIG_FILE: &str = "katlas.toml";

#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Config(ConfigError),
    #[error("--project {0}: not a directory")]
    NotADirectory(PathBuf),
    /// The config file is there but cannot be read as text (message names it).
    #[error("{0}")]
    Unreadable(String),
    /// The trust store's file is not one katlas wrote (never read as empty or trusting all).
    #[error("{path}: {message}")]
    TrustStore { path: PathBuf, message: String },
    /// No directory to keep the trust store in: the environment names none.
    #[error("no place for the trust store: set KATLAS_CONFIG_DIR, XDG_CONFIG_HOME or HOME")]
    NoTrustStorePlace,
}

/// A configuration error with its place: `file:line: key: reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(k) = &self.key {
            write!(f, ": {k}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl katlas_fs::class::Classify for ConfigError {
    fn class(&self) -> katlas_fs::class::Class {
        katlas_fs::class::Class::Input
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectSection {
    pub name: Option<String>,
    /// Layout preset: `hipfire` (kernels/src, chip and family tags) or `plain`.
    pub preset: Option<String>,
    /// Directories holding kernel sources, relative to the project root.
    #[serde(default)]
    pub kernel_roots: Vec<String>,
    /// Directories whose code dispatches kernels (host code).
    #[serde(default)]
    pub dispatch_roots: Vec<String>,
}

/// The hipfire preset's kernel sources: `kernels/src/*.hip` with chip and family tags.
pub const HIPFIRE_KERNEL_ROOTS: [&str; 1] = ["kernels/src"];
/// The hipfire preset's host code: every crate (dispatch.rs, kernels.rs, profile.rs, the examples).
pub const HIPFIRE_DISPATCH_ROOTS: [&str; 1] = ["crates"];

impl ProjectSection {
    pub fn is_hipfire(&self) -> bool {
        self.preset.as_deref() == Some("hipfire")
    }

    /// `kernel_roots`, else the preset's (hipfire: `kernels/src`); empty when neither says.
    /// Every command that reads kernel sources starts here, so the preset alone is enough.
    pub fn effective_kernel_roots(&self) -> Vec<String> {
        match (self.kernel_roots.is_empty(), self.is_hipfire()) {
            (false, _) => self.kernel_roots.clone(),
            (true, true) => HIPFIRE_KERNEL_ROOTS.map(String::from).to_vec(),
            (true, false) => Vec::new(),
        }
    }

    /// `dispatch_roots`, else the preset's (hipfire: `crates`); empty when neither says.
    pub fn effective_dispatch_roots(&self) -> Vec<String> {
        match (self.dispatch_roots.is_empty(), self.is_hipfire()) {
            (false, _) => self.dispatch_roots.clone(),
            (true, true) => HIPFIRE_DISPATCH_ROOTS.map(String::from).to_vec(),
            (true, false) => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentitySection {
    /// Route-affecting environment prefixes; replaces the defaults when set. A repository
    /// writes this file and records are pushed to a shared store, so a prefix that would
    /// record more than a namespace (`""`, `HOME`) is refused ([`katlas_identity::check_env_prefix`]).
    #[serde(default, deserialize_with = "checked_prefixes")]
    pub env_prefixes: Option<Vec<String>>,
    /// Extra exact variable names to record (checked as prefixes are).
    #[serde(default, deserialize_with = "checked_names")]
    pub env_names: Vec<String>,
    /// Hash model files (many GB) on every capture.
    #[serde(default)]
    pub hash_model: bool,
}

/// `[provenance]`: where kernel provenance looks beyond the project's own roots.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceSection {
    /// Installed Python packages, by top-level import name (`liger_kernel`, `fla`), whose
    /// sources join the kernel and dispatch roots (found through `python`).
    #[serde(default, deserialize_with = "import_names")]
    pub packages: Vec<String>,
    /// The interpreter the workload uses (default `python3`); it runs a command, so a value
    /// from katlas.toml needs trust.
    pub python: Option<String>,
}

fn import_names<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    for p in &v {
        if p.is_empty() || p.starts_with(|c: char| c.is_ascii_digit()) || !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(serde::de::Error::custom(format!("`{p}` is not a top-level import name (letters, digits, _; no dots)")));
        }
    }
    Ok(v)
}

fn checked_prefixes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let v = Option::<Vec<String>>::deserialize(d)?;
    for p in v.iter().flatten() {
        katlas_identity::check_env_prefix(p).map_err(serde::de::Error::custom)?;
    }
    Ok(v)
}

fn checked_names<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(checked_prefixes(d)?.unwrap_or_default())
}

/// `katlas.toml` as parsed. Stage-owned sections stay raw tables.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub project: ProjectSection,
    #[serde(default)]
    pub identity: IdentitySection,
    #[serde(default)]
    pub provenance: ProvenanceSection,
    #[serde(default)]
    pub workload: toml::Table,
    #[serde(default)]
    pub route: toml::Table,
    #[serde(default)]
    pub gate: toml::Table,
    #[serde(default)]
    pub eval: toml::Table,
    #[serde(default)]
    pub task: toml::Table,
    #[serde(default)]
    pub suggest: toml::Table,
    #[serde(default)]
    pub build: toml::Table,
    #[serde(default)]
    pub reach: toml::Table,
    #[serde(default)]
    pub store: toml::Table,
    #[serde(default)]
    pub fleet: toml::Table,
    #[serde(default)]
    pub perf_allowlist: Vec<toml::Table>,
}

#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    /// Path of `katlas.toml` when the project has one.
    pub config_path: Option<PathBuf>,
    config_text: String,
    pub config: Config,
}

impl Project {
    /// Find the project: `explicit` when given, else walk up from `cwd` to the
    /// first directory holding `katlas.toml`, else `.katlas/`, else `.git`;
    /// with none of them, `cwd` itself is the project.
    pub fn discover(cwd: &Path, explicit: Option<&Path>) -> Result<Project, ProjectError> {
        let root = match explicit {
            Some(p) => {
                if !p.is_dir() {
                    return Err(ProjectError::NotADirectory(p.into()));
                }
                p.to_path_buf()
            }
            None => find_root(cwd),
        };
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        Self::open(&root)
    }

    /// Open the project rooted at `root` (reads `root/katlas.toml` when present).
    pub fn open(root: &Path) -> Result<Project, ProjectError> {
        let path = root.join(CONFIG_FILE);
        let (config_path, text) = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, String::new()),
            // A leading BOM dropped, bad UTF-8 named by line, a link loop said as one.
            _ => match katlas_corpus::input::read_text(&path) {
                Ok(t) => (Some(path), t),
                Err(e) => return Err(ProjectError::Unreadable(e)),
            },
        };
        let config = match &config_path {
            Some(p) => parse_config(p, &text).map_err(ProjectError::Config)?,
            None => Config::default(),
        };
        Ok(Project { root: root.to_path_buf(), config_path, config_text: text, config })
    }

    /// Where `katlas.toml` is or would be.
    pub fn config_file(&self) -> PathBuf {
        self.config_path.clone().unwrap_or_else(|| self.root.join(CONFIG_FILE))
    }

    /// `commands` as coming from `katlas.toml`, judged on the text katlas parsed.
    pub fn config_commands(&self, commands: Vec<(String, String)>) -> trust::CommandSource {
        trust::CommandSource { file: self.config_file(), content: self.config_text.clone().into_bytes(), commands }
    }

    /// The `.katlas/` directory.
    pub fn katlas_dir(&self) -> PathBuf {
        katlas_corpus::Layout::for_project(&self.root).root
    }

    /// Deserialise the stage-owned section at `path` (e.g. `["workload", "lab"]`)
    /// with the owner's type; `Ok(None)` when absent. Errors carry file, line
    /// and the dotted key of the offending field.
    pub fn section<T: DeserializeOwned>(&self, path: &[&str]) -> Result<Option<T>, ConfigError> {
        let Some(value) = lookup(&self.config_text, path) else { return Ok(None) };
        serde_path_to_error::deserialize(value).map(Some).map_err(|e| {
            let inner = e.path().to_string();
            let mut key = path.join(".");
            if inner != "." && !inner.is_empty() {
                key = format!("{key}.{inner}");
            }
            // serde_path_to_error's path already ends at an unknown field's name.
            let parent = key.rsplit_once('.').map(|(p, _)| p.to_string()).unwrap_or_default();
            ConfigError {
                file: self.config_file(),
                line: line_of_key(&self.config_text, &key).or_else(|| line_of_key(&self.config_text, &parent)),
                key: Some(key),
                reason: e.inner().to_string(),
            }
        })
    }

    /// Names of the entries of a stage-owned table section (`workload` names).
    pub fn section_names(&self, section: &str) -> Vec<String> {
        lookup(&self.config_text, &[section]).and_then(|v| v.as_table().map(|t| t.keys().cloned().collect())).unwrap_or_default()
    }
}

fn lookup(text: &str, path: &[&str]) -> Option<toml::Value> {
    let mut v: toml::Value = toml::Value::Table(text.parse::<toml::Table>().ok()?);
    for p in path {
        v = v.as_table()?.get(*p)?.clone();
    }
    Some(v)
}

fn find_root(cwd: &Path) -> PathBuf {
    for marker in [CONFIG_FILE, ".katlas", ".git"] {
        let mut dir = Some(cwd);
        while let Some(d) = dir {
            if d.join(marker).exists() {
                return d.to_path_buf();
            }
            dir = d.parent();
        }
    }
    cwd.to_path_buf()
}

/// Parse `katlas.toml` text, mapping errors to `file:line: key: reason`.
pub fn parse_config(file: &Path, text: &str) -> Result<Config, ConfigError> {
    let de = toml::de::Deserializer::parse(text).map_err(|e| toml_error(file, text, &e, None))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        // The path already ends at an unknown field's name.
        let key = e.path().to_string();
        let key = (!key.is_empty() && key != ".").then_some(key);
        toml_error(file, text, &e.into_inner(), key)
    })
}

fn toml_error(file: &Path, text: &str, e: &toml::de::Error, key: Option<String>) -> ConfigError {
    let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1).or_else(|| key.as_deref().and_then(|k| line_of_key(text, k)));
    ConfigError { file: file.to_path_buf(), line, key, reason: e.message().to_string() }
}

/// The commented `katlas.toml` that `katlas init` writes.
pub const INIT_TEMPLATE: &str = include_str!("init_template.toml");

impl katlas_fs::class::Classify for ProjectError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            ProjectError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            ProjectError::NoTrustStorePlace => katlas_fs::class::Class::Environment,
            _ => katlas_fs::class::Class::Input,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_parses() {
        parse_config(Path::new("katlas.toml"), INIT_TEMPLATE).unwrap();
    }

    #[test]
    fn unknown_top_level_key_named_with_line() {
        let text = "[project]\nname = \"x\"\n\n[projekt]\nname = \"y\"\n";
        let e = parse_config(Path::new("katlas.toml"), text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("projekt"));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.to_string().starts_with("katlas.toml:4: projekt: unknown field `projekt`"), "{e}");
    }

    #[test]
    fn unknown_nested_key_named_with_line() {
        let text = "[project]\nname = \"x\"\nkernel_rots = [\"k\"]\n";
        let e = parse_config(Path::new("katlas.toml"), text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("project.kernel_rots"));
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn bad_type_named() {
        let text = "[identity]\nhash_model = \"yes\"\n";
        let e = parse_config(Path::new("katlas.toml"), text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("identity.hash_model"));
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn env_prefixes_that_would_record_the_whole_environment_are_refused() {
        for (text, line) in [("[identity]\nenv_prefixes = [\"HIPFIRE_\", \"\"]\n", 2), ("[project]\nname = 'p'\n[identity]\nenv_names = [\"HOME\"]\n", 4)] {
            let e = parse_config(Path::new("katlas.toml"), text).unwrap_err();
            assert!(e.key.as_deref().is_some_and(|k| k.starts_with("identity.env_")), "{e}");
            assert_eq!(e.line, Some(line), "{e}");
            assert!(e.to_string().contains("namespace") || e.to_string().contains("session"), "{e}");
        }
        let ok = parse_config(Path::new("katlas.toml"), "[identity]\nenv_prefixes = [\"HIPFIRE_\", \"CUBLAS\"]\nenv_names = [\"OMP_NUM_THREADS\"]\n").unwrap();
        assert_eq!(ok.identity.env_names, ["OMP_NUM_THREADS"]);
    }

    #[test]
    fn provenance_packages_are_import_names() {
        let ok = parse_config(Path::new("katlas.toml"), "[provenance]\npackages = [\"liger_kernel\", \"fla\"]\npython = \".venv/bin/python\"\n").unwrap();
        assert_eq!(ok.provenance.packages, ["liger_kernel", "fla"]);
        assert_eq!(ok.provenance.python.as_deref(), Some(".venv/bin/python"));
        let e = parse_config(Path::new("katlas.toml"), "[project]\nname = 'p'\n[provenance]\npackages = [\"fla.ops\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("provenance.packages"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.to_string().contains("`fla.ops` is not a top-level import name"), "{e}");
        let e = parse_config(Path::new("katlas.toml"), "[provenance]\npackage = [\"fla\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("provenance.package"), "{e}");
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Wl {
        command: String,
        timeout_s: Option<f64>,
    }

    #[test]
    fn owned_section_errors_point_at_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "[project]\nname = \"p\"\n\n[workload.bench]\ncommand = \"./b\"\ntimeuot_s = 3\n").unwrap();
        let p = Project::discover(&dir.path().join("."), None).unwrap();
        let e = p.section::<Wl>(&["workload", "bench"]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("workload.bench.timeuot_s"));
        assert_eq!(e.line, Some(6), "{e}");
        assert!(p.section::<Wl>(&["workload", "other"]).unwrap().is_none());
        assert_eq!(p.section_names("workload"), ["bench"]);
    }

    #[test]
    fn the_hipfire_preset_implies_its_roots_and_set_roots_win() {
        let c = parse_config(Path::new("katlas.toml"), "[project]\npreset = \"hipfire\"\n").unwrap();
        assert_eq!(c.project.effective_kernel_roots(), ["kernels/src"]);
        assert_eq!(c.project.effective_dispatch_roots(), ["crates"]);
        let c = parse_config(Path::new("katlas.toml"), "[project]\npreset = \"hipfire\"\ndispatch_roots = [\"host\"]\n").unwrap();
        assert_eq!((c.project.effective_kernel_roots(), c.project.effective_dispatch_roots()), (vec!["kernels/src".to_string()], vec!["host".to_string()]));
        let c = parse_config(Path::new("katlas.toml"), "[project]\npreset = \"plain\"\n").unwrap();
        assert!(c.project.effective_kernel_roots().is_empty() && c.project.effective_dispatch_roots().is_empty());
    }

    #[test]
    fn discovery_walks_up() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "").unwrap();
        let deep = dir.path().join("a/b/c");
        std::fs::create_dir_all(&deep).unwrap();
        let p = Project::discover(&deep, None).unwrap();
        assert_eq!(p.root, std::fs::canonicalize(dir.path()).unwrap());
        let other = tempfile::tempdir().unwrap();
        let p = Project::discover(&deep, Some(other.path())).unwrap();
        assert_eq!(p.root, std::fs::canonicalize(other.path()).unwrap());
        assert!(p.config_path.is_none());
    }
}
