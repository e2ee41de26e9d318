//! Speed gates: floors per arch, checked against the median of N fresh runs.
//!
//! Two baseline formats:
//! - hipfire's `tests/speed-baselines/<arch>.txt`: `key=value` lines, `#`
//!   comments, a commented-out `#key=value` is a deprecated floor (kept, not
//!   checked), a `# Tolerance: 0.05` header gives the file's tolerance;
//! - katlas TOML (`<arch>.toml`): `[[floor]]` tables with `metric`, `value`,
//!   `tolerance`, identity `pins`, `date`, `commit`.
//!
//! The gate fails closed: no baseline file, or nothing checked, is a failure.
//! `--update` only tightens floors; loosening one needs an explicit reason, which
//! is written into the file beside the new value.
//!
//! Every floor has a direction. A larger-is-better key (tok/s) fails when its median
//! falls below the floor by more than the tolerance; a smaller-is-better key (a time)
//! fails when it rises above it. The direction is the floor's own `goal` (TOML), else
//! `[gate] goals` in katlas.toml, else what the name implies (`Goal::infer`); a key
//! with none of these is refused, never guessed.

use crate::error::EvalError;
use katlas_model::ledger::Goal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Floor {
    pub metric: String,
    pub value: f64,
    /// Relative tolerance; `None` = the gate's noise threshold.
    pub tolerance: Option<f64>,
    /// Commented out in a hipfire file: kept, never checked.
    pub deprecated: bool,
    /// 1-based line in the file.
    pub line: usize,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, String>,
    /// Direction given in the file (TOML `goal`); `None` = from config or the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<Goal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Hipfire,
    Toml,
}

#[derive(Debug, Clone)]
pub struct BaselineFile {
    pub path: PathBuf,
    pub format: Format,
    pub text: String,
    pub floors: Vec<Floor>,
    /// File-level tolerance (`# Tolerance:` header or TOML `tolerance`).
    pub tolerance: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    tolerance: Option<f64>,
    #[serde(default)]
    floor: Vec<TomlFloor>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFloor {
    metric: String,
    value: f64,
    #[serde(default)]
    tolerance: Option<f64>,
    #[serde(default)]
    pins: BTreeMap<String, String>,
    #[serde(default)]
    goal: Option<Goal>,
    #[serde(default)]
    #[allow(dead_code)]
    date: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    commit: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    reason: Option<String>,
}

fn is_key(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The floors of a baseline file's `text` (read from `path`, whose extension says the format).
pub fn parse(path: &Path, text: &str) -> Result<BaselineFile, EvalError> {
    // The text is already read: whatever fails here is the file's content.
    parse_text(path, text).map_err(EvalError::Input)
}

fn parse_text(path: &Path, text: &str) -> Result<BaselineFile, String> {
    let is_toml = path.extension().is_some_and(|e| e == "toml");
    if is_toml {
        let f: TomlFile = toml::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let floors = f
            .floor
            .into_iter()
            .map(|t| {
                let line = text.lines().position(|l| l.contains(&format!("\"{}\"", t.metric))).map(|i| i + 1).unwrap_or(0);
                Floor { metric: t.metric, value: t.value, tolerance: t.tolerance, deprecated: false, line, pins: t.pins, goal: t.goal }
            })
            .collect();
        return Ok(BaselineFile { path: path.into(), format: Format::Toml, text: text.into(), floors, tolerance: f.tolerance });
    }
    let mut floors = Vec::new();
    let mut tolerance = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            let c = c.trim();
            if let Some(t) = c.strip_prefix("Tolerance:").or_else(|| c.strip_prefix("tolerance:")) {
                // hipfire's real headers explain the number after it:
                // `# Tolerance: 0.05 (fail if any metric drops below baseline × (1 - tolerance))`.
                let num = t.split_whitespace().next().unwrap_or("");
                tolerance = Some(num.parse::<f64>().map_err(|_| format!("{}:{}: Tolerance: not a number: {:?}", path.display(), i + 1, t.trim()))?);
            } else if let Some((k, v)) = c.split_once('=') {
                if is_key(k.trim()) {
                    if let Ok(v) = v.trim().parse::<f64>() {
                        floors.push(Floor {
                            metric: k.trim().into(),
                            value: v,
                            tolerance: None,
                            deprecated: true,
                            line: i + 1,
                            pins: BTreeMap::new(),
                            goal: None,
                        });
                    }
                }
            }
            continue;
        }
        let (k, v) = line.split_once('=').ok_or_else(|| format!("{}:{}: expected key=value, got {line:?}", path.display(), i + 1))?;
        let (k, v) = (k.trim(), v.trim());
        if !is_key(k) {
            return Err(format!("{}:{}: bad key {k:?}", path.display(), i + 1));
        }
        let value = v.parse::<f64>().map_err(|_| format!("{}:{}: {k}: not a number: {v:?}", path.display(), i + 1))?;
        if floors.iter().any(|f: &Floor| f.metric == k && !f.deprecated) {
            return Err(format!("{}:{}: {k}: duplicate floor", path.display(), i + 1));
        }
        floors.push(Floor { metric: k.into(), value, tolerance: None, deprecated: false, line: i + 1, pins: BTreeMap::new(), goal: None });
    }
    Ok(BaselineFile { path: path.into(), format: Format::Hipfire, text: text.into(), floors, tolerance })
}

