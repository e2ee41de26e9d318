//! Cross-target evaluation through a cluster scheduler: the fleet's own record
//! (`.katlas/fleet/<id>/fleet.json`, what was submitted where) and the decision it ends in
//! (a ledger entry's `fleet` field).

use crate::identity::{FileDigest, SourceIdentity};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const FLEET_SCHEMA: &str = "katlas.fleet.v1";
pub const FLEET_JOB_SCHEMA: &str = "katlas.fleet_job.v1";

/// The katlas command a fleet's jobs run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FleetCommand {
    /// `katlas eval`: each target's verdict, then the allowlist decision.
    #[default]
    Eval,
    /// `katlas gate`: each target's speed floors (its arch's baseline file).
    Gate,
    /// `katlas collect`: each target's corpus rows.
    Collect,
}

impl FleetCommand {
    pub fn as_str(self) -> &'static str {
        match self {
            FleetCommand::Eval => "eval",
            FleetCommand::Gate => "gate",
            FleetCommand::Collect => "collect",
        }
    }
    fn is_eval(&self) -> bool {
        *self == FleetCommand::Eval
    }
}

impl std::fmt::Display for FleetCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `katlas.fleet.v1`: one cross-target eval as submitted, rewritten as its jobs move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetRecord {
    /// Always `katlas.fleet.v1`.
    pub schema: String,
    /// Fleet id (directory name under `.katlas/fleet/`).
    pub id: String,
    /// `slurm`.
    pub scheduler: String,
    /// What every target runs (absent: `eval`).
    #[serde(default, skip_serializing_if = "FleetCommand::is_eval")]
    pub command: FleetCommand,
    pub created_at: String,
    /// Host that submitted the jobs.
    #[serde(default)]
    pub submitted_from: Option<String>,
    /// The arguments of the katlas command every target runs (the same plan and seed
    /// everywhere), credentials redacted.
    pub eval_args: Vec<String>,
    /// Metric and goal of the eval, for the table (a gate's or collect's: what it reads).
    pub metric: String,
    #[serde(default)]
    pub lever: Option<String>,
    #[serde(default)]
    pub kernel: Option<String>,
    /// What every target must have run: the submitting tree's source identity, the
    /// route-affecting environment, and each command side's binary.
    pub expected: ExpectedIdentity,
    pub targets: Vec<FleetTarget>,
}

/// The identity a target's sides must match to enter the comparison.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectedIdentity {
    #[serde(default)]
    pub source: SourceIdentity,
    /// Route-affecting environment at submission (what the jobs inherit).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Binary of each command side by side label (`A`, `B`), when it is a compiled program.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub binaries: BTreeMap<String, FileDigest>,
}

/// One target: where its job runs and every job submitted for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetTarget {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Node feature (`sbatch --constraint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// The job script, relative to the project root.
    pub script: String,
    /// Jobs in submission order; the last is the live one.
    #[serde(default)]
    pub jobs: Vec<FleetJob>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetJob {
    pub job_id: String,
    pub submitted_at: String,
    /// Last state the scheduler reported (`PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED` …).
    #[serde(default)]
    pub state: Option<String>,
    /// Node the scheduler ran it on, once known.
    #[serde(default)]
    pub node: Option<String>,
}

/// `katlas.fleet_job.v1`: what one `gate` or `collect` job of a fleet did on its node
/// (`.katlas/fleet/<fleet>/<target>/<attempt>/job.json`, pushed to the team store). An eval's
/// job writes its eval result instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetJobResult {
    /// Always `katlas.fleet_job.v1`.
    pub schema: String,
    /// `fleet/<fleet>/<target>/<attempt>`.
    pub id: String,
    pub command: FleetCommand,
    /// The node's identity when the command ended: host, devices, source tree, route-affecting env.
    pub identity: crate::Identity,
    pub finished_at: String,
    /// `gate`: every floor held. `collect`: every run gave its rows without an error row.
    pub passed: bool,
    /// The command's finding in one line (the gate's headline, collect's row counts).
    pub summary: String,
    /// Arch atom the command judged or measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// `gate`: its report (`katlas.gate.v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<serde_json::Value>,
    /// `collect`: the corpus file its rows went to, relative to `.katlas/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_ok: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_error: Option<u64>,
}
