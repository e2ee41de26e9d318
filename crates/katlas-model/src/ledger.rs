//! Eval evidence: per-sample records (`katlas.eval.sample.v1`), the judged
//! result of one eval (`katlas.eval.result.v1`) and the ledger entry every
//! verdict leaves behind (`katlas.ledger.v1`), wins and rejections alike.
//!
//! Verdicts are recomputable: a ledger entry points at its raw samples by path
//! and md5, so a better statistic can re-judge old evidence without the GPU.

use crate::identity::Identity;
use crate::row::Route;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

pub const LEDGER_SCHEMA: &str = "katlas.ledger.v1";
pub const EVAL_SAMPLE_SCHEMA: &str = "katlas.eval.sample.v1";
pub const EVAL_RESULT_SCHEMA: &str = "katlas.eval.result.v1";

/// The judgement of one candidate against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Better than baseline by more than the noise threshold, CI clear of it.
    Improved,
    /// Worse than baseline by more than the noise threshold, CI clear of it.
    Regressed,
    /// CI lies inside ±noise threshold.
    NoChange,
    /// CI straddles the threshold and the run budget ended.
    Inconclusive,
    /// Drift between the first and second half of a side, or spread beyond the limit.
    Unstable,
    /// A correctness route failed (or did not pass).
    Incorrect,
    /// No usable baseline (no samples, no baseline ref or floor).
    NeedsBaseline,
    /// Not comparable: identity mismatch, stale binary, allowed-files breach,
    /// faster than the speed of light.
    Invalid,
}

impl Verdict {
    pub const ALL: [Verdict; 8] = [
        Verdict::Improved,
        Verdict::Regressed,
        Verdict::NoChange,
        Verdict::Inconclusive,
        Verdict::Unstable,
        Verdict::Incorrect,
        Verdict::NeedsBaseline,
        Verdict::Invalid,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no_change",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Unstable => "unstable",
            Verdict::Incorrect => "incorrect",
            Verdict::NeedsBaseline => "needs_baseline",
            Verdict::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Verdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == norm)
            .ok_or_else(|| format!("unknown verdict `{s}` (expected one of {})", Verdict::ALL.map(|v| v.as_str()).join(", ")))
    }
}

/// What to do with the lever after this verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Disposition {
    /// Ship it as the default.
    Promote,
    /// Do not ship; the suggestion engine should not propose it again as-is.
    Reject,
    /// Keep behind a switch (helps some shapes/settings, not all).
    OptIn,
    /// Rejected for now; worth revisiting when the condition holds.
    RevisitIf { condition: String },
}

impl Disposition {
    /// The disposition a verdict implies when nobody chose one.
    pub fn default_for(verdict: Verdict) -> Disposition {
        match verdict {
            Verdict::Improved => Disposition::Promote,
            Verdict::Inconclusive => Disposition::RevisitIf { condition: "more samples or a quieter machine".into() },
            Verdict::Unstable => Disposition::RevisitIf { condition: "the measurement is stable".into() },
            Verdict::NeedsBaseline => Disposition::RevisitIf { condition: "a baseline exists".into() },
            Verdict::Invalid => Disposition::RevisitIf { condition: "the comparison is valid (see reasons)".into() },
            Verdict::Regressed | Verdict::NoChange | Verdict::Incorrect => Disposition::Reject,
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            Disposition::Promote => "promote",
            Disposition::Reject => "reject",
            Disposition::OptIn => "opt-in",
            Disposition::RevisitIf { .. } => "revisit-if",
        }
    }
}

/// A disposition as its one-line text (`promote`, `revisit-if: CONDITION`) in JSON, for
/// records that show it to a person (`#[serde(with = "disposition_text")]`).
pub mod disposition_text {
    use super::Disposition;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Disposition, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(d)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Disposition, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disposition::RevisitIf { condition } => write!(f, "revisit-if: {condition}"),
            d => f.write_str(d.kind()),
        }
    }
}

impl FromStr for Disposition {
    type Err = String;
    /// `promote`, `reject`, `opt-in`, `revisit-if: CONDITION`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        match t {
            "promote" => return Ok(Disposition::Promote),
            "reject" => return Ok(Disposition::Reject),
            "opt-in" | "opt_in" => return Ok(Disposition::OptIn),
            _ => {}
        }
        if let Some(rest) = t.strip_prefix("revisit-if").or_else(|| t.strip_prefix("revisit_if")) {
            let cond = rest.trim_start().strip_prefix(':').unwrap_or(rest).trim();
            if cond.is_empty() {
                return Err("`revisit-if` needs a condition: `revisit-if: CONDITION`".into());
            }
            return Ok(Disposition::RevisitIf { condition: cond.to_string() });
        }
        Err(format!("unknown disposition `{s}` (expected promote, reject, opt-in or `revisit-if: CONDITION`)"))
    }
}

