//! The `[eval]` and `[gate]` sections of katlas.toml: project defaults that
//! command-line flags override.
//!
//! ```toml
//! [eval]
//! threshold = 0.015        # noise band (fraction)
//! alpha = 0.05
//! cv_limit = 0.10          # robust CV beyond which a side is unstable
//! drift_limit = 0.03
//! warmups = 2
//! min_runs = 3
//! max_runs = 20
//! order = "abba"           # or "shuffle"
//! settle = "./scripts/gpu-warm.sh"
//! strip_env = ["HIPFIRE_PROFILE"]
//! parser = "hipfire-bench"
//! timeout_s = 900
//! telemetry = true
//! keep_worktrees = 8      # git-ref worktrees kept under .katlas/worktrees
//! min_effect = 0.05       # smallest change that matters: no_change needs a band inside it
//! max_band = 0.10         # widest band an A/A calibration may store
//!
//! [gate]
//! baselines = "tests/speed-baselines"
//! command = "./bench.sh --all"
//! runs = 5
//! parser = "kv"
//! threshold = 0.01
//! goals = { pp_parity_50_decode_tokens_identical = "maximize" }   # keys whose name gives no direction
//! ```

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    pub threshold: Option<f64>,
    pub alpha: Option<f64>,
    pub cv_limit: Option<f64>,
    pub drift_limit: Option<f64>,
    pub warmups: Option<u32>,
    pub min_runs: Option<u32>,
    pub max_runs: Option<u32>,
    pub order: Option<String>,
    pub settle: Option<String>,
    #[serde(default)]
    pub strip_env: Vec<String>,
    pub parser: Option<String>,
    pub timeout_s: Option<f64>,
    pub telemetry: Option<bool>,
    /// Worktrees of earlier evals kept (least recently used removed first) [default: 8].
    pub keep_worktrees: Option<usize>,
    /// The smallest change you care about (fraction): `no_change` judged against a wider band
    /// is `inconclusive` [default: 0.05].
    pub min_effect: Option<f64>,
    /// The widest noise band an `eval --aa` may store [default: 0.10].
    pub max_band: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    pub baselines: Option<String>,
    pub command: Option<String>,
    pub runs: Option<u32>,
    pub parser: Option<String>,
    pub threshold: Option<f64>,
    /// Direction of keys whose name does not say it (`tokens_identical = "maximize"`).
    #[serde(default)]
    pub goals: std::collections::BTreeMap<String, katlas_model::ledger::Goal>,
}
