//! The fields of a `katlas.row.v1` line that the index holds, read without building the rest
//! of the row (the importers' `extra` and `artifacts` maps, routes, commands are skipped
//! unparsed): reading a million rows is dominated by JSON, and this is what makes a rebuild
//! fast. Types are checked for every field read; `katlas corpus validate` checks whole rows.

use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;

type S<'a> = Cow<'a, str>;

#[derive(Debug, Deserialize)]
pub struct LeanRow<'a> {
    #[serde(borrow)]
    pub schema: S<'a>,
    #[serde(borrow)]
    pub id: S<'a>,
    #[serde(borrow)]
    pub captured_at: S<'a>,
    #[serde(borrow)]
    pub workload: S<'a>,
    #[serde(borrow, default)]
    pub workload_kind: Option<S<'a>>,
    #[serde(borrow)]
    pub phase: S<'a>,
    #[serde(borrow, default)]
    pub shape_bucket: Option<S<'a>>,
    #[serde(default)]
    pub run_index: u32,
    #[serde(borrow, default)]
    pub pass: Option<S<'a>>,
    #[serde(borrow, default)]
    pub arch: Option<S<'a>>,
    #[serde(borrow, default)]
    pub quant: Option<S<'a>>,
    #[serde(borrow, default)]
    pub identity: LeanIdentity<'a>,
    #[serde(borrow, default)]
    pub variant: LeanVariant<'a>,
    #[serde(borrow, default)]
    pub metrics: BTreeMap<S<'a>, LeanMetric<'a>>,
    #[serde(borrow, default)]
    pub kernels: Vec<LeanKernel<'a>>,
    pub status: katlas_model::Status,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanIdentity<'a> {
    #[serde(borrow, default)]
    pub source: LeanSource<'a>,
    #[serde(borrow, default)]
    pub binary: Option<LeanDigest<'a>>,
    #[serde(borrow, default)]
    pub host: LeanHost<'a>,
    #[serde(borrow, default)]
    pub devices: Vec<LeanDevice<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanSource<'a> {
    #[serde(borrow, default)]
    pub commit: Option<S<'a>>,
    #[serde(borrow, default)]
    pub commit_short: Option<S<'a>>,
    #[serde(borrow, default)]
    pub branch: Option<S<'a>>,
    #[serde(default)]
    pub dirty: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanDigest<'a> {
    #[serde(borrow, default)]
    pub md5: Option<S<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanHost<'a> {
    #[serde(borrow, default)]
    pub hostname: Option<S<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanDevice<'a> {
    #[serde(borrow, default)]
    pub product: Option<S<'a>>,
    #[serde(borrow, default)]
    pub arch: Option<S<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanVariant<'a> {
    #[serde(borrow, default)]
    pub env: BTreeMap<S<'a>, S<'a>>,
    #[serde(borrow, default)]
    pub instrumentation: Vec<S<'a>>,
    #[serde(borrow, default)]
    pub knobs: BTreeMap<S<'a>, S<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct LeanMetric<'a> {
    pub value: f64,
    #[serde(borrow, default)]
    pub unit: Option<S<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LeanKernel<'a> {
    #[serde(borrow)]
    pub name: S<'a>,
    #[serde(borrow, default)]
    pub demangled: Option<S<'a>>,
    #[serde(default)]
    pub calls: u64,
    #[serde(default)]
    pub total_us: f64,
    #[serde(default)]
    pub avg_us: Option<f64>,
    #[serde(default)]
    pub share_pct: Option<f64>,
    #[serde(default)]
    pub bytes: Option<f64>,
    #[serde(default)]
    pub flops: Option<f64>,
    #[serde(default)]
    pub achieved_gbps: Option<f64>,
    #[serde(borrow, default)]
    pub op: Option<LeanOp<'a>>,
    #[serde(default)]
    pub registers: Option<u32>,
    #[serde(default)]
    pub shared_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct LeanOp<'a> {
    #[serde(borrow)]
    pub family: S<'a>,
    #[serde(borrow)]
    pub role: S<'a>,
}

impl LeanRow<'_> {
    /// The row's variant as one comparable string: declared knobs, else the requested env
    /// without instrumentation; `None` when the row names no variant.
    pub fn variant_key(&self) -> Option<String> {
        let v = &self.variant;
        let pairs: Vec<String> = if !v.knobs.is_empty() {
            v.knobs.iter().map(|(k, x)| format!("{k}={x}")).collect()
        } else {
            v.env.iter().filter(|(k, _)| !v.instrumentation.contains(k)).map(|(k, x)| format!("{k}={x}")).collect()
        };
        (!pairs.is_empty()).then(|| pairs.join(" "))
    }
}
