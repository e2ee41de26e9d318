//! The in-process evals the suite's files build (`tests/it/protocol.rs`, `tests/it/hostile_eval.rs`):
//! one way to write the settings and the spec, so each file states only where it differs.

use katlas_eval::eval::{CaptureContext, EvalSpec, Meta, SideInput};
use katlas_eval::protocol::{Order, Settings, Side};
use katlas_eval::verdict::{JudgeConfig, Plan};
use katlas_model::ledger::Goal;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// `elapsed_ms` (lower is better) read as `key=value`, ABBA order, seed 5, no warmup, no
/// telemetry; spread and drift limits wide open, since a shared CI box is noisy and the tests
/// that use these settings are about other things.
pub fn settings(plan: Plan, timeout: Duration) -> Settings {
    Settings {
        metric: "elapsed_ms".into(),
        parser: "kv".into(),
        warmups: 0,
        plan,
        order: Order::Abba,
        seed: 5,
        settle: None,
        timeout,
        judge: JudgeConfig { goal: Goal::Minimize, cv_limit: 1.0, drift_limit: 10.0, ..JudgeConfig::default() },
        telemetry: false,
        strip_env: Vec::new(),
    }
}

/// A side measured as it is: no git ref, no knobs, no binary of its own; `root` is its source
/// tree when the test gives it one.
pub fn input(side: Side, root: Option<&Path>) -> SideInput {
    SideInput { side, git_ref: None, source_root: root.map(Path::to_path_buf), knobs: BTreeMap::new(), binary: None }
}

/// The eval `name` of `sides` in `project/name`: no knobs, no reference identity, no allowed
/// files, no speed-of-light, no correctness claims, no ledger (a test sets the fields it tests).
pub fn spec(project: &Path, name: &str, sides: Vec<SideInput>, settings: Settings) -> EvalSpec {
    EvalSpec {
        eval_id: name.into(),
        dir: project.join(name),
        sides,
        settings,
        knobs: BTreeSet::new(),
        cross_host: false,
        reference_identity: None,
        allowed_files: None,
        sol: None,
        correctness: Vec::new(),
        meta: Meta::default(),
        ledger_path: None,
        protected_ledger: None,
        project_root: project.to_path_buf(),
        threshold_source: None,
        triton: None,
        aa_max_band: None,
    }
}

/// Capture without probing GPUs: the tests run where there may be none.
pub fn cx() -> CaptureContext {
    CaptureContext { skip_devices: true, ..Default::default() }
}