/// The baseline file for an arch in `dir`: `<arch>.txt` (hipfire) or `<arch>.toml`.
pub fn find(dir: &Path, arch: &str) -> Option<PathBuf> {
    ["txt", "toml"].iter().map(|e| dir.join(format!("{arch}.{e}"))).find(|p| p.is_file())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    /// Below the floor but inside the noise threshold.
    PassWithinNoise,
    Fail,
    /// An active floor with no measurement: the gate cannot say it passed.
    NotMeasured,
    /// The floor's identity pins do not match (or cannot be verified against) this run.
    PinMismatch,
    Deprecated,
    /// Nothing says whether larger or smaller is better for this key (fail closed).
    NoDirection,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub metric: String,
    pub floor: f64,
    pub median: Option<f64>,
    pub n: usize,
    /// `median / floor - 1` (signed: negative is below the floor).
    pub shortfall: Option<f64>,
    /// Which way is better for this key.
    pub goal: Goal,
    pub tolerance: f64,
    pub status: Status,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub schema: &'static str,
    pub baseline: String,
    pub arch: String,
    pub checks: Vec<Check>,
    /// Measured metrics with no floor (informational).
    pub unfloored: Vec<String>,
    pub passed: bool,
    pub reasons: Vec<String>,
}

pub const GATE_SCHEMA: &str = "katlas.gate.v1";

/// Judge measurements (metric -> values of N runs) against the floors.
/// `only` restricts to those floors; otherwise every active floor must be measured.
/// `facts` are what this run is (`arch`, `product`, and anything given with `--fact`);
/// a floor's identity pins must all be facts with equal values (fail closed).
pub fn check(file: &BaselineFile, arch: &str, measured: &BTreeMap<String, Vec<f64>>, threshold: f64, only: &[String]) -> GateReport {
    let mut facts = BTreeMap::new();
    facts.insert("arch".to_string(), arch.to_string());
    check_with_facts(file, arch, measured, threshold, only, &facts, &BTreeMap::new())
}

/// A floor's direction: its own `goal`, else `goals` (katlas.toml `[gate] goals`), else
/// what the metric's name implies.
pub fn direction(f: &Floor, goals: &BTreeMap<String, Goal>) -> Option<Goal> {
    f.goal.or_else(|| goals.get(&f.metric).copied()).or_else(|| Goal::infer(&f.metric))
}

/// Active floors (of `only`, when given) whose direction nothing gives: the gate refuses
/// these as bad input before measuring anything.
pub fn unknown_directions(file: &BaselineFile, goals: &BTreeMap<String, Goal>, only: &[String]) -> Vec<String> {
    file.floors
        .iter()
        .filter(|f| !f.deprecated && (only.is_empty() || only.contains(&f.metric)) && direction(f, goals).is_none())
        .map(|f| format!("{} (line {})", f.metric, f.line))
        .collect()
}

