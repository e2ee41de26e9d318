//! The three rules files: fit rules, quant intent, lever catalog. Embedded defaults, each
//! extended by `<project>/.katlas/rules/<name>.toml` (entries added, replaced or disabled by id).

use crate::error::AdviseError;
use crate::expr::Cond;
use katlas_model::ledger::Verdict;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const FIT_TOML: &str = include_str!("../../../data/fit.toml");
pub const QUANT_TOML: &str = include_str!("../../../data/quant.toml");
pub const LEVERS_TOML: &str = include_str!("../../../data/levers.toml");

/// The kernels a route knob with this env prefix can reroute (name or base-name prefixes).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteEnvReach {
    pub env: String,
    pub kernels: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitSettings {
    pub hot_limit: usize,
    pub isa_only_limit: usize,
    pub bar_width: usize,
    pub elementwise_families: Vec<String>,
    pub reduction_families: Vec<String>,
    pub library_prefixes: Vec<String>,
    /// Env prefixes that can change a route (a project's own fit.toml may leave them out).
    #[serde(default)]
    pub route_env_prefixes: Vec<String>,
    #[serde(default)]
    pub not_route_env: Vec<String>,
    /// Library knobs reach only that library's kernels (a cuBLAS workspace setting cannot
    /// reroute an ATen elementwise kernel); env matching no entry reaches every kernel.
    #[serde(default)]
    pub route_env_reach: Vec<RouteEnvReach>,
    /// Words (lower case) in a kernel or phase name that say it is batched, never a one-token GEMV.
    #[serde(default)]
    pub batched_words: Vec<String>,
    /// A transform (elementwise, norm, rotation) is small when its bytes per call and time per
    /// call, where known, are at most these: a fusion candidate beside its heavy neighbour.
    #[serde(default = "default_small_bytes")]
    pub small_transform_max_bytes: f64,
    #[serde(default = "default_small_us")]
    pub small_transform_max_us: f64,
}

fn default_small_bytes() -> f64 {
    8e6
}

fn default_small_us() -> f64 {
    50.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    pub name: String,
    pub min_pct: f64,
    pub reading: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: String,
    kind: String,
    #[serde(default)]
    scope: Option<String>,
    when: Vec<String>,
    text: String,
    #[serde(default)]
    text_nvidia: Option<String>,
    #[serde(default)]
    emits: Vec<String>,
    source: String,
    #[serde(default)]
    source_nvidia: Option<String>,
}

word_enum! {
    /// What a fit rule's finding says about its kernel or phase.
    pub enum FindingKind {
        /// What bounds it (leads `likely_limit`).
        Limit = "limit",
        /// Performance left on the table.
        Left = "left",
        /// Not worth tuning (Amdahl and other stop signs).
        Stop = "stop",
        /// A reading to take with care.
        Caveat = "caveat",
    }
}

word_enum! {
    /// What a fit rule is judged on.
    pub enum RuleScope {
        /// Each hot kernel (the default).
        Kernel = "kernel",
        /// The phase's timeline signals, once; its findings lead the fit read.
        Phase = "phase",
    }
}

word_enum! {
    /// What one suggestion of a lever is for.
    pub enum LeverScope {
        /// One suggestion per hot kernel.
        Kernel = "kernel",
        /// One suggestion for the whole phase (row).
        Row = "row",
    }
}