/// Whether larger metric values are better.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Goal {
    /// Throughput-like metrics (tok/s, GB/s).
    #[default]
    Maximize,
    /// Latency-like metrics (ms, us).
    Minimize,
}

impl Goal {
    /// The direction a metric's name implies, or `None` when the name does not say.
    /// Rates (`tok_s`, `_per_s`, GB/s, FLOP/s, τ, accepted tokens) are better larger;
    /// times (`_ms`, `_us`, `_ns`, latency, TTFT, duration) better smaller. A bare `_s`
    /// suffix is a rate when it follows `tok`/`tokens`/`per` and a time otherwise.
    pub fn infer(metric: &str) -> Option<Goal> {
        let m = metric.to_ascii_lowercase();
        let rate_suffix =
            ["tok_s", "tokens_s", "_per_s", "_per_sec", "gbps", "gb_s", "gbs", "tflops", "gflops", "tops", "_tau", "tau", "accepted", "speedup", "hit_rate"];
        let rate_word = ["throughput", "bandwidth", "tok_per", "tokens_per", "per_second"];
        if rate_suffix.iter().any(|s| m.ends_with(s)) || rate_word.iter().any(|w| m.contains(w)) {
            return Some(Goal::Maximize);
        }
        let time_suffix = ["_ms", "_us", "_ns", "_s", "_sec", "_seconds"];
        let time_word = ["latency", "elapsed", "duration", "ttft", "time"];
        if time_suffix.iter().any(|s| m.ends_with(s)) || time_word.iter().any(|w| m.contains(w)) || m == "ms" || m == "us" {
            return Some(Goal::Minimize);
        }
        None
    }

    /// [`Goal::infer`] from the name, else from the unit a reader gave the value: rates
    /// (`tok/s`, `GB/s`, `GiB/s`, `TFLOP/s`) are better larger, times (`s`, `ms`, `us`, `ns`) smaller.
    pub fn infer_with_unit(metric: &str, unit: Option<&str>) -> Option<Goal> {
        Goal::infer(metric).or(match unit? {
            "tok/s" | "GB/s" | "GiB/s" | "TFLOP/s" | "GFLOP/s" => Some(Goal::Maximize),
            "s" | "ms" | "us" | "ns" => Some(Goal::Minimize),
            _ => None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Goal::Maximize => "maximize",
            Goal::Minimize => "minimize",
        }
    }

    /// A relative change of the metric, signed so + = better for this goal (the ledger's `gain`).
    pub fn gain(self, relative_change: f64) -> f64 {
        match self {
            Goal::Maximize => relative_change,
            Goal::Minimize => -relative_change,
        }
    }

    /// An interval of the relative change as an interval of the gain, low end first.
    pub fn gain_interval(self, ci: [f64; 2]) -> [f64; 2] {
        match self {
            Goal::Maximize => ci,
            Goal::Minimize => [-ci[1], -ci[0]],
        }
    }
}

/// A gain (+ = better) as `eval`, `ledger` and `report` print it: `+34.37%`.
pub fn gain_text(gain: f64) -> String {
    format!("{:+.2}%", gain * 100.0)
}

/// A gain interval with the confidence level it was taken at, as `eval`, `ledger` and
/// `report` print it: `[+3.73%, +56.31%] at 99.5%`. The level goes with the numbers
/// because an adaptive eval's interval is at its look's level, not at 95%.
pub fn gain_interval_text(interval: [f64; 2], level: f64) -> String {
    format!("{} at {}", gain_range_text(interval), level_text(level))
}

/// A gain interval without its level, for a table whose header names the one level of all
/// its rows: `[+3.73%, +56.31%]`.
pub fn gain_range_text(interval: [f64; 2]) -> String {
    format!("[{}, {}]", gain_text(interval[0]), gain_text(interval[1]))
}

/// A confidence level as the interval's text names it: `95.0%`, `99.5%`.
pub fn level_text(level: f64) -> String {
    format!("{:.1}%", level * 100.0)
}

impl fmt::Display for Goal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Goal {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "maximize" | "higher" => Ok(Goal::Maximize),
            "minimize" | "lower" => Ok(Goal::Minimize),
            other => Err(format!("goal `{other}`: expected maximize or minimize")),
        }
    }
}