pub fn check_with_facts(
    file: &BaselineFile,
    arch: &str,
    measured: &BTreeMap<String, Vec<f64>>,
    threshold: f64,
    only: &[String],
    facts: &BTreeMap<String, String>,
    goals: &BTreeMap<String, Goal>,
) -> GateReport {
    let mut checks = Vec::new();
    let mut reasons = Vec::new();
    for f in &file.floors {
        if !only.is_empty() && !only.contains(&f.metric) {
            continue;
        }
        let tol = f.tolerance.or(file.tolerance).unwrap_or(threshold);
        let goal = direction(f, goals);
        let blank = |status| Check {
            metric: f.metric.clone(),
            floor: f.value,
            median: None,
            n: 0,
            shortfall: None,
            goal: goal.unwrap_or_default(),
            tolerance: tol,
            status,
        };
        if f.deprecated {
            checks.push(blank(Status::Deprecated));
            continue;
        }
        let Some(goal) = goal else {
            reasons.push(format!("{}: no direction (give `goal` in the floor or `[gate] goals` in katlas.toml)", f.metric));
            checks.push(blank(Status::NoDirection));
            continue;
        };
        let pin_errors: Vec<String> = f
            .pins
            .iter()
            .filter_map(|(k, want)| match facts.get(k) {
                Some(have) if have == want => None,
                Some(have) => Some(format!("pin {k}: floor is for `{want}`, this run is `{have}`")),
                None => Some(format!("pin {k} = `{want}` cannot be verified (give --fact {k}=VALUE)")),
            })
            .collect();
        if !pin_errors.is_empty() {
            reasons.push(format!("{}: {}", f.metric, pin_errors.join("; ")));
            checks.push(blank(Status::PinMismatch));
            continue;
        }
        let vals = measured.get(&f.metric).map(|v| v.as_slice()).unwrap_or(&[]);
        let (median, status, shortfall) = if vals.is_empty() {
            (None, Status::NotMeasured, None)
        } else {
            let m = crate::stats::median(vals);
            let s = m / f.value - 1.0;
            // How much worse than the floor, in the key's own direction.
            let worse = match goal {
                Goal::Maximize => -s,
                Goal::Minimize => s,
            };
            let st = if worse <= 0.0 {
                Status::Pass
            } else if worse <= tol {
                Status::PassWithinNoise
            } else {
                Status::Fail
            };
            (Some(m), st, Some(s))
        };
        match status {
            Status::Fail => reasons.push(format!(
                "{}: median {:.4} is {:.2}% {} the {} {} ({} is better; tolerance {:.2}%)",
                f.metric,
                median.unwrap_or(f64::NAN),
                shortfall.unwrap_or(0.0).abs() * 100.0,
                if goal == Goal::Maximize { "below" } else { "above" },
                if goal == Goal::Maximize { "floor" } else { "ceiling" },
                f.value,
                if goal == Goal::Maximize { "higher" } else { "lower" },
                tol * 100.0
            )),
            Status::NotMeasured => reasons.push(format!("{}: floor {} (line {}) was not measured", f.metric, f.value, f.line)),
            _ => {}
        }
        checks.push(Check { metric: f.metric.clone(), floor: f.value, median, n: vals.len(), shortfall, goal, tolerance: tol, status });
    }
    for k in only {
        if !file.floors.iter().any(|f| &f.metric == k && !f.deprecated) {
            reasons.push(format!("{k}: no active floor in {}", file.path.display()));
        }
    }
    let checked = checks.iter().filter(|c| matches!(c.status, Status::Pass | Status::PassWithinNoise | Status::Fail)).count();
    if checked == 0 {
        reasons.push("nothing was checked (fail closed)".into());
    }
    let unfloored = measured.keys().filter(|k| !file.floors.iter().any(|f| &f.metric == *k)).cloned().collect();
    let passed = reasons.is_empty();
    GateReport { schema: GATE_SCHEMA, baseline: file.path.display().to_string(), arch: arch.into(), checks, unfloored, passed, reasons }
}

