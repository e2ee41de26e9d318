//! katlas-lab: the decode kernel lab. CUDA kernels (with HIP twins) under `lab/kernels/`, a CUDA
//! driver through cudarc (dynamic loading, NVRTC to SASS cubins), CPU references, checks against
//! an f64 oracle, event timing against a copy bandwidth measured in the same run, and
//! `katlas.row.v1` rows for the rest of katlas.

pub mod case;
pub mod check;
pub mod cpu;
pub mod cuda;
pub mod data;
pub mod kernels;
pub mod quant;
pub mod reference;
pub mod report;
pub mod workload;

use std::fmt;

/// An error with the exit code the CLI contract gives it (1 failed check, 2 bad input,
/// 3 missing environment).
#[derive(Debug)]
pub struct Exit {
    pub code: i32,
    pub msg: String,
}

impl Exit {
    pub fn env(msg: String) -> Self {
        Exit { code: 3, msg }
    }
    pub fn input(msg: String) -> Self {
        Exit { code: 2, msg }
    }
    pub fn fail(msg: String) -> Self {
        Exit { code: 1, msg }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}
impl std::error::Error for Exit {}

impl From<anyhow::Error> for Exit {
    fn from(e: anyhow::Error) -> Self {
        match e.downcast::<Exit>() {
            Ok(x) => x,
            Err(e) => Exit { code: 1, msg: format!("{e:#}") },
        }
    }
}

/// What to run and how to measure it, shared by both backends.
#[derive(Debug, Clone)]
pub struct RunOpts {
    /// Family filter (regex, searched in the family name).
    pub kernel: Option<regex::Regex>,
    /// Variant filter (regex, matched against the whole variant name).
    pub variant: Option<regex::Regex>,
    pub shapes: Option<Vec<kernels::Shape>>,
    pub samples: u32,
    pub warmup: u32,
    /// Launches per timed sample (the sample is their mean); 1 = one launch per event pair.
    pub batch: u32,
    pub l2_flush: bool,
    /// Also measure the read-only ceiling at each 4-bit GEMV shape's byte count.
    pub read_ceilings: bool,
    /// Bytes the rotating input sets should span (default 4 x L2).
    pub rotate_bytes: Option<usize>,
    pub seed: u64,
    pub out_dir: std::path::PathBuf,
    pub command: Vec<String>,
}

impl RunOpts {
    pub fn selects(&self, family: &str, variant: &str) -> bool {
        self.kernel.as_ref().is_none_or(|r| r.is_match(family)) && self.variant.as_ref().is_none_or(|r| r.is_match(variant))
    }
}
