//! `katlas.task.v1`: one bounded experiment — one hypothesis, one lever, one target —
//! written by `katlas task` to `.katlas/tasks/<id>/task.json` beside `TASK.md`, and
//! read by `katlas eval TASK`.

use crate::identity::Identity;
use crate::ledger::Goal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const TASK_SCHEMA: &str = "katlas.task.v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Always `katlas.task.v1`.
    pub schema: String,
    /// Directory name under `.katlas/tasks/`.
    pub id: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// What the task was made from.
    pub origin: TaskOrigin,
    /// One sentence: what to make faster, where.
    pub objective: String,
    /// One sentence: lever, mechanism, expected effect and risk.
    pub hypothesis: String,
    /// Lever id from the catalog (`multirow_gemv` …), when the task came from one.
    #[serde(default)]
    pub lever: Option<String>,
    /// The hot kernel the experiment targets, when there is one.
    #[serde(default)]
    pub kernel: Option<String>,
    pub target: TaskTarget,
    /// A PyTorch-style op when the task was made with `--from-op`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpSpec>,
    pub evidence: TaskEvidence,
    pub baseline: TaskBaseline,
    /// Files the candidate may change (repo-relative); empty = not restricted.
    #[serde(default)]
    pub allowed_files: Vec<String>,
    /// Build command run in each side's tree before benchmarking, when needed: a shell
    /// line (usually one element; eval runs the elements joined by spaces through `sh -c`).
    #[serde(default)]
    pub build: Option<Vec<String>>,
    pub bench: Bench,
    /// Correctness checks the candidate must pass (SKIP never counts as PASS).
    #[serde(default)]
    pub correctness: Vec<CorrectnessRoute>,
    /// Rules of the experiment (one lever, no unrelated edits, …).
    #[serde(default)]
    pub constraints: Vec<String>,
    /// The exact command to run next.
    pub next: String,
    /// A third-party Python package the task tunes through a copy inside the project
    /// (`katlas task --package`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<TaskPackage>,
}

/// A third-party Python package tuned through a copy committed inside the project: each eval
/// side imports its own tree's copy (`bench.env` PYTHONPATH is relative to the side's tree).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskPackage {
    /// Top-level import name (`liger_kernel`).
    pub import_name: String,
    /// Where the package was found (the installed directory, or the editable checkout).
    pub source_dir: String,
    /// Version from the package's dist-info, when it says.
    #[serde(default)]
    pub version: Option<String>,
    /// The copy the sides import, project-relative (`third_party/python/liger_kernel`).
    pub copy: String,
    /// True when the copy is the user's existing checkout (`--editable`), not a copy katlas made.
    #[serde(default)]
    pub editable: bool,
    /// The file of the task kernel's `@triton.jit` function inside the copy, project-relative.
    #[serde(default)]
    pub kernel_file: Option<String>,
    #[serde(default)]
    pub kernel_line: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskOrigin {
    /// `suggestion`, `row` or `op`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_id: Option<String>,
    /// Where the row was read from (file:line, corpus, parser + file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_source: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskTarget {
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub arch_class: Option<String>,
    #[serde(default)]
    pub product: Option<String>,
    #[serde(default)]
    pub workload: Option<String>,
    #[serde(default)]
    pub phase: Option<String>,
    /// Shape bucket (matches ledger entries).
    #[serde(default)]
    pub shape: Option<String>,
    #[serde(default)]
    pub quant: Option<String>,
}

/// A PyTorch-style op: shapes are kept whole as written (`1,2048,4096`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    pub name: String,
    /// Op as the framework names it (`aten::mm`, `torch.nn.functional.linear`).
    pub op: String,
    /// One entry per input, each a comma-separated shape.
    pub shapes: Vec<String>,
    #[serde(default)]
    pub dtype: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskEvidence {
    /// Fit lines behind the hypothesis, with the numbers.
    #[serde(default)]
    pub fit: Vec<String>,
    /// Fit rules that fired.
    #[serde(default)]
    pub rules: Vec<String>,
    /// The hot kernel's profile numbers (share_pct, calls, avg_us, bw_gbps, bw_pct …).
    #[serde(default)]
    pub profile: BTreeMap<String, f64>,
    /// Source files of the kernel, best first.
    #[serde(default)]
    pub sources: Vec<String>,
    /// `path:line` of dispatch sites.
    #[serde(default)]
    pub dispatch_refs: Vec<String>,
    /// Baseline ISA resources of the kernel (vgpr, sgpr, spills, lds_bytes, wave_size, occupancy …).
    #[serde(default)]
    pub isa: BTreeMap<String, serde_json::Value>,
    /// Prior ledger verdicts on the same target.
    #[serde(default)]
    pub prior: Vec<String>,
    /// Evidence that is missing.
    #[serde(default)]
    pub missing: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskBaseline {
    /// Git commit of the source tree the task was made at (the eval's baseline side).
    #[serde(default)]
    pub git_ref: Option<String>,
    /// Row the numbers come from.
    #[serde(default)]
    pub row_id: Option<String>,
    /// Metrics of that row (as recorded; may include instrumentation overhead).
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    #[serde(default)]
    pub identity: Identity,
    /// True when the row cannot serve as the baseline (instrumented, dirty, no metric).
    #[serde(default)]
    pub fresh_required: bool,
    #[serde(default)]
    pub fresh_why: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bench {
    /// argv of the benchmark (fresh process per sample).
    pub command: Vec<String>,
    /// Env for every sample, instrumentation stripped.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Env names removed from the row's env because they only switch on instrumentation.
    #[serde(default)]
    pub stripped_env: Vec<String>,
    /// Profiler arguments and wrapper words removed from the row's command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stripped_args: Vec<String>,
    /// Metric to read from each run's output.
    pub metric: String,
    #[serde(default)]
    pub goal: Goal,
    /// Output parser for the metric (`kv`, `hipfire-bench` …); `null` = the eval default.
    #[serde(default)]
    pub parser: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessRoute {
    /// Claim class (`[route.CLAIM]` in katlas.toml) or `task`.
    pub claim: String,
    /// Shell command; exit 0 = PASS.
    pub command: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            schema: TASK_SCHEMA.into(),
            id: "t1".into(),
            created_at: "2026-11-30T00:00:00Z".into(),
            origin: TaskOrigin { kind: "op".into(), ..Default::default() },
            objective: "o".into(),
            hypothesis: "h".into(),
            lever: None,
            kernel: None,
            target: TaskTarget::default(),
            op: Some(OpSpec { name: "q".into(), op: "aten::mm".into(), shapes: vec!["1,2048,4096".into()], dtype: Some("bf16".into()) }),
            evidence: TaskEvidence::default(),
            baseline: TaskBaseline::default(),
            allowed_files: vec![],
            build: Some(vec!["make -j".into()]),
            bench: Bench { command: vec!["sh".into(), "-c".into(), "true".into()], metric: "time_us".into(), goal: Goal::Minimize, ..Default::default() },
            correctness: vec![CorrectnessRoute { claim: "task".into(), command: "true".into() }],
            constraints: vec![],
            next: "katlas eval t1".into(),
            package: None,
        }
    }

    #[test]
    fn round_trips_and_rejects_unknown_fields() {
        let t = task();
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["op"]["shapes"][0], "1,2048,4096");
        assert_eq!(serde_json::from_value::<Task>(v.clone()).unwrap(), t);
        let mut bad = v;
        bad["bench"]["surprise"] = serde_json::json!(1);
        let e = serde_json::from_value::<Task>(bad).unwrap_err().to_string();
        assert!(e.contains("surprise"), "{e}");
    }
}
