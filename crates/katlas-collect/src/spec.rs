//! Workload specs: what to run, how often, with which parameters, and how to
//! read its output.
//!
//! A spec lives in `katlas.toml` as `[workload.NAME]`, in its own TOML file
//! (`workloads/NAME.toml` under the project, or any file given with `--spec`;
//! either the spec's keys at top level or one `[workload.NAME]` table), or
//! among the built-in presets (`data/workloads/*.toml`). Strings may use
//! `{param}` templates filled from `params`, the matrix combination and
//! `--set`, plus `{run_dir}`, `{run_index}`, `{project}` and `{workload}`.

use crate::parse::ParserOptions;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Built-in presets: name and TOML text.
pub const PRESETS: &[(&str, &str)] =
    &[("hipfire-ar", include_str!("../../../data/workloads/hipfire-ar.toml")), ("hipfire-dflash", include_str!("../../../data/workloads/hipfire-dflash.toml"))];

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum CommandSpec {
    /// Run through `sh -c`; substituted values are shell-quoted.
    Shell(String),
    /// Run directly, no shell.
    Argv(Vec<String>),
}

/// `required = ["k"]` (every row) or `required = { decode = ["k"] }` (per phase).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Required {
    All(Vec<String>),
    PerPhase(BTreeMap<String, Vec<String>>),
}

impl Default for Required {
    fn default() -> Self {
        Required::All(Vec::new())
    }
}