/// New file text with floors raised to the measured medians. A floor whose
/// median is lower is lowered only when `lower_reason` is given. Comments,
/// deprecated keys and unknown keys stay as they are.
/// Returns (text, list of changes).
pub fn update(file: &BaselineFile, report: &GateReport, lower_reason: Option<&str>, date: &str) -> (String, Vec<String>) {
    let mut new_values: BTreeMap<&str, f64> = BTreeMap::new();
    let mut loosened: std::collections::BTreeSet<&str> = Default::default();
    let mut changes = Vec::new();
    for c in &report.checks {
        let Some(m) = c.median else { continue };
        if c.status == Status::Deprecated {
            continue;
        }
        // Tighter is higher for a larger-is-better key, lower for a time.
        let better = match c.goal {
            Goal::Maximize => m > c.floor,
            Goal::Minimize => m < c.floor,
        };
        if better {
            new_values.insert(&c.metric, m);
            let verb = if m > c.floor { "raised" } else { "lowered" };
            changes.push(format!("{}: {verb} {} -> {} (tightened)", c.metric, c.floor, fmt_value(m)));
        } else if m != c.floor {
            if let Some(r) = lower_reason {
                new_values.insert(&c.metric, m);
                loosened.insert(&c.metric);
                changes.push(format!("{}: loosened {} -> {} ({r})", c.metric, c.floor, fmt_value(m)));
            }
        }
    }
    let mut out = String::with_capacity(file.text.len() + 128);
    for line in file.text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let replaced = match file.format {
            Format::Hipfire => {
                let t = body.trim();
                if t.starts_with('#') {
                    None
                } else {
                    t.split_once('=').and_then(|(k, _)| {
                        let k = k.trim();
                        new_values.get(k).map(|v| {
                            let old = file.floors.iter().find(|f| f.metric == k).map(|f| f.value).unwrap_or(f64::NAN);
                            let mut s = String::new();
                            if loosened.contains(k) {
                                s.push_str(&format!("# {date}: loosened {k} from {old}: {}\n", lower_reason.unwrap_or("")));
                            }
                            s.push_str(&format!("{k}={}", fmt_value(*v)));
                            s
                        })
                    })
                }
            }
            Format::Toml => {
                // Within a [[floor]] table, the `value =` line after its `metric =` line.
                None
            }
        };
        match replaced {
            Some(r) => {
                out.push_str(&r);
                out.push_str(nl);
            }
            None => out.push_str(line),
        }
    }
    if file.format == Format::Toml && !new_values.is_empty() {
        out = update_toml(&file.text, &new_values, &loosened, lower_reason, date);
    }
    (out, changes)
}

fn update_toml(text: &str, values: &BTreeMap<&str, f64>, loosened: &std::collections::BTreeSet<&str>, reason: Option<&str>, date: &str) -> String {
    // Edited in place (toml_edit) so comments, key order and unknown keys survive the update.
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else {
        return text.to_string();
    };
    if let Some(floors) = doc.get_mut("floor").and_then(|f| f.as_array_of_tables_mut()) {
        for t in floors.iter_mut() {
            let Some(m) = t.get("metric").and_then(|v| v.as_str()).map(str::to_string) else { continue };
            if let Some(v) = values.get(m.as_str()) {
                t["value"] = toml_edit::value(*v);
                t["date"] = toml_edit::value(date);
                if loosened.contains(m.as_str()) {
                    t["reason"] = toml_edit::value(reason.unwrap_or(""));
                }
            }
        }
    }
    doc.to_string()
}

