//! What one measured case carries, whichever backend ran it: the run's environment, the case's
//! timings and check, and what the compiler reported of its function.

use crate::check::{CheckResult, Stats};
use crate::kernels::{Family, Shape};
use serde::Serialize;
use std::collections::BTreeMap;

/// One function's line of the ptxas `-v` report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Resource {
    pub func: String,
    pub registers: Option<u32>,
    pub stack_bytes: Option<u64>,
    pub spill_stores: Option<u64>,
    pub spill_loads: Option<u64>,
    pub smem_bytes: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Env {
    pub backend: String,
    pub arch: String,
    pub device: String,
    pub driver: Option<String>,
    pub toolkit: Option<String>,
    pub copy_gbps: Option<f64>,
    pub copy_detail: BTreeMap<String, f64>,
    pub floor_us: Option<f64>,
    pub warmup: u32,
    pub samples: u32,
    pub batch: u32,
    pub l2: String,
    pub command: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct CaseResult {
    pub family: Family,
    pub variant: String,
    pub func: String,
    pub levers: String,
    pub shape: Shape,
    pub bytes: f64,
    pub flops: f64,
    pub stats: Stats,
    pub stream_us: Option<f64>,
    /// CPU backend: the process's CPU time per call (all threads). Unlike wall time it does not
    /// grow while another process holds the core, so one-thread variants compare on a busy box.
    pub cpu_time: Option<Stats>,
    pub check: CheckResult,
    pub resources: Option<Resource>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub rotation_sets: usize,
}

impl CaseResult {
    pub fn gbps(&self) -> f64 {
        self.bytes / (self.stats.median * 1e3)
    }
    pub fn tflops(&self) -> f64 {
        self.flops / (self.stats.median * 1e6)
    }
    pub fn copy_pct(&self, env: &Env) -> Option<f64> {
        env.copy_gbps.map(|c| 100.0 * self.gbps() / c)
    }
}