#[derive(Debug, Clone)]
pub struct FitRule {
    pub id: String,
    pub kind: FindingKind,
    pub scope: RuleScope,
    pub when: Vec<Cond>,
    pub text: String,
    /// The text in NVIDIA's words (warps, SM sub-partitions, shared and local memory), used
    /// when the kernel's arch is NVIDIA's; `text` otherwise.
    pub text_nvidia: Option<String>,
    pub emits: Vec<String>,
    pub source: String,
    /// The source line in NVIDIA's words, like `text_nvidia`.
    pub source_nvidia: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFit {
    schema: String,
    settings: FitSettings,
    band: Vec<Band>,
    rule: Vec<RawRule>,
}

#[derive(Debug, Clone)]
pub struct FitRules {
    pub settings: FitSettings,
    /// Sorted by `min_pct`, highest first.
    pub bands: Vec<Band>,
    pub rules: Vec<FitRule>,
    pub file: String,
}

impl FitRules {
    /// The band a percentage of peak falls in.
    pub fn band(&self, pct: f64) -> Option<&Band> {
        self.bands.iter().find(|b| pct >= b.min_pct)
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuantIntent {
    pub prefix: String,
    pub label: String,
    pub bits_per_weight: f64,
    pub bytes_saved: String,
    pub unpack_tax: String,
    pub fit_question: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuant {
    schema: String,
    quant: Vec<QuantIntent>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Magnitude {
    pub low_pct: f64,
    pub high_pct: f64,
    /// What the percentages are of (`kernel time`, `phase time`).
    pub of: String,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLever {
    id: String,
    name: String,
    scope: String,
    triggers: Vec<String>,
    #[serde(default)]
    legal: Vec<String>,
    #[serde(default)]
    boost: BTreeMap<String, f64>,
    #[serde(default)]
    damp: BTreeMap<String, f64>,
    base: f64,
    risk: String,
    expected_impact: String,
    hypothesis: String,
    candidate_steps: Vec<String>,
    #[serde(default)]
    first_step: Vec<RawFirstStep>,
    magnitude: Magnitude,
    #[serde(default)]
    null_results: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFirstStep {
    #[serde(default)]
    when: Vec<String>,
    text: String,
}

/// A first step that names the exact thing to edit, filled from the kernel's facts: the first
/// whose `when` holds leads the lever's steps (`In fla/ops/common/chunk_o.py:28 ...`).
#[derive(Debug, Clone)]
pub struct FirstStep {
    pub when: Vec<Cond>,
    /// A template over signals (`{triton_source}`, `{num_warps:.0}`; see `expr::render_template`).
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct Lever {
    pub id: String,
    pub name: String,
    pub scope: LeverScope,
    /// Trigger texts as written (`grid_underfill & is_gemm`).
    pub triggers: Vec<String>,
    /// Parsed triggers: each a conjunction of conditions.
    pub trigger_conds: Vec<Vec<Cond>>,
    pub legal: Vec<Cond>,
    pub boost: BTreeMap<String, f64>,
    pub damp: BTreeMap<String, f64>,
    pub base: f64,
    pub risk: String,
    pub expected_impact: String,
    pub hypothesis: String,
    pub candidate_steps: Vec<String>,
    pub first_step: Vec<FirstStep>,
    pub magnitude: Magnitude,
    pub null_results: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeverSettings {
    pub max_suggestions: usize,
    pub share_weight: f64,
    /// A kernel shorter than this (us) that moves under 10% of peak bandwidth is mostly its
    /// launch (`launch_limited`): launch levers, not tile levers, come first for it.
    #[serde(default = "default_short_kernel_us")]
    pub short_kernel_us: f64,
}

fn default_short_kernel_us() -> f64 {
    5.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHistory {
    demote: BTreeMap<String, f64>,
    restore_when_condition_holds: bool,
}

#[derive(Debug, Clone)]
pub struct HistorySettings {
    /// Score points a matching entry with this verdict takes away (the file's keys are
    /// verdict words; `no-change` and `no_change` name the same verdict).
    pub demote: HashMap<Verdict, f64>,
    pub restore_when_condition_holds: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSettings {
    /// Env names (trailing `*` = prefix) that only switch on instrumentation.
    pub instrumentation_env: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLevers {
    schema: String,
    settings: LeverSettings,
    eval: EvalSettings,
    history: RawHistory,
    lever: Vec<RawLever>,
}

#[derive(Debug, Clone)]
pub struct LeverCatalog {
    pub settings: LeverSettings,
    pub eval: EvalSettings,
    pub history: HistorySettings,
    pub levers: Vec<Lever>,
    pub file: String,
}

impl LeverCatalog {
    pub fn get(&self, id: &str) -> Option<&Lever> {
        self.levers.iter().find(|l| l.id == id)
    }
}

/// All rules in force.
#[derive(Debug, Clone)]
pub struct Rules {
    pub fit: FitRules,
    pub quant: Vec<QuantIntent>,
    pub quant_file: String,
    pub levers: LeverCatalog,
}

impl Rules {
    /// The embedded rules.
    pub fn builtin() -> Result<Rules, AdviseError> {
        Ok(Rules {
            fit: parse_fit("data/fit.toml", FIT_TOML)?,
            quant: parse_quant("data/quant.toml", QUANT_TOML)?,
            quant_file: "data/quant.toml".into(),
            levers: parse_levers("data/levers.toml", LEVERS_TOML)?,
        })
    }

    /// Embedded rules with `<rules_dir>/<name>.toml` laid over each when present
    /// ([`crate::overlay`]: entries added or replaced by id, `disable = [ids]`).
    pub fn load(rules_dir: Option<&Path>) -> Result<Rules, AdviseError> {
        fn read<T>(dir: Option<&Path>, name: &str, builtin: &str, parse: fn(&str, &str) -> Result<T, AdviseError>) -> Result<(String, T), AdviseError> {
            let Some(p) = dir.map(|d| d.join(name)).filter(|p| p.is_file()) else {
                return Ok((format!("data/{name}"), parse(&format!("data/{name}"), builtin)?));
            };
            let file = p.display().to_string();
            let text = std::fs::read_to_string(&p).map_err(|e| AdviseError::io(&p, e))?;
            let merged = crate::overlay::merge(builtin, name, &file, &text)?;
            let parsed = parse(&file, &merged).map_err(|e| crate::overlay::remap(e, &merged, &file, &text))?;
            Ok((file, parsed))
        }
        let (_, fit) = read(rules_dir, "fit.toml", FIT_TOML, parse_fit)?;
        let (quant_file, quant) = read(rules_dir, "quant.toml", QUANT_TOML, parse_quant)?;
        let (_, levers) = read(rules_dir, "levers.toml", LEVERS_TOML, parse_levers)?;
        Ok(Rules { fit, quant, quant_file, levers })
    }

    /// Quant intent for a row's quant string (first prefix match, case-insensitive).
    pub fn quant_for(&self, quant: &str) -> Option<&QuantIntent> {
        let q = quant.to_ascii_lowercase();
        self.quant.iter().find(|e| q.starts_with(&e.prefix.to_ascii_lowercase()))
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

fn de<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, AdviseError> {
    toml::from_str(text).map_err(|e| AdviseError::Rules {
        file: file.into(),
        line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1),
        message: e.message().to_string(),
    })
}

/// Line of the first `id = "<id>"` (for errors about one record).
fn line_of_id(text: &str, key: &str, id: &str) -> usize {
    let pat = format!("{key} = \"{id}\"");
    text.find(&pat).map(|o| line_of(text, o)).unwrap_or(1)
}

fn check_schema(file: &str, got: &str, want: &str) -> Result<(), AdviseError> {
    if got != want {
        return Err(AdviseError::Rules { file: file.into(), line: 1, message: format!("schema: expected `{want}`, found `{got}`") });
    }
    Ok(())
}

fn conds(file: &str, text: &str, id: &str, list: &[String], field: &str) -> Result<Vec<Cond>, AdviseError> {
    list.iter()
        .map(|c| Cond::parse(c).map_err(|m| AdviseError::Rules { file: file.into(), line: line_of_id(text, "id", id), message: format!("{id}.{field}: {m}") }))
        .collect()
}

pub fn parse_fit(file: &str, text: &str) -> Result<FitRules, AdviseError> {
    let raw: RawFit = de(file, text)?;
    check_schema(file, &raw.schema, "katlas.rules.fit.v1")?;
    let mut rules = Vec::new();
    for r in raw.rule {
        let Some(kind) = FindingKind::parse(&r.kind) else {
            return Err(AdviseError::Rules {
                file: file.into(),
                line: line_of_id(text, "id", &r.id),
                message: format!("{}.kind: expected limit, left, stop or caveat, found `{}`", r.id, r.kind),
            });
        };
        if rules.iter().any(|x: &FitRule| x.id == r.id) {
            return Err(AdviseError::Rules { file: file.into(), line: line_of_id(text, "id", &r.id), message: format!("duplicate rule id `{}`", r.id) });
        }
        let scope = match r.scope.as_deref() {
            None => RuleScope::Kernel,
            Some(word) => RuleScope::parse(word).ok_or_else(|| AdviseError::Rules {
                file: file.into(),
                line: line_of_id(text, "id", &r.id),
                message: format!("{}.scope: expected kernel or phase, found `{word}`", r.id),
            })?,
        };
        let when = conds(file, text, &r.id, &r.when, "when")?;
        rules.push(FitRule {
            id: r.id,
            kind,
            scope,
            when,
            text: r.text,
            text_nvidia: r.text_nvidia,
            emits: r.emits,
            source: r.source,
            source_nvidia: r.source_nvidia,
        });
    }
    let mut bands = raw.band;
    bands.sort_by(|a, b| b.min_pct.total_cmp(&a.min_pct));
    Ok(FitRules { settings: raw.settings, bands, rules, file: file.into() })
}

pub fn parse_quant(file: &str, text: &str) -> Result<Vec<QuantIntent>, AdviseError> {
    let raw: RawQuant = de(file, text)?;
    check_schema(file, &raw.schema, "katlas.rules.quant.v1")?;
    Ok(raw.quant)
}

pub fn parse_levers(file: &str, text: &str) -> Result<LeverCatalog, AdviseError> {
    let raw: RawLevers = de(file, text)?;
    check_schema(file, &raw.schema, "katlas.rules.levers.v1")?;
    let mut demote = HashMap::new();
    for (v, points) in &raw.history.demote {
        let Ok(verdict) = v.parse::<Verdict>() else {
            return Err(AdviseError::Rules {
                file: file.into(),
                line: text.find("demote").map(|o| line_of(text, o)).unwrap_or(1),
                message: format!("history.demote: unknown verdict `{v}`"),
            });
        };
        demote.insert(verdict, *points);
    }
    let history = HistorySettings { demote, restore_when_condition_holds: raw.history.restore_when_condition_holds };
    let mut levers: Vec<Lever> = Vec::new();
    for l in raw.lever {
        let line = line_of_id(text, "id", &l.id);
        if levers.iter().any(|x| x.id == l.id) {
            return Err(AdviseError::Rules { file: file.into(), line, message: format!("duplicate lever id `{}`", l.id) });
        }
        let Some(scope) = LeverScope::parse(&l.scope) else {
            return Err(AdviseError::Rules { file: file.into(), line, message: format!("{}.scope: expected kernel or row, found `{}`", l.id, l.scope) });
        };
        if l.triggers.is_empty() {
            return Err(AdviseError::Rules { file: file.into(), line, message: format!("{}.triggers: at least one fit signal", l.id) });
        }
        let legal = conds(file, text, &l.id, &l.legal, "legal")?;
        let mut trigger_conds = Vec::new();
        for t in &l.triggers {
            let parts: Vec<String> = t.split('&').map(|x| x.trim().to_string()).collect();
            trigger_conds.push(conds(file, text, &l.id, &parts, "triggers")?);
        }
        let mut first_step = Vec::new();
        for f in &l.first_step {
            first_step.push(FirstStep { when: conds(file, text, &l.id, &f.when, "first_step.when")?, text: f.text.clone() });
        }
        levers.push(Lever {
            id: l.id,
            name: l.name,
            scope,
            triggers: l.triggers,
            trigger_conds,
            legal,
            boost: l.boost,
            damp: l.damp,
            base: l.base,
            risk: l.risk,
            expected_impact: l.expected_impact,
            hypothesis: l.hypothesis,
            candidate_steps: l.candidate_steps,
            first_step,
            magnitude: l.magnitude,
            null_results: l.null_results,
        });
    }
    Ok(LeverCatalog { settings: raw.settings, eval: raw.eval, history, levers, file: file.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_load() {
        let r = Rules::builtin().unwrap();
        assert!(r.fit.rules.iter().any(|x| x.id == "amdahl"));
        assert_eq!(r.fit.band(85.0).unwrap().name, "sol");
        assert_eq!(r.fit.band(65.0).unwrap().name, "good");
        assert_eq!(r.fit.band(5.0).unwrap().name, "idle");
        assert_eq!(r.quant_for("mq4").unwrap().label, "MQ4");
        assert!(r.levers.levers.len() >= 11);
    }

    #[test]
    fn bad_rule_names_file_and_line() {
        let text = FIT_TOML.replace("when = [\"share_pct < 5\"]", "when = [\"share pct < 5\"]");
        let e = parse_fit("x/fit.toml", &text).unwrap_err().to_string();
        assert!(e.starts_with("x/fit.toml:"), "{e}");
        assert!(e.contains("amdahl.when"), "{e}");
        let line: usize = e.split(':').nth(1).unwrap().parse().unwrap();
        assert!(text.lines().nth(line - 1).unwrap().contains("amdahl"), "{e}");
    }

    #[test]
    fn demote_keys_are_verdicts() {
        let builtin = "demote = { no_change = 100.0, regressed = 100.0 }";
        assert!(LEVERS_TOML.contains(builtin));
        // `no-change` is the verdict `no_change`, as the ledger and `katlas eval` spell it too.
        let c = parse_levers("levers.toml", &LEVERS_TOML.replace(builtin, "demote = { no-change = 40.0 }")).unwrap();
        assert_eq!(c.history.demote.get(&Verdict::NoChange), Some(&40.0));
        assert_eq!(c.history.demote.get(&Verdict::Regressed), None);
        let e = parse_levers("levers.toml", &LEVERS_TOML.replace(builtin, "demote = { worse = 1.0 }")).unwrap_err().to_string();
        assert!(e.contains("history.demote: unknown verdict `worse`"), "{e}");
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        let text = LEVERS_TOML.replace("base = 70.0", "base = 70.0\nbogus = 1");
        let e = parse_levers("levers.toml", &text).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
    }

    #[test]
    fn override_dir_replaces_file() {
        let d = tempfile::tempdir().unwrap();
        let text = QUANT_TOML.replace("label = \"MQ4\"", "label = \"MQ4-local\"");
        std::fs::write(d.path().join("quant.toml"), text).unwrap();
        let r = Rules::load(Some(d.path())).unwrap();
        assert_eq!(r.quant_for("mq4").unwrap().label, "MQ4-local");
        assert!(r.quant_file.ends_with("quant.toml") && r.quant_file != "data/quant.toml");
    }
}