fn fmt_value(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/data/speed-baselines-gfx1100.txt");

    fn file() -> BaselineFile {
        parse(Path::new("tests/speed-baselines/gfx1100.txt"), FIXTURE).unwrap()
    }

    #[test]
    fn parses_hipfire_layout() {
        let f = file();
        assert_eq!(f.tolerance, Some(0.05));
        let active: Vec<&Floor> = f.floors.iter().filter(|f| !f.deprecated).collect();
        assert_eq!(active.len(), 10);
        let dep: Vec<&Floor> = f.floors.iter().filter(|f| f.deprecated).collect();
        assert_eq!(dep.len(), 1);
        assert_eq!(dep[0].metric, "9b_mq4_pp128_prefill_tok_s");
        let g = f.floors.iter().find(|x| x.metric == "27b_3.5_dflash_merge_sort_tau").unwrap();
        assert_eq!(g.value, 9.4);
        let bad = parse(Path::new("x.txt"), "a=1\nb=fast\n").unwrap_err().to_string();
        assert!(bad.contains("x.txt:2: b: not a number"), "{bad}");
    }

    fn all_measured(f: &BaselineFile, scale: f64) -> BTreeMap<String, Vec<f64>> {
        f.floors.iter().filter(|x| !x.deprecated).map(|x| (x.metric.clone(), vec![x.value * scale; 3])).collect()
    }

    #[test]
    fn fails_closed() {
        let f = file();
        let r = check(&f, "gfx1100", &BTreeMap::new(), 0.01, &[]);
        assert!(!r.passed);
        assert!(r.reasons.iter().any(|x| x.contains("nothing was checked")));
        // One floor measured, the rest not: still a failure.
        let mut m = BTreeMap::new();
        m.insert("4b_mq4_gen_tok_s".to_string(), vec![180.0, 181.0, 179.0]);
        assert!(!check(&f, "gfx1100", &m, 0.01, &[]).passed);
        // Restricted to what was measured: passes.
        assert!(check(&f, "gfx1100", &m, 0.01, &["4b_mq4_gen_tok_s".into()]).passed);
        assert!(check(&f, "gfx1100", &all_measured(&f, 1.0), 0.01, &[]).passed);
    }

    #[test]
    fn noise_band_and_failures() {
        let f = file();
        let r = check(&f, "gfx1100", &all_measured(&f, 0.97), 0.01, &[]);
        assert!(r.passed, "3% short is inside the file's 5% tolerance: {:?}", r.reasons);
        assert!(r.checks.iter().any(|c| c.status == Status::PassWithinNoise));
        let r = check(&f, "gfx1100", &all_measured(&f, 0.90), 0.01, &[]);
        assert!(!r.passed);
        assert_eq!(r.checks.iter().filter(|c| c.status == Status::Fail).count(), 10);
    }

    #[test]
    fn update_only_raises_and_keeps_comments() {
        let f = file();
        let mut m = all_measured(&f, 1.0);
        m.insert("4b_mq4_gen_tok_s".into(), vec![190.0; 3]);
        m.insert("0.8b_mq4_gen_tok_s".into(), vec![300.0; 3]);
        let r = check(&f, "gfx1100", &m, 0.01, &[]);
        let (text, changes) = update(&f, &r, None, "2026-11-30");
        assert!(text.contains("4b_mq4_gen_tok_s=190.0"), "{text}");
        assert!(text.contains("0.8b_mq4_gen_tok_s=331.0"), "not lowered without a reason");
        assert!(text.contains("#9b_mq4_pp128_prefill_tok_s=1190.0"), "deprecated key kept");
        assert!(text.contains("# Tolerance: 0.05"));
        assert_eq!(changes.len(), 1);
        let (text, changes) = update(&f, &r, Some("new KV default"), "2026-11-30");
        assert!(text.contains("0.8b_mq4_gen_tok_s=300.0"));
        assert!(text.contains("# 2026-11-30: loosened 0.8b_mq4_gen_tok_s from 331: new KV default"));
        assert_eq!(changes.len(), 2);
        // Unknown keys and comments survive a round trip.
        let again = parse(Path::new("g.txt"), &text).unwrap();
        assert_eq!(again.floors.len(), f.floors.len());
    }

    #[test]
    fn lower_is_better_keys_fail_when_they_rise() {
        // The trap: a floor `time_ms = 10` and a measured 72 ms used to pass (+622%).
        let f = parse(Path::new("g.txt"), "time_ms=10\ngen_tok_s=100\n").unwrap();
        let mut m = BTreeMap::new();
        m.insert("time_ms".to_string(), vec![72.0, 72.0, 72.0]);
        m.insert("gen_tok_s".to_string(), vec![100.0; 3]);
        let r = check(&f, "gfx1100", &m, 0.01, &[]);
        assert!(!r.passed, "{:?}", r.reasons);
        let c = r.checks.iter().find(|c| c.metric == "time_ms").unwrap();
        assert_eq!((c.status, c.goal), (Status::Fail, Goal::Minimize));
        assert!(r.reasons[0].contains("above the ceiling"), "{:?}", r.reasons);
        // A time that fell passes, and a rate that fell fails.
        m.insert("time_ms".to_string(), vec![5.0; 3]);
        assert!(check(&f, "gfx1100", &m, 0.01, &[]).passed);
        m.insert("gen_tok_s".to_string(), vec![50.0; 3]);
        assert!(!check(&f, "gfx1100", &m, 0.01, &[]).passed);
        // --update tightens a time by lowering it.
        m.insert("gen_tok_s".to_string(), vec![100.0; 3]);
        let r = check(&f, "gfx1100", &m, 0.01, &[]);
        let (text, _) = update(&f, &r, None, "2026-12-01");
        assert!(text.contains("time_ms=5.0"), "{text}");
    }

    #[test]
    fn keys_without_direction_are_refused_and_config_or_file_can_give_it() {
        let f = parse(Path::new("g.txt"), "tokens_identical=1\ngen_tok_s=100\n").unwrap();
        assert_eq!(unknown_directions(&f, &BTreeMap::new(), &[]), vec!["tokens_identical (line 1)".to_string()]);
        let mut m = BTreeMap::new();
        m.insert("tokens_identical".to_string(), vec![1.0]);
        m.insert("gen_tok_s".to_string(), vec![100.0]);
        let r = check(&f, "gfx1100", &m, 0.01, &[]);
        assert!(!r.passed, "fail closed without a direction");
        let goals: BTreeMap<String, Goal> = [("tokens_identical".to_string(), Goal::Maximize)].into();
        assert!(unknown_directions(&f, &goals, &[]).is_empty());
        let facts: BTreeMap<String, String> = [("arch".to_string(), "gfx1100".to_string())].into();
        assert!(check_with_facts(&f, "gfx1100", &m, 0.01, &[], &facts, &goals).passed);
        let t = parse(Path::new("g.toml"), "[[floor]]\nmetric = \"score\"\nvalue = 1.0\ngoal = \"minimize\"\n").unwrap();
        assert!(unknown_directions(&t, &BTreeMap::new(), &[]).is_empty());
    }

    #[test]
    fn every_real_hipfire_baseline_key_has_a_direction_but_one() {
        // hipfire's own speed-baselines (fixtures/hipfire-tree, MIT): 118 tok_s, tau and
        // ttft_ms keys, and one boolean parity check that needs `[gate] goals`.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hipfire-tree/tests/speed-baselines");
        let mut unknown = Vec::new();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let f = parse(&p, &std::fs::read_to_string(&p).unwrap()).unwrap();
            unknown.extend(unknown_directions(&f, &BTreeMap::new(), &[]));
            for fl in f.floors.iter().filter(|f| f.metric.ends_with("ttft_ms")) {
                assert_eq!(direction(fl, &BTreeMap::new()), Some(Goal::Minimize), "{}", fl.metric);
            }
        }
        assert_eq!(unknown, vec!["pp_parity_50_decode_tokens_identical (line 50)".to_string()]);
    }

    #[test]
    fn toml_baselines() {
        let text =
            "tolerance = 0.02\n[[floor]]\nmetric = \"gen_tok_s\"\nvalue = 100.0\ncommit = \"abc\"\ndate = \"2026-01-01\"\n[floor.pins]\nmodel_md5 = \"x\"\n";
        let f = parse(Path::new("gfx1100.toml"), text).unwrap();
        assert_eq!(f.floors[0].pins.get("model_md5").unwrap(), "x");
        let mut m = BTreeMap::new();
        m.insert("gen_tok_s".to_string(), vec![99.0, 99.0, 99.0]);
        // A pin that cannot be verified fails closed; a different pinned value fails.
        let r = check(&f, "gfx1100", &m, 0.01, &[]);
        assert!(!r.passed && r.checks[0].status == Status::PinMismatch, "{:?}", r.reasons);
        let mut facts: BTreeMap<String, String> = [("model_md5".to_string(), "y".to_string())].into();
        assert!(!check_with_facts(&f, "gfx1100", &m, 0.01, &[], &facts, &BTreeMap::new()).passed);
        facts.insert("model_md5".into(), "x".into());
        let r = check_with_facts(&f, "gfx1100", &m, 0.01, &[], &facts, &BTreeMap::new());
        assert!(r.passed, "{:?}", r.reasons);
        m.insert("gen_tok_s".to_string(), vec![120.0; 3]);
        let r = check_with_facts(&f, "gfx1100", &m, 0.01, &[], &facts, &BTreeMap::new());
        let (text, _) = update(&f, &r, None, "2026-11-30");
        let f2 = parse(Path::new("gfx1100.toml"), &text).unwrap();
        assert_eq!(f2.floors[0].value, 120.0);
        // Comments and key order survive an update of a TOML baseline.
        let commented = "# floors for the 7900 XTX\ntolerance = 0.02\n\n[[floor]]\n# decode, 4B model\nmetric = \"gen_tok_s\"\nvalue = 100.0 # first measured\ncommit = \"abc\"\ndate = \"2026-01-01\"\n[floor.pins]\nmodel_md5 = \"x\"\n";
        let fc = parse(Path::new("gfx1100.toml"), commented).unwrap();
        let (text, changes) = update(&fc, &r, None, "2026-11-30");
        assert!(!changes.is_empty(), "{changes:?}");
        for kept in ["# floors for the 7900 XTX", "# decode, 4B model", "commit = \"abc\"", "model_md5 = \"x\""] {
            assert!(text.contains(kept), "lost {kept:?}:\n{text}");
        }
        assert!(text.contains("value = 120.0"), "{text}");
        assert!(text.contains("date = \"2026-11-30\""), "{text}");
        assert_eq!(parse(Path::new("gfx1100.toml"), &text).unwrap().floors[0].value, 120.0);
        assert!(parse(Path::new("b.toml"), "[[floor]]\nmetric=\"a\"\nvalue=1.0\nbogus=1\n").unwrap_err().to_string().contains("bogus"));
    }
}
