//! Identity: everything that decides whether two measurements are comparable.
//!
//! Every field is optional because evidence arrives from many places (our own
//! collector, imported hipfire rows, profiler files): a field that is unknown
//! is `null`, never invented.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// Source tree state at capture time.
    #[serde(default)]
    pub source: SourceIdentity,
    /// The executable that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<FileDigest>,
    /// Code objects loaded by the run, when the workload reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_objects: Vec<FileDigest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<FileDigest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<FileDigest>,
    #[serde(default)]
    pub host: HostIdentity,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    /// Toolkit versions; a tool that is absent maps to `null`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub toolkits: BTreeMap<String, Option<String>>,
    /// Route-affecting environment (configured prefixes, secrets never recorded).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RunPolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceIdentity {
    /// Project root the identity was computed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Full commit hash, `null` outside git or before the first commit.
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub commit_short: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    /// `true` when tracked changes or untracked, non-ignored files exist.
    #[serde(default)]
    pub dirty: Option<bool>,
    /// md5 over the diff against HEAD plus the paths and contents of untracked,
    /// non-ignored files; `null` on a clean tree.
    #[serde(default)]
    pub diff_md5: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileDigest {
    #[serde(default)]
    pub path: Option<String>,
    /// `null` when not computed (opt-in model digests) or the file was absent.
    #[serde(default)]
    pub md5: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Why the digest is missing, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostIdentity {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub index: u32,
    /// `nvidia` or `amd`.
    pub vendor: String,
    #[serde(default)]
    pub product: Option<String>,
    /// Arch atom (`gfx1100`, `sm_90`), possibly from `KATLAS_ARCH`.
    #[serde(default)]
    pub arch: Option<String>,
    /// Where the arch atom came from: `nvidia-smi`, `rocminfo`, `kfd-topology`, `override`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// How the evidence was measured (fresh process, warmups, timeouts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunPolicy {
    #[serde(default)]
    pub fresh_process: bool,
    #[serde(default)]
    pub warmup_runs: u32,
    #[serde(default)]
    pub measured_runs: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<String>,
}

impl Identity {
    /// The arch atom of the first device, the one a single-GPU row ran on.
    pub fn arch(&self) -> Option<&str> {
        self.devices.iter().find_map(|d| d.arch.as_deref())
    }
}