impl Required {
    /// Metrics a row of `phase` must carry.
    pub fn for_phase(&self, phase: &str) -> &[String] {
        match self {
            Required::All(v) => v,
            Required::PerPhase(m) => m.get(phase).map(Vec::as_slice).unwrap_or(&[]),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    /// The executable whose digest identifies the run.
    #[serde(default)]
    pub binary: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    /// Digest the model file (opt-in: models are many GB).
    #[serde(default)]
    pub hash_model: bool,
}

/// A parser by name, or a table with its options.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ParserRef {
    Name(String),
    Full(ParserEntry),
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParserEntry {
    pub name: String,
    /// Parse this file (templated, relative to the run's cwd) instead of the output.
    #[serde(default)]
    pub file: Option<String>,
    /// The run output to read when no `file` is given: `stdout`, `stderr`, or
    /// `both`. Not given: both, stdout then stderr (the runner writes the two to
    /// separate files, so how their lines interleaved is not known).
    #[serde(default)]
    pub stream: Option<String>,
    #[serde(default)]
    pub keys: Vec<String>,
    #[serde(default)]
    pub marker: Option<String>,
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub phases: Vec<String>,
    #[serde(default)]
    pub drop_counters: Vec<String>,
    /// A missing file is not an error (profiler output that only some runs write).
    #[serde(default)]
    pub optional: bool,
}

impl ParserRef {
    pub fn entry(&self) -> ParserEntry {
        match self {
            ParserRef::Name(n) => ParserEntry { name: n.clone(), ..Default::default() },
            ParserRef::Full(e) => e.clone(),
        }
    }
}

impl ParserEntry {
    pub fn options(&self) -> ParserOptions {
        ParserOptions {
            keys: self.keys.clone(),
            marker: self.marker.clone(),
            phase: self.phase.clone(),
            phases: self.phases.clone(),
            drop_counters: self.drop_counters.clone(),
            ..Default::default()
        }
    }
}

/// Switches that only turn on instrumentation (`--profile`); recorded in
/// `Variant.instrumentation` so eval can strip them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Extra arguments appended to an argv command.
    #[serde(default)]
    pub args: Vec<String>,
    /// Parsers added when profiling (profiler files).
    #[serde(default)]
    pub parsers: Vec<ParserRef>,
    /// Replace the command while profiling (e.g. wrap it in `ncu`); `{command}` is the plain command.
    #[serde(default)]
    pub command: Option<CommandSpec>,
    /// A Python workload: record its Triton launches (tensor arguments, constexprs, launch
    /// facts) beside the run's trace through katlas's `sitecustomize.py` on `PYTHONPATH`.
    #[serde(default)]
    pub triton_launches: bool,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    #[serde(default)]
    pub description: Option<String>,
    /// `workload_kind` of the rows (`ar`, `dflash`, `lab`).
    #[serde(default)]
    pub kind: Option<String>,
    pub command: CommandSpec,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory, relative to the project root.
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub inputs: Inputs,
    #[serde(default)]
    pub parsers: Vec<ParserRef>,
    /// Phases that get a row each; default: the phases the parsers report.
    #[serde(default)]
    pub phases: Vec<String>,
    /// Metrics rows must have (a list: every row; a table: per phase); a
    /// missing one makes the row an error row.
    #[serde(default)]
    pub required: Required,
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Fresh-process warmup runs per combination (rows with `pass = "warmup"`).
    #[serde(default)]
    pub warmup: u32,
    /// Measured runs per combination.
    #[serde(default = "one")]
    pub runs: u32,
    /// Template parameters and their defaults.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// Parameter lists: one run set per combination.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    pub profile: Option<ProfileSpec>,
    /// Names in `env` that are instrumentation even without `--profile`.
    #[serde(default)]
    pub instrumentation: Vec<String>,
    #[serde(default)]
    pub shape_bucket: Option<String>,
    #[serde(default)]
    pub quant: Option<String>,
    /// Declared variant knobs (templated).
    #[serde(default)]
    pub knobs: BTreeMap<String, String>,
    /// Route-affecting env prefixes for identity; default: identity's defaults.
    #[serde(default)]
    pub env_prefixes: Vec<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpecError {
    #[error("{0}")]
    Config(String),
    #[error("workload `{name}` not found: looked in {looked}; presets: {presets}")]
    NotFound { name: String, looked: String, presets: String },
    #[error("{source_name}: {key}: {reason}")]
    Invalid { source_name: String, key: String, reason: String },
}

/// A spec and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedSpec {
    pub name: String,
    pub spec: WorkloadSpec,
    /// `katlas.toml`, a file path, or `preset:NAME`.
    pub source: String,
}

pub fn value_string(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Parse a standalone spec file: top-level keys, or a single `[workload.NAME]`.
pub fn parse_spec_text(text: &str, source: &str, name: Option<&str>) -> Result<(String, WorkloadSpec), SpecError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| SpecError::Config(format!("{source}: {}", e.message())))?;
    let file_stem = Path::new(source).file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let (wname, value, prefix) = match table.get("workload").and_then(|w| w.as_table()) {
        Some(w) if !table.contains_key("command") => {
            let pick = match name {
                Some(n) => w.get(n).map(|v| (n.to_string(), v.clone())),
                None if w.len() == 1 => w.iter().next().map(|(k, v)| (k.clone(), v.clone())),
                None => None,
            };
            let (n, v) = pick.ok_or_else(|| SpecError::Invalid {
                source_name: source.into(),
                key: "workload".into(),
                reason: format!("expected one [workload.NAME] table (found: {})", w.keys().cloned().collect::<Vec<_>>().join(", ")),
            })?;
            let prefix = format!("workload.{n}");
            (n, v, prefix)
        }
        _ => (name.map(str::to_string).unwrap_or(file_stem), toml::Value::Table(table), String::new()),
    };
    let spec: WorkloadSpec = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let key = match (prefix.is_empty(), path == ".") {
            (true, _) => path,
            (false, true) => prefix.clone(),
            (false, false) => format!("{prefix}.{path}"),
        };
        let line = line_of(text, key.rsplit('.').next().unwrap_or(""));
        SpecError::Invalid {
            source_name: match line {
                Some(l) => format!("{source}:{l}"),
                None => source.into(),
            },
            key,
            reason: e.into_inner().to_string(),
        }
    })?;
    validate(&spec, source)?;
    Ok((wname, spec))
}