/// Outcome of one correctness route command. SKIP and BLOCKED never count as PASS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RouteOutcome {
    Pass,
    Fail,
    Skip,
    Blocked,
}

impl RouteOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteOutcome::Pass => "PASS",
            RouteOutcome::Fail => "FAIL",
            RouteOutcome::Skip => "SKIP",
            RouteOutcome::Blocked => "BLOCKED",
        }
    }
    pub fn is_pass(self) -> bool {
        self == RouteOutcome::Pass
    }
}

impl fmt::Display for RouteOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Result of one correctness check of a claim class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessCheck {
    /// Claim class (`[route.CLAIM]` in katlas.toml).
    pub claim: String,
    /// Check name within the route, or the command line.
    pub check: String,
    pub outcome: RouteOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How the samples were taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// `abba` (blocks B A A B … alternating) or `shuffle` (seeded shuffle per block).
    pub order: String,
    /// Side labels in the order the measured samples ran (`A`, `B`, …), when recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sequence: Vec<String>,
    /// Measured samples taken per side (the actual count, after adaptive stopping).
    pub n_per_side: Vec<u32>,
    /// Maximum measured samples per side (fixed N, or the adaptive budget).
    pub max_per_side: u32,
    /// Warmup runs per side, discarded.
    pub warmups: u32,
    /// Seed of the order shuffle and the bootstrap.
    pub seed: u64,
    /// Adaptive sequential sampling (`--auto`).
    #[serde(default)]
    pub adaptive: bool,
    /// Number of interim looks the adaptive mode made (its alpha is split over the planned looks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looks: Option<u32>,
    /// Settle command run before each block, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<String>,
    /// Fresh process per sample (always true for katlas eval; kept for imported evidence).
    #[serde(default)]
    pub fresh_process: bool,
}

/// Summary statistics of one side's measured samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideSummary {
    /// Side label (`baseline`, `candidate`, a git ref, `KEY=VALUE`).
    pub label: String,
    /// Measured, usable samples.
    pub n: u32,
    #[serde(default)]
    pub median: Option<f64>,
    #[serde(default)]
    pub mean: Option<f64>,
    /// Median absolute deviation (unscaled).
    #[serde(default)]
    pub mad: Option<f64>,
    /// Robust coefficient of variation (1.4826·MAD / median): the spread the `unstable`
    /// rule judges against `cv_limit`.
    #[serde(default)]
    pub cv: Option<f64>,
    /// CI of the median (distribution-free order-statistic interval, or bootstrap).
    #[serde(default)]
    pub ci: Option<[f64; 2]>,
    /// Samples flagged as throttled (kept, counted).
    #[serde(default)]
    pub throttled: u32,
    /// Failed runs (crash, timeout, missing metric).
    #[serde(default)]
    pub failed: u32,
}

/// The effect of the candidate relative to the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    /// `median(candidate) / median(baseline) - 1` (raw direction of the metric).
    pub relative_change: f64,
    /// The interval the verdict used: the hull of `bootstrap_ci` and a Welch-t
    /// interval on log values, at `ci_level` (small samples are not over-trusted).
    pub ci: [f64; 2],
    /// Confidence level of `ci` (per-look level in adaptive mode, e.g. 0.99).
    pub ci_level: f64,
    /// Seeded percentile bootstrap CI of `relative_change` (ratio of medians) at `ci_level`.
    #[serde(default)]
    pub bootstrap_ci: Option<[f64; 2]>,
    /// Signed so positive means better given the goal (`relative_change`, negated for `minimize`).
    pub gain: f64,
    /// Two-sided Mann–Whitney U p-value.
    #[serde(default)]
    pub p_value: Option<f64>,
    /// Bootstrap resamples behind `ci`.
    #[serde(default)]
    pub resamples: u32,
}

/// Raw samples behind a verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleRef {
    /// Path of `samples.jsonl`, relative to the project root when inside it.
    pub path: String,
    /// md5 of the file when the verdict was made.
    #[serde(default)]
    pub md5: Option<String>,
    /// Lines (records) in the file at that time.
    #[serde(default)]
    pub records: u64,
}

