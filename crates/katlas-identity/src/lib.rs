//! Identity capture: what decides whether two measurements are comparable.
//!
//! Everything is best-effort by design: a missing tool (git, nvidia-smi,
//! rocminfo, nvcc) is recorded as absent, never an error, because identity is
//! stamped on every row and must not stop a collection.

pub mod command;
pub mod digest_cache;
pub mod env;
pub mod gpu;
pub mod host;
pub mod output_file;
pub mod secrets;
pub mod source;
pub mod toolkit;

use katlas_model::{FileDigest, Identity};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use command::{redact_argv, redact_command_line};
pub use digest_cache::file_digest;
pub use env::{check_env_prefix, env_selectors, redact_env, redact_text, route_env, Redactor, DEFAULT_ENV_PREFIXES};
pub use output_file::{redact_file, redact_stream};
pub use secrets::{holds_secret, is_secret_name, redact_secrets, REDACTED};
pub use source::source_identity;

/// What to capture. `Default` captures host, GPUs, toolkits and the process
/// environment with the default prefixes, and no files.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// Where to compute the source identity; `None` skips it.
    pub project_root: Option<PathBuf>,
    pub binary: Option<PathBuf>,
    pub model: Option<PathBuf>,
    /// Model digests are opt-in: model files are many GB.
    pub hash_model: bool,
    pub prompt: Option<PathBuf>,
    /// Route-affecting env prefixes, and exact names as `NAME=` ([`env_selectors`]); empty
    /// means [`DEFAULT_ENV_PREFIXES`].
    pub env_prefixes: Vec<String>,
    /// Explicit environment (the one a child will get); `None` = this process's.
    pub env: Option<BTreeMap<String, String>>,
    /// Digest cache directory (`.katlas/cache`); `None` disables caching.
    pub cache_dir: Option<PathBuf>,
    /// Skip probing GPUs and toolkits (fast paths, tests).
    pub skip_devices: bool,
}

pub fn capture(opts: &CaptureOptions) -> Identity {
    let mut id = Identity::default();
    if let Some(root) = &opts.project_root {
        id.source = source_identity(root);
    }
    let cache = opts.cache_dir.as_deref();
    id.binary = opts.binary.as_deref().map(|p| file_digest(p, cache));
    id.prompt = opts.prompt.as_deref().map(|p| file_digest(p, cache));
    id.model = opts.model.as_deref().map(|p| {
        if opts.hash_model {
            file_digest(p, cache)
        } else {
            FileDigest {
                path: Some(p.display().to_string()),
                md5: None,
                size: std::fs::metadata(p).ok().map(|m| m.len()),
                note: Some("model digest not requested (opt-in)".into()),
            }
        }
    });
    id.host = host::host_identity();
    if !opts.skip_devices {
        id.devices = gpu::devices();
        id.toolkits = toolkit::toolkits();
    }
    let prefixes: Vec<String> =
        if opts.env_prefixes.is_empty() { DEFAULT_ENV_PREFIXES.iter().map(|s| s.to_string()).collect() } else { opts.env_prefixes.clone() };
    id.env = match &opts.env {
        Some(map) => route_env(&prefixes, map.iter().map(|(k, v)| (k.clone(), v.clone()))),
        None => route_env(&prefixes, std::env::vars()),
    };
    id
}

/// Run a tool and return its stdout when it exists and succeeds.
pub(crate) fn tool_output(program: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program).args(args).stdin(std::process::Stdio::null()).stderr(std::process::Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}