/// First line whose key is `key` (`key =` or `[..key]`); a hint for messages.
fn line_of(text: &str, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            t.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')) || (t.starts_with('[') && t.contains(key))
        })
        .map(|i| i + 1)
}

/// Templates must name known parameters; parsers must exist.
pub fn validate(spec: &WorkloadSpec, source: &str) -> Result<(), SpecError> {
    let mut known: Vec<String> = spec.params.keys().chain(spec.matrix.keys()).cloned().collect();
    known.extend(BUILTIN_VARS.iter().map(|s| s.to_string()));
    known.push("command".into());
    let check = |key: &str, t: &str| -> Result<(), SpecError> {
        for name in template_names(t).map_err(|r| SpecError::Invalid { source_name: source.into(), key: key.into(), reason: r })? {
            if !known.contains(&name) {
                return Err(SpecError::Invalid {
                    source_name: source.into(),
                    key: key.into(),
                    reason: format!(
                        "template names unknown parameter `{{{name}}}` (params: {})",
                        spec.params.keys().chain(spec.matrix.keys()).cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        Ok(())
    };
    let mut cmds = vec![&spec.command];
    if let Some(c) = spec.profile.as_ref().and_then(|p| p.command.as_ref()) {
        cmds.push(c);
    }
    for c in cmds {
        match c {
            CommandSpec::Shell(s) => check("command", s)?,
            CommandSpec::Argv(v) => {
                if v.is_empty() {
                    return Err(SpecError::Invalid { source_name: source.into(), key: "command".into(), reason: "empty argv".into() });
                }
                for a in v {
                    check("command", a)?;
                }
            }
        }
    }
    for (k, v) in &spec.env {
        check(&format!("env.{k}"), v)?;
    }
    for (k, v) in spec.profile.iter().flat_map(|p| p.env.iter()) {
        check(&format!("profile.env.{k}"), v)?;
    }
    for (k, v) in [
        ("cwd", &spec.cwd),
        ("inputs.binary", &spec.inputs.binary),
        ("inputs.model", &spec.inputs.model),
        ("inputs.prompt", &spec.inputs.prompt),
        ("shape_bucket", &spec.shape_bucket),
    ] {
        if let Some(v) = v {
            check(k, v)?;
        }
    }
    let names = crate::parse::parser_names();
    for p in spec.parsers.iter().chain(spec.profile.iter().flat_map(|p| p.parsers.iter())) {
        let e = p.entry();
        if !names.contains(&e.name.as_str()) {
            return Err(SpecError::Invalid {
                source_name: source.into(),
                key: "parsers".into(),
                reason: format!("unknown parser `{}` (known: {})", e.name, names.join(", ")),
            });
        }
        if let Some(f) = &e.file {
            check("parsers.file", f)?;
        }
        if let Some(s) = &e.stream {
            if !["stdout", "stderr", "both"].contains(&s.as_str()) {
                return Err(SpecError::Invalid {
                    source_name: source.into(),
                    key: "parsers.stream".into(),
                    reason: format!("expected stdout, stderr or both, found {s:?}"),
                });
            }
        }
    }
    if let (Required::PerPhase(m), false) = (&spec.required, spec.phases.is_empty()) {
        for p in m.keys() {
            if !spec.phases.contains(p) {
                return Err(SpecError::Invalid {
                    source_name: source.into(),
                    key: format!("required.{p}"),
                    reason: format!("not one of the spec's phases ({})", spec.phases.join(", ")),
                });
            }
        }
    }
    if spec.runs == 0 {
        return Err(SpecError::Invalid { source_name: source.into(), key: "runs".into(), reason: "must be at least 1".into() });
    }
    if spec.timeout_s.is_some_and(|t| t.is_nan() || t <= 0.0) {
        return Err(SpecError::Invalid { source_name: source.into(), key: "timeout_s".into(), reason: "must be positive".into() });
    }
    Ok(())
}

pub const BUILTIN_VARS: &[&str] = &["run_dir", "run_index", "project", "workload"];

/// Find a workload: `katlas.toml`, then `workloads/<name>.toml` under the
/// project, then the built-in presets.
pub fn load(project: &katlas_project::Project, name: &str) -> Result<LoadedSpec, SpecError> {
    match project.section::<toml::Value>(&["workload", name]) {
        Ok(Some(_)) => {
            let spec = project.section::<WorkloadSpec>(&["workload", name]).map_err(|e| SpecError::Config(e.to_string()))?.expect("section present");
            let source = project.config_file().display().to_string();
            validate(&spec, &format!("{source}: workload.{name}"))?;
            return Ok(LoadedSpec { name: name.into(), spec, source });
        }
        Ok(None) => {}
        Err(e) => return Err(SpecError::Config(e.to_string())),
    }
    let file = project.root.join("workloads").join(format!("{name}.toml"));
    if file.is_file() {
        return load_file(&file, Some(name));
    }
    if let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name) {
        let (_, spec) = parse_spec_text(text, &format!("preset:{name}"), Some(name))?;
        return Ok(LoadedSpec { name: name.into(), spec, source: format!("preset:{name}") });
    }
    Err(SpecError::NotFound {
        name: name.into(),
        looked: format!("{} [workload.{name}], {}", project.config_file().display(), file.display()),
        presets: PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", "),
    })
}

/// Load a standalone spec file.
pub fn load_file(path: &Path, name: Option<&str>) -> Result<LoadedSpec, SpecError> {
    let text = katlas_corpus::input::read_text(path).map_err(SpecError::Config)?;
    let source = path.display().to_string();
    let (n, spec) = parse_spec_text(&text, &source, name)?;
    Ok(LoadedSpec { name: n, spec, source })
}

/// Workload names available: katlas.toml, workloads/*.toml, presets.
pub fn available(project: &katlas_project::Project) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = project.section_names("workload").into_iter().map(|n| (n, "katlas.toml".into())).collect();
    if let Ok(rd) = std::fs::read_dir(project.root.join("workloads")) {
        let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "toml")).collect();
        files.sort();
        for f in files {
            if let Some(s) = f.file_stem() {
                out.push((s.to_string_lossy().into(), f.display().to_string()));
            }
        }
    }
    out.extend(PRESETS.iter().map(|(n, _)| (n.to_string(), format!("preset:{n}"))));
    out
}