/// One side as the ledger remembers it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalSide {
    pub label: String,
    /// Git ref the side was built from, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// The argv that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Variant env (declared knobs) of this side.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
    #[serde(default)]
    pub identity: Identity,
    #[serde(default)]
    pub summary: SideSummary,
}

/// `katlas.ledger.v1`: one verdict, appended to `.katlas/ledger.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LedgerEntry {
    /// Always `katlas.ledger.v1`.
    pub schema: String,
    pub id: String,
    /// RFC 3339 UTC.
    pub recorded_at: String,
    /// Task the eval belonged to, when any.
    #[serde(default)]
    pub task_id: Option<String>,
    /// Eval id (directory name under the task's or `.katlas/evals/`).
    #[serde(default)]
    pub eval_id: Option<String>,
    /// Tuning lever (catalog id), when known.
    #[serde(default)]
    pub lever: Option<String>,
    #[serde(flatten)]
    pub key: crate::key::ExperimentKey,
    #[serde(default)]
    pub hypothesis: Option<String>,
    pub metric: String,
    #[serde(default)]
    pub goal: Goal,
    pub baseline: EvalSide,
    pub candidate: EvalSide,
    pub protocol: Protocol,
    pub samples: SampleRef,
    pub verdict: Verdict,
    /// Why the verdict is what it is (each check that decided it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default)]
    pub effect: Option<Effect>,
    /// Relative noise threshold the verdict used (0.01 = 1%).
    pub noise_threshold: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub correctness: Vec<CorrectnessCheck>,
    /// Sides ran on different hosts (`--cross-host`).
    #[serde(default)]
    pub cross_host: bool,
    /// Why it is faster or slower, as understood.
    #[serde(default)]
    pub mechanism: Option<String>,
    pub disposition: Disposition,
    /// A cross-target decision (`katlas eval --on slurm`): every target's verdict and what
    /// runs where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetSummary>,
}

/// Telemetry read around one sample (GPU clocks, temperature).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    /// `nvidia-smi`, `hwmon`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// Active throttle reasons reported by the driver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
}

/// `katlas.eval.sample.v1`: one run of one side (warmup or measured), one line of `samples.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalSample {
    /// Always `katlas.eval.sample.v1`.
    pub schema: String,
    pub eval_id: String,
    /// 0-based position in the planned run sequence (resume key).
    pub seq: u64,
    /// Side label (`A` = baseline, `B` = candidate, `C`… for further refs).
    pub side: String,
    /// Block the run belonged to.
    pub block: u32,
    /// `warmup` or `measured`.
    pub pass: String,
    pub metric: String,
    /// The metric value; `null` when the run failed.
    #[serde(default)]
    pub value: Option<f64>,
    /// Other metrics the parser found in the run's output.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    pub wall_s: f64,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Failure cause (crash, timeout, missing metric); `null` on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Telemetry>,
    /// Clocks or temperature showed throttling during the sample.
    #[serde(default)]
    pub throttled: bool,
    /// Kernel route observed in the run's output, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// Code objects the run reported loading (`code_object=PATH` lines), as printed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_objects: Vec<String>,
}

/// `katlas.eval.result.v1`: the judged result of one eval (`result.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalResult {
    /// Always `katlas.eval.result.v1`.
    pub schema: String,
    pub eval_id: String,
    #[serde(default)]
    pub task_id: Option<String>,
    pub created_at: String,
    pub metric: String,
    #[serde(default)]
    pub goal: Goal,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// All sides, baseline (reference) first.
    pub sides: Vec<EvalSide>,
    /// Effect of each non-reference side against the first, in `sides` order minus the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
    pub noise_threshold: f64,
    pub protocol: Protocol,
    pub samples: SampleRef,
    /// Drift between first and second half, per side label (relative change of medians).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drift: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub correctness: Vec<CorrectnessCheck>,
    #[serde(default)]
    pub cross_host: bool,
    /// Observed kernel-route differences between sides (env variant A/B).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_changes: Vec<String>,
    /// Ledger entry id this result was recorded under.
    #[serde(default)]
    pub ledger_id: Option<String>,
}

/// What a fleet decided, on the ledger entry that records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetSummary {
    pub fleet_id: String,
    pub scheduler: String,
    pub decision: FleetDecision,
    /// Arch atoms (or target names where the arch is unknown) that run the candidate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowlist: Vec<String>,
    pub targets: Vec<FleetOutcome>,
}

/// The allowlist decision over a fleet's measured targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FleetDecision {
    /// Every target improved.
    Promote,
    /// Improved on some, flat or unmeasured elsewhere: run it only where measured better.
    Allowlist,
    /// A measured target regressed.
    Reject,
    /// Nothing measured better.
    KeepDefault,
}

impl FleetDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            FleetDecision::Promote => "promote",
            FleetDecision::Allowlist => "allowlist",
            FleetDecision::Reject => "reject",
            FleetDecision::KeepDefault => "keep_default",
        }
    }
}

impl std::fmt::Display for FleetDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One target's line of the cross-target table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetOutcome {
    pub target: String,
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub job_id: Option<String>,
    #[serde(default)]
    pub eval_id: Option<String>,
    /// The target's own verdict, `invalid` when its identity does not match what was
    /// submitted; absent when the target was not measured.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    #[serde(default)]
    pub effect: Option<Effect>,
    /// The eval's goal (the sign of `effect.gain`).
    #[serde(default)]
    pub goal: Option<Goal>,
    /// Why the verdict is what it is, or why nothing was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// A gate's or collect's target: whether it passed (absent: not measured, or an eval's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// A gate's or collect's target: its finding in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_strings_round_trip() {
        for v in Verdict::ALL {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            assert_eq!(v.as_str().parse::<Verdict>().unwrap(), v);
        }
        assert!("better".parse::<Verdict>().is_err());
    }

    #[test]
    fn disposition_forms() {
        let d: Disposition = "revisit-if: wave64 arch".parse().unwrap();
        assert_eq!(d, Disposition::RevisitIf { condition: "wave64 arch".into() });
        assert_eq!(d.to_string(), "revisit-if: wave64 arch");
        let j = serde_json::to_value(&d).unwrap();
        assert_eq!(j, serde_json::json!({"kind": "revisit-if", "condition": "wave64 arch"}));
        assert_eq!(serde_json::to_value(Disposition::OptIn).unwrap(), serde_json::json!({"kind": "opt-in"}));
        assert!("revisit-if".parse::<Disposition>().is_err());
        assert!("maybe".parse::<Disposition>().is_err());
    }

    /// Records that show a disposition to a person keep its one-line text in JSON (what
    /// suggest's prior attempts printed as a string before they were typed).
    #[test]
    fn disposition_text_is_the_display_string_both_ways() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct R {
            #[serde(with = "disposition_text")]
            d: Disposition,
        }
        for d in [Disposition::Promote, Disposition::Reject, Disposition::OptIn, Disposition::RevisitIf { condition: "wave64 arch".into() }] {
            let j = serde_json::to_value(R { d: d.clone() }).unwrap();
            assert_eq!(j, serde_json::json!({ "d": d.to_string() }));
            assert_eq!(serde_json::from_value::<R>(j).unwrap().d, d);
        }
        assert!(serde_json::from_value::<R>(serde_json::json!({"d": "maybe"})).is_err());
    }

    #[test]
    fn goals_from_names_then_units() {
        assert_eq!(Goal::Minimize.to_string(), "minimize");
        assert_eq!(serde_json::to_value(Goal::Maximize).unwrap(), "maximize");
        assert_eq!(Goal::infer_with_unit("gen_tok_s", Some("ms")), Some(Goal::Maximize), "the name says it first");
        assert_eq!(Goal::infer_with_unit("p50", Some("us")), Some(Goal::Minimize));
        assert_eq!(Goal::infer_with_unit("bw", Some("GB/s")), Some(Goal::Maximize));
        assert_eq!(Goal::infer_with_unit("score", None), None);
    }

    #[test]
    fn a_gain_is_the_change_signed_by_the_goal_with_its_level() {
        // A time that fell 34.37% is a +34.37% gain; its interval flips and reorders.
        assert_eq!(Goal::Minimize.gain(-0.3437), 0.3437);
        assert_eq!(Goal::Minimize.gain_interval([-0.5631, -0.0373]), [0.0373, 0.5631]);
        assert_eq!(Goal::Maximize.gain_interval([-0.5631, -0.0373]), [-0.5631, -0.0373]);
        assert_eq!(gain_text(0.3437), "+34.37%");
        assert_eq!(gain_interval_text([0.0373, 0.5631], 0.995), "[+3.73%, +56.31%] at 99.5%");
        assert_eq!(gain_interval_text([-0.02, 0.01], 0.95), "[-2.00%, +1.00%] at 95.0%");
    }
}