/// Names in `{...}` templates; `{{` and `}}` are literal braces.
pub fn template_names(t: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    render_with(t, &mut |name| {
        out.push(name.to_string());
        Some(String::new())
    })?;
    Ok(out)
}

/// Fill `{name}` from `vars`; an unknown name is an error naming it.
pub fn render(t: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    render_with(t, &mut |name| vars.get(name).cloned())
}

/// As [`render`], shell-quoting each substituted value.
pub fn render_shell(t: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    render_with(t, &mut |name| vars.get(name).map(|v| shell_quote(v)))
}

fn render_with(t: &str, f: &mut dyn FnMut(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(t.len());
    let mut chars = t.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|p| p.1) == Some('{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek().map(|p| p.1) == Some('}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let rest = &t[i + 1..];
                let end = rest.find('}').ok_or_else(|| format!("unclosed `{{` in {t:?}"))?;
                let name = &rest[..end];
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    return Err(format!("bad template name `{{{name}}}` in {t:?} (use {{{{ for a literal brace)"));
                }
                let v = f(name).ok_or_else(|| format!("unknown parameter `{{{name}}}`"))?;
                out.push_str(&v);
                for _ in 0..name.chars().count() + 1 {
                    chars.next();
                }
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

pub fn shell_quote(v: &str) -> String {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || "._/-=:,+@%".contains(c)) {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

/// Every combination of the matrix (keys in name order), after `--set` overrides.
pub fn combinations(spec: &WorkloadSpec, set: &BTreeMap<String, String>) -> Result<Vec<BTreeMap<String, String>>, SpecError> {
    for k in set.keys() {
        if !spec.params.contains_key(k) && !spec.matrix.contains_key(k) {
            return Err(SpecError::Invalid {
                source_name: "--set".into(),
                key: k.clone(),
                reason: format!(
                    "not a parameter of this workload (params: {})",
                    spec.params.keys().chain(spec.matrix.keys()).cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
    for (k, values) in &spec.matrix {
        let values: Vec<String> = match set.get(k) {
            Some(v) => vec![v.clone()],
            None => values.iter().map(value_string).collect(),
        };
        if values.is_empty() {
            return Err(SpecError::Invalid { source_name: "matrix".into(), key: k.clone(), reason: "empty list".into() });
        }
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(k.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    Ok(combos)
}

impl katlas_fs::class::Classify for SpecError {
    fn class(&self) -> katlas_fs::class::Class {
        katlas_fs::class::Class::Input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        let vars: BTreeMap<String, String> = [("a".to_string(), "x y".to_string()), ("n".into(), "3".into())].into();
        assert_eq!(render("--n {n} {{lit}}", &vars).unwrap(), "--n 3 {lit}");
        assert_eq!(render_shell("echo {a} {n}", &vars).unwrap(), "echo 'x y' 3");
        assert!(render("{zz}", &vars).unwrap_err().contains("`{zz}`"));
        assert!(render("{a", &vars).is_err());
    }

    #[test]
    fn presets_parse_and_validate() {
        for (name, text) in PRESETS {
            let (n, s) = parse_spec_text(text, &format!("preset:{name}"), Some(name)).unwrap();
            assert_eq!(&n, name);
            assert!(!s.parsers.is_empty());
            assert!(s.profile.is_some() || *name == "hipfire-dflash");
        }
    }

    #[test]
    fn matrix_product_and_set() {
        let text = "command = ['b', '--p', '{prefill}', '--g', '{gen}']\n[params]\ngen = 5\n[matrix]\nprefill = [32, 128]\nkv = ['q8', 'asym3']\n";
        let (_, s) = parse_spec_text(text, "w.toml", None).unwrap();
        let c = combinations(&s, &BTreeMap::new()).unwrap();
        assert_eq!(c.len(), 4);
        assert_eq!(c[0]["kv"], "q8");
        assert_eq!(c[1]["kv"], "q8");
        assert_eq!(c[1]["prefill"], "128");
        assert_eq!(c[0]["prefill"], "32");
        let one = combinations(&s, &[("prefill".to_string(), "64".to_string())].into()).unwrap();
        assert_eq!(one.len(), 2);
        assert!(combinations(&s, &[("nope".to_string(), "1".to_string())].into()).unwrap_err().to_string().contains("nope"));
    }

    #[test]
    fn errors_name_key_and_line() {
        let text = "[workload.w]\ncommand = 'x'\ntimeuot_s = 3\n";
        let e = parse_spec_text(text, "w.toml", None).unwrap_err().to_string();
        assert!(e.contains("w.toml:3") && e.contains("timeuot_s"), "{e}");
        let e = parse_spec_text("command = 'run {prefil}'\n[params]\nprefill = 1\n", "w.toml", None).unwrap_err().to_string();
        assert!(e.contains("command") && e.contains("{prefil}"), "{e}");
        let e = parse_spec_text("command = 'x'\nphases = ['decode']\nrequired = { prefill = ['a'] }\n", "w.toml", None).unwrap_err().to_string();
        assert!(e.contains("required.prefill"), "{e}");
        let (_, s) = parse_spec_text("command = 'x'\nphases = ['prefill', 'decode']\nrequired = { decode = ['tok_s'] }\n", "w.toml", None).unwrap();
        assert_eq!(s.required.for_phase("decode"), ["tok_s"]);
        assert!(s.required.for_phase("prefill").is_empty());
        let e = parse_spec_text("command = 'x'\nparsers = ['nope']\n", "w.toml", None).unwrap_err().to_string();
        assert!(e.contains("unknown parser `nope`"), "{e}");
    }
}
